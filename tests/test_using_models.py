"""Using models after `ppl` (issue 19): sampling sentences (`nplm generate`) and the
KenLM-like Python API (`nplmtk.load`, `score`, `full_scores`, `perplexity`), for n-grams
and networks, and the Python API's example (docs/decoders.md) run as written."""
import gzip
import math
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import nplmtk
from conftest import assert_one_line_error, run_nplm
from nplmtk.corpus import Corpus
from nplmtk.generate import sample_sentences
from nplmtk.lm import LanguageModel
from nplmtk.mixture import Mixture
from nplmtk.models import ARCHITECTURES
from nplmtk.ngram.counts import NgramCounts
from nplmtk.ngram.estimate import estimate
from nplmtk.toy import ToyGrammar
from nplmtk.vocab import Vocabulary

from gensim.models import KeyedVectors  # the judge of the word2vec formats (a test-only dependency)

API_PAGE = Path(__file__).resolve().parent.parent / "docs" / "decoders.md"


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    folder = tmp_path_factory.mktemp("using")
    grammar = ToyGrammar()
    vocab = Vocabulary(grammar.words)
    lines = [" ".join(s) for s in grammar.sentences(1500, 1)]
    (folder / "train.txt").write_text("\n".join(lines) + "\n")
    kn3 = estimate(NgramCounts.from_corpus(Corpus.from_lines(lines, vocab), 3))
    return folder, vocab, kn3


def test_sampled_first_words_follow_the_model(toy):
    _, vocab, kn3 = toy
    sentences = list(sample_sentences(kn3, 3000, seed=3, max_words=1))
    counts = Counter(s[0] for s in sentences if s)
    expected = kn3.next_distribution([])
    for word, count in counts.most_common(3):
        p = expected[vocab.index[word]]
        assert abs(count / 3000 - p) < 4 * math.sqrt(p * (1 - p) / 3000) + 1e-3, word
    assert list(sample_sentences(kn3, 5, seed=3, max_words=1)) == sentences[:5]  # the seed decides
    sharp = list(sample_sentences(kn3, 50, seed=4, temperature=0.05, max_words=3))
    assert len({tuple(s) for s in sharp}) <= 3  # near the most likely words every time


def test_generate_from_the_command_line(toy, tmp_path):
    folder, _, _ = toy
    model = tmp_path / "kn3.arpa"
    assert run_nplm("ngram-count", "-text", folder / "train.txt", "-order", 3, "-lm", model)[0] == 0
    status, out, err = run_nplm("generate", "-lm", model, "-n", 4, "-seed", 9, "-prefix", "the", "-max-words", 20)
    assert status == 0, err
    lines = out.splitlines()
    assert len(lines) == 4 and all(line.split()[0] == "the" and len(line.split()) <= 20 for line in lines)
    assert run_nplm("generate", "-lm", model, "-n", 4, "-seed", 9, "-prefix", "the", "-max-words", 20)[1] == out
    assert_one_line_error(*run_nplm("generate", "-lm", model, "-temperature", -1)[::2],
                          "-temperature -1: must be a finite number above 0")


def test_the_python_api_agrees_with_ppl(toy, tmp_path):
    folder, vocab, kn3 = toy
    sentence = "the cat sees a dog"
    path = tmp_path / "one.txt"
    path.write_text(sentence + "\n")
    lstm = ARCHITECTURES["lstm"].initial(vocab, features=4, hidden=4, seed=1)
    for model in (kn3, lstm):
        scores = model.full_scores(sentence)
        expected = model.log10probs(Corpus.read(str(path), vocab))
        np.testing.assert_allclose([s for s, _, _ in scores], expected, rtol=1e-6)
        assert math.isclose(model.score(sentence), expected.sum(), rel_tol=1e-6)
        assert math.isclose(model.score(sentence, eos=False), expected[:-1].sum(), rel_tol=1e-6)
        assert math.isclose(model.perplexity(sentence), 10 ** (-expected.sum() / 6), rel_tol=1e-6)
    assert [order for _, order, _ in kn3.full_scores(sentence)] == [
        int(tag[1]) for tag in kn3.hit_tags(Corpus.read(str(path), vocab))]
    assert lstm.full_scores("the zyzzyva")[1][2] and not lstm.full_scores("the zyzzyva")[0][2]
    mixture = Mixture([kn3, lstm], [0.5, 0.5], ["kn3", "lstm"])  # no single n-gram order
    assert [order for _, order, _ in mixture.full_scores(sentence)] == [None] * 6
    mixed = sum(math.log10(0.5 * 10 ** a + 0.5 * 10 ** b)
                for (a, _, _), (b, _, _) in zip(kn3.full_scores(sentence), lstm.full_scores(sentence)))
    assert math.isclose(mixture.score(sentence), mixed, rel_tol=1e-6)


def test_the_python_api_example_runs(toy, tmp_path, monkeypatch):
    folder, _, _ = toy
    assert run_nplm("ngram-count", "-text", folder / "train.txt", "-order", 3, "-lm", tmp_path / "kn3.arpa")[0] == 0
    code = re.search(r"```python\n(.*?)```", API_PAGE.read_text(), re.S).group(1)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kn3.arpa").rename(tmp_path / "model.arpa")
    namespace = {}
    exec(compile(code, "docs/decoders.md", "exec"), namespace)
    assert isinstance(namespace["model"], LanguageModel)


@pytest.mark.parametrize("arch, features", [("lstm", "C"), ("lbl1", "R")])
def test_embeddings_in_word2vec_formats_and_nearest_words(toy, tmp_path, arch, features):
    _, vocab, kn3 = toy
    shape = {} if arch == "lstm" else {"order": 3, "hidden": 3}
    model = ARCHITECTURES[arch].initial(vocab, features=5, seed=1, **shape)
    model.save(str(tmp_path / "m.nplm"))
    for fmt, name in (("word2vec", "v.txt"), ("word2vec-binary", "v.bin"), ("tsv", "v.tsv")):
        status, _, err = run_nplm("embeddings", "-lm", tmp_path / "m.nplm", "-write", tmp_path / name, "-format", fmt)
        assert status == 0, err
    for name, binary in (("v.txt", False), ("v.bin", True)):
        loaded = KeyedVectors.load_word2vec_format(str(tmp_path / name), binary=binary)
        assert list(loaded.index_to_key) == vocab.words
        for word, row in zip(vocab.words, model.params[features]):
            np.testing.assert_allclose(loaded[word], row, rtol=1e-5, atol=1e-7)
    rows = (tmp_path / "v.tsv").read_text().splitlines()
    assert len(rows) == len(vocab) and rows[3].split("\t")[0] == vocab.words[3]
    status, out, _ = run_nplm("embeddings", "-lm", tmp_path / "m.nplm", "-neighbours", "the", "-count", 3)
    vectors = model.params[features].astype(np.float64)
    cosine = vectors @ vectors[vocab.index["the"]] / np.linalg.norm(vectors, axis=1) / np.linalg.norm(
        vectors[vocab.index["the"]])
    cosine[vocab.index["the"]] = -np.inf
    assert [line.split("\t")[0] for line in out.splitlines()] == [vocab.words[i] for i in np.argsort(-cosine)[:3]]


def test_embeddings_of_a_model_without_features_is_one_line(tmp_path, toy):
    folder, _, _ = toy
    assert run_nplm("ngram-count", "-text", folder / "train.txt", "-order", 2, "-lm", tmp_path / "kn2.arpa")[0] == 0
    assert_one_line_error(*run_nplm("embeddings", "-lm", tmp_path / "kn2.arpa", "-neighbours", "the")[::2],
                          "no word features")
    assert_one_line_error(*run_nplm("embeddings", "-lm", tmp_path / "kn2.arpa")[::2], "nothing to do")


def test_plots_of_training_logs_and_word_features(toy, tmp_path):
    folder, vocab, _ = toy
    log = tmp_path / "run.log"
    status, _, err = run_nplm("train", "-arch", "lstm", "-text", folder / "train.txt", "-valid", folder / "train.txt",
                              "-m", 6, "-h", 6, "-epochs", 2, "-optimizer", "adam", "-lr", 0.01, "-log", log,
                              "-lm", tmp_path / "m.nplm", "-quiet")
    assert status == 0, err
    assert run_nplm("plot", "-log", log, "-log", log, "-out", tmp_path / "curves.png")[0] == 0
    status, _, err = run_nplm("plot", "-lm", tmp_path / "m.nplm", "-embeddings", "-words", 20,
                              "-out", tmp_path / "map.png")
    assert status == 0, err
    for name in ("curves.png", "map.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (tmp_path / "bad.log").write_text('{"epoch": 1, "train_ppl": 5, "seconds": 1}\nnot json\n')
    assert_one_line_error(*run_nplm("plot", "-log", tmp_path / "bad.log", "-out", tmp_path / "x.png")[::2],
                          "bad.log:2: not a train-nplm log record")
    assert_one_line_error(*run_nplm("plot", "-out", tmp_path / "x.png")[::2], "give -log FILE")
    assert not (tmp_path / "x.png").exists()


@pytest.mark.parametrize("record, message", [
    ("[" * 100_000 + "]" * 100_000, "not a train-nplm log record (JSON with epoch, train_ppl, seconds as numbers)"),
    ('{"epoch": 1, "train_ppl": 5, "seconds": 1, "x": ' + "[" * 100_000 + "]" * 100_000 + "}",
     "not a train-nplm log record"),
    ('{"epoch": 1, "train_ppl": 1' + "0" * 400 + ', "seconds": 1}',
     "a number in the log record is beyond the range of a float (about 1.8e308)"),
    ('{"epoch": 1, "train_ppl": 5, "seconds": 1, "valid_ppl": 1' + "0" * 400 + "}",
     "a number in the log record is beyond the range of a float"),
    ('{"epoch": 1, "train_ppl": 5, "seconds": 1, "valid_ppl": "low"}', "not a train-nplm log record"),
])
def test_a_log_nested_deep_or_holding_a_huge_number_is_one_line(tmp_path, record, message):
    from nplmtk import plots
    from nplmtk.errors import InputError
    (tmp_path / "odd.log").write_text('{"epoch": 1, "train_ppl": 5, "seconds": 1}\n' + record + "\n")
    with pytest.raises(InputError) as caught:
        plots.read_log(str(tmp_path / "odd.log"))
    assert (caught.value.line, caught.value.message[:len(message)]) == (2, message)
    assert_one_line_error(*run_nplm("plot", "-log", tmp_path / "odd.log", "-out", tmp_path / "x.png")[::2],
                          f"odd.log:2: {message}")


def test_the_python_api_refuses_what_is_not_text_with_its_own_error(toy):
    from nplmtk.errors import InputError, NplmError, ParameterError
    _, _, kn3 = toy
    for score in (kn3.score, kn3.perplexity, kn3.full_scores):
        with pytest.raises(InputError) as caught:  # not UnicodeEncodeError
            score("\ud800 a b")
        assert str(caught.value) == "the sentence is not valid text: '\\ud800' at character 0 (surrogates not allowed)"
        with pytest.raises(ParameterError, match="^sentence must be a str, got bytes$"):
            score(b"the cat")
    assert issubclass(InputError, NplmError)
    assert kn3.score("the cat \u00e9t\u00e9") < 0  # valid text outside ASCII still scores


def test_plotting_without_matplotlib_is_one_line(monkeypatch, toy):
    import sys
    from nplmtk import plots
    from nplmtk.errors import NplmError
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(NplmError, match=r"pip install 'nplmtk\[plot\]'"):
        plots.training_curves([], "x.png")


def test_rescoring_ranks_the_reference_first_and_reports_srilm_lines(toy, tmp_path):
    folder, vocab, kn3 = toy
    model = tmp_path / "kn3.arpa"
    assert run_nplm("ngram-count", "-text", folder / "train.txt", "-order", 3, "-lm", model)[0] == 0
    reference = next(line for line in (folder / "train.txt").read_text().splitlines() if len(line.split()) >= 5)
    words = reference.split()  # the perturbations of the issue: swap two words, drop one, replace one
    perturbed = [" ".join([words[1], words[0]] + words[2:]), " ".join(words[:2] + words[3:]),
                 " ".join(words[:-1] + ["the"]), " ".join(["the"] + words)]
    (tmp_path / "list").write_text("".join(f"0 0 {len(h.split())} {h}\n" for h in perturbed + [reference]))
    status, out, err = run_nplm("rescore", "-lm", model, "-nbest", tmp_path / "list")
    assert status == 0, err
    lines = out.splitlines()
    assert lines[0].split()[3:] == reference.split() and len(lines) == 5
    loaded = nplmtk.load(str(model))
    for line in lines:  # SRILM's format, lscore the model's log10 P(sentence </s>)
        ascore, lscore, count, *words = line.split()
        assert int(count) == len(words) and math.isclose(float(lscore), loaded.score(" ".join(words)), rel_tol=1e-5)
    # Decipher's NBestList1.0: bytelog scores taken as acoustic ones, here deciding against the LM
    (tmp_path / "decipher").write_text(f"NBestList1.0\n(-1000) {reference}\n(0) {perturbed[1]}\n")
    status, out, _ = run_nplm("rescore", "-lm", model, "-nbest", tmp_path / "decipher", "-lm-weight", 0, "-best")
    assert status == 0 and out == perturbed[1] + "\n"
    (tmp_path / "bad").write_text("0 0 3 a b\n")
    assert_one_line_error(*run_nplm("rescore", "-lm", model, "-nbest", tmp_path / "bad")[::2],
                          "bad:1: not an N-best hypothesis")


def test_rescoring_many_lists_reads_the_model_once_and_names_each_best(toy, tmp_path):
    """-nbest-files: every list of FILELIST (gzipped ones too), one `NAME words` line each
    with -best, the re-ranked lists written under their names with -write-nbest-dir."""
    folder, vocab, kn3 = toy
    model = tmp_path / "kn3.arpa"
    assert run_nplm("ngram-count", "-text", folder / "train.txt", "-order", 3, "-lm", model)[0] == 0
    sentences = [line for line in (folder / "train.txt").read_text().splitlines() if len(line.split()) >= 4][:2]
    files = []
    for k, reference in enumerate(sentences):
        words = reference.split()
        wrong = " ".join([words[1], words[0]] + words[2:])
        text = f"0 0 {len(words)} {wrong}\n0 0 {len(words)} <s> {reference} </s>\n"
        path = tmp_path / (f"u{k}.gz" if k else f"u{k}")
        if k:
            with gzip.open(path, "wt") as f:
                f.write(text)
        else:
            path.write_text(text)
        files.append(path)
    (tmp_path / "lists").write_text("".join(f"{p}\n" for p in files))
    status, out, err = run_nplm("rescore", "-lm", model, "-nbest-files", tmp_path / "lists", "-best",
                                "-write-nbest-dir", tmp_path / "out")
    assert status == 0, err
    assert out.splitlines() == [f"u{k} {reference}" for k, reference in enumerate(sentences)]
    with gzip.open(tmp_path / "out" / "u1.gz", "rt") as f:
        assert f.readline().split()[3:] == sentences[1].split()
    assert (tmp_path / "out" / "u0").read_text().splitlines()[0].split()[3:] == sentences[0].split()
    assert_one_line_error(*run_nplm("rescore", "-lm", model)[::2], "give one of -nbest and -nbest-files")


def shared_prefix_hypotheses(vocab):
    """N-best-like hypotheses: long common beginnings, an empty one, words outside the vocabulary."""
    base = "the big cat sees a small dog in the house".split()
    rng = np.random.default_rng(2)
    return [base] + [base[:6] + [vocab.words[rng.integers(3, len(vocab))]] + base[7 + k % 2:] for k in range(20)] + \
        [[], ["an", "unknownword"] + base[2:], base[:3] + ["unknownword"], [], base[:4]]


@pytest.mark.parametrize("shape", [dict(arch="lstm", layers=2, peephole=True), dict(arch="rnn", layers=1),
                                   dict(arch="lstm", layers=1, output="class", classes=4),
                                   dict(arch="lstm", layers=1, reset_state="never"), dict(arch="lstm", output="hs"),
                                   dict(arch="rnn", direct=True), dict(arch="mlp", order=3)])
def test_rescoring_scores_each_hypothesis_as_if_alone(toy, shape):
    """N-best rescoring scores all the hypotheses of many lists in one pass (a recurrent
    network steps the trie of their prefixes, each shared prefix once), and each gets the
    score nplm ppl gives it alone: also for a network whose state runs on across sentences,
    for an empty hypothesis and for words outside the vocabulary."""
    from nplmtk.rescore import Hypothesis, language_scores, rescore_lists
    _, vocab, _ = toy
    arch = shape.pop("arch")
    counts = np.arange(len(vocab)) % 5 + 1.0 if shape.get("output") in ("class", "hs") else None
    model = ARCHITECTURES[arch].initial(vocab, features=6, hidden=7, seed=3, counts=counts, **shape)
    hypotheses = shared_prefix_hypotheses(vocab)
    alone = [model.log10probs(Corpus(np.array([vocab.id(w) for w in h], dtype=np.int32), np.array([0, len(h)]),
                                     vocab)).sum() for h in hypotheses]
    together = language_scores(model, [Hypothesis(0.0, 0.0, h) for h in hypotheses])
    np.testing.assert_allclose(together, alone, atol=1e-5)
    assert np.isfinite(alone).all()  # words outside the vocabulary read as <unk>
    lists = [[Hypothesis(-k, 0.0, h) for k, h in enumerate(hypotheses[lo:lo + 7])] for lo in range(0, 26, 7)]
    lscores = [h.lscore for ranked in rescore_lists(model, lists) for h in sorted(ranked, key=lambda h: -h.ascore)]
    np.testing.assert_allclose(lscores, alone, atol=1e-5)
