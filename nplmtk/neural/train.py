"""Training policy for the neural models (Bengio et al. 2003, sec. 2 and 4): SGD on
shuffled windows, learning rate eps_t = eps0 / (1 + r t), weight decay on the weights and
C (not the biases), early stopping on validation perplexity that keeps the best model,
lock-free threads (sec. 3.1), atomic checkpoints and a JSON-lines log. The arithmetic is
in the Cython kernel; this module decides what to run and when."""
import contextlib
import json
import math
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from types import SimpleNamespace

import numpy as np

from .. import container
from ..errors import NplmError
from ..io import atomic_output
from ..lm import register
from .blas import blas_threads
from .._ext.mlp_kernels import Proposal
from .energy import EnergyModel
from .mlp import MLPModel

ARCHITECTURES = {"mlp": MLPModel, "energy": EnergyModel}


def architecture_of(model):
    return next(name for name, kind in ARCHITECTURES.items() if isinstance(model, kind))


def model_from_arrays(vocab, arrays, meta):
    """A model of the architecture a checkpoint or model file names (default: mlp)."""
    return ARCHITECTURES[meta.get("arch", "mlp")].from_arrays(vocab, arrays, meta)

ROUND = 4096  # windows per thread between progress reports and checkpoint checks


@dataclass
class TrainingConfig:
    epochs: int = 10
    batch: int = 1
    lr: float = 1e-3
    lr_decay: float = 1e-8
    weight_decay: float = 1e-4
    threads: int = 1
    seed: int = 1
    patience: int = 2
    checkpoint_dir: str = None
    checkpoint_every: int = 0
    log: str = None
    progress: bool = True
    mpi: str = None  # with a communicator: "param" (split output layer) or "data" (averaging)
    sync_every: int = 100  # -mpi data: average the ranks' parameters after this many updates
    criterion: str = "full"  # full softmax gradient, or importance sampling: "is", "is-adaptive"
    samples: int = 100  # N (is) or N0 (is-adaptive)
    check_every: int = 200_000  # is-adaptive: examples per block between perplexity checks
    ess_min: float = 0.0  # grow N when a round's mean effective sample size falls below this
    tiny_set: int = 1000  # is-adaptive: training examples whose exact ppl is checked
    proposal: str = "unigram"  # Q for importance sampling: "unigram" or "bigram"
    lr_halve: bool = False  # not in the paper: an epoch without progress restarts from the best at eps0 / 2


class Trainer:
    """Trains `model` in place; `state` is everything a checkpoint needs to resume."""

    def __init__(self, model, config, comm=None):
        """`comm`: an MPI communicator to train across its ranks, as config.mpi says: the
        output layer split across them (sec. 3.2), or data-parallel shards with parameter
        averaging. Only its rank 0 writes checkpoints and the log."""
        self.model = model
        self.config = config
        self.comm = comm
        self.writer = comm is None or comm.rank == 0
        self.state = {"epoch": 0, "round": 0, "updates": 0, "best_valid": None, "bad_epochs": 0,
                      "rng": np.random.default_rng(config.seed).bit_generator.state, "history": [],
                      "samples": config.samples, "tiny_ppl": None, "lr_scale": 1.0}
        self.best = None
        self._refuse_impossible_settings()

    def _refuse_impossible_settings(self):
        """Before any input is read for training (under MPI, on every rank at once)."""
        cfg = self.config
        if cfg.batch < 1 or cfg.threads < 1 or cfg.epochs < 0:
            raise NplmError("-batch and -threads must be at least 1, -epochs at least 0")
        if self.comm is None:
            return
        if cfg.criterion == "is-adaptive" and cfg.mpi == "data":
            raise NplmError("-criterion is-adaptive needs one model to check: use it with -mpi param, not -mpi data")
        if cfg.mpi == "param" and not isinstance(self.model, MLPModel):
            raise NplmError("-mpi param splits the MLP's output layer; train this network with -mpi data")
        if cfg.mpi == "param" and cfg.threads != 1:
            raise NplmError("-mpi param runs one thread per rank: give -threads 1 (start more ranks)")

    # -- checkpoints -----------------------------------------------------------------
    def checkpoint_path(self):
        return os.path.join(self.config.checkpoint_dir, "checkpoint.nplm")

    def save_checkpoint(self):
        if not self.config.checkpoint_dir or not self.writer:
            return
        arrays = dict(self.model.params)
        if self.best is not None:
            arrays.update({f"best.{k}": v for k, v in self.best.items()})
        meta = {"order": self.model.order, "activation": self.model.activation, **self.model.meta,
                "arch": architecture_of(self.model), "trainer": self.state, "config": asdict(self.config)}
        container.save(self.checkpoint_path(), "nplm-checkpoint", arrays, meta=meta, vocab=self.model.vocab)

    @classmethod
    def resume(cls, path, config, comm=None):
        saved = container.load(path)
        if saved.kind != "nplm-checkpoint":
            raise NplmError(f"{path}: not a training checkpoint (kind '{saved.kind}')")
        current = {k: v for k, v in saved.arrays.items() if not k.startswith("best.")}
        trainer = cls(model_from_arrays(saved.vocab, current, saved.meta), config, comm)
        trainer.state = {**trainer.state, **saved.meta["trainer"]}  # keys newer than the checkpoint: defaults
        best = {k[5:]: np.array(v) for k, v in saved.arrays.items() if k.startswith("best.")}
        trainer.best = best or None
        return trainer

    # -- training --------------------------------------------------------------------
    def run(self, train, valid=None):
        cfg = self.config
        windows = train.windows(self.model.order)
        windows = np.ascontiguousarray(windows[windows[:, -1] >= 0])
        self.averager = None
        self.sampling = None
        if cfg.criterion != "full":
            self.sampling = ImportanceSampling(windows, len(self.model.vocab), cfg, self.state)
        if self.comm is not None and cfg.mpi == "param":
            from .parallel import ParamParallelNetwork
            networks = [ParamParallelNetwork(self.model, self.comm, capacity=cfg.batch)]
        else:
            networks = [self.model.network(capacity=cfg.batch) for _ in range(cfg.threads)]
            if self.comm is not None:
                from .parallel import ParameterAverager
                self.averager = ParameterAverager(self.model, self.comm)
        if self.sampling:  # checks of the tiny set see every rank's output block
            self.sampling.before_check = lambda: self._synchronise(networks)
        pool = ThreadPoolExecutor(max_workers=cfg.threads) if cfg.threads > 1 else None
        # Several workers (threads or ranks): each gets a single-threaded BLAS. One worker
        # may use every core for its matrix products, but not at batch 1: threaded
        # matrix-vector products gain nothing there, so -threads 1 -batch 1 is one core.
        one_core = cfg.threads > 1 or cfg.batch == 1 or self.comm is not None
        with blas_threads(1) if one_core else contextlib.nullcontext():
            try:
                while self.state["epoch"] < cfg.epochs:
                    if self._epoch(windows, networks, pool, valid):
                        break
            finally:
                if pool:
                    pool.shutdown()
        if self.best is not None:
            for name, array in self.best.items():
                self.model.params[name][...] = array
        return self.model

    def _epoch(self, windows, networks, pool, valid):
        cfg, state = self.config, self.state
        rng = np.random.default_rng()
        rng.bit_generator.state = state["rng"]
        order = rng.permutation(len(windows))  # the same on every rank
        mine = windows[order]
        largest = len(mine)
        if self.averager:  # -mpi data: each rank its shard, averaged every few rounds
            parts = np.array_split(mine, self.comm.size)
            mine, largest = parts[self.comm.rank], len(parts[0])
        shards = np.array_split(mine, cfg.threads)
        per_round = ROUND if not self.averager else min(ROUND, cfg.sync_every * cfg.batch)
        # Every rank runs the same number of rounds (collectives must match up).
        rounds = math.ceil(math.ceil(largest / cfg.threads) / per_round)
        rounds_per_sync = max(1, round(cfg.sync_every / math.ceil(per_round / cfg.batch)))
        bar = _progress(len(windows), state["epoch"] + 1, cfg.progress and self.writer)
        start, logp_sum, seen = time.perf_counter(), 0.0, 0
        last_checkpoint = state["updates"]
        while state["round"] < rounds:
            r = state["round"]
            if self.sampling:
                self.sampling.begin_round(self.model, r, state)
            chunks = [np.ascontiguousarray(s[r * per_round:(r + 1) * per_round]) for s in shards]
            jobs = [(net, chunk, state["updates"] + i) for i, (net, chunk) in enumerate(zip(networks, chunks))]
            if pool:
                results = list(pool.map(lambda job: self._train_chunk(*job), jobs))
            else:
                results = [self._train_chunk(*job) for job in jobs]
            logp_sum += sum(result[0] for result in results)
            seen += sum(len(c) for c in chunks)
            state["updates"] += sum(result[1] for result in results)
            state["round"] += 1
            if self.sampling:
                retry = self.sampling.end_round(self.model, results, sum(len(c) for c in chunks), state,
                                                last=state["round"] == rounds)
                if retry is not None:  # Algorithm 4: perplexity rose, N doubled, block undone
                    logp_sum, seen = logp_sum - retry[0], seen - retry[1]
                    state["round"] = retry[2]
            if self.averager and state["round"] % rounds_per_sync == 0:
                self.averager.average()
            if bar:
                bar.update(sum(len(c) for c in chunks) * (self.comm.size if self.averager else 1))
                bar.set_postfix(ppl=f"{math.exp(-logp_sum / max(seen, 1)):.1f}",
                                lr=f"{self.learning_rate():.2e}")
            if cfg.checkpoint_every and state["updates"] - last_checkpoint >= cfg.checkpoint_every:
                self._synchronise(networks)
                self.save_checkpoint()
                last_checkpoint = state["updates"]
        if bar:
            bar.close()
        self._synchronise(networks)
        if self.averager:
            self.averager.average()
            logp_sum, seen = self.averager.sum([logp_sum, seen])
        seconds = time.perf_counter() - start
        record = {"epoch": state["epoch"] + 1, "updates": state["updates"], "lr": self.learning_rate(),
                  "train_ppl": math.exp(-logp_sum / max(seen, 1)), "words_per_s": seen / seconds,
                  "seconds": seconds}
        if self.sampling:  # the sampled estimate of log p is biased: report exact ppl of the tiny set
            sampling = self.sampling
            record.update(train_ppl=sampling.tiny_ppl(self.model), train_ppl_of="tiny set (exact)",
                          criterion=cfg.criterion, samples=state["samples"],
                          mean_ess=sampling.ess_sum / max(sampling.ess_examples, 1),
                          samples_trajectory=sampling.events)
            sampling.events, sampling.ess_sum, sampling.ess_examples = [], 0.0, 0
        if self.comm is not None:
            exchanger = self.averager or networks[0]
            record.update(ranks=self.comm.size, communication_seconds=exchanger.communication_seconds)
            exchanger.communication_seconds = 0.0
        stop = False
        if valid is not None:
            logp = self.model.logprobs(valid)
            record["valid_ppl"] = math.exp(-logp[np.isfinite(logp)].mean())
            if state["best_valid"] is None or record["valid_ppl"] < state["best_valid"]:
                state["best_valid"] = record["valid_ppl"]
                state["bad_epochs"] = 0
                self.best = {k: v.copy() for k, v in self.model.params.items()}
            else:
                state["bad_epochs"] += 1
                stop = state["bad_epochs"] >= cfg.patience
                if cfg.lr_halve and not stop:  # back to the best parameters, at half the rate
                    for name, array in self.best.items():
                        self.model.params[name][...] = array
                    state["lr_scale"] /= 2
                    record["lr_halved_to"] = self.initial_rate()
        state["history"].append(record)
        state["epoch"] += 1
        state["round"] = 0
        state["rng"] = rng.bit_generator.state
        self._log(record)
        self.save_checkpoint()
        return stop

    @staticmethod
    def _synchronise(networks):
        for network in networks:
            if hasattr(network, "synchronise"):
                network.synchronise()

    def _train_chunk(self, network, chunk, first_update):
        cfg = self.config
        if self.sampling:
            return network.train_sampled(chunk, cfg.batch, self.initial_rate(), cfg.lr_decay, first_update, cfg.threads,
                                         cfg.weight_decay, self.state["samples"], self.sampling.proposal,
                                         self.sampling.seed(first_update))
        return network.train(chunk, cfg.batch, self.initial_rate(), cfg.lr_decay, first_update, cfg.threads,
                             cfg.weight_decay)

    def initial_rate(self):
        """eps0, halved by each epoch without progress under -lr-halve."""
        return self.config.lr * self.state["lr_scale"]

    def learning_rate(self):
        return self.initial_rate() / (1 + self.config.lr_decay * self.state["updates"])

    def _log(self, record):
        if self.config.log and self.writer:
            history = "".join(json.dumps(r) + "\n" for r in self.state["history"])
            with atomic_output(self.config.log) as out:
                out.write(history)


def proposal(windows, vocab_size, kind):
    """Q from the training windows: the unigram of the targets (add-one, so Q > 0 wherever
    P > 0), and for "bigram" the relative frequencies p(w|v) of each previous word v,
    mixed with the unigram by Witten-Bell's keep_v = c(v) / (c(v) + distinct successors)."""
    counts = np.bincount(windows[:, -1], minlength=vocab_size) + 1.0
    bigram = None
    if kind == "bigram":
        previous = windows[:, -2].astype(np.int64)
        keys, pair_counts = np.unique(previous * vocab_size + windows[:, -1], return_counts=True)
        rows, successors = keys // vocab_size, (keys % vocab_size).astype(np.int32)
        row_start = np.searchsorted(rows, np.arange(vocab_size + 1)).astype(np.int64)
        totals = np.bincount(rows, weights=pair_counts, minlength=vocab_size)
        distinct = np.bincount(rows, minlength=vocab_size)
        p = pair_counts / totals[rows]
        running = np.concatenate([[0.0], np.cumsum(p)])
        cumulative = running[1:] - running[row_start[rows]]  # cumulative probability within each row
        cumulative[row_start[1:][distinct > 0] - 1] = 1.0
        keep = np.where(totals > 0, totals / np.maximum(totals + distinct, 1), 0.0)
        bigram = (row_start, successors, cumulative, p, keep)
    return Proposal(counts / counts.sum(), bigram)


class ImportanceSampling:
    """The proposal and the sample-size policy of Bengio & Senecal (2003): N fixed (`is`),
    or Algorithm 4 (`is-adaptive`): after each block of about `check_every` examples the
    exact perplexity of a tiny training set is computed (and at the end of each epoch); if
    it rose above the last accepted one (state["tiny_ppl"], C_last), N doubles and the
    parameters return to the block's start, which is trained again. With `ess_min`, N also
    doubles when a round's mean effective sample size falls below it. N stops at |V|.
    Every check and change of N is an event in the epoch's log record."""

    def __init__(self, windows, vocab_size, config, state):
        self.proposal = proposal(windows, vocab_size, config.proposal)
        self.config = config
        self.adaptive = config.criterion == "is-adaptive"
        pick = np.random.default_rng(config.seed + 1).choice(len(windows), min(config.tiny_set, len(windows)),
                                                             replace=False)
        self.tiny = np.ascontiguousarray(windows[np.sort(pick)])
        self.most = vocab_size  # N stops growing at |V| samples
        self.events = []
        self.examples = 0  # since training started (this run)
        self.started = time.perf_counter()
        self.ess_sum, self.ess_examples = 0.0, 0  # this epoch's, for its log record
        self.block = None  # the block under way: its first round, parameters, logp and seen
        self.before_check = lambda: None  # -mpi param: gather the output blocks first

    def seed(self, first_update):
        return (self.config.seed * 0x9E3779B1 + first_update * 0x85EBCA77 + 1) % 2 ** 64

    def tiny_ppl(self, model):
        scores = np.empty(len(self.tiny))
        model.network().logprobs(self.tiny, scores)
        return math.exp(-scores.mean())

    def begin_round(self, model, round_index, state):
        if self.adaptive and state.get("tiny_ppl") is None:  # Algorithm 4's first C_last
            self.before_check()
            state["tiny_ppl"] = self.tiny_ppl(model)
        if self.adaptive and self.block is None:
            self.block = SimpleNamespace(start=round_index, params={k: v.copy() for k, v in model.params.items()},
                                         logp=0.0, seen=0)

    def end_round(self, model, results, seen, state, last):
        """Returns (logp, seen, round) of a block to train again, or None. A block ends
        after `check_every` examples or with the epoch's last round."""
        self.examples += seen
        round_ess = sum(result[2] for result in results)
        self.ess_sum += round_ess
        self.ess_examples += seen
        ess = round_ess / max(seen, 1)
        if self.config.ess_min and ess < self.config.ess_min and state["samples"] < self.most:
            state["samples"] = min(2 * state["samples"], self.most)
            self._event("ess", state, mean_ess=ess)
        if not self.adaptive:
            return None
        block = self.block
        block.logp += sum(result[0] for result in results)
        block.seen += seen
        if block.seen < self.config.check_every and not last:
            return None
        self.before_check()
        before, now = state["tiny_ppl"], self.tiny_ppl(model)
        self.block = None
        if now > before and state["samples"] < self.most:
            for name, array in block.params.items():
                model.params[name][...] = array
            state["samples"] = min(2 * state["samples"], self.most)
            self._event("ppl rose", state, tiny_ppl=now, tiny_ppl_before=before)
            return block.logp, block.seen, block.start
        state["tiny_ppl"] = now
        self._event("check", state, tiny_ppl=now)
        return None

    def _event(self, reason, state, **fields):
        """A line of the N trajectory: examples seen and wall-clock seconds since this
        run's training began, N from now on, why."""
        self.events.append({"examples": self.examples, "seconds": round(time.perf_counter() - self.started, 3),
                            "samples": state["samples"], "reason": reason, **fields})


def _progress(total, epoch, enabled):
    if not enabled or not sys.stderr.isatty():
        return None
    from tqdm import tqdm
    return tqdm(total=total, desc=f"epoch {epoch}", unit="w", unit_scale=True, leave=False, file=sys.stderr)


@register("nplm-checkpoint")
def _load_checkpoint(model_file):
    """A checkpoint scores as the best model so far (or the current one before any
    validation), so `nplm ppl -lm DIR/checkpoint.nplm` follows a run that is going on."""
    arrays = model_file.arrays
    best = {k[5:]: v for k, v in arrays.items() if k.startswith("best.")}
    current = {k: v for k, v in arrays.items() if not k.startswith("best.")}
    return model_from_arrays(model_file.vocab, best or current, model_file.meta)
