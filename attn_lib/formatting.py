"""Numbers as text that reads the same on every CPU.

Two CPUs can round float32 results differently in the last bits, which a tensor's repr shows
(``1.`` or ``1.0000``, ``-0.0000``); ``fmt_values`` prints a fixed number of decimals instead.
Used by every notebook from 01 on.
"""

from __future__ import annotations

import math

import torch


def _fmt_number(v: float, decimals: int) -> str:
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    text = f"{v:.{decimals}f}"
    if text.startswith("-") and float(text) == 0:  # -0.0000: round-off below the last digit
        text = text[1:]
    return text


def fmt_values(values: torch.Tensor | list | tuple | float, decimals: int = 4) -> str:
    """Format numbers with ``decimals`` decimals, as nested lists.

    A scalar gives ``"0.2500"``, a 1-D tensor ``"[0.2500, 0.7500]"``, a 2-D tensor one row per
    line, aligned. Integer and bool tensors print as integers. ``-0.0000`` prints as ``0.0000``.

    Examples:
        >>> fmt_values(torch.tensor([1.0, 1.0]))
        '[1.0000, 1.0000]'
        >>> print(fmt_values(torch.tensor([[0.5, -1e-9], [2.0, 0.25]]), decimals=2))
        [[0.50, 0.00],
         [2.00, 0.25]]
    """
    t = values if isinstance(values, torch.Tensor) else torch.as_tensor(values)
    t = t.detach().cpu()
    if t.dtype == torch.bool or not (t.is_floating_point() or t.is_complex()):
        flat = [str(int(v)) for v in t.reshape(-1).tolist()]
    else:
        flat = [_fmt_number(float(v), decimals) for v in t.double().reshape(-1).tolist()]
    if t.dim() == 0:
        return flat[0]
    width = max((len(s) for s in flat), default=0)
    cells = iter(s.rjust(width) for s in flat)

    def nest(shape: tuple[int, ...], indent: int) -> str:
        if len(shape) == 1:
            return "[" + ", ".join(next(cells) for _ in range(shape[0])) + "]"
        sep = "," + "\n" * (len(shape) - 1) + " " * (indent + 1)
        return "[" + sep.join(nest(shape[1:], indent + 1) for _ in range(shape[0])) + "]"

    return nest(tuple(t.shape), 0)
