"""Numbers of attn_lib.scaled_dot_product_attention and SingleHeadAttention.

Checked against torch.nn.functional.scaled_dot_product_attention over random shapes,
ranks, masks, dtypes and input scales; fully masked rows; the article's fill values;
dropout; the article's module (written out verbatim below as the reference); shape_trace.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attn_lib import (
    MaskError,
    ShapeError,
    SingleHeadAttention,
    causal_mask,
    combine_masks,
    padding_mask,
    scaled_dot_product_attention,
    shape_trace,
    stable_softmax,
)
from attn_lib.chunked import chunked_attention

DTYPES = [torch.float32, torch.float64]
ALL_DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16]


def randn(*shape, g: torch.Generator, dtype=torch.float32, scale: float = 1.0) -> torch.Tensor:
    return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).to(dtype)


def close_tol(q, k, v, scale, dtype):
    """atol for outputs, scaled to the size of the scores and of the values.

    A relative error eps in a score s changes exp(s) by about eps·|s|, so the weights move
    by ~eps·max|s| and the output by that times max|v|.
    """
    eps = torch.finfo(dtype).eps
    s = (q.double() @ k.double().transpose(-2, -1)).abs().max().item() * scale
    return {"atol": 16 * eps * (1 + s) * (1 + v.abs().max().item()), "rtol": 16 * eps}


# --- article's module, verbatim (section 3.2) ---------------------------------------------


class ArticleSingleHeadAttention(nn.Module):
    def __init__(self, d_model, d_k):
        super().__init__()
        self.W_Q = nn.Linear(d_model, d_k, bias=False)
        self.W_K = nn.Linear(d_model, d_k, bias=False)
        self.W_V = nn.Linear(d_model, d_k, bias=False)
        self.d_k = d_k

    def forward(self, x, mask=None):
        Q = self.W_Q(x)
        K = self.W_K(x)
        V = self.W_V(x)
        scores = Q @ K.transpose(-2, -1) / math.sqrt(self.d_k)
        if mask is not None:
            scores = scores.masked_fill(mask == 0, -1e9)
        attn = F.softmax(scores, dim=-1)
        return attn @ V, attn


# --- against F.scaled_dot_product_attention ----------------------------------------------


def make_mask(kind: str, batch: tuple[int, ...], L_q: int, L_k: int, g: torch.Generator):
    """A keep-mask of the given kind in which every query row keeps at least one key."""
    B = batch[0] if batch else 1
    lengths = torch.randint(1, L_k + 1, (B,), generator=g)
    lengths[0] = L_k
    if kind == "none":
        return None
    if kind == "padding":
        pad = padding_mask(lengths, max_len=L_k)  # (B, 1, L_k)
        if len(batch) == 0:
            return pad[0]  # (1, L_k): a 2-D mask broadcast over the queries
        return pad if len(batch) == 1 else pad.unsqueeze(1)  # (B, 1, L_k) / (B, 1, 1, L_k)
    if kind == "causal":
        return causal_mask(L_q, L_k)  # 2-D (L_q, L_k)
    if kind == "combined":
        pad = padding_mask(lengths, max_len=L_k)
        if len(batch) == 0:
            pad = pad[0]
        elif len(batch) == 2:
            pad = pad.unsqueeze(1)
        return combine_masks(pad, causal_mask(L_q, L_k))
    if kind == "per_example":
        m = torch.rand(*batch, L_q, L_k, generator=g) < 0.6
        m[..., 0] = True
        return m  # (L_q, L_k), (B, L_q, L_k) or (B, H, L_q, L_k)
    raise AssertionError(kind)


# (rank, L_q, L_k, d_k, d_v, dtype, input scale): ranks 2-4, L_q ≠ L_k, d_k ≠ d_v, both
# dtypes, and inputs small, unit and large (large scores saturate the softmax).
SDPA_CASES = [
    (2, 3, 5, 4, 3, torch.float32, 10.0),
    (3, 4, 7, 8, 4, torch.float64, 0.1),
    (4, 5, 9, 12, 5, torch.float32, 1.0),
    (3, 5, 9, 12, 5, torch.float32, 10.0),
    (4, 3, 5, 4, 3, torch.float64, 10.0),
]


@pytest.mark.parametrize("mask_kind", ["none", "padding", "causal", "combined", "per_example"])
def test_matches_torch_sdpa(mask_kind):
    g = torch.Generator().manual_seed(10 * len(mask_kind))
    for rank, L_q, L_k, d_k, d_v, dtype, input_scale in SDPA_CASES:
        batch = [(), (3,), (2, 3)][rank - 2]
        q = randn(*batch, L_q, d_k, g=g, dtype=dtype, scale=input_scale)
        k = randn(*batch, L_k, d_k, g=g, dtype=dtype, scale=input_scale)
        v = randn(*batch, L_k, d_v, g=g, dtype=dtype, scale=input_scale)
        mask = make_mask(mask_kind, batch, L_q, L_k, g)
        for scale in (None, 1.0, 0.37):
            out, weights = scaled_dot_product_attention(q, k, v, mask, scale=scale)
            ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
            eff = 1 / math.sqrt(d_k) if scale is None else scale
            assert out.shape == (*batch, L_q, d_v) and out.dtype == dtype
            assert weights.shape == (*batch, L_q, L_k)
            torch.testing.assert_close(out, ref, **close_tol(q, k, v, eff, dtype))
            # the weights: softmax of the scaled scores with blocked keys at exactly 0
            scores = (q @ k.transpose(-2, -1)) * eff
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
                assert (weights.masked_select(~mask.expand_as(weights)) == 0).all()
            wtol = close_tol(q, k, torch.ones(1, dtype=dtype), eff, dtype)
            torch.testing.assert_close(weights, torch.softmax(scores, dim=-1), **wtol)
            torch.testing.assert_close(out, weights @ v, **close_tol(q, k, v, eff, dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_default_scale_is_one_over_sqrt_d_k(dtype):
    g = torch.Generator().manual_seed(5)
    q, k, v = (randn(*s, g=g, dtype=dtype) for s in ((2, 3, 16), (2, 4, 16), (2, 4, 5)))
    default, _ = scaled_dot_product_attention(q, k, v)
    explicit, _ = scaled_dot_product_attention(q, k, v, scale=0.25)
    unscaled, _ = scaled_dot_product_attention(q / 4, k, v, scale=1.0)
    torch.testing.assert_close(default, explicit)
    torch.testing.assert_close(default, unscaled)


def test_integer_mask_equals_bool_mask():
    g = torch.Generator().manual_seed(6)
    q, k, v = randn(2, 4, 8, g=g), randn(2, 5, 8, g=g), randn(2, 5, 3, g=g)
    keep = combine_masks(padding_mask([3, 5]), causal_mask(4, 5))
    a = scaled_dot_product_attention(q, k, v, keep)
    b = scaled_dot_product_attention(q, k, v, keep.long())
    c = scaled_dot_product_attention(q, k, v, keep.to(torch.uint8))
    for x, y in ((a, b), (a, c)):
        torch.testing.assert_close(x[0], y[0], rtol=0, atol=0)
        torch.testing.assert_close(x[1], y[1], rtol=0, atol=0)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("rank", [2, 3, 4])
def test_weights_rows_are_distributions(rank, dtype):
    g = torch.Generator().manual_seed(rank)
    batch = [(), (2,), (2, 2)][rank - 2]
    q, k, v = (randn(*batch, n, 6, g=g, dtype=dtype, scale=3.0) for n in (4, 7, 7))
    mask = make_mask("per_example", batch, 4, 7, g)
    for m in (None, mask):
        _, w = scaled_dot_product_attention(q, k, v, m)
        assert (w >= 0).all()
        torch.testing.assert_close(w.sum(-1), torch.ones(*batch, 4, dtype=dtype))


# --- fully masked rows --------------------------------------------------------------------


def fully_masked_setup(dtype, seed=11):
    """q (2, 5, 4), k (2, 6, 4), v (2, 6, 3); a per-example mask; query row 2 blocks every key."""
    g = torch.Generator().manual_seed(seed)
    q, k, v = (randn(*s, g=g, dtype=dtype) for s in ((2, 5, 4), (2, 6, 4), (2, 6, 3)))
    mask = torch.rand(2, 5, 6, generator=g) < 0.5
    mask[:, :, 1] = True
    mask[:, 2, :] = False  # query row 2 has no allowed key, in both examples
    others = [0, 1, 3, 4]
    return q, k, v, mask, others


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_fully_masked_row_is_zero_and_the_rest_unchanged(dtype):
    q, k, v, mask, others = fully_masked_setup(dtype)
    out, w = scaled_dot_product_attention(q, k, v, mask)
    assert not out.isnan().any() and not w.isnan().any()
    zero_w, zero_o = torch.zeros(2, 6, dtype=dtype), torch.zeros(2, 3, dtype=dtype)
    torch.testing.assert_close(w[:, 2], zero_w, rtol=0, atol=0)
    torch.testing.assert_close(out[:, 2], zero_o, rtol=0, atol=0)
    torch.testing.assert_close(w[:, others].sum(-1), torch.ones(2, 4, dtype=dtype))
    # the other rows: as if the fully masked row had never been there
    out_rest, w_rest = scaled_dot_product_attention(q[:, others], k, v, mask[:, others])
    torch.testing.assert_close(out[:, others], out_rest)
    torch.testing.assert_close(w[:, others], w_rest)
    # SDPA gives zeros there too, and agrees everywhere
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(ref[:, 2], zero_o, rtol=0, atol=0)
    torch.testing.assert_close(out, ref, **close_tol(q, k, v, 0.5, dtype))


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_fully_masked_row_gradients_are_finite_and_local(dtype):
    q, k, v, mask, others = fully_masked_setup(dtype, seed=12)
    g = torch.Generator().manual_seed(13)
    upstream = randn(2, 5, 3, g=g, dtype=dtype)

    def grads(q, k, v, mask, upstream):
        q, k, v = (t.clone().requires_grad_(True) for t in (q, k, v))
        out, _ = scaled_dot_product_attention(q, k, v, mask)
        (out * upstream).sum().backward()  # a loss on every output, the masked row included
        return q.grad, k.grad, v.grad

    gq, gk, gv = grads(q, k, v, mask, upstream)
    for grad in (gq, gk, gv):
        assert torch.isfinite(grad).all()
    torch.testing.assert_close(gq[:, 2], torch.zeros(2, 4, dtype=dtype), rtol=0, atol=0)
    rq, rk, rv = grads(q[:, others], k, v, mask[:, others], upstream[:, others])
    torch.testing.assert_close(gq[:, others], rq)
    torch.testing.assert_close(gk, rk)
    torch.testing.assert_close(gv, rv)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_fully_masked_rows_under_padding_and_causal(dtype):
    # A zero-length sequence in a padded batch: its every query row is fully masked.
    g = torch.Generator().manual_seed(14)
    q, k, v = (randn(*s, g=g, dtype=dtype) for s in ((3, 4, 8), (3, 4, 8), (3, 4, 8)))
    keep = combine_masks(padding_mask([4, 0, 2]), causal_mask(4))
    out, w = scaled_dot_product_attention(q, k, v, keep)
    torch.testing.assert_close(out[1], torch.zeros(4, 8, dtype=dtype), rtol=0, atol=0)
    torch.testing.assert_close(w[1], torch.zeros(4, 4, dtype=dtype), rtol=0, atol=0)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=keep))


# --- the article's fill values ------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_fill_value_minus_inf_gives_nan_in_a_fully_masked_row(dtype):
    q, k, v, mask, others = fully_masked_setup(dtype)
    out, w = scaled_dot_product_attention(q, k, v, mask, fill_value=float("-inf"))
    assert w[:, 2].isnan().all() and out[:, 2].isnan().all()
    default, _ = scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(out[:, others], default[:, others])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_fill_value_minus_1e9_gives_a_uniform_row(dtype):
    q, k, v, mask, others = fully_masked_setup(dtype)
    out, w = scaled_dot_product_attention(q, k, v, mask, fill_value=-1e9)
    torch.testing.assert_close(w[:, 2], torch.full((2, 6), 1 / 6, dtype=dtype))
    torch.testing.assert_close(out[:, 2], v.mean(dim=1))  # the mean of V, silently
    default, _ = scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(out[:, others], default[:, others])


@pytest.mark.parametrize("fill_value", [-1e9, float("-inf"), -1e4])
def test_explicit_fill_equals_default_when_every_row_keeps_a_key(fill_value):
    q, k, v, mask, _ = fully_masked_setup(torch.float32, seed=15)
    mask[:, 2, 0] = True  # now every row keeps a key
    default = scaled_dot_product_attention(q, k, v, mask)
    explicit = scaled_dot_product_attention(q, k, v, mask, fill_value=fill_value)
    torch.testing.assert_close(explicit[0], default[0])
    torch.testing.assert_close(explicit[1], default[1])


def test_fill_value_zero_does_not_mask():
    q, k, v, mask, _ = fully_masked_setup(torch.float32)
    _, w = scaled_dot_product_attention(q, k, v, mask, fill_value=0)
    blocked = ~mask
    assert (w[blocked] > 0).all()
    # exactly the article's line with 0 as the fill
    scores = (q @ k.transpose(-2, -1) / 2).masked_fill(mask == 0, 0.0)
    torch.testing.assert_close(w, torch.softmax(scores, dim=-1))


def test_minus_1e9_in_float16_raises():
    q, k, v, mask, _ = fully_masked_setup(torch.float16)
    scores = q @ k.transpose(-2, -1)
    with pytest.raises(RuntimeError):  # raw PyTorch, the article's line
        scores.masked_fill(mask == 0, -1e9)
    with pytest.raises(RuntimeError, match=r"(?s)(?=.*float16)(?=.*fill_value=None)"):
        scaled_dot_product_attention(q, k, v, mask, fill_value=-1e9)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_default_fill_is_safe_in_half_precision(dtype):
    q, k, v, mask, others = fully_masked_setup(dtype)
    out, w = scaled_dot_product_attention(q, k, v, mask)
    assert torch.isfinite(out).all() and torch.isfinite(w).all()
    ref, _ = scaled_dot_product_attention(q.double(), k.double(), v.double(), mask)
    torch.testing.assert_close(out.double(), ref, **close_tol(q, k, v, 0.5, dtype))
    # large scores too: the fill must stay below every real score without overflowing
    out, w = scaled_dot_product_attention(q * 8, k * 8, v, mask)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(w[:, others].sum(-1), torch.ones(2, 4, dtype=dtype))


# --- dropout -------------------------------------------------------------------------------


def test_dropout_off_when_not_training():
    g = torch.Generator().manual_seed(20)
    q, k, v = randn(2, 6, 8, g=g), randn(2, 6, 8, g=g), randn(2, 6, 4, g=g)
    plain = scaled_dot_product_attention(q, k, v)
    off = scaled_dot_product_attention(q, k, v, dropout_p=0.5, training=False)
    torch.testing.assert_close(off[0], plain[0], rtol=0, atol=0)
    torch.testing.assert_close(off[1], plain[1], rtol=0, atol=0)


def test_dropout_in_training():
    g = torch.Generator().manual_seed(21)
    q, k, v = randn(2, 6, 8, g=g), randn(2, 6, 8, g=g), randn(2, 6, 4, g=g)
    _, plain = scaled_dot_product_attention(q, k, v)
    torch.manual_seed(0)
    out, w = scaled_dot_product_attention(q, k, v, dropout_p=0.5, training=True)
    dropped = w == 0
    assert dropped.any() and (~dropped).any()
    torch.testing.assert_close(w[~dropped], 2 * plain[~dropped])  # kept weights scaled by 1/(1-p)
    sums = w.sum(-1)
    assert not torch.allclose(sums, torch.ones_like(sums))  # rows no longer sum to 1
    torch.testing.assert_close(out, w @ v)  # the returned weights are the ones used


def test_module_dropout_only_in_training_mode():
    torch.manual_seed(22)
    module = SingleHeadAttention(8, 8, dropout=0.5)
    x = torch.randn(2, 6, 8)
    module.train()
    torch.manual_seed(1)
    out, w = module(x, return_attn=True)
    assert (w == 0).any()
    torch.testing.assert_close(out, w @ module.W_V(x))
    module.eval()
    out, w = module(x, return_attn=True)
    assert not (w == 0).any()
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 6))


# --- SingleHeadAttention ------------------------------------------------------------------


def article_twin(module: SingleHeadAttention) -> ArticleSingleHeadAttention:
    ref = ArticleSingleHeadAttention(module.d_model, module.d_k)
    with torch.no_grad():
        for name in ("W_Q", "W_K", "W_V"):
            getattr(ref, name).weight.copy_(getattr(module, name).weight)
    return ref


def test_article_worked_example():
    torch.manual_seed(42)
    x = torch.randn(2, 4, 8)
    module = SingleHeadAttention(8, 8)
    out, w = module(x, return_attn=True)
    assert out.shape == (2, 4, 8)
    assert w.shape == (2, 4, 4)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 4))
    assert module.W_Q.bias is None and module.W_K.bias is None and module.W_V.bias is None
    ref_out, ref_w = article_twin(module)(x)
    torch.testing.assert_close(out, ref_out)
    torch.testing.assert_close(w, ref_w)
    torch.testing.assert_close(module(x), ref_out)  # return_attn=False gives the output only


@pytest.mark.parametrize("mask_kind", ["padding", "causal", "combined"])
def test_article_module_with_masks(mask_kind):
    torch.manual_seed(42)
    x = torch.randn(2, 4, 8)
    module = SingleHeadAttention(8, 8)
    mask = {
        "padding": padding_mask([4, 2]),
        "causal": causal_mask(4),
        "combined": combine_masks(padding_mask([4, 2]), causal_mask(4)),
    }[mask_kind]
    out, w = module(x, mask, return_attn=True)
    ref_out, ref_w = article_twin(module)(x, mask)
    torch.testing.assert_close(out, ref_out)
    torch.testing.assert_close(w, ref_w)


def test_module_unbatched_input():
    torch.manual_seed(30)
    module = SingleHeadAttention(8, 8)
    x = torch.randn(5, 8)
    out, w = module(x, causal_mask(5), return_attn=True)
    assert out.shape == (5, 8) and w.shape == (5, 5)
    ref_out, ref_w = article_twin(module)(x, causal_mask(5))
    torch.testing.assert_close(out, ref_out)
    torch.testing.assert_close(w, ref_w)


def test_cross_attention_via_context():
    torch.manual_seed(31)
    module = SingleHeadAttention(8, 6)
    x, context = torch.randn(2, 3, 8), torch.randn(2, 7, 8)
    keep = padding_mask([7, 4])  # (2, 1, 7) over the context's keys
    out, w = module(x, keep, return_attn=True, context=context)
    assert out.shape == (2, 3, 6) and w.shape == (2, 3, 7)
    q, k, v = module.W_Q(x), module.W_K(context), module.W_V(context)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    torch.testing.assert_close(out, ref)
    assert (w[1, :, 4:] == 0).all()
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 3))


def test_module_d_v_differs_from_d_k():
    torch.manual_seed(32)
    module = SingleHeadAttention(8, 4, d_v=6)
    assert module.W_Q.weight.shape == (4, 8) and module.W_V.weight.shape == (6, 8)
    x = torch.randn(2, 5, 8)
    out, w = module(x, return_attn=True)
    assert out.shape == (2, 5, 6) and w.shape == (2, 5, 5)
    q, k, v = x @ module.W_Q.weight.T, x @ module.W_K.weight.T, x @ module.W_V.weight.T
    torch.testing.assert_close(w, torch.softmax(q @ k.transpose(-2, -1) / 2, dim=-1))
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v))


def test_module_with_bias():
    torch.manual_seed(33)
    module = SingleHeadAttention(8, 8, bias=True)
    for lin in (module.W_Q, module.W_K, module.W_V):
        assert lin.bias is not None and lin.bias.shape == (8,)
        with torch.no_grad():
            lin.bias.normal_()
    x = torch.randn(2, 4, 8)
    out = module(x, causal_mask(4))
    q, k, v = (F.linear(x, lin.weight, lin.bias) for lin in (module.W_Q, module.W_K, module.W_V))
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(out, ref)


def test_module_gradients_flow_to_every_projection():
    torch.manual_seed(34)
    module = SingleHeadAttention(8, 8)
    x = torch.randn(2, 4, 8)
    module(x, padding_mask([4, 3])).square().sum().backward()
    for lin in (module.W_Q, module.W_K, module.W_V):
        assert lin.weight.grad is not None and torch.isfinite(lin.weight.grad).all()
        assert lin.weight.grad.abs().sum() > 0


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_module_keeps_dtype(dtype):
    torch.manual_seed(35)
    module = SingleHeadAttention(8, 8).to(dtype)
    out, w = module(torch.randn(2, 4, 8, dtype=dtype), return_attn=True)
    assert out.dtype == dtype and w.dtype == dtype


# --- shape_trace ----------------------------------------------------------------------------


def trace_dict(steps):
    return {s.step: tuple(s.shape) for s in steps}


def test_shape_trace_self_attention():
    x = torch.randn(2, 4, 8)
    steps = trace_dict(shape_trace(x, x, x))
    assert steps["Q"] == steps["K"] == steps["V"] == (2, 4, 8)
    assert steps["Kᵀ"] == (2, 8, 4)
    assert steps["scores"] == (2, 4, 4)
    assert steps["weights"] == (2, 4, 4)
    assert steps["output"] == (2, 4, 8)


@pytest.mark.parametrize(
    "q, k, v",
    [
        ((3, 8), (5, 8), (5, 6)),
        ((2, 3, 8), (2, 5, 8), (2, 5, 6)),
        ((2, 4, 3, 8), (2, 4, 5, 8), (2, 4, 5, 6)),
    ],
    ids=["rank2", "rank3", "rank4"],
)
def test_shape_trace_cross_attention_matches_the_computation(q, k, v):
    steps = trace_dict(shape_trace(q, k, v))
    batch = q[:-2]
    assert steps["Kᵀ"] == (*batch, 8, 5)
    assert steps["scores"] == (*batch, 3, 5)
    assert steps["output"] == (*batch, 3, 6)
    g = torch.Generator().manual_seed(40)
    out, w = scaled_dot_product_attention(*(randn(*s, g=g) for s in (q, k, v)))
    assert tuple(out.shape) == steps["output"] and tuple(w.shape) == steps["weights"]
    assert all(str(s) for s in shape_trace(q, k, v))  # printable


@pytest.mark.parametrize(
    "q, k, v, words",
    [
        ((2, 4, 8), (2, 5, 6), (2, 5, 6), "d_k of query and key differ"),
        ((2, 4, 8), (2, 5, 8), (2, 6, 8), "same length L_k"),
        ((4, 8), (2, 4, 8), (2, 4, 8), "same rank"),
    ],
)
def test_shape_trace_mismatch_raises(q, k, v, words):
    with pytest.raises(ShapeError, match=words):
        shape_trace(q, k, v)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_weights_written_over_the_scores_equal_the_autograd_path_bit_for_bit(dtype):
    # Without autograd the weights overwrite the scores in place; with it, a new tensor is
    # made. Both must give exactly the same numbers, NaN rows (fill -inf) included.
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 5, 4, generator=g).to(dtype) for _ in range(3))
    empty_row = causal_mask(5).expand(2, 5, 5).clone()
    empty_row[1, 0] = False  # row 0 of sequence 1 has no allowed key
    padding = padding_mask([5, 3])
    for keep, fill_value in [
        (None, None), (padding, None), (empty_row, None), (padding, -1e4),
        (empty_row, float("-inf")), (padding, 0.0),
    ]:  # fmt: skip
        with torch.no_grad():
            out_a, w_a = scaled_dot_product_attention(q, k, v, keep, fill_value=fill_value)
        qg = q.clone().requires_grad_(True)
        out_b, w_b = scaled_dot_product_attention(qg, k, v, keep, fill_value=fill_value)
        torch.testing.assert_close(out_a, out_b.detach(), rtol=0, atol=0, equal_nan=True)
        torch.testing.assert_close(w_a, w_b.detach(), rtol=0, atol=0, equal_nan=True)
        if not out_b.isnan().any():
            out_b.sum().backward()
            assert qg.grad is not None and qg.grad.isfinite().all()


def test_value_gradient_with_weights_written_over_the_scores():
    # Only the value requires grad: the scores do not, so the weights overwrite them in
    # place; the backward pass through weights @ V must still see the final weights.
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 5, 4, generator=g, dtype=torch.float64) for _ in range(3))
    keep = causal_mask(5).expand(2, 5, 5).clone()
    keep[1, 0] = False  # a row with no allowed key: zero weights, zero gradient from it
    value = v.clone().requires_grad_(True)
    out, weights = scaled_dot_product_attention(q, k, value, keep)
    upstream = torch.randn(2, 5, 4, generator=g, dtype=torch.float64)
    (out * upstream).sum().backward()
    torch.testing.assert_close(value.grad, weights.detach().mT @ upstream)
    assert torch.autograd.gradcheck(
        lambda val: scaled_dot_product_attention(q, k, val, keep)[0], (v.clone().requires_grad_(),)
    )


# --- sizes, dtypes and devices -----------------------------------------------------------------


@pytest.mark.parametrize(
    "d_model, d_k, d_v",
    [(np.int64(8), 4, None), (8, np.int32(4), torch.tensor(3)), (torch.tensor(8), 4, None)],
)
def test_module_accepts_integer_widths_and_stores_plain_ints(d_model, d_k, d_v):
    module = SingleHeadAttention(d_model, d_k, d_v=d_v)
    assert all(type(n) is int for n in (module.d_model, module.d_k, module.d_v))
    assert module(torch.randn(2, 3, 8)).shape == (2, 3, module.d_v)


@pytest.mark.parametrize("bad", [8.0, True, torch.tensor(8.0)])
def test_module_refuses_float_and_bool_widths(bad):
    with pytest.raises(TypeError, match="d_model must be an int"):
        SingleHeadAttention(bad, 4)
    with pytest.raises(TypeError, match="d_v must be an int"):
        SingleHeadAttention(8, 4, d_v=bad)


FLOAT8 = [torch.float8_e4m3fn, torch.float8_e5m2]


@pytest.mark.parametrize("dtype", FLOAT8, ids=str)
def test_float8_is_refused_naming_the_supported_dtypes(dtype):
    x = torch.randn(2, 4, 8).to(dtype)
    supported = "float32, float64, float16 or bfloat16"
    with pytest.raises(TypeError, match=f"query has dtype {dtype}.*{supported}.*query.float"):
        scaled_dot_product_attention(x, x, x)
    with pytest.raises(TypeError, match=f"query has dtype {dtype}.*{supported}"):
        chunked_attention(x, x, x)
    with pytest.raises(TypeError, match=f"x has dtype {dtype}.*{supported}"):
        SingleHeadAttention(8, 8).to(dtype)(x)
    with pytest.raises(TypeError, match=f"x has dtype {dtype}.*{supported}"):
        stable_softmax(x)


def _meta(*shape):
    return torch.randn(*shape, device="meta")


def test_meta_inputs_get_a_sentence_not_a_torch_error():
    q = torch.randn(2, 4, 8)
    for args, name in (
        ((_meta(2, 4, 8), q, q), "query"),
        ((q, _meta(2, 4, 8), q), "key"),
        ((q, q, _meta(2, 4, 8)), "value"),
    ):
        with pytest.raises(ValueError, match=f"{name} is on the meta device.*no values"):
            scaled_dot_product_attention(*args)
        with pytest.raises(ValueError, match=f"{name} is on the meta device"):
            chunked_attention(*args)
    with pytest.raises(MaskError, match="mask is on the meta device"):
        scaled_dot_product_attention(q, q, q, causal_mask(4, device="meta"))
    with pytest.raises(MaskError, match="mask is on the meta device"):
        chunked_attention(q, q, q, causal_mask(4, device="meta"))


def test_meta_with_the_module():
    module = SingleHeadAttention(8, 8)
    with pytest.raises(ValueError, match="x is on the meta device"):
        module(_meta(2, 4, 8))
    with pytest.raises(ValueError, match="context is on the meta device"):
        module(torch.randn(2, 4, 8), context=_meta(2, 5, 8))
    with pytest.raises(MaskError, match="mask is on the meta device"):
        module(torch.randn(2, 4, 8), causal_mask(4, device="meta"))
    with pytest.raises(ValueError, match="module's weights are on the meta device.*to_empty"):
        SingleHeadAttention(8, 8).to("meta")(torch.randn(2, 4, 8))


def test_shape_trace_still_works_without_values():
    # shape_trace checks stand-ins on the meta device: the device rule must not refuse them
    assert shape_trace(_meta(2, 4, 8), _meta(2, 5, 8), _meta(2, 5, 3))[-1].shape == (2, 4, 3)
