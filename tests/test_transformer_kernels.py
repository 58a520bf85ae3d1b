"""The Transformer's blocks (cython_ext/transformer_kernels.pyx) against a float64 numpy
implementation written here: the forward pass, and finite differences of every parameter
and of the input, with and without fixed dropout masks."""
import numpy as np
import pytest
from scipy.special import erf

from conftest import assert_gradients_match_finite_differences
from nplmtk._ext.transformer_kernels import BLOCK_PARAMETERS, TransformerStack


def stack_params(blocks, d, ff, rng):
    sizes = {"d": d, "3d": 3 * d, "f": ff}
    params = {f"{name}{b}": rng.normal(0, 0.4, tuple(sizes[s] for s in shape)).astype(np.float32)
              for b in range(blocks) for name, shape in BLOCK_PARAMETERS}
    for b in range(blocks):  # gains near 1, as trained networks have them
        params[f"ln1_gain{b}"] += 1
        params[f"ln2_gain{b}"] += 1
    params["final_gain"] = (1 + rng.normal(0, 0.2, d)).astype(np.float32)
    params["final_bias"] = rng.normal(0, 0.2, d).astype(np.float32)
    return params


def layer_norm(x, gain, bias):
    centred = x - x.mean(axis=-1, keepdims=True)
    return gain * centred / np.sqrt((centred ** 2).mean(axis=-1, keepdims=True) + 1e-5) + bias


def reference_top(params, x, blocks, heads, streams, length, masks=None):
    """The top states in float64; masks: {(block, "weights"|"out"|"ff"): dropout's scales}."""
    p = {name: value.astype(np.float64) for name, value in params.items()}
    masks = masks or {}
    d = x.shape[1]
    dh = d // heads
    h = x.astype(np.float64)
    causal = np.tril(np.ones((length, length), dtype=bool))
    for b in range(blocks):
        qkv = (layer_norm(h, p[f"ln1_gain{b}"], p[f"ln1_bias{b}"]) @ p[f"qkv{b}"] + p[f"qkv_bias{b}"])
        qkv = qkv.reshape(streams, length, 3, heads, dh)
        q, k, v = (qkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3))  # streams x heads x T x dh
        scores = np.where(causal, q @ k.transpose(0, 1, 3, 2) / np.sqrt(dh), -np.inf)
        weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
        weights /= weights.sum(axis=-1, keepdims=True)
        weights = weights * masks.get((b, "weights"), 1)
        attention = (weights @ v).transpose(0, 2, 1, 3).reshape(streams * length, d)
        h = h + (attention @ p[f"out{b}"] + p[f"out_bias{b}"]) * masks.get((b, "out"), 1)
        pre = layer_norm(h, p[f"ln2_gain{b}"], p[f"ln2_bias{b}"]) @ p[f"ff1{b}"] + p[f"ff1_bias{b}"]
        gelu = 0.5 * pre * (1 + erf(pre / np.sqrt(2)))
        h = h + (gelu @ p[f"ff2{b}"] + p[f"ff2_bias{b}"]) * masks.get((b, "ff"), 1)
    return layer_norm(h, p["final_gain"], p["final_bias"])


SHAPES = [  # blocks, d, heads, ff, streams, length
    (1, 8, 2, 12, 1, 4),
    (2, 8, 2, 16, 2, 5),
    (3, 6, 3, 10, 3, 1),
    (2, 12, 1, 8, 1, 7),
]


@pytest.mark.parametrize("blocks, d, heads, ff, streams, length", SHAPES)
def test_the_forward_pass_is_the_equations(blocks, d, heads, ff, streams, length):
    rng = np.random.default_rng(blocks * 10 + length)
    params = stack_params(blocks, d, ff, rng)
    grads = {name: np.zeros_like(value) for name, value in params.items()}
    x = rng.normal(0, 1, (streams * length, d)).astype(np.float32)
    stack = TransformerStack(params, grads, blocks, heads, streams, length)
    expected = reference_top(params, x, blocks, heads, streams, length)
    assert np.allclose(stack.forward(x), expected, atol=2e-5, rtol=1e-4)
    # a position sees no later one: changing the last position leaves the others alone
    changed = x.copy()
    changed[length - 1::length] += 1
    top = stack.forward(x).copy()
    later = stack.forward(changed)
    keep = np.ones(streams * length, dtype=bool)
    keep[length - 1::length] = False
    assert np.array_equal(top[keep], later[keep])


@pytest.mark.parametrize("blocks, d, heads, ff, streams, length", SHAPES)
def test_every_parameter_and_the_input_match_finite_differences(blocks, d, heads, ff, streams, length):
    rng = np.random.default_rng(blocks * 100 + d)
    params = stack_params(blocks, d, ff, rng)
    grads = {name: np.zeros_like(value) for name, value in params.items()}
    x = rng.normal(0, 1, (streams * length, d)).astype(np.float32)
    top_grad = rng.normal(0, 1, (streams * length, d)).astype(np.float32)
    stack = TransformerStack(params, grads, blocks, heads, streams, length)
    stack.forward(x, train=True)
    grads["x"] = stack.backward(top_grad).copy()
    checked = {**params, "x": x}
    assert_gradients_match_finite_differences(
        checked, grads, lambda: (reference_top(params, x, blocks, heads, streams, length) * top_grad).sum(), rng)


def test_dropout_gradients_match_finite_differences_under_the_drawn_masks():
    blocks, d, heads, ff, streams, length = 2, 8, 2, 12, 2, 4
    rng = np.random.default_rng(7)
    params = stack_params(blocks, d, ff, rng)
    grads = {name: np.zeros_like(value) for name, value in params.items()}
    x = rng.normal(0, 1, (streams * length, d)).astype(np.float32)
    top_grad = rng.normal(0, 1, (streams * length, d)).astype(np.float32)
    stack = TransformerStack(params, grads, blocks, heads, streams, length, drop_attention=0.3, drop_residual=0.2,
                             seed=5)
    top = stack.forward(x, train=True).copy()
    masks = stack.masks()
    assert {key: value.mean() for key, value in masks.items() if value.size > 8}  # drawn, not all kept
    assert any((value == 0).any() for value in masks.values())
    assert np.allclose(top, reference_top(params, x, blocks, heads, streams, length, masks), atol=2e-5, rtol=1e-4)
    grads["x"] = stack.backward(top_grad).copy()
    assert_gradients_match_finite_differences(
        {**params, "x": x}, grads,
        lambda: (reference_top(params, x, blocks, heads, streams, length, masks) * top_grad).sum(), rng)
    # scoring draws none
    assert np.allclose(stack.forward(x), reference_top(params, x, blocks, heads, streams, length), atol=2e-5,
                       rtol=1e-4)


@pytest.mark.parametrize("change, message", [
    (lambda p: p.__setitem__("qkv0", p["qkv0"][:, :-1].copy()), "qkv0"),
    (lambda p: p.__setitem__("ff2_bias0", p["ff2_bias0"].astype(np.float64)), "ff2_bias0"),
    (lambda p: p.pop("final_bias"), "final_bias"),
])
def test_arrays_of_the_wrong_shape_or_type_are_refused_before_the_kernel(change, message):
    rng = np.random.default_rng(0)
    params = stack_params(1, 8, 12, rng)
    grads = {name: np.zeros_like(value) for name, value in params.items()}
    change(params)
    with pytest.raises(ValueError, match=message):
        TransformerStack(params, grads, 1, 2, 1, 4)
    with pytest.raises(ValueError, match="heads"):
        TransformerStack(stack_params(1, 8, 12, rng), grads, 1, 3, 1, 4)
    stack = TransformerStack(stack_params(1, 8, 12, rng), grads, 1, 2, 2, 4)
    with pytest.raises(ValueError, match="x: shape"):
        stack.forward(np.zeros((4, 8), dtype=np.float32))
