"""The `nplm` command as a user meets it: outputs, help, and one-line errors."""
import gzip
import os
import subprocess
import sys

import pytest

from conftest import NPLM, assert_one_line_error

TRAIN = "the cat sat\nthe dog sat\na cat ran\n"


@pytest.fixture
def train(tmp_path):
    path = tmp_path / "train.txt"
    path.write_text(TRAIN)
    return str(path)


def test_vocab_writes_vocab_and_counts_with_gzip(nplm, train, tmp_path):
    status, out, err = nplm("vocab", "-text", train, "-min-count", "2",
                            "-write-vocab", tmp_path / "v.txt.gz", "--write-counts", tmp_path / "c.txt")
    assert status == 0, err
    assert gzip.open(tmp_path / "v.txt.gz", "rt").read() == "<unk>\n<s>\n</s>\ncat\nsat\nthe\n"
    assert open(tmp_path / "c.txt").read() == "<unk>\t3\n<s>\t3\n</s>\t3\ncat\t2\nsat\t2\nthe\t2\n"


def test_vocab_reads_stdin_and_writes_stdout(nplm):
    status, out, err = nplm("vocab", "-text", "-", "-lower", stdin="The cat\nthe CAT 42\n")
    assert status == 0, err
    assert out.split() == ["<unk>", "<s>", "</s>", "cat", "the", "42"]
    status, out, err = nplm("vocab", "-text", "-", "-map-numbers", stdin="cat 42\ncat 7\n")
    assert out.split() == ["<unk>", "<s>", "</s>", "<num>", "cat"]


def test_every_help_ends_with_an_example(nplm):
    for command in ["vocab", "toy-corpus", "ngram-count", "ppl", "train-nplm", "mix"]:
        status, out, _ = nplm(command, "--help")
        assert status == 0
        assert out.rstrip().splitlines()[-1].strip().startswith("nplm ")


def test_train_is_an_alias_of_train_nplm(nplm):
    alias, full = nplm("train", "--help")[1], nplm("train-nplm", "--help")[1]
    assert alias.splitlines()[1:] == full.splitlines()[1:] and "Bengio et al. (2003)" in alias


@pytest.mark.parametrize("make_args, fragment", [
    (lambda d: ["vocab", "-text", d / "missing.txt"], "missing.txt: no such file"),
    (lambda d: ["vocab", "-text", d], "is a directory"),
    (lambda d: ["vocab", "-text", d / "empty.txt"], "empty.txt: empty corpus"),
    (lambda d: ["vocab", "-text", d / "latin1.txt"], "latin1.txt:2: invalid UTF-8"),
    (lambda d: ["vocab", "-text", d / "train.txt", "-bogus", "1"], "no such option: -bogus"),
    (lambda d: ["vocab", "-text", d / "train.txt", "--bogus"], "--bogus"),
    # click reads '-tolower' as '-t olower': name what was typed, not -text, and the nearest option
    (lambda d: ["vocab", "-text", d / "train.txt", "-tolower"], "no such option: -tolower (did you mean -lower?)"),
    (lambda d: ["ppl", "-lm", d / "train.txt", "-lmit-vocab", "-text", d / "train.txt"],
     "no such option: -lmit-vocab (did you mean -limit-vocab?)"),
    (lambda d: ["ppl", "-lm", d / "kenlm.binary", "-text", d / "train.txt"],
     "kenlm.binary: a KenLM binary model (written by KenLM's build_binary), not ARPA text"),
    (lambda d: ["vocab", "-text", d / "train.txt", "-min-count", "zero"], "min-count"),
    (lambda d: ["vocab", "-text", d / "train.txt", "-write-vocab", d / "no" / "dir" / "v.txt"], "does not exist"),
    (lambda d: ["no-such-command"], "no-such-command"),
    (lambda d: ["toy-corpus", "-score", d / "missing.txt"], "missing.txt: no such file"),
])
def test_bad_input_is_one_line_and_exit_2(nplm, tmp_path, make_args, fragment):
    (tmp_path / "train.txt").write_text(TRAIN)
    (tmp_path / "empty.txt").write_text("\n \n")
    (tmp_path / "latin1.txt").write_bytes("ok\ncaf\xe9\n".encode("latin-1"))
    (tmp_path / "kenlm.binary").write_bytes(b"mmap lm http://kheafield.com/code format version 5\n\0\x01\x02")
    status, out, err = nplm(*make_args(tmp_path))
    assert_one_line_error(status, err, fragment)
    assert out == ""
    assert sorted(os.listdir(tmp_path)) == ["empty.txt", "kenlm.binary", "latin1.txt", "train.txt"]


def test_a_failing_run_keeps_the_previous_output(nplm, train, tmp_path):
    vocab = tmp_path / "v.txt"
    vocab.write_text("precious\n")
    status, _, err = nplm("vocab", "-text", train, "-text", tmp_path / "missing.txt", "-write-vocab", vocab)
    assert status == 2
    assert vocab.read_text() == "precious\n"


def test_toy_corpus_is_deterministic_and_scored(nplm, tmp_path):
    first = nplm("toy-corpus", "-sentences", 50, "-seed", 3)[1]
    assert first == nplm("toy-corpus", "-sentences", 50, "-seed", 3)[1]
    assert first != nplm("toy-corpus", "-sentences", 50, "-seed", 4)[1]
    assert len(first.splitlines()) == 50
    (tmp_path / "t.txt").write_text(first)
    status, out, err = nplm("toy-corpus", "-score", tmp_path / "t.txt")
    assert status == 0 and "true model ppl=" in out and "entropy floor ppl=" in out


def test_ngram_count_and_ppl_read_stdin_and_gzip(nplm, tmp_path):
    text = nplm("toy-corpus", "-sentences", 400, "-seed", 5)[1]
    with gzip.open(tmp_path / "train.txt.gz", "wt") as f:
        f.write(text)
    status, _, err = nplm("ngram-count", "-text", "-", "-order", 3, "-lm", tmp_path / "a.arpa.gz", stdin=text)
    assert status == 0, err
    status, _, err = nplm("ngram-count", "-text", tmp_path / "train.txt.gz", "-order", 3, "-lm", tmp_path / "b.arpa")
    assert status == 0, err
    assert gzip.open(tmp_path / "a.arpa.gz").read() == (tmp_path / "b.arpa").read_bytes()
    first = nplm("ppl", "-lm", tmp_path / "a.arpa.gz", "-text", "-", stdin=text)[1]
    second = nplm("ppl", "-lm", tmp_path / "b.arpa", "-ppl", tmp_path / "train.txt.gz")[1]
    assert first.splitlines()[1] == second.splitlines()[1] and "400 sentences" in first


def test_ppl_lower_and_map_numbers_match_the_training_normalisation(nplm, tmp_path):
    (tmp_path / "train.txt").write_text("the cat saw 3 dogs\nthe dog saw 12 cats\n" * 30)
    status, _, err = nplm("ngram-count", "-text", tmp_path / "train.txt", "-order", 2, "-lower", "-map-numbers",
                          "-lm", tmp_path / "m.arpa")
    assert status == 0, err
    (tmp_path / "test.txt").write_text("The CAT saw 7 dogs\n")
    plain = nplm("ppl", "-lm", tmp_path / "m.arpa", "-text", tmp_path / "test.txt")[1]
    normalised = nplm("ppl", "-lm", tmp_path / "m.arpa", "-text", tmp_path / "test.txt", "-lower", "-map-numbers")[1]
    assert "3 OOVs" in plain and "0 OOVs" in normalised


def test_the_entry_point_ends_the_process_after_atexit_and_the_output(tmp_path, train):
    """main() as the console script calls it ends the process itself after a command
    (no interpreter teardown): atexit's functions have run, the output is whole, and a
    thread still running makes it return, for the usual exit, which waits for the thread."""
    marker = tmp_path / "atexit.txt"
    script = ("import atexit, sys, threading\n"
              "from nplmtk.cli.main import main\n"
              "marker = sys.argv[1]\n"
              "atexit.register(lambda: open(marker, 'a').write('atexit\\n'))\n"
              "returned = threading.Event()\n"  # the thread runs on until main() has returned, however slow
              "if sys.argv[2] == 'thread':\n"
              "    threading.Thread(target=lambda: (returned.wait(), print('thread'))).start()\n"
              "sys.argv = ['nplm', 'vocab', '-text', sys.argv[3]]\n"
              "main()\n"
              "print('not reached')\n"
              "returned.set()\n")
    for thread in ("none", "thread"):
        proc = subprocess.run([sys.executable, "-c", script, marker, thread, train], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        vocabulary = ["<unk>", "<s>", "</s>", "cat", "sat", "the", "a", "dog", "ran"]
        assert proc.stdout.split() == vocabulary + (["not", "reached", "thread"] if thread == "thread" else [])
    assert marker.read_text() == "atexit\n" * 2


def test_version_in_gnu_and_srilm_spelling(nplm):
    """Issue 33, item 7: `nplm --version` and SRILM's `-version` (of every program)."""
    from importlib.metadata import version
    for args in (["--version"], ["-version"], ["ngram", "-version"], ["ngram-count", "-version"]):
        status, out, err = nplm(*args)
        assert (status, out, err) == (0, f"nplm (nplmtk) {version('nplmtk')}\n", "")


def test_srilm_program_names_are_aliases(nplm, train):
    """Issue 33, item 7: an SRILM script needs only `nplm ` in front (`ngram -lm X -ppl T`
    was "No such command 'ngram'")."""
    import pathlib
    lm = pathlib.Path(train).with_name("kn2.arpa")
    assert nplm("ngram-count", "-text", train, "-order", 2, "-wbdiscount", "-lm", lm)[0] == 0
    ours, srilms = nplm("ppl", "-lm", lm, "-text", train), nplm("ngram", "-lm", lm, "-ppl", train)
    assert ours == srilms and ours[0] == 0 and "ppl= " in ours[1]


def test_a_pipe_read_twice_by_a_command_is_one_text(nplm, train, tmp_path):
    """`-text <(zcat ...)` gave 'empty corpus' to the commands that pass over a text twice
    (a vocabulary first), and a FIFO made them wait for ever for a second writer: within a
    command a pipe is now kept as stdin is."""
    import threading
    assert nplm("ngram-count", "-text", train, "-order", 2, "-wbdiscount", "-lm", tmp_path / "file.arpa")[0] == 0
    piped = subprocess.run(["bash", "-c", f"'{NPLM}' ngram-count -text <(cat '{train}') -order 2 -wbdiscount "
                                          f"-lm '{tmp_path / 'pipe.arpa'}'"], capture_output=True, text=True, timeout=60)
    assert piped.returncode == 0, piped.stderr
    assert (tmp_path / "pipe.arpa").read_text() == (tmp_path / "file.arpa").read_text()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_text(open(train).read()))
    writer.start()
    report = subprocess.run([NPLM, "ppl", "-lm", tmp_path / "file.arpa", "-text", fifo, "-debug", "1"],
                            capture_output=True, text=True, timeout=60)
    writer.join()
    assert report.returncode == 0 and report.stdout == nplm("ppl", "-lm", tmp_path / "file.arpa", "-text", train,
                                                            "-debug", 1)[1].replace(train, str(fifo)), report.stderr
