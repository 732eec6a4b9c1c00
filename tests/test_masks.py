"""Keep-masks (padding, causal, combined) and the converters to PyTorch's conventions."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attn_lib import (
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
