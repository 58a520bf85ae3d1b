"""Finite-difference checks of every parameter block of the network's gradient, against
a float64 numpy implementation of eq. 1 written here."""
import numpy as np
import pytest

from conftest import assert_gradients_match_finite_differences, sampled_step_errors
from nplmtk.neural.mlp import MLPModel
from nplmtk.neural.sampling import Proposal, proposal
from nplmtk.neural.optimizer import DENSE_DECAY_PERIOD, Draws, sgd_steps, update_schedule
from nplmtk.vocab import Vocabulary

VOCAB = Vocabulary([f"w{i}" for i in range(9)])
ACTS = {"tanh": np.tanh, "sigmoid": lambda z: 1 / (1 + np.exp(-z)), "relu": lambda z: np.maximum(z, 0),
        "linear": lambda z: z}


def schedule(examples, batch, lr0, lr_decay=0.0, weight_decay=0.0, sampled=False):
    """The trainer's numbers for a chunk of `examples` starting at update 0."""
    return update_schedule(examples, batch, lr0, lr_decay, weight_decay,
                           DENSE_DECAY_PERIOD["sampled" if sampled else "full"])


def reference_loss(params, windows, activation):
    """-sum log p(target) in float64, eq. 1 with max-subtracted softmax."""
    p = {k: v.astype(np.float64) for k, v in params.items()}
    x = p["C"][windows[:, :-1]].reshape(len(windows), -1)
    y = np.tile(p["b"], (len(windows), 1))
    if "U" in p:
        y += ACTS[activation](p["d"] + x @ p["H"].T) @ p["U"].T
    if "W" in p:
        y += x @ p["W"].T
    y -= y.max(axis=1, keepdims=True)
    logp = y - np.log(np.exp(y).sum(axis=1, keepdims=True))
    return -logp[np.arange(len(windows)), windows[:, -1]].sum()


@pytest.mark.parametrize("hidden, direct, activation", [
    (5, False, "tanh"), (5, True, "tanh"), (0, True, "linear"), (4, False, "sigmoid"), (4, True, "relu"),
    (3, False, "linear"),
])
def test_every_parameter_block_matches_finite_differences(hidden, direct, activation):
    model = MLPModel.initial(VOCAB, order=4, features=3, hidden=hidden, direct=direct,
                             activation=activation, seed=3)
    rng = np.random.default_rng(0)
    for name in model.params:  # non-zero biases and larger weights make a sharper test
        model.params[name][...] = rng.normal(0, 0.5, model.params[name].shape)
    windows = rng.integers(0, len(VOCAB), size=(6, 4)).astype(np.int32)
    windows[0, :3] = windows[1, 0]  # a word repeated in one context
    grads = {k: np.zeros_like(v) for k, v in model.params.items()}
    total = model.network(capacity=8).gradients(windows, grads)
    assert np.isclose(-total, reference_loss(model.params, windows, activation), rtol=1e-5)
    assert_gradients_match_finite_differences(model.params, grads,
                                              lambda: reference_loss(model.params, windows, activation), rng)


def test_a_saturated_sigmoid_layer_stays_finite():
    """Pre-activations far below -88: the logistic is 0, not NaN (under -ffast-math the
    vectorised 1 / (1 + expf(88+)) was NaN), and the loss and gradients are finite."""
    model = MLPModel.initial(VOCAB, order=4, features=3, hidden=16, activation="sigmoid", seed=3)
    rng = np.random.default_rng(0)
    for name in model.params:
        model.params[name][...] = rng.normal(0, 0.5, model.params[name].shape)
    model.params["H"] *= 1000
    windows = rng.integers(0, len(VOCAB), size=(6, 4)).astype(np.int32)
    grads = {k: np.zeros_like(v) for k, v in model.params.items()}
    total = model.network(capacity=8).gradients(windows, grads)
    assert np.isclose(-total, reference_loss(model.params, windows, "sigmoid"), rtol=1e-5)
    assert all(np.isfinite(g).all() for g in grads.values())


@pytest.mark.parametrize("hidden, direct", [(5, False), (4, True), (0, True)])
@pytest.mark.parametrize("count", [7, 1])  # a batch, and one window (the matrix-vector path)
@pytest.mark.parametrize("weight_decay, words", [(0.0, 9), (0.5, 9), (0.0, 600)])
def test_a_training_step_moves_every_block_by_its_gradient(hidden, direct, count, weight_decay, words):
    """theta - rate grad, then (the update ends the chunk) the weight decay's factor on U,
    W and H; not on the biases. (C's decay, row by row as its words occur, is in the
    trajectory test below.) With 600 words a batch's backward pass goes over three blocks
    of output rows, and one window's over ten, the biases on a ramp so that each window's
    maximum score moves from block to block."""
    vocab = Vocabulary([f"w{i}" for i in range(words)])
    model = MLPModel.initial(vocab, order=3, features=4, hidden=hidden, direct=direct, seed=5)
    if words > 256:
        model.params["b"] += np.linspace(0, 4, len(vocab), dtype=np.float32)
    rng = np.random.default_rng(1)
    windows = rng.integers(0, len(vocab), size=(count, 3)).astype(np.int32)
    grads = {k: np.zeros_like(v) for k, v in model.params.items()}
    loglik = model.network(capacity=8).gradients(windows, grads)
    before = {k: v.copy() for k, v in model.params.items()}
    rates, row_keep, dense_keep = schedule(count, count, 0.05, 0.0, weight_decay)
    total, _, _ = model.network(capacity=8).train(windows, sgd_steps(count, rates, row_keep, dense_keep))
    assert total == pytest.approx(loglik, rel=1e-5)
    keep = dense_keep[-1]
    assert (keep < 1) == (weight_decay > 0)
    for name in model.params:
        expected = before[name] - 0.05 * grads[name]
        if name in ("U", "W", "H"):
            expected *= keep
        elif name == "C" and weight_decay:
            continue
        np.testing.assert_allclose(model.params[name], expected, atol=2e-6, err_msg=name)


def test_one_window_scores_as_in_a_batch():
    model = MLPModel.initial(VOCAB, order=4, features=3, hidden=5, direct=True, seed=2)
    windows = np.random.default_rng(4).integers(0, len(VOCAB), size=(5, 4)).astype(np.int32)
    batched, single = np.empty(5), np.empty(5)
    model.network(capacity=8).logprobs(windows, batched)
    model.network(capacity=1).logprobs(windows, single)
    np.testing.assert_allclose(single, batched, rtol=1e-5)


@pytest.mark.parametrize("workers", [2, 3])
def test_scoring_workers_score_as_one(monkeypatch, workers):
    """Scoring shares its batches among workers (one a BLAS thread): 1,000 windows, four
    batches and a partial one, score bit for bit as one worker on one BLAS thread scores
    them (a BLAS of several threads may split its sums otherwise: OpenBLAS on AMD EPYC does)."""
    import nplmtk.neural.network as network
    from nplmtk.neural.blas import blas_threads
    model = MLPModel.initial(Vocabulary([f"w{i}" for i in range(300)]), order=4, features=3, hidden=5, direct=True,
                             seed=2)
    windows = np.random.default_rng(5).integers(0, 300, size=(1000, 4)).astype(np.int32)
    monkeypatch.setattr(network, "blas_thread_count", lambda: 1)
    with blas_threads(1):
        alone = model.example_logprobs(windows)
    monkeypatch.setattr(network, "blas_thread_count", lambda: workers)
    assert np.array_equal(model.example_logprobs(windows), alone)
    monkeypatch.setattr(network, "SCORING_MEMORY", 2 * 4 * 256 * len(model.vocab))  # two workers' scores
    assert model.scoring_workers(4, 256) == 2 and np.array_equal(model.example_logprobs(windows), alone)
    expected = [-reference_loss(model.params, windows[i:i + 1], "tanh") for i in range(0, 1000, 97)]
    np.testing.assert_allclose(alone[::97], expected, rtol=1e-5)
    assert model.example_logprobs(np.zeros((0, 4), dtype=np.int32)).shape == (0,)


def test_distinct_rows_are_numpy_unique_rows():
    """Windows scored once each: the distinct rows and each row's index among them, as
    np.unique(axis=0) gives them, with and without repeats, and for no rows."""
    from nplmtk.neural.network import distinct_rows
    rng = np.random.default_rng(6)
    for rows in (rng.integers(0, 4, size=(500, 3)), rng.integers(0, 10 ** 6, size=(200, 5)), np.zeros((0, 4))):
        rows = rows.astype(np.int32)
        distinct, where = distinct_rows(rows)
        expected, inverse = np.unique(rows, axis=0, return_inverse=True)
        assert np.array_equal(distinct, expected) and np.array_equal(where, inverse.reshape(-1))
        assert distinct.dtype == np.int32 and distinct.flags.c_contiguous


@pytest.mark.parametrize("hidden, direct, bias, words, parts", [
    (5, False, True, 9, 1), (4, True, True, 9, 1), (0, True, True, 9, 1), (4, True, False, 9, 1),
    (5, False, True, 300, 1), (4, True, True, 300, 1), (3, True, False, 300, 1),
    (5, False, True, 300, 2), (4, True, True, 300, 3), (3, True, False, 300, 2), (0, True, True, 9, 2)])
def test_one_window_sgd_with_deferred_updates_is_plain_sgd(hidden, direct, bias, words, parts):
    """Batch-1 training defers its dense updates (16 windows at a time) and streams the
    softmax over blocks of 64 output rows, its threads (`parts`) each on a share of the
    rows; 40 windows with a decaying rate must still give the sequential SGD trajectory and
    its log-likelihood. Weight decay follows the
    trainer's schedule (update_schedule): per step on the rows of C that occur, in bulk
    (every 64 windows, here once at the end) on U, H and W. With 300 words the scores rise
    from block to block (biases on a ramp, or the largest rows of U last), so the running
    maximum moves."""
    vocab = Vocabulary([f"w{i}" for i in range(words)])
    words = len(vocab)
    model = MLPModel.initial(vocab, order=3, features=4, hidden=hidden, direct=direct, bias=bias, seed=7)
    if words > 128:
        if bias:
            model.params["b"] += np.linspace(0, 3, words, dtype=np.float32)
        else:
            model.params["W"] *= np.linspace(0.5, 8, words, dtype=np.float32)[:, None]
    reference = {k: v.astype(np.float64) for k, v in model.params.items()}
    windows = np.random.default_rng(2).integers(0, words, size=(40, 3)).astype(np.int32)
    windows[windows[:, 0] == windows[:, 1], 1] += 1  # distinct context words: C decays once a step
    windows %= words
    lr0, decay_rate, weight_decay = 0.2, 0.05, 0.01
    bulk_decay, loglik = 1.0, 0.0
    for t, window in enumerate(windows):
        step_model = MLPModel.initial(vocab, order=3, features=4, hidden=hidden, direct=direct, bias=bias,
                                      seed=7)
        step_model.params.update({k: v.astype(np.float32) for k, v in reference.items()})
        grads = {k: np.zeros_like(v) for k, v in step_model.params.items()}
        loglik += step_model.network(capacity=1).gradients(window[None, :], grads)
        rate = lr0 / (1 + decay_rate * t)
        reference["C"][window[:-1]] *= 1 - rate * weight_decay
        bulk_decay *= 1 - rate * weight_decay
        for name, value in reference.items():
            if bias or name not in ("b", "d"):
                value -= rate * grads[name]
    for name in ("U", "H", "W"):
        if name in reference:
            reference[name] *= bulk_decay
    total, updates, _ = model.network(capacity=1, parts=parts).train(
        windows, sgd_steps(1, *schedule(len(windows), 1, lr0, decay_rate, weight_decay)))
    assert updates == len(windows)
    assert total == pytest.approx(loglik, rel=1e-5)
    for name in model.params:
        np.testing.assert_allclose(model.params[name], reference[name], atol=2e-5, err_msg=name)


@pytest.mark.parametrize("hidden, direct, kind", [(5, False, "unigram"), (4, True, "unigram"), (0, True, "unigram"),
                                                  (5, True, "bigram")])
def test_importance_sampling_gradient_approaches_the_exact_one_as_n_grows(hidden, direct, kind):
    """One sampled step of rate 1 moves the parameters by minus the estimator; its mean
    squared distance to the exact gradient (20 seeds) falls about as 1/N."""
    def network_at_start():
        model = MLPModel.initial(VOCAB, order=3, features=4, hidden=hidden, direct=direct, seed=3)
        rng = np.random.default_rng(0)
        for name in model.params:
            model.params[name][...] = rng.normal(0, 0.5, model.params[name].shape)
        return model
    window = np.array([[3, 4, 5]], dtype=np.int32)
    model = network_at_start()
    exact = {k: np.zeros_like(v) for k, v in model.params.items()}
    model.network(capacity=1).gradients(window, exact)
    history = np.random.default_rng(5).integers(0, len(VOCAB), size=(200, 3)).astype(np.int32)
    q = proposal(history, len(VOCAB), kind)
    errors = sampled_step_errors(network_at_start, window, q, exact, seeds=20)
    assert all(later < earlier / 4 for earlier, later in zip(errors, errors[1:])), errors
    assert errors[-1] < errors[0] / 200


def sampled_step_reference(params, windows, words, log_q, rate):
    """Algorithm 3's step in float64, written out: every one of the N draws (repeats
    included) pushes its row down with weight r_j / sum r, r_j = exp(y_j) / Q(w_j)."""
    p = {k: v.astype(np.float64) for k, v in params.items()}
    grads = {k: np.zeros_like(v) for k, v in p.items()}
    context, targets = windows[:, :-1], windows[:, -1]
    x = p["C"][context].reshape(len(windows), -1)
    y = np.tile(p["b"][words], (len(windows), 1))
    if "U" in p:
        a = np.tanh(p["d"] + x @ p["H"].T)
        y += a @ p["U"][words].T
    if "W" in p:
        y += x @ p["W"][words].T
    r = np.exp(y - log_q[words] - (y - log_q[words]).max(axis=1, keepdims=True))
    g = r / r.sum(axis=1, keepdims=True)
    dx = np.zeros_like(x)
    for i, t in enumerate(targets):
        np.add.at(grads["b"], words, g[i])
        grads["b"][t] -= 1
        if "U" in p:
            np.add.at(grads["U"], words, np.outer(g[i], a[i]))
            grads["U"][t] -= a[i]
            da = (g[i] @ p["U"][words] - p["U"][t]) * (1 - a[i] ** 2)
            grads["H"] += np.outer(da, x[i])
            grads["d"] += da
            dx[i] += da @ p["H"]
        if "W" in p:
            np.add.at(grads["W"], words, np.outer(g[i], x[i]))
            grads["W"][t] -= x[i]
            dx[i] += g[i] @ p["W"][words] - p["W"][t]
    np.add.at(grads["C"], context.ravel(), dx.reshape(-1, p["C"].shape[1]))
    return {k: p[k] - rate * grads[k] for k in p}


@pytest.mark.parametrize("hidden, direct, batch", [(5, False, 1), (5, True, 1), (0, True, 1), (5, True, 3),
                                                   (4, False, 3)])
def test_a_sampled_step_is_the_estimator_written_out(hidden, direct, batch):
    """One sampled update (one window: rows moved in place; a batch: gathered rows and
    gemm) equals the float64 step over the raw draws, which repeat words: merging the
    repeats changes nothing."""
    model = MLPModel.initial(VOCAB, order=3, features=4, hidden=hidden, direct=direct, seed=3)
    rng = np.random.default_rng(1)
    for name in model.params:
        model.params[name][...] = rng.normal(0, 0.5, model.params[name].shape)
    windows = np.array([[3, 4, 5], [5, 3, 3], [0, 8, 5]][:batch], dtype=np.int32)
    counts = np.arange(1, len(VOCAB) + 1, dtype=np.float64)
    q = Proposal(counts / counts.sum())
    words = q.draw(40, 11)
    assert len(np.unique(words)) < len(words)
    expected = sampled_step_reference(model.params, windows, words, np.log(counts / counts.sum()), 0.1)
    model.network(capacity=batch).train(windows, sgd_steps(batch, *schedule(batch, batch, 0.1, sampled=True),
                                                           sampling=Draws(40, q, 11)))
    for name in model.params:
        np.testing.assert_allclose(model.params[name], expected[name], atol=2e-6, err_msg=name)


@pytest.mark.parametrize("kind", ["unigram", "bigram"])
def test_the_sampler_draws_from_the_proposal(kind):
    """Alias-table draws (and, for the bigram proposal, the batch's mixture of Q(.|v))
    have the proposal's frequencies: a chi-square test at a 1e-6 false-alarm rate."""
    history = np.random.default_rng(5).integers(0, len(VOCAB), size=(300, 3)).astype(np.int32)
    counts = np.bincount(history[:, -1], minlength=len(VOCAB)) + 1.0
    expected = counts / counts.sum()
    batch = np.array([[0, 2, 1], [1, 7, 1]], dtype=np.int32)
    if kind == "bigram":
        mixture = np.zeros(len(VOCAB))
        for previous in batch[:, -2]:
            rows = history[history[:, -2] == previous, -1]
            successors = np.bincount(rows, minlength=len(VOCAB))
            keep = len(rows) / (len(rows) + np.count_nonzero(successors))
            mixture += keep * successors / len(rows) + (1 - keep) * expected
        expected = mixture / len(batch)
    q = proposal(history, len(VOCAB), kind)
    draws = q.draw(200_000, 3, batch if kind == "bigram" else None)
    observed = np.bincount(draws, minlength=len(VOCAB))
    chi2 = ((observed - expected * len(draws)) ** 2 / (expected * len(draws))).sum()
    assert chi2 < 49, (chi2, observed / len(draws), expected)  # chi-square, 11 dof: P(> 49) < 1e-6


def energy_loss(params, windows):
    """-sum log p(target) of the energy network in float64 (every word's hidden layer)."""
    p = {k: v.astype(np.float64) for k, v in params.items()}
    total = 0.0
    for window in windows:
        x = p["C"][window[:-1]].reshape(-1)
        z = np.concatenate([p["C"], np.tile(x, (len(p["C"]), 1))], axis=1)
        y = p["b"] + (p["U"] * np.tanh(p["d"] + z @ p["H"].T)).sum(axis=1)
        if "W" in p:
            y += (p["W"] * z).sum(axis=1)
        y -= y.max()
        total += y[window[-1]] - np.log(np.exp(y).sum())
    return -total


def random_energy_model(direct, seed=0):
    from nplmtk.neural.energy import EnergyModel
    model = EnergyModel.initial(VOCAB, order=3, features=3, hidden=5, direct=direct, seed=seed)
    rng = np.random.default_rng(seed)
    for name in model.params:
        model.params[name][...] = rng.normal(0, 0.5, model.params[name].shape)
    return model


@pytest.mark.parametrize("direct", [False, True])
def test_energy_network_gradient_matches_finite_differences(direct):
    model = random_energy_model(direct)
    rng = np.random.default_rng(1)
    windows = rng.integers(0, len(VOCAB), size=(4, 3)).astype(np.int32)
    windows[0, :2] = windows[0, 2]  # the target also in its own context
    grads = {k: np.zeros_like(v) for k, v in model.params.items()}
    total = model.network().gradients(windows, grads)
    assert np.isclose(-total, energy_loss(model.params, windows), rtol=1e-5)
    scores = np.empty(len(windows))
    model.network().logprobs(windows, scores)
    assert np.isclose(-scores.sum(), energy_loss(model.params, windows), rtol=1e-5)
    assert_gradients_match_finite_differences(model.params, grads, lambda: energy_loss(model.params, windows), rng)


@pytest.mark.parametrize("direct, bias, words, parts", [(False, True, 9, 1), (True, True, 9, 1), (False, False, 9, 1),
                                                        (False, True, 300, 1), (True, True, 300, 2),
                                                        (False, True, 300, 3)])
def test_energy_exact_steps_in_place_are_sequential_sgd(direct, bias, words, parts):
    """At batch 1 the exact gradient steps the parameters in place (each value read before
    it is written; H_target's gradient from C before C's step), block by block of 128 rows,
    its threads (`parts`) each on their blocks: 12 windows with a decaying rate and weight
    decay give the float64 trajectory of `gradients` applied in turn, and its
    log-likelihood; without biases, b and d stay."""
    from nplmtk.neural.energy import EnergyModel
    vocab = Vocabulary([f"w{i}" for i in range(words)])
    model = EnergyModel.initial(vocab, order=3, features=3, hidden=5, direct=direct, bias=bias, seed=4)
    rng = np.random.default_rng(4)
    for name in model.params:
        model.params[name][...] = rng.normal(0, 0.5, model.params[name].shape)
    reference = {k: v.astype(np.float64) for k, v in model.params.items()}
    windows = rng.integers(0, len(vocab), size=(12, 3)).astype(np.int32)
    windows[0, :2] = windows[0, 2]  # the target twice in its own context
    rates, row_keep, dense_keep = schedule(len(windows), 1, 0.3, 0.1, 0.05)
    loglik = 0.0
    for window, rate, keep in zip(windows, rates, row_keep):
        step_model = EnergyModel.initial(vocab, order=3, features=3, hidden=5, direct=direct, bias=bias, seed=4)
        step_model.params.update({k: v.astype(np.float32) for k, v in reference.items()})
        grads = {k: np.zeros_like(v) for k, v in step_model.params.items()}
        loglik += step_model.network().gradients(window[None, :], grads)
        for name, value in reference.items():
            if name not in ("b", "d"):
                value *= keep
            if bias or name not in ("b", "d"):
                value -= rate * grads[name]
    total, updates, _ = model.network(parts=parts).train(windows, sgd_steps(1, rates, row_keep, dense_keep))
    assert updates == len(windows)
    assert total == pytest.approx(loglik, rel=1e-5)
    for name in model.params:
        np.testing.assert_allclose(model.params[name], reference[name], atol=2e-5, err_msg=name)


def energy_sampled_step_reference(params, window, words, log_q, rate):
    """Algorithm 3's step for the energy network in float64, written out: each of the N
    draws w_j (repeats included) pulls its energy up with weight r_j / sum r, r_j =
    exp(y_j) / Q(w_j), and the target's is pushed down, y_w = b_w + U_w . tanh(d + H z_w)."""
    p = {k: v.astype(np.float64) for k, v in params.items()}
    grads = {k: np.zeros_like(v) for k, v in p.items()}
    m = p["C"].shape[1]
    x = p["C"][window[:-1]].reshape(-1)

    def score(w):
        a = np.tanh(p["d"] + p["H"] @ np.concatenate([p["C"][w], x]))
        return p["b"][w] + p["U"][w] @ a, a

    y = np.array([score(w)[0] for w in words])
    r = np.exp(y - log_q[words] - (y - log_q[words]).max())
    for w, weight in list(zip(words, r / r.sum())) + [(window[-1], -1.0)]:
        _, a = score(w)
        pre = weight * p["U"][w] * (1 - a ** 2)
        grads["b"][w] += weight
        grads["U"][w] += weight * a
        grads["d"] += pre
        grads["H"] += np.outer(pre, np.concatenate([p["C"][w], x]))
        grads["C"][w] += p["H"][:, :m].T @ pre
        for k, context_word in enumerate(window[:-1]):
            grads["C"][context_word] += p["H"][:, m * (k + 1):m * (k + 2)].T @ pre
    return {k: p[k] - rate * grads[k] for k in p}


def test_a_sampled_energy_step_is_the_estimator_written_out():
    """One sampled step with about 280 distinct words among 2,000 draws (the hidden layers'
    products run in blocks of 128 rows) equals the float64 step over the raw draws."""
    from nplmtk.neural.energy import EnergyModel
    vocab = Vocabulary([f"w{i}" for i in range(300)])
    model = EnergyModel.initial(vocab, order=3, features=3, hidden=5, seed=2)
    rng = np.random.default_rng(2)
    for name in model.params:
        model.params[name][...] = rng.normal(0, 0.5, model.params[name].shape)
    window = np.array([[7, 250, 31]], dtype=np.int32)
    counts = np.arange(1, len(vocab) + 1, dtype=np.float64)
    q = Proposal(counts / counts.sum())
    words = q.draw(2000, 5)
    assert 256 < len(np.unique(words)) < len(words)
    expected = energy_sampled_step_reference(model.params, window[0], words, np.log(counts / counts.sum()), 0.1)
    model.network().train(window, sgd_steps(1, *schedule(1, 1, 0.1, sampled=True), sampling=Draws(2000, q, 5)))
    for name in model.params:
        np.testing.assert_allclose(model.params[name], expected[name], atol=2e-6, err_msg=name)


@pytest.mark.parametrize("direct", [False, True])
def test_energy_importance_sampling_approaches_the_exact_gradient(direct):
    window = np.array([[3, 4, 5]], dtype=np.int32)
    exact = {k: np.zeros_like(v) for k, v in random_energy_model(direct).params.items()}
    random_energy_model(direct).network().gradients(window, exact)
    history = np.random.default_rng(5).integers(0, len(VOCAB), size=(200, 3)).astype(np.int32)
    q = proposal(history, len(VOCAB), "unigram")
    # one step of rate 1 is exactly minus the estimator: the rows are read before the step
    errors = sampled_step_errors(lambda: random_energy_model(direct), window, q, exact, seeds=12)
    assert all(later < earlier / 3 for earlier, later in zip(errors, errors[1:])), errors
