"""`nplm lattice-tool` on hostile or degenerate lattices (issue 49): each refusal one line
naming the file (and line) with exit status 2 and the other lattices still done; a
lattice that no path can be scored on a warning line and SRILM's empty results."""
import gzip
import os
from pathlib import Path

import pytest

from conftest import run_nplm

MODEL = Path(__file__).parent / "data" / "srilm" / "kn3-unk.arpa.gz"

LATTICE = """VERSION=1.0
UTTERANCE={name}
base=10
lmscale=8
start=0\tend=2
N=3\tL=3
I=0\tt=0.00
I=1\tt=0.25
I=2\tt=0.50
J=0\tS=0\tE=1\tW={word}\ta=-10
J=1\tS=0\tE=1\tW=a\ta=-12
J=2\tS=1\tE=2\tW=the\ta=-10
"""


def lattice(tmp_path, file="x.lat", name="x", word="the", change=None):
    text = LATTICE.format(name=name, word=word)
    path = tmp_path / file
    path.write_text(text.replace(*change) if change else text)
    return path


def tool(*args):
    return run_nplm("lattice-tool", "-read-htk", *args)


def test_a_gzip_bomb_of_newlines_is_refused_as_it_is_read(tmp_path, monkeypatch):
    bomb = tmp_path / "bomb.lat.gz"
    with gzip.open(bomb, "wb") as f:
        f.write(LATTICE.format(name="b", word="the").encode() + b"\n" * (3 << 20))
    monkeypatch.setenv("NPLM_MAX_LATTICE_BYTES", str(1 << 20))
    good = lattice(tmp_path)
    status, out, err = tool("-in-lattice", bomb, "-in-lattice", good, "-viterbi-decode")
    assert status == 2 and out == "x <s> the the </s>\n"
    assert err == f"nplm: {bomb}: larger than 1048576 bytes (the limit: set NPLM_MAX_LATTICE_BYTES to raise it)\n"


@pytest.mark.parametrize("base, line, fragment", [
    ("base=0", 10, "a=-10 with base=0 (scores as probabilities): below 0"),
    ("base=1e-300", 3, "base=1e-300: must be 0 (probabilities) or a number from about 1e-45"),
    ("base=1e39", 3, "base=1e39: must be 0"),
])
def test_a_base_without_a_logarithm_is_one_line_naming_the_line(tmp_path, base, line, fragment):
    path = lattice(tmp_path, change=("base=10", base))
    status, out, err = tool("-in-lattice", path, "-viterbi-decode")
    assert (status, out) == (2, "") and err.startswith(f"nplm: {path}:{line}: {fragment}") and err.count("\n") == 1


def test_probabilities_with_base_0_are_read(tmp_path):
    path = lattice(tmp_path, change=("base=10", "base=0"))
    path.write_text(path.read_text().replace("a=-10", "a=0.5").replace("a=-12", "a=0.25"))
    assert tool("-in-lattice", path, "-viterbi-decode") == (0, "x <s> the the </s>\n", "")


def test_a_lattice_no_path_of_which_the_model_scores_warns_in_every_decoding(tmp_path):
    """As lattice-tool: an empty 1-best, an empty N-best file (lattice-tool's posterior line
    is its words backwards, here the name alone); and a warning naming the lattice."""
    lost = lattice(tmp_path, "lost.lat", "lost", change=("W=the\ta=-10\n", "W=zzqqxx\ta=-10\n"))
    good = lattice(tmp_path, "good.lat", "good")
    warning = f"nplm lattice-tool: warning: {lost}: no path through the lattice has a probability above 0 with " \
              "-lm: the result is empty\n"
    lm = ("-lm", MODEL, "-order", "3", "-in-lattice", lost, "-in-lattice", good)
    assert tool(*lm, "-viterbi-decode") == (0, "lost\ngood <s> the the </s>\n", warning)
    status, out, err = tool(*lm, "-posterior-decode")
    assert (status, out.splitlines()[0], err) == (0, "lost", warning)
    status, out, err = tool(*lm, "-nbest-decode", "5", "-out-nbest-dir", tmp_path / "nb")
    assert (status, err) == (0, warning)
    assert gzip.open(tmp_path / "nb" / "lost.gz").read() == b"" and gzip.open(tmp_path / "nb" / "good.gz").read()


def test_scales_that_would_overflow_a_float32_are_refused(tmp_path):
    path = lattice(tmp_path)
    status, out, err = tool("-in-lattice", path, "-htk-acscale", "1e39", "-viterbi-decode")
    assert status == 2 and out == "" and err.count("\n") == 1 and "-htk-acscale" in err
    huge = lattice(tmp_path, "huge.lat", change=("lmscale=8", "lmscale=8 acscale=1e31"))
    assert tool("-in-lattice", huge, "-viterbi-decode") == \
        (2, "", f"nplm: {huge}:4: acscale=1e+31: beyond the scales' limit, 1e+30 in size\n")
    far = lattice(tmp_path, "far.lat", change=("J=1\tS=0\tE=1\tW=a\ta=-12", "J=1\tS=0\tE=1\tW=a\ta=-1e38"))
    far.write_text(far.read_text().replace("lmscale=8", "lmscale=8 acscale=1e10"))
    assert tool("-in-lattice", far, "-viterbi-decode") == \
        (2, "", f"nplm: {far}:11: link J=1: its scores times the scales overflow a float32\n")


def test_a_negative_lmscale_names_what_needs_it(tmp_path):
    """lmscale=-10 under -viterbi-decode spoke of the N-best search."""
    path = lattice(tmp_path, change=("lmscale=8", "lmscale=-10"))
    status, out, err = tool("-in-lattice", path, "-lm", MODEL, "-viterbi-decode")
    assert (status, out, err) == (2, "", f"nplm: {path}: lmscale not given (or not above 0): decoding with a "
                                         "language model weighs its scores by it\n")
    status, out, err = tool("-in-lattice", path, "-nbest-decode", 2, "-out-nbest-dir", tmp_path / "nbest")
    assert status == 2 and err.endswith("the N-best search needs it\n")


def test_output_names_are_plain_and_written_once_a_run(tmp_path):
    hidden = lattice(tmp_path, "hidden.lat", "a/")
    first = lattice(tmp_path, "first.lat", "same", word="a")
    second = lattice(tmp_path, "second.lat", "same")
    out = tmp_path / "nb"
    status, _, err = tool("-in-lattice", hidden, "-in-lattice", first, "-in-lattice", second, "-nbest-decode", "3",
                          "-out-nbest-dir", out)
    assert status == 2 and err.splitlines() == [
        f"nplm: {hidden}:2: UTTERANCE=a/ gives the name '', not a plain file name for the outputs",
        f"nplm: {second}: a lattice named 'same' was written already in this run (from {first}): not replaced"]
    assert sorted(os.listdir(out)) == ["same.gz"]
    assert gzip.open(out / "same.gz").read().decode().split("\n")[0].endswith("<s> a the </s> ")


def test_parallel_links_give_one_hypothesis_a_word_string(tmp_path):
    """20,000 links between the same two nodes with one word: lattice-tool's 100-best is that
    one string, with the best link's score. Time and memory grow linearly (200,000 such links:
    6.1 s CPU, 385 MB, against 1.4 s for 20,000, start-up included)."""
    links = [f"J={j}\tS=0\tE=1\tW=the\ta=-{10 + j % 97 * 0.01:.2f}" for j in range(20000)]
    path = tmp_path / "par.lat"
    path.write_text("UTTERANCE=par\nbase=10\nlmscale=8\nstart=0\tend=1\nN=2\tL=20000\nI=0\tt=0\nI=1\tt=0.25\n"
                    + "\n".join(links))
    status, _, err = tool("-in-lattice", path, "-lm", MODEL, "-order", "3", "-nbest-decode", "100", "-out-nbest-dir",
                          tmp_path / "nb")
    assert (status, err) == (0, "")
    assert gzip.open(tmp_path / "nb" / "par.gz").read().decode().splitlines() == ["-10 -4.716324 1 <s> the </s> "]


@pytest.mark.parametrize("change, fragment", [
    (("J=1\tS=0", "J=0\tS=0"), "link J=0 defined twice"),
    (("I=1\tt=0.25", "I=0\tt=0.25"), "node I=0 defined twice"),
    (("J=2\tS=1\tE=2", "J=2\tS=1\tE=7"), "refers to node 7, which is not defined"),
    (("J=2\tS=1\tE=2", "J=2\tS=1\tE=0"), "cycle"),
    (("start=0\tend=2", "start=123456789012345678901234\tend=2"), "no such node"),
    (("start=0\tend=2", "start=2\tend=0"), "cannot be reached"),
    (("start=0\tend=2", "end=2"), "2 nodes without links in"),  # no start=, and nodes 0 and 2 have none
])
def test_the_compiled_checks_refuse_what_the_python_checks_name(tmp_path, change, fragment):
    """A lattice htk_reader scans but lattice_graph's checks refuse (before any kernel reads
    its indices) gets the message of htk.py's checks."""
    from nplmtk._ext.lattice_graph import lattice_order
    from nplmtk.errors import InputError
    from nplmtk.lattice import htk
    text = LATTICE.format(name="x", word="the").replace(*change)
    if fragment.endswith("links in"):
        text = text.replace("J=2\tS=1\tE=2", "J=2\tS=0\tE=1")
    header, _, scanned = htk._scanned("x.lat", text.encode())
    start, end = int(header.get("start", -1)), int(header.get("end", -1))
    assert max(start, end) >= 1 << 62 or lattice_order(scanned.node_ints, scanned.link_ints, start, end) is None
    path = tmp_path / "x.lat"
    path.write_text(text)
    with pytest.raises(InputError, match=fragment):
        htk.read_htk(str(path))


def test_the_quick_reader_of_a_lattice_gives_read_bytes_result_or_error(tmp_path, monkeypatch):
    """read_small_bytes (zlib in one call for one gzip member of ASCII text) gives what
    read_bytes gives, its refusals word for word: plain text, one member, two members, a
    word in UTF-8, a bad CRC, a truncated file, a line past the limit, a text past the size."""
    from nplmtk.errors import InputError
    from nplmtk.io import read_bytes, read_small_bytes
    text = LATTICE.format(name="x", word="the").encode()
    one = gzip.compress(text)
    cases = {"plain.lat": text, "one.lat.gz": one, "two.lat.gz": one + gzip.compress(b"I=9\n"),
             "utf8.lat.gz": gzip.compress(text.replace(b"the", "th\u00e9".encode())),
             "crc.lat.gz": one[:-8] + bytes([one[-8] ^ 1]) + one[-7:], "cut.lat.gz": one[:-3],
             "long.lat.gz": gzip.compress(text + b"x" * 2000), "big.lat.gz": gzip.compress(text * 20)}
    limit = (len(text) * 10, "NPLM_MAX_LATTICE_BYTES")

    def outcome(read, path):
        try:
            return read(path)
        except InputError as err:
            return str(err)
    monkeypatch.setenv("NPLM_MAX_LINE_BYTES", "1000")
    seen = set()
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        path = str(tmp_path / name)
        expected = outcome(lambda p: read_bytes(p, keep=False, size_limit=limit), path)
        assert outcome(lambda p: read_small_bytes(p, limit), path) == expected, name
        seen.add(expected if isinstance(expected, str) else len(expected))
    assert len(seen) == len(cases) - 1  # the plain and the one-member file: the same text


def test_header_lines_shared_by_lattices_keep_each_files_line_numbers_and_checks(tmp_path):
    """htk._scanned keeps a header line's checked fields for the next lattice: each file's
    own line numbers still come out, and a bad line is still refused naming its file."""
    from nplmtk.errors import InputError
    from nplmtk.lattice.htk import read_htk
    first = read_htk(lattice(tmp_path, "a.lat"))
    assert first.header_lines["lmscale"] == 4 and first.header["lmscale"] == "8"
    moved = read_htk(lattice(tmp_path, "b.lat", change=("VERSION=1.0\n", "VERSION=1.0\n\n\n")))
    assert moved.header_lines["lmscale"] == 6 and moved.header == first.header
    with pytest.raises(InputError, match="lmscale=8x: not a finite number") as err:
        read_htk(lattice(tmp_path, "c.lat", change=("lmscale=8", "lmscale=8x")))
    assert "c.lat" in str(err.value) and ":4" in str(err.value)
