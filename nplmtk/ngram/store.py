"""N-gram counts on disk: per order k, the distinct k-grams as int32 rows and their int64
counts in two flat files, rows in the lexicographic order of their word ids (the order
of NgramCounts), read back a chunk at a time. They are what counting a text larger than
memory leaves, and what the out-of-core estimate (stream.py) reads."""
import os
import zlib

import numpy as np

from .. import container
from .._ext.checksum_kernels import Xxh64
from ..errors import InputError
from ..scratch import PAGE_BYTES, ScratchFile, let_go_of_path
from ..threads import raise_if_stopping
from .counts import MAX_ORDER, NgramCounts

COUNTS_KIND = "ngram-counts"
BLOCK_ROWS = 1 << 20  # rows read or written at a time


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
        return self.read_grams(k, start, stop), self.read_counts(k, start, stop)

    def read_counts(self, k, start, stop):
        """The counts of rows start..stop-1 of order k."""
        count = max(0, min(stop, self.sizes[k - 1]) - start)
        return np.fromfile(self.path("counts", k), dtype=np.int64, count=count, offset=start * 8)

    def read_grams(self, k, start, stop):
        """The n-grams of rows start..stop-1 of order k, without their counts."""
        raise_if_stopping()  # every pass over the counts reads them a chunk at a time
        count = max(0, min(stop, self.sizes[k - 1]) - start)
        return np.fromfile(self.path("grams", k), dtype=np.int32, count=count * k, offset=start * k * 4).reshape(-1, k)

    def let_go(self, k, start, stop):
        """Rows start..stop-1 of order k, read in order after those before them, will not
        be read again: their pages go (scratch.let_go_of), the page they share with the
        rows before too."""
        for name, row_bytes in (("grams", k * 4), ("counts", 8)):
            let_go_of_path(self.path(name, k), start * row_bytes // PAGE_BYTES * PAGE_BYTES, stop * row_bytes)

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
        for name, values in (("grams", grams), ("counts", counts)):
            out = self.files.get((name, k))
            if out is None:
                out = self.files[(name, k)] = ScratchFile(os.path.join(self.folder, f"{name}{k}"))
            out.append(np.ascontiguousarray(values))
        self.sizes[k - 1] += len(counts)

    def close(self):
        for k in range(1, len(self.sizes) + 1):  # an order without rows still has its (empty) files
            for name in ("grams", "counts"):
                if (name, k) not in self.files:
                    self.files[(name, k)] = ScratchFile(os.path.join(self.folder, f"{name}{k}"))
        for out in self.files.values():
            out.close()
        self.files = {}
        return CountStore(self.vocab, self.folder, self.sizes)


def write_counts_file(store, path):
    """A CountStore as one binary counts file (`ngram-count -write-binary`): a container
    of kind ngram-counts holding per order k the sorted rows `grams.k` and `counts.k`, and
    the vocabulary; written a block of rows at a time."""
    arrays = {}
    for k, size in enumerate(store.sizes, 1):
        def pieces(k=k, size=size, part=0):
            return (store.read(k, start, start + BLOCK_ROWS)[part] for start in range(0, size, BLOCK_ROWS))

        arrays[f"grams.{k}"] = container.PiecedArray("<i4", (size, k), pieces)
        arrays[f"counts.{k}"] = container.PiecedArray("<i8", (size,), lambda pieces=pieces: pieces(part=1))
    container.save(path, COUNTS_KIND, arrays, meta={"order": store.order}, vocab=store.vocab)


def counts_file_vocabulary(path):
    """The vocabulary a binary counts file was counted over."""
    return _counts_header(path)[1]


def _counts_header(path):
    header, vocab = container.read_header(path)
    if header["kind"] != COUNTS_KIND:
        raise InputError(f"an nplm {header['kind']} model, not n-gram counts", path=path)
    if vocab is None:
        raise InputError("n-gram counts without a vocabulary", path=path)
    return header, vocab


class CountsFile(CountStore):
    """A binary counts file read as a CountStore (a block of rows at a time, no memory
    map), refused unless its vocabulary is `vocab` and every array is what it promises:
    dtypes and shapes, checksums, word ids within the vocabulary, each order's rows sorted
    and distinct, counts of at least 1 (checked in one pass when opened)."""

    def __init__(self, path, vocab):
        header, own = _counts_header(path)
        if own.words != vocab.words or own.unk_word != vocab.unk_word:
            raise InputError("counted over another vocabulary: give every part the same -vocab", path=path)
        order = header["meta"].get("order")
        if type(order) is not int or not 1 <= order <= MAX_ORDER:
            raise InputError(f"n-gram counts of order {order!r} (expected 1 to {MAX_ORDER})", path=path)
        entries = {entry["name"]: entry for entry in header["arrays"]}
        expected = {f"{name}.{k}" for name in ("grams", "counts") for k in range(1, order + 1)}
        if set(entries) != expected:
            raise InputError(f"n-gram counts with the arrays {sorted(entries)}, expected {sorted(expected)}",
                             path=path)
        sizes = []
        for k in range(1, order + 1):
            grams, counts = entries[f"grams.{k}"], entries[f"counts.{k}"]
            size = counts["shape"][0] if len(counts["shape"]) == 1 else -1
            if grams["dtype"] != "<i4" or counts["dtype"] != "<i8" or grams["shape"] != [size, k]:
                raise InputError(f"n-gram counts whose {k}-gram arrays are {grams['dtype']} {grams['shape']} and "
                                 f"{counts['dtype']} {counts['shape']}, expected <i4 (n, {k}) and <i8 (n,)",
                                 path=path)
            sizes.append(size)
        super().__init__(vocab, None, sizes)  # no folder: the file is the user's, never removed
        self.file, self.entries = path, entries
        for k in range(1, order + 1):
            self._check(k)

    def read(self, k, start, stop):
        count = max(0, min(stop, self.sizes[k - 1]) - start)
        grams = np.fromfile(self.file, dtype="<i4", count=count * k,
                            offset=self.entries[f"grams.{k}"]["offset"] + start * k * 4)
        counts = np.fromfile(self.file, dtype="<i8", count=count,
                             offset=self.entries[f"counts.{k}"]["offset"] + start * 8)
        if len(counts) != count or len(grams) != count * k:
            raise InputError("truncated n-gram counts", path=self.file)
        return grams.reshape(-1, k), counts

    def read_grams(self, k, start, stop):
        return self.read(k, start, stop)[0]

    def read_counts(self, k, start, stop):
        return self.read(k, start, stop)[1]

    def _check(self, k):
        hashes = {name: (Xxh64() if "xxh64" in self.entries[f"{name}.{k}"] else None, 0) for name in ("grams", "counts")}
        last = None
        for start in range(0, self.sizes[k - 1], BLOCK_ROWS):
            grams, counts = self.read(k, start, start + BLOCK_ROWS)
            for name, values in (("grams", grams), ("counts", counts)):
                hasher, crc = hashes[name]
                if hasher is None:  # a file written before XXH64: CRC32
                    hashes[name] = hasher, zlib.crc32(values, crc)
                else:
                    hasher.update(values.view(np.uint8).ravel())
            if grams.size and (grams.min() < 0 or grams.max() >= len(self.vocab)):
                raise InputError(f"n-gram counts whose {k}-grams hold word ids outside the vocabulary of "
                                 f"{len(self.vocab)}", path=self.file)
            if len(counts) and counts.min() < 1:
                raise InputError(f"n-gram counts with a {k}-gram counted {counts.min()} times", path=self.file)
            rows = grams if last is None else np.concatenate([last, grams])
            if len(rows) > 1 and not _strictly_increasing(rows):
                raise InputError(f"n-gram counts whose {k}-grams are not sorted and distinct", path=self.file)
            last = grams[-1:]
        for name, (hasher, crc) in hashes.items():
            entry = self.entries[f"{name}.{k}"]
            if (crc != entry["crc32"]) if hasher is None else (hasher.digest() != entry["xxh64"]):
                raise InputError(f"corrupt n-gram counts (array '{name}.{k}' checksum mismatch)", path=self.file)


def _strictly_increasing(rows):
    """Whether consecutive rows increase lexicographically."""
    earlier, later = rows[:-1], rows[1:]
    differ = earlier != later
    first = np.argmax(differ, axis=1)  # the first column where they differ
    picked = np.arange(len(first))
    return bool(np.all(differ.any(axis=1)) and np.all(earlier[picked, first] < later[picked, first]))
