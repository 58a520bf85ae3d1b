"""Networks scored a word at a time (nplmtk/incremental.py): a feed-forward network's state
is its window of n-1 word ids, a recurrent network's its vectors and the word it reads
next (incremental.RecurrentState). A batch of (state, word) pairs is one call of the
network's kernel."""
import contextlib
import functools

import numpy as np

from ..incremental import RecurrentState, checked_pairs, word_ids
from ..lm import LN10
from .blas import blas_threads

# a step of at most this many states runs on one BLAS thread: its products have a column or
# a few, and threads only wait on each other (a step of one LSTM state of 256 units over 46k
# words took 477 us on two threads, 285 us on one)
ONE_THREAD_COLUMNS = 4


def window_steps(model, states, words):
    """log10 p of each word after its window (a tuple of order-1 ids) and the windows after."""
    ids = word_ids(model.vocab, words)
    checked_pairs(states, ids)
    width = model.order - 1
    rows = np.empty((len(ids), width + 1), dtype=np.int32)
    for row, window in zip(rows, states):
        if len(window) != width:
            raise_state(model, window)
        row[:width] = window
    rows[:, width] = ids
    if len(rows) and not (rows[:, :width].min() >= 0 and rows[:, :width].max() < len(model.vocab)):
        raise_state(model, "a window with ids outside the vocabulary")
    return model.example_logprobs(rows) / LN10, [tuple(row[1:].tolist()) for row in rows]


def raise_state(model, state):
    from ..errors import ParameterError
    raise ParameterError(f"{{states}}: {state!r} is no state of this {model.arch} network")


class RecurrentStepper:
    """Kernel networks of a recurrent model for one step of a batch, by batch size (powers
    of two: a kernel network per size, each reused)."""

    def __init__(self, model):
        self.model, self.networks = model, {}
        layers = model.meta["layers"]
        self.names = [f"{kind}{l}" for l in range(layers) for kind in ("state", "cell")]
        widths = model.widths(model.meta)
        self.widths = [widths[l] for l in range(layers) for _ in ("state", "cell")]
        self.bounds = np.concatenate([[0], np.cumsum(self.widths)]).tolist()

    def begin(self):
        return RecurrentState(np.zeros(self.bounds[-1], dtype=np.float32), self.model.vocab.bos)

    @functools.cached_property
    def class_of(self):
        """Each word's class (a class output layer's), as an array."""
        return np.asarray(self.model.meta["class_of"], dtype=np.int64)

    def network(self, count):
        size = 1
        while size < count:
            size *= 2
        if size not in self.networks:
            self.networks[size] = self.model._network(size, 1)
        return self.networks[size]

    def steps(self, states, words, keys=False):
        """log10 p of each word after its state, and the states after; with `keys`, also the
        top layer's output that predicted each word (a continuous cache's keys)."""
        model = self.model
        ids = word_ids(model.vocab, words)
        checked_pairs(states, ids)
        count = len(ids)
        if any(not isinstance(s, RecurrentState) or len(s.vectors) != self.bounds[-1]
               or not 0 <= s.word < len(model.vocab) for s in states):
            bad = next(s for s in states if not isinstance(s, RecurrentState) or len(s.vectors) != self.bounds[-1]
                       or not 0 <= s.word < len(model.vocab))
            raise_state(model, bad)
        logp = np.full(count, -np.inf)
        after, top = [], []
        if count == 0:
            return logp, after
        network = self.network(count)
        size = network.carried[self.names[0]].shape[0]
        rows = np.zeros((1, 2, size), dtype=np.int32)
        rows[0, 1] = -1
        rows[0, 0, :count] = [s.word for s in states]
        rows[0, 1, :count] = ids
        stacked = np.stack([s.vectors for s in states])
        for name, lo, hi in zip(self.names, self.bounds, self.bounds[1:]):
            carried = network.carried[name]
            carried[:count] = stacked[:, lo:hi]
            carried[count:] = 0
        scores = np.full(size, -np.inf)
        with blas_threads(1) if size <= ONE_THREAD_COLUMNS else contextlib.nullcontext():
            network.logprobs(rows, scores)
        vectors = np.concatenate([network.carried[name][:count] for name in self.names], axis=1)
        after = [RecurrentState(v, w) for v, w in zip(vectors, ids.tolist())]
        scores = scores[:count] / LN10
        if keys:
            return scores, after, network.carried[self.names[-2]][:count].copy()
        return scores, after


def step_pairs(model, pairs, parent, node_input, states, networks):
    """One step of a recurrent model for every node, from the state of its parent
    (states[layer][name] at row parent[node]; zero at the root), input the node's token,
    and log p of the target of every (node, target) pair (-inf if outside the vocabulary);
    also the nodes' new states. The nodes are the streams of one kernel call
    (RecurrentNetwork.step_pairs: a node's targets share its step), `networks` the kernel
    networks by size."""
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    nodes, layers = len(node_input), model.meta["layers"]
    streams = nodes if nodes <= 16 else -(-nodes // 16) * 16  # a few sizes: a kernel network each
    classes = model.meta.get("classes")
    capacity = 1 if classes else 1 << max(0, (-(-len(pairs) // streams) - 1).bit_length())
    network = networks.get((streams, capacity))
    if network is None:
        network = networks[streams, capacity] = model._network(streams, capacity)
    for l in range(layers):
        for name in ("state", "cell"):
            carried = network.carried[f"{name}{l}"]
            carried[nodes:] = 0
            carried[:nodes] = 0 if states is None or parent[0] < 0 else states[l][name][parent]
    inputs = np.full(streams, model.vocab.bos, dtype=np.int32)
    inputs[:nodes] = node_input
    targets = np.maximum(pairs[:, 1], -1)
    order = np.arange(len(pairs))
    if classes:  # a node's targets by class, so that those of one class share its softmax
        order = np.lexsort((model.stepper.class_of[np.maximum(targets, 0)], pairs[:, 0]))
    scores = np.full(len(pairs), -np.inf)
    with blas_threads(1):  # CPU a node on a busy 2-core machine, 8 to 256 nodes: 215-103 us, 2 threads 1950-267 us
        network.step_pairs(inputs, pairs[order, 0].astype(np.int32), targets[order].astype(np.int32), scores)
    logp = np.empty(len(pairs))
    logp[order] = scores
    return logp, [{name: network.carried[f"{name}{l}"][:nodes].copy() for name in ("state", "cell")}
                  for l in range(layers)]
