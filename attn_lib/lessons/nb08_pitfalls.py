"""Notebook 08's experiments and checkers (torch only).

Used by notebook 08 (Pitfalls and numerics): "1 · transpose(-2, -1), transpose(1, 2), .T and
.mT" (the sweep of small 4-D shapes), "3 · A softmax that overflows, and the max trick" (the
row its dashboard moves), "4 · Dropout on the attention weights" (the settings its dashboard
shows), "7 · Check yourself" (the checkers and their solutions). Figures and dashboards:
``nb08_pitfalls_views``.

Shape legend: B batch, H heads, L_q query length, L_k key length, d_k, d_v.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..softmax import naive_softmax, stable_softmax
from ._checking import (
    _SEED,
    CheckResult,
    _call,
    _call_failed,
    _Case,
    _check_attention_cases,
    _name_of,
    _not_yet,
    _passed,
    _raised,
    _row_sums,
    _source,
    recording,
)
from ._examples import article_example

# ------------------------------------------------------------ transpose(1, 2) on 4-D tensors


def transpose_1_2_outcome(H: int, L_q: int, L_k: int, d_k: int, B: int = 2) -> str:
    """What ``query @ key.transpose(1, 2)`` does to attention on (B, H, L, d_k) tensors:
    "raises at the scores", "raises at weights @ V", "silently wrong" or "right"."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(B, H, n, d_k, generator=g) for n in (L_q, L_k, L_k))
    try:
        scores = q @ k.transpose(1, 2)  # the mistake: swaps heads and positions
    except RuntimeError:
        return "raises at the scores"
    try:
        out = torch.softmax(scores / math.sqrt(d_k), dim=-1) @ v
    except RuntimeError:
        return "raises at weights @ V"
    right = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d_k), dim=-1) @ v
    return "right" if out.shape == right.shape and torch.allclose(out, right) else "silently wrong"


def transpose_sweep(sizes: range = range(1, 6), heads: range = range(2, 6)) -> dict:
    """:func:`transpose_1_2_outcome` for every (H, L, d_k), self-attention (L_q = L_k = L)."""
    return {
        (h, n, d): transpose_1_2_outcome(h, n, n, d) for h in heads for n in sizes for d in sizes
    }


# ------------------------------------------------------------------ softmax overflow

OVERFLOW_OFFSETS = (0.0, -1.0, -2.0, -3.0)  # the row is largest + these: the same right weights
OVERFLOW_DTYPES = ("float32", "float16")


@dataclass(frozen=True)
class SoftmaxOverflow:
    """The row largest + OVERFLOW_OFFSETS through both softmaxes, computed in ``dtype``: exp
    overflows above ``threshold`` = log(finfo.max), Σ exp above ``sum_threshold``."""

    largest: float
    dtype: str
    naive: torch.Tensor
    stable: torch.Tensor
    threshold: float
    sum_threshold: float

    @property
    def failure(self) -> str:
        """ "none", "sum overflow" (every naive weight 0) or "nan" (exp itself overflowed)."""
        if bool(torch.isnan(self.naive).any()):
            return "nan"
        return "sum overflow" if self.naive.sum().item() < 0.5 else "none"

    @property
    def title(self) -> str:
        """The setting and what happened to the naive softmax, in one line."""
        what = {
            "none": "both agree",
            "sum overflow": f"Σ exp overflows (> {self.sum_threshold:.2f}): naive all 0",
            "nan": f"exp overflows (> {self.threshold:.2f}): naive NaN",
        }[self.failure]
        return f"{self.dtype}, largest {self.largest:g}: {what}"


def softmax_overflow(largest: float, dtype: str = "float32") -> SoftmaxOverflow:
    """Run the row largest + OVERFLOW_OFFSETS through the naive softmax and the max trick.

    Source: article section 4.3 (the max trick); torch.finfo.
    """
    offsets = torch.tensor(OVERFLOW_OFFSETS, dtype=torch.float64)
    scores = (largest + offsets).to(getattr(torch, dtype))  # (4,)
    naive, stable = naive_softmax(scores).float(), stable_softmax(scores).float()
    threshold = math.log(torch.finfo(scores.dtype).max)
    sum_threshold = threshold - torch.logsumexp(offsets, dim=0).item()
    return SoftmaxOverflow(float(largest), dtype, naive, stable, threshold, sum_threshold)


# ------------------------------------------------------------------ dropout placement

DROPOUT_PLACEMENTS = ("after softmax", "before softmax")
DROPOUT_SEED = 8  # one uniform draw: a cell drops when its number is below p


@dataclass(frozen=True)
class DropoutSetting:
    """Sequence 0 of the article's example under one dropout setting: the weights (L_q, L_k)
    that multiply V, where dropout zeroed a weight or a score (``dropped``), the row sums."""

    p: float
    placement: str
    training: bool
    weights: torch.Tensor
    dropped: torch.Tensor
    row_sums: torch.Tensor

    @property
    def title(self) -> str:
        """The setting in one line."""
        mode = "train()" if self.training else "eval()"
        return f"dropout {self.placement}, p = {self.p:.2f}, {mode}"


def dropout_setting(
    p: float = 0.3, placement: str = "after softmax", training: bool = True
) -> DropoutSetting:
    """Inverted dropout (dropped → 0, kept ÷ (1 − p)) on the weights or on the scores; which
    cells drop comes from one fixed uniform draw, so raising p only drops more cells.

    Source: article section 4.3; torch.nn.functional.dropout.
    """
    ex = article_example()
    scores = ex.Q[0] @ ex.K[0].transpose(-2, -1) / math.sqrt(ex.Q.shape[-1])  # (L_q, L_k)
    uniform = torch.rand(scores.shape, generator=torch.Generator().manual_seed(DROPOUT_SEED))
    dropped = (uniform < p) & training  # (L_q, L_k); nothing drops in eval mode
    if training and placement == "before softmax":
        scores = torch.where(dropped, 0.0, scores / (1 - p))
    weights = torch.softmax(scores, dim=-1)
    if training and placement == "after softmax":
        weights = torch.where(dropped, 0.0, weights / (1 - p))
    return DropoutSetting(p, placement, training, weights, dropped, weights.sum(dim=-1))


# ------------------------------------------------------------------ check yourself: softmax


def _softmax_cases() -> list[tuple[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(_SEED)
    large = torch.tensor([[1000.0, 999.0, 998.0, 990.0], [500.0, 0.0, -500.0, 250.0]])
    return [
        ("random scores (3, 5), float32", 2.0 * torch.randn(3, 5, generator=g)),
        ("large scores (2, 4), float32, up to 1000", large),
        ("scores (1, 4) in float16, up to 20", torch.tensor([[20.0, 19.0, 10.0, 0.0]]).half()),
        ("a batch (2, 3, 4), float32", 3.0 * torch.randn(2, 3, 4, generator=g)),
        ("a row (1, 4) with a masked key (-inf)", torch.tensor([[0.0, float("-inf"), 2.0, 1.0]])),
    ]


def _shifted_softmax(x: torch.Tensor, shift: torch.Tensor, dim: int = -1) -> torch.Tensor:
    e = (x - shift).exp()
    return e / e.sum(dim=dim, keepdim=True)


# (code, the mistake written out, what to say); tried in this order.
_SOFTMAX_MISTAKES = [
    ("naive", lambda x: _shifted_softmax(x, torch.zeros(())),
     ("Your softmax overflows: exp(x) is inf once x exceeds about 88.7 in float32 and 11.1 in "
      "float16, and inf / inf is NaN. Subtract each row's largest score before exp: "
      "`x - x.amax(dim=-1, keepdim=True)`; softmax(x + c) = softmax(x), so nothing else changes.")),
    ("global_max", lambda x: _shifted_softmax(x, x.max()),
     ("You subtract the largest score of the whole tensor, not of each row: a row far below it "
      "underflows to exp(-500) = 0 everywhere, and 0 / 0 is NaN. Use `x.amax(dim=-1, "
      "keepdim=True)`.")),
    ("min_not_max", lambda x: _shifted_softmax(x, x.amin(dim=-1, keepdim=True)),
     ("You subtract each row's minimum, so the exponents are ≥ 0 and can still overflow. "
      "Subtract the maximum: every exponent is then ≤ 0.")),
    ("softmax_dim", lambda x: _shifted_softmax(x, x.amax(dim=0, keepdim=True), dim=0),
     ("Your softmax normalises over dim 0 instead of the last dim. Each row must sum to 1: take "
      "the max and the sum over `dim=-1`.")),
    ("softmax_dim", lambda x: _shifted_softmax(x, x.amax(dim=-2, keepdim=True), dim=-2),
     ("Your softmax normalises over dim -2: the columns sum to 1, not the rows. Take the max and "
      "the sum over `dim=-1`.")),
]  # fmt: skip


def _same_values(got: object, want: torch.Tensor) -> bool:
    if not isinstance(got, torch.Tensor) or got.shape != want.shape:
        return False
    atol = 2e-3 if torch.float16 in (got.dtype, want.dtype) else 1e-5
    try:
        torch.testing.assert_close(
            got.float(), want.float(), rtol=1e-3, atol=atol, equal_nan=True, check_dtype=False
        )
    except AssertionError:
        return False
    return True


def _check_stable_softmax(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check ``fn(x)``: softmax over the last dim that does not overflow, on float32 scores up
    to 1000, float16 up to 20, a batch and a -inf score; ``mistake`` "naive", "global_max",
    "min_not_max", "softmax_dim" … Source: article section 4.3 (the max trick)."""
    name = _name_of(fn)
    cases = _softmax_cases()
    outs = []
    for case, x in cases:
        out, err = _call(fn, x.clone(), quiet=True)
        if err is not None:
            hint = ""
            reductions = re.findall(r"\.(?:max|amax)\(([^()]*)\)", _source(fn))
            if any("keepdim" not in args for args in reductions):
                hint = " Reduce with `x.amax(dim=-1, keepdim=True)`, which broadcasts against x."
            said = f"For {case} your function raised {_raised(err, first_line=True)}.{hint}"
            return _call_failed(name, err, said, verbose)
        if not isinstance(out, torch.Tensor) or out.shape != x.shape:
            got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            code = "wrong_shape" if isinstance(out, torch.Tensor) else "bad_return"
            return _not_yet(code, f"For {case} {name} returned {got}; return a tensor of x's "
                            f"shape (reduce with keepdim=True).", verbose)  # fmt: skip
        outs.append(out.detach())
    refs = [torch.softmax(x.float(), dim=-1) for _, x in cases]
    ok = [_same_values(o, r) for o, r in zip(outs, refs, strict=True)]
    if all(ok):
        return _passed(f"{name} matches torch.softmax on all {len(cases)} cases, including scores "
                       f"up to 1000 in float32 and 20 in float16, where exp(x) / Σ exp(x) "
                       f"overflows, and a row with a masked (-inf) key.", verbose)  # fmt: skip
    for code, mistake, text in _SOFTMAX_MISTAKES:
        if all(_same_values(o, mistake(x)) for o, (_, x) in zip(outs, cases, strict=True)):
            return _not_yet(code, text, verbose)
    if ok[0] and ok[3] and any(bool(torch.isnan(o).any()) for o in outs):
        return _not_yet("naive", _SOFTMAX_MISTAKES[0][2], verbose)
    i = ok.index(False)
    return _not_yet("unknown", f"For {cases[i][0]} your result differs from torch.softmax."
                    f"{_row_sums(outs[i])} Compare each step with exp(x − max) / Σ exp(x − max) "
                    f"over dim=-1.", verbose)  # fmt: skip


# ------------------------------------------------------------ check yourself: heads

_HEAD_CASES = (  # (B, H, L_q, L_k, d_k, d_v); the last two are where transpose(1, 2) runs
    ("B=2, H=3, L=5, d_k=4, d_v=6", (2, 3, 5, 5, 4, 6)),
    ("cross-attention B=2, H=2, L_q=3, L_k=5, d_k=4, d_v=3", (2, 2, 3, 5, 4, 3)),
    ("H = L = d_k = 4", (2, 4, 4, 4, 4, 4)),
    ("decoding one query against L_k = H = d_k = 3 keys", (1, 3, 1, 3, 3, 5)),
)


def _check_attention_4d(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check ``fn(query, key, value)`` on (B, H, L, d) tensors: softmax(Q Kᵀ / √d_k) V per head,
    the output (B, H, L_q, d_v) or (output, weights).

    Returns:
        CheckResult; ``mistake`` as ``_checking._check_attention_cases`` names it
        ("transpose_1_2", "scale_heads", "softmax_dim", "dot_T" …).

    Source: article section 4.2; Vaswani et al. 2017, sec. 3.2.2 (heads).
    """
    cases = []
    g = torch.Generator().manual_seed(_SEED + 8)
    for case, (B, H, L_q, L_k, d_k, d_v) in _HEAD_CASES:
        sizes = ((L_q, d_k), (L_k, d_k), (L_k, d_v))
        q, k, v = (torch.randn(B, H, n, d, generator=g) for n, d in sizes)
        cases.append(_Case(case, q, k, v, None))
    passed = (f"matches attn_lib on all {len(cases)} multi-head cases, including the two "
              f"shapes where key.transpose(1, 2) runs silently.")  # fmt: skip
    return _check_attention_cases(fn, cases, passed, verbose)


check_stable_softmax = recording("my_softmax", _check_stable_softmax)
check_attention_4d = recording("heads_attention", _check_attention_4d)


def solution_my_softmax(x: torch.Tensor) -> torch.Tensor:
    """Exercise 1 of notebook 08: softmax over the last dim with the max trick."""
    shifted = x - x.amax(dim=-1, keepdim=True)  # every exponent ≤ 0: exp cannot overflow
    e = shifted.exp()
    return e / e.sum(dim=-1, keepdim=True)


def solution_heads_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> tuple:
    """Exercise 2 of notebook 08: attention on (B, H, L, d) tensors."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))  # (B, H, L_q, L_k)
    weights = torch.softmax(scores, dim=-1)  # over the keys
    return weights @ value, weights  # (B, H, L_q, d_v), (B, H, L_q, L_k)
