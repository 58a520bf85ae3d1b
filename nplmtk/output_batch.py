"""Many outputs written as open_output writes each, synced together: the batch mode of
io's writer (nplmtk/io/writing.py), named here for lattice-tool's N-best files and
lattices."""
from .io.writing import OutputBatch, gzipped

__all__ = ["OutputBatch", "gzipped"]
