import math

import numpy as np

from nplmtk.toy import ToyGrammar


def test_every_state_is_a_distribution_and_samples_score_finite():
    grammar = ToyGrammar()
    for table in grammar.moves.values():
        assert math.isclose(sum(p for p, _ in table.values()), 1.0)
    for words in grammar.sentences(200, seed=0):
        assert math.isfinite(grammar.logprob(words))
    assert grammar.logprob(["the", "the"]) == -math.inf
    assert grammar.logprob(["the", "cat"]) == -math.inf  # incomplete sentence


def test_exact_entropy_matches_a_monte_carlo_estimate():
    grammar = ToyGrammar()
    sentences = grammar.sentences(20000, seed=1)
    nats = -sum(grammar.logprob(s) for s in sentences)
    tokens = sum(len(s) + 1 for s in sentences)
    estimate = nats / tokens
    assert abs(estimate - grammar.entropy_per_token()) < 0.02 * grammar.entropy_per_token()


def test_classes_share_roles():
    grammar = ToyGrammar()
    for a, b in [("cat", "dog"), ("room", "bedroom"), ("walking", "running")]:
        states_a = {s for s, table in grammar.moves.items() if a in table}
        states_b = {s for s, table in grammar.moves.items() if b in table}
        assert states_a == states_b and states_a
