"""The mixture of softmaxes of the recurrent models (-mos K, nplmtk/neural/mixture.py,
cython_ext/mixture_output.pxi): finite differences of every parameter (the prior, the
component contexts, the output layer and the layers below) against a float64 numpy
mixture over test_recurrent's reference network, with the full and the class output,
tied or not; under the contexts' dropout with its masks fixed; the distribution of
next_logprobs; and through the tools (ppl, checkpoint and resume, the incremental API)."""
import math

import numpy as np
import pytest

from conftest import assert_gradients_match_finite_differences, class_logprobs, log_softmax, run_nplm
from test_recurrent import TEXT, VOCAB, random_model, reference_logprobs
from nplmtk.corpus import Corpus
from nplmtk.errors import ParameterError
from nplmtk.models import ARCHITECTURES
from nplmtk.neural.recurrent import stream_rows

SHAPES = [
    ("lstm", dict(mos=3)),
    ("lstm", dict(mos=2, tie=True, features=5, hidden=5, reset_state="never")),
    ("lstm", dict(mos=3, output="class", classes=3)),
    ("lstm", dict(mos=2, output="class", classes=4, layers=2, tie=True, features=5, hidden=7, bias=False)),
    ("rnn", dict(mos=2, output="class", classes=3, tie=True, features=5, hidden=5)),
]


def mixture_logprobs(model, rows, masks=None):
    """log P of every target (steps x streams) in float64: the reference network's top layer,
    then sum_k pi_k P_k(w | h_k) (masks["mos_mask"]: the contexts' dropout, N x K w)."""
    tops = []
    reference_logprobs(model, rows, masks=masks, tops=tops)
    p = {k: v.astype(np.float64) for k, v in model.params.items()}
    K, w = p["Wp"].shape
    out = np.zeros(rows.shape[0] * rows.shape[2])
    for t, (h, _, _) in enumerate(tops):
        log_pi = log_softmax(h @ p["Wp"].T)
        contexts = np.tanh(h @ p["Wk"].T + p["bk"])  # streams x K w
        if masks and "mos_mask" in masks:
            contexts = contexts * masks["mos_mask"][t].reshape(contexts.shape)
        terms = []
        for k in range(K):
            hk = contexts[:, k * w:(k + 1) * w]
            if "Vc" in p:
                logp = class_logprobs(hk, p.get("V", p["C"]), p.get("d", 0), p["Vc"], p.get("bc", 0),
                                      model.meta["class_of"])
            else:
                logp = log_softmax(hk @ p.get("V", p["C"]).T + p.get("d", 0))
            terms.append(log_pi[:, k] + logp[np.arange(len(hk)), np.maximum(rows[t, 1], 0)])
        terms = np.stack(terms, axis=1)
        top = terms.max(axis=1)
        mixed = top + np.log(np.exp(terms - top[:, None]).sum(axis=1))
        out[t * rows.shape[2]:(t + 1) * rows.shape[2]] = np.where(rows[t, 1] >= 0, mixed, 0)
    return out


def mos_model(arch, shape):
    model = random_model(arch, shape)
    assert {"Wp", "Wk", "bk"} <= set(model.params) and model.meta["mos"] == shape["mos"]
    return model


@pytest.mark.parametrize("arch, shape", SHAPES)
def test_every_parameter_matches_finite_differences(arch, shape):
    model = mos_model(arch, shape)
    rows, _ = stream_rows(Corpus.from_lines(TEXT, VOCAB), 2, VOCAB)
    grads = {k: np.zeros_like(v) for k, v in model.params.items()}
    total = model._network(2, len(rows), trainable=True).gradients(rows, grads)
    assert math.isclose(total, mixture_logprobs(model, rows).sum(), rel_tol=1e-5)
    assert_gradients_match_finite_differences(model.params, grads, lambda: -mixture_logprobs(model, rows).sum(),
                                              np.random.default_rng(1), epsilon=1e-4)


@pytest.mark.parametrize("output", ["full", "class"])
def test_the_contexts_dropout_matches_finite_differences_under_fixed_masks(output):
    from nplmtk.neural.regularisation import Regularisers
    shape = dict(mos=3, output=output, **({"classes": 3} if output == "class" else {}))
    model = mos_model("lstm", shape)
    rows, _ = stream_rows(Corpus.from_lines(TEXT, VOCAB), 2, VOCAB)
    network = model._network(2, len(rows), True, Regularisers(dropout_output=0.3), 5, None, 0.4)
    state = network.carried["rng"].copy()
    grads = {k: np.zeros_like(v) for k, v in model.params.items()}
    total = network.gradients(rows, grads, regularised=True)
    N, width = rows.shape[0] * rows.shape[2], model.widths(model.meta)[-1]
    masks = {"mos_mask": network.named["mos_mask"][:N * 3 * width].reshape(rows.shape[0], -1),
             "mask0": network.named["mask0"][:N * width].reshape(rows.shape[0], rows.shape[2], width)}
    assert set(np.unique(masks["mos_mask"])) == {0, np.float32(1 / 0.6)}  # dropped, and locked per segment
    assert np.array_equal(masks["mos_mask"][0], masks["mos_mask"][-1])
    assert not np.array_equal(state, network.carried["rng"])
    assert math.isclose(total, mixture_logprobs(model, rows, masks).sum(), rel_tol=1e-5)
    assert_gradients_match_finite_differences(model.params, grads,
                                              lambda: -mixture_logprobs(model, rows, masks).sum(),
                                              np.random.default_rng(1), epsilon=1e-4)


@pytest.mark.parametrize("arch, shape", SHAPES[:3])
def test_the_next_word_distribution_is_the_mixture(arch, shape):
    model = mos_model(arch, shape)
    history = [VOCAB.index["w3"], VOCAB.index["w1"]]
    p = model.next_distribution(history)
    assert math.isclose(p.sum(), 1, rel_tol=1e-5)
    rows = np.zeros((3, 2, 1), dtype=np.int32)
    rows[:, 0, 0] = [VOCAB.bos] + history
    rows[:, 1, 0] = -1
    for word in range(len(VOCAB)):
        if word in (VOCAB.bos, VOCAB.unk):
            continue
        rows[2, 1, 0] = word
        assert math.isclose(np.log(p[word]), mixture_logprobs(model, rows)[2], rel_tol=1e-4)


def test_mixtures_that_are_not_built_are_refused():
    with pytest.raises(ParameterError, match="hs"):
        ARCHITECTURES["lstm"].initial(VOCAB, mos=2, output="hs", counts=[1] * 12)
    with pytest.raises(ParameterError, match="direct"):
        ARCHITECTURES["lstm"].initial(VOCAB, mos=2, direct=True)
    model = mos_model("lstm", dict(mos=2))
    with pytest.raises(ParameterError, match="n-grams"):
        model.ngram_logprobs(np.zeros((1, 2), dtype=np.int64))


def test_without_a_mixture_the_model_is_todays():
    model = ARCHITECTURES["lstm"].initial(VOCAB, features=4, hidden=5, mos=0)
    assert "mos" not in model.meta and not {"Wp", "Wk", "bk"} & set(model.params)


TRAIN = ["the cat sat on the mat", "the dog sat on the log", "a cat saw a dog", "the mat was red"] * 6
VALID = ["the cat sat on the log", "a dog saw the mat"]


def write_texts(tmp_path):
    (tmp_path / "train.txt").write_text("\n".join(TRAIN) + "\n")
    (tmp_path / "valid.txt").write_text("\n".join(VALID) + "\n")
    return str(tmp_path / "train.txt"), str(tmp_path / "valid.txt")


@pytest.mark.parametrize("output", ["full", "class"])
def test_train_ppl_checkpoint_resume_rescore_and_word_at_a_time(tmp_path, output):
    from nplmtk.models import load
    from nplmtk.vocab import sentence_tokens
    train, valid = write_texts(tmp_path)
    common = ["train-nplm", "-text", train, "-valid", valid, "-arch", "lstm", "-m", "8", "-h", "8", "-mos", "3",
              "-dropout-mos", "0.2", "-output", output, "-lr", "0.01", "-optimizer", "adam", "-bptt", "5",
              "-streams", "4", "-threads", "1", "-seed", "3"]
    status, _, err = run_nplm(*common, "-epochs", "1", "-checkpoint", tmp_path / "ck")
    assert status == 0, err
    status, _, err = run_nplm(*common, "-epochs", "2", "-checkpoint", tmp_path / "ck", "-resume", "-lm",
                              tmp_path / "resumed.nplm")
    assert status == 0, err
    status, _, err = run_nplm(*common, "-epochs", "2", "-lm", tmp_path / "straight.nplm")
    assert status == 0, err
    scored = [run_nplm("ppl", "-lm", tmp_path / name, "-ppl", valid, "-debug", "2") for name in
              ("resumed.nplm", "straight.nplm")]
    assert scored[0][0] == 0 and scored[0][1] == scored[1][1]  # resumed as if never stopped
    model = load(str(tmp_path / "straight.nplm"))
    assert model.meta["mos"] == 3
    corpus = Corpus.from_lines(VALID, model.vocab)
    whole = model.log10probs(corpus)
    state, stepped = model.begin_state(), []
    for word in sentence_tokens(VALID[0]) + ["</s>"]:
        score, state = model.score_word(state, word)
        stepped.append(score)
    assert np.allclose(stepped, whole[:len(stepped)], atol=1e-5)
    assert np.allclose(model.log10probs_sharing_prefixes(corpus), whole, atol=1e-5)  # nplm rescore's path
    for extra in (["-dynamic-eval", "5", "-dynamic-lr", "0.01"], ["-neural-cache", "50"]):
        status, out, err = run_nplm("ppl", "-lm", tmp_path / "straight.nplm", "-ppl", valid, *extra)
        assert status == 0 and "ppl=" in out, err
    status, out, err = run_nplm("generate", "-lm", tmp_path / "straight.nplm", "-n", "3", "-seed", "1")
    assert status == 0 and len(out.splitlines()) == 3, err
