"""decode.viterbi's search and expand.expand_to_lm's walk in compiled code (nplmtk._ext.lattice_kernels) when the scores
are a back-off n-gram model's (BackoffScores) or the lattice's own: SRILM's graph as
arrays, each word as an id (the model's; a word the model lacks an id of its own past
the model's vocabulary), the same float32 arithmetic and the same order of states, so
the 1-best and the N-best are decode.viterbi's, byte for byte. A network's scores stay
with decode.viterbi (its batches are the network's)."""
import math

import numpy as np

from .._ext.lattice_graph import graph_arrays, link_words, outgoing_transitions
from .._ext.lattice_kernels import expand_contexts, viterbi_states
from .._ext.lattice_write import expanded_slf, written_arrays, written_form
from .._ext.lattice_nbest import nbest_paths, path_sums
from .decode import BOS, EOS, State, best_words, f32, id_logprobs, nbest_lines, path_lines, srilm_graph, viterbi
from .expand import ExpandedLattice
from .htk import NULL_WORD
from .scores import BackoffScores
from ..errors import InputError

NO_WORD = (BOS, EOS, NULL_WORD)
WEIGHED = ("acscale", "ngscale", "lmscale", "prscale", "duscale")  # lattice_graph's order of the scores weighed


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
        return outgoing_transitions(self.first, self.source)  # sources are nodes: both graphs make them so


class ScannedGraph(GraphArrays):
    """GraphArrays made by lattice_graph from htk_reader's arrays (lattice.scanned), without
    srilm_graph's objects: also each graph node's word (`word_text`, mapped by word_of;
    None: a null node), acoustic score (NaN: none), time, and each link node's scores
    (`scores`, htk.SCORE_KEYS' columns, NaN absent); `nodes` (srilm_graph's) made when
    asked for."""

    def __init__(self, lattice, scales, word_of, word_id, lmscale, known=None):
        scanned = self.scanned = lattice.scanned
        self.lattice, self.scales, self.word_of, self._nodes = lattice, scales, word_of, None
        order = scanned.order
        known = {} if known is None else known

        def new_word(raw):  # a word's bytes not in `known` yet: kept there when the model knows it
            word = word_of(raw.decode("ascii"))
            found = word, word_id(word)
            if found[1] < word_id.size:
                known[raw] = found
            return found
        words, ids = link_words(scanned.data, scanned.node_ints, scanned.link_ints, scanned.link_end, known, new_word)
        order_list = order.tolist()  # a few nodes: list look-ups beat numpy's calls
        start, end = order_list.index(scanned.start), order_list.index(scanned.end)
        text = [None] * len(order)
        text[start], text[end] = BOS, EOS
        text += words
        base = lattice.base
        factor = math.log10(f32(base)) if base > 0 else 0.0
        found = graph_arrays(order, scanned.start, scanned.end, scanned.node_ints, scanned.node_reals,
                             scanned.link_ints, scanned.link_reals, scanned.link_start, scanned.link_end,
                             ids, word_id(BOS), word_id(EOS), factor, base == 0,
                             np.array([scales[key] for key in WEIGHED], dtype=np.float64), scales["wdpenalty"],
                             lmscale or 0.0)
        if isinstance(found, int):
            number, line = scanned.link_ints[found, :2].tolist()
            raise InputError(f"link J={number}: its scores times the scales overflow a float32", path=lattice.path,
                             line=line)
        (self.words, self.old, self.language, self.first, self.source, self.weight, self.visit, self.acoustic,
         self.scores) = found
        self.word_text = text
        self.start, self.end, self.bos, self.eos = start, end, word_id(BOS), word_id(EOS)

    @property
    def nodes(self):
        """srilm_graph's nodes of the lattice (for the paths that read them)."""
        if self._nodes is None:
            self._nodes = srilm_graph(self.lattice, self.scales, self.word_of)[0]
        return self._nodes

    def __len__(self):
        return len(self.word_text)

    def __getitem__(self, n):
        return self.nodes[n]

    def written_text(self, node_of, found):
        """lattice_write.expanded_slf's lines of written_arrays' lattice `found` (node_of:
        each new node's graph node)."""
        scanned = self.scanned
        times = np.concatenate([scanned.node_reals[scanned.order, 0], scanned.node_reals[scanned.link_end, 0]])
        labels = [b"!NULL" if w is None or w in (BOS, EOS) else w.encode("utf-8") for w in self.word_text]
        return expanded_slf(*found, node_of, times, labels, scanned.node_ints[scanned.link_end, 4],
                            np.ascontiguousarray(scanned.link_ints[:, 6]), self.scores, len(scanned.order))


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
    and word ids), for the compiled N-best; None: `finals` are decode.viterbi's own.
    `graph`: the ScannedGraph searched (its nodes made only if asked for), or None."""

    def __init__(self, nodes, finals, arrays=None, graph=None, states=None):
        self._nodes, self._finals, self.arrays, self.graph, self.states = nodes, finals, arrays, graph, states
        self._best = False

    @property
    def nodes(self):
        return self._nodes if self._nodes is not None else self.graph.nodes

    @property
    def finals(self):
        if self._finals is None:  # the compiled search's: made when first asked for
            self._finals = _finals(*self.states)
        return self._finals

    def ends(self):
        """The end node's states (their numbers), best first, as `finals` orders them."""
        if self._finals is not None:
            return np.array([s.serial for s in self._finals], dtype=np.int32)
        _, prob, _, _, ends = self.states
        return ends[np.argsort(-prob[ends], kind="stable")].astype(np.int32)

    def best_words(self):
        """decode.best_words of the best path."""
        if self._best is False:
            self._best = self._best_words()
        return self._best

    def _best_words(self):
        if self.graph is None or self.states is None:
            return best_words(self.nodes, self.finals)
        node, prob, _, prev, _ = self.states
        ends = self.ends()
        if not len(ends) or prob[ends[0]] == -math.inf:
            return None
        text, words, k, node, prev = self.graph.word_text, [], int(ends[0]), node.tolist(), prev.tolist()
        while k >= 0:
            if text[node[k]] is not None:
                words.append(text[node[k]])
            k = prev[k]
        return words[::-1]

    def nbest_lines(self, count, model=None):
        """The `count` best paths as decode.nbest_lines writes them (`model`: the language
        scores' model, None: the lattice's own)."""
        hypotheses = self.nbest(count, model)
        return hypotheses.lines(None if hypotheses.ids is None else id_logprobs(model, hypotheses.ids,
                                                                                 hypotheses.lengths))

    def nbest(self, count, model=None):
        """The `count` best paths as Hypotheses, their language scores still to come from
        `model` (ids given) when the compiled search found them; else their lines made."""
        if self.arrays is None:
            return Hypotheses(lines=nbest_lines(self.nodes, self.finals, count, model))
        node, prob, prev, preds, words = self.arrays
        head, entry_state, entry_next, diff, _ = preds
        ends = self.ends()
        offsets, states = nbest_paths(prob, prev, head, entry_state, entry_next, diff, words[node], ends, count)
        if self.graph is None:
            paths = node[states].tolist()
            offsets = offsets.tolist()
            return Hypotheses(lines=path_lines(self.nodes, [paths[a:b] for a, b in zip(offsets, offsets[1:])], model))
        return self._hypotheses(offsets, node[states], model)

    def _hypotheses(self, offsets, path_nodes, model):
        """decode.path_lines' parts of the paths (`path_nodes` from offsets[i] to offsets[i + 1])."""
        acoustic, language = path_sums(offsets, path_nodes, self.graph.acoustic, self.graph.language)
        text, words = self.graph.word_text, self.graph.words[path_nodes]
        bounds = offsets.tolist()
        path_nodes = path_nodes.tolist()
        sentences = [[w for w in (text[n] for n in path_nodes[a:b]) if w is not None]
                     for a, b in zip(bounds, bounds[1:])]
        # the words between <s> and </s> (text None: no word; <s> and </s> only at the start and end)
        inner = (words >= 0) & (words != self.graph.bos) & (words != self.graph.eos)
        before = np.zeros(len(inner) + 1, dtype=np.int64)
        np.cumsum(inner, out=before[1:])
        lengths = before[offsets[1:]] - before[offsets[:-1]]
        if model is None:
            return Hypotheses(acoustic.tolist(), sentences, lengths.tolist(), language=language.tolist())
        ids = words[inner]
        ids[ids >= len(model.vocab)] = -1  # a word the model lacks (WordIds' own ids)
        return Hypotheses(acoustic.tolist(), sentences, lengths.tolist(), ids=ids, lengths=lengths)


class Hypotheses:
    """A lattice's N best paths as SRILM's N-best lines: `lines(languages)`, each path's
    acoustic score, language score, the number of words and the words (<s> and </s>
    included). With `ids` the language scores are the model's, to be computed
    (decode.id_logprobs of `ids` and `lengths`, for many lattices in one call), else
    `language`; or the lines are given whole."""

    def __init__(self, acoustic=(), sentences=(), counts=(), language=None, ids=None, lengths=None, lines=None):
        self.acoustic, self.sentences, self.counts, self.language = acoustic, sentences, counts, language
        self.ids, self.lengths, self._lines = ids, lengths, lines

    def lines(self, languages=None):
        if self._lines is not None:
            return self._lines
        languages = self.language if languages is None else languages
        return [f"{a:.7g} {g:.7g} {n} {' '.join(words)} "
                for a, g, n, words in zip(self.acoustic, languages, self.counts, self.sentences)]


def decode(lattice, scales, word_of, scorer, order, nbest=False):
    """decode.viterbi's search as a Decoding, compiled for a back-off model's or the
    lattice's own scores (`nbest`: keep what the N-best needs)."""
    if not compiled(scorer):
        return Decoding(*viterbi(lattice, scales, word_of, scorer, order, nbest))
    use_lm = scorer is not None
    lmscale = f32(scales["lmscale"]) if use_lm else None
    if use_lm:
        word_id = WordIds(scorer.index, len(scorer.model.vocab))
        tables = scorer.model.tables
    else:
        word_id, tables = WordIds({}, 0), None
    if lattice.scanned is not None:
        nodes, graph = None, ScannedGraph(lattice, scales, word_of, word_id, lmscale,
                                          scorer.known_words(word_of) if use_lm else None)
        start, end = graph.start, graph.end
    else:
        nodes, order_of_nodes, start, end = srilm_graph(lattice, scales, word_of)
        graph = GraphArrays(nodes, order_of_nodes, start, word_id, lmscale)
    context_len = max(order, 1) if use_lm else 1
    (node, prob, gprob, prev), (first, count), preds = viterbi_states(
        tables, graph.words, graph.old, graph.language, graph.first, graph.source, graph.weight, graph.visit, start,
        end, context_len, lmscale if use_lm else 1.0, word_id(BOS), nbest)
    return Decoding(nodes, None, (node, prob, prev, preds, graph.words) if nbest else None,
                    graph if nodes is None else None, (node, prob, gprob, prev, np.arange(first, first + count)))


def _finals(node, prob, gprob, prev, ends):
    """The end node's states (numbered `ends`), best first, as decode.State's (`serial`:
    the state's number) linked to the states of their best paths back to the start."""
    node_list, prob_list, gprob_list, prev_list = node.tolist(), prob.tolist(), gprob.tolist(), prev.tolist()
    made = {}
    for k in ends.tolist():
        j = k
        while j >= 0 and j not in made:
            made[j] = State(node_list[j], None, prob_list[j], gprob_list[j], None, serial=j)
            j = prev_list[j]
    for k, state in made.items():
        state.prev = made[prev_list[k]] if prev_list[k] >= 0 else None
    return sorted((made[k] for k in ends.tolist()), key=lambda s: -s.prob)


def expand(lattice, scales, word_of, scores):
    """expand.expand_to_lm's ExpandedLattice, the walk compiled (`scores`: the
    BackoffScores of the model that BackoffContexts would read)."""
    word_id = WordIds(scores.index, len(scores.model.vocab))
    if lattice.scanned is not None:
        graph = nodes = ScannedGraph(lattice, scales, word_of, word_id, None, scores.known_words(word_of))
        start, end = graph.start, graph.end
    else:
        nodes, order, start, end = srilm_graph(lattice, scales, word_of)
        graph = GraphArrays(nodes, order, start, word_id, None)
    out_first, out_target = graph.outgoing()
    node_of, sources, targets, languages, null = expand_contexts(
        scores.model.tables, graph.words, out_first, out_target, graph.visit, start, end, word_id(BOS), word_id(EOS))

    def links():
        return list(zip(sources.tolist(), targets.tolist(), languages.tolist()))

    def form():  # expand.written_form, compiled
        found = written_form(sources, targets, languages, null, 0, 1)
        if found is None:
            return None
        kept, number, written = found
        carriers = node_of.tolist()
        return kept, number, [(a, b, language, carriers[carrier]) for a, b, language, carrier in written]

    def text():  # write_expanded's, compiled
        found = written_arrays(sources, targets, languages, null, 0, 1)
        if found is None:
            return None
        # the start and end (new nodes 0 and 1) are kept and never written as links: nodes 0 and 1
        return 0, 1, len(found[0]), len(found[1]), graph.written_text(node_of, found)

    return ExpandedLattice(nodes, node_of.tolist, links, 0, 1, form, text if lattice.scanned is not None else None)
