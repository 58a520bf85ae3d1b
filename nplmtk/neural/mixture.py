"""The mixture of softmaxes (Yang, Dai, Salakhutdinov & Cohen 2018, "Breaking the Softmax
Bottleneck") of the recurrent models, option `mos` K: over the top layer's output h (w wide),
a prior pi = softmax(Wp h) (Wp: K x w, no bias, as their model.py), K contexts
h_k = tanh(Wk_k h + bk_k) (Wk: K w x w, bk: K w; locked dropout `dropout_mos` on them) and
P(w | h) = sum_k pi_k P_k(w | h_k), each P_k the model's own output layer and weights (full
softmax; class-factored: P_k(c(w) | h_k) P_k(w | c(w), h_k); tied to C or not). The kernels:
cython_ext/mixture_output.pxi."""
from ..errors import ParameterError
from .declarations import Option

MAX_COMPONENTS = 64
MIXTURE_OPTIONS = (
    Option("mos", "int", "A mixture of this many softmaxes over the last layer (Yang et al. 2018), each reading "
           "its own context tanh(W_k h + b_k), mixed by pi = softmax(W_pi h); 0: one softmax.", 0, low=0,
           high=MAX_COMPONENTS),
    Option("dropout-mos", "real", "Locked dropout on the mixture's contexts (-mos; Yang et al.'s dropoutl).", 0.0,
           low=0, high=0.99, target="settings"),
)


def check_mixture(components, output, direct):
    """Refuse a mixture the kernels do not build: the hierarchical softmax, direct connections."""
    if not 0 <= components <= MAX_COMPONENTS:
        raise ParameterError(f"{{mos}} must be from 0 to {MAX_COMPONENTS}")
    if components and output == "hs":
        raise ParameterError("{mos} mixes softmaxes of the full or class output layer, not {output} hs's tree")
    if components and direct:
        raise ParameterError("{mos} with {direct} connections: not built (the components read the hidden state only)")


def mixture_shapes(components, width):
    """The mixture's arrays over a top layer `width` wide (none without components)."""
    if not components:
        return {}
    return {"Wp": (components, width), "Wk": (components * width, width), "bk": (components * width,)}
