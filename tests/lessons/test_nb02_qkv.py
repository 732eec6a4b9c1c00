"""Notebook 02's biased projections and checkers: the four bias settings share everything but
the bias, and each checker names a learner's usual mistake in words."""

from __future__ import annotations

import math

import pytest
import torch

from attn_lib.lessons import _checking, _examples, nb02_qkv
from attn_lib.lessons.nb02_qkv import check_k_bias_shift, check_qkv_projection


def _stub(*args):
    raise NotImplementedError


# --- qkv_example: what each bias does, on another x than the notebook's --------------------


def test_each_bias_does_what_section_4_says():
    x = torch.randn(7, 8, generator=torch.Generator().manual_seed(11))
    state = torch.get_rng_state()
    ex = {b: nb02_qkv.qkv_example(x, b) for b in nb02_qkv.BIAS_CHOICES}
    assert torch.equal(torch.get_rng_state(), state)  # the global generator is untouched
    plain = ex["none"]
    for e in ex.values():  # the same bias vectors whatever is switched on
        assert torch.equal(e.b_Q, plain.b_Q) and torch.equal(e.b_V, plain.b_V)
    shift = (plain.Q @ ex["k"].b_K / math.sqrt(8))[:, None]  # (L_q, 1): q_i·b_K / √d_k
    torch.testing.assert_close(ex["k"].scores - plain.scores, shift.expand(7, 7))
    torch.testing.assert_close(ex["k"].output, plain.output)
    torch.testing.assert_close(ex["v"].weights, plain.weights)
    torch.testing.assert_close(ex["v"].output - plain.output, ex["v"].b_V.expand(7, 8))
    assert float((ex["q"].weights - plain.weights).abs().max()) > 0.05
    torch.testing.assert_close(ex["q"].weights.sum(-1), torch.ones(7))
    assert float(plain.b_K.abs().max()) <= 3 / math.sqrt(8)  # 3 × nn.Linear's range


def test_the_sentence_of_notebook_02():
    s = _examples.qkv_sentence()
    assert s.tokens == ("a", "small", "cat", "sat", "on", "the", "mat")
    assert s.x.shape == (7, 8) and s.x.dtype == torch.float32
    torch.testing.assert_close(s.x, _examples.qkv_sentence().x, rtol=0, atol=0)


# --- Exercise 1: Q, K, V from the layers' parameters --------------------------------------


def qkv_no_transpose(x, W_Q, W_K, W_V):
    return tuple(x @ w.weight + (0 if w.bias is None else w.bias) for w in (W_Q, W_K, W_V))


def qkv_no_bias(x, W_Q, W_K, W_V):
    return tuple(x @ w.weight.T for w in (W_Q, W_K, W_V))


def qkv_bias_none(x, W_Q, W_K, W_V):
    return tuple(x @ w.weight.T + w.bias for w in (W_Q, W_K, W_V))


def qkv_calls_layers(x, W_Q, W_K, W_V):
    return W_Q(x), W_K(x), W_V(x)


def qkv_swapped(x, W_Q, W_K, W_V):
    q, k, v = nb02_qkv.solution_qkv(x, W_Q, W_K, W_V)
    return k, q, v


@pytest.mark.parametrize(
    ("fn", "mistake"),
    [
        (_stub, "not_written"),
        (nb02_qkv.solution_qkv, None),
        (qkv_no_transpose, "linear_not_transposed"),
        (qkv_no_bias, "bias_missing"),
        (qkv_bias_none, "bias_none"),
        (qkv_calls_layers, "called_layer"),
        (lambda x, *layers: x, "bad_return"),
        (lambda x, *layers: 1 / 0, "error"),
        (qkv_swapped, "unknown"),
    ],
)
def test_check_qkv_projection(fn, mistake, capsys):
    rng = torch.get_rng_state()
    result = check_qkv_projection(fn)
    assert result.mistake == mistake
    assert bool(result) is (mistake is None)
    assert capsys.readouterr().out.strip() == result.message  # feedback in words, printed
    assert "Traceback" not in result.message
    assert torch.equal(torch.get_rng_state(), rng)  # the global generator is untouched


# --- Exercise 2: the shift a bias on K adds to the scores -----------------------------------


@pytest.mark.parametrize(
    ("fn", "mistake"),
    [
        (_stub, "not_written"),
        (nb02_qkv.solution_k_bias_shift, None),
        (lambda q, b: (q @ b / math.sqrt(q.size(-1)))[:, None], None),  # a column is fine
        (lambda q, b: torch.zeros(q.shape[0]), "k_bias_no_shift"),
        (lambda q, b: q @ b, "no_scale"),
        (lambda q, b: q @ b / q.size(-1), "scale_d_k"),
        (lambda q, b: q * b, "wrong_shape"),
        (lambda q, b: q.sum(-1), "unknown"),
        (lambda q, b: 1.0, "bad_return"),
        (lambda q, b: q @ b[:-1], "error"),
    ],
)
def test_check_k_bias_shift(fn, mistake):
    result = check_k_bias_shift(fn, verbose=False)
    assert result.mistake == mistake
    assert bool(result) is (mistake is None)


def test_a_solution_is_shown_only_after_an_attempt(capsys):
    _checking._ATTEMPTED.discard("k_bias_shift")
    _checking.show_solution("k_bias_shift", nb02_qkv.solution_k_bias_shift)
    assert capsys.readouterr().out.startswith("Try it first")
    check_k_bias_shift(_stub, verbose=False)  # not written yet: not an attempt
    _checking.show_solution("k_bias_shift", nb02_qkv.solution_k_bias_shift)
    assert capsys.readouterr().out.startswith("Try it first")
    check_k_bias_shift(lambda q, b: q @ b, verbose=False)
    _checking.show_solution("k_bias_shift", nb02_qkv.solution_k_bias_shift)
    assert "query @ b_K / math.sqrt(query.size(-1))" in capsys.readouterr().out
