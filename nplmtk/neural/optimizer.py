"""The optimizer: every hyper-parameter of the updates and their schedule, computed here
in Python and handed to the kernels as plain numbers, one `Steps` per chunk of examples
(as gensim's word2vec hands its kernel `alpha`; docs/ARCHITECTURE.md, "The training
protocol").

- SGD with the rate eps_t = eps0 / (1 + r t) of update t (Bengio et al. 2003, sec. 4),
  eps0 halved by each epoch without progress under -lr-halve, or of too little with
  -min-improvement (`halve`, `lr_scale`); or
  the schedule Transformers need (`RateSchedule`): a linear warm-up over the first updates,
  then eps0 / (1 + r t), a cosine or linear decay to 0 at a horizon, or the inverse square
  root of t; a horizon of 0 under a time budget is the budget's end, which the trainer
  estimates after each epoch (`state["lr_horizon"]`; Li, Yumer & Ramanan 2020, "Budgeted
  training": a rate decayed linearly to 0 at the budget's end);
- weight decay lambda: 1 - eps_t lambda on the rows of C an update touches, and on the
  arrays whose role is `decayed` (the model's `array_roles`: the weights) in bulk every
  DENSE_DECAY_PERIOD examples; each array's role goes to the kernel in Steps.roles;
- for a model with parameter blocks (the log-bilinear family, Zhang et al. sec. 3: its
  settings a BlockSettings): each block's rate, weight decay and momentum, a `frozen` block
  at rate 0;
- Adam (Kingma & Ba 2015) for the recurrent models (`adam_of`: its numbers, given to their
  kernel once, when it is built);
- what the architecture's own settings add (declarations.Settings): the cap on the
  gradient's norm per word, and a recurrent chunk's segment lengths under -random-bptt
  (regularisation.py), drawn from the seed and the chunk's first update.
"""
import math
from dataclasses import dataclass, field, replace
from decimal import Decimal

import numpy as np

from ..errors import ParameterError
from .declarations import Settings

# Examples between bulk decays of the dense weights (U, H, W): the full softmax touches
# them at every update anyway; the sampled steps, and those of the factored output layers
# (hierarchical or class softmax), touch a few rows of the output layer, so they wait longer.
DENSE_DECAY_PERIOD = {"full": 64, "sampled": 1024}
LR_SCHEDULES = ("inverse", "cosine", "linear", "inv-sqrt")
DECAYS_TO_ZERO = ("cosine", "linear")  # schedules that end at a horizon


@dataclass(frozen=True)
class RateSchedule:
    """eps_t of update t (counted from 0) for eps0: times t+1 / warmup during the first
    `warmup` updates (a linear warm-up), and after them "inverse": eps0 / (1 + r t) (r the
    lr_decay; without a warm-up, learning_rates' numbers exactly); "cosine": eps0 (1 +
    cos(pi s)) / 2, s going from 0 at the warm-up's end to 1 at update `horizon` (then 0);
    "linear": eps0 (1 - s); "inv-sqrt": eps0 sqrt(warmup / (t + 1)) (fairseq's inverse_sqrt;
    warmup 0 as 1). A cosine or linear schedule with horizon 0 stays at eps0 (its horizon
    not yet known: the budget's end, set once an epoch has shown the pace)."""
    lr_decay: float = 0.0
    warmup: int = 0
    kind: str = "inverse"
    horizon: int = 0

    @classmethod
    def of(cls, config):
        return cls(config.lr_decay, config.warmup, config.lr_schedule, config.lr_horizon)

    def check(self, budget=0.0):
        """`budget`: the run's seconds (0: none), whose end a horizon of 0 stands for."""
        if self.kind not in LR_SCHEDULES:
            raise ParameterError(f"{{lr_schedule}}: unknown value '{self.kind}' (choose from "
                                 f"{', '.join(LR_SCHEDULES)})")
        if self.warmup < 0 or self.horizon < 0:
            raise ParameterError("{warmup} and {lr_horizon} must be at least 0")
        if self.kind in DECAYS_TO_ZERO and self.horizon == 0 and not budget:
            raise ParameterError(f"{{lr_schedule}} {self.kind} decays to 0 at update {{lr_horizon}}, or with "
                                 "{lr_horizon} 0 at the end of {max_time}: give one of them")
        if self.kind in DECAYS_TO_ZERO and 0 < self.horizon <= self.warmup:
            raise ParameterError(f"{{lr_schedule}} {self.kind} decays to 0 at {{lr_horizon}} updates, which must be "
                                 f"more than {{warmup}} ({self.horizon} and {self.warmup})")

    def budgeted(self):
        """True when the horizon is the time budget's end (the trainer sets it)."""
        return self.kind in DECAYS_TO_ZERO and self.horizon == 0

    def rates(self, lr0, updates):
        t = np.asarray(updates, dtype=np.int64)
        if self.kind == "inverse":
            rates = learning_rates(lr0, self.lr_decay, t)
        elif self.kind in DECAYS_TO_ZERO:
            progress = np.zeros(t.shape)
            if self.horizon > self.warmup:
                progress = np.clip((t - self.warmup) / (self.horizon - self.warmup), 0, 1)
            rates = lr0 * (0.5 * (1 + np.cos(np.pi * progress)) if self.kind == "cosine" else 1 - progress)
        else:
            rates = lr0 * np.sqrt(np.minimum(1, max(self.warmup, 1) / (t + 1)))
        if self.warmup:
            rates = rates * np.minimum(1, (t + 1) / self.warmup)
        return rates


@dataclass(frozen=True)
class Adam:
    """Adam's numbers, Kingma & Ba (2015), Algorithm 1 (its defaults): the moments' decay
    rates and epsilon, and the weights 1 - beta of the new gradient in each moment."""
    beta1: float = 0.9
    beta2: float = 0.999
    epsilon: float = 1e-8

    # 1 - beta as the decimal it is (1 - 0.9 in binary is 0.09999999999999998): the weights
    # the kernel used as the constants 0.1 and 0.001 before they came from here
    @property
    def rest1(self):
        return float(1 - Decimal(repr(self.beta1)))

    @property
    def rest2(self):
        return float(1 - Decimal(repr(self.beta2)))


@dataclass
class Draws:
    """Importance sampling's numbers for a chunk (sampling.py): N, the proposal Q, the seed."""
    samples: int
    proposal: object
    seed: int


def adam_of(config):
    """Adam's numbers when config.optimizer is "adam", else None (SGD): what a recurrent
    model's training networks are built with (their kernel then steps by Adam every chunk)."""
    return Adam() if config.optimizer == "adam" else None


@dataclass
class BlockSettings(Settings):
    """The settings of a model with parameter blocks (the log-bilinear family, Zhang et al.
    sec. 3), which block_schedule reads: each block's rate (eps0 scaled as eps0 is), momentum
    and weight decay, by block name; with decay_biases the weight decay applies to the biases
    too (their role `decayed`)."""
    momentum: float = 0.0  # every block's, unless block_momentum names it
    block_lr: dict = field(default_factory=dict)
    block_momentum: dict = field(default_factory=dict)
    block_weight_decay: dict = field(default_factory=dict)
    decay_biases: bool = False


@dataclass
class Steps:
    """A chunk's updates as a kernel takes them (cython_ext/batch_driver.pxd walks them)."""
    batch: int              # examples per update: windows, or a recurrent model's bptt steps
    rates: np.ndarray       # float64 (blocks, updates): one row for a model without parameter blocks
    row_keep: np.ndarray    # float32 (updates,): 1 - eps_t lambda for the rows of C an update touches
    dense_keep: np.ndarray  # float32 (blocks, updates): bulk decay after update u (1: none)
    momentum: np.ndarray    # float32 (blocks,)
    clip: float = 0.0       # the gradient's norm capped at this per word (0: no cap)
    sampling: Draws = None  # None: the exact gradient; else importance sampling's draws
    lengths: np.ndarray = None  # int32 (updates,): each update's examples (segments of random lengths); None: batch
    roles: dict = None      # array name -> declarations.Role (the model's array_roles)

    @property
    def updates(self):
        return self.rates.shape[1]


def sgd_steps(batch, rates, row_keep, dense_keep, momentum=None, sampling=None, clip=0.0, lengths=None, roles=None):
    """Steps from update_schedule's numbers (1-D) or block_schedule's (2-D)."""
    rates = np.ascontiguousarray(np.atleast_2d(rates), dtype=np.float64)
    dense_keep = np.ascontiguousarray(np.atleast_2d(dense_keep), dtype=np.float32)
    if row_keep is None:
        row_keep = np.ones(rates.shape[1], dtype=np.float32)
    if momentum is None:
        momentum = np.zeros(rates.shape[0], dtype=np.float32)
    return Steps(batch, rates, np.ascontiguousarray(row_keep, dtype=np.float32), dense_keep,
                 np.ascontiguousarray(momentum, dtype=np.float32), clip, sampling, lengths, roles)


def walk(steps, count):
    """(u, start, K) of each update of a chunk of `count` examples: batch_driver.pxd's loop,
    for a network whose updates are sequenced in Python (parallel.ParamParallelNetwork)."""
    sizes = steps.lengths.tolist() if steps.lengths is not None else [steps.batch] * -(-count // steps.batch)
    start = 0
    for u, size in enumerate(sizes):
        yield u, start, min(size, count - start)
        start += size


class Optimizer:
    """Built from a TrainingConfig. Its one piece of state, `lr_scale` (eps0's halvings), is
    `state["lr_scale"]`: the trainer's state dict when given, which checkpoints keep."""

    def __init__(self, model, config, state=None):
        self.model, self.config = model, config
        self.settings = config.settings_for(model)  # the architecture's own
        self.roles = model.array_roles(self.settings)
        self.given_schedule = RateSchedule.of(config)
        self.state = {"lr_scale": 1.0} if state is None else state

    @property
    def lr_scale(self):
        return self.state["lr_scale"]

    @property
    def schedule(self):
        """The schedule given, its horizon the budget's end (`state["lr_horizon"]`) when it has one."""
        horizon = self.state.get("lr_horizon")
        if self.given_schedule.budgeted() and horizon:
            return replace(self.given_schedule, horizon=horizon)
        return self.given_schedule

    def set_horizon(self, updates):
        """The update at which a budgeted schedule reaches 0 (a whole number above its warm-up)."""
        if self.given_schedule.budgeted():
            self.state["lr_horizon"] = max(int(updates), self.given_schedule.warmup + 1)

    def check(self):
        """Refuse settings no update can take (before any input is read)."""
        self._check_blocks()
        self._check_decay_below_rate()
        self.given_schedule.check(self.config.max_time)

    def _check_blocks(self):
        if not self.model.CAPABILITIES.parameter_blocks:
            return
        blocks, settings = self.model.blocks(), self.settings
        for setting in ("block_lr", "block_momentum", "block_weight_decay"):
            for name, value in getattr(settings, setting).items():
                if name not in blocks:
                    raise ParameterError(f"{{{setting}}}: no block '{name}' in {self.model.arch} "
                                         f"(its blocks: {', '.join(blocks)})")
                if value < 0 or (setting == "block_momentum" and value >= 1):
                    raise ParameterError(f"{{{setting}}}: {name}={value} is out of range")
        if not 0 <= settings.momentum < 1:
            raise ParameterError("{momentum} must be in [0, 1)")

    def _check_decay_below_rate(self):
        """Each update scales a block's weights by 1 - rate x decay (update_schedule's
        `keep`): with a product above 1 they flip sign, above 2 they blow up and the
        schedule overflows (lr 1000, weight decay 1, batch 512 ended in an OverflowError)."""
        cfg = self.config
        blocks = self.settings if self.model.CAPABILITIES.parameter_blocks else BlockSettings()
        block_lr, block_weight_decay = blocks.block_lr, blocks.block_weight_decay
        for block in set(block_lr) | set(block_weight_decay) | {None}:
            rate, decay = block_lr.get(block, cfg.lr), block_weight_decay.get(block, cfg.weight_decay)
            if rate * decay > 1:
                rate_name = f"{{block_lr}} {block}=" if block in block_lr else "{lr} "
                decay_name = f"{{block_weight_decay}} {block}=" if block in block_weight_decay else "{weight_decay} "
                raise ParameterError(f"{rate_name}{rate:g} times {decay_name}{decay:g} must be at most 1 (each update "
                                     "scales the weights by 1 - rate x decay)")

    def initial_rate(self):
        """eps0, halved by each epoch without progress under -lr-halve (or of too little)."""
        return self.config.lr * self.lr_scale

    def rate(self, updates):
        """The rate of update number `updates` (the next one, for the progress bar and log)."""
        return float(self.schedule.rates(self.initial_rate(), updates))

    def halve(self):
        self.state["lr_scale"] /= 2

    def steps(self, examples, first_update=0, stride=1, sampling=None):
        """The Steps of a chunk of `examples` whose updates are t = first_update + stride * u
        (the workers' updates interleave); `sampling`: importance sampling's Draws."""
        cfg, model = self.config, self.model
        period = DENSE_DECAY_PERIOD["sampled" if sampling is not None or model.output_touches_few_rows() else "full"]
        per_update = model.examples_per_update(cfg)
        if model.CAPABILITIES.parameter_blocks:
            rates, dense_keep, momentum = block_schedule(model, cfg, self.settings, self.roles, examples,
                                                         self.lr_scale, period, first_update, stride, self.schedule)
            return sgd_steps(per_update, rates, None, dense_keep, momentum, sampling, roles=self.roles)
        # the same lengths for a chunk when a run resumes: drawn from the seed and its first update
        lengths = self.settings.segment_lengths(examples, per_update, cfg.seed, first_update)
        rates, row_keep, dense_keep = update_schedule(examples, per_update, self.initial_rate(), cfg.lr_decay,
                                                      cfg.weight_decay, period, first_update, stride=stride,
                                                      sizes=lengths, schedule=self.schedule)
        return sgd_steps(per_update, rates, row_keep, dense_keep, None, sampling, self.settings.gradient_cap(),
                         lengths, self.roles)


def learning_rates(lr0, lr_decay, updates):
    """eps_t = eps0 / (1 + r t) for the update counts t in `updates` (Bengio et al. 2003, sec. 4)."""
    return lr0 / (1 + lr_decay * np.asarray(updates, dtype=np.int64))


def block_schedule(model, config, blocks, roles, examples, lr_scale, dense_decay_period, first_update=0, stride=1,
                   schedule=None):
    """update_schedule for a model with parameter blocks (model.BLOCKS, in the kernel's
    order; `blocks` its BlockSettings, `roles` its arrays' roles): (rates, dense_keep) with
    one row per block, absent blocks 0 and 1, and each block's momentum. A block's rate is
    blocks.block_lr's or eps0 (0 for a `frozen` block), scaled by lr_scale; its weight decay
    is block_weight_decay's, or weight_decay on the `decayed` blocks."""
    updates = -(-examples // config.batch)
    rates = np.zeros((len(model.BLOCKS), updates))
    dense_keep = np.ones((len(model.BLOCKS), updates), dtype=np.float32)
    momentum = np.zeros(len(model.BLOCKS), dtype=np.float32)
    schedules = {}  # blocks of the same rate and decay share one schedule
    for row, name in enumerate(model.BLOCKS):
        role = roles.get(name)
        if role is None or role.frozen:  # absent, or kept fixed
            continue
        decay = config.weight_decay if role.decayed else 0.0
        settings = (blocks.block_lr.get(name, config.lr) * lr_scale, blocks.block_weight_decay.get(name, decay))
        if settings not in schedules:
            schedules[settings] = update_schedule(examples, config.batch, settings[0], config.lr_decay, settings[1],
                                                  dense_decay_period, first_update, stride=stride,
                                                  schedule=schedule)
        rates[row], _, dense_keep[row] = schedules[settings]
        momentum[row] = blocks.block_momentum.get(name, blocks.momentum)
    return rates, dense_keep, momentum


def update_schedule(examples, batch, lr0, lr_decay, weight_decay, dense_decay_period, first_update=0, stride=1,
                    sizes=None, schedule=None):
    """The numbers a kernel takes for a chunk of `examples` in batches of `batch` (or of
    the `sizes` given, covering them), one per update u of the chunk, t = first_update + stride * u:
    - rates[u] = eps0 / (1 + r t) (float64), or the RateSchedule `schedule`'s eps_t;
    - row_keep[u] = 1 - eps_t lambda, the weight decay of the rows of C the update touches;
    - dense_keep[u]: the bulk weight decay of the dense weights (U, H, W) applied after
      update u: the product of (1 - eps_t lambda)^K over the updates since the last one,
      every `dense_decay_period` examples (and after the chunk's last update); 1: none."""
    updates = -(-examples // batch) if sizes is None else len(sizes)
    t = first_update + stride * np.arange(updates, dtype=np.int64)
    rates = learning_rates(lr0, lr_decay, t) if schedule is None else schedule.rates(lr0, t)
    keep = 1 - rates * weight_decay
    row_keep = keep.astype(np.float32)
    dense_keep = np.ones(updates, dtype=np.float32)
    if weight_decay > 0 and updates:
        factors = keep.tolist()  # (1 - eps_t lambda)^K for a batch of K examples
        if sizes is not None:
            last = examples - int(np.sum(sizes[:-1]))
            factors = [factor ** int(size) for factor, size in zip(factors[:-1], sizes[:-1])] + [factors[-1] ** last]
        elif batch > 1:
            last = examples - batch * (updates - 1)
            factors = [factor ** batch for factor in factors[:-1]] + [factors[-1] ** last]
        every = max(1, dense_decay_period // batch)
        ends = list(range(every - 1, updates - 1, every)) + [updates - 1]
        starts = [0] + [end + 1 for end in ends[:-1]]
        # math.prod multiplies in order: the product the updates would accumulate one by one
        dense_keep[ends] = [math.prod(factors[start:end + 1]) for start, end in zip(starts, ends)]
    return rates, row_keep, dense_keep
