"""Interpolation weights per context-frequency bin, shared by the deleted-interpolation
trigram and by mixtures of models (Bengio et al. 2003, sec. 2 and 4.1).

A bin is q = ceil(-ln((1 + freq(w-2, w-1)) / T)), the frequency of the two words before
the predicted one in a training text of T tokens; each bin has its own weights, fitted by
EM on held-out text.
"""
import math

import numpy as np

from .index import lookup


def word_pair_keys(first, second, vocab_size):
    """One int64 key per word pair, first * |V| + second; -1 where a word is missing (< 0)."""
    first, second = np.asarray(first, dtype=np.int64), np.asarray(second, dtype=np.int64)
    return np.where((first >= 0) & (second >= 0), first * vocab_size + second, -1)


def count_word_pairs(vocab_size, *pair_lists):
    """The distinct word pairs of several (n, 2) arrays of ids, as sorted keys, and how
    often each array holds each pair. Pairs with a missing word are not counted."""
    keys = [word_pair_keys(pairs[:, 0], pairs[:, 1], vocab_size) for pairs in pair_lists]
    distinct, inverse = np.unique(np.concatenate(keys), return_inverse=True)
    missing = int(np.count_nonzero(distinct < 0))  # the key -1, sorted first
    ends = np.cumsum([len(k) for k in keys])
    counts = [np.bincount(part, minlength=len(distinct))[missing:]
              for part in np.split(inverse.reshape(-1), ends[:-1])]
    return distinct[missing:], counts


def find_contexts(context_keys, context_counts, windows, vocab_size):
    """Each window's two-word context (its first two ids): its position among the sorted
    `context_keys` (-1 if unseen) and its count in `context_counts` (0 if unseen)."""
    position = lookup(context_keys, word_pair_keys(windows[:, 0], windows[:, 1], vocab_size))
    return position, np.where(position >= 0, context_counts[np.maximum(position, 0)], 0)


def frequency_bins(context_count, total):
    """q = ceil(-ln((1 + freq) / T)), clipped to 0..ceil(ln T)."""
    last = int(math.ceil(math.log(total)))
    q = np.ceil(-np.log((1.0 + context_count) / total)).astype(np.int64)
    return np.clip(q, 0, last)


def fit_bin_weights(prob, bins, num_bins, iterations, tolerance=None, log=None, precision=None):
    """EM for interpolation weights, one set per bin, from uniform weights.

    `prob` (components, tokens): each component's probability of each held-out token;
    `bins` the token's bin. Tokens that no component can score are left out; a bin
    without tokens takes the weights of all tokens pooled. Runs `iterations` times, or
    stops earlier when an iteration gains less than `tolerance` nats per token. `log`,
    if given, is called as log(iteration, weights, log-likelihood, tokens) with each
    iteration's starting weights. Returns the weights (bins, components) and the held-out
    log-likelihood of each iteration's starting weights, then of the final ones. With
    `precision`, it also stops once no weight moved by more than that (SRILM's
    compute-best-mix and its -precision, 0.001 there).
    """
    num_components = len(prob)
    scored = prob.sum(axis=0) > 0
    prob, bins = prob[:, scored], bins[scored]
    weights = np.full((num_bins, num_components), 1.0 / num_components)
    tokens_in_bin = np.bincount(bins, minlength=num_bins)
    history = []
    for iteration in range(1, iterations + 1):
        joint = prob * weights[bins].T
        total = joint.sum(axis=0)
        history.append(float(np.log(total).sum()))
        if log:
            log(iteration, weights, history[-1], len(total))
        # E step: the posterior of each component per token; M step, per bin b:
        # lambda_b,i = sum_{t in b} posterior_t,i / n_b
        posterior = joint / total
        mass = np.stack([np.bincount(bins, weights=row, minlength=num_bins) for row in posterior], axis=1)
        pooled = posterior.sum(axis=1) / len(total)
        previous = weights
        weights = np.where(tokens_in_bin[:, None] > 0, mass / np.maximum(tokens_in_bin, 1)[:, None], pooled)
        if tolerance is not None and len(history) > 1 and history[-1] - history[-2] < tolerance * len(total):
            break
        if precision is not None and np.abs(weights - previous).max() <= precision:
            break
    history.append(float(np.log((prob * weights[bins].T).sum(axis=0)).sum()))
    return weights, history
