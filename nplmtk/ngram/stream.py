"""Estimating back-off models out of core, from counts on disk
(store.py), in passes over files of each order's rows as KenLM's lmplz does (Heafield
et al. 2013): each order's rows stay in their lexicographic order on disk, and every
value that an n-gram needs from another order (its prefix's row, its suffix's row, the
number of words that precede it, its suffix's back-off walk) is found by a pass that holds
one window of that order in memory, as many passes as windows. The arithmetic is
estimate.py's own (`context_probabilities`, `context_bows`), run on whole contexts at a
time, so the model is the in-memory estimate's to the byte whatever the memory.

The passes cover every discounting of discounts.py (each fitted on counts-of-counts
counted by a pass), interpolated or backing off, with or without SRILM's cutoffs
(-gtNmin), pruned (stream_prune.py) or not, SRILM's or lmplz's (-always-interpolate), of
words or of classes. With cutoffs an n-gram's suffix may have left
the model: its probability is SRILM's back-off walk, carried order to order as a pair of
float32 sums, and the contexts left without a probability get one at the end, as SRILM's
fixupProbs gives them (stream_walks.py)."""
import contextlib
import math
import os
import threading
import time

import numpy as np

from .._ext.ngram_sorting import find_sorted_rows, search_sorted_forward
from ..errors import NplmError, ParameterError
from ..scratch import rename_scratch
from ..threads import in_order, usable_cores
from .discounts import METHODS, CountsOfCounts
from .estimate import (Events, _order_settings, _warn, context_bows, context_probabilities, distribute_unigram_mass,
                       lmplz_bows, log10_to_prob)
from .row_files import RowFiles, row_bytes
from .stream_files import (ADJUSTED, BOW, CONTEXT, CONTINUATION, GRAMS, LOGP_FILE, LOWER, MODEL_FILES, MODEL_KEYS,
                           NO_WALK, NODE, PREFIX, PRESENT, ROW, STREAM_FILES, SUFFIX, WALK, WALKS, last_stage)
from .stream_prune import prune_on_disk
from .stream_walks import backoff_walks, close_contexts, fix_missing_contexts

LARGEST_COUNT_OF_COUNTS = 4  # modified Kneser-Ney reads n1 .. n4 (Good-Turing up to -gtNmax + 1)
# context_probabilities' float64 temporaries a row at a context pass's peak (with the
# files a run holds, about the 160 bytes a row measured of a whole pass)
PROBABILITY_TEMPORARIES = 13 * (np.dtype(np.float64),)
# a search's keys, queries, their order, places and hits a row (suffix rows)
SEARCH_TEMPORARIES = 4 * (ROW,)
NO_ROW = -1
WALK_PIECE_ROWS = 1 << 20  # walks made from probabilities a piece at a time
PASS_THREADS = usable_cores(2)  # chunks of a pass computed side by side
IN_MEMORY_BYTES_PER_NGRAM = 112  # estimate.py's peak over the distinct n-grams (20M words of Zipf text)


def fits_in_memory(ngrams, memory, bytes_per_ngram=IN_MEMORY_BYTES_PER_NGRAM):
    """Whether the in-memory estimate (or another job of `bytes_per_ngram`) of so many
    distinct n-grams fits in `memory` bytes."""
    return ngrams * bytes_per_ngram <= memory


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


@contextlib.contextmanager
def timed_stage(name, timing):
    """The block's wall time as `timing("name: 1.2 s")`, when `timing` is given."""
    started = time.perf_counter()
    yield
    if timing is not None:
        timing(f"{name}: {time.perf_counter() - started:.1f} s")


def prefix_rows(grams, k, size, chunk_rows, block_rows):
    """(start, stop, rows) for chunks of the `size` order-k rows: the row of each one's
    first k-1 words among the order-(k-1) rows (NO_ROW where none is), both orders'
    sorted rows (`grams(order, start, stop)`) read forward once and merged."""
    table, table_start = np.empty((0, k - 1), dtype=np.int32), 0
    for start in range(0, size, chunk_rows):
        stop = min(start + chunk_rows, size)
        queries = np.ascontiguousarray(grams(k, start, stop)[:, :-1])
        found, done = np.full(len(queries), NO_ROW, dtype=np.int64), 0
        while True:
            resolved = find_sorted_rows(queries[done:], table, found[done:])
            placed = found[done:done + resolved]
            placed[placed >= 0] += table_start
            done += resolved
            if done == len(queries):
                break
            table_start += len(table)  # the queries left lie past every row held
            table = grams(k - 1, table_start, table_start + block_rows)
            if not len(table):
                break
        yield start, stop, found
        if found[-1] >= 0:
            drop = int(found[-1]) - table_start  # the next queries come at or after the last one
            table, table_start = table[drop:], table_start + drop


def _runs_of_sorted(values):
    """(the distinct values, how many times each comes) of sorted `values`."""
    if not len(values):
        return values, values
    starts = np.flatnonzero(np.concatenate([[True], values[1:] != values[:-1]]))
    return values[starts], np.diff(np.append(starts, len(values)))


class StreamEstimate:
    """The passes of one estimate, over `store` (a CountStore), working files in
    `folder`, about `memory` bytes of arrays at a time."""

    def __init__(self, store, folder, memory, unk_is_word=True, log=None, warn=None, timing=None,
                 consume_store=False, method="kn", interpolate=True, min_counts=None, max_counts=None, constant=None,
                 always_interpolate=False, order=None, prune=None):
        """With `consume_store` each order's counts are removed from the store once used.
        `method`, `interpolate`, `min_counts`, `max_counts`, `constant` and
        `always_interpolate` are as estimate.estimate takes them; `order`, when given,
        is the model's (the store's own may be lower: a rank's part, mpi_estimate.py);
        `prune`: (threshold, min_order) of estimate.prune, applied to the model."""
        self.prune = prune
        self.store, self.vocab, self.order = store, store.vocab, order or store.order
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
        self.sizes = [len(self.vocab)] + store.sizes[1:]  # every word a unigram row (some of count 0)
        self.first_rows = [0] * self.order  # each order's first row here among all the rows (mpi_estimate.py)
        grams, counts = store.read(1, 0, store.sizes[0])
        self.unigram_counts = np.zeros(len(self.vocab), dtype=np.int64)
        self.unigram_counts[grams[:, 0]] = counts

    def rows(self, bytes_per_row):
        """How many rows of `bytes_per_row` fit in a share of the memory."""
        return max(1, self.memory // 4 // bytes_per_row)

    def pass_rows(self, bytes_per_row):
        """How many rows of `bytes_per_row` fit in a chunk computed beside others (in_order)."""
        return max(1, self.rows(bytes_per_row) // (PASS_THREADS + 1))

    def run(self):
        order = self.order
        with self.stage("prefix and suffix rows"):
            for _ in in_order(self._prefix_rows, range(2, order + 1)):  # orders side by side
                pass
            for k in range(2, order + 1):
                self._suffix_rows(k)
        discounts = []
        with self.stage("continuation counts and discounts"):
            for k in range(1, order + 1):
                histogram = self._summed(self._adjusted_counts(k))
                discount = self.discounting(CountsOfCounts(histogram), self.settings[k - 1], self.warn or _warn)
                if self.log is not None:
                    for line in [f"using {discount.name} for {k}-grams"] + discount.debug_lines:
                        self.log(line)
                discounts.append(discount)
        self.finished("discounts")
        with self.stage("probabilities and back-off weights"):
            self._unigram_probabilities(discounts[0])
            for k in range(2, order + 1):
                self._lower_probabilities(k)
                self._context_pass(k, discounts[k - 1])
                self.finished("probabilities", k)
        if self.cutoffs:
            with self.stage("contexts without probabilities"):
                close_contexts(self)
                fix_missing_contexts(self, walks_through=order - 1 if self.prune else 0)
            self.finished("fix-up")
        if self.prune:
            with self.stage("pruning"):
                prune_on_disk(self, *self.prune)
            self.finished("pruning")
        with self.stage("the model's rows and keys"):
            return self._final_model()

    def stage(self, name):
        """Times a stage for `timing(line)` (ngram-count -debug 2)."""
        return timed_stage(name, self.timing)

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

    # --- passes

    def _prefix_rows(self, k):
        """`prefix{k}`: the row of each order-k row's first k-1 words among the order-(k-1)
        rows, both read forward once and merged."""
        if k == 2:
            return self._bigram_words("prefix", 0)
        with self.files.writer("prefix", k) as out:
            for start, stop, found in prefix_rows(self.grams, k, self.sizes[k - 1],
                                                  self.pass_rows(row_bytes(k, GRAMS, PREFIX) + row_bytes(k - 1, GRAMS)),
                                                  self.pass_rows(row_bytes(k - 1, GRAMS))):
                if np.any(found < 0):
                    self._not_closed(k, self.grams(k, start, stop)[np.argmax(found < 0)][:-1], "prefix")
                out.append(found + self.first_rows[k - 2])

    def _suffix_rows(self, k):
        """`suffix{k}`: the row of each order-k row's last k-1 words among the order-(k-1)
        rows. Its key there is (the row of the prefix's suffix) * V + the last word: the
        prefix's suffix row comes from `suffix{k-1}` in order, the key is searched
        among the order-(k-1) keys a window at a time. The rows found are counted into
        `continuation{k-1}` (Kneser-Ney's continuation counts: each order-k row is one
        distinct word before its suffix)."""
        if k == 2:
            counted = np.zeros(len(self.vocab), dtype=np.int64)
            with self.files.writer("suffix", 2) as out:
                for start, stop in self.chunks(2, self.rows(row_bytes(2, GRAMS, SUFFIX))):
                    words = self.grams(2, start, stop)[:, 1].astype(np.int64)
                    counted += np.bincount(words, minlength=len(counted))
                    out.append(words)
            return self._counted_words(counted)
        continuation = self.files.writer("continuation", k - 1)
        counted, counting = [], threading.Lock()

        def window(low, high, last):
            keys = np.empty(high - low, dtype=np.int64)  # made a chunk at a time: 8 bytes a row at the peak
            step = self.pass_rows(row_bytes(k, PREFIX, SUFFIX, *SEARCH_TEMPORARIES))
            for start in range(low, high, step):
                keys[start - low:start - low + step] = self._keys(k - 1, start, min(start + step, high))
            counted[:] = [np.zeros(high - low, dtype=np.int64)]

            def fill(start, stop, found):
                query = self._suffix_keys(k, start, stop)
                inside = np.flatnonzero((query >= keys[0]) & (query <= keys[-1]))
                by_key = inside[np.argsort(query[inside])]  # sorted queries: a search that runs forward
                place = np.empty(len(by_key), dtype=np.int64)
                search_sorted_forward(keys, query[by_key], place)
                np.minimum(place, len(keys) - 1, out=place)
                hit = keys[place] == query[by_key]
                found[by_key[hit]] = self.first_rows[k - 2] + low + place[hit]
                rows, hits = _runs_of_sorted(place[hit])  # not a window-long bincount per chunk
                with counting:  # chunks are filled side by side
                    counted[0][rows] += hits
                if last and np.any(found < 0):
                    self._not_closed(k, self.grams(k, start, stop)[np.argmax(found < 0)][1:], "suffix")
            return fill

        # the window (keys and counts) in a third of the memory: one pass at 20M words, -memory 1G
        self.filled_by_windows("suffix", k, NO_ROW, max(1, self.memory // 3 // row_bytes(k - 1, ROW, CONTINUATION)),
                               self.pass_rows(row_bytes(k, PREFIX, SUFFIX, *SEARCH_TEMPORARIES)), window,
                               finished=lambda: continuation.append(counted[0]))
        continuation.close()

    def _suffix_keys(self, k, start, stop):
        """The keys of rows start..stop-1 of order k's suffixes among order k-1 (the row of
        the prefix's suffix * V + the last word)."""
        prefix = self.files.read("prefix", k, start, stop) - self.first_rows[k - 2]
        inner = self.files.read("suffix", k - 1, int(prefix[0]), int(prefix[-1]) + 1)
        return inner[prefix - prefix[0]] * len(self.vocab) + self.grams(k, start, stop)[:, -1]

    def _counted_words(self, counted):
        """The unigrams' continuation counts from every bigram's second word (`counted`:
        this estimate's bigrams, one count per word)."""
        self.word_continuation = counted

    def _bigram_words(self, name, column):
        """`name2`: a bigram's word `column`, which is its row among the unigrams (word ids)."""
        with self.files.writer(name, 2) as out:
            for start, stop in self.chunks(2, self.rows(row_bytes(2, GRAMS, PREFIX))):
                out.append(self.grams(2, start, stop)[:, column].astype(np.int64))

    def filled_by_windows(self, name, k, unset, window_rows, chunk_rows, window, finished=None):
        """`name{k}`, aligned with order k's rows, from values of order k-1 held a window
        of `window_rows` rows at a time: `window(low, high, last)` loads rows low..high-1
        and gives fill(start, stop, values), which sets the values of order-k rows
        start..stop-1 whose source lies in the window; `finished()` is called after each
        window's pass. Each window's pass starts from the previous pass's file (the first
        from `unset`). Chunks of `chunk_rows` rows are filled side by side (`in_order`:
        give a pass_rows share)."""
        windows = list(self.chunks(k - 1, window_rows))
        for number, (low, high) in enumerate(windows):
            fill = window(low, high, number == len(windows) - 1)
            previous = f"{name}.{number - 1}" if number else None

            def filled(chunk, fill=fill, previous=previous):
                start, stop = chunk
                values = (np.full(stop - start, unset, dtype=self.files.declaration(name).dtype) if previous is None
                          else self.files.read(previous, k, start, stop))
                fill(start, stop, values)
                return values

            with self.files.writer(name if number == len(windows) - 1 else f"{name}.{number}", k) as out:
                for values in in_order(filled, self.chunks(k, chunk_rows)):
                    out.append(values)
            if previous is not None:
                self.files.remove((previous, k))
            if finished is not None:
                finished()

    def _keys(self, k, start, stop):
        """NgramIndex's keys of order-k rows start..stop-1 (their prefix row * V + word)."""
        words = self.grams(k, start, stop)[:, -1].astype(np.int64)
        if k == 1:
            return words
        return self.files.read("prefix", k, start, stop) * len(self.vocab) + words

    def _not_closed(self, k, words, part):
        text = " ".join(self.vocab.words[w] for w in words)
        raise NplmError(f"counts are not closed under {part}es: the {k - 1}-gram '{text}' of a {k}-gram has no count")

    def _adjusted_counts(self, k):
        """`adjusted{k}`: Kneser-Ney's continuation counts (the number of words seen
        before the n-gram; n-grams starting with `<s>` keep their counts; the highest
        order keeps its counts). Returns the counts-of-counts of the n-grams that
        predict events."""
        largest, adjusting = self.largest_count, self._adjusting(k)

        def adjusted(chunk):
            low, high = chunk
            grams, counts = self.grams(k, low, high), self.raw_counts(k, low, high)
            if adjusting:
                counts = np.where(self.events.non_event(grams[:, 0]), counts, self._continuation(k, low, high))
            predicting = counts[~self.events.non_event(grams[:, -1])]
            return counts, np.bincount(np.minimum(predicting, largest + 1), minlength=largest + 2)[:largest + 1]

        histogram = np.zeros(largest + 1, dtype=np.int64)
        # counts not adjusted are the store's (_adjusted): no file
        with self.files.writer("adjusted", k) if adjusting else contextlib.nullcontext() as out:
            chunks = self.chunks(k, self.pass_rows(row_bytes(k, ROW, CONTINUATION, ADJUSTED)))
            for counts, counted in in_order(adjusted, chunks):
                if out is not None:
                    out.append(counts)
                histogram += counted
        return histogram

    def _adjusting(self, k):
        """Whether order k's counts are Kneser-Ney's continuation counts (not the highest's)."""
        return self.discounting.adjusts_counts and k < self.order

    def _adjusted(self, k, start, stop):
        """Rows start..stop-1 of `adjusted{k}`, or of the counts where they are not adjusted."""
        if not self._adjusting(k):
            return self.raw_counts(k, start, stop)
        return self.files.read("adjusted", k, start, stop)

    def _continuation(self, k, low, high):
        """How many order-(k+1) rows have rows low..high-1 of order k as suffix (counted
        when the suffix rows were found)."""
        if k == 1:
            first = self.first_rows[0]
            return self.word_continuation[first + low:first + high]
        return self.files.read("continuation", k, low, high)

    def _summed(self, histogram):
        """The counts-of-counts of all the rows (here: all of them are this estimate's)."""
        return histogram

    def _all_words(self, values):
        """Values of every word's unigram row from those of this estimate's."""
        return values

    def _kept_before(self, k, kept):
        """How many model rows of order k come before this estimate's `kept` ones."""
        return 0

    def _unigram_probabilities(self, discount):
        count = self._all_words(self._adjusted(1, 0, self.sizes[0]))
        size = len(count)
        words = np.arange(size)
        lower = np.full(size, log10_to_prob(np.float32(-math.log10(self.events.count))))
        eligible = ~self.events.non_event(words) & (count > 0)
        prob, keep, gamma = context_probabilities(count, lower, np.zeros(size, dtype=np.int64), 1, eligible,
                                                  np.zeros(1, dtype=bool), discount, self.interpolate,
                                                  self.always_interpolate, self.events)
        logp = np.full(size, -np.inf, dtype=np.float32)
        with np.errstate(divide="ignore"):
            logp[keep] = np.log10(prob[keep]).astype(np.float32)
        present = keep.copy()
        distribute_unigram_mass(logp, present, self.events, gamma if self.lmplz_weights else None)
        mine = slice(self.first_rows[0], self.first_rows[0] + self.sizes[0])
        self.files.write("logp", 1, logp[mine])
        self.files.write("present", 1, present[mine])
        if self.cutoffs:
            self.files.write("walk", 1, backoff_walks(logp[mine], present[mine], None, None))

    def _lower_probabilities(self, k):
        """`lower{k}`: the back-off walk (`WALK`) of each order-k row's suffix."""
        self.filled_by_windows("lower", k, NO_WALK, *self.walk_window_rows(k), self.walks_of_suffixes("walk", k))

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

    def walks_of_suffixes(self, name, k):
        """A `filled_by_windows` window: the walks in `name{k-1}` of order-k rows' suffixes."""
        def window(low, high, last):
            walks = self.walks(name, k - 1, low, high)

            def fill(start, stop, values):
                suffix = self.files.read("suffix", k, start, stop)
                inside = (suffix >= low) & (suffix < high)
                values[inside] = walks[suffix[inside] - low]
            return fill
        return window

    def context_runs(self, k):
        """(start, stop) of runs of whole contexts of order k, about a chunk's rows each
        (a share of the memory for each of the runs computed side by side)."""
        rows = self.pass_rows(row_bytes(k, GRAMS, ADJUSTED, PREFIX, LOWER, LOGP_FILE, PRESENT, WALKS,
                                        *PROBABILITY_TEMPORARIES))
        size, start = self.sizes[k - 1], 0
        while start < size:
            stop = min(start + rows, size)
            while stop < size:  # end the run where a context ends
                prefix = self.files.read("prefix", k, start, min(stop + rows, size))
                ends = np.flatnonzero(prefix[1:] != prefix[:-1]) + 1
                ends = ends[ends >= stop - start]
                if len(ends):
                    stop = start + int(ends[0])
                    break
                stop = min(stop + rows, size)
            yield start, stop
            start = stop

    def _context_pass(self, k, discount):
        """Order k's probabilities (`logp{k}`, `present{k}`) and the back-off weights
        of order k-1's contexts (`bow{k-1}`, `node{k-1}`), context by context, runs of
        contexts computed side by side."""
        logp_out, present_out = self.files.writer("logp", k), self.files.writer("present", k)
        bow_out, node_out = self.files.writer("bow", k - 1), self.files.writer("node", k - 1)
        walk_out = self.files.writer("walk", k) if k < self.order and self.cutoffs else None
        first_row = self.first_rows[k - 2]  # contexts are counted among all the rows, files hold this estimate's
        contexts_done = first_row
        for first_context, logp, keep, bow, node, walks in in_order(lambda run: self._contexts(k, discount, *run),
                                                                    self.context_runs(k)):
            logp_out.append(logp)
            present_out.append(keep)
            if walk_out is not None:
                walk_out.append(walks)
            gap = first_context - contexts_done  # contexts without n-grams after them: no weight
            bow_out.append(np.zeros(gap, dtype=np.float32))
            node_out.append(np.zeros(gap, dtype=bool))
            bow_out.append(bow)
            node_out.append(node)
            contexts_done = first_context + len(node)
        gap = first_row + self.sizes[k - 2] - contexts_done
        bow_out.append(np.zeros(gap, dtype=np.float32))
        node_out.append(np.zeros(gap, dtype=bool))
        for out in (logp_out, present_out, bow_out, node_out, walk_out):
            if out is not None:
                out.close()

    def _contexts(self, k, discount, start, stop):
        """The values of order-k rows start..stop-1 (whole contexts): (the first context's
        row, the rows' logp and presence, the contexts' back-off weights and node flags)."""
        events, vocab = self.events, self.vocab
        grams = self.grams(k, start, stop)
        count = self._adjusted(k, start, stop)
        prefix = self.files.read("prefix", k, start, stop)
        suffix_walk = self.files.read("lower", k, start, stop)
        first_context = int(prefix[0])
        group, size = prefix - first_context, int(prefix[-1]) - first_context + 1
        skipped_row = grams[:, -2] == vocab.eos
        if not events.unk_is_word:
            for column in range(k - 1):  # column by column: np.any(axis=1) over k-1 columns is slow
                skipped_row |= grams[:, column] == vocab.unk
        skipped = np.zeros(size, dtype=bool)
        skipped[group] = skipped_row
        eligible = ~skipped_row & ~events.non_event(grams[:, -1]) & (count > 0)
        lower = log10_to_prob(np.where(eligible, suffix_walk["result"] + suffix_walk["weight"], -np.inf))
        prob, keep, gamma = context_probabilities(count, lower, group, size, eligible, skipped, discount,
                                                  self.interpolate, self.always_interpolate, events)
        logp = np.full(stop - start, -np.inf, dtype=np.float32)
        with np.errstate(divide="ignore"):
            logp[keep] = np.log10(prob[keep]).astype(np.float32)
        node = np.zeros(size, dtype=bool)
        node[group[keep]] = True
        bow = lmplz_bows(gamma, node) if self.lmplz_weights else context_bows(logp, keep, lower, group, node)
        walks = backoff_walks(logp, keep, suffix_walk, bow[group]) if k < self.order and self.cutoffs else None
        return first_context, logp, keep, bow, node, walks

    def _final_model(self):
        """The model's rows (the `present` ones) and their values, in `f*` files."""
        order, sizes = self.order, []
        self.files.write("bow", order, np.zeros(self.sizes[-1], dtype=np.float32))
        self.files.write("node", order, np.zeros(self.sizes[-1], dtype=bool))
        vocab_size = len(self.vocab)
        kept_first = []  # per order, the model's rows before this estimate's
        every_row_below = False  # whether order k-1 keeps every row (its rows are its model rows)
        for k in range(1, order + 1):
            # every row kept (as in KN without cutoffs): whole files are renamed, not copied
            every_row = k > 1 and self._all_present(k)
            moved = self._moved_whole(k) if every_row else ()
            walked = ("context",) if self.files.exists("context", k) else ()
            writers = {name: self.files.writer(f"f{name}", k)
                       for name in ("grams", "keys", "logp", "bow", "node") + walked
                       if name not in moved}
            below = None if every_row_below else _KeptBefore(self.files, k - 1)  # read forward: one chunk at a time

            def model_rows(chunk, k=k, moved=moved, below=below, walked=walked):
                start, stop = chunk
                present = self.files.read("present", k, start, stop)
                grams = (self.files.read("fgrams", k, start, stop) if "grams" in moved
                         else self.grams(k, start, stop)[present])
                if k == 1:
                    keys = grams[:, 0].astype(np.int64)
                else:  # the prefix's row among the model's rows of the order below, then the word
                    prefix = self.files.read("prefix", k, start, stop)[present] - self.first_rows[k - 2]
                    keys = (kept_first[k - 2] + (prefix if below is None else below.rows(prefix))) * vocab_size \
                        + grams[:, -1]
                values = {name: self.files.read(name, k, start, stop)[present]
                          for name in ("logp", "bow", "node") + walked if name not in moved}
                return dict(values, grams=grams, keys=keys), int(present.sum())

            kept = 0
            model_row_bytes = row_bytes(k, GRAMS, MODEL_KEYS, PREFIX, PRESENT, LOGP_FILE, BOW, NODE, CONTEXT, ROW, ROW)
            for values, present in in_order(model_rows, self.chunks(k, self.pass_rows(model_row_bytes)),
                                            threads=1 if below is not None else PASS_THREADS):
                for name, out in writers.items():
                    out.append(values[name])
                kept += present
            every_row_below = every_row
            for out in writers.values():
                out.close()
            sizes.append(kept)
            kept_first.append(self._kept_before(k, kept))
            self.finished("model", k)
            if self.consume_store:
                for name in ("grams", "counts"):
                    with contextlib.suppress(FileNotFoundError):
                        os.remove(self.store.path(name, k))
        self.finished("model", order + 1)  # present{order}
        return DiskModel(self.vocab, self.files.folder, sizes)

    def _all_present(self, k):
        return all(self.files.read("present", k, start, stop).all()
                   for start, stop in self.chunks(k, self.rows(row_bytes(k, PRESENT))))

    def _moved_whole(self, k):
        """The model's files of order k made by renaming this estimate's (and, when the
        store is this estimate's to consume, its n-grams): the names moved."""
        sources = [(self.files.path(name, k), name) for name in ("logp", "bow", "node")]
        if self.consume_store:
            sources.append((self.store.path("grams", k), "grams"))
        return [name for path, name in sources if rename_scratch(path, self.files.path(f"f{name}", k))]

    def finished(self, stage, k=None):
        """`stage` done (with order k, or with every order): the files it reads last go (the
        disk they take is the estimate's peak)."""
        for file in self.files.declarations.values():
            if last_stage(file, self.stages) == stage:
                orders = range(1, self.order + 1) if k is None else [k - file.lag]
                self.files.remove(*((file.name, j) for j in orders))

    def walk_window_rows(self, k):
        """(window rows, chunk rows) of a filled_by_windows pass of order k finding the
        walks of its rows' suffixes (held a window of order k-1 at a time)."""
        return self.rows(row_bytes(k - 1, WALKS)), self.pass_rows(row_bytes(k, SUFFIX, LOWER, WALK))


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
