"""Perplexity reports in the exact format of SRILM's `ngram -ppl` (LM::pplFile,
TextStats), written once against the LanguageModel interface."""
import math

import numpy as np

from .corpus import Corpus
from .io import read_lines
from .lm import LN10
from .text import split_words
from .vocab import sentence_tokens


class TextStats:
    """Counts and the log10 total of a text or a sentence (SRILM's TextStats)."""

    def __init__(self, sentences=0, words=0, oovs=0, zeroprobs=0, logprob=0.0):
        self.sentences, self.words, self.oovs = sentences, words, oovs
        self.zeroprobs, self.logprob = zeroprobs, logprob

    def add(self, other):
        self.sentences += other.sentences
        self.words += other.words
        self.oovs += other.oovs
        self.zeroprobs += other.zeroprobs
        self.logprob += other.logprob

    @property
    def ppl(self):
        denominator = self.words - self.oovs - self.zeroprobs + self.sentences
        return math.exp(-(self.logprob / denominator) * LN10) if denominator > 0 else None

    @property
    def ppl1(self):
        denominator = self.words - self.oovs - self.zeroprobs
        return math.exp(-(self.logprob / denominator) * LN10) if denominator > 0 else None

    def lines(self):
        def g(value):
            return "undefined" if value is None else f"{value:.7g}"
        return [f"{self.sentences} sentences, {self.words} words, {self.oovs} OOVs",
                f"{self.zeroprobs} zeroprobs, logprob= {g(self.logprob)} ppl= {g(self.ppl)} ppl1= {g(self.ppl1)}"]


def read_scored_text(path, vocab, normalize=None):
    """The text at `path` as `ngram -ppl` reads it: the raw tokens of each non-empty
    sentence, and the corpus they encode to (unknown words as <unk>)."""
    lines = read_lines(path)
    if normalize:
        lines = normalize("\n".join(lines)).split("\n")
    raw = [split_words(line) for line in lines]
    raw = [tokens for tokens in raw if sentence_tokens(" ".join(tokens))]
    corpus = Corpus.from_lines([" ".join(t) for t in raw], vocab, unk=True, name=path)
    return raw, corpus


def perplexity(model, path, debug=0, write=print, normalize=None, oov_estimate=False):
    """Score the text at `path` and write SRILM's report; returns the file's TextStats.
    `normalize` (e.g. a Normalizer) must be the one the model's training text had.
    `oov_estimate`: words outside the vocabulary get estimated probabilities (a model
    with logprobs_estimating_oov, the energy network) instead of counting as <unk>."""
    raw, corpus = read_scored_text(path, model.vocab, normalize)
    if oov_estimate:
        return report(model, raw, corpus, model.logprobs_estimating_oov(raw) / LN10, debug, write)
    return report(model, raw, corpus, model.log10probs(corpus), debug, write)


def report(model, raw, corpus, log10, debug=0, write=print):
    """SRILM's report of scores `log10` (one per predicted token of `corpus`)."""
    path = corpus.name
    targets = corpus.windows(1)[:, 0]
    zero = log10 == -np.inf
    oov = zero & (targets == model.vocab.unk)
    values = np.where(zero, 0.0, log10).tolist()
    oov_list, zero_list = oov.tolist(), (zero & ~oov).tolist()
    tags = model.hit_tags(corpus) if debug >= 2 else None
    words = model.vocab.words
    total = TextStats()
    bounds = (corpus.offsets + np.arange(len(corpus.offsets))).tolist()
    for s in range(corpus.num_sentences):
        first, last = bounds[s], bounds[s + 1]
        stats = TextStats(1, last - first - 1, sum(oov_list[first:last]), sum(zero_list[first:last]),
                          sum(values[first:last]))
        if debug >= 1:
            write(" ".join(raw[s]))
            if debug >= 2:
                for t in range(first, last):
                    word = words[targets[t]]
                    context = words[targets[t - 1]] if t > first else "<s>"
                    more = " ..." if t > first else " "
                    logp = float(np.float32(log10[t]))
                    tag = tags[t] if tags else ""
                    write(f"\tp( {word} | {context}{more}) \t= {tag} {math.exp(logp * LN10):.7g} [ {logp:.7g} ]")
            for line in stats.lines():
                write(line)
            write("")
        total.add(stats)
    first, second = total.lines()
    write(f"file {path}: {first}")
    write(second)
    return total
