"""Sinusoidal positional encodings (Vaswani et al. 2017, sec. 3.5)."""

from __future__ import annotations

import math

import torch

__all__ = ["sinusoidal_positional_encoding"]


def sinusoidal_positional_encoding(
    L: int, d_model: int, *, base: float = 10000.0, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """The fixed sinusoidal encoding: PE[pos, 2i] = sin(pos / base^(2i/d_model)), PE[pos, 2i+1] = cos(…).

    Self-attention without positions is permutation-equivariant (article 1.2):
    adding PE to the token embeddings is what lets it tell 我爱你 from 你爱我.

    Args:
        L: number of positions (≥ 1).
        d_model: width (≥ 1); for an odd width the last column is a sine.
        base: the wavelength base, 10000 in the paper.
        dtype: a floating dtype.

    Returns:
        (L, d_model), values in [-1, 1]; row ``pos`` encodes position ``pos``.

    Raises:
        TypeError: L or d_model not an int, or dtype not floating.
        ValueError: L < 1, d_model < 1, or base ≤ 1.

    Source: Vaswani et al. 2017, "Attention Is All You Need", sec. 3.5.
    """
    for name, n in (("L", L), ("d_model", d_model)):
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError(f"{name} must be an int, got {type(n).__name__}.")
        if n < 1:
            raise ValueError(f"{name} must be ≥ 1, got {n}.")
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be floating point, got {dtype}.")
    if isinstance(base, bool) or not isinstance(base, (int, float)) or not 1 < base < math.inf:
        raise ValueError(f"base must be a finite number > 1, got {base!r}.")
    pos = torch.arange(L, dtype=torch.float64)[:, None]  # (L, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (ceil(d_model/2),)
    angle = pos / base ** (two_i / d_model)  # (L, ceil(d_model/2))
    pe = torch.empty(L, d_model, dtype=torch.float64)
    pe[:, 0::2] = angle.sin()
    pe[:, 1::2] = angle.cos()[:, : d_model // 2]
    return pe.to(dtype)
