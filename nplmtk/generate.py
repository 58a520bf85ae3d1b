"""Sampling sentences from any model with a next-word distribution (SRILM's `ngram -gen`,
for n-grams and networks alike): each word drawn from P(w | <s> and the words so far), at
a temperature, until `</s>` or a length limit.

Sentences are drawn side by side, `batch` streams at a time (`LanguageModel.sampling_streams`):
a recurrent network carries each stream's state and steps all of them with one product per
layer, an MLP computes the hidden layers of all the streams' windows at once, and a class
output layer draws the class, then the word within it (nplmtk/neural/output_draws.py). Each
random number is a hash of (seed, sentence, draw) (counter-based, as Salmon et al. 2011's
Philox; here SplitMix64's finaliser), so sentence i is the same whatever the batch and however
many sentences are asked for; the sentences come out in their order."""
import numpy as np

from .errors import ParameterError
from .vocab import sentence_tokens

DEFAULT_BATCH = 1024  # streams side by side, for a network that steps them together

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def sample_sentences(model, count, seed=1, temperature=1.0, prefix="", max_words=100, batch=DEFAULT_BATCH):
    """`count` sentences (lists of words), each starting with the words of `prefix`, in
    order, each yielded as soon as it and those before it are drawn (a caller writes each
    before the next is sampled). <s> is never drawn; <unk> is drawn like any word (it is a
    word of the model). Words of the prefix outside the vocabulary read as <unk>."""
    words = model.vocab.words
    for ids in sampled_ids(model, count, seed, temperature, prefix, max_words, batch):
        yield [words[w] for w in ids]


def sampled_ids(model, count, seed=1, temperature=1.0, prefix="", max_words=100, batch=DEFAULT_BATCH):
    """As sample_sentences, each sentence as a list of word ids (the prefix's included)."""
    if count < 0 or max_words < 1 or batch < 1:
        raise ParameterError("{count} must be at least 0, {max_words} and {batch} at least 1")
    if not temperature > 0:
        raise ParameterError(f"{{temperature}} must be above 0, got {temperature}")
    return _sampled(model, count, seed, temperature, prefix, max_words, batch)


def _sampled(model, count, seed, temperature, prefix, max_words, batch):
    vocab = model.vocab
    start = [vocab.id(word) for word in sentence_tokens(prefix)]
    if len(start) >= max_words:  # nothing to draw
        for _ in range(count):
            yield list(start)
        return
    if count == 0:
        return
    streams = model.sampling_streams(min(batch, count), start)
    width = streams.count
    sentence = np.arange(width, dtype=np.int64)  # each stream's sentence; -1: done
    draws = np.zeros(width, dtype=np.int64)  # random numbers each stream's sentence has used
    words = [list(start) for _ in range(width)]
    finished, next_out, next_sentence = {}, 0, width
    while next_out < count:
        live = np.flatnonzero(sentence >= 0)
        drawn = _draw(streams, live, sentence, draws, seed, temperature, vocab.bos)
        restart = np.zeros(width, dtype=bool)
        for s, word in zip(live.tolist(), drawn.tolist()):
            if word != vocab.eos:
                words[s].append(word)
            if word == vocab.eos or len(words[s]) >= max_words:
                finished[int(sentence[s])] = words[s]
                words[s] = list(start)
                draws[s] = 0
                sentence[s] = next_sentence if next_sentence < count else -1
                next_sentence += 1
                restart[s] = True
        while next_out in finished:
            yield finished.pop(next_out)
            next_out += 1
        if next_out < count:
            fed = np.full(width, vocab.bos, dtype=np.int64)  # streams done or starting again read <s>
            fed[live] = drawn
            fed[restart] = vocab.bos
            streams.advance(fed, restart)


def _draw(streams, rows, sentence, draws, seed, temperature, bos):
    """A word for each stream of `rows` from its next-word distribution at `temperature`,
    <s> drawn again (rejection: exactly the distribution without it)."""
    words = np.full(len(rows), bos, dtype=np.int64)
    pending = np.arange(len(rows))
    while pending.size:
        streams_now = rows[pending]
        if temperature == 1 and streams.draws_words:
            u = uniforms(seed, sentence[streams_now], draws[streams_now], streams.uniforms_per_draw)
            words[pending] = streams.draw(streams_now, u)
            draws[streams_now] += streams.uniforms_per_draw
        else:
            p = np.asarray(streams.distributions(streams_now), dtype=np.float64)
            p[:, bos] = 0
            if temperature != 1:
                p = at_temperature(p, temperature)
            u = uniforms(seed, sentence[streams_now], draws[streams_now], 1)[:, 0]
            words[pending] = inverse_cdf(p, u)
            draws[streams_now] += 1
        pending = pending[words[pending] == bos]
    return words


def inverse_cdf(p, u):
    """For each row of weights p (rows x words, >= 0) the first word whose running share of
    the row's total passes u (in [0, 1))."""
    cdf = np.cumsum(p / p.sum(axis=1, keepdims=True), axis=1)
    cdf /= cdf[:, -1:]
    return np.minimum(np.count_nonzero(cdf <= u[:, None], axis=1), p.shape[1] - 1)


def uniforms(seed, sentence, draw, count):
    """(rows, count) numbers in [0, 1): the `draw`-th and following of each row's
    `sentence`, a hash of (seed, sentence, draw) (SplitMix64's finaliser, applied in turn)."""
    with np.errstate(over="ignore"):
        key = _mix(np.uint64(seed) * _GOLDEN + np.asarray(sentence, dtype=np.uint64))
        index = np.asarray(draw, dtype=np.uint64)[:, None] + np.arange(count, dtype=np.uint64)
        bits = _mix(key[:, None] ^ _mix(index + _GOLDEN))
    return (bits >> np.uint64(11)).astype(np.float64) * 2.0 ** -53


def _mix(x):
    x = np.asarray(x, dtype=np.uint64)
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def at_temperature(p, temperature):
    """p^(1/T) along the last axis, up to a constant, in log space from the largest
    probability: at a tiny T the powers themselves all underflow to 0 (T 1e-30: no word left
    to draw), while here the most likely words keep weight 1 and sampling tends to the argmax."""
    # log 0 = -inf keeps a word of probability 0 at 0; at the tiniest T the quotient of the
    # others overflows to -inf, which is their limit
    with np.errstate(divide="ignore", over="ignore"):
        logp = np.log(p)
        return np.exp((logp - logp.max(axis=-1, keepdims=True)) / temperature)


class HistoryStreams:
    """One stream over any model through `next_distribution` (LanguageModel.sampling_streams's
    default: such a model gains nothing from several): the words so far."""
    draws_words = False
    count = 1

    def __init__(self, model, start):
        self.model, self.start = model, list(start)
        self.histories = [list(start)]

    def advance(self, words, restart):
        """Each stream takes its word, or (where `restart`) begins a sentence again."""
        for s, (word, again) in enumerate(zip(words.tolist(), restart.tolist())):
            if again:
                self.histories[s] = list(self.start)
            else:
                self.histories[s].append(word)

    def distributions(self, rows):
        return np.array([self.model.next_distribution(self.histories[s]) for s in rows.tolist()])
