"""The log-bilinear family (Zhang, Mnih & Hinton, eqs. 1, 3-5): finite-difference checks of
every parameter block of Models 0-3 against a float64 numpy model written here, the
training step with per-block rates and momentum, the initialisation of sec. 3, and
training through the common protocol (threads, files, resume, `ppl`)."""
import math

import numpy as np
import pytest

from conftest import (assert_gradients_match_finite_differences, assert_one_line_error, class_logprobs, hs_logprobs,
                      log_softmax, run_nplm, sampled_step_errors)
from nplmtk.corpus import Corpus
from nplmtk.errors import ParameterError
from nplmtk.models import ARCHITECTURES, load
from nplmtk.neural.lbl import LBLModel
from nplmtk.neural.optimizer import block_schedule, sgd_steps
from nplmtk.neural.train import Trainer, TrainingConfig
from nplmtk.ngram.counts import NgramCounts
from nplmtk.ngram.estimate import estimate
from nplmtk.toy import ToyGrammar
from nplmtk.vocab import Vocabulary

VOCAB = Vocabulary([f"w{i}" for i in range(9)])
FAMILY = ("lbl", "lbl1", "lbl2", "lbl3")
COUNTS = [0, 0, 30, 50, 9, 7, 5, 4, 3, 3, 2, 1]  # of <unk>, <s>, </s> and the nine words
OUTPUTS = {"hs": dict(output="hs", counts=COUNTS), "class": dict(output="class", classes=4, counts=COUNTS)}


def block_steps(model, settings, examples, dense_decay_period):
    """The Steps of a chunk of `examples` from update 0 (optimizer.block_schedule's numbers)."""
    blocks = settings.settings_for(model)
    rates, dense_keep, momentum = block_schedule(model, settings, blocks, model.array_roles(blocks), examples, 1.0,
                                                 dense_decay_period)
    return sgd_steps(settings.batch, rates, None, dense_keep, momentum)


def logistic(z):
    return 1 / (1 + np.exp(-z))


def reference_loss(params, windows, meta=None):
    """-sum log p(target) in float64, eqs. 1 and 3-5 as the paper writes them, then the
    softmax over b + R p, or the factored output layer of `meta` (hs or class)."""
    p = {k: v.astype(np.float64) for k, v in params.items()}
    context = windows.shape[1] - 1
    features = [p["R"][windows[:, i]] for i in range(context)]
    gates = np.ones((len(windows), context))
    if "A" in p:
        h = logistic(np.concatenate(features, axis=1) @ p["A"] + p["a"])
    if "B" in p:
        gates = 2 * logistic(h @ p["B"] + p["gate_bias"])
    predicted = p["d"] + sum(gates[:, i:i + 1] * (features[i] @ p["C"][i]) for i in range(context))
    if "S" in p:
        predicted = predicted + h @ p["S"]
    if meta and meta["hs"]:
        logp = hs_logprobs(predicted, p["Vn"], p["bn"], meta["tree"], len(p["R"]))
    elif meta and meta["classes"]:
        logp = class_logprobs(predicted, p["R"], p["b"], p["Vc"], p["bc"], meta["class_of"])
    else:
        logp = log_softmax(p["b"] + predicted @ p["R"].T)
    return -logp[np.arange(len(windows)), windows[:, -1]].sum()


def random_model(arch="lbl", seed=3, **shape):
    model = ARCHITECTURES[arch].initial(VOCAB, order=4, features=3, hidden=5, seed=seed, **shape)
    rng = np.random.default_rng(0)
    for name in model.params:  # non-zero biases and larger weights make a sharper test
        model.params[name][...] = rng.normal(0, 0.5, model.params[name].shape)
    return model


def config(**settings):
    return TrainingConfig.of(LBLModel, **{"weight_decay": 0.0, "lr_decay": 0.0, "progress": False, **settings})


@pytest.mark.parametrize("output", ["full", "hs", "class"])
@pytest.mark.parametrize("arch", FAMILY)
def test_every_parameter_block_matches_finite_differences(arch, output):
    model = random_model(arch, **OUTPUTS.get(output, {}))
    hidden = {"lbl": set(), "lbl1": {"A", "a", "B", "gate_bias"}, "lbl2": {"A", "a", "S"},
              "lbl3": {"A", "a", "B", "gate_bias", "S"}}[arch]
    out = {"full": {"b"}, "hs": {"Vn", "bn"}, "class": {"b", "Vc", "bc"}}[output]
    assert set(model.params) == {"R", "C", "d"} | hidden | out
    rng = np.random.default_rng(1)
    windows = rng.integers(0, len(VOCAB), size=(6, 4)).astype(np.int32)
    windows[0, :3] = windows[1, 0]  # a word repeated in one context, and as a target
    windows[2, 3] = windows[2, 0]
    grads = {k: np.zeros_like(v) for k, v in model.params.items()}
    total = model.network(capacity=8).gradients(windows, grads)
    loss = lambda: reference_loss(model.params, windows, model.meta)  # noqa: E731
    assert np.isclose(-total, loss(), rtol=1e-5)
    assert_gradients_match_finite_differences(model.params, grads, loss, rng)


@pytest.mark.parametrize("arch, count", [("lbl", 5), ("lbl", 1), ("lbl3", 5)])
def test_a_training_step_moves_each_block_by_its_rate_times_its_gradient(arch, count):
    model = random_model(arch)
    windows = np.random.default_rng(2).integers(0, len(VOCAB), size=(count, 4)).astype(np.int32)
    grads = {k: np.zeros_like(v) for k, v in model.params.items()}
    model.network(capacity=8).gradients(windows, grads)
    before = {k: v.copy() for k, v in model.params.items()}
    rates = {"C": 0.01, "b": 0.2}
    settings = config(batch=count, lr=0.05, block_lr=rates)
    model.network(capacity=8).train(windows, block_steps(model, settings, count, 64))
    for name in model.params:
        np.testing.assert_allclose(model.params[name], before[name] - rates.get(name, 0.05) * grads[name], atol=2e-6)


@pytest.mark.parametrize("arch, output, count", [("lbl", "hs", 5), ("lbl", "class", 1), ("lbl3", "class", 5),
                                                 ("lbl1", "hs", 5)])
def test_a_factored_step_moves_each_block_by_its_rate_times_its_gradient(arch, output, count):
    """The rows stepped in place (R, b, Vn, bn) and the whole blocks alike: one update is
    the batch's gradient at each block's rate, momentum on the whole blocks."""
    model = random_model(arch, **OUTPUTS[output])
    windows = np.random.default_rng(2).integers(0, len(VOCAB), size=(count, 4)).astype(np.int32)
    grads = {k: np.zeros_like(v) for k, v in model.params.items()}
    model.network(capacity=8).gradients(windows, grads)
    before = {k: v.copy() for k, v in model.params.items()}
    rates = {"C": 0.01, "b": 0.2, "bn": 0.3, "Vc": 0.02}
    settings = config(batch=count, lr=0.05, block_lr=rates, momentum=0.5,
                      block_momentum={"R": 0, "b": 0, "Vn": 0, "bn": 0})
    model.check_training(settings)
    model.network(capacity=8).train(windows, block_steps(model, settings, count, 64))
    for name in model.params:  # one update: momentum's v is -rate g
        np.testing.assert_allclose(model.params[name], before[name] - rates.get(name, 0.05) * grads[name], atol=2e-6,
                                   err_msg=name)


def test_a_factored_output_refuses_momentum_on_the_rows_it_steps_in_place():
    model = random_model("lbl1", **OUTPUTS["hs"])
    with pytest.raises(ParameterError, match="steps a few rows of R, Vn, bn in place"):
        model.check_training(config(momentum=0.9))
    model.check_training(config(momentum=0.9, freeze_features=True, block_momentum={"Vn": 0, "bn": 0}))
    steps = block_steps(model, config(momentum=0.9, batch=1), 1, 64)
    with pytest.raises(ValueError, match="no momentum for R"):
        model.network(capacity=1).train(np.zeros((1, 4), np.int32), steps)


def test_model_1_with_a_tree_starts_from_model_0_with_the_same_tree_only():
    zero = random_model("lbl", **OUTPUTS["hs"])
    one = ARCHITECTURES["lbl1"].initial(VOCAB, order=4, features=3, hidden=5, seed=4, **OUTPUTS["hs"])
    assert set(one.initialise_from(zero)) == {"R", "C", "d", "Vn", "bn"}
    windows = np.random.default_rng(5).integers(0, len(VOCAB), size=(7, 4)).astype(np.int32)
    np.testing.assert_allclose(one.example_logprobs(windows), zero.example_logprobs(windows), rtol=1e-5)
    other = ARCHITECTURES["lbl1"].initial(VOCAB, order=4, features=3, hidden=5, output="hs", counts=COUNTS[::-1])
    with pytest.raises(ParameterError, match="its Vn and bn belong to another tree"):
        other.initialise_from(zero)


def test_momentum_and_weight_decay_per_block_and_frozen_features():
    """Two updates of one window: v1 = -eps g1, v2 = mu v1 - eps g2; the bulk decay
    (1 - eps lambda) after each; R of rate 0 stays as it was."""
    model = random_model("lbl1")
    windows = np.array([[1, 2, 3, 4], [5, 6, 7, 8]], dtype=np.int32)
    settings = config(batch=1, lr=0.05, momentum=0.5, block_momentum={"C": 0.9}, weight_decay=0.1,
                      block_weight_decay={"A": 0.0}, decay_biases=True, freeze_features=True)
    expected = {k: v.astype(np.float64) for k, v in model.params.items()}
    velocity = {k: 0.0 for k in expected}
    for window in windows:
        grads = {k: np.zeros_like(v) for k, v in model.params.items()}
        probe = ARCHITECTURES["lbl1"](VOCAB, {k: v.astype(np.float32) for k, v in expected.items()}, 4, "linear",
                                      dict(model.meta))
        probe.network(capacity=1).gradients(window[None], grads)
        for name in expected:
            if name == "R":
                continue
            mu = 0.9 if name == "C" else 0.5
            velocity[name] = mu * velocity[name] - 0.05 * grads[name]
            expected[name] = (expected[name] + velocity[name]) * (1 - 0.05 * (0.0 if name == "A" else 0.1))
    model.network(capacity=1).train(windows, block_steps(model, settings, 2, dense_decay_period=1))
    for name in expected:
        np.testing.assert_allclose(model.params[name], expected[name], atol=2e-6, err_msg=name)


def test_model_1_from_model_0_predicts_exactly_as_model_0_then_model_2_takes_its_a():
    model0 = random_model("lbl")
    model1 = ARCHITECTURES["lbl1"].initial(VOCAB, order=4, features=3, hidden=5, seed=7)
    assert model1.initialise_from(model0) == ["R", "C", "d", "b"]
    windows = np.random.default_rng(4).integers(0, len(VOCAB), size=(7, 4)).astype(np.int32)
    zero, one = model0.example_logprobs(windows), model1.example_logprobs(windows)
    assert np.abs(zero - one).max() < 1e-6
    assert np.all(model1.params["B"] == 0) and 0 < np.abs(model1.params["A"]).max() <= 0.01
    model1.params["A"] += 0.5
    model2 = ARCHITECTURES["lbl2"].initial(VOCAB, order=4, features=3, hidden=5, seed=7)
    assert model2.initialise_from(model1) == ["R", "C", "d", "b", "A", "a"]
    assert np.array_equal(model2.params["A"], model1.params["A"]) and np.all(model2.params["S"] == 0)
    assert np.abs(model2.example_logprobs(windows) - zero).max() < 1e-6
    with pytest.raises(Exception, match="init_from.*A is 9x5, this network.s 9x6"):
        ARCHITECTURES["lbl3"].initial(VOCAB, order=4, features=3, hidden=6).initialise_from(model1)


def test_one_window_scores_as_in_a_batch_and_distributions_sum_to_one():
    model = random_model("lbl3")
    windows = np.random.default_rng(4).integers(0, len(VOCAB), size=(5, 4)).astype(np.int32)
    batched, single = np.empty(5), np.empty(5)
    model.network(capacity=8).logprobs(windows, batched)
    model.network(capacity=1).logprobs(windows, single)
    np.testing.assert_allclose(single, batched, rtol=1e-5)
    np.testing.assert_allclose(-batched.sum(), reference_loss(model.params, windows), rtol=1e-5)
    assert abs(model.next_distribution([3, 4]).sum() - 1) < 1e-5


@pytest.fixture(scope="module")
def toy():
    grammar = ToyGrammar()
    vocab = Vocabulary(grammar.words)
    return vocab, [Corpus.from_lines([" ".join(s) for s in grammar.sentences(n, seed)], vocab)
                   for n, seed in ((3000, 1), (300, 2), (300, 3))]


def ppl(model, corpus):
    return math.exp(-model.logprobs(corpus).mean())


def test_the_family_learns_through_the_common_protocol_and_scores_the_same_from_its_file(toy, tmp_path):
    vocab, (train, valid, test) = toy
    settings = dict(epochs=4, batch=8, lr=0.05, lr_decay=1e-6, weight_decay=1e-5, threads=2, progress=False)
    model0 = LBLModel.initial(vocab, order=3, features=12, seed=1)
    model0 = Trainer(model0, TrainingConfig(**settings)).run(train, valid)
    bigram = estimate(NgramCounts.from_corpus(train, 2))
    assert ppl(model0, test) < 0.97 * ppl(bigram, test)
    model1 = ARCHITECTURES["lbl1"].initial(vocab, order=3, features=12, hidden=8, seed=2)
    model1.initialise_from(model0)
    frozen = model0.params["R"].copy()
    model1 = Trainer(model1, TrainingConfig.of(model1, **{**settings, "epochs": 2, "momentum": 0.5, "freeze_features": True,
                                               "block_lr": {"A": 0.5, "B": 0.05}})).run(train, valid)
    assert np.array_equal(model1.params["R"], frozen) and np.abs(model1.params["B"]).max() > 0
    assert ppl(model1, valid) <= ppl(model0, valid)
    model1.save(str(tmp_path / "lbl1.nplm"))
    np.testing.assert_array_equal(load(str(tmp_path / "lbl1.nplm")).logprobs(test), model1.logprobs(test))


def test_resumed_run_with_momentum_finishes_like_an_uninterrupted_one(toy, tmp_path):
    vocab, (train, valid, _) = toy
    settings = dict(epochs=2, batch=8, lr=0.01, momentum=0.8, progress=False, checkpoint_dir=str(tmp_path))

    def fresh():
        return ARCHITECTURES["lbl3"].initial(vocab, order=3, features=6, hidden=4, seed=1)
    straight = Trainer(fresh(), TrainingConfig.of(LBLModel, **settings)).run(train, valid)
    Trainer(fresh(), TrainingConfig.of(LBLModel, **{**settings, "epochs": 1})).run(train, valid)
    resumed = Trainer.resume(str(tmp_path / "checkpoint.nplm"), TrainingConfig.of(LBLModel, **settings)).run(train,
                                                                                                            valid)
    assert ppl(straight, valid) < len(vocab) / 2
    for name in straight.params:
        assert np.array_equal(straight.params[name], resumed.params[name]), name


def test_train_nplm_the_family_from_the_command_line(tmp_path):
    (tmp_path / "t.txt").write_text("the cat sat on the mat\nthe dog sat on the log\n" * 20)
    common = ["-text", tmp_path / "t.txt", "-order", 3, "-m", 6, "-epochs", 2, "-batch", 4, "-quiet"]
    status, _, err = run_nplm("train-nplm", "-arch", "lbl", *common, "-lm", tmp_path / "m0.nplm")
    assert status == 0, err
    status, _, err = run_nplm("train-nplm", "-arch", "lbl1", *common, "-h", 4, "-init-from", tmp_path / "m0.nplm",
                              "-freeze-features", "-momentum", 0.5, "-block-lr", "C=1e-3,A=0.1", "-block-lr", "B=1e-2",
                              "-block-weight-decay", "a=1e-5", "-decay-biases",
                              "-lm", tmp_path / "m1.nplm")
    assert status == 0, err
    status, out, err = run_nplm("ppl", "-lm", tmp_path / "m1.nplm", "-text", tmp_path / "t.txt")
    assert status == 0 and "ppl=" in out, err
    status, _, err = run_nplm("train-nplm", "-arch", "lbl3", "-criterion", "is-adaptive", "-samples", 5, *common,
                              "-h", 4, "-lm", tmp_path / "s.nplm")
    assert status == 0, err


@pytest.mark.parametrize("args, fragment", [
    (["-arch", "lbl1", "-block-lr", "Q=1"], "-block-lr: no block 'Q' in lbl1 (its blocks: R, C, d, b, A, a, B, "
                                            "gate_bias)"),
    (["-arch", "lbl", "-block-lr", "C"], "-block-lr C: must be BLOCK=VALUE with VALUE in [0, inf)"),
    (["-arch", "mlp", "-momentum", "0.5"], "-momentum is an option of -arch lbl, lbl1, lbl2, lbl3, not of -arch mlp"),
    (["-arch", "lbl2", "-h", "0"], "-arch lbl2 needs -h 1 or more hidden units"),
    (["-arch", "lbl", "-momentum", "0.5", "-criterion", "is"], "-momentum applies to the exact softmax gradient"),
    (["-arch", "lbl1", "-init-from", "MODEL"], "-init-from: a model of order 3 over"),
])
def test_family_options_that_do_not_go_together(tmp_path, args, fragment):
    (tmp_path / "t.txt").write_text("a b c\n")
    (tmp_path / "o.txt").write_text("a b c d\n")
    status, _, err = run_nplm("train", "-text", tmp_path / "o.txt", "-order", 3, "-m", 4, "-epochs", 1, "-quiet",
                              "-lm", tmp_path / "model.nplm")
    assert status == 0, err
    args = [str(tmp_path / "model.nplm") if a == "MODEL" else a for a in args]
    status, out, err = run_nplm("train", "-text", tmp_path / "t.txt", "-lm", tmp_path / "m.nplm", *args)
    assert_one_line_error(status, err, fragment)
    assert not (tmp_path / "m.nplm").exists()


@pytest.mark.parametrize("arch, kind, batch", [("lbl", "unigram", 1), ("lbl", "bigram", 3), ("lbl3", "unigram", 2)])
def test_importance_sampling_gradient_approaches_the_exact_one_as_n_grows(arch, kind, batch):
    """One sampled step of rate 1 moves the parameters by minus the estimator; its mean
    squared distance to the exact gradient (16 seeds) falls about as 1/N."""
    from nplmtk.neural.sampling import proposal
    windows = np.array([[3, 4, 5, 6], [5, 3, 3, 2], [0, 8, 5, 6]][:batch], dtype=np.int32)
    exact = {k: np.zeros_like(v) for k, v in random_model(arch).params.items()}
    random_model(arch).network(capacity=3).gradients(windows, exact)
    history = np.random.default_rng(5).integers(0, len(VOCAB), size=(200, 4)).astype(np.int32)
    q = proposal(history, len(VOCAB), kind)
    errors = sampled_step_errors(lambda: random_model(arch), windows, q, exact, seeds=16)
    assert all(later < earlier / 4 for earlier, later in zip(errors, errors[1:])), errors
    assert errors[-1] < errors[0] / 200
