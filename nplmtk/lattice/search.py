"""decode.viterbi's search and expand.expand_to_lm's walk in compiled code (nplmtk._ext.lattice_kernels) when the scores
are a back-off n-gram model's (BackoffScores) or the lattice's own: SRILM's graph as
arrays, each word as an id (the model's; a word the model lacks an id of its own past
the model's vocabulary), the same float32 arithmetic and the same order of states, so
the 1-best and the N-best are decode.viterbi's, byte for byte. A network's scores stay
with decode.viterbi (its batches are the network's)."""
import numpy as np

from .._ext.lattice_kernels import expand_contexts, viterbi_states, written_form
from .._ext.lattice_nbest import nbest_paths
from .decode import BOS, EOS, State, f32, nbest_lines, path_lines, srilm_graph, viterbi
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
    """Whether decode() searches with the kernels for `scorer`."""
    return scorer is None or isinstance(scorer, BackoffScores)


class Decoding:
    """A lattice decoded: SRILM's graph (`nodes`), the end node's states best first
    (`finals`: decode.State's linked to their best predecessors, as decode.viterbi gives
    them) and `nbest_lines`, the N-best as decode.nbest_lines writes it. `arrays`: the
    compiled search's states (their node, score, best predecessor, merged predecessors
    and word ids), for the compiled N-best; None: `finals` are decode.viterbi's own."""

    def __init__(self, nodes, finals, arrays=None):
        self.nodes, self.finals, self.arrays = nodes, finals, arrays

    def nbest_lines(self, count, model=None):
        if self.arrays is None:
            return nbest_lines(self.nodes, self.finals, count, model)
        node, prob, prev, preds, words = self.arrays
        head, entry_state, entry_next, diff, _ = preds
        ends = np.array([s.serial for s in self.finals], dtype=np.int32)
        offsets, states = nbest_paths(prob, prev, head, entry_state, entry_next, diff, words[node], ends, count)
        paths = node[states].tolist()
        offsets = offsets.tolist()
        return path_lines(self.nodes, [paths[a:b] for a, b in zip(offsets, offsets[1:])], model)


def decode(lattice, scales, word_of, scorer, order, nbest=False):
    """decode.viterbi's search as a Decoding, compiled for a back-off model's or the
    lattice's own scores (`nbest`: keep what the N-best needs)."""
    if not compiled(scorer):
        return Decoding(*viterbi(lattice, scales, word_of, scorer, order, nbest))
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
    finals = _finals(node, prob, gprob, prev, first, count)
    return Decoding(nodes, finals, (node, prob, prev, preds, graph.words) if nbest else None)


def _finals(node, prob, gprob, prev, first, count):
    """The end node's states, best first, as decode.State's (`serial`: the state's
    number) linked to the states of their best paths back to the start."""
    node_list, prob_list, gprob_list, prev_list = node.tolist(), prob.tolist(), gprob.tolist(), prev.tolist()
    made = {}
    for k in range(first, first + count):
        j = k
        while j >= 0 and j not in made:
            made[j] = State(node_list[j], None, prob_list[j], gprob_list[j], None, serial=j)
            j = prev_list[j]
    for k, state in made.items():
        state.prev = made[prev_list[k]] if prev_list[k] >= 0 else None
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
    carriers = node_of.tolist()
    null = (graph.words[node_of] < 0).astype(np.uint8)

    def form():  # expand.written_form, compiled
        found = written_form(sources, targets, languages, null, 0, 1)
        if found is None:
            return None
        kept, number, written = found
        return kept, number, [(a, b, language, carriers[carrier]) for a, b, language, carrier in written]

    return ExpandedLattice(nodes, carriers, links, 0, 1, form)
