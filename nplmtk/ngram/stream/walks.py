"""The back-off walk out of core, for estimates with cutoffs: an n-gram whose
suffix was cut gets its lower-order probability by SRILM's walk (backoff.backoff_walk:
the longest n-gram of the model ending the row, plus the weights of the longer contexts),
carried from order to order as the walk's two float32 sums (`WALK`), each added in the
walk's own order, so the values are the in-memory estimate's to the bit. After the
estimate, as estimate.py does at the end: every suffix of a context becomes a context
(`close_contexts`), and contexts left without a probability get their walk's
(`fix_missing_contexts`, SRILM's fixupProbs).

The functions take a StreamEstimate and work on its files: `node{j}`, `present{j}`,
`logp{j}`, `bow{j}`, `prefix{j}`, `suffix{j}` and `walk{j}`, rows in lexicographic order."""
import numpy as np

from ..row_files import row_bytes
from .files import BOW, LOGP_FILE, NEED, PREFIX, PRESENT, REACH, WALK, WANTED


def backoff_walks(logp, present, suffix_walk, bow):
    """The back-off walks (`WALK`) of rows: (logp, 0) where the row is in the model
    (`present`), else its suffix's walk (`suffix_walk`; None for unigrams: nothing below
    them) plus its context's weight (`bow`, 0 for a context that is not a node: the walk
    stops there)."""
    values = np.empty(len(logp), dtype=WALK)
    if suffix_walk is None:
        values["result"] = np.where(present, logp, -np.inf)
        values["weight"] = 0
    else:
        values["result"] = np.where(present, logp, suffix_walk["result"])
        values["weight"] = np.where(present, np.float32(0), suffix_walk["weight"] + bow)
    return values


def close_contexts(estimate):
    """Every suffix of a context is a context (SRILM keeps contexts in a trie of their
    reversed words): `node{j-1}` marks the suffixes of `node{j}`'s rows, from the
    highest order down. A context marked here has no n-gram of the model after it, so
    its weight stays 0 (it was 0 in every walk before too)."""
    for j in range(estimate.order - 1, 1, -1):
        estimate.mark_rows("node", j, "suffix", "node")


def fix_missing_contexts(estimate, walks_through=0):
    """SRILM's fixupProbs (estimate.fixup_missing_contexts): a context without a
    probability (`need{j}`), and each prefix of one without a probability, gets its
    back-off walk's, order by order upward, each order's walks (`final_walk{j}`) seeing
    the fixed rows below, up to the highest order fixed, or to `walks_through` (the walks
    of the complete model, for pruning). Orders below the lowest fixed keep the walks of
    the estimate (`walk{j}`)."""
    needed = {j: _missing_contexts(estimate, j) for j in range(estimate.order - 1, 1, -1)}
    orders = [j for j, count in needed.items() if count]
    source, last = "walk", max(orders + [walks_through]) if orders else 0
    for j in range(min(orders, default=estimate.order), last + 1):
        estimate.suffix_walks("reach", j, source)
        outs = {name: estimate.files.writer(name, j) for name in ("fixed_logp", "fixed_present", "fixed_walk")}
        rows = estimate.pass_rows(row_bytes(j, PREFIX, BOW, REACH, LOGP_FILE, PRESENT, NEED, WALK, WALK))
        for start, stop in estimate.chunks(j, rows):
            prefix = estimate.files.read("prefix", j, start, stop)
            bow = estimate.files.read("bow", j - 1, int(prefix[0]), int(prefix[-1]) + 1)[prefix - prefix[0]]
            reach = estimate.files.read("reach", j, start, stop)
            logp = estimate.files.read("logp", j, start, stop)
            present = estimate.files.read("present", j, start, stop)
            need = estimate.files.read("need", j, start, stop)
            row_walks = backoff_walks(logp, present, reach, bow)
            logp[need] = row_walks["result"][need] + row_walks["weight"][need]
            present |= need
            for name, values in (("fixed_logp", logp), ("fixed_present", present),
                                 ("fixed_walk", backoff_walks(logp, present, reach, bow))):
                outs[name].append(values)
        for out in outs.values():
            out.close()
        for name in ("logp", "present"):
            estimate.files.rename(f"fixed_{name}", j, name)
        estimate.files.remove(("reach", j), ("final_walk", j - 1))
        estimate.files.rename("fixed_walk", j, "final_walk")
        source = "final_walk"
    if orders:
        _walk_contexts(estimate)
    estimate.files.remove(*(("need", k) for k in range(1, estimate.order + 1)))


def _walk_contexts(estimate):
    """`context{j}`: the contexts the back-off walk may pass once contexts are fixed up
    (backoff.context_nodes: the rows with weights, `node{j}`, the prefixes of the
    fixed rows, and every suffix of those), from the highest order down."""
    for j in range(estimate.order - 1, 0, -1):
        estimate.files.copy("node", j, "context")
        if j < estimate.order - 1:
            estimate.mark_rows("context", j + 1, "prefix", "need")
            estimate.mark_rows("context", j + 1, "suffix", "context")


def _missing_contexts(estimate, j):
    """`need{j}`: the order-j contexts without a probability, and the prefixes without
    one of `need{j+1}`'s rows (called from the highest order down); how many there are."""
    files, missing = estimate.files, 0
    files.copy("node", j, "wanted")
    if j + 1 < estimate.order:
        estimate.mark_rows("wanted", j + 1, "prefix", "need")
    with files.writer("need", j) as out:
        for start, stop in estimate.chunks(j, estimate.rows(row_bytes(j, WANTED, PRESENT, NEED))):
            need = files.read("wanted", j, start, stop) & ~files.read("present", j, start, stop)
            missing += int(need.sum())
            out.append(need)
    files.remove(("wanted", j))
    return missing
