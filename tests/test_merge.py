"""Static interpolation of back-off models (issue 37, item 1) against SRILM 1.7.3's own
outputs (tests/data/srilm/README.md, "Static interpolation"): `ngram -lm A -mix-lm B
[-mix-lm2 C] -lambda L [-mix-lambda2 L2] [-prune T] -write-lm` and its -ppl reports."""
import gzip

import numpy as np
import pytest

from conftest import assert_one_line_error, run_nplm
from nplmtk.errors import NplmError, ParameterError
from nplmtk.models import load
from nplmtk.ngram.merge import merge_backoff
from test_srilm_reference import DATA, arpa_entries

KN, WB, KB = "kn3-unk.arpa.gz", "wb3-unk.arpa.gz", "kn3-backoff.arpa.gz"

MERGES = {  # reference name: the models and weights of `ngram ... -write-lm NAME.arpa.gz -ppl test.txt`
    "merge-kn3-wb3": [KN, "-mix-lm", WB, "-lambda", 0.3],  # two smoothings
    "merge-wb2-kn3": ["wb2-unk.arpa.gz", "-mix-lm", KN, "-lambda", 0.6],  # the first model of lower order
    # a bigram of another text: other words too (the union's vocabulary)
    "merge-kn3-kn2test20": [KN, "-mix-lm", "kn2-test20.arpa.gz", "-lambda", 0.7],
    "merge3": [KN, "-mix-lm", WB, "-lambda", 0.5, "-mix-lm2", KB, "-mix-lambda2", 0.2],  # three, pairwise
    "merge-kn3-wb3-prune1e-5": [KN, "-mix-lm", WB, "-lambda", 0.3, "-prune", "1e-5"],  # -prune the merged model
    "merge-kn3-wb3-order2": [KN, "-mix-lm", WB, "-lambda", 0.3, "-order", 2],  # each model read as a bigram
    # each model limited; a word of the list that no model has gets a unigram (SRILM's distributeProb)
    "merge-kn3-wb3-limited": [KN, "-mix-lm", WB, "-lambda", 0.3, "-vocab", "limit-vocab.txt", "-limit-vocab"],
}


def reference(name):
    with open(f"{DATA}/{name}", encoding="utf-8") as f:
        return f.read()


@pytest.mark.parametrize("name", sorted(MERGES))
def test_merged_model_and_its_report_equal_srilms(name, tmp_path):
    out = tmp_path / "merged.arpa"
    status, report, err = run_nplm("ppl", "-lm", *MERGES[name], "-write-lm", out, "-ppl", "test.txt", cwd=DATA)
    assert status == 0, err
    ours, theirs = arpa_entries(str(out)), arpa_entries(f"{DATA}/{name}.arpa.gz")
    assert set(ours) == set(theirs)
    assert [(gram, ours[gram], theirs[gram]) for gram in ours if ours[gram] != theirs[gram]] == []
    assert out.read_bytes() == gzip.open(f"{DATA}/{name}.arpa.gz").read()
    assert report == reference(f"ppl-{name}-debug0.txt")


def test_debug_2_report_of_the_merged_model_equals_srilms():
    status, report, err = run_nplm("ppl", "-lm", *MERGES["merge-kn3-wb3"], "-ppl", "test.txt", "-debug", 2,
                                   cwd=DATA)
    assert status == 0, err
    assert report == reference("ppl-merge-kn3-wb3-debug2.txt")


def test_bayes_0_keeps_the_exact_mixture():
    """SRILM's rule: without -bayes the back-off models are merged, with -bayes 0 mixed
    word by word (a different ppl)."""
    merged = run_nplm("ppl", "-lm", KN, "-mix-lm", WB, "-lambda", 0.3, "-ppl", "test.txt", cwd=DATA)
    exact = run_nplm("ppl", "-lm", KN, "-mix-lm", WB, "-lambda", 0.3, "-bayes", 0, "-ppl", "test.txt", cwd=DATA)
    assert merged[1] == reference("ppl-merge-kn3-wb3-debug0.txt")
    assert exact[1] == reference("ppl-mix-kn3-wb3-debug0.txt") != merged[1]


def test_mix_writes_the_merged_model(tmp_path):
    status, out, err = run_nplm("mix", "-lm", KN, "-lm", WB, "-lambda", 0.3, "-text", "test.txt",
                                "-write-lm", tmp_path / "m.arpa.gz", cwd=DATA)
    assert status == 0, err
    assert gzip.open(tmp_path / "m.arpa.gz").read() == gzip.open(f"{DATA}/merge-kn3-wb3.arpa.gz").read()
    assert "merged: ppl= 35.60834" in out  # ppl-merge-kn3-wb3-debug0.txt's


def test_binary_written_merge_scores_as_the_arpa(tmp_path):
    status, _, err = run_nplm("ppl", "-lm", *MERGES["merge3"], "-write-bin-lm", tmp_path / "m.nplm", cwd=DATA)
    assert status == 0, err
    assert run_nplm("ppl", "-lm", tmp_path / "m.nplm", "-ppl", "test.txt", cwd=DATA)[1] == \
        reference("ppl-merge3-debug0.txt")


def test_library_merges_pairwise_in_the_order_given():
    kn, wb, kb = (load(f"{DATA}/{name}") for name in (KN, WB, KB))
    three = merge_backoff([kn, wb, kb], [0.5, 0.3, 0.2])
    two = merge_backoff([merge_backoff([kn, wb], [0.5 / 0.8, 0.3 / 0.8]), kb], [0.8, 0.2])
    for a, b in zip(three.logp, two.logp):
        np.testing.assert_allclose(a, b, atol=2e-6)
    with pytest.raises(ParameterError):
        merge_backoff([kn], [1.0])
    with pytest.raises(ParameterError):
        merge_backoff([kn, wb], [0.7, 0.7])


def test_what_cannot_be_merged_is_one_line(tmp_path):
    """-bayes 0 and non-n-gram components keep the dynamic mixture: writing it is refused,
    naming the option and the models; nplm mix -write-lm names the model that is no n-gram."""
    for flag, out in (("-write-lm", "x.arpa"), ("-write-bin-lm", "x.nplm")):
        status, _, err = run_nplm("ppl", "-lm", KN, "-mix-lm", WB, "-lambda", 0.3, "-bayes", 0, flag,
                                  tmp_path / out, cwd=DATA)
        assert_one_line_error(status, err, f"{flag}: the mixture of {KN} and {WB} cannot be written as one back-off "
                                           "model: -bayes 0 keeps it dynamic")
        assert not (tmp_path / out).exists()
    status, _, err = run_nplm("mix", "-lm", KN, "-lm", WB, "-text", "test.txt", "-write", tmp_path / "kw.mix",
                              cwd=DATA)
    assert status == 0, err
    status, _, err = run_nplm("mix", "-lm", tmp_path / "kw.mix", "-lm", KB, "-text", "test.txt", "-allow-paths",
                              "-write-lm", tmp_path / "no.arpa", cwd=DATA)
    assert_one_line_error(status, err, "kw.mix: -write-lm merges back-off n-gram models only (ARPA or binary), not "
                                       "a mixture model")
    status, _, err = run_nplm("ppl", "-lm", KN, "-mix-lm", tmp_path / "kw.mix", "-allow-paths", "-write-lm",
                              tmp_path / "no.arpa", cwd=DATA)
    assert_one_line_error(status, err, "only back-off n-gram models (ARPA or binary, without -classes) merge into one")
    with pytest.raises(NplmError, match="merges back-off n-gram models only, not a mixture model"):
        merge_backoff([load(f"{DATA}/{KN}"), load(str(tmp_path / "kw.mix"), allow_paths=True)], [0.5, 0.5])
