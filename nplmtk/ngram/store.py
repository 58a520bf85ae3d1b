"""N-gram counts on disk: per order k, the distinct k-grams as int32 rows and their int64
counts in two flat files, rows in the lexicographic order of their word ids (the order
of NgramCounts), read back a chunk at a time. They are what counting a text larger than
memory leaves, and what the out-of-core estimate (stream.py) reads."""
import os

import numpy as np

from ..errors import NplmError
from .counts import NgramCounts


def disk_error(folder, err):
    """The error of a failed write of temporary files in `folder` (say, a full disk)."""
    return NplmError(f"cannot keep temporary files ({err.strerror or err}): set TMPDIR or -temp to a folder "
                     "with room", path=folder)


class CountStore:
    """The counts of orders 1..N in `folder`: grams{k} (sizes[k-1], k) int32 and
    counts{k} (sizes[k-1],) int64, each order's rows sorted and distinct."""

    def __init__(self, vocab, folder, sizes):
        self.vocab, self.folder, self.sizes = vocab, folder, list(sizes)

    @property
    def order(self):
        return len(self.sizes)

    def path(self, name, k):
        return os.path.join(self.folder, f"{name}{k}")

    def read(self, k, start, stop):
        """Rows start..stop-1 of order k: (grams, counts)."""
        count = max(0, min(stop, self.sizes[k - 1]) - start)
        grams = np.fromfile(self.path("grams", k), dtype=np.int32, count=count * k, offset=start * k * 4)
        counts = np.fromfile(self.path("counts", k), dtype=np.int64, count=count, offset=start * 8)
        return grams.reshape(-1, k), counts

    def chunks(self, k, rows):
        """(start, grams, counts) of order k, `rows` rows at a time, in order."""
        for start in range(0, self.sizes[k - 1], rows):
            yield (start,) + self.read(k, start, start + rows)

    def load(self):
        """All the counts in memory, as NgramCounts."""
        grams, counts = zip(*(self.read(k, 0, size) for k, size in enumerate(self.sizes, 1)))
        return NgramCounts(self.vocab, list(grams), list(counts))

    @classmethod
    def save(cls, counts, folder):
        """NgramCounts written to `folder` as a store."""
        writer = StoreWriter(counts.vocab, folder, counts.order)
        for k, (grams, values) in enumerate(zip(counts.grams, counts.counts), 1):
            writer.append(k, grams, values)
        return writer.close()


class StoreWriter:
    """Builds a CountStore order by order, rows appended in their sorted order."""

    def __init__(self, vocab, folder, order):
        self.vocab, self.folder = vocab, folder
        self.sizes = [0] * order
        self.files = {}

    def append(self, k, grams, counts):
        try:
            for name, values in (("grams", grams), ("counts", counts)):
                out = self.files.get((name, k))
                if out is None:
                    out = self.files[(name, k)] = open(os.path.join(self.folder, f"{name}{k}"), "wb")
                out.write(np.ascontiguousarray(values).data)  # not tofile: its errors lose errno (ENOSPC)
        except OSError as err:
            raise disk_error(self.folder, err) from None
        self.sizes[k - 1] += len(counts)

    def close(self):
        try:
            for out in self.files.values():
                out.close()
            for k in range(1, len(self.sizes) + 1):  # an order without rows still has its (empty) files
                for name in ("grams", "counts"):
                    if (name, k) not in self.files:
                        open(os.path.join(self.folder, f"{name}{k}"), "wb").close()
        except OSError as err:
            raise disk_error(self.folder, err) from None
        self.files = {}
        return CountStore(self.vocab, self.folder, self.sizes)
