"""HTK lattices: the SLF reader's checks, the noise process that makes lattices from text,
and `nplm lattice-tool`'s 1-best and N-best against SRILM 1.7.3's lattice-tool on them
(tests/data/srilm/README.md: the commands)."""
import gzip
import os
from collections import Counter
from pathlib import Path

import pytest

from conftest import CHAIN_LATTICE as CHAIN, run_nplm
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


@pytest.mark.parametrize("reference, options", [
    ("ppl-sent00003-kn3.txt", ("-in-lattice", "sent00003.lat.gz", "-ppl", "true3.txt", "-order", 3)),
    ("ppl-list-kn3-o2.txt", ("-in-lattice-list", "list", "-ppl", "true.txt", "-order", 2, "-htk-lmscale", 12,
                             "-htk-wdpenalty", -0.5)),
])
def test_lattice_ppl_with_a_model_reads_the_expanded_lattice_as_lattice_tool(reference, options):
    """With -lm the lattice-as-model is the expanded lattice, its links weighing the model's
    log10 probabilities alone (SRILM's expandToLM leaves the acoustic scores off the weights)."""
    status, stdout, stderr = run_nplm("lattice-tool", "-read-htk", "-lm", DATA / "kn3-unk.arpa.gz", "-unk", *options,
                                      cwd=LATTICES)
    assert status == 0, stderr
    assert stdout == (LATTICES / reference).read_text()


def test_posterior_decoding_with_a_model_is_lattice_tools_where_no_tie_decides():
    """The mesh of the expanded lattice. Paths of equal weight are common there (the model's
    scores alone): lattice-tool breaks their ties by its hash tables' order of its own node
    numbers, nplm by its own; on 7 of the 12 lattices (and 96 of Brown's first 100 with KN3)
    no tie decides and the words are the same."""
    status, stdout, stderr = run_nplm("lattice-tool", "-read-htk", "-in-lattice-list", "list", "-lm",
                                      DATA / "kn3-unk.arpa.gz", "-unk", "-order", 3, "-posterior-decode", cwd=LATTICES)
    assert status == 0, stderr
    ours, theirs = stdout.splitlines(), (LATTICES / "posterior-kn3.txt").read_text().splitlines()
    assert [line.split()[0] for line in ours] == [line.split()[0] for line in theirs]
    same = [k for k, (a, b) in enumerate(zip(ours, theirs)) if a == b]
    assert same == [0, 1, 2, 3, 4, 8, 9]


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


def _nbest_of(directory, name):
    with gzip.open(directory / name, "rt") as f:
        return [line.split() for line in f]


def _decode_written(tmp_path, directory, tag):
    """The 10-best of the lattices in `directory` decoded without a model."""
    listing = tmp_path / f"{tag}.list"
    listing.write_text("".join(f"{p}\n" for p in sorted(directory.glob("*.lat.gz"))))
    out = tmp_path / f"{tag}-nbest"
    out.mkdir()
    status, stdout, stderr = run_nplm("lattice-tool", "-read-htk", "-in-lattice-list", listing, "-viterbi-decode",
                                      "-nbest-decode", 10, "-out-nbest-dir", out)
    assert status == 0, stderr
    return stdout, out


def _links(path):
    """The links of a lattice as (start time, end time, word, scores), counted."""
    lattice = read_htk(str(path))
    time = {node.number: node.time for node in lattice.nodes}
    return Counter((time[l.start], time[l.end], l.word, tuple(sorted(l.scores.items()))) for l in lattice.links)


@pytest.mark.parametrize("reference, options", [
    ("kn3", ("-order", 3)),
    ("kn3-o2", ("-order", 2, "-htk-lmscale", 12, "-htk-wdpenalty", -0.5)),
])
def test_the_expanded_lattice_is_lattice_tools(tmp_path, reference, options):
    """-lm with -write-htk: the lattice expanded as lattice-tool -lm -write-htk expands
    and writes it (expanded-*/): the same nodes and links, each link with the same times,
    word, acoustic and language scores (the nodes numbered otherwise)."""
    written = tmp_path / "written"
    status, _, stderr = run_nplm("lattice-tool", "-read-htk", "-in-lattice-list", "list", "-lm",
                                 DATA / "kn3-unk.arpa.gz", "-unk", *options, "-write-htk", "-out-lattice-dir",
                                 written, cwd=LATTICES)
    assert status == 0, stderr
    expected = sorted(os.listdir(LATTICES / f"expanded-{reference}"))
    assert sorted(os.listdir(written)) == expected
    for name in expected:
        ours, theirs = read_htk(str(written / name)), read_htk(str(LATTICES / f"expanded-{reference}" / name))
        assert (len(ours.nodes), len(ours.links)) == (len(theirs.nodes), len(theirs.links))
        assert _links(written / name) == _links(LATTICES / f"expanded-{reference}" / name), name


def test_decoding_the_expanded_lattice_without_the_model_gives_the_models_nbest(tmp_path):
    """Decoded without a model, the written lattice gives the 1-best and the 10-best
    (the same hypotheses, the language scores to float32 rounding) of decoding the
    original with the model."""
    written = tmp_path / "written"
    status, _, stderr = run_nplm("lattice-tool", "-read-htk", "-in-lattice-list", "list", "-lm",
                                 DATA / "kn3-unk.arpa.gz", "-order", 3, "-unk", "-write-htk", "-out-lattice-dir",
                                 written, cwd=LATTICES)
    assert status == 0, stderr
    ours, ours_nbest = _decode_written(tmp_path, written, "ours")
    assert ours == (LATTICES / "1best-kn3.txt").read_text()
    for name in sorted(os.listdir(LATTICES / "nbest-kn3")):
        expected, got = _nbest_of(LATTICES / "nbest-kn3", name), _nbest_of(ours_nbest, name)
        assert [h[2:] for h in got] == [h[2:] for h in expected], name
        assert [float(h[1]) for h in got] == pytest.approx([float(h[1]) for h in expected], abs=2e-5)
        assert [h[0] for h in got] == [h[0] for h in expected]


def test_a_bad_lattice_among_expanded_ones_is_one_line(tmp_path):
    bad = tmp_path / "bad.lat"
    bad.write_text(GOOD.replace("J=4 S=2 E=3", "J=4 S=2 E=0"))
    listing = tmp_path / "list"
    listing.write_text(f"{bad}\n{LATTICES / 'sent00001.lat.gz'}\n")
    out = tmp_path / "out"
    status, _, stderr = run_nplm("lattice-tool", "-read-htk", "-in-lattice-list", listing, "-lm",
                                 DATA / "kn3-unk.arpa.gz", "-unk", "-write-htk", "-out-lattice-dir", out)
    assert status == 2 and len(stderr.splitlines()) == 1 and f"{bad}:10:" in stderr and "cycle" in stderr
    assert os.listdir(out) == ["sent00001.lat.gz"]


# -- networks: the n-gram history approximation ----------------------------------------


def _network(kind, order=None):
    from nplmtk.neural.mlp import MLPModel
    from nplmtk.neural.recurrent import LSTMModel
    from nplmtk.vocab import Vocabulary
    vocab = Vocabulary(["a", "b", "c", "d", "e"])
    if kind == "mlp":
        return MLPModel.initial(vocab, order=order, features=4, hidden=6, seed=3)
    model = LSTMModel.initial(vocab, features=6, hidden=6, seed=3)
    for name, value in model.params.items():  # a random network's scores differ enough to matter
        value *= 4
    return model


@pytest.mark.parametrize("output", ["full", "class", "hs"])
def test_a_step_of_several_paths_and_words_scores_as_each_alone(output):
    """step_pairs, the decoder's batch (a node's targets sharing its step and, with
    classes, its class softmax; nodes as streams), against each (node, target) alone and
    against the sentences' scores."""
    import numpy as np
    from nplmtk.neural.recurrent import LSTMModel
    from nplmtk.vocab import Vocabulary
    vocab = Vocabulary(list("abcdefgh"))
    counts = np.arange(1, len(vocab) + 1) ** 2
    model = LSTMModel.initial(vocab, features=6, hidden=6, seed=3, output=output, counts=counts,
                              classes=3 if output == "class" else None, direct=output == "full")
    ids = [vocab.index[w] for w in "abcd"]
    logp, first = model.step_pairs([(0, 0)], np.array([-1]), np.array([vocab.bos]), None, {})
    parent, node_input = np.array([0, 0, 0]), np.array(ids[:3], dtype=np.int32)
    pairs = [(node, target) for node in range(3) for target in (ids[3], 1, ids[0], ids[3], 2)]
    logp, after = model.step_pairs(pairs, parent, node_input, first, {})
    for (node, target), value in zip(pairs, logp):
        alone, state = model.step_pairs([(0, target)], parent[node:node + 1], node_input[node:node + 1], first, {})
        assert value == pytest.approx(alone[0], abs=1e-6)
        assert after[0]["state"][node] == pytest.approx(state[0]["state"][0], abs=1e-6)
        expected = model.logprobs(_corpus(model, [[vocab.words[node_input[node]], vocab.words[target]]]))[1]
        assert value == pytest.approx(expected, abs=1e-5)


def _decode(lattice, model, order, nbest=True):
    from nplmtk.lattice.decode import Scales, viterbi
    from nplmtk.lattice.scores import NetworkScores
    settings = Scales().of(lattice)
    return viterbi(lattice, settings, lambda w: w, NetworkScores(model), order, nbest=nbest)


def _sentence_log10(model, words):
    from nplmtk.lattice.decode import sentence_logprobs
    return sentence_logprobs(model, [words])[0]


def _paths(nodes, finals):
    from nplmtk.lattice.decode import nbest_paths
    found = []
    for path in nbest_paths(nodes, finals, 10):
        words = [nodes[s.node].word for s in path if nodes[s.node].word not in (None, "<s>", "</s>")]
        language = sum(language for s in path[1:] for prev, _, language in s.preds if prev in path)
        found.append((words, language))
    return found


def test_a_feed_forward_network_of_order_n_is_exact_with_k_n(tmp_path):
    model = _network("mlp", order=3)
    lattice = read_htk(str(LATTICES / "sent00001.lat.gz"))
    for link in lattice.links:  # the lattice's words made the model's
        if link.word is not None:
            link.word = "abcde"[sum(map(ord, link.word)) % 5]
    nodes, finals = _decode(lattice, model, 3)
    paths = _paths(nodes, finals)
    assert len(paths) == 10
    for words, language in paths:
        assert language == pytest.approx(_sentence_log10(model, words), abs=1e-5)
    assert finals[0].gprob == pytest.approx(_sentence_log10(model, paths[0][0]), abs=1e-5)


def test_an_lstm_on_one_path_scores_the_sentence(tmp_path):
    model = _network("lstm")
    lattice = read_htk(write(tmp_path, CHAIN.replace("J=1 S=0 E=1 W=b a=-1.5\n", "").replace("L=5", "")))
    nodes, finals = _decode(lattice, model, 2)
    assert len(finals) == 1
    assert finals[0].gprob == pytest.approx(_sentence_log10(model, ["a", "c", "d"]), abs=1e-5)


def test_the_approximation_merges_paths_with_the_same_last_words(tmp_path):
    """a c d and b c d: with K = 2 the paths merge at c, and b's path goes on with the
    state of the better path's (so its d and </s> are scored after `a c`); with K = 4
    nothing merges and both are exact."""
    import numpy as np
    model = _network("lstm")
    lattice = read_htk(write(tmp_path, CHAIN))
    exact = {w: _sentence_log10(model, [w, "c", "d"]) for w in "ab"}
    nodes, finals = _decode(lattice, model, 4)
    assert dict((words[0], language) for words, language in _paths(nodes, finals)) == pytest.approx(exact, abs=1e-5)

    nodes, finals = _decode(lattice, model, 2)
    (best, best_language), (other, other_language) = _paths(nodes, finals)
    assert best_language == pytest.approx(exact[best[0]], abs=1e-5)
    prefix = lambda w: float(np.sum(model.log10probs(_corpus(model, [[w, "c"]]))[:2]))  # noqa: E731
    tail = exact[best[0]] - prefix(best[0])  # d and </s> after the better path's state
    assert other_language == pytest.approx(prefix(other[0]) + tail, abs=1e-5)
    assert other_language != pytest.approx(exact[other[0]], abs=1e-3)


def _corpus(model, sentences):
    import numpy as np
    from nplmtk.corpus import Corpus
    ids = np.array([model.vocab.index[w] for s in sentences for w in s], dtype=np.int32)
    offsets = np.concatenate([[0], np.cumsum([len(s) for s in sentences])]).astype(np.int64)
    return Corpus(ids, offsets, model.vocab, name="<test>")


def test_a_network_rescores_writes_the_lattice_and_its_nbest(tmp_path):
    model = _network("lstm")
    path = tmp_path / "lstm.nplm"
    model.save(str(path))
    lattice = write(tmp_path, CHAIN)
    out, nbest = tmp_path / "out", tmp_path / "nbest"
    status, stdout, stderr = run_nplm("lattice-tool", "-read-htk", "-in-lattice", lattice, "-lm", path,
                                      "-approx-order", 4, "-viterbi-decode", "-write-htk", "-out-lattice-dir", out,
                                      "-nbest-decode", 5, "-out-nbest-dir", nbest)
    assert status == 0, stderr
    status, again, stderr = run_nplm("lattice-tool", "-read-htk", "-in-lattice", out / "x.lat.gz", "-viterbi-decode")
    assert status == 0 and again == stdout, stderr
    lines = [line.split() for line in gzip.open(nbest / "x.gz", "rt")]
    assert sorted(line[4] for line in lines) == ["a", "b"]
    for line in lines:  # the N-best's language score: the network's log10 P of the sentence
        assert float(line[1]) == pytest.approx(_sentence_log10(model, line[4:-1]), abs=1e-5)


def test_approx_order_is_for_networks(tmp_path):
    status, _, stderr = run_nplm("lattice-tool", "-read-htk", "-in-lattice", LATTICES / "sent00001.lat.gz", "-lm",
                                 DATA / "kn3-unk.arpa.gz", "-approx-order", 3, "-viterbi-decode")
    assert status == 2 and stderr == "nplm: -approx-order applies to a network -lm (a back-off model's is -order)\n"


def test_lattice_tools_job_runs_from_a_spec_without_click(tmp_path, monkeypatch):
    """nplmtk.lattice.tool: the spec's 1-best is SRILM's reference, a bad lattice goes to
    `failed` and the others on, and the refusals name parameters."""
    from nplmtk.errors import ParameterError
    from nplmtk.lattice.tool import LatticeTool, LatticeToolSpec
    monkeypatch.chdir(LATTICES)
    lines, errors = [], []
    tool = LatticeTool(LatticeToolSpec(in_lattice_list="list", lm=str(DATA / "kn3-unk.arpa.gz"), order=3, unk=True,
                                       viterbi_decode=True))
    assert tool.run(lines.append, errors.append) is False
    assert "".join(line + "\n" for line in lines) == (LATTICES / "1best-kn3.txt").read_text() and errors == []
    bad = tmp_path / "bad.lat"
    bad.write_text(GOOD.replace("E=2 W=dog", "E=8 W=dog"))
    good = tmp_path / "good.lat"
    good.write_text(GOOD)
    lines = []
    assert LatticeTool(LatticeToolSpec(in_lattice=[str(bad), str(good)], viterbi_decode=True)).run(
        lines.append, errors.append) is True
    assert lines == ["u1 <s> a dog </s>"] and [str(err) for err in errors] == \
        [f"{bad}:12: link J=2 refers to node 8, which is not defined"]
    for spec, names in ((LatticeToolSpec(nbest_decode=5), ("nbest_decode", "out_nbest_dir")),
                        (LatticeToolSpec(write_htk=True), ("write_htk", "out_lattice_dir")),
                        (LatticeToolSpec(lm=str(DATA / "kn3-unk.arpa.gz"), approx_order=3), ("approx_order", "lm"))):
        with pytest.raises(ParameterError) as err:
            LatticeTool(spec)
        assert set(names) <= set(err.value.parameters)
