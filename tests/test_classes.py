"""Word classes (issue 18): the exchange algorithm, SRILM's classes files, class n-gram
models, against SRILM 1.7.3's `ngram -classes` (tests/data/srilm/README.md)."""
import gzip
import os

import numpy as np
import pytest

from conftest import assert_one_line_error, run_nplm
from nplmtk.corpus import Corpus
from nplmtk.ngram.classes import WordClasses
from nplmtk.ngram.exchange import BigramCounts, ClassBigramState, brown_merging, exchange
from nplmtk.vocab import Vocabulary
from test_srilm_reference import DATA


@pytest.fixture(scope="module")
def brown_sample():
    vocab = Vocabulary.read(f"{DATA}/vocab.txt")
    corpus = Corpus.read(f"{DATA}/train.txt", vocab)
    return vocab, corpus, BigramCounts.from_corpus(corpus), np.bincount(corpus.ids, minlength=len(vocab))


def test_gains_are_the_likelihood_changes_of_each_move(brown_sample):
    vocab, corpus, bigrams, counts = brown_sample
    rng = np.random.default_rng(3)
    num_classes = 7
    class_of = rng.integers(0, num_classes, len(vocab))
    class_of[[vocab.bos, vocab.eos]] = [num_classes, num_classes + 1]
    state = ClassBigramState(bigrams, class_of, num_classes + 2)
    for word in [vocab.id("the"), vocab.id("."), vocab.unk, vocab.id("city")]:
        before = state.log_likelihood()
        source = state.class_of[word]
        neighbours = state.remove(word)
        gains = state.gains(word, *neighbours)
        for target in range(num_classes):
            state.insert(word, target, *neighbours)
            after = state.log_likelihood()
            assert after - before == pytest.approx(gains[target] - gains[source], abs=1e-6 * abs(before))
            state.remove(word)
        state.insert(word, source, *neighbours)


def test_exchange_never_lowers_the_training_likelihood(brown_sample):
    vocab, corpus, bigrams, counts = brown_sample
    class_of, history = exchange(bigrams, counts, 20, [vocab.bos, vocab.eos], passes=6, seed=1, tolerance=0)
    likelihoods = [h["log_likelihood"] for h in history]
    assert all(b >= a - 1e-6 for a, b in zip(likelihoods, likelihoods[1:]))
    assert likelihoods[-1] > likelihoods[0] + 1000
    # the returned classes are the ones whose likelihood was logged
    state = ClassBigramState(bigrams, class_of, 23)
    assert state.log_likelihood() == pytest.approx(likelihoods[-1])
    again, _ = exchange(bigrams, counts, 20, [vocab.bos, vocab.eos], passes=6, seed=1, tolerance=0)
    assert np.array_equal(class_of, again)  # deterministic for a seed


def test_ngram_class_writes_classes_whose_members_sum_to_one(tmp_path):
    out, log = tmp_path / "c.classes", tmp_path / "c.log"
    status, _, err = run_nplm("ngram-class", "-text", f"{DATA}/train.txt", "-vocab", f"{DATA}/vocab.txt",
                              "-numclasses", 15, "-classes", out, "-log", log, "-class-counts", tmp_path / "c.counts")
    assert status == 0, err
    assert "pass 1: logprob= " in err
    classes = WordClasses.read(str(out))
    assert len(classes.names) == 15
    sums = {}
    for word, name in classes.class_of.items():
        sums[name] = sums.get(name, 0.0) + classes.prob[word]
    assert all(abs(total - 1) < 1e-9 for total in sums.values())
    assert "<s>" not in classes.class_of and "</s>" not in classes.class_of
    vocab = Vocabulary.read(f"{DATA}/vocab.txt")
    assert set(classes.class_of) == set(vocab.words) - {"<s>", "</s>"}
    passes = [line for line in log.read_text().splitlines()]
    assert len(passes) >= 2
    # the class n-gram counts train a class model directly
    status, _, err = run_nplm("ngram-count", "-read", tmp_path / "c.counts", "-order", 2, "-wbdiscount",
                              "-lm", tmp_path / "c2.arpa")
    assert status == 0, err


def test_classes_files_round_trip(tmp_path):
    classes = WordClasses.read(f"{DATA}/class20.classes")
    classes.write(str(tmp_path / "again.classes"))
    again = WordClasses.read(str(tmp_path / "again.classes"))
    assert again.class_of == classes.class_of and again.prob == classes.prob
    with open(f"{DATA}/class20.classes", encoding="utf-8") as f:
        first = f.readline().split()
    assert classes.prob[first[2]] == float(first[1])


def class20_trigram(out):
    """SRILM's recipe's Witten-Bell class trigram on SRILM's 20 classes (README there), to `out`."""
    status, _, err = run_nplm("ngram-count", "-text", f"{DATA}/train.txt", "-vocab", f"{DATA}/vocab.txt",
                              "-classes", f"{DATA}/class20.classes", "-order", 3, "-wbdiscount", "-interpolate",
                              "-lm", out)
    assert status == 0, err


def srilm_class20_report():
    with open(f"{DATA}/ppl-class20-wb3-simple-debug2.txt", encoding="utf-8") as f:
        return f.read()


def test_class_trigram_and_its_report_equal_srilms(tmp_path):
    out = tmp_path / "class20-wb3.arpa"
    class20_trigram(out)
    assert out.read_bytes() == gzip.open(f"{DATA}/class20-wb3.arpa.gz").read()
    status, report, err = run_nplm("ppl", "-lm", "class20-wb3.arpa.gz", "-classes", "class20.classes",
                                   "-ppl", "test.txt", "-debug", 2, cwd=DATA)
    assert status == 0, err
    assert report == srilm_class20_report()


def test_with_a_class_per_word_the_class_model_is_the_word_model(tmp_path):
    vocab = Vocabulary.read(f"{DATA}/vocab.txt")
    lines = [f"C_{w} 1 {w}" for w in vocab.words if w not in ("<s>", "</s>")]
    (tmp_path / "own.classes").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for name, extra in (("words", []), ("classes", ["-classes", tmp_path / "own.classes"])):
        status, _, err = run_nplm("ngram-count", "-text", f"{DATA}/train.txt", "-vocab", f"{DATA}/vocab.txt",
                                  "-unk", "-order", 3, *extra, "-lm", tmp_path / f"{name}.arpa")
        assert status == 0, err
    reports = []
    for name, extra in (("words", []), ("classes", ["-classes", tmp_path / "own.classes"])):
        status, report, err = run_nplm("ppl", "-lm", tmp_path / f"{name}.arpa", *extra, "-ppl",
                                       f"{DATA}/test.txt", "-debug", 2)
        assert status == 0, err
        reports.append(report)
    assert reports[0] == reports[1]


@pytest.mark.parametrize("content, fragment", [
    ("C1 0.5 a\nC1 0.5 a\n", "word 'a' is in a class already (line 1)"),
    ("C1 1.5 a\n", "probability 1.5 is not in (0, 1]"),
    ("C1 0.5\n", "expected 'class [prob] word'"),
    ("C1 0.5 a b\n", "one word per class member"),
    ("C1 1 <s>\n", "<s> cannot be a class member"),
    ("C1 1 C2\nC2 1 C1\n", "is both a class and a word"),
    ("\n", "no classes"),
])
def test_bad_classes_files_are_one_line_and_exit_2(tmp_path, content, fragment):
    (tmp_path / "bad.classes").write_text(content, encoding="utf-8")
    status, out, err = run_nplm("ppl", "-lm", f"{DATA}/kn3-unk.arpa.gz", "-classes", tmp_path / "bad.classes",
                                "-ppl", f"{DATA}/test.txt")
    assert_one_line_error(status, err, fragment)
    assert "bad.classes" in err


def test_ngram_class_refuses_more_classes_than_words(tmp_path):
    status, out, err = run_nplm("ngram-class", "-text", f"{DATA}/train.txt", "-vocab", f"{DATA}/vocab.txt",
                                "-numclasses", 100000, "-classes", tmp_path / "c.classes")
    assert_one_line_error(status, err, "-numclasses must be between 1 and the")
    assert not os.path.exists(tmp_path / "c.classes")


def test_a_class_ngram_in_one_file_scores_and_mixes_as_any_model(tmp_path):
    model = tmp_path / "c20.nplm"
    class20_trigram(model)
    status, report, err = run_nplm("ppl", "-lm", model, "-ppl", "test.txt", "-debug", 2, cwd=DATA)
    assert status == 0, err
    assert report == srilm_class20_report()
    status, out, err = run_nplm("mix", "-lm", model, "-lm", f"{DATA}/kn3-unk.arpa.gz", "-text", f"{DATA}/test.txt")
    assert status == 0, err
    mixed = float(out.split("mixture: ppl= ")[1].split()[0])
    alone = [float(line.split("ppl= ")[1]) for line in out.splitlines() if line.startswith("model ")]
    assert mixed < min(alone)


def test_a_crafted_class_ngram_file_is_refused_in_one_line(tmp_path):
    from nplmtk import container
    bad = tmp_path / "bad.nplm"
    container.save(str(bad), "class-ngram", {"arpa": np.frombuffer(b"\\data\\\nngram 1=1\n", dtype=np.uint8),
                                             "classes": np.frombuffer(b"C 1 a\n", dtype=np.uint8)})
    status, out, err = run_nplm("ppl", "-lm", bad, "-ppl", f"{DATA}/test.txt")
    assert_one_line_error(status, err, "bad.nplm")
    container.save(str(bad), "class-ngram", {"arpa": np.zeros(3, dtype=np.float32)})
    status, out, err = run_nplm("ppl", "-lm", bad, "-ppl", f"{DATA}/test.txt")
    assert_one_line_error(status, err, "exactly the uint8 arrays 'arpa' and 'classes'")


def test_bottom_up_merging_makes_the_greedy_merge_each_time():
    """-full: at each step the merge of least likelihood loss, as brute force finds it."""
    import itertools
    rng = np.random.default_rng(5)
    size, fixed, num_classes = 9, [0, 1], 3
    first, second = rng.integers(0, size, 120), rng.integers(0, size, 120)
    keys, counts = np.unique(first * size + second, return_counts=True)
    bigrams = BigramCounts(keys // size, keys % size, counts.astype(float), size)

    def likelihood(groups):
        class_of = np.zeros(size, dtype=int)
        for k, group in enumerate(groups):
            class_of[group] = k
        class_of[fixed] = [len(groups), len(groups) + 1]
        return ClassBigramState(bigrams, class_of, len(groups) + 2).log_likelihood()

    groups = [[w] for w in range(size) if w not in fixed]
    while len(groups) > num_classes:
        a, b = max(itertools.combinations(range(len(groups)), 2), key=lambda pair: likelihood(
            [g for k, g in enumerate(groups) if k not in pair] + [groups[pair[0]] + groups[pair[1]]]))
        groups = [g for k, g in enumerate(groups) if k not in (a, b)] + [groups[a] + groups[b]]
    class_of, history = brown_merging(bigrams, np.bincount(second, minlength=size) + 1, num_classes, fixed)
    ours = {}
    for w in range(size):
        if w not in fixed:
            ours.setdefault(class_of[w], []).append(w)
    assert sorted(map(sorted, ours.values())) == sorted(map(sorted, groups))
    assert history[-1]["log_likelihood"] == pytest.approx(likelihood(groups))
    assert set(class_of[fixed]) == {num_classes, num_classes + 1}


def test_ngram_class_full_writes_classes(tmp_path):
    (tmp_path / "t.txt").write_text("the cat sat on a mat\na dog sat on the cat\nthe dog ran\n" * 5)
    status, _, err = run_nplm("ngram-class", "-text", tmp_path / "t.txt", "-numclasses", 3, "-full",
                              "-classes", tmp_path / "c.classes")
    assert status == 0, err
    classes = WordClasses.read(str(tmp_path / "c.classes"))
    assert len(classes.names) == 3 and set(classes.class_of) >= {"the", "cat", "dog", "sat", "ran"}
