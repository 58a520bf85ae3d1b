"""The halves rule of nplmtk/tuning.py (issue 51): a setting is picked only if it gains on
each half of the tuning text over the model without it, so that a gain that one kind of
text makes alone (webtext's SRILM cache: 3% on valid, all in one half; worse on test) is
not kept."""
import numpy as np
import pytest

from nplmtk.corpus import Corpus
from nplmtk.models import load
from nplmtk.tuning import Ppl, _best, _grid_search, text_ppl, tune_cache, tune_mixture
from nplmtk.vocab import Vocabulary

WORDS = [f"w{i}" for i in range(400)]
VOCAB = Vocabulary(WORDS)
# the first half repeats one word (a cache of recent words gains there); the second never
# repeats a word but </s> (the cache holds none of them: it loses there)
REPEATING = [" ".join(["w1"] * 30)] * 12
FRESH = [" ".join(WORDS[10 + 30 * s: 40 + 30 * s]) for s in range(12)]


def unigram_arpa(path, probs):
    """An ARPA file of unigrams with these probabilities ({word: p})."""
    lines = ["", "\\data\\", f"ngram 1={len(probs)}", "", "\\1-grams:"]
    lines += [f"{np.log10(p):.6f}\t{word}" for word, p in probs.items()]
    path.write_text("\n".join(lines + ["", "\\end\\", ""]))
    return load(str(path))


def uniform(tmp_path):
    words = WORDS + ["</s>", "<s>", "<unk>"]
    return unigram_arpa(tmp_path / "uniform.arpa", {word: 1 / (len(WORDS) + 1) if word not in ("<s>", "<unk>")
                                                      else 1e-99 for word in words})


def test_text_ppl_has_the_ppl_of_each_half(tmp_path):
    model = uniform(tmp_path)
    corpus = Corpus.from_lines(REPEATING + FRESH, model.vocab)
    ppl = text_ppl(model.log10probs(corpus), corpus, model.vocab.unk)
    first = text_ppl(model.log10probs(corpus.first_sentences(12)), corpus.first_sentences(12), model.vocab.unk)
    assert ppl.halves[0] == pytest.approx(first, rel=1e-12) and ppl.halves[1] == pytest.approx(ppl, rel=1e-9)
    one = corpus.first_sentences(1)
    assert text_ppl(model.log10probs(one), one, model.vocab.unk).halves == ()  # one sentence: no halves


def test_a_setting_that_gains_on_one_half_only_is_not_picked():
    off = Ppl(100, (120, 80))
    one_half = Ppl(90, (100, 81))  # the lowest on the whole text, worse on the second half
    both = Ppl(95, (115, 79))
    pick = _best([({"weight": 0}, off), ({"weight": 0.3}, one_half), ({"weight": 0.1}, both)],
                 lambda setting: setting["weight"] == 0)
    assert pick.setting == {"weight": 0.1} and pick.ppl == 95 and len(pick.tried) == 3
    assert pick.notes == ["weight 0.3 had the lowest ppl (90.00) but not on each half of the tuning text "
                          "(100.00 against 120.00 and 81.00 against 80.00 without it): the best that gains on "
                          "both halves is kept"]
    pick = _best([({"weight": 0}, off), ({"weight": 0.3}, one_half)], lambda setting: setting["weight"] == 0)
    assert pick.setting == {"weight": 0}  # nothing gains on both: off
    tie = _best([({"weight": 0.1}, 100.0), ({"weight": 0}, 100.0)], lambda setting: setting["weight"] == 0)
    assert tie.setting == {"weight": 0}  # no gain at all: off
    # a grid search applies it to every weight
    figures = {0: off, 0.1: both, 0.2: one_half}
    pick = _grid_search({"weight": (0.0, 0.1, 0.2)}, lambda settings: [figures[s["weight"]] for s in settings],
                        None, {"weight": ("weight", None)})
    assert pick.setting == {"weight": 0.1} and "weight 0.2 had the lowest ppl" in pick.notes[0]


def test_the_unigram_cache_that_loses_on_half_of_the_text_is_off(tmp_path):
    model = uniform(tmp_path)
    corpus = Corpus.from_lines(REPEATING + FRESH, model.vocab)
    pick = tune_cache(model, corpus, lengths=(5, 50), weights=(0.0, 0.1, 0.3))
    assert min(figure for _, figure in pick.tried) < pick.ppl  # a cache gains on the whole text ...
    assert pick.setting["weight"] == 0 and "not on each half" in pick.notes[0]  # ... but not on the fresh half
    # where it gains on both halves, it is kept
    pick = tune_cache(model, Corpus.from_lines(REPEATING, model.vocab), lengths=(5, 50), weights=(0.0, 0.1, 0.3))
    assert pick.setting["weight"] > 0 and pick.ppl == min(f for _, f in pick.tried)


def test_a_mixture_that_loses_on_half_of_the_text_is_the_first_model_alone(tmp_path):
    model = uniform(tmp_path)
    # the second model puts most of its mass on w1: EM gives it weight for the repeating half
    peaked = {word: 0.5 / (len(WORDS) + 1) for word in WORDS + ["</s>"]}
    peaked["w1"] = 0.5 + peaked["w1"]
    peaked.update({"<s>": 1e-99, "<unk>": 1e-99})
    other = unigram_arpa(tmp_path / "peaked.arpa", peaked)
    corpus = Corpus.from_lines(REPEATING + FRESH, model.vocab)
    pick = tune_mixture([model, other], ["a", "b"], corpus)
    em, alone = pick.tried[-2:]
    assert 0 < em[0]["b"] < 1 and em[1] < alone[1]  # EM's weights gain on the whole text ...
    assert pick.setting == {"a": 1.0, "b": 0.0} and "not on each half" in pick.notes[0]  # ... not on the second half
    kept = tune_mixture([model, other], ["a", "b"], Corpus.from_lines(REPEATING, model.vocab))
    assert 0 < kept.setting["b"] < 1 and kept.notes == []
