"""The factored output layers: the hierarchical softmax (`-output hs`, cython_ext/
hs_output.pxd) of the MLP, RNN, LSTM and log-bilinear models, and the MLP's class-factored
softmax (`-output class`, cython_ext/class_output.pxd; the recurrent models' is tested in
test_recurrent.py, as are their gradients with either, and the log-bilinear models' in
test_lbl.py): the Huffman tree, finite-difference checks of the
MLP's every parameter against a float64 numpy model written here, exact normalisation, the
save/load/score round trip, a short training run from the command line, and crafted trees
refused."""
import heapq
import math

import numpy as np
import pytest

from conftest import (assert_gradients_match_finite_differences, assert_one_line_error, class_logprobs, hs_logprobs,
                      run_nplm, scored_as_ppl_says)
from nplmtk import container
from nplmtk.corpus import Corpus
from nplmtk.models import ARCHITECTURES, load
from nplmtk.neural.huffman import MAX_DEPTH, huffman_tree, tree_paths
from nplmtk.neural.mlp import MLPModel
from nplmtk.neural.optimizer import DENSE_DECAY_PERIOD, sgd_steps, update_schedule
from nplmtk.vocab import Vocabulary

VOCAB = Vocabulary([f"w{i}" for i in range(9)])
COUNTS = [0, 0, 30, 50, 9, 7, 5, 4, 3, 3, 2, 1]  # of <unk>, <s>, </s> and the nine words
ACTS = {"tanh": np.tanh, "sigmoid": lambda z: 1 / (1 + np.exp(-z)), "relu": lambda z: np.maximum(z, 0)}


def test_the_huffman_tree_has_the_optimal_code_lengths_and_breaks_ties_by_id():
    counts = np.random.default_rng(3).zipf(1.5, 300).astype(float)
    starts, points, turns = tree_paths(huffman_tree(counts), len(counts))
    lengths = np.diff(starts)
    heap, cost = list(counts), 0.0  # Huffman's cost: the sum of the merged weights
    heapq.heapify(heap)
    while len(heap) > 1:
        merged = heapq.heappop(heap) + heapq.heappop(heap)
        cost += merged
        heapq.heappush(heap, merged)
    assert math.isclose((lengths * counts).sum(), cost)
    # equal counts: the lower ids merge first, as child 0
    assert huffman_tree([1, 1, 1, 1]) == [0, 1, 2, 3, 4, 5]
    assert huffman_tree([5, 1, 1]) == [1, 2, 3, 0]  # the lighter child first
    codes = {tuple(turns[starts[w]:starts[w + 1]]) for w in range(len(counts))}
    assert len(codes) == len(counts)  # a prefix code: every word its own path


def random_mlp(output, seed=3, **shape):
    classes = 4 if output == "class" else None
    model = MLPModel.initial(VOCAB, order=4, features=3, hidden=5, seed=seed, output=output, classes=classes,
                             counts=COUNTS, **shape)
    rng = np.random.default_rng(0)
    for name in model.params:  # non-zero biases and larger weights make a sharper test
        model.params[name][...] = rng.normal(0, 0.5, model.params[name].shape)
    return model


def reference_loss(model, windows):
    """-sum log p(target) in float64: the hidden layer of eq. 1, then the tree or classes."""
    p = {k: v.astype(np.float64) for k, v in model.params.items()}
    x = p["C"][windows[:, :-1]].reshape(len(windows), -1)
    a = ACTS[model.activation](p["d"] + x @ p["H"].T)
    if model.meta["bias"] is False:  # the biases are no parameters
        p.update({name: 0 for name in ("b", "bn", "bc")})
    if model.meta["hs"]:
        logp = hs_logprobs(a, p["Vn"], p["bn"], model.meta["tree"], len(model.vocab))
    else:
        logp = class_logprobs(a, p["U"], p["b"], p["Vc"], p["bc"], model.meta["class_of"])
    return -logp[np.arange(len(windows)), windows[:, -1]].sum()


@pytest.mark.parametrize("output", ["hs", "class"])
@pytest.mark.parametrize("activation, bias", [("tanh", True), ("sigmoid", False), ("relu", True)])
def test_every_mlp_parameter_matches_finite_differences(output, activation, bias):
    model = random_mlp(output, activation=activation, bias=bias)
    rng = np.random.default_rng(1)
    windows = rng.integers(0, len(VOCAB), size=(6, 4)).astype(np.int32)
    windows[0, :3] = windows[1, 0]  # a word repeated in one context
    grads = {k: np.zeros_like(v) for k, v in model.params.items()}
    total = model.network(capacity=8).gradients(windows, grads)
    assert np.isclose(-total, reference_loss(model, windows), rtol=1e-5)
    params = {k: v for k, v in model.params.items() if bias or k not in ("b", "bn", "bc")}
    assert_gradients_match_finite_differences(params, grads, lambda: reference_loss(model, windows), rng)


@pytest.mark.parametrize("output", ["hs", "class"])
@pytest.mark.parametrize("count", [7, 1])
def test_an_mlp_training_step_moves_every_block_by_its_gradient(output, count):
    model = random_mlp(output)
    windows = np.random.default_rng(1).integers(0, len(VOCAB), size=(count, 4)).astype(np.int32)
    grads = {k: np.zeros_like(v) for k, v in model.params.items()}
    model.network(capacity=8).gradients(windows, grads)
    before = {k: v.copy() for k, v in model.params.items()}
    model.network(capacity=8).train(windows, sgd_steps(count, *update_schedule(count, count, 0.05, 0.0, 0.0,
                                                                                DENSE_DECAY_PERIOD["sampled"])))
    for name in model.params:
        np.testing.assert_allclose(model.params[name], before[name] - 0.05 * grads[name], atol=2e-6)


@pytest.fixture(scope="module")
def big_vocab():
    """300 words with Zipf counts: a deep, lopsided tree."""
    vocab = Vocabulary([f"v{i}" for i in range(300)])
    counts = np.random.default_rng(5).zipf(1.3, len(vocab)).astype(float)
    return vocab, counts


@pytest.mark.parametrize("arch, shape", [("mlp", dict(order=3)), ("rnn", {}), ("lstm", dict(layers=2)),
                                         ("mlp", dict(order=3, output="class")), ("lbl", dict(order=3)),
                                         ("lbl3", dict(order=4, output="class"))])
def test_every_distribution_sums_to_one(big_vocab, arch, shape):
    vocab, counts = big_vocab
    model = ARCHITECTURES[arch].initial(vocab, features=6, hidden=7, seed=1, counts=counts, **{"output": "hs", **shape})
    rng = np.random.default_rng(2)
    for name in model.params:
        model.params[name][...] = rng.normal(0, 1.0, model.params[name].shape)
    for history in ([], [5, 17, 3], list(rng.integers(0, len(vocab), 12))):
        distribution = model.next_distribution(history)
        assert distribution.min() > 0 and abs(distribution.sum() - 1) < 1e-5
        # and scoring agrees with the distribution
        words = [vocab.words[w] for w in history] + [vocab.words[42]]
        logp = model.logprobs(Corpus.from_lines([" ".join(words)], vocab))
        assert math.isclose(math.log(distribution[42]), logp[len(history)], rel_tol=1e-4)


@pytest.mark.parametrize("arch, shape", [("mlp", dict(order=3)), ("lstm", {}), ("mlp", dict(order=3, output="class")),
                                         ("lbl1", dict(order=3)), ("lbl", dict(order=3, output="class"))])
def test_saved_and_loaded_models_score_the_same(tmp_path, big_vocab, arch, shape):
    vocab, counts = big_vocab
    model = ARCHITECTURES[arch].initial(vocab, features=6, hidden=7, seed=1, counts=counts, **{"output": "hs", **shape})
    model.save(str(tmp_path / "m.nplm"))
    again = load(str(tmp_path / "m.nplm"))
    corpus = Corpus.from_lines(["v1 v2 v3 v250", "v7 v7 v0"], vocab)
    assert again.output == model.output and again.meta == model.meta
    np.testing.assert_array_equal(again.logprobs(corpus), model.logprobs(corpus))


@pytest.mark.parametrize("arch, options", [
    ("mlp", ["-output", "hs", "-order", 3, "-batch", 4, "-lr", 0.05, "-h", 8]),
    ("mlp", ["-output", "class", "-classes", 5, "-order", 3, "-lr", 0.05, "-h", 8]),
    ("lstm", ["-output", "hs", "-bptt", 10, "-streams", 4, "-lr", 0.05, "-h", 8]),
    ("lbl", ["-output", "hs", "-order", 3, "-batch", 4, "-lr", 0.05]),  # Model 0 has no hidden layer: no -h
    ("lbl2", ["-output", "class", "-order", 3, "-batch", 4, "-lr", 0.05, "-h", 8])])
def test_a_short_run_lowers_the_ppl_from_the_command_line(toy_texts, tmp_path, arch, options):
    texts, _ = toy_texts
    model_path = tmp_path / "m.nplm"
    status, _, err = run_nplm("train", "-arch", arch, "-text", texts / "train.txt", "-m", 8,
                              *options, "-epochs", 3, "-threads", 2, "-lm", model_path, "-quiet",
                              "-log", tmp_path / "log.jsonl")
    assert status == 0, err
    ppl = [float(line.split('"train_ppl": ')[1].split(",")[0]) for line in open(tmp_path / "log.jsonl")]
    assert ppl[-1] < 0.8 * ppl[0]
    model, reported = scored_as_ppl_says(model_path, texts / "valid.txt")
    assert model.output == options[1] and reported < len(model.vocab) / 2


def crafted(tmp_path, arch, tree):
    """A model of `arch` over VOCAB whose stored tree is `tree`."""
    shape = {} if ARCHITECTURES[arch].RECURRENT else dict(order=3)
    model = ARCHITECTURES[arch].initial(VOCAB, features=3, hidden=4, seed=1, output="hs", counts=COUNTS, **shape)
    path = tmp_path / "m.nplm"
    container.save(str(path), model.kind, model.params, meta={**model.file_meta(), "tree": tree}, vocab=VOCAB)
    return path, model.meta["tree"]


def chain(words):
    """A tree of depth words - 1: each internal node holds one word and the node below."""
    children = [0, 1]
    for i in range(1, words - 1):
        children += [words + i - 1, i + 1]
    return children


def self_loop(tree):
    """Each node still the child of one node, but a node of the root's the child of itself."""
    words = len(tree) // 2 + 1
    slot = next(k for k in (-2, -1) if tree[k] >= words)  # an internal child of the root
    node = tree[slot]
    tree[slot], tree[2 * (node - words)] = tree[2 * (node - words)], node
    return tree


def test_each_path_walks_from_the_root_down_to_its_word():
    """tree_paths finds every word's path at once: followed from the root, each node and
    turn leads to the next node on it and its last turn to the word."""
    counts = np.random.default_rng(4).zipf(1.3, 2000).astype(float)
    tree = huffman_tree(counts)
    words = len(counts)
    starts, points, turns = tree_paths(tree, words)
    for word in range(words):
        node = words - 2  # the root, an internal node
        for k in range(starts[word], starts[word + 1]):
            assert points[k] == node
            child = tree[2 * node + int(turns[k])]
            if k + 1 < starts[word + 1]:
                assert child >= words
                node = child - words
            else:
                assert child == word


@pytest.mark.parametrize("arch", ["mlp", "rnn", "lstm", "lbl"])
@pytest.mark.parametrize("change, fragment", [
    (lambda tree: tree[:-2], "has 22 children, not 20"),
    (lambda tree: tree[:-1] + [22], "a child outside 0..21"),
    (lambda tree: tree[:-1] + [-1], "a child outside 0..21"),
    (lambda tree: [tree[1]] + tree[1:], "the child of two nodes"),
    (lambda tree: self_loop(tree), "does not reach the root"),
    (lambda tree: tree[:3] + ["4"] + tree[4:], "not a list of node ids"),
    (lambda tree: None, "not a list of node ids"),
])
def test_a_crafted_tree_is_refused_in_one_line(tmp_path, arch, change, fragment):
    path, tree = crafted(tmp_path, arch, None)
    path, _ = crafted(tmp_path, arch, change(list(tree)))
    (tmp_path / "t.txt").write_text("w1 w2\n")
    status, out, err = run_nplm("ppl", "-lm", path, "-text", tmp_path / "t.txt")
    assert_one_line_error(status, err, str(path), "hierarchical softmax tree is broken", fragment)
    assert out == ""


def test_paths_longer_than_the_bound_are_refused():
    tree_paths(chain(MAX_DEPTH + 1), MAX_DEPTH + 1)
    with pytest.raises(ValueError, match="does not reach the root"):
        tree_paths(chain(MAX_DEPTH + 2), MAX_DEPTH + 2)
