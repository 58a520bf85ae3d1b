"""Estimating across MPI ranks (issue 35, item 3): after exchange_by_first_word each rank
holds the n-grams whose first word lies in its range of word ids, and estimates them.

An n-gram, its prefix and its context share the first word, so the prefix rows and the
context passes (probabilities, back-off weights) stay on the rank, as in stream/. What
crosses ranks is the suffix (the n-gram without its first word): its row is asked of the
rank holding the suffix's first word, which counts the askers (Kneser-Ney's continuation
counts: each n-gram is one distinct word before its suffix), and later answers with the
suffix's probability. The counts-of-counts are summed over the ranks, so every rank
discounts alike, and the unigrams' arithmetic runs on every word at every rank. Rows are
numbered among all the ranks' rows (the ranks' rows in rank order are the rows of the
whole model, in order), so the parts gathered at rank 0 are stream/'s model of the whole
text, and its files are one machine's byte for byte.

Every exchange goes in rounds, each rank asking about at most a chunk of rows a round."""
import os

import numpy as np

from .row_files import row_bytes
from .stream import DiskModel, StreamEstimate
from .stream.files import CONTINUATION, LOWER, PREFIX, ROW, SUFFIX, WALK, WALKS
from .stream.rows import NO_ROW, SEARCH_TEMPORARIES, not_closed, row_keys, suffix_keys

_MPI_TYPES = {np.dtype(np.int64): "INT64_T", np.dtype(np.float32): "FLOAT"}


def ask_owners(comm, queries, starts, answer, reply_dtype):
    """Replies to `queries` (int64, any order), each sent to the rank r whose range
    starts[r] <= query < starts[r + 1] holds it; that rank replies to the queries it
    receives, sorted, with `answer(sorted_queries)`. Every rank calls it (a collective)."""
    from mpi4py import MPI
    reply_type = getattr(MPI, _MPI_TYPES[np.dtype(reply_dtype)])
    by_query = np.argsort(queries, kind="stable")
    ordered = np.ascontiguousarray(queries[by_query], dtype=np.int64)
    cuts = np.concatenate([[0], np.searchsorted(ordered, starts[1:-1]), [len(ordered)]]).astype(np.int64)
    sent = np.diff(cuts)
    got = np.zeros(comm.size, dtype=np.int64)
    comm.Alltoall(sent, got)
    into = np.concatenate([[0], np.cumsum(got)]).astype(np.int64)
    received = np.empty(int(into[-1]), dtype=np.int64)
    comm.Alltoallv([ordered, (sent, cuts[:-1]), MPI.INT64_T], [received, (got, into[:-1]), MPI.INT64_T])
    by_received = np.argsort(received, kind="stable")
    replies = np.empty(len(received), dtype=reply_dtype)
    replies[by_received] = answer(received[by_received])
    back = np.empty(len(ordered), dtype=reply_dtype)
    comm.Alltoallv([replies, (got, into[:-1]), reply_type], [back, (sent, cuts[:-1]), reply_type])
    out = np.empty_like(back)
    out[by_query] = back
    return out


def rank_estimate(comm, part, words, folder, memory, **settings):
    """This rank's part of the estimate (a StreamEstimate exchanging with the other
    ranks): `part` (a CountStore) holds the n-grams whose first word lies in words[rank]
    .. words[rank + 1] - 1 (`words`: exchange_by_first_word's ranges of word ids), removed
    once used; `settings` as StreamEstimate takes them. Collectives throughout."""
    return StreamEstimate(part, folder, memory, consume_store=True, exchange=RankExchange(comm, words), **settings)


class RankExchange:
    """What the estimate of one rank's rows exchanges with the other ranks (stream.local's
    LocalExchange is the estimate of every row): every method is a collective."""

    def __init__(self, comm, words):
        from mpi4py import MPI
        self.comm, self.mpi, self.words = comm, MPI, words

    def model_order(self, store):
        return self.comm.allreduce(store.order, op=self.mpi.MAX)

    def share(self, estimate):
        """The estimate's rows: its part's, numbered among all the ranks' rows."""
        comm, words, part = self.comm, self.words, estimate.store
        low, high = int(words[comm.rank]), int(words[comm.rank + 1])
        estimate.sizes = [high - low] + [part.sizes[k - 1] if k <= part.order else 0
                                         for k in range(2, estimate.order + 1)]
        estimate.unigram_counts = estimate.unigram_counts[low:high]
        # starts[k - 1][r]: the first row of order k at rank r among all of them; the total last
        every = np.array(comm.allgather(estimate.sizes), dtype=np.int64).T
        self.starts = [np.concatenate([[0], np.cumsum(sizes)]) for sizes in every]
        self.starts[0] = np.asarray(words, dtype=np.int64)
        estimate.first_rows = [int(starts[comm.rank]) for starts in self.starts]

    def _rounds(self, estimate, k, rows):
        """(start, stop) of this rank's rows of order k, a chunk a round, as many rounds at
        every rank (empty ones once the rows run out)."""
        size = estimate.sizes[k - 1]
        rounds = self.comm.allreduce(-(-size // rows), op=self.mpi.MAX)
        for number in range(rounds):
            yield min(number * rows, size), min((number + 1) * rows, size)

    def suffix_rows(self, estimate, k):
        """`suffix{k}` (k > 2), rows among all of order k-1, asked of the ranks that hold
        them by their keys, which count the askers into `continuation{k-1}`."""
        files, vocab_size = estimate.files, len(estimate.vocab)
        files.write("continuation", k - 1, np.zeros(estimate.sizes[k - 2], dtype=CONTINUATION.dtype))
        key_starts = self.starts[k - 3] * vocab_size  # an order-(k-1) key: its prefix's row * V + word

        def answer(keys):
            return self._rows_of_keys(estimate, k - 1, keys)

        with files.writer("suffix", k) as out:
            for start, stop in self._rounds(estimate, k, estimate.rows(row_bytes(k, PREFIX, SUFFIX,
                                                                                 *SEARCH_TEMPORARIES))):
                query = suffix_keys(estimate, k, start, stop) if stop > start else np.zeros(0, dtype=np.int64)
                found = ask_owners(self.comm, query, key_starts, answer, np.int64)
                if np.any(found < 0):
                    not_closed(estimate, k, estimate.grams(k, start, stop)[np.argmax(found < 0)][1:], "suffix")
                out.append(found)

    def _rows_of_keys(self, estimate, k, keys):
        """The rows of order k among all of them with these sorted keys (NO_ROW where none
        is), a window of this rank's rows at a time; each row found counted in
        `continuation{k}`."""
        found = np.full(len(keys), NO_ROW, dtype=np.int64)
        if not len(keys):
            return found
        for low, high in estimate.chunks(k, estimate.rows(row_bytes(k, ROW, CONTINUATION))):
            self._rows_in_window(estimate, k, keys, found, low, high)  # its arrays gone before the next window's
        return found

    @staticmethod
    def _rows_in_window(estimate, k, keys, found, low, high):
        """_rows_of_keys in the window of this rank's rows low..high-1."""
        mine = row_keys(estimate, k, low, high)
        first, last = int(np.searchsorted(keys, mine[0])), int(np.searchsorted(keys, mine[-1], side="right"))
        if first == last:
            return
        place = np.searchsorted(mine, keys[first:last])
        hit = mine[place] == keys[first:last]
        found[first:last][hit] = estimate.first_rows[k - 1] + low + place[hit]
        counted = estimate.files.mapped("continuation", k, start=low, rows=high - low)
        counted += np.bincount(place[hit], minlength=high - low)
        counted.flush()

    def word_continuation(self, counted):
        """The unigrams' continuation counts: the bigrams' second words at every rank."""
        total = np.zeros_like(counted)
        self.comm.Allreduce(counted, total)
        return total

    def summed(self, histogram):
        total = np.zeros_like(histogram)
        self.comm.Allreduce(histogram, total)
        return total

    def all_words(self, values):
        counts = np.diff(self.starts[0])
        every = np.empty(int(self.starts[0][-1]), dtype=values.dtype)
        self.comm.Allgatherv(np.ascontiguousarray(values), [every, (counts, self.starts[0][:-1])])
        return every

    def kept_before(self, k, kept):
        return int(sum(self.comm.allgather(kept)[:self.comm.rank]))

    def suffix_walks(self, estimate, k):
        """`lower{k}`: the back-off walk of each row's suffix, asked of the ranks that hold
        the suffixes (a walk's two float32 sums travel as one int64)."""

        def answer(rows):
            return self._walks_of_rows(estimate, k - 1, rows).view(np.int64)

        with estimate.files.writer("lower", k) as out:
            for start, stop in self._rounds(estimate, k, estimate.rows(row_bytes(k, SUFFIX, LOWER, WALK))):
                suffix = estimate.files.read("suffix", k, start, stop)
                out.append(ask_owners(self.comm, suffix, self.starts[k - 2], answer, np.int64).view(WALK))

    def _walks_of_rows(self, estimate, k, rows):
        """The back-off walks of these sorted rows of order k (rows among all of them), read
        a window of this rank's rows at a time."""
        values = np.empty(len(rows), dtype=WALK)
        local = rows - estimate.first_rows[k - 1]
        size, window = estimate.sizes[k - 1], estimate.rows(row_bytes(k, WALKS))
        bounds = np.searchsorted(local, np.arange(0, size + window, window))
        for number in np.flatnonzero(np.diff(bounds)):
            low, asked = int(number) * window, slice(bounds[number], bounds[number + 1])
            # the window unnamed: gone before the next one is read
            values[asked] = estimate.walks("walk", k, low, min(low + window, size))[local[asked] - low]
        return values


def gather_model(comm, model, block_rows):
    """The ranks' DiskModels, in rank order, appended to rank 0's files: the model of all
    the rows at rank 0 (None at the others)."""
    sizes = comm.allgather(model.sizes)
    for k in range(1, model.order + 1):
        for name in ("fgrams", "fkeys", "flogp", "fbow", "fnode"):
            for sender in range(1, comm.size):
                size = sizes[sender][k - 1]
                for start in range(0, size, block_rows):
                    if comm.rank == sender:
                        comm.send(model.files.read(name, k, start, start + block_rows), dest=0, tag=k)
                    elif comm.rank == 0:
                        with open(model.files.path(name, k), "ab") as out:
                            comm.recv(source=sender, tag=k).tofile(out)
    if comm.rank != 0:
        return None
    return DiskModel(model.vocab, model.files.folder, [sum(rank_sizes[k]
                                                           for rank_sizes in sizes) for k in range(model.order)])


def rank_folder(folder, comm):
    path = os.path.join(folder, f"estimate{comm.rank}")
    os.makedirs(path, exist_ok=True)
    return path
