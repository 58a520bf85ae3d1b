"""Interpolated mixtures of any language models (Bengio et al. 2003, sec. 2 "Mixture of
models"; SRILM's `ngram -mix-lm ... -bayes 0` and `compute-best-mix`):

    p(w | h) = sum_i lambda_i(q) p_i(w | h)

with weights fitted by EM on held-out text. With bins, q is the frequency bin of the
two-word context in a training text: the bins of the deleted-interpolation trigram,
q = ceil(-ln((1 + freq) / T)), grouped into at most K bins that hold about equal shares
of the held-out tokens; each bin has its own weights. A mixture is a model: it scores,
saves (the component files by path), and mixes again.
"""
import os
import stat

import numpy as np

from . import container
from .corpus import Corpus
from .errors import InputError, NplmError, ParameterError
from .lm import LN10, LanguageModel
from .ngram.interpolation_weights import count_word_pairs, find_contexts, fit_bin_weights, frequency_bins

CONTEXT_ORDER = 3  # bins count the two words before the predicted one


class ContextBins:
    """Frequency bins of two-word contexts: context counts from a training text, and the
    edges that group the deleted-interpolation bins q into the mixture's bins."""

    def __init__(self, vocab_size, context_keys, context_counts, total, edges):
        self.vocab_size = vocab_size
        self.context_keys = np.asarray(context_keys, dtype=np.int64)
        self.context_counts = np.asarray(context_counts, dtype=np.int64)
        self.total = int(total)
        self.edges = np.asarray(edges, dtype=np.int64)

    @classmethod
    def count(cls, corpus):
        """Context counts of a training corpus (encoded with the mixture's vocabulary)."""
        windows = corpus.windows(CONTEXT_ORDER)
        windows = windows[(windows >= 0).all(axis=1)]
        keys, (counts,) = count_word_pairs(len(corpus.vocab), windows[:, :2])
        return cls(len(corpus.vocab), keys, counts, len(windows), [])

    def frequency_bins(self, windows):
        """The deleted-interpolation bin q of each window's context."""
        _, counts = find_contexts(self.context_keys, self.context_counts, windows, self.vocab_size)
        return frequency_bins(counts, self.total)

    def fit_edges(self, windows, most):
        """Group q into at most `most` bins of about equal held-out mass."""
        q = self.frequency_bins(windows)
        self.edges = np.unique(np.quantile(q, np.arange(1, most) / most, method="lower").astype(np.int64)
                               + 1) if most > 1 else np.zeros(0, np.int64)
        self.edges = self.edges[self.edges <= q.max()]

    @property
    def num_bins(self):
        return len(self.edges) + 1

    def __call__(self, windows):
        return np.searchsorted(self.edges, self.frequency_bins(windows), side="right")

    def describe(self, b):
        low = 0 if b == 0 else int(self.edges[b - 1])
        high = None if b == len(self.edges) else int(self.edges[b]) - 1
        return f"q {low}.." + ("" if high is None else f"{high}")


class Mixture(LanguageModel):
    """Components (LanguageModels over the same words, in any order) and a (bins x
    components) weight table; `names` label the components (their files)."""

    kind = "mixture"

    def __init__(self, components, weights, names, bins=None):
        self.components = list(components)
        self.names = list(names)
        self.weights = np.asarray(weights, dtype=np.float64).reshape(-1, len(self.components))
        self.bins = bins
        self.vocab = self.components[0].vocab
        self._id_maps = []
        words = set(self.vocab.words)
        for name, model in zip(self.names, self.components):
            if model.vocab == self.vocab:
                self._id_maps.append(None)
                continue
            other = set(model.vocab.words)
            if other != words:
                missing = sorted(words - other)[:3] or sorted(other - words)[:3]
                raise InputError(f"vocabulary differs from that of {self.names[0]} "
                                 f"({len(words ^ other)} words in one only, e.g. {' '.join(missing)})", path=name)
            self._id_maps.append(np.array([model.vocab.index[w] for w in self.vocab.words], dtype=np.int32))
        check_weights(self.weights, self.names)

    @property
    def num_bins(self):
        return len(self.weights)

    def component_logprobs(self, corpus):
        """(components, tokens) natural-log probabilities, each component on its own ids."""
        self.check_vocab(corpus)
        return np.array([model.logprobs(own) for model, own in zip(self.components, self._encoded_for(corpus))])

    def _encoded_for(self, corpus):
        """The corpus (in the mixture's ids) in each component's own ids."""
        for model, ids in zip(self.components, self._id_maps):
            if ids is None:
                yield corpus
            else:
                yield Corpus(np.where(corpus.ids >= 0, ids[np.maximum(corpus.ids, 0)], corpus.ids), corpus.offsets,
                             model.vocab, corpus.name)

    def token_bins(self, corpus):
        if self.bins is None:
            return np.zeros(len(corpus.ids) + corpus.num_sentences, dtype=np.int64)
        return self.bins(corpus.windows(CONTEXT_ORDER))

    def use_bins(self, train, heldout, most):
        """Bin by the context counts of corpus `train`, at most `most` bins of about equal
        mass on corpus `heldout`; every bin starts from the current (first) weights."""
        self.bins = ContextBins.count(train)
        self.bins.fit_edges(heldout.windows(CONTEXT_ORDER), most)
        self.weights = np.tile(self.weights[0], (self.bins.num_bins, 1))

    def log10probs(self, corpus):
        return self.log10probs_from(self.component_logprobs(corpus), corpus)

    def log10probs_sharing_prefixes(self, corpus):
        logp = [model.log10probs_sharing_prefixes(own) * LN10 for model, own in zip(self.components,
                                                                                   self._encoded_for(corpus))]
        return self.log10probs_from(np.array(logp), corpus)

    def log10probs_from(self, logp, corpus):
        """The mixture's log10 probabilities from its components' natural logs, rounded
        to float32 as SRILM's LogP is (so reports match `ngram -bayes 0` digit for digit)."""
        mixed = mix_logprobs(logp, self.weights[self.token_bins(corpus)]) / LN10
        return mixed.astype(np.float32).astype(np.float64)

    def hit_tags(self, corpus):
        """SRILM's -bayes 0 mixture prints the tags of every component side by side."""
        per_model = [model.hit_tags(own) for model, own in zip(self.components, self._encoded_for(corpus))]
        per_model = [tags for tags in per_model if tags]
        if not per_model:
            return None
        return ["".join(tags) for tags in zip(*per_model)]

    # -- a word at a time (nplmtk/incremental.py): the state is the components' states, and
    # with bins the two ids before the word (their context's bin)
    @property
    def order(self):
        """The longest context a component reads: an n-gram's order, None for a recurrent network."""
        orders = [getattr(model, "order", None) for model in self.components]
        return None if None in orders else max(orders)

    def begin_state(self):
        bos = self.vocab.bos
        return tuple(model.begin_state() for model in self.components), (bos, bos) if self.bins else ()

    def null_state(self):
        return tuple(model.null_state() for model in self.components), (-1, -1) if self.bins else ()

    def context_id(self, context, word=None):
        """SRILM's BayesMix::contextID: the id of the component that reads the longest
        context (whatever the word: a mixture has no back-off weight to cut with)."""
        best, longest = 0, 0
        for c, (model, id_map) in enumerate(zip(self.components, self._id_maps)):
            ids = list(context) if id_map is None else id_map[np.asarray(context, dtype=np.int64)].tolist()
            found, length = model.context_id(ids)
            if length > longest:
                best, longest = found * len(self.components) + c, length
        return best, longest

    def score_words(self, states, words):
        from .incremental import checked_pairs, padded_windows, word_ids
        ids = word_ids(self.vocab, words)
        checked_pairs(states, ids)
        if any(type(state) is not tuple or len(state) != 2 or len(state[0]) != len(self.components) for state in states):
            raise ParameterError(f"{{states}}: a mixture's state holds a state for each of its "
                                 f"{len(self.components)} models")
        logp, after = [], []
        for c, (model, id_map) in enumerate(zip(self.components, self._id_maps)):
            scores, next_states = model.score_words([state[0][c] for state in states],
                                                    ids if id_map is None else id_map[ids])
            logp.append(scores * LN10)
            after.append(next_states)
        if self.bins is None:
            bins = np.zeros(len(ids), dtype=np.int64)
            contexts = [()] * len(ids)
        else:
            windows = padded_windows([state[1] for state in states], ids, CONTEXT_ORDER)
            bins = self.bins(windows)
            contexts = [tuple(row[1:].tolist()) for row in windows]
        mixed = (mix_logprobs(np.array(logp).reshape(len(self.components), len(ids)), self.weights[bins]) / LN10)
        return mixed.astype(np.float32).astype(np.float64), list(zip(zip(*after), contexts))

    def save(self, path):
        """Write the weights and, by path relative to the mixture file, the components."""
        base = os.path.dirname(os.path.abspath(path))
        arrays = {"weights": self.weights}
        meta = {"components": [os.path.relpath(os.path.abspath(name), base) for name in self.names]}
        if self.bins is not None:
            arrays.update(context_keys=self.bins.context_keys, context_counts=self.bins.context_counts,
                          edges=self.bins.edges)
            meta.update(context_total=self.bins.total)
        container.save(path, self.kind, arrays, meta=meta, vocab=self.vocab)


def check_weights(weights, names):
    if weights.shape[1] != len(names):
        raise NplmError(f"{len(names)} models but {weights.shape[1]} weights")
    bad = np.argwhere(~np.isfinite(weights))
    if len(bad):
        (row, column), value = bad[0], weights[tuple(bad[0])]
        where = f" in bin {row}" if len(weights) > 1 else ""
        raise NplmError(f"the mixture weight of {names[column]}{where} is {value}: a weight must be a number from "
                        "0 to 1")
    if np.any(weights < 0) or np.any(np.abs(weights.sum(axis=1) - 1.0) > 1e-6):
        raise NplmError("mixture weights must be non-negative and sum to 1, got "
                        + " ".join(f"{w:g}" for w in weights[0]))


def mix_logprobs(logp, weights):
    """log sum_i w_i p_i per token: `logp` (components, tokens), `weights` (tokens,
    components)."""
    with np.errstate(divide="ignore"):
        terms = logp + np.log(weights.T)
    top = terms.max(axis=0)
    finite = np.isfinite(top)
    safe = np.where(finite, top, 0.0)
    with np.errstate(divide="ignore"):
        return np.where(finite, safe + np.log(np.exp(terms - safe).sum(axis=0)), -np.inf)


def fit_weights(logp, bins, num_bins, iterations=200, tolerance=1e-7, log=None, precision=None):
    """compute-best-mix's EM from the components' natural-log scores `logp` (components,
    tokens), one weight set per bin (see fit_bin_weights, also for `precision`): returns the weights and the
    held-out log-likelihood of each iteration's starting weights, then of the final ones."""
    return fit_bin_weights(np.exp(logp), bins, num_bins, iterations, tolerance, log, precision)


_LOADING = []  # mixture files being loaded, to refuse a mixture that contains itself
_LOADED = {}  # components opened while the outermost mixture loads: each file once
MAX_DEPTH = 8  # mixtures of mixtures


def load_mixture(model_file, load, allow_paths=False):
    """The mixture a model file describes; `load` opens its components. They are named
    relative to the mixture's folder; unless `allow_paths`, an absolute path or one that
    leaves the folder is refused (a mixture file must not read what it likes). Only
    regular files; at most MAX_DEPTH mixtures deep; each component opened once."""
    path = os.path.abspath(model_file.path)
    if path in _LOADING:
        raise InputError("the mixture contains itself", path=model_file.path)
    if len(_LOADING) >= MAX_DEPTH:
        raise InputError(f"mixtures nested more than {MAX_DEPTH} deep", path=model_file.path)
    base = os.path.dirname(path)
    given = model_file.meta.get("components")
    if not isinstance(given, list) or not given or not all(isinstance(name, str) and name for name in given):
        raise InputError("a mixture without a list of component files", path=model_file.path)
    names = [os.path.normpath(os.path.join(base, name)) for name in given]
    for name, written in zip(names, given):
        if not allow_paths and (os.path.isabs(written) or os.path.commonpath([base, name]) != base):
            raise ParameterError(f"component '{written}' lies outside the mixture's folder: give {{allow_paths}} "
                                 "to follow it", path=model_file.path)
        try:
            regular = stat.S_ISREG(os.stat(name).st_mode)
        except OSError as err:
            raise InputError(f"component '{written}': {err.strerror}", path=model_file.path) from None
        except ValueError:  # os.stat's "embedded null byte"
            raise InputError(f"component {written!r}: a file name cannot hold a NUL byte",
                             path=model_file.path) from None
        if not regular:
            raise InputError(f"component '{written}' is not a regular file", path=model_file.path)
    _LOADING.append(path)
    try:
        components = []
        for name in names:
            if name not in _LOADED:
                _LOADED[name] = load(name)
            components.append(_LOADED[name])
    finally:
        _LOADING.pop()
        if not _LOADING:
            _LOADED.clear()
    bins = None
    a = model_file.arrays
    if "edges" in a:
        _check_bins(a, model_file.meta.get("context_total"), model_file.path)
        bins = ContextBins(len(components[0].vocab), a["context_keys"], a["context_counts"],
                           model_file.meta["context_total"], a["edges"])
    if model_file.vocab != components[0].vocab:
        raise NplmError(f"{model_file.path}: {names[0]} has changed since the mixture was written")
    weights = a.get("weights")
    rows = 1 if bins is None else bins.num_bins
    if weights is None or weights.dtype != np.float64 or weights.shape != (rows, len(names)):
        raise InputError(f"a mixture of {len(names)} models in {rows} bin(s) needs float64 weights of shape "
                         f"({rows}, {len(names)})", path=model_file.path)
    try:
        return Mixture(components, np.array(weights), names, bins)
    except NplmError as error:
        if error.path is None:
            error.path = model_file.path
        raise


def _check_bins(arrays, total, path):
    """The context counts and bin edges of a mixture file: sorted keys, counts >= 0."""
    keys, counts, edges = (arrays.get(name) for name in ("context_keys", "context_counts", "edges"))
    if not all(array is not None and array.dtype == np.int64 and array.ndim == 1 for array in (keys, counts, edges)) \
            or len(keys) != len(counts) or np.any(np.diff(keys) <= 0) or np.any(keys < 0) or np.any(counts < 0) \
            or np.any(np.diff(edges) <= 0) or type(total) is not int or total < 0:
        raise InputError("malformed context bins (keys, counts, edges, total)", path=path)
