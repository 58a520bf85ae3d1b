"""Training across MPI ranks (Bengio et al. 2003, sec. 3.2). `-mpi param`: the
parameter-parallel output layer. Rank i owns output rows i*ceil(|V|/R) onwards (its rows of b, U and W; of the
log-bilinear models, its rows of b and R as output weights); every rank computes the shared layers (C, H, d) and
updates them identically. For each mini-batch:
Allreduce MAX of the output maxima, Allreduce SUM of the normalisers (with the target's
score, so every rank has the log-likelihood), Allreduce SUM of dL/da and dL/dx. The
arithmetic is the kernel's (the model's `output_block`, OutputBlock.block_*) and the
numbers the Optimizer's (optimizer.Steps); this module only sequences and exchanges.
`-mpi data`: each rank trains on its own shard (with its own threads) and the ranks
average their parameters every few updates (ParameterAverager).
A rank that stops mid-exchange is one typed error from every collective (rank_lost).
"""
import os
import socket
import time

import numpy as np

from ..errors import ParameterError, RankLostError
from ..scratch import process_alive
from .optimizer import walk

PROCESSES = []  # (host, pid) of each rank of MPI.COMM_WORLD, gathered by world()


def world():
    """MPI.COMM_WORLD, or a clear error when mpi4py is not installed. Every rank learns
    where the others run, to name one that stops (stopped_ranks)."""
    try:
        from mpi4py import MPI
    except ImportError:
        raise ParameterError("{mpi} needs mpi4py: pip install 'nplmtk[mpi]' (mpi4py and the mpich wheel)") from None
    comm = MPI.COMM_WORLD
    if not PROCESSES:
        PROCESSES.extend(allgather(comm, (socket.gethostname(), os.getpid())))
    return comm


def allgather(comm, value):
    """Every rank's `value`, in rank order."""
    from mpi4py import MPI
    try:
        return comm.allgather(value)
    except MPI.Exception as error:
        raise rank_lost(comm, error) from None


def rank_lost(comm, error):
    """mpi4py's MPI.Exception from a collective of `comm` (a rank killed or crashed
    mid-exchange), whose text is MPICH's error stack of a dozen lines or more, as one
    RankLostError: the ranks found stopped and MPI's one-line error class. The collectives
    catch it themselves (a try costs nothing; a context manager per Allreduce would)."""
    from mpi4py import MPI
    lost = stopped_ranks()
    who = (f"rank {', '.join(map(str, lost))} of {comm.size} stopped" if lost
           else f"a rank of {comm.size} stopped or cannot be reached")
    reason = MPI.Get_error_string(error.Get_error_class()).splitlines()[0].rstrip(" ,:")
    return RankLostError(f"{who} (killed or crashed?) during an exchange: {reason}", lost=lost)


def stopped_ranks():
    """Ranks on this host whose process has ended (those on other hosts cannot be seen)."""
    host = socket.gethostname()
    return [rank for rank, (where, pid) in enumerate(PROCESSES) if where == host and not process_alive(pid)]


def output_blocks(vocab_size, ranks):
    """Rows (lo, hi) of each rank's block: rank i from i * ceil(|V| / R)."""
    size = -(-vocab_size // ranks)
    return [(min(vocab_size, r * size), min(vocab_size, (r + 1) * size)) for r in range(ranks)]


class ParamParallelNetwork:
    """One rank's share of a model, with the kernel network's `train(chunk, steps)`, so
    the Trainer drives it unchanged;
    `communication_seconds` adds up the time spent in Allreduce."""

    def __init__(self, model, comm, capacity):
        from mpi4py import MPI
        self.MPI = MPI
        self.model, self.comm = model, comm
        self.blocks = output_blocks(len(model.vocab), comm.size)
        self.network = model.output_block(self.blocks[comm.rank], capacity)
        self.per_block = model.CAPABILITIES.parameter_blocks
        self.width = self.network.exchange_width
        self.top = np.empty((2, capacity), dtype=np.float32)
        self.sums = np.empty((2, 3 * capacity))
        self.partial = np.empty((2, capacity * self.width), dtype=np.float32)
        self.communication_seconds = 0.0

    def _allreduce(self, local, result, op):
        start = time.perf_counter()
        try:
            self.comm.Allreduce(local, result, op=op)
        except self.MPI.Exception as error:
            raise rank_lost(self.comm, error) from None
        self.communication_seconds += time.perf_counter() - start

    def train(self, windows, steps):
        """Update u of the chunk (optimizer.walk): the output blocks' step, the exchange,
        the shared layers' step at the Steps' rate (rows of C decayed by row_keep[u]), then
        the bulk decay dense_keep[u]. A model with parameter blocks takes a column of rates
        and decays per update and a momentum per block, and its block says which arrays the
        ranks gather after the update. With steps.sampling, the sampled step: every rank
        draws the same samples and scores those it holds; the maxima, the sums of r (and
        r^2, and the target scores) and dL/da, dL/dx are summed as for the full softmax."""
        step = self._softmax_step
        if steps.sampling is not None:
            draws = steps.sampling
            self.network.block_sampled_begin(draws.samples, draws.proposal, draws.seed)
            self.samples, step = draws.samples, self._sampled_step
        total, ess = 0.0, 0.0
        for u, start, K in walk(steps, len(windows)):
            chunk = windows[start:start + K]
            if self.per_block:
                rate, keep = np.ascontiguousarray(steps.rates[:, u]), np.ascontiguousarray(steps.dense_keep[:, u])
            else:
                rate = steps.rates[0, u]
            logp, sizes = step(chunk, K, rate)
            total, ess = total + logp, ess + sizes
            partial = self.partial[:, :K * self.width]
            self._allreduce(partial[0], partial[1], self.MPI.SUM)
            if self.per_block:
                for name in self.network.block_input_backward(chunk, partial[1], rate, keep, steps.momentum):
                    self._gather(name)
                continue
            self.network.block_input_backward(chunk, partial[1], rate, steps.row_keep[u])
            if steps.dense_keep[0, u] != 1:
                self.network.block_decay(steps.dense_keep[0, u])
        return total, steps.updates, ess

    def _softmax_step(self, chunk, K, rate):
        """The output blocks' part of one exact update; leaves this rank's dL/da, dL/dx in
        partial[0]. Returns the batch's log-likelihood (and 0: no samples)."""
        MPI, net = self.MPI, self.network
        top, sums = self.top[:, :K], self.sums[:, :2 * K]
        net.block_scores(chunk, top[0])
        self._allreduce(top[0], top[1], MPI.MAX)
        net.block_exponentials(chunk, top[1], sums[0])
        self._allreduce(sums[0], sums[1], MPI.SUM)
        net.block_backward(chunk, sums[1, :K], rate, self.partial[0, :K * self.width])
        return float((sums[1, K:] - np.log(sums[1, :K])).sum()), 0.0

    def _sampled_step(self, chunk, K, rate):
        """As _softmax_step with the importance-sampling estimate; returns the estimated
        log-likelihood and the sum of the effective sample sizes."""
        MPI, net = self.MPI, self.network
        top, sums = self.top[:, :K], self.sums[:, :3 * K]
        net.block_sampled_scores(chunk, top[0])
        self._allreduce(top[0], top[1], MPI.MAX)
        net.block_sampled_sums(chunk, top[1], sums[0])
        self._allreduce(sums[0], sums[1], MPI.SUM)
        r_sum, r_squares, target = sums[1, :K], sums[1, K:2 * K], sums[1, 2 * K:]
        net.block_sampled_backward(chunk, r_sum, rate, self.partial[0, :K * self.width])
        return (float((target - (top[1] + np.log(r_sum / self.samples))).sum()),
                float((r_sum * r_sum / r_squares).sum()))

    def synchronise(self):
        """Give every rank every block of b, U and W (before validation and saving)."""
        for name in ("b", "U", "W"):
            if name in self.model.params:
                self._gather(name)

    def _gather(self, name):
        """Every rank's block of rows of params[name] to every rank."""
        MPI, array = self.MPI, self.model.params[name]
        row = int(np.prod(array.shape[1:], dtype=np.int64))
        counts = [(hi - lo) * row for lo, hi in self.blocks]
        offsets = [lo * row for lo, _ in self.blocks]
        start = time.perf_counter()
        try:
            self.comm.Allgatherv(MPI.IN_PLACE, [array, counts, offsets, MPI.FLOAT])
        except MPI.Exception as error:
            raise rank_lost(self.comm, error) from None
        self.communication_seconds += time.perf_counter() - start


class ParameterAverager:
    """-mpi data: every rank's parameters replaced by their mean over the ranks."""

    def __init__(self, model, comm):
        from mpi4py import MPI
        self.MPI, self.model, self.comm = MPI, model, comm
        self.communication_seconds = 0.0

    def average(self):
        start = time.perf_counter()
        for array in self.model.params.values():
            try:
                self.comm.Allreduce(self.MPI.IN_PLACE, array, op=self.MPI.SUM)
            except self.MPI.Exception as error:
                raise rank_lost(self.comm, error) from None
            array *= np.float32(1 / self.comm.size)
        self.communication_seconds += time.perf_counter() - start

    def sum(self, values):
        """Sums over the ranks of a few numbers (log-likelihoods, counts)."""
        total = np.array(values, dtype=np.float64)
        try:
            self.comm.Allreduce(self.MPI.IN_PLACE, total, op=self.MPI.SUM)
        except self.MPI.Exception as error:
            raise rank_lost(self.comm, error) from None
        return total.tolist()
