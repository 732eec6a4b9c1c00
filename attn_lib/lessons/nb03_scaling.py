"""Notebook 03's data, experiments and checkers (torch only).

Used by notebook 03 (Scaling and softmax saturation), sections "2 · How large is q·k?", "3 ·
Saturation: large scores make rows one-hot", "4 · Vanishing gradients, measured honestly", "5 ·
What the scale is for", "7 · The dashboard: d_k, scaling, temperature", "8 · Check yourself".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from ..softmax import entropy, softmax_jacobian
from ..softmax import entropy as _entropy
from ..softmax import softmax_jacobian as _softmax_jacobian
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
)
from ._experiments import _choice, _dim, _dims, _generator, _int, _positive, default_linear_weight

DEFAULT_D_KS = (4, 8, 16, 32, 64, 128, 256, 512, 1024)
SATURATION_D_KS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
SCALINGS = ("none", "sqrt", "linear")


def _variance_rel_sd(d_k: int, n_samples: int) -> float:
    """Relative SD of the sample variance of q·k for Gaussian entries (see score_variance_table)."""
    return math.sqrt((2.0 + 6.0 / d_k) / n_samples)


@dataclass(frozen=True)
class ScoreVarianceRow:
    """One row of :func:`score_variance_table`.

    Attributes:
        d_k: width of q and k.
        n_samples: number of (q, k) pairs drawn.
        variance: the sample variance of q·k.
        ratio: variance / d_k (≈ 1 for unit-variance entries).
        scaled_variance: the sample variance of q·k / √d_k (≈ 1).
        expected: d_k · σ⁴, the exact Var(q·k) for entries of variance σ².
        rel_sd: √((2 + 6/d_k) / n_samples), the expected relative SD of ``variance``.
    """

    d_k: int
    n_samples: int
    variance: float
    ratio: float
    scaled_variance: float
    expected: float
    rel_sd: float

    @property
    def z(self) -> float:
        """(variance − expected) in units of the expected SD of the estimate."""
        return (self.variance - self.expected) / (self.expected * self.rel_sd)


def score_variance_table(
    d_ks: Sequence[int] = DEFAULT_D_KS,
    n_samples: int = 5000,
    *,
    entry_variance: float = 1.0,
    seed: int = 0,
) -> list[ScoreVarianceRow]:
    """Monte Carlo estimate of Var(q·k) for q, k with i.i.d. N(0, σ²) entries, for each d_k.

    The derivation in three lines: q·k = Σᵢ qᵢkᵢ is a sum of d_k independent terms;
    each has mean E[qᵢ]E[kᵢ] = 0 and variance E[qᵢ²]E[kᵢ²] = σ⁴; so Var(q·k) = d_k σ⁴,
    and dividing by √d_k brings it back to σ⁴ (= 1 for unit-variance entries).

    How precise is the estimate? For Gaussian entries with σ = 1, X = q·k has
    E[X²] = d_k and E[X⁴] = 3d_k² + 6d_k, so Var(X²) = 2d_k² + 6d_k and the sample
    variance over n pairs has relative SD √((2 + 6/d_k)/n) (exactly for the mean of
    X², to first order in 1/n once the sample mean is subtracted; the same for any σ).
    :func:`variance_estimate_spread` checks this by repetition.

    Args:
        d_ks: the widths to try, each ≥ 1.
        n_samples: pairs (q, k) per width, ≥ 2.
        entry_variance: σ², the variance of every entry of q and k (> 0).
        seed: seeds one generator, used for the widths in the order given.

    Returns:
        One :class:`ScoreVarianceRow` per d_k, floats computed in float64 from
        float32 draws.

    Raises:
        ShapeError: d_ks empty or a width < 1.
        ValueError: n_samples < 2, entry_variance not finite and > 0, seed < 0.
        TypeError: a non-integer width, count or seed.

    Source: Vaswani et al. 2017, sec. 3.2.1, footnote 4; article section 2.2.
    """
    dims = _dims("d_ks", d_ks)
    n = _int("n_samples", n_samples, 2)
    sigma2 = _positive("entry_variance", entry_variance)
    g = _generator(seed)
    rows = []
    for d_k in dims:
        q = torch.randn(n, d_k, generator=g) * math.sqrt(sigma2)  # (n, d_k)
        k = torch.randn(n, d_k, generator=g) * math.sqrt(sigma2)  # (n, d_k)
        scores = (q * k).sum(dim=-1).double()  # (n,)
        var = scores.var().item()
        rows.append(
            ScoreVarianceRow(
                d_k=d_k,
                n_samples=n,
                variance=var,
                ratio=var / d_k,
                scaled_variance=(scores / math.sqrt(d_k)).var().item(),
                expected=d_k * sigma2**2,
                rel_sd=_variance_rel_sd(d_k, n),
            )
        )
    return rows


def variance_estimate_spread(
    d_k: int, n_samples: int = 500, n_repeats: int = 200, *, seed: int = 0
) -> tuple[float, float]:
    """Repeat the Var(q·k) estimate many times: its measured relative SD against √((2 + 6/d_k)/n).

    Args:
        d_k: width of q and k (≥ 1).
        n_samples: pairs per estimate (≥ 2).
        n_repeats: independent estimates (≥ 2).
        seed: the generator's seed.

    Returns:
        (measured, predicted): the SD of the n_repeats estimates divided by d_k, and
        √((2 + 6/d_k)/n_samples). They agree to within a few percent for a few hundred
        repeats.

    Raises:
        ShapeError: d_k < 1. ValueError: n_samples or n_repeats < 2.

    Source: the moment calculation in :func:`score_variance_table`.
    """
    d_k = _dim("d_k", d_k)
    n = _int("n_samples", n_samples, 2)
    r = _int("n_repeats", n_repeats, 2)
    g = _generator(seed)
    q = torch.randn(r, n, d_k, generator=g)  # (repeats, n, d_k)
    k = torch.randn(r, n, d_k, generator=g)
    estimates = (q * k).sum(dim=-1).double().var(dim=-1)  # (repeats,)
    return (estimates / d_k).std().item(), _variance_rel_sd(d_k, n)


@dataclass(frozen=True)
class DefaultInitRow:
    """One row of :func:`default_init_score_variance`.

    Attributes:
        d_k, d_model: widths of q (and k) and of the input x.
        n_samples: (x, x') pairs in total, spread over ``n_inits`` initialisations.
        n_inits: independent draws of W_Q and W_K.
        query_entry_variance: the sample variance of the entries of q (≈ 1/3).
        variance: the sample variance of q·k (≈ d_k/9).
        ratio: variance / d_k (≈ 1/9).
        rel_sd: predicted relative SD of ``variance``,
            √((2 + 18/d_k)/n_samples + 4/(d_k² n_inits)).
    """

    d_k: int
    d_model: int
    n_samples: int
    n_inits: int
    query_entry_variance: float
    variance: float
    ratio: float
    rel_sd: float


def default_init_score_variance(
    d_ks: Sequence[int] = (4, 16, 64, 256, 1024),
    n_samples: int = 2048,
    *,
    n_inits: int = 8,
    seed: int = 0,
) -> list[DefaultInitRow]:
    """Var(q·k) when q = x W_Qᵀ and k = x' W_Kᵀ come from nn.Linear's default init, d_model = d_k.

    With x ~ N(0, I) of width d_model and W entries of variance 1/(3 d_model) (see
    :func:`default_linear_weight`), each entry of q has variance d_model/(3 d_model) =
    1/3, and Var(q·k) = d_k · (1/3)² = d_k/9 — not d_k, but still proportional to d_k,
    which is what the scaling is about. q and k come from two different tokens x, x'.

    Precision: the estimate mixes two sources of noise. Given the weights, the pairs
    give a relative variance of about (2 + 18/d_k)/n (X = xᵀW_QᵀW_K x' has heavier tails
    than a Gaussian); and one initialisation's own Var(q·k) differs from d_k/9 by
    about 2/d_k (relative SD, measured), averaged over n_inits draws. Together:
    rel_sd ≈ √((2 + 18/d_k)/n + 4/(d_k² n_inits)), checked by repetition for d_k = 4 … 1024.

    Args:
        d_ks: widths d_k = d_model to try, each ≥ 1.
        n_samples: pairs (x, x') per width (≥ 2·n_inits); rounded down to a multiple
            of n_inits.
        n_inits: independent initialisations of W_Q and W_K per width (≥ 1).
        seed: seeds one generator, used for the widths in the order given.

    Returns:
        One :class:`DefaultInitRow` per d_k.

    Raises:
        ShapeError: d_ks empty or a width < 1.
        ValueError: n_inits < 1, or fewer than 2 pairs per initialisation.

    Source: torch.nn.Linear.reset_parameters; Vaswani et al. 2017, sec. 3.2.1, footnote 4.
    """
    dims = _dims("d_ks", d_ks)
    inits = _int("n_inits", n_inits, 1)
    n = _int("n_samples", n_samples, 2 * inits)
    per_init = n // inits
    g = _generator(seed)
    rows = []
    for d_k in dims:
        d_model = d_k
        q_parts, score_parts = [], []
        for _ in range(inits):
            W_Q = default_linear_weight(d_k, d_model, g)  # (d_k, d_model)
            W_K = default_linear_weight(d_k, d_model, g)
            x_q = torch.randn(per_init, d_model, generator=g)  # (n, d_model), one token...
            x_k = torch.randn(per_init, d_model, generator=g)  # ...and another
            q = x_q @ W_Q.T  # (n, d_k)
            k = x_k @ W_K.T  # (n, d_k)
            q_parts.append(q.flatten())
            score_parts.append((q * k).sum(dim=-1))  # (n,)
        var = torch.cat(score_parts).double().var().item()
        rows.append(
            DefaultInitRow(
                d_k=d_k,
                d_model=d_model,
                n_samples=per_init * inits,
                n_inits=inits,
                query_entry_variance=torch.cat(q_parts).double().var().item(),
                variance=var,
                ratio=var / d_k,
                rel_sd=math.sqrt((2 + 18 / d_k) / (per_init * inits) + 4 / (d_k**2 * inits)),
            )
        )
    return rows


@dataclass(frozen=True)
class ScoreSamples:
    """Raw and scaled scores for a histogram.

    Attributes:
        d_k: width of q and k.
        raw: (n_samples,) float32, q·k (variance ≈ d_k).
        scaled: (n_samples,) float32, q·k / √d_k (variance ≈ 1).
    """

    d_k: int
    raw: torch.Tensor
    scaled: torch.Tensor


def score_samples(d_k: int, n_samples: int = 5000, *, seed: int = 0) -> ScoreSamples:
    """Draw n scores q·k with unit-variance Gaussian q, k of width d_k, raw and ÷ √d_k.

    Args:
        d_k: width (≥ 1). n_samples: how many scores (≥ 2). seed: the generator's seed.

    Returns:
        :class:`ScoreSamples` with raw and scaled, each (n_samples,) float32.

    Raises:
        ShapeError: d_k < 1. ValueError: n_samples < 2.

    Source: Vaswani et al. 2017, sec. 3.2.1; article section 2.2.
    """
    d_k = _dim("d_k", d_k)
    n = _int("n_samples", n_samples, 2)
    g = _generator(seed)
    q = torch.randn(n, d_k, generator=g)  # (n, d_k)
    k = torch.randn(n, d_k, generator=g)
    raw = (q * k).sum(dim=-1)  # (n,)
    return ScoreSamples(d_k=d_k, raw=raw, scaled=raw / math.sqrt(d_k))


def score_divisor(d_k: int, scaling: str) -> float:
    """What the scores are divided by: 1 ("none"), √d_k ("sqrt") or d_k ("linear").

    Raises:
        ShapeError: d_k < 1. ValueError: an unknown scaling.

    Source: Vaswani et al. 2017, eq. (1) ("sqrt"); the two alternatives are for comparison.
    """
    d_k = _dim("d_k", d_k)
    scaling = _choice("scaling", scaling, SCALINGS)
    return {"none": 1.0, "sqrt": math.sqrt(d_k), "linear": float(d_k)}[scaling]


def _row_statistics(
    raw: torch.Tensor, keys: torch.Tensor, upstream: torch.Tensor, multiplier: float
) -> dict[str, torch.Tensor]:
    """Softmax, Jacobian and the gradient w.r.t. q of rows of raw scores, in float64.

    raw (..., L) = q·k_j, one row per query; keys (L, d_k) for one row, or (n, L, d_k) for
    rows (n, L_q, L); upstream (..., L) = ∂loss/∂weights, broadcast over the rows.
    raw, keys and upstream are float64.
    """
    scores = raw * multiplier  # (..., L)
    weights = torch.softmax(scores, dim=-1)  # (..., L)
    jac = softmax_jacobian(weights)  # (..., L, L), ∂weights/∂scores
    # ∂loss/∂scores = J g = p ⊙ (g − p·g): the same as jac @ g, without the matmul.
    d_scores = weights * (upstream - (weights * upstream).sum(dim=-1, keepdim=True))  # (..., L)
    # scores_j = multiplier · q·k_j, so ∂loss/∂q = multiplier · Σ_j (∂loss/∂scores_j) k_j.
    grad_q = multiplier * (d_scores @ keys)  # (..., d_k)
    return {
        "scores": scores,
        "weights": weights,
        "jacobian": jac,
        "max_weight": weights.amax(dim=-1),
        "entropy": entropy(weights),
        "jacobian_norm": torch.linalg.matrix_norm(jac),  # Frobenius
        "grad_q": grad_q,
        "grad_norm": grad_q.norm(dim=-1),
    }


@dataclass(frozen=True)
class SaturationCurve:
    """Saturation statistics against d_k for one scaling (each field a (n_d_k,) tensor).

    Attributes:
        scaling: "none", "sqrt" or "linear". temperature: extra divisor of the scores.
        L: keys per row. n_rows: rows per d_k. threshold: the "saturated" cut-off.
        d_k: (n_d_k,) int64.
        median_max_weight: median over rows of the largest weight (1/L … 1).
        median_entropy: median entropy of the rows, nats (0 … log L = uniform).
        median_jacobian_norm: median Frobenius norm of diag(p) − p pᵀ.
        saturated_fraction: fraction of rows whose Jacobian norm < threshold.
        grad_norm_median, grad_norm_p90, grad_norm_p99, grad_norm_mean: of ‖∂loss/∂q‖.
    All float64.
    """

    scaling: str
    temperature: float
    L: int
    n_rows: int
    threshold: float
    d_k: torch.Tensor
    median_max_weight: torch.Tensor
    median_entropy: torch.Tensor
    median_jacobian_norm: torch.Tensor
    saturated_fraction: torch.Tensor
    grad_norm_median: torch.Tensor
    grad_norm_p90: torch.Tensor
    grad_norm_p99: torch.Tensor
    grad_norm_mean: torch.Tensor

    @property
    def grad_tail_ratio(self) -> torch.Tensor:
        """p99 / median of the gradient norm: how heavy-tailed the gradients are."""
        return self.grad_norm_p99 / self.grad_norm_median

    def at(self, d_k: int) -> dict[str, float]:
        """Every statistic at one d_k (which must be among the computed ones), as floats."""
        hits = (self.d_k == d_k).nonzero()
        if hits.numel() == 0:
            raise ValueError(f"d_k = {d_k} was not computed; have {self.d_k.tolist()}.")
        i = int(hits[0])
        names = (
            "median_max_weight", "median_entropy", "median_jacobian_norm",
            "saturated_fraction", "grad_norm_median", "grad_norm_p90", "grad_norm_p99",
            "grad_norm_mean",
        )  # fmt: skip
        return {name: float(getattr(self, name)[i]) for name in names}


def saturation_curves(
    d_ks: Sequence[int] = SATURATION_D_KS,
    scalings: Sequence[str] = SCALINGS,
    *,
    L: int = 16,
    n_sequences: int = 128,
    temperature: float = 1.0,
    threshold: float = 1e-3,
    seed: int = 0,
) -> dict[str, SaturationCurve]:
    """How saturated softmax rows are, and how much gradient reaches q, against d_k.

    For each d_k we draw ``n_sequences`` random sequences of L tokens whose queries
    and keys have i.i.d. N(0, 1) entries, and look at all n_sequences·L rows of
    softmax(Q Kᵀ / (divisor · temperature)). The same draws serve every scaling.

    The gradient, measured honestly: the loss is c · Σᵢ outputᵢ, a fixed readout
    direction c of the outputs (output_i = Σⱼ p_ij v_j). Then ∂loss/∂p_ij = c·v_j =: g_j,
    which for unit-variance values and a unit vector c is N(0, 1); we draw g directly
    (one g per sequence, shared by its rows, as the values are). The gradient reaching
    the query is ∂loss/∂q_i = (1/(divisor·T)) Σⱼ (J_i g)_j k_j, where J_i = diag(p_i) − p_i p_iᵀ
    is the softmax Jacobian of row i — it passes through the keys, so its size also
    depends on ‖k‖ ≈ √d_k and on the divisor, which a gradient w.r.t. the scores hides.

    The Jacobian norm is the Frobenius norm: it bounds the spectral norm (the largest
    factor by which the softmax can pass on any upstream gradient), so a row counted as
    saturated (norm < threshold) passes on less than ``threshold`` of any gradient.

    We report medians and quantiles, not only means: unscaled, most rows saturate
    (tiny gradients) while a few near-ties get large ones, so the mean can even grow.

    Args:
        d_ks: widths to try (each ≥ 1).
        scalings: a subset of ("none", "sqrt", "linear").
        L: keys per row (≥ 2). n_sequences: sequences per d_k (rows = n_sequences·L ≥ 2).
        temperature: extra divisor of the scores (> 0; 1 = none).
        threshold: Frobenius norm below which a row counts as saturated (> 0).
        seed: seeds one generator, used for the widths in the order given.

    Returns:
        {scaling: :class:`SaturationCurve`}, in the order of ``scalings``.

    Raises:
        ShapeError: d_ks empty, a width < 1, L < 2.
        ValueError: an unknown scaling, n_sequences < 1, fewer than 2 rows,
            temperature or threshold not finite and > 0.

    Source: Vaswani et al. 2017, sec. 3.2.1 ("pushes the softmax function into regions
        where it has extremely small gradients"); article section 2.2.
    """
    dims = _dims("d_ks", d_ks)
    if isinstance(scalings, str) or len(scalings) == 0:
        raise ValueError(f"scalings must be a non-empty sequence from {SCALINGS}, got {scalings}.")
    names = [_choice("scaling", s, SCALINGS) for s in scalings]
    L = _dim("L", L, 2)
    n_seq = _int("n_sequences", n_sequences, 1)
    T = _positive("temperature", temperature)
    threshold = _positive("threshold", threshold)
    g = _generator(seed)
    levels = torch.tensor([0.5, 0.9, 0.99], dtype=torch.float64)
    stats: dict[str, dict[str, list[float]]] = {s: {} for s in names}
    for d_k in dims:
        Q = torch.randn(n_seq, L, d_k, generator=g)  # (n_seq, L, d_k)
        K = torch.randn(n_seq, L, d_k, generator=g)  # (n_seq, L, d_k)
        upstream = torch.randn(n_seq, 1, L, generator=g).double()  # (n_seq, 1, L), one per seq
        raw = (Q @ K.transpose(-2, -1)).double()  # (n_seq, L_q, L_k)
        K = K.double()
        for s in names:
            r = _row_statistics(raw, K, upstream, 1.0 / (score_divisor(d_k, s) * T))
            grad = r["grad_norm"].flatten()  # (n_seq·L,)
            p50, p90, p99 = torch.quantile(grad, levels).tolist()
            for key, value in (
                ("median_max_weight", r["max_weight"].median().item()),
                ("median_entropy", r["entropy"].median().item()),
                ("median_jacobian_norm", r["jacobian_norm"].median().item()),
                ("saturated_fraction", (r["jacobian_norm"] < threshold).double().mean().item()),
                ("grad_norm_median", p50),
                ("grad_norm_p90", p90),
                ("grad_norm_p99", p99),
                ("grad_norm_mean", grad.mean().item()),
            ):
                stats[s].setdefault(key, []).append(value)
    return {
        s: SaturationCurve(
            scaling=s,
            temperature=T,
            L=L,
            n_rows=n_seq * L,
            threshold=threshold,
            d_k=torch.tensor(dims),
            **{key: torch.tensor(values, dtype=torch.float64) for key, values in stats[s].items()},
        )
        for s in names
    }


@dataclass(frozen=True)
class SaturationRow:
    """One row of attention at a given d_k, scaling and temperature (for the dashboard).

    Attributes:
        d_k, scaling, temperature: the setting.
        query: (d_k,); keys: (L, d_k); upstream: (L,) = ∂loss/∂weights. All float64.
        raw_scores: (L,), q·k_j. scores: (L,), raw ÷ (divisor · temperature).
        weights: (L,), softmax of the scores. jacobian: (L, L), diag(p) − p pᵀ.
        max_weight, entropy (nats), jacobian_norm (Frobenius): floats.
        grad_q: (d_k,), ∂loss/∂q. grad_norm: its norm.
    """

    d_k: int
    scaling: str
    temperature: float
    query: torch.Tensor
    keys: torch.Tensor
    upstream: torch.Tensor
    raw_scores: torch.Tensor
    scores: torch.Tensor
    weights: torch.Tensor
    jacobian: torch.Tensor
    max_weight: float
    entropy: float
    jacobian_norm: float
    grad_q: torch.Tensor
    grad_norm: float


def saturation_row(
    d_k: int,
    scaling: str = "sqrt",
    temperature: float = 1.0,
    *,
    L: int = 16,
    seed: int = 0,
) -> SaturationRow:
    """One query against L keys: its scores, softmax, Jacobian and gradient w.r.t. q.

    The setting of :func:`saturation_curves` for a single row, so a dashboard can
    show the row behind the curves. For d_k ≤ 1024 the row is nested across widths:
    the query and keys at d_k are the first d_k coordinates of those at 1024, so moving
    a d_k slider adds dimensions to the same vectors instead of drawing new ones;
    the upstream gradient g does not depend on d_k.

    Args:
        d_k: width (≥ 1). scaling: "none", "sqrt" or "linear".
        temperature: extra divisor of the scores (> 0). L: keys (≥ 2). seed: seed.

    Returns:
        :class:`SaturationRow`, tensors in float64.

    Raises:
        ShapeError: d_k < 1 or L < 2. ValueError: an unknown scaling, a temperature
            that is not finite and > 0.

    Source: Vaswani et al. 2017, sec. 3.2.1; article section 2.2.
    """
    d_k = _dim("d_k", d_k)
    divisor = score_divisor(d_k, scaling)
    T = _positive("temperature", temperature)
    L = _dim("L", L, 2)
    g = _generator(seed)
    upstream = torch.randn(L, generator=g, dtype=torch.float64)  # (L,), drawn first: fixed
    # torch's randn is not prefix-stable across sizes, so always draw at least 1024 rows.
    draws = torch.randn(max(d_k, 1024), L + 1, generator=g, dtype=torch.float64)[:d_k]
    query = draws[:, 0]  # (d_k,)
    keys = draws[:, 1:].T.contiguous()  # (L, d_k)
    raw = keys @ query  # (L,)
    r = _row_statistics(raw, keys, upstream, 1.0 / (divisor * T))
    return SaturationRow(
        d_k=d_k,
        scaling=scaling,
        temperature=T,
        query=query,
        keys=keys,
        upstream=upstream,
        raw_scores=raw,
        scores=r["scores"],
        weights=r["weights"],
        jacobian=r["jacobian"],
        max_weight=r["max_weight"].item(),
        entropy=r["entropy"].item(),
        jacobian_norm=r["jacobian_norm"].item(),
        grad_q=r["grad_q"],
        grad_norm=r["grad_norm"].item(),
    )


# (σ², d_k) pairs; σ² ≠ 1 in most, so that forgetting σ² (or squaring it twice) shows.
_SCALE_CASES = ((1.0, 64), (1 / 3, 64), (2.0, 16), (0.5, 100), (4.0, 9))


def _call_scalar(fn: Callable, *args: object) -> tuple[float | None, BaseException | None, str]:
    """(value, error, type name): the learner's return value as a float if it is one number."""
    got, err = _call(fn, *args)
    if err is not None:
        return None, err, ""
    value, is_number = _number(got)
    if is_number:
        return float(value), None, ""
    return None, None, type(got).__name__


def _scaled_variance(multiplier: float, sigma2: float, d_k: int, n: int = 4000) -> float:
    """Monte Carlo Var(multiplier · q·k) for q, k with N(0, σ²) entries (seeded)."""
    g = torch.Generator().manual_seed(_SEED)
    q = torch.randn(n, d_k, generator=g, dtype=torch.float64) * math.sqrt(sigma2)
    k = torch.randn(n, d_k, generator=g, dtype=torch.float64) * math.sqrt(sigma2)
    return (multiplier * (q * k).sum(dim=-1)).var().item()


def check_score_scale(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check the multiplier that brings Var(q·k) back to 1 for entries of variance σ².

    ``fn(entry_variance, d_k)`` receives σ² (a float > 0) and d_k (an int) and must
    return the number c such that c · q·k has variance 1 when q and k have i.i.d.
    zero-mean entries of variance σ²: Var(q·k) = d_k σ⁴, so c = 1 / (σ² √d_k) (for
    σ² = 1, the familiar 1/√d_k). Cases: (σ², d_k) = (1, 64), (1/3, 64), (2, 16),
    (0.5, 100), (4, 9). The feedback also reports a Monte Carlo estimate of the
    variance the learner's multiplier gives.

    Args:
        fn: the function to check.
        verbose: print the feedback paragraph.

    Returns:
        CheckResult; ``mistake`` is None or one of: "not_written", "error",
        "bad_return", "sqrt_only", "sigma_not_squared", "sigma_squared_twice",
        "variance_not_sd", "d_k_not_sqrt", "inverted", "unknown".

    Source: Vaswani et al. 2017, sec. 3.2.1, footnote 4; article section 2.2.
    """
    name = _name_of(fn)
    got = []
    for sigma2, d_k in _SCALE_CASES:
        value, err, bad_type = _call_scalar(fn, sigma2, d_k)
        if err is not None:
            return _call_failed(
                name,
                err,
                f"For entry_variance={sigma2:.4g}, d_k={d_k} your function raised "
                f"{_raised(err)}. Fix that line and run the check again.",
                verbose,
            )
        if value is None:
            return _not_yet(
                "bad_return",
                f"{name} returned {bad_type}; return one number, the multiplier c "
                f"(a float, or a tensor holding one number).",
                verbose,
            )
        got.append(value)

    def all_match(formula: Callable[[float, int], float]) -> bool:
        return all(
            math.isclose(g, formula(s2, d), rel_tol=1e-6)
            for g, (s2, d) in zip(got, _SCALE_CASES, strict=True)
        )

    sigma2, d_k = _SCALE_CASES[1]
    monte_carlo = (
        f"With your multiplier for σ² = 1/3, d_k = 64 (c = {got[1]:.4g}), the scaled scores "
        f"have variance {_scaled_variance(got[1], sigma2, d_k):.3f} (Monte Carlo, 4000 pairs)"
    )
    if all_match(lambda s2, d: 1 / (s2 * math.sqrt(d))):
        return _passed(
            f"c = 1 / (σ² √d_k) on all {len(_SCALE_CASES)} cases. {monte_carlo}, "
            f"as it should be (1 up to sampling noise of about 0.02).",
            verbose,
        )
    mistakes = [
        (
            "sqrt_only",
            (
                "Your multiplier is 1/√d_k whatever σ² is. That is the right answer only for "
                "unit-variance entries: each product q_i k_i has variance σ² · σ² = σ⁴, so "
                "Var(q·k) = d_k σ⁴ and its standard deviation is σ² √d_k."
            ),
            lambda s2, d: 1 / math.sqrt(d),
        ),
        (
            "sigma_not_squared",
            (
                "Your multiplier is 1/(σ √d_k). Each product q_i k_i has variance "
                "E[q_i²] E[k_i²] = σ⁴, not σ²: the standard deviation of q·k is σ² √d_k."
            ),
            lambda s2, d: 1 / (math.sqrt(s2) * math.sqrt(d)),
        ),
        (
            "sigma_squared_twice",
            (
                "Your multiplier is 1/(σ⁴ √d_k): σ⁴ is the variance of one product q_i k_i, "
                "but the standard deviation of q·k is its square root times √d_k: σ² √d_k."
            ),
            lambda s2, d: 1 / (s2**2 * math.sqrt(d)),
        ),
        (
            "variance_not_sd",
            (
                "Your multiplier is 1/(d_k σ⁴), one over the variance. Multiplying by c "
                "multiplies the variance by c², so divide by the standard deviation, "
                "√(d_k σ⁴) = σ² √d_k."
            ),
            lambda s2, d: 1 / (s2**2 * d),
        ),
        (
            "d_k_not_sqrt",
            (
                "Your multiplier is 1/(σ² d_k). Multiplying by c multiplies the variance by c²: "
                "to undo a variance of d_k σ⁴ you need c = 1/(σ² √d_k), with √d_k."
            ),
            lambda s2, d: 1 / (s2 * d),
        ),
        (
            "inverted",
            (
                "Your multiplier is σ² √d_k, the standard deviation itself; the scores must be "
                "divided by it: c = 1/(σ² √d_k)."
            ),
            lambda s2, d: s2 * math.sqrt(d),
        ),
    ]
    for code, why, formula in mistakes:
        if all_match(formula):
            return _not_yet(code, f"{why} {monte_carlo}.", verbose)
    return _not_yet(
        "unknown",
        f"For σ² = 1, d_k = 64 you return {got[0]:.4g} (expected 0.125), and your "
        f"answers match none of the usual slips. {monte_carlo}; it should be about 1. Start "
        f"from Var(q·k) = d_k σ⁴ and remember that Var(c·X) = c² Var(X).",
        verbose,
    )


def _entropy_cases() -> list[tuple[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(_SEED)
    return [
        ("a uniform row over 4 keys", torch.full((4,), 0.25)),
        ("a one-hot row over 5 keys", torch.tensor([0.0, 0.0, 1.0, 0.0, 0.0])),
        ("a row with two zeros", torch.tensor([0.5, 0.0, 0.5, 0.0])),
        ("a batch of rows (2, 3, 6)", torch.softmax(torch.randn(2, 3, 6, generator=g), dim=-1)),
    ]


def check_entropy(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check a hand-written entropy of rows of attention weights, in nats.

    ``fn(weights)`` receives weights (..., L), float32, non-negative, each row
    summing to 1 (a copy), and must return the entropy of every row, shape (...),
    in nats: −Σ_j p_j log p_j over the last dim, with 0 · log 0 = 0 (a one-hot row
    has entropy 0, a uniform row over L keys log L). Cases: a uniform row (4,), a
    one-hot row (5,), a row with zeros (4,), a batch (2, 3, 6).

    Args:
        fn: the function to check.
        verbose: print the feedback paragraph.

    Returns:
        CheckResult; ``mistake`` is None or one of: "not_written", "error",
        "bad_return", "nan_at_zero", "bits", "sign", "not_summed", "mean_not_sum",
        "wrong_dim", "unknown".

    Source: Cover & Thomas, Elements of Information Theory, eq. (2.1); attn_lib.entropy.
    """
    name = _name_of(fn)
    cases = _entropy_cases()
    got = []
    for desc, w in cases:
        out, err = _call(fn, w.clone())
        if err is not None:
            return _call_failed(
                name,
                err,
                f"On {desc} (shape {tuple(w.shape)}) your function raised {_raised(err)}.",
                verbose,
            )
        if not isinstance(out, torch.Tensor):
            try:
                out = torch.as_tensor(out, dtype=torch.float32)
            except (TypeError, ValueError, RuntimeError):
                return _not_yet(
                    "bad_return",
                    f"{name} returned {type(out).__name__}; return a tensor with one "
                    f"entropy per row.",
                    verbose,
                )
        got.append(out.detach().to(torch.float64))

    refs = [_entropy(w.double()) for _, w in cases]

    def all_match(transform: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> bool:
        for out, ref, (_, w) in zip(got, refs, cases, strict=True):
            want = transform(ref, w.double())
            if out.shape != want.shape or not torch.allclose(out, want, rtol=1e-4, atol=1e-5):
                return False
        return True

    if all_match(lambda ref, w: ref):
        return _passed(
            f"{name} gives the entropy in nats of every row on all {len(cases)} cases: "
            f"log 4 = {math.log(4):.4f} for the uniform row, 0 for the one-hot row (0 · log 0 "
            f"taken as 0), and one value per row of the (2, 3, 6) batch, shape (2, 3).",
            verbose,
        )
    for (desc, w), out in zip(cases, got, strict=True):
        if bool(torch.isnan(out).any()) and bool((w == 0).any()):
            return _not_yet(
                "nan_at_zero",
                f"On {desc} your result contains NaN: 0 · log 0 is 0 · (−inf) = NaN in "
                f"floating point. By convention the term is 0 (p log p → 0 as p → 0): use "
                f"`torch.special.xlogy(p, p)`, or `torch.where(p > 0, p * p.log(), 0.0)`.",
                verbose,
            )
    ln2 = math.log(2)

    def terms(ref: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return -torch.special.xlogy(w, w)

    mistakes = [
        ("bits", ("Your entropy is in bits (log base 2); the series measures it in nats, with "
         "the natural log: `torch.log`, not `torch.log2`."), lambda ref, w: ref / ln2),
        ("sign", ("Your entropy is negative: it is −Σ p log p. Each log p ≤ 0, so the minus "
         "sign makes the entropy ≥ 0."), lambda ref, w: -ref),
        ("not_summed", ("You return the terms −p_j log p_j, one per key; add them up over the "
         "keys (the last dim) to get one number per row."), terms),
        ("mean_not_sum", ("You average the terms over the keys instead of adding them: "
         "`.sum(dim=-1)`, not `.mean(dim=-1)`."), lambda ref, w: ref / w.shape[-1]),
    ]  # fmt: skip
    for code, why, transform in mistakes:
        if all_match(transform):
            return _not_yet(code, why, verbose)
    batch_out, batch_ref = got[-1], refs[-1]
    if batch_out.shape != batch_ref.shape:
        return _not_yet(
            "wrong_dim",
            f"For weights of shape (2, 3, 6) your result has shape "
            f"{tuple(batch_out.shape)}; it should be (2, 3), one entropy per row. Sum over the "
            f"keys only: `.sum(dim=-1)`.",
            verbose,
        )
    first = next(
        (desc, out, ref)
        for (desc, _), out, ref in zip(cases, got, refs, strict=True)
        if out.shape != ref.shape or not torch.allclose(out, ref, rtol=1e-4, atol=1e-5)
    )
    desc, out, ref = first
    return _not_yet(
        "unknown",
        f"On {desc} you return {out.flatten()[:3].tolist()} (first values), expected "
        f"{[round(v, 4) for v in ref.flatten()[:3].tolist()]}. The entropy of a row p is "
        f"−Σ_j p_j log p_j, natural log, 0 · log 0 = 0.",
        verbose,
    )


def _jacobian_cases() -> list[tuple[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(_SEED)
    return [
        ("a random row of 3 weights", torch.softmax(torch.randn(3, generator=g), dim=-1)),
        ("a random row of 5 weights", torch.softmax(2 * torch.randn(5, generator=g), dim=-1)),
        ("a uniform row of 4 weights", torch.full((4,), 0.25)),
        ("a one-hot row of 4 weights", torch.tensor([0.0, 1.0, 0.0, 0.0])),
    ]


def check_softmax_jacobian(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check a hand-written softmax Jacobian J = diag(p) − p pᵀ and name the mistake if any.

    ``fn(p)`` receives one row of softmax weights p, shape (L,), float32 (a copy), and
    must return the (L, L) matrix J with J[i, j] = ∂p_i/∂s_j = p_i (δ_ij − p_j).
    Cases: random rows of 3 and 5 weights, a uniform row of 4 (whose Jacobian has
    1/4 − 1/16 on the diagonal) and a one-hot row of 4 (whose Jacobian is zero: a
    saturated row passes no gradient). The message also says whether the learner's
    matrix matches autograd.

    Args:
        fn: the function to check.
        verbose: print the feedback paragraph.

    Returns:
        CheckResult; ``mistake`` is None or one of: "not_written", "error",
        "bad_return", "wrong_shape", "outer_only", "diag_only", "sign",
        "diagonal_only", "unknown".

    Source: Bishop, Pattern Recognition and Machine Learning, eq. (4.106);
        attn_lib.softmax_jacobian.
    """
    name = _name_of(fn)
    cases = _jacobian_cases()
    got = []
    for desc, p in cases:
        out, err = _call(fn, p.clone())
        if err is not None:
            return _call_failed(
                name,
                err,
                f"On {desc} (p of shape {tuple(p.shape)}) your function raised {_raised(err)}.",
                verbose,
            )
        if not isinstance(out, torch.Tensor):
            return _not_yet(
                "bad_return",
                f"{name} returned {type(out).__name__}; return an (L, L) tensor.",
                verbose,
            )
        if out.shape != (len(p), len(p)):
            return _not_yet(
                "wrong_shape",
                f"On {desc} your result has shape {tuple(out.shape)}; the Jacobian of "
                f"softmax over L = {len(p)} scores is (L, L) = ({len(p)}, {len(p)}): one row per "
                f"weight p_i, one column per score s_j. `p[:, None] * p[None, :]` is the outer "
                f"product p pᵀ.",
                verbose,
            )
        got.append(out.detach().to(torch.float32))

    def all_match(make: Callable[[torch.Tensor], torch.Tensor]) -> bool:
        return all(
            torch.allclose(out, make(p), rtol=1e-4, atol=1e-6)
            for out, (_, p) in zip(got, cases, strict=True)
        )

    if all_match(_softmax_jacobian):
        desc, p = cases[0]
        s = torch.log(p.double()).requires_grad_(True)  # softmax(log p) = p
        autograd = torch.autograd.functional.jacobian(lambda x: torch.softmax(x, -1), s)
        agree = torch.allclose(got[0].double(), autograd, rtol=1e-4, atol=1e-6)
        return _passed(
            f"{name} gives diag(p) − p pᵀ on all {len(cases)} cases"
            + (", and on the first it agrees with torch.autograd's Jacobian of softmax" if agree
               else "") + ". For the one-hot row it is the zero matrix: a saturated row passes "
            "no gradient back to its scores.",
            verbose,
        )  # fmt: skip
    mistakes = [
        ("outer_only", ("You return −p pᵀ: the diagonal term diag(p) is missing. ∂p_i/∂s_i = "
         "p_i − p_i², so the diagonal gets p_i on top of −p_i²."),
         lambda p: -torch.outer(p, p)),
        ("diag_only", ("You return diag(p) only: the −p pᵀ part is missing. Raising one score "
         "takes weight away from every other key, so the off-diagonal entries are −p_i p_j."),
         torch.diag),
        ("sign", ("Your Jacobian has the wrong sign: p pᵀ − diag(p). Raising s_i raises p_i, "
         "so the diagonal entries p_i(1 − p_i) are ≥ 0."), lambda p: -_softmax_jacobian(p)),
        ("diagonal_only", ("You return only the diagonal, diag(p − p²). Raising s_j also "
         "lowers every other weight: the off-diagonal entries are −p_i p_j."),
         lambda p: torch.diag(p - p * p)),
    ]  # fmt: skip
    for code, why, make in mistakes:
        if all_match(make):
            return _not_yet(code, why, verbose)
    return _not_yet(
        "unknown",
        f"For p = {[round(v, 4) for v in cases[0][1].tolist()]} your matrix differs "
        f"from diag(p) − p pᵀ, and matches none of the usual slips. Entry (i, j) is "
        f"p_i (δ_ij − p_j): `torch.diag(p) - torch.outer(p, p)`.",
        verbose,
    )
