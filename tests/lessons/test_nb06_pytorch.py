"""Notebook 06's checkers: a right answer passes, each classic mistake is caught and named."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import attn_lib
from attn_lib.lessons._checking import CheckResult
from attn_lib.lessons.nb06_pytorch import check_mha_forward, check_mha_mask
from attn_lib.reference import apply_out_proj, from_multihead_attention

# --- check_mha_forward: one function per mistake, written the way a learner would -------------


def _qkv(mha, x, swap=False, with_bias=True):
    W_Q, W_K, W_V = mha.in_proj_weight.chunk(3)
    b = mha.in_proj_bias
    b_Q, b_K, b_V = b.chunk(3) if (b is not None and with_bias) else (None, None, None)
    Q, K, V = F.linear(x, W_Q, b_Q), F.linear(x, W_K, b_K), F.linear(x, W_V, b_V)
    return (K, Q, V) if swap else (Q, K, V)


def right(mha, x):
    out, _ = attn_lib.scaled_dot_product_attention(*_qkv(mha, x))
    return mha.out_proj(out)


def right_with_library(mha, x):
    return apply_out_proj(mha, from_multihead_attention(mha)(x))


def right_returning_pair(mha, x):
    out, w = attn_lib.scaled_dot_product_attention(*_qkv(mha, x))
    return mha.out_proj(out), w


def no_out_proj(mha, x):  # the article's comparison
    return from_multihead_attention(mha)(x)


def out_proj_transposed(mha, x):
    out, _ = attn_lib.scaled_dot_product_attention(*_qkv(mha, x))
    bias = 0 if mha.out_proj.bias is None else mha.out_proj.bias
    return out @ mha.out_proj.weight + bias


def out_proj_no_bias(mha, x):
    out, _ = attn_lib.scaled_dot_product_attention(*_qkv(mha, x))
    return out @ mha.out_proj.weight.T


def in_proj_bias_missing(mha, x):
    out, _ = attn_lib.scaled_dot_product_attention(*_qkv(mha, x, with_bias=False))
    return mha.out_proj(out)


def qk_swapped(mha, x):
    out, _ = attn_lib.scaled_dot_product_attention(*_qkv(mha, x, swap=True))
    return mha.out_proj(out)


def no_scale(mha, x):
    out, _ = attn_lib.scaled_dot_product_attention(*_qkv(mha, x), scale=1.0)
    return mha.out_proj(out)


def calls_the_module(mha, x):
    return mha(x, x, x)[0]


def stub(mha, x):
    raise NotImplementedError


def crashes(mha, x):
    return x @ mha.in_proj_weight  # (B, L, E) @ (3E, E): shapes do not fit


def returns_a_number(mha, x):
    return 1.0


def wrong_shape(mha, x):
    return right(mha, x).transpose(0, 1)


def two_mistakes(mha, x):
    out, _ = attn_lib.scaled_dot_product_attention(*_qkv(mha, x, swap=True), scale=1.0)
    return out


@pytest.mark.parametrize("fn", [right, right_with_library, right_returning_pair])
def test_mha_forward_right_answers_pass(fn):
    result = check_mha_forward(fn, verbose=False)
    assert isinstance(result, CheckResult)
    assert result and result.mistake is None and result.message.startswith("Passed")


@pytest.mark.parametrize(
    ("fn", "mistake"),
    [
        (stub, "not_written"),
        (no_out_proj, "no_out_proj"),
        (out_proj_transposed, "out_proj_transposed"),
        (out_proj_no_bias, "out_proj_no_bias"),
        (in_proj_bias_missing, "in_proj_bias_missing"),
        (qk_swapped, "qk_swapped"),
        (no_scale, "no_scale"),
        (calls_the_module, "called_module"),
        (crashes, "error"),
        (returns_a_number, "bad_return"),
        (wrong_shape, "wrong_shape"),
        (two_mistakes, "unknown"),
    ],
)
def test_mha_forward_mistakes_are_named(fn, mistake):
    result = check_mha_forward(fn, verbose=False)
    assert not result
    assert result.mistake == mistake, result.message
    assert "Traceback" not in result.message


def test_mha_forward_no_out_proj_message_explains(capsys):
    check_mha_forward(no_out_proj)
    printed = capsys.readouterr().out
    assert "out_proj" in printed and "about 1" in printed


def test_mha_forward_does_not_touch_the_global_rng():
    torch.manual_seed(0)
    expected = torch.randn(3)
    torch.manual_seed(0)
    check_mha_forward(right, verbose=False)
    torch.testing.assert_close(torch.randn(3), expected)


# --- check_mha_mask -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fn",
    [
        lambda keep: keep == 0,
        lambda keep: ~keep.bool(),
        lambda keep: attn_lib.to_additive(keep.bool()),  # 0 / -inf: MHA adds it, same effect
    ],
)
def test_mha_mask_right_answers_pass(fn):
    result = check_mha_mask(fn, verbose=False)
    assert result and result.mistake is None


def _raise(keep):
    raise NotImplementedError


@pytest.mark.parametrize(
    ("fn", "mistake"),
    [
        (_raise, "not_written"),
        (lambda keep: keep.bool(), "not_inverted"),
        (lambda keep: keep, "not_inverted"),
        (lambda keep: (keep == 0).float(), "float_01"),
        (lambda keep: keep.float(), "float_01"),
        (lambda keep: 1 - keep.long(), "int_mask"),
        (lambda keep: ~keep.long(), "bitwise_not_int"),
        (lambda keep: ~keep, "bitwise_not_int"),  # right on the bool cases, not on the int one
        (lambda keep: (keep == 0).flatten(), "wrong_shape"),
        (lambda keep: [1, 2], "bad_return"),
        (lambda keep: keep.nonexistent(), "error"),
        (lambda keep: torch.zeros_like(keep, dtype=torch.bool), "unknown"),
    ],
)
def test_mha_mask_mistakes_are_named(fn, mistake):
    result = check_mha_mask(fn, verbose=False)
    assert not result
    assert result.mistake == mistake, result.message


def test_mha_mask_not_inverted_counts_the_nan_rows():
    result = check_mha_mask(lambda keep: keep.bool(), verbose=False)
    assert "1 row of NaN" in result.message
