"""A language model's log10 p(word | path) as the lattice decoder asks for them
(nplmtk/lattice/decode.py's `scorer`): a back-off n-gram model's by the path's last
order-1 words (`BackoffScores`), a network's by the memory each path carries
(`NetworkScores`: a feed-forward network's last n-1 words, a recurrent network's state).
Each is computed once per lattice (`forget()` between lattices bounds the memory)."""
import math

import numpy as np

from ..lm import LN10
from .decode import f32


class BackoffScores:
    """`model`: a BackoffModel, truncated to the decoder's order."""

    def __init__(self, model):
        self.model = model
        self.index = model.vocab.index
        self.cache = {}

    def forget(self):
        self.cache = {}

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
    word (`parent`, None before <s>), that word's id, and once computed the network's
    state after it (per layer, its state and cell rows) and log10 p of next words."""
    __slots__ = ("parent", "word", "state", "logp")

    def __init__(self, parent, word):
        self.parent, self.word, self.state, self.logp = parent, word, None, {}


class _Path:
    __slots__ = ("memory",)

    def __init__(self, memory):
        self.memory = memory


class NetworkScores:
    """A neural model's log10 p(word | path): a feed-forward network of order n reads the
    path's last n-1 words (the memory), exactly; a recurrent network the state of the
    path's words, which the decoder carries along the best path into each merged state
    (Liu et al. 2016's n-gram history approximation). The words of a lattice node's
    paths are scored in one batch (`prefetch`). A word outside the model's vocabulary
    has probability 0; as input, and in a context, it reads as <unk>."""

    def __init__(self, model):
        self.model = model
        self.index = model.vocab.index
        self.recurrent = bool(model.RECURRENT)
        self.networks = {}  # a recurrent network's kernels by batch size
        self.cache = {}

    def forget(self):
        self.cache = {}

    def _id(self, word):
        return self.index.get(word, self.model.vocab.unk)

    def start(self):
        bos = self.model.vocab.bos
        return RecurrentMemory(None, bos) if self.recurrent else (bos,) * (self.model.order - 1)

    def advance(self, memory, word):
        if self.recurrent:
            return RecurrentMemory(memory, self._id(word))
        return (memory + (self._id(word),))[1:]

    def logprob(self, word, path):
        if word not in self.index:
            return -math.inf
        if self.recurrent:
            return path.memory.logp[word]
        return self.cache[(path.memory, word)]

    def prefetch(self, paths, words):
        words = [w for w in words if w in self.index]
        if not words or not paths:
            return
        if self.recurrent:
            self._step(paths, words)
            return
        pending = [(memory, word) for memory in {path.memory for path in paths} for word in words
                   if (memory, word) not in self.cache]
        if pending:
            rows = np.array([memory + (self.index[word],) for memory, word in pending], dtype=np.int32)
            for key, logp in zip(pending, (self.model.example_logprobs(rows) / LN10).tolist()):
                self.cache[key] = f32(logp)

    def _step(self, paths, words):
        """One step of the network for every distinct memory of `paths` (from its parent's
        state, input its word), scoring each of `words` after it."""
        memories = list({id(path.memory): path.memory for path in paths}.values())
        memories = [m for m in memories if any(w not in m.logp for w in words)]
        if not memories:
            return
        roots = [m for m in memories if m.parent is None]  # the network's kernel steps from zero or from states
        if roots and len(roots) < len(memories):
            self._step([_Path(m) for m in roots], words)
            memories = [m for m in memories if m.parent is not None]
        parents = list({id(m.parent): m.parent for m in memories if m.parent is not None}.values())
        where = {id(p): i for i, p in enumerate(parents)}
        parent = np.array([where[id(m.parent)] if m.parent is not None else -1 for m in memories], dtype=np.int64)
        states = None
        if parents:
            layers = len(parents[0].state)
            states = [{name: np.stack([p.state[l][k] for p in parents]) for k, name in enumerate(("state", "cell"))}
                      for l in range(layers)]
        node_input = np.array([m.word for m in memories], dtype=np.int32)
        ids = [self.index[w] for w in words]
        per_call = max(1, MAX_PAIRS // len(ids))
        for first in range(0, len(memories), per_call):
            chunk = range(first, min(first + per_call, len(memories)))
            pairs = [(i - first, t) for i in chunk for t in ids]
            pairs += [(0, -1)] * (_bucket(len(pairs)) - len(pairs))  # a few batch sizes: a kernel per size
            part = slice(chunk.start, chunk.stop)
            logp, after = self.model.step_pairs(pairs, parent[part], node_input[part], states, self.networks)
            logp = (logp / LN10).tolist()
            for i in chunk:
                memory = memories[i]
                memory.state = [(layer["state"][i - first], layer["cell"][i - first]) for layer in after]
                for j, word in enumerate(words):
                    memory.logp[word] = f32(logp[(i - first) * len(words) + j])


MAX_PAIRS = 1024  # (path, word) pairs per step of a network: its kernel's buffers grow with them


def _bucket(count):
    """The batch size a kernel is made for: the next power of two (at least 16)."""
    size = 16
    while size < count:
        size *= 2
    return size
