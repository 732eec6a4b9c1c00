"""Notebook 08's data, experiments and checkers (torch only).

Used by notebook 08 (Pitfalls and numerics), sections "4 · A softmax that overflows, and the
max trick (4.3)", "5 · Dropout on the attention weights (4.3)", "9 · Check yourself".
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache

import torch

from ..core import SingleHeadAttention, scaled_dot_product_attention
from ..softmax import naive_softmax, stable_softmax
from ._checking import (
    _ATTENTION_MISTAKES,
    _SEED,
    CheckResult,
    _call,
    _call_attention_seeded,
    _call_failed,
    _Case,
    _close,
    _explain_error,
    _finish,
    _is_random,
    _matches,
    _name_of,
    _not_written,
    _not_yet,
    _passed,
    _raised,
    _random_text,
    _row_sums,
    _source,
    _value_difference,
    _wrong_attention,
)
from ._examples import ARTICLE_BATCH, ARTICLE_SEQ_LEN, article_example
from ._experiments import _choice

DROPOUT_PLACEMENTS = ("after softmax", "before softmax", "none")
# Seed of the one uniform draw that decides which cells drop: a cell drops at rate p when
# its uniform number is below p, so raising p only ever drops more cells (a slider reads
# smoothly) and every setting is reproducible.
DROPOUT_SEED = 8


@dataclass(frozen=True)
class DropoutSetting:
    """The article's example with dropout placed after the softmax, before it, or nowhere.

    Attributes:
        p: dropout probability, in [0, 1).
        placement: "after softmax" (on the weights, before V: what nn.MultiheadAttention
            and attn_lib do), "before softmax" (on the scores) or "none".
        training: dropout acts only in training mode.
        batch_index: which sequence of the example (0 or 1).
        scores: (L_q, L_k) = (4, 4), float32, Q Kᵀ / √d_k before any dropout.
        weights: (L_q, L_k), float32, the weights that multiply V.
        dropped: (L_q, L_k) bool, True where dropout zeroed the weight (after softmax)
            or the score (before softmax); all False when dropout does not act.
        row_sums: (L_q,), float32, each row's sum.
        keep: (L_q, L_k) bool, all True (no mask here; for the shared heatmap view).
        key_labels: "0" … "3".

    Source: article section 4.3; torch.nn.functional.dropout (inverted dropout).
    """

    p: float
    placement: str
    training: bool
    batch_index: int
    scores: torch.Tensor
    weights: torch.Tensor
    dropped: torch.Tensor
    row_sums: torch.Tensor
    keep: torch.Tensor
    key_labels: tuple[str, ...]

    @property
    def active(self) -> bool:
        """Whether dropout changed anything: training mode, a placement and p > 0."""
        return self.training and self.placement != "none" and self.p > 0

    @property
    def title(self) -> str:
        """A one-line description of the setting, for figure titles."""
        mode = "training" if self.training else "eval"
        where = "no dropout" if self.placement == "none" else f"dropout {self.placement}"
        return f"{where} · p = {self.p:.2f} · {mode} mode"


def dropout_setting(
    p: float = 0.2, placement: str = "after softmax", training: bool = True, batch_index: int = 0
) -> DropoutSetting:
    """Weights of the article's example under one dropout setting (a pure function).

    Inverted dropout, as ``torch.nn.functional.dropout``: a dropped entry becomes 0 and
    every kept entry is divided by 1 − p, so the expected value of each entry is
    unchanged. "after softmax" drops weights: rows then sum to 1 only on average.
    "before softmax" drops scores: a dropped score becomes 0 (weight exp(0)/Σ, not
    "ignored") and the kept ones are divided by 1 − p; every row still sums to 1.
    Which cells drop comes from one fixed uniform draw (seed :data:`DROPOUT_SEED`):
    a cell drops when its number is below p.

    Args:
        p: dropout probability in [0, 1).
        placement: one of :data:`DROPOUT_PLACEMENTS`.
        training: True applies dropout, False (eval mode) never does.
        batch_index: 0 or 1.

    Returns:
        DropoutSetting with scores, weights, dropped (4, 4) and row_sums (4,).

    Raises:
        TypeError: p not a real number, training not a bool.
        ValueError: p outside [0, 1), an unknown placement, batch_index not 0 or 1.

    Source: article section 4.3; torch.nn.functional.dropout; torch.nn.MultiheadAttention
        (dropout on the attention weights).
    """
    if isinstance(p, bool) or not isinstance(p, int | float):
        raise TypeError(f"p must be a real number in [0, 1), got {type(p).__name__}.")
    if not 0.0 <= float(p) < 1.0:
        raise ValueError(f"p must be in [0, 1), got {p}: it is the probability of dropping.")
    if placement not in DROPOUT_PLACEMENTS:
        raise ValueError(f"placement must be one of {DROPOUT_PLACEMENTS}, got {placement!r}.")
    if not isinstance(training, bool):
        raise TypeError(f"training must be True or False, got {training!r}.")
    if isinstance(batch_index, bool) or batch_index not in range(ARTICLE_BATCH):
        raise ValueError(f"batch_index must be 0 or 1, got {batch_index!r}.")
    cached = _dropout_setting(round(float(p), 6), placement, training, batch_index)
    return replace(
        cached,
        scores=cached.scores.clone(),
        weights=cached.weights.clone(),
        dropped=cached.dropped.clone(),
        row_sums=cached.row_sums.clone(),
        keep=cached.keep.clone(),
    )


@cache
def _dropout_uniform() -> torch.Tensor:
    g = torch.Generator().manual_seed(DROPOUT_SEED)
    return torch.rand(ARTICLE_SEQ_LEN, ARTICLE_SEQ_LEN, generator=g)  # (L_q, L_k)


@cache
def _dropout_setting(p: float, placement: str, training: bool, batch_index: int) -> DropoutSetting:
    ex = article_example()
    Q, K = ex.Q[batch_index], ex.K[batch_index]  # (L, d_k) each
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])  # (L_q, L_k)
    active = training and placement != "none" and p > 0
    dropped = (_dropout_uniform() < p) if active else torch.zeros_like(scores, dtype=torch.bool)
    if active and placement == "before softmax":
        weights = torch.softmax(torch.where(dropped, 0.0, scores / (1 - p)), dim=-1)
    else:
        weights = torch.softmax(scores, dim=-1)  # (L_q, L_k)
        if active:
            weights = torch.where(dropped, 0.0, weights / (1 - p))
    L = ARTICLE_SEQ_LEN
    return DropoutSetting(
        p=p,
        placement=placement,
        training=training,
        batch_index=batch_index,
        scores=scores,
        weights=weights,
        dropped=dropped,
        row_sums=weights.sum(dim=-1),  # (L_q,)
        keep=torch.ones(L, L, dtype=torch.bool),
        key_labels=tuple(str(j) for j in range(L)),
    )


# One row of scores: the slider's value plus these offsets. Softmax depends only on the
# differences, so the right answer is the same for every value; only the naive formula
# changes, when exp overflows.
OVERFLOW_OFFSETS = (0.0, -1.0, -2.0, -3.0)
OVERFLOW_DTYPES = ("float32", "float16")


@dataclass(frozen=True)
class SoftmaxOverflow:
    """One row of scores through a naive softmax and through the max trick.

    Attributes:
        largest: the largest score of the row (the row is largest + OVERFLOW_OFFSETS).
        dtype: "float32" or "float16", the dtype of the computation.
        scores: (n,) the scores, in ``dtype``.
        naive: (n,) float32, exp(x) / Σ exp(x) computed in ``dtype``: every weight 0
            once the sum overflows, NaN (inf / inf) once exp(largest) itself does.
        stable: (n,) float32, exp(x − max) / Σ exp(x − max) computed in ``dtype``.
        threshold: log(finfo(dtype).max): exp(x) overflows for x above it (88.72 in
            float32, 11.09 in float16).
        sum_threshold: the largest score above which Σ exp(x) overflows, a little below
            ``threshold`` (threshold − log Σ exp(offsets)).
        exp_largest: exp(largest) in ``dtype`` (inf once largest > threshold).

    Source: article section 4.3; torch.finfo.
    """

    largest: float
    dtype: str
    scores: torch.Tensor
    naive: torch.Tensor
    stable: torch.Tensor
    threshold: float
    sum_threshold: float
    exp_largest: float

    @property
    def failure(self) -> str:
        """"none", "sum overflow" (the naive row is all 0) or "nan" (it holds NaN)."""
        if bool(torch.isnan(self.naive).any()):
            return "nan"
        if abs(self.naive.sum().item() - 1.0) > 1e-2:
            return "sum overflow"
        return "none"

    @property
    def naive_sum(self) -> float:
        """Sum of the naive row: 1, 0 once the sum overflowed, NaN once exp did."""
        return self.naive.sum().item()

    @property
    def stable_sum(self) -> float:
        """Sum of the stable row (1 up to round-off)."""
        return self.stable.sum().item()


def softmax_overflow(largest: float, dtype: str = "float32") -> SoftmaxOverflow:
    """Run one row of scores, largest + :data:`OVERFLOW_OFFSETS`, through both softmaxes.

    The naive softmax exp(x) / Σ exp(x) fails in two steps as the scores grow: first
    the sum overflows to inf and every weight becomes a finite number divided by inf,
    0; then exp(largest) itself overflows and inf / inf gives NaN. The max trick
    (subtract the row's largest score, so every exponent is ≤ 0) returns the same
    weights for every value of ``largest``: softmax depends only on differences.

    Args:
        largest: the largest score in the row, a finite number in [0, finfo(dtype).max].
        dtype: "float32" or "float16".

    Returns:
        :class:`SoftmaxOverflow`.

    Raises:
        TypeError: largest not a real number.
        ValueError: largest outside [0, finfo(dtype).max] or not finite; an unknown dtype.

    Source: article section 4.3 (the max trick); attn_lib.naive_softmax / stable_softmax.
    """

    if isinstance(largest, bool) or not isinstance(largest, int | float):
        raise TypeError(f"largest must be a real number, got {type(largest).__name__}.")
    dtype = _choice("dtype", dtype, OVERFLOW_DTYPES)
    torch_dtype = getattr(torch, dtype)
    info = torch.finfo(torch_dtype)
    largest = float(largest)
    if not (math.isfinite(largest) and 0.0 <= largest <= info.max):
        raise ValueError(
            f"largest must be a finite number in [0, {info.max:g}] for {dtype}, got {largest}."
        )
    offsets = torch.tensor(OVERFLOW_OFFSETS, dtype=torch.float64)
    scores = (largest + offsets).to(torch_dtype)  # (n,)
    threshold = math.log(info.max)
    return SoftmaxOverflow(
        largest=largest,
        dtype=dtype,
        scores=scores,
        naive=naive_softmax(scores).float(),
        stable=stable_softmax(scores).float(),
        threshold=threshold,
        sum_threshold=threshold - torch.logsumexp(offsets, dim=0).item(),
        exp_largest=torch.tensor(largest, dtype=torch_dtype).exp().item(),
    )


def _softmax_cases() -> list[tuple[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(_SEED)
    return [
        ("random scores (3, 5), float32", 2.0 * torch.randn(3, 5, generator=g)),
        (
            "large scores (2, 4), float32, up to 1000",
            torch.tensor([[1000.0, 999.0, 998.0, 990.0], [500.0, 0.0, -500.0, 250.0]]),
        ),
        ("scores (1, 4) in float16, up to 20", torch.tensor([[20.0, 19.0, 10.0, 0.0]]).half()),
        ("a batch (2, 3, 4), float32", 3.0 * torch.randn(2, 3, 4, generator=g)),
        ("a row (1, 4) with a masked key (-inf)", torch.tensor([[0.0, float("-inf"), 2.0, 1.0]])),
    ]


def _softmax_variant(x: torch.Tensor, how: str) -> torch.Tensor:
    """Softmax written with one deliberate mistake (computed in x's dtype)."""
    if how == "naive":
        e = x.exp()
        return e / e.sum(dim=-1, keepdim=True)
    if how == "global_max":
        e = (x - x.max()).exp()
        return e / e.sum(dim=-1, keepdim=True)
    if how == "min_not_max":
        e = (x - x.amin(dim=-1, keepdim=True)).exp()
        return e / e.sum(dim=-1, keepdim=True)
    if how in ("dim0", "dim-2"):
        dim = 0 if how == "dim0" else -2
        e = (x - x.amax(dim=dim, keepdim=True)).exp()
        return e / e.sum(dim=dim, keepdim=True)
    raise ValueError(how)


_SOFTMAX_MISTAKES = [
    (
        "naive",
        "naive",
        (
            "Your softmax overflows: on large scores it returns NaN (or zeros). exp(x) is inf "
            "once x exceeds about 88.7 in float32 and 11.1 in float16, and inf / inf is NaN. "
            "Subtract each row's largest score before exp: `x - x.amax(dim=-1, keepdim=True)`. "
            "It changes nothing mathematically, since softmax(x + c) = softmax(x)."
        ),
    ),
    (
        "global_max",
        "global_max",
        (
            "You subtract the largest score of the whole tensor, not of each row. A row whose "
            "scores all lie far below that maximum underflows to exp(-500) = 0 everywhere, and "
            "0 / 0 is NaN. Subtract each row's own maximum: `x.amax(dim=-1, keepdim=True)`."
        ),
    ),
    (
        "min_not_max",
        "min_not_max",
        (
            "You subtract each row's minimum instead of its maximum: the exponents are then "
            "≥ 0 and can still overflow. Subtract the maximum, so that every exponent is ≤ 0."
        ),
    ),
    (
        "softmax_dim",
        "dim0",
        (
            "Your softmax normalises over dim 0 (the rows, or the batch) instead of over the "
            "last dim. Each row must sum to 1: take the max and the sum over `dim=-1`."
        ),
    ),
    (
        "softmax_dim",
        "dim-2",
        (
            "Your softmax normalises over dim -2 instead of the last dim: the columns sum to "
            "1, not the rows. Take the max and the sum over `dim=-1`."
        ),
    ),
]


def _same_values(got: torch.Tensor, want: torch.Tensor, atol: float) -> bool:
    if not isinstance(got, torch.Tensor) or got.shape != want.shape:
        return False
    try:
        torch.testing.assert_close(
            got.float(), want.float(), rtol=1e-3, atol=atol, equal_nan=True, check_dtype=False
        )
    except AssertionError:
        return False
    return True


def check_stable_softmax(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check a hand-written softmax over the last dim that must not overflow.

    ``fn(x)`` receives scores of any shape (…, n) and must return softmax over the last
    dim, exp(x − max) / Σ exp(x − max) with each row's own max, in a dtype whose values
    match (computing in float32 for a float16 input is fine). Cases: random float32
    scores (3, 5); large float32 scores (up to 1000); float16 scores up to 20 (where exp
    overflows past 11.09); a 3-D batch (2, 3, 4); a row with a -inf (masked) score.

    Args:
        fn: the function to check.
        verbose: print the feedback paragraph.

    Returns:
        CheckResult; ``mistake`` is None or one of: "not_written", "error", "bad_return",
        "wrong_shape", "naive", "global_max", "min_not_max", "softmax_dim", "unknown".

    Source: article section 4.3 (the max trick); torch.softmax.
    """
    name = _name_of(fn)
    cases = _softmax_cases()
    outs: list[torch.Tensor] = []
    for case, x in cases:
        out, err = _call(fn, x.clone(), quiet=True)
        if err is not None:
            src = _source(fn)
            hint = ""
            if any("keepdim" not in a for a in re.findall(r"\.(?:max|amax)\(([^()]*)\)", src)):
                hint = (
                    " `x.max(dim=-1)` drops the reduced dim (and returns values and indices): "
                    "use `x.amax(dim=-1, keepdim=True)` so that it broadcasts against x."
                )
            return _call_failed(
                name,
                err,
                f"For {case} your function raised {_raised(err, first_line=True)}.{hint}",
                verbose,
            )
        if not isinstance(out, torch.Tensor):
            return _not_yet("bad_return", f"For {case} {name} returned "
                           f"{type(out).__name__}; return a tensor of x's shape.",
                           verbose)  # fmt: skip
        if out.shape != x.shape:
            return _not_yet("wrong_shape", f"For {case}, x has shape "
                           f"{tuple(x.shape)} but your result has shape {tuple(out.shape)}; "
                           f"softmax keeps the shape. If you reduced with max or sum, pass "
                           f"keepdim=True.", verbose)  # fmt: skip
        outs.append(out.detach())
    refs = [torch.softmax(x.float(), dim=-1) for _, x in cases]
    atols = [2e-3 if x.dtype == torch.float16 else 1e-5 for _, x in cases]
    ok = [_same_values(o, r, a) for o, r, a in zip(outs, refs, atols, strict=True)]
    if all(ok):
        return _passed(
            f"{name} matches torch.softmax on all {len(cases)} cases, including scores "
            f"up to 1000 in float32 and up to 20 in float16, where a naive exp(x) / Σ exp(x) "
            f"overflows, and a row with a masked (-inf) key.",
            verbose,
        )
    for code, how, text in _SOFTMAX_MISTAKES:
        variants = []
        for _, x in cases:
            try:
                variants.append(_softmax_variant(x, how))
            except Exception:  # noqa: BLE001 - the mistake does not apply to this case
                variants.append(None)
        if all(
            v is not None and _same_values(o, v, a)
            for o, v, a in zip(outs, variants, atols, strict=True)
        ):
            return _not_yet(code, text, verbose)
    if ok[0] and ok[3] and not all(ok[1:3]) and any(bool(torch.isnan(o).any()) for o in outs):
        return _not_yet("naive", f"{_SOFTMAX_MISTAKES[0][2]}", verbose)
    i = ok.index(False)
    return _not_yet(
        "unknown",
        f"For {cases[i][0]} your result differs from torch.softmax: "
        f"{_value_difference(outs[i].float(), refs[i])}.{_row_sums(outs[i])} Compare each "
        f"step with exp(x − max) "
        f"/ Σ exp(x − max), max and sum taken over dim=-1 with keepdim=True.",
        verbose,
    )


# Attention on multi-head (B, H, L, d) tensors: cases whose sizes all differ, plus the two
# shapes where key.transpose(1, 2) runs without an error.
_HEAD_CASES = (
    ("B=2, H=3, L=5, d_k=4, d_v=6", (2, 3, 5, 5, 4, 6)),
    ("B=2, H=2, L_q=3, L_k=5, d_k=4, d_v=3 (cross-attention)", (2, 2, 3, 5, 4, 3)),
    ("B=2, H=4, L=4, d_k=4, d_v=4 (H = L = d_k)", (2, 4, 4, 4, 4, 4)),
    ("decoding one token, B=1, H=3, L_q=1, L_k=3, d_k=3, d_v=5 (L_k = H = d_k)",
     (1, 3, 1, 3, 3, 5)),
)  # fmt: skip


def _head_cases() -> list[_Case]:
    g = torch.Generator().manual_seed(_SEED + 8)
    cases = []
    for name, (B, H, L_q, L_k, d_k, d_v) in _HEAD_CASES:
        q = torch.randn(B, H, L_q, d_k, generator=g)
        k = torch.randn(B, H, L_k, d_k, generator=g)
        v = torch.randn(B, H, L_k, d_v, generator=g)
        cases.append(_Case(name, q, k, v, None))
    return cases


def _heads_transpose_1_2(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, m: object) -> tuple:
    scores = torch.matmul(q, k.transpose(1, 2)) / math.sqrt(q.shape[-1])  # swaps H and L
    weights = torch.softmax(scores, dim=-1)
    return torch.matmul(weights, v), weights


def _heads_softmax_dim1(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, m: object) -> tuple:
    return _wrong_attention(q, k, v, None, scale=1 / math.sqrt(q.shape[-1]), softmax_dim=1)


_TRANSPOSE_1_2_TEXT = (
    "Your function computes `query @ key.transpose(1, 2)`. On a 4-D key (B, H, L_k, d_k) "
    "dims 1 and 2 are the heads and the positions, so this swaps heads with positions "
    "instead of positions with features. Where H, L and d_k differ it raised an error; "
    "but with H = L = d_k = 4, and when decoding one token against L_k = H = d_k = 3 "
    "cached keys, it ran without any error and returned wrong numbers. Use "
    "`key.transpose(-2, -1)` (or `key.mT`): it swaps the last two dims whatever comes "
    "before them."
)


def check_attention_4d(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check hand-written attention on multi-head tensors (B, H, L, d), and name the mistake.

    ``fn(query, key, value)`` receives query (B, H, L_q, d_k), key (B, H, L_k, d_k),
    value (B, H, L_k, d_v), float32, and must return softmax(Q Kᵀ / √d_k) V per batch
    element and head, (B, H, L_q, d_v), or the pair (output, weights (B, H, L_q, L_k)).
    Cases: (2, 3, 5, 5, 4, 6) and a cross-attention (2, 2, 3, 5, 4, 3) as (B, H, L_q,
    L_k, d_k, d_v), whose sizes differ, and the two shapes where the classic
    ``key.transpose(1, 2)`` runs silently: H = L = d_k = 4, and decoding one query
    against L_k = H = d_k = 3 keys.

    Args:
        fn: the function to check.
        verbose: print the feedback paragraph.

    Returns:
        CheckResult; ``mistake`` is None or one of: "not_written", "bad_return",
        "transpose_1_2", "dot_T", "transpose_dims", "error", "scale_d_k", "no_scale",
        "scale_multiplied", "scale_length", "scale_heads", "scale_d_v", "scale_batch",
        "scale_after_softmax", "reshape_not_transpose", "no_softmax", "softmax_dim",
        "scores_transposed", "dropout_on", "wrong_shape", "weights_wrong", "unknown".

    Source: article section 4.2 (transpose(-2, -1), not transpose(1, 2)); Vaswani et al.
        2017, sec. 3.2.2 (heads).
    """
    name = _name_of(fn)
    cases = _head_cases()
    outcomes = []
    for outcome in _call_attention_seeded(fn, cases, _SEED):
        if isinstance(outcome.error, NotImplementedError):
            return _not_written(name, verbose)
        if outcome.bad_return:
            return _finish(False, "bad_return", f"{name} {outcome.bad_return}", verbose)
        outcomes.append(outcome)
    refs = [scaled_dot_product_attention(c.query, c.key, c.value) for c in cases]
    ok = [
        o.error is None
        and _close(o.output, ref_out)
        and (o.weights is None or _close(o.weights, ref_w))
        for o, (ref_out, ref_w) in zip(outcomes, refs, strict=True)
    ]
    if all(ok):
        return _passed(
            f"{name} matches attn_lib on all {len(cases)} multi-head cases, including "
            f"H = L = d_k and one-token decoding, the shapes where key.transpose(1, 2) would "
            f"have run silently.",
            verbose,
        )
    src = _source(fn)
    uses_1_2 = bool(re.search(r"transpose\(\s*1\s*,\s*2\s*\)|transpose\(\s*2\s*,\s*1\s*\)", src))
    if _matches(outcomes, _heads_transpose_1_2, cases) or (
        uses_1_2 and not ok[2] and not ok[3]
    ):
        return _not_yet("transpose_1_2", f"{_TRANSPOSE_1_2_TEXT}", verbose)
    mistakes = [m for m in _ATTENTION_MISTAKES if not m[0].startswith("mask")]
    mistakes.append((
        "softmax_dim",
        (
            "Your softmax normalises over dim 1, the heads, instead of over the keys: each "
            "query's weights over the keys must sum to 1. Use `torch.softmax(scores, dim=-1)`."
        ),
        _heads_softmax_dim1,
    ))  # fmt: skip
    mistakes.insert(0, (
        "scale_heads",
        (
            "Your scores are divided by √H, the number of heads: on a 4-D query (B, H, L_q, "
            "d_k), query.size(1) is H, not d_k. Each head's dot products are d_k long: use "
            "`math.sqrt(query.size(-1))`, the last dim, whatever the rank."
        ),
        lambda q, k, v, m: _wrong_attention(q, k, v, m, scale=1 / math.sqrt(q.shape[1])),
    ))  # fmt: skip
    for code, explanation, make in mistakes:
        if _matches(outcomes, make, cases):
            return _not_yet(code, explanation, verbose)
    if _is_random(fn, cases, outcomes):
        return _not_yet("dropout_on", _random_text(fn, outcomes[0].weights), verbose)
    for o, case in zip(outcomes, cases, strict=True):
        if o.error is not None:
            code, message = _explain_error(fn, case, o.error)
            return _not_yet(code, message, verbose)
    first = ok.index(False)
    o, case, (ref_out, _) = outcomes[first], cases[first], refs[first]
    if o.output.shape != ref_out.shape:
        return _not_yet("wrong_shape", f"On the case '{case.name}' the output "
                       f"has shape {tuple(o.output.shape)}; it should be (B, H, L_q, d_v) = "
                       f"{tuple(ref_out.shape)}.", verbose)  # fmt: skip
    if _close(o.output, ref_out):
        return _finish(False, "weights_wrong", f"Almost. Your output is right, but the weights "
                       f"you return are not the softmax weights (case '{case.name}').",
                       verbose)  # fmt: skip
    diff = (o.output - ref_out).abs().nan_to_num(nan=float("inf")).max().item()
    return _not_yet(
        "unknown",
        f"On the case '{case.name}' your output differs from the reference by up to "
        f"{diff:.3g} and matches none of the classic mistakes. Compare your code with "
        f"softmax(Q Kᵀ / √d_k) V, where Kᵀ is key.transpose(-2, -1), line by line.",
        verbose,
    )


class _ModeRecorder:
    """A forward pre-hook that records, per forward pass, whether dropout was active.

    Dropout is active when the module is in training mode *and* its probability is above 0,
    so ``model.dropout = 0`` (restored afterwards) is a valid, if unusual, way to switch it
    off.
    """

    def __init__(self) -> None:
        self.modes: list[bool] = []

    def __call__(self, module: torch.nn.Module, args: object) -> None:
        p = getattr(module, "dropout", 0.0)
        self.modes.append(bool(module.training) and float(p) > 0.0)


class _GraphRecorder:
    """Counts the tensors autograd saves for a backward pass: > 0 means a graph was built.

    Used as torch.autograd.graph.saved_tensors_hooks; it sees the graph being built during
    the forward pass even when the learner detaches the output afterwards.
    """

    def __init__(self) -> None:
        self.saved = 0

    def pack(self, t: torch.Tensor) -> torch.Tensor:
        self.saved += 1
        return t

    @staticmethod
    def unpack(t: torch.Tensor) -> torch.Tensor:
        return t


def _evaluation_setup() -> tuple[torch.nn.Module, torch.Tensor]:

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(_SEED)
        model = SingleHeadAttention(8, 8, dropout=0.5)
        x = torch.randn(2, 5, 8)  # (B, L, d_model)
    return model, x


def check_evaluation(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check an evaluation function: dropout off, no gradients, the model's mode restored.

    ``fn(model, x)`` receives a ``SingleHeadAttention(8, 8, dropout=0.5)`` and x of shape
    (2, 5, 8) and must return what the model computes for x with dropout off (the
    output (2, 5, 8), or the pair (output, weights (2, 5, 5))), without recording
    gradients, and leave the model in the mode it found it in. It is called on a model
    in training mode (twice, with different random states), then on one in eval mode.
    Autograd is switched on for the calls, whatever the notebook set, and a graph built
    during the call counts as recording gradients even if the output is detached
    afterwards. Setting ``model.dropout = 0`` for the call and restoring it is accepted.

    Args:
        fn: the function to check.
        verbose: print the feedback paragraph.

    Returns:
        CheckResult; ``mistake`` is None or one of: "not_written", "error", "bad_return",
        "dropout_on", "wrong_output", "grad_on", "mode_not_restored", "mode_forced_train",
        "model_changed".

    Source: article section 4.3 (dropout); torch.nn.Module.eval and torch.no_grad docs.
    """
    name = _name_of(fn)
    model, x = _evaluation_setup()
    with torch.no_grad():
        model.eval()
        ref_out, ref_w = model(x, return_attn=True)  # (2, 5, 8), (2, 5, 5)
        model.train()
    recorder = _ModeRecorder()
    handle = model.register_forward_pre_hook(recorder)
    results = []
    graph = _GraphRecorder()
    try:
        for start_training, seed in ((True, 1), (True, 2), (False, 3)):
            model.train(start_training)
            recorder.modes.clear()
            with (
                torch.random.fork_rng(devices=[]),
                torch.enable_grad(),
                torch.autograd.graph.saved_tensors_hooks(graph.pack, graph.unpack),
            ):
                torch.manual_seed(seed)
                got, err = _call(fn, model, x.clone(), quiet=True)
                if err is not None:
                    return _call_failed(name, err, f"Your function raised {_raised(err)}", verbose)
            if isinstance(got, tuple | list) and len(got) == 2:
                out, w = got
            else:
                out, w = got, None
            if not isinstance(out, torch.Tensor) or not isinstance(w, torch.Tensor | None):
                return _not_yet("bad_return", f"{name} returned "
                               f"{type(got).__name__}; return the output tensor, or the pair "
                               f"(output, weights).", verbose)  # fmt: skip
            results.append((start_training, list(recorder.modes), out, w, model.training,
                            model.dropout))  # fmt: skip
    finally:
        handle.remove()

    for _, _, _, _, _, dropout in results:
        if dropout != 0.5:
            return _not_yet("model_changed", f"Your function changed the "
                           f"module's dropout probability (now {dropout}) and left it so: "
                           f"the training that follows would run without dropout. Leave the "
                           f"model as it is and switch dropout off with `model.eval()`; "
                           f"`model.train(was_training)` switches it back on.",
                           verbose)  # fmt: skip
    for _, modes, out, w, _, _ in results[:2]:
        matches = out.shape == ref_out.shape and _close(out.detach(), ref_out)
        if any(modes) and not matches:
            same = _close(results[0][2].detach(), results[1][2].detach())
            how = (
                "Two calls gave different outputs"
                if not same
                else "The output does not match the model in eval mode"
            )
            rows = ""
            if w is not None:
                sums = w.detach().sum(dim=-1)
                rows = (
                    f" The rows of the weights you return sum to {sums.min().item():.4f} … "
                    f"{sums.max().item():.4f}, not 1: dropout zeroed some weights and scaled "
                    f"the others by 1/(1 − p) = 2."
                )
            return _not_yet(
                "dropout_on",
                f"The model ran in training mode, so dropout was on: {how.lower()}."
                f"{rows} An evaluation must be deterministic: call `model.eval()` before the "
                f"forward pass (dropout then does nothing and every row sums to 1).",
                verbose,
            )
    for _, _, out, w, _, _ in results:
        if out.shape != ref_out.shape or not _close(out.detach(), ref_out) or (
            w is not None and not _close(w.detach(), ref_w)
        ):
            return _not_yet("wrong_output", "Dropout is off, but the result "
                           "is not what the model computes for x: return `model(x)` (or "
                           "`model(x, return_attn=True)`), unchanged.", verbose)  # fmt: skip
    if any(out.requires_grad for _, _, out, _, _, _ in results):
        return _finish(
            False,
            "grad_on",
            "Almost. Dropout is off and the numbers are right, but autograd recorded the "
            "computation (the output has requires_grad=True), which costs memory for nothing "
            "during evaluation. Wrap the forward pass in `with torch.no_grad():`.",
            verbose,
        )
    if graph.saved:
        return _finish(
            False,
            "grad_on",
            "Almost. Dropout is off and the numbers are right, and the output you return "
            "needs no gradient, but autograd was on during the forward pass: it built the "
            "graph and kept the intermediate tensors for a backward pass that never comes. "
            "`.detach()` (or `.item()`, `.numpy()`) afterwards only drops the finished graph; "
            "the memory and time were already spent. Run the forward pass inside `with "
            "torch.no_grad():` (or `torch.inference_mode()`).",
            verbose,
        )
    if not results[0][4] or not results[1][4]:
        return _finish(
            False,
            "mode_not_restored",
            "Almost. Dropout is off and the numbers are right, but your function leaves the "
            "model in eval mode: a training loop that evaluates every few steps would then "
            "go on training without dropout. Remember the mode first (`was_training = "
            "model.training`) and restore it at the end (`model.train(was_training)`).",
            verbose,
        )
    if results[2][4]:
        return _finish(
            False,
            "mode_forced_train",
            "Almost. Your function switches the model to training mode at the end even when "
            "it was in eval mode before the call. Restore the mode it had: `was_training = "
            "model.training` at the start, `model.train(was_training)` at the end.",
            verbose,
        )
    return _passed(
        f"{name} evaluates with dropout off (the same output on every call, rows "
        f"summing to 1), records no gradients, and leaves the model in the mode it found it "
        f"in, training or eval.",
        verbose,
    )
