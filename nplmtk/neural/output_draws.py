"""A network's output layer read in numpy from its top layer, for many histories at once:
words drawn (nplmtk/generate.py), whole distributions, and the log-probabilities of given
words (nplmtk/convert.py). The full softmax y = V a + d (+ M x, the direct connections from
the inputs x), or Mikolov et al. 2011's class-factored one, where a word is drawn as its class
from softmax(Vc a + bc), then as a word of that class from the softmax over its words' rows:
O((K + |c|) h) a word, not O(|V| h). The streams of the recurrent and feed-forward networks
(RecurrentStreams, FeedForwardStreams) give it their top layers."""
import numpy as np

from ..generate import inverse_cdf
from .word_classes import class_lists


class OutputLayer:
    """`V` (|V| x h) and `d` (or None) the word rows and biases; `M` (|V| x inputs) the
    direct connections or None; `class_of`, `Vc`, `bc` the class-factored layer or None."""

    def __init__(self, V, d=None, M=None, class_of=None, Vc=None, bc=None):
        self.V, self.d, self.M = V, d, M
        self.classes = class_of is not None
        self.uniforms_per_draw = 2 if self.classes else 1
        if self.classes:
            members, starts, self.class_of, _ = class_lists(class_of)
            self.members, self.starts = members.astype(np.int64), starts
            self.V_by_class = np.ascontiguousarray(V[self.members])
            self.d_by_class = None if d is None else d[self.members]
            self.Vc, self.bc = Vc, bc

    def draw(self, top, inputs, u):
        """A word for each row of `top` (its top layer; `inputs`: its direct inputs, or None)
        from u (rows x uniforms_per_draw in [0, 1))."""
        if not self.classes:
            return inverse_cdf(_exp_rows(self._word_scores(top, inputs)), u[:, 0])
        classes = inverse_cdf(_exp_rows(self._class_scores(top)), u[:, 0])
        words = np.empty(len(top), dtype=np.int64)
        for c in np.unique(classes).tolist():
            sel = np.flatnonzero(classes == c)
            lo, hi = self.starts[c], self.starts[c + 1]
            scores = top[sel] @ self.V_by_class[lo:hi].T
            if self.d_by_class is not None:
                scores += self.d_by_class[lo:hi]
            words[sel] = self.members[lo + inverse_cdf(_exp_rows(scores), u[sel, 1])]
        return words

    def distributions(self, top, inputs):
        """p(w | each row) for every word (rows x |V|, float64)."""
        if not self.classes:
            return _softmax_rows(self._word_scores(top, inputs))
        p = np.empty((len(top), len(self.members)))
        classes = _softmax_rows(self._class_scores(top))
        scores = top @ self.V_by_class.T
        if self.d_by_class is not None:
            scores += self.d_by_class
        for c in range(len(self.starts) - 1):
            lo, hi = self.starts[c], self.starts[c + 1]
            p[:, self.members[lo:hi]] = _softmax_rows(scores[:, lo:hi]) * classes[:, c:c + 1]
        return p

    def log_probabilities(self, top, inputs, rows, words):
        """Natural-log p(word | row) for each pair of `rows` (of top and inputs) and `words`."""
        scores = np.einsum("ij,ij->i", top[rows], self.V[words], dtype=np.float64)
        if self.d is not None:
            scores += self.d[words]
        if self.M is not None:
            scores += np.einsum("ij,ij->i", inputs[rows], self.M[words], dtype=np.float64)
        distinct, back = np.unique(rows, return_inverse=True)
        if not self.classes:
            return scores - _logsumexp_rows(self._word_scores(top[distinct], None if inputs is None
                                                              else inputs[distinct]))[back]
        class_scores = self._class_scores(top[distinct])
        class_of = np.asarray(self.class_of)[words]
        scores += np.asarray(class_scores, dtype=np.float64)[back, class_of] - _logsumexp_rows(class_scores)[back]
        for c in np.unique(class_of).tolist():
            sel = np.flatnonzero(class_of == c)
            lo, hi = self.starts[c], self.starts[c + 1]
            within = top[rows[sel]] @ self.V_by_class[lo:hi].T
            if self.d_by_class is not None:
                within += self.d_by_class[lo:hi]
            scores[sel] -= _logsumexp_rows(within)
        return scores

    def _class_scores(self, top):
        scores = top @ self.Vc.T
        return scores if self.bc is None else scores + self.bc

    def _word_scores(self, top, inputs):
        scores = top @ self.V.T
        if self.d is not None:
            scores += self.d
        if self.M is not None:
            scores += inputs @ self.M.T
        return scores


def _exp_rows(scores):
    """exp(scores - each row's maximum), float64: weights proportional to the softmax."""
    scores = np.asarray(scores, dtype=np.float64)
    return np.exp(scores - scores.max(axis=1, keepdims=True))


def _logsumexp_rows(scores):
    scores = np.asarray(scores, dtype=np.float64)
    top = scores.max(axis=1)
    return top + np.log(np.exp(scores - top[:, None]).sum(axis=1))


def _softmax_rows(scores):
    weights = _exp_rows(scores)
    return weights / weights.sum(axis=1, keepdims=True)
