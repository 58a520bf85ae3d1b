"""What every neural architecture shares: the training protocol's side of a model, its
model file and its checkpoint arrays. A feed-forward architecture (MLP, energy network,
log-bilinear) predicts each word from a window of the `order` - 1 previous words; its
training examples are those windows (docs/ARCHITECTURE.md: "adding an architecture")."""
import numpy as np

from .. import container
from ..errors import ParameterError
from ..lm import LanguageModel

SCORING_BATCH = 256


class NeuralModel(LanguageModel):
    """A network whose parameters are `params` (name -> float32 array) and whose shape is
    `meta` (the keys in `ARCHITECTURE`). A subclass gives:

    - `arch` (its name in nplmtk.models.ARCHITECTURES), `kind` (its model file's kind),
      `summary` (one line for `train-nplm -arch`'s help);
    - `initial(vocab, order, features, hidden, direct, bias, activation, seed)`;
    - `network(capacity)`: a kernel object with `train` and `train_sampled` over a chunk
      of examples and its schedule, and `logprobs(examples, out)`;
    - optionally `check_training(config)` and `output_block(rows, capacity)` (the
      parameter-parallel output layer of -mpi param).
    """

    arch = None
    summary = ""
    ARCHITECTURE = ("features", "hidden", "direct", "bias")  # the meta keys that shape the network

    def __init__(self, vocab, params, order, activation="tanh", meta=None):
        self.vocab = vocab
        self.params = params
        self.order = order
        self.activation = activation
        self.meta = meta or {}

    # -- the training protocol ----------------------------------------------------------
    def training_examples(self, corpus):
        """The examples the trainer shuffles and shares out: one window of `order` word ids
        per predicted token whose target is in the vocabulary (context OOVs read as <unk>)."""
        windows = corpus.windows(self.order)
        windows = windows[windows[:, -1] >= 0]  # a copy
        windows[windows < 0] = self.vocab.unk
        return np.ascontiguousarray(windows, dtype=np.int32)

    def example_order(self, rng, count):
        """The order of the examples in an epoch: shuffled. (A recurrent model keeps its
        streams in order, so that each worker's kernel carries its state from chunk to chunk.)"""
        return rng.permutation(count)

    def example_logprobs(self, examples):
        """Exact natural-log probability of each example's target."""
        scores = np.empty(len(examples))
        if len(examples):
            self.network().logprobs(np.ascontiguousarray(examples), scores)
        return scores

    def check_training(self, config):
        """Raise a ParameterError for training settings this architecture cannot take."""

    def initialise_from(self, source, names=None):
        """Start from `source`'s parameters: every array it has under a name this network
        has (or those of `names`), of the same shape (Zhang et al. sec. 3: Model 1 takes
        Model 0's R, C_i and biases and so predicts exactly as Model 0; Model 2 takes
        those and a trained Model 1's A). Returns the names copied."""
        if not isinstance(source, NeuralModel):
            raise ParameterError("{init_from}: not a neural model")
        if source.order != self.order or list(source.vocab.words) != list(self.vocab.words):
            raise ParameterError(f"{{init_from}}: a model of order {source.order} over {len(source.vocab)} words; "
                                 f"this one has order {self.order} and {len(self.vocab)} words (the same vocabulary "
                                 "is needed)")
        shared = [name for name in self.params if name in source.params and (names is None or name in names)]
        for name in set(names or ()) - set(shared):
            raise ParameterError(f"{{init_from}}: no block '{name}' in both networks")
        for name in shared:
            if source.params[name].shape != self.params[name].shape:
                raise ParameterError(f"{{init_from}}: its {name} is {'x'.join(map(str, source.params[name].shape))}, "
                                     f"this network's {'x'.join(map(str, self.params[name].shape))}")
        if not shared:
            raise ParameterError(f"{{init_from}}: no parameter in common with {self.arch}")
        for name in shared:
            self.params[name][...] = source.params[name]
        return shared

    # -- scoring --------------------------------------------------------------------------
    def logprobs(self, corpus):
        self.check_vocab(corpus)
        windows = corpus.windows(self.order)
        out = np.full(len(windows), -np.inf)
        # A target outside the vocabulary (-1) has no probability; as context it reads as <unk>.
        usable = windows[:, -1] >= 0
        rows = np.where(windows[usable] < 0, self.vocab.unk, windows[usable]).astype(np.int32)
        out[usable] = self.example_logprobs(rows)
        return out

    def next_distribution(self, history):
        history = ([self.vocab.bos] * self.order + list(history))[-(self.order - 1):]
        rows = np.array([history + [w] for w in range(len(self.vocab))], dtype=np.int32)
        return np.exp(self.example_logprobs(rows))

    # -- files ----------------------------------------------------------------------------
    def file_meta(self):
        """What a model file or checkpoint records besides the arrays and the vocabulary."""
        return {"order": self.order, "arch": self.arch, "activation": self.activation, **self.meta}

    @classmethod
    def from_arrays(cls, vocab, params, meta):
        """A model from stored arrays and the meta of a model file or checkpoint."""
        return cls(vocab, {k: np.array(v) for k, v in params.items()}, meta["order"], meta.get("activation", "tanh"),
                   {k: meta[k] for k in cls.ARCHITECTURE})

    @classmethod
    def from_file(cls, model_file):
        return cls.from_arrays(model_file.vocab, model_file.arrays, model_file.meta)

    def save(self, path, extra_meta=None):
        container.save(path, self.kind, self.params, meta={**self.file_meta(), **(extra_meta or {})},
                       vocab=self.vocab)


def uniform_initialiser(seed):
    """Small uniform weights scaled by each layer's fan-in, as Bengio et al. did."""
    rng = np.random.default_rng(seed)

    def uniform(shape, fan_in):
        bound = 1.0 / np.sqrt(fan_in)
        return rng.uniform(-bound, bound, size=shape).astype(np.float32)
    return uniform
