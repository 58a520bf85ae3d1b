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


MAX_MERGING_WORDS = 2000  # Brown's merging costs O(V^3) to start


def _pair_gain(x, y):
    """G(x, y) = f(x + y) - f(x) - f(y), element-wise (broadcast)."""
    return xlogx(x + y) - xlogx(x) - xlogx(y)


def _merge_losses(m, pairs_of=None):
    """LL change of merging each pair of classes (a, b) (for a in `pairs_of`, else every
    a), from the class bigram matrix `m` (alive classes only)."""
    n = len(m)
    first = np.arange(n) if pairs_of is None else np.asarray(pairs_of)
    row_part = np.zeros((len(first), n))
    column_part = np.zeros((len(first), n))
    for c in range(n):
        row_part += _pair_gain(m[first, c][:, None], m[None, :, c])
        column_part += _pair_gain(m[c, first][:, None], m[None, c, :])
    a, b = first[:, None], np.arange(n)[None, :]
    # the cells (a, a), (a, b), (b, a), (b, b) were counted as columns and rows a, b: count them once
    row_part -= _pair_gain(m[a, a], m[b, a]) + _pair_gain(m[a, b], m[b, b])
    column_part -= _pair_gain(m[a, a], m[a, b]) + _pair_gain(m[b, a], m[b, b])
    block = xlogx(m[a, a] + m[a, b] + m[b, a] + m[b, b]) - xlogx(m[a, a]) - xlogx(m[a, b]) - xlogx(m[b, a]) \
        - xlogx(m[b, b])
    before, after = m.sum(axis=1), m.sum(axis=0)
    return (row_part + column_part + block - _pair_gain(before[a], before[b]) - _pair_gain(after[a], after[b]))


def brown_merging(bigrams, counts, num_classes, fixed, progress=None, log=None):
    """Classes by Brown et al. (1992)'s bottom-up merging (SRILM's ngram-class -full):
    every word its own class, then again and again the two classes whose merge loses the
    least training likelihood, until `num_classes` remain. The merge losses are kept in a
    table and updated in O(n^2) after each merge; starting it costs O(V^3), so at most
    MAX_MERGING_WORDS words. Returns class_of as `exchange` does, and the history."""
    counts = np.asarray(counts)
    unused = [w for w in np.flatnonzero(counts == 0).tolist() if w not in set(fixed)]
    words = np.array([w for w in range(bigrams.size) if w not in set(fixed) and w not in set(unused)])
    if not 1 <= num_classes <= len(words):
        raise ParameterError(f"{{num_classes}} must be between 1 and the {len(words)} words to cluster, "
                             f"got {num_classes}")
    if len(words) > MAX_MERGING_WORDS:
        raise ParameterError(f"bottom-up merging of {len(words)} words costs O(V^3): at most {MAX_MERGING_WORDS} "
                             "(the exchange algorithm takes any number)")
    class_of = np.empty(bigrams.size, dtype=np.int64)
    class_of[words] = np.arange(len(words))
    for i, w in enumerate(fixed):
        class_of[w] = len(words) + i
    class_of[unused] = len(words) + len(fixed)
    state = ClassBigramState(bigrams, class_of, len(words) + len(fixed) + 1)
    m = state.matrix
    alive = np.zeros(len(m), dtype=bool)
    alive[:len(words)] = True
    losses = _merge_losses(m)
    history = [{"classes": len(words), "log_likelihood": state.log_likelihood()}]
    steps = range(len(words) - num_classes)
    for _ in (progress(steps, 0) if progress else steps):
        candidates = np.where(alive[:, None] & alive[None, :] & np.triu(np.ones_like(alive[:, None] & alive), 1),
                              losses, -np.inf)
        i, j = np.unravel_index(int(np.argmax(candidates)), candidates.shape)
        old = m.copy()
        m[i, :] += m[j, :]
        m[:, i] += m[:, j]
        m[j, :] = 0
        m[:, j] = 0
        alive[j] = False
        class_of[class_of == j] = i
        # pairs away from i and j: only their terms in rows and columns i, j change
        others = alive.copy()
        others[i] = False
        x = np.flatnonzero(others)
        ax, bx = x[:, None], x[None, :]
        change = (_pair_gain(m[ax, i], m[bx, i]) + _pair_gain(m[i, ax], m[i, bx])
                  - _pair_gain(old[ax, i], old[bx, i]) - _pair_gain(old[ax, j], old[bx, j])
                  - _pair_gain(old[i, ax], old[i, bx]) - _pair_gain(old[j, ax], old[j, bx]))
        losses[ax, bx] += change
        fresh = _merge_losses(m, [i])[0]
        losses[i, :] = fresh
        losses[:, i] = fresh
        remaining = int(alive.sum())
        if remaining == num_classes or (remaining - num_classes) % 100 == 0:  # LL costs O(n^2): now and then
            history.append({"classes": remaining, "log_likelihood": state.log_likelihood()})
            if log:
                log(history[-1])
    alive_ids = np.flatnonzero(alive)
    renumber = np.full(len(m), -1, dtype=np.int64)
    renumber[alive_ids] = np.arange(len(alive_ids))
    result = np.where(class_of < len(words), renumber[np.minimum(class_of, len(m) - 1)], 0)
    result = np.where(class_of >= len(words), num_classes + (class_of - len(words)), result)
    return result, history
