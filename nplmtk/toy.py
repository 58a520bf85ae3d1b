"""The built-in demo corpus: English-like sentences from a small probabilistic grammar.

The grammar is a deterministic probabilistic automaton: from each state every word leads
to exactly one next state, so a sentence has one derivation, its probability is a product
of choices, and the entropy per token (words and `</s>`) is known exactly. Words of one
class share their roles (cat/dog, room/bedroom, walking/running, the/a), the
generalisation Bengio et al. (2003, sec. 1) argue a neural model makes and an n-gram does not.
"""
import bisect
import itertools
import math

import numpy as np

from .vocab import EOS

CLASSES = {
    "animal": ["cat", "dog", "bird", "horse", "mouse", "rabbit"],
    "animals": ["cats", "dogs", "birds", "horses", "mice", "rabbits"],
    "person": ["man", "woman", "boy", "girl", "child", "teacher", "doctor"],
    "people": ["men", "women", "boys", "girls", "children", "teachers", "doctors"],
    "name": ["john", "mary", "peter", "anna"],
    "adj": ["big", "small", "old", "young", "happy", "quiet", "brown", "white"],
    "place": ["room", "bedroom", "kitchen", "garden", "house", "park", "street"],
    "ing": ["walking", "running", "sleeping", "sitting", "playing", "eating"],
    "verb_sg": ["sleeps", "eats", "sits", "plays", "waits"],
    "verb_pl": ["sleep", "eat", "sit", "play", "wait"],
    "prep": ["in", "near", "behind"],
    "time": ["today", "yesterday"],
}

# state -> [(class or word, probability, next state)]; None is the end of the sentence.
GRAMMAR = {
    "start": [("the", 0.40, "np_the"), ("a", 0.25, "np_a"), ("name", 0.15, "vp_sg"),
              ("they", 0.10, "vp_pl"), ("time", 0.10, "start_after_time")],
    "start_after_time": [("the", 0.5, "np_the"), ("a", 0.3, "np_a"), ("name", 0.2, "vp_sg")],
    "np_the": [("adj", 0.30, "np_the_adj"), ("animal", 0.20, "vp_sg"), ("person", 0.20, "vp_sg"),
               ("animals", 0.15, "vp_pl"), ("people", 0.15, "vp_pl")],
    "np_the_adj": [("adj", 0.15, "np_the_adj"), ("animal", 0.25, "vp_sg"), ("person", 0.25, "vp_sg"),
                   ("animals", 0.175, "vp_pl"), ("people", 0.175, "vp_pl")],
    "np_a": [("adj", 0.35, "np_a_adj"), ("animal", 0.35, "vp_sg"), ("person", 0.30, "vp_sg")],
    "np_a_adj": [("adj", 0.10, "np_a_adj"), ("animal", 0.45, "vp_sg"), ("person", 0.45, "vp_sg")],
    "vp_sg": [("is", 0.6, "prog"), ("verb_sg", 0.4, "after_verb")],
    "vp_pl": [("are", 0.6, "prog"), ("verb_pl", 0.4, "after_verb")],
    "prog": [("ing", 1.0, "after_verb")],
    "after_verb": [("prep", 0.55, "pp_det"), (EOS, 0.30, None), ("and", 0.15, "start")],
    "pp_det": [("the", 0.7, "pp_noun"), ("a", 0.3, "pp_noun")],
    "pp_noun": [("place", 1.0, "after_pp")],
    "after_pp": [(EOS, 0.75, None), ("and", 0.25, "start")],
}


def _zipf(n):
    weights = 1.0 / np.arange(1, n + 1)
    return weights / weights.sum()


class ToyGrammar:
    """Samples sentences, scores them, and knows its own entropy per token."""

    def __init__(self):
        # state -> word -> (probability, next state); a word appears once per state.
        self.moves = {}
        for state, choices in GRAMMAR.items():
            assert abs(sum(p for _, p, _ in choices) - 1) < 1e-12, state
            table = {}
            for symbol, p, target in choices:
                members = CLASSES.get(symbol, [symbol])
                for word, q in zip(members, _zipf(len(members))):
                    assert word not in table, (state, word)
                    table[word] = (p * q, target)
            self.moves[state] = table
        self.states = list(self.moves)
        self._choices = {state: (list(table), list(itertools.accumulate(p for p, _ in table.values())))
                         for state, table in self.moves.items()}

    @property
    def words(self):
        return sorted({w for table in self.moves.values() for w in table} - {EOS})

    def sample(self, rng):
        words, state = [], "start"
        while state is not None:
            options, cumulative = self._choices[state]
            pick = bisect.bisect_right(cumulative, rng.random() * cumulative[-1])
            word = options[min(pick, len(options) - 1)]
            if word != EOS:
                words.append(word)
            state = self.moves[state][word][1]
        return words

    def sentences(self, count, seed):
        rng = np.random.default_rng(seed)
        return [self.sample(rng) for _ in range(count)]

    def logprob(self, words):
        """Natural-log probability of a sentence (with its `</s>`); -inf if impossible."""
        total, state = 0.0, "start"
        for word in list(words) + [EOS]:
            move = self.moves[state].get(word) if state is not None else None
            if move is None:
                return -math.inf
            total += math.log(move[0])
            state = move[1]
        return total if state is None else -math.inf

    def entropy_per_token(self):
        """Exact entropy rate in nats per token (words and `</s>`): expected sentence
        entropy over expected sentence length, from the expected state visits."""
        index = {s: i for i, s in enumerate(self.states)}
        n = len(self.states)
        transitions = np.zeros((n, n))
        step_entropy = np.zeros(n)
        for state, table in self.moves.items():
            for p, target in table.values():
                step_entropy[index[state]] -= p * math.log(p)
                if target is not None:
                    transitions[index[state], index[target]] += p
        start = np.zeros(n)
        start[index["start"]] = 1.0
        visits = np.linalg.solve(np.eye(n) - transitions.T, start)
        return float(visits @ step_entropy / visits.sum())

    def perplexity_floor(self):
        return math.exp(self.entropy_per_token())
