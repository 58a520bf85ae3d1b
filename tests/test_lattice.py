"""HTK lattices: the SLF reader's checks, the noise process that makes lattices from text,
and `nplm lattice-tool`'s 1-best and N-best against SRILM 1.7.3's lattice-tool on them
(tests/data/srilm/README.md: the commands)."""
import gzip
import os
from pathlib import Path

import pytest

from conftest import run_nplm
from nplmtk.errors import InputError
from nplmtk.lattice.htk import read_htk
from nplmtk.lattice.noise import Confusions, sentence_lattice
from nplmtk.rescore import read_nbest

DATA = Path(__file__).parent / "data" / "srilm"
LATTICES = DATA / "lattices"

GOOD = """VERSION=1.0
UTTERANCE=u1
base=10 lmscale=8
start=0 end=3
N=4 L=5
I=0 t=0.00
I=1 t=0.30
I=2 t=0.60
I=3 t=0.90
J=0 S=0 E=1 W=the a=-3.5 l=-1
J=1 S=0 E=1 W=a a=-3.0
J=2 S=1 E=2 W=dog a=-4
J=3 S=1 E=2 W=!NULL a=-6
J=4 S=2 E=3 W=</s> a=0
"""


def write(tmp_path, text, name="x.lat"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_reads_a_lattice_and_its_header(tmp_path):
    lattice = read_htk(write(tmp_path, GOOD))
    assert lattice.name == "u1" and lattice.start == 0 and lattice.end == 3
    assert [link.word for link in lattice.links] == ["the", "a", "dog", None, "</s>"]
    assert lattice.links[0].scores == {"a": -3.5, "l": -1.0} and lattice.base == 10
    assert lattice.order == [0, 1, 2, 3]


def test_reads_gzip_and_names_it_after_the_file(tmp_path):
    path = tmp_path / "utt7.lat.gz"
    with gzip.open(path, "wt") as f:
        f.write(GOOD.replace("UTTERANCE=u1\n", ""))
    assert read_htk(str(path)).name == "utt7"


@pytest.mark.parametrize("change, line, fragment", [
    (("J=2 S=1 E=2", "J=2 S=1 E=9"), 12, "refers to node 9"),
    (("J=4 S=2 E=3", "J=4 S=2 E=0"), 10, "cycle"),  # J=0, 0 -> 1, is on it
    (("start=0 end=3", "start=0 end=7"), 4, "end=7: no such node"),
    (("a=-4", "a=nan"), 12, "not a finite number"),
    (("a=-4", "a=1e999"), 12, "not a finite number"),
    (("I=2 t=0.60", "I=1 t=0.60"), 8, "defined twice"),
    (("N=4", "N=5"), 5, "N=5 but 4 nodes"),
    (("J=1 S=0 E=1", "J=1 E=1"), 11, "no S= node"),
    (("J=3 S=1 E=2", "J=3 S=1 E=2 zz=1"), 13, "not a field of a link"),
])
def test_each_malformed_lattice_is_one_error_naming_its_line(tmp_path, change, line, fragment):
    path = write(tmp_path, GOOD.replace(*change))
    with pytest.raises(InputError) as err:
        read_htk(path)
    assert err.value.path == path and err.value.line == line and fragment in str(err.value)


def test_an_unreachable_end_is_an_error(tmp_path):
    text = GOOD.replace("J=4 S=2 E=3 W=</s> a=0", "J=4 S=3 E=2 W=</s> a=0").replace("start=0 end=3", "start=0 end=3")
    with pytest.raises(InputError, match="cannot be reached|cycle|nodes without"):
        read_htk(write(tmp_path, text))


def test_the_noise_process_is_fixed_by_its_seed_and_keeps_the_true_path():
    train = [line.split() for line in (DATA / "train.txt").read_text().splitlines()]
    confusions = Confusions(train)
    words = "He was well rid of her .".split()
    one = sentence_lattice(words, "s", confusions, seed=1, number=3)
    assert one == sentence_lattice(words, "s", confusions, seed=1, number=3)
    assert one != sentence_lattice(words, "s", confusions, seed=2, number=3)
    links = [dict(f.split("=") for f in line.split()) for line in one.splitlines() if line.startswith("J=")]
    for i, word in enumerate(words, 1):  # the true word links node i-1 to node i, or through an insertion
        assert any(l["W"] == word and (l["S"], l["E"]) == (str(i - 1), str(i)) or l["W"] == word and l["E"] == str(i)
                   for l in links)


def _lattice_tool(tmp_path, *options):
    out = tmp_path / "nbest"
    out.mkdir()
    status, stdout, stderr = run_nplm("lattice-tool", "-read-htk", "-in-lattice-list", "list", "-lm",
                                      DATA / "kn3-unk.arpa.gz", "-unk", "-viterbi-decode", "-nbest-decode", 10,
                                      "-out-nbest-dir", out, *options, cwd=LATTICES)
    assert status == 0, stderr
    return stdout, out


@pytest.mark.parametrize("reference, options", [
    ("kn3", ("-order", 3)),
    ("kn3-o2", ("-order", 2, "-htk-lmscale", 12, "-htk-wdpenalty", -0.5)),
])
def test_one_best_and_nbest_are_lattice_tools_byte_for_byte(tmp_path, reference, options):
    stdout, out = _lattice_tool(tmp_path, *options)
    assert stdout == (LATTICES / f"1best-{reference}.txt").read_text()
    expected = sorted(os.listdir(LATTICES / f"nbest-{reference}"))
    assert sorted(os.listdir(out)) == expected
    for name in expected:
        with gzip.open(LATTICES / f"nbest-{reference}" / name, "rt") as a, gzip.open(out / name, "rt") as b:
            assert b.read() == a.read(), name


@pytest.mark.parametrize("reference, options", [
    ("posterior.txt", ()),
    # flatter posteriors: 7 of the 12 differ from the Viterbi 1-best
    ("posterior-s100.txt", ("-posterior-scale", 100, "-htk-acscale", 0.5)),
])
def test_posterior_decoding_is_lattice_tools(reference, options):
    status, stdout, stderr = run_nplm("lattice-tool", "-read-htk", "-in-lattice-list", "list", "-posterior-decode",
                                      *options, cwd=LATTICES)
    assert status == 0, stderr
    assert stdout == (LATTICES / reference).read_text()


@pytest.mark.parametrize("reference, options", [
    # a lattice and its own sentence: the best path's score
    ("ppl-sent00003.txt", ("-in-lattice", "sent00003.lat.gz", "-ppl", "true3.txt", "-htk-acscale", 0.5,
                           "-htk-wdpenalty", -1)),
    # every lattice and all 12 sentences: log 0, OOVs and zero probabilities counted as SRILM counts them
    ("ppl-list.txt", ("-in-lattice-list", "list", "-ppl", "true.txt")),
])
def test_lattice_ppl_is_lattice_tools(reference, options):
    status, stdout, stderr = run_nplm("lattice-tool", "-read-htk", *options, cwd=LATTICES)
    assert status == 0, stderr
    assert stdout == (LATTICES / reference).read_text()


def test_the_word_mesh_keeps_the_posterior_mass():
    from nplmtk.lattice import htk
    from nplmtk.lattice.decode import Graph, Scales, srilm_graph
    from nplmtk.lattice.posterior import DELETE, word_mesh
    lattice = htk.read_htk(str(LATTICES / "sent00002.lat.gz"))
    mesh = word_mesh(Graph(*srilm_graph(lattice, Scales().of(lattice), lambda w: w)), 8.0)
    assert mesh.total == pytest.approx(1.0)
    for column in mesh.columns:  # each column a distribution over its words and *DELETE*
        assert sum(column.values()) == pytest.approx(1.0, abs=1e-5)
    assert [w for w in mesh.best_words()] == (LATTICES / "posterior.txt").read_text().splitlines()[2].split()[1:]
    assert DELETE not in mesh.best_words()


def test_nplm_rescore_reads_the_nbest_lists(tmp_path):
    _, out = _lattice_tool(tmp_path, "-order", 3)
    hypotheses = read_nbest(str(out / "sent00001.gz"))
    assert len(hypotheses) == 10 and hypotheses[0].words[0] != "<s>" and hypotheses[0].words[-1] == "."


def test_a_bad_lattice_is_one_line_and_the_others_go_on(tmp_path):
    bad = tmp_path / "bad.lat"
    bad.write_text(GOOD.replace("E=2 W=dog", "E=8 W=dog"))
    good = tmp_path / "good.lat"
    good.write_text(GOOD)
    listing = tmp_path / "list"
    listing.write_text(f"{bad}\n{good}\n")
    status, stdout, stderr = run_nplm("lattice-tool", "-read-htk", "-in-lattice-list", listing, "-viterbi-decode")
    assert status == 2
    assert stderr.splitlines() == [f"nplm: {bad}:12: link J=2 refers to node 8, which is not defined"]
    assert stdout == "u1 <s> a dog </s>\n"


def test_written_lattices_read_back_as_they_were(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    paths = [LATTICES / f"sent0000{i}.lat.gz" for i in range(3)]
    status, _, stderr = run_nplm("lattice-tool", "-read-htk", *[arg for p in paths for arg in ("-in-lattice", p)],
                                 "-write-htk", "-out-lattice-dir", out)
    assert status == 0, stderr
    for path in paths:
        before, after = read_htk(str(path)), read_htk(str(out / path.name))
        assert (before.name, before.header) == (after.name, after.header)
        for old, new in zip(before.nodes + before.links, after.nodes + after.links, strict=True):
            assert all(getattr(old, name) == getattr(new, name) for name in old.__slots__ if name != "line")
    assert run_nplm("lattice-tool", "-read-htk", "-in-lattice", paths[0], "-write-htk")[::2] == \
        (2, "nplm: -write-htk needs -out-lattice-dir\n")


def test_word_errors_count_substitutions_deletions_and_insertions():
    from nplmtk.lattice.wer import word_error_rate, word_errors
    assert word_errors("a b c".split(), "a b c".split()) == 0
    assert word_errors("a b c".split(), "a x c".split()) == 1
    assert word_errors("a b c".split(), "a c".split()) == 1
    assert word_errors("a b c".split(), "a b b c".split()) == 1
    assert word_errors("a b c".split(), []) == 3 and word_errors([], "a b".split()) == 2
    assert word_errors("the cat sat".split(), "cat sat down".split()) == 2
    assert word_error_rate([["a", "b"], ["c", "d"]], [["a"], ["c", "d", "e"]]) == (0.5, 2, 4)
