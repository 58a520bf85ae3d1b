"""The continuous cache of Grave et al. 2017 (nplmtk.cache; SRILM's unigram cache is
checked against SRILM's reports in test_srilm_reference.py)."""
import numpy as np
import pytest

from conftest import assert_one_line_error, run_nplm
from nplmtk.cache import ContinuousCache, continuous_cache_probabilities
from nplmtk.corpus import Corpus
from nplmtk.models import ARCHITECTURES
from nplmtk.vocab import Vocabulary

VOCAB = Vocabulary([f"w{i}" for i in range(9)])
TEXT = ["w1 w2 w3", "w4 w5 w6 w7 w8 w0", "w3 w3", "w5 w1 w2 w2", "w7", "w0 w6 w6 w2 w1"]


def brute_force(states, targets, window, theta):
    p = np.zeros(len(targets))
    for t in range(len(targets)):
        keys = range(max(0, t - window), t)
        scores = np.array([theta * float(states[t] @ states[i]) for i in keys])
        if len(scores):
            weights = np.exp(scores - scores.max())
            p[t] = sum(w for w, i in zip(weights, keys) if targets[i] == targets[t]) / weights.sum()
    return p


@pytest.mark.parametrize("window, block", [(3, 2), (5, 256), (100, 7), (1, 1)])
def test_cache_probabilities_are_the_papers_softmax_over_the_window(window, block):
    rng = np.random.default_rng(4)
    states = rng.normal(0, 1, (40, 6)).astype(np.float32)
    targets = rng.integers(0, 5, 40)
    np.testing.assert_allclose(continuous_cache_probabilities(states, targets, window, 0.7, block=block),
                               brute_force(states, targets, window, 0.7), rtol=1e-6, atol=1e-12)


@pytest.mark.parametrize("shape", [dict(), dict(layers=2, reset_state="never"), dict(tie=True, features=5)])
def test_the_states_are_those_that_predicted_each_token(shape):
    """With a full softmax and no direct connections, log p = log softmax(V h + d)[target]."""
    model = ARCHITECTURES["lstm"].initial(VOCAB, seed=3, **{"features": 4, "hidden": 5, **shape})
    rng = np.random.default_rng(0)
    for array in model.params.values():
        array[...] = rng.normal(0, 0.5, array.shape)
    corpus = Corpus.from_lines(TEXT, VOCAB)
    logp, states = model.logprobs_and_states(corpus)
    np.testing.assert_allclose(logp, model.logprobs(corpus), rtol=1e-6)
    scores = states.astype(np.float64) @ model.params["C" if shape.get("tie") else "V"].T + model.params["d"]
    scores -= scores.max(axis=1, keepdims=True)
    expected = (scores - np.log(np.exp(scores).sum(axis=1, keepdims=True)))[np.arange(len(logp)), corpus.targets()]
    np.testing.assert_allclose(logp, expected, rtol=1e-4, atol=1e-5)
    cached = ContinuousCache(model, 4, 0.5, 0.3).logprobs(corpus)
    p = continuous_cache_probabilities(states, corpus.targets(), 4, 0.5)
    np.testing.assert_allclose(cached, np.log(0.7 * np.exp(logp) + 0.3 * p), rtol=1e-6)


def test_the_cache_from_the_command_line(toy_texts, toy_lstm, tmp_path):
    folder, _ = toy_texts
    model = toy_lstm
    status, plain, _ = run_nplm("ppl", "-lm", model, "-ppl", folder / "valid.txt")
    status, out, err = run_nplm("ppl", "-lm", model, "-ppl", folder / "valid.txt", "-neural-cache", 100)
    assert status == 0 and err == "", err
    assert out.splitlines()[0] == plain.splitlines()[0] and out.splitlines()[1] != plain.splitlines()[1]
    # with dynamic evaluation: the cache over the adapted network's states, neither one alone
    status, both, err = run_nplm("ppl", "-lm", model, "-ppl", folder / "valid.txt", "-neural-cache", 100,
                                 "-dynamic-eval", 5, "-dynamic-lr", 0.1)
    status, dynamic, _ = run_nplm("ppl", "-lm", model, "-ppl", folder / "valid.txt", "-dynamic-eval", 5,
                                  "-dynamic-lr", 0.1)
    assert status == 0 and err == "", err
    assert len({both.splitlines()[1], dynamic.splitlines()[1], out.splitlines()[1]}) == 3
    mlp = tmp_path / "mlp.nplm"
    status, _, err = run_nplm("train-nplm", "-text", folder / "train.txt", "-order", 3, "-m", 4, "-h", 4, "-epochs", 1,
                              "-lm", mlp)
    assert status == 0, err
    status, _, err = run_nplm("ppl", "-lm", mlp, "-ppl", folder / "valid.txt", "-neural-cache", 100)
    assert_one_line_error(status, err, "mlp.nplm", "recurrent network")
