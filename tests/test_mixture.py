"""`nplm mix` and `nplm ppl -mix-lm`: SRILM's exact interpolation (-bayes 0) and
compute-best-mix's EM, on the SRILM reference data (tests/data/srilm/README.md)."""
import math
import re
import shutil

import numpy as np
import pytest

from conftest import assert_one_line_error, run_nplm
from nplmtk import container
from nplmtk.corpus import Corpus
from nplmtk.errors import InputError, NplmError
from nplmtk.models import load
from nplmtk.mixture import Mixture, fit_weights
from test_srilm_reference import DATA

KN, WB, KB = "kn3-unk.arpa.gz", "wb3-unk.arpa.gz", "kn3-backoff.arpa.gz"


def reference(name):
    with open(f"{DATA}/{name}", encoding="utf-8") as f:
        return f.read()


def ppl_of(report):
    return float(re.search(r"ppl= (\S+)", report.splitlines()[-1]).group(1))


@pytest.mark.parametrize("args, name", [
    (["-lm", KN, "-mix-lm", WB, "-lambda", 0.3, "-bayes", 0, "-debug", 2], "ppl-mix-kn3-wb3-debug2.txt"),
    (["-lm", KN, "-mix-lm", WB, "-lambda", 0.3, "-bayes", 0, "-debug", 0], "ppl-mix-kn3-wb3-debug0.txt"),
    (["-lm", KN, "-mix-lm", WB, "-lambda", 0.5, "-mix-lm2", KB, "-mix-lambda2", 0.2, "-bayes", 0], "ppl-mix3-debug0.txt"),
])
def test_mixed_ppl_equals_srilms_byte_for_byte(args, name):
    status, out, err = run_nplm("ppl", *args, "-ppl", "test.txt", cwd=DATA)
    assert status == 0, err
    assert out == reference(name)


def test_em_follows_compute_best_mix_iteration_by_iteration():
    status, out, err = run_nplm("mix", "-lm", KN, "-lm", WB, "-text", "test.txt", "-debug", 1, cwd=DATA)
    assert status == 0, err
    pattern = r"iteration (\d+), lambda = \((\S+) (\S+)\), ppl = (\S+)"
    ours = {int(m[0]): tuple(map(float, m[1:])) for m in re.findall(pattern, out)}
    theirs = {int(m[0]): tuple(map(float, m[1:])) for m in re.findall(pattern, reference("compute-best-mix-kn3-wb3.txt"))}
    assert len(theirs) > 40 and set(theirs) <= set(ours)
    for iteration, values in theirs.items():
        np.testing.assert_allclose(ours[iteration], values, rtol=2e-5, err_msg=f"iteration {iteration}")


def test_em_on_contexts_holding_a_parenthesis_follows_compute_best_mix_reading_them_right():
    """SRILM's compute-best-mix reads a `p( w | ) ...)` line (the word after a `)`) as log
    probability 0 for every model; on the same -debug 2 files with that context renamed
    it follows the EM we run from the models (tests/data/srilm/README.md)."""
    status, out, err = run_nplm("mix", "-lm", KN, "-lm", WB, "-text", "test-parens.txt", "-debug", 1, cwd=DATA)
    assert status == 0, err
    pattern = r"iteration (\d+), lambda = \((\S+) (\S+)\), ppl = (\S+)"
    ours = {int(m[0]): tuple(map(float, m[1:])) for m in re.findall(pattern, out)}
    fixed = reference("compute-best-mix-parens-fixed.txt")
    theirs = {int(m[0]): tuple(map(float, m[1:])) for m in re.findall(pattern, fixed)}
    assert len(theirs) > 40 and set(theirs) <= set(ours)
    for iteration, values in theirs.items():
        np.testing.assert_allclose(ours[iteration], values, rtol=2e-5, err_msg=f"iteration {iteration}")
    best = [float(v) for v in re.search(r"best lambda \((\S+) (\S+)\)", fixed).groups()]
    assert f"tokens: {best[0]:.6f} {best[1]:.6f}" in out
    as_read = [float(v) for v in re.search(r"best lambda \((\S+) (\S+)\)",
                                            reference("compute-best-mix-parens-as-read.txt")).groups()]
    assert abs(as_read[0] - best[0]) > 1e-3  # the misread tokens move SRILM's own weights


def test_em_stops_where_compute_best_mix_stops():
    """Issue 17: every weight moving by at most 0.001 (its -precision), so the weights
    printed are SRILM's; -precision 0 iterates on to our likelihood tolerance."""
    reference_text = reference("compute-best-mix-kn3-wb3.txt")
    best = [float(v) for v in re.search(r"best lambda \((\S+) (\S+)\)", reference_text).groups()]
    last = max(int(n) for n in re.findall(r"iteration (\d+),", reference_text))
    status, out, err = run_nplm("mix", "-lm", KN, "-lm", WB, "-text", "test.txt", cwd=DATA)
    assert status == 0, err
    assert f"EM: {last} iterations" in out
    assert f"tokens: {best[0]:.6f} {best[1]:.6f}" in out
    status, longer, err = run_nplm("mix", "-lm", KN, "-lm", WB, "-text", "test.txt", "-precision", 0, cwd=DATA)
    assert status == 0, err
    ppl = [float(re.search(r"mixture: ppl= (\S+)", text).group(1)) for text in (out, longer)]
    assert ppl[1] < ppl[0]


@pytest.fixture(scope="module")
def three_models():
    models = [load(f"{DATA}/{name}") for name in (KN, WB, KB)]
    corpus = Corpus.read(f"{DATA}/test.txt", models[0].vocab)
    return models, corpus


@pytest.mark.parametrize("num_bins", [1, 3])
def test_em_never_lowers_held_out_likelihood_and_weights_sum_to_one(three_models, num_bins):
    models, corpus = three_models
    mixture = Mixture(models, [1 / 3] * 3, [KN, WB, KB])
    if num_bins > 1:
        mixture.use_bins(Corpus.read(f"{DATA}/train.txt", mixture.vocab), corpus, num_bins)
        assert mixture.num_bins == num_bins
    logp = mixture.component_logprobs(corpus)
    weights, history = fit_weights(logp, mixture.token_bins(corpus), mixture.num_bins, iterations=60,
                                   tolerance=0)
    assert len(history) == 61
    assert all(b >= a - 1e-9 * abs(a) for a, b in zip(history, history[1:]))
    assert history[-1] > history[0] + 1
    np.testing.assert_allclose(weights.sum(axis=1), 1.0, atol=1e-12)
    assert weights.shape == (num_bins, 3) and np.all(weights >= 0)


def test_a_model_mixed_with_itself_is_unchanged():
    alone = run_nplm("ppl", "-lm", KN, "-ppl", "test.txt", "-debug", 1, cwd=DATA)
    mixed = run_nplm("ppl", "-lm", KN, "-mix-lm", KN, "-lambda", 0.3, "-bayes", 0, "-ppl", "test.txt", "-debug", 1,
                     cwd=DATA)  # (merged statically, SRILM's and ours differ from it in the last digit, alike)
    assert alone[0] == mixed[0] == 0
    assert mixed[1] == alone[1]


def test_a_mix_file_scores_as_the_mix_lm_spelling_and_mixes_again(tmp_path):
    status, out, err = run_nplm("mix", "-lm", KN, "-lm", WB, "-lambda", 0.3, 0.7, "-text", "test.txt",
                                "-write", tmp_path / "kw.mix", cwd=DATA)
    assert status == 0, err
    assert "weights all contexts, 771 tokens: 0.300000 0.700000" in out
    spelled = run_nplm("ppl", "-lm", KN, "-mix-lm", WB, "-lambda", 0.3, "-bayes", 0, "-ppl", "test.txt", "-debug", 2,
                       cwd=DATA)
    assert_one_line_error(*run_nplm("ppl", "-lm", tmp_path / "kw.mix", "-ppl", "test.txt", cwd=DATA)[::2],
                          "lies outside the mixture's folder: give -allow-paths")  # issue 20: only with consent
    from_file = run_nplm("ppl", "-lm", tmp_path / "kw.mix", "-ppl", "test.txt", "-debug", 2, "-allow-paths", cwd=DATA)
    assert spelled[1] == from_file[1] == reference("ppl-mix-kn3-wb3-debug2.txt")
    assert f"mixture: ppl= {ppl_of(spelled[1]):.7g}" in out
    # (0.3 KN + 0.7 WB) x 0.8 + KB x 0.2 = 0.24 KN + 0.56 WB + 0.2 KB
    status, _, err = run_nplm("mix", "-lm", tmp_path / "kw.mix", "-lm", KB, "-lambda", 0.8, "-text",
                              "test.txt", "-write", tmp_path / "nested.mix", "-allow-paths", cwd=DATA)
    assert status == 0, err
    nested = run_nplm("ppl", "-lm", tmp_path / "nested.mix", "-ppl", "test.txt", "-allow-paths", cwd=DATA)[1]
    flat = run_nplm("ppl", "-lm", KN, "-lambda", 0.24, "-mix-lm", WB, "-mix-lm2", KB, "-mix-lambda2", 0.2,
                    "-bayes", 0, "-ppl", "test.txt", cwd=DATA)[1]
    assert np.isclose(ppl_of(nested), ppl_of(flat), rtol=1e-6)


def test_em_and_per_bin_weights_are_saved_and_beat_each_component(tmp_path):
    status, out, err = run_nplm("mix", "-lm", KN, "-lm", WB, "-lm", KB, "-text", "test.txt", "-bins", 3,
                                "-bin-text", "train.txt", "-write", tmp_path / "b.mix", cwd=DATA)
    assert status == 0, err
    rows = re.findall(r"weights bin \d \(q [\d.]+\), (\d+) tokens: (\S+) (\S+) (\S+)", out)
    assert len(rows) == 3 and sum(int(r[0]) for r in rows) == 771
    assert all(abs(sum(map(float, r[1:])) - 1) < 1e-5 for r in rows)
    components = [float(v) for v in re.findall(r"model \S+: ppl= (\S+)", out)]
    mixed = float(re.search(r"mixture: ppl= (\S+)", out).group(1))
    assert mixed < min(components)
    report = run_nplm("ppl", "-lm", tmp_path / "b.mix", "-ppl", "test.txt", "-allow-paths", cwd=DATA)[1]
    assert np.isclose(ppl_of(report), mixed, rtol=1e-6)


def test_mixture_files_name_their_components_relative_to_themselves(tmp_path):
    import shutil
    for name in (KN, WB):
        shutil.copy(f"{DATA}/{name}", tmp_path / name)
    assert run_nplm("mix", "-lm", KN, "-lm", WB, "-text", f"{DATA}/test.txt", "-write", "m.mix", cwd=tmp_path)[0] == 0
    moved = tmp_path / "moved"
    shutil.copytree(tmp_path, moved, ignore=shutil.ignore_patterns("moved"))
    (tmp_path / WB).unlink()
    status, out, err = run_nplm("ppl", "-lm", moved / "m.mix", "-ppl", f"{DATA}/test.txt")
    assert status == 0, err
    status, _, err = run_nplm("ppl", "-lm", tmp_path / "m.mix", "-ppl", f"{DATA}/test.txt")
    assert_one_line_error(status, err, WB)


@pytest.mark.parametrize("args, fragment", [
    (["-lm", KN, "-text", "test.txt"], "two or more models"),
    (["-lm", KN, "-lm", WB, "-text", "test.txt", "-lambda", "0.2 0.2 0.6"], "3 weights for 2 models"),
    (["-lm", KN, "-lm", WB, "-text", "test.txt", "-lambda", "1.5"], "-lambda 1.5: must be numbers each in [0, 1]"),
    (["-lm", KN, "-lm", WB, "-text", "test.txt", "-lambda", "0.7", "0.6"], "-lambda: the weights add up to 1.3, not 1"),
    (["-lm", KN, "-lm", WB, "-text", "test.txt", "-lambda", "x"], "-lambda x: must be numbers each in [0, 1]"),
    (["-lm", KN, "-lm", WB, "-text", "test.txt", "-bins", 4], "-bins needs -bin-text"),
    (["-lm", KN, "-lm", "missing.arpa", "-text", "test.txt"], "missing.arpa"),
])
def test_bad_mix_arguments(args, fragment):
    assert_one_line_error(*run_nplm("mix", *args, cwd=DATA)[::2], fragment)


def test_different_vocabularies_and_self_containing_mixtures_are_refused(tmp_path):
    (tmp_path / "other.txt").write_text("a b c\nc b a\n")
    assert run_nplm("ngram-count", "-text", tmp_path / "other.txt", "-order", 2, "-lm", tmp_path / "o.arpa")[0] == 0
    status, _, err = run_nplm("ppl", "-lm", KN, "-mix-lm", tmp_path / "o.arpa", "-bayes", 0, "-ppl", "test.txt",
                              cwd=DATA)
    assert_one_line_error(status, err, "o.arpa: vocabulary differs from that of kn3-unk.arpa.gz")
    # merged statically (without -bayes), the union of the words, as SRILM does (tests/test_merge.py)
    assert run_nplm("ppl", "-lm", KN, "-mix-lm", tmp_path / "o.arpa", "-ppl", "test.txt", cwd=DATA)[0] == 0
    mix = tmp_path / "m.mix"
    assert run_nplm("mix", "-lm", KN, "-lm", WB, "-text", "test.txt", "-write", mix, cwd=DATA)[0] == 0
    assert run_nplm("mix", "-lm", mix, "-lm", KB, "-text", "test.txt", "-write", mix, "-allow-paths", cwd=DATA)[0] == 0
    status, _, err = run_nplm("ppl", "-lm", mix, "-ppl", "test.txt", "-allow-paths", cwd=DATA)
    assert_one_line_error(status, err, "the mixture contains itself")


def test_debug_2_tags_are_each_components_own_when_their_words_are_in_another_order(tmp_path):
    """Issue 17: a component whose ARPA lists its words in another order than the first
    component's got its n-gram tags looked up with the first one's ids."""
    (tmp_path / "t.txt").write_text("a b c\nb c d\nc d a\na b d\n")
    (tmp_path / "reversed.txt").write_text("d\nc\nb\na\n")
    assert run_nplm("ngram-count", "-text", tmp_path / "t.txt", "-order", 2, "-lm", tmp_path / "a.arpa")[0] == 0
    assert run_nplm("ngram-count", "-text", tmp_path / "t.txt", "-order", 2, "-vocab", tmp_path / "reversed.txt",
                    "-lm", tmp_path / "b.arpa")[0] == 0

    def tags(*args):
        out = run_nplm("ppl", *args, "-text", tmp_path / "t.txt", "-debug", 2)[1]
        return re.findall(r"= ((?:\[\w+\])+) ", out)
    alone_a, alone_b = tags("-lm", tmp_path / "a.arpa"), tags("-lm", tmp_path / "b.arpa")
    mixed = tags("-lm", tmp_path / "a.arpa", "-mix-lm", tmp_path / "b.arpa", "-bayes", 0)
    assert len(mixed) == 16 and mixed == [a + b for a, b in zip(alone_a, alone_b)]


# -- no traceback and a clear line (issue 33, item 6) ---------------------------------------

def saved_mixture(tmp_path, components, weights):
    """A mixture file in `tmp_path` beside copies of KN and WB, naming `components` with `weights`."""
    for name in (KN, WB):
        shutil.copy(f"{DATA}/{name}", tmp_path / name)
    path = tmp_path / "m.mix"
    container.save(str(path), "mixture", {"weights": np.array([weights], dtype=np.float64)},
                   meta={"components": components}, vocab=load(str(tmp_path / KN)).vocab)
    return path


def test_a_nul_byte_in_a_component_path_is_one_line(tmp_path):
    path = saved_mixture(tmp_path, [KN, "wb\x00.arpa.gz"], [0.5, 0.5])
    with pytest.raises(InputError) as caught:
        load(str(path))
    assert caught.value.render() == f"{path}: component 'wb\\x00.arpa.gz': a file name cannot hold a NUL byte"
    assert_one_line_error(*run_nplm("ppl", "-lm", KN, "-mix-lm", path, "-ppl", "test.txt", cwd=DATA)[::2],
                          "component 'wb\\x00.arpa.gz': a file name cannot hold a NUL byte")
    assert_one_line_error(*run_nplm("mix", "-lm", KN, "-lm", path, "-text", "test.txt", cwd=DATA)[::2],
                          "a file name cannot hold a NUL byte")
    with pytest.raises(NplmError, match=r"^kn\\x00.arpa: a file name cannot hold a NUL byte$"):
        load("kn\x00.arpa")  # the Python API: no ValueError from open()


@pytest.mark.parametrize("weight", [math.nan, math.inf])
def test_a_weight_that_is_not_a_number_is_named_as_such(tmp_path, weight):
    path = saved_mixture(tmp_path, [KN, WB], [weight, 0.5])
    with pytest.raises(NplmError) as caught:
        load(str(path))
    assert caught.value.render() == (f"{path}: the mixture weight of {tmp_path / KN} is {weight}: a weight must be "
                                     "a number from 0 to 1")
    models = [load(str(tmp_path / KN))] * 2
    with pytest.raises(NplmError, match="^the mixture weight of b is nan: a weight must be a number from 0 to 1$"):
        Mixture(models, [0.5, math.nan], ["a", "b"])  # the library's own check: nan passed `w < 0` and the sum
