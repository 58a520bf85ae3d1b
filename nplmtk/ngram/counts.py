"""Counting n-grams (SRILM's convention: one `<s>` before and one `</s>` after each
sentence, every n-gram of orders 1..N inside it), and SRILM counts files."""
import numpy as np

from .._ext.count_kernels import NgramHashCounter
from .._ext.ngram_sorting import sort_counted
from ..errors import InputError, ParameterError
from .._ext.text_kernels import count_line_words, encode_count_lines
from ..io import check_words, comes_once, max_token_bytes, open_output, read_bytes, read_text_blocks
from ..text import split_words
from ..threads import in_order
from .index import NgramIndex

MAX_COUNT = 2 ** 63 - 1  # counts are int64
MAX_ORDER = 10
COUNTS_BLOCK_BYTES = 16 << 20  # a counts file read a block of lines at a time: about 5x its bytes in tables


def check_order(order, parameter="order"):
    """Refuses an n-gram order outside 1..MAX_ORDER, naming the `parameter` that set it."""
    if not 1 <= order <= MAX_ORDER:
        raise ParameterError(f"{{{parameter}}} must be between 1 and {MAX_ORDER}, got {order}")


class NgramCounts:
    """Counts of orders 1..N: `grams[k-1]` (n_k, k) int32 sorted rows, `counts[k-1]`
    int64, over `vocab`. Words outside the vocabulary are counted as `<unk>`. `suffix`,
    when known (counts of a text), is as estimate.suffix_positions gives it."""

    def __init__(self, vocab, grams, counts, keys=None, suffix=None):
        self.vocab = vocab
        self.grams = grams
        self.counts = counts
        self.index = NgramIndex(len(vocab), grams, keys)
        self.suffix = suffix

    @property
    def order(self):
        return len(self.grams)

    @classmethod
    def from_corpus(cls, corpus, order):
        check_order(order)
        counter = NgramHashCounter(order, len(corpus.vocab))
        _count(counter, corpus)
        counts = cls.from_tables(corpus.vocab, counter.tables())
        counts.check_orders(corpus.name)
        return counts

    @classmethod
    def from_tables(cls, vocab, tables):
        """The counts of NgramHashCounter.tables(): each order's entries sorted by (rank of
        their prefix in the order below, last word), which is the lexicographic order of
        their words and makes their keys NgramIndex's; the entries' suffixes give `suffix`."""
        grams, counts, keys, suffix, rank = [], [], [], [None], None
        for entry_keys, entry_counts, entry_suffixes in tables:
            rows, sorted_keys, sorted_counts, rank, suffix_rows = sort_counted(
                entry_keys, entry_counts, entry_suffixes, rank, grams[-1] if grams else None, len(vocab))
            grams.append(rows)
            counts.append(sorted_counts)
            keys.append(sorted_keys)
            if suffix_rows is not None:
                suffix.append(suffix_rows)
        return cls(vocab, grams, counts, keys, suffix)

    def check_orders(self, source):
        check_orders([len(grams) for grams in self.grams], source)

    @classmethod
    def read(cls, path, vocab, limit_vocab=False):
        """An SRILM counts file: `w1 ... wk<TAB>count` per line, any order of lines.
        Words outside `vocab` are counted as `<unk>`, or with `limit_vocab` their n-grams
        are left out (SRILM's -limit-vocab); repeated n-grams are summed."""
        by_order = {}
        for tables in read_counts_blocks(path, vocab, limit_vocab):
            for k, table in tables.items():
                by_order.setdefault(k, []).append(table)
        check_read_orders(by_order, path)
        grams, counts, index_so_far = [], [], None
        for k in range(1, max(by_order) + 1):
            rows, values = (np.concatenate(parts) for parts in zip(*by_order[k]))
            merged, summed = _sum_duplicates(rows, values, vocab, index_so_far, source=path)
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
        with open_output(path) as out:
            out.writelines(lines[row] for row in rows.tolist())


def _count(counter, corpus):
    """Adds the n-grams of `corpus` to `counter`."""
    check_ids(corpus)
    counter.add(corpus.ids, corpus.offsets, corpus.vocab.bos, corpus.vocab.eos, corpus.vocab.unk)


def check_ids(corpus):
    """Refuses ids beyond the vocabulary: the counting kernel does not check them."""
    if len(corpus.ids) and corpus.ids.max() >= len(corpus.vocab):
        raise ParameterError(f"{{ids}} reach {corpus.ids.max()}, beyond the vocabulary of {len(corpus.vocab)}")


def check_orders(sizes, source):
    """Refuses counts with no n-grams of some order (`sizes`: how many of each)."""
    for k, size in enumerate(sizes, 1):
        if size == 0:
            raise InputError(f"no sentence is long enough for {k}-grams", path=source)


def read_counts_blocks(path, vocab, limit_vocab=False, block_bytes=COUNTS_BLOCK_BYTES):
    """An SRILM counts file a block of lines at a time (any order of lines; so a file
    larger than memory streams through): per block, {k: (rows, counts)}, each order's rows
    sorted and the counts of equal rows summed. Words outside `vocab` are `<unk>`, or
    with `limit_vocab` their n-grams are left out (SRILM's -limit-vocab)."""
    missing, longest = (-1 if limit_vocab else vocab.unk), max_token_bytes()

    def numbered_blocks():
        first_line = 1
        for data in read_text_blocks(path, block_bytes=block_bytes):
            yield data, first_line
            first_line += data.count(b"\n")

    def tables_of(block):
        data, first_line = block
        ids, lengths, counts, bad = encode_count_lines(data, vocab.encoded_words, missing, MAX_ORDER, longest)
        if bad >= 0:
            _refuse_line(data, bad, path, first_line + bad, longest)
        starts = np.zeros(len(lengths), dtype=np.int64)
        np.cumsum(lengths[:-1], out=starts[1:])
        tables = {}
        for k in np.unique(lengths).tolist():
            lines = np.flatnonzero(lengths == k)
            rows = ids[starts[lines][:, None] + np.arange(k)]
            values = counts[lines]
            if limit_vocab:
                inside = np.all(rows >= 0, axis=1)
                rows, values = rows[inside], values[inside]
            if len(rows):
                tables[k] = _sorted_summed(rows, values, path)
        return tables

    yield from in_order(tables_of, numbered_blocks())  # two blocks side by side: the kernel and sorts let go of the GIL


def check_read_orders(orders, path):
    """Refuses a counts file with no counts (`orders`: those it has), or without some
    order below its highest."""
    if not orders:
        raise InputError("no counts", path=path)
    missing = [k for k in range(1, max(orders) + 1) if k not in orders]
    if missing:
        raise InputError(f"has {max(orders)}-grams but no {missing[0]}-grams", path=path)


def _refuse_line(data, index, path, number, longest):
    """The error of line `index` of the block `data` (line `number` of `path`), which the
    kernel found is not `w1 ... wk count` with a count in 0 .. 2^63 - 1."""
    line = data.split(b"\n")[index].decode("utf-8")
    fields = split_words(line)
    check_words(line, fields, path, number, longest)
    parse_count(fields, path, number)
    raise InputError(f"count '{fields[-1]}' is not an integer", path=path, line=number)  # say, 1_000


def _sorted_summed(rows, counts, source):
    """n-gram rows of one order sorted, the counts of equal rows summed."""
    order = np.lexsort(rows.T[::-1])
    rows, counts = rows[order], counts[order]
    starts = np.flatnonzero(np.concatenate([[True], np.any(rows[1:] != rows[:-1], axis=1)]))
    summed = np.add.reduceat(counts, starts)
    # a sum past 2^63 - 1 wraps in int64: the float sums tell
    if np.any(summed < 0) or np.any(np.add.reduceat(counts.astype(np.float64), starts) >= 2.0 ** 63):
        raise InputError(f"{rows.shape[1]}-gram counts that sum above 2^63 - 1", path=source)
    return rows[starts], summed


def counted_words(path):
    """The words of a counts file's n-grams in the order they first come (each once a
    block of lines): a vocabulary for counts read without one."""
    longest, first_line, seen = max_token_bytes(), 1, set()
    if comes_once(path):
        read_bytes(path)  # stdin or a pipe kept for the pass that reads its counts
    blocks = ((data, list(seen)) for data in read_text_blocks(path, block_bytes=COUNTS_BLOCK_BYTES))
    for data, (words, bad) in in_order(lambda block: (block[0], count_line_words(block[0], longest, block[1])),
                                       blocks):
        if bad >= 0:
            line = data.split(b"\n")[bad].decode("utf-8")
            check_words(line, split_words(line)[:-1], path, first_line + bad, longest)
        first_line += data.count(b"\n")
        for word in words:
            if word not in seen:
                seen.add(word)
                yield word.decode("utf-8")


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
    """Sort n-gram rows of one order, summing the values of equal rows; each row's prefix
    must be a row of the order below (`lower_index`)."""
    k = rows.shape[1]
    if k > 1:
        prefix = lower_index.find(rows[:, :-1])
        if np.any(prefix < 0):
            bad = rows[np.argmax(prefix < 0)]
            raise InputError(f"{k}-gram '{' '.join(vocab.words[w] for w in bad)}' has no {k - 1}-gram count "
                             "for its prefix", path=source)
    return _sorted_summed(rows, values, source)  # lexicographic: the order of NgramIndex's keys
