"""Lattices made from text, for tests and benchmarks: each sentence's true path plus
confusions, by a fixed noise process with acoustic scores from a seeded generator.

The noise process (one `random.Random(seed)` per sentence, seeded with `seed` and the
sentence's number, so a sentence's lattice does not depend on the others):

- The sentence's n words make a chain of nodes 0..n (node i at time 0.25 i seconds, every
  node `!NULL`); the true word w_i is a link from node i-1 to node i.
- Substitutions: each position gets `substitutions` (default 2) more links i-1 -> i, each
  a word drawn uniformly from the `spread` (default 20) words nearest to w_i in the
  frequency ranking of the training text (words of similar frequency; a word the
  training text lacks is ranked among the words seen once).
- Deletions: with probability `p_delete` (default 0.1) a position also gets a `!NULL`
  link i-1 -> i (the word may be skipped).
- Insertions: with probability `p_insert` (default 0.1) a position also gets a path
  i-1 -> m -> i through a node m of its own (at time 0.25 (i - 0.5)): a word of similar
  frequency to w_i, then w_i.
- Acoustic scores (log10, `base=10`): a link for the true word scores N(-10, 1.5), a
  confusion N(-10 - margin, 1.5) with margin 1 (so that about a third of the confusions
  sound better than the truth and the language model has to decide), a `!NULL` link of a
  deletion N(-12, 1.5). Scores are written with 4 decimals.
- The header: VERSION=1.0, UTTERANCE=the lattice's name, base=10, lmscale=`lmscale`
  (default 8), wdpenalty=0, start=0, end=n, N= and L=; no language scores on links."""
import bisect
import random
from collections import Counter

MEAN, SPREAD_SCORE, MARGIN, DELETION_MEAN = -10.0, 1.5, 1.0, -12.0
STEP = 0.25


class Confusions:
    """Words of similar frequency: the training text's words ranked by count (then by
    byte order), and for each word its neighbours in that ranking."""

    def __init__(self, sentences, spread=20):
        counts = Counter(word for sentence in sentences for word in sentence)
        self.ranked = sorted(counts, key=lambda w: (-counts[w], w.encode("utf-8")))
        self.rank = {w: r for r, w in enumerate(self.ranked)}
        counts_descending = [-counts[w] for w in self.ranked]
        self.first_single = bisect.bisect_left(counts_descending, -1)
        self.spread = spread

    def similar(self, word, rng):
        rank = self.rank.get(word, self.first_single)
        low = max(0, min(rank - self.spread // 2, len(self.ranked) - self.spread - 1))
        choices = [w for w in self.ranked[low:low + self.spread + 1] if w != word]
        return rng.choice(choices)


def sentence_lattice(words, name, confusions, seed, number, substitutions=2, p_delete=0.1, p_insert=0.1,
                     lmscale=8.0):
    """The SLF text of one sentence's lattice (see the module's description)."""
    rng = random.Random(f"{seed}:{number}")
    n = len(words)
    node_times = [STEP * i for i in range(n + 1)]
    links = []  # (start, end, word or None, acoustic)

    def score(mean):
        return round(rng.gauss(mean, SPREAD_SCORE), 4)

    for i, word in enumerate(words, 1):
        alternatives = [(word, MEAN)] + [(confusions.similar(word, rng), MEAN - MARGIN)
                                         for _ in range(substitutions)]
        for alternative, mean in alternatives:
            links.append((i - 1, i, alternative, score(mean)))
        if rng.random() < p_delete:
            links.append((i - 1, i, None, score(DELETION_MEAN)))
        if rng.random() < p_insert:
            middle = len(node_times)
            node_times.append(STEP * (i - 0.5))
            links.append((i - 1, middle, confusions.similar(word, rng), score(MEAN - MARGIN)))
            links.append((middle, i, word, score(MEAN)))
    lines = ["VERSION=1.0", f"UTTERANCE={name}", "base=10", f"lmscale={lmscale:g}", "wdpenalty=0",
             f"start=0\tend={n}", f"N={len(node_times)}\tL={len(links)}"]
    lines += [f"I={i}\tt={t:.2f}\tW=!NULL" for i, t in enumerate(node_times)]
    lines += [f"J={j}\tS={s}\tE={e}\tW={w or '!NULL'}\ta={a:.4f}" for j, (s, e, w, a) in enumerate(links)]
    return "\n".join(lines) + "\n"
