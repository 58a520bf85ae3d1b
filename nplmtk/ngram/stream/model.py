"""The last stage: the model's rows (the `present` ones) and their values in `f*` files,
and the model on disk they make (DiskModel), which the writers read (writers.py)."""
import contextlib
import os

import numpy as np

from ...scratch import rename_scratch
from ...threads import in_order
from ..row_files import RowFiles, row_bytes
from .files import (BOW, CONTEXT, GRAMS, LOGP_FILE, MODEL_FILES, MODEL_KEYS, NODE, PREFIX, PRESENT, ROW,
                    STREAM_FILES)


class DiskModel:
    """A back-off model on disk: per order k, the model's rows (`fgrams{k}`), float32
    log10 probabilities and back-off weights, and which rows are contexts (`fnode{k}`),
    rows in lexicographic order."""

    def __init__(self, vocab, folder, sizes):
        self.vocab, self.files, self.sizes = vocab, RowFiles(folder, STREAM_FILES), sizes

    @property
    def order(self):
        return len(self.sizes)

    def keys(self, k, start, stop):
        """NgramIndex's keys of rows start..stop-1 of order k."""
        return self.files.read("fkeys", k, start, stop)

    def read(self, k, start, stop):
        return tuple(self.files.read(name, k, start, stop) for name in ("fgrams", "flogp", "fbow", "fnode"))

    def contexts(self, k, start, stop):
        """Which rows the back-off walk may pass (backoff.context_nodes): `fnode{k}`'s rows
        with weights, or `fcontext{k}` where fixed-up contexts added their prefixes."""
        name = "fcontext" if self.files.exists("fcontext", k) else "fnode"
        return self.files.read(name, k, start, stop)

    def remove(self, k):
        """Order k's files, once their last reader is done with them: the disk and the page
        cache they take are handed back while the rest is written (and none of them is
        still being written back to disk when the folder goes)."""
        self.files.remove(*((file.name, k) for file in MODEL_FILES))


def final_model(estimate):
    """The model's rows (the `present` ones) and their values, in `f*` files: a DiskModel."""
    files, order, sizes = estimate.files, estimate.order, []
    files.write("bow", order, np.zeros(estimate.sizes[-1], dtype=np.float32))
    files.write("node", order, np.zeros(estimate.sizes[-1], dtype=bool))
    vocab_size = len(estimate.vocab)
    kept_first = []  # per order, the model's rows before this estimate's
    every_row_below = False  # whether order k-1 keeps every row (its rows are its model rows)
    for k in range(1, order + 1):
        # every row kept (as in KN without cutoffs): whole files are renamed, not copied
        every_row = k > 1 and _all_present(estimate, k)
        moved = _moved_whole(estimate, k) if every_row else ()
        walked = ("context",) if files.exists("context", k) else ()
        writers = {name: files.writer(f"f{name}", k)
                   for name in ("grams", "keys", "logp", "bow", "node") + walked if name not in moved}
        below = None if every_row_below else _KeptBefore(files, k - 1)  # read forward: one chunk at a time

        def model_rows(chunk, k=k, moved=moved, below=below, walked=walked):
            start, stop = chunk
            present = files.read("present", k, start, stop)
            # the n-grams moved whole (every row kept): their last words are in `word{k}`
            grams = None if "grams" in moved else estimate.grams(k, start, stop)[present]
            if k == 1:
                keys = grams[:, 0].astype(np.int64)
            else:  # the prefix's row among the model's rows of the order below, then the word
                prefix = files.read("prefix", k, start, stop)[present] - estimate.first_rows[k - 2]
                words = files.read("word", k, start, stop) if grams is None else grams[:, -1]
                keys = (kept_first[k - 2] + (prefix if below is None else below.rows(prefix))) * vocab_size + words
            values = {name: files.read(name, k, start, stop)[present]
                      for name in ("logp", "bow", "node") + walked if name not in moved}
            return dict(values, grams=grams, keys=keys), int(present.sum())

        kept = 0
        row_size = row_bytes(k, GRAMS, MODEL_KEYS, PREFIX, PRESENT, LOGP_FILE, BOW, NODE, CONTEXT, ROW, ROW)
        for values, present in in_order(model_rows, estimate.chunks(k, estimate.pass_rows(row_size)),
                                        threads=1 if below is not None else estimate.pass_threads):
            for name, out in writers.items():
                out.append(values[name])
            kept += present
        every_row_below = every_row
        for out in writers.values():
            out.close()
        sizes.append(kept)
        kept_first.append(estimate.exchange.kept_before(k, kept))
        estimate.finished("model", k)
        if estimate.consume_store:
            for name in ("grams", "counts"):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(estimate.store.path(name, k))
    estimate.finished("model", order + 1)  # present{order}
    return DiskModel(estimate.vocab, files.folder, sizes)


def _all_present(estimate, k):
    return all(estimate.files.read("present", k, start, stop).all()
               for start, stop in estimate.chunks(k, estimate.rows(row_bytes(k, PRESENT))))


def _moved_whole(estimate, k):
    """The model's files of order k made by renaming the estimate's (and, when the store
    is the estimate's to consume, its n-grams): the names moved."""
    files = estimate.files
    sources = [(files.path(name, k), name) for name in ("logp", "bow", "node")]
    if estimate.consume_store:
        sources.append((estimate.store.path("grams", k), "grams"))
    return [name for path, name in sources if rename_scratch(path, files.path(f"f{name}", k))]


class _KeptBefore:
    """For increasing rows of order k (before leaving out the rows not in the model), their
    rows among the kept ones: the `present{k}` file read forward once."""

    def __init__(self, files, k):
        self.files, self.k = files, k
        self.row, self.kept = 0, 0  # rows before self.row hold self.kept present ones

    def rows(self, rows):
        if not len(rows):
            return rows
        first, last = int(rows[0]), int(rows[-1])
        skipped = self.files.read("present", self.k, self.row, first)
        self.kept += int(skipped.sum())
        present = self.files.read("present", self.k, first, last + 1)
        kept_before = self.kept + np.cumsum(present) - present  # kept rows before each row of the range
        self.row, self.kept = last, int(kept_before[-1])
        return kept_before[rows - first]
