"""Posterior decoding of a lattice, as SRILM's lattice-tool -posterior-decode: the word
string of lowest expected word error, read off a word mesh (a confusion network) into
which the lattice's paths are aligned (Mangu, Brill & Stolcke 2000). Step for step as
Lattice::alignLattice (LatticeAlign.cc), WordMesh::alignWords, normalizeDeletes and
minimizeWordError (WordMesh.cc) do it, on the graph of decode.srilm_graph:

- node posteriors by the forward-backward sums of the transition weights divided by the
  posterior scale (log10, double precision), and the best predecessor and successor of
  each node by Viterbi on the weights themselves (float32);
- while a word node is not aligned: take the one of highest posterior, follow its
  Viterbi path back and forward to the nearest aligned nodes (or the lattice's ends),
  and align the words of that stretch into the mesh between those nodes' columns by
  the edit distance whose costs are expected word errors; each word brings its node's
  posterior, each word-to-word step its transition posterior;
- then the best word of each column, *DELETE* being no word.

Ties are broken by the lowest node number and, within a column, by the first word seen
(SRILM: its hash tables' order and its vocabulary's indices); with scores from real
numbers they are rare."""
import math

from .decode import f32

DELETE = "*DELETE*"
PAUSE = "-pau-"  # a noise word: SRILM leaves it out of the mesh
PSEUDO_ZERO = -100.0  # Lattice.cc's LogP_PseudoZero: a transition of probability 0
PROB_EPSILON = 3e-06  # Prob.cc's Prob_Epsilon
LN10 = math.log(10)
INSERTION, DELETION, SUBSTITUTION = "ins", "del", "sub"


def add_logp(x, y):
    """log10(10^x + 10^y) (Prob.h's AddLogP)."""
    if x < y:
        x, y = y, x
    if y == -math.inf:
        return x
    return x + math.log10(1.0 + math.exp((y - x) * LN10))


def to_prob(logp):
    return 0.0 if logp == -math.inf else math.exp(logp * LN10)


def forward_backward(graph, scale):
    """Each node's forward and backward log10 sums of paths, weights divided by `scale`."""
    forward = [-math.inf] * len(graph.nodes)
    backward = [-math.inf] * len(graph.nodes)
    forward[graph.start] = 0.0
    for n in graph.order[1:]:
        total = -math.inf
        for source, weight in graph.nodes[n].incoming:
            total = add_logp(total, forward[source] + (PSEUDO_ZERO if weight == -math.inf else weight) / scale)
        forward[n] = total
    backward[graph.end] = 0.0
    for n in reversed(graph.order[:graph.order.index(graph.end)]):
        total = -math.inf
        for target, weight in graph.outgoing[n]:
            total = add_logp(total, backward[target] + (PSEUDO_ZERO if weight == -math.inf else weight) / scale)
        backward[n] = total
    return forward, backward

def viterbi_neighbours(graph):
    """Each node's best predecessor and best successor (None at the ends)."""
    before, after = [None] * len(graph.nodes), [None] * len(graph.nodes)
    best = [-math.inf] * len(graph.nodes)
    best[graph.start] = 0.0
    for n in graph.order[1:]:
        for source, weight in graph.nodes[n].incoming:
            score = f32(best[source] + weight)
            if score > best[n]:
                best[n], before[n] = score, source
    best = [-math.inf] * len(graph.nodes)
    best[graph.end] = 0.0
    for n in reversed(graph.order[:graph.order.index(graph.end)]):
        for target, weight in graph.outgoing[n]:
            score = f32(best[target] + weight)
            if score > best[n]:
                best[n], after[n] = score, target
    return before, after


class WordMesh:
    """A confusion network: columns of word posteriors, in `sorted_columns` order."""

    def __init__(self):
        self.columns, self.column_posteriors, self.transition_posteriors = [], [], []
        self.sorted_columns, self.total = [], 0.0

    def _error(self, column, posterior, word):
        """The expected error of putting `word` in `column` (None: a new column)."""
        if column is None:
            return 0.0 if word == DELETE else posterior
        return posterior - column.get(word, 0.0)

    def align(self, words, first_transition, score, after, before):
        """Align `words` ([word, word posterior, transition posterior]) between the columns
        `after` and `before` (None: the mesh's start and end); their columns, or None
        when `after` does not precede `before` (WordMesh::alignWords)."""
        count, columns = len(words), len(self.columns)
        first, length = 0, 0
        if columns:
            last = columns - 1
            for position, column in enumerate(self.sorted_columns):
                if column == after:
                    first = position + 1
                if column == before:
                    last = position - 1
            length = last - first + 1
            if last + 1 < first:
                return None
        full = length == columns
        sorted_columns = self.sorted_columns
        cost = [[0.0] * (count + 1) for _ in range(length + 1)]
        step = [[SUBSTITUTION] * (count + 1) for _ in range(length + 1)]
        for j in range(1, count + 1):
            cost[0][j] = cost[0][j - 1] + self._error(None, self.total, words[j - 1][0])
            step[0][j] = INSERTION
        for i in range(1, length + 1):
            column = sorted_columns[first + i - 1]
            mesh_column, posterior = self.columns[column], self.column_posteriors[column]
            deletion = self._error(mesh_column, posterior, DELETE)
            cost[i][0], step[i][0] = cost[i - 1][0] + deletion, DELETION
            transition = self.transition_posteriors[column]
            for j in range(1, count + 1):
                best, kind = cost[i - 1][j - 1] + self._error(mesh_column, posterior, words[j - 1][0]), SUBSTITUTION
                deleted = cost[i - 1][j] + deletion
                if deleted + PROB_EPSILON < best:
                    best, kind = deleted, DELETION
                inserted = cost[i][j - 1] + self._error(None, transition, words[j - 1][0])
                if inserted + PROB_EPSILON < best:
                    best, kind = inserted, INSERTION
                cost[i][j], step[i][j] = best, kind
        placed = [None] * count
        i, j = length, count
        while i > 0 or j > 0:
            word_posterior = transition_posterior = score
            if j > 0 and words[j - 1][1] != 0.0:
                word_posterior = words[j - 1][1]
            if j > 0 and words[j - 1][2] != 0.0:
                transition_posterior = words[j - 1][2]
            elif j == 0 and first_transition != 0.0:
                transition_posterior = first_transition
            kind = step[i][j]
            if kind == SUBSTITUTION:
                column = sorted_columns[first + i - 1]
                word = words[j - 1][0]
                self.columns[column][word] = self.columns[column].get(word, 0.0) + word_posterior
                self.column_posteriors[column] += word_posterior
                self.transition_posteriors[column] += transition_posterior
                placed[j - 1] = column
                i, j = i - 1, j - 1
            elif kind == DELETION:
                column = sorted_columns[first + i - 1]
                self.columns[column][DELETE] = self.columns[column].get(DELETE, 0.0) + transition_posterior
                self.column_posteriors[column] += transition_posterior
                self.transition_posteriors[column] += transition_posterior
                i -= 1
            else:
                new = len(self.columns)
                sorted_columns.insert(first + i, new)
                # the posterior of passing between the neighbours is the new column's *DELETE*
                null = self.total if first + i == 0 else self.transition_posteriors[sorted_columns[first + i - 1]]
                column = {DELETE: null} if null != 0.0 else {}
                column[words[j - 1][0]] = word_posterior
                self.columns.append(column)
                self.column_posteriors.append(null + word_posterior)
                self.transition_posteriors.append(null + transition_posterior)
                placed[j - 1] = new
                j -= 1
        if first > 0:
            self.transition_posteriors[sorted_columns[first - 1]] += first_transition if first_transition != 0.0 \
                else score
        if full:
            self.total += score
        return placed

    def normalize_deletes(self):
        """Each column's *DELETE* the posterior its words leave of the total."""
        for number, column in enumerate(self.columns):
            words = sum(p for word, p in column.items() if word != DELETE)
            deleted = 0.0 if words - self.total > PROB_EPSILON else self.total - words
            if deleted <= 0.0:
                column.pop(DELETE, None)
            elif deleted > PROB_EPSILON:
                column[DELETE] = deleted
            self.column_posteriors[number] = self.transition_posteriors[number] = self.total

    def best_words(self):
        """The word of highest posterior of each column, *DELETE* left out."""
        words = []
        for number in self.sorted_columns:
            best, best_posterior = None, 0.0
            for word, posterior in self.columns[number].items():
                if best is None or posterior > best_posterior:
                    best, best_posterior = word, posterior
            if best is not None and best != DELETE:
                words.append(best)
        return words


def _path_words(graph, path, posterior, forward, backward, total, scale):
    """The words of the nodes of `path` (None: beyond an end of the lattice), each
    [word, word posterior, transition posterior into the next word], and their nodes
    (SRILM's addNodeToPath)."""
    words, path_nodes = [], []
    last_node = last_word_node = None
    to_last_word = 0.0
    for node in path:
        if node is None:
            words.append(["<unk>", 0.0, 0.0])
            path_nodes.append(None)
            continue
        if last_node is not None:
            to_last_word = f32(to_last_word + graph.weight[last_node, node])
        word = graph.nodes[node].word
        if word is not None and word != PAUSE:
            transition = -math.inf
            if last_word_node is not None:
                transition = forward[last_word_node] + to_last_word / scale + backward[node] - total
                to_last_word = 0.0
            word_posterior = to_prob(posterior[node])
            words.append([word, word_posterior, word_posterior])
            path_nodes.append(node)
            if len(words) > 1:
                words[-2][2] = to_prob(transition)
            last_word_node = node
        last_node = node
    return words, path_nodes


def _to_aligned(node, neighbour, aligned):
    """The Viterbi path from `node` (excluded) to the first aligned node or past the end."""
    path = []
    while True:
        node = neighbour[node]
        path.append(node)
        if node is None or node in aligned:
            return path


def word_mesh(graph, scale):
    """The lattice's paths aligned into a WordMesh (Lattice::alignLattice)."""
    mesh = WordMesh()
    forward, backward = forward_backward(graph, scale)
    total = forward[graph.end]
    if total == -math.inf:
        return mesh
    before, after = viterbi_neighbours(graph)
    posterior = [f + b - total for f, b in zip(forward, backward)]
    waiting = {n: posterior[n] for n in graph.order
               if graph.nodes[n].word is not None and graph.nodes[n].word != PAUSE}
    aligned = {}
    while waiting:
        node = max(waiting, key=lambda n: (waiting[n], -n))
        score = to_prob(waiting[node])
        to_start, to_end = _to_aligned(node, before, aligned), _to_aligned(node, after, aligned)
        words, nodes = _path_words(graph, to_start[::-1] + [node] + to_end, posterior, forward, backward, total,
                                   scale)
        # the last word is there for the transition into it: the transition into the first
        # new word takes its place (WordMesh's convention)
        first_transition = words[0][2]
        words, nodes = words[1:-1], nodes[1:-1]
        placed = mesh.align(words, first_transition, score, aligned.get(to_start[-1]), aligned.get(to_end[-1]))
        if placed is None:  # the lattice's order and the mesh's disagree: left unaligned
            del waiting[node]
            continue
        for n, column in zip(nodes, placed):
            waiting.pop(n, None)
            aligned[n] = column
    mesh.normalize_deletes()
    return mesh


def posterior_words(graph, scale):
    """The words of least expected error (<s> and </s> included, as lattice-tool prints them)."""
    return word_mesh(graph, scale).best_words()
