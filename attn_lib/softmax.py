"""Softmax written out (stable and naive), its Jacobian, and the entropy of a row of weights.

Used by notebooks 03 and 11 (saturation: the Jacobian, entropy), 08 (the max trick against the
naive softmax's overflow; entropy) and 09 (entropy).
"""

from __future__ import annotations

import torch

from .checks import ShapeError, check_float_tensor, fmt_shape

__all__ = ["entropy", "naive_softmax", "softmax_jacobian", "stable_softmax"]


def _check_dim(x: torch.Tensor, dim: int) -> None:
    if not -x.dim() <= dim < max(x.dim(), 1):
        raise ShapeError(
            f"dim={dim} is out of range for a tensor of shape {fmt_shape(x.shape)} "
            f"({x.dim()}-D); attention normalises over the keys, dim=-1.")  # fmt: skip


def stable_softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax with the max trick: exp(x - max) / Σ exp(x - max), which never overflows.

    softmax(x + c) = softmax(x), so subtracting the maximum changes nothing but keeps every
    exponent ≤ 0. A slice that is all -inf gives NaN, as in ``torch.softmax``.

    Args:
        x: scores (..., n), floating point.
        dim: the axis to normalise over (the keys: -1).

    Returns:
        x's shape and dtype; each slice along ``dim`` sums to 1.

    Raises:
        TypeError: x is not a floating-point tensor.
        ShapeError: ``dim`` is out of range.

    Source: article section 4.3; torch.nn.functional.softmax.
    """
    check_float_tensor("x", x)
    _check_dim(x, dim)
    if x.numel() == 0:
        return x.clone()
    e = (x - x.amax(dim=dim, keepdim=True)).exp()  # every exponent ≤ 0
    return e / e.sum(dim=dim, keepdim=True)


def naive_softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax from the definition, exp(x) / Σ exp(x): NaN once exp overflows, on purpose.

    exp overflows above log(finfo.max): about 88.72 in float32, 11.09 in float16.

    Args:
        x: scores (..., n), floating point.
        dim: the axis to normalise over.

    Returns:
        x's shape and dtype, NaN where exp overflowed.

    Raises:
        TypeError: x is not a floating-point tensor.
        ShapeError: ``dim`` is out of range.

    Source: article section 4.3.
    """
    check_float_tensor("x", x)
    _check_dim(x, dim)
    e = x.exp()
    return e / e.sum(dim=dim, keepdim=True)


def softmax_jacobian(weights: torch.Tensor) -> torch.Tensor:
    """The Jacobian of softmax at a row of weights p, diag(p) - p pᵀ: entry (i, j) = ∂p_i/∂s_j.

    Every entry goes to 0 as the row saturates (p → one-hot): gradients vanish.

    Args:
        weights: p (..., n), floating point, a softmax over dim -1.

    Returns:
        (..., n, n), same dtype.

    Raises:
        TypeError: weights is not a floating-point tensor.
        ShapeError: weights is 0-D.
    """
    check_float_tensor("weights", weights)
    if weights.dim() == 0:
        raise ShapeError("weights must have at least 1 dim (..., n), got a 0-D tensor.")
    return torch.diag_embed(weights) - weights.unsqueeze(-1) * weights.unsqueeze(-2)


def entropy(weights: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """The entropy of each row of weights in nats, -Σ p log p (0 log 0 = 0).

    0 for a one-hot row, log n for a uniform row over n keys.

    Args:
        weights: (..., n), non-negative, rows summing to 1.
        dim: the axis holding the distribution.

    Returns:
        (...), same dtype.

    Raises:
        TypeError: weights is not a floating-point tensor.
        ShapeError: ``dim`` is out of range.
        ValueError: a negative weight (scores passed instead of weights).
    """
    check_float_tensor("weights", weights)
    _check_dim(weights, dim)
    if weights.numel() and bool(weights.amin() < 0):
        raise ValueError(
            f"weights must be non-negative (a distribution), found {weights.amin().item():.4g}; "
            f"pass softmax outputs, not scores.")  # fmt: skip
    tiny = torch.finfo(weights.dtype).tiny
    plogp = torch.where(weights > 0, weights * weights.clamp_min(tiny).log(), 0.0)
    return 0.0 - plogp.sum(dim=dim)  # 0.0 - x, not -x: a one-hot row gives 0.0, not -0.0
