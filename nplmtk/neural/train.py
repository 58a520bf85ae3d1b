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

import numpy as np

from .. import container
from ..errors import NplmError
from ..io import atomic_output
from ..lm import register
from .blas import blas_threads
from .mlp import MLPModel

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
                      "rng": np.random.default_rng(config.seed).bit_generator.state, "history": []}
        self.best = None

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
                "trainer": self.state, "config": asdict(self.config)}
        container.save(self.checkpoint_path(), "nplm-checkpoint", arrays, meta=meta, vocab=self.model.vocab)

    @classmethod
    def resume(cls, path, config, comm=None):
        saved = container.load(path)
        if saved.kind != "nplm-checkpoint":
            raise NplmError(f"{path}: not a training checkpoint (kind '{saved.kind}')")
        current = {k: v for k, v in saved.arrays.items() if not k.startswith("best.")}
        trainer = cls(MLPModel.from_arrays(saved.vocab, current, saved.meta), config, comm)
        trainer.state = saved.meta["trainer"]
        best = {k[5:]: np.array(v) for k, v in saved.arrays.items() if k.startswith("best.")}
        trainer.best = best or None
        return trainer

    # -- training --------------------------------------------------------------------
    def run(self, train, valid=None):
        cfg = self.config
        if cfg.batch < 1 or cfg.threads < 1 or cfg.epochs < 0:
            raise NplmError("-batch and -threads must be at least 1, -epochs at least 0")
        windows = train.windows(self.model.order)
        windows = np.ascontiguousarray(windows[windows[:, -1] >= 0])
        self.averager = None
        if self.comm is not None and cfg.mpi == "param":
            if cfg.threads != 1:
                raise NplmError("-mpi param runs one thread per rank: give -threads 1 (start more ranks)")
            from .parallel import ParamParallelNetwork
            networks = [ParamParallelNetwork(self.model, self.comm, capacity=cfg.batch)]
        else:
            networks = [self.model.network(capacity=cfg.batch) for _ in range(cfg.threads)]
            if self.comm is not None:
                from .parallel import ParameterAverager
                self.averager = ParameterAverager(self.model, self.comm)
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
            chunks = [np.ascontiguousarray(s[r * per_round:(r + 1) * per_round]) for s in shards]
            jobs = [(net, chunk, state["updates"] + i) for i, (net, chunk) in enumerate(zip(networks, chunks))]
            if pool:
                results = list(pool.map(lambda job: self._train_chunk(*job), jobs))
            else:
                results = [self._train_chunk(*job) for job in jobs]
            logp_sum += sum(total for total, _ in results)
            seen += sum(len(c) for c in chunks)
            state["updates"] += sum(done for _, done in results)
            state["round"] += 1
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
        return network.train(chunk, cfg.batch, cfg.lr, cfg.lr_decay, first_update, cfg.threads,
                             cfg.weight_decay)

    def learning_rate(self):
        return self.config.lr / (1 + self.config.lr_decay * self.state["updates"])

    def _log(self, record):
        if self.config.log and self.writer:
            history = "".join(json.dumps(r) + "\n" for r in self.state["history"])
            with atomic_output(self.config.log) as out:
                out.write(history)


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
    return MLPModel.from_arrays(model_file.vocab, best or current, model_file.meta)
