"""Decoding a lattice with a language model as SRILM's lattice-tool -viterbi-decode and
-nbest-decode do (Lattice::decode, decode1Best, decodeNBest in LatticeDecode.cc), in its
float32 arithmetic, step for step.

The lattice becomes SRILM's graph (Lattice::readHTK): each HTK node a null node, each link
a node of its word (the link's W, else its end node's; <s>, </s> and !NULL are no word)
entered with the weight acscale a + ngscale n + lmscale l + prscale r + duscale ds (+
wdpenalty for a word), all in log10 (a score read in base b times log10 b); the start node
is <s>, the end node </s>. The decoder walks the nodes in topological order keeping one
path per (node, the last order-1 words); at a word it replaces the link's old language
score (lmscale l) by lmscale log10 p(word | context). Paths into a state merge: the best
survives, and every merged path is kept as a link back for the N-best search (A*, best
first, one hypothesis per word string)."""
import heapq
import math
import struct

import numpy as np

from .._ext.corpus_kernels import sentence_totals
from ..corpus import Corpus
from ..errors import InputError
from .htk import NULL_WORD

BOS, EOS = "<s>", "</s>"
NO_THRESHOLD = -1e30


_FLOAT32 = struct.Struct("f")


def f32(x, pack=_FLOAT32.pack, unpack=_FLOAT32.unpack):
    """x rounded to float32 (SRILM's LogP): one rounding of a double result is the float
    operation's result for + - * /. (struct's C cast, as numpy's; numpy past the float32
    range, where struct refuses to round to infinity.)"""
    try:
        return unpack(pack(x))[0]
    except OverflowError:
        return float(np.float32(x))


def htk_score(value, base):
    """A score read from the file, in log10 (getHTKscore: the value as a float times log10
    of the base, itself a float; base 0: the value is a probability)."""
    if base > 0:
        return f32(f32(value) * math.log10(f32(base)))
    return -math.inf if value == 0 else f32(math.log10(value))


def _scorer(base):
    """htk_score in one base, its log10 computed once."""
    if base > 0:
        factor = math.log10(f32(base))
        return lambda value: f32(f32(value) * factor)
    return lambda value: htk_score(value, base)


class Scales:
    """The header's scales (acscale, lmscale, ngscale, prscale, duscale, wdpenalty),
    each overridden by a value given here (None: the file's or SRILM's default)."""

    DEFAULTS = {"acscale": 1.0, "lmscale": 1.0, "ngscale": 1.0, "prscale": 1.0, "duscale": 0.0}
    LIMIT = 1e30  # a scale's size at most: times a score of up to 1e8, still a float32

    def __init__(self, acscale=None, lmscale=None, wdpenalty=None):
        self.given = {"acscale": acscale, "lmscale": lmscale}
        self.wdpenalty = wdpenalty  # in log10 (lattice-tool's -htk-wdpenalty, with -htk-logbase 10)

    def of(self, lattice):
        scales = {}
        for key, default in self.DEFAULTS.items():
            given = self.given.get(key)
            scales[key] = given if given is not None else float(lattice.header.get(key, default))
            if abs(scales[key]) > self.LIMIT:
                raise InputError(f"{key}={scales[key]:g}: beyond the scales' limit, {self.LIMIT:g} in size",
                                 path=lattice.path, line=lattice.header_lines.get(key))
        if self.wdpenalty is not None:
            scales["wdpenalty"] = self.wdpenalty
        elif "wdpenalty" in lattice.header:
            scales["wdpenalty"] = htk_score(float(lattice.header["wdpenalty"]), lattice.base)
        else:
            scales["wdpenalty"] = 0.0
        return scales


class GraphNode:
    """A node of SRILM's graph: its word (None: a null node), its log10 acoustic and
    language scores, `incoming` (node, weight); `scores` (log10, the link's and its end
    node's) and `time` for writing an expanded lattice."""
    __slots__ = ("word", "acoustic", "language", "incoming", "scores", "time")

    def __init__(self, word, acoustic=None, language=None, scores=None, time=None):
        self.word, self.acoustic, self.language, self.incoming = word, acoustic, language, []
        self.scores, self.time = scores or {}, time


def _word(word):
    return None if word in (BOS, EOS, NULL_WORD) else word


def srilm_graph(lattice, scales, word_of):
    """(nodes, their topological order, the start node, the end node): SRILM's graph of
    the lattice, each node's `incoming` (node, weight). `word_of(word)` maps a word to the
    decoder's (-unk's <unk>)."""
    score_of = _scorer(lattice.base)
    weighed = [(key, scales[scale]) for key, scale in (("a", "acscale"), ("n", "ngscale"), ("l", "lmscale"),
                                                       ("r", "prscale"), ("ds", "duscale")) if scales[scale] != 0]
    wdpenalty = scales["wdpenalty"]
    nodes, index, leaving = [], {}, {number: [] for number in lattice.order}
    for number in lattice.order:
        node = lattice.node[number]
        word = BOS if number == lattice.start else EOS if number == lattice.end else None
        acoustic = node.scores.get("a") if number in (lattice.start, lattice.end) else None
        index[number] = len(nodes)
        nodes.append(GraphNode(word, None if acoustic is None else score_of(acoustic), time=node.time))
    for link in lattice.links:
        end = lattice.node[link.end]
        word = _word(link.word) or _word(end.word)
        if end.scores:  # a forward lattice's
            score = {key: score_of(value) for key, value in end.scores.items()}
            score.update({key: score_of(value) for key, value in link.scores.items()})
        else:
            score = {key: score_of(value) for key, value in link.scores.items()}
        weight = 0.0
        for key, scale in weighed:
            if key in score:
                weight = f32(weight + scale * score[key])
        if word is not None:
            weight = f32(weight + wdpenalty)
        if not -math.inf < weight < math.inf and -math.inf not in score.values():
            raise InputError(f"link J={link.number}: its scores times the scales overflow a float32", path=lattice.path,
                             line=link.line)
        node = GraphNode(None if word is None else word_of(word), score.get("a"), score.get("l"), score, end.time)
        node.incoming.append((index[link.start], weight))
        leaving[link.start].append(len(nodes))
        nodes[index[link.end]].incoming.append((len(nodes), 0.0))
        nodes.append(node)
    order = []  # each HTK node, then its links' nodes: before their end nodes, which come later
    for number in lattice.order:
        order.append(index[number])
        order.extend(leaving[number])
    return nodes, order, index[lattice.start], index[lattice.end]


class Graph:
    """srilm_graph's nodes with their leaving transitions (and each transition's weight by
    its two ends), and the nodes reached from the start in topological order."""

    def __init__(self, nodes, order, start, end):
        self.nodes, self.start, self.end = nodes, start, end
        self.order = order[order.index(start):]
        self.outgoing = [[] for _ in nodes]
        self.weight = {}
        for target, node in enumerate(nodes):
            for source, weight in node.incoming:
                self.outgoing[source].append((target, weight))
                self.weight[source, target] = weight


class State:
    """A path of the decoder: its node, context (recent word first), log10 score, the sum
    of its language scores, the best predecessor and the model's `memory` of that path (a
    network's state); for the N-best and the expanded lattice, every merged predecessor
    with its score difference and language score. `serial`: states are numbered as made,
    which is a topological order."""
    __slots__ = ("node", "context", "prob", "gprob", "prev", "memory", "preds", "seen", "serial")

    def __init__(self, node, context, prob, gprob, prev, memory=None, serial=0):
        self.node, self.context, self.prob, self.gprob, self.prev = node, context, prob, gprob, prev
        self.memory, self.serial = memory, serial
        self.preds, self.seen = [], {}


def viterbi(lattice, scales, word_of, scorer, order, nbest=False):
    """The graph's nodes and the states at the end node, best first (SRILM's
    Lattice::decode), keeping one path per (node, last order-1 words). `scorer` (None: the
    lattice's own language scores) gives the model's scores: `start()` the memory of <s>,
    `prefetch(paths, words)` before `logprob(word, path)` is asked for each of `words`
    after each of `paths` (so that it can score them in one batch), `advance(memory, word)`
    the memory of a path extended by `word`. A merged state keeps the memory of its best
    path (with a network: the n-gram history approximation, Liu et al. 2016)."""
    nodes, order_of_nodes, start, end = srilm_graph(lattice, scales, word_of)
    use_lm = scorer is not None
    lmscale = f32(scales["lmscale"]) if use_lm else 1.0
    context_len = max(order, 1) if use_lm else 1
    following = {}
    if use_lm:
        for node in nodes:
            if node.word is not None:
                for source, _ in node.incoming:
                    following.setdefault(source, []).append(node.word)
    first = State(start, (BOS,) if context_len > 1 else (), 0.0, 0.0, None, scorer.start() if use_lm else None)
    states, serial = {start: [first]}, 1
    for n in order_of_nodes[order_of_nodes.index(start) + 1:]:
        node = nodes[n]
        old = f32(node.language * lmscale) if use_lm and node.language is not None else 0.0
        here = {}
        if use_lm and node.word is not None:
            for source, _ in node.incoming:
                if source in following:  # each source's paths scored once, for all the words after it
                    scorer.prefetch(states.get(source, ()), sorted(set(following.pop(source))))
        for source, weight in node.incoming:
            for path in states.get(source, ()):
                prob = f32(f32(path.prob + weight) - old)
                if use_lm and node.word is not None:
                    gprob = scorer.logprob(node.word, path)
                    prob = f32(prob + f32(gprob * lmscale))
                elif use_lm:
                    gprob = 0.0
                else:
                    gprob = node.language if node.language is not None else 0.0
                if node.word is None:
                    context = path.context
                else:
                    context = ((node.word,) + path.context)[:context_len - 1]
                key = context
                if key in here:
                    kept = here[key]
                    if kept.prob < prob:
                        kept.prob, kept.gprob, kept.prev = prob, f32(path.gprob + gprob), path
                    if nbest:
                        kept.preds.insert(0, (path, f32(prob - path.prob), gprob))
                else:
                    state = State(n, context, prob, f32(path.gprob + gprob), path, serial=serial)
                    serial += 1
                    if nbest:
                        state.preds.append((path, f32(prob - path.prob), gprob))
                    here[key] = state
        if use_lm:
            for state in here.values():
                memory = state.prev.memory
                state.memory = memory if node.word is None else scorer.advance(memory, node.word)
        states[n] = list(here.values())
        if n == end:
            break
    finals = sorted(states.get(end, ()), key=lambda s: -s.prob)
    return nodes, finals


def best_words(nodes, finals):
    """The words of the best path (<s> and </s> included), or None (as decode1Best: also
    when the best path has probability 0, a word unknown to the model on every path)."""
    if not finals or finals[0].prob == -math.inf:
        return None
    words, state = [], finals[0]
    while state is not None:
        if nodes[state.node].word is not None:
            words.append(nodes[state.node].word)
        state = state.prev
    return words[::-1]


def nbest_paths(nodes, finals, count):
    """Up to `count` paths (lists of states from the start), best first (SRILM's A*:
    decodeNBest; the same word string once per predecessor state)."""
    queue, tie = [], 0
    threshold = f32(finals[0].prob + NO_THRESHOLD) if finals else 0.0
    for state in finals:
        heapq.heappush(queue, (-state.prob, 0, tie, state, 0.0, None, EOS))
        tie += 1
    found = []
    while queue and len(found) < count:
        neg_prob, neg_depth, _, state, backward, after, feature = heapq.heappop(queue)
        item = (state, after)
        if state.prev is None:
            path = []
            while item is not None:
                path.append(item[0])
                item = item[1]
            found.append(path)
            continue
        for prev, diff, _ in state.preds:
            prob = f32(f32(prev.prob + diff) + backward)
            if not prob > threshold:
                continue
            word = nodes[prev.node].word
            longer = feature + " " + word if word is not None else feature
            if longer in prev.seen and prob <= prev.seen[longer]:
                continue
            prev.seen[longer] = prob
            heapq.heappush(queue, (-prob, neg_depth - 1, tie, prev, f32(backward + diff), item, longer))
            tie += 1
    return found


def hypothesis_line(nodes, path, language):
    """SRILM's N-best line of `path` (its nodes, from the start): acoustic score (the
    path's a's, log10), language score, the number of words, then the words with <s> and
    </s>."""
    acoustic, words = 0.0, []
    for n in path:
        node = nodes[n]
        if node.acoustic is not None:
            acoustic = f32(acoustic + node.acoustic)
        if node.word is not None:
            words.append(node.word)
    count = sum(1 for w in words if w not in (BOS, EOS))
    return f"{acoustic:.7g} {language:.7g} {count} {' '.join(words)} "


def sentence_logprobs(model, sentences):
    """log10 P(words </s> | <s>) of each sentence as SRILM's sentenceProb adds it (OOVs
    and zero probabilities left out), as float32."""
    if not sentences:
        return []
    index = model.vocab.index
    ids = np.array([index.get(w, -1) for s in sentences for w in s], dtype=np.int32)
    return id_logprobs(model, ids, np.array([len(s) for s in sentences], dtype=np.int64))


def id_logprobs(model, ids, lengths):
    """sentence_logprobs of sentences given as the model's word ids (-1: a word the model
    lacks), `lengths` of them each, all scored in one call."""
    vocab = model.vocab
    if not len(lengths):
        return []
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    known = np.where(ids >= 0, ids, vocab.unk).astype(np.int32)
    # each sentence alone (a Transformer's or a recurrent network's scoring streams run on across sentences)
    scores = np.asarray(model.log10probs_sharing_prefixes(Corpus(known, offsets, vocab, name="<n-best>")),
                        dtype=np.float64)
    unknown = np.flatnonzero(ids < 0)  # an unknown word scores nothing; sentence s's scores start at offsets[s] + s
    scores[unknown + np.searchsorted(offsets, unknown, side="right") - 1] = -np.inf
    totals = sentence_totals(scores, known, offsets, vocab.unk)[0]
    return [f32(t) for t in totals.tolist()]


def check_scales(lattice, scales, nbest, with_model=False):
    """Refuse an lmscale that is missing or not above 0 where the search uses it: the N-best
    search, and decoding with a language model (which weighs the model's scores by it)."""
    if (nbest or with_model) and not scales["lmscale"] > 0:
        need = "the N-best search needs it" if nbest else "decoding with a language model weighs its scores by it"
        raise InputError(f"lmscale not given (or not above 0): {need}", path=lattice.path)


def nbest_lines(nodes, finals, count, model=None):
    """The `count` best paths as SRILM's N-best lines, their language scores the model's
    log10 p of each sentence, or without a model the lattice's own, summed in float32."""
    return path_lines(nodes, [[state.node for state in path] for path in nbest_paths(nodes, finals, count)], model)


def path_lines(nodes, paths, model=None):
    """SRILM's N-best lines of `paths` (each its nodes, from the start), their language
    scores as nbest_lines gives them."""
    if model is not None:
        sentences = [[nodes[n].word for n in p if nodes[n].word not in (None, BOS, EOS)] for p in paths]
        languages = sentence_logprobs(model, sentences)
    else:
        languages = [_lattice_language(nodes, p) for p in paths]
    return [hypothesis_line(nodes, p, language) for p, language in zip(paths, languages)]


def _lattice_language(nodes, path):
    total = 0.0
    for n in path:
        if nodes[n].language is not None:
            total = f32(total + nodes[n].language)
    return total
