"""SRILM's `ngram -ppl` report (LM::pplFile, TextStats): the counts and log10 totals of a
text and of each sentence, and the lines that print them. Without numpy: nplmtk/ppl.py and
the fast path of `nplm ppl` (nplmtk/ngram/mapped.py) write their reports here, byte for byte
alike."""
import math

LN10 = math.log(10)  # as nplmtk.lm.LN10


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


def order_tag(order):
    """SRILM's -debug 2 tag of a token a back-off model scored with an n-gram of `order`
    (0: none, an OOV)."""
    return f"[{order}gram]" if order else "[OOV]"


def write_sentences(raw, bounds, logprob, oovs, zeroprobs, write, words=None, targets=None, tags=None, log10=None):
    """-debug 1's lines of each sentence s: its tokens as read (`raw[s]`), its TextStats
    (`logprob`, `oovs`, `zeroprobs` [s]) and an empty line; with `words` (-debug 2) also a
    line per predicted token t in bounds[s] .. bounds[s + 1] - 1 (each word, then </s>):
    words[targets[t]], its context word, tags[t] (when `tags`) and log10[t] (as a float32
    holds it). Returns the TextStats of them all."""
    total = TextStats()
    for s in range(len(bounds) - 1):
        first, last = bounds[s], bounds[s + 1]
        stats = TextStats(1, last - first - 1, oovs[s], zeroprobs[s], logprob[s])
        write(" ".join(raw[s]))
        if words is not None:
            for t in range(first, last):
                word = words[targets[t]]
                context = words[targets[t - 1]] if t > first else "<s>"
                more = " ..." if t > first else " "
                logp = log10[t]
                tag = tags[t] if tags else ""
                write(f"\tp( {word} | {context}{more}) \t= {tag} {math.exp(logp * LN10):.7g} [ {logp:.7g} ]")
        for line in stats.lines():
            write(line)
        write("")
        total.add(stats)
    return total


def write_totals(path, total, write):
    """The report's last two lines: the TextStats `total` of the file `path`."""
    first, second = total.lines()
    write(f"file {path}: {first}")
    write(second)
