"""Regression tests for faults found by review: overflowing scores, half precision, dtype and
shape mismatches that used to reach raw torch errors, and converters MHA refused."""

import itertools
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import attn_lib
from attn_lib import masks, reference
from attn_lib.softmax import entropy, stable_softmax


def test_half_precision_scores_do_not_leak_weight_onto_a_blocked_key():
    # The allowed score, 300 * -300 = -90000, is beyond float16's range.
    q = torch.tensor([[[300.0]]]).half()
    k = torch.tensor([[[-300.0], [0.0]]]).half()
    v = torch.tensor([[[1.0], [99.0]]]).half()
    keep = torch.tensor([[[True, False]]])
    out, weights = attn_lib.scaled_dot_product_attention(q, k, v, keep)
    torch.testing.assert_close(weights, torch.tensor([[[1.0, 0.0]]]).half())
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=keep))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_large_half_precision_inputs_match_sdpa_without_nan(dtype):
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(1, 16, 64, generator=g) * 100).to(dtype)
    out, weights = attn_lib.scaled_dot_product_attention(x, x, x)
    assert not out.isnan().any() and not weights.isnan().any()
    assert out.dtype == weights.dtype == dtype
    ref = F.scaled_dot_product_attention(x.float(), x.float(), x.float())
    torch.testing.assert_close(out.float(), ref, atol=0.5, rtol=2e-2)  # half-precision inputs


@pytest.mark.parametrize("fn", ["reference", "chunked"])
def test_scores_that_overflow_float32_are_refused_with_a_sentence(fn):
    q = torch.tensor([[[1e20]]])
    k = torch.tensor([[[-1e20], [0.0]]])
    v = torch.tensor([[[1.0], [99.0]]])
    attention = {
        "reference": lambda *a, **kw: attn_lib.scaled_dot_product_attention(*a, **kw)[0],
        "chunked": lambda *a, **kw: attn_lib.chunked_attention(*a, block_size=1, **kw),
    }[fn]
    with pytest.raises(ValueError, match="overflowed"):
        attention(q, k, v, torch.tensor([[[True, False]]]))
    with pytest.raises(ValueError, match="overflowed"):  # tiny queries, an enormous scale
        q, k = torch.full((1, 2, 4), 1e-25), torch.full((1, 3, 4), 1e18)
        attention(q, k, torch.randn(1, 3, 4), scale=1e46)


def test_explicit_fill_still_behaves_like_masked_fill_in_float16():
    x = torch.randn(1, 3, 4).half()
    keep = torch.tensor([[True, False, False]] * 3)
    with pytest.raises(RuntimeError, match="float16"):
        attn_lib.scaled_dot_product_attention(x, x, x, keep, fill_value=-1e9)
    keep_row = torch.ones(3, 3, dtype=torch.bool)
    keep_row[1] = False
    _, w = attn_lib.scaled_dot_product_attention(x, x, x, keep_row, fill_value=float("-inf"))
    assert w[0, 1].isnan().all()
    _, w = attn_lib.scaled_dot_product_attention(x, x, x, keep_row, fill_value=-1e4)
    torch.testing.assert_close(w[0, 1], torch.full((3,), 1 / 3).half())


def test_finite_check_reads_an_expanded_view_without_fault():
    key = torch.randn(1, 16, 8).expand(64, 16, 8)
    out, _ = attn_lib.scaled_dot_product_attention(torch.randn(64, 4, 8), key, key)
    assert out.shape == (64, 4, 8)
    bad = key.clone()
    bad[3, 2, 1] = math.inf
    with pytest.raises(ValueError, match=r"key contains 1 non-finite .*\(3, 2, 1\)"):
        attn_lib.scaled_dot_product_attention(torch.randn(64, 4, 8), bad, key)


LAYOUTS = {
    "contiguous": lambda t: t,
    "transposed": lambda t: t.transpose(-2, -1).contiguous().transpose(-2, -1),
    "expanded": lambda t: t[:1].expand(3, -1, -1),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_one_non_finite_element_is_found_in_every_dtype_and_layout(dtype):
    # The finite check is one sum of squares; it must see a single bad element wherever
    # it sits, in half precision and in views that are not contiguous.
    q = torch.randn(3, 2, 4).to(dtype)
    for layout, bad in itertools.product(sorted(LAYOUTS), [math.nan, math.inf, -math.inf]):
        base = torch.randn(3, 5, 4).to(dtype)
        base[0, 4, 2] = bad
        key = LAYOUTS[layout](base)
        assert not key.isfinite().all()
        found = r"key contains \d+ non-finite .*at index \(0, 4, 2\)"
        with pytest.raises(ValueError, match=found):
            attn_lib.scaled_dot_product_attention(q, key, key.clone())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_finite_check_bounds_the_norm_of_every_row(dtype):
    from attn_lib.checks import check_finite

    g = torch.Generator().manual_seed(0)
    for layout, magnitude in itertools.product(sorted(LAYOUTS), (1e-30, 1e-3, 1.0, 1e3)):
        t = LAYOUTS[layout]((torch.randn(3, 7, 5, generator=g) * magnitude).to(dtype))
        bound = check_finite("t", t)
        rows = t.double().norm(dim=-1).max().item()
        assert bound >= rows * (1 - 1e-6)  # float rounding only
        floor = math.sqrt(t.numel() * torch.finfo(dtype).tiny)  # what keeps underflow safe
        assert bound <= 10 * (rows * math.sqrt(t.numel()) + floor)  # and not absurdly loose
    assert check_finite("t", torch.empty(0, 3, dtype=dtype)) == 0.0


def test_squares_that_underflow_still_bound_the_scores():
    # 1e-25 squares to 0 in float32: the bound must not say the scores are 0, or an
    # enormous scale would overflow them unnoticed (review: NaN instead of the error).
    q = torch.full((2, 4), 1e-25)
    k = torch.full((3, 4), 1e18)
    v = torch.randn(3, 4)
    with pytest.raises(ValueError, match="overflowed"):
        attn_lib.scaled_dot_product_attention(q, k, v, scale=1e46)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_finite_check_of_half_precision_makes_no_float32_copy(dtype):
    from torch.profiler import ProfilerActivity, profile

    from attn_lib.checks import check_finite

    t = torch.randn(4, 256, 64).to(dtype)  # 128 KiB; a float32 copy would be 256 KiB
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        check_finite("t", t)
    largest = max((e.cpu_memory_usage for e in prof.events()), default=0)
    assert largest < 1024, f"the check allocated {largest} bytes"


def test_squares_that_overflow_are_not_mistaken_for_inf_and_scores_are_checked_exactly():
    # 1e20² overflows float32, so the norm of the query is inf; no element is inf, and the
    # scores (1e20 · 1e-20 = 1) are finite, so the exact check lets the call through.
    from attn_lib.checks import check_finite

    q = torch.full((1, 2, 3), 1e20)
    k = torch.full((1, 4, 3), 1e-20)
    v = torch.randn(1, 4, 3)
    assert check_finite("query", q) == math.inf
    out, _ = attn_lib.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v))


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int32, torch.int64])
def test_integer_masks_are_checked_in_one_pass(dtype):
    x = torch.randn(2, 3, 4)
    keep = attn_lib.padding_mask([3, 2])
    _, w_bool = attn_lib.scaled_dot_product_attention(x, x, x, keep)
    _, w_int = attn_lib.scaled_dot_product_attention(x, x, x, keep.to(dtype))
    torch.testing.assert_close(w_int, w_bool)
    with pytest.raises(attn_lib.MaskError, match=r"only 0 .* and 1"):
        attn_lib.scaled_dot_product_attention(x, x, x, keep.to(dtype) * 2)


def test_module_names_a_dtype_mismatch():
    module = attn_lib.SingleHeadAttention(8, 4)
    with pytest.raises(TypeError, match=r"x has dtype torch.float64 .* module.to"):
        module(torch.randn(2, 5, 8, dtype=torch.float64))


def test_module_names_x_and_context_when_their_batches_differ():
    module = attn_lib.SingleHeadAttention(8, 4)
    with pytest.raises(attn_lib.ShapeError, match=r"x has shape \(2, 5, 8\) and context \(5, 8\)"):
        module(torch.randn(2, 5, 8), context=torch.randn(5, 8))


def test_compare_with_mha_refuses_a_module_of_another_width_and_dtype():
    mha = nn.MultiheadAttention(6, 1, bias=False, batch_first=True)
    x = torch.randn(2, 4, 6)
    with pytest.raises(attn_lib.ShapeError, match="embed_dim=6"):
        reference.compare_with_multihead_attention(attn_lib.SingleHeadAttention(6, 3), mha, x)
    module = reference.from_multihead_attention(mha).double()
    with pytest.raises(TypeError, match="share one dtype"):
        reference.compare_with_multihead_attention(module, mha, x)


def test_compare_with_mha_accepts_a_shared_key_padding_mask():
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(8, 1, bias=False, batch_first=True)
    module = reference.from_multihead_attention(mha)
    keep = torch.tensor([[[True, True, True, False]]])  # (1, 1, L): the same for the batch
    report = reference.compare_with_multihead_attention(
        module, mha, torch.randn(2, 4, 8), keep, use_key_padding_mask=True
    )
    assert report.output_max_abs_diff < 1e-5


def test_multihead_attn_mask_from_shared_and_size_one_masks_is_accepted_by_mha():
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(8, 1, bias=False, batch_first=True).eval()
    x = torch.randn(2, 3, 8)
    shared = attn_lib.causal_mask(3).unsqueeze(0)  # (1, L, L)
    converted = masks.to_multihead_attn_mask(shared)
    assert converted.shape == (3, 3)
    out, _ = mha(x, x, x, attn_mask=converted)
    module = reference.from_multihead_attention(mha)
    torch.testing.assert_close(reference.apply_out_proj(mha, module(x, shared)), out)
    keys_only = torch.ones(2, 3, 1, dtype=torch.bool)
    assert masks.to_multihead_attn_mask(keys_only, L_k=4).shape == (2, 3, 4)
    # Without L_k a key dim of 1 is a real length (one key); a query dim of 1 in front of
    # several keys usually stands for every query, so it needs L_q.
    assert masks.to_multihead_attn_mask(keys_only).shape == (2, 3, 1)
    with pytest.raises(attn_lib.MaskError, match="L_q="):
        masks.to_multihead_attn_mask(torch.ones(1, 4, dtype=torch.bool))


def test_small_argument_slips_get_clear_errors():
    x = torch.randn(2, 3, 4)
    with pytest.raises(TypeError, match="training must be True or False"):
        attn_lib.scaled_dot_product_attention(x, x, x, training="no")
    with pytest.raises(TypeError, match="float\\(scale\\)"):
        attn_lib.scaled_dot_product_attention(x, x, x, scale=torch.tensor(0.5))
    with pytest.raises(TypeError, match=r"for one sequence write \[3\]"):
        attn_lib.padding_mask(3)
    with pytest.raises(ValueError, match="non-negative"):
        entropy(torch.tensor([1.5, -0.5]))


def test_numpy_scalars_are_accepted_as_numbers():
    np = pytest.importorskip("numpy")
    x = torch.randn(2, 3, 4)
    out, _ = attn_lib.scaled_dot_product_attention(x, x, x, scale=np.float32(0.5))
    ref, _ = attn_lib.scaled_dot_product_attention(x, x, x, scale=0.5)
    torch.testing.assert_close(out, ref)


def test_softmax_and_entropy_edge_cases():
    assert stable_softmax(torch.zeros(2, 0)).shape == (2, 0)
    h = entropy(torch.tensor([0.0, 1.0, 0.0]))
    assert h.item() == 0.0 and math.copysign(1.0, h.item()) == 1.0  # +0.0, not -0.0
