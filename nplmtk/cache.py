"""Caches: models of the text scored so far, mixed into a model's probabilities.

SRILM's unigram cache (`ngram -cache N -cache-lambda L`, CacheLM.cc): p(w) is w's share
of the last N words scored before it (`</s>` included, as every predicted token is; the
very first word 0), and the scored model becomes the mixture (1 - L) p + L p_cache.
`<unk>` enters the cache only when it is a word of the model (SRILM's -unk).

The continuous cache of Grave, Joulin & Usunier 2017 ("Improving neural language models
with a continuous cache", eq. 2-3) for recurrent networks: each token t remembers the
top-layer state h_t that predicted it; with the last W of them,
    p_cache(w | h_t) = sum_{i: w_i = w} exp(theta h_t . h_i) / sum_i exp(theta h_t . h_i)
and p = (1 - L) p_model + L p_cache (a word the network cannot score stays out)."""
import numpy as np

import math

from .lm import LN10, LanguageModel
from .mixture import Mixture


class UnigramCache(LanguageModel):
    """The cache as a model over `vocab`: it scores a text in order, so the tokens before
    each one are those of the same corpus."""

    kind = "cache"

    def __init__(self, vocab, length, unk_is_word):
        self.vocab, self.length, self.unk_is_word = vocab, int(length), unk_is_word

    def probabilities(self, corpus):
        """Each predicted token's cache probability, and whether it enters the cache."""
        tokens = np.asarray(corpus.targets(), dtype=np.int64)
        cached = np.ones(len(tokens), dtype=bool) if self.unk_is_word else tokens != self.vocab.unk
        history = tokens[cached]  # the tokens that enter the cache, in order
        before = np.cumsum(cached) - cached  # how many entered before each token
        span = len(history) + 1
        # occurrences of a word among the first k cache entries: ranks in (word, position) order
        entries = np.sort(history * span + np.arange(len(history)))
        counts = (np.searchsorted(entries, tokens * span + before)
                  - np.searchsorted(entries, tokens * span + np.maximum(before - self.length, 0)))
        window = np.minimum(before, self.length)
        return np.where(cached & (window > 0), counts / np.maximum(window, 1), 0.0), cached

    def logprobs(self, corpus):
        p, _ = self.probabilities(corpus)
        with np.errstate(divide="ignore"):
            log10 = np.log10(p).astype(np.float32).astype(np.float64)  # SRILM's LogP
        return log10 * LN10

    # a word at a time (nplmtk/incremental.py): the state is the last `length` words cached
    def begin_state(self):
        return ()

    def null_state(self):
        return ()

    def score_words(self, states, words):
        from .incremental import checked_pairs, word_ids
        ids = word_ids(self.vocab, words)
        checked_pairs(states, ids)
        p, after = np.zeros(len(ids)), []
        for i, (cached, word) in enumerate(zip(states, ids.tolist())):
            enters = self.unk_is_word or word != self.vocab.unk
            if enters and cached:
                p[i] = cached.count(word) / len(cached)
            after.append((cached + (word,))[-self.length:] if enters and self.length else cached)
        with np.errstate(divide="ignore"):
            return np.log10(p).astype(np.float32).astype(np.float64), after

    def hit_tags(self, corpus):
        """`ppl -debug 2`'s [cache=p] (7 digits, as SRILM prints), none for an uncached <unk>."""
        p, cached = self.probabilities(corpus)
        return [f"[cache={value:.7g}]" if enters else "" for value, enters in zip(p.tolist(), cached.tolist())]


def with_cache(model, name, length, weight, unk_is_word):
    """`model` (whose file is `name`) mixed with a unigram cache of the last `length`
    words at `weight`, as `ngram -cache` mixes them (BayesMix with prior 1 - weight)."""
    main = 1.0 - weight
    return Mixture([model, UnigramCache(model.vocab, length, unk_is_word)], [main, 1.0 - main],
                   [name, f"a unigram cache of {length} words"])


def continuous_cache_probabilities(states, targets, window, theta, block=256):
    """p_cache of each token's target from the `window` tokens before it (0 for the first),
    in blocks of `block` tokens, each against its window of keys at once."""
    count = len(targets)
    p = np.zeros(count)
    for start in range(0, count, block):
        stop = min(count, start + block)
        low = max(0, start - window)
        scores = theta * (states[start:stop] @ states[low:stop].T).astype(np.float64)
        t, i = np.arange(start, stop)[:, None], np.arange(low, stop)[None, :]
        scores[(i >= t) | (i < t - window)] = -np.inf
        top = scores.max(axis=1, keepdims=True)
        seen = np.isfinite(top[:, 0])
        weights = np.exp(scores - np.where(np.isfinite(top), top, 0.0))  # softmax with max-subtraction
        match = targets[low:stop][None, :] == targets[start:stop][:, None]
        p[start:stop] = np.where(seen, (weights * match).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-300), 0.0)
    return p


class ContinuousCache(LanguageModel):
    """A recurrent network with Grave et al.'s cache over the text as it is scored."""

    kind = "continuous-cache"

    def __init__(self, model, window, theta, weight):
        self.model, self.vocab = model, model.vocab
        self.window, self.theta, self.weight = int(window), float(theta), float(weight)

    def logprobs(self, corpus):
        logp, states = self.model.logprobs_and_states(corpus)
        cache = continuous_cache_probabilities(states, np.asarray(corpus.targets()), self.window, self.theta)
        with np.errstate(divide="ignore"):
            mixed = np.log((1 - self.weight) * np.exp(logp) + self.weight * cache)
        return np.where(np.isfinite(logp), mixed, -math.inf)

    # a word at a time (nplmtk/incremental.py): the state is the network's, the last
    # `window` words and the keys (top-layer outputs, as bytes) that predicted them
    def begin_state(self):
        return self.model.begin_state(), (), ()

    def score_words(self, states, words):
        from .incremental import checked_pairs, word_ids
        ids = word_ids(self.vocab, words)
        checked_pairs(states, ids)
        logp, network_after, keys = self.model.stepper.steps([state[0] for state in states], ids, keys=True)
        logp = logp * LN10
        cache = np.zeros(len(ids))
        after = []
        for i, ((_, cached_words, cached_keys), word) in enumerate(zip(states, ids.tolist())):
            if cached_words:
                stored = np.frombuffer(b"".join(cached_keys), dtype=np.float32).reshape(len(cached_keys), -1)
                scores = self.theta * (stored @ keys[i]).astype(np.float64)
                weights = np.exp(scores - scores.max())  # softmax with max-subtraction
                cache[i] = weights[np.array(cached_words) == word].sum() / max(weights.sum(), 1e-300)
            after.append((network_after[i], (cached_words + (word,))[-self.window:] if self.window else (),
                          (cached_keys + (keys[i].tobytes(),))[-self.window:] if self.window else ()))
        with np.errstate(divide="ignore"):
            mixed = np.log((1 - self.weight) * np.exp(logp) + self.weight * cache)
        return np.where(np.isfinite(logp), mixed, -math.inf) / LN10, after

