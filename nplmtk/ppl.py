"""Perplexity reports in the exact format of SRILM's `ngram -ppl` (LM::pplFile,
TextStats), written once against the LanguageModel interface."""
import math

import numpy as np

from ._ext.corpus_kernels import sentence_totals
from .corpus import Corpus
from .io import read_lines
from .lm import LN10
from .ngram.backoff import PSEUDO_ZERO
from .ngram.counts import byte_ranks, parse_count
from .ppl_report import TextStats, order_tag, write_sentences, write_totals
from .text import sentences_as_read, split_words


def read_scored_text(path, vocab, normalize=None, words=True):
    """The text at `path` as `ngram -ppl` reads it: the raw tokens of each non-empty
    sentence (None unless `words`: only reports with sentences print them), and the
    corpus they encode to (unknown words as <unk>)."""
    raw = None
    if words:  # read first: stdin is then kept for Corpus.read
        lines = read_lines(path)
        if normalize:
            lines = normalize("\n".join(lines)).split("\n")
        raw = sentences_as_read(lines)
    return raw, Corpus.read(path, vocab, unk=True, normalize=normalize)


def perplexity(model, path, debug=0, write=print, normalize=None, oov_estimate=False, unk_log10prob=None):
    """Score the text at `path` and write SRILM's report; returns the file's TextStats.
    `normalize` (e.g. a Normalizer) must be the one the model's training text had.
    `oov_estimate`: words outside the vocabulary get estimated probabilities (a model
    with logprobs_estimating_oov, the energy network) instead of counting as <unk>.
    `unk_log10prob`: the unknown word's log10 probability in every context instead of
    the model's (SRILM's -unk-prob; -99 means 0, an OOV)."""
    raw, corpus = read_scored_text(path, model.vocab, normalize, words=debug >= 1 or oov_estimate)
    if oov_estimate:
        return report(model, raw, corpus, model.logprobs_estimating_oov(raw) / LN10, debug, write)
    log10 = model.log10probs(corpus)
    if unk_log10prob is not None:
        log10 = _with_unk_prob(log10, corpus.targets() == model.vocab.unk, unk_log10prob)
    return report(model, raw, corpus, log10, debug, write)


def _with_unk_prob(log10, unknown, unk_log10prob):
    if unk_log10prob is None:
        return log10
    return np.where(unknown, -np.inf if unk_log10prob == PSEUDO_ZERO else unk_log10prob, log10)


def count_perplexity(model, path, debug=0, write=print, unk_log10prob=None):
    """SRILM's `ngram -counts`: each n-gram (w1 .. wk, k up to the model's order) of the
    counts file at `path` scores p(wk | w1 .. wk-1) times its count; n-grams ending in
    `</s>` count as sentences, the others as words. With `debug` 2 a line per n-gram,
    order by order, sorted as SRILM sorts them. A back-off n-gram model only."""
    vocab = model.vocab
    totals = {}
    for number, line in enumerate(read_lines(path), 1):
        fields = split_words(line)
        if not fields:
            continue
        count = parse_count(fields, path, number)
        if len(fields) - 1 > model.order:
            continue
        gram = tuple(vocab.id(w) for w in fields[:-1])
        totals[gram] = totals.get(gram, 0) + count
    rank = byte_ranks(vocab.words)
    stats = TextStats()
    for k in range(1, model.order + 1):
        grams = sorted((g for g in totals if len(g) == k), key=lambda g: rank[list(g)].tolist())
        if not grams:
            continue
        rows = np.array(grams, dtype=np.int32)
        log10, used = model.score_rows(rows, with_order=True)
        log10 = _with_unk_prob(log10, rows[:, -1] == vocab.unk, unk_log10prob)
        for gram, logp, order in zip(grams, log10.tolist(), used.tolist()):
            count = totals[gram]
            if gram[-1] == vocab.eos:
                stats.sentences += count
            else:
                stats.words += count
            if logp == -math.inf:
                if gram[-1] == vocab.unk:
                    stats.oovs += count
                else:
                    stats.zeroprobs += count
            else:
                stats.logprob += count * logp
            if debug >= 2:
                context = " ".join(vocab.words[w] for w in reversed(gram[:-1]))
                tag = order_tag(order)
                weight = f" *{float(count):.7g}" if count != 1 else ""
                write(f"\tp( {vocab.words[gram[-1]]} | {context} ) \t= {tag} {math.exp(logp * LN10):.7g} "
                      f"[ {logp:.7g}{weight} ]")
    if debug >= 1:
        for line in stats.lines():
            write(line)
        write("")
    write_totals(path, stats, write)
    return stats


def report(model, raw, corpus, log10, debug=0, write=print):
    """SRILM's report of scores `log10` (one per predicted token of `corpus`)."""
    logprob, oovs, zeroprobs, text_logprob = sentence_totals(
        np.ascontiguousarray(log10, dtype=np.float64), corpus.ids, corpus.offsets, model.vocab.unk)
    if debug == 0:  # the totals alone
        total = TextStats(corpus.num_sentences, corpus.num_words, int(oovs.sum()), int(zeroprobs.sum()),
                          text_logprob)
    else:
        tokens = {}
        if debug >= 2:
            tokens = {"words": model.vocab.words, "targets": corpus.targets().tolist(), "tags": model.hit_tags(corpus),
                      "log10": np.asarray(log10, dtype=np.float32).tolist()}
        bounds = (corpus.offsets + np.arange(len(corpus.offsets))).tolist()
        total = write_sentences(raw, bounds, logprob.tolist(), oovs.tolist(), zeroprobs.tolist(), write, **tokens)
    write_totals(corpus.name, total, write)
    return total
