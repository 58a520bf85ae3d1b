"""Counts larger than memory written as NgramCounts.write writes them: SRILM's order of
`ngram-count -write -sort`, each n-gram followed by its extensions, words compared as
byte strings.

Each order is sorted by (its prefix's place in the order below, its word's byte rank)
by sorted runs on disk, which gives every n-gram its place among its order. The line of
an n-gram is then its prefix's line + 1 + the lines its earlier siblings and their
extensions take: the size of each n-gram's subtree is summed from the top order down,
the lines from the unigrams up, and the lines are put in place a window at a time."""
import os
import shutil

import numpy as np

from .._ext.count_kernels import format_count_lines
from ..errors import NplmError
from ..io import open_output
from .counts import byte_ranks
from .row_files import RowFiles, WorkingFile, declared
from .sorted_runs import SortedRuns
from .stream import NO_ROW, prefix_rows
from .word_slots import WordSlots

# NgramCounts.write's peak beyond the counts (KN5 of Zipf text: 165 bytes), with them
IN_MEMORY_WRITE_BYTES_PER_NGRAM = 200
ROW_BYTES = 104  # of the largest pieces held at once: a sort's records, order and scratch, a window's rows and text
# the working files (all removed with their folder at the end), rows in the byte order of the n-grams
SORTED_FILES = declared(
    WorkingFile("sortedgrams", np.int32, "sort", ("lines",), words=True),
    WorkingFile("sortedcounts", np.int64, "sort", ("lines",)),
    WorkingFile("parent", np.int64, "sort", ("lines",)),  # the prefix's place among order k-1
    WorkingFile("place", np.int64, "sort", ("sort",)),  # each store row's place in the sorted order
    WorkingFile("subtree", np.int64, "subtree sizes", ("lines",)),  # the lines an n-gram and its extensions take
    WorkingFile("line", np.int64, "lines", ("lines",)))  # each n-gram's line in the file


def write_counts_streamed(store, path, memory, folder):
    """`store`'s counts (a CountStore, closed under prefixes as the readers check) to the
    counts file `path` within about `memory` bytes, working files in a new folder in
    `folder`."""
    work = os.path.join(folder, "sorted-counts")
    os.makedirs(work)
    _SortedCounts(store, memory, work).write(path)


class _SortedCounts:
    def __init__(self, store, memory, folder):
        self.store, self.files, self.order, self.sizes = store, RowFiles(folder, SORTED_FILES), store.order, store.sizes
        self.rows = max(1, memory // 4 // ROW_BYTES)
        self.rank = byte_ranks(store.vocab.words).astype(np.int64)

    def write(self, path):
        try:
            for k in range(1, self.order + 1):
                self._sort(k)
            for k in range(self.order - 1, 0, -1):
                self._subtree_sizes(k)
            for k in range(1, self.order + 1):
                self._lines(k)
            self._write_lines(path)
        finally:  # the working files go at once
            shutil.rmtree(self.files.folder, ignore_errors=True)

    def _grams(self, k, start, stop):
        return self.store.read(k, start, stop)[0]

    def _sort(self, k):
        """`sortedgrams{k}`, `sortedcounts{k}` and `parent{k}` (the prefix's place among
        order k-1) in the order's byte order; `place{k}`: each row's place in it."""
        vocab_size, size = len(self.store.vocab), self.sizes[k - 1]
        record = np.dtype([("key", "<i8"), ("row", "<i8"), ("count", "<i8"), ("grams", "<i4", (k,))])

        def records():
            chunks = (((start, min(start + self.rows, size), None, self.store.read_grams(1, start, start + self.rows))
                       for start in range(0, size, self.rows)) if k == 1
                      else prefix_rows(self._grams, k, size, self.rows, self.rows))
            for start, stop, prefix, grams in chunks:
                counts = self.store.read_counts(k, start, stop)
                out = np.empty(len(grams), dtype=record)
                out["key"] = self.rank[grams[:, -1]]
                if k > 1:
                    if np.any(prefix == NO_ROW):  # the lines would not be a permutation
                        raise NplmError(f"counts are not closed under prefixes: a {k}-gram's prefix has no count")
                    out["key"] += self._read_at("place", k - 1, prefix) * vocab_size
                out["row"], out["count"], out["grams"] = np.arange(start, stop), counts, grams
                yield out

        def sorted_pieces():
            """The order's records in byte order written out; for the order above, each
            row's place (records keyed by row, to be sorted by it)."""
            place = 0
            for piece in SortedRuns(records(), self.rows, self.files.folder, f"sort{k}").pieces():
                grams_out.append(np.ascontiguousarray(piece["grams"]))
                counts_out.append(np.ascontiguousarray(piece["count"]))
                parent_out.append(piece["key"] // vocab_size)
                inverse = np.empty(len(piece), dtype=[("key", "<i8"), ("place", "<i8")])
                inverse["key"], inverse["place"] = piece["row"], np.arange(place, place + len(piece))
                place += len(piece)
                yield inverse

        with self.files.writer("sortedgrams", k) as grams_out, self.files.writer("sortedcounts", k) as counts_out, \
                self.files.writer("parent", k) as parent_out:
            if k == self.order:  # no order above asks for places
                for _ in sorted_pieces():
                    pass
                return
            by_row = SortedRuns(sorted_pieces(), self.rows, self.files.folder, f"invert{k}")
        with self.files.writer("place", k) as out:
            for piece in by_row.pieces():
                out.append(np.ascontiguousarray(piece["place"]))

    def _read_at(self, name, k, rows):
        """Values of `name{k}` (int64) at nondecreasing rows: the span read, or the rows
        alone when they are sparse in it."""
        if not len(rows):
            return np.zeros(0, dtype=np.int64)
        low, high = int(rows[0]), int(rows[-1]) + 1
        if high - low <= 4 * len(rows) + self.rows:
            return self.files.read(name, k, low, high)[rows - low]
        return self.files.read_at(name, k, rows)

    def _subtree(self, k, start, stop):
        """How many lines the subtrees of sorted rows start..stop-1 of order k take."""
        if k == self.order:
            return np.ones(stop - start, dtype=np.int64)
        return self.files.read("subtree", k, start, stop)

    def _subtree_sizes(self, k):
        """`subtree{k}`: 1 + the subtree sizes of each n-gram's extensions (the order
        above, sorted by parent)."""
        size = self.sizes[k - 1]
        with self.files.writer("subtree", k) as out:
            for start in range(0, size, self.rows):
                out.append(np.ones(min(self.rows, size - start), dtype=np.int64))
        for start in range(0, self.sizes[k], self.rows):
            stop = min(start + self.rows, self.sizes[k])
            parent = self.files.read("parent", k + 1, start, stop)
            starts = np.concatenate([[0], np.flatnonzero(np.diff(parent)) + 1])
            sums, parents = np.add.reduceat(self._subtree(k + 1, start, stop), starts), parent[starts]
            low = int(parents[0])
            region = self.files.mapped("subtree", k, start=low, rows=int(parents[-1]) + 1 - low)
            region[parents - low] += sums
            region.flush()
            del region

    def _lines(self, k):
        """`line{k}`: each sorted row's line in the file: its prefix's line + 1 + the
        subtrees of its earlier siblings (for 1-grams, of the earlier 1-grams)."""
        open_parent, carried, total = -1, 0, 0
        with self.files.writer("line", k) as out:
            for start in range(0, self.sizes[k - 1], self.rows):
                stop = min(start + self.rows, self.sizes[k - 1])
                sub = self._subtree(k, start, stop)
                before = np.cumsum(sub) - sub
                if k == 1:
                    out.append(total + before)
                    total += int(sub.sum())
                    continue
                parent = self.files.read("parent", k, start, stop)
                starts = np.concatenate([[0], np.flatnonzero(np.diff(parent)) + 1])
                within = before - np.repeat(before[starts], np.diff(np.append(starts, len(parent))))
                if parent[0] == open_parent:  # a family that began in the chunk before
                    within[:starts[1] if len(starts) > 1 else len(parent)] += carried
                open_parent, carried = int(parent[-1]), int(within[-1] + sub[-1])
                out.append(self._read_at("line", k - 1, parent) + 1 + within)

    def _write_lines(self, path):
        """The lines, a window of line numbers at a time: the rows of each order whose
        lines fall in it (a run of that order's sorted rows) put in place and printed."""
        words = WordSlots(self.store.vocab.words)
        total, cursors = sum(self.sizes), [0] * self.order
        with open_output(path, binary=True) as out:
            for first in range(0, total, self.rows):
                last = min(first + self.rows, total)
                grams = np.full((last - first, self.order), -1, dtype=np.int32)
                counts = np.zeros(last - first, dtype=np.int64)
                for k in range(1, self.order + 1):
                    cursor = cursors[k - 1]
                    lines = self.files.read("line", k, cursor, cursor + last - first)
                    taken = int(np.searchsorted(lines, last))
                    at = lines[:taken] - first
                    grams[at, :k] = self.files.read("sortedgrams", k, cursor, cursor + taken)
                    counts[at] = self.files.read("sortedcounts", k, cursor, cursor + taken)
                    cursors[k - 1] = cursor + taken
                out.write(format_count_lines(grams, counts, words))
