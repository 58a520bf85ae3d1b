"""The training protocol, the same for every architecture (docs/ARCHITECTURE.md).

The Trainer owns all policy: the examples' order each epoch and their shares among
threads and MPI ranks, early stopping on validation perplexity that keeps the best
model, checkpoints, the JSON-lines log, and importance sampling's N (sampling.py); its
Optimizer (optimizer.py) the rates, weight decay, momentum, Adam and clipping of each
update. A model gives its examples (`training_examples`) and a kernel object per worker
(`network`); each chunk of examples goes to the kernel with its Steps, in one call,
`network.train(chunk, steps)`, which returns the log-likelihood, the updates done and
(with sampling; else 0) the sum of the effective sample sizes. Bengio et al. 2003, sec. 2-4.
"""
import json
import math
import os
import sys
import time
import warnings
from collections import namedtuple
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, fields, replace

import numpy as np

from .. import container
from ..errors import InputError, NplmWarning, ParameterError
from ..io import open_output
from ..lm import perplexity_of
from ..models import CHECKPOINT_KIND, checkpoint_model
from .blas import blas_threads
from .declarations import CRITERIA, MPI_MODES, OPTIMIZERS, Settings
from .optimizer import Draws, Optimizer
from .parallel import ParameterAverager, ParamParallelNetwork
from .regularisation import nonmonotone_trigger
from .sampling import ImportanceSampling
ROUND = 4096  # examples per thread between progress reports and checkpoint checks
EpochPlan = namedtuple("EpochPlan", "shards per_round words rounds rounds_per_sync")


def _size(fingerprint):
    return f"{fingerprint['sentences']:,} sentences of {fingerprint['words']:,} words"


@dataclass
class TrainingConfig:
    epochs: int = 10
    batch: int = 1
    lr: float = 1e-3
    lr_decay: float = 1e-8
    warmup: int = 0  # updates of a linear warm-up of the rate (optimizer.RateSchedule)
    lr_schedule: str = "inverse"  # after it: eps0 / (1 + r t), "cosine" or "linear" to 0 at lr_horizon, "inv-sqrt"
    lr_horizon: int = 0  # cosine or linear with max_time: 0 is the budget's end (Optimizer.set_horizon)
    weight_decay: float = 1e-4
    threads: int = 1
    seed: int = 1
    patience: int = 2
    max_time: float = 0.0  # seconds of training and validation (0: no budget), kept by out_of_time
    checkpoint_dir: str = None
    checkpoint_every: int = 0
    log: str = None
    progress: bool = True
    mpi: str = None  # with a communicator: "param" (split output layer) or "data" (averaging)
    sync_every: int = 100  # -mpi data: average the ranks' parameters after this many updates
    criterion: str = "full"  # full softmax gradient, or importance sampling: "is", "is-adaptive"
    samples: int = 100  # N (is) or N0 (is-adaptive)
    max_samples: int = 1600  # is-adaptive and ess_min: N grows no further (16 x the default N0)
    check_every: int = 200_000  # is-adaptive: examples per block between perplexity checks
    ess_min: float = 0.0  # grow N when a round's mean effective sample size falls below this
    tiny_set: int = 1000  # is-adaptive: training examples whose exact ppl is checked
    proposal: str = "unigram"  # Q for importance sampling: "unigram" or "bigram"
    lr_halve: bool = False  # not in the paper: an epoch without progress restarts from the best at eps0 / 2
    min_improvement: float = 1.0  # with lr_halve, rnnlm's: an epoch kept whose entropy fell less also halves eps0
    optimizer: str = "sgd"  # or "adam", "nt-asgd" (those of the architecture's CAPABILITIES.optimizers)
    nonmono: int = 5  # NT-ASGD's non-monotone interval (regularisation.nonmonotone_trigger)
    # the architecture's own settings (its SETTINGS: declarations.Settings; None: its defaults),
    # e.g. a recurrent model's bptt, streams and regularisers, the log-bilinear family's blocks
    settings: Settings = None

    @classmethod
    def of(cls, model, **values):
        """A config for `model` (a model or its class) from keywords of both kinds: the
        trainer's fields, and the architecture's own settings (model.SETTINGS's fields)."""
        own = {name: values.pop(name) for name in list(values) if name in _fields(model.SETTINGS)}
        return cls(**values, settings=model.SETTINGS(**own))

    def settings_for(self, model):
        """The architecture's own settings: those given, or (None) its defaults."""
        if self.settings is None:
            return model.SETTINGS()
        if not isinstance(self.settings, model.SETTINGS):
            raise ParameterError(f"{{settings}}: a {type(self.settings).__name__}, not the "
                                 f"{model.SETTINGS.__name__} of {model.arch}")
        return self.settings


def _fields(settings_class):
    return {f.name for f in fields(settings_class)}


class Trainer:
    """Trains `model` in place; `state` is everything a checkpoint needs to resume."""

    def __init__(self, model, config, comm=None):
        """`comm`: an MPI communicator to train across its ranks, as config.mpi says: the
        output layer split across them (sec. 3.2), or data-parallel shards with parameter
        averaging. Only its rank 0 writes checkpoints and the log."""
        self.model = model
        self.config = replace(config, settings=config.settings_for(model))  # the architecture's, or its defaults
        config = self.config
        self.comm = comm
        self.writer = comm is None or comm.rank == 0
        self.state = {"epoch": 0, "round": 0, "updates": 0, "best_valid": None, "bad_epochs": 0,
                      "rng": np.random.default_rng(config.seed).bit_generator.state, "history": [],
                      "samples": config.samples, "tiny_ppl": None, "lr_scale": 1.0, "averaged_rounds": None,
                      # the epoch's sum of log p and words so far (this rank's share): a run resumed within
                      # an epoch logs the epoch's training ppl as the uninterrupted run does
                      "epoch_logp": 0.0, "epoch_words": 0}
        self.best = None
        self.average = None  # NT-ASGD, once triggered: the mean of the parameters after each round since
        self.resumed_from = None  # the checkpoint's path, when resumed
        self.networks = []
        self.skipped_before = 0  # updates the kernels skipped before this epoch (their skipped_updates)
        self.saved_carried = {}
        self.optimizer = Optimizer(model, config, self.state)
        self._refuse_impossible_settings()
        self.workers = config.threads // model.threads_per_worker(config)
        model.check_training_buffers(config, 1 if comm is not None and config.mpi == "param" else self.workers)

    def _refuse_impossible_settings(self):
        """Before any input is read for training (under MPI, on every rank at once)."""
        cfg = self.config
        if cfg.batch < 1 or cfg.threads < 1 or cfg.epochs < 0:
            raise ParameterError("{batch} and {threads} must be at least 1, {epochs} at least 0")
        capabilities = self.model.CAPABILITIES
        for setting, known, allowed in (("optimizer", OPTIMIZERS, capabilities.optimizers),
                                        ("criterion", CRITERIA, capabilities.criteria)):
            value = getattr(cfg, setting)
            if value not in known:
                raise ParameterError(f"{{{setting}}}: unknown value '{value}' (choose from {', '.join(known)})")
            if value not in allowed:
                raise ParameterError(f"{{{setting}}} {value}: {{arch}} {self.model.arch} has {' or '.join(allowed)}")
        if cfg.optimizer == "nt-asgd" and cfg.lr_halve:
            raise ParameterError("{optimizer} nt-asgd averages the parameters once the valid ppl stalls, {lr_halve} "
                                 "goes back to the best ones at half the rate: give one of them")
        if not 1 <= cfg.min_improvement < math.inf or (cfg.min_improvement > 1 and not cfg.lr_halve):
            raise ParameterError(f"{{min_improvement}} {cfg.min_improvement:g}: a ratio of at least 1, "
                                 "and above 1 only with {lr_halve} (it says when to halve the rate)")
        if cfg.max_samples < cfg.samples:
            raise ParameterError(f"{{max_samples}} {cfg.max_samples} is below {{samples}} {cfg.samples}")
        self.optimizer.check()
        self.model.check_training(cfg)
        if self.comm is None:
            return
        if cfg.mpi not in MPI_MODES:
            raise ParameterError(f"{{mpi}}: unknown value '{cfg.mpi}' (choose from {', '.join(MPI_MODES)})")
        if cfg.criterion == "is-adaptive" and cfg.mpi == "data":
            raise ParameterError("{criterion} is-adaptive needs one model to check: use it with {mpi} param, "
                                 "not {mpi} data")
        if cfg.mpi not in capabilities.mpi_modes:
            raise ParameterError(f"{{mpi}} {cfg.mpi}: {{arch}} {self.model.arch} has "
                                 f"{' or '.join(capabilities.mpi_modes)}")
        if cfg.mpi == "param" and cfg.threads != 1:
            raise ParameterError("{mpi} param runs one thread per rank: give {threads} 1 (start more ranks)")

    # -- checkpoints -----------------------------------------------------------------
    def checkpoint_path(self):
        return os.path.join(self.config.checkpoint_dir, "checkpoint.nplm")

    def save_checkpoint(self):
        if not self.config.checkpoint_dir or not self.writer:
            return
        arrays = dict(self.model.params)
        for worker, network in enumerate(self.networks):  # momentum's or the streams' state, to resume exactly
            arrays.update({f"worker.{worker}.{k}": v for k, v in self._carried(network).items()})
        if self.best is not None:
            arrays.update({f"best.{k}": v for k, v in self.best.items()})
        if self.average is not None:
            arrays.update({f"average.{k}": v for k, v in self.average.items()})
        meta = {**self.model.file_meta(), "trainer": self.state, "config": asdict(self.config)}
        container.save(self.checkpoint_path(), CHECKPOINT_KIND, arrays, meta=meta, vocab=self.model.vocab)

    @classmethod
    def resume(cls, path, config, comm=None):
        saved = container.load(path, mapped=False)  # read: a map faults (SIGBUS) once another program truncates the file
        if saved.kind != CHECKPOINT_KIND:
            raise InputError(f"not a training checkpoint (kind '{saved.kind}')", path=path)
        trainer = cls(checkpoint_model(saved, best=False), config, comm)
        trainer.resumed_from = path
        trainer.resumed_config = saved.meta.get("config") or {}  # the settings the run began with
        trainer.state.update(saved.meta["trainer"])  # keys newer than the checkpoint keep their defaults
        best = {k[5:]: np.array(v) for k, v in saved.arrays.items() if k.startswith("best.")}
        trainer.best = best or None
        average = {k[8:]: np.array(v) for k, v in saved.arrays.items() if k.startswith("average.")}
        trainer.average = average or None
        trainer.saved_carried = {k[len("worker."):]: v for k, v in saved.arrays.items() if k.startswith("worker.")}
        return trainer

    def check_training_text(self, train):
        """Record what the training corpus `train` is (`Corpus.fingerprint`) in the state a
        checkpoint keeps; a resumed run refuses a corpus other than the checkpoint's. A
        checkpoint written before they recorded it is taken on trust, with a warning."""
        fingerprint = train.fingerprint()
        recorded = self.state.get("training_text")
        if recorded is None and self.resumed_from is not None:
            warnings.warn(f"{self.resumed_from}: this checkpoint does not record its training text (written by an "
                          f"older nplm): {train.name} is taken to be it, unchecked", NplmWarning)
        elif recorded is not None and recorded != fingerprint:
            size = _size(recorded)
            differs = (f"its text had {size}, {train.name} has {_size(fingerprint)}" if size != _size(fingerprint)
                       else f"its text and {train.name} both have {size}, but not the same words")
            raise InputError(f"trained on another text than {train.name}: {differs} (as the checkpoint's vocabulary "
                             "reads them): resume on its own text, or start a new run", path=self.resumed_from)
        self.state["training_text"] = fingerprint

    # -- training --------------------------------------------------------------------
    def run(self, train, valid=None):
        cfg = self.config
        if cfg.optimizer == "nt-asgd" and valid is None:
            raise ParameterError("{optimizer} nt-asgd starts averaging when the valid ppl stops improving: give a "
                                 "{valid} text")
        self.check_training_text(train)
        examples = self.model.training_examples(train, cfg)
        self.averager = None
        self.sampling = None
        if cfg.criterion != "full":
            self.sampling = ImportanceSampling(self.model, examples, cfg, self.state)
        if self.comm is not None and cfg.mpi == "param":
            networks = [ParamParallelNetwork(self.model, self.comm, capacity=cfg.batch)]
        else:
            networks = [self.model.training_network(cfg, worker) for worker in range(self.workers)]
            if self.comm is not None:
                self.averager = ParameterAverager(self.model, self.comm)
        self.networks = networks
        for worker, network in enumerate(networks):
            for name, carried in self._carried(network).items():
                saved = self.saved_carried.get(f"{worker}.{name}")
                if saved is not None and saved.shape == carried.shape and saved.dtype == carried.dtype:
                    carried[...] = saved
        if self.sampling:  # checks of the tiny set see every rank's output block
            self.sampling.before_check = lambda: self._synchronise(networks)
            self.sampling.carried = [self._carried(network) for network in networks]
        pool = ThreadPoolExecutor(max_workers=self.workers) if self.workers > 1 else None
        # Each worker (thread or rank) gets a single-threaded BLAS, so `threads` is the cores
        # used: BLAS threads of its own under one worker ran 3-4x slower on a loaded machine
        # and burned 3x the CPU, and two lock-free workers beat one with a 2-thread BLAS.
        with blas_threads(1):
            try:
                while self.state["epoch"] < cfg.epochs and not out_of_time(self.state, cfg.max_time):
                    if self._epoch(examples, networks, pool, valid):
                        break
            finally:
                if pool:
                    pool.shutdown()
        if self.best is not None:
            for name, array in self.best.items():
                self.model.params[name][...] = array
        return self.model

    def _epoch(self, examples, networks, pool, valid):
        """One pass over the training examples; True when early stopping ends the run."""
        state = self.state
        rng = np.random.default_rng()
        rng.bit_generator.state = state["rng"]
        plan = self._plan(examples, rng)
        if state["round"] == 0 and self.model.CAPABILITIES.recurrent_state:  # a new pass: streams from a zero state
            for network in networks:
                network.reset()
        start, updates_before = time.perf_counter(), state["updates"]
        logp_sum, seen, seen_here = self._rounds(examples, networks, pool, plan)
        record = self._record(logp_sum, seen, seen_here, time.perf_counter() - start, networks,
                              state["updates"] - updates_before)
        stop = self._validate(record, valid)
        # every rank takes the slowest one's time: their budgets must stop them at the same epoch
        state["last_epoch_seconds"] = slowest(self.comm, time.perf_counter() - start)
        state["elapsed"] = state.get("elapsed", 0.0) + state["last_epoch_seconds"]
        record["elapsed"] = state["elapsed"]
        state["history"].append(record)
        state["epoch"] += 1
        state["round"], state["epoch_logp"], state["epoch_words"] = 0, 0.0, 0
        # a rate decaying to 0 at the budget's end: the updates that the rest of it holds at the
        # last epoch's pace, not rounded down to whole epochs (a slow first epoch then put the
        # end an epoch early: a rate of 0, then back up when that epoch ran after all)
        epochs_to_come = min(epochs_in_budget(state, self.config.max_time), self.config.epochs - state["epoch"])
        self.optimizer.set_horizon(state["updates"] * (1 + epochs_to_come / state["epoch"]))
        state["rng"] = rng.bit_generator.state
        self._log(record)
        self.save_checkpoint()
        return stop

    def _plan(self, examples, rng):
        """The epoch's order of the examples cut into rounds: each worker's shard, the
        examples per round of a worker, the rounds (the same number on every rank: their
        collectives must match up) and the rounds between -mpi data's averagings."""
        cfg = self.config
        mine = self.model.example_order(rng, len(examples))  # the same on every rank
        largest = len(mine)
        if self.averager:  # -mpi data: each rank its shard, averaged every few rounds
            parts = np.array_split(mine, self.comm.size)
            mine, largest = parts[self.comm.rank], len(parts[0])
        per_update = self.model.examples_per_update(cfg)
        per_round = ROUND
        words = self.model.example_words(examples)
        if words > len(examples):  # examples of several words (stream steps): whole updates of about ROUND words
            per_round = per_update * max(1, round(ROUND * len(examples) / words / per_update))
        if self.averager:
            per_round = min(per_round, cfg.sync_every * per_update)
        return EpochPlan(shards=np.array_split(mine, self.workers), per_round=per_round, words=words,
                         rounds=math.ceil(math.ceil(largest / self.workers) / per_round),
                         rounds_per_sync=max(1, round(cfg.sync_every / math.ceil(per_round / per_update))))

    def _rounds(self, examples, networks, pool, plan):
        """The epoch's rounds from state["round"] on, each worker training its chunk of
        its shard; (sum of log p, words) over the epoch's rounds, and the words of these."""
        cfg, state = self.config, self.state
        bar = _progress(plan.words, state["epoch"] + 1, cfg.progress and self.writer)
        logp_sum, seen = state["epoch_logp"], state["epoch_words"]
        seen_here = 0
        last_checkpoint = state["updates"]
        while state["round"] < plan.rounds:
            r = state["round"]
            if self.sampling:
                self.sampling.begin_round(self.model, r, state)
            # each chunk gathered as it comes: `examples` may make its rows on demand
            chunks = [np.ascontiguousarray(examples[s[r * plan.per_round:(r + 1) * plan.per_round]])
                      for s in plan.shards]
            jobs = [(net, chunk, state["updates"] + i) for i, (net, chunk) in enumerate(zip(networks, chunks))]
            if pool:
                results = list(pool.map(lambda job: self._train_chunk(*job), jobs))
            else:
                results = [self._train_chunk(*job) for job in jobs]
            logp_sum += sum(result[0] for result in results)
            done = sum(self.model.example_words(c) for c in chunks)
            seen += done
            seen_here += done
            state["updates"] += sum(result[1] for result in results)
            state["round"] += 1
            if self.sampling:
                retry = self.sampling.end_round(self.model, results, done, state, last=state["round"] == plan.rounds)
                if retry is not None:  # Algorithm 4: perplexity rose, N doubled, block undone
                    logp_sum, seen = logp_sum - retry[0], seen - retry[1]
                    state["round"] = retry[2]
            state["epoch_logp"], state["epoch_words"] = logp_sum, seen
            if self.averager and state["round"] % plan.rounds_per_sync == 0:
                self.averager.average()
            if state["averaged_rounds"] is not None:
                self._average_parameters()
            if bar:
                bar.update(done * (self.comm.size if self.averager else 1))
                bar.set_postfix(ppl=f"{perplexity_of(logp_sum / max(seen, 1)):.1f}",
                                lr=f"{self.learning_rate():.2e}")
            if cfg.checkpoint_every and state["updates"] - last_checkpoint >= cfg.checkpoint_every:
                self._synchronise(networks)
                if self.averager:  # an even share of the ranks' sums: resumed, the ranks add up to them again
                    shares = self.averager.sum([logp_sum, seen])
                    state["epoch_logp"], state["epoch_words"] = (float(v) / self.comm.size for v in shares)
                self.save_checkpoint()
                last_checkpoint = state["updates"]
        if bar:
            bar.close()
        self._synchronise(networks)
        if self.averager:
            self.averager.average()
            logp_sum, seen, seen_here = self.averager.sum([logp_sum, seen, seen_here])
        return logp_sum, seen, seen_here

    def _record(self, logp_sum, seen, seen_here, seconds, networks, updates):
        """The epoch's line of the log (its validation added by _validate): the training ppl of
        the epoch's `seen` words, the speed of the `seen_here` trained in `seconds` (a resumed
        epoch's last part), and its updates the kernels skipped (their gradient not finite)
        among the `updates` it made."""
        cfg, state = self.config, self.state
        train_ppl = perplexity_of(logp_sum / max(seen, 1))
        skipped = sum(getattr(network, "skipped_updates", 0) for network in networks) - self.skipped_before
        self.skipped_before += skipped
        if not math.isfinite(train_ppl) or (updates and skipped >= updates):
            # before this epoch's checkpoint: the last one keeps the epoch before
            given = [f"{{{name}}}" for name in cfg.settings.gradient_scales()]  # they scale the gradients too
            why = "the training perplexity is not finite" if not math.isfinite(train_ppl) else \
                "no update's gradient was finite"
            raise ParameterError(f"training diverged in epoch {state['epoch'] + 1}: {why} (try a lower "
                                 f"{' or '.join(['{lr}'] + given)})")
        record = {"epoch": state["epoch"] + 1, "updates": state["updates"], "lr": self.learning_rate(),
                  "train_ppl": train_ppl, "words_per_s": seen_here / seconds,
                  "seconds": seconds}
        if skipped:
            record["skipped_updates"] = skipped
            warnings.warn(f"epoch {record['epoch']}: {skipped} of its {updates} updates skipped, their gradient "
                          "not finite (an overflow in backpropagation through time)", NplmWarning)
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
        return record

    def _average_parameters(self):
        """NT-ASGD's average (Merity et al. 2018, sec. 3): the running mean of the parameters
        after each round (a few updates) since the trigger."""
        state = self.state
        state["averaged_rounds"] += 1
        if self.average is None or state["averaged_rounds"] == 1:
            self.average = {k: v.copy() for k, v in self.model.params.items()}
            return
        weight = np.float32(1 / state["averaged_rounds"])
        for name, mean in self.average.items():
            mean += weight * (self.model.params[name] - mean)

    def _validate(self, record, valid):
        """Early stopping on the validation ppl (added to `record`): keep the best parameters;
        after an epoch without progress, -lr-halve goes back to them at half the rate (and with
        -min-improvement, an epoch that gained too little is kept and halves the rate). True:
        -patience epochs without progress, stop. Under NT-ASGD the averaged parameters are
        validated and kept once averaging has begun, it begins by `nonmonotone_trigger`, and
        only epochs since count towards -patience."""
        cfg, state = self.config, self.state
        if valid is None:
            return False
        averaged = self.average is not None
        if averaged:  # the averaged parameters in place while they are scored (and copied if best)
            raw = {k: v.copy() for k, v in self.model.params.items()}
            for name, mean in self.average.items():
                self.model.params[name][...] = mean
        logp = self.model.validation_logprobs(valid)
        record["valid_ppl"] = perplexity_of(logp[np.isfinite(logp)].mean())
        better = state["best_valid"] is None or record["valid_ppl"] < state["best_valid"]
        # rnnlm's test: the entropy fell by less than the ratio (ppl > 1 on real text)
        slight = (better and cfg.lr_halve and state["best_valid"] is not None
                  and math.log(record["valid_ppl"]) * cfg.min_improvement > math.log(state["best_valid"]))
        if better:
            state["best_valid"] = record["valid_ppl"]
            state["bad_epochs"] = 0
            self.best = {k: v.copy() for k, v in self.model.params.items()}
        if averaged:
            record["averaged"] = True
            for name, array in raw.items():
                self.model.params[name][...] = array
        elif cfg.optimizer == "nt-asgd":
            ppls = [r["valid_ppl"] for r in state["history"] if "valid_ppl" in r] + [record["valid_ppl"]]
            if nonmonotone_trigger(ppls, cfg.nonmono):
                state["averaged_rounds"] = 0
                record["averaging_from"] = state["updates"]
            return False
        if slight:  # kept as the best, and continued at half the rate
            self.optimizer.halve()
            record.update(lr_halved_to=self.optimizer.initial_rate(), halved_after="a slight gain")
        if better:
            return False
        state["bad_epochs"] += 1
        stop = state["bad_epochs"] >= cfg.patience
        if cfg.lr_halve and not stop:  # back to the best parameters, at half the rate
            for name, array in self.best.items():
                self.model.params[name][...] = array
            self.optimizer.halve()
            record.update(lr_halved_to=self.optimizer.initial_rate(), halved_after="no progress")
        return stop

    def _synchronise(self, networks):
        """Under -mpi param, give every rank every block of the output layer."""
        if self.comm is not None and self.config.mpi == "param":
            networks[0].synchronise()

    def _carried(self, network):
        """What a worker's kernel carries from chunk to chunk (its `carried` arrays): momentum's
        velocities, the streams' state; not a rank's share of -mpi param."""
        if self.model.CAPABILITIES.worker_state and not isinstance(network, ParamParallelNetwork):
            return network.carried
        return {}

    def _train_chunk(self, network, chunk, first_update):
        """One worker's chunk: its updates are first_update, first_update + workers, ...
        (the workers' updates interleave)."""
        draws = None
        if self.sampling:
            draws = Draws(self.state["samples"], self.sampling.proposal, self.sampling.seed(first_update))
        return network.train(chunk, self.optimizer.steps(len(chunk), first_update, self.workers, draws))

    def learning_rate(self):
        """The rate of the next update."""
        return self.optimizer.rate(self.state["updates"])

    def _log(self, record):
        if self.config.log and self.writer:
            history = "".join(json.dumps(r) + "\n" for r in self.state["history"])
            with open_output(self.config.log) as out:
                out.write(history)


def out_of_time(state, budget):
    """True when the next epoch, as long as the last one (its validation included), would end
    after `budget` seconds of training (0: no budget). Resumed runs count the time before."""
    return epochs_left(state, budget) == 0


def slowest(comm, seconds):
    """The largest of the ranks' `seconds` (under MPI: a collective), else `seconds`."""
    return seconds if comm is None else max(comm.allgather(seconds))


def epochs_left(state, budget):
    """The epochs still to start within `budget` seconds, each as long as the last one (math.inf:
    no budget, or no epoch yet)."""
    epochs = epochs_in_budget(state, budget)
    return epochs if epochs == math.inf else math.floor(epochs)


def epochs_in_budget(state, budget):
    """What is left of `budget` seconds in epochs as long as the last one, a fraction (math.inf:
    no budget, or no epoch yet)."""
    if not budget or "last_epoch_seconds" not in state:
        return math.inf
    return max(0.0, (budget - state["elapsed"]) / max(state["last_epoch_seconds"], 1e-9))


def _progress(total, epoch, enabled):
    if not enabled or not sys.stderr.isatty():
        return None
    from tqdm import tqdm
    return tqdm(total=total, desc=f"epoch {epoch}", unit="w", unit_scale=True, leave=False, file=sys.stderr)
