"""The neural probabilistic language model of Bengio et al. (2003), eq. 1:
y = b + W x + U act(d + H x), x the concatenated feature vectors C(w) of the n-1
previous words, p(w_t | context) = softmax(y). `-h 0` drops the hidden layer (Table 1's
MLP3/MLP4 have h = 0 with direct connections); `direct` turns W on."""
import numpy as np

from .. import container
from .._ext.mlp_kernels import ACTIVATIONS, Network
from ..errors import NplmError
from ..lm import LanguageModel, register

SCORING_BATCH = 256
ARCHITECTURE = ("features", "hidden", "direct", "bias")  # the meta keys that shape the network


class NeuralModel(LanguageModel):
    """A network over windows of `order` words; `network()` gives its kernel object."""

    def logprobs(self, corpus):
        self.check_vocab(corpus)
        windows = corpus.windows(self.order)
        out = np.full(len(windows), -np.inf)
        # A target outside the vocabulary (-1) has no probability; as context it reads as <unk>.
        usable = windows[:, -1] >= 0
        rows = np.where(windows[usable] < 0, self.vocab.unk, windows[usable]).astype(np.int32)
        scores = np.empty(len(rows))
        self.network().logprobs(rows, scores)
        out[usable] = scores
        return out


class MLPModel(NeuralModel):
    kind = "nplm-mlp"

    def __init__(self, vocab, params, order, activation="tanh", meta=None):
        if activation not in ACTIVATIONS:
            raise NplmError(f"unknown activation '{activation}' (choose from {', '.join(ACTIVATIONS)})")
        self.vocab = vocab
        self.params = params
        self.order = order
        self.activation = activation
        self.meta = meta or {}

    @classmethod
    def initial(cls, vocab, order, features, hidden, direct=False, bias=True, activation="tanh", seed=1):
        """Small uniform weights, scaled by each layer's fan-in, as Bengio et al. did."""
        if order < 2:
            raise NplmError("a neural model needs -order 2 or more (at least one context word)")
        if hidden == 0 and not direct:
            raise NplmError("-h 0 leaves no path from the context to the output: add -direct")
        rng = np.random.default_rng(seed)
        inputs = (order - 1) * features

        def uniform(shape, fan_in):
            bound = 1.0 / np.sqrt(fan_in)
            return rng.uniform(-bound, bound, size=shape).astype(np.float32)

        size = len(vocab)
        params = {"C": uniform((size, features), features), "b": np.zeros(size, dtype=np.float32)}
        if hidden:
            params.update(H=uniform((hidden, inputs), inputs), d=np.zeros(hidden, dtype=np.float32),
                          U=uniform((size, hidden), hidden))
        if direct:
            params["W"] = uniform((size, inputs), inputs)
        meta = {"features": features, "hidden": hidden, "direct": direct, "bias": bias}
        return cls(vocab, params, order, activation, meta)

    def network(self, capacity=SCORING_BATCH):
        return Network(self.params, self.order - 1, ACTIVATIONS[self.activation], capacity,
                       self.meta.get("bias", True))

    def next_distribution(self, history):
        history = ([self.vocab.bos] * self.order + list(history))[-(self.order - 1):]
        rows = np.array([history + [w] for w in range(len(self.vocab))], dtype=np.int32)
        scores = np.empty(len(rows))
        self.network().logprobs(rows, scores)
        return np.exp(scores)

    @classmethod
    def from_arrays(cls, vocab, params, meta):
        """A model from stored arrays and the meta of a model file or checkpoint."""
        return cls(vocab, {k: np.array(v) for k, v in params.items()}, meta["order"], meta["activation"],
                   {k: meta[k] for k in ARCHITECTURE})

    def save(self, path, extra_meta=None):
        meta = {"order": self.order, "activation": self.activation, **self.meta, **(extra_meta or {})}
        container.save(path, self.kind, self.params, meta=meta, vocab=self.vocab)


@register(MLPModel.kind)
def _load(model_file):
    return MLPModel.from_arrays(model_file.vocab, model_file.arrays, model_file.meta)
