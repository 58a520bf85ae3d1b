"""The deleted-interpolation trigram of Bengio et al. (2003, sec. 4.1), their baseline:

    p(w | w-2, w-1) = a0(q)/|V| + a1(q) p1(w) + a2(q) p2(w | w-1) + a3(q) p3(w | w-2, w-1)

with relative frequencies p1, p2, p3 from the training text (for a history never seen in
training, the next lower order stands in for its relative frequency) and one weight set per bin
of the context's frequency, q = ceil(-log((1 + freq(w-2, w-1)) / T)), T the number of
training tokens; the weights are fitted by EM on held-out text. Not a back-off model:
it is stored in the binary container and scored through the LanguageModel interface.
"""
import math

import numpy as np

from .. import container
from ..errors import NplmError
from ..lm import LanguageModel, register
from .index import lookup

ORDER = 3


def context_bins(context_count, total):
    """q = ceil(-ln((1 + freq) / T)), clipped to 0..ceil(ln T)."""
    last = int(math.ceil(math.log(total)))
    q = np.ceil(-np.log((1.0 + context_count) / total)).astype(np.int64)
    return np.clip(q, 0, last)


class DeletedInterpolation(LanguageModel):
    kind = "deleted-interpolation"

    def __init__(self, vocab, unigram, pairs, pair_count, pair_as_context, triple_keys, triple_count,
                 weights, unk_is_word):
        self.vocab = vocab
        self.unigram = np.asarray(unigram, dtype=np.int64)
        self.pairs = np.asarray(pairs, dtype=np.int32)
        self.pair_keys = self.pairs[:, 0].astype(np.int64) * len(vocab) + self.pairs[:, 1]
        self.pair_count = np.asarray(pair_count, dtype=np.int64)
        self.pair_as_context = np.asarray(pair_as_context, dtype=np.int64)
        self.triple_keys = np.asarray(triple_keys, dtype=np.int64)
        self.triple_count = np.asarray(triple_count, dtype=np.int64)
        self.weights = np.asarray(weights, dtype=np.float64)
        self.unk_is_word = unk_is_word
        self.total = int(self.unigram.sum())
        self.history_count = np.bincount(self.pairs[:, 0], weights=self.pair_count, minlength=len(vocab))
        self.num_bins = len(self.weights)
        # The uniform component covers the words a model can predict (not <s>).
        self.predictable = len(vocab) - 1 - (0 if unk_is_word else 1)

    @classmethod
    def train(cls, train_corpus, unk_is_word=True):
        vocab = train_corpus.vocab
        windows = _valid_windows(train_corpus, unk_is_word)
        size = len(vocab)
        unigram = np.bincount(windows[:, 2], minlength=size)
        as_bigram = windows[:, 1].astype(np.int64) * size + windows[:, 2]
        as_context = windows[:, 0].astype(np.int64) * size + windows[:, 1]
        as_context = np.where((windows[:, 0] < 0) | (windows[:, 1] < 0), -1, as_context)
        as_bigram = np.where(windows[:, 1] < 0, -1, as_bigram)
        pair_keys, inverse = np.unique(np.concatenate([as_bigram, as_context]), return_inverse=True)
        n = len(windows)
        pair_count = np.bincount(inverse[:n], minlength=len(pair_keys))
        pair_as_context = np.bincount(inverse[n:], minlength=len(pair_keys))
        keep = pair_keys >= 0
        pairs = np.stack([pair_keys[keep] // size, pair_keys[keep] % size], axis=1)
        context_index = inverse[n:] - (len(pair_keys) - keep.sum())
        triples = context_index * size + windows[:, 2]
        triples = triples[as_context >= 0]
        triple_keys, triple_count = np.unique(triples, return_counts=True)
        total = int(unigram.sum())
        weights = np.full((int(math.ceil(math.log(total))) + 1, 4), 0.25)
        return cls(vocab, unigram, pairs, pair_count[keep], pair_as_context[keep], triple_keys, triple_count,
                   weights, unk_is_word)

    def components(self, windows):
        """(m, 4) probabilities of the four components, and each window's bin."""
        size = len(self.vocab)
        a, b, w = (windows[:, j].astype(np.int64) for j in range(3))
        valid_w = w >= 0
        if not self.unk_is_word:
            valid_w &= w != self.vocab.unk
        p = np.zeros((len(windows), 4))
        p[:, 0] = 1.0 / self.predictable
        p[valid_w, 1] = self.unigram[w[valid_w]] / self.total
        bigram = lookup(self.pair_keys, np.where((b >= 0) & valid_w, b * size + w, -1))
        history = np.where(b >= 0, self.history_count[np.maximum(b, 0)], 0)
        found = bigram >= 0
        p[found, 2] = self.pair_count[bigram[found]] / history[found]
        context = lookup(self.pair_keys, np.where((a >= 0) & (b >= 0), a * size + b, -1))
        context_count = np.where(context >= 0, self.pair_as_context[np.maximum(context, 0)], 0)
        triple = lookup(self.triple_keys, np.where((context >= 0) & valid_w, context * size + w, -1))
        found = triple >= 0
        p[found, 3] = self.triple_count[triple[found]] / context_count[found]
        # An unseen history has no relative frequency: the next lower order stands in,
        # so every weight set still gives a normalised distribution.
        p[history == 0, 2] = p[history == 0, 1]
        p[context_count == 0, 3] = p[context_count == 0, 2]
        p[~valid_w] = 0.0
        return p, context_bins(context_count, self.total)

    def fit_weights(self, heldout, iterations=5, log=None):
        """EM on held-out text, one weight set per bin (bins without held-out data
        keep the weights fitted over all bins). Returns the held-out log-likelihoods."""
        windows = _valid_windows(heldout, self.unk_is_word)
        p, bins = self.components(windows)
        history = []
        pooled = np.full(4, 0.25)
        weights = np.tile(pooled, (self.num_bins, 1))
        for _ in range(iterations):
            mix = weights[bins] * p
            total = mix.sum(axis=1)
            history.append(float(np.log(total).sum()))
            posterior = mix / total[:, None]
            counts = np.zeros((self.num_bins, 4))
            np.add.at(counts, bins, posterior)
            seen = counts.sum(axis=1)
            pooled = posterior.sum(axis=0) / len(posterior)
            weights = np.where(seen[:, None] > 0, counts / np.maximum(seen, 1)[:, None], pooled)
            if log:
                log(f"EM iteration {len(history)}: held-out ppl {math.exp(-history[-1] / len(windows)):.4f}")
        self.weights = weights
        mix = (weights[bins] * p).sum(axis=1)
        history.append(float(np.log(mix).sum()))
        return history

    def logprobs(self, corpus):
        self.check_vocab(corpus)
        p, bins = self.components(corpus.windows(ORDER))
        with np.errstate(divide="ignore"):
            return np.log((self.weights[bins] * p).sum(axis=1))

    def save(self, path, provenance=None):
        container.save(path, self.kind, {
            "unigram": self.unigram, "pairs": self.pairs, "pair_count": self.pair_count,
            "pair_as_context": self.pair_as_context, "triple_keys": self.triple_keys,
            "triple_count": self.triple_count, "weights": self.weights,
        }, meta={"order": ORDER, "unk_is_word": self.unk_is_word, **(provenance or {})}, vocab=self.vocab)


@register(DeletedInterpolation.kind)
def _load(model_file):
    a = model_file.arrays
    if model_file.vocab is None:
        raise NplmError(f"{model_file.path}: model has no vocabulary")
    return DeletedInterpolation(model_file.vocab, a["unigram"], a["pairs"], a["pair_count"],
                                a["pair_as_context"], a["triple_keys"], a["triple_count"], a["weights"],
                                model_file.meta["unk_is_word"])


def _valid_windows(corpus, unk_is_word):
    """Trigram windows whose target can be predicted (not an OOV in a closed vocabulary)."""
    windows = corpus.windows(ORDER)
    if not unk_is_word:
        windows = windows[windows[:, 2] >= 0]
    return windows
