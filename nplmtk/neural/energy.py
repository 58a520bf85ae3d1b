"""The energy network (Bengio et al. 2003 sec. 5.1; Bengio & Senecal 2003 sec. 1.3): the next
word's own feature vector enters the hidden layer,

    -E(w, h) = b_w + U_w . tanh(d + H z_w) (+ W_w . z_w),  z_w = (C(w), C(w_t-1), ..., C(w_t-n+1)),

normalised over the vocabulary when scoring. Exact training costs |V| hidden layers per
example (small vocabularies); importance sampling (`-criterion is*`) makes it cheap."""
import numpy as np

from ..errors import ParameterError
from .declarations import CRITERIA, Capabilities, declare
from .network import NeuralModel, check_parameters_fit, uniform_initialiser


class EnergyModel(NeuralModel):
    kind = "nplm-energy"
    arch = "energy"
    summary = ("sec. 5.1: the next word's features enter the hidden layer; train it with -criterion is* on "
               "large vocabularies; -oov-estimate in ppl")
    CAPABILITIES = Capabilities(criteria=CRITERIA, oov_estimate=True)
    OPTIONS = declare(NeuralModel.OPTIONS, drop=("activation",))  # tanh

    @classmethod
    def initial(cls, vocab, order, features, hidden, direct=False, bias=True, activation="tanh", seed=1):
        if order < 2:
            raise ParameterError("a neural model needs {order} 2 or more (at least one context word)")
        if hidden < 1:
            raise ParameterError("the energy network needs hidden units ({hidden} 1 or more)")
        if activation != "tanh":
            raise ParameterError("{arch} energy uses tanh hidden units: give {activation} tanh")
        meta = {"features": features, "hidden": hidden, "direct": direct, "bias": bias}
        check_parameters_fit(cls, len(vocab), order, meta)
        uniform = uniform_initialiser(seed)
        width = order * features
        size = len(vocab)
        params = {"C": uniform((size, features), features), "H": uniform((hidden, width), width),
                  "d": np.zeros(hidden, dtype=np.float32), "U": uniform((size, hidden), hidden),
                  "b": np.zeros(size, dtype=np.float32)}
        if direct:
            params["W"] = uniform((size, width), width)
        return cls(vocab, params, order, "tanh", meta)

    @classmethod
    def array_shapes(cls, vocab_size, order, shape):
        width, hidden = order * shape["features"], shape["hidden"]
        if hidden < 1:
            return {}
        arrays = {"C": (vocab_size, shape["features"]), "H": (hidden, width), "d": (hidden,),
                  "U": (vocab_size, hidden), "b": (vocab_size,)}
        if shape["direct"]:
            arrays["W"] = (vocab_size, width)
        return arrays

    def check_training(self, config):
        if config.criterion != "full" and config.batch != 1:
            raise ParameterError("{arch} energy with importance sampling trains one window per update: give {batch} 1")

    def network(self, capacity=None, parts=1):
        """The kernel object; `parts` > 1: that many threads share each exact step's blocks
        of output rows."""
        return self._kernel(self.params, parts)

    def threads_per_worker(self, config):
        """The exact gradient one window an update: the threads share each step, each on its
        blocks of the vocabulary's rows (sequential SGD); lock-free workers would each step
        every row of U and C every window."""
        return config.threads if config.criterion == "full" and config.batch == 1 else 1

    def _kernel(self, params, parts=1):
        from .._ext.energy_kernels import EnergyNetwork
        return EnergyNetwork(params, self.order, self.meta.get("bias", True), parts)

    def logprobs_estimating_oov(self, sentences):
        """Log probabilities of the tokens of `sentences` (lists of words; each word, then
        </s>) where a word outside the vocabulary gets, at its first occurrence, the
        feature vector sum_i C(i) P(i|context) (sec. 5.1) and a probability from the
        vocabulary so extended; its output parameters (U, b, W rows) are the same
        P-weighted averages. It then stays in the vocabulary for the rest of the text."""
        from ..corpus import Corpus
        from ..vocab import Vocabulary
        words = list(self.vocab.words)
        index = dict(self.vocab.index)
        for sentence in sentences:
            for word in sentence:
                if word not in index:
                    index[word] = len(words)
                    words.append(word)
        base = len(self.vocab)
        extended = Vocabulary(words, unk=self.vocab.unk_word)
        windows = Corpus.from_lines([" ".join(s) for s in sentences], extended).windows(self.order)
        targets = windows[:, -1]
        firsts = [int(np.flatnonzero(targets == j)[0]) for j in range(base, len(words))]
        params = {k: v.copy() for k, v in self.params.items()}
        out = np.empty(len(windows))
        start = 0
        for j, position in zip(range(base, len(words)), firsts):
            self._score(params, windows[start:position], out[start:position])
            probabilities = np.empty(j)
            self._kernel(params).next_logprobs(
                np.ascontiguousarray(windows[position, :-1]), probabilities)
            weights = np.exp(probabilities)
            for name in ("C", "U", "b", "W"):
                if name in params:
                    params[name] = np.concatenate([params[name], (weights @ params[name])[None]]).astype(np.float32)
            start = position
        self._score(params, windows[start:], out[start:])
        return out

    def _score(self, params, windows, out):
        if len(windows):
            self._kernel(params).logprobs(
                np.ascontiguousarray(windows), out)
