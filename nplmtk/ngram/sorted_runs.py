"""Records larger than memory sorted by their int64 key: sorted runs on disk, merged
by a heap of the runs (merge_records) a block of each at a time (the out-of-core ARPA
writer's and counts writer's sorts); more runs than a merge reads at once in blocks of
MIN_BLOCK_RECORDS are merged a group at a time first, level by level, as lmplz and sort do."""
import os

import numpy as np

from .._ext.ngram_sorting import bucket_order, key_order, merge_records
from ..scratch import ScratchFile
from ..threads import raise_if_stopping

# Each step of a merge reads a block of each run and takes a Python step per run: with
# blocks of a few records (a thousand runs in a small memory) the merge of in-order runs
# took time quadratic in the records (200k one-word lines at -memory 1M: over 120 s).
MIN_BLOCK_RECORDS = 1 << 10
MAX_FAN_IN = 64  # each step's Python work is per run: at most 64 of them for rows / 64 records out


def sorted_records(pieces, rows, folder, name):
    """The records of `pieces` (structured arrays whose first field is an int64 `key`) in
    the order of their keys, in pieces (see SortedRuns)."""
    return SortedRuns(pieces, rows, folder, name).pieces()


class SortedRuns:
    """Records sorted by their `key` field: made into sorted runs of `rows` records, one
    after another in one file on disk (named from `name` in `folder`) when made, merged
    by `pieces()`; no file when they fit in one run. One file, not one per run: opening a
    file cost 5 ms on a busy machine, and a small memory makes runs by the thousand."""

    def __init__(self, pieces, rows, folder, name):
        self.runs, self.batch, self.rows, self.dtype = [], None, rows, None  # runs: (first record, records)
        self.path, self.out = os.path.join(folder, f"{name}.runs"), None
        pending, held = [], 0
        try:
            for piece in pieces:
                pending.append(piece)
                held += len(piece)
                if held >= rows:
                    self._spill(pending)
                    pending, held = [], 0
            if pending and not self.runs:
                self.batch = _sorted(np.concatenate(pending))
            elif pending:
                self._spill(pending)
        finally:
            if self.out is not None:
                self.out.close()

    def _spill(self, pending):
        batch = _sorted(np.concatenate(pending))
        if batch.dtype.fields["key"] != (np.dtype("<i8"), 0):  # merge_records reads the first 8 bytes
            raise ValueError("sorted runs need records whose first field is an int64 key")
        if self.out is None:
            self.out, self.dtype, self.written = ScratchFile(self.path), batch.dtype, 0
        self.out.append(batch)
        self.runs.append((self.written, len(batch)))
        self.written += len(batch)

    def pieces(self):
        if self.batch is not None:
            yield self.batch
        if not self.runs:  # no records (an order that pruning emptied), or one batch
            return
        fan_in = max(2, min(MAX_FAN_IN, self.rows // MIN_BLOCK_RECORDS))
        path, runs, level = self.path, self.runs, 0
        while len(runs) > fan_in:  # a level: consecutive groups merged (equal keys keep their order)
            level += 1
            merged_path, merged_runs, written = f"{self.path}{level}", [], 0
            with open(path, "rb", buffering=0) as source, ScratchFile(merged_path) as out:
                for first in range(0, len(runs), fan_in):
                    group = runs[first:first + fan_in]
                    for piece in _merged(source, group, self.dtype, max(1, self.rows // len(group))):
                        out.append(piece)
                    size = sum(records for _, records in group)
                    merged_runs.append((written, size))
                    written += size
            os.remove(path)
            path, runs = merged_path, merged_runs
        with open(path, "rb", buffering=0) as source:
            yield from _merged(source, runs, self.dtype, max(1, self.rows // len(runs)))
        os.remove(path)


class BucketedRuns:
    """Records sorted by their `key` field by distribution, for keys whose spread a sample
    gave: each piece's records grouped by the bucket that `bounds` (sorted keys, a bucket
    from each bound up to the next) puts them in, written one piece after another in one
    file; `pieces()` reads each bucket's sections of every piece and sorts them in memory,
    bucket after bucket. Every record is written and read once, where merged sorted runs
    are read and written once a level and take a heap step a record (the ARPA writer's
    sorts at 200M words: two levels). A bucket larger than OVERFULL times `rows` (a
    sample that missed a crowd of keys) is sorted by SortedRuns instead."""

    OVERFULL = 2

    def __init__(self, pieces, bounds, rows, folder, name):
        self.bounds, self.rows, self.folder, self.name = np.asarray(bounds, dtype=np.int64), rows, folder, name
        self.path, self.dtype, self.sections = os.path.join(folder, f"{name}.buckets"), None, []
        buckets = len(self.bounds) + 1
        out, written = None, 0
        try:
            for piece in pieces:
                counts = np.zeros(buckets, dtype=np.int64)
                order = bucket_order(np.ascontiguousarray(piece["key"]), self.bounds, counts)
                if out is None:
                    out, self.dtype = ScratchFile(self.path), piece.dtype
                out.append(np.take(piece, order))
                starts = np.concatenate([[0], np.cumsum(counts)[:-1]]) + written
                self.sections.append((starts, counts))
                written += len(piece)
        finally:
            if out is not None:
                out.close()

    def pieces(self):
        """The records in the order of their keys (equal keys in no set order, as in
        SortedRuns' runs), a bucket at a time."""
        for records, in_order in self._buckets():
            yield records if in_order else _sorted(records)

    def buckets(self):
        """Each bucket's records as they lie, bucket after bucket (a bucket past OVERFULL
        times `rows` in sorted pieces): for a reader that needs no sort within a bucket
        (keys that are a permutation of a range, bounds of equal ranges: a scatter puts
        each in its place)."""
        for records, _ in self._buckets():
            yield records

    def _buckets(self):
        """(records, whether they are in the order of their keys), a bucket at a time."""
        if not self.sections:
            return
        with open(self.path, "rb", buffering=0) as source:
            for bucket in range(len(self.bounds) + 1):
                raise_if_stopping()  # the process ends on a signal: between two buckets
                sections = [(int(starts[bucket]), int(counts[bucket])) for starts, counts in self.sections
                            if counts[bucket]]
                size = sum(count for _, count in sections)
                if size > self.OVERFULL * self.rows:
                    pieces = (_read_records(source, self.dtype, first, count) for first, count in sections)
                    for piece in SortedRuns(pieces, self.rows, self.folder, f"{self.name}-{bucket}").pieces():
                        yield piece, True
                    continue
                records, at = np.empty(size, dtype=self.dtype), 0
                for first, count in sections:
                    _read_records(source, self.dtype, first, count, records[at:at + count])
                    at += count
                if size:
                    yield records, False
        os.remove(self.path)  # (a run stopped early leaves it to the scratch folder's removal)


def _sorted(records):
    # take: 7x faster than records[order] for structured records
    return np.take(records, key_order(np.ascontiguousarray(records["key"])))


def _read_records(source, dtype, first, count, records=None):
    """Records first..first+count-1 of the open file `source` (one pread, no open), into
    `records` when given."""
    records = np.empty(count, dtype=dtype) if records is None else records
    view, offset = memoryview(records.view(np.uint8)), first * dtype.itemsize
    while len(view):
        done = os.preadv(source.fileno(), [view], offset)
        if not done:
            raise EOFError(f"{source.name}: a sorted run ends early")
        view, offset = view[done:], offset + done
    return records


def _merged(source, runs, dtype, block):
    """Sorted runs of the file `source` ((first record, records) each) merged, `block`
    records of each read at a time: what every run holds up to the smallest of their
    last keys in memory goes out, sorted."""
    places = [first for first, _ in runs]
    ends = [first + size for first, size in runs]
    buffers = [None] * len(runs)
    while True:
        raise_if_stopping()
        for i, end in enumerate(ends):
            if (buffers[i] is None or len(buffers[i]) == 0) and places[i] < end:
                count = min(block, end - places[i])
                buffers[i] = _read_records(source, dtype, places[i], count)
                places[i] += count
        live = [b for b in buffers if b is not None and len(b)]
        if not live:
            return
        cutoff = min(b["key"][-1] for b in live)
        taken = []
        for i, buffer in enumerate(buffers):
            if buffer is None or not len(buffer):
                continue
            end = np.searchsorted(buffer["key"], cutoff, side="right")
            taken.append(buffer[:end])
            buffers[i] = buffer[end:]
        yield _merged_pieces(taken)


def _merged_pieces(pieces):
    """Sorted pieces of records merged into one sorted array (merge_records)."""
    dtype = pieces[0].dtype
    out = np.empty(sum(len(piece) for piece in pieces), dtype=dtype)
    merge_records([np.ascontiguousarray(piece).view(np.uint8) for piece in pieces], out.view(np.uint8),
                  dtype.itemsize)
    return out
