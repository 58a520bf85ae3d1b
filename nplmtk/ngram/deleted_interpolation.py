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
from ..errors import NplmError, ParameterError
from ..lm import LN10, LanguageModel
from .index import lookup
from .interpolation_weights import count_word_pairs, find_contexts, fit_bin_weights, frequency_bins, word_pair_keys

ORDER = 3


class DeletedInterpolation(LanguageModel):
    kind = "deleted-interpolation"
    order = ORDER

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
        # One table of word pairs serves both as bigrams (w-1, w) and as contexts (w-2, w-1).
        pair_keys, (pair_count, pair_as_context) = count_word_pairs(size, windows[:, 1:], windows[:, :2])
        pairs = np.stack([pair_keys // size, pair_keys % size], axis=1)
        context, _ = find_contexts(pair_keys, pair_as_context, windows, size)
        seen = context >= 0
        triple_keys, triple_count = np.unique(context[seen] * size + windows[seen, 2], return_counts=True)
        total = int(unigram.sum())
        weights = np.full((int(math.ceil(math.log(total))) + 1, 4), 0.25)
        return cls(vocab, unigram, pairs, pair_count, pair_as_context, triple_keys, triple_count, weights,
                   unk_is_word)

    def components(self, windows):
        """(m, 4) probabilities of the four components, and each window's bin."""
        size = len(self.vocab)
        b, w = windows[:, 1].astype(np.int64), windows[:, 2].astype(np.int64)
        valid_w = w >= 0
        if not self.unk_is_word:
            valid_w &= w != self.vocab.unk
        p = np.zeros((len(windows), 4))
        p[:, 0] = 1.0 / self.predictable
        p[valid_w, 1] = self.unigram[w[valid_w]] / self.total
        bigram = lookup(self.pair_keys, word_pair_keys(b, np.where(valid_w, w, -1), size))
        history = np.where(b >= 0, self.history_count[np.maximum(b, 0)], 0)
        found = bigram >= 0
        p[found, 2] = self.pair_count[bigram[found]] / history[found]
        context, context_count = find_contexts(self.pair_keys, self.pair_as_context, windows, size)
        triple = lookup(self.triple_keys, np.where((context >= 0) & valid_w, context * size + w, -1))
        found = triple >= 0
        p[found, 3] = self.triple_count[triple[found]] / context_count[found]
        # An unseen history has no relative frequency: the next lower order stands in,
        # so every weight set still gives a normalised distribution.
        p[history == 0, 2] = p[history == 0, 1]
        p[context_count == 0, 3] = p[context_count == 0, 2]
        p[~valid_w] = 0.0
        return p, frequency_bins(context_count, self.total)

    def fit_weights(self, heldout, iterations=5, log=None):
        """EM on held-out text, one weight set per bin (bins without held-out data
        keep the weights fitted over all bins). Returns the held-out log-likelihoods."""
        p, bins = self.components(_valid_windows(heldout, self.unk_is_word))

        def report(iteration, weights, loglik, tokens):
            log(f"EM iteration {iteration}: held-out ppl {math.exp(-loglik / tokens):.4f}")

        self.weights, history = fit_bin_weights(p.T, bins, self.num_bins, iterations, log=log and report)
        return history

    def logprobs(self, corpus):
        self.check_vocab(corpus)
        p, bins = self.components(corpus.windows(ORDER))
        with np.errstate(divide="ignore"):
            return np.log((self.weights[bins] * p).sum(axis=1))

    # a word at a time (nplmtk/incremental.py): the state is the two ids before the word
    def begin_state(self):
        return (self.vocab.bos, self.vocab.bos)

    def null_state(self):
        return (-1, -1)

    def score_words(self, states, words):
        from ..incremental import checked_pairs, padded_windows, word_ids
        ids = word_ids(self.vocab, words)
        checked_pairs(states, ids)
        if any(len(state) != ORDER - 1 for state in states):
            raise ParameterError(f"{{states}}: a deleted-interpolation state holds {ORDER - 1} word ids")
        windows = padded_windows(states, ids, ORDER)
        p, bins = self.components(windows)
        with np.errstate(divide="ignore"):
            scores = np.log((self.weights[bins] * p).sum(axis=1)) / LN10
        return scores, [tuple(row[1:].tolist()) for row in windows]

    def save(self, path, provenance=None):
        container.save(path, self.kind, {
            "unigram": self.unigram, "pairs": self.pairs, "pair_count": self.pair_count,
            "pair_as_context": self.pair_as_context, "triple_keys": self.triple_keys,
            "triple_count": self.triple_count, "weights": self.weights,
        }, meta={"order": ORDER, "unk_is_word": self.unk_is_word, **(provenance or {})}, vocab=self.vocab)


def load_deleted_interpolation(model_file):
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
