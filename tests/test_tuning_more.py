"""The searches of nplmtk/tuning.py beyond a fixed grid (issue 51): a grid extended where
its pick lands on an edge (and said), the continuous cache over dynamic evaluation's
adapted states, and a time budget that cuts a search and says what it skipped."""
import itertools
import time

import numpy as np
import pytest

from nplmtk.cache import ContinuousCache, continuous_cache_probabilities
from nplmtk.corpus import Corpus
from nplmtk.models import ARCHITECTURES
from nplmtk.neural.dynamic import DynamicEvaluation, DynamicModel, dynamic_logprobs
from nplmtk.tuning import tune_cache, tune_neural_cache
from nplmtk.tuning_dynamic import OFF, tune_dynamic
from nplmtk.vocab import Vocabulary

VOCAB = Vocabulary([f"w{i}" for i in range(9)])
RNG = np.random.default_rng(11)
TEXT = [" ".join(f"w{w}" for w in RNG.choice([1, 2, 3, 3, 4, 5, 5, 5], RNG.integers(2, 9))) for _ in range(60)]


@pytest.fixture(scope="module")
def network():
    model = ARCHITECTURES["lstm"].initial(VOCAB, seed=3, features=4, hidden=5)
    rng = np.random.default_rng(0)
    for array in model.params.values():
        array[...] = rng.normal(0, 0.5, array.shape)
    return model


def test_a_pick_on_the_top_of_its_grid_extends_the_grid(network):
    corpus = Corpus.from_lines(TEXT, VOCAB)
    small = tune_cache(network, corpus, lengths=(3, 30), weights=(0.0, 0.01))
    assert small.setting["weight"] > 0.01  # the cache helps more than the grid allowed: it went on
    assert any("weight 0.01 was the largest of its grid" in note for note in small.notes), small.notes
    wide = tune_cache(network, corpus, lengths=(3, 30), weights=tuple(np.round(np.arange(0, 0.91, 0.05), 2)))
    assert small.ppl >= wide.ppl - 1e-9
    # the pick is the best of what was tried, every tried setting in the extended grid
    assert small.ppl == min(ppl for _, ppl in small.tried) and len(small.tried) > 4


def test_extensions_stop_inside_the_grid_or_where_the_domain_ends():
    from nplmtk.tuning import _grid_search
    kinds = {"weight": ("weight", None), "window": ("count", 40)}
    # the best weight 0.32 lies past the grid (0, 0.1): extended to 0.2, 0.3, 0.4 and inside
    pick = _grid_search({"window": (10,), "weight": (0.0, 0.1)},
                        lambda settings: [abs(s["weight"] - 0.32) for s in settings], None, kinds)
    assert pick.setting == {"window": 10, "weight": 0.3}
    assert [note.split(":")[0] for note in pick.notes] == [f"weight {w} was the largest of its grid"
                                                          for w in ("0.1", "0.2", "0.3")]
    # the wider the better, to 40 (the text's length): 10, 20 -> 40, and said to stay on the edge
    pick = _grid_search({"window": (10, 20), "weight": (0.0, 0.1)},
                        lambda settings: [100 - s["window"] - s["weight"] for s in settings], None,
                        {"window": ("count", 40), "weight": ("weight", None)})
    assert pick.setting["window"] == 40
    assert "window 40 is the largest of its grid (the domain ends there)" in " ".join(pick.notes), pick.notes
    # off (weight 0) is no edge: nothing extended, nothing said
    pick = _grid_search({"window": (10, 20), "weight": (0.0, 0.1)},
                        lambda settings: [1 + s["weight"] for s in settings], None, kinds)
    assert pick.setting["weight"] == 0 and pick.notes == []
    # a budget spent stops the extensions and says so
    pick = _grid_search({"window": (10,), "weight": (0.0, 0.1)},
                        lambda settings: [abs(s["weight"] - 0.32) for s in settings], time.monotonic() - 1, kinds)
    assert pick.setting["weight"] == 0.1 and "(the budget stopped the extension)" in pick.notes[0]


def test_theta_on_the_edge_goes_past_it_and_the_pick_is_the_best_tried(network):
    corpus = Corpus.from_lines(TEXT, VOCAB)
    pick = tune_neural_cache(network, corpus, windows=(40,), thetas=(0.5, 1.0), weights=(0.0, 0.2, 0.4))
    assert pick.setting["weight"] > 0, pick  # a two-value grid: the pick is on an edge, the grid went on
    thetas = sorted({setting["theta"] for setting, _ in pick.tried})
    assert len(thetas) > 2 and any(note.startswith("theta ") and " was the " in note for note in pick.notes)
    # inside the extended grid, or said to be on its edge
    inside = thetas[0] < pick.setting["theta"] < thetas[-1]
    assert inside or any(note.startswith(f"theta {pick.setting['theta']:g} is the ") for note in pick.notes)
    assert pick.ppl == min(ppl for _, ppl in pick.tried)


def test_the_neural_cache_over_dynamic_evaluation_reads_the_adapted_states(network):
    corpus = Corpus.from_lines(TEXT, VOCAB)
    plain_logp, plain_states = network.logprobs_and_states(corpus)
    still, keys = dynamic_logprobs(network, corpus, DynamicEvaluation(7, 1e-12), keys=True)
    np.testing.assert_allclose(still, plain_logp, rtol=1e-5)
    np.testing.assert_allclose(keys, plain_states, atol=1e-5)
    settings = DynamicEvaluation(7, 0.5)
    adapted, keys = dynamic_logprobs(network, corpus, settings, keys=True)
    np.testing.assert_array_equal(adapted, dynamic_logprobs(network, corpus, settings))
    assert not np.allclose(keys[7:], plain_states[7:], atol=1e-3)  # the states of the adapted network
    np.testing.assert_allclose(keys[:7], plain_states[:7], atol=1e-5)  # the first segment: before any step
    both = ContinuousCache(DynamicModel(network, settings), 20, 0.5, 0.3).logprobs(corpus)
    cache = continuous_cache_probabilities(keys, np.asarray(corpus.targets()), 20, 0.5)
    np.testing.assert_allclose(both, np.log(0.7 * np.exp(adapted) + 0.3 * cache), rtol=1e-9)
    pick = tune_neural_cache(DynamicModel(network, settings), corpus, windows=(20,), thetas=(0.5,),
                             weights=(0.0, 0.3))
    from nplmtk.tuning import text_ppl
    figure, = [ppl for setting, ppl in pick.tried if setting == {"window": 20, "theta": 0.5, "weight": 0.3}]
    assert figure == pytest.approx(text_ppl(both / np.log(10), corpus, VOCAB.unk), rel=1e-9)  # `both`'s


def test_a_budget_cuts_the_dynamic_search_and_says_what_it_skipped(network):
    corpus = Corpus.from_lines(TEXT, VOCAB)
    grid = dict(lengths=(5,), rates=(0.05, 0.5), decays=(0.0,))
    pick = tune_dynamic(network, corpus, deadline=time.monotonic() - 1, **grid)
    assert pick.setting == OFF and len(pick.tried) == 1
    assert any("the budget cut the search" in note and "not scored" in note for note in pick.notes), pick.notes
    whole = tune_dynamic(network, corpus, **grid)
    assert not any("budget" in note for note in whole.notes)


def test_a_budget_cuts_the_neural_cache_grid_to_the_first_sentences(network):
    corpus = Corpus.from_lines(TEXT, VOCAB)
    grid = dict(windows=(5, 40), thetas=(0.1, 1.0), weights=(0.0, 0.1, 0.4))
    assert corpus.num_words + corpus.num_sentences > 256  # more than one block of tokens
    cut = tune_neural_cache(network, corpus, deadline=time.monotonic() - 1, **grid)
    assert cut.notes[0].startswith("the budget cut the grid's scoring: picked on the first "), cut.notes
    sentences = int(cut.notes[0].split("first ")[1].split()[0])
    assert 0 < sentences < corpus.num_sentences
    # the same figures as the grid on those sentences alone (the network and the cache look back only)
    alone = tune_neural_cache(network, corpus.first_sentences(sentences), deadline=time.monotonic() - 1, **grid)
    assert [ppl for _, ppl in cut.tried] == pytest.approx([ppl for _, ppl in alone.tried], rel=1e-6)


@pytest.mark.parametrize("workers", [1, 2])
def test_the_dynamic_pick_past_a_rate_edge(network, workers):
    corpus = Corpus.from_lines(TEXT, VOCAB)
    pick = tune_dynamic(network, corpus, lengths=(5,), rates=(1e-4, 2e-4), decays=(0.0,), margin=float("inf"),
                        workers=workers)
    if pick.setting != OFF:
        assert pick.setting["lr"] > 2e-4 and any("lr 0.0002 was the largest" in n for n in pick.notes), pick.notes
        model = DynamicModel(network, DynamicEvaluation(5, pick.setting["lr"], 0.0))
        from nplmtk.tuning import text_ppl
        assert pick.ppl == pytest.approx(text_ppl(model.logprobs(corpus) / np.log(10), corpus, VOCAB.unk), rel=1e-9)


# -- `nplm ppl` (cli/ppl.py, nplmtk/ppl_model.py)

def _pick(err, option):
    lines = [line for line in err.splitlines() if line.startswith(f"nplm ppl: -{option} auto on ")]
    assert len(lines) == 1, err
    words = lines[0].split(": ", 2)[2].split(" (ppl ")[0].split()
    return dict(zip(words[::2], map(float, words[1::2])))


def test_dynamic_eval_and_neural_cache_auto_together(capsys, toy_texts, toy_lstm, tmp_path):
    from conftest import run_main
    folder, _ = toy_texts
    tune, test = str(folder / "valid.txt"), tmp_path / "test.txt"
    test.write_text("\n".join((folder / "train.txt").read_text().splitlines()[:30]) + "\n")
    status, out, err = run_main(capsys, "ppl", "-lm", toy_lstm, "-ppl", test, "-dynamic-eval", "auto",
                                "-neural-cache", "auto", "-tune-text", tune, "-quiet")
    assert status == 0, err
    dynamic, cache = _pick(err, "dynamic-eval"), _pick(err, "neural-cache")
    given = ["-neural-cache", str(int(cache["window"])), "-neural-cache-theta", repr(cache["theta"]),
             "-neural-cache-lambda", repr(cache["weight"])]
    if dynamic["length"]:  # not off: the cache was picked over the adapted network
        assert "over the states of the network adapted by dynamic evaluation" in err
        given += ["-dynamic-eval", str(int(dynamic["length"])), "-dynamic-lr", repr(dynamic["lr"]),
                  "-dynamic-decay", repr(dynamic["decay"])]
    status, by_hand, err = run_main(capsys, "ppl", "-lm", toy_lstm, "-ppl", test, *given)
    assert status == 0 and by_hand == out, err


def test_tune_max_time_says_what_the_budget_cut(capsys, toy_texts, toy_lstm, tmp_path):
    from conftest import run_main
    folder, _ = toy_texts
    test = tmp_path / "test.txt"
    test.write_text("\n".join((folder / "train.txt").read_text().splitlines()[:20]) + "\n")
    status, out, err = run_main(capsys, "ppl", "-lm", toy_lstm, "-ppl", test, "-dynamic-eval", "auto",
                                "-tune-text", folder / "valid.txt", "-tune-max-time", "0.001", "-quiet")
    assert status == 0 and "ppl=" in out, err
    assert "nplm ppl: -dynamic-eval auto: the budget cut the search" in err
    status, _, err = run_main(capsys, "ppl", "-lm", toy_lstm, "-ppl", test, "-tune-max-time", "5")
    assert status == 2 and "-tune-max-time applies to -tune-text, which is not given" in err


def test_a_cut_dynamic_search_has_scored_every_length_and_rate_without_decay_first(network, monkeypatch):
    import nplmtk.tuning_dynamic as tuning_dynamic
    checks = itertools.count()
    monkeypatch.setattr(tuning_dynamic, "_past", lambda deadline: deadline is not None and next(checks) >= 7)
    pick = tune_dynamic(network, Corpus.from_lines(TEXT, VOCAB), lengths=(5, 10), rates=(0.05, 0.5),
                        decays=(0.1, 0.0), deadline=0.0)  # the budget runs out after 7 settings
    scored = [setting for setting, _ in pick.tried]
    assert len(scored) == 7 and scored[0] == OFF
    assert {(s["length"], s["lr"]) for s in scored[1:5]} == {(5, 0.05), (5, 0.5), (10, 0.05), (10, 0.5)}
    assert [s["decay"] for s in scored[1:]] == [0.0] * 4 + [0.1] * 2
    assert any("the budget cut the search" in note for note in pick.notes)
