"""Recipes (issue 51, item 2): -recipe fast|best, and -max-time alone picking one for the
corpus and the budget."""
import os
import sys

import pytest

from conftest import assert_one_line_error, run_main
from nplmtk import container
from nplmtk.neural import recipes

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))


def test_the_rule_grows_the_network_with_the_epochs_the_budget_holds():
    brown, valid = 800_223, 199_910
    assert recipes.choose(brown, valid, 20_000, 194).options == recipes.RECIPES["fast"].options
    longer = recipes.choose(brown, valid, 20_000, 600)
    assert dict(longer.options)["weight-drop"] == 0.3 and dict(longer.options)["m"] == 256
    best = recipes.choose(brown, valid, 20_000, 7000)
    assert best.options == recipes.RECIPES["best"].options and best.budget == 7000
    # a machine twice as fast reaches best's network at half the budget; a smaller corpus too
    assert recipes.choose(brown, valid, 20_000, 3000, machine_scale=0.5).options != best.options
    assert recipes.choose(brown, valid, 20_000, 3000, machine_scale=2.0).options == best.options
    assert recipes.choose(brown // 4, valid // 4, 20_000, 1400).options == best.options


def test_the_thresholds_are_the_epochs_said():
    fast = recipes.RECIPES["fast"]
    for budget in (50, 100, 200, 400, 800, 1600, 3200, 6400):
        chosen = dict(recipes.choose(500_000, 0, 10_000, budget).options)
        best_epochs = recipes.expected_epochs(recipes.RECIPES["best"], 500_000, 0, budget, 1.0)
        fast_epochs = recipes.expected_epochs(fast, 500_000, 0, budget, 1.0)
        assert (chosen.get("layers") == 2) == (best_epochs >= recipes.BEST_EPOCHS)
        if best_epochs < recipes.BEST_EPOCHS:
            assert ("weight-drop" in chosen) == (fast_epochs >= recipes.LONGER_EPOCHS)


def test_a_small_vocabulary_takes_the_full_softmax():
    assert dict(recipes.choose(100_000, 0, 500, 200).options)["output"] == "full"
    assert dict(recipes.choose(100_000, 0, 5_000, 200).options)["output"] == "class"
    with pytest.raises(ValueError, match="budget"):
        recipes.choose(100_000, 0, 5_000, 0)


def test_named_recipes_are_what_the_make_targets_run():
    from runs import RUNS
    for name, run in (("fast", "lstm-fast"), ("best", "lstm-awd")):
        recipe = recipes.named(name)
        options = RUNS[run].options()
        given = {}
        for i, word in enumerate(options):
            if word.startswith("-") and not word[1:2].isdigit():
                value = options[i + 1] if i + 1 < len(options) and not options[i + 1].startswith("-") else True
                given[word[1:]] = value
        assert given.pop("max-time") == f"{recipe.budget:g}"
        assert given == {key: value if value is True else recipes._spelt(value) for key, value in recipe.options}


def test_recipe_trains_with_given_options_winning_and_is_kept(toy_texts, tmp_path, capsys):
    folder, _ = toy_texts
    model = tmp_path / "fast.nplm"
    status, _, err = run_main(capsys, "train-nplm", "-text", folder / "train.txt", "-valid", folder / "valid.txt",
                              "-recipe", "fast", "-m", 8, "-h", 8, "-epochs", 1, "-threads", 1, "-quiet", "-lm", model)
    assert status == 0, err
    assert "recipe fast: -arch lstm" in err and "-m 256" in err
    header = container.read_header(str(model))[0]
    assert header["kind"] == "nplm-lstm"
    assert header["meta"]["features"] == 8 and header["meta"]["tie"] and header["meta"]["reset_state"] == "never"
    assert header["meta"]["recipe"]["name"] == "fast" and header["meta"]["recipe"]["budget"] == 194


def test_max_time_alone_picks_a_recipe_and_says_why(toy_texts, tmp_path, capsys):
    folder, _ = toy_texts
    model = tmp_path / "auto.nplm"
    status, _, err = run_main(capsys, "train-nplm", "-text", folder / "train.txt", "-valid", folder / "valid.txt",
                              "-max-time", 1, "-quiet", "-lm", model)
    assert status == 0, err
    assert "recipe auto:" in err and "epochs expected" in err and "full softmax" in err
    meta = container.read_header(str(model))[0]["meta"]
    assert meta["recipe"]["name"] == "auto" and meta["recipe"]["budget"] == 1 and meta["arch"] == "lstm"
    assert meta["recipe"]["options"]["output"] == "full"  # the toy grammar's vocabulary is tiny


def test_max_time_with_a_network_option_is_no_recipe(toy_texts, tmp_path, capsys):
    folder, _ = toy_texts
    status, _, err = run_main(capsys, "train-nplm", "-text", folder / "train.txt", "-max-time", 1, "-order", 3,
                              "-m", 4, "-h", 4, "-epochs", 1, "-quiet", "-lm", tmp_path / "mlp.nplm")
    assert status == 0, err
    assert "recipe" not in err
    assert container.read_header(str(tmp_path / "mlp.nplm"))[0]["kind"] == "nplm-mlp"


def test_a_recipe_with_another_architecture_is_refused(toy_texts, tmp_path, capsys):
    folder, _ = toy_texts
    status, _, err = run_main(capsys, "train-nplm", "-text", folder / "train.txt", "-recipe", "best", "-arch", "rnn",
                              "-lm", tmp_path / "x.nplm")
    assert_one_line_error(status, err, "-recipe best trains -arch lstm, not -arch rnn")


def test_for_corpus_counts_what_train_nplm_reads(toy_texts):
    from nplmtk.text import Normalizer
    from nplmtk.vocab import Vocabulary, count_words
    folder, _ = toy_texts
    chosen = recipes.for_corpus(str(folder / "train.txt"), str(folder / "valid.txt"), None, 1, Normalizer(), 60)
    words = sum(count_words([str(folder / "train.txt")], Normalizer()).values())
    size = len(Vocabulary.from_counts(count_words([str(folder / "train.txt")], Normalizer()), 1))
    assert f"of {words:,} words in 60 s" in chosen.why and f"for {size:,} words" in chosen.why
