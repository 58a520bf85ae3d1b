"""Counting n-grams (SRILM's convention: one `<s>` before and one `</s>` after each
sentence, every n-gram of orders 1..N inside it), and SRILM counts files."""
import numpy as np

from .._ext.count_kernels import count_keys
from ..errors import InputError, ParameterError
from ..io import atomic_output, read_lines
from ..text import split_words
from .index import NgramIndex

MAX_COUNT = 2 ** 63 - 1  # counts are int64
MAX_ORDER = 10


def check_order(order, parameter="order"):
    """Refuses an n-gram order outside 1..MAX_ORDER, naming the `parameter` that set it."""
    if not 1 <= order <= MAX_ORDER:
        raise ParameterError(f"{{{parameter}}} must be between 1 and {MAX_ORDER}, got {order}")


class NgramCounts:
    """Counts of orders 1..N: `grams[k-1]` (n_k, k) int32 sorted rows, `counts[k-1]`
    int64, over `vocab`. Words outside the vocabulary are counted as `<unk>`."""

    def __init__(self, vocab, grams, counts, keys=None):
        self.vocab = vocab
        self.grams = grams
        self.counts = counts
        self.index = NgramIndex(len(vocab), grams, keys)

    @property
    def order(self):
        return len(self.grams)

    @classmethod
    def from_corpus(cls, corpus, order):
        check_order(order)
        vocab = corpus.vocab
        ids = np.where(corpus.ids < 0, vocab.unk, corpus.ids).astype(np.int64)
        lengths = np.diff(corpus.offsets) + 2
        starts = np.concatenate([[0], np.cumsum(lengths)])
        seq = np.empty(starts[-1], dtype=np.int64)
        seq[starts[:-1]] = vocab.bos
        seq[starts[1:] - 1] = vocab.eos
        inner = np.ones(len(seq), dtype=bool)
        inner[starts[:-1]] = False
        inner[starts[1:] - 1] = False
        seq[inner] = ids
        end = np.repeat(starts[1:], lengths)
        position = np.arange(len(seq))
        grams, counts, keys, previous = [], [], [], None
        for k in range(1, order + 1):
            valid = np.flatnonzero(position + k <= end)
            if len(valid) == 0:
                raise InputError(f"no sentence is long enough for {k}-grams", path=corpus.name)
            key = seq[valid] if k == 1 else previous[valid] * len(vocab) + seq[valid + k - 1]
            distinct, count, first, inverse = count_keys(key)
            keys.append(distinct)
            current = np.full(len(seq), -1, dtype=np.int64)  # index of the k-gram starting here
            current[valid] = inverse
            start = valid[first]
            grams.append(np.stack([seq[start + j] for j in range(k)], axis=1).astype(np.int32))
            counts.append(count.astype(np.int64))
            previous = current
        return cls(vocab, grams, counts, keys)

    @classmethod
    def merge(cls, parts):
        """Sum several count sets over one vocabulary (orders up to the largest)."""
        vocab = parts[0].vocab
        order = max(p.order for p in parts)
        grams, counts, index = [], [], None
        for k in range(1, order + 1):
            rows = np.concatenate([p.grams[k - 1] for p in parts if p.order >= k])
            values = np.concatenate([p.counts[k - 1] for p in parts if p.order >= k])
            merged, summed = _sum_duplicates(rows, values, vocab, index)
            grams.append(merged)
            counts.append(summed)
            index = NgramIndex(len(vocab), grams)
        return cls(vocab, grams, counts)

    @classmethod
    def read(cls, path, vocab, limit_vocab=False):
        """An SRILM counts file: `w1 ... wk<TAB>count` per line, any order of lines.
        Words outside `vocab` are counted as `<unk>`, or with `limit_vocab` their n-grams
        are left out (SRILM's -limit-vocab); repeated n-grams are summed."""
        by_order = {}
        index = vocab.index
        for number, line in enumerate(read_lines(path), 1):
            fields = split_words(line)
            if not fields:
                continue
            k, count = len(fields) - 1, parse_count(fields, path, number)
            if limit_vocab and any(w not in index for w in fields[:-1]):
                continue
            rows, values = by_order.setdefault(k, ([], []))
            rows.append([index.get(w, vocab.unk) for w in fields[:-1]])
            values.append(count)
        if not by_order:
            raise InputError("no counts", path=path)
        order = max(by_order)
        missing = [k for k in range(1, order + 1) if k not in by_order]
        if missing:
            raise InputError(f"has {order}-grams but no {missing[0]}-grams", path=path)
        grams, counts, index_so_far = [], [], None
        for k in range(1, order + 1):
            rows, values = by_order[k]
            merged, summed = _sum_duplicates(np.array(rows, dtype=np.int32).reshape(-1, k),
                                             np.array(values, dtype=np.int64), vocab, index_so_far,
                                             source=path)
            grams.append(merged)
            counts.append(summed)
            index_so_far = NgramIndex(len(vocab), grams)
        return cls(vocab, grams, counts)

    def write(self, path):
        """All orders in the order of SRILM's `ngram-count -write -sort`: each n-gram
        followed by its extensions, words compared as byte strings."""
        words = self.vocab.words
        rank = byte_ranks(words)
        padded = np.full((sum(len(g) for g in self.grams), self.order), -1, dtype=np.int64)
        start = 0
        for k, grams in enumerate(self.grams, 1):
            padded[start:start + len(grams), :k] = rank[grams]
            start += len(grams)
        rows = np.lexsort(padded.T[::-1])  # lexsort: last key first; -1 puts a prefix first
        lines = [f"{' '.join(words[w] for w in row)}\t{c}\n" for grams, counts in zip(self.grams, self.counts)
                 for row, c in zip(grams.tolist(), counts.tolist())]
        with atomic_output(path) as out:
            out.writelines(lines[row] for row in rows.tolist())


def parse_count(fields, path, number):
    """The count of a counts-file line split into `fields` (w1 ... wk count), checked."""
    k = len(fields) - 1
    if k < 1:
        raise InputError("expected 'w1 ... wk<TAB>count'", path=path, line=number)
    if k > MAX_ORDER:
        raise InputError(f"{k}-gram is longer than the maximum order {MAX_ORDER}", path=path, line=number)
    try:
        count = int(fields[-1])
    except ValueError:
        raise InputError(f"count '{fields[-1]}' is not an integer", path=path, line=number) from None
    if count < 0:
        raise InputError(f"negative count {count}", path=path, line=number)
    if count > MAX_COUNT:
        raise InputError(f"count {count} above 2^63 - 1", path=path, line=number)
    return count


def byte_ranks(words):
    """rank[w]: the place of word w when the words are sorted as byte strings (strcmp)."""
    encoded = [w.encode("utf-8") for w in words]
    rank = np.empty(len(encoded), dtype=np.int32)
    rank[sorted(range(len(encoded)), key=encoded.__getitem__)] = np.arange(len(encoded), dtype=np.int32)
    return rank


def _sum_duplicates(rows, values, vocab, lower_index, source="counts"):
    """Sort n-gram rows of one order, summing the values of equal rows."""
    k = rows.shape[1]
    if k == 1:
        key = rows[:, 0].astype(np.int64)
    else:
        prefix = lower_index.find(rows[:, :-1])
        if np.any(prefix < 0):
            bad = rows[np.argmax(prefix < 0)]
            raise InputError(f"{k}-gram '{' '.join(vocab.words[w] for w in bad)}' has no {k - 1}-gram count "
                             "for its prefix", path=source)
        key = prefix * len(vocab) + rows[:, -1]
    unique, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    starts = np.searchsorted(inverse[order], np.arange(len(unique)))
    summed = np.add.reduceat(values[order], starts) if len(values) else np.zeros(0, np.int64)  # exact in int64
    # a sum past 2^63 - 1 wraps in int64: the float sums tell
    if np.any(summed < 0) or np.any(np.bincount(inverse, weights=values, minlength=len(unique)) >= 2.0 ** 63):
        raise InputError(f"{k}-gram counts that sum above 2^63 - 1", path=source)
    return rows[first], summed
