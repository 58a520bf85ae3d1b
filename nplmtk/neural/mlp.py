"""The neural probabilistic language model of Bengio et al. (2003), eq. 1:
y = b + W x + U act(d + H x), x the concatenated feature vectors C(w) of the n-1
previous words, p(w_t | context) = softmax(y). `-h 0` drops the hidden layer (Table 1's
MLP3/MLP4 have h = 0 with direct connections); `direct` turns W on."""
import numpy as np

from ..errors import ParameterError
from .network import ACTIVATION_CODES, SCORING_BATCH, NeuralModel, uniform_initialiser


class MLPModel(NeuralModel):
    kind = "nplm-mlp"
    arch = "mlp"
    summary = "Bengio et al. 2003, eq. 1: softmax over b + W x + U act(d + H x)"
    ACTIVATIONS = tuple(ACTIVATION_CODES)

    def __init__(self, vocab, params, order, activation="tanh", meta=None):
        if activation not in ACTIVATION_CODES:
            raise ParameterError(f"{{activation}}: unknown '{activation}' (choose from {', '.join(ACTIVATION_CODES)})")
        super().__init__(vocab, params, order, activation, meta)

    @classmethod
    def initial(cls, vocab, order, features, hidden, direct=False, bias=True, activation="tanh", seed=1):
        if order < 2:
            raise ParameterError("a neural model needs {order} 2 or more (at least one context word)")
        if hidden == 0 and not direct:
            raise ParameterError("{hidden} 0 leaves no path from the context to the output: add {direct}")
        uniform = uniform_initialiser(seed)
        inputs = (order - 1) * features
        size = len(vocab)
        params = {"C": uniform((size, features), features), "b": np.zeros(size, dtype=np.float32)}
        if hidden:
            params.update(H=uniform((hidden, inputs), inputs), d=np.zeros(hidden, dtype=np.float32),
                          U=uniform((size, hidden), hidden))
        if direct:
            params["W"] = uniform((size, inputs), inputs)
        meta = {"features": features, "hidden": hidden, "direct": direct, "bias": bias}
        return cls(vocab, params, order, activation, meta)

    @classmethod
    def array_shapes(cls, vocab_size, order, shape):
        if shape["hidden"] == 0 and not shape["direct"]:
            return {}  # no such network: any array is unexpected
        inputs = (order - 1) * shape["features"]
        arrays = {"C": (vocab_size, shape["features"]), "b": (vocab_size,)}
        if shape["hidden"]:
            arrays.update(H=(shape["hidden"], inputs), d=(shape["hidden"],), U=(vocab_size, shape["hidden"]))
        if shape["direct"]:
            arrays["W"] = (vocab_size, inputs)
        return arrays

    def network(self, capacity=SCORING_BATCH):
        from .._ext.mlp_kernels import Network
        return Network(self.params, self.order - 1, ACTIVATION_CODES[self.activation], capacity,
                       self.meta.get("bias", True))

    def output_block(self, rows, capacity):
        """The kernel of one rank's block (output rows lo..hi-1) of -mpi param."""
        from .._ext.output_blocks import OutputBlock
        lo, hi = rows
        return OutputBlock(self.params, self.order - 1, ACTIVATION_CODES[self.activation], capacity,
                           self.meta.get("bias", True), lo, hi)
