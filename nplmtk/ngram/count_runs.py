"""Counting a text larger than memory, as SRILM's make-big-lm and KenLM's lmplz do: the
text goes through one hash counter a piece at a time; before its tables would outgrow
their share of `memory` they go to disk, order by order, as a sorted run (a CountStore),
and the runs (and counts read from files) are merged a block of rows at a time into one
CountStore, in memory bounded by `memory` whatever the number of runs and their size."""
import os
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .._ext.count_kernels import NgramHashCounter, tables_bytes
from .._ext.ngram_sorting import merge_sorted_rows, sort_counted
from ..errors import InputError
from ..io import BLOCK_BYTES
from ..scratch import scratch_error
from ..threads import raise_if_stopping, usable_cores
from .counts import (COUNTS_BLOCK_BYTES, NgramCounts, check_ids, check_order, check_orders, check_read_orders,
                     read_counts_blocks)
from .store import CountStore, StoreWriter

# The tables may take half of `memory`: spilling them takes about as much again for one
# order's sorted copy (its table freed once copied), and the text's block lies beside them.
TABLE_SHARE = 0.5
PIECE_MEMORY_SHARE = 1 / 1024  # text handed to the counter at a time: 16 bytes a token in the kernel
MAX_PIECE_TOKENS = 1 << 20
MIN_PIECE_TOKENS = 1 << 10
# a block of text read (its bytes, then its ids: some 2.5 times its size); small, since the
# block in which the counts first outgrow the memory is counted by one counter to its end
BLOCK_MEMORY_SHARE = 1 / 64
# a block of a counts file read (about 5 times its size in ids, counts and sorts), two at once
COUNTS_BLOCK_MEMORY_SHARE = 1 / 64
MERGE_SHARE = 0.5  # the merge's blocks of rows, one per run and one of output
MIN_BLOCK_ROWS = 1 << 10  # below this a run is merged with others first (fewer runs at once)
MERGE_THREADS = 2  # orders merged side by side
COUNT_THREADS = 2  # blocks of text counted side by side


class CountAccumulator:
    """The counts of texts (add_texts) and of counts files (add_counts_file) within about
    `memory` bytes, the runs that outgrow it kept in `folder`. `store` leaves them on
    disk; `result` gives them in memory. A text is best read `block_bytes` at a time."""

    def __init__(self, vocab, order, memory, folder):
        check_order(order)
        self.vocab, self.order, self.memory, self.folder = vocab, order, memory, folder
        self.counter = NgramHashCounter(order, len(vocab))
        self.runs, self.counts_read = [], []  # CountStores: the text's sorted runs, the counts files'
        self.table_memory = int(memory * TABLE_SHARE)
        self.piece_tokens = int(min(MAX_PIECE_TOKENS, max(MIN_PIECE_TOKENS, memory * PIECE_MEMORY_SHARE)))
        # a block for each counter of add_texts
        self.block_bytes = int(min(BLOCK_BYTES, max(1 << 16, memory * BLOCK_MEMORY_SHARE / COUNT_THREADS)))
        self.folders = 0

    def add_texts(self, corpora):
        """The n-grams of each corpus of the iterable `corpora` (blocks of text, as
        Corpus.read_blocks gives them). Once the counts outgrow the memory (a run on disk),
        and with more than one core, the blocks left are counted by two counters side by
        side, each in half of the memory (a block read and encoded beside the other's
        counting); the second one's counts join this one's runs."""
        corpora = iter(corpora)
        for corpus in corpora:
            self.add_text(corpus)
            if self.runs and usable_cores(COUNT_THREADS) > 1:
                self._add_side_by_side(corpora)
                return

    def _add_side_by_side(self, corpora):
        lock, failed = threading.Lock(), []

        def count(accumulator):
            try:
                while True:
                    with lock:
                        corpus = None if failed else next(corpora, None)
                    if corpus is None:
                        return
                    accumulator.add_text(corpus)
            except BaseException:
                failed.append(True)  # the other counter stops at its next block
                raise

        helper = CountAccumulator(self.vocab, self.order, self.memory // 2, self._new_folder("helper"))
        full_table = self.table_memory
        self.table_memory = helper.table_memory
        try:
            with ThreadPoolExecutor(1) as pool:
                helping = pool.submit(count, helper)
                try:
                    count(self)
                finally:
                    helping.result()
        finally:
            self.table_memory = full_table
        if helper.counter.entries():
            helper.runs.append(helper._spill(helper._new_folder("run")))
        self.runs += helper.runs

    def add_text(self, corpus):
        """The n-grams of `corpus`, its sentences given to the counter a piece at a time so
        that the tables are measured before each piece could grow them past their share."""
        check_ids(corpus)
        vocab, offsets = self.vocab, corpus.offsets
        cuts = np.searchsorted(offsets, np.arange(self.piece_tokens, offsets[-1], self.piece_tokens))
        cuts = np.unique(np.concatenate([[0], cuts, [len(offsets) - 1]]))  # sentences of no words count too
        for first, last in zip(cuts[:-1].tolist(), cuts[1:].tolist()):
            start, end = int(offsets[first]), int(offsets[last])
            raise_if_stopping()  # the process ends on a signal: between two pieces
            padded = end - start + 2 * (last - first)  # at most this many new n-grams of each order
            if self.counter.entries() and self.counter.bytes_after(padded) > self.table_memory:
                self.runs.append(self._spill(self._new_folder("run"), more_text=True))
            self.counter.add(corpus.ids[start:end], offsets[first:last + 1] - start, vocab.bos, vocab.eos, vocab.unk)

    def add_counts(self, counts):
        """Counts in memory (NgramCounts): kept on disk until the merge."""
        self.counts_read.append(CountStore.save(counts, self._new_folder("read")))

    def add_counts_file(self, path, limit_vocab=False):
        """An SRILM counts file (counts.read_counts_blocks), read a block of lines at a
        time, each block's counts a sorted store on disk until the merge."""
        orders = set()
        block_bytes = int(min(COUNTS_BLOCK_BYTES, max(1 << 16, self.memory * COUNTS_BLOCK_MEMORY_SHARE)))
        for tables in read_counts_blocks(path, self.vocab, limit_vocab, block_bytes):
            raise_if_stopping()
            if tables:
                writer = StoreWriter(self.vocab, self._new_folder("read"), max(tables))
                for k, (rows, counts) in sorted(tables.items()):
                    writer.append(k, rows, counts)
                self.counts_read.append(writer.close())
                orders.update(tables)
        check_read_orders(orders, path)

    def add_store(self, store):
        """Counts on disk already (a CountStore over the same vocabulary), merged with the rest."""
        self.counts_read.append(store)

    def store(self, folder, source="counts", complete=True):
        """All the counts as a CountStore in `folder` (made if missing): the tables sorted
        straight into it when nothing went to disk, else every run merged into it. The
        accumulator is spent. `source` names the input in errors. With `complete` False
        the counts may lack an order, or be none (a share of a text: mpi_counts.py)."""
        try:
            os.makedirs(folder, exist_ok=True)
        except OSError as err:
            raise scratch_error(folder, err) from None
        if not self.runs and not self.counts_read:
            if not self.counter.entries() and complete:
                raise InputError("no counts", path=source)
            store = self._spill(folder)
        else:
            if self.counter.entries():
                self.runs.append(self._spill(self._new_folder("run")))
            store = self._merge(self.runs + self.counts_read, folder, source)
        self.counter = None
        if complete:
            check_orders(store.sizes, source)
        return store

    def result(self, source="counts"):
        """All the counts in memory (NgramCounts), merged on disk first if any went there."""
        if self.runs or self.counts_read:
            return self.store(self._new_folder("merged"), source).load()
        if not self.counter.entries():
            raise InputError("no counts", path=source)
        counts = NgramCounts.from_tables(self.vocab, self.counter.tables())
        self.counter = None
        counts.check_orders(source)
        return counts

    def _new_folder(self, kind):
        self.folders += 1
        folder = os.path.join(self.folder, f"{kind}{self.folders}")
        try:
            os.mkdir(folder)
        except OSError as err:
            raise scratch_error(self.folder, err) from None
        return folder

    def _spill(self, folder, more_text=False):
        """The counter's tables as a sorted CountStore in `folder`, one order at a time
        (each order's table freed once copied out); a new counter takes its place. With
        `more_text` to count, its tables as large as these from the start where they fit
        in the tables' share (the next run's text holds about as many n-grams: growing them
        again from the smallest placed every entry again at each doubling)."""
        writer = StoreWriter(self.vocab, folder, self.order)
        capacities = self.counter.capacities()
        rank = rows = None
        for k in range(1, self.order + 1):
            keys, counts = self.counter.take(k)
            rows, _, counts, rank, _ = sort_counted(keys, counts, None, rank, rows, len(self.vocab),
                                                    want_keys=False, want_rank=k < self.order)
            del keys
            writer.append(k, rows, counts)
        del rows, counts  # before the new tables: the peak
        presized = more_text and tables_bytes(capacities) <= self.table_memory
        self.counter = NgramHashCounter(self.order, len(self.vocab), capacities if presized else None)
        return writer.close()

    def _merge(self, stores, folder, source):
        """The stores summed into one in `folder`, at most as many at a time as blocks of
        MIN_BLOCK_ROWS rows fit in the merge's memory (a merge of the first ones goes to a
        store of its own and joins the end of the line), each removed once merged."""
        merge_memory = int(self.memory * MERGE_SHARE)
        fan_in = max(2, merge_memory // (MIN_BLOCK_ROWS * (4 * self.order + 8)) - 1)
        stores = list(stores)
        while len(stores) > fan_in:
            merged = merge_stores(stores[:fan_in], self._new_folder("merged"), merge_memory, source,
                                  self._own(stores[:fan_in]))
            self._remove(stores[:fan_in])
            stores = stores[fan_in:] + [merged]
        merged = merge_stores(stores, folder, merge_memory, source, self._own(stores))
        self._remove(stores)
        return merged

    def _own(self, stores):
        """The stores that are this accumulator's own (not a user's counts file)."""
        return [store for store in stores if store.folder is not None and store.folder.startswith(self.folder + os.sep)]

    def _remove(self, stores):
        """The merged stores that are this accumulator's own."""
        for done in self._own(stores):
            shutil.rmtree(done.folder, ignore_errors=True)


def merge_stores(stores, folder, memory, source="counts", spent=()):
    """The counts of several CountStores over one vocabulary summed into one in `folder`
    (orders up to the largest): each order's runs read a block of rows at a time, about
    `memory` bytes of blocks in all, through merge_sorted_rows; the orders are merged side
    by side, one per core (up to MERGE_THREADS), each in its share of the memory. The
    stores among `spent` are read for the last time: each block read lets go of its pages
    (CountStore.let_go), for the merged store's writes to take."""
    order = max(store.order for store in stores)
    writer = StoreWriter(stores[0].vocab, folder, order)
    threads = usable_cores(min(MERGE_THREADS, order))
    with ThreadPoolExecutor(threads) as pool:  # the largest orders first: they take longest
        merges = [pool.submit(_merge_order, stores, k, writer, memory // threads, source, spent)
                  for k in range(order, 0, -1)]
        try:
            for merge in merges:
                merge.result()
        finally:
            for merge in merges:
                merge.cancel()
    return writer.close()


def _merge_order(stores, k, writer, memory, source, spent):
    """Order k of `stores` merged into `writer` (the blocks of `spent` ones let go of once read)."""
    runs = [store for store in stores if store.order >= k and store.sizes[k - 1]]
    if not runs:
        return
    last_read = [any(run is store for store in spent) for run in runs]
    rows = max(1, memory // ((len(runs) + 1) * (4 * k + 8)))
    blocks, read = [None] * len(runs), [0] * len(runs)
    positions = np.zeros(len(runs), dtype=np.intp)
    out_rows, out_counts = np.empty((rows, k), dtype=np.int32), np.empty(rows, dtype=np.int64)
    while True:
        for r, run in enumerate(runs):
            if blocks[r] is None or positions[r] == len(blocks[r][1]) and read[r] < run.sizes[k - 1]:
                blocks[r] = run.read(k, read[r], read[r] + rows)
                if last_read[r]:
                    run.let_go(k, read[r], read[r] + len(blocks[r][1]))
                read[r] += len(blocks[r][1])
                positions[r] = 0
        more = np.array([read[r] < run.sizes[k - 1] for r, run in enumerate(runs)], dtype=np.uint8)
        written = merge_sorted_rows([b[0] for b in blocks], [b[1] for b in blocks], positions, more,
                                    out_rows, out_counts)
        if written < 0:
            raise InputError(f"{k}-gram counts that sum above 2^63 - 1", path=source)
        if written == 0:  # every run's rows taken
            return
        writer.append(k, out_rows[:written], out_counts[:written])
