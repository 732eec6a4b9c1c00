"""Tests of attn_lib.chunked: the online-softmax attention equals the reference, holds no L_k-sized
intermediate (within notebook 10's memory model) and validates like the reference."""

from __future__ import annotations

import math
import weakref
from functools import partial

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from attn_lib.attention import scaled_dot_product_attention
from attn_lib.chunked import chunked_attention
from attn_lib.lessons.nb10_cost import peak_intermediate_bytes
from attn_lib.masks import causal_mask, combine_masks, padding_mask

# --- helpers ------------------------------------------------------------------------------------


def make_qkv(batch, L_q, L_k, d_k, d_v, dtype=torch.float64, seed=0, magnitude=1.0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(*batch, L_q, d_k, generator=g, dtype=torch.float64) * magnitude
    k = torch.randn(*batch, L_k, d_k, generator=g, dtype=torch.float64) * magnitude
    v = torch.randn(*batch, L_k, d_v, generator=g, dtype=torch.float64)
    return q.to(dtype), k.to(dtype), v.to(dtype)


def reference(q, k, v, mask=None, scale=None):
    return scaled_dot_product_attention(q, k, v, mask, scale=scale)[0]


def padding_for(batch, L_k, lengths=None):
    """A padding keep-mask with the scores' rank: (1, L_k), (B, 1, L_k) or (B, 1, 1, L_k)."""
    if not batch:
        return padding_mask([L_k if lengths is None else lengths[0]], max_len=L_k)[0]
    B = batch[0]
    if lengths is None:
        lengths = [max(1, L_k - 2 * b) for b in range(B)]
    m = padding_mask(lengths, max_len=L_k)  # (B, 1, L_k)
    return m[:, None] if len(batch) == 2 else m


def build_mask(kind, batch, L_q, L_k, seed=1):
    g = torch.Generator().manual_seed(seed)
    if kind == "none":
        return None
    if kind == "padding":
        return padding_for(batch, L_k)
    if kind == "causal":
        return causal_mask(L_q, L_k)  # 2-D (L_q, L_k)
    if kind == "combined":
        return combine_masks(padding_for(batch, L_k), causal_mask(L_q, L_k))
    mask = torch.rand(*batch, L_q, L_k, generator=g) < 0.6  # per example
    if kind == "per_example":
        mask[..., 0] = True  # every row keeps a key
        return mask
    if kind == "fully_masked_rows":
        if L_q == 1:  # one query: block it in the first example only (all blocked is refused)
            mask[..., 0, 0] = True
            mask[0, ..., 0, :] = False
            return mask.int()
        mask[..., 0, :] = False  # query row 0 has no allowed key at all
        if L_q > 1:
            mask[..., 1, :] = False  # row 1: only the last key, so every block before it
            mask[..., 1, -1] = True  # is all blocked (the exp(-inf - (-inf)) guard)
        if batch and L_q > 2:
            mask[0, ..., 2, :] = False
        return mask.int()  # an integer 0/1 keep-mask, as the contract allows
    raise AssertionError(kind)


MASKS = ["none", "padding", "causal", "combined", "per_example", "fully_masked_rows"]
SHAPES = [  # (batch, L_q, L_k, d_k, d_v): ranks 2, 3 and 4, L_q ≠ L_k, d_k ≠ d_v
    ((), 5, 7, 4, 3),
    ((2,), 6, 13, 8, 5),
    ((2, 3), 9, 17, 4, 6),
    ((3,), 1, 1, 2, 2),
]
BLOCKS = [1, 3, 16, 1000]  # 1, uneven, around L_k, larger than L_k


# --- equal to the reference ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", MASKS)
def test_equals_reference(kind):
    # Every mask kind on every shape with every kind of block; float32 and float64 alternate
    # over the blocks (the dtype does not change the blocking).
    for batch, L_q, L_k, d_k, d_v in SHAPES:
        for i, block_size in enumerate(BLOCKS):
            dtype = (torch.float64, torch.float32)[i % 2]
            q, k, v = make_qkv(batch, L_q, L_k, d_k, d_v, dtype)
            mask = build_mask(kind, batch, L_q, L_k)
            out = chunked_attention(q, k, v, mask, block_size=block_size)
            assert isinstance(out, torch.Tensor) and out.dtype == dtype
            assert out.shape == (*batch, L_q, d_v)
            where = f"{L_q}x{L_k}, block {block_size}"
            expected = reference(q, k, v, mask)
            torch.testing.assert_close(out, expected, msg=lambda m, where=where: f"{where}: {m}")


@pytest.mark.parametrize("kind", ["none", "combined", "fully_masked_rows"])
def test_scale_and_query_blocks(kind):
    batch, L_q, L_k = (2, 3), 9, 17
    q, k, v = make_qkv(batch, L_q, L_k, 8, 4, torch.float32, seed=3)
    mask = build_mask(kind, batch, L_q, L_k)
    # query blocks of 1, uneven, equal to L_q and larger; scales default, < 1 and > 1
    for scale, query_block_size in ((None, None), (0.3, 1), (2, 4), (None, 9), (0.3, 100)):
        out = chunked_attention(
            q, k, v, mask, scale=scale, block_size=5, query_block_size=query_block_size
        )
        torch.testing.assert_close(out, reference(q, k, v, mask, scale=scale))


def test_fully_masked_rows_are_zero_and_never_nan():
    batch, L_q, L_k = (2,), 6, 13
    q, k, v = make_qkv(batch, L_q, L_k, 4, 5, torch.float32)
    mask = build_mask("fully_masked_rows", batch, L_q, L_k)
    for block_size in (1, 4, 13):
        out = chunked_attention(q, k, v, mask, block_size=block_size)
        assert not torch.isnan(out).any()
        assert torch.equal(out[:, 0], torch.zeros(2, 5))  # no allowed key: exactly zero
        assert torch.equal(out[0, 2], torch.zeros(5))
        torch.testing.assert_close(out[:, 1], v[:, -1])  # only the last key: its value row
    # a padding length of 0 blocks a whole sequence
    mask = padding_mask([0, 9], max_len=L_k)
    out = chunked_attention(q, k, v, mask, block_size=4)
    assert torch.equal(out[0], torch.zeros(L_q, 5))
    torch.testing.assert_close(out, reference(q, k, v, mask))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_large_scores_are_stable(dtype):
    # scores in the thousands: exp overflows without the running max and its rescaling
    q, k, v = make_qkv((2,), 8, 40, 16, 4, dtype, seed=5, magnitude=30.0)
    mask = build_mask("combined", (2,), 8, 40)
    for block_size in (1, 7, 64):
        out = chunked_attention(q, k, v, mask, scale=1.0, block_size=block_size)
        assert torch.isfinite(out).all()
        torch.testing.assert_close(out, reference(q, k, v, mask, scale=1.0))


HALF_TOL = {
    torch.float16: {"atol": 3e-3, "rtol": 3e-3},
    torch.bfloat16: {"atol": 3e-2, "rtol": 3e-2},
}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision(dtype):
    batch, L_q, L_k = (2, 2), 7, 21
    q, k, v = make_qkv(batch, L_q, L_k, 8, 6, dtype, seed=7)
    for kind, block_size in (
        ("none", 1),
        ("padding", 5),
        ("combined", 64),
        ("fully_masked_rows", 5),
    ):
        mask = build_mask(kind, batch, L_q, L_k)
        out = chunked_attention(q, k, v, mask, block_size=block_size)
        assert out.dtype == dtype and not torch.isnan(out).any()
        # Accumulated in float32 and rounded once: within rounding of the exact (float64) result.
        exact = reference(q.double(), k.double(), v.double(), mask).to(dtype)
        torch.testing.assert_close(out, exact)
        # The reference computed in the half dtype itself rounds the weights too: looser.
        torch.testing.assert_close(out, reference(q, k, v, mask), **HALF_TOL[dtype])


def test_empty_query_and_noncontiguous_inputs():
    q, k, v = make_qkv((2,), 0, 5, 4, 3, torch.float32)
    out = chunked_attention(q, k, v, block_size=2)
    assert out.shape == (2, 0, 3)
    q, k, v = make_qkv((2,), 6, 9, 4, 3, torch.float32)
    qt = q.transpose(-2, -1).contiguous().transpose(-2, -1)  # same values, other strides
    kt = k.transpose(-2, -1).contiguous().transpose(-2, -1)
    torch.testing.assert_close(chunked_attention(qt, kt, v, block_size=4), reference(q, k, v))


# --- bad input ----------------------------------------------------------------------------------


def raised(fn):
    try:
        fn()
    except Exception as err:  # noqa: BLE001 - the point is to compare whatever is raised
        return type(err), str(err)
    return None


q3, k3, v3 = make_qkv((2,), 4, 4, 8, 8, torch.float32)
nan_q = q3.clone()
nan_q[1, 2, 3] = float("nan")
BAD = {
    "int query": (q3.long(), k3, v3, None, {}),
    "mixed dtypes": (q3, k3.double(), v3, None, {}),
    "1-D query": (q3[0, 0], k3[0], v3[0], None, {}),
    "ranks differ": (q3[0], k3, v3, None, {}),
    "d_k differs": (q3, k3[..., :5], v3, None, {}),
    "L_k differs": (q3, k3, v3[:, :3], None, {}),
    "batch differs": (q3, k3[:1], v3[:1], None, {}),
    "nan in query": (nan_q, k3, v3, None, {}),
    "float mask": (q3, k3, v3, torch.ones(2, 1, 4), {}),
    "(B, L_k) padding mask": (q3[:, :3], k3, v3, torch.ones(2, 4, dtype=torch.bool), {}),
    "1-D mask": (q3, k3, v3, torch.ones(4, dtype=torch.bool), {}),
    "mask dim mismatch": (q3, k3, v3, torch.ones(2, 3, 4, dtype=torch.bool), {}),
    "all blocked": (q3, k3, v3, torch.zeros(2, 1, 4, dtype=torch.bool), {}),
    "int mask with a 2": (q3, k3, v3, torch.full((2, 1, 4), 2), {}),
    "scale 0": (q3, k3, v3, None, {"scale": 0.0}),
    "scale inf": (q3, k3, v3, None, {"scale": math.inf}),
    "scale str": (q3, k3, v3, None, {"scale": "0.5"}),
    "scale bool": (q3, k3, v3, None, {"scale": True}),
}


def test_bad_input_raises_like_the_reference():
    for case, (q, k, v, mask, kw) in BAD.items():
        expected = raised(partial(scaled_dot_product_attention, q, k, v, mask, **kw))
        assert expected is not None, f"the reference accepted {case}"
        got = raised(partial(chunked_attention, q, k, v, mask, block_size=3, **kw))
        assert got == expected, case


BAD_BLOCKS = [
    (0, ValueError),
    (-2, ValueError),
    (1.5, TypeError),
    (2.0, TypeError),
    ("8", TypeError),
    (True, TypeError),
]


def test_bad_block_size():
    q, k, v = make_qkv((), 4, 4, 8, 8, torch.float32)
    for value, error in [*BAD_BLOCKS, (None, TypeError)]:
        with pytest.raises(error, match="block_size"):
            chunked_attention(q, k, v, block_size=value)
    for value, error in BAD_BLOCKS:
        with pytest.raises(error, match="query_block_size"):
            chunked_attention(q, k, v, query_block_size=value)


# --- memory: nothing grows with L_k -------------------------------------------------------------


class AllocationTracker(TorchDispatchMode):
    """Records every tensor storage created inside the mode: its size, and the bytes alive at once.

    A storage counts from the op that creates it until the last tensor using it (a view
    included) is freed; views and in-place results of existing tensors add nothing.
    """

    def __init__(self):
        super().__init__()
        self.live = self.peak = self.largest = 0
        self.ops: set[str] = set()
        self._storages: dict[int, list[int]] = {}  # data_ptr -> [bytes, tensors alive]

    def _release(self, ptr):
        entry = self._storages[ptr]
        entry[1] -= 1
        if entry[1] == 0:
            self.live -= entry[0]
            del self._storages[ptr]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        given = {
            t.untyped_storage().data_ptr()
            for t in tree_flatten((args, kwargs))[0]
            if isinstance(t, torch.Tensor)
        }
        out = func(*args, **kwargs)
        self.ops.add(str(func))
        for t in tree_flatten(out)[0]:
            if not isinstance(t, torch.Tensor):
                continue
            ptr = t.untyped_storage().data_ptr()
            if ptr not in self._storages:
                if ptr in given:
                    continue  # a view or in-place result of a tensor made outside the mode
                nbytes = t.untyped_storage().nbytes()
                self._storages[ptr] = [nbytes, 0]
                self.live += nbytes
                self.peak = max(self.peak, self.live)
                self.largest = max(self.largest, nbytes)
            self._storages[ptr][1] += 1
            weakref.finalize(t, self._release, ptr)
        return out


def measure(fn):
    with AllocationTracker() as tracker:
        out = fn()
    if isinstance(out, tuple):
        out = out[0]
    return tracker, out.untyped_storage().nbytes()


@pytest.mark.parametrize(
    "kind, dtype",
    [("none", torch.float32), ("padding", torch.float32), ("causal", torch.float16)],
    ids=["none-float32", "padding-float32", "causal-float16"],
)
def test_no_intermediate_grows_with_L_k(kind, dtype):
    batch, L_q, d_k, d_v, block = (2, 3), 32, 16, 8, 32
    L_long = 1024
    slices = math.prod(batch)
    acc_itemsize = 4 if dtype == torch.float16 else dtype.itemsize
    results = {}
    for L_k in (64, L_long):
        q, k, v = make_qkv(batch, L_q, L_k, d_k, d_v, dtype)
        mask = build_mask(kind, batch, L_q, L_k)
        if mask is not None:
            mask = mask.bool()
        tracker, out_bytes = measure(partial(chunked_attention, q, k, v, mask, block_size=block))
        # no single tensor bigger than one block of scores or one block-sized matrix
        bound = slices * max(L_q * block, L_q * d_k, L_q * d_v, block * d_k, block * d_v)
        assert tracker.largest <= bound * acc_itemsize, (L_k, tracker.largest, bound)
        # everything held at once (less the output) fits the model of peak_intermediate_bytes
        held = tracker.peak - out_bytes
        model = peak_intermediate_bytes(
            L_q, L_k, d_k, d_v, block_size=block, batch=batch, dtype=dtype
        )
        assert 0 < held <= model, (L_k, held, model)
        results[L_k] = (tracker.largest, held)
    assert results[64] == results[L_long]  # 16× more keys, not one byte more

    # The tracker does see the L_q × L_k matrices when they are made: the reference's. The
    # model's "naive" is the article's path, scores and weights both held; attn_lib without
    # autograd writes the weights over the scores and holds one of the two.
    tracker, _ = measure(lambda: reference(q, k, v, mask))
    assert tracker.largest >= slices * L_q * L_long * dtype.itemsize
    naive = peak_intermediate_bytes(
        L_q, L_long, d_k, d_v, block_size=block, batch=batch, dtype=dtype, method="naive"
    )
    matrix = slices * L_q * L_long  # numbers in one L_q × L_k matrix
    if dtype == torch.float32:  # one float32 matrix, not the article's two
        assert matrix * 4 <= tracker.peak < naive == 2 * matrix * 4
    else:  # float32 scores (weights written over them), then the float16 weights returned
        assert tracker.peak >= matrix * (4 + 2) > naive == 2 * matrix * 2


class FunctionRecorder(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.called = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.called.add(func)
        return func(*args, **(kwargs or {}))


def test_no_fused_attention_kernel_and_no_full_softmax():
    q, k, v = make_qkv((2, 2), 16, 40, 8, 8, torch.float32)
    mask = build_mask("combined", (2, 2), 16, 40)
    with FunctionRecorder() as functions:
        tracker, _ = measure(lambda: chunked_attention(q, k, v, mask, block_size=8))
    assert torch.nn.functional.scaled_dot_product_attention not in functions.called
    assert torch.softmax not in functions.called
    forbidden = ("scaled_dot_product", "flash", "efficient_attention", "softmax")
    assert not [op for op in tracker.ops if any(word in op for word in forbidden)]


def test_refuses_inputs_that_require_grad():
    q, k, v = make_qkv((2,), 4, 6, 8, 8, torch.float32)
    q.requires_grad_(True)
    with pytest.raises(RuntimeError, match="no_grad"):
        chunked_attention(q, k, v)
    with torch.no_grad():
        out = chunked_attention(q, k, v, block_size=4)
    torch.testing.assert_close(out, reference(q, k, v).detach())
