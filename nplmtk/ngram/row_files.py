"""Flat files of arrays aligned with an order's rows, in a scratch folder: the working
files of the out-of-core passes (stream.py, sorted_counts.py), `name{k}` for order k."""
import os

import numpy as np

from ..scratch import ScratchFile, rename_scratch
from ..threads import raise_if_stopping


class RowFiles:
    """Arrays aligned with an order's rows, one flat file each in `folder`."""

    def __init__(self, folder):
        self.folder = folder

    def path(self, name, k):
        return os.path.join(self.folder, f"{name}{k}")

    def read(self, name, k, dtype, start, stop, width=None):
        """Rows start..stop-1 of `name{k}`: values, or (rows, width) arrays."""
        raise_if_stopping()
        count = max(0, stop - start)
        values = np.fromfile(self.path(name, k), dtype=dtype, count=count * (width or 1),
                             offset=start * (width or 1) * np.dtype(dtype).itemsize)
        return values if width is None else values.reshape(-1, width)

    def writer(self, name, k):
        return ScratchFile(self.path(name, k))

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
