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
STEP_COLUMNS = 512  # states stepped in one kernel call (as recurrent.SCORING_ROWS: its buffers grow with them)


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
        if count == 0:
            return np.full(0, -np.inf), []
        stacked = np.stack([s.vectors for s in states])
        scores, vectors = self.step_vectors(stacked, np.array([s.word for s in states]), ids)
        after = [RecurrentState(v, w) for v, w in zip(vectors, ids.tolist())]
        scores = scores / LN10
        if keys:
            return scores, after, self.network(count).carried[self.names[-2]][:count].copy()
        return scores, after

    def step_vectors(self, vectors, inputs, targets, projected=None):
        """One step from each row of `vectors` (count x the state's width, float32), input
        `inputs`, scoring `targets` (ids, -1: none, -inf): natural-log p and the vectors after
        (count x width), in one kernel call; `projected`, the inputs' rows of
        input_projections (None: the kernel computes them)."""
        count = len(inputs)
        network = self.network(count)
        size = network.carried[self.names[0]].shape[0]
        rows = np.zeros((1, 2, size), dtype=np.int32)
        rows[0, 1] = -1
        rows[0, 0, :count] = inputs
        rows[0, 1, :count] = targets
        for name, lo, hi in zip(self.names, self.bounds, self.bounds[1:]):
            carried = network.carried[name]
            carried[:count] = vectors[:, lo:hi]
            carried[count:] = 0
        scores = np.full(size, -np.inf)
        if projected is not None:
            projected = np.concatenate([projected, np.zeros((size - count, projected.shape[1]), np.float32)])
        with blas_threads(1) if size <= ONE_THREAD_COLUMNS else contextlib.nullcontext():
            network.logprobs(rows, scores, None, projected)
        return scores[:count], np.concatenate([network.carried[name][:count] for name in self.names], axis=1)

    def sentences_alone(self, corpus):
        """log10 p of every token of the corpus (in corpus.windows order), each sentence
        from a zero state as if alone (nplm ppl of a file of it), the sentences' common
        beginnings run once: the trie of their inputs level by level, each node one column
        of a batched step from its parent node's state, scoring its first target; a node's
        other targets scored from its state by the output layer in numpy (a column each
        with the hierarchical softmax, which has none)."""
        # one BLAS thread: 100 N-best lists of Brown on a busy 2-core machine took 2.4 s of CPU and 8.1 s
        # of wall so, 6.8 and 21.6 s on two threads (and two workers of one thread each 1.14x the wall)
        with blas_threads(1):
            return self._sentences_alone(corpus)

    def _sentences_alone(self, corpus):
        model = self.model
        out = np.full(corpus.num_words + corpus.num_sentences, -np.inf)
        parent_states = np.zeros((1, self.bounds[-1]), dtype=np.float32)  # the root's parent: a zero state
        top = slice(self.bounds[-3], self.bounds[-2])  # the top layer's output, in a node's vectors
        levels = list(prefix_levels(corpus, model.vocab))
        every_pair = model.output == "hs" or model.meta.get("mos")  # no output layer in numpy: a column a pair
        words = np.unique(np.concatenate([level.word for level in levels])) if levels else np.zeros(0, np.int64)
        # a node's input product from a table of the distinct words when they are few (N-best lists)
        table = self.input_projections(words) if 2 * len(words) < sum(len(l.word) for l in levels) else None
        for level in levels:
            logp = np.empty(len(level.pair_node))
            states = np.empty((len(level.parent), self.bounds[-1]), dtype=np.float32)
            first = np.diff(level.pair_node, prepend=-1) > 0  # pairs sorted by node: each node's first
            columns = np.arange(len(logp)) if every_pair else np.flatnonzero(first)
            for lo in range(0, len(columns), STEP_COLUMNS):
                pairs = columns[lo:lo + STEP_COLUMNS]
                node = level.pair_node[pairs]
                projected = None if table is None else table[np.searchsorted(words, level.word[node])]
                logp[pairs], after = self.step_vectors(parent_states[level.parent[node]], level.word[node],
                                                       level.pair_target[pairs], projected)
                carriers = first[pairs]
                states[node[carriers]] = after[carriers]
            others = np.zeros(0, dtype=np.int64) if every_pair else np.flatnonzero(~first)
            if len(others):
                node, target = level.pair_node[others], level.pair_target[others]
                known = target >= 0
                direct = None if model.output_layer.M is None else model.params["C"][level.word]
                logp[others[~known]] = -np.inf
                logp[others[known]] = model.output_layer.log_probabilities(states[:, top], direct, node[known],
                                                                           target[known])
            out[level.positions] = logp[level.pair_of_token]
            parent_states = states
        return out / LN10

    def input_projections(self, words):
        """The first layer's pre-activations from the features of each of `words` (U0 C[w]
        + b0, a row each, float32): the input half of a step's products, made once a word."""
        params = self.model.params
        table = params["C"][words] @ params["U0"].T
        if "b0" in params:
            table += params["b0"]
        return np.ascontiguousarray(table, dtype=np.float32)


class Level:
    """A level of prefix_levels' trie: its nodes' `parent` (a node one level up; 0 at the
    root, whose parent is the zero state) and input `word`; its distinct (node, target)
    pairs, sorted by node (`pair_node`, `pair_target`: -1 for a word outside the
    vocabulary); each token predicted here, its index in corpus.windows order
    (`positions`) and its pair (`pair_of_token`)."""

    def __init__(self, parent, word, pair_node, pair_target, positions, pair_of_token):
        self.parent, self.word, self.pair_node, self.pair_target = parent, word, pair_node, pair_target
        self.positions, self.pair_of_token = positions, pair_of_token


def prefix_levels(corpus, vocab):
    """The trie of the sentences' inputs (<s> w1 .. wn, outside the vocabulary as <unk>), a
    Level per depth: the nodes at depth d are the distinct inputs <s> w1 .. wd."""
    size = len(vocab) + 1
    lengths = np.diff(corpus.offsets)
    begins = np.asarray(corpus.offsets[:-1], dtype=np.int64)
    ids = np.append(np.asarray(corpus.ids, dtype=np.int64), vocab.eos)  # a sentence's last read stays in bounds
    first_token = begins + np.arange(len(lengths))  # each sentence's first token in corpus.windows order
    node_of = np.zeros(len(lengths), dtype=np.int64)
    for depth in range(int(lengths.max()) + 1 if len(lengths) else 0):
        alive = np.flatnonzero(lengths >= depth)
        if depth == 0:
            parent, word = np.zeros(1, dtype=np.int64), np.array([vocab.bos], dtype=np.int64)
        else:
            inputs = ids[begins[alive] + depth - 1]
            inputs[inputs < 0] = vocab.unk
            keys, node_of[alive] = np.unique(node_of[alive] * size + inputs, return_inverse=True)
            parent, word = keys // size, keys % size
        targets = np.where(lengths[alive] == depth, vocab.eos, ids[begins[alive] + depth])
        pairs, pair_of_token = np.unique(node_of[alive] * size + targets + 1, return_inverse=True)
        yield Level(parent, word, pairs // size, pairs % size - 1, first_token[alive] + depth,
                    pair_of_token.reshape(-1))


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
