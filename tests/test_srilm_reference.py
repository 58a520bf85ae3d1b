"""nplmtk against SRILM 1.7.3's own outputs (tests/data/srilm/README.md): every ARPA entry
to the printed digit, and every ppl report byte for byte."""
import gzip
import os

import pytest

from conftest import run_nplm

DATA = os.path.join(os.path.dirname(__file__), "data", "srilm")

MODELS = {
    "kn3-unk": ["-unk"],
    "kn3-closed": [],
    "kn3-backoff": ["-unk", "-kndiscount"],
    "wb3-unk": ["-unk", "-wbdiscount", "-interpolate"],
    "wb3-backoff": ["-unk", "-wbdiscount"],
    "kn3-cutoff": ["-unk", "-gt2min", "2", "-gt3min", "2"],
    "gt3-unk": ["-unk", "-gtdiscount"],
    "gt3-max": ["-unk", "-gtdiscount", "-gt2max", "3", "-gt3max", "2"],
    "ukn3-unk": ["-unk", "-ukndiscount", "-interpolate"],
    "ukn3-backoff": ["-unk", "-ukndiscount"],
    "cd3-unk": ["-unk", "-cdiscount", "0.7", "-interpolate"],
    "cd3-backoff": ["-unk", "-cdiscount", "0.7"],
    "add3-unk": ["-unk", "-addsmooth", "0.1"],
    "kn3-unk-counted-prune1e-5": ["-unk", "-prune", "1e-5"],
    "kn3-mapunk": ["-unk", "-map-unk", "<UNK>"],
}


def arpa_entries(path):
    import gzip
    opener = gzip.open if path.endswith(".gz") else open
    entries, order = {}, 0
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("\\") and line.endswith("-grams:"):
                order = int(line[1:line.index("-")])
            elif order and line and not line.startswith("\\"):
                fields = line.split("\t")
                entries[fields[1]] = tuple(fields[:1] + fields[2:])
    return entries


@pytest.mark.parametrize("name", sorted(MODELS))
def test_estimated_models_equal_srilms(name, tmp_path):
    out = tmp_path / f"{name}.arpa"
    status, _, err = run_nplm("ngram-count", "-text", f"{DATA}/train.txt", "-order", 3,
                              "-vocab", f"{DATA}/vocab.txt", *MODELS[name], "-lm", out)
    assert status == 0, err
    ours, theirs = arpa_entries(str(out)), arpa_entries(f"{DATA}/{name}.arpa.gz")
    assert set(ours) == set(theirs)
    different = [(k, ours[k], theirs[k]) for k in ours if ours[k] != theirs[k]]
    assert different == []
    # and the file itself, line for line in SRILM's order (issue 17)
    assert out.read_bytes() == gzip.open(f"{DATA}/{name}.arpa.gz").read()


def test_fallback_discounts_estimate_as_srilm_given_them(tmp_path):
    """Text repeated 10 times has no trigram counted 1..4 times: we warn and use KenLM's
    fallback discounts, and otherwise SRILM's logic, as SRILM does when -kn3 gives it those
    discounts (back-off weights above 1 included)."""
    with open(f"{DATA}/train.txt", encoding="utf-8") as f:
        (tmp_path / "train10.txt").write_text(f.read() * 10, encoding="utf-8")
    out = tmp_path / "m.arpa"
    status, _, err = run_nplm("ngram-count", "-text", tmp_path / "train10.txt", "-order", 3,
                              "-vocab", f"{DATA}/vocab.txt", "-unk", "-lm", out)
    assert status == 0 and "order 3: counts-of-counts n1..n4 = [0, 0, 0, 0]" in err
    assert out.read_bytes() == gzip.open(f"{DATA}/kn3-unk-repeated10-fallback.arpa.gz").read()


def test_always_interpolate_estimates_as_kenlm_lmplz(tmp_path):
    """Every entry of lmplz's ARPA to the printed digit (tests/data/kenlm/README.md), but
    for <s> (lmplz: log10 p 0, SRILM and we: -99); a weight lmplz writes as 0 we may leave out."""
    out = tmp_path / "ai.arpa"
    status, _, err = run_nplm("ngram-count", "-text", f"{DATA}/train.txt", "-order", 3, "-unk",
                              "-always-interpolate", "-lm", out)
    assert status == 0, err
    ours, theirs = arpa_entries(str(out)), arpa_entries(f"{DATA}/../kenlm/lmplz3.arpa.gz")
    assert set(ours) == set(theirs)
    worst = 0.0
    for gram in ours:
        a, b = [float(v) for v in ours[gram] + ("0",)][:2], [float(v) for v in theirs[gram] + ("0",)][:2]
        if gram == "<s>":
            a, b = a[1:], b[1:]
        worst = max([worst] + [abs(x - y) for x, y in zip(a, b)])
    assert worst <= 1e-6  # the last of 7 printed digits


def test_counts_and_vocabulary_written_as_srilms(tmp_path):
    status, _, err = run_nplm("ngram-count", "-text", f"{DATA}/train.txt", "-order", 3, "-vocab", f"{DATA}/vocab.txt",
                              "-write-vocab", tmp_path / "vocab.txt")
    assert status == 0, err
    status, _, err = run_nplm("ngram-count", "-text", f"{DATA}/train.txt", "-order", 3,
                              "-write", tmp_path / "counts.txt", "-sort")
    assert status == 0, err
    assert (tmp_path / "counts.txt").read_bytes() == gzip.open(f"{DATA}/counts-sorted.txt.gz").read()
    with open(f"{DATA}/written-vocab.txt", encoding="utf-8") as f:
        theirs = [line for line in f if line != "-pau-\n"]  # SRILM's pause token, which nplm leaves out
    assert (tmp_path / "vocab.txt").read_text(encoding="utf-8").splitlines(True) == theirs


def test_limit_vocab_drops_counts_read_with_other_words(tmp_path):
    out = tmp_path / "limited.arpa"
    with gzip.open(f"{DATA}/counts-sorted.txt.gz") as f:
        (tmp_path / "counts.txt").write_bytes(f.read())
    status, _, err = run_nplm("ngram-count", "-read", tmp_path / "counts.txt", "-order", 3, "-vocab",
                              f"{DATA}/limit-vocab.txt", "-limit-vocab", "-unk", "-wbdiscount", "-interpolate",
                              "-lm", out)
    assert status == 0, err
    assert out.read_bytes() == gzip.open(f"{DATA}/wb3-read-limited.arpa.gz").read()


def test_debug_prints_srilms_discount_lines(tmp_path):
    status, _, err = run_nplm("ngram-count", "-text", f"{DATA}/train.txt", "-order", 3, "-vocab", f"{DATA}/vocab.txt",
                              "-unk", "-ukndiscount", "-interpolate", "-debug", 1, "-lm", tmp_path / "m.arpa")
    assert status == 0, err
    with open(f"{DATA}/ukn3-unk-debug1.err", encoding="utf-8") as f:
        theirs = [line for line in f.read().splitlines() if line.split()[0] in
                  ("using", "modifying", "Kneser-Ney", "n1", "n2", "D")]
    assert err.splitlines() == theirs


@pytest.mark.parametrize("order", [2, 3])
def test_write_lm_equals_srilms_byte_for_byte(order, tmp_path):
    """`ngram -lm kn3-unk.arpa.gz [-order 2] -write-lm` (issue 17), to .gz as well."""
    out = tmp_path / "out.arpa.gz"
    status, stdout, err = run_nplm("ppl", "-lm", f"{DATA}/kn3-unk.arpa.gz", "-order", order, "-write-lm", out)
    assert status == 0 and stdout == "", err
    reference = f"{DATA}/kn{order}-from-kn3-unk.arpa.gz" if order == 2 else f"{DATA}/kn3-unk.arpa.gz"
    assert gzip.open(out).read() == gzip.open(reference).read()


@pytest.mark.parametrize("name", ["kn3-unk", "kn3-closed", "kn3-cutoff", "wb3-backoff"])
@pytest.mark.parametrize("debug", [0, 1, 2])
def test_ppl_reports_equal_srilms_byte_for_byte(name, debug):
    status, out, err = run_nplm("ppl", "-lm", f"{DATA}/{name}.arpa.gz", "-ppl", "test.txt",
                                "-debug", debug, cwd=DATA)
    assert status == 0, err
    with open(f"{DATA}/ppl-{name}-debug{debug}.txt", encoding="utf-8") as f:
        assert out == f.read()


@pytest.mark.parametrize("reference, options", [
    ("ppl-counts-kn3-unk-debug2.txt", ["-lm", "kn3-unk.arpa.gz", "-counts", "test-counts.txt.gz", "-debug", 2]),
    ("ppl-counts-kn3-closed-unkprob-debug1.txt", ["-lm", "kn3-closed.arpa.gz", "-counts", "test-counts.txt.gz",
                                                  "-unk-prob", -5, "-debug", 1]),
    ("ppl-kn3-closed-unkprob-debug2.txt", ["-lm", "kn3-closed.arpa.gz", "-ppl", "test.txt", "-unk-prob", -5,
                                           "-debug", 2]),
    ("ppl-kn3-mapunk-debug2.txt", ["-lm", "kn3-mapunk.arpa.gz", "-map-unk", "<UNK>", "-ppl", "test.txt",
                                   "-debug", 2]),
    # the unigram cache (issue 36): a closed vocabulary (its OOVs never cached), <unk> a word, a mixture
    ("ppl-kn3-closed-cache7-debug2.txt", ["-lm", "kn3-closed.arpa.gz", "-cache", 7, "-ppl", "test.txt",
                                          "-debug", 2]),
    ("ppl-kn3-unk-unk-cache3-debug2.txt", ["-lm", "kn3-unk.arpa.gz", "-unk", "-cache", 3, "-cache-lambda", 0.2,
                                           "-ppl", "test.txt", "-debug", 2]),
    ("ppl-mix-kn3-wb3-cache20-debug1.txt", ["-lm", "kn3-unk.arpa.gz", "-mix-lm", "wb3-unk.arpa.gz", "-lambda", 0.3,
                                            "-bayes", 0, "-cache", 20, "-ppl", "test.txt", "-debug", 1]),
])
def test_counts_unk_prob_and_map_unk_reports_equal_srilms(reference, options):
    status, out, err = run_nplm("ppl", *options, cwd=DATA)
    assert status == 0, err
    with open(f"{DATA}/{reference}", encoding="utf-8") as f:
        assert out == f.read()


@pytest.mark.parametrize("reference, make_model, options", [
    ("gen-kn3-unk-seed17.txt", None, ["-lm", "kn3-unk.arpa.gz", "-unk", "-gen", 25, "-seed", 17]),
    ("gen-kn3-closed-seed-5.txt", None, ["-lm", "kn3-closed.arpa.gz", "-gen", 25, "-seed", -5]),
    ("gen-utf8-kn3-seed3.txt", "utf8-train.txt", ["-gen", 25, "-seed", 3]),
])
def test_gen_draws_srilms_sentences(tmp_path, reference, make_model, options):
    """SRILM's drand48 and its hash table's order of the words, including non-ASCII ones."""
    if make_model:
        model = tmp_path / "m.arpa"
        status, _, err = run_nplm("ngram-count", "-text", f"{DATA}/{make_model}", "-order", 3, "-lm", model)
        assert status == 0, err
        options = ["-lm", model] + options
    status, out, err = run_nplm("ppl", *options, cwd=DATA)
    assert status == 0, err
    with open(f"{DATA}/{reference}", encoding="utf-8") as f:
        assert out == f.read()


def test_order_option_equals_srilms():
    status, out, err = run_nplm("ppl", "-lm", "kn3-unk.arpa.gz", "-order", 2, "-text", "test.txt", cwd=DATA)
    assert status == 0, err
    with open(f"{DATA}/ppl-kn3-unk-order2.txt", encoding="utf-8") as f:
        assert out == f.read()


def thinned(tmp_path):
    """kn3-unk without every third 3-gram: its back-off weights no longer fit."""
    lines, out, section, count = gzip.open(f"{DATA}/kn3-unk.arpa.gz", "rt").read().split("\n"), [], 0, 0
    for line in lines:
        if line.startswith("\\") and line.endswith("-grams:"):
            section, count = int(line[1]), 0
        elif section == 3 and line and not line.startswith("\\"):
            count += 1
            if count % 3 == 0:
                continue
        out.append(line)
    kept = sum(1 for line in out[out.index("\\3-grams:") + 1:] if line and not line.startswith("\\"))
    path = tmp_path / "thinned.arpa"
    path.write_text("\n".join(line if not line.startswith("ngram 3=") else f"ngram 3={kept}" for line in out))
    return path


def test_renorm_equals_srilms_byte_for_byte(tmp_path):
    """`ngram -lm thinned.arpa -renorm -write-lm` and `-renorm -ppl` (issue 17)."""
    path = thinned(tmp_path)
    status, out, err = run_nplm("ppl", "-lm", path, "-renorm", "-write-lm", tmp_path / "renormed.arpa",
                                "-ppl", "test.txt", cwd=DATA)
    assert status == 0, err
    assert (tmp_path / "renormed.arpa").read_bytes() == gzip.open(f"{DATA}/kn3-unk-thinned-renorm.arpa.gz").read()
    assert (tmp_path / "renormed.arpa").read_bytes() != path.read_bytes()
    with open(f"{DATA}/ppl-kn3-unk-thinned-renorm.txt", encoding="utf-8") as f:
        assert out == f.read()


@pytest.mark.parametrize("threshold", ["1e-5", "1e-4"])
def test_entropy_pruning_equals_srilms_byte_for_byte(threshold, tmp_path):
    """`ngram -lm kn3-unk.arpa.gz -prune T -write-lm` (issue 17): the n-grams kept, their
    probabilities and the recomputed back-off weights."""
    out = tmp_path / "pruned.arpa"
    status, _, err = run_nplm("ppl", "-lm", f"{DATA}/kn3-unk.arpa.gz", "-prune", threshold, "-write-lm", out)
    assert status == 0, err
    assert out.read_bytes() == gzip.open(f"{DATA}/kn3-unk-prune{threshold}.arpa.gz").read()


@pytest.mark.parametrize("name", ["kn3-backoff", "wb3-backoff"])
def test_prune_lowprobs_equals_srilms_byte_for_byte(name, tmp_path):
    """`ngram -lm NAME.arpa.gz -prune-lowprobs -write-lm` (issue 17): back-off models where
    some n-grams fall below their back-off estimate (103 2-grams and 1,587 3-grams go from
    kn3-backoff)."""
    out = tmp_path / "pruned.arpa"
    status, _, err = run_nplm("ppl", "-lm", f"{DATA}/{name}.arpa.gz", "-prune-lowprobs", "-write-lm", out)
    assert status == 0, err
    assert out.read_bytes() == gzip.open(f"{DATA}/{name}-lowprobs.arpa.gz").read()


def test_limit_vocab_equals_srilms_byte_for_byte(tmp_path):
    """`ngram -lm kn3-unk.arpa.gz -vocab limit-vocab.txt -limit-vocab -write-lm` and its
    `-ppl test.txt -debug 2` report (issue 17): 280 of the words, one not in the model."""
    out = tmp_path / "limited.arpa"
    status, report, err = run_nplm("ppl", "-lm", "kn3-unk.arpa.gz", "-vocab", "limit-vocab.txt", "-limit-vocab",
                                   "-write-lm", out, "-ppl", "test.txt", "-debug", 2, cwd=DATA)
    assert status == 0, err
    assert out.read_bytes() == gzip.open(f"{DATA}/kn3-unk-limited.arpa.gz").read()
    with open(f"{DATA}/ppl-kn3-unk-limited-debug2.txt", encoding="utf-8") as f:
        assert report == f.read()
