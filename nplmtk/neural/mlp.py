"""The neural probabilistic language model of Bengio et al. (2003), eq. 1:
y = b + W x + U act(d + H x), x the concatenated feature vectors C(w) of the n-1
previous words, p(w_t | context) = softmax(y). `-h 0` drops the hidden layer (Table 1's
MLP3/MLP4 have h = 0 with direct connections); `direct` turns W on. With `output` "hs" the
hierarchical softmax over the Huffman tree of the training counts replaces b + U act(.)
(node rows Vn and biases bn; nplmtk/neural/huffman.py); with "class" Mikolov's class-factored
softmax p(c(w) | a) p(w | c(w), a) over `classes` classes by frequency (class rows Vc and
biases bc beside U and b; nplmtk/neural/word_classes.py)."""
import numpy as np

from ..errors import ParameterError
from .declarations import CRITERIA, MPI_MODES, OUTPUT_LAYERS, Capabilities, Option, declare
from .network import (ACTIVATION_CODES, SCORING_BATCH, NeuralModel, check_fits, check_parameters_fit,
                      uniform_initialiser)
from .output_draws import OutputLayer
from .word_classes import class_lists

WINDOW_THREADS = 64  # threads sharing one window's output rows at most (the kernel's MAX_PARTS)


class MLPModel(NeuralModel):
    kind = "nplm-mlp"
    arch = "mlp"
    summary = "Bengio et al. 2003, eq. 1: softmax over b + W x + U act(d + H x)"
    ACTIVATIONS = tuple(ACTIVATION_CODES)
    ARCHITECTURE = NeuralModel.ARCHITECTURE + ("classes", "hs")
    CAPABILITIES = Capabilities(outputs=OUTPUT_LAYERS, criteria=CRITERIA, mpi_modes=MPI_MODES)
    OPTIONS = declare(NeuralModel.OPTIONS, Option(
        "h", "int", "Hidden units (0: no hidden layer, needs -direct).", 100, low=0, key="hidden"))

    def __init__(self, vocab, params, order, activation="tanh", meta=None):
        if activation not in ACTIVATION_CODES:
            raise ParameterError(f"{{activation}}: unknown '{activation}' (choose from {', '.join(ACTIVATION_CODES)})")
        super().__init__(vocab, params, order, activation, meta)

    @classmethod
    def initial(cls, vocab, order, features, hidden, direct=False, bias=True, activation="tanh", seed=1,
                output="full", classes=None, counts=None):
        """`output` "hs": the hierarchical softmax over the Huffman tree of `counts` (each
        word's count in the training text, </s> included); "class": the class-factored
        softmax over `classes` classes (default sqrt |V|) by frequency from `counts`."""
        if order < 2:
            raise ParameterError("a neural model needs {order} 2 or more (at least one context word)")
        if hidden == 0 and not direct:
            raise ParameterError("{hidden} 0 leaves no path from the context to the output: add {direct}")
        if output not in cls.CAPABILITIES.outputs:
            raise ParameterError(f"{{output}}: unknown value '{output}' (choose from {', '.join(OUTPUT_LAYERS)})")
        if output != "full" and (direct or not hidden):
            raise ParameterError(f"{{output}} {output} reads the hidden layer only: it needs {{hidden}} 1 or more "
                                 "and no {direct} connections")
        meta = {"features": features, "hidden": hidden, "direct": direct, "bias": bias,
                **cls.output_meta(vocab, output, classes, counts)}
        check_parameters_fit(cls, len(vocab), order, meta)
        uniform = uniform_initialiser(seed)
        params = {}
        for name, shape in cls.array_shapes(len(vocab), order, meta).items():
            if name in ("b", "d", "bn", "bc"):  # biases start at zero
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
        if shape.get("classes"):  # and the class rows and biases beside U and b
            if shape["direct"] or not shape["hidden"]:
                return {}
            return {"C": (vocab_size, shape["features"]), "H": (shape["hidden"], inputs), "d": (shape["hidden"],),
                    "U": (vocab_size, shape["hidden"]), "b": (vocab_size,), "Vc": (shape["classes"], shape["hidden"]),
                    "bc": (shape["classes"],)}
        arrays = {"C": (vocab_size, shape["features"]), "b": (vocab_size,)}
        if shape["hidden"]:
            arrays.update(H=(shape["hidden"], inputs), d=(shape["hidden"],), U=(vocab_size, shape["hidden"]))
        if shape["direct"]:
            arrays["W"] = (vocab_size, inputs)
        return arrays

    def output_touches_few_rows(self):
        return self.output != "full"

    def check_training(self, config):
        if self.output != "full" and (config.criterion != "full" or config.mpi == "param"):
            raise ParameterError(f"{{output}} {self.output} trains with its exact gradient, on whole models: not "
                                 "with {criterion} is* nor {mpi} param")
        if self.threads_per_worker(config) > WINDOW_THREADS:
            raise ParameterError(f"{{threads}} {config.threads}: at {{batch}} 1 the threads share each window, "
                                 f"{WINDOW_THREADS} at most")

    def network(self, capacity=SCORING_BATCH, parts=1):
        """The kernel object; `parts` > 1 (full softmax, capacity 1): that many threads share
        each window's output rows in training."""
        from .._ext.mlp_kernels import FactoredNetwork, Network
        if self.output != "full":
            return FactoredNetwork(self.params, self.order - 1, ACTIVATION_CODES[self.activation], capacity,
                                   self.meta.get("bias", True), self.hs_paths() if self.output == "hs" else None,
                                   class_lists(self.meta["class_of"]) if self.output == "class" else None)
        return Network(self.params, self.order - 1, ACTIVATION_CODES[self.activation], capacity,
                       self.meta.get("bias", True), parts)

    def threads_per_worker(self, config):
        """One window an update over the full softmax: the threads share each window, each
        on its part of the output rows (sequential SGD). Lock-free workers there each
        streamed all of U per window, and two ran only 1.3-1.4x one (BENCHMARKS.md)."""
        if config.batch == 1 and config.criterion == "full" and self.output == "full":
            return config.threads
        return 1

    def sampling_streams(self, count, start):
        """`count` streams, each its last order - 1 words, their hidden layers computed
        together (no hidden layer, or the hierarchical softmax: one stream through
        next_distribution)."""
        if self.output == "hs" or not self.meta["hidden"]:
            return super().sampling_streams(count, start)
        return FeedForwardStreams(self, count, start)

    def output_block(self, rows, capacity):
        """The kernel of one rank's block (output rows lo..hi-1) of -mpi param (MPI_MODES)."""
        from .._ext.output_blocks import OutputBlock
        lo, hi = rows
        return OutputBlock(self.params, self.order - 1, ACTIVATION_CODES[self.activation], capacity,
                           self.meta.get("bias", True), lo, hi)


ACTIVATIONS = {"tanh": np.tanh, "sigmoid": lambda x: 0.5 * np.tanh(0.5 * x) + 0.5,
               "relu": lambda x: np.maximum(x, 0), "linear": lambda x: x}


class FeedForwardStreams:
    """Streams of the MLP for sampling (nplmtk/generate.py): each stream's window of its last
    order - 1 words, the hidden layers a = act(d + H x) of all of them one product (eq. 1,
    in numpy), the output layer read from them (OutputLayer: b + U a + W x, or class then
    word)."""
    draws_words = True

    def __init__(self, model, count, start):
        params, vocab, bias = model.params, model.vocab, model.meta.get("bias", True)
        check_fits(8 * count * len(vocab), f"{{batch}} {count} ({len(vocab):,} words)")  # whole distributions
        history = [vocab.bos] * model.order + [vocab.unk if w < 0 else w for w in start]
        self.start_context = np.array(history[-(model.order - 1):], dtype=np.int64)
        self.count, self.contexts = count, np.tile(self.start_context, (count, 1))
        self.C, self.H, self.d = params["C"], params["H"], params["d"] if bias else None
        self.activation = ACTIVATIONS[model.activation]
        self.output = OutputLayer(params["U"], params["b"] if bias else None, params.get("W"),
                                  model.meta["class_of"] if model.output == "class" else None, params.get("Vc"),
                                  params.get("bc") if bias else None)
        self.uniforms_per_draw = self.output.uniforms_per_draw
        self._hidden_layers()

    def advance(self, words, restart):
        """Each stream takes its word, or (where `restart`) begins a sentence again."""
        self.contexts[:, :-1] = self.contexts[:, 1:]
        self.contexts[:, -1] = words
        self.contexts[restart] = self.start_context
        self._hidden_layers()

    def _hidden_layers(self):
        self.x = self.C[self.contexts].reshape(self.count, -1)
        pre = self.x @ self.H.T
        self.top = self.activation(pre if self.d is None else pre + self.d)

    def draw(self, rows, u):
        """A word for each stream of `rows` from u (rows x uniforms_per_draw in [0, 1))."""
        return self.output.draw(self.top[rows], self.x[rows], u)

    def distributions(self, rows):
        return self.output.distributions(self.top[rows], self.x[rows])
