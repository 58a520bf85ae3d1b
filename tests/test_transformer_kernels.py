"""The Transformer's blocks (cython_ext/transformer_kernels.pyx) against a float64 numpy
implementation written here: the forward pass, and finite differences of every parameter
and of the input, with and without fixed dropout masks."""
import numpy as np
import pytest
from scipy.special import erf

from conftest import assert_gradients_match_finite_differences
from nplmtk.neural.blas import blas_threads
from nplmtk._ext.transformer_kernels import BLOCK_PARAMETERS, RELATIVE_PARAMETERS, TransformerStack, \
    relative_positions


def stack_params(blocks, d, ff, rng, relative=False):
    sizes = {"d": d, "3d": 3 * d, "f": ff}
    params = {f"{name}{b}": rng.normal(0, 0.4, tuple(sizes[s] for s in shape)).astype(np.float32)
              for b in range(blocks) for name, shape in BLOCK_PARAMETERS + (RELATIVE_PARAMETERS if relative else ())}
    for b in range(blocks):  # gains near 1, as trained networks have them
        params[f"ln1_gain{b}"] += 1
        params[f"ln2_gain{b}"] += 1
    params["final_gain"] = (1 + rng.normal(0, 0.2, d)).astype(np.float32)
    params["final_bias"] = rng.normal(0, 0.2, d).astype(np.float32)
    return params


def layer_norm(x, gain, bias):
    centred = x - x.mean(axis=-1, keepdims=True)
    return gain * centred / np.sqrt((centred ** 2).mean(axis=-1, keepdims=True) + 1e-5) + bias


def reference_top(params, x, blocks, heads, streams, length, masks=None, memories=None, filled=0):
    """The top states in float64; masks: {(block, "weights"|"out"|"ff"): dropout's scales}.
    memories: each block's (streams, M, d) memory, of which the last `filled` rows hold
    content, with relative positions (params "rel0", ...); the memories for the next
    segment are left in the list."""
    p = {name: value.astype(np.float64) for name, value in params.items()}
    masks = masks or {}
    d = x.shape[1]
    dh = d // heads
    h = x.astype(np.float64)
    M = memories[0].shape[1] if memories else 0
    keys = M + length
    # query i (at M + i) sees key j in [M - filled, M + i]
    i, j = np.arange(length)[:, None], np.arange(keys)[None, :]
    seen = (j <= M + i) & (j >= M - filled)
    R = relative_positions(keys, d).astype(np.float64) if "rel0" in params else None
    for b in range(blocks):
        joined = h.reshape(streams, length, d)
        if M:
            joined = np.concatenate([memories[b], joined], axis=1)
            memories[b] = joined[:, -M:].copy()
        qkv = (layer_norm(joined, p[f"ln1_gain{b}"], p[f"ln1_bias{b}"]) @ p[f"qkv{b}"] + p[f"qkv_bias{b}"])
        qkv = qkv.reshape(streams, keys, 3, heads, dh)
        q, k, v = (qkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3))  # streams x heads x keys x dh
        q = q[:, :, M:]
        if R is None:
            raw = q @ k.transpose(0, 1, 3, 2)
        else:  # Dai et al.'s A^rel: (q + u) . k_j + (q + v) . W_R R_(i-j)
            u, w = p[f"rel_u{b}"].reshape(heads, 1, dh), p[f"rel_v{b}"].reshape(heads, 1, dh)
            Rk = (R @ p[f"rel{b}"]).reshape(keys, heads, dh).transpose(1, 0, 2)  # heads x keys x dh
            by_distance = (q + w) @ Rk.transpose(0, 2, 1)  # streams x heads x T x distance
            distance = np.clip(M + i - j, 0, keys - 1)
            raw = (q + u) @ k.transpose(0, 1, 3, 2) + by_distance[:, :, i, distance]
        scores = np.where(seen, raw / np.sqrt(dh), -np.inf)
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
    (1, 8, 2, 12, 2, 69),  # queries in two blocks (QUERY_BLOCK 64), the second short
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


def test_the_dropout_masks_are_the_same_whatever_the_threads_and_drop_at_their_rate():
    """Threads draw each mask's slices by index: one thread's masks, three threads' masks and
    the next segment's differ only where they should."""
    blocks, d, heads, ff, streams, length = 2, 16, 2, 24, 6, 40
    rng = np.random.default_rng(11)
    params = stack_params(blocks, d, ff, rng)
    x = rng.normal(0, 1, (streams * length, d)).astype(np.float32)
    drawn = []
    for threads in (1, 3):
        grads = {name: np.zeros_like(value) for name, value in params.items()}
        stack = TransformerStack(params, grads, blocks, heads, streams, length, drop_attention=0.3, drop_residual=0.2,
                                 seed=5)
        stack.set_threads(threads)
        with blas_threads(1):
            stack.forward(x, train=True)
            drawn.append({key: value.copy() for key, value in stack.masks().items()})
            stack.forward(x, train=True)
            drawn.append(stack.masks())
    one, next_one, three, next_three = drawn
    for key, mask in one.items():
        assert np.array_equal(mask, three[key]) and np.array_equal(next_one[key], next_three[key])
        assert not np.array_equal(mask, next_one[key])
        rate = 0.3 if key[1] == "weights" else 0.2
        assert abs((mask == 0).mean() - rate) < 0.02, key
        assert set(np.unique(mask)) == {0, np.float32(1 / (1 - rate))}
    assert not np.array_equal(one[(0, "out")], one[(1, "out")])  # each draw its own key


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


XL_SHAPES = [  # blocks, d, heads, ff, streams, length, memory
    (1, 8, 2, 12, 1, 4, 0),
    (2, 8, 2, 12, 2, 4, 3),
    (2, 6, 3, 10, 2, 3, 5),  # a memory longer than a segment fills over two
    (1, 8, 2, 12, 1, 66, 6),  # queries in two blocks
]


@pytest.mark.parametrize("blocks, d, heads, ff, streams, length, memory", XL_SHAPES)
def test_the_memory_and_relative_positions_are_transformer_xls(blocks, d, heads, ff, streams, length, memory):
    rng = np.random.default_rng(memory * 10 + d)
    params = stack_params(blocks, d, ff, rng, relative=True)
    grads = {name: np.zeros_like(value) for name, value in params.items()}
    stack = TransformerStack(params, grads, blocks, heads, streams, length, memory=memory, relative=True)
    memories = [np.zeros((streams, memory, d)) for _ in range(blocks)]
    segments = [rng.normal(0, 1, (streams * length, d)).astype(np.float32) for _ in range(3)]
    filled = 0
    for x in segments:
        expected = reference_top(params, x, blocks, heads, streams, length, memories=memories, filled=filled)
        assert np.allclose(stack.forward(x), expected, atol=3e-5, rtol=1e-4)
        filled = min(memory, filled + length)
    stack.reset()
    fresh = reference_top(params, segments[0], blocks, heads, streams, length,
                          memories=[np.zeros((streams, memory, d)) for _ in range(blocks)])
    assert np.allclose(stack.forward(segments[0]), fresh, atol=3e-5, rtol=1e-4)


@pytest.mark.parametrize("blocks, d, heads, ff, streams, length, memory", XL_SHAPES)
def test_xl_gradients_match_finite_differences_with_the_memory_held(blocks, d, heads, ff, streams, length, memory):
    """The second segment's gradient: the memory (the first segment's states) is a
    constant, as Transformer-XL's stop-gradient makes it."""
    rng = np.random.default_rng(memory + 100 * d)
    params = stack_params(blocks, d, ff, rng, relative=True)
    grads = {name: np.zeros_like(value) for name, value in params.items()}
    stack = TransformerStack(params, grads, blocks, heads, streams, length, memory=memory, relative=True)
    first, x = (rng.normal(0, 1, (streams * length, d)).astype(np.float32) for _ in range(2))
    top_grad = rng.normal(0, 1, (streams * length, d)).astype(np.float32)
    memories = [np.zeros((streams, memory, d)) for _ in range(blocks)]
    reference_top(params, first, blocks, heads, streams, length, memories=memories)
    held = [m.copy() for m in memories]
    stack.forward(first)
    stack.forward(x, train=True)
    grads["x"] = stack.backward(top_grad).copy()
    filled = min(memory, length)
    assert_gradients_match_finite_differences(
        {**params, "x": x}, grads,
        lambda: (reference_top(params, x, blocks, heads, streams, length, memories=[m.copy() for m in held],
                               filled=filled) * top_grad).sum(), rng)


@pytest.mark.parametrize("memory", [0, 5])
def test_threads_give_one_threads_results(memory):
    """set_threads(3) (on a single-threaded BLAS, as it asks): the top states, dL/dx and
    every gradient of one thread's pass, to float32 rounding (sums over rows in another
    order), dropout's masks included."""
    blocks, d, heads, ff, streams, length = 2, 8, 2, 12, 3, 70
    rng = np.random.default_rng(11)
    params = stack_params(blocks, d, ff, rng, relative=memory > 0)
    first, x, top_grad = (rng.normal(0, 1, (streams * length, d)).astype(np.float32) for _ in range(3))
    results = []
    for threads in (1, 3):
        grads = {name: np.zeros_like(value) for name, value in params.items()}
        stack = TransformerStack(params, grads, blocks, heads, streams, length, memory=memory, relative=memory > 0,
                                 drop_attention=0.2, drop_residual=0.1, seed=3)
        stack.set_threads(threads)
        with blas_threads(1):
            stack.forward(first)
            top = stack.forward(x, train=True).copy()
            grads["x"] = stack.backward(top_grad).copy()
        results.append((top, grads))
    (top1, grads1), (top3, grads3) = results
    assert np.allclose(top1, top3, rtol=1e-5, atol=1e-5)
    for name in grads1:
        assert np.allclose(grads1[name], grads3[name], rtol=1e-4, atol=1e-4), name
    with pytest.raises(ValueError, match="threads"):
        stack.set_threads(0)


def test_scoring_keeps_nothing_for_backward_and_gives_the_same_top_states():
    """forward(keep=False) (ppl's scoring) skips what back-propagation reads; the top states
    are the same to the bit, and a backward() after it is refused, not run on stale rows."""
    blocks, d, heads, ff, streams, length = 2, 16, 2, 24, 2, 9
    rng = np.random.default_rng(3)
    params = stack_params(blocks, d, ff, rng)
    grads = {name: np.zeros_like(value) for name, value in params.items()}
    x = rng.normal(0, 1, (streams * length, d)).astype(np.float32)
    stack = TransformerStack(params, grads, blocks, heads, streams, length)
    kept = stack.forward(x).copy()
    assert np.array_equal(stack.forward(x, keep=False), kept)
    with pytest.raises(ValueError, match="kept nothing"):
        stack.backward(np.ones_like(x))
    stack.forward(x)
    stack.backward(np.ones_like(x))
