"""Notebook 06's checkers and helpers: a right answer passes, each classic mistake is named."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import attn_lib
from attn_lib.lessons import _checking
from attn_lib.lessons._checking import CheckResult, show_solution
from attn_lib.lessons.nb06_pytorch import (
    agreement,
    check_mha_forward,
    check_mha_mask,
    solution_mha_forward,
    solution_mha_mask,
)
from attn_lib.reference import apply_out_proj, from_multihead_attention

# --- agreement ----------------------------------------------------------------------------------


def test_agreement_scales_with_the_values_and_refuses_a_real_difference():
    big = torch.tensor([100.0, -50.0])
    assert agreement(torch.nextafter(big, torch.tensor(1e9)), big) == "within 16 float32 ulps"
    assert agreement(big.double(), big.double()) == "within 16 float64 ulps"
    with pytest.raises(AssertionError):
        agreement(big + 1e-3, big)


# --- check_mha_forward: one function per mistake, written the way a learner would -------------


def _qkv(mha, x, swap=False, with_bias=True):
    W_Q, W_K, W_V = mha.in_proj_weight.chunk(3)
    b = mha.in_proj_bias
    b_Q, b_K, b_V = b.chunk(3) if (b is not None and with_bias) else (None, None, None)
    Q, K, V = F.linear(x, W_Q, b_Q), F.linear(x, W_K, b_K), F.linear(x, W_V, b_V)
    return (K, Q, V) if swap else (Q, K, V)


def _attend(mha, x, **kwargs):
    scale = kwargs.pop("scale", None)
    return attn_lib.scaled_dot_product_attention(*_qkv(mha, x, **kwargs), scale=scale)[0]


def _stub(mha, x):
    raise NotImplementedError


FORWARD_MISTAKES = [
    (_stub, "not_written"),
    (lambda m, x: from_multihead_attention(m)(x), "no_out_proj"),  # the article's comparison
    (lambda m, x: _attend(m, x) @ m.out_proj.weight + (0 if m.out_proj.bias is None
                                                        else m.out_proj.bias),
     "out_proj_transposed"),
    (lambda m, x: _attend(m, x) @ m.out_proj.weight.T, "out_proj_no_bias"),
    (lambda m, x: m.out_proj(_attend(m, x, with_bias=False)), "in_proj_bias_missing"),
    (lambda m, x: m.out_proj(_attend(m, x, swap=True)), "qk_swapped"),
    (lambda m, x: m.out_proj(_attend(m, x, scale=1.0)), "no_scale"),
    (lambda m, x: m(x, x, x)[0], "called_module"),
    (lambda m, x: x @ m.in_proj_weight, "error"),  # (B, L, E) @ (3E, E): shapes do not fit
    (lambda m, x: 1.0, "bad_return"),
    (lambda m, x: solution_mha_forward(m, x).transpose(0, 1), "wrong_shape"),
    (lambda m, x: _attend(m, x, swap=True, scale=1.0), "unknown"),  # two mistakes at once
]  # fmt: skip


@pytest.mark.parametrize(
    "fn",
    [
        solution_mha_forward,
        lambda m, x: apply_out_proj(m, from_multihead_attention(m)(x)),
        lambda m, x: (solution_mha_forward(m, x), None),  # a pair (output, weights)
    ],
)
def test_mha_forward_right_answers_pass(fn):
    result = check_mha_forward(fn, verbose=False)
    assert isinstance(result, CheckResult)
    assert result and result.message.startswith("Passed")


@pytest.mark.parametrize(("fn", "mistake"), FORWARD_MISTAKES)
def test_mha_forward_mistakes_are_named(fn, mistake):
    result = check_mha_forward(fn, verbose=False)
    assert not result and result.mistake == mistake, result.message
    assert "Traceback" not in result.message


def test_mha_forward_explains_out_proj_and_leaves_the_rng_alone(capsys):
    torch.manual_seed(0)
    expected = torch.randn(3)
    torch.manual_seed(0)
    check_mha_forward(solution_mha_forward, verbose=False)
    torch.testing.assert_close(torch.randn(3), expected)
    check_mha_forward(lambda m, x: from_multihead_attention(m)(x))
    printed = capsys.readouterr().out
    assert "out_proj" in printed and "about 1" in printed


# --- check_mha_mask -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fn",
    [
        solution_mha_mask,
        lambda keep: ~keep.bool(),
        lambda keep: attn_lib.to_additive(keep.bool()),  # 0 / -inf: MHA adds it, same effect
        lambda keep: torch.zeros(keep.shape, dtype=torch.float64).masked_fill(
            keep == 0, torch.finfo(torch.float64).min
        ),
        lambda keep: torch.zeros(keep.shape).masked_fill(keep == 0, -1e9),
    ],
)
def test_mha_mask_right_answers_pass(fn):
    result = check_mha_mask(fn, verbose=False)
    assert result and result.mistake is None, result.message


def _raise(keep):
    raise NotImplementedError


@pytest.mark.parametrize(
    ("fn", "mistake"),
    [
        (_raise, "not_written"),
        (lambda keep: keep.bool(), "keep_mask_to_mha"),
        (lambda keep: keep, "keep_mask_to_mha"),
        (lambda keep: (keep == 0).float(), "float_mask_added"),  # 0/1 float: added, masks nothing
        (lambda keep: torch.zeros(keep.shape).masked_fill(keep == 0, -5.0), "float_mask_added"),
        (lambda keep: ~keep.long(), "bitwise_not_int"),
        (lambda keep: ~keep, "bitwise_not_int"),  # right on the bool cases, not on the int one
        (lambda keep: 1 - keep.long(), "unknown"),  # right cells, integer dtype
        (lambda keep: (keep == 0).flatten(), "wrong_shape"),
        (lambda keep: [1, 2], "bad_return"),
        (lambda keep: keep.nonexistent(), "error"),
        (lambda keep: torch.zeros_like(keep, dtype=torch.bool), "unknown"),
    ],
)
def test_mha_mask_mistakes_are_named_in_words(fn, mistake):
    result = check_mha_mask(fn, verbose=False)
    assert not result and result.mistake == mistake, result.message
    assert "[[" not in result.message and len(result.message) < 700  # words, not tensors


def test_mha_mask_names_the_dtype_and_the_fill():
    assert "bool" in check_mha_mask(lambda keep: 1 - keep.long(), verbose=False).message

    def filled(keep):
        return torch.zeros(keep.shape).masked_fill(keep == 0, -5.0)

    assert "-5" in check_mha_mask(filled, verbose=False).message


# --- show_solution ------------------------------------------------------------------------------


def test_solution_is_shown_only_after_an_attempt(capsys):
    _checking._ATTEMPTED.discard("mha_mask")
    show_solution("mha_mask", solution_mha_mask)
    assert "Try it first" in capsys.readouterr().out
    check_mha_mask(_raise, verbose=False)  # not written yet: not an attempt
    show_solution("mha_mask", solution_mha_mask)
    assert "Try it first" in capsys.readouterr().out
    check_mha_mask(lambda keep: keep, verbose=False)
    show_solution("mha_mask", solution_mha_mask)
    assert "keep == 0" in capsys.readouterr().out
