"""The streams of a recurrent network stepped side by side, each with its state: for
sampling (nplmtk/generate.py) and for scoring n-grams through a trie of their contexts."""
import numpy as np

from .network import check_fits
from .output_draws import OutputLayer


class RecurrentStreams:
    """Streams of a recurrent network for sampling (nplmtk/generate.py) and for scoring
    n-grams: each stream's state carried by the kernel, all stepped with one product per
    layer; the output layer read in numpy from the top layer's state (OutputLayer)."""
    draws_words = True

    def __init__(self, model, count, start):
        params, vocab, layers = model.params, model.vocab, model.meta["layers"]
        # the kernel's scores of a step, and a step's whole distributions at a temperature
        check_fits(12 * count * len(vocab), f"{{batch}} {count} ({len(vocab):,} words)")
        self.count, self.network = count, model._network(count, 1)
        self.rows = np.zeros((1, 2, count), dtype=np.int32)
        self.rows[0, 1] = -1  # no target: the step only advances the state
        self.scores = np.empty(count)
        inputs = [vocab.bos] + [vocab.unk if w < 0 else w for w in start]
        first = model._network(1, len(inputs))
        rows = np.full((len(inputs), 2, 1), -1, dtype=np.int32)
        rows[:, 0, 0] = inputs
        first.logprobs(rows, np.empty(len(inputs)))
        self.names = [f"{kind}{l}" for l in range(layers) for kind in ("state", "cell")]
        self.start_state = {name: first.carried[name][0].copy() for name in self.names}
        for name in self.names:
            self.network.carried[name][...] = self.start_state[name]
        self.top = self.network.carried[f"state{layers - 1}"]  # updated in place by each step
        self.start_input = inputs[-1]  # the input word before the first draw (direct connections read it)
        self.inputs = np.full(count, self.start_input, dtype=np.int64)
        self.C = params["C"]
        self.output = model.output_layer
        self.uniforms_per_draw = self.output.uniforms_per_draw

    def advance(self, words, restart):
        """Each stream takes its word, or (where `restart`) begins a sentence again."""
        self.rows[0, 0] = words
        self.network.logprobs(self.rows, self.scores)
        self.inputs[...] = words
        for name in self.names:
            self.network.carried[name][restart] = self.start_state[name]
        self.inputs[restart] = self.start_input

    def load(self, states, inputs, rows):
        """Streams 0 .. len(rows) - 1 take the states (name -> array) and input words of `rows`."""
        for name in self.names:
            self.network.carried[name][:len(rows)] = states[name][rows]
        self.inputs[:len(rows)] = inputs[rows]

    def snapshot(self, count):
        """The states (name -> array) of streams 0 .. count - 1."""
        return {name: self.network.carried[name][:count].copy() for name in self.names}

    def draw(self, rows, u):
        """A word for each stream of `rows` from u (rows x uniforms_per_draw in [0, 1))."""
        return self.output.draw(self.top[rows], self._direct(rows), u)

    def distributions(self, rows):
        """p(w | each stream's history) for every word (rows x |V|, float64)."""
        return self.output.distributions(self.top[rows], self._direct(rows))

    def log_probabilities(self, streams, words):
        """Natural-log p(word | the stream's history) for each pair of `streams` and `words`."""
        return self.output.log_probabilities(self.top, self._direct(np.arange(self.count)), streams, words)

    def _direct(self, rows):
        return None if self.output.M is None else self.C[self.inputs[rows]]


def trie_states(streams, paths):
    """The states after <s> and each distinct row of `paths` (rows x length word ids), read
    level by level (one step a node, from its parent's state): (states: name -> nodes x width,
    each node's last input word, each path's node)."""
    states = {name: value[None] for name, value in streams.start_state.items()}
    inputs = np.array([streams.start_input], dtype=np.int64)
    node_of_path = np.zeros(len(paths), dtype=np.int64)
    no_restart = np.zeros(streams.count, dtype=bool)
    for depth in range(1, paths.shape[1] + 1):
        nodes, of_path = np.unique(paths[:, :depth], axis=0, return_inverse=True)
        of_path = of_path.reshape(-1)
        parent = np.empty(len(nodes), dtype=np.int64)
        parent[of_path] = node_of_path  # each node's parent, from any of its paths
        level = {name: np.empty((len(nodes),) + value.shape[1:], dtype=np.float32) for name, value in states.items()}
        for lo in range(0, len(nodes), streams.count):
            rows = np.arange(lo, min(lo + streams.count, len(nodes)))
            streams.load(states, inputs, parent[rows])
            words = np.full(streams.count, streams.start_input, dtype=np.int64)
            words[:len(rows)] = nodes[rows, -1]
            streams.advance(words, no_restart)
            for name, value in streams.snapshot(len(rows)).items():
                level[name][rows] = value
        states, inputs, node_of_path = level, nodes[:, -1].astype(np.int64), of_path
    return states, inputs, node_of_path
