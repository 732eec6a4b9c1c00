"""Softmax written out, its Jacobian, and the entropy of a row of weights.

``stable_softmax`` is the max trick (article section 4.3); ``naive_softmax`` is
kept naive on purpose so that notebook 08 can show it overflow.
"""

from __future__ import annotations

import torch

from .shapes import ShapeError, check_float_tensor, fmt_shape

__all__ = ["entropy", "naive_softmax", "softmax_jacobian", "stable_softmax"]


def _check_dim(x: torch.Tensor, dim: int) -> None:
    if not -x.dim() <= dim < max(x.dim(), 1):
        raise ShapeError(
            f"dim={dim} is out of range for a tensor of shape {fmt_shape(x.shape)} "
            f"({x.dim()}-D); attention normalises over the keys, dim=-1."
        )


def stable_softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax with the max trick: exp(x - max) / sum(exp(x - max)).

    Subtracting the row maximum changes nothing mathematically (softmax depends
    only on differences, softmax(x + c) = softmax(x)) but keeps every exponent
    ≤ 0, so exp never overflows. A slice that is entirely -inf has no maximum
    to subtract and gives NaN, as ``torch.softmax`` does.

    Args:
        x: scores (..., n), floating point (any shape; ``dim`` picks the axis).
        dim: the axis to normalise over (the keys: -1).

    Returns:
        Weights of x's shape and dtype; each slice along ``dim`` sums to 1.

    Raises:
        TypeError: x is not a floating-point tensor.
        ShapeError: ``dim`` is out of range.

    Source: Goodfellow, Bengio & Courville, Deep Learning, sec. 4.1; article section 4.3;
        torch.nn.functional.softmax.
    """
    check_float_tensor("x", x)
    _check_dim(x, dim)
    if x.numel() == 0:
        return x.clone()
    shifted = x - x.amax(dim=dim, keepdim=True)  # every entry now ≤ 0
    e = shifted.exp()
    return e / e.sum(dim=dim, keepdim=True)


def naive_softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax straight from the definition, exp(x) / sum(exp(x)): overflows on purpose.

    exp overflows to inf once x exceeds log(finfo.max): about 88.72 in float32 and
    11.09 in float16, and then inf / inf gives NaN. Use :func:`stable_softmax`
    (or ``torch.softmax``) for real work; this one exists to show the failure.

    Args:
        x: scores (..., n), floating point.
        dim: the axis to normalise over.

    Returns:
        Weights of x's shape and dtype, NaN where exp overflowed.

    Raises:
        TypeError: x is not a floating-point tensor.
        ShapeError: ``dim`` is out of range.

    Source: the softmax definition; article section 4.3.
    """
    check_float_tensor("x", x)
    _check_dim(x, dim)
    e = x.exp()
    return e / e.sum(dim=dim, keepdim=True)


def softmax_jacobian(weights: torch.Tensor) -> torch.Tensor:
    """Jacobian of softmax at a row of weights p: diag(p) - p pᵀ.

    Entry (i, j) is ∂p_i/∂s_j. As a row saturates (p → one-hot) every entry goes
    to 0, which is why gradients vanish through a saturated softmax.

    Args:
        weights: p, (..., n), floating point, the output of a softmax over dim -1.

    Returns:
        (..., n, n), same dtype.

    Raises:
        TypeError: weights is not a floating-point tensor.
        ShapeError: weights is 0-D.

    Source: e.g. Bishop, Pattern Recognition and Machine Learning, eq. (4.106).
    """
    check_float_tensor("weights", weights)
    if weights.dim() == 0:
        raise ShapeError("weights must have at least 1 dim (..., n), got a 0-D tensor.")
    return torch.diag_embed(weights) - weights.unsqueeze(-1) * weights.unsqueeze(-2)


def entropy(weights: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Shannon entropy of each row of weights, in nats: -Σ p log p (0 log 0 = 0).

    0 for a one-hot row; log n for a uniform row over n keys.

    Args:
        weights: (..., n), floating point, non-negative, rows summing to 1.
        dim: the axis holding the distribution.

    Returns:
        (...), the entropy of each row, in nats, same dtype.

    Raises:
        TypeError: weights is not a floating-point tensor.
        ShapeError: ``dim`` is out of range.

    Source: Cover & Thomas, Elements of Information Theory, eq. (2.1), natural log.
    """
    check_float_tensor("weights", weights)
    _check_dim(weights, dim)
    if weights.numel() and bool(weights.amin() < 0):
        raise ValueError(
            f"weights must be non-negative (a distribution), found {weights.amin().item():.4g}; "
            f"pass softmax outputs, not scores."
        )
    plogp = torch.where(
        weights > 0, weights * weights.clamp_min(torch.finfo(weights.dtype).tiny).log(), 0.0
    )
    return 0.0 - plogp.sum(dim=dim)  # 0.0 - x, not -x: a one-hot row gives 0.0, not -0.0
