"""Notebook 03's experiments and checkers (torch only), used by its sections "3 · Saturation:
large scores make rows one-hot", "4 · Gradients, measured honestly", "5 · What the scale is
for", "6 · Why √d_k and not d_k", "7 · The dashboard: d_k, scaling, temperature" and
"8 · Check yourself"."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from functools import lru_cache

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


@dataclass(frozen=True)
class SaturationCurve:
    """Saturation statistics against d_k for one scaling at a temperature: L keys per row,
    n_rows rows per d_k, a row saturated when its ‖J‖_F < ``threshold``. d_k and each statistic
    (medians over the rows, entropy in nats; the saturated fraction; ‖∂loss/∂q‖'s median, mean
    and 99th percentile) are (n_d_k,) tensors."""

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
        return {f.name: float(getattr(self, f.name)[i]) for f in fields(self)[5:]}


@lru_cache(maxsize=4)
def _draws(d_ks: tuple[int, ...], L: int, n: int, seed: int) -> list[tuple[torch.Tensor, ...]]:
    """Per d_k, float64: raw scores Q Kᵀ, the keys' Gram matrices K Kᵀ (both (n, L, L)) and
    g = ∂loss/∂weights (n, 1, L); cached, every temperature reuses them."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for d_k in d_ks:
        Q, K = (torch.randn(n, L, d_k, generator=g) for _ in range(2))  # (n, L, d_k) each
        upstream = torch.randn(n, 1, L, generator=g).double()  # (n, 1, L)
        K64 = K.double()
        out.append(((Q @ K.transpose(-2, -1)).double(), K64 @ K64.transpose(-2, -1), upstream))
    return out


def _statistics(raw: torch.Tensor, gram: torch.Tensor, upstream: torch.Tensor,
                multiplier: float, threshold: float) -> list[float]:  # fmt: skip
    """The curve's six statistics over the rows of softmax(multiplier · raw), in field order."""
    scores = raw * multiplier  # (n, L_q, L_k)
    top = scores.amax(dim=-1, keepdim=True)  # (n, L_q, 1)
    e = (scores - top).exp()
    z = e.sum(dim=-1, keepdim=True)  # (n, L_q, 1)
    weights = e / z  # softmax; its largest entry is 1/z
    # −Σ p log p = log z + top − Σ p s: one log per row instead of one per weight.
    row_entropy = (z.log() + top).squeeze(-1) - (weights * scores).sum(dim=-1)
    # ∂loss/∂scores = J g = p ⊙ (g − p·g), and ‖∂loss/∂q‖² = multiplier² (Jg)ᵀ K Kᵀ (Jg).
    d_scores = weights * (upstream - (weights * upstream).sum(dim=-1, keepdim=True))
    grad = multiplier * ((d_scores @ gram) * d_scores).sum(dim=-1).clamp_min(0).sqrt().flatten()
    # ‖diag(p) − p pᵀ‖_F² = Σ p² − 2 Σ p³ + (Σ p²)², without building the (L, L) Jacobians.
    p2 = weights.square().sum(dim=-1)
    jacobian_norm = (p2 - 2 * weights.pow(3).sum(dim=-1) + p2.square()).clamp_min(0).sqrt()
    p50, p99 = torch.quantile(grad, torch.tensor([0.5, 0.99], dtype=torch.float64)).tolist()
    saturated = (jacobian_norm < threshold).double().mean().item()
    return [(1 / z).median().item(), row_entropy.median().item(), saturated, p50,
            grad.mean().item(), p99]  # fmt: skip


def saturation_curves(
    d_ks: Sequence[int] = SATURATION_D_KS, scalings: Sequence[str] = SCALINGS, *, L: int = 16,
    n_sequences: int = 64, temperature: float = 1.0, threshold: float = 1e-3, seed: int = 0,
) -> dict[str, SaturationCurve]:  # fmt: skip
    """{scaling: SaturationCurve}: how saturated softmax rows are, and how much gradient
    reaches q, against d_k. Per d_k, ``n_sequences`` sequences of L tokens, N(0, 1) queries and
    keys (the same draws for every scaling and temperature), all their rows of
    softmax(Q Kᵀ / (divisor · temperature)); the loss is a fixed readout of the outputs, so
    g = ∂loss/∂weights has N(0, 1) entries and ∂loss/∂q = Kᵀ J g / (divisor · temperature).

    Source: Vaswani et al. 2017, sec. 3.2.1 ("pushes the softmax function into regions
        where it has extremely small gradients"); article section 2.2.
    """
    draws = _draws(tuple(d_ks), L, n_sequences, seed)
    names = [f.name for f in fields(SaturationCurve)[5:]]
    curves = {}
    for s in scalings:
        stats = [_statistics(*d, 1 / (score_divisor(d_k, s) * temperature), threshold)
                 for d_k, d in zip(d_ks, draws, strict=True)]  # fmt: skip
        columns = torch.tensor(stats, dtype=torch.float64).T  # (6, n_d_k)
        curves[s] = SaturationCurve(temperature, L, n_sequences * L, threshold, torch.tensor(d_ks),
                                    **dict(zip(names, columns, strict=True)))  # fmt: skip
    return curves


@dataclass(frozen=True)
class SaturationRow:
    """One query (d_k,) against keys (L, d_k), float64: upstream g = ∂loss/∂weights (L,),
    scores q·k_j ÷ (divisor · temperature) (L,), weights (L,), Jacobian (L, L), grad_q =
    ∂loss/∂q (d_k,), and as floats the largest weight, entropy (nats), ‖J‖_F and ‖grad_q‖."""

    d_k: int
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
    """One query against L keys. Nested across widths: the query and keys at d_k are the first
    d_k coordinates of those at 1024 (the dashboard's d_k slider adds dimensions to the same
    vectors), and g does not depend on d_k.

    Source: Vaswani et al. 2017, sec. 3.2.1; article section 2.2.
    """
    g = torch.Generator().manual_seed(seed)
    upstream = torch.randn(L, generator=g, dtype=torch.float64)  # (L,), drawn first: fixed
    # torch's randn is not prefix-stable across sizes, so always draw at least 1024 rows.
    draws = torch.randn(max(d_k, 1024), L + 1, generator=g, dtype=torch.float64)[:d_k]
    query, keys = draws[:, 0], draws[:, 1:].T.contiguous()  # (d_k,), (L, d_k)
    multiplier = 1 / (score_divisor(d_k, scaling) * temperature)
    scores = keys @ query * multiplier  # (L,)
    weights = torch.softmax(scores, dim=-1)  # (L,)
    jacobian = softmax_jacobian(weights)  # (L, L)
    grad_q = multiplier * (keys.T @ (jacobian @ upstream))  # (d_k,): multiplier · Kᵀ J g
    return SaturationRow(d_k, query, keys, upstream, scores, weights, jacobian, grad_q,
                         weights.max().item(), entropy(weights).item(),
                         torch.linalg.matrix_norm(jacobian).item(), grad_q.norm().item())  # fmt: skip


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
    ("variance_not_sd", ("Your multiplier is 1/(d_k σ⁴), one over the variance. Multiplying by "
     "c multiplies the variance by c², so divide by the standard deviation, σ² √d_k."),
     lambda s2, d: 1 / (s2**2 * d)),
    ("d_k_not_sqrt", ("Your multiplier is 1/(σ² d_k). Multiplying by c multiplies the variance "
     "by c²: to undo a variance of d_k σ⁴ you need c = 1/(σ² √d_k), with √d_k."),
     lambda s2, d: 1 / (s2 * d)),
    ("inverted", ("Your multiplier is σ² √d_k, the standard deviation itself; the scores must "
     "be divided by it: c = 1/(σ² √d_k)."), lambda s2, d: s2 * math.sqrt(d)),
)  # fmt: skip


def _verdict(got: list, args: Sequence[tuple], right: Callable, mistakes: Sequence[tuple],
             close: Callable, verbose: bool, *, passed: str, unknown: str, note: str = "",
             ) -> CheckResult:  # fmt: skip
    """Passed if ``right`` gives ``got`` on every case's arguments, else the first (code, why,
    formula) of ``mistakes`` that does (why + note), else "unknown"."""
    for code, why, formula in ((None, passed, right), *mistakes):
        if all(close(x, formula(*a)) for x, a in zip(got, args, strict=True)):
            return _passed(why, verbose) if code is None else _not_yet(code, why + note, verbose)
    return _not_yet("unknown", unknown, verbose)


def _check_score_scale(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check ``fn(entry_variance, d_k)``: the multiplier c that gives c · q·k variance 1, that is
    1 / (σ² √d_k), since Var(q·k) = d_k σ⁴ for i.i.d. zero-mean entries of variance σ².
    ``mistake``: None, "not_written", "error", "bad_return", a code of _SCALE_MISTAKES, "unknown".

    Source: Vaswani et al. 2017, sec. 3.2.1, footnote 4; article section 2.2.
    """
    name, got = _name_of(fn), []
    for sigma2, d_k in _SCALE_CASES:
        value, err = _call(fn, sigma2, d_k)
        if err is not None:
            return _call_failed(name, err, f"For entry_variance={sigma2:.4g}, d_k={d_k} your "
                                f"function raised {_raised(err)}. Fix that line and run the "
                                "check again.", verbose)  # fmt: skip
        number, ok = _number(value)
        if not ok:
            return _not_yet("bad_return", f"{name} returned {type(value).__name__}; return one "
                            "number, the multiplier c (a float, or a tensor holding one "
                            "number).", verbose)  # fmt: skip
        got.append(float(number))
    variance = (f"With your multiplier for σ² = 1/3, d_k = 64 (c = {got[1]:.4g}), the scaled "
                f"scores have variance c² d_k σ⁴ = {got[1] ** 2 * 64 / 9:.3f}")  # fmt: skip
    return _verdict(got, _SCALE_CASES, solution_scale, _SCALE_MISTAKES,
                    lambda a, b: math.isclose(a, b, rel_tol=1e-6), verbose, note=f" {variance}.",
                    passed=f"c = 1 / (σ² √d_k) on all {len(_SCALE_CASES)} cases. {variance}.",
                    unknown=(f"For σ² = 1, d_k = 64 you return {got[0]:.4g} (expected 0.125), and "
                             f"your answers match none of the usual slips. {variance}; it should "
                             "be about 1. Start from Var(q·k) = d_k σ⁴ and Var(c·X) = c² "
                             "Var(X)."))  # fmt: skip


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
    ``mistake``: None, "not_written", "error", "bad_return", "wrong_shape", a code of
    _JACOBIAN_MISTAKES, "unknown".

    Source: Bishop, Pattern Recognition and Machine Learning, eq. (4.106).
    """
    name, cases, got = _name_of(fn), _jacobian_cases(), []
    for desc, p in cases:
        out, err = _call(fn, p.clone())
        if err is not None:
            return _call_failed(name, err, f"On {desc} (shape {tuple(p.shape)}) your function "
                                f"raised {_raised(err)}.", verbose)  # fmt: skip
        if not isinstance(out, torch.Tensor):
            return _not_yet("bad_return", f"{name} returned {type(out).__name__}; return an "
                            "(L, L) tensor.", verbose)  # fmt: skip
        if out.shape != (len(p), len(p)):
            return _not_yet("wrong_shape", f"On {desc} your result has shape {tuple(out.shape)}; "
                            f"the Jacobian of softmax over L = {len(p)} scores is (L, L): one row "
                            "per weight p_i, one column per score s_j. `torch.outer(p, p)` is the "
                            "outer product p pᵀ.", verbose)  # fmt: skip
        got.append(out.detach().to(torch.float32))
    return _verdict(got, [(p,) for _, p in cases], softmax_jacobian, _JACOBIAN_MISTAKES,
                    lambda a, b: torch.allclose(a, b, rtol=1e-4, atol=1e-6), verbose,
                    passed=(f"{name} gives diag(p) − p pᵀ on all {len(cases)} cases. For the "
                            "one-hot row it is the zero matrix: a saturated row passes no gradient "
                            "back to its scores."),
                    unknown=(f"For p = {[round(v, 4) for v in cases[0][1].tolist()]} your matrix "
                             "differs from diag(p) − p pᵀ, and matches none of the usual slips. "
                             "Entry (i, j) is p_i (δ_ij − p_j)."))  # fmt: skip


check_score_scale = recording("my_scale", _check_score_scale)
check_softmax_jacobian = recording("my_softmax_jacobian", _check_softmax_jacobian)


def solution_scale(entry_variance: float, d_k: int) -> float:
    """Exercise 1: Var(q·k) = d_k σ⁴, so its standard deviation is σ² √d_k."""
    return 1 / (entry_variance * math.sqrt(d_k))


def solution_softmax_jacobian(p: torch.Tensor) -> torch.Tensor:
    """Exercise 2: entry (i, j) is ∂p_i/∂s_j = p_i (δ_ij − p_j)."""
    return torch.diag(p) - torch.outer(p, p)  # (L, L)
