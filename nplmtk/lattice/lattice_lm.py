"""A lattice as a (deficient) language model, as lattice-tool -ppl uses it (SRILM's
LatticeLM): a sentence's log10 probability is the best score of a path through the
lattice whose words are <s>, the sentence's words and </s>, its transition weights
summed in float32 (null nodes passed through at their best); a sentence with no such
path scores log 0. Counted as LatticeLM::prefixProb counts them: a word (not </s>)
that no path reaches is an OOV when it is <unk> (a word the vocabulary lacks), else a
zero probability; every word after it is unreached as well."""
import math

from ..ppl import TextStats
from .decode import BOS, EOS, f32

UNKNOWN = "<unk>"


def _following(graph, node):
    """{word node: the best weight from `node` to it through null nodes}
    (LatticeFollowIter, whose revisits at a higher weight make it the best)."""
    best, stack = {}, [(node, 0.0)]
    reached = {}
    while stack:
        source, start = stack.pop()
        for target, weight in graph.outgoing[source]:
            total = f32(start + weight)
            if target in reached and reached[target] >= total:
                continue
            reached[target] = total
            if graph.nodes[target].word is None:
                stack.append((target, total))
            else:
                best[target] = total
    return best


def sentence_stats(graph, words, known):
    """The TextStats of one sentence (a list of words, without <s> and </s>) scored by
    the lattice; `known`: the words of the vocabulary (others read as <unk>)."""
    stats = TextStats(sentences=1, words=len(words))
    states = {graph.start: 0.0} if graph.nodes[graph.start].word == BOS else {}
    following = {}
    tokens = [word if word in known else UNKNOWN for word in words] + [EOS]
    for position, word in enumerate(tokens):
        reached, any_probable = {}, False
        for state, score in states.items():
            if state not in following:
                following[state] = _following(graph, state)
            for target, weight in following[state].items():
                if graph.nodes[target].word != word:
                    continue
                any_probable |= weight != -math.inf
                total = f32(score + weight)
                if reached.get(target, -math.inf) < total or target not in reached:
                    reached[target] = total
        if position < len(words) and not any_probable:
            if word == UNKNOWN:
                stats.oovs += 1
            else:
                stats.zeroprobs += 1
        states = reached
    stats.logprob = max(states.values()) if states else -math.inf
    return stats


def text_stats(graph, sentences, known):
    """The TextStats of `sentences` (lists of words) together."""
    total = TextStats()
    for words in sentences:
        total.add(sentence_stats(graph, words, known))
    return total
