"""Dynamic evaluation (Krause et al. 2018; nplmtk.neural.dynamic): each segment scored
before its own step, the steps as the paper's SGD and RMS rules, the state carried, and the
trained model back afterwards."""
import numpy as np
import pytest

from conftest import assert_one_line_error, run_nplm
from nplmtk.corpus import Corpus
from nplmtk.models import ARCHITECTURES
from nplmtk.neural.dynamic import DynamicEvaluation, dynamic_logprobs, gradient_scale
from nplmtk.vocab import Vocabulary

VOCAB = Vocabulary([f"w{i}" for i in range(9)])
FIRST = "w1 w2 w3"  # 4 predictions: with segments of 4, the first segment is this sentence
REST = ["w4 w5 w6 w7 w8 w0", "w3 w3", "w5 w1 w2 w2", "w0 w6 w6 w2 w1"]
COUNTS = [0, 0, 30, 50, 9, 7, 5, 4, 3, 3, 2, 1]
MODELS = [
    ("lstm", dict(features=4, hidden=5)),
    ("lstm", dict(features=5, hidden=5, tie=True, output="class", classes=3)),
    ("rnn", dict(features=4, hidden=5, layers=2)),
    ("mlp", dict(order=3, features=3, hidden=4)),
    ("lbl", dict(order=3, features=4, output="class", classes=3)),
]


def random_model(arch, shape):
    counts = COUNTS if shape.get("output") else None
    model = ARCHITECTURES[arch].initial(VOCAB, seed=3, counts=counts, **shape)
    rng = np.random.default_rng(0)
    for name, array in model.params.items():
        array[...] = rng.normal(0, 0.5, array.shape)
    return model


def mean_gradient(model, corpus):
    """The gradient of the mean -log p of `corpus`, from a zero state (the kernels'
    gradients, checked against finite differences in the models' own tests)."""
    grads = {name: np.zeros_like(array) for name, array in model.params.items()}
    step = model.adaptation(len(corpus.targets()))
    (rows, _), = model.adaptation_segments(corpus, len(corpus.targets()))
    logp = step(rows, grads)
    return {name: g / np.isfinite(logp).sum() for name, g in grads.items()}


@pytest.mark.parametrize("arch, shape", MODELS)
def test_each_segment_is_scored_before_its_step(arch, shape):
    model = random_model(arch, shape)
    corpus = Corpus.from_lines([FIRST] + REST, VOCAB)
    trained = {name: array.copy() for name, array in model.params.items()}
    plain = model.logprobs(corpus)
    # a step too small to matter: the plain scores, the state carried from segment to segment
    np.testing.assert_allclose(dynamic_logprobs(model, corpus, DynamicEvaluation(4, 1e-12)), plain, rtol=1e-5)
    # one segment: scored before any step
    whole = len(plain)
    np.testing.assert_allclose(dynamic_logprobs(model, corpus, DynamicEvaluation(whole, 10.0)), plain, rtol=1e-5)
    adapted = dynamic_logprobs(model, corpus, DynamicEvaluation(4, 0.5))
    np.testing.assert_allclose(adapted[:4], plain[:4], rtol=1e-5)
    assert not np.allclose(adapted[4:], plain[4:])
    for name, array in model.params.items():  # the model is as trained again
        np.testing.assert_array_equal(array, trained[name])


@pytest.mark.parametrize("arch, shape", MODELS)
@pytest.mark.parametrize("rms", [False, True])
def test_the_second_segment_is_scored_after_the_papers_step(arch, shape, rms):
    """SGD: theta - lr g + decay (theta_0 - theta); RMS: theta + lr (decay r (theta_0 - theta)
    - g / (ms + eps)); with theta = theta_0 after one segment the decay adds nothing, so
    the second segment sees theta_0 - lr g (/ (ms + eps))."""
    model = random_model(arch, shape)
    corpus = Corpus.from_lines([FIRST] + REST, VOCAB)
    lr = 0.01 if rms else 0.5
    scale = gradient_scale(model, Corpus.from_lines(REST, VOCAB), 4) if rms else None
    adapted = dynamic_logprobs(model, corpus, DynamicEvaluation(4, lr, decay=0.3), scale=scale)
    g = mean_gradient(model, Corpus.from_lines([FIRST], VOCAB))
    for name, array in model.params.items():
        array -= lr * (g[name] / (scale[name] + 1e-3) if rms else g[name])
    # the second segment: the first 4 predictions of the second sentence, from a fresh state
    expected = model.logprobs(Corpus.from_lines([REST[0]], VOCAB))[:4]
    np.testing.assert_allclose(adapted[4:8], expected, rtol=1e-4, atol=1e-5)


def test_the_rms_scale_is_the_root_mean_square_of_segment_gradients():
    model = random_model("lstm", {})
    text = Corpus.from_lines([FIRST, "w4 w5 w6"], VOCAB)  # two segments of 4
    scale = gradient_scale(model, text, 4)
    first, second = mean_gradient(model, Corpus.from_lines([FIRST], VOCAB)), \
        mean_gradient(model, Corpus.from_lines(["w4 w5 w6"], VOCAB))
    for name in scale:
        np.testing.assert_allclose(scale[name], np.sqrt((first[name] ** 2 + second[name] ** 2) / 2), rtol=1e-5,
                                   atol=1e-8)


def test_dynamic_evaluation_from_the_command_line(toy_texts, toy_lstm, tmp_path):
    folder, _ = toy_texts
    model = toy_lstm
    status, plain, err = run_nplm("ppl", "-lm", model, "-ppl", folder / "valid.txt")
    assert status == 0, err
    for extra in ([], ["-dynamic-rms-text", folder / "train.txt", "-dynamic-rms-words", 500]):
        status, out, err = run_nplm("ppl", "-lm", model, "-ppl", folder / "valid.txt", "-dynamic-eval", 10,
                                    "-dynamic-lr", 0.1 if not extra else 0.003, *extra)
        assert status == 0 and err == "", err
        assert out.splitlines()[0] == plain.splitlines()[0]  # the same report, other numbers
        assert out.splitlines()[1] != plain.splitlines()[1]
    status, _, err = run_nplm("ppl", "-lm", model, "-ppl", folder / "valid.txt", "-dynamic-eval", 10)
    assert_one_line_error(status, err, "-dynamic-eval needs -dynamic-lr")
    status, _, err = run_nplm("ngram-count", "-text", folder / "train.txt", "-lm", tmp_path / "kn.arpa")
    status, _, err = run_nplm("ppl", "-lm", tmp_path / "kn.arpa", "-ppl", folder / "valid.txt", "-dynamic-eval", 10,
                              "-dynamic-lr", 0.1)
    assert_one_line_error(status, err, "kn.arpa", "adapts neural models")


def test_a_segment_longer_than_the_text_is_the_text(monkeypatch):
    """-dynamic-eval 2147483647 once sized its buffers by N x |V| (64 GiB, a traceback): a
    segment is at most the text, and one the memory cannot hold is refused before anything."""
    import nplmtk.neural.dynamic as dynamic
    from nplmtk.errors import ParameterError
    model = random_model("lstm", dict(features=4, hidden=5))
    corpus = Corpus.from_lines([FIRST] + REST, VOCAB)
    whole = corpus.num_words + corpus.num_sentences
    np.testing.assert_array_equal(dynamic_logprobs(model, corpus, DynamicEvaluation(2 ** 31 - 1, 0.5)),
                                  dynamic_logprobs(model, corpus, DynamicEvaluation(whole, 0.5)))
    monkeypatch.setattr(dynamic, "SEGMENT_BYTES_PER_WORD", 1 << 40)
    with pytest.raises(ParameterError, match="length 4 predictions a segment"):
        dynamic_logprobs(model, corpus, DynamicEvaluation(4, 0.5))


@pytest.mark.parametrize("lr", ["1e300", "1e10"])
def test_a_diverging_adaptation_is_said(toy_texts, toy_lstm, lr):
    """-dynamic-lr 1e300 printed ppl= nan and a numpy warning with exit 0, 1e10 a ppl of 1.99
    with p = 0 for most words: the divergence is one line naming -dynamic-lr, exit status 2."""
    folder, _ = toy_texts
    status, out, err = run_nplm("ppl", "-lm", toy_lstm, "-ppl", folder / "valid.txt", "-dynamic-eval", 10,
                                "-dynamic-lr", lr)
    assert_one_line_error(status, err, f"-dynamic-lr {float(lr):g}: the adaptation diverged after",
                          "give a smaller -dynamic-lr")
    assert out == ""


def test_a_text_scored_again_is_not_adapted_again(monkeypatch):
    """Picking the continuous cache, the mixture's weights and the cache on one held-out
    text asks dynamic evaluation for it three times: the first pass is kept (each pass
    starts from the trained weights, so a second gives the same numbers)."""
    import nplmtk.neural.dynamic as dynamic
    model = random_model("lstm", dict(features=4, hidden=5))
    settings = DynamicEvaluation(4, 0.5)
    text, other = Corpus.from_lines([FIRST] + REST, VOCAB), Corpus.from_lines(REST, VOCAB)
    expected, expected_keys = dynamic_logprobs(model, text, settings, keys=True)
    passes = []
    scored = dynamic.dynamic_logprobs
    monkeypatch.setattr(dynamic, "dynamic_logprobs", lambda *args, **kw: passes.append(kw) or scored(*args, **kw))
    adapted = dynamic.DynamicModel(model, settings)
    np.testing.assert_array_equal(adapted.logprobs(text), expected)
    logp, keys = adapted.logprobs_and_states(text)  # the states were not kept: a pass that keeps them
    np.testing.assert_array_equal(logp, expected)
    np.testing.assert_array_equal(keys, expected_keys)
    again = Corpus.from_lines([FIRST] + REST, VOCAB)  # the same text, read again
    np.testing.assert_array_equal(adapted.logprobs_and_states(again)[0], expected)
    np.testing.assert_array_equal(adapted.logprobs(again), expected)
    assert [kw.get("keys", False) for kw in passes] == [False, True]
    adapted.logprobs(text)[:] = 0.0  # a caller's copy: what is kept stays
    np.testing.assert_array_equal(adapted.logprobs(again), expected)
    np.testing.assert_array_equal(adapted.logprobs(other), dynamic_logprobs(model, other, settings))
    assert len(passes) == 3
    np.testing.assert_array_equal(adapted.logprobs(text), expected)
    assert len(passes) == 4  # only the last text is kept
    from nplmtk.errors import InputError
    with pytest.raises(InputError, match="different vocabulary"):  # the same ids in another vocabulary
        adapted.logprobs(Corpus(text.ids, text.offsets, Vocabulary(list(VOCAB.words) + ["extra"])))
