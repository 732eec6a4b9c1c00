"""Notebook 03's experiments say what the notebook claims, and its checkers name each usual slip.

The saturation thresholds were set after computing the curves, with a margin (the measured
values are in the comments); the notebook asserts the exact claims on the same draws.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attn_lib.lessons import nb03_scaling as lesson
from attn_lib.lessons._checking import show_solution
from attn_lib.lessons.nb03_scaling import check_score_scale, check_softmax_jacobian

# --- the experiments -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def curves():
    return lesson.saturation_curves()


def test_unscaled_rows_saturate_as_d_k_grows(curves):
    none = curves["none"]
    assert (none.median_max_weight.diff() >= 0).all() and (none.median_entropy.diff() <= 0).all()
    assert none.at(1024)["median_max_weight"] > 0.99  # measured 1.0000
    assert (none.saturated_fraction.diff() >= 0).all()
    assert none.at(16)["saturated_fraction"] < 0.05  # measured 0.011
    assert none.at(1024)["saturated_fraction"] > 0.5  # measured 0.64


def test_unscaled_gradients_become_heavy_tailed(curves):
    # The median falls and the tail grows; the mean does neither steadily (1.35 at 256, 1.20
    # at 1024), so the notebook claims nothing about its trend.
    none, big = curves["none"], curves["none"].d_k >= 16
    assert (none.grad_norm_median[big].diff() < 0).all()  # 0.72 … 3.1e-4
    tail = none.grad_norm_p99 / none.grad_norm_median
    assert (tail[big].diff() > 0).all() and tail[-1] > 1e4  # 5.2, 7.9, … 5.2e4
    assert none.at(1024)["grad_norm_p99"] > 4 * none.at(16)["grad_norm_p99"]  # 16.2 vs 3.70


def test_sqrt_scaling_keeps_rows_and_gradients_flat(curves):
    sqrt, wide = curves["sqrt"], curves["sqrt"].d_k >= 4
    entropy = sqrt.median_entropy[wide]
    assert entropy.min() > 2.3 and entropy.max() < 2.5  # measured 2.37 … 2.45 (log 16 = 2.77)
    assert sqrt.saturated_fraction.max() == 0
    assert sqrt.grad_norm_median[wide].max() < 1.5 * sqrt.grad_norm_median[wide].min()


def test_linear_scaling_flattens_rows_and_shrinks_gradients(curves):
    linear = curves["linear"]
    assert (linear.median_entropy.diff() >= 0).all()
    assert math.log(linear.L) - linear.at(1024)["median_entropy"] < 0.005  # measured 0.0005
    assert linear.at(1024)["grad_norm_median"] < linear.at(4)["grad_norm_median"] / 10


def test_scalings_agree_at_d_k_1_and_temperature_flattens(curves):
    for name in ("sqrt", "linear"):
        assert curves[name].at(1) == curves["none"].at(1)
    hot = lesson.saturation_curves((64,), ("sqrt",), n_sequences=8, temperature=2.0)["sqrt"]
    cold = lesson.saturation_curves((64,), ("sqrt",), n_sequences=8, temperature=0.5)["sqrt"]
    assert hot.at(64)["median_entropy"] > cold.at(64)["median_entropy"]


@pytest.mark.parametrize(
    ("d_k", "scaling", "temperature"),
    [(1, "none", 1.0), (16, "sqrt", 0.5), (512, "none", 1.0), (64, "linear", 2.0)],
)
def test_saturation_row_matches_autograd(d_k, scaling, temperature):
    row = lesson.saturation_row(d_k, scaling, temperature, seed=5)
    multiplier = 1 / (lesson.score_divisor(d_k, scaling) * temperature)
    q = row.query.clone().requires_grad_(True)
    weights = torch.softmax(row.keys @ q * multiplier, dim=-1)
    (weights @ row.upstream).backward()
    torch.testing.assert_close(row.grad_q, q.grad)
    torch.testing.assert_close(row.weights, weights.detach())
    jacobian = torch.autograd.functional.jacobian(lambda s: torch.softmax(s, -1), row.scores)
    torch.testing.assert_close(row.jacobian, jacobian)
    assert row.grad_norm == pytest.approx(q.grad.norm().item(), rel=1e-12, abs=1e-300)


def test_saturation_row_is_nested_across_d_k():
    small, big = lesson.saturation_row(8, seed=2), lesson.saturation_row(1024, seed=2)
    torch.testing.assert_close(small.query, big.query[:8], rtol=0, atol=0)
    torch.testing.assert_close(small.keys, big.keys[:, :8], rtol=0, atol=0)
    torch.testing.assert_close(small.upstream, big.upstream, rtol=0, atol=0)


def test_experiments_are_seeded_and_leave_the_global_rng_alone():
    state = torch.get_rng_state()
    a = lesson.saturation_curves((4, 64), n_sequences=4, seed=9)
    b = lesson.saturation_curves((4, 64), n_sequences=4, seed=9)
    lesson.saturation_row(4)
    assert torch.equal(torch.get_rng_state(), state)
    for name in lesson.SCALINGS:
        torch.testing.assert_close(a[name].grad_norm_p99, b[name].grad_norm_p99, rtol=0, atol=0)


# --- the checkers ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fn", "mistake"),
    [
        (lambda s2, d: 1 / (s2 * math.sqrt(d)), None),
        (lambda s2, d: torch.tensor(1 / (s2 * math.sqrt(d))), None),  # a 0-d tensor is fine
        (lambda s2, d: np.float64(1 / (s2 * math.sqrt(d))), None),  # and a numpy scalar
        (lambda s2, d: 1 / math.sqrt(d), "sqrt_only"),
        (lambda s2, d: 1 / (math.sqrt(s2) * math.sqrt(d)), "sigma_not_squared"),
        (lambda s2, d: 1 / (s2**2 * math.sqrt(d)), "unknown"),  # σ⁴ for σ²: no named slip
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
    assert bool(result) == (mistake is None) and result.mistake == mistake
    if mistake not in ("bad_return", "error"):
        assert "variance c² d_k σ⁴ =" in " ".join(result.message.split())


def test_score_scale_feedback_reports_the_variance_it_gives():
    good = check_score_scale(lambda s2, d: 1 / (s2 * math.sqrt(d)), verbose=False)
    assert "σ⁴ = 1.000." in " ".join(good.message.split())
    slip = check_score_scale(lambda s2, d: 1 / math.sqrt(d), verbose=False)
    assert "σ⁴ = 0.111." in " ".join(slip.message.split())  # 1/√d_k, σ² = 1/3: Var = σ⁴ = 1/9


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
    assert bool(result) == (mistake is None) and result.mistake == mistake


@pytest.mark.parametrize(
    ("exercise", "check", "solution"),
    [
        ("my_scale", check_score_scale, lesson.solution_scale),
        ("my_softmax_jacobian", check_softmax_jacobian, lesson.solution_softmax_jacobian),
    ],
)
def test_solutions_pass_and_show_after_an_attempt(exercise, check, solution, capsys):
    assert check(solution, verbose=False)
    show_solution(exercise, solution)
    assert f"def {solution.__name__}" in capsys.readouterr().out


def test_checkers_leave_the_global_rng_alone():
    state = torch.get_rng_state()
    check_score_scale(lesson.solution_scale, verbose=False)
    check_softmax_jacobian(lesson.solution_softmax_jacobian, verbose=False)
    assert torch.equal(torch.get_rng_state(), state)
