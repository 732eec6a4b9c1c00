"""Notebook 03's experiments and checkers (torch only).

Used by notebook 03 (Scaling and softmax saturation), sections "3 · Saturation: large scores
make rows one-hot", "4 · Gradients, measured honestly", "5 · What the scale is for",
"6 · Why √d_k and not d_k", "7 · The dashboard: d_k, scaling, temperature" and
"8 · Check yourself".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields

import torch

from ..softmax import entropy, softmax_jacobian
from ._checking import (
    _SEED,
    CheckResult,
    _call,
    _call_failed,
    _name_of,
    _not_yet,
    _number,
    _passed,
    _raised,
    recording,
)

SATURATION_D_KS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
SCALINGS = ("none", "sqrt", "linear")  # scores ÷ 1, ÷ √d_k, ÷ d_k


def score_divisor(d_k: int, scaling: str) -> float:
    """What the scores are divided by: 1 ("none"), √d_k ("sqrt") or d_k ("linear")."""
    return {"none": 1.0, "sqrt": math.sqrt(d_k), "linear": float(d_k)}[scaling]


def _row_statistics(
    raw: torch.Tensor, keys: torch.Tensor, upstream: torch.Tensor, multiplier: float
) -> dict[str, torch.Tensor]:
    """Softmax, Jacobian and ∂loss/∂q of rows of raw scores q·k_j (float64).

    raw (..., L); keys (L, d_k) for one row or (n, L, d_k) for rows (n, L_q, L);
    upstream (..., L) = g = ∂loss/∂weights, broadcast over the rows.
    """
    scores = raw * multiplier  # (..., L)
    weights = torch.softmax(scores, dim=-1)  # (..., L)
    jac = softmax_jacobian(weights)  # (..., L, L)
    # ∂loss/∂scores = J g = p ⊙ (g − p·g): the same as jac @ g, without the matmul.
    d_scores = weights * (upstream - (weights * upstream).sum(dim=-1, keepdim=True))
    grad_q = multiplier * (d_scores @ keys)  # (..., d_k): multiplier · Kᵀ J g
    return {
        "scores": scores, "weights": weights, "jacobian": jac,
        "max_weight": weights.amax(dim=-1), "entropy": entropy(weights),
        "jacobian_norm": torch.linalg.matrix_norm(jac),  # Frobenius
        "grad_q": grad_q, "grad_norm": grad_q.norm(dim=-1),
    }  # fmt: skip


@dataclass(frozen=True)
class SaturationCurve:
    """Saturation statistics against d_k for one scaling; each statistic is (n_d_k,) float64.

    Attributes:
        scaling, temperature: the setting. L: keys per row. n_rows: rows per d_k.
        threshold: a row is saturated when its ‖J‖_F is below it.
        d_k: (n_d_k,) int64.
        median_max_weight, median_entropy: medians over the rows (entropy in nats).
        saturated_fraction: the fraction of saturated rows.
        grad_norm_median, grad_norm_mean, grad_norm_p99: of ‖∂loss/∂q‖ over the rows.
    """

    scaling: str
    temperature: float
    L: int
    n_rows: int
    threshold: float
    d_k: torch.Tensor
    median_max_weight: torch.Tensor
    median_entropy: torch.Tensor
    saturated_fraction: torch.Tensor
    grad_norm_median: torch.Tensor
    grad_norm_mean: torch.Tensor
    grad_norm_p99: torch.Tensor

    def at(self, d_k: int) -> dict[str, float]:
        """Every statistic at one of the computed d_k, as floats."""
        i = self.d_k.tolist().index(d_k)
        return {f.name: float(getattr(self, f.name)[i]) for f in fields(self)[6:]}


def saturation_curves(
    d_ks: Sequence[int] = SATURATION_D_KS, scalings: Sequence[str] = SCALINGS, *, L: int = 16,
    n_sequences: int = 64, temperature: float = 1.0, threshold: float = 1e-3, seed: int = 0,
) -> dict[str, SaturationCurve]:  # fmt: skip
    """How saturated softmax rows are, and how much gradient reaches q, against d_k.

    For each d_k: ``n_sequences`` sequences of L tokens with N(0, 1) queries and keys, all
    n_sequences·L rows of softmax(Q Kᵀ / (divisor · temperature)), the same draws for every
    scaling. The loss is a fixed readout of the outputs, so g = ∂loss/∂weights has N(0, 1)
    entries (one g per sequence), and ∂loss/∂q = Kᵀ J g / (divisor · temperature).

    Returns:
        {scaling: SaturationCurve}, in the order of ``scalings``.

    Source: Vaswani et al. 2017, sec. 3.2.1 ("pushes the softmax function into regions
        where it has extremely small gradients"); article section 2.2.
    """
    g = torch.Generator().manual_seed(seed)
    levels = torch.tensor([0.5, 0.99], dtype=torch.float64)
    stats: dict[str, dict[str, list[float]]] = {s: {} for s in scalings}
    for d_k in d_ks:
        Q = torch.randn(n_sequences, L, d_k, generator=g)  # (n, L, d_k)
        K = torch.randn(n_sequences, L, d_k, generator=g)  # (n, L, d_k)
        upstream = torch.randn(n_sequences, 1, L, generator=g).double()  # (n, 1, L)
        raw = (Q @ K.transpose(-2, -1)).double()  # (n, L_q, L_k)
        for s in scalings:
            multiplier = 1 / (score_divisor(d_k, s) * temperature)
            r = _row_statistics(raw, K.double(), upstream, multiplier)
            grad = r["grad_norm"].flatten()  # (n·L,)
            p50, p99 = torch.quantile(grad, levels).tolist()
            for key, value in (
                ("median_max_weight", r["max_weight"].median().item()),
                ("median_entropy", r["entropy"].median().item()),
                ("saturated_fraction", (r["jacobian_norm"] < threshold).double().mean().item()),
                ("grad_norm_median", p50), ("grad_norm_mean", grad.mean().item()),
                ("grad_norm_p99", p99),
            ):  # fmt: skip
                stats[s].setdefault(key, []).append(value)
    return {
        s: SaturationCurve(
            s, temperature, L, n_sequences * L, threshold, torch.tensor(d_ks),
            **{key: torch.tensor(values, dtype=torch.float64) for key, values in stats[s].items()},
        )
        for s in scalings
    }


@dataclass(frozen=True)
class SaturationRow:
    """One query against L keys at a given d_k, scaling and temperature (float64).

    Attributes:
        d_k, scaling, temperature: the setting.
        query: (d_k,). keys: (L, d_k). upstream: (L,), g = ∂loss/∂weights.
        scores: (L,), q·k_j ÷ (divisor · temperature). weights: (L,). jacobian: (L, L).
        grad_q: (d_k,), ∂loss/∂q.
        max_weight, entropy (nats), jacobian_norm (Frobenius), grad_norm: floats.
    """

    d_k: int
    scaling: str
    temperature: float
    query: torch.Tensor
    keys: torch.Tensor
    upstream: torch.Tensor
    scores: torch.Tensor
    weights: torch.Tensor
    jacobian: torch.Tensor
    grad_q: torch.Tensor
    max_weight: float
    entropy: float
    jacobian_norm: float
    grad_norm: float


def saturation_row(
    d_k: int, scaling: str = "sqrt", temperature: float = 1.0, *, L: int = 16, seed: int = 0
) -> SaturationRow:
    """One query against L keys: scores, weights, Jacobian and ∂loss/∂q (saturation_curves' row)

    Rows are nested across widths: the query and keys at d_k are the first d_k coordinates
    of those at 1024, so moving the dashboard's d_k slider adds dimensions to the same vectors;
    g does not depend on d_k.

    Source: Vaswani et al. 2017, sec. 3.2.1; article section 2.2.
    """
    g = torch.Generator().manual_seed(seed)
    upstream = torch.randn(L, generator=g, dtype=torch.float64)  # (L,), drawn first: fixed
    # torch's randn is not prefix-stable across sizes, so always draw at least 1024 rows.
    draws = torch.randn(max(d_k, 1024), L + 1, generator=g, dtype=torch.float64)[:d_k]
    query, keys = draws[:, 0], draws[:, 1:].T.contiguous()  # (d_k,), (L, d_k)
    multiplier = 1 / (score_divisor(d_k, scaling) * temperature)
    r = _row_statistics(keys @ query, keys, upstream, multiplier)
    floats = {name: r.pop(name).item() for name in ("max_weight", "entropy", "jacobian_norm",
                                                     "grad_norm")}  # fmt: skip
    return SaturationRow(d_k, scaling, temperature, query, keys, upstream, **r, **floats)


# ------------------------------------------------------------------------- check yourself

# (σ², d_k) pairs; σ² ≠ 1 in most, so that forgetting σ² (or squaring it twice) shows.
_SCALE_CASES = ((1.0, 64), (1 / 3, 64), (2.0, 16), (0.5, 100), (4.0, 9))
_SCALE_MISTAKES = (
    ("sqrt_only", ("Your multiplier is 1/√d_k whatever σ² is. That is right only for "
     "unit-variance entries: each product q_i k_i has variance σ² · σ² = σ⁴, so Var(q·k) = "
     "d_k σ⁴ and its standard deviation is σ² √d_k."), lambda s2, d: 1 / math.sqrt(d)),
    ("sigma_not_squared", ("Your multiplier is 1/(σ √d_k). Each product q_i k_i has variance "
     "E[q_i²] E[k_i²] = σ⁴, not σ²: the standard deviation of q·k is σ² √d_k."),
     lambda s2, d: 1 / (math.sqrt(s2) * math.sqrt(d))),
    ("sigma_squared_twice", ("Your multiplier is 1/(σ⁴ √d_k): σ⁴ is the variance of one "
     "product q_i k_i, but the standard deviation of q·k is σ² √d_k."),
     lambda s2, d: 1 / (s2**2 * math.sqrt(d))),
    ("variance_not_sd", ("Your multiplier is 1/(d_k σ⁴), one over the variance. Multiplying by "
     "c multiplies the variance by c², so divide by the standard deviation, σ² √d_k."),
     lambda s2, d: 1 / (s2**2 * d)),
    ("d_k_not_sqrt", ("Your multiplier is 1/(σ² d_k). Multiplying by c multiplies the variance "
     "by c²: to undo a variance of d_k σ⁴ you need c = 1/(σ² √d_k), with √d_k."),
     lambda s2, d: 1 / (s2 * d)),
    ("inverted", ("Your multiplier is σ² √d_k, the standard deviation itself; the scores must "
     "be divided by it: c = 1/(σ² √d_k)."), lambda s2, d: s2 * math.sqrt(d)),
)  # fmt: skip


def _scaled_variance(multiplier: float, sigma2: float, d_k: int, n: int = 4000) -> float:
    """Monte Carlo Var(multiplier · q·k) for q, k with N(0, σ²) entries (seeded)."""
    g = torch.Generator().manual_seed(_SEED)
    q = torch.randn(n, d_k, generator=g, dtype=torch.float64) * math.sqrt(sigma2)
    k = torch.randn(n, d_k, generator=g, dtype=torch.float64) * math.sqrt(sigma2)
    return (multiplier * (q * k).sum(dim=-1)).var().item()


def _check_score_scale(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check ``fn(entry_variance, d_k)``: the multiplier c that gives c · q·k variance 1.

    For i.i.d. zero-mean entries of variance σ², Var(q·k) = d_k σ⁴, so c = 1 / (σ² √d_k).
    Returns a CheckResult whose ``mistake`` is None or one of "not_written", "error",
    "bad_return", the codes of ``_SCALE_MISTAKES``, "unknown".

    Source: Vaswani et al. 2017, sec. 3.2.1, footnote 4; article section 2.2.
    """
    name = _name_of(fn)
    got = []
    for sigma2, d_k in _SCALE_CASES:
        value, err = _call(fn, sigma2, d_k)
        if err is not None:
            message = (f"For entry_variance={sigma2:.4g}, d_k={d_k} your function raised "
                       f"{_raised(err)}. Fix that line and run the check again.")  # fmt: skip
            return _call_failed(name, err, message, verbose)
        number, ok = _number(value)
        if not ok:
            return _not_yet("bad_return", f"{name} returned {type(value).__name__}; return one "
                            "number, the multiplier c (a float, or a tensor holding one "
                            "number).", verbose)  # fmt: skip
        got.append(float(number))

    def all_match(formula: Callable[[float, int], float]) -> bool:
        return all(math.isclose(c, formula(s2, d), rel_tol=1e-6)
                   for c, (s2, d) in zip(got, _SCALE_CASES, strict=True))  # fmt: skip

    monte_carlo = (f"With your multiplier for σ² = 1/3, d_k = 64 (c = {got[1]:.4g}), the scaled "
                   f"scores have variance {_scaled_variance(got[1], 1 / 3, 64):.3f} (Monte "
                   f"Carlo, 4000 pairs)")  # fmt: skip
    if all_match(lambda s2, d: 1 / (s2 * math.sqrt(d))):
        return _passed(f"c = 1 / (σ² √d_k) on all {len(_SCALE_CASES)} cases. {monte_carlo}, as "
                       "it should be (1 up to sampling noise of about 0.02).", verbose)
    for code, why, formula in _SCALE_MISTAKES:
        if all_match(formula):
            return _not_yet(code, f"{why} {monte_carlo}.", verbose)
    return _not_yet("unknown", f"For σ² = 1, d_k = 64 you return {got[0]:.4g} (expected 0.125), "
                    f"and your answers match none of the usual slips. {monte_carlo}; it should "
                    "be about 1. Start from Var(q·k) = d_k σ⁴ and Var(c·X) = c² Var(X).",
                    verbose)  # fmt: skip


def _jacobian_cases() -> list[tuple[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(_SEED)
    return [
        ("a random row of 3 weights", torch.softmax(torch.randn(3, generator=g), dim=-1)),
        ("a random row of 5 weights", torch.softmax(2 * torch.randn(5, generator=g), dim=-1)),
        ("a uniform row of 4 weights", torch.full((4,), 0.25)),
        ("a one-hot row of 4 weights", torch.tensor([0.0, 1.0, 0.0, 0.0])),
    ]


_JACOBIAN_MISTAKES = (
    ("outer_only", ("You return −p pᵀ: the diagonal term diag(p) is missing. ∂p_i/∂s_i = "
     "p_i − p_i², so the diagonal gets p_i on top of −p_i²."), lambda p: -torch.outer(p, p)),
    ("diag_only", ("You return diag(p) only: the −p pᵀ part is missing. Raising one score "
     "takes weight away from every other key, so the off-diagonal entries are −p_i p_j."),
     torch.diag),
    ("sign", ("Your Jacobian has the wrong sign: p pᵀ − diag(p). Raising s_i raises p_i, so "
     "the diagonal entries p_i(1 − p_i) are ≥ 0."), lambda p: -softmax_jacobian(p)),
    ("diagonal_only", ("You return only the diagonal, diag(p − p²). Raising s_j also lowers "
     "every other weight: the off-diagonal entries are −p_i p_j."),
     lambda p: torch.diag(p - p * p)),
)  # fmt: skip


def _check_softmax_jacobian(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check ``fn(p)``: for one row of weights p (L,), the (L, L) Jacobian diag(p) − p pᵀ.

    Returns a CheckResult whose ``mistake`` is None or one of "not_written", "error",
    "bad_return", "wrong_shape", the codes of ``_JACOBIAN_MISTAKES``, "unknown".

    Source: Bishop, Pattern Recognition and Machine Learning, eq. (4.106).
    """
    name = _name_of(fn)
    cases = _jacobian_cases()
    got = []
    for desc, p in cases:
        out, err = _call(fn, p.clone())
        if err is not None:
            message = f"On {desc} (shape {tuple(p.shape)}) your function raised {_raised(err)}."
            return _call_failed(name, err, message, verbose)
        if not isinstance(out, torch.Tensor):
            return _not_yet("bad_return", f"{name} returned {type(out).__name__}; return an "
                            "(L, L) tensor.", verbose)  # fmt: skip
        if out.shape != (len(p), len(p)):
            return _not_yet("wrong_shape", f"On {desc} your result has shape {tuple(out.shape)}; "
                            f"the Jacobian of softmax over L = {len(p)} scores is (L, L): one row "
                            "per weight p_i, one column per score s_j. `torch.outer(p, p)` is the "
                            "outer product p pᵀ.", verbose)  # fmt: skip
        got.append(out.detach().to(torch.float32))

    def all_match(make: Callable[[torch.Tensor], torch.Tensor]) -> bool:
        return all(torch.allclose(out, make(p), rtol=1e-4, atol=1e-6)
                   for out, (_, p) in zip(got, cases, strict=True))  # fmt: skip

    if all_match(softmax_jacobian):
        return _passed(f"{name} gives diag(p) − p pᵀ on all {len(cases)} cases. For the one-hot "
                       "row it is the zero matrix: a saturated row passes no gradient back to its "
                       "scores.", verbose)  # fmt: skip
    for code, why, make in _JACOBIAN_MISTAKES:
        if all_match(make):
            return _not_yet(code, why, verbose)
    return _not_yet("unknown", f"For p = {[round(v, 4) for v in cases[0][1].tolist()]} your "
                    "matrix differs from diag(p) − p pᵀ, and matches none of the usual slips. "
                    "Entry (i, j) is p_i (δ_ij − p_j).", verbose)  # fmt: skip


check_score_scale = recording("my_scale", _check_score_scale)
check_softmax_jacobian = recording("my_softmax_jacobian", _check_softmax_jacobian)


def solution_scale(entry_variance: float, d_k: int) -> float:
    """Exercise 1: Var(q·k) = d_k σ⁴, so its standard deviation is σ² √d_k."""
    return 1 / (entry_variance * math.sqrt(d_k))


def solution_softmax_jacobian(p: torch.Tensor) -> torch.Tensor:
    """Exercise 2: entry (i, j) is ∂p_i/∂s_j = p_i (δ_ij − p_j)."""
    return torch.diag(p) - torch.outer(p, p)  # (L, L)
