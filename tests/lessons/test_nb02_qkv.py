"""Notebook 02's checkers: a right answer passes, each usual mistake is named in words."""

from __future__ import annotations

import math

import pytest
import torch

from attn_lib.lessons.nb02_qkv import (
    check_k_bias_shift,
    check_qkv_projection,
    check_v_bias_prediction,
)


def _stub(*args):
    raise NotImplementedError


# --- Exercise 1: Q, K, V from the layers' parameters --------------------------------------


def qkv_right(x, W_Q, W_K, W_V):
    def project(layer):
        y = x @ layer.weight.T
        return y if layer.bias is None else y + layer.bias

    return project(W_Q), project(W_K), project(W_V)


def qkv_no_transpose(x, W_Q, W_K, W_V):
    return tuple(x @ w.weight + (0 if w.bias is None else w.bias) for w in (W_Q, W_K, W_V))


def qkv_no_bias(x, W_Q, W_K, W_V):
    return tuple(x @ w.weight.T for w in (W_Q, W_K, W_V))


def qkv_bias_none(x, W_Q, W_K, W_V):
    return tuple(x @ w.weight.T + w.bias for w in (W_Q, W_K, W_V))


def qkv_calls_layers(x, W_Q, W_K, W_V):
    return W_Q(x), W_K(x), W_V(x)


def qkv_swapped(x, W_Q, W_K, W_V):
    q, k, v = qkv_right(x, W_Q, W_K, W_V)
    return k, q, v


def qkv_one_tensor(x, W_Q, W_K, W_V):
    return qkv_right(x, W_Q, W_K, W_V)[0]


def qkv_doubled(x, W_Q, W_K, W_V):
    return tuple(2 * t for t in qkv_right(x, W_Q, W_K, W_V))


@pytest.mark.parametrize(
    ("fn", "mistake"),
    [
        (_stub, "not_written"),
        (qkv_right, None),
        (qkv_no_transpose, "no_transpose"),
        (qkv_no_bias, "missing_bias"),
        (qkv_bias_none, "bias_none"),
        (qkv_calls_layers, "called_layer"),
        (qkv_swapped, "order"),
        (qkv_one_tensor, "bad_return"),
        (qkv_doubled, "unknown"),
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


# --- Exercise 2: predict a bias on V --------------------------------------------------------


@pytest.mark.parametrize(
    ("fn", "mistake"),
    [
        (_stub, "not_written"),
        (lambda output, b: output + b, None),
        (lambda output, b: output, "no_change"),
        (lambda output, b: output - b, "sign"),
        (lambda output, b: output + output.shape[0] * b, "times_length"),
        (lambda output, b: output + b / output.shape[0], "over_length"),
        (lambda output, b: b, "wrong_shape"),
        (lambda output, b: 2 * output, "unknown"),
        (lambda output, b: 1.0, "bad_return"),
        (lambda output, b: output + b[:-1], "error"),
    ],
)
def test_check_v_bias_prediction(fn, mistake):
    result = check_v_bias_prediction(fn, verbose=False)
    assert result.mistake == mistake
    assert bool(result) is (mistake is None)


# --- Exercise 3: the shift a bias on K adds to the scores -----------------------------------


@pytest.mark.parametrize(
    ("fn", "mistake"),
    [
        (_stub, "not_written"),
        (lambda q, b: q @ b / math.sqrt(q.size(-1)), None),
        (lambda q, b: (q @ b / math.sqrt(q.size(-1)))[:, None], None),  # a column is fine
        (lambda q, b: torch.zeros(q.shape[0]), "zero"),
        (lambda q, b: q @ b, "no_scale"),
        (lambda q, b: q @ b / q.size(-1), "scale_d_k"),
        (lambda q, b: q * b, "wrong_shape"),
        (lambda q, b: q.sum(-1), "unknown"),
    ],
)
def test_check_k_bias_shift(fn, mistake):
    result = check_k_bias_shift(fn, verbose=False)
    assert result.mistake == mistake
    assert bool(result) is (mistake is None)
