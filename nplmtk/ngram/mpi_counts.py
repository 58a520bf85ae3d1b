"""Counting one text across MPI ranks (issue 35, item 3). Each rank counts its share of
the text's lines (a byte range from a line start) within `memory`; the counts are then
exchanged by first word, a block of rows at a time, so that each rank holds every n-gram
whose first word lies in its range of word ids (the ranges balanced by the words'
counts), merged into one sorted store. Since the ranges follow each other, the ranks'
stores in rank order are the sorted counts of the whole text: each rank estimates its
part (mpi_estimate.py), or rank 0 gathers them, a block at a time, into the store the
text counted on one machine gives."""
import os
import shutil

import numpy as np

from ..corpus import Corpus
from ..io import line_starts_near
from .count_runs import CountAccumulator, merge_stores
from .store import StoreWriter

EXCHANGE_SHARE = 1 / 8  # of `memory`: rows sent by a rank in one round (as many received)


def shard(path, comm):
    """(start, stop) of this rank's share of the regular file `path`: its bytes cut into
    equal parts, each moved to the next line start."""
    size = os.path.getsize(path)
    bounds = line_starts_near(path, [size * q // comm.size for q in range(comm.size + 1)])
    return bounds[comm.rank], bounds[comm.rank + 1]


def count_share(comm, texts, vocab, order, memory, folder, normalize=None, add_more=None):
    """This rank's shares of `texts` counted (then `add_more(accumulator)`, for counts
    files read by one rank only) into a store in `folder`/local, which may lack orders.
    Next: exchange_by_first_word, then gather_parts (collectives: every rank calls them)."""
    accumulator = CountAccumulator(vocab, order, memory, folder)
    accumulator.add_texts(chunk for path in texts for chunk in Corpus.read_blocks(
        path, vocab, unk=True, normalize=normalize, block_bytes=accumulator.block_bytes, allow_empty=True,
        byte_range=shard(path, comm)))
    if add_more is not None:
        add_more(accumulator)
    return accumulator.store(os.path.join(folder, "local"), complete=False)  # a share may lack an order


def first_word_ranges(comm, local):
    """The first id of each rank's range of first words (and |V| at the end): the words'
    counts summed over the ranks, cut into about equal masses."""
    vocab_size = len(local.vocab)
    words, counts = local.read(1, 0, local.sizes[0])
    mass = np.zeros(vocab_size, dtype=np.int64)
    mass[words[:, 0]] = counts
    total = np.zeros_like(mass)
    comm.Allreduce(mass, total)
    cumulative = np.cumsum(total)
    cuts = np.searchsorted(cumulative, cumulative[-1] * np.arange(1, comm.size) / comm.size, side="right")
    return np.concatenate([[0], np.maximum.accumulate(cuts), [vocab_size]]).astype(np.int64)


def exchange_by_first_word(comm, local, memory, folder):
    """Each order's rows of `local` sent to the rank whose range holds their first word,
    round by round (each rank sends at most a block of rows a round); the rows received
    from each rank, sorted already, merged into this rank's part. Returns the part and
    the ranges (first_word_ranges)."""
    from mpi4py import MPI
    ranges = first_word_ranges(comm, local)
    order = comm.allreduce(local.order, op=MPI.MAX)
    received = []
    for q in range(comm.size):
        os.makedirs(os.path.join(folder, f"from{q}"))
        received.append(StoreWriter(local.vocab, os.path.join(folder, f"from{q}"), order))
    for k in range(1, order + 1):
        size = local.sizes[k - 1] if k <= local.order else 0
        rows = max(1, int(memory * EXCHANGE_SHARE) // (4 * k + 8))
        for round_start in range(0, comm.allreduce(size, op=MPI.MAX), rows):
            grams, counts = local.read(k, round_start, round_start + rows) if round_start < size else (
                np.zeros((0, k), dtype=np.int32), np.zeros(0, dtype=np.int64))
            cuts = np.searchsorted(grams[:, 0], ranges) if len(grams) else np.zeros(comm.size + 1, dtype=np.int64)
            sent = np.diff(cuts).astype(np.int64)
            got = np.zeros(comm.size, dtype=np.int64)
            comm.Alltoall(sent, got)
            into = np.concatenate([[0], np.cumsum(got)])
            rows_in = np.empty((int(into[-1]), k), dtype=np.int32)
            counts_in = np.empty(int(into[-1]), dtype=np.int64)
            comm.Alltoallv([np.ascontiguousarray(grams), (sent * k, cuts[:-1] * k), MPI.INT32_T],
                           [rows_in, (got * k, into[:-1] * k), MPI.INT32_T])
            comm.Alltoallv([counts, (sent, cuts[:-1]), MPI.INT64_T], [counts_in, (got, into[:-1]), MPI.INT64_T])
            for q in range(comm.size):
                if got[q]:
                    received[q].append(k, rows_in[into[q]:into[q + 1]], counts_in[into[q]:into[q + 1]])
    stores = [writer.close() for writer in received]
    os.makedirs(os.path.join(folder, "part"))
    part = merge_stores([store for store in stores if sum(store.sizes)] or stores[:1], os.path.join(folder, "part"),
                        memory)
    for store in stores:
        shutil.rmtree(store.folder, ignore_errors=True)
    shutil.rmtree(local.folder, ignore_errors=True)
    return part, ranges


def gather_parts(comm, part, memory, folder, keep=False):
    """The ranks' parts in rank order, a block of rows at a time, into one store at rank 0
    (None at the others); each part removed unless `keep`."""
    from mpi4py import MPI
    order = comm.allreduce(part.order, op=MPI.MAX)
    writer = None
    if comm.rank == 0:
        os.makedirs(folder)
        writer = StoreWriter(part.vocab, folder, order)
    for k in range(1, order + 1):
        rows = max(1, int(memory * EXCHANGE_SHARE) // (4 * k + 8))
        size = part.sizes[k - 1] if k <= part.order else 0
        for sender in range(comm.size):
            blocks = comm.bcast(-(-size // rows) if comm.rank == sender else None, root=sender)
            for block in range(blocks):
                if comm.rank == sender:
                    grams, counts = part.read(k, block * rows, (block + 1) * rows)
                    if sender == 0:
                        writer.append(k, grams, counts)
                    else:
                        comm.send((np.ascontiguousarray(grams), counts), dest=0, tag=k)
                elif comm.rank == 0:
                    grams, counts = comm.recv(source=sender, tag=k)
                    writer.append(k, grams, counts)
    if not keep:
        shutil.rmtree(part.folder, ignore_errors=True)
    return writer.close() if writer is not None else None
