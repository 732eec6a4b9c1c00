"""Notebook 07's data, experiments and checkers (torch only).

Used by notebook 07 (Masks: padding, causal, fill values and shapes), sections "7 · The mask
dashboard" (``mask_setting``) and "8 · Check yourself" (the checkers and their solutions).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from ..attention import scaled_dot_product_attention
from ..masks import causal_mask, padding_mask
from ..mistakes import FILLS, Inputs, find, why
from ._checking import (
    _SEED,
    CheckResult,
    _call,
    _close,
    _mask_difference,
    _name_of,
    _not_written,
    _not_yet,
    _passed,
    _raised,
    recording,
)
from ._experiments import keep_from_lengths

MASK_FILLS = ("default", "-1e9", "-inf", "0", "finfo.min")
MASK_DTYPES = ("float32", "float16", "bfloat16")
MASK_DEMO_L = 6  # padded length of every sequence in the mask dashboard
_FILL_VALUES = {"default": None, "-1e9": -1e9, "-inf": -math.inf, "0": 0.0}


@dataclass(frozen=True)
class MaskSetting:
    """What the mask dashboard shows for one setting (article section 4.1).

    ``keep`` is bool (B, L, L), True = may attend; ``weights`` float32 (B, L, L), computed in
    ``dtype``, NaN included, or None when PyTorch refused the setting (e.g. -1e9 in float16),
    whose message is then ``error``.
    """

    lengths: tuple[int, ...]
    causal: bool
    padding_side: str
    fill: str
    dtype: str
    keep: torch.Tensor
    weights: torch.Tensor | None
    error: str | None

    @property
    def nan_rows(self) -> tuple[int, ...]:
        """Per sequence, the number of query rows whose weights are NaN (0 when refused)."""
        if self.weights is None:
            return (0,) * len(self.lengths)
        return tuple(self.weights.isnan().any(dim=-1).sum(dim=-1).tolist())

    @property
    def mass(self) -> tuple[float, ...]:
        """Per sequence, the mean over its non-NaN rows of the weight on blocked keys."""
        if self.weights is None:
            return (math.nan,) * len(self.lengths)
        row_mass = self.weights.masked_fill(self.keep, 0.0).sum(dim=-1)  # (B, L)
        return tuple(torch.nanmean(row_mass, dim=-1).tolist())

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
    """Masked attention weights of a seeded batch for one dashboard setting.

    Queries, keys and values as in notebook 07 (seed 7, lengths in 1..6, L = 6, d_k = 4) in
    ``dtype`` (MASK_DTYPES), through ``attn_lib.scaled_dot_product_attention`` with the keep-mask
    of the lengths. ``fill`` (MASK_FILLS) "default" is attn_lib's dtype-safe fill; any other acts
    exactly as the article's ``masked_fill``; a refusal is returned as ``error``, not raised.
    Source: article section 4.1; torch.Tensor.masked_fill.
    """
    keep = keep_from_lengths(lengths, MASK_DEMO_L, causal=causal, padding_side=padding_side)
    torch_dtype = getattr(torch, dtype)
    g = torch.Generator().manual_seed(7)
    shape = (len(lengths), MASK_DEMO_L, 4)  # (B, L, d_k)
    q, k, v = (torch.randn(shape, generator=g).to(torch_dtype) for _ in range(3))
    fill_value = torch.finfo(torch_dtype).min if fill == "finfo.min" else _FILL_VALUES[fill]
    setting = (tuple(lengths), causal, padding_side, fill, dtype, keep)
    try:
        _, w = scaled_dot_product_attention(q, k, v, keep, fill_value=fill_value)  # (B, L, L)
    except RuntimeError as err:
        return MaskSetting(*setting, None, str(err))
    return MaskSetting(*setting, w.float(), None)


def solution_masked_softmax(scores: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """Exercise 1 of notebook 07: blocked keys get 0, a row with no allowed key all zeros."""
    fill = torch.finfo(scores.dtype).min  # the most negative number the dtype can hold
    weights = torch.softmax(scores.masked_fill(~keep, fill), dim=-1)  # (B, L_q, L_k)
    has_key = keep.any(dim=-1, keepdim=True)  # (..., L_q, 1): rows with an allowed key
    return weights.masked_fill(~has_key, 0.0)  # zero rows, like attn_lib and SDPA


def _masked_softmax_cases() -> list[tuple[str, torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(_SEED + 7)
    left_causal = padding_mask([5, 3]).flip(-1) & causal_mask(5)  # (2, 5, 5): 2 empty rows
    cases = [("float32, padding mask (2, 1, 5), lengths [5, 3]", (2, 4, 5), padding_mask([5, 3])),
             ("float32, causal mask (4, 4)", (3, 4, 4), causal_mask(4)),
             ("float32, left padding [5, 3] under a causal mask (2, 5, 5)", (2, 5, 5), left_causal),
             ("float16, the same left padding and causal mask", (2, 5, 5), left_causal)]  # fmt: skip
    dtypes = (torch.float32,) * 3 + (torch.float16,)
    return [(case, (2.0 * torch.randn(shape, generator=g)).to(dtype), keep)
            for (case, shape, keep), dtype in zip(cases, dtypes, strict=True)]  # fmt: skip


def _as_attention(scores: torch.Tensor, keep: torch.Tensor, fill: float | None = None) -> Inputs:
    """The scores as attn_lib's attention takes them: queries against identity keys with scale
    1, so that its weights are the masked softmax of the scores (attn_lib's, the one there is)."""
    eye = torch.eye(scores.shape[-1]).expand(*scores.shape[:-2], -1, -1)  # (B, L_k, L_k)
    return Inputs(scores.float(), eye, keep, 1.0, {}, fill)


def _masked_softmax_mistake(cases: list, outs: list) -> tuple[str, str] | None:
    """(code, message) of the first mistake of attn_lib.mistakes the learner's weights show."""
    (case, scores, keep), on = cases[0], f"On the case '{cases[0][0]}', your function computes"
    for code, fill in itertools.product(("mask_fill_zero", "mask_not_applied",
                                         "mask_after_softmax", "softmax_dim"), FILLS):  # fmt: skip
        if _close(outs[0], find(code).recompute(_as_attention(scores, keep, fill))):
            return code, f"{on} {find(code).explain()}"
    full = [(c, w, k.expand(w.shape)) for (c, _, k), w in zip(cases[:2], outs[:2], strict=True)]
    mixed = torch.cat([(w * k)[k.any(-1) & ~k.all(-1)].sum(-1) for _, w, k in full])
    if bool((mixed.nan_to_num(0.0) < 0.01).all()):
        return "mask_inverted", f"Your allowed keys get (almost) no weight. {why('mask_inverted')}"
    for case, w, k in full:
        if not _close(w.sum(-1), torch.ones(w.shape[:-1])) or float((w * ~k).sum(-1).max()) > 1e-4:
            return "mask_leaks", (f"On the case '{case}', your rows do not sum to 1 over the "
                                  f"allowed keys: fill the blocked scores with torch.finfo("
                                  f"scores.dtype).min, then softmax over the keys, dim=-1.")  # fmt: skip
    if isinstance(outs[3], Exception):
        return "fill_overflow", f"On float16 scores your function raised {_raised(outs[3])}. " \
            + why("fill_overflow")  # fmt: skip
    case, scores, keep = cases[2]
    rows = outs[2][~keep.any(-1)]  # (n_empty, L_k): the rows with no allowed key
    if bool(rows.isnan().any()) or _close(rows, torch.full_like(rows, 1 / scores.shape[-1])):
        code = "nan_rows" if bool(rows.isnan().any()) else "uniform_rows"
        return code, f"On the case '{case}', your function computes {find(code).explain()}"
    return None


def _check_masked_softmax(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check a hand-written masked softmax ``fn(scores, keep)`` → weights (B, L_q, L_k).

    Cases: float32 scores with a (B, 1, L_k) padding mask, an (L_q, L_k) causal mask, left
    padding under a causal mask (rows with no allowed key), and that in float16. Blocked keys
    must get exactly 0, a row with no allowed key zeros: attn_lib's weights.

    Returns CheckResult; ``mistake`` None, "not_written", "error", "wrong_shape", a code of
    attn_lib.mistakes, "mask_leaks" or "unknown".
    """
    name, cases, outs = _name_of(fn), _masked_softmax_cases(), []
    for case, scores, keep in cases:
        out, err = _call(fn, scores.clone(), keep.clone())
        if isinstance(err, NotImplementedError):
            return _not_written(name, verbose)
        if err is not None and not (scores.dtype == torch.float16 and "overflow" in str(err)):
            return _not_yet("error", f"On the case '{case}', your function raised "
                            f"{_raised(err)}.", verbose)  # fmt: skip
        if err is None and (not isinstance(out, torch.Tensor) or out.shape != scores.shape):
            got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            return _not_yet("wrong_shape", f"On the case '{case}', your function returned {got}; "
                            f"return the weights, shaped like the scores {tuple(scores.shape)}.",
                            verbose)  # fmt: skip
        outs.append(err if err is not None else out.detach().float())  # float16: its overflow
    mistake = _masked_softmax_mistake(cases, outs)
    if mistake is not None:
        return _not_yet(*mistake, verbose)
    for (case, scores, keep), out in zip(cases, outs, strict=True):
        want = _as_attention(scores, keep).attend()  # attn_lib's weights
        atol = max(2 * torch.finfo(scores.dtype).eps, 1e-5)  # weights ≤ 1: a few ulps of 1
        if not torch.allclose(out, want, rtol=0, atol=atol):
            return _not_yet("unknown", f"On the case '{case}', your weights differ from "
                            f"attn_lib's. Fill blocked scores with torch.finfo(scores.dtype).min, "
                            f"softmax over dim=-1, then zero the rows with no allowed key.",
                            verbose)  # fmt: skip
    return _passed(f"{name} gives blocked keys exactly 0, every row with an allowed key sums to "
                   f"1, and rows with no allowed key are all zeros, in float32 and float16: "
                   f"attn_lib's weights.", verbose)  # fmt: skip


def solution_batch_mask(lengths: torch.Tensor, causal: bool) -> torch.Tensor:
    """Exercise 2 of notebook 07: the keep-mask of right-padded sequences, at the scores' rank."""
    L = int(lengths.max())
    keep = (torch.arange(L) < lengths[:, None]).unsqueeze(1)  # (B, 1, L): real keys
    if causal:
        keep = keep & torch.ones(L, L, dtype=torch.bool).tril()  # (B, L, L)
    return keep


_BATCH_MASK_CASES = (([4, 2], False), ([4, 2], True), ([3, 1, 2], False), ([2, 3, 1], True))

# The mistakes a batch's keep-mask can show, in the order they are tried.
_BATCH_MASK_MISTAKES = ("mask_not_unsqueezed", "mask_transposed", "mask_inverted", "masks_or",
                        "causal_ignored", "padded_query_rows")  # fmt: skip


def _batch_mask_text(code: str) -> str:
    """What a wrong mask of a batch shows, then the table's explanation."""
    shows = {"mask_not_unsqueezed": "Your padding mask has shape (B, L).",
             "mask_transposed": "Your padding mask has shape (B, L, 1), the transpose of (B, 1, L).",
             "mask_inverted": "Your mask is True where attention is blocked.",
             "masks_or": "You combined the masks with |.",
             "causal_ignored": "With causal=True your mask has no causal part.",
             "padded_query_rows": "Your mask also blocks padded query rows."}  # fmt: skip
    return f"{shows[code]} {why(code, B='B', L_k='L')}"


def _as_read(m: torch.Tensor, B: int, L: int) -> torch.Tensor:
    """A mask as (B, L, L) scores read it; RuntimeError if it does not fit."""
    fits = all(d in (n, 1) for d, n in zip(m.shape, (B, L, L), strict=True)) if m.dim() == 3 \
        else m.dim() == 2 and tuple(m.shape) == (L, L)  # 2-D: (L_q, L_k) for every sequence  # fmt: skip
    if fits:
        return m.expand(B, L, L)
    raise RuntimeError(f"a mask of shape {tuple(m.shape)} does not fit ({B}, {L}, {L})")


def _batch_mask_read(lengths: list[int], causal: bool, mistake: str | None) -> torch.Tensor | None:
    """The (B, L, L) mask the scores read, right or with one named mistake; None if it fails."""
    B, L = len(lengths), max(lengths)
    positions, n = torch.arange(L), torch.tensor(lengths)[:, None]
    real = positions < n  # (B, L)
    pad = {"mask_not_unsqueezed": real, "mask_transposed": real[:, :, None],
           "padded_query_rows": real[:, None, :] & real[:, :, None]}.get(mistake, real[:, None, :])  # fmt: skip
    tri = torch.ones(L, L, dtype=torch.bool).tril()  # (L, L)
    try:
        if causal and mistake != "causal_ignored":
            pad = pad | tri if mistake == "masks_or" else pad & tri
        read = _as_read(pad, B, L)
    except RuntimeError:
        return None  # (B, L) with B ≠ L: does not broadcast, or refused by attention
    return ~read if mistake == "mask_inverted" else read


def _check_batch_mask(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check a hand-written keep-mask ``fn(lengths, causal)`` for a right-padded batch.

    ``lengths`` is int64 (B,); the bool (or 0/1) mask must fit (B, L, L) scores at their rank,
    L = max(lengths): padded keys blocked, and with ``causal`` every later key. The cases
    include B == L, where a (B, L) mask that was not unsqueezed passes silently.

    Returns CheckResult; ``mistake`` None, "not_written", "error", "not_bool", "wrong_shape",
    "unknown" or a code of attn_lib.mistakes (:data:`_BATCH_MASK_MISTAKES`).
    """
    name, read = _name_of(fn), []
    for lengths, causal in _BATCH_MASK_CASES:
        B, L = len(lengths), max(lengths)
        what = f"For lengths {lengths}, causal={causal},"
        m, err = _call(fn, torch.tensor(lengths), causal)
        if isinstance(err, NotImplementedError):
            return _not_written(name, verbose)
        if isinstance(err, RuntimeError) and "must match the size" in str(err):
            read.append(None)  # shapes that do not broadcast: diagnosed below
            continue
        if err is not None:
            return _not_yet("error", f"{what} your function raised {_raised(err)}.", verbose)
        is_bool = isinstance(m, torch.Tensor) and not m.is_floating_point()
        if not is_bool or not ((m == 0) | (m == 1)).all():
            return _not_yet("not_bool", f"{what} {name} did not return a bool tensor. Build the "
                            f"keep-mask with comparisons (True = may attend), combine with `&`: "
                            f"PyTorch *adds* a float mask to the scores.", verbose)  # fmt: skip
        try:
            read.append(_as_read(m.bool(), B, L))
        except RuntimeError:
            if tuple(m.shape) != (B, L):
                return _not_yet("wrong_shape", f"{what} your mask has shape {tuple(m.shape)}; "
                                f"it must fit the scores ({B}, {L}, {L}): ({B}, 1, {L}) for "
                                f"padding alone.", verbose)  # fmt: skip
            read.append(None)  # a (B, L) padding mask, B ≠ L: attention refuses it

    def shows(mistake: str | None) -> bool:
        wants = [_batch_mask_read(n, c, mistake) for n, c in _BATCH_MASK_CASES]
        return all((r is None and w is None) or (r is not None and w is not None and
                   torch.equal(r, w)) for r, w in zip(read, wants, strict=True))  # fmt: skip

    if shows(None):
        return _passed(f"{name} builds the right keep-mask for all {len(read)} cases, with and "
                       f"without the causal mask, B == L included.", verbose)  # fmt: skip
    for code in _BATCH_MASK_MISTAKES:
        if shows(code):
            return _not_yet(code, _batch_mask_text(code), verbose)
    if any(r is None for r in read):
        return _not_yet("mask_not_unsqueezed", _batch_mask_text("mask_not_unsqueezed"), verbose)
    for r, (lengths, causal) in zip(read, _BATCH_MASK_CASES, strict=True):
        want = _batch_mask_read(lengths, causal, None)
        if not torch.equal(r, want):
            break
    return _not_yet("unknown", f"For lengths {lengths}, causal={causal}, your mask as (B, L, L) "
                    f"scores read it differs from the keep-mask in {_mask_difference(r, want)}. "
                    f"Index (b, i, j) is sequence b, query i, key j.", verbose)  # fmt: skip


check_masked_softmax = recording("masked_softmax", _check_masked_softmax)
check_batch_mask = recording("batch_mask", _check_batch_mask)
