"""The log-bilinear model (Mnih & Hinton 2007), Model 0 of Zhang, Mnih & Hinton (eq. 1,
with the biases of footnote 1): the predicted feature vector p = d + sum_i C_i^T r(w_i)
of the n-1 context words, and P(w | context) = softmax(b_w + r(w) . p) over the same
feature vectors R. Trained with the exact softmax or by importance sampling (the score is an energy). The
gated Models 1-3 are issue #15's next steps."""
import numpy as np

from .._ext.lbl_kernels import LBLNetwork
from ..errors import ParameterError
from .network import SCORING_BATCH, NeuralModel, uniform_initialiser


class LBLModel(NeuralModel):
    kind = "nplm-lbl"
    arch = "lbl"
    summary = ("Model 0 of Zhang, Mnih & Hinton: softmax over b_w + r(w) . (d + sum_i C_i^T r(w_i)), one "
               "feature matrix for context and next word; -h and -activation do not apply")
    ARCHITECTURE = ("features", "bias")

    @classmethod
    def initial(cls, vocab, order, features, hidden=0, direct=False, bias=True, activation="linear", seed=1):
        if order < 2:
            raise ParameterError("a neural model needs {order} 2 or more (at least one context word)")
        if direct:
            raise ParameterError("{arch} lbl has no direct connections: drop {direct}")
        uniform = uniform_initialiser(seed)
        size, context = len(vocab), order - 1
        params = {"R": uniform((size, features), features),
                  "C": uniform((context, features, features), context * features),
                  "d": np.zeros(features, dtype=np.float32), "b": np.zeros(size, dtype=np.float32)}
        return cls(vocab, params, order, "linear", {"features": features, "bias": bias})

    def network(self, capacity=SCORING_BATCH):
        return LBLNetwork(self.params, capacity, self.meta.get("bias", True))
