"""Notebook 03's checkers: each right answer passes, each usual slip is named, in words."""

from __future__ import annotations

import math

import pytest
import torch

from attn_lib.lessons.nb03_scaling import check_entropy, check_score_scale, check_softmax_jacobian


def _stub(*args):
    raise NotImplementedError


@pytest.mark.parametrize("check", [check_score_scale, check_entropy, check_softmax_jacobian])
def test_a_stub_is_not_written_yet(check, capsys):
    result = check(_stub)
    assert not result and result.mistake == "not_written"
    assert "Not written yet" in capsys.readouterr().out  # words, not a traceback


@pytest.mark.parametrize(
    ("fn", "mistake"),
    [
        (lambda s2, d: 1 / (s2 * math.sqrt(d)), None),
        (lambda s2, d: torch.tensor(1 / (s2 * math.sqrt(d))), None),  # a 0-d tensor is fine
        (lambda s2, d: 1 / math.sqrt(d), "sqrt_only"),
        (lambda s2, d: 1 / (math.sqrt(s2) * math.sqrt(d)), "sigma_not_squared"),
        (lambda s2, d: 1 / (s2**2 * math.sqrt(d)), "sigma_squared_twice"),
        (lambda s2, d: 1 / (s2**2 * d), "variance_not_sd"),
        (lambda s2, d: 1 / (s2 * d), "d_k_not_sqrt"),
        (lambda s2, d: s2 * math.sqrt(d), "inverted"),
        (lambda s2, d: 0.3, "unknown"),
        (lambda s2, d: "0.125", "bad_return"),
        (lambda s2, d: 1 / 0, "error"),
    ],
)
def test_check_score_scale(fn, mistake):
    result = check_score_scale(fn, verbose=False)
    assert bool(result) == (mistake is None)
    assert result.mistake == mistake
    assert "Monte Carlo" in " ".join(result.message.split()) or mistake in ("bad_return", "error")


def test_score_scale_feedback_reports_the_variance_it_gives():
    good = check_score_scale(lambda s2, d: 1 / (s2 * math.sqrt(d)), verbose=False)
    assert "variance 1.0" in " ".join(good.message.split())  # ≈ 1 with the right multiplier
    slip = check_score_scale(lambda s2, d: 1 / math.sqrt(d), verbose=False)
    assert "variance 0.1" in " ".join(slip.message.split())  # 1/√d_k, σ² = 1/3: Var = σ⁴ = 1/9


def _xlogy_entropy(w):
    return -torch.special.xlogy(w, w).sum(dim=-1)


@pytest.mark.parametrize(
    ("fn", "mistake"),
    [
        (_xlogy_entropy, None),
        (lambda w: -torch.where(w > 0, w * w.log(), 0.0).sum(-1), None),
        (lambda w: -(w * w.log()).sum(-1), "nan_at_zero"),
        (lambda w: _xlogy_entropy(w) / math.log(2), "bits"),
        (lambda w: -_xlogy_entropy(w), "sign"),
        (lambda w: -torch.special.xlogy(w, w), "not_summed"),
        (lambda w: -torch.special.xlogy(w, w).mean(-1), "mean_not_sum"),
        (lambda w: -torch.special.xlogy(w, w).sum(0), "wrong_dim"),
        (lambda w: -torch.special.xlogy(w, w).sum(), "wrong_dim"),
        (lambda w: _xlogy_entropy(w) + 0.1, "unknown"),
        (lambda w: None, "bad_return"),
        (lambda w: w.nope(), "error"),
    ],
)
def test_check_entropy(fn, mistake):
    result = check_entropy(fn, verbose=False)
    assert bool(result) == (mistake is None)
    assert result.mistake == mistake


@pytest.mark.parametrize(
    ("fn", "mistake"),
    [
        (lambda p: torch.diag(p) - torch.outer(p, p), None),
        (lambda p: torch.diag_embed(p) - p[:, None] * p[None, :], None),
        (lambda p: -torch.outer(p, p), "outer_only"),
        (torch.diag, "diag_only"),
        (lambda p: torch.outer(p, p) - torch.diag(p), "sign"),
        (lambda p: torch.diag(p - p * p), "diagonal_only"),
        (lambda p: torch.eye(len(p)) - torch.outer(p, p), "unknown"),
        (lambda p: p - p * p, "wrong_shape"),
        (lambda p: [[0.0]], "bad_return"),
        (lambda p: p @ torch.ones(2, 2), "error"),
    ],
)
def test_check_softmax_jacobian(fn, mistake):
    result = check_softmax_jacobian(fn, verbose=False)
    assert bool(result) == (mistake is None)
    assert result.mistake == mistake


def test_jacobian_pass_message_mentions_autograd_and_saturation():
    result = check_softmax_jacobian(lambda p: torch.diag(p) - torch.outer(p, p), verbose=False)
    assert "autograd" in result.message and "saturated" in result.message


def test_checkers_do_not_touch_the_global_rng():
    torch.manual_seed(0)
    expected = torch.randn(3)
    torch.manual_seed(0)
    check_score_scale(lambda s2, d: 1 / (s2 * math.sqrt(d)), verbose=False)
    check_entropy(_xlogy_entropy, verbose=False)
    check_softmax_jacobian(lambda p: torch.diag(p) - torch.outer(p, p), verbose=False)
    torch.testing.assert_close(torch.randn(3), expected)
