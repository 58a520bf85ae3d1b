"""Records larger than memory sorted by their int64 key: sorted runs on disk, merged
by a heap of the runs (merge_records) a block of each at a time (the out-of-core ARPA
writer's and counts writer's sorts)."""
import os

import numpy as np

from .._ext.ngram_sorting import merge_records
from ..scratch import ScratchFile


def sorted_records(pieces, rows, folder, name):
    """The records of `pieces` (structured arrays whose first field is an int64 `key`) in
    the order of their keys, in pieces (see SortedRuns)."""
    return SortedRuns(pieces, rows, folder, name).pieces()


class SortedRuns:
    """Records sorted by their `key` field: made into sorted runs of `rows` records on
    disk (named from `name` in `folder`) when made, merged by `pieces()`; no file when they
    fit in one run."""

    def __init__(self, pieces, rows, folder, name):
        self.runs, self.batch, self.folder = [], None, folder
        pending, held = [], 0
        for piece in pieces:
            pending.append(piece)
            held += len(piece)
            if held >= rows:
                self._spill(pending, name)
                pending, held = [], 0
        if pending and not self.runs:
            self.batch = _sorted(np.concatenate(pending))
        elif pending:
            self._spill(pending, name)
        self.block = max(1, rows // max(1, len(self.runs)))

    def _spill(self, pending, name):
        batch = _sorted(np.concatenate(pending))
        if batch.dtype.fields["key"] != (np.dtype("<i8"), 0):  # merge_records reads the first 8 bytes
            raise ValueError("sorted runs need records whose first field is an int64 key")
        path = os.path.join(self.folder, f"{name}.run{len(self.runs)}")
        with ScratchFile(path) as out:
            out.append(batch)
        self.runs.append((path, len(batch), batch.dtype))

    def pieces(self):
        if self.batch is not None:
            yield self.batch
            return
        yield from _merged(self.runs, self.block)
        for path, _, _ in self.runs:
            os.remove(path)


def _sorted(records):
    return np.take(records, np.argsort(records["key"]))  # 7x faster than records[order] for structured records


def _merged(runs, block):
    """Sorted runs on disk merged, `block` records of each read at a time: what every
    run holds up to the smallest of their last keys in memory goes out, sorted."""
    places = [0] * len(runs)
    buffers = [None] * len(runs)
    while True:
        for i, (path, size, dtype) in enumerate(runs):
            if (buffers[i] is None or len(buffers[i]) == 0) and places[i] < size:
                count = min(block, size - places[i])
                buffers[i] = np.fromfile(path, dtype=dtype, count=count, offset=places[i] * dtype.itemsize)
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
