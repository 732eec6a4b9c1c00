"""Notebook 07 (masks): the pure function under the mask dashboard and the two checkers."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
import torch.nn.functional as F

import attn_lib
from attn_lib.lessons.nb07_masks import (
    MASK_DEMO_L,
    MASK_DTYPES,
    MASK_FILLS,
    check_batch_mask,
    check_masked_softmax,
    mask_setting,
    solution_batch_mask,
    solution_masked_softmax,
)

# --- mask_setting ------------------------------------------------------------------------------


def test_mask_setting_is_the_notebooks_attention():
    g = torch.Generator().manual_seed(7)
    q, k, v = (torch.randn(3, 6, 4, generator=g) for _ in range(3))
    keep = attn_lib.combine_masks(attn_lib.padding_mask([6, 4, 2]).flip(-1), attn_lib.causal_mask(6))  # fmt: skip
    _, w = attn_lib.scaled_dot_product_attention(q, k, v, keep)
    r = mask_setting((6, 4, 2), causal=True, padding_side="left")
    torch.testing.assert_close(r.weights, w)
    assert torch.equal(r.keep, keep)
    assert r.title == "left padding · causal · attn_lib default fill · float32"


def test_every_fill_and_dtype_on_rows_with_no_allowed_key():
    """Left padding under a causal mask: rows 0-1 of sequence 1 and 0-3 of sequence 2 are empty."""
    for fill, dtype in itertools.product(MASK_FILLS, MASK_DTYPES):
        r = mask_setting((6, 4, 2), causal=True, padding_side="left", fill=fill, dtype=dtype)
        if fill == "-1e9" and dtype == "float16":
            assert r.weights is None and "overflows torch.float16" in r.error
            assert r.nan_rows == (0, 0, 0) and all(math.isnan(m) for m in r.mass)
            continue
        assert r.error is None
        empty = ~r.keep.any(dim=-1)
        rows = r.weights[empty]
        assert r.nan_rows == ((0, 2, 4) if fill == "-inf" else (0, 0, 0)), (fill, dtype)
        if fill == "default":
            assert (rows == 0).all() and r.mass == (0.0, 0.0, 0.0)
        elif fill != "-inf":  # a finite fill: uniform rows over blocked keys
            uniform = torch.full_like(rows, 1 / MASK_DEMO_L)
            torch.testing.assert_close(rows, uniform, rtol=0, atol=2 * torch.finfo(torch.float16).eps)  # fmt: skip
    assert mask_setting(fill="0").mass[0] == 0.0  # no padding in sequence 0
    assert min(mask_setting(fill="0").mass[1:]) > 0.1  # fill 0 leaks


# --- exercise 1: masked softmax ---------------------------------------------------------------


def masked_softmax_with(*, fill=None, invert=False, zero_rows=True, ignore=False, dim=-1):
    def learner(scores, keep):
        if ignore:
            return scores.softmax(dim=-1)
        value = torch.finfo(scores.dtype).min if fill is None else fill
        weights = scores.masked_fill(keep if invert else ~keep, value).softmax(dim=dim)
        if zero_rows:
            weights = weights.masked_fill(~keep.any(dim=-1, keepdim=True), 0.0)
        return weights

    return learner


@pytest.mark.parametrize(
    ("learner", "mistake"),
    [
        (solution_masked_softmax, None),
        (lambda s, k: s.masked_fill(~k, -math.inf).softmax(-1).nan_to_num(0.0), None),
        (masked_softmax_with(invert=True), "mask_inverted"),
        (masked_softmax_with(invert=True, fill=-math.inf, zero_rows=False), "mask_inverted"),
        (masked_softmax_with(fill=0.0), "mask_fill_zero"),
        (masked_softmax_with(ignore=True), "mask_not_applied"),
        (lambda s, k: s.softmax(-1) * k, "mask_after_softmax"),
        (lambda s, k: masked_softmax_with(fill=-1.0)(s, k), "mask_leaks"),
        (masked_softmax_with(fill=-math.inf, zero_rows=False), "nan_rows"),
        (masked_softmax_with(fill=-1e9, zero_rows=False), "fill_overflow"),
        (masked_softmax_with(fill=-1e4, zero_rows=False), "uniform_rows"),
        (masked_softmax_with(zero_rows=False), "uniform_rows"),
        (masked_softmax_with(dim=-2), "softmax_dim"),
        (lambda s, k: s.sum(), "wrong_shape"),
        (lambda s, k: "weights", "wrong_shape"),
    ],
)
def test_check_masked_softmax_names_each_mistake(learner, mistake):
    result = check_masked_softmax(learner, verbose=False)
    assert result.mistake == mistake, result.message
    assert bool(result) == (mistake is None)


def test_check_masked_softmax_reports_an_error_and_an_unknown_answer_in_words():
    def raises(scores, keep):
        raise ValueError("oops")

    result = check_masked_softmax(raises, verbose=False)
    assert result.mistake == "error" and "ValueError: oops" in result.message
    result = check_masked_softmax(lambda s, k: solution_masked_softmax(s, k) * 0.9 + 0.1 * k,
                                  verbose=False)  # fmt: skip
    assert result.mistake in {"unknown", "mask_leaks"}
    assert "tensor(" not in result.message


# --- exercise 2: a batch's mask ---------------------------------------------------------------


def batch_mask_with(mistake=None):
    def learner(lengths, causal):
        L = int(lengths.max())
        positions = torch.arange(L)
        real = positions <= lengths[:, None] if mistake == "off" else positions < lengths[:, None]
        real = real[:, :L]
        tri = torch.ones(L, L, dtype=torch.bool)
        tri = tri.triu() if mistake == "future" else tri.tril()
        pad = {"noun": real, "axis": real[:, :, None],
               "both": real[:, None, :] & real[:, :, None]}.get(mistake, real[:, None, :])  # fmt: skip
        if causal and mistake != "no_causal":
            pad = pad | tri if mistake == "or" else pad & tri
        if mistake == "invert":
            pad = ~pad
        return {"float": pad.float(), "int": pad.int()}.get(mistake, pad)

    return learner


@pytest.mark.parametrize(
    ("mistake", "code"),
    [
        (None, None), ("int", None), ("noun", "mask_not_unsqueezed"), ("axis", "mask_transposed"),
        ("invert", "mask_inverted"), ("or", "masks_or"), ("future", "unknown"),
        ("no_causal", "causal_ignored"), ("both", "padded_query_rows"),
        ("off", "unknown"), ("float", "not_bool"),
    ],
)  # fmt: skip
def test_check_batch_mask_names_each_mistake(mistake, code):
    result = check_batch_mask(batch_mask_with(mistake), verbose=False)
    assert result.mistake == code, result.message


def test_check_batch_mask_other_answers():
    assert check_batch_mask(solution_batch_mask, verbose=False)

    def full(lengths, causal):  # (B, L, L) in both cases is fine too
        L = int(lengths.max())
        pad = attn_lib.padding_mask(lengths)
        return attn_lib.combine_masks(pad, attn_lib.causal_mask(L)) if causal else pad.expand(-1, L, -1)  # fmt: skip

    assert check_batch_mask(full, verbose=False)
    assert check_batch_mask(lambda n, c: [1], verbose=False).mistake == "not_bool"
    assert check_batch_mask(lambda n, c: torch.ones(5, dtype=torch.bool),
                            verbose=False).mistake == "wrong_shape"  # fmt: skip

    def blocks_key_0(lengths, causal):
        m = solution_batch_mask(lengths, causal).expand(-1, int(lengths.max()), -1).clone()
        return m.index_fill_(2, torch.tensor([0]), False)

    result = check_batch_mask(blocks_key_0, verbose=False)
    assert result.mistake == "unknown"
    words = " ".join(result.message.split())
    assert "query row 0, key column 0" in words and "tensor(" not in words


def test_sdpa_gives_zero_rows_like_attn_lib():
    """The claim the notebook and the checker rely on: SDPA zeroes rows with no allowed key."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 5, 3, generator=g) for _ in range(3))
    keep = attn_lib.combine_masks(attn_lib.padding_mask([5, 2]).flip(-1), attn_lib.causal_mask(5))
    out, _ = attn_lib.scaled_dot_product_attention(q, k, v, keep)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=keep))
    assert not math.isnan(float(out.sum()))
