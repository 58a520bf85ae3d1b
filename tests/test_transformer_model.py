"""The Transformer language model (nplmtk/neural/transformer.py, cython_ext/
transformer_network.pyx) against a float64 numpy network written here (the stack's
reference is tests/test_transformer_kernels.py's): its scores, and finite differences of
every array through the embeddings, the positions and each output layer; the schedule of
the rates; training, saving and scoring from the command line."""
import numpy as np
import pytest

from conftest import (assert_gradients_match_finite_differences, class_logprobs, hs_logprobs, log_softmax,
                      run_nplm, scored_as_ppl_says)
from test_transformer_kernels import reference_top
from nplmtk.neural.blas import blas_threads
from nplmtk.neural.optimizer import RateSchedule, learning_rates
from nplmtk.neural.train import TrainingConfig
from nplmtk.neural.transformer import BLOCK_ARRAYS, RELATIVE_ARRAYS, TransformerModel
from nplmtk.vocab import Vocabulary

WORDS = [f"w{i}" for i in range(9)]


def tiny_model(output="full", positions="learned", memory=0, tie=False, context=5, seed=3):
    vocab = Vocabulary(WORDS)
    counts = np.arange(1, len(vocab) + 1) ** 2
    model = TransformerModel.initial(vocab, features=8, layers=2, heads=2, ff=12, positions=positions, memory=memory,
                                     tie=tie, context=context, seed=seed, output=output,
                                     classes=3 if output == "class" else None, counts=counts)
    rng = np.random.default_rng(seed)
    for name, array in model.params.items():  # away from the initial zeros and ones, as trained networks are
        array += rng.normal(0, 0.3, array.shape).astype(np.float32)
    return model


def random_rows(model, steps, streams, seed=5):
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, len(model.vocab), size=(steps, 2, streams)).astype(np.int32)
    rows[:, 1][rng.random((steps, streams)) < 0.1] = -1  # padding and OOV targets predict nothing
    return rows


def reference_logprobs(model, rows, memories=None, filled=0):
    """log p of every target >= 0 of one segment (steps x streams; others 0) in float64."""
    meta, p = model.meta, {name: value.astype(np.float64) for name, value in model.params.items()}
    steps, streams, L, d = rows.shape[0], rows.shape[2], meta["context"], meta["features"]
    inputs = np.full((streams, L), model.vocab.bos)
    inputs[:, :steps] = rows[:, 0].T
    x = np.sqrt(np.float32(d)).astype(np.float64) * p["C"][inputs]
    if meta["positions"] == "learned":
        x = x + p["P"][None]
    elif meta["positions"] == "sinusoidal":
        from nplmtk._ext.transformer_kernels import relative_positions
        x = x + relative_positions(L, d).astype(np.float64)[None]
    top = reference_top(model.params, x.reshape(streams * L, d), meta["layers"], meta["heads"], streams, L,
                        memories=memories, filled=filled).reshape(streams, L, d)[:, :steps]
    h = top.transpose(1, 0, 2).reshape(steps * streams, d)
    if model.output == "hs":
        every = hs_logprobs(h, p["Vn"], p["bn"], model.meta["tree"], len(model.vocab))
    elif model.output == "class":
        every = class_logprobs(h, p.get("V", p["C"]), p["d"], p["Vc"], p["bc"], model.meta["class_of"])
    else:
        every = log_softmax(h @ p.get("V", p["C"]).T + p["d"])
    targets = rows[:, 1].reshape(-1)
    return np.where(targets >= 0, every[np.arange(len(targets)), np.maximum(targets, 0)], 0.0)


def test_the_models_block_arrays_are_the_kernels():
    from nplmtk._ext.transformer_kernels import BLOCK_PARAMETERS, RELATIVE_PARAMETERS
    assert BLOCK_ARRAYS == BLOCK_PARAMETERS and RELATIVE_ARRAYS == RELATIVE_PARAMETERS


CASES = [("full", "learned", 0, False), ("full", "sinusoidal", 0, True), ("class", "learned", 0, False),
         ("class", "relative", 0, True), ("hs", "relative", 3, False), ("full", "relative", 3, True)]


@pytest.mark.parametrize("direct", [False, True])  # the weights' gradients as they are or transposed: both ways
@pytest.mark.parametrize("output, positions, memory, tie", CASES)
def test_scores_and_every_gradient_match_the_reference(output, positions, memory, tie, direct, monkeypatch):
    import nplmtk.neural.transformer as transformer
    monkeypatch.setattr(transformer, "transposed_products_direct", lambda: direct)
    model = tiny_model(output, positions, memory, tie)
    streams, L = 2, model.meta["context"]
    network = model._network(streams, trainable=True)
    memories, filled = None, 0
    if memory:  # a first segment fills the memory; the second reads it (no gradient flows into it)
        first = random_rows(model, L, streams, seed=9)
        network.logprobs(first, np.empty(L * streams))
        memories = [np.zeros((streams, memory, 8)) for _ in range(model.meta["layers"])]
        reference_logprobs(model, first, memories, 0)
        filled = memory
    rows = random_rows(model, L - 1, streams)  # one position short: the network pads it
    grads = {name: np.zeros_like(array) for name, array in model.params.items()}
    total = network.gradients(rows, grads)
    expected = reference_logprobs(model, rows, [m.copy() for m in memories] if memory else None, filled)
    assert abs(total - expected.sum()) < 1e-3 * max(1, abs(expected.sum()))

    def loss():
        return -reference_logprobs(model, rows, [m.copy() for m in memories] if memory else None, filled).sum()

    assert_gradients_match_finite_differences(model.params, grads, loss, np.random.default_rng(1))


def test_scoring_reads_segments_as_training_does_and_workers_agree():
    model = tiny_model("class", "learned")
    rows = random_rows(model, 13, 3)
    out = np.full(13 * 3, -np.inf)
    model._network(3).logprobs(rows, out)
    for start in range(0, 13, 5):  # each segment alone: no memory
        segment = np.ascontiguousarray(rows[start:start + 5])
        expected = reference_logprobs(model, segment)
        scored = segment[:, 1].reshape(-1) >= 0
        np.testing.assert_allclose(out[start * 3:(start + len(segment)) * 3][scored], expected[scored], atol=1e-4)
    np.testing.assert_allclose(model._stream_logprobs(rows), out, atol=1e-6)


def test_next_distribution_sums_to_one_and_scores_as_a_sentence():
    model = tiny_model("hs", "sinusoidal")
    history = [4, 7, 3]
    p = model.next_distribution(history)
    assert abs(p.sum() - 1) < 1e-5
    from nplmtk.corpus import Corpus
    corpus = Corpus(np.array(history + [5], dtype=np.int32), [0, 4], model.vocab)
    assert abs(np.log(p[5]) - model.logprobs(corpus)[3]) < 1e-5


def test_training_steps_lower_the_loss_with_adam_and_a_warm_up():
    model = tiny_model("full", "relative", memory=2)
    config = TrainingConfig.of(model, lr=3e-3, weight_decay=0.01, optimizer="adam", warmup=3, streams=2,
                               dropout=0.1, dropout_attention=0.1, progress=False)
    from nplmtk.neural.optimizer import Optimizer
    optimizer = Optimizer(model, config)
    rows = np.ascontiguousarray(np.tile(random_rows(model, 5, 2), (8, 1, 1)))  # the same segment again and again
    network = model.training_network(config, 0)
    before = model.example_logprobs(rows[:5]).sum()
    total, updates, _ = network.train(rows, optimizer.steps(len(rows)))
    assert updates == 8 and network.carried["adam_step"][0] == 8
    assert model.example_logprobs(rows[:5]).sum() > before + 1


@pytest.mark.parametrize("output", ["full", "class"])
def test_threads_share_each_segment_as_one_thread_runs_it(output):
    """-threads 3: one worker whose network's threads share the stack, the full softmax and
    the update; after Adam's steps (dropout drawn) the arrays, and then the scores of ppl's
    path (threads from the BLAS's), are one thread's to float32 rounding. Not the keys'
    biases: their gradient is 0 but for rounding (a softmax ignores a shift of its scores),
    which Adam's normalised step turns into steps of the rate."""
    results = []
    for threads in (1, 3):
        model = tiny_model(output, "learned")
        config = TrainingConfig.of(model, lr=3e-3, optimizer="adam", streams=3, threads=threads, dropout=0.1,
                                   dropout_attention=0.1, progress=False)
        assert model.threads_per_worker(config) == threads
        from nplmtk.neural.optimizer import Optimizer
        rows = random_rows(model, 15, 3)
        with blas_threads(1):
            total, updates, _ = model.training_network(config, 0).train(rows, Optimizer(model, config).steps(15))
        with blas_threads(threads):
            scores = model._stream_logprobs(rows)
        results.append((total, model.params, scores))
    (total1, params1, scores1), (total3, params3, scores3) = results
    assert updates == 3 and abs(total1 - total3) < 1e-4 * abs(total1)
    for name in params1:
        if name.startswith("qkv_bias"):
            params1[name][8:16] = params3[name][8:16]  # d = 8: Q, K, V's biases
        np.testing.assert_allclose(params3[name], params1[name], rtol=1e-4, atol=1e-5, err_msg=name)
    np.testing.assert_allclose(scores3, scores1, rtol=1e-5, atol=1e-5)


def test_the_rate_schedules():
    t = np.arange(40)
    np.testing.assert_array_equal(RateSchedule(1e-3).rates(0.1, t), learning_rates(0.1, 1e-3, t))
    warm = RateSchedule(0.0, warmup=10, kind="inverse").rates(0.1, t)
    np.testing.assert_allclose(warm[:10], 0.1 * (t[:10] + 1) / 10)
    assert (warm[9:] == 0.1).all()
    cosine = RateSchedule(0.0, warmup=10, kind="cosine", horizon=30).rates(0.1, t)
    np.testing.assert_allclose(cosine[[9, 20, 30, 39]], [0.1, 0.05, 0.0, 0.0], atol=1e-12)
    assert (np.diff(cosine[10:31]) < 0).all()
    linear = RateSchedule(0.0, warmup=10, kind="linear", horizon=30).rates(0.1, t)
    np.testing.assert_allclose(linear[[9, 15, 20, 30, 39]], [0.1, 0.075, 0.05, 0.0, 0.0], atol=1e-12)
    waiting = RateSchedule(0.0, warmup=10, kind="linear", horizon=0).rates(0.1, t)  # the budget's end not yet known
    assert (waiting[9:] == 0.1).all()
    inv = RateSchedule(0.0, warmup=10, kind="inv-sqrt").rates(0.1, t)
    np.testing.assert_allclose(inv[[9, 39]], [0.1, 0.1 * np.sqrt(10 / 40)])


def test_a_cosine_schedule_needs_its_horizon(tmp_path):
    (tmp_path / "t.txt").write_text("a b c\n")
    status, _, err = run_nplm("train", "-arch", "mlp", "-text", tmp_path / "t.txt", "-lm", tmp_path / "m.nplm",
                              "-lr-schedule", "cosine", "-warmup", "10")
    assert status == 2 and "-lr-horizon" in err and "Traceback" not in err, err


def test_train_save_and_score_from_the_command_line(toy_texts, tmp_path):
    folder, _ = toy_texts
    model_path = tmp_path / "t.nplm"
    status, _, err = run_nplm("train", "-arch", "transformer", "-text", folder / "train.txt", "-valid",
                              folder / "valid.txt", "-m", 16, "-layers", 1, "-heads", 2, "-bptt", 12, "-streams", 4,
                              "-output", "class", "-epochs", 2, "-warmup", 20, "-lr", 3e-3, "-lm", model_path,
                              "-threads", 2, "-quiet")
    assert status == 0, err
    model, ppl = scored_as_ppl_says(model_path, folder / "valid.txt")
    assert ppl < 12  # the toy grammar's unigram ppl is about 20
    status, out, err = run_nplm("ppl", "-lm", model_path, "-ppl", folder / "valid.txt", "-debug", 2)
    assert status == 0 and out.count("p( ") > 100, err


@pytest.mark.parametrize("positions, memory", [("learned", 0), ("relative", 2)])
def test_generation_steps_with_cached_keys_and_values_as_a_whole_pass(positions, memory):
    model = tiny_model("class", positions, memory, context=6)
    streams = model.sampling_streams(3, [4, 5])
    np.testing.assert_allclose(streams.distributions(np.arange(3)), [model.next_distribution([4, 5])] * 3, atol=1e-5)
    streams.advance(np.array([6, 7, 8]), np.array([False, True, False]))
    for row, history in ((0, [4, 5, 6]), (1, [4, 5]), (2, [4, 5, 8])):
        np.testing.assert_allclose(streams.distributions(np.array([row]))[0], model.next_distribution(history),
                                   atol=1e-5)
    for word in range(10):  # past the cache: the stream reads its last half again
        streams.advance(np.full(3, 3), np.zeros(3, dtype=bool))
    assert (streams.steps.lengths <= streams.capacity).all()
