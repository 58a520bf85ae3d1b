"""The log-bilinear Model 0 (Zhang, Mnih & Hinton, eq. 1): finite-difference checks of
every parameter block against a float64 numpy model written here, the training step, and
training through the common protocol (threads, files, `ppl`)."""
import math

import numpy as np
import pytest

from conftest import run_nplm, sampled_step_errors
from nplmtk.corpus import Corpus
from nplmtk.models import load
from nplmtk.neural.lbl import LBLModel
from nplmtk.neural.train import DENSE_DECAY_PERIOD, Trainer, TrainingConfig, update_schedule
from nplmtk.ngram.counts import NgramCounts
from nplmtk.ngram.estimate import estimate
from nplmtk.toy import ToyGrammar
from nplmtk.vocab import Vocabulary

VOCAB = Vocabulary([f"w{i}" for i in range(9)])


def reference_loss(params, windows):
    """-sum log p(target) in float64: p = d + sum_i C_i^T r(w_i), y = b + R p."""
    p = {k: v.astype(np.float64) for k, v in params.items()}
    predicted = p["d"] + sum(p["R"][windows[:, i]] @ p["C"][i] for i in range(windows.shape[1] - 1))
    y = p["b"] + predicted @ p["R"].T
    y -= y.max(axis=1, keepdims=True)
    logp = y - np.log(np.exp(y).sum(axis=1, keepdims=True))
    return -logp[np.arange(len(windows)), windows[:, -1]].sum()


def random_model(seed=3):
    model = LBLModel.initial(VOCAB, order=4, features=3, seed=seed)
    rng = np.random.default_rng(0)
    for name in model.params:  # non-zero biases and larger weights make a sharper test
        model.params[name][...] = rng.normal(0, 0.5, model.params[name].shape)
    return model


def test_every_parameter_block_matches_finite_differences():
    model = random_model()
    rng = np.random.default_rng(1)
    windows = rng.integers(0, len(VOCAB), size=(6, 4)).astype(np.int32)
    windows[0, :3] = windows[1, 0]  # a word repeated in one context, and as a target
    windows[2, 3] = windows[2, 0]
    grads = {k: np.zeros_like(v) for k, v in model.params.items()}
    total = model.network(capacity=8).gradients(windows, grads)
    assert np.isclose(-total, reference_loss(model.params, windows), rtol=1e-5)
    epsilon = 1e-3
    for name, array in model.params.items():
        flat = array.reshape(-1)
        for index in rng.choice(flat.size, size=min(flat.size, 12), replace=False):
            saved = flat[index]
            flat[index] = saved + epsilon
            up = reference_loss(model.params, windows)
            flat[index] = saved - epsilon
            down = reference_loss(model.params, windows)
            flat[index] = saved
            # the perturbation is exact in float32 arithmetic of the stored value
            expected = (up - down) / (np.float64(np.float32(saved + epsilon)) - np.float64(np.float32(saved - epsilon)))
            assert abs(grads[name].reshape(-1)[index] - expected) <= 2e-3 * max(1.0, abs(expected)), (name, index)


@pytest.mark.parametrize("count", [5, 1])
def test_a_training_step_moves_every_block_by_its_gradient(count):
    model = random_model()
    windows = np.random.default_rng(2).integers(0, len(VOCAB), size=(count, 4)).astype(np.int32)
    grads = {k: np.zeros_like(v) for k, v in model.params.items()}
    model.network(capacity=8).gradients(windows, grads)
    before = {k: v.copy() for k, v in model.params.items()}
    schedule = update_schedule(count, count, 0.05, 0.0, 0.0, DENSE_DECAY_PERIOD["full"])
    model.network(capacity=8).train(windows, count, *schedule)
    for name in model.params:
        np.testing.assert_allclose(model.params[name], before[name] - 0.05 * grads[name], atol=2e-6)


def test_one_window_scores_as_in_a_batch_and_distributions_sum_to_one():
    model = random_model()
    windows = np.random.default_rng(4).integers(0, len(VOCAB), size=(5, 4)).astype(np.int32)
    batched, single = np.empty(5), np.empty(5)
    model.network(capacity=8).logprobs(windows, batched)
    model.network(capacity=1).logprobs(windows, single)
    np.testing.assert_allclose(single, batched, rtol=1e-5)
    np.testing.assert_allclose(-batched.sum(), reference_loss(model.params, windows), rtol=1e-5)
    assert abs(model.next_distribution([3, 4]).sum() - 1) < 1e-5


def test_model_0_learns_through_the_common_protocol_and_scores_the_same_from_its_file(tmp_path):
    grammar = ToyGrammar()
    vocab = Vocabulary(grammar.words)
    train, valid, test = (Corpus.from_lines([" ".join(s) for s in grammar.sentences(n, seed)], vocab)
                          for n, seed in ((3000, 1), (300, 2), (300, 3)))
    config = TrainingConfig(epochs=4, batch=8, lr=0.05, lr_decay=1e-6, weight_decay=1e-5, threads=2,
                            progress=False)
    model = Trainer(LBLModel.initial(vocab, order=3, features=12, seed=1), config).run(train, valid)
    bigram = estimate(NgramCounts.from_corpus(train, 2))
    assert math.exp(-model.logprobs(test).mean()) < 0.97 * math.exp(-bigram.logprobs(test).mean())
    model.save(str(tmp_path / "lbl.nplm"))
    np.testing.assert_array_equal(load(str(tmp_path / "lbl.nplm")).logprobs(test), model.logprobs(test))


def test_train_nplm_arch_lbl_from_the_command_line(tmp_path):
    (tmp_path / "t.txt").write_text("the cat sat on the mat\nthe dog sat on the log\n" * 20)
    status, _, err = run_nplm("train-nplm", "-arch", "lbl", "-text", tmp_path / "t.txt", "-order", 3, "-m", 6,
                              "-epochs", 2, "-batch", 4, "-quiet", "-lm", tmp_path / "m.nplm")
    assert status == 0, err
    status, out, err = run_nplm("ppl", "-lm", tmp_path / "m.nplm", "-text", tmp_path / "t.txt")
    assert status == 0 and "ppl=" in out, err
    status, _, err = run_nplm("train-nplm", "-arch", "lbl", "-criterion", "is-adaptive", "-samples", 5, "-text",
                              tmp_path / "t.txt", "-order", 3, "-m", 6, "-epochs", 1, "-quiet", "-lm", tmp_path / "s.nplm")
    assert status == 0, err


@pytest.mark.parametrize("kind, batch", [("unigram", 1), ("bigram", 3)])
def test_importance_sampling_gradient_approaches_the_exact_one_as_n_grows(kind, batch):
    """One sampled step of rate 1 moves the parameters by minus the estimator; its mean
    squared distance to the exact gradient (16 seeds) falls about as 1/N."""
    from nplmtk.neural.sampling import proposal
    windows = np.array([[3, 4, 5, 6], [5, 3, 3, 2], [0, 8, 5, 6]][:batch], dtype=np.int32)
    exact = {k: np.zeros_like(v) for k, v in random_model().params.items()}
    random_model().network(capacity=3).gradients(windows, exact)
    history = np.random.default_rng(5).integers(0, len(VOCAB), size=(200, 4)).astype(np.int32)
    q = proposal(history, len(VOCAB), kind)
    errors = sampled_step_errors(random_model, windows, q, exact, seeds=16)
    assert all(later < earlier / 4 for earlier, later in zip(errors, errors[1:])), errors
    assert errors[-1] < errors[0] / 200
