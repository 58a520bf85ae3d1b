"""A lattice expanded to a language model, each node given one context so that each link
can carry the model's probability of its word (SRILM's Lattice::expandToLM, its default,
non-compact expansion, LatticeExpand.cc), and written in SLF.

The expansion walks SRILM's graph (decode.srilm_graph) in topological order, making a
node (n, c) for each node n and context c (recent word first) that some path reaches n
with: from (n, c), a successor n2 with word w is reached with context (w,) + c (a null
node's context is c) and the link's language score is log10 p(w | c). The context is
then cut to the longest that the model uses to predict any word that can follow n2
(the next words past null nodes; Ngram::contextID: the longest context in the model's
trie under which that word has an n-gram), and the back-off weights of the contexts cut
off are added to the link (Ngram::contextBOW; none after </s>), so each path's score is
its score under the model, with as few nodes as the model's contexts allow. The start is
(start, <s>), the end (end, nothing)."""
import math

import numpy as np

from .decode import BOS, EOS, Graph, GraphNode, f32, srilm_graph
from .htk import NULL_WORD


class ExpandedLattice:
    """`graph`: SRILM's graph of the lattice as read; `nodes`: for each new node its
    graph node (None: a null node of no graph node's); `links`: (from, to, language score log10) between new nodes, the word and
    the other scores those of the graph node `to` copies; `start`, `end`: new nodes;
    `form`: written_form's result computed otherwise (a compiled expansion's), None: by
    written_form; `text`: write_expanded's text computed otherwise (None: from `form`), as
    (start, end: their numbers; nodes, links: their counts; the node and link lines as
    UTF-8 bytes), or None if no path is left."""

    def __init__(self, graph, nodes, links, start, end, form=None, text=None):
        self.graph, self._nodes, self._links, self.start, self.end = graph, nodes, links, start, end
        self.form, self.text = form, text

    @property
    def nodes(self):  # (given as a function: made when first asked for)
        if callable(self._nodes):
            self._nodes = self._nodes()
        return self._nodes

    @property
    def links(self):
        if callable(self._links):
            self._links = self._links()
        return self._links


class BackoffContexts:
    """A back-off model's context trie as SRILM's Ngram walks it: for a context (word
    strings, recent first), the rows of its suffixes that are contexts of the model."""

    def __init__(self, model):
        self.model, self.index = model, model.vocab.index
        self.limit = model.order - 1
        self.cache = {}

    def forget(self):
        self.cache = {}

    def _trie(self, context):
        """The rows (one per length 1, 2, ...) of the longest chain of trie nodes along
        `context`: context[:i] read back to front is an i-gram of the model and a context."""
        if context not in self.cache:
            rows, ids = [], []
            for word in context[:self.limit]:
                if word not in self.index:
                    break
                ids.insert(0, self.index[word])
                row = int(self.model.index.find(np.array([ids], dtype=np.int32))[0])
                if row < 0 or not self.model.node[len(ids) - 1][row]:
                    break
                rows.append(row)
            self.cache[context] = rows
        return self.cache[context]

    def has_ngram(self, context, word):
        """Whether the model lists the n-gram `context` (recent first) then `word`."""
        if word not in self.index or any(w not in self.index for w in context):
            return False
        gram = [self.index[w] for w in reversed(context)] + [self.index[word]]
        return int(self.model.index.find(np.array([gram], dtype=np.int32))[0]) >= 0

    def used_length(self, word, context):
        """Ngram::contextID: the length of the longest trie node along `context` under
        which `word` has an n-gram (any trie node when `word` is None)."""
        length = 0
        for i in range(1, len(self._trie(context)) + 1):
            if word is None or self.has_ngram(context[:i], word):
                length = i
        return length

    def backoff(self, context, length):
        """Ngram::contextBOW: the log10 back-off weights of the trie nodes along `context`
        longer than `length`, summed in float32."""
        total = 0.0
        for i, row in enumerate(self._trie(context), 1):
            if i > length:
                total = f32(total + float(self.model.bow[i - 1][row]))
        return total


def _follow_words(graph, outgoing, node):
    """The words of the nodes after `node`, past null nodes (SRILM's LatticeFollowIter)."""
    words, seen, stack = set(), set(), list(outgoing[node])
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        if graph[n].word is None:
            stack.extend(outgoing[n])
        else:
            words.add(graph[n].word)
    return words


def expand_to_lm(lattice, scales, word_of, scores, contexts):
    """The lattice expanded to the back-off model of `scores` (a BackoffScores) and
    `contexts` (its BackoffContexts); see the module's description."""
    graph, order, start, end = srilm_graph(lattice, scales, word_of)
    outgoing = {n: [] for n in range(len(graph))}
    for n, node in enumerate(graph):
        for source, _ in node.incoming:
            outgoing[source].append(n)
    new_nodes, links = [start, end], []
    number = {(start, (BOS,)): 0, (end, ()): 1}
    by_node = {start: [(BOS,)]}
    follows = {}
    for n in order[order.index(start):]:
        if n == end:
            continue
        for context in by_node.pop(n, ()):
            here = number[(n, context)]
            for n2 in outgoing[n]:
                word = graph[n2].word
                if word is None:
                    used, language = context, 0.0
                else:
                    used, language = (word,) + context, scores.word_logprob(word, context)
                if n2 not in follows:
                    follows[n2] = _follow_words(graph, outgoing, n2)
                length = max((contexts.used_length(w, used) for w in follows[n2]), default=0)
                if not used or used[0] != EOS:
                    language = f32(language + contexts.backoff(used, length))
                key = (n2, used[:length])
                if key not in number:
                    number[key] = len(new_nodes)
                    new_nodes.append(n2)
                    by_node.setdefault(n2, []).append(key[1])
                links.append((here, number[key], language))
    return ExpandedLattice(graph, new_nodes, links, 0, 1)


def from_decoder(graph, finals):
    """The expansion a decoder made (decode.viterbi with nbest=True: its states and every
    merged predecessor), a node per state on a path to the end, one end node after them."""
    states = expanded_states([s for s in finals if s.prob > -math.inf])
    number = {id(s): i for i, s in enumerate(states)}
    links = [(number[id(prev)], number[id(s)], language) for s in states for prev, _, language in s.preds
             if id(prev) in number]
    end = len(states)
    links += [(number[id(s)], end, 0.0) for s in finals if id(s) in number]
    nodes = [s.node for s in states] + [None]  # the end: a null node
    return ExpandedLattice(graph, nodes, links, 0, end)


def write_expanded(lattice, scales, expanded, out):
    """`expanded` in SLF, as SRILM's Lattice::writeHTK writes it: a node with one link in
    from a null node (or the start) and one out to a null node (or the end) that is not
    itself written so, is written as a link (its links' scores added); every other node as
    a node, each link into it carrying its word (!NULL for none), the scores of the
    lattice's link it copies (log10, base=10) and the model's log10 probability as l=, so
    that decoding the written lattice without a model gives each path its score with the
    model. Links of probability 0 (a word the model lacks) and the nodes then off every
    path are left out. The header carries the scales used (wdpenalty in log10). False if
    no path is left."""
    if expanded.text is not None:  # the compiled expansion's text
        found = expanded_bytes(lattice, scales, expanded)
        if found is None:
            return False
        out.write(found.decode("utf-8"))
        return True
    form = expanded.form() if expanded.form else written_form(expanded)
    if form is None:
        return False
    nodes, number, written = form
    graph, start, end = expanded.graph, expanded.start, expanded.end
    lines = [_header(lattice, scales, number[start], number[end], len(nodes), len(written))]
    end_time = lattice.node[lattice.end].time
    for n in nodes:
        time = end_time if expanded.nodes[n] is None else graph[expanded.nodes[n]].time
        lines.append(f"I={number[n]}" + (f"\tt={time:.7g}" if time is not None else "") + "\n")
    carried = {}  # each carrier's word and scores, written once
    for j, (a, b, language, carrier) in enumerate(written):
        if carrier not in carried:
            node = graph[carrier] if carrier is not None else None
            label = node.word if node is not None and node.word not in (BOS, EOS) else None
            parts = [f"W={label or NULL_WORD}"]
            if node is not None:
                parts += [f"{key}={value:.7g}" for key, value in node.scores.items() if key != "l"]
            carried[carrier] = "\t".join(parts)
        lines.append(f"J={j}\tS={a}\tE={b}\t{carried[carrier]}\tl={language:.7g}\n")
    out.write("".join(lines))
    return True


def expanded_bytes(lattice, scales, expanded):
    """write_expanded's text of a compiled expansion (`expanded.text` given) as UTF-8
    bytes, without the text stream; None if no path is left."""
    found = expanded.text()
    if found is None:
        return None
    start, end, node_count, link_count, body = found
    return _header(lattice, scales, start, end, node_count, link_count).encode("utf-8") + body


def _header(lattice, scales, start, end, nodes, links):
    header = ["VERSION=1.0", f"UTTERANCE={lattice.name}", "base=10"]
    header += [f"{key}={scales[key]:.7g}" for key in ("acscale", "lmscale", "ngscale", "prscale", "duscale",
                                                      "wdpenalty")]
    header += [f"start={start}\tend={end}", f"N={nodes}\tL={links}"]
    return "\n".join(header) + "\n"


def written_form(expanded):
    """The structure of write_expanded's lattice: the nodes written as nodes (ascending),
    their numbers (by node) and the written links (from, to: numbers; language score; the
    graph node whose word and scores the link carries), or None if no path is left."""
    graph, start, end = expanded.graph, expanded.start, expanded.end
    links = [link for link in expanded.links if link[2] > -math.inf]
    keep = _reached(start, [(a, b) for a, b, _ in links]) & _reached(end, [(b, a) for a, b, _ in links])
    if end not in keep:
        return None
    links = [link for link in links if link[0] in keep and link[1] in keep]
    into, out_of = {n: [] for n in keep}, {n: [] for n in keep}
    for link in links:
        out_of[link[0]].append(link)
        into[link[1]].append(link)

    def word(n):
        return None if expanded.nodes[n] is None else graph[expanded.nodes[n]].word

    as_link = {}

    def written_as_link(n):  # allowAsTrans
        if n not in as_link:
            as_link[n] = False
            if len(into[n]) == 1 and len(out_of[n]) == 1:
                before, after = into[n][0][0], out_of[n][0][1]
                if (word(after) is None or after == end) and (word(before) is None or before == start):
                    as_link[n] = not written_as_link(after)
        return as_link[n]

    nodes = [n for n in sorted(keep) if not written_as_link(n)]
    number = {n: i for i, n in enumerate(nodes)}
    written = []  # (from, to, language, the node whose word and scores the link carries)
    for a, b, language in links:
        if written_as_link(a):
            continue
        to = b
        if written_as_link(b):
            to, language = out_of[b][0][1], f32(language + out_of[b][0][2])
        written.append((number[a], number[to], language, expanded.nodes[b]))
    return nodes, number, written


def expanded_states(finals):
    """The states on some path to the end (through every merged predecessor), in the
    order they were made (a topological order)."""
    seen, stack = {}, list(finals)
    while stack:
        state = stack.pop()
        if id(state) in seen:
            continue
        seen[id(state)] = state
        stack.extend(prev for prev, _, _ in state.preds)
    return sorted(seen.values(), key=lambda s: s.serial)


def _reached(first, edges):
    """The nodes reached from `first` along `edges` (pairs)."""
    after = {}
    for a, b in edges:
        after.setdefault(a, []).append(b)
    reached, stack = {first}, [first]
    while stack:
        for b in after.get(stack.pop(), ()):
            if b not in reached:
                reached.add(b)
                stack.append(b)
    return reached


def expanded_graph(expanded):
    """The expanded lattice as SRILM holds it after expandToLM: each link weighs the
    model's log10 probability alone (the acoustic scores stay on the nodes, for writing),
    which lattice-tool's -posterior-decode and -ppl then read."""
    graph = expanded.graph
    position = {n: k for k, n in enumerate(graph_order(graph))}
    nodes = [GraphNode(None if n is None else graph[n].word) for n in expanded.nodes]
    for a, b, language in expanded.links:
        nodes[b].incoming.append((a, language))
    last = len(position)  # a node of no graph node's (the decoder's end) comes last
    order = sorted(range(len(nodes)), key=lambda i: last if expanded.nodes[i] is None else position[expanded.nodes[i]])
    return Graph(nodes, order, expanded.start, expanded.end)


def graph_order(graph):
    """A topological order of SRILM's graph (nodes list with `incoming`)."""
    outgoing = [[] for _ in graph]
    waiting = [len(node.incoming) for node in graph]
    for n, node in enumerate(graph):
        for source, _ in node.incoming:
            outgoing[source].append(n)
    ready = [n for n, count in enumerate(waiting) if count == 0]
    order = []
    while ready:
        n = ready.pop()
        order.append(n)
        for m in outgoing[n]:
            waiting[m] -= 1
            if not waiting[m]:
                ready.append(m)
    return order

