"""Estimating back-off n-gram models from counts, step by step as SRILM's `ngram-count`
does (Ngram::estimate, Discount.cc), so that the ARPA files agree with SRILM's. The
steps are the functions below, named as KenLM's builder names its stages:

1. `adjust_counts`: Kneser-Ney replaces the counts of every order below N by the number
   of distinct words that precede the n-gram (n-grams starting with `<s>` keep theirs);
2. `estimate_discounts`: modified Kneser-Ney D1, D2, D3+ per order from the
   counts-of-counts n1..n4 (Chen & Goodman 1998, eq. 26), or another method of
   discounts.py;
3. `initial_probabilities` per context: (c - D(c)) / total, plus for interpolated models
   gamma(context) * p_lower(w), gamma = (D1 N1 + D2 N2 + D3 N3+) / total;
4. `backoff_weights`: bow(h) = (1 - sum p(w|h)) / (1 - sum p_lower(w|h)) over the
   words seen after h; left-over unigram mass goes to the unseen vocabulary words
   (`distribute_unigram_mass`).

Probabilities are stored as float32 log10 values, as SRILM's LogP, and every lower-order
probability is read back from those stored values, so the arithmetic matches SRILM's.
That is why steps 3 and 4 run order by order: an order's probabilities read the back-off
weights of the orders below.
"""
import math
import warnings

import numpy as np

from .._ext.estimate_kernels import context_counts, context_sums, interpolated_probabilities
from ..errors import NplmError, NplmWarning, ParameterError
from .backoff import BackoffModel, backoff_walk
from .counts import NgramCounts
from .discounts import GT_MAX_COUNTS, METHODS, NEEDS_CONSTANT, PROB_EPSILON, OrderSettings
from .index import lookup

LN10 = math.log(10)  # M_LN10


def log10_to_prob(logp):
    """SRILM's LogPtoProb: exp(x ln 10) in double, 0 for -inf."""
    return np.exp(np.asarray(logp, dtype=np.float64) * LN10)


def _warn(message):
    warnings.warn(message, NplmWarning)


class Events:
    """The words a model predicts (SRILM's events): all but `<s>`, and but `<unk>` in a
    closed vocabulary."""

    def __init__(self, vocab, unk_is_word):
        self.vocab, self.unk_is_word = vocab, unk_is_word
        self.count = len(vocab) - 1 - (0 if unk_is_word else 1)

    def non_event(self, words):
        mask = words == self.vocab.bos
        if not self.unk_is_word:
            mask |= words == self.vocab.unk
        return mask


class _ContextsOfOrder:
    """The n-grams of one order above the unigrams (0-based `k`) grouped by context:
    `group[i]` is the row of n-gram i's first k words among the order-k n-grams.
    `skipped` contexts get no probabilities (SRILM: ending in `</s>`, or holding `<unk>`
    in a closed vocabulary); `eligible` n-grams are counted events in the others."""

    def __init__(self, counts, k, count, events):
        grams = counts.grams
        contexts = grams[k - 1]
        self.group, self.size = counts.index.prefix_of(k + 1), len(contexts)
        self.skipped = contexts[:, -1] == events.vocab.eos
        if not events.unk_is_word:
            self.skipped |= np.any(contexts == events.vocab.unk, axis=1)
        self.eligible = ~self.skipped[self.group] & ~events.non_event(grams[k][:, -1]) & (count > 0)


class _Tables:
    """The model as it is built, one entry per counted n-gram: float32 log10 probability
    and back-off weight, whether it is an n-gram of the model (`present`) and whether it
    is a context on the back-off path (`node`)."""

    def __init__(self, vocab, grams, index, logp, present, node, bow):
        self.vocab, self.grams, self.index = vocab, grams, index
        self.logp, self.present, self.node, self.bow = logp, present, node, bow

    @classmethod
    def empty(cls, counts):
        """Nothing estimated yet for the counted n-grams."""
        grams = counts.grams
        return cls(counts.vocab, grams, counts.index, [np.full(len(g), -np.inf, dtype=np.float32) for g in grams],
                   [np.zeros(len(g), dtype=bool) for g in grams], [np.zeros(len(g), dtype=bool) for g in grams],
                   [np.zeros(len(g), dtype=np.float32) for g in grams])

    @classmethod
    def of(cls, model):
        """A working copy of a BackoffModel, every n-gram present, to prune or renormalise."""
        node = [mask.copy() for mask in model.node]
        node[-1][:] = False  # the highest order is never a context
        return cls(model.vocab, model.grams, model.index, [np.array(v, dtype=np.float32) for v in model.logp],
                   [np.ones(len(g), dtype=bool) for g in model.grams], node,
                   [np.array(v, dtype=np.float32) for v in model.bow])

    @property
    def order(self):
        return len(self.grams)

    def backoff(self, rows):
        """log10 p(w | h) of rows (h..., w) by the back-off walk over what is stored so far."""
        return backoff_walk(self.index, self.logp, self.bow, self.node, rows, self.present)

    def model(self):
        kept = self.present
        if all(p.all() for p in kept):  # nothing to leave out: the tables as they are, no copies
            return BackoffModel(self.vocab, self.grams, self.logp, self.bow, self.node, self.index)
        return BackoffModel(self.vocab, [g[p] for g, p in zip(self.grams, kept)],
                            [lp[p] for lp, p in zip(self.logp, kept)],
                            [b[p] for b, p in zip(self.bow, kept)],
                            [n[p] for n, p in zip(self.node, kept)], self.index.subset(kept))


def estimate(counts, method="kn", interpolate=True, min_counts=None, unk_is_word=True, warn=None,
             always_interpolate=False, max_counts=None, constant=None, log=None):
    """A BackoffModel from NgramCounts. `method` is a key of METHODS; `min_counts[k-1]`
    is SRILM's -gtkmin (default 1), `max_counts[k-1]` its -gtkmax (Good-Turing; default
    GT_MAX_COUNTS), `constant` the D of "cd" or the delta of "add". `always_interpolate`
    skips SRILM's retry (in `initial_probabilities`) in contexts that leave no mass for
    unseen words, as KenLM's lmplz does. Warnings (fallback discounts) go to
    `warnings.warn` as NplmWarning, or to `warn(message)` when given; `log(line)`
    receives the lines SRILM's `ngram-count -debug 1` prints about the discounts."""
    if method not in METHODS:
        raise ParameterError(f"unknown discounting {{method}} '{method}'")
    if (constant is None) == (method in NEEDS_CONSTANT):
        raise ParameterError(f"{{constant}} goes with the methods {sorted(NEEDS_CONSTANT)} only, and they need it")
    discounting = METHODS[method]
    counts = _full_unigrams(counts)
    events = Events(counts.vocab, unk_is_word)
    suffix = suffix_positions(counts)
    adjusted = adjust_counts(counts, suffix, events) if discounting.adjusts_counts else counts.counts
    settings = _order_settings(counts.order, min_counts, max_counts, constant, events)
    discounts = estimate_discounts(discounting, counts, adjusted, settings, events, warn or _warn, log)
    tables = _Tables.empty(counts)
    tables.logp[0], tables.present[0] = unigram_probabilities(adjusted[0], discounts[0], interpolate,
                                                              always_interpolate, events)
    for k in range(1, counts.order):
        contexts = _ContextsOfOrder(counts, k, adjusted[k], events)
        lower = lower_order_probabilities(tables, k, suffix, contexts.eligible)
        keep, gamma = initial_probabilities(tables, k, adjusted[k], discounts[k], lower, contexts, interpolate,
                                            always_interpolate, events)
        # lmplz writes the interpolation weights themselves as back-off weights
        backoff_weights(tables, k, keep, lower, contexts, suffix, gamma if always_interpolate and interpolate else None)
    fixup_missing_contexts(tables)
    return tables.model()


def _order_settings(order, min_counts, max_counts, constant, events):
    min_counts = list(min_counts or []) + [1] * order
    defaults = [GT_MAX_COUNTS[0]] + [GT_MAX_COUNTS[1]] * (order - 1)
    max_counts = [d if m is None else m for d, m in zip(defaults, list(max_counts or []) + [None] * order)]
    for name, values in (("min_counts", min_counts), ("max_counts", max_counts)):
        if any(v < 0 for v in values):
            raise ParameterError(f"{{{name}}} must not be negative")
    return [OrderSettings(k + 1, min_counts[k], max_counts[k], constant, events.count, k + 1 == order)
            for k in range(order)]


def _full_unigrams(counts):
    """The same counts with a unigram row (maybe of count 0) for every vocabulary word."""
    vocab_size = len(counts.vocab)
    if len(counts.grams[0]) == vocab_size:
        return counts
    unigram = np.zeros(vocab_size, dtype=np.int64)
    unigram[counts.grams[0][:, 0]] = counts.counts[0]
    grams = [np.arange(vocab_size, dtype=np.int32)[:, None]] + counts.grams[1:]
    suffix = counts.suffix
    if suffix is not None and len(suffix) > 1:  # the 2-grams' suffixes are 1-gram rows: now their words
        suffix = [None, counts.grams[0][suffix[1], 0].astype(np.int64)] + suffix[2:]
    # Unigram rows are now the word ids themselves: higher keys change their prefix index.
    keys = [grams[0][:, 0].astype(np.int64)]
    for k, old in enumerate(counts.index.keys[1:], 2):
        prefix = old // vocab_size
        if k == 2:
            prefix = counts.grams[0][prefix, 0].astype(np.int64)
        keys.append(prefix * vocab_size + old % vocab_size)
    return NgramCounts(counts.vocab, grams, [unigram] + counts.counts[1:], keys, suffix)


def suffix_positions(counts):
    """suffix[k]: the row of each order-(k+1) n-gram's last k words among the order-k
    n-grams (None for unigrams): the counts' own when they have them."""
    if counts.suffix is not None:
        return counts.suffix
    index, size = counts.index, len(counts.vocab)
    suffix = [None]
    for k in range(1, counts.order):
        # the suffix of (w1..wk+1) is (the suffix of its prefix w1..wk) + wk+1: one lookup per order
        last = counts.grams[k][:, -1].astype(np.int64)
        inner = np.zeros(len(last), dtype=np.int64) if k == 1 else suffix[k - 1][index.prefix_of(k + 1)]
        suffix.append(lookup(index.keys[k - 1], np.where(inner < 0, -1, inner * size + last)))
    for k in range(1, counts.order):
        if np.any(suffix[k] < 0):
            raise NplmError(f"counts are not closed under suffixes: a {k + 1}-gram's last {k} words have no count")
    return suffix


def adjust_counts(counts, suffix, events):
    """Kneser-Ney's continuation counts for every order below N; n-grams starting with
    `<s>` (which nothing precedes) keep their counts."""
    adjusted = list(counts.counts)
    for k in range(counts.order - 1):
        # N1+(. w_1..w_k) = |{v : c(v w_1..w_k) > 0}|
        continuation = np.bincount(suffix[k + 1][counts.counts[k + 1] > 0], minlength=len(counts.grams[k]))
        adjusted[k] = np.where(events.non_event(counts.grams[k][:, 0]), counts.counts[k], continuation)
    return adjusted


def estimate_discounts(discounting, counts, adjusted, settings, events, warn, log=None):
    """One discount per order, from the counts of the n-grams that predict events."""
    return fitted_discounts(discounting, (count[~events.non_event(grams[:, -1])]
                                          for grams, count in zip(counts.grams, adjusted)), settings, warn, log)


def fitted_discounts(discounting, counted, settings, warn, log=None):
    """One discount per order, fitted on what `counted` gives of each order in turn (the
    counts of its n-grams that predict events, or their CountsOfCounts); `log(line)`
    receives SRILM's -debug 1 lines about each."""
    discounts = []
    for k, order_counts in enumerate(counted):
        discount = discounting(order_counts, settings[k], warn)
        if log is not None:
            for line in [f"using {discount.name} for {k + 1}-grams"] + discount.debug_lines:
                log(line)
        discounts.append(discount)
    return discounts


def lower_order_probabilities(tables, k, suffix, eligible):
    """p(w | h') of each order-(k+1) n-gram (h, w) above the unigrams, h' = h without its
    first word: the stored suffix n-gram, else the back-off walk."""
    rows = suffix[k]
    direct = tables.present[k - 1][rows]
    lower_logp = np.where(direct, tables.logp[k - 1][rows], -np.inf).astype(np.float32)
    need = eligible & ~direct
    if need.any():
        lower_logp[need] = tables.backoff(tables.grams[k][need][:, 1:])
    return log10_to_prob(lower_logp)


def initial_probabilities(tables, k, count, discount, lower, contexts, interpolate, always_interpolate, events):
    """Stores p(w | h) of the order-(k+1) n-grams kept in the model, and returns which
    those are and each context's interpolation weight gamma(h) (0 where it stopped
    interpolating)."""
    prob, keep, gamma = context_probabilities(count, lower, contexts.group, contexts.size, contexts.eligible,
                                              contexts.skipped, discount, interpolate, always_interpolate, events)
    with np.errstate(divide="ignore"):
        tables.logp[k][keep] = np.log10(prob[keep]).astype(np.float32)
    tables.present[k][keep] = True
    return keep, gamma


def context_probabilities(count, lower, group, size, eligible, skipped, discount, interpolate, always_interpolate,
                          events):
    """p(w | h) of n-grams grouped by context (`group[i]` the context of n-gram i among
    `size` contexts), which of them the model keeps, and each context's interpolation
    weight. SRILM's retry: a context whose seen words leave no mass for unseen ones stops
    interpolating, then has one added to its denominator. Each context's sums run over
    its n-grams in their order, so any run of whole contexts gives the same values."""

    count, group = np.asarray(count, dtype=np.int64), np.asarray(group, dtype=np.int64)
    total, observed, min2, min3 = context_counts(count, eligible.view(np.uint8), group, size)
    interpolating = np.full(size, bool(interpolate))
    denominator = total.copy()
    active = (total > 0) & ~skipped
    while True:
        if discount.no_discount:
            factor = np.ones(len(count))
        elif discount.reads_contexts:
            factor = discount.factor(count, denominator[group], observed[group])
        else:
            factor = discount.factor(count, None, None)
        gamma = discount.lower_weight(denominator, observed, min2, min3)
        # p(w | h) = (c(hw) - D(c(hw))) / c(h) [+ gamma(h) p(w | h')]
        counted = eligible & (factor != 0)
        prob, total_prob = interpolated_probabilities(factor, count, lower, group, denominator, gamma,
                                                      interpolating.view(np.uint8), counted.view(np.uint8))
        stuck = active & (total_prob > 1 - PROB_EPSILON) & (observed < events.count) & (not discount.no_discount)
        if always_interpolate:
            stuck &= ~interpolating
        if not stuck.any():
            break
        denominator[stuck & ~interpolating] += 1
        interpolating[stuck] = False
    keep = eligible & (factor != 0) & active[group]
    return prob, keep, np.where(interpolating, gamma, 0.0)


def kept_log10(prob, keep):
    """float32 log10 of the kept probabilities, -inf elsewhere."""
    logp = np.full(len(prob), -np.inf, dtype=np.float32)
    with np.errstate(divide="ignore"):
        logp[keep] = np.log10(prob[keep]).astype(np.float32)
    return logp


def unigram_probabilities(count, discount, interpolate, always_interpolate, events):
    """p(w) of every word from its (adjusted) count, interpolated with 1/|V|, and the mass
    left over handed out (distribute_unigram_mass): (float32 log10 p, which are present)."""
    size = len(count)
    # SRILM holds log10(1/|V|) in a float32 LogP before using it.
    lower = np.full(size, log10_to_prob(np.float32(-math.log10(events.count))))
    eligible = ~events.non_event(np.arange(size)) & (count > 0)
    prob, keep, gamma = context_probabilities(count, lower, np.zeros(size, dtype=np.int64), 1, eligible,
                                              np.zeros(1, dtype=bool), discount, interpolate, always_interpolate,
                                              events)
    logp, present = kept_log10(prob, keep), keep.copy()
    distribute_unigram_mass(logp, present, events, gamma if always_interpolate and interpolate else None)
    return logp, present


def distribute_unigram_mass(logp, present, events, lmplz_gamma=None):
    """SRILM's distributeProb: the unigram mass left over goes to words without a
    probability (or to all words when every word has one). `<s>` is a unigram of
    probability zero, kept for its back-off weight. With `lmplz_gamma` (the unigrams'
    interpolation weight) the words without a count get gamma / |V| directly, as lmplz
    gives them, not the float32 sum's left-over."""
    present[events.vocab.bos] = True
    real = ~events.non_event(np.arange(len(events.vocab)))
    if lmplz_gamma is not None:
        zero = real & ~present
        logp[zero] = np.log10(np.float32(lmplz_gamma[0]) * np.float32(1 / events.count))
        present[real] = True
        return
    numerator = 1 - log10_to_prob(logp[present & real]).sum()
    if numerator < PROB_EPSILON:
        numerator = 0.0
    zero = real & (~present | (logp == -np.inf))
    with np.errstate(divide="ignore"):
        if zero.any():
            # p(w) = (1 - sum of the unigram probabilities) / |words without one|
            logp[zero] = np.float32(math.log10(numerator / zero.sum()) if numerator > 0 else -np.inf)
        else:
            logp[real] = np.log10(log10_to_prob(logp[real]) + numerator / real.sum()).astype(np.float32)
    present[real] = True


def backoff_weights(tables, k, keep, lower, contexts, suffix, lmplz_gamma=None):
    """The back-off weights of the order-k contexts, once their order-(k+1) n-grams have
    probabilities (`keep` marks those kept, `lower` their p(w | h')); with `lmplz_gamma`
    the contexts' interpolation weights, as lmplz writes them (float32, 1 where none)."""
    # Contexts with kept words get back-off nodes, and so does every suffix of them.
    node = tables.node
    node[k - 1][contexts.group[keep]] = True
    for j in range(k - 1, 0, -1):
        node[j - 1][suffix[j][node[j]]] = True
    if lmplz_gamma is not None:
        tables.bow[k - 1] = lmplz_bows(lmplz_gamma, node[k - 1])
        return
    tables.bow[k - 1] = context_bows(tables.logp[k], keep, lower, contexts.group, node[k - 1])


def lmplz_bows(gamma, node):
    """The back-off weights lmplz writes: the contexts' interpolation weights `gamma`
    (float32 log10; 0 where a context is not a node or has none)."""
    usable = node & np.isfinite(gamma) & (gamma > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(usable, np.log10(gamma.astype(np.float32)), 0.0).astype(np.float32)


def context_bows(child_logp, keep, lower, group, node):
    """The back-off weights of contexts (`node` marks those with kept n-grams) from their
    n-grams' stored probabilities (`child_logp`, rescaled in place where SRILM rescales)
    and lower-order probabilities, n-grams grouped by context as in
    `context_probabilities`."""
    # bow(h) = (1 - sum_{w seen after h} p(w | h)) / (1 - sum_{w seen after h} p(w | h'))
    numerator = 1 - context_sums(log10_to_prob(child_logp), keep.view(np.uint8), group, len(node))
    denominator = 1 - context_sums(lower, keep.view(np.uint8), group, len(node))
    return _compute_bow(numerator, denominator, node, child_logp, keep, group)


def _compute_bow(numerator, denominator, node, child_logp, child_keep, child_group):
    """SRILM's computeBOW for every context at once (float32 log10 weights): -inf where
    the weight cannot be computed."""
    usable = _bow_terms(numerator, denominator, node, child_logp, child_keep, child_group)
    with np.errstate(divide="ignore", invalid="ignore"):
        weights = np.log10(numerator) - np.log10(denominator)
    weights = np.where((numerator < PROB_EPSILON) & (denominator < PROB_EPSILON), 0.0, weights)
    weights = np.where(usable, weights, -np.inf)
    return np.where(node, weights, 0.0).astype(np.float32)


def _bow_terms(numerator, denominator, node, child_logp, child_keep, child_group):
    """The first part of SRILM's computeBOW, on the numerators 1 - sum p(w | h) and the
    denominators 1 - sum p(w | h') of the contexts (float64, changed in place): rounding
    errors to 0; where nothing is left below but some mass here, the context's kept
    probabilities (`child_logp`, in place) scaled to sum to 1. Returns where a weight can
    be computed."""
    numerator[np.abs(numerator) < PROB_EPSILON] = 0.0
    denominator[np.abs(denominator) < PROB_EPSILON] = 0.0
    rescale = node & (denominator < PROB_EPSILON) & (numerator > PROB_EPSILON)
    if rescale.any():
        rows = child_keep & rescale[child_group]
        scale = -np.log10(1 - numerator[child_group[rows]])
        child_logp[rows] = (child_logp[rows].astype(np.float64) + scale).astype(np.float32)
        numerator[rescale] = 0.0
        denominator[rescale] = 0.0
    usable = ~((numerator < 0) | ((denominator <= 0) & (numerator > PROB_EPSILON)))
    empty = (denominator <= 0) & usable  # nothing left on either side: weight 1
    numerator[empty] = 0.0
    denominator[empty] = 0.0
    return usable


def fixup_missing_contexts(tables):
    """SRILM's fixupProbs: a context without a probability of its own (possible with
    cutoffs), and each of its prefixes, gets its back-off probability, so that every
    context is also an n-gram of the model."""
    grams, present = tables.grams, tables.present
    need = [n & ~p for n, p in zip(tables.node, present)]
    for k in range(len(grams) - 1, 1, -1):
        prefix = tables.index.prefix_of(k)[need[k - 1]]
        need[k - 2][prefix[~present[k - 2][prefix]]] = True
    for k in range(2, len(grams)):
        rows = need[k - 1]
        if rows.any():
            tables.logp[k - 1][rows] = tables.backoff(grams[k - 1][rows])
            present[k - 1][rows] = True


def renormalise(model):
    """SRILM's `ngram -renorm` (recomputeBOWs): the back-off weight of every context
    recomputed from the model's own probabilities (see `_recompute_bows`)."""
    tables = _Tables.of(model)
    _recompute_bows(tables)
    return tables.model()


def _recompute_bows(tables):
    """The back-off weights of the contexts (`node`) over the `present` n-grams, into
    tables.bow, order by order from the shortest context (the longer ones back off
    through them); a context with no mass left below scales its probabilities to sum to
    1, and left-over unigram mass goes to the words of probability 0 (to every word when
    there are none), as SRILM's computeBOWs and distributeProb do."""
    logp, node, present = tables.logp, tables.node, tables.present
    tables.bow = [np.zeros(len(grams), dtype=np.float32) for grams in tables.grams]
    unigram, words = logp[0], tables.grams[0][:, 0]
    leftover = 1 - log10_to_prob(np.where(present[0], unigram, -np.inf)).sum()
    if leftover > PROB_EPSILON:
        events = present[0] & (words != tables.vocab.bos)
        zero = events & np.isneginf(unigram)
        if zero.any():
            unigram[zero] = np.float32(math.log10(leftover / zero.sum()))
        else:
            unigram[events] = np.log10(log10_to_prob(unigram[events]) + leftover / events.sum()).astype(np.float32)
    for k in range(1, tables.order):
        group = tables.index.prefix_of(k + 1)
        lower = log10_to_prob(tables.backoff(tables.grams[k][:, 1:]))
        size = len(tables.grams[k - 1])
        numerator = 1 - context_sums(log10_to_prob(logp[k]), present[k].view(np.uint8), group, size)
        denominator = 1 - context_sums(lower, present[k].view(np.uint8), group, size)
        tables.bow[k - 1] = _compute_bow(numerator, denominator, node[k - 1], logp[k], present[k], group)


def prune(model, threshold, min_order=2):
    """SRILM's `-prune` (Stolcke 1998, Ngram::pruneProbs): from the highest order down,
    each n-gram whose removal would raise the model's own perplexity by less than
    `threshold` (relatively) is removed, the context's probability P(h) taken from the
    model itself; an n-gram that is a context of a longer one stays; then the back-off
    weights are recomputed. Orders below `min_order` are kept whole."""
    tables = _Tables.of(model)
    logp, present, node = tables.logp, tables.present, tables.node
    history = _context_log10probs(model)
    for i in range(model.order - 1, max(min_order - 1, 1) - 1, -1):  # contexts of i words, (i+1)-grams
        group, size = model.index.prefix_of(i + 1), len(model.grams[i - 1])
        backoff = tables.backoff(model.grams[i][:, 1:])
        pruned, usable = prune_contexts(logp[i], backoff, group, size, node[i - 1], node[i], model.bow[i - 1],
                                        history[i - 1], threshold)
        present[i] &= ~pruned
        node[i - 1] &= ~(usable & _contexts_left_empty(tables, i, group))
    _recompute_bows(tables)
    return tables.model()


def prune_contexts(logp, backoff, group, size, node, child_node, bow, history, threshold):
    """`prune`'s test of n-grams grouped by context (`group[i]` the context of n-gram i
    among `size`; any run of whole contexts gives the same): their float32 log10
    probabilities (`logp`, rescaled in place where computeBOW rescales) and back-off
    estimates (`backoff`), which are contexts themselves (`child_node`: kept), and the
    contexts' node flags, back-off weights and log10 P(h) (`history`). Returns the n-grams
    pruned and the contexts whose weight could be computed."""
    prob = log10_to_prob(logp)
    numerator = 1 - context_sums(prob, None, group, size)
    denominator = 1 - context_sums(log10_to_prob(backoff), None, group, size)
    usable = _bow_terms(numerator, denominator, node, logp, np.ones(len(logp), dtype=bool), group)
    with np.errstate(divide="ignore", invalid="ignore"):
        new_bow = (np.log10(numerator[group] + prob) - np.log10(denominator[group] + log10_to_prob(backoff))
                   ).astype(np.float32)
        delta_logp = (backoff + new_bow) - logp  # float32, as SRILM's LogP
        delta_entropy = -log10_to_prob(history[group]) * (
            prob * delta_logp.astype(np.float64) + numerator[group] * (new_bow - bow[group]).astype(np.float64))
        perplexity_change = log10_to_prob(delta_entropy) - 1.0
    return usable[group] & (threshold > 0) & (perplexity_change < threshold) & ~child_node, usable


def _context_log10probs(model):
    """log10 P(h) of every n-gram h of orders 1 .. N-1 as SRILM's contextProb: the chain of
    the model's own conditional probabilities, </s>'s standing in for a leading <s>, a
    zero-probability <s> skipped; accumulated in float32 as its LogP."""
    bos, eos = model.vocab.bos, model.vocab.eos
    out = []
    for k in range(1, model.order):
        grams = model.grams[k - 1]
        total = np.zeros(len(grams), dtype=np.float32)
        for j in range(k):
            rows = np.ascontiguousarray(grams[:, :j + 1])
            if j == 0:
                rows = np.where(rows == bos, eos, rows).astype(np.int32)
            score = model.score_rows(rows).astype(np.float32)
            skip = np.isneginf(score) & (rows[:, -1] == bos)
            total = np.where(skip, total, total + score).astype(np.float32)
        out.append(total)
    return out


def prune_low_probs(model, min_order=2):
    """SRILM's `-prune-lowprobs` (Ngram::pruneLowProbs): n-grams whose probability is below
    their back-off estimate are removed, from order `min_order` up, and the weights
    recomputed, until no more go; then every context gets a probability back (fixupProbs)."""
    tables = _Tables.of(model)
    logp, present, node = tables.logp, tables.present, tables.node
    while True:
        removed = False
        for i in range(max(min_order - 1, 1), model.order):  # contexts of i words, (i+1)-grams
            group = model.index.prefix_of(i + 1)
            backoff = tables.backoff(model.grams[i][:, 1:])
            low = present[i] & node[i - 1][group] & ((backoff + tables.bow[i - 1][group]) > logp[i])
            present[i] &= ~low
            removed = removed or bool(low.any())
            node[i - 1] &= ~_contexts_left_empty(tables, i, group)
        _recompute_bows(tables)
        if not removed:
            break
    fixup_missing_contexts(tables)
    return tables.model()


def _contexts_left_empty(tables, i, group):
    """The contexts of i words with no n-gram left and no longer context behind them
    (SRILM removes their back-off nodes)."""
    size = len(tables.grams[i - 1])
    left = np.bincount(group, weights=tables.present[i], minlength=size) > 0
    extended = np.zeros(size, dtype=bool)
    if i + 1 < tables.order:
        suffix = tables.index.find(tables.grams[i][tables.node[i]][:, 1:])
        extended[suffix[suffix >= 0]] = True
    return ~left & ~extended
