"""A language model's log10 p(word | path) as the lattice decoder asks for them
(nplmtk/lattice/decode.py's `scorer`): a back-off n-gram model's by the path's last
order-1 words (`BackoffScores`), a network's by the memory each path carries
(`NetworkScores`: a feed-forward network's last n-1 words, a recurrent network's state, a
Transformer's window of the path's last order-1 words).
Each is computed once per lattice (`forget()` between lattices bounds the memory)."""
import math

import numpy as np

from ..errors import ParameterError
from ..lm import LN10
from .decode import f32


class BackoffScores:
    """`model`: a BackoffModel, truncated to the decoder's order."""

    def __init__(self, model):
        self.model = model
        self.index = model.vocab.index
        self.cache = {}
        self._known_for, self._known = None, {}

    def forget(self):
        self.cache = {}

    def known_words(self, word_of):
        """A lattice word's bytes -> (the word as `word_of` maps it, its id), for the words
        the model knows (search.ScannedGraph fills it): kept from lattice to lattice while
        `word_of` is the same."""
        if self._known_for != word_of:
            self._known_for, self._known = word_of, {}
        return self._known

    def start(self):
        return None

    def advance(self, memory, word):
        return None

    def logprob(self, word, path):
        return self.word_logprob(word, path.context)

    def word_logprob(self, word, context):
        """log10 p(word | context), the context's words recent first."""
        key = (word, context)
        if key not in self.cache:
            if word not in self.index:
                self.cache[key] = -math.inf
            else:  # a context word unknown to the model ends the context (no n-gram runs through it)
                kept = []
                for w in context:
                    if w not in self.index:
                        break
                    kept.append(self.index[w])
                self.cache[key] = float(self.model.score_rows([kept[::-1] + [self.index[word]]])[0])
        return self.cache[key]

    def prefetch(self, paths, words):
        """The (word, context) pairs not yet asked for whose words the model knows, scored in
        one call per context length."""
        rows = {}
        contexts = {path.context for path in paths}
        for word in words:
            if word not in self.index:
                continue
            last = self.index[word]
            for context in contexts:
                key = (word, context)
                if key in self.cache:
                    continue
                try:
                    row = [self.index[w] for w in reversed(context)]
                except KeyError:  # a word unknown to the model: logprob's own way
                    continue
                row.append(last)
                rows.setdefault(len(context), {})[key] = row
        for batch in rows.values():
            for key, score in zip(batch, self.model.score_rows(list(batch.values())).tolist()):
                self.cache[key] = float(score)


class RecurrentMemory:
    """A path as a recurrent network reads it: the memory of the path before its last
    word (`parent`, None before <s>), that word's id, and once computed the row of
    NetworkScores' states holding the network's state after it (0: the zero state before
    any word) and log10 p of next words."""
    __slots__ = ("parent", "word", "row", "logp")

    def __init__(self, parent, word):
        self.parent, self.word, self.row, self.logp = parent, word, None, {}


class NetworkScores:
    """A neural model's log10 p(word | path): a feed-forward network of order n reads the
    path's last n-1 words (the memory), exactly; a recurrent network the state of the
    path's words, which the decoder carries along the best path into each merged state
    (Liu et al. 2016's n-gram history approximation); a network that scores windows
    (`window_logprobs`: the Transformer, whose state is its keys and values) reads the
    decoder's context of each path, its last order-1 words (<s> first at the start), as a
    window alone, so that merged paths share it exactly. The words of a lattice node's
    paths are scored in one batch (`prefetch`). A word outside the model's vocabulary
    has probability 0; as input, and in a context, it reads as <unk>."""

    def __init__(self, model):
        self.model = model
        self.index = model.vocab.index
        self.windowed = callable(getattr(model, "window_logprobs", None))
        self.recurrent = bool(model.RECURRENT) and not self.windowed
        self.networks = {}  # a recurrent network's kernels by batch size (a windowed one's output layer)
        self.forget()

    def forget(self):
        self.cache = {}
        self.children = {}  # a recurrent memory by its parent's and its word: each state computed once
        self.windows = {}  # a decoder's context -> its window of word ids
        if self.recurrent:  # the states, a row each (row 0 the zero state), per layer
            widths = self.model.widths(self.model.meta)
            self.states = [{name: np.zeros((64, widths[l]), dtype=np.float32) for name in ("state", "cell")}
                           for l in range(self.model.meta["layers"])]
            self.rows = 1

    def _id(self, word):
        return self.index.get(word, self.model.vocab.unk)

    def start(self):
        if self.windowed:
            return None
        bos = self.model.vocab.bos
        return RecurrentMemory(None, bos) if self.recurrent else (bos,) * (self.model.order - 1)

    def advance(self, memory, word):
        if self.windowed:
            return None
        if self.recurrent:
            key = (id(memory), self._id(word))
            if key not in self.children:  # (the memory itself keeps its parent, and so the id, alive)
                self.children[key] = RecurrentMemory(memory, key[1])
            return self.children[key]
        return (memory + (self._id(word),))[1:]

    def logprob(self, word, path):
        if word not in self.index:
            return -math.inf
        if self.recurrent:
            return path.memory.logp[word]
        return self.cache[(self._window(path.context) if self.windowed else path.memory, word)]

    def _window(self, context):
        """The window of word ids (oldest first) of a decoder's context (recent first)."""
        if context not in self.windows:
            if not context:
                raise ParameterError("{approx_order}: a Transformer reads the path's last {approx_order} - 1 "
                                     "words; at least 2")
            self.windows[context] = tuple(self._id(word) for word in reversed(context))
        return self.windows[context]

    def prefetch(self, paths, words):
        words = [w for w in words if w in self.index]
        if not words or not paths:
            return
        if self.recurrent:
            self._step(paths, words)
            return
        if self.windowed:
            self._score_windows({self._window(path.context) for path in paths}, words)
            return
        pending = [(memory, word) for memory in {path.memory for path in paths} for word in words
                   if (memory, word) not in self.cache]
        if pending:
            rows = np.array([memory + (self.index[word],) for memory, word in pending], dtype=np.int32)
            for key, logp in zip(pending, (self.model.example_logprobs(rows) / LN10).tolist()):
                self.cache[key] = f32(logp)

    def _score_windows(self, windows, words):
        """Each of `words` after each window not yet scored for it, the windows side by side
        (at most MAX_PAIRS pairs a call)."""
        pending = [(window, word) for window in windows for word in words if (window, word) not in self.cache]
        distinct = list(dict.fromkeys(window for window, _ in pending))
        per_call = max(1, MAX_PAIRS // len(words))
        for first in range(0, len(distinct), per_call):
            chunk = distinct[first:first + per_call]
            row_of = {window: row for row, window in enumerate(chunk)}
            keys = [(window, word) for window, word in pending if window in row_of]
            logp = self.model.window_logprobs(chunk, [row_of[window] for window, _ in keys],
                                              [self.index[word] for _, word in keys], self.networks)
            for key, value in zip(keys, (logp / LN10).tolist()):
                self.cache[key] = f32(value)

    def _step(self, paths, words):
        """One step of the network for every distinct memory of `paths` not yet scored for
        all of `words` (from its parent's state, input its word), scoring each of `words`
        after it."""
        memories = list({id(path.memory): path.memory for path in paths}.values())
        memories = [m for m in memories if m.row is None or any(w not in m.logp for w in words)]
        if not memories:
            return
        parent = np.array([0 if m.parent is None else m.parent.row for m in memories], dtype=np.int64)
        node_input = np.array([m.word for m in memories], dtype=np.int32)
        ids = np.array([self.index[w] for w in words], dtype=np.int64)
        per_call = max(1, MAX_PAIRS // len(ids))
        for first in range(0, len(memories), per_call):
            chunk = memories[first:first + per_call]
            pairs = np.stack([np.repeat(np.arange(len(chunk)), len(ids)), np.tile(ids, len(chunk))], axis=1)
            part = slice(first, first + len(chunk))
            logp, after = self.model.step_pairs(pairs, parent[part], node_input[part], self.states, self.networks)
            rows = self._rows(len(chunk))
            for layer, stepped in zip(self.states, after):
                for name, array in layer.items():
                    array[rows] = stepped[name]
            logp = (logp / LN10).astype(np.float32).tolist()  # as f32 rounds them
            for i, memory in enumerate(chunk):
                memory.row = rows.start + i
                memory.logp.update(zip(words, logp[i * len(ids):(i + 1) * len(ids)]))

    def _rows(self, count):
        """`count` new rows of the states (their arrays grown when full)."""
        rows = slice(self.rows, self.rows + count)
        self.rows += count
        for layer in self.states:
            for name, array in layer.items():
                if len(array) < self.rows:
                    layer[name] = np.concatenate([array, np.zeros((max(self.rows, 2 * len(array)) - len(array),
                                                                   array.shape[1]), dtype=np.float32)])
        return rows


MAX_PAIRS = 1024  # (path, word) pairs per step of a network: its kernel's buffers grow with them

