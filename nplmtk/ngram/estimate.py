"""Estimating back-off n-gram models from counts, step by step as SRILM's `ngram-count`
does (Ngram::estimate, Discount.cc), so that the ARPA files agree with SRILM's:

1. adjust counts: Kneser-Ney replaces the counts of every order below N by the number
   of distinct words that precede the n-gram (n-grams starting with `<s>` keep theirs);
2. discounts: modified Kneser-Ney D1, D2, D3+ per order from the counts-of-counts
   n1..n4 (Chen & Goodman 1998, eq. 26), or Witten-Bell;
3. initial probabilities per context: (c - D(c)) / total, plus for interpolated models
   gamma(context) * p_lower(w), gamma = (D1 N1 + D2 N2 + D3 N3+) / total;
4. back-off weights: bow(h) = (1 - sum p(w|h)) / (1 - sum p_lower(w|h)) over the
   words seen after h; left-over unigram mass goes to the unseen vocabulary words.

Probabilities are stored as float32 log10 values, as SRILM's LogP, and every lower-order
probability is read back from those stored values, so the arithmetic matches SRILM's.
"""
import math
import sys

import numpy as np

from ..errors import NplmError
from .backoff import BackoffModel, backoff_walk
from .counts import NgramCounts

LN10 = math.log(10)  # M_LN10
PROB_EPSILON = 3e-6  # SRILM's Prob_Epsilon
FALLBACK_DISCOUNTS = (0.5, 1.0, 1.5)  # KenLM's --discount_fallback defaults


def log10_to_prob(logp):
    """SRILM's LogPtoProb: exp(x ln 10) in double, 0 for -inf."""
    return np.exp(np.asarray(logp, dtype=np.float64) * LN10)


class ModifiedKneserNey:
    """Discounts D1, D2, D3+ of one order (Chen & Goodman 1998 eq. 26; SRILM ModKneserNey)."""
    adjusts_counts = True

    def __init__(self, counts, min_count=1, order=0, warn=None):
        n = [int(np.count_nonzero(counts == i)) for i in (1, 2, 3, 4)]
        self.counts_of_counts = n
        self.min_count = min_count
        self.fallback = False
        if min(n) > 0:
            y = n[0] / (n[0] + 2 * n[1])
            self.d = (1 - 2 * y * n[1] / n[0], 2 - 3 * y * n[2] / n[1], 3 - 4 * y * n[3] / n[2])
        else:
            self.d = (-1.0, -1.0, -1.0)
        if not all(0 < d <= i for i, d in enumerate(self.d, 1)):
            # Degenerate counts-of-counts (e.g. repeated text): fall back as KenLM does.
            self.fallback = True
            if warn:
                warn(f"order {order}: counts-of-counts n1..n4 = {n} give discounts out of range; "
                     f"using fallback discounts {' '.join(map(str, FALLBACK_DISCOUNTS))}")
            self.d = FALLBACK_DISCOUNTS

    def factor(self, count, total, observed):
        d1, d2, d3 = self.d
        c = count.astype(np.float64)
        discounted = np.where(c == 1, (c - d1), np.where(c == 2, c - d2, c - d3))
        with np.errstate(divide="ignore", invalid="ignore"):
            factor = np.where(c <= 0, 1.0, discounted / c)
        return np.where((c > 0) & (c < self.min_count), 0.0, factor)

    def lower_weight(self, total, observed, min2, min3):
        d1, d2, d3 = self.d
        with np.errstate(divide="ignore", invalid="ignore"):
            return (d1 * (observed - min2) + d2 * (min2 - min3) + d3 * min3) / total


class WittenBell:
    """SRILM's WittenBell: discount total/(total+types), lower weight types/(total+types)."""
    adjusts_counts = False

    def __init__(self, counts, min_count=1, order=0, warn=None):
        self.min_count = min_count

    def factor(self, count, total, observed):
        with np.errstate(divide="ignore", invalid="ignore"):
            factor = total / (total + observed)
        return np.where(count <= 0, 1.0, np.where(count < self.min_count, 0.0, factor))

    def lower_weight(self, total, observed, min2, min3):
        with np.errstate(divide="ignore", invalid="ignore"):
            return observed / (total + observed)


METHODS = {"kn": ModifiedKneserNey, "wb": WittenBell}


def _warn(message):
    print(f"nplm ngram-count: warning: {message}", file=sys.stderr)


def _full_unigrams(counts):
    """The same counts with a unigram row (maybe of count 0) for every vocabulary word."""
    vocab_size = len(counts.vocab)
    if len(counts.grams[0]) == vocab_size:
        return counts
    unigram = np.zeros(vocab_size, dtype=np.int64)
    unigram[counts.grams[0][:, 0]] = counts.counts[0]
    grams = [np.arange(vocab_size, dtype=np.int32)[:, None]] + counts.grams[1:]
    # Unigram rows are now the word ids themselves: higher keys change their prefix index.
    keys = [grams[0][:, 0].astype(np.int64)]
    for k, old in enumerate(counts.index.keys[1:], 2):
        prefix = old // vocab_size
        if k == 2:
            prefix = counts.grams[0][prefix, 0].astype(np.int64)
        keys.append(prefix * vocab_size + old % vocab_size)
    return NgramCounts(counts.vocab, grams, [unigram] + counts.counts[1:], keys)


def estimate(counts, method="kn", interpolate=True, min_counts=None, unk_is_word=True, warn=_warn,
             always_interpolate=False):
    """A BackoffModel from NgramCounts. `min_counts[k-1]` is SRILM's -gtkmin (default 1).
    `always_interpolate` skips SRILM's retry (below) in contexts that leave no mass for
    unseen words, as KenLM's lmplz does."""
    if method not in METHODS:
        raise NplmError(f"unknown discounting method '{method}'")
    counts = _full_unigrams(counts)
    vocab, index, order = counts.vocab, counts.index, counts.order
    grams = counts.grams
    min_counts = list(min_counts or []) + [1] * order

    def non_event(words):
        mask = words == vocab.bos
        if not unk_is_word:
            mask |= words == vocab.unk
        return mask

    vocab_size = len(vocab) - 1 - (0 if unk_is_word else 1)
    # suffix[k] locates the suffix (words 2..k+1) of each order-(k+1) n-gram in order k.
    suffix = [None] + [index.find(grams[k][:, 1:]) for k in range(1, order)]
    for k in range(1, order):
        if np.any(suffix[k] < 0):
            raise NplmError(f"counts are not closed under suffixes: a {k + 1}-gram's last {k} words have no count")

    # 1. Adjust counts (Kneser-Ney): continuation counts for every order below N.
    adjusted = [c.copy() for c in counts.counts]
    method_class = METHODS[method]
    if method_class.adjusts_counts:
        for k in range(order - 1):
            continuation = np.bincount(suffix[k + 1][counts.counts[k + 1] > 0], minlength=len(grams[k]))
            adjusted[k] = np.where(non_event(grams[k][:, 0]), counts.counts[k], continuation)

    # 2. Discounts per order from counts-of-counts (n-grams predicting real words).
    discounts = [method_class(adjusted[k][~non_event(grams[k][:, -1])], min_counts[k], k + 1, warn)
                 for k in range(order)]

    logp = [np.full(len(g), -np.inf, dtype=np.float32) for g in grams]
    present = [np.zeros(len(g), dtype=bool) for g in grams]
    node = [np.zeros(len(g), dtype=bool) for g in grams]
    bow = [np.zeros(len(g), dtype=np.float32) for g in grams]

    def walk(rows):
        return backoff_walk(index, logp, bow, node, rows, present)

    for k in range(order):
        g, c, disc = grams[k], adjusted[k], discounts[k]
        words = g[:, -1]
        if k == 0:
            group, num_groups = np.zeros(len(g), dtype=np.int64), 1
            skip_context = np.zeros(1, dtype=bool)
        else:
            group, num_groups = index.prefix_of(k + 1), len(grams[k - 1])
            contexts = grams[k - 1]
            skip_context = contexts[:, -1] == vocab.eos
            if not unk_is_word:
                skip_context |= np.any(contexts == vocab.unk, axis=1)
        eligible = ~skip_context[group] & ~non_event(words) & (c > 0)

        def per_group(weights):
            return np.bincount(group, weights=weights, minlength=num_groups)

        total = per_group(np.where(eligible, c, 0))
        observed = per_group(eligible)
        min2 = per_group(eligible & (c >= 2))
        min3 = per_group(eligible & (c >= 3))

        # 3. Lower-order probabilities: the stored suffix n-gram, else the back-off walk.
        if k == 0:
            # SRILM holds log10(1/|V|) in a float32 LogP before using it.
            lower = np.full(len(g), log10_to_prob(np.float32(-math.log10(vocab_size))))
        else:
            s = suffix[k]
            direct = present[k - 1][s]
            lower_logp = np.where(direct, logp[k - 1][s], -np.inf).astype(np.float32)
            need = eligible & ~direct
            if need.any():
                lower_logp[need] = walk(g[need][:, 1:])
            lower = log10_to_prob(lower_logp)

        interpolating = np.full(num_groups, bool(interpolate))
        denominator = total.copy()
        active = (total > 0) & ~skip_context
        while True:
            factor = disc.factor(c, denominator[group], observed[group])
            gamma = disc.lower_weight(denominator, observed, min2, min3)
            with np.errstate(divide="ignore", invalid="ignore"):
                prob = factor * c / denominator[group]
            prob = np.where(interpolating[group], prob + gamma[group] * lower, prob)
            counted = eligible & (factor != 0)
            total_prob = per_group(np.where(counted, prob, 0.0))
            # SRILM's retry: no mass left for unseen words -> stop interpolating, then
            # add one to the denominator.
            stuck = active & (total_prob > 1 - PROB_EPSILON) & (observed < vocab_size)
            if always_interpolate:
                stuck &= ~interpolating
            if not stuck.any():
                break
            denominator[stuck & ~interpolating] += 1
            interpolating[stuck] = False
        keep = eligible & (factor != 0) & active[group]
        with np.errstate(divide="ignore"):
            logp[k][keep] = np.log10(prob[keep]).astype(np.float32)
        present[k][keep] = True

        if k == 0:
            present[0][vocab.bos] = True  # <s>: probability zero, kept for its back-off weight
            _distribute_unigram_mass(logp[0], present[0], non_event(np.arange(len(vocab))))
            continue
        # Contexts with kept words get back-off nodes, and so does every suffix of them.
        node[k - 1][group[keep]] = True
        for j in range(k - 1, 0, -1):
            node[j - 1][suffix[j][node[j]]] = True
        # 4. Back-off weights of the order-k contexts.
        numerator = 1 - per_group(np.where(keep, log10_to_prob(logp[k]), 0.0))
        denominator_mass = 1 - per_group(np.where(keep, lower, 0.0))
        bow[k - 1] = _backoff_weights(numerator, denominator_mass, node[k - 1], logp[k], keep, group)

    _fixup_missing_contexts(index, grams, logp, bow, node, present, walk)
    return BackoffModel(vocab, [g[p] for g, p in zip(grams, present)],
                        [lp[p] for lp, p in zip(logp, present)],
                        [b[p] for b, p in zip(bow, present)],
                        [n[p] for n, p in zip(node, present)], index.subset(present))


def _distribute_unigram_mass(logp, present, non_event):
    """SRILM's distributeProb: the unigram mass left over goes to words without a
    probability (or to all words when every word has one)."""
    real = ~non_event
    numerator = 1 - log10_to_prob(logp[present & real]).sum()
    if numerator < PROB_EPSILON:
        numerator = 0.0
    zero = real & (~present | (logp == -np.inf))
    with np.errstate(divide="ignore"):
        if zero.any():
            logp[zero] = np.float32(math.log10(numerator / zero.sum()) if numerator > 0 else -np.inf)
        else:
            logp[real] = np.log10(log10_to_prob(logp[real]) + numerator / real.sum()).astype(np.float32)
    present[real] = True


def _backoff_weights(numerator, denominator, node, child_logp, child_keep, child_group):
    """SRILM's computeBOW for every context at once (float32 log10 weights)."""
    numerator = np.where(np.abs(numerator) < PROB_EPSILON, 0.0, numerator)
    denominator = np.where(np.abs(denominator) < PROB_EPSILON, 0.0, denominator)
    # No back-off mass left below but some here: scale the context's probabilities to 1.
    rescale = node & (denominator < PROB_EPSILON) & (numerator > PROB_EPSILON)
    if rescale.any():
        rows = child_keep & rescale[child_group]
        scale = -np.log10(1 - numerator[child_group[rows]])
        child_logp[rows] = (child_logp[rows].astype(np.float64) + scale).astype(np.float32)
        numerator[rescale] = 0.0
        denominator[rescale] = 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        weights = np.log10(numerator) - np.log10(denominator)
    weights = np.where((numerator < PROB_EPSILON) & (denominator < PROB_EPSILON), 0.0, weights)
    weights = np.where((numerator < 0) | ((denominator <= 0) & (numerator > PROB_EPSILON)), -np.inf, weights)
    return np.where(node, weights, 0.0).astype(np.float32)


def _fixup_missing_contexts(index, grams, logp, bow, node, present, walk):
    """SRILM's fixupProbs: a context without a probability of its own (possible with
    cutoffs), and each of its prefixes, gets its back-off probability, so that every
    context is also an n-gram of the model."""
    need = [n & ~p for n, p in zip(node, present)]
    for k in range(len(grams) - 1, 1, -1):
        prefix = index.prefix_of(k)[need[k - 1]]
        need[k - 2][prefix[~present[k - 2][prefix]]] = True
    for k in range(2, len(grams)):
        rows = need[k - 1]
        if rows.any():
            logp[k - 1][rows] = walk(grams[k - 1][rows])
            present[k - 1][rows] = True
