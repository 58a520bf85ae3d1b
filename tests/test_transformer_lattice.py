"""lattice-tool -approx-order with a Transformer (issue 52, item 2): each path's state is its
last order-1 words, read alone as a window (NetworkScores over window_logprobs), so a lattice
whose paths are shorter than the order scores each path as `nplm ppl` scores its sentence."""
import gzip

import numpy as np
import pytest

import nplmtk
from conftest import CHAIN_LATTICE as CHAIN, run_nplm
from nplmtk.corpus import Corpus
from nplmtk.lattice.decode import Scales, nbest_paths, viterbi
from nplmtk.lattice.htk import read_htk
from nplmtk.lattice.scores import NetworkScores
from nplmtk.neural.transformer import TransformerModel
from nplmtk.vocab import Vocabulary

VOCAB = Vocabulary(list("abcdefgh"))


def _model(positions="learned", output="full", memory=0):
    counts = np.arange(1, len(VOCAB) + 1) ** 2
    model = TransformerModel.initial(VOCAB, features=8, layers=2, heads=2, ff=12, positions=positions, memory=memory,
                                     context=6, output=output, classes=3 if output == "class" else None,
                                     counts=counts, seed=4)
    for value in model.params.values():  # a random network's scores differ enough to matter
        value *= 2
    return model


def _lattice(tmp_path):
    path = tmp_path / "x.lat"
    path.write_text(CHAIN)
    return read_htk(str(path))


def _paths(model, lattice, order):
    """{first word: the path's language score} of every path, by the decoder with NetworkScores."""
    nodes, finals = viterbi(lattice, Scales().of(lattice), lambda w: w, NetworkScores(model), order, nbest=True)
    found = {}
    for path in nbest_paths(nodes, finals, 10):
        words = [nodes[s.node].word for s in path if nodes[s.node].word not in (None, "<s>", "</s>")]
        found[words[0]] = sum(language for s in path[1:] for prev, _, language in s.preds if prev in path)
    return found


def _ppl_log10(model, words):
    """log10 P(words </s>) as nplm ppl scores the sentence (model.log10probs, the stack's kernel)."""
    ids = np.array([VOCAB.index[w] for w in words], dtype=np.int32)
    return float(np.sum(model.log10probs(Corpus(ids, [0, len(ids)], VOCAB))))


@pytest.mark.parametrize("positions, output, memory", [("learned", "full", 0), ("sinusoidal", "class", 0),
                                                       ("relative", "hs", 3)])
def test_paths_shorter_than_the_order_score_as_ppl_scores_their_sentences(tmp_path, positions, output, memory):
    model = _model(positions, output, memory)
    found = _paths(model, _lattice(tmp_path), 5)  # <s> w c d </s>: the window of </s> holds the whole sentence
    assert found == pytest.approx({w: _ppl_log10(model, [w, "c", "d"]) for w in "ab"}, abs=1e-5)


def test_a_shorter_order_reads_the_last_words_alone(tmp_path):
    """Order 3: d is predicted from (w, c) and </s> from (c, d), each window read from
    position 0 without <s> (as the kernel scores stream steps), so the paths stay apart
    until d and merge there."""
    model = _model()
    found = _paths(model, _lattice(tmp_path), 3)

    def steps(inputs, targets):  # natural log p of each target after the inputs so far, one stream
        rows = np.array([[[i], [t]] for i, t in zip(inputs, targets)], dtype=np.int32)
        return model.example_logprobs(rows) / np.log(10)
    ids = VOCAB.index
    for w in "ab":
        head = steps([VOCAB.bos, ids[w]], [ids[w], ids["c"]])
        expected = head.sum() + steps([ids[w], ids["c"]], [-1, ids["d"]])[-1] + \
            steps([ids["c"], ids["d"]], [-1, VOCAB.eos])[-1]
        assert found[w] == pytest.approx(expected, abs=1e-5)
    assert found["a"] != pytest.approx(_ppl_log10(model, ["a", "c", "d"]), abs=1e-3)


def test_an_order_below_two_is_refused(tmp_path):
    with pytest.raises(nplmtk.errors.ParameterError, match="approx_order"):
        _paths(_model(), _lattice(tmp_path), 1)


def test_lattice_tool_decodes_rescores_and_writes_with_a_transformer(tmp_path):
    """The command end to end: 1-best, the N-best's language scores (each sentence alone, as
    nplm rescore and the word-at-a-time API score it) and the expanded lattice, which decoded
    again without the model gives the same 1-best."""
    model = _model("relative", "class", 3)
    path = tmp_path / "t.nplm"
    model.save(str(path))
    lattice = tmp_path / "x.lat"
    lattice.write_text(CHAIN)
    out, nbest = tmp_path / "out", tmp_path / "nbest"
    status, stdout, stderr = run_nplm("lattice-tool", "-read-htk", "-in-lattice", lattice, "-lm", path,
                                      "-approx-order", 4, "-viterbi-decode", "-write-htk", "-out-lattice-dir", out,
                                      "-nbest-decode", 5, "-out-nbest-dir", nbest)
    assert status == 0, stderr
    status, again, stderr = run_nplm("lattice-tool", "-read-htk", "-in-lattice", out / "x.lat.gz", "-viterbi-decode")
    assert status == 0 and again == stdout, stderr
    loaded = nplmtk.load(str(path))
    lines = [line.split() for line in gzip.open(nbest / "x.gz", "rt")]
    assert sorted(line[4] for line in lines) == ["a", "b"]
    for line in lines:
        assert float(line[1]) == pytest.approx(loaded.score(" ".join(line[4:-1])), abs=1e-5)


def test_lattice_ppl_of_a_short_sentence_is_nplm_ppls(tmp_path):
    """-ppl on the expanded lattice (order 5: the whole sentence in every window) against
    `nplm ppl` of the same sentence: the same logprob to float32's rounding (the lattice's
    sums are SRILM's float32; ppl's are doubles)."""
    path, lattice, text = tmp_path / "t.nplm", tmp_path / "x.lat", tmp_path / "s.txt"
    _model("sinusoidal", "full").save(str(path))
    lattice.write_text(CHAIN)
    text.write_text("b c d\n")
    status, by_lattice, err = run_nplm("lattice-tool", "-read-htk", "-in-lattice", lattice, "-lm", path,
                                       "-approx-order", 5, "-ppl", text)
    assert status == 0, err
    status, by_ppl, err = run_nplm("ppl", "-lm", path, "-ppl", text)
    assert status == 0, err
    logprob = [report.split("logprob= ")[1].split()[0] for report in (by_lattice, by_ppl)]
    assert float(logprob[0]) == pytest.approx(float(logprob[1]), abs=5e-6) and float(logprob[0]) < -1
