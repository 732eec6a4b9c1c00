"""Sinusoidal positional encodings (Vaswani et al. 2017, sec. 3.5); used by notebook 01."""

from __future__ import annotations

import math

import torch

from .checks import check_float_dtype, check_size

__all__ = ["sinusoidal_positional_encoding"]


def sinusoidal_positional_encoding(L: int, d_model: int, *, base: float = 10000.0,
                                   dtype: torch.dtype = torch.float32) -> torch.Tensor:  # fmt: skip
    """The fixed sinusoidal encoding: PE[pos, 2i] = sin(pos / base^(2i/d_model)), PE[pos, 2i+1] = cos(…).

    Added to the token embeddings, it lets attention tell 我爱你 from 你爱我 (article 1.2).

    Args:
        L: number of positions (an int ≥ 1).
        d_model: width (an int ≥ 1); for an odd width the last column is a sine.
        base: the wavelength base, 10000 in the paper.
        dtype: float32, float64, float16 or bfloat16.

    Returns:
        (L, d_model), values in [-1, 1]; row ``pos`` encodes position ``pos``.

    Raises:
        TypeError: L or d_model not an int, or dtype not floating.
        ValueError: L < 1, d_model < 1, or base ≤ 1.

    Source: Vaswani et al. 2017, "Attention Is All You Need", sec. 3.5.
    """
    L, d_model = check_size("L", L), check_size("d_model", d_model)
    check_float_dtype("dtype", dtype)
    if isinstance(base, bool) or not isinstance(base, (int, float)) or not 1 < base < math.inf:
        raise ValueError(f"base must be a finite number > 1, got {base!r}.")
    pos = torch.arange(L, dtype=torch.float64)[:, None]  # (L, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (ceil(d_model/2),)
    angle = pos / base ** (two_i / d_model)  # (L, ceil(d_model/2))
    pe = torch.empty(L, d_model, dtype=torch.float64)
    pe[:, 0::2] = angle.sin()
    pe[:, 1::2] = angle.cos()[:, : d_model // 2]
    return pe.to(dtype)
