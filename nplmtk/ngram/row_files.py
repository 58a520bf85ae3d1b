"""Flat files of arrays aligned with an order's rows, in a scratch folder: the working
files of the out-of-core passes (stream/, sorted_counts.py), `name{k}` for order k.
Each kind of file is declared once (`WorkingFile`): its values' type, the stage that
writes it and the stages that may read it last, so that readers need not repeat the
type, memory budgets are sums of declared row sizes, and the file goes when its last
reader is done."""
import contextlib
import os
from dataclasses import dataclass

import numpy as np

from ..scratch import ScratchFile, rename_scratch, scratch_error
from ..threads import raise_if_stopping


@dataclass(frozen=True)
class WorkingFile:
    """`name{k}`, one value of `dtype` a row of order k (or, with `words`, the row's k
    word ids), written by the stage `writer`. It is removed once the last of the stages
    `last_readers` that an estimate runs has finished order k + `lag` (a file of order k-1
    read while order k is computed has lag 1); without last readers it lives within its
    writer's stage, which removes or renames it itself."""
    name: str
    dtype: np.dtype
    writer: str
    last_readers: tuple = ()
    lag: int = 0
    words: bool = False

    def row_bytes(self, k):
        return np.dtype(self.dtype).itemsize * (k if self.words else 1)


def row_bytes(k, *parts):
    """Bytes of a row of order k holding `parts`: WorkingFiles, or dtypes of temporaries."""
    return sum(part.row_bytes(k) if isinstance(part, WorkingFile) else np.dtype(part).itemsize for part in parts)


def declared(*files):
    """{name: WorkingFile} of `files`."""
    return {file.name: file for file in files}


class RowFiles:
    """Arrays aligned with an order's rows, one flat file each in `folder`, of the kinds
    `declarations` ({name: WorkingFile}) declares."""

    def __init__(self, folder, declarations):
        self.folder, self.declarations = folder, declarations

    def declaration(self, name):
        return self.declarations[name]

    def path(self, name, k):
        return os.path.join(self.folder, f"{name}{k}")

    def read(self, name, k, start, stop):
        """Rows start..stop-1 of `name{k}`: values, or (rows, k) arrays of words."""
        raise_if_stopping()
        file = self.declaration(name)
        dtype, width = np.dtype(file.dtype), k if file.words else 1
        count = max(0, stop - start)
        values = np.fromfile(self.path(name, k), dtype=dtype, count=count * width,
                             offset=start * width * dtype.itemsize)
        return values.reshape(-1, width) if file.words else values

    def read_at(self, name, k, rows, gap_bytes=512):
        """Values of `name{k}` at `rows` (in any order, repeats allowed), by reads of
        spans of nearby rows (rows less than `gap_bytes` apart share a read). Not through a
        memory map: each page fault on a map of a file in the page cache maps the pages
        around it too (fault-around), and a few thousand random rows of a file just written
        made the whole file resident, beyond the memory budget."""
        dtype = np.dtype(self.declaration(name).dtype)
        if self.declaration(name).words:
            raise ValueError(f"read_at reads files of one value a row, not {name}")
        wanted, inverse = np.unique(np.asarray(rows, dtype=np.int64), return_inverse=True)
        values = np.empty(len(wanted), dtype=dtype)
        if len(wanted):
            raise_if_stopping()
            breaks = np.flatnonzero(np.diff(wanted) * dtype.itemsize > gap_bytes) + 1
            starts, stops = np.concatenate([[0], breaks]), np.concatenate([breaks, [len(wanted)]])
            with open(self.path(name, k), "rb", buffering=0) as source:
                for first, last in zip(starts.tolist(), stops.tolist()):
                    low, high = int(wanted[first]), int(wanted[last - 1]) + 1
                    data = os.pread(source.fileno(), (high - low) * dtype.itemsize, low * dtype.itemsize)
                    if len(data) != (high - low) * dtype.itemsize:
                        raise EOFError(f"{source.name}: rows {low}..{high - 1} lie past its end")
                    values[first:last] = np.frombuffer(data, dtype=dtype)[wanted[first:last] - low]
        return values[inverse]

    def mapped(self, name, k, mode="r+", start=0, rows=None):
        """`name{k}` (rows start.. start+rows-1, or all) as a memory map, changed in place."""
        dtype = np.dtype(self.declaration(name).dtype)
        return np.memmap(self.path(name, k), dtype=dtype, mode=mode, offset=start * dtype.itemsize,
                         shape=None if rows is None else (rows,))

    def writer(self, name, k):
        return ScratchFile(self.path(name, k), np.dtype(self.declaration(name).dtype))  # a kind not declared: a mistake

    @contextlib.contextmanager
    def overwriting(self, name, k):
        """put(start, values): `values` written over rows start.. of `name{k}` in place.
        Pages of the page cache written again cost a copy; a new file's pages cost their
        first touch too (10 times the copy on a VM that hands freed pages back to its host)."""
        file = self.declaration(name)
        row_bytes = np.dtype(file.dtype).itemsize
        try:
            fd = os.open(self.path(name, k), os.O_WRONLY)
        except OSError as err:
            raise scratch_error(self.folder, err) from None

        def put(start, values):
            raise_if_stopping()
            if values.dtype != file.dtype:
                raise TypeError(f"{name}{k}: {values.dtype} values for a file of {file.dtype}")
            data = memoryview(np.ascontiguousarray(values)).cast("B")
            try:
                while data.nbytes:
                    written = os.pwrite(fd, data, start * row_bytes)
                    data, start = data[written:], start + written // row_bytes
            except OSError as err:
                raise scratch_error(self.folder, err) from None
        try:
            yield put
        finally:
            os.close(fd)

    def write(self, name, k, values):
        """`name{k}` holding `values`."""
        with self.writer(name, k) as out:
            out.append(values)

    def copy(self, name, k, new_name, piece_bytes=1 << 24):
        """`new_name{k}`, a copy of `name{k}` made a piece at a time."""
        with self.writer(new_name, k) as out, open(self.path(name, k), "rb") as source:
            while piece := source.read(piece_bytes):
                out.append(piece)

    def rename(self, name, k, new_name):
        """`name{k}` becomes `new_name{k}` (a new version of a file replaces the old one)."""
        rename_scratch(self.path(name, k), self.path(new_name, k), self.folder)

    def exists(self, name, k):
        return os.path.exists(self.path(name, k))

    def remove(self, *names):
        """The files (name, k) done with (the disk they take is the estimate's peak)."""
        for name, k in names:
            with contextlib.suppress(FileNotFoundError):
                os.remove(self.path(name, k))
