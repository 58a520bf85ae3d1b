"""The out-of-core estimate's passes (StreamEstimate): the stages in order, and what
every stage's passes share: chunks of an order's rows within the memory, a file filled
from windows of the order below, the back-off walks of the rows' suffixes, runs of whole
contexts computed side by side and written with the contexts between them filled in,
and the working files removed once their last reader is done (files.py)."""
import contextlib
import time

import numpy as np

from ...errors import ParameterError
from ...threads import give_back_freed_memory, in_order, peak_resident_bytes, usable_cores
from ..discounts import METHODS
from ..estimate import Events, _order_settings
from ..row_files import RowFiles, row_bytes
from .discounts import discounts_of_orders, write_unigram_probabilities
from .files import (ADJUSTED, FLAGS, LOGP_FILE, LOWER, PREFIX, PRESENT, STREAM_FILES, SUFFIX, WALK, WALKS, NO_WALK,
                    last_stage)
from .model import final_model
from .probabilities import probabilities_and_weights
from .prune import prune_on_disk
from .local import LocalExchange
from .rows import prefix_and_suffix_rows
from .walks import backoff_walks, close_contexts, fix_missing_contexts

LARGEST_COUNT_OF_COUNTS = 4  # modified Kneser-Ney reads n1 .. n4 (Good-Turing up to -gtNmax + 1)
# context_probabilities' float64 temporaries a row at a context pass's peak (with the
# files a run holds, about the 160 bytes a row measured of a whole pass)
PROBABILITY_TEMPORARIES = 13 * (np.dtype(np.float64),)
WALK_PIECE_ROWS = 1 << 20  # walks made from probabilities a piece at a time
CONTEXT_LOOK_ROWS = 1 << 12  # prefix rows read past a run's end for its last context's end (doubled while one goes on)
PASS_THREADS = usable_cores(2)  # chunks of a pass computed side by side
IN_MEMORY_BYTES_PER_NGRAM = 112  # estimate.py's peak over the distinct n-grams (20M words of Zipf text)


def fits_in_memory(ngrams, memory, bytes_per_ngram=IN_MEMORY_BYTES_PER_NGRAM):
    """Whether the in-memory estimate (or another job of `bytes_per_ngram`) of so many
    distinct n-grams fits in `memory` bytes."""
    return ngrams * bytes_per_ngram <= memory


@contextlib.contextmanager
def timed_stage(name, timing):
    """The block's wall time and the process's peak memory so far as `timing("name: 1.2 s,
    peak 512 MiB")`, when `timing` is given: the stage whose peak rises is the one that
    set the process's peak (against -memory)."""
    started = time.perf_counter()
    yield
    if timing is not None:
        timing(f"{name}: {time.perf_counter() - started:.1f} s{peak_so_far()}")


def peak_so_far():
    """", peak 512 MiB": the process's peak resident memory so far ("" where unknown)."""
    peak = peak_resident_bytes()
    return "" if peak is None else f", peak {peak / 2 ** 20:,.0f} MiB"


class StreamEstimate:
    """The passes of one estimate, over `store` (a CountStore), working files in
    `folder`, about `memory` bytes of arrays at a time."""

    def __init__(self, store, folder, memory, unk_is_word=True, log=None, warn=None, timing=None,
                 consume_store=False, method="kn", interpolate=True, min_counts=None, max_counts=None, constant=None,
                 always_interpolate=False, prune=None, exchange=None):
        """With `consume_store` each order's counts are removed from the store once used.
        `method`, `interpolate`, `min_counts`, `max_counts`, `constant` and
        `always_interpolate` are as estimate.estimate takes them; `prune`: (threshold,
        min_order) of estimate.prune, applied to the model. `exchange`: what the estimate
        of a part of the rows exchanges with the others' (mpi_estimate.RankExchange); by
        default a LocalExchange, the estimate of every row."""
        self.prune, self.exchange = prune, exchange or LocalExchange()
        self.store, self.vocab = store, store.vocab
        self.order = self.exchange.model_order(store)
        self.files, self.memory = RowFiles(folder, STREAM_FILES), memory
        self.events = Events(self.vocab, unk_is_word)
        if method not in METHODS:
            raise ParameterError(f"unknown discounting {{method}} '{method}'")
        self.discounting, self.interpolate = METHODS[method], interpolate
        # lmplz's way: interpolating everywhere, the interpolation weights written as back-off weights
        self.always_interpolate, self.lmplz_weights = always_interpolate, always_interpolate and interpolate
        self.settings = _order_settings(self.order, min_counts, max_counts, constant, self.events)
        self.cutoffs = any(settings.min_count > 1 for settings in self.settings)
        self.stages = ["rows", "discounts", "probabilities"] + ["fix-up"] * self.cutoffs + ["pruning"] * bool(prune) \
            + ["model"]
        # the counts-of-counts n_0 .. n_largest that the discounting may read
        self.largest_count = max([LARGEST_COUNT_OF_COUNTS] + [settings.max_count + 1 for settings in self.settings])
        self.log, self.warn, self.timing, self.consume_store = log, warn, timing, consume_store
        self.pass_threads = PASS_THREADS
        self.sizes = [len(self.vocab)] + store.sizes[1:]  # every word a unigram row (some of count 0)
        self.first_rows = [0] * self.order  # each order's first row here among all the rows
        grams, counts = store.read(1, 0, store.sizes[0])
        self.unigram_counts = np.zeros(len(self.vocab), dtype=np.int64)
        self.unigram_counts[grams[:, 0]] = counts
        self.exchange.share(self)

    def run(self):
        """The model (a DiskModel), stage by stage."""
        # the counting's and merging's freed chunks (at 200M words 1.3 GB); trimmed after
        # every stage too, the heap's pages were faulted in again (2M faults, 16 s) for no lower peak
        give_back_freed_memory()
        with self.stage("prefix and suffix rows"):
            prefix_and_suffix_rows(self)
        self.finished("rows")
        with self.stage("continuation counts and discounts"):
            discounts = discounts_of_orders(self)
        self.finished("discounts")
        with self.stage("probabilities and back-off weights"):
            write_unigram_probabilities(self, discounts[0])
            for k in range(2, self.order + 1):
                probabilities_and_weights(self, k, discounts[k - 1])
                self.finished("probabilities", k)
        if self.cutoffs:
            with self.stage("contexts without probabilities"):
                close_contexts(self)
                fix_missing_contexts(self, walks_through=self.order - 1 if self.prune else 0)
            self.finished("fix-up")
        if self.prune:
            with self.stage("pruning"):
                prune_on_disk(self, *self.prune)
            self.finished("pruning")
        with self.stage("the model's rows and keys"):
            return final_model(self)

    def stage(self, name):
        """Times a stage for `timing(line)` (ngram-count -debug 2)."""
        return timed_stage(name, self.timing)

    def finished(self, stage, k=None):
        """`stage` done (with order k, or with every order): the files it reads last go (the
        disk they take is the estimate's peak)."""
        for file in self.files.declarations.values():
            if last_stage(file, self.stages) == stage:
                orders = range(1, self.order + 1) if k is None else [k - file.lag]
                self.files.remove(*((file.name, j) for j in orders))

    # --- the memory

    def rows(self, bytes_per_row):
        """How many rows of `bytes_per_row` fit in a share of the memory."""
        return max(1, self.memory // 4 // bytes_per_row)

    def pass_rows(self, bytes_per_row):
        """How many rows of `bytes_per_row` fit in a chunk computed beside others (in_order)."""
        return max(1, self.rows(bytes_per_row) // (PASS_THREADS + 1))

    # --- the rows of an order, as the store and the full unigrams give them

    def grams(self, k, start, stop):
        if k == 1:
            first = self.first_rows[0]
            return np.arange(first + start, first + min(stop, self.sizes[0]), dtype=np.int32)[:, None]
        return self.store.read_grams(k, start, stop)

    def raw_counts(self, k, start, stop):
        if k == 1:
            return self.unigram_counts[start:stop]
        return self.store.read_counts(k, start, stop)

    def chunks(self, k, rows):
        for start in range(0, self.sizes[k - 1], rows):
            yield start, min(start + rows, self.sizes[k - 1])

    # --- passes that every stage makes

    def filled_by_windows(self, name, k, unset, window_rows, chunk_rows, window, finished=None):
        """`name{k}`, aligned with order k's rows, from values of order k-1 held a window
        of `window_rows` rows at a time: `window(low, high, last)` loads rows low..high-1
        and gives fill(start, stop, values), which sets the values of order-k rows
        start..stop-1 whose source lies in the window; `finished()` is called after each
        window's pass. The first window's pass writes the file (from `unset`), each later
        one fills it in place. Chunks of `chunk_rows` rows are filled side by side
        (`in_order`: give a pass_rows share)."""
        dtype = self.files.declaration(name).dtype
        windows = list(self.chunks(k - 1, window_rows))
        for number, (low, high) in enumerate(windows):
            fill = window(low, high, number == len(windows) - 1)

            def filled(chunk, fill=fill, first=number == 0):
                start, stop = chunk
                values = (np.full(stop - start, unset, dtype=dtype) if first
                          else self.files.read(name, k, start, stop))
                fill(start, stop, values)
                return start, values

            chunks = self.chunks(k, chunk_rows)
            if number == 0:
                with self.files.writer(name, k) as out:
                    for _, values in in_order(filled, chunks):
                        out.append(values)
            else:  # in place: the file's pages are written again, not new ones taken
                with self.files.overwriting(name, k) as put:
                    for start, values in in_order(filled, chunks):
                        put(start, values)
            fill = filled = values = None  # the window's arrays go before the next window's come
            if finished is not None:
                finished()

    def walks(self, name, k, low, high):
        """The walks of order-k rows low..high-1 in `name{k}`. Without cutoffs no `walk{k}`
        is written: every walk an estimate asks for (an eligible n-gram's suffix's) ends
        on its own row, so the walks are the rows' probabilities, (logp, 0)."""
        if name != "walk" or self.cutoffs:
            return self.files.read(name, k, low, high)
        walks = np.empty(max(0, min(high, self.sizes[k - 1]) - low), dtype=WALK)
        for start in range(0, len(walks), WALK_PIECE_ROWS):  # a window's walks, not its temporaries too
            stop = min(start + WALK_PIECE_ROWS, len(walks))
            walks[start:stop] = backoff_walks(self.files.read("logp", k, low + start, low + stop),
                                              self.files.read("present", k, low + start, low + stop),
                                              None, None)
        return walks

    def suffix_walks(self, name, k, source):
        """`name{k}`: the walks in `source{k-1}` of each order-k row's suffix (`suffix{k}`),
        order k-1 held a window at a time."""
        def window(low, high, last):
            walks = self.walks(source, k - 1, low, high)

            def fill(start, stop, values):
                suffix = self.files.read("suffix", k, start, stop)
                inside = (suffix >= low) & (suffix < high)
                values[inside] = walks[suffix[inside] - low]
            return fill

        self.filled_by_windows(name, k, NO_WALK, self.rows(row_bytes(k - 1, WALKS)),
                               self.pass_rows(row_bytes(k, SUFFIX, LOWER, WALK)), window)

    def mark_rows(self, target, k, column, flags):
        """Sets `target{k-1}` (a flag per order-(k-1) row) at the rows that `column{k}`
        (say, `suffix`) gives for the order-k rows flagged in `flags{k}`, a chunk of order
        k at a time; the flags file, changed in place, stays in the page cache."""
        if not self.sizes[k - 2]:
            return
        marks = self.files.mapped(target, k - 1)
        declared = self.files.declaration
        for start, stop in self.chunks(k, self.rows(row_bytes(k, declared(column), declared(flags)))):
            rows = self.files.read(column, k, start, stop)
            marks[rows[self.files.read(flags, k, start, stop)]] = True
        marks.flush()
        del marks

    def context_runs(self, k):
        """(start, stop) of runs of whole contexts of order k, about a chunk's rows each
        (a share of the memory for each of the runs computed side by side)."""
        rows = self.pass_rows(row_bytes(k, FLAGS, ADJUSTED, PREFIX, LOWER, LOGP_FILE, PRESENT, WALKS,
                                        *PROBABILITY_TEMPORARIES))
        size, start = self.sizes[k - 1], 0
        while start < size:
            stop, look = min(start + rows, size), CONTEXT_LOOK_ROWS
            while stop < size:  # end the run where a context ends: the first row at or after stop of a new prefix
                prefix = self.files.read("prefix", k, stop - 1, min(stop + look, size))
                ends = np.flatnonzero(prefix[1:] != prefix[:-1])
                if len(ends):
                    stop += int(ends[0])
                    break
                stop, look = min(stop + look, size), look * 2
            yield start, stop
            start = stop

    def context_pass(self, k, run, row_files, context_files):
        """A pass over order k's runs of whole contexts, computed side by side by
        `run(start, stop)`, which gives (the first context's row, {name: values of the
        rows}, {name: values of the contexts}): the rows' values go to `name{k}` for each
        name of `row_files`, the contexts' to `name{k-1}` for each of `context_files`
        ({name: value}), the contexts without n-grams between the runs given `value`."""
        row_outs = {name: self.files.writer(name, k) for name in row_files}
        context_outs = {name: self.files.writer(name, k - 1) for name in context_files}
        first_row = self.first_rows[k - 2]  # contexts are counted among all the rows, files hold this estimate's

        def gap(stop):
            for name, out in context_outs.items():
                out.append(np.full(stop - contexts_done, context_files[name],
                                   dtype=self.files.declaration(name).dtype))

        contexts_done = first_row
        for first_context, rows, contexts in in_order(lambda chunk: run(*chunk), self.context_runs(k)):
            for name, out in row_outs.items():
                out.append(rows[name])
            gap(first_context)
            for name, out in context_outs.items():
                out.append(contexts[name])
            contexts_done = first_context + len(contexts[name])
        gap(first_row + self.sizes[k - 2])
        for out in list(row_outs.values()) + list(context_outs.values()):
            out.close()
