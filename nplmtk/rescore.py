"""N-best rescoring as SRILM's `ngram -nbest` / `-rescore` (nbest-format(5)): each
hypothesis's language-model log10 score from any model, then the list re-ranked by
ascore + lm_weight * lscore + word_penalty * words. Read: SRILM's own format (`ascore
lscore nwords w1 w2 ...`) and Decipher's `NBestList1.0` (`(bytelog score) w1 w2 ...`, the
composite score read as the acoustic one); written: SRILM's format."""
import math
import re

import numpy as np

from .corpus import Corpus
from .errors import InputError
from .io import read_lines
from .text import split_words

BYTELOG = 1024 * math.log10(1.0001)  # a bytelog is log base 1.0001 divided by 1024
DECIPHER_LINE = re.compile(r"\(\s*([-+0-9.eE]+)\s*\)\s*(.*)$")
GROUP_HYPOTHESES = 20000  # lists scored together until this many hypotheses (a network's batches span them)


class Hypothesis:
    def __init__(self, ascore, lscore, words):
        self.ascore, self.lscore, self.words = ascore, lscore, words

    def line(self):
        return f"{self.ascore:.6g} {self.lscore:.6g} {len(self.words)} {' '.join(self.words)}".rstrip()


def read_nbest(path):
    """The hypotheses of an N-best list, in its order."""
    lines = read_lines(path)
    hypotheses = []
    decipher = bool(lines) and lines[0].strip() == "NBestList1.0"
    if lines and lines[0].startswith("NBestList") and not decipher:
        raise InputError(f"{lines[0].strip()}: only NBestList1.0 and SRILM's own format are read", path=path, line=1)
    for number, line in enumerate(lines[1:] if decipher else lines, 2 if decipher else 1):
        if not line.strip():
            continue
        try:
            if decipher:
                match = DECIPHER_LINE.match(line.strip())
                if not match:
                    raise ValueError
                ascore, lscore, words = float(match.group(1)) * BYTELOG, 0.0, split_words(match.group(2))
            else:
                fields = split_words(line)
                ascore, lscore, count, words = float(fields[0]), float(fields[1]), int(fields[2]), fields[3:]
                words = words[words[:1] == ["<s>"]:len(words) - (words[-1:] == ["</s>"])]  # as lattice-tool writes
                if count != len(words):
                    raise ValueError
            if not (math.isfinite(ascore) and math.isfinite(lscore)):
                raise ValueError
        except (ValueError, IndexError):
            raise InputError("not an N-best hypothesis: 'ascore lscore nwords words' (or '(score) words' after "
                             "NBestList1.0)", path=path, line=number) from None
        hypotheses.append(Hypothesis(ascore, lscore, words))
    return hypotheses


def language_scores(model, hypotheses):
    """log10 P(words </s> | <s>) of each hypothesis (words outside the vocabulary as <unk>),
    all scored in one pass (a network's batches span hypotheses; a recurrent network runs
    each common prefix once)."""
    vocab = model.vocab
    ids = np.array([vocab.id(w) for h in hypotheses for w in h.words], dtype=np.int32)
    lengths = np.array([len(h.words) for h in hypotheses], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    scores = model.log10probs_sharing_prefixes(Corpus(ids, offsets, vocab, name="<n-best>"))
    starts = offsets[:-1] + np.arange(len(hypotheses))  # each sentence's tokens, </s> included
    return np.add.reduceat(scores, starts) if len(hypotheses) else np.zeros(0)


def rescore(model, hypotheses, lm_weight=8.0, word_penalty=0.0):
    """The hypotheses with the model's lscore, best first (a stable sort: ties keep their order)."""
    for hypothesis, score in zip(hypotheses, language_scores(model, hypotheses)):
        hypothesis.lscore = float(score)
    return ranked(hypotheses, lm_weight, word_penalty)


def rescore_lists(model, lists, lm_weight=8.0, word_penalty=0.0):
    """Each list of `lists` (an iterable of lists of hypotheses) as rescore ranks it, in
    order; the lists scored in groups of about GROUP_HYPOTHESES hypotheses, one pass each
    (a recurrent network steps the trie of a whole group's prefixes, a batched step a
    level, not each list's small levels one after another)."""
    group = []
    for hypotheses in lists:
        group.append(hypotheses)
        if sum(map(len, group)) >= GROUP_HYPOTHESES:
            yield from _rescored_group(model, group, lm_weight, word_penalty)
            group = []
    yield from _rescored_group(model, group, lm_weight, word_penalty)


def _rescored_group(model, group, lm_weight, word_penalty):
    every = [h for hypotheses in group for h in hypotheses]
    for hypothesis, score in zip(every, language_scores(model, every)):
        hypothesis.lscore = float(score)
    return [ranked(hypotheses, lm_weight, word_penalty) for hypotheses in group]


def ranked(hypotheses, lm_weight, word_penalty):
    return sorted(hypotheses, key=lambda h: -(h.ascore + lm_weight * h.lscore + word_penalty * len(h.words)))
