"""Notebook 07's data, experiments and checkers (torch only).

Used by notebook 07 (Masks: padding, causal, fill values and shapes), sections "3 · Fill values
side by side", "5 · dtypes: the fill must come from the dtype", "8 · The mask dashboard", "9 ·
Check yourself".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import torch

from ..core import scaled_dot_product_attention
from ..masks import causal_mask, padding_mask
from ..shapes import check_float_dtype
from ._checking import (
    _ATOL,
    _RTOL,
    _SEED,
    CheckResult,
    _call,
    _call_failed,
    _close,
    _mask_difference,
    _name_of,
    _not_written,
    _not_yet,
    _number,
    _passed,
    _raised,
)
from ._experiments import PADDING_SIDES, _choice, _generator, _int, keep_from_lengths

MASK_FILLS = ("default", "-1e9", "-inf", "0", "finfo.min")
MASK_DTYPES = ("float32", "float16", "bfloat16")
MASK_DEMO_L = 6  # padded length of every sequence in the mask dashboard
MASK_DEMO_D_K = 4
MASK_DEMO_SEED = 7


def fill_value_for(fill: str, dtype: torch.dtype) -> float | None:
    """The ``fill_value`` argument of attn_lib's attention for a fill named in MASK_FILLS.

    Args:
        fill: "default" (None: attn_lib's dtype-safe fill, zero rows where no key is
            allowed), "-1e9", "-inf", "0", or "finfo.min" (torch.finfo(dtype).min,
            passed explicitly, so it behaves exactly like masked_fill with it).
        dtype: the dtype of the scores.

    Returns:
        None or a float.

    Raises:
        ValueError: an unknown fill name.
        TypeError: dtype not floating point.

    Source: article section 4.1 (-1e9 vs 0); torch.finfo.
    """
    fill = _choice("fill", fill, MASK_FILLS)
    check_float_dtype("dtype", dtype)
    if fill == "default":
        return None
    if fill == "finfo.min":
        return float(torch.finfo(dtype).min)
    return float(fill)


def masked_mass(weights: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """The weight each query row puts on keys it may not attend to.

    Args:
        weights: (..., L_q, L_k) attention weights, floating point.
        keep: keep-mask broadcastable to weights (True = may attend).

    Returns:
        (..., L_q), weights' dtype: 0 where masking worked, up to 1 for a row whose
        keys are all blocked yet which was made uniform; NaN where the row is NaN.

    Raises:
        TypeError: weights not floating point, or keep not bool/integer.

    Source: article section 4.1 (what a fill of 0 leaves on masked keys).
    """
    if not isinstance(weights, torch.Tensor) or not weights.is_floating_point():
        raise TypeError("weights must be a floating-point tensor.")
    if not isinstance(keep, torch.Tensor) or keep.is_floating_point():
        raise TypeError("keep must be a bool (or 0/1 integer) tensor, True = may attend.")
    blocked = ~keep.bool()
    return torch.where(blocked, weights, torch.zeros((), dtype=weights.dtype)).sum(dim=-1)


@dataclass(frozen=True)
class MaskSetting:
    """What the mask dashboard shows for one setting.

    Attributes:
        lengths: real length of each sequence.
        causal, padding_side, fill, dtype: the setting (names as in MASK_FILLS, MASK_DTYPES).
        keep: bool (B, L, L), True = may attend.
        weights: float32 (B, L, L), the weights computed in ``dtype`` (then converted
            for display), NaN included; None when PyTorch refused the setting.
        row_mass: float32 (B, L), each row's weight on blocked keys (NaN for a NaN row);
            None when refused.
        error: the error message when PyTorch refused the setting (e.g. -1e9 in
            float16), else None.

    Source: article section 4.1.
    """

    lengths: tuple[int, ...]
    causal: bool
    padding_side: str
    fill: str
    dtype: str
    keep: torch.Tensor
    weights: torch.Tensor | None
    row_mass: torch.Tensor | None
    error: str | None

    @property
    def empty_rows(self) -> tuple[int, ...]:
        """Per sequence, the number of query rows with no allowed key."""
        return tuple(int(n) for n in (~self.keep.any(dim=-1)).sum(dim=-1))

    @property
    def nan_rows(self) -> tuple[int, ...]:
        """Per sequence, the number of query rows whose weights are NaN (0 when refused)."""
        if self.weights is None:
            return (0,) * len(self.lengths)
        return tuple(int(n) for n in self.weights.isnan().any(dim=-1).sum(dim=-1))

    @property
    def mass(self) -> tuple[float, ...]:
        """Per sequence, the mean over its non-NaN rows of the weight on blocked keys."""
        if self.row_mass is None:
            return (math.nan,) * len(self.lengths)
        out = []
        for row in self.row_mass:
            ok = row[~row.isnan()]
            out.append(float(ok.mean()) if ok.numel() else math.nan)
        return tuple(out)

    @property
    def title(self) -> str:
        """One line describing the setting, for figure titles."""
        causal = "causal" if self.causal else "no causal mask"
        fill = "attn_lib default fill" if self.fill == "default" else f"fill {self.fill}"
        return f"{self.padding_side} padding · {causal} · {fill} · {self.dtype}"


def mask_setting(
    lengths: Sequence[int] = (6, 4, 2),
    *,
    causal: bool = False,
    padding_side: str = "right",
    fill: str = "default",
    dtype: str = "float32",
) -> MaskSetting:
    """Masked attention weights of a small seeded batch for one dashboard setting.

    Queries, keys and values are drawn once (seed 7, B = len(lengths), L = 6, d_k = d_v
    = 4, float32), converted to ``dtype``, and run through
    ``attn_lib.scaled_dot_product_attention(..., fill_value=fill_value_for(fill, dtype))``
    with the mask of :func:`keep_from_lengths`. An explicit fill behaves exactly like
    the article's masked_fill (NaN rows, uniform rows, RuntimeError in float16
    included); a refusal is returned as the error text, not raised. Same arguments,
    same numbers; results are cached and returned as fresh copies.

    Args:
        lengths: (B,) real lengths, each in 1..6.
        causal: also block the future.
        padding_side: "right" or "left".
        fill: one of MASK_FILLS.
        dtype: one of MASK_DTYPES.

    Returns:
        MaskSetting with keep (B, 6, 6), weights (B, 6, 6) and row_mass (B, 6), or error.

    Raises:
        ValueError: a length outside 1..6, an unknown fill, dtype or padding side.
        TypeError: causal not a bool, lengths not ints.

    Source: article section 4.1; torch.Tensor.masked_fill.
    """
    lengths = tuple(_int("length", n, 1) for n in lengths)
    if not lengths or any(n > MASK_DEMO_L for n in lengths):
        raise ValueError(f"give 1 or more lengths, each in 1..{MASK_DEMO_L}, got {lengths}.")
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be True or False, got {causal!r}.")
    padding_side = _choice("padding_side", padding_side, PADDING_SIDES)
    fill = _choice("fill", fill, MASK_FILLS)
    dtype = _choice("dtype", dtype, MASK_DTYPES)
    cached = _mask_setting(lengths, causal, padding_side, fill, dtype)
    return MaskSetting(
        lengths=cached.lengths,
        causal=causal,
        padding_side=padding_side,
        fill=fill,
        dtype=dtype,
        keep=cached.keep.clone(),
        weights=None if cached.weights is None else cached.weights.clone(),
        row_mass=None if cached.row_mass is None else cached.row_mass.clone(),
        error=cached.error,
    )


@lru_cache(maxsize=8)
def _mask_qkv(B: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = _generator(MASK_DEMO_SEED)
    shape = (B, MASK_DEMO_L, MASK_DEMO_D_K)
    return tuple(torch.randn(shape, generator=g) for _ in range(3))  # (B, L, d_k) each


@lru_cache(maxsize=1024)
def _mask_setting(
    lengths: tuple[int, ...], causal: bool, padding_side: str, fill: str, dtype: str
) -> MaskSetting:
    keep = keep_from_lengths(lengths, MASK_DEMO_L, causal=causal, padding_side=padding_side)
    torch_dtype = getattr(torch, dtype)
    q, k, v = (t.to(torch_dtype) for t in _mask_qkv(len(lengths)))
    weights = row_mass = error = None
    try:
        _, w = scaled_dot_product_attention(
            q, k, v, keep, fill_value=fill_value_for(fill, torch_dtype)
        )  # (B, L, L)
    except RuntimeError as err:
        error = str(err)
    else:
        weights = w.float()
        row_mass = masked_mass(weights, keep)  # (B, L)
    return MaskSetting(lengths, causal, padding_side, fill, dtype, keep, weights, row_mass, error)


def _masked_softmax_reference(scores: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """attn_lib's rule: dtype-safe fill, softmax, zero rows where no key is allowed."""
    keep = keep.bool()
    weights = scores.masked_fill(~keep, torch.finfo(scores.dtype).min).softmax(dim=-1)
    return weights.masked_fill(~keep.any(dim=-1, keepdim=True), 0.0)


def _masked_softmax_cases() -> list[tuple[str, torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(_SEED + 7)
    left_causal = padding_mask([5, 3]).flip(-1) & causal_mask(5)  # (2, 5, 5): 2 empty rows
    return [
        ("float32, padding mask (2, 1, 5), lengths [5, 3]",
         2.0 * torch.randn(2, 4, 5, generator=g), padding_mask([5, 3])),
        ("float32, causal mask (4, 4)", 2.0 * torch.randn(3, 4, 4, generator=g), causal_mask(4)),
        ("float32, left padding [5, 3] and a causal mask (2, 5, 5)",
         2.0 * torch.randn(2, 5, 5, generator=g), left_causal),
        ("float16, the same left padding and causal mask",
         (2.0 * torch.randn(2, 5, 5, generator=g)).half(), left_causal),
    ]  # fmt: skip


def _call_weights_fn(fn: Callable, *args: torch.Tensor) -> torch.Tensor | BaseException | str:
    """The tensor fn returns, the exception it raised, or a sentence on a bad return."""
    out, err = _call(fn, *(a.clone() for a in args))
    if err is not None:
        return err
    if isinstance(out, tuple | list) and len(out) > 0 and isinstance(out[0], torch.Tensor):
        out = out[0]
    if not isinstance(out, torch.Tensor):
        return f"returned {type(out).__name__}; return the weights as a tensor."
    return out.detach()


def check_masked_softmax(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check a hand-written masked softmax (keep-mask, dtype-safe fill, zero empty rows).

    ``fn(scores, keep)`` receives scores (B, L_q, L_k) (float32, and float16 in the last
    case) and a bool keep-mask that broadcasts to them (True = may attend): (B, 1, L_k)
    padding, (L_q, L_k) causal, and (B, L_q, L_k) left padding combined with a causal
    mask, where some query rows have no allowed key. It must return the weights,
    (B, L_q, L_k): a softmax over the keys in which blocked keys get exactly 0, and a
    row with no allowed key is all zeros (no NaN, no uniform row), as attn_lib and
    F.scaled_dot_product_attention do; float16 scores must work too.

    Args:
        fn: the function to check.
        verbose: print the feedback paragraph.

    Returns:
        CheckResult; ``mistake`` is None or one of: "not_written", "error", "bad_return",
        "wrong_shape", "mask_inverted", "mask_fill_zero", "mask_ignored", "mask_leaks",
        "fill_overflow", "nan_rows", "uniform_rows", "empty_rows_not_zero",
        "rows_not_normalised", "unknown".

    Source: article section 4.1; F.scaled_dot_product_attention (rows with no allowed key).
    """
    name = _name_of(fn)
    cases = _masked_softmax_cases()
    outs = [_call_weights_fn(fn, scores, keep) for _, scores, keep in cases]
    for (case, scores, keep), out in zip(cases, outs, strict=True):
        if isinstance(out, NotImplementedError):
            return _not_written(name, verbose)
        if isinstance(out, str):
            return _not_yet("bad_return", f"On the case '{case}' {name} {out}",
                           verbose)  # fmt: skip
        if isinstance(out, BaseException):
            if scores.dtype == torch.float16 and "overflow" in str(out):
                continue  # explained below, after the float32 cases
            return _not_yet(
                "error",
                f"On the case '{case}' your function raised {_raised(out)}. The "
                f"inputs were scores {tuple(scores.shape)} ({scores.dtype}) and keep "
                f"{tuple(keep.shape)} (bool, True = may attend).",
                verbose,
            )
        if out.shape != scores.shape:
            return _not_yet(
                "wrong_shape",
                f"On the case '{case}' the weights have shape {tuple(out.shape)}; they "
                f"should have the scores' shape {tuple(scores.shape)} = (B, L_q, L_k).",
                verbose,
            )

    # The float32 cases whose rows all have an allowed key: polarity and leaks.
    full = [(c, out.float(), keep.bool().expand(s.shape)) for (c, s, keep), out in
            zip(cases[:2], outs[:2], strict=True)]  # fmt: skip
    mixed_kept = torch.cat([(w * k)[(k.any(-1) & ~k.all(-1))].sum(-1) for _, w, k in full])
    if bool((mixed_kept.nan_to_num(0.0) < 0.01).all()):
        return _not_yet(
            "mask_inverted",
            "Your mask polarity is inverted: the keys the mask allows get (almost) no "
            "weight, and the blocked ones get it all. keep is a keep-mask, True = may attend, so "
            "fill where it is False: `scores.masked_fill(~keep, fill)` (or `keep == 0`), not "
            "`masked_fill(keep, ...)`. PyTorch's nn.MultiheadAttention uses the opposite "
            "convention (True = blocked), which is where this slip usually comes from.",
            verbose,
        )
    for case, w, k in full:
        sums = w.sum(-1)[k.any(-1)]  # rows with an allowed key
        if not _close(sums, torch.ones_like(sums)):
            return _not_yet(
                "rows_not_normalised",
                f"On the case '{case}' the rows of your weights do not sum to 1. Each "
                f"query's weights over the keys must sum to 1: take the softmax over the keys, "
                f"`dim=-1`.",
                verbose,
            )
    leak = max(float((w * ~k).nan_to_num(0.0).sum(-1).max()) for _, w, k in full)
    if leak > 1e-4:
        (case, scores, keep), out = cases[0], outs[0].float()
        if _close(out, scores.masked_fill(~keep, 0.0).softmax(-1)):
            code, text = (
                "mask_fill_zero",
                (
                    "your blocked keys still get weight: you filled them with 0, and exp(0) = 1, so "
                    "a blocked key weighs as much as any key whose score is 0. Fill with a very "
                    "negative number that the dtype can hold: torch.finfo(scores.dtype).min."
                ),
            )
        elif _close(out, scores.softmax(-1)):
            code, text = (
                "mask_ignored",
                (
                    "your weights ignore the mask: they equal a plain softmax of the scores. Fill "
                    "the blocked scores before the softmax: `scores.masked_fill(~keep, fill)`."
                ),
            )
        else:
            code, text = (
                "mask_leaks",
                (
                    f"blocked keys still get weight (up to {leak:.3g} per row). A blocked key must "
                    f"end with exactly 0: fill its score with torch.finfo(scores.dtype).min before "
                    f"the softmax, whose exp then underflows to 0."
                ),
            )
        return _not_yet(code, f"On the case '{case}' {text}", verbose)

    # Rows with no allowed key (case 3, float32), then float16.
    case3, scores3, keep3 = cases[2]
    empty = ~keep3.any(-1)  # (B, L_q)
    rows = outs[2].float()[empty]  # (n_empty, L_k)
    f16 = outs[3]
    overflow = isinstance(f16, BaseException)
    after = (
        " Once it runs, also check the rows with no allowed key: they must come out as zeros."
        if bool((rows.nan_to_num(1.0) != 0).any())
        else ""
    )
    if overflow:
        return _not_yet(
            "fill_overflow",
            f"On float16 scores your function raised {_raised(f16)}. The fill "
            f"does not fit the dtype: float16 holds numbers only down to -65504, so -1e9 "
            f"cannot be stored (masked_fill refuses it). Take the fill from the dtype: "
            f"torch.finfo(scores.dtype).min.{after}",
            verbose,
        )
    if bool(rows.isnan().any()):
        return _not_yet(
            "nan_rows",
            f"On the case '{case3}' the rows with no allowed key came out NaN. With a "
            f"-inf fill such a row is all -inf; the softmax subtracts its maximum, -inf, and "
            f"(-inf) - (-inf) is NaN. Fill with torch.finfo(scores.dtype).min instead, then set "
            f"those rows to 0: `has_key = keep.any(dim=-1, keepdim=True)`, "
            f"`weights.masked_fill(~has_key, 0.0)`.",
            verbose,
        )
    L_k = scores3.shape[-1]
    if _close(rows, torch.full_like(rows, 1.0 / L_k)):
        return _not_yet(
            "uniform_rows",
            f"On the case '{case3}' the rows with no allowed key came out uniform "
            f"(1/{L_k} on every key). A finite fill makes every score of such a row equal, so "
            f"the softmax spreads the weight evenly over keys the query must not see, and the "
            f"output becomes the mean of the values. attn_lib and SDPA give such rows zero "
            f"weights: `has_key = keep.any(dim=-1, keepdim=True)`, then "
            f"`weights.masked_fill(~has_key, 0.0)`.",
            verbose,
        )
    if not _close(rows, torch.zeros_like(rows)):
        return _not_yet(
            "empty_rows_not_zero",
            f"On the case '{case3}' the rows with no allowed key are neither NaN nor "
            f"uniform, but not zero either; give them all-zero weights: "
            f"`weights.masked_fill(~keep.any(dim=-1, keepdim=True), 0.0)`.",
            verbose,
        )
    for (case, scores, keep), out in zip(cases, outs, strict=True):
        ref = _masked_softmax_reference(scores.float(), keep)
        tol = {"rtol": 2e-3, "atol": 2e-3} if scores.dtype == torch.float16 else {}
        try:
            torch.testing.assert_close(out.float(), ref, equal_nan=True,
                                       **(tol or {"rtol": _RTOL, "atol": _ATOL}))  # fmt: skip
        except AssertionError:
            sums = out.float().sum(-1)[keep.bool().expand(scores.shape).any(-1)]
            if not _close(sums, torch.ones_like(sums)):
                return _not_yet(
                    "rows_not_normalised",
                    f"On the case '{case}' the rows that have an allowed key do not "
                    f"sum to 1: take the softmax over the keys, dim=-1.",
                    verbose,
                )
            return _not_yet(
                "unknown",
                f"On the case '{case}' your weights differ from attn_lib's, although "
                f"blocked keys get 0 and the rows sum to 1. Compare with: fill blocked scores "
                f"with torch.finfo(scores.dtype).min, softmax over dim=-1, zero the rows with no "
                f"allowed key.",
                verbose,
            )
    return _passed(
        f"{name} gives blocked keys exactly 0, every row with an allowed key sums to "
        f"1, and rows with no allowed key are all zeros (no NaN, no uniform row), in float32 "
        f"and in float16: the same weights as attn_lib.",
        verbose,
    )


_BATCH_MASK_CASES = (([4, 2], False), ([4, 2], True), ([3, 1, 2], False), ([2, 3, 1], True))


def _batch_mask_reference(lengths: list[int], causal: bool, *, mistake: str | None = None
                          ) -> torch.Tensor:  # fmt: skip
    """The (B, L, L) keep-mask as attention reads it, right or with one named mistake.

    Raises RuntimeError where the mistake itself cannot run (shapes that do not broadcast).
    """
    B, L = len(lengths), max(lengths)
    t = torch.tensor(lengths)
    positions = torch.arange(L)
    real = positions <= t[:, None] if mistake == "mask_off_by_one" else positions < t[:, None]
    real = real[:, :L]  # (B, L)
    tri = torch.ones(L, L, dtype=torch.bool)
    tri = tri.triu() if mistake == "mask_future" else tri.tril()  # (L, L)
    if mistake == "mask_not_unsqueezed":
        pad = real  # (B, L): combined with (L, L) it broadcasts only when B == L
    elif mistake == "mask_wrong_axis":
        pad = real[:, :, None]  # (B, L, 1)
    elif mistake == "mask_query_rows":
        pad = real[:, None, :] & real[:, :, None]  # (B, L, L)
    else:
        pad = real[:, None, :]  # (B, 1, L)
    if causal and mistake != "mask_causal_ignored":
        pad = pad | tri if mistake == "mask_or" else pad & tri
    read = _as_read(pad, B, L)  # (B, L, L)
    return ~read if mistake == "mask_inverted" else read


def _as_read(m: torch.Tensor, B: int, L: int) -> torch.Tensor:
    """A mask as (B, L, L) scores would read it; RuntimeError if it cannot be."""
    if m.dim() == 2:
        if tuple(m.shape) != (L, L):
            raise RuntimeError(f"a 2-D mask of shape {tuple(m.shape)} does not fit ({L}, {L})")
        return m.expand(B, L, L)  # read as (L_q, L_k), the same for every sequence
    if m.dim() == 3 and all(d in (n, 1) for d, n in zip(m.shape, (B, L, L), strict=True)):
        return m.expand(B, L, L)
    raise RuntimeError(f"a mask of shape {tuple(m.shape)} does not fit ({B}, {L}, {L})")


_BATCH_MASK_MISTAKES = (
    ("mask_not_unsqueezed",
     ("Your padding mask has shape (B, L); it needs (B, 1, L). Against (B, L, L) scores a 2-D "
     "mask is read as (L_q, L_k): with B ≠ L it does not fit (attn_lib refuses it, and `&` with "
     "the (L, L) causal mask fails to broadcast), and with B == L, as for lengths [3, 1, 2], it "
     "is silently applied to query rows, by the wrong sequence. Add the query axis with "
     "`.unsqueeze(1)` before combining.")),
    ("mask_wrong_axis",
     ("Your padding mask has shape (B, L, 1): it blanks the padded query *rows* instead of the "
     "padded key *columns*, so real queries still attend to padding. Put the 1 in the middle, "
     "(B, 1, L), with `.unsqueeze(1)`.")),
    ("mask_inverted",
     ("Your mask is inverted: True where attention is blocked. A keep-mask is True where a query "
     "may attend: `positions < lengths[:, None]` for the real keys, `.tril()` for the causal "
     "part.")),
    ("mask_or",
     ("You combined the masks with `|` (or): a key is then allowed when either mask allows it, "
     "so the causal mask lets padded keys back in, and padding lets the future in. Combine "
     "keep-masks with `&` (and): a key is allowed only if every mask allows it.")),
    ("mask_future",
     ("Your causal part is upper triangular: each query sees the keys after it. A causal "
     "keep-mask keeps the past and the present: `torch.ones(L, L, dtype=torch.bool).tril()`.")),
    ("mask_causal_ignored",
     ("With causal=True your mask still lets every query see the future. Combine the padding "
     "mask with `torch.ones(L, L, dtype=torch.bool).tril()` using `&`.")),
    ("mask_query_rows",
     ("Your mask also blocks the padded query rows (padding on both axes). Those rows then have "
     "no allowed key at all: NaN with a -inf fill, uniform with -1e9, zeros only with attn_lib's "
     "guard. The usual padding mask blocks padded keys only, (B, 1, L); the outputs of padded "
     "queries are dropped later, from the loss.")),
    ("mask_off_by_one",
     ("Your mask keeps one position too many: a sequence of length n has real tokens at "
     "positions 0 … n-1, so the test is `position < length`, not `<=`.")),
)  # fmt: skip


def check_batch_mask(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check a hand-written keep-mask for a padded batch, optionally causal.

    ``fn(lengths, causal)`` receives a 1-D int64 tensor of real lengths (B,) and a bool,
    and must return the keep-mask for (B, L, L) scores with L = max(lengths), at the
    scores' rank: padded keys blocked for every query ((B, 1, L) is enough), and with
    ``causal`` also every key after the query (combined with logical and). Bool, or
    integer 0/1. Cases: lengths [4, 2] and, with B == L, [3, 1, 2] and [2, 3, 1], each
    with and without the causal mask; the B == L cases are where a (B, L) mask that
    was not unsqueezed passes silently.

    Args:
        fn: the function to check.
        verbose: print the feedback paragraph.

    Returns:
        CheckResult; ``mistake`` is None or one of: "not_written", "error", "bad_return",
        "mask_float", "mask_values", "wrong_shape", "mask_not_unsqueezed",
        "mask_wrong_axis", "mask_inverted", "mask_or", "mask_future",
        "mask_causal_ignored", "mask_query_rows", "mask_off_by_one", "unknown".

    Source: article section 4.1; attn_lib.padding_mask, causal_mask, combine_masks.
    """
    name = _name_of(fn)
    read: list[torch.Tensor | None] = []
    for lengths, causal in _BATCH_MASK_CASES:
        B, L = len(lengths), max(lengths)
        what = f"lengths {lengths}, causal={causal}"
        m, err = _call(fn, torch.tensor(lengths), causal)
        if isinstance(err, NotImplementedError):
            return _not_written(name, verbose)
        if isinstance(err, RuntimeError) and "must match the size" in str(err):
            read.append(None)  # shapes that do not broadcast: diagnosed below
            continue
        if err is not None:
            return _not_yet("error", f"For {what} your function raised {_raised(err)}.", verbose)
        if not isinstance(m, torch.Tensor):
            return _not_yet("bad_return", f"For {what} {name} returned "
                           f"{type(m).__name__}; return a bool tensor.", verbose)  # fmt: skip
        if m.is_floating_point():
            return _not_yet(
                "mask_float",
                f"For {what} your mask is {m.dtype}. Return a bool keep-mask (True = "
                f"may attend) and combine masks with `&`. Float masks are *added* to the scores "
                f"by PyTorch, and adding masks goes wrong: two finfo.min fills add up to -inf.",
                verbose,
            )
        if not bool(((m == 0) | (m == 1)).all()):
            return _not_yet("mask_values", f"For {what} your mask holds values "
                           f"other than 0 and 1; build it with comparisons, which give bool.",
                           verbose)  # fmt: skip
        try:
            read.append(_as_read(m.bool(), B, L))
        except RuntimeError:
            if m.dim() == 2 and tuple(m.shape) == (B, L):
                read.append(None)  # a (B, L) padding mask, B ≠ L: refused by attention
                continue
            return _not_yet(
                "wrong_shape",
                f"For {what} your mask has shape {tuple(m.shape)}; it must fit the "
                f"scores ({B}, {L}, {L}) at their rank: (B, 1, L) = ({B}, 1, {L}) for padding "
                f"alone, ({B}, {L}, {L}) with the causal mask.",
                verbose,
            )
    expected = [_batch_mask_reference(lengths, c) for lengths, c in _BATCH_MASK_CASES]
    if all(r is not None and torch.equal(r, e) for r, e in zip(read, expected, strict=True)):
        return _passed(
            f"{name} builds the right keep-mask from the lengths for all "
            f"{len(expected)} cases, with and without the causal mask, including B == L, "
            f"where a mask of the wrong rank would have passed silently.",
            verbose,
        )
    for code, text in _BATCH_MASK_MISTAKES:
        matches = True
        for (lengths, causal), r in zip(_BATCH_MASK_CASES, read, strict=True):
            try:
                want = _batch_mask_reference(lengths, causal, mistake=code)
            except RuntimeError:
                want = None
            if (want is None) != (r is None) or (want is not None and not torch.equal(r, want)):
                matches = False
                break
        if matches:
            return _not_yet(code, text, verbose)
    if any(r is None for r in read):
        return _not_yet("mask_not_unsqueezed", f"{_BATCH_MASK_MISTAKES[0][1]}",
                       verbose)  # fmt: skip
    i = next(i for i, (r, e) in enumerate(zip(read, expected, strict=True))
             if not torch.equal(r, e))  # fmt: skip
    lengths, causal = _BATCH_MASK_CASES[i]
    return _not_yet(
        "unknown",
        f"For lengths {lengths}, causal={causal}, your mask, as (B, L, L) scores read it, "
        f"differs from the expected keep-mask (True = may attend) in "
        f"{_mask_difference(read[i], expected[i])}. Index (b, i, j) is sequence b, query i, "
        f"key j.",
        verbose,
    )


def _loss_cases() -> list[tuple[str, torch.Tensor, list[int]]]:
    g = torch.Generator().manual_seed(_SEED + 8)
    nan_pad = torch.rand(2, 4, generator=g) + 0.5
    nan_pad[1, 1:] = float("nan")  # what padded rows of a -inf fill would produce
    return [
        ("lengths [4, 2]", torch.rand(2, 4, generator=g) + 0.5, [4, 2]),
        ("lengths [3, 1, 5]", torch.rand(3, 5, generator=g) + 0.5, [3, 1, 5]),
        ("lengths [4, 1] with NaN at the padded positions", nan_pad, [4, 1]),
    ]


def _loss_candidates(loss: torch.Tensor, lengths: list[int]) -> dict[str, float]:
    real = torch.arange(loss.shape[1]) < torch.tensor(lengths)[:, None]  # (B, L)
    zeroed = torch.where(real, loss, 0.0)
    return {
        "right": float(loss[real].mean()),
        "mean_all": float(loss.mean()),
        "divide_by_all": float(zeroed.sum() / loss.numel()),
        "mean_of_means": float((zeroed.sum(1) / real.sum(1)).mean()),
        "mask_inverted": float(loss[~real].mean()) if bool((~real).any()) else math.nan,
        "sum_not_mean": float(loss[real].sum()),
        "nan_through_mask": float((loss * real).sum() / real.sum()),
    }


_LOSS_MISTAKES = {
    "mean_all": "You average over every position, padding included: the padded positions "
    "hold the losses of outputs nobody asked for. Average over the real tokens only: "
    "`token_loss[real].mean()` with `real = positions < lengths[:, None]`.",
    "divide_by_all": "You zero the padded losses but divide by all B × L positions, so the "
    "more padding a batch has, the smaller its loss. Divide by the number of real tokens: "
    "`real.sum()`.",
    "mean_of_means": "You average each sequence first, then the sequences: a short sequence's "
    "tokens then weigh more than a long one's. This exercise asks for the mean over all real "
    "tokens of the batch: `token_loss[real].mean()`.",
    "mask_inverted": "You average over the padded positions and leave the real tokens out: "
    "the mask is inverted. The real tokens are `positions < lengths[:, None]`.",
    "sum_not_mean": "You return the sum of the real tokens' losses, not their mean; divide by "
    "the number of real tokens.",
    "nan_through_mask": "You multiply the losses by the mask, and NaN × 0 is NaN: one NaN at a "
    "padded position (as a fully masked row with a -inf fill produces) poisons the whole loss. "
    "Select instead of multiplying: `token_loss[real].mean()`, or `torch.where(real, "
    "token_loss, 0.0)` before summing.",
}


def check_masked_mean_loss(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check a hand-written masked mean: the average of per-token losses over real tokens.

    ``fn(token_loss, lengths)`` receives per-token losses (B, L), float32, and the real
    lengths (B,), int64, of right-padded sequences; it must return the mean of
    ``token_loss[b, j]`` over the real positions j < lengths[b] of all sequences, as a
    0-D tensor or a float. The last case holds NaN at padded positions (what a fully
    masked row with a -inf fill gives), which must not reach the result.

    Args:
        fn: the function to check.
        verbose: print the feedback paragraph.

    Returns:
        CheckResult; ``mistake`` is None or one of: "not_written", "error", "bad_return",
        "mean_all", "divide_by_all", "mean_of_means", "mask_inverted", "sum_not_mean",
        "nan_through_mask", "unknown".

    Source: article section 4.1 (padding); standard practice for padded batches.
    """
    name = _name_of(fn)
    got: list[float] = []
    cases = _loss_cases()
    for case, loss, lengths in cases:
        out, err = _call(fn, loss.clone(), torch.tensor(lengths))
        if err is not None:
            return _call_failed(
                name, err, f"For {case} your function raised {_raised(err)}.", verbose
            )
        out, is_number = _number(out)
        if not is_number:
            return _not_yet("bad_return", f"For {case} {name} returned "
                           f"{type(out).__name__}; return one number (a 0-D tensor or a "
                           f"float).", verbose)  # fmt: skip
        got.append(float(out))
    candidates = [_loss_candidates(loss, lengths) for _, loss, lengths in cases]

    def same(a: float, b: float) -> bool:
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-6)

    if all(same(g, c["right"]) for g, c in zip(got, candidates, strict=True)):
        return _passed(
            f"{name} averages over the real tokens only, for all {len(cases)} cases, "
            f"and a NaN at a padded position does not reach it.",
            verbose,
        )
    for code, text in _LOSS_MISTAKES.items():
        if all(same(g, c[code]) for g, c in zip(got, candidates, strict=True)):
            return _not_yet(code, text, verbose)
    if all(same(g, c["right"]) for g, c in zip(got[:2], candidates[:2], strict=True)):
        return _not_yet("nan_through_mask", f"{_LOSS_MISTAKES['nan_through_mask']}",
                       verbose)  # fmt: skip
    i = next(i for i, (g, c) in enumerate(zip(got, candidates, strict=True))
             if not same(g, c["right"]))  # fmt: skip
    return _not_yet(
        "unknown",
        f"For {cases[i][0]} the mean over the real tokens is {candidates[i]['right']:.4f}"
        f", but your function returned {got[i]:.4f}.",
        verbose,
    )
