"""The log-bilinear family of Zhang, Mnih & Hinton: Model 0 (Mnih & Hinton 2007, eq. 1,
with the biases of footnote 1), p = d + sum_i C_i^T r(w_i) and P(w | context) =
softmax(b_w + r(w) . p) over one feature matrix R; Model 1 (eq. 3) weighs each context
word by a gate s_i = 2 logistic(B^T h + gate_bias) of the hidden layer h =
logistic(A^T f + a) over the context features f; Model 2 (eq. 4) adds S^T h to p;
Model 3 (eq. 5) does both (cython_ext/lbl_kernels.pyx). Trained with the exact softmax
or by importance sampling (the score is an energy); each parameter block may have its
own rate, momentum and weight decay (sec. 3: its LBLSettings' block_* settings). With
`output` "hs" the hierarchical softmax over the Huffman tree of the training counts (node
rows Vn and biases bn, no b) replaces the softmax over b_w + r(w) . p; with "class" the
class-factored softmax p(c(w) | p) p(w | c(w), p) over `classes` classes by frequency
(class rows Vc and biases bc; the words' rows stay R's and b's):
cython_ext/lbl_factored_kernels.pyx."""
from dataclasses import dataclass, replace

import numpy as np

from ..errors import ParameterError
from .declarations import CRITERIA, MPI_MODES, OUTPUT_LAYERS, Capabilities, Option, Role, declare
from .network import SCORING_BATCH, NeuralModel, check_parameters_fit, uniform_initialiser
from .optimizer import BlockSettings
from .word_classes import class_lists

# "small random values" (sec. 3) for A, so that the gates start at exactly 1
GATING_INIT = 0.01
WEIGHT_BLOCKS = ("R", "C", "A", "B", "S", "Vn", "Vc")  # the others are biases
IN_PLACE_BLOCKS = ("R", "b", "Vn", "bn")  # the factored output layers step a few rows of these, without momentum



@dataclass
class LBLSettings(BlockSettings):
    """The log-bilinear family's own training settings: each block's (BlockSettings, which
    the Optimizer's block_schedule reads), and R kept fixed (its role `frozen`)."""
    freeze_features: bool = False


# Each block's rate, momentum and weight decay (sec. 3): LBLSettings' fields.
BLOCK_OPTIONS = tuple(replace(option, target="settings") for option in (
    Option("momentum", "real", "Momentum of every parameter block (sec. 3: 0.5 for C, 0.9 for the others with 100 "
           "hidden units, 0.8 with 200-300, 0.5 with 500).", 0.0, low=0, high=1, high_open=True),
    Option("block-lr", "blocks", "A block's own eps0 (blocks R C d b A a B gate_bias S; sec. 3: C=1e-3, A=1e-1, "
           "B=1e-5, S=1e-5). Others take -lr.", low=0, metavar="BLOCK=RATE,..."),
    Option("block-momentum", "blocks", "A block's own momentum (sec. 3: C=0.5).", low=0, high=1, high_open=True,
           metavar="BLOCK=MU,..."),
    Option("block-weight-decay", "blocks", "A block's own weight decay (sec. 3: 1e-5 everywhere, S=1e-4).", low=0,
           metavar="BLOCK=LAMBDA,..."),
    Option("decay-biases", "flag", "-weight-decay on the biases too (sec. 3: \"all parameters, including "
           "biases\")."),
    Option("freeze-features", "flag", "Keep the word features R fixed (sec. 3, for Models 1-3, which start from a "
           "Model 0 with -init-from: taking its R, C, d and b, Model 1 predicts as it does before its first update)."),
))
HIDDEN = Option("h", "int", "Units of the hidden layer h (logistic: -activation does not apply).", 100, low=0,
                key="hidden")


class LBLModel(NeuralModel):
    kind = "nplm-lbl"
    arch = "lbl"
    summary = ("Model 0 of Zhang, Mnih & Hinton: softmax over b_w + r(w) . (d + sum_i C_i^T r(w_i)), one "
               "feature matrix for context and next word; -h and -activation do not apply")
    ARCHITECTURE = ("features", "bias", "classes", "hs")
    ACTIVATIONS = ("linear",)
    CAPABILITIES = Capabilities(outputs=OUTPUT_LAYERS, criteria=CRITERIA, mpi_modes=MPI_MODES,
                                parameter_blocks=True, worker_state=True)  # momentum's velocities
    SETTINGS = LBLSettings
    OPTIONS = declare(NeuralModel.OPTIONS, *BLOCK_OPTIONS, drop=("h", "direct", "activation"))
    FEATURES = "R"  # the C_i are m x m matrices
    GATED = False  # Models 1 and 3: gates s_i on the context words
    HIDDEN_TERM = False  # Models 2 and 3: S^T h added to p

    @classmethod
    def initial(cls, vocab, order, features, hidden=0, direct=False, bias=True, activation="linear", seed=1,
                output="full", classes=None, counts=None):
        """`output` "hs" or "class", `classes` and `counts`: as NeuralModel.output_meta."""
        if order < 2:
            raise ParameterError("a neural model needs {order} 2 or more (at least one context word)")
        if direct:
            raise ParameterError(f"{{arch}} {cls.arch} has no direct connections: drop {{direct}}")
        has_hidden = cls.GATED or cls.HIDDEN_TERM
        if has_hidden and hidden < 1:
            raise ParameterError(f"{{arch}} {cls.arch} needs {{h}} 1 or more hidden units")
        uniform = uniform_initialiser(seed)
        size, context = len(vocab), order - 1
        meta = {"features": features, "bias": bias, **cls.output_meta(vocab, output, classes, counts)}
        if has_hidden:
            meta["hidden"] = hidden
        check_parameters_fit(cls, size, order, meta)
        params = {"R": uniform((size, features), features),
                  "C": uniform((context, features, features), context * features),
                  "d": np.zeros(features, dtype=np.float32)}
        if output == "hs":  # the node rows as the words' rows: small random; biases zero
            params["Vn"] = uniform((size - 1, features), features)
            params["bn"] = np.zeros(size - 1, dtype=np.float32)
        else:
            params["b"] = np.zeros(size, dtype=np.float32)
        if output == "class":
            params["Vc"] = uniform((meta["classes"], features), features)
            params["bc"] = np.zeros(meta["classes"], dtype=np.float32)
        if has_hidden:  # sec. 3: A small random, everything else new zero
            params["A"] = (uniform((context * features, hidden), 1) * GATING_INIT).astype(np.float32)
            params["a"] = np.zeros(hidden, dtype=np.float32)
        if cls.GATED:
            params["B"] = np.zeros((hidden, context), dtype=np.float32)
            params["gate_bias"] = np.zeros(context, dtype=np.float32)
        if cls.HIDDEN_TERM:
            params["S"] = np.zeros((hidden, features), dtype=np.float32)
        return cls(vocab, params, order, "linear", meta)

    @classmethod
    def array_shapes(cls, vocab_size, order, shape):
        m, context, hidden = shape["features"], order - 1, shape.get("hidden", 0)
        arrays = {"R": (vocab_size, m), "C": (context, m, m), "d": (m,)}
        if shape.get("hs"):
            arrays.update(Vn=(vocab_size - 1, m), bn=(vocab_size - 1,))
        else:
            arrays["b"] = (vocab_size,)
        if shape.get("classes"):
            arrays.update(Vc=(shape["classes"], m), bc=(shape["classes"],))
        if cls.GATED or cls.HIDDEN_TERM:
            if hidden < 1:
                return {}
            arrays.update(A=(context * m, hidden), a=(hidden,))
        if cls.GATED:
            arrays.update(B=(hidden, context), gate_bias=(context,))
        if cls.HIDDEN_TERM:
            arrays["S"] = (hidden, m)
        return arrays

    @property
    def BLOCKS(self):
        """The parameter blocks, in the kernel's order (those a model has)."""
        from .._ext.lbl_kernels import BLOCKS
        return BLOCKS

    def network(self, capacity=SCORING_BATCH):
        if self.output != "full":
            from .._ext.lbl_factored_kernels import FactoredLBLNetwork
            return FactoredLBLNetwork(self.params, capacity, self.meta.get("bias", True),
                                      self.hs_paths() if self.output == "hs" else None,
                                      class_lists(self.meta["class_of"]) if self.output == "class" else None)
        from .._ext.lbl_kernels import LBLNetwork
        return LBLNetwork(self.params, capacity, self.meta.get("bias", True))

    def output_touches_few_rows(self):
        return self.output != "full"

    def output_block(self, rows, capacity):
        """The kernel of one rank's block (output rows lo..hi-1) of -mpi param (MPI_MODES)."""
        lo, hi = rows
        from .._ext.lbl_kernels import LBLOutputBlock
        return LBLOutputBlock(self.params, capacity, self.meta.get("bias", True), lo, hi)

    def blocks(self):
        return [name for name in self.BLOCKS if name in self.params]

    def array_roles(self, settings):
        """Each block's role: the weights (WEIGHT_BLOCKS) decayed, the biases only with
        decay_biases; R frozen with freeze_features."""
        roles = {}
        for name in self.params:
            frozen = name == self.FEATURES and settings.freeze_features
            roles[name] = Role(bias=name not in WEIGHT_BLOCKS, frozen=frozen,
                               decayed=not frozen and (name in WEIGHT_BLOCKS or settings.decay_biases))
        return roles

    def check_training(self, config):
        settings = config.settings_for(self)
        if self.output != "full" and (config.criterion != "full" or config.mpi == "param"):
            raise ParameterError(f"{{output}} {self.output} trains with its exact gradient, on whole models: not "
                                 "with {criterion} is* nor {mpi} param")
        if config.criterion != "full" and (settings.momentum or any(settings.block_momentum.values())):
            raise ParameterError("{momentum} applies to the exact softmax gradient: give {criterion} full "
                                 "or no momentum")
        if self.output != "full":
            roles = self.array_roles(settings)
            moving = [name for name in IN_PLACE_BLOCKS if name in self.params
                      and settings.block_momentum.get(name, settings.momentum) != 0
                      and settings.block_lr.get(name, config.lr) != 0 and not roles[name].frozen]
            if moving:
                raise ParameterError(f"{{output}} {self.output} steps a few rows of {', '.join(moving)} in place, "
                                     "without momentum: give them {block_momentum} "
                                     + ",".join(f"{name}=0" for name in moving))



class GatedLBLModel(LBLModel):
    kind = "nplm-lbl1"
    arch = "lbl1"
    summary = ("Model 1: Model 0 with each context word's C_i^T r(w_i) weighted by a gate "
               "s_i = 2 logistic(B^T h + b) of a hidden layer h = logistic(A^T f + a) of -h units (logistic: "
               "-activation does not apply)")
    ARCHITECTURE = ("features", "hidden", "bias", "classes", "hs")
    OPTIONS = declare(LBLModel.OPTIONS, HIDDEN)
    GATED = True


class HiddenTermLBLModel(LBLModel):
    kind = "nplm-lbl2"
    arch = "lbl2"
    summary = "Model 2: Model 0 with S^T h added to the predicted features (h as in Model 1)"
    ARCHITECTURE = ("features", "hidden", "bias", "classes", "hs")
    OPTIONS = declare(LBLModel.OPTIONS, HIDDEN)
    HIDDEN_TERM = True


class GatedHiddenTermLBLModel(LBLModel):
    kind = "nplm-lbl3"
    arch = "lbl3"
    summary = "Model 3: the gates of Model 1 and the S^T h of Model 2"
    ARCHITECTURE = ("features", "hidden", "bias", "classes", "hs")
    OPTIONS = declare(LBLModel.OPTIONS, HIDDEN)
    GATED = True
    HIDDEN_TERM = True
