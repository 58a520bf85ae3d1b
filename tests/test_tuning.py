"""Settings picked on a tuning text (nplmtk/tuning.py, issue 51): each pick is the best of
its grid as the ppl report of that setting's model prints it, and "off" is in every grid."""
import io

import numpy as np
import pytest

from nplmtk.cache import ContinuousCache, continuous_cache_probabilities, with_cache
from nplmtk.corpus import Corpus
from nplmtk.errors import ParameterError
from nplmtk.models import ARCHITECTURES
from nplmtk.ppl import perplexity
from nplmtk.tuning import neural_cache_probabilities, tune_cache, tune_neural_cache
from nplmtk.vocab import Vocabulary

VOCAB = Vocabulary([f"w{i}" for i in range(9)])
RNG = np.random.default_rng(11)
# repetitive text: the caches help on it
TEXT = [" ".join(f"w{w}" for w in RNG.choice([1, 2, 3, 3, 4, 5, 5, 5], RNG.integers(2, 9))) for _ in range(60)]


@pytest.fixture(scope="module")
def network():
    model = ARCHITECTURES["lstm"].initial(VOCAB, seed=3, features=4, hidden=5)
    rng = np.random.default_rng(0)
    for array in model.params.values():
        array[...] = rng.normal(0, 0.5, array.shape)
    return model


def reported_ppl(model, tmp_path):
    path = tmp_path / "tune.txt"
    path.write_text("\n".join(TEXT) + "\n")
    return perplexity(model, str(path), write=io.StringIO().write).ppl


def test_every_window_and_theta_at_once_equals_one_at_a_time():
    rng = np.random.default_rng(4)
    states = rng.normal(0, 1, (300, 6)).astype(np.float32)
    targets = rng.integers(0, 5, 300)
    windows, thetas = (1, 3, 50, 1000), (0.1, 0.7)
    p = neural_cache_probabilities(states, targets, windows, thetas, block=32)
    for i, window in enumerate(windows):
        for j, theta in enumerate(thetas):
            np.testing.assert_allclose(p[i, j], continuous_cache_probabilities(states, targets, window, theta),
                                       rtol=1e-9, atol=1e-12)


def test_the_neural_cache_pick_is_the_best_report_of_its_grid(network, tmp_path):
    corpus = Corpus.from_lines(TEXT, VOCAB)
    grid = dict(windows=(5, 40), thetas=(0.1, 1.0), weights=(0.0, 0.1, 0.4))
    pick = tune_neural_cache(network, corpus, **grid)
    assert len(pick.tried) >= 12  # the grid, and past its edges where the pick landed on one
    reports = [(setting, reported_ppl(ContinuousCache(network, setting["window"], setting["theta"],
                                                      setting["weight"]), tmp_path)) for setting, _ in pick.tried]
    for (_, ppl), (_, report) in zip(pick.tried, reports):
        assert ppl == pytest.approx(report, rel=1e-6)
    assert pick.setting == min(reports, key=lambda pair: pair[1])[0]
    assert pick.setting["weight"] > 0  # the cache helps on this text
    assert pick.ppl <= reported_ppl(network, tmp_path) * (1 + 1e-6)
    assert "window" in pick.describe() and f"best of {len(pick.tried)}" in pick.describe()


def test_the_unigram_cache_pick_is_the_best_report_of_its_grid(network, tmp_path):
    corpus = Corpus.from_lines(TEXT, VOCAB)
    pick = tune_cache(network, corpus, lengths=(3, 30), weights=(0.0, 0.05, 0.3))
    reports = [reported_ppl(with_cache(network, "lstm", setting["length"], setting["weight"], False), tmp_path)
               for setting, _ in pick.tried]
    assert [ppl for _, ppl in pick.tried] == pytest.approx(reports, rel=1e-9)
    assert pick.ppl == min(reports)  # the same arithmetic as the report


def test_a_grid_without_off_or_out_of_range_is_refused(network):
    corpus = Corpus.from_lines(TEXT, VOCAB)
    with pytest.raises(ParameterError, match="weights"):
        tune_cache(network, corpus, weights=(0.1, 1.5))
    with pytest.raises(ParameterError, match="windows"):
        tune_neural_cache(network, corpus, windows=())


def test_the_dynamic_evaluation_pick_is_the_best_report_of_its_grid(network, tmp_path):
    from nplmtk.neural.dynamic import DynamicEvaluation, DynamicModel
    from nplmtk.tuning_dynamic import OFF, tune_dynamic
    corpus = Corpus.from_lines(TEXT, VOCAB)
    grid = dict(lengths=(5,), rates=(0.05, 0.5, 1e5), decays=(0.0, 0.1))
    pick = tune_dynamic(network, corpus, margin=float("inf"), **grid)  # every setting to the end
    assert len(pick.tried) >= 7 and pick.tried[0][0] == OFF  # the grid, then past an edge the pick is on
    for setting, ppl in pick.tried:
        if setting == OFF:
            assert ppl == pytest.approx(reported_ppl(network, tmp_path), rel=1e-9)
        elif setting["lr"] == 1e5:
            assert ppl == float("inf")  # diverges: refused by the adaptation, the worst there is
        else:
            model = DynamicModel(network, DynamicEvaluation(setting["length"], setting["lr"], setting["decay"]))
            assert ppl == pytest.approx(reported_ppl(model, tmp_path), rel=1e-9)
    assert pick.ppl == min(ppl for _, ppl in pick.tried) and pick.setting != OFF
    # stages: a clearly worse setting stops early, the pick is the same
    staged = tune_dynamic(network, corpus, **grid)
    assert staged.setting == pick.setting and len(staged.tried) < len(pick.tried)
    # two workers side by side find the same figures as one
    assert tune_dynamic(network, corpus, workers=2, **grid).tried == staged.tried


def test_the_mixture_weights_are_ems_and_beat_every_weight_of_a_grid(network, tmp_path):
    from nplmtk.mixture import Mixture
    from nplmtk.tuning import tune_mixture
    other = ARCHITECTURES["rnn"].initial(VOCAB, seed=5, features=3, hidden=4)
    rng = np.random.default_rng(2)
    for array in other.params.values():  # as wrong as the LSTM, elsewhere: the best mixture is inside
        array[...] = rng.normal(0, 0.5, array.shape)
    corpus = Corpus.from_lines(TEXT, VOCAB)
    pick = tune_mixture([network, other], ["lstm", "rnn"], corpus)
    assert pick.tried[0][0] == {"lstm": 0.5, "rnn": 0.5} and sum(pick.setting.values()) == pytest.approx(1)
    assert 0.05 < pick.setting["lstm"] < 0.95
    assert pick.ppl == pytest.approx(reported_ppl(Mixture([network, other], list(pick.setting.values()),
                                                          ["lstm", "rnn"]), tmp_path), rel=1e-9)
    for weight in np.linspace(0, 1, 21):
        assert pick.ppl <= reported_ppl(Mixture([network, other], [weight, 1 - weight], ["lstm", "rnn"]),
                                        tmp_path) * (1 + 1e-6)


# -- `nplm ppl` with settings given as auto (cli/ppl.py, nplmtk/ppl_model.py)

def _texts(toy_texts, tmp_path):
    """The toy valid text as the tuning text, and a test text apart from it."""
    from nplmtk.toy import ToyGrammar
    folder, _ = toy_texts
    test = tmp_path / "test.txt"
    test.write_text("\n".join(" ".join(s) for s in ToyGrammar().sentences(30, 7)) + "\n")
    return str(folder / "valid.txt"), str(test)


def _pick(err, option):
    """The values of the one pick line of `option`: {name: number}."""
    lines = [line for line in err.splitlines() if line.startswith(f"nplm ppl: -{option} auto on ")]
    assert len(lines) == 1, err
    words = lines[0].split(": ", 2)[2].split(" (ppl ")[0].split()
    return dict(zip(words[::2], map(float, words[1::2])))


def test_neural_cache_auto_prints_its_pick_and_scores_as_the_pick_given(capsys, toy_texts, toy_lstm, tmp_path):
    from conftest import run_main
    tune, test = _texts(toy_texts, tmp_path)
    status, out, err = run_main(capsys, "ppl", "-lm", str(toy_lstm), "-ppl", test, "-neural-cache", "auto",
                                "-tune-text", tune)
    assert status == 0, err
    pick = _pick(err, "neural-cache")
    status, given, _ = run_main(capsys, "ppl", "-lm", str(toy_lstm), "-ppl", test, "-neural-cache",
                                str(int(pick["window"])), "-neural-cache-theta", repr(pick["theta"]),
                                "-neural-cache-lambda", repr(pick["weight"]))
    assert status == 0 and out == given


def test_cache_and_lambda_auto_with_back_off_models(capsys, toy_texts, tmp_path):
    from conftest import run_main
    folder, _ = toy_texts
    tune, test = _texts(toy_texts, tmp_path)
    for order in (2, 3):
        assert run_main(capsys, "ngram-count", "-text", str(folder / "train.txt"), "-order", str(order), "-lm",
                        str(tmp_path / f"kn{order}.arpa"))[0] == 0
    status, out, err = run_main(capsys, "ppl", "-lm", str(tmp_path / "kn3.arpa"), "-ppl", test, "-cache", "auto",
                                "-tune-text", tune)
    assert status == 0, err
    pick = _pick(err, "cache")
    status, given, _ = run_main(capsys, "ppl", "-lm", str(tmp_path / "kn3.arpa"), "-ppl", test, "-cache",
                                str(int(pick["length"])), "-cache-lambda", repr(pick["weight"]))
    assert status == 0 and out == given
    written = tmp_path / "mixed.arpa"
    status, out, err = run_main(capsys, "ppl", "-lm", str(tmp_path / "kn3.arpa"), "-mix-lm", str(tmp_path / "kn2.arpa"),
                                "-lambda", "auto", "-tune-text", tune, "-ppl", test, "-write-lm", str(written))
    assert status == 0 and "ppl=" in out and written.exists(), err
    weights = _pick(err, "lambda")
    assert sum(weights.values()) == pytest.approx(1, abs=1e-5) and len(weights) == 2


def test_dynamic_eval_auto_prints_its_pick(capsys, toy_texts, toy_lstm, tmp_path):
    from conftest import run_main
    tune, test = _texts(toy_texts, tmp_path)
    status, out, err = run_main(capsys, "ppl", "-lm", str(toy_lstm), "-ppl", test, "-dynamic-eval", "auto",
                                "-tune-text", tune, "-quiet")
    assert status == 0 and "ppl=" in out, err
    pick = _pick(err, "dynamic-eval")
    assert set(pick) == {"length", "lr", "decay"}


@pytest.mark.parametrize("args, message", [
    (["-neural-cache", "auto"], "-neural-cache auto picks its setting on held-out text: give -tune-text FILE"),
    (["-tune-text", "TUNE"], "-tune-text picks the settings given as auto"),
    (["-cache", "auto", "-tune-text", "TEST"], "-tune-text is the text scored"),
    (["-lambda", "auto", "-tune-text", "TUNE", "-mix-lm", "LM", "-mix-lm2", "LM", "-mix-lambda2", "0.2"],
     "-lambda auto fits every model's weight: give no -mix-lambdaN"),
    (["-cache", "often"], "-cache often: must be an integer in [0, 2147483647] or auto"),
])
def test_auto_without_held_out_text_and_the_like_are_one_line(capsys, toy_texts, toy_lstm, tmp_path, args, message):
    from conftest import run_main
    tune, test = _texts(toy_texts, tmp_path)
    names = {"TUNE": tune, "TEST": test, "LM": str(toy_lstm)}
    status, out, err = run_main(capsys, "ppl", "-lm", str(toy_lstm), "-ppl", test, *[names.get(a, a) for a in args])
    assert status == 2 and out == "" and len(err.splitlines()) == 1 and message in err, err
