"""Keep-masks (padding, causal, combined) and the converters to PyTorch's conventions."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attn_lib import (
    MaskError,
    causal_mask,
    combine_masks,
    padding_mask,
    scaled_dot_product_attention,
)
from attn_lib.masks import (
    as_keep_mask,
    to_additive,
    to_key_padding_mask,
    to_multihead_attn_mask,
    to_sdpa_mask,
)

T, F_ = True, False


# --- padding_mask ---------------------------------------------------------------------------


@pytest.mark.parametrize("as_tensor", [False, True])
def test_padding_mask_shape_and_values(as_tensor):
    lengths = [3, 1, 4]
    mask = padding_mask(torch.tensor(lengths) if as_tensor else lengths)
    assert mask.dtype == torch.bool and mask.shape == (3, 1, 4)
    expected = torch.tensor([[[T, T, T, F_]], [[T, F_, F_, F_]], [[T, T, T, T]]])
    assert torch.equal(mask, expected)


def test_padding_mask_max_len():
    mask = padding_mask([2, 3], max_len=6)
    assert mask.shape == (2, 1, 6)
    assert mask.sum().item() == 5
    assert torch.equal(mask[:, 0].sum(-1), torch.tensor([2, 3]))
    assert not mask[:, :, 3:].any()


def test_padding_mask_zero_length_row():
    mask = padding_mask([0, 2])
    assert torch.equal(mask, torch.tensor([[[F_, F_]], [[T, T]]]))


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8])
def test_padding_mask_integer_tensor_lengths(dtype):
    assert torch.equal(padding_mask(torch.tensor([1, 3], dtype=dtype)), padding_mask([1, 3]))


def test_padding_mask_blanks_key_columns_for_every_query():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 8, generator=g) for _ in range(3))
    _, w = scaled_dot_product_attention(q, k, v, padding_mask([4, 2]))
    assert (w[1, :, 2:] == 0).all()  # padded keys, for every query row
    assert (w[1, :, :2] > 0).all()


# --- causal_mask -----------------------------------------------------------------------------


@pytest.mark.parametrize("L", [1, 2, 5, 9])
def test_causal_mask_is_tril(L):
    mask = causal_mask(L)
    assert mask.dtype == torch.bool and mask.shape == (L, L)
    assert torch.equal(mask, torch.ones(L, L).tril().bool())
    assert torch.equal(mask, torch.tril(torch.ones(L, L, dtype=torch.bool)))


@pytest.mark.parametrize("L_q, L_k", [(3, 5), (5, 3), (4, 4), (1, 6)])
def test_causal_mask_top_left_like_sdpa_is_causal(L_q, L_k):
    mask = causal_mask(L_q, L_k)
    assert mask.shape == (L_q, L_k)
    assert torch.equal(mask, torch.ones(L_q, L_k, dtype=torch.bool).tril())
    g = torch.Generator().manual_seed(L_q * 10 + L_k)
    q = torch.randn(2, L_q, 8, generator=g)
    k = torch.randn(2, L_k, 8, generator=g)
    v = torch.randn(2, L_k, 3, generator=g)
    out, w = scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True))
    # query i sees keys 0..i only
    for i in range(L_q):
        assert (w[:, i, i + 1 :] == 0).all()


def test_causal_mask_device_argument():
    assert causal_mask(3, device="cpu").device.type == "cpu"


# (L_q, L_k): decoding (L_q < L_k), one query, square, more queries than keys, one key
SIZES = [(1, 1), (1, 5), (2, 7), (3, 5), (4, 4), (5, 3), (6, 1), (7, 2)]


def _torch_causal(variant: str, L_q: int, L_k: int) -> torch.Tensor:
    # Imported here, not at the top: torch.nn.attention.bias imports torch._dynamo (~2 s of
    # CPU), which every pytest-xdist worker would otherwise pay while collecting this module.
    from torch.nn.attention import bias

    with warnings.catch_warnings():  # lower right with L_q > L_k warns about NaN in fused kernels
        warnings.simplefilter("ignore", UserWarning)
        return getattr(bias, variant)(L_q, L_k)


@pytest.mark.parametrize("L_q, L_k", SIZES)
def test_causal_mask_alignments_equal_pytorchs_causal_biases(L_q, L_k):
    top_left = causal_mask(L_q, L_k)
    assert torch.equal(causal_mask(L_q, L_k, align="top_left"), top_left)
    assert torch.equal(top_left, _torch_causal("causal_upper_left", L_q, L_k)._materialize())
    bottom_right = causal_mask(L_q, L_k, align="bottom_right")
    assert bottom_right.dtype == torch.bool and bottom_right.shape == (L_q, L_k)
    assert torch.equal(bottom_right, _torch_causal("causal_lower_right", L_q, L_k)._materialize())
    if L_q == L_k:
        assert torch.equal(bottom_right, top_left)


@pytest.mark.parametrize("L_q, L_k", SIZES)
def test_bottom_right_attention_equals_sdpa_with_causal_lower_right(L_q, L_k):
    g = torch.Generator().manual_seed(L_q * 10 + L_k)
    q = torch.randn(2, L_q, 8, generator=g)
    k = torch.randn(2, L_k, 8, generator=g)
    v = torch.randn(2, L_k, 3, generator=g)
    out, w = scaled_dot_product_attention(q, k, v, causal_mask(L_q, L_k, align="bottom_right"))
    ref = F.scaled_dot_product_attention(
        q, k, v, attn_mask=_torch_causal("causal_lower_right", L_q, L_k)
    )
    torch.testing.assert_close(out, ref)
    # query i sees keys 0..i + (L_k - L_q): the last query sees every key
    for i in range(L_q):
        assert (w[:, i, max(i + L_k - L_q + 1, 0) :] == 0).all()
    assert (w[:, -1] > 0).all()
    # L_q > L_k: the first L_q - L_k queries have no allowed key, so zero weights and output
    empty = max(L_q - L_k, 0)
    assert (w[:, :empty] == 0).all() and (out[:, :empty] == 0).all()
    torch.testing.assert_close(w[:, empty:].sum(-1), torch.ones(2, L_q - empty))


@pytest.mark.parametrize("L_q", [1, 2, 5])
def test_bottom_right_is_the_decoding_mask(L_q):
    # The last L_q rows of full causal attention over L tokens = attention of those L_q
    # queries to all L keys (a key cache) with the bottom-right mask; top-left would not be.
    g = torch.Generator().manual_seed(L_q)
    L = 6
    q, k, v = (torch.randn(1, L, 4, generator=g) for _ in range(3))
    full, _ = scaled_dot_product_attention(q, k, v, causal_mask(L))
    step, _ = scaled_dot_product_attention(
        q[:, -L_q:], k, v, causal_mask(L_q, L, align="bottom_right")
    )
    torch.testing.assert_close(step, full[:, -L_q:])
    wrong, _ = scaled_dot_product_attention(q[:, -L_q:], k, v, causal_mask(L_q, L))
    assert not torch.allclose(wrong, full[:, -L_q:])


@pytest.mark.parametrize("align", ["lower_right", "bottom-right", "", None, 1, "TOP_LEFT"])
def test_causal_mask_refuses_an_unknown_align(align):
    with pytest.raises(ValueError, match="align must be 'top_left'.*'bottom_right'") as info:
        causal_mask(3, 5, align=align)
    assert repr(align) in str(info.value)


@pytest.mark.parametrize(
    "sizes",
    [
        (np.int64(3),),
        (torch.tensor([1, 3]).max(),),
        (np.int32(3), np.int64(5)),
        (3, torch.tensor(5)),
    ],
)
def test_causal_mask_accepts_numpy_and_0d_tensor_sizes(sizes):
    expected = torch.ones(3, int(sizes[-1]), dtype=torch.bool).tril()
    assert torch.equal(causal_mask(*sizes), expected)


@pytest.mark.parametrize(
    "bad", [3.0, np.float64(3.0), True, torch.tensor(3.0), torch.tensor([3, 4])]
)
def test_causal_mask_refuses_float_and_bool_sizes(bad):
    with pytest.raises(TypeError, match="L_q must be an int"):
        causal_mask(bad)
    with pytest.raises(TypeError, match="L_k must be an int"):
        causal_mask(3, bad)


# --- combine_masks ---------------------------------------------------------------------------


def test_combine_masks_is_logical_and_with_broadcasting():
    pad = padding_mask([4, 2])  # (2, 1, 4)
    causal = causal_mask(4)  # (4, 4)
    combined = combine_masks(pad, causal)
    assert combined.dtype == torch.bool and combined.shape == (2, 4, 4)
    assert torch.equal(combined, pad & causal)
    assert torch.equal(combined[0], causal)
    assert torch.equal(combined[1], causal & torch.tensor([T, T, F_, F_]))


def test_combine_masks_single_and_three():
    a = causal_mask(3)
    assert torch.equal(combine_masks(a), a)
    b = torch.tensor([[1, 1, 0]] * 3)
    c = torch.tensor([[T, F_, T]] * 3)
    assert torch.equal(combine_masks(a, b, c), a & b.bool() & c)


def test_combine_masks_accepts_integers():
    a = torch.tensor([[1, 0], [1, 1]])
    b = torch.tensor([[1, 1], [0, 1]], dtype=torch.uint8)
    assert torch.equal(combine_masks(a, b), torch.tensor([[T, F_], [F_, T]]))


# --- converters --------------------------------------------------------------------------------


def test_to_multihead_attn_mask_inverts():
    keep = causal_mask(3)
    blocked = to_multihead_attn_mask(keep)
    assert blocked.dtype == torch.bool and blocked.shape == (3, 3)
    assert torch.equal(blocked, ~keep)
    assert torch.equal(blocked, torch.ones(3, 3, dtype=torch.bool).triu(1))


def test_to_multihead_attn_mask_3d_and_heads():
    keep = combine_masks(padding_mask([3, 1]), causal_mask(3))  # (2, 3, 3)
    assert torch.equal(to_multihead_attn_mask(keep), ~keep)
    two = to_multihead_attn_mask(keep, num_heads=2)
    assert two.shape == (4, 3, 3)
    for b in range(2):
        for h in range(2):
            assert torch.equal(two[b * 2 + h], ~keep[b])  # batch-major, as MHA's view


def test_to_multihead_attn_mask_padding_with_L_q():
    pad = padding_mask([3, 1])
    blocked = to_multihead_attn_mask(pad, L_q=5)
    assert blocked.shape == (2, 5, 3)
    assert torch.equal(blocked, (~pad).expand(2, 5, 3))


def test_to_key_padding_mask_values():
    kpm = to_key_padding_mask(padding_mask([3, 1], max_len=4))
    assert kpm.dtype == torch.bool and kpm.shape == (2, 4)
    assert torch.equal(kpm, torch.tensor([[F_, F_, F_, T], [F_, T, T, T]]))


@pytest.mark.parametrize("L_q, L_k", [(1, 1), (3, 1), (1, 3), (4, 4)])
def test_to_multihead_attn_mask_takes_sizes_of_one_literally(L_q, L_k):
    # causal_mask(1) and masks with one key are valid (L_q, L_k) masks, not broadcasts.
    for align in ("top_left", "bottom_right"):
        keep = causal_mask(L_q, L_k, align=align)
        if L_q == 1 and L_k > 1:
            blocked = to_multihead_attn_mask(keep, L_q=1)  # (1, L_k) is ambiguous without it
        else:
            blocked = to_multihead_attn_mask(keep)
        assert torch.equal(blocked, ~keep)
        mha = nn.MultiheadAttention(4, 1, batch_first=True).eval()
        q, kv = torch.randn(2, L_q, 4), torch.randn(2, L_k, 4)
        with torch.no_grad():
            mha(q, kv, kv, attn_mask=blocked)  # accepted by nn.MultiheadAttention


def test_to_multihead_attn_mask_one_row_mask_needs_L_q_and_is_expanded():
    row = torch.tensor([[True, True, False, True]])  # (1, L_k): one key mask for every query
    with pytest.raises(MaskError, match=r"\(1, 4\).*L_q=\.\.\..*L_q=1 if there is one query"):
        to_multihead_attn_mask(row)
    blocked = to_multihead_attn_mask(row, L_q=3)
    assert blocked.shape == (3, 4) and torch.equal(blocked, (~row).expand(3, 4))
    q, kv = torch.randn(2, 3, 4), torch.randn(2, 4, 4)  # 3 queries, 4 keys
    mha = nn.MultiheadAttention(4, 1, batch_first=True).eval()
    with torch.no_grad():
        mha(q, kv, kv, attn_mask=blocked)
    assert to_multihead_attn_mask(row, L_q=1).shape == (1, 4)


def test_to_multihead_attn_mask_refuses_sizes_that_do_not_fit():
    with pytest.raises(MaskError, match=r"L_q dim 3 is neither 1 nor L_q=5"):
        to_multihead_attn_mask(causal_mask(3), L_q=5)
    with pytest.raises(MaskError, match=r"L_k dim 4 is neither 1 nor L_k=2"):
        to_multihead_attn_mask(padding_mask([4, 2]), L_q=3, L_k=2)


@pytest.mark.parametrize(
    "num_heads, error, words",
    [
        (0, ValueError, "num_heads must be ≥ 1, got 0"),
        (-1, ValueError, "num_heads must be ≥ 1, got -1"),
        (2.5, TypeError, "num_heads must be an int, got float 2.5"),
        (True, TypeError, "num_heads must be an int, got the bool True"),
        ("2", TypeError, "num_heads must be an int, got str"),
    ],
)
@pytest.mark.parametrize("rank", [2, 3])
def test_to_multihead_attn_mask_checks_num_heads(num_heads, error, words, rank):
    keep = causal_mask(3) if rank == 2 else combine_masks(padding_mask([3, 2]), causal_mask(3))
    with pytest.raises(error, match=words):
        to_multihead_attn_mask(keep, num_heads=num_heads)


def test_to_multihead_attn_mask_integer_sizes():
    keep = combine_masks(padding_mask([3, 2]), causal_mask(3))
    two = to_multihead_attn_mask(keep, num_heads=np.int64(2))
    assert two.shape == (4, 3, 3)
    assert to_multihead_attn_mask(padding_mask([3, 2]), L_q=torch.tensor(5)).shape == (2, 5, 3)


def test_to_key_padding_mask_expands_a_shared_mask_to_B():
    shared = padding_mask([3], max_len=4)  # (1, 1, 4)
    assert to_key_padding_mask(shared).shape == (1, 4)  # B = 1 read literally
    kpm = to_key_padding_mask(shared, B=3)
    assert kpm.shape == (3, 4) and torch.equal(kpm, torch.tensor([[F_, F_, F_, T]] * 3))
    x = torch.randn(3, 4, 4)
    mha = nn.MultiheadAttention(4, 1, batch_first=True).eval()
    with torch.no_grad():
        mha(x, x, x, key_padding_mask=kpm)  # (1, L_k) would be refused by MHA
    assert torch.equal(
        to_key_padding_mask(padding_mask([3, 1]), B=np.int64(2)), ~padding_mask([3, 1])[:, 0]
    )


def test_to_key_padding_mask_refusals():
    with pytest.raises(MaskError, match=r"batch dim 2 is neither 1 nor B=3"):
        to_key_padding_mask(padding_mask([3, 1]), B=3)
    with pytest.raises(ValueError, match="B must be ≥ 1, got 0"):
        to_key_padding_mask(padding_mask([3, 1]), B=0)
    with pytest.raises(TypeError, match="B must be an int"):
        to_key_padding_mask(padding_mask([3, 1]), B=2.0)
    with pytest.raises(MaskError, match=r"mask\.unsqueeze\(1\) → \(2, 1, 4\)"):
        to_key_padding_mask(torch.ones(2, 4, dtype=torch.bool))


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2])
def test_to_additive_refuses_float8(dtype):
    # float8_e4m3fn has no -inf, and masked_fill is not implemented for either
    with pytest.raises(TypeError, match="float32, float64, float16 or bfloat16"):
        to_additive(causal_mask(3), dtype)


def test_masks_on_the_meta_device_are_refused_by_the_converters():
    meta = torch.ones(3, 3, dtype=torch.bool, device="meta")
    for convert in (to_multihead_attn_mask, to_sdpa_mask, to_additive, as_keep_mask):
        with pytest.raises(MaskError, match="meta device"):
            convert(meta)
    with pytest.raises(MaskError, match="mask 1 is on the meta device"):
        combine_masks(causal_mask(3), meta)


def test_to_sdpa_mask_is_the_keep_convention():
    keep = combine_masks(padding_mask([3, 2]), causal_mask(3))
    assert torch.equal(to_sdpa_mask(keep), keep)
    ints = keep.to(torch.int64)
    converted = to_sdpa_mask(ints)
    assert converted.dtype == torch.bool and torch.equal(converted, keep)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_to_additive_zero_and_minus_inf(dtype):
    keep = combine_masks(padding_mask([3, 2]), causal_mask(3))
    add = to_additive(keep, dtype)
    assert add.dtype == dtype and add.shape == keep.shape
    assert (add[keep] == 0).all()
    assert torch.isneginf(add[~keep]).all()


def test_to_additive_default_dtype():
    assert to_additive(causal_mask(2)).dtype == torch.float32


def test_to_additive_in_sdpa_equals_the_bool_mask():
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, 4, 8, generator=g) for _ in range(3))
    keep = combine_masks(padding_mask([4, 3]), causal_mask(4))
    a = F.scaled_dot_product_attention(q, k, v, attn_mask=to_sdpa_mask(keep))
    b = F.scaled_dot_product_attention(q, k, v, attn_mask=to_additive(keep, q.dtype))
    torch.testing.assert_close(a, b)
    torch.testing.assert_close(scaled_dot_product_attention(q, k, v, keep)[0], a)


# --- the B == L trap and integer masks ---------------------------------------------------------


@pytest.mark.parametrize("L", [1, 2, 4, 7])
def test_padding_with_lengths_1_to_L_is_a_causal_mask(L):
    # With B == L, a (B, L) padding mask is indistinguishable from an (L_q, L_k) mask:
    # lengths 1..L give exactly the causal mask, bit for bit.
    pad = padding_mask(list(range(1, L + 1)))
    assert pad.shape == (L, 1, L)
    assert torch.equal(pad.squeeze(1), causal_mask(L))


@pytest.mark.parametrize("int_dtype", [torch.int64, torch.int32, torch.uint8, torch.int8])
def test_integer_01_mask_equals_bool(int_dtype):
    keep = combine_masks(padding_mask([4, 2, 3]), causal_mask(4))
    ints = keep.to(int_dtype)
    converted = as_keep_mask(ints)
    assert converted.dtype == torch.bool and torch.equal(converted, keep)
    assert as_keep_mask(keep) is keep
    g = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(3, 4, 8, generator=g) for _ in range(3))
    out_b, w_b = scaled_dot_product_attention(q, k, v, keep)
    out_i, w_i = scaled_dot_product_attention(q, k, v, ints)
    torch.testing.assert_close(out_i, out_b, rtol=0, atol=0)
    torch.testing.assert_close(w_i, w_b, rtol=0, atol=0)
    for conv in (to_multihead_attn_mask, to_sdpa_mask):
        assert torch.equal(conv(ints), conv(keep))
    assert torch.equal(to_additive(ints), to_additive(keep))


def test_additive_masks_in_sdpa_on_a_fully_masked_row():
    # to_additive's -inf: SDPA returns a zero row; a finite fill (-1e9): the mean of V.
    g = torch.Generator().manual_seed(5)
    q, k, v = (
        torch.randn(2, 3, 4, generator=g),
        torch.randn(2, 5, 4, generator=g),
        torch.randn(2, 5, 2, generator=g),
    )
    keep = torch.ones(2, 3, 5, dtype=torch.bool)
    keep[0, 1] = False
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=to_additive(keep, q.dtype))
    torch.testing.assert_close(out[0, 1], torch.zeros(2), rtol=0, atol=0)
    torch.testing.assert_close(out, scaled_dot_product_attention(q, k, v, keep)[0])
    finite = torch.zeros(2, 3, 5).masked_fill(~keep, -1e9)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=finite)
    torch.testing.assert_close(out[0, 1], v[0].mean(0))


def test_padding_mask_accepts_numpy_integer_lengths():
    np = pytest.importorskip("numpy")
    assert torch.equal(padding_mask(np.array([2, 3])), padding_mask([2, 3]))


# --- sizes: ints, NumPy integers, 0-d integer tensors -----------------------------------------


def test_padding_mask_accepts_integer_max_len_and_lengths():
    expected = padding_mask([3, 2], max_len=5)
    assert torch.equal(padding_mask([3, 2], max_len=np.int64(5)), expected)
    assert torch.equal(padding_mask([3, 2], max_len=torch.tensor(5)), expected)
    lengths = torch.tensor([3, 2])
    assert torch.equal(padding_mask(lengths, max_len=lengths.max()), padding_mask([3, 2]))
    assert torch.equal(padding_mask([np.int64(3), torch.tensor(2)], max_len=5), expected)


@pytest.mark.parametrize("bad", [5.0, True, torch.tensor(5.0)])
def test_padding_mask_refuses_a_float_or_bool_max_len(bad):
    with pytest.raises(TypeError, match="max_len must be an int"):
        padding_mask([3, 2], max_len=bad)


def test_padding_mask_refuses_lengths_on_the_meta_device():
    with pytest.raises(ValueError, match="lengths is on the meta device"):
        padding_mask(torch.tensor([2, 3], device="meta"))
