"""The library names its parameters and files; the CLI spells parameters as flags, prints
one line and exits 2, and prints each library warning once as `nplm SUBCOMMAND: warning:`."""
import os
import stat
import warnings

import pytest

import cli.train
import cli.vocab
from cli.options import spell
from conftest import run_main, run_nplm
import nplmtk.neural.network
from nplmtk.corpus import Corpus
from nplmtk.errors import InputError, NplmError, NplmWarning, ParameterError
from nplmtk.io import read_text
from nplmtk.models import ARCHITECTURES
from nplmtk.neural.train import Trainer, TrainingConfig
from nplmtk.ngram.counts import NgramCounts
from nplmtk.ngram.estimate import estimate
from nplmtk.vocab import Vocabulary, count_words

TRAIN = "the cat sat\nthe dog sat\n"


@pytest.fixture
def train(tmp_path):
    path = tmp_path / "train.txt"
    path.write_text(TRAIN)
    return str(path)


# -- parameters: named by the library, spelt as flags by the CLI ----------------------------

def test_flags_of_library_parameters():
    assert [spell(name) for name in ("features", "hidden", "order", "lr", "lr_decay", "min_count", "weights")] \
        == ["-m", "-h", "-order", "-lr", "-lr-decay", "-min-count", "-lambda"]


def test_a_library_parameter_error_names_the_parameter_not_a_flag():
    with pytest.raises(ParameterError) as caught:
        Corpus.from_lines(["a b"], Vocabulary(["a", "b"])).windows(0)
    assert caught.value.parameters == ("order",)
    assert str(caught.value) == "order must be at least 1, got 0"
    assert caught.value.render(spell) == "-order must be at least 1, got 0"


def test_a_bad_setting_is_one_line_with_the_flag_and_exit_2(train):
    with pytest.raises(ParameterError, match="^unk cannot be </s>"):
        Vocabulary(["a"], unk="</s>")
    status, out, err = run_nplm("vocab", "-text", train, "-unk", "<s>")
    assert (status, out) == (2, "")
    assert err == "nplm: -unk cannot be <s>: <s> and </s> mark where sentences begin and end\n"


def test_an_ngram_order_out_of_range_is_spelt_as_the_flag(tmp_path, train):
    with pytest.raises(ParameterError, match="^order must be between 1 and 10, got 0"):
        NgramCounts.from_corpus(Corpus.from_lines(["a b"], Vocabulary(["a", "b"])), 0)
    status, out, err = run_nplm("ngram-count", "-text", train, "-order", 0, "-lm", tmp_path / "x.arpa")
    assert (status, out, err) == (2, "", "nplm ngram-count: -order 0: must be an integer in [1, 10]\n")


def test_main_spells_every_parameter_of_a_parameter_error(capsys, monkeypatch, train):
    def refuse(*args, **kwargs):
        raise ParameterError("{hidden} 0 needs {direct}, and {features} at least 1", path="model.nplm")
    monkeypatch.setattr(cli.vocab, "count_words", refuse)
    assert run_main(capsys, "vocab", "-text", train) == (2, "", "nplm: model.nplm: -h 0 needs -direct, and -m at least 1\n")


# -- input: the file and line -------------------------------------------------------------

def test_invalid_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("ok\nstill ok\ncaf\xe9\n".encode("latin-1"))
    with pytest.raises(InputError) as caught:
        read_text(str(path))
    assert (caught.value.path, caught.value.line, caught.value.message) == (str(path), 3, "invalid UTF-8")
    status, out, err = run_nplm("vocab", "-text", path)
    assert (status, out, err) == (2, "", f"nplm: {path}:3: invalid UTF-8\n")


def test_a_bad_vocabulary_line_names_file_and_line(tmp_path, train):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("cat\ndog 3 x\n")
    with pytest.raises(InputError) as caught:
        Vocabulary.read(str(vocab))
    assert (caught.value.path, caught.value.line) == (str(vocab), 2)
    assert caught.value.message == "expected 'word' or 'word count', got 3 fields"
    status, out, err = run_nplm("ngram-count", "-text", train, "-vocab", vocab, "-lm", tmp_path / "x.arpa")
    assert (status, out) == (2, "")
    assert err == f"nplm: {vocab}:2: expected 'word' or 'word count', got 3 fields\n"
    assert not (tmp_path / "x.arpa").exists()


def test_a_missing_file_is_named_without_a_line(tmp_path):
    with pytest.raises(NplmError) as caught:
        read_text(str(tmp_path / "missing.txt"))
    assert (caught.value.path, caught.value.line) == (str(tmp_path / "missing.txt"), None)
    assert str(caught.value) == f"{tmp_path / 'missing.txt'}: no such file"


# -- warnings: one line each, under the subcommand's name -----------------------------------

def test_a_library_warning_prints_once_under_the_subcommand(capsys, monkeypatch, train):
    count_words = cli.vocab.count_words

    def warn_then_count(*args, **kwargs):
        warnings.warn("rare words are many", NplmWarning)
        warnings.warn("not ours", UserWarning)
        return count_words(*args, **kwargs)
    monkeypatch.setattr(cli.vocab, "count_words", warn_then_count)
    for _ in range(2):  # a second run in the same process prints it again
        with pytest.warns(UserWarning, match="not ours") as others:  # other warnings go on as usual
            status, out, err = run_main(capsys, "vocab", "-text", train)
        assert status == 0 and out.split()[:3] == ["<unk>", "<s>", "</s>"]
        assert err == "nplm vocab: warning: rare words are many\n"
        assert [str(w.message) for w in others] == ["not ours"]


def test_a_warning_names_the_subcommand_an_alias_stands_for(capsys, monkeypatch, train, tmp_path):
    def warn_then_stop(path):
        warnings.warn("careful", NplmWarning)
        raise NplmError("stopped here")
    monkeypatch.setattr(cli.train, "check_readable", warn_then_stop)
    status, out, err = run_main(capsys, "train", "-text", train, "-lm", tmp_path / "m.nplm")
    assert (status, err) == (2, "nplm train-nplm: warning: careful\nnplm: stopped here\n")


def test_degenerate_counts_warn_once_per_order(tmp_path):
    (tmp_path / "t.txt").write_text("the cat sat\na dog ran\nthe dog sat down\n" * 40)
    vocab = Vocabulary.from_counts(count_words([str(tmp_path / "t.txt")]))
    with pytest.warns(NplmWarning) as caught:  # the library warns; it does not print
        estimate(NgramCounts.from_corpus(Corpus.read(str(tmp_path / "t.txt"), vocab), 4))
    # order 1's n1..n4 = 5 2 1 0 give D1..D3+ in range (n4 = 0 is allowed, as lmplz allows it)
    assert [str(w.message)[:8] for w in caught] == ["order 2:", "order 3:", "order 4:"]
    status, out, err = run_nplm("ngram-count", "-text", tmp_path / "t.txt", "-order", 4, "-lm", tmp_path / "m.arpa")
    assert (status, out) == (0, "")
    counts = {2: [10, 0, 0, 0], 3: [7, 0, 0, 0], 4: [0, 0, 0, 0]}
    assert err == "".join(f"nplm ngram-count: warning: order {k}: counts-of-counts n1..n4 = {n} give discounts "
                          "out of range; using fallback discounts 0.5 1.0 1.5\n" for k, n in counts.items())


# -- endless input: one line, exit 2 --------------------------------------------------------

ENDLESS_TEXT = ("/dev/zero:1: a line longer than 1048576 bytes (the limit: set NPLM_MAX_LINE_BYTES to raise it); not a "
                "text file?")
ENDLESS_MODEL = "/dev/zero: not an ARPA model (no \\data\\ line in its first 1048576 bytes) nor an nplm model"


@pytest.mark.skipif(not (os.path.exists("/dev/zero") and stat.S_ISCHR(os.stat("/dev/zero").st_mode)),
                    reason="no /dev/zero device")
@pytest.mark.parametrize("args, message", [(["ppl", "-lm", "{model}", "-text", "/dev/zero"], ENDLESS_TEXT),
                                           (["ppl", "-lm", "/dev/zero", "-text", "{text}"], ENDLESS_MODEL),
                                           (["generate", "-lm", "/dev/zero", "-n", "1"], ENDLESS_MODEL),
                                           (["embeddings", "-lm", "/dev/zero", "-write", "{out}"], ENDLESS_MODEL),
                                           (["rescore", "-lm", "{model}", "-nbest", "/dev/zero"], ENDLESS_TEXT),
                                           (["train-nplm", "-text", "/dev/zero", "-lm", "{out}"], ENDLESS_TEXT),
                                           (["train-nplm", "-text", "{text}", "-valid", "/dev/zero", "-lm", "{out}"],
                                            ENDLESS_TEXT)])
def test_an_endless_input_is_one_line(capsys, tmp_path, train, args, message, bounded_memory):
    model = tmp_path / "m.arpa"
    assert run_main(capsys, "ngram-count", "-text", train, "-order", 2, "-lm", model)[0] == 0
    status, out, err = run_main(capsys, *(a.format(model=model, text=train, out=tmp_path / "out") for a in args))
    assert (status, out, err) == (2, "", f"nplm: {message}\n")


# -- sizes that cannot fit: refused before anything is allocated ----------------------------

@pytest.fixture
def four_gib(monkeypatch):
    monkeypatch.setattr(nplmtk.neural.network, "memory_bytes", lambda: 4 << 30)


@pytest.mark.parametrize("arch, settings, flags", [
    ("mlp", dict(order=3, features=10 ** 8, hidden=10), "-m 100000000, -h 10"),
    ("mlp", dict(order=3, features=10, hidden=10 ** 8), "-m 10, -h 100000000"),
    ("energy", dict(order=3, features=10, hidden=10 ** 8), "-m 10, -h 100000000"),
    ("lbl", dict(order=3, features=10 ** 8), "-m 100000000"),
    ("lbl1", dict(order=3, features=10, hidden=10 ** 8), "-m 10, -h 100000000"),
    ("rnn", dict(features=10 ** 8, hidden=10), "-m 100000000, -h 10"),
    ("lstm", dict(features=10, hidden=10 ** 8), "-m 10, -h 100000000"),
])
def test_a_network_too_large_for_memory_is_refused_before_it_is_allocated(four_gib, arch, settings, flags):
    vocab = Vocabulary(["the", "cat", "sat"])
    with pytest.raises(ParameterError) as caught:
        ARCHITECTURES[arch].initial(vocab, **settings)
    assert caught.value.render(spell).startswith(f"the parameters of -arch {arch} ({flags}, 6 words) would need ")
    assert caught.value.render(spell).endswith(" GiB), more than the 4.0 GiB of memory this process can have")
    small = {name: min(value, 1000) for name, value in settings.items()}
    assert ARCHITECTURES[arch].initial(vocab, **small).params  # 1,000 units fit


def test_buffers_too_large_for_memory_are_refused_before_they_are_allocated(four_gib):
    vocab = Vocabulary(["the", "cat", "sat"])
    mlp = ARCHITECTURES["mlp"].initial(vocab, order=3, features=10, hidden=10)
    with pytest.raises(ParameterError) as caught:
        Trainer(mlp, TrainingConfig(batch=10 ** 8, threads=2))
    # two workers, each at least 10 ** 8 windows of 2 x 10 inputs, 10 hidden units and 6 scores
    assert caught.value.render(spell) == ("-batch 100000000 (2 workers) would need 28,800,000,000 bytes (26.8 GiB), "
                                          "more than the 4.0 GiB of memory this process can have")
    Trainer(mlp, TrainingConfig(batch=10 ** 4, threads=2))
    rnn = ARCHITECTURES["rnn"].initial(vocab, features=10, hidden=10)
    for settings, flags in ((dict(streams=10 ** 8), "-streams 100000000 x -bptt 35"),
                            (dict(bptt=10 ** 8), "-streams 32 x -bptt 100000000")):
        with pytest.raises(ParameterError) as caught:
            Trainer(rnn, TrainingConfig.of(rnn, **settings))
        assert caught.value.render(spell).startswith(f"{flags} (1 worker) would need ")
    Trainer(rnn, TrainingConfig.of(rnn, streams=10 ** 4))


def test_a_size_too_large_for_memory_is_one_line_naming_the_option(capsys, tmp_path, train, four_gib):
    status, out, err = run_main(capsys, "train-nplm", "-text", train, "-m", 10 ** 8, "-epochs", 1, "-quiet",
                                "-lm", tmp_path / "m.nplm")
    assert (status, out) == (2, "")
    assert err.startswith("nplm: the parameters of -arch mlp (-m 100000000, -h 100, 7 words) would need ")
    assert len(err.splitlines()) == 1 and not (tmp_path / "m.nplm").exists()


def test_a_word_too_long_in_counts_is_named_with_its_file_and_line(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("NPLM_MAX_TOKEN_BYTES", "7")
    counts = tmp_path / "t.counts"
    counts.write_text("the\t3\nthe cat\t2\nthe elephant\t1\n")
    status, out, err = run_main(capsys, "ngram-count", "-read", counts, "-order", 2, "-lm", tmp_path / "x.arpa")
    assert (status, out, err) == (2, "", f"nplm: {counts}:3: a word of 8 bytes, longer than 7 (the limit: set "
                                         "NPLM_MAX_TOKEN_BYTES to raise it)\n")


def test_a_rate_times_a_decay_above_1_is_refused_in_the_library_too():
    """The trainer, not only the command line, refuses it: an API caller's schedule
    overflowed (lr 1000, weight decay 1, batch 512: an OverflowError)."""
    vocab = Vocabulary(["the", "cat", "sat"])
    mlp = ARCHITECTURES["mlp"].initial(vocab, order=3, features=4, hidden=4)
    with pytest.raises(ParameterError) as caught:
        Trainer(mlp, TrainingConfig(lr=1000, weight_decay=1, batch=512))
    assert caught.value.parameters == ("lr", "weight_decay")
    assert str(caught.value) == "lr 1000 times weight_decay 1 must be at most 1 (each update scales the weights by " \
                                "1 - rate x decay)"
    Trainer(mlp, TrainingConfig(lr=1, weight_decay=1))
