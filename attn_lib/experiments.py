"""Seeded experiments behind notebooks 01–04: pure functions that return numbers.

Every random draw comes from a local ``torch.Generator`` seeded by the ``seed``
argument, so the caller's global random state is never touched and the same
arguments always give the same numbers. Torch only: the dashboards in
``attn_lib.widgets`` draw what these functions return.

- 01 attention as retrieval: :func:`retrieve`, :func:`path_lengths`,
  :func:`pair_counts`, :func:`permutation_deviation`, :func:`word_order_outputs`.
- 02 queries, keys and values: :func:`qkv_example`, :func:`token_qkv`,
  :func:`self_score_max_fraction`, :func:`dot_and_cosine`.
- 03 scaling and saturation: :func:`score_variance_table`,
  :func:`variance_estimate_spread`, :func:`default_init_score_variance`,
  :func:`score_samples`, :func:`saturation_curves`, :func:`saturation_row`.
- 04 cost: :func:`attention_cost`, :func:`cost_curves`, :func:`crossover_length`.

Shape legend: B batch, L_q query length, L_k key length, d_model, d_k, d_v;
L a sequence length when L_q = L_k.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from .core import SingleHeadAttention
from .lessons._experiments import (
    PADDING_SIDES,
    AttentionCost,
    _choice,
    _dim,
    _dims,
    _generator,
    _int,
    attention_cost,
    crossover_length,
    keep_from_lengths,
    seeded_attention,
)
from .positional import sinusoidal_positional_encoding
from .shapes import ShapeError, fmt_shape
from .softmax import entropy, softmax_jacobian

__all__ = [
    "BIAS_CHOICES",
    "DEFAULT_D_KS",
    "SATURATION_D_KS",
    "SCALINGS",
    "AttentionCost",
    "DefaultInitRow",
    "DotVsCosine",
    "PairCounts",
    "PathLengths",
    "QKVExample",
    "Retrieval",
    "SaturationCurve",
    "SaturationRow",
    "ScoreSamples",
    "ScoreVarianceRow",
    "TokenQKV",
    "WordOrderResult",
    "attention_cost",
    "crossover_length",
    "default_init_score_variance",
    "default_linear_weight",
    "dot_and_cosine",
    "pair_counts",
    "path_lengths",
    "permutation_deviation",
    "qkv_example",
    "retrieve",
    "saturation_curves",
    "saturation_row",
    "score_divisor",
    "score_samples",
    "score_variance_table",
    "seeded_attention",
    "self_score_max_fraction",
    "token_qkv",
    "variance_estimate_spread",
    "word_order_outputs",
]

DEFAULT_D_KS = (4, 8, 16, 32, 64, 128, 256, 512, 1024)
SATURATION_D_KS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
SCALINGS = ("none", "sqrt", "linear")
BIAS_CHOICES = ("none", "q", "k", "v")


# ---------------------------------------------------------------------------
# Argument checks (one sentence each, for the learner)
# ---------------------------------------------------------------------------


def _positive(name: str, value: object) -> float:
    """A finite real number > 0 (a temperature, a variance)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}.")
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value}.")
    return value


def _vector(name: str, value: object) -> torch.Tensor:
    """A 1-D float tensor from a tensor or a sequence of numbers."""
    t = value if isinstance(value, torch.Tensor) else torch.as_tensor(value)
    if not t.is_floating_point():
        t = t.to(torch.get_default_dtype())
    if t.dim() != 1 or t.numel() == 0:
        raise ShapeError(f"{name} must be a non-empty 1-D vector, got shape {fmt_shape(t.shape)}.")
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name} contains NaN or inf: {t.tolist()}.")
    return t


# ---------------------------------------------------------------------------
# 03: the variance of q·k (Monte Carlo)
# ---------------------------------------------------------------------------


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


def default_linear_weight(d_out: int, d_in: int, generator: torch.Generator) -> torch.Tensor:
    """The weight ``nn.Linear(d_in, d_out)`` starts with, drawn from ``generator``.

    nn.Linear initialises its weight with ``kaiming_uniform_(w, a=√5)``: U(-b, b) with
    b = gain·√3/√d_in and gain = √(2/(1 + a²)) = √(1/3), so b = 1/√d_in and each entry
    has variance b²/3 = 1/(3 d_in). With the same seed this gives the same numbers
    as ``torch.manual_seed(seed); nn.Linear(d_in, d_out).weight``.

    Args:
        d_out: output width (d_k or d_v). d_in: input width (d_model).
        generator: a torch.Generator (advanced by d_out·d_in draws).

    Returns:
        (d_out, d_in), float32: nn.Linear's storage layout, applied as x @ W.T.

    Raises:
        ShapeError: a width < 1.

    Source: torch.nn.Linear.reset_parameters; He et al. 2015 (Kaiming init).
    """
    w = torch.empty(_dim("d_out", d_out), _dim("d_in", d_in))
    nn.init.kaiming_uniform_(w, a=math.sqrt(5), generator=generator)
    return w


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


# ---------------------------------------------------------------------------
# 03: saturation of the softmax, and the gradient that reaches q
# ---------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------
# 01: the library analogy, path lengths, permutation equivariance
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Retrieval:
    """What one query retrieves from a library.

    Attributes:
        scores: (n_books,), q·k_j, the relevance of each book (dimensionless).
        weights: (n_books,), softmax(scores / temperature): how much of each book is read.
        blended: (d_v,), Σ_j weights_j · value_j, the mix of the books' contents.
        temperature: the temperature used.
    """

    scores: torch.Tensor
    weights: torch.Tensor
    blended: torch.Tensor
    temperature: float


def retrieve(
    query: torch.Tensor | Sequence[float],
    keys: torch.Tensor,
    values: torch.Tensor,
    temperature: float = 1.0,
) -> Retrieval:
    """Attention as a library search: score every book, soften the scores, blend the contents.

    A low temperature takes the best book (weights → one-hot; tied books share);
    a high one reads every book alike (weights → uniform); in between it takes the
    best and skims the close ones. The scores are raw dot products: this is the
    intuition of notebook 01, before the √d_k of notebook 03.

    Args:
        query: (d_k,), what the reader looks for, one number per key feature.
        keys: (n_books, d_k), each book's catalogue entry over the same features.
        values: (n_books, d_v), each book's contents.
        temperature: > 0; the scores are divided by it before the softmax.

    Returns:
        :class:`Retrieval` with scores, weights (n_books,) and blended (d_v,), in the
        dtype of keys.

    Raises:
        ShapeError: a query that is not 1-D, keys or values not 2-D, no books,
            widths or book counts that do not match.
        ValueError: temperature not finite and > 0; NaN or inf in the query.
        TypeError: keys or values not floating-point tensors.

    Source: article sections 1.1 (the library) and 2.1 (Q, K, V as need, index, content).
    """
    T = _positive("temperature", temperature)
    if not (isinstance(keys, torch.Tensor) and isinstance(values, torch.Tensor)):
        raise TypeError("keys and values must be tensors: (n_books, d_k) and (n_books, d_v).")
    if keys.dim() != 2 or values.dim() != 2 or keys.shape[0] == 0:
        raise ShapeError(
            f"keys {fmt_shape(keys.shape)} and values {fmt_shape(values.shape)} must be "
            f"(n_books, d_k) and (n_books, d_v) with at least one book."
        )
    if not (keys.is_floating_point() and values.is_floating_point()):
        raise TypeError(f"keys and values must be floating point, got {keys.dtype}, {values.dtype}.")
    if keys.shape[0] != values.shape[0]:
        raise ShapeError(
            f"keys has {keys.shape[0]} books but values has {values.shape[0]}; "
            f"each book needs one key row and one value row."
        )
    q = _vector("query", query).to(keys.dtype)
    if q.shape[0] != keys.shape[1]:
        raise ShapeError(
            f"query has {q.shape[0]} features but the keys have {keys.shape[1]}; "
            f"give one number per key feature."
        )
    scores = keys @ q  # (n_books,)
    weights = torch.softmax(scores / T, dim=-1)  # (n_books,)
    return Retrieval(scores=scores, weights=weights, blended=weights @ values, temperature=T)


@dataclass(frozen=True)
class PathLengths:
    """Steps (or layers) for information to travel between two positions |i − j| apart.

    Attributes:
        distance: (L − 1,) int64, |i − j| = 1 … L − 1.
        recurrent: (L − 1,), |i − j| steps of the recurrence.
        convolution: (L − 1,), ⌈|i − j| / (k − 1)⌉ stacked width-k convolutions.
        self_attention: (L − 1,), 1 step.
        kernel_size: k.
    """

    distance: torch.Tensor
    recurrent: torch.Tensor
    convolution: torch.Tensor
    self_attention: torch.Tensor
    kernel_size: int


def path_lengths(L: int, kernel_size: int = 3) -> PathLengths:
    """Path length between positions i and j of a length-L sequence, against |i − j|.

    A recurrent net passes information one step at a time (|i − j| steps). One
    width-k convolution (stride 1, no dilation) reaches k − 1 positions further, so m
    stacked layers reach m(k − 1): ⌈|i − j|/(k − 1)⌉ layers. Self-attention
    connects every pair directly: 1 step, whatever the distance.

    Args:
        L: sequence length (≥ 2). kernel_size: k (≥ 2).

    Returns:
        :class:`PathLengths`, int64 tensors of shape (L − 1,).

    Raises:
        ShapeError: L < 2. ValueError: kernel_size < 2 (a width-1 convolution never
            mixes positions).

    Source: Vaswani et al. 2017, sec. 4 and Table 1 (maximum path lengths); article 1.2.
    """
    L = _dim("L", L, 2)
    k = _int("kernel_size", kernel_size, 2)
    distance = torch.arange(1, L)  # (L − 1,)
    return PathLengths(
        distance=distance,
        recurrent=distance.clone(),
        convolution=(distance + k - 2) // (k - 1),  # ceil(distance / (k − 1)) in integers
        self_attention=torch.ones_like(distance),
        kernel_size=k,
    )


@dataclass(frozen=True)
class PairCounts:
    """Work per layer against sequence length.

    Attributes:
        L: (n,) int64 lengths 1 … max_L.
        self_attention: (n,), L² scores (every query with every key).
        recurrent: (n,), L state updates.
    """

    L: torch.Tensor
    self_attention: torch.Tensor
    recurrent: torch.Tensor


def pair_counts(max_L: int) -> PairCounts:
    """Pairs self-attention scores (L²) against the L steps of a recurrent net, for L = 1 … max_L.

    Raises:
        ShapeError: max_L < 1.

    Source: article section 1.2 ("L tokens need L² pairwise interactions").
    """
    L = torch.arange(1, _dim("max_L", max_L) + 1)  # (n,)
    return PairCounts(L=L, self_attention=L * L, recurrent=L.clone())


def _check_permutation(perm: torch.Tensor | Sequence[int], L: int) -> torch.Tensor:
    p = torch.as_tensor(perm)
    if p.dim() != 1 or p.dtype in (torch.bool,) or p.is_floating_point():
        raise ShapeError(f"perm must be a 1-D integer tensor, got {p.dtype} {fmt_shape(p.shape)}.")
    if p.numel() != L or not torch.equal(p.sort().values, torch.arange(L)):
        raise ValueError(f"perm must be a permutation of 0 … {L - 1}, got {p.tolist()}.")
    return p.long()


def permutation_deviation(
    model: SingleHeadAttention,
    x: torch.Tensor,
    perm: torch.Tensor | Sequence[int],
    mask: torch.Tensor | None = None,
) -> float:
    """max |f(x[perm]) − f(x)[perm]|: how far self-attention is from permutation-equivariant.

    Without positions and without a mask this is float round-off (≈ 1e-7 in float32):
    permuting the tokens permutes the outputs the same way. A mask tied to positions
    (a causal mask) stays put while the tokens move, so it breaks equivariance.

    Args:
        model: a SingleHeadAttention.
        x: (L, d_model) or (B, L, d_model), floating point.
        perm: (L,), a permutation of the positions 0 … L − 1.
        mask: a keep-mask for both calls, e.g. attn_lib.causal_mask(L), or None.

    Returns:
        The largest absolute difference, a float (no gradients).

    Raises:
        ShapeError: x not 2-D or 3-D, a perm that is not 1-D of integers.
        ValueError: perm not a permutation of 0 … L − 1.
        As SingleHeadAttention.forward for a bad x or mask.

    Source: article section 1.2; Vaswani et al. 2017, sec. 3.5 (why positions are added).
    """
    if not isinstance(x, torch.Tensor) or x.dim() not in (2, 3):
        shape = fmt_shape(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ShapeError(f"x must be (L, d_model) or (B, L, d_model), got {shape}.")
    p = _check_permutation(perm, x.shape[-2])
    with torch.no_grad():
        out = model(x, mask)  # (…, L, d_v)
        out_of_permuted = model(x[..., p, :], mask)  # (…, L, d_v)
    return (out_of_permuted - out[..., p, :]).abs().max().item()


@dataclass(frozen=True)
class WordOrderResult:
    """The same tokens in two orders, through the same attention.

    Attributes:
        tokens_a, tokens_b: the two sentences' tokens.
        positions: whether sinusoidal positional encodings were added.
        output_a: (L, d_v), output_b: (L, d_v), float32.
        match: match[i] is the position in b of the token at position i of a.
        deviation: (L,), max |output_a[i] − output_b[match[i]]| per token of a.
    """

    tokens_a: tuple[str, ...]
    tokens_b: tuple[str, ...]
    positions: bool
    output_a: torch.Tensor
    output_b: torch.Tensor
    match: tuple[int, ...]
    deviation: torch.Tensor


def _match_tokens(a: Sequence[str], b: Sequence[str]) -> tuple[int, ...]:
    if sorted(a) != sorted(b):
        raise ValueError(
            f"the two sentences must use the same tokens in another order, got {list(a)} and "
            f"{list(b)}."
        )
    unused = list(range(len(b)))
    match = []
    for token in a:
        j = next(j for j in unused if b[j] == token)  # repeated tokens pair up in order
        unused.remove(j)
        match.append(j)
    return tuple(match)


def word_order_outputs(
    tokens_a: Sequence[str],
    tokens_b: Sequence[str],
    embeddings: Mapping[str, torch.Tensor],
    model: SingleHeadAttention,
    *,
    positions: bool = False,
) -> WordOrderResult:
    """Run two orderings of the same tokens (我爱你 / 你爱我) through one self-attention.

    Each token gets the same embedding in both sentences. Without positions, every
    token's output is the same in both (self-attention is permutation-equivariant: it
    cannot tell the sentences apart); adding sinusoidal positional encodings to the
    embeddings makes the outputs differ.

    Args:
        tokens_a, tokens_b: the two sentences, the same tokens in another order
            (e.g. from attn_lib.data.tokenize).
        embeddings: token → (d_model,) vector (e.g. attn_lib.data.embedding_table).
        model: a SingleHeadAttention with the same d_model.
        positions: add sinusoidal_positional_encoding(L, d_model) to the embeddings.

    Returns:
        :class:`WordOrderResult`.

    Raises:
        ValueError: empty sentences, or sentences that are not reorderings of each other.
        KeyError: a token without an embedding.
        ShapeError: as SingleHeadAttention for embeddings of the wrong width.

    Source: article section 1.2 (我爱你 and 你爱我); Vaswani et al. 2017, sec. 3.5.
    """
    a, b = tuple(tokens_a), tuple(tokens_b)
    if len(a) == 0 or len(b) == 0:
        raise ValueError("both sentences need at least one token, got an empty token list.")
    match = _match_tokens(a, b)
    missing = [t for t in a if t not in embeddings]
    if missing:
        raise KeyError(f"no embedding for token(s) {missing}; build the table from both sentences.")
    x_a = torch.stack([embeddings[t] for t in a])  # (L, d_model)
    x_b = torch.stack([embeddings[t] for t in b])  # (L, d_model)
    if positions:
        pe = sinusoidal_positional_encoding(len(a), x_a.shape[-1], dtype=x_a.dtype)  # (L, d_model)
        x_a, x_b = x_a + pe, x_b + pe
    with torch.no_grad():
        out_a, out_b = model(x_a), model(x_b)  # (L, d_v) each
    deviation = (out_a - out_b[list(match)]).abs().amax(dim=-1)  # (L,)
    return WordOrderResult(
        tokens_a=a,
        tokens_b=b,
        positions=bool(positions),
        output_a=out_a,
        output_b=out_b,
        match=match,
        deviation=deviation,
    )


# ---------------------------------------------------------------------------
# 02: queries, keys and values; biases; x xᵀ against Q Kᵀ
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class QKVExample:
    """Q, K, V and attention of one sequence with fixed weights, and at most one bias.

    Attributes:
        bias: "none", "q", "k" or "v" — which projection got its bias vector.
        x: (L, d_model), the input.
        W_Q, W_K: (d_k, d_model); W_V: (d_v, d_model), in nn.Linear's storage layout
            (applied as x @ W.T; the article writes the transposes, (d_model, d_k)).
        b_Q, b_K: (d_k,); b_V: (d_v,): the bias vectors (only ``bias``'s is used).
        Q, K: (L, d_k); V: (L, d_v).
        scores: (L_q, L_k) = Q Kᵀ / √d_k. weights: (L_q, L_k). output: (L_q, d_v).
    """

    bias: str
    x: torch.Tensor
    W_Q: torch.Tensor
    W_K: torch.Tensor
    W_V: torch.Tensor
    b_Q: torch.Tensor
    b_K: torch.Tensor
    b_V: torch.Tensor
    Q: torch.Tensor
    K: torch.Tensor
    V: torch.Tensor
    scores: torch.Tensor
    weights: torch.Tensor
    output: torch.Tensor


def qkv_example(
    x: torch.Tensor,
    bias: str = "none",
    *,
    d_k: int | None = None,
    d_v: int | None = None,
    bias_scale: float = 1.0,
    seed: int = 0,
) -> QKVExample:
    """Project x to Q, K, V with seeded nn.Linear-style weights and attend; optionally one bias.

    The weights and the three bias vectors are drawn in the same order whatever
    ``bias`` is, so the settings differ only by the bias that is switched on. Both use
    nn.Linear's default init (weights U(±1/√d_model), biases U(±1/√d_model)), which is
    what ``nn.Linear(d_model, d_k)`` — bias=True by default — starts with; ``bias_scale``
    multiplies the bias vectors to make their effect easier to see. What a bias
    does: on K it adds q·b_K to every score of a row, a constant shift that softmax
    ignores; on V it adds b_V to every output (the weights sum to 1); on Q it adds
    b_Q·k_j, which differs per key, so the weights change.

    Args:
        x: (L, d_model), floating point.
        bias: "none", "q", "k" or "v".
        d_k: width of queries and keys (default d_model). d_v: width of values (default d_k).
        bias_scale: multiplier of the bias vectors (> 0; 1 = nn.Linear's init).
        seed: seed of the weights and biases.

    Returns:
        :class:`QKVExample`, float32 (or x's dtype).

    Raises:
        ShapeError: x not 2-D, L = 0, or a width < 1.
        ValueError: an unknown bias, or bias_scale not finite and > 0.

    Source: article sections 2.1 and 3.2; torch.nn.Linear (bias=True by default).
    """
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        shape = fmt_shape(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ShapeError(f"x must be (L, d_model) with L, d_model ≥ 1, got {shape}.")
    bias = _choice("bias", bias, BIAS_CHOICES)
    d_model = x.shape[1]
    d_k = d_model if d_k is None else _dim("d_k", d_k)
    d_v = d_k if d_v is None else _dim("d_v", d_v)
    g = _generator(seed)
    W_Q = default_linear_weight(d_k, d_model, g).to(x.dtype)  # (d_k, d_model)
    W_K = default_linear_weight(d_k, d_model, g).to(x.dtype)  # (d_k, d_model)
    W_V = default_linear_weight(d_v, d_model, g).to(x.dtype)  # (d_v, d_model)
    bound = _positive("bias_scale", bias_scale) / math.sqrt(d_model)  # nn.Linear: U(±1/√d_model)
    b_Q, b_K, b_V = (
        torch.empty(n).uniform_(-bound, bound, generator=g).to(x.dtype) for n in (d_k, d_k, d_v)
    )
    Q = x @ W_Q.T + (b_Q if bias == "q" else 0)  # (L, d_k)
    K = x @ W_K.T + (b_K if bias == "k" else 0)  # (L, d_k)
    V = x @ W_V.T + (b_V if bias == "v" else 0)  # (L, d_v)
    scores = Q @ K.T / math.sqrt(d_k)  # (L_q, L_k)
    weights = torch.softmax(scores, dim=-1)  # (L_q, L_k)
    return QKVExample(
        bias=bias, x=x, W_Q=W_Q, W_K=W_K, W_V=W_V, b_Q=b_Q, b_K=b_K, b_V=b_V,
        Q=Q, K=K, V=V, scores=scores, weights=weights, output=weights @ V,
    )  # fmt: skip


@dataclass(frozen=True)
class TokenQKV:
    """One token's view of :func:`qkv_example`.

    Attributes:
        index: the token's position. bias: the bias setting.
        query: (d_k,), what it looks for. key: (d_k,), what it offers.
        value: (d_v,), what it passes on. scores: (L_k,), its row of Q Kᵀ / √d_k.
        weights: (L_k,), softmax of that row. output: (d_v,), its output.
    """

    index: int
    bias: str
    query: torch.Tensor
    key: torch.Tensor
    value: torch.Tensor
    scores: torch.Tensor
    weights: torch.Tensor
    output: torch.Tensor


def token_qkv(
    x: torch.Tensor,
    index: int,
    bias: str = "none",
    *,
    d_k: int | None = None,
    d_v: int | None = None,
    bias_scale: float = 1.0,
    seed: int = 0,
) -> TokenQKV:
    """A token's query, key and value, and its row of scores and weights (same weights each call).

    Args:
        x: (L, d_model). index: 0 … L − 1 (negative counts from the end).
        bias, d_k, d_v, bias_scale, seed: as :func:`qkv_example`.

    Returns:
        :class:`TokenQKV`.

    Raises:
        IndexError: index out of range. Otherwise as :func:`qkv_example`.

    Source: article section 2.1.
    """
    ex = qkv_example(x, bias, d_k=d_k, d_v=d_v, bias_scale=bias_scale, seed=seed)
    L = x.shape[0]
    i = _int("index", index, -L, IndexError)
    if i >= L:
        raise IndexError(f"index must be in 0 … {L - 1} (or negative from the end), got {i}.")
    i %= L  # a negative index counts from the end
    return TokenQKV(
        index=i, bias=ex.bias, query=ex.Q[i], key=ex.K[i], value=ex.V[i],
        scores=ex.scores[i], weights=ex.weights[i], output=ex.output[i],
    )  # fmt: skip


def self_score_max_fraction(
    d: int, *, L: int = 8, n_sequences: int = 500, seed: int = 0
) -> float:
    """How often a token's own score x_i·x_i is the largest of its row of x xᵀ.

    For x with i.i.d. N(0, 1) entries, x_i·x_i = ‖x_i‖² ≈ d while x_i·x_j has SD √d,
    so as d grows each token almost always scores itself highest: scoring x against
    x directly mostly tells a token that it is itself. It is not a theorem (a short
    vector next to a long one in its direction loses; see
    attn_lib.data.short_and_long_tokens). With Q Kᵀ, W_Q ≠ W_K breaks this.

    Args:
        d: width of the tokens (≥ 1). L: tokens per sequence (≥ 2).
        n_sequences: sequences drawn (≥ 1). seed: the generator's seed.

    Returns:
        The fraction of the n_sequences·L rows whose largest entry is the diagonal one.

    Raises:
        ShapeError: d < 1 or L < 2. ValueError: n_sequences < 1.

    Source: article section 2.1 ("why not use X itself").
    """
    d = _dim("d", d)
    L = _dim("L", L, 2)
    n = _int("n_sequences", n_sequences, 1)
    x = torch.randn(n, L, d, generator=_generator(seed))  # (n, L, d)
    scores = x @ x.transpose(-2, -1)  # (n, L, L), symmetric
    return (scores.argmax(dim=-1) == torch.arange(L)).double().mean().item()


@dataclass(frozen=True)
class DotVsCosine:
    """Dot product and cosine similarity of (factor · a, b) for several factors.

    Attributes:
        factors: (n,); dot: (n,), factor · (a·b); cosine: (n,), the same for every factor > 0.
    """

    factors: torch.Tensor
    dot: torch.Tensor
    cosine: torch.Tensor


def dot_and_cosine(
    a: torch.Tensor | Sequence[float],
    b: torch.Tensor | Sequence[float],
    factors: Sequence[float] = (0.5, 1.0, 2.0, 4.0),
) -> DotVsCosine:
    """Scale a by each factor: the dot product with b scales too, the cosine does not.

    A raw dot product is not cosine similarity: it grows with the vectors' norms.

    Args:
        a, b: (d,) vectors of the same width, neither zero.
        factors: positive numbers.

    Returns:
        :class:`DotVsCosine`, float64.

    Raises:
        ShapeError: a, b not 1-D of the same width. ValueError: a zero vector, or a
            factor that is not finite and > 0.

    Source: article section 2.1 (which calls x·x "cosine similarity").
    """
    a64 = _vector("a", a).double()
    b64 = _vector("b", b).double()
    if a64.shape != b64.shape:
        raise ShapeError(f"a {fmt_shape(a64.shape)} and b {fmt_shape(b64.shape)} differ in width.")
    if not (bool(a64.any()) and bool(b64.any())):
        raise ValueError("a and b must be non-zero: the cosine of a zero vector is undefined.")
    f = torch.tensor([_positive("factor", x) for x in factors], dtype=torch.float64)  # (n,)
    scaled = f[:, None] * a64  # (n, d)
    dot = scaled @ b64  # (n,)
    cosine = dot / (scaled.norm(dim=-1) * b64.norm())  # (n,)
    return DotVsCosine(factors=f, dot=dot, cosine=cosine)


# ---------------------------------------------------------------------------
# Notebook 07: masks (article sections 3.2 and 4.1)
# ---------------------------------------------------------------------------


__all__ += [  # this section's public names, added to the list at the top
    "PADDING_SIDES",
    "keep_from_lengths",
]
