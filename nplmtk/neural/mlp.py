"""The neural probabilistic language model of Bengio et al. (2003), eq. 1:
y = b + W x + U act(d + H x), x the concatenated feature vectors C(w) of the n-1
previous words, p(w_t | context) = softmax(y). `-h 0` drops the hidden layer (Table 1's
MLP3/MLP4 have h = 0 with direct connections); `direct` turns W on. With `output` "hs" the
hierarchical softmax over the Huffman tree of the training counts replaces b + U act(.)
(node rows Vn and biases bn; nplmtk/neural/huffman.py)."""
import numpy as np

from .._ext.mlp_kernels import ACTIVATIONS, Network, TreeNetwork
from .._ext.output_blocks import OutputBlock
from ..errors import ParameterError
from .huffman import huffman_tree
from .network import SCORING_BATCH, NeuralModel, uniform_initialiser


class MLPModel(NeuralModel):
    kind = "nplm-mlp"
    arch = "mlp"
    summary = "Bengio et al. 2003, eq. 1: softmax over b + W x + U act(d + H x)"
    ACTIVATIONS = tuple(ACTIVATIONS)
    ARCHITECTURE = NeuralModel.ARCHITECTURE + ("hs",)
    OUTPUTS = ("full", "hs")

    def __init__(self, vocab, params, order, activation="tanh", meta=None):
        if activation not in ACTIVATIONS:
            raise ParameterError(f"{{activation}}: unknown '{activation}' (choose from {', '.join(ACTIVATIONS)})")
        super().__init__(vocab, params, order, activation, meta)

    @classmethod
    def initial(cls, vocab, order, features, hidden, direct=False, bias=True, activation="tanh", seed=1,
                output="full", counts=None):
        """`output` "hs": the hierarchical softmax over the Huffman tree of `counts` (each
        word's count in the training text, </s> included)."""
        if order < 2:
            raise ParameterError("a neural model needs {order} 2 or more (at least one context word)")
        if hidden == 0 and not direct:
            raise ParameterError("{hidden} 0 leaves no path from the context to the output: add {direct}")
        if output not in cls.OUTPUTS:
            raise ParameterError(f"{{output}}: unknown value '{output}' (choose from {', '.join(cls.OUTPUTS)})")
        if output == "hs" and (direct or not hidden):
            raise ParameterError("{output} hs reads the hidden layer only: it needs {hidden} 1 or more and no "
                                 "{direct} connections")
        if output == "hs" and counts is None:
            raise ParameterError("{output} hs needs the training counts of the words")
        meta = {"features": features, "hidden": hidden, "direct": direct, "bias": bias, "hs": output == "hs"}
        if output == "hs":
            meta["tree"] = huffman_tree(counts)
        uniform = uniform_initialiser(seed)
        params = {}
        for name, shape in cls.array_shapes(len(vocab), order, meta).items():
            if name in ("b", "d", "bn"):  # biases start at zero
                params[name] = np.zeros(shape, dtype=np.float32)
            else:
                params[name] = uniform(shape, shape[-1])
        return cls(vocab, params, order, activation, meta)

    @classmethod
    def array_shapes(cls, vocab_size, order, shape):
        if shape["hidden"] == 0 and not shape["direct"]:
            return {}  # no such network: any array is unexpected
        inputs = (order - 1) * shape["features"]
        if shape.get("hs"):  # the tree's node rows and biases instead of U and b
            if shape["direct"] or not shape["hidden"]:
                return {}
            return {"C": (vocab_size, shape["features"]), "H": (shape["hidden"], inputs), "d": (shape["hidden"],),
                    "Vn": (vocab_size - 1, shape["hidden"]), "bn": (vocab_size - 1,)}
        arrays = {"C": (vocab_size, shape["features"]), "b": (vocab_size,)}
        if shape["hidden"]:
            arrays.update(H=(shape["hidden"], inputs), d=(shape["hidden"],), U=(vocab_size, shape["hidden"]))
        if shape["direct"]:
            arrays["W"] = (vocab_size, inputs)
        return arrays

    def check_training(self, config):
        if self.meta.get("hs") and (config.criterion != "full" or config.mpi == "param"):
            raise ParameterError("{output} hs trains with its exact gradient, on whole models: not with "
                                 "{criterion} is* nor {mpi} param")

    def network(self, capacity=SCORING_BATCH):
        if self.meta.get("hs"):
            return TreeNetwork(self.params, self.hs_paths(), self.order - 1, ACTIVATIONS[self.activation], capacity,
                               self.meta.get("bias", True))
        return Network(self.params, self.order - 1, ACTIVATIONS[self.activation], capacity,
                       self.meta.get("bias", True))

    def output_block(self, rows, capacity):
        """The kernel of one rank's block (output rows lo..hi-1) of -mpi param."""
        lo, hi = rows
        return OutputBlock(self.params, self.order - 1, ACTIVATIONS[self.activation], capacity,
                           self.meta.get("bias", True), lo, hi)
