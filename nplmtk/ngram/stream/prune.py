"""SRILM's -prune (estimate.prune: Stolcke 1998, Ngram::pruneProbs) out of core, on a
StreamEstimate's files once its model is complete (contexts fixed up), before the model's
rows are written: the same passes as the in-memory prune, each over one order's rows in
their lexicographic order with the values of another order found a window at a time.

- `history{k}`: log10 P(h) of every context, the chain of the model's probabilities along
  its prefixes (estimate._context_log10probs: every prefix of a model n-gram is one).
- From the highest order down, the n-grams' back-off estimates are their suffixes' walks
  in the complete model, and estimate.prune_contexts decides, a run of whole contexts at
  a time, which go; a context left with no n-gram and no longer context behind it stops
  being a node.
- The unigram mass left over is handed out and every back-off weight recomputed, from
  the shortest contexts up (estimate._recompute_bows), the walks now in the pruned model.

The walk-context flags (`context{k}`, or `node{k}` when no context was fixed up) become
the `node{k}` of the pruned model, as the in-memory prune makes them its back-off weights'."""
import numpy as np

from ..discounts import PROB_EPSILON
from ..estimate import context_bows, log10_to_prob, prune_contexts
from ..row_files import row_bytes
from .files import BEHIND, EMPTIED, HISTORY, LOGP_FILE, NODE, PREFIX, WORD
from .rows import last_words
from .walks import backoff_walks


def prune_on_disk(estimate, threshold, min_order=2):
    """Prunes the model in `estimate`'s files (present, logp, bow, node) as estimate.prune
    prunes a BackoffModel; orders below `min_order` are kept whole."""
    files, order = estimate.files, estimate.order
    for k in range(1, order):  # the walk's contexts are the flags pruned (and the model's at the end)
        if files.exists("context", k):
            files.rename("context", k, "node")
    _histories(estimate)
    for k in range(order, max(min_order, 2) - 1, -1):
        _prune_order(estimate, k, threshold)
    _hand_out_unigram_mass(estimate)
    _recompute_bows(estimate)
    files.remove(*((name, k) for k in range(1, order + 1) for name in ("history", "reach", "emptied")))


def _histories(estimate):
    """`history{k}`: log10 P(h) of the order-k rows, in float32 as SRILM's contextProb sums
    it: a leading `<s>` scored as `</s>`, a zero-probability `<s>` inside skipped."""
    files, vocab = estimate.files, estimate.vocab
    logp = files.read("logp", 1, 0, estimate.sizes[0])
    words = np.arange(estimate.sizes[0])
    files.write("history", 1, logp[np.where(words == vocab.bos, vocab.eos, words)])
    for k in range(2, estimate.order):
        with files.writer("history", k) as out:
            rows = estimate.rows(row_bytes(k, WORD, PREFIX, LOGP_FILE, HISTORY, HISTORY))
            for start, stop in estimate.chunks(k, rows):
                prefix = files.read("prefix", k, start, stop)
                first = int(prefix[0])
                below = files.read("history", k - 1, first, int(prefix[-1]) + 1)[prefix - first]
                logp = files.read("logp", k, start, stop)
                skip = np.isneginf(logp) & (last_words(estimate, k, start, stop) == vocab.bos)
                out.append(np.where(skip, below, below + logp).astype(np.float32))


def _complete_walks(estimate, k):
    """The file of the order-k walks in the complete model (before pruning)."""
    return "final_walk" if estimate.files.exists("final_walk", k) else "walk"


def _prune_order(estimate, k, threshold):
    """The k-grams pruned (`present{k}`, `logp{k}` rescaled where computeBOW rescales),
    then the contexts of k-1 words left empty taken out of `node{k-1}`."""
    files = estimate.files
    estimate.suffix_walks("reach", k, _complete_walks(estimate, k - 1))
    estimate.context_pass(k, lambda start, stop: _pruned_run(estimate, k, threshold, start, stop),
                          ("pruned_present", "pruned_logp"), {"emptied": True})  # contexts without n-grams
    for name in ("present", "logp"):
        files.rename(f"pruned_{name}", k, name)
    _keep_contexts_behind(estimate, k)


def _pruned_run(estimate, k, threshold, start, stop):
    """Rows start..stop-1 of order k (whole contexts) through estimate.prune_contexts: (the
    first context's row, the rows' logp and presence, which contexts are left empty)."""
    files = estimate.files
    prefix = files.read("prefix", k, start, stop)
    first_context, size = int(prefix[0]), int(prefix[-1] - prefix[0]) + 1
    present = files.read("present", k, start, stop)
    logp = files.read("logp", k, start, stop)
    reach = files.read("reach", k, start, stop)
    rows = np.flatnonzero(present)  # the model's n-grams
    group = prefix[rows] - first_context
    child_node = (files.read("node", k, start, stop)[rows] if k < estimate.order
                  else np.zeros(len(rows), dtype=bool))
    contexts = {name: files.read(name, k - 1, first_context, first_context + size)
                for name in ("node", "bow", "history")}
    model_logp = logp[rows]
    pruned, usable = prune_contexts(model_logp, (reach["result"] + reach["weight"])[rows], group, size,
                                    contexts["node"], child_node, contexts["bow"], contexts["history"], threshold)
    logp[rows] = model_logp
    present[rows[pruned]] = False
    left = np.bincount(group[~pruned], minlength=size) > 0
    return first_context, {"pruned_logp": logp, "pruned_present": present}, {"emptied": usable & ~left}


def _keep_contexts_behind(estimate, k):
    """`node{k-1}` without the contexts left empty (`emptied{k-1}`) that are not the suffix
    of a context of k words either (SRILM removes their back-off nodes)."""
    files, size = estimate.files, estimate.sizes[k - 2]
    with files.writer("behind", k - 1) as out:
        out.append(np.zeros(size, dtype=bool))
    if k < estimate.order:
        estimate.mark_rows("behind", k, "suffix", "node")
    with files.writer("pruned_node", k - 1) as out:
        for start, stop in estimate.chunks(k - 1, estimate.rows(row_bytes(k - 1, NODE, EMPTIED, BEHIND))):
            node = files.read("node", k - 1, start, stop)
            out.append(node & ~(files.read("emptied", k - 1, start, stop)
                                & ~files.read("behind", k - 1, start, stop)))
    files.rename("pruned_node", k - 1, "node")
    files.remove(("behind", k - 1))


def _hand_out_unigram_mass(estimate):
    """The unigram mass left over goes to the words of probability 0, or to every word
    (estimate._recompute_bows)."""
    files, size = estimate.files, estimate.sizes[0]
    logp, present = files.read("logp", 1, 0, size), files.read("present", 1, 0, size)
    leftover = 1 - log10_to_prob(logp[present]).sum()
    if leftover > PROB_EPSILON:
        events = present & (np.arange(size) != estimate.vocab.bos)
        zero = events & np.isneginf(logp)
        if zero.any():
            logp[zero] = np.float32(np.log10(leftover / zero.sum()))
        else:
            logp[events] = np.log10(log10_to_prob(logp[events]) + leftover / events.sum()).astype(np.float32)
        files.write("logp", 1, logp)


def _recompute_bows(estimate):
    """Every context's back-off weight from the pruned model's probabilities, from the
    shortest contexts up, each order's walks (`pwalk{k}`) in the pruned model."""
    files, order = estimate.files, estimate.order
    size = estimate.sizes[0]
    files.write("pwalk", 1, backoff_walks(files.read("logp", 1, 0, size),
                                          files.read("present", 1, 0, size), None, None))
    for k in range(2, order + 1):
        estimate.suffix_walks("preach", k, "pwalk")
        estimate.context_pass(k, lambda start, stop, k=k: _weights_run(estimate, k, start, stop),
                              ("pruned_logp",) + (("pwalk",) if k < order else ()), {"pruned_bow": 0})
        files.rename("pruned_logp", k, "logp")
        files.rename("pruned_bow", k - 1, "bow")
        files.remove(("preach", k), ("pwalk", k - 1))


def _weights_run(estimate, k, start, stop):
    """The back-off weights of the contexts of order-k rows start..stop-1 (whole contexts):
    (the first context's row, the rows' logp, rescaled where computeBOW rescales, and
    their walks for the order above, below the highest, the contexts' weights)."""
    files = estimate.files
    prefix = files.read("prefix", k, start, stop)
    first_context, size = int(prefix[0]), int(prefix[-1] - prefix[0]) + 1
    group = prefix - first_context
    present = files.read("present", k, start, stop)
    logp = files.read("logp", k, start, stop)
    reach = files.read("preach", k, start, stop)
    lower = log10_to_prob(np.where(present, reach["result"] + reach["weight"], -np.inf))
    node = files.read("node", k - 1, first_context, first_context + size)
    bow = context_bows(logp, present, lower, group, node)
    rows = {"pruned_logp": logp}
    if k < estimate.order:
        rows["pwalk"] = backoff_walks(logp, present, reach, bow[group])
    return first_context, rows, {"pruned_bow": bow}
