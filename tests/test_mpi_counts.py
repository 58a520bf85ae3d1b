"""`nplm ngram-count -mpi` under `mpiexec -n R` (issue 35, item 3): each rank counts its
share of the text, the counts are exchanged by first word, and rank 0 writes the model
the text counted on one machine gives, byte for byte."""
import os
import subprocess
import sys

import pytest

from conftest import NPLM, assert_one_line_error, run_nplm
from nplmtk.errors import InputError
from nplmtk.io import line_starts_near, read_text_range
from test_stream import WORDS, zipf_lines

MPIEXEC = os.path.join(os.path.dirname(sys.executable), "mpiexec")
TRAIN = os.path.join(os.path.dirname(__file__), "data", "srilm", "train.txt")


def mpi_nplm(ranks, *args):
    proc = subprocess.run([MPIEXEC, "-n", str(ranks), NPLM, *map(str, args)], capture_output=True, text=True,
                          timeout=180)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize("ranks, memory", [(1, "2G"), (2, "1M"), (3, "1M"), (3, "2G")])
def test_ranks_counting_their_shares_write_the_one_machine_model(tmp_path, ranks, memory):
    """At -memory 1M every rank's counts go to disk in runs and are exchanged in rounds."""
    common = ["-text", TRAIN, "-order", 4, "-lm"]
    assert run_nplm("ngram-count", *common, tmp_path / "one.arpa", "-write-binary", tmp_path / "one.counts")[0] == 0
    status, _, err = mpi_nplm(ranks, "ngram-count", *common, tmp_path / "mpi.arpa", "-mpi", "-memory", memory,
                              "-write-binary", tmp_path / "mpi.counts")
    assert status == 0, err
    assert (tmp_path / "mpi.arpa").read_bytes() == (tmp_path / "one.arpa").read_bytes()
    assert (tmp_path / "mpi.counts").read_bytes() == (tmp_path / "one.counts").read_bytes()


@pytest.mark.parametrize("vocab_options", [(), ("-unk",), ("-closed",)])
def test_ranks_estimating_their_parts_write_the_one_machine_model(tmp_path, vocab_options):
    """KN5 of Zipf text (words whose byte order is not their id order) on 2 and 3 ranks
    at -memory 1M: several rounds of suffix questions and windows of answers a rank."""
    (tmp_path / "t.txt").write_text("\n".join(zipf_lines(7, 4000, [f"w{i}" for i in range(300)] + WORDS[-4:])) + "\n")
    (tmp_path / "v.txt").write_text("\n".join([f"w{i}" for i in range(250)] + ["Ä", "B"]) + "\n")
    common = ["-text", tmp_path / "t.txt", "-order", 5] + (["-vocab", tmp_path / "v.txt"] if vocab_options else [])
    common += [option for option in vocab_options if option != "-closed"]
    one = run_nplm("ngram-count", *common, "-lm", tmp_path / "one.arpa", "-write-bin-lm", tmp_path / "one.nplm")
    assert one[0] == 0
    for ranks in (2, 3):
        status, _, err = mpi_nplm(ranks, "ngram-count", *common, "-mpi", "-memory", "1M", "-debug", 1,
                                  "-lm", tmp_path / "mpi.arpa", "-write-bin-lm", tmp_path / "mpi.nplm")
        assert status == 0, err
        assert (tmp_path / "mpi.arpa").read_bytes() == (tmp_path / "one.arpa").read_bytes()
        assert (tmp_path / "mpi.nplm").read_bytes() == (tmp_path / "one.nplm").read_bytes()
        assert err.count("Kneser-Ney smoothing 5-grams") == 1  # the discounts told once, by rank 0


def test_ranks_without_lines_count_nothing(tmp_path):
    (tmp_path / "t.txt").write_text("a b c a b\n")
    assert run_nplm("ngram-count", "-text", tmp_path / "t.txt", "-lm", tmp_path / "one.arpa")[0] == 0
    status, _, err = mpi_nplm(3, "ngram-count", "-text", tmp_path / "t.txt", "-mpi", "-lm", tmp_path / "mpi.arpa")
    assert status == 0, err
    assert (tmp_path / "mpi.arpa").read_bytes() == (tmp_path / "one.arpa").read_bytes()


def test_bad_text_in_one_share_is_one_line_naming_the_rank_and_the_line(tmp_path):
    lines = open(TRAIN, "rb").read().splitlines(keepends=True)
    lines[len(lines) * 3 // 4] = b"caf\xe9 au lait\n"  # in the last rank's share
    (tmp_path / "bad.txt").write_bytes(b"".join(lines))
    (tmp_path / "v.txt").write_text("a\n")  # with -vocab only the share's rank reads the bad line
    status, _, err = mpi_nplm(2, "ngram-count", "-text", tmp_path / "bad.txt", "-vocab", tmp_path / "v.txt",
                              "-mpi", "-lm", tmp_path / "m.arpa")
    assert_one_line_error(status, err, "rank 1 of 2: ", f"bad.txt:{len(lines) * 3 // 4 + 1}: ")
    assert not (tmp_path / "m.arpa").exists()


@pytest.mark.parametrize("make, fragment", [
    (lambda d: "-", "-mpi shares a text out by byte ranges: give a regular file"),
    (lambda d: d / "t.txt.gz", "give it uncompressed"),
])
def test_texts_that_cannot_be_shared_out_are_refused(tmp_path, make, fragment):
    import gzip
    with gzip.open(tmp_path / "t.txt.gz", "wt") as out:
        out.write("a b\n" * 10)
    (tmp_path / "v.txt").write_text("a\nb\n")
    status, _, err = mpi_nplm(2, "ngram-count", "-text", make(tmp_path), "-vocab", tmp_path / "v.txt", "-mpi",
                              "-lm", tmp_path / "m.arpa")
    assert_one_line_error(status, err, fragment)


def test_byte_ranges_from_line_starts_read_every_line_once(tmp_path):
    text = b"".join(b"w%d x\n" % i for i in range(1000)) + b"last"
    (tmp_path / "t.txt").write_bytes(text)
    for parts in (1, 2, 7, 5000):
        bounds = line_starts_near(str(tmp_path / "t.txt"), [len(text) * q // parts for q in range(parts + 1)])
        assert bounds[0] == 0 and bounds[-1] == len(text)
        read = b"".join(block for start, stop in zip(bounds, bounds[1:])
                        for block in read_text_range(str(tmp_path / "t.txt"), start, stop))
        assert read.split(b"\n") == text.split(b"\n")
    (tmp_path / "b.txt").write_bytes(b"a\nb\nc\xff\nd\n")
    with pytest.raises(InputError) as caught:
        list(read_text_range(str(tmp_path / "b.txt"), 4, 9))
    assert caught.value.line == 3
