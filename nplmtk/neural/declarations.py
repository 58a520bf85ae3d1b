"""What an architecture declares about itself, as plain data (fairseq's `add_args`, without
its parser): its options (`Option`: name, kind, domain, default, help, and where the value
goes), its capabilities (`Capabilities`: what the trainer and the scorer may ask of it), its
own training settings (a `Settings` dataclass) and the role of each of its arrays (`Role`).
A model class holds them as `OPTIONS`, `CAPABILITIES`, `SETTINGS` and `array_roles`; `nplm
train-nplm` builds its flags from them, the trainer and `nplm ppl` read them instead of
looking for methods or names. No click here: the CLI turns an Option into a flag (cli/train.py)."""
from dataclasses import dataclass, replace

CRITERIA = ("full", "is", "is-adaptive")  # the trainer's: exact softmax gradient, importance sampling
MPI_MODES = ("param", "data")  # the output layer split across the ranks, or parameter averaging
OUTPUT_LAYERS = ("full", "class", "hs")
OPTIMIZERS = ("sgd", "adam", "nt-asgd")  # NT-ASGD: SGD, then averaged (the trainer)


@dataclass(frozen=True)
class Option:
    """One option of `train-nplm`. `kind`: "int" and "real" (numbers in [low, high], an end
    left out when open; no bound: unbounded), "flag", "choice" (one of `choices`; with
    `choices_from`, only those of the architecture's Capabilities field of that name),
    "blocks" (BLOCK=VALUE,... repeatable, VALUE a "real" of the domain) or "text".
    `target` "network": a keyword of the model's `initial`; "training": a field of
    TrainingConfig (every architecture's); "settings": a field of the architecture's own
    `SETTINGS`. Its name there is `key`, or the option's name with '_' for '-'."""
    name: str
    kind: str
    help: str
    default: object = None
    low: float = None
    high: float = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple = ()
    choices_from: str = None
    target: str = "network"
    key: str = None
    negated: bool = False  # a flag that sets its key to False ("no-bias": bias False)
    metavar: str = None

    @property
    def parameter(self):
        return self.key or self.name.replace("-", "_")

    def allowed(self, capabilities):
        """The choices a model of these Capabilities takes."""
        return tuple(getattr(capabilities, self.choices_from)) if self.choices_from else self.choices


@dataclass(frozen=True)
class Capabilities:
    """What a model can do beyond the protocol every NeuralModel follows."""
    outputs: tuple = ("full",)  # the output layers its `initial` builds (`output`)
    criteria: tuple = ("full",)  # "is", "is-adaptive": its kernel has train_sampled
    mpi_modes: tuple = ("data",)  # "param": it has output_block(rows, capacity)
    optimizers: tuple = ("sgd",)
    parameter_blocks: bool = False  # blocks() and BLOCKS: a schedule per block (each block's role its array's)
    worker_state: bool = False  # its training networks carry state from chunk to chunk (`carried`): checkpoints keep it
    # its examples are steps of word streams, whose state its training networks carry and a new
    # pass resets (`reset()`); the one way to say a model is recurrent (NeuralModel.RECURRENT reads it)
    recurrent_state: bool = False
    oov_estimate: bool = False  # logprobs_estimating_oov (ppl -oov-estimate)


@dataclass(frozen=True)
class Role:
    """What the optimizer does with one parameter array (`array_roles`), handed to the kernels
    in Steps.roles: a weight or a bias; kept fixed (`frozen`: rate 0, not stepped); scaled by
    the weight decay (`decayed`: the weights, and the biases when asked)."""
    bias: bool = False
    frozen: bool = False
    decayed: bool = True


@dataclass
class Settings:
    """An architecture's own training settings (its options of target "settings", as the
    fields of a subclass: TrainingConfig.settings). The Optimizer asks them, by these methods,
    for what they add to a chunk's Steps; the base has no fields and adds nothing."""

    def gradient_cap(self):
        """The cap on the gradient's norm per word that its kernel applies (Steps.clip; 0: none)."""
        return 0.0

    def segment_lengths(self, examples, per_update, seed, first_update):
        """Each update's examples for a chunk (Steps.lengths), or None: per_update each."""
        return None

    def gradient_scales(self):
        """The names of those given that scale the gradient besides the rate (named when
        training diverges)."""
        return ()


def declare(base, *added, drop=(), defaults=None):
    """Options built on `base`: without those named in `drop`, with the `defaults` given
    (name -> value), and `added` (in the place of a base option of the same name, else at
    the end)."""
    replacing = {option.name: option for option in added}
    options = [replacing.pop(option.name, None) or replace(option, default=(defaults or {}).get(option.name,
                                                                                                option.default))
               for option in base if option.name not in drop]
    return tuple(options) + tuple(option for option in added if option.name in replacing)


# The trainer's options, every architecture's (NeuralModel.OPTIONS); an architecture may
# drop one or give it another default (`declare`).
TRAINING_OPTIONS = tuple(replace(option, target="training") for option in (
    Option("epochs", "int", "Passes over the training text.", 10, low=0),
    Option("batch", "int", "Windows per update (1: the paper's SGD).", 1, low=1),
    Option("lr", "real", "Initial learning rate eps0 (per word: gradients are summed over a batch or segment).",
           1e-3, low=0, low_open=True),
    Option("lr-decay", "real", "r in eps_t = eps0 / (1 + r t), t counting updates.", 1e-8, low=0),
    Option("warmup", "int", "Updates of a linear warm-up of the rate from 0 to -lr (then -lr-schedule).", 0, low=0),
    Option("lr-schedule", "choice", "The rate after the warm-up: inverse: -lr / (1 + -lr-decay t); cosine or linear: "
           "from -lr to 0 at update -lr-horizon; inv-sqrt: -lr sqrt(-warmup / t).", "inverse",
           choices=("inverse", "cosine", "linear", "inv-sqrt")),
    Option("lr-horizon", "int", "-lr-schedule cosine or linear: the update at which the rate reaches 0 (0: at the "
           "end of -max-time, as the epochs' pace foretells it, estimated again after each epoch).", 0, low=0),
    Option("weight-decay", "real", "Weight decay on the weights and the word features (not the biases).", 1e-4,
           low=0),
    Option("lr-halve", "flag", "Not in the paper: after an epoch without a better valid ppl, go back to the best "
           "parameters and halve eps0 (stopping still follows -patience)."),
    Option("min-improvement", "real", "With -lr-halve, as Mikolov's RNNLM toolkit: also halve eps0 (from the new best "
           "parameters) after an epoch whose valid entropy fell by less than this ratio, e.g. 1.003: by less than "
           "0.3% (1: only an epoch without progress halves).", 1.0, low=1),
    Option("patience", "int", "Stop after this many epochs without a better valid ppl (keeps the best model).", 2,
           low=1),
    Option("max-time", "real", "Wall-time budget in seconds (0: none): no epoch starts that would end after it "
           "at the length of the last one, its validation included (the best model is kept).", 0.0, low=0),
    Option("seed", "int", "Seed of initialisation and shuffling.", 1, low=0, high=2 ** 32 - 1),
    Option("threads", "int", "Lock-free asynchronous worker threads, each with a single-threaded BLAS: the cores "
           "used (a network that trains one window an update may share each update among them instead).", 1, low=1),
    Option("criterion", "choice", "Training criterion: full (exact softmax gradient), is (importance sampling, "
           "Bengio & Senecal 2003 Alg. 3) or is-adaptive (Alg. 4: N doubles when the ppl of a tiny set rises).",
           "full", choices=CRITERIA, choices_from="criteria"),
    Option("samples", "int", "-criterion is*: samples N (is-adaptive: N0).", 100, low=1),
    Option("max-samples", "int", "-criterion is-adaptive and -ess-min: N doubles no further (a warning says when "
           "it would).", 1600, low=1),
    Option("proposal", "choice", "-criterion is*: the proposal Q: the training unigram (add-one), or the bigram "
           "of the previous word interpolated with it (Witten-Bell weights; a batch samples from its windows' "
           "mixture, a segment of streams from its steps').", "unigram", choices=("unigram", "bigram")),
    Option("check-every", "int", "is-adaptive: examples between checks of the tiny set's perplexity.", 200_000,
           low=1),
    Option("ess-min", "real", "-criterion is*: double N when a round's mean effective sample size falls below "
           "this.", 0.0, low=0),
    Option("mpi", "choice", "Training under mpiexec: param (the output layer split across the ranks, sec. 3.2) "
           "or data (each rank its shard and threads; parameters averaged every -sync-every updates).",
           choices=MPI_MODES, choices_from="mpi_modes"),
    Option("sync-every", "int", "-mpi data: average the ranks' parameters after this many updates of each "
           "worker.", 100, low=1),
))
