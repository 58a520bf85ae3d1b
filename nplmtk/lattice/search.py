"""decode.viterbi's search and expand.expand_to_lm's walk in compiled code (nplmtk._ext.lattice_kernels) when the scores
are a back-off n-gram model's (BackoffScores) or the lattice's own: SRILM's graph as
arrays, each word as an id (the model's; a word the model lacks an id of its own past
the model's vocabulary), the same float32 arithmetic and the same order of states, so
the 1-best and the N-best are decode.viterbi's, byte for byte. A network's scores stay
with decode.viterbi (its batches are the network's)."""
import numpy as np

from .._ext.lattice_kernels import expand_contexts, viterbi_states
from .decode import BOS, EOS, State, f32, srilm_graph, viterbi
from .expand import ExpandedLattice
from .scores import BackoffScores


class GraphArrays:
    """SRILM's graph (decode.srilm_graph) as the kernel reads it: each node's word id
    (-1: none), its old language score to take off (f32(l * lmscale), with a model) and
    its own language score (without), the transitions into each node (CSR: `first`,
    `source`, `weight`) and the nodes after the start in topological order (`visit`)."""

    def __init__(self, nodes, order, start, word_id, lmscale):
        count = len(nodes)
        self.words = np.array([-1 if node.word is None else word_id(node.word) for node in nodes], dtype=np.int32)
        if lmscale is None:
            self.old = np.zeros(count, dtype=np.float32)
        else:
            self.old = np.array([0.0 if node.language is None else f32(node.language * lmscale) for node in nodes],
                                dtype=np.float32)
        self.language = np.array([0.0 if node.language is None else node.language for node in nodes],
                                 dtype=np.float32)
        sources = [source for node in nodes for source, _ in node.incoming]
        weights = [weight for node in nodes for _, weight in node.incoming]
        self.first = np.zeros(count + 1, dtype=np.int32)
        np.cumsum([len(node.incoming) for node in nodes], out=self.first[1:])
        self.source = np.array(sources, dtype=np.int32)
        self.weight = np.array(weights, dtype=np.float32)
        self.visit = np.array(order[order.index(start) + 1:], dtype=np.int32)

    def outgoing(self):
        """The transitions out of each node (CSR: `first`, `target`), each node's in the
        order expand_to_lm lists them: by target, then as the target lists them."""
        targets = np.repeat(np.arange(len(self.words), dtype=np.int32), np.diff(self.first))
        by_source = np.argsort(self.source, kind="stable")
        first = np.zeros(len(self.words) + 1, dtype=np.int32)
        np.cumsum(np.bincount(self.source, minlength=len(self.words)), out=first[1:])
        return first, np.ascontiguousarray(targets[by_source])


class WordIds:
    """A word's id: the model's, else one of its own past the model's vocabulary."""

    def __init__(self, index, size):
        self.index, self.size, self.others = index, size, {}

    def __call__(self, word):
        found = self.index.get(word)
        if found is None:
            found = self.others.setdefault(word, self.size + len(self.others))
        return found


def compiled(scorer):
    """Whether decode() searches with the kernel for `scorer`."""
    return scorer is None or isinstance(scorer, BackoffScores)


def decode(lattice, scales, word_of, scorer, order, nbest=False):
    """decode.viterbi's (nodes, finals), the search compiled for a back-off model's or the
    lattice's own scores; `finals`' states carry what best_words and nbest_lines read
    (node, prob, gprob, prev; with `nbest` their merged predecessors)."""
    if not compiled(scorer):
        return viterbi(lattice, scales, word_of, scorer, order, nbest)
    nodes, order_of_nodes, start, end = srilm_graph(lattice, scales, word_of)
    use_lm = scorer is not None
    lmscale = f32(scales["lmscale"]) if use_lm else None
    if use_lm:
        word_id = WordIds(scorer.index, len(scorer.model.vocab))
        tables = scorer.model.tables
    else:
        word_id, tables = WordIds({}, 0), None
    graph = GraphArrays(nodes, order_of_nodes, start, word_id, lmscale)
    context_len = max(order, 1) if use_lm else 1
    (node, prob, gprob, prev), (first, count), preds = viterbi_states(
        tables, graph.words, graph.old, graph.language, graph.first, graph.source, graph.weight, graph.visit, start,
        end, context_len, lmscale if use_lm else 1.0, word_id(BOS), nbest)
    return nodes, _states(node, prob, gprob, prev, first, count, preds)


def _states(node, prob, gprob, prev, first, count, preds):
    """The end node's states, best first, as decode.State objects linked to their
    predecessors (made for the states on their paths back, or all with `preds`)."""
    node, prob, gprob, prev = node.tolist(), prob.tolist(), gprob.tolist(), prev.tolist()
    made = {}

    def state(k):
        if k not in made:
            made[k] = State(node[k], None, prob[k], gprob[k], None, serial=k)
        return made[k]

    if preds is None:
        for k in range(first, first + count):  # each final's best path, back to the start
            j = k
            while j >= 0 and j not in made:
                state(j)
                j = prev[j]
        for k, s in made.items():
            s.prev = made[prev[k]] if prev[k] >= 0 else None
    else:
        head, entry_state, entry_next, diff, language = (a.tolist() for a in preds)
        for k in range(len(node)):
            s = state(k)
            s.prev = made[prev[k]] if prev[k] >= 0 else None
            e = head[k]
            while e >= 0:
                s.preds.append((made[entry_state[e]], diff[e], language[e]))
                e = entry_next[e]
    return sorted((made[k] for k in range(first, first + count)), key=lambda s: -s.prob)


def expand(lattice, scales, word_of, scores):
    """expand.expand_to_lm's ExpandedLattice, the walk compiled (`scores`: the
    BackoffScores of the model that BackoffContexts would read)."""
    nodes, order, start, end = srilm_graph(lattice, scales, word_of)
    word_id = WordIds(scores.index, len(scores.model.vocab))
    graph = GraphArrays(nodes, order, start, word_id, None)
    out_first, out_target = graph.outgoing()
    visit = np.array(order[order.index(start):], dtype=np.int32)
    node_of, sources, targets, languages = expand_contexts(scores.model.tables, graph.words, out_first, out_target,
                                                           visit, start, end, word_id(BOS), word_id(EOS))
    links = list(zip(sources.tolist(), targets.tolist(), languages.tolist()))
    return ExpandedLattice(nodes, node_of.tolist(), links, 0, 1)
