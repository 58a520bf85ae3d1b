"""Word clustering by the exchange algorithm (Kneser & Ney 1993; Martin, Liermann & Ney
1998): classes that maximise the likelihood of the training text under the class bigram
model p(w | v) = p(c(w) | c(v)) p(w | c(w)), with maximum-likelihood estimates:

    LL = sum_{c,d} f(N(c,d)) - sum_c f(N(c.)) - sum_d f(N(.d)) + sum_w f(N(.w)),  f(x) = x ln x

N(c,d) counting the bigrams (`<s>` and `</s>` included) from a word of class c to one of
class d. A pass visits every word once, takes it out of its class and puts it into the
class that gains most; no step lowers LL. `<s>` and `</s>` keep classes of their own.
"""
import math

import numpy as np

from ..errors import ParameterError


def xlogx(x):
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x > 0, x * np.log(np.where(x > 0, x, 1.0)), 0.0)


class BigramCounts:
    """Word bigram counts as a sparse matrix, rows (`following`) and columns (`preceding`)
    both at hand: for word v, following(v) gives the words after v and their counts."""

    def __init__(self, first, second, counts, size):
        self.size = size
        self.by_first = _compressed(first, second, counts, size)
        self.by_second = _compressed(second, first, counts, size)

    @classmethod
    def from_corpus(cls, corpus):
        """The bigrams of `corpus` with `<s>` before and `</s>` after each sentence."""
        vocab = corpus.vocab
        windows = corpus.windows(2).astype(np.int64)
        key = windows[:, 0] * len(vocab) + windows[:, 1]
        keys, counts = np.unique(key, return_counts=True)
        return cls(keys // len(vocab), keys % len(vocab), counts.astype(np.float64), len(vocab))

    def following(self, word):
        indptr, others, counts = self.by_first
        return others[indptr[word]:indptr[word + 1]], counts[indptr[word]:indptr[word + 1]]

    def preceding(self, word):
        indptr, others, counts = self.by_second
        return others[indptr[word]:indptr[word + 1]], counts[indptr[word]:indptr[word + 1]]


def _compressed(rows, columns, values, size):
    order = np.lexsort((columns, rows))
    indptr = np.zeros(size + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=size), out=indptr[1:])
    return indptr, columns[order].astype(np.int64), values[order]


class ClassBigramState:
    """The class bigram counts of an assignment `class_of` (word -> class), kept up to date
    as words move, and the likelihood gain of moving a word to each class."""

    def __init__(self, bigrams, class_of, num_classes):
        self.bigrams, self.class_of, self.num_classes = bigrams, np.array(class_of, dtype=np.int64), num_classes
        self.matrix = np.zeros((num_classes, num_classes))
        indptr, second, counts = bigrams.by_first
        first = np.repeat(np.arange(bigrams.size), np.diff(indptr))
        np.add.at(self.matrix, (self.class_of[first], self.class_of[second]), counts)
        self.word_before = np.bincount(first, weights=counts, minlength=bigrams.size)  # N(w.)
        self.word_after = np.bincount(second, weights=counts, minlength=bigrams.size)  # N(.w)

    def log_likelihood(self):
        """LL of the training bigrams (natural log), from scratch."""
        m = self.matrix
        return float(xlogx(m).sum() - xlogx(m.sum(axis=1)).sum() - xlogx(m.sum(axis=0)).sum()
                     + xlogx(self.word_after).sum())

    def _neighbours(self, word):
        """Class counts after and before `word` (itself left out) and its self-bigram count."""
        classes = self.class_of
        after, counts = self.bigrams.following(word)
        self_count = counts[after == word].sum()
        keep = after != word
        right = np.bincount(classes[after[keep]], weights=counts[keep], minlength=self.num_classes)
        before, counts = self.bigrams.preceding(word)
        keep = before != word
        left = np.bincount(classes[before[keep]], weights=counts[keep], minlength=self.num_classes)
        return right, left, self_count

    def _apply(self, word, target, right, left, self_count, sign):
        m = self.matrix
        m[target, :] += sign * right
        m[:, target] += sign * left
        m[target, target] += sign * self_count

    def remove(self, word):
        """Takes `word` out of its class; returns what `gains` and `insert` need."""
        right, left, self_count = self._neighbours(word)
        self._apply(word, self.class_of[word], right, left, self_count, -1)
        return right, left, self_count

    def gains(self, word, right, left, self_count):
        """The change of LL when `word` (removed) joins each class, up to a constant: only
        the differences between classes count."""
        m = self.matrix
        rows, columns = np.flatnonzero(right), np.flatnonzero(left)
        block = m[:, rows]
        gain = (xlogx(block + right[rows]) - xlogx(block)).sum(axis=1)  # row k gains right
        block = m[columns, :]
        gain += (xlogx(block + left[columns, None]) - xlogx(block)).sum(axis=0)  # column k gains left
        diagonal = np.diagonal(m)
        # cell (k, k) was counted in both sums above: count it once, with the self-bigrams
        gain += (xlogx(diagonal + right + left + self_count) - xlogx(diagonal + right)
                 - xlogx(diagonal + left) + xlogx(diagonal))
        # class totals: the bigrams into and out of the word come back to every class
        # (the same for every k, left out); class k also gets the word's own totals
        before, after = m.sum(axis=1) + left, m.sum(axis=0) + right
        gain -= xlogx(before + self.word_before[word]) - xlogx(before)
        gain -= xlogx(after + self.word_after[word]) - xlogx(after)
        return gain

    def insert(self, word, target, right, left, self_count):
        self._apply(word, target, right, left, self_count, +1)
        self.class_of[word] = target


def initial_classes(frequency_order, num_classes, fixed, unused):
    """Words by falling frequency dealt to the classes in turn (word of rank r to class
    r mod K); the `fixed` words (`<s>`, `</s>`) get classes K, K+1, .. of their own and the
    `unused` ones (never seen, no bigrams) one class after those."""
    class_of = np.zeros(len(frequency_order), dtype=np.int64)
    skip = set(fixed) | set(unused)
    movable = [w for w in frequency_order if w not in skip]
    class_of[movable] = np.arange(len(movable)) % num_classes
    for i, w in enumerate(fixed):
        class_of[w] = num_classes + i
    class_of[list(unused)] = num_classes + len(fixed)
    return class_of, np.array(movable, dtype=np.int64)


def exchange(bigrams, counts, num_classes, fixed, passes=10, seed=0, tolerance=1e-4, progress=None, log=None):
    """Classes of the words by the exchange algorithm: `counts` (word frequencies) order
    the initial deal, `fixed` words keep classes of their own, words never counted stay in
    one class of their own; each pass visits the words in an order drawn from `seed`; stops
    after `passes` or when a pass gains less than `tolerance` (relatively).
    `progress(words, pass)` may wrap a pass (a bar), `log(dict)` receives each pass's
    likelihood. Returns class_of (word -> 0..K-1; fixed and unused words K and above)
    and the per-pass history."""
    counts = np.asarray(counts)
    unused = [w for w in np.flatnonzero(counts == 0).tolist() if w not in set(fixed)]
    movable = bigrams.size - len(fixed) - len(unused)
    if not 1 <= num_classes <= movable:
        raise ParameterError(f"{{num_classes}} must be between 1 and the {movable} words to cluster, got {num_classes}")
    frequency_order = np.lexsort((np.arange(bigrams.size), -counts))
    class_of, words = initial_classes(frequency_order, num_classes, fixed, unused)
    total = num_classes + len(fixed) + 1
    state = ClassBigramState(bigrams, class_of, total)
    allowed = np.zeros(total, dtype=bool)
    allowed[:num_classes] = True
    rng = np.random.default_rng(seed)
    history = [{"pass": 0, "log_likelihood": state.log_likelihood(), "moved": 0}]
    if log:
        log(history[-1])
    for number in range(1, passes + 1):
        moved = 0
        order = rng.permutation(words)
        for word in (progress(order, number) if progress else order):
            source = state.class_of[word]
            right, left, self_count = state.remove(word)
            gain = np.where(allowed, state.gains(word, right, left, self_count), -math.inf)
            # stay unless another class gains strictly more
            target = int(np.argmax(gain)) if gain.max() > gain[source] + 1e-9 else source
            state.insert(word, target, right, left, self_count)
            moved += target != source
        history.append({"pass": number, "log_likelihood": state.log_likelihood(), "moved": int(moved)})
        if log:
            log(history[-1])
        change = history[-1]["log_likelihood"] - history[-2]["log_likelihood"]
        if moved == 0 or change <= tolerance * abs(history[-2]["log_likelihood"]):
            break
    return state.class_of, history
