"""Sampling sentences from any model with a next-word distribution (SRILM's `ngram -gen`,
for n-grams and networks alike): each word drawn from P(w | <s> and the words so far), at
a temperature, until `</s>` or a length limit."""
import numpy as np

from .errors import ParameterError
from .vocab import sentence_tokens


def sample_sentences(model, count, seed=1, temperature=1.0, prefix="", max_words=100):
    """`count` sentences (lists of words), each starting with the words of `prefix`, one
    at a time as they are drawn (a caller writes each before the next is sampled). <s>
    is never drawn; <unk> is drawn like any word (it is a word of the model). Words of
    the prefix outside the vocabulary read as <unk>."""
    if count < 0 or max_words < 1:
        raise ParameterError("{count} must be at least 0 and {max_words} at least 1")
    if not temperature > 0:
        raise ParameterError(f"{{temperature}} must be above 0, got {temperature}")
    return _sampled(model, count, seed, temperature, prefix, max_words)


def _sampled(model, count, seed, temperature, prefix, max_words):
    vocab, rng = model.vocab, np.random.default_rng(seed)
    start = [vocab.id(word) for word in sentence_tokens(prefix)]
    for _ in range(count):
        history = list(start)
        while len(history) < max_words:
            p = np.asarray(model.next_distribution(history), dtype=np.float64)
            p[vocab.bos] = 0
            if temperature != 1:
                p = at_temperature(p, temperature)
            word = int(rng.choice(len(p), p=p / p.sum()))
            if word == vocab.eos:
                break
            history.append(word)
        yield [vocab.words[w] for w in history]


def at_temperature(p, temperature):
    """p^(1/T), up to a constant, in log space from the largest probability: at a tiny T the
    powers themselves all underflow to 0 (T 1e-30: no word left to draw), while here the most
    likely words keep weight 1 and sampling tends to the argmax."""
    # log 0 = -inf keeps a word of probability 0 at 0; at the tiniest T the quotient of the
    # others overflows to -inf, which is their limit
    with np.errstate(divide="ignore", over="ignore"):
        logp = np.log(p)
        return np.exp((logp - logp.max()) / temperature)
