"""Look at a learner's attention tensors and say, in plain words, what looks wrong.

:func:`diagnose` takes the tensors of an attention computation — query, key,
value, and optionally the mask and the weights the learner computed — and
returns a :class:`Diagnosis`: a list of :class:`Finding` (level, code,
message) that prints as a short report. It never raises on bad tensors: a
shape that does not fit is a finding, with what the shapes imply and the usual
fix, not a traceback.

What it checks (article section 5: "eighty percent of my bugs were shapes and
mask broadcasting"; section 4 lists the rest):

* shapes: B (and H), L_q, L_k, d_k, d_v read off the tensors, and every
  mismatch explained (a key that is already transposed, heads and positions
  swapped, a `.T` that reversed every dim);
* NaN and inf: in which tensor, how many, where;
* the rows of the weights: each sums to 1, or to 0 for a query with no allowed
  key; a softmax over the wrong dim (the columns sum to 1 instead) and dropout
  left on (entries zeroed, the rest scaled by 1/(1 − p)) are named;
* the mask: dtype and its convention, shape, the fraction blocked, rows with no
  allowed key, and polarity (a mask that blocks the diagonal in
  self-attention, keeps only the future, or blocks most pairs is probably
  inverted);
* the scale: rows far flatter or far sharper than softmax(Q Kᵀ / √d_k) would
  give, measured by the mean entropy of the rows.

Shape legend: B batch, H heads, L_q query length, L_k key length, d_k, d_v.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .shapes import fmt_shape
from .softmax import entropy

__all__ = ["CODES", "LEVELS", "Diagnosis", "Finding", "diagnose"]

LEVELS = ("error", "warning", "info", "ok")
_TAGS = {"error": "ERROR", "warning": "WARNING", "info": "info", "ok": "ok"}

# Every code diagnose can report, with its level.
CODES = {
    "not_tensor": "error",
    "dtype": "error",
    "dtype_mismatch": "error",
    "rank": "error",
    "rank_mismatch": "error",
    "d_k_mismatch": "error",
    "L_k_mismatch": "error",
    "batch_mismatch": "error",
    "shapes": "info",
    "transpose_trap": "info",
    "nonfinite": "error",
    "finite": "ok",
    "scale_invalid": "error",
    "scale_multiplier": "warning",
    "overflow_risk": "info",
    "mask_type": "error",
    "mask_float": "warning",
    "mask_values": "error",
    "mask_shape": "error",
    "mask_ambiguous": "warning",
    "mask_all_blocked": "error",
    "mask_coverage": "info",
    "mask_inverted": "warning",
    "mask_future": "warning",
    "fully_masked_rows": "warning",
    "weights_type": "error",
    "weights_shape": "error",
    "weights_negative": "error",
    "row_sums": "error",
    "row_sums_ok": "ok",
    "softmax_dim": "error",
    "dropout_active": "warning",
    "masked_row_uniform": "warning",
    "masked_weight": "error",
    "scores_transposed": "error",
    "weights_match": "ok",
    "weights_mismatch": "info",
    "scale_flat": "warning",
    "scale_sharp": "warning",
    "scale_ok": "ok",
}

_WIDTH = 92
_MAX_ROWS_NAMED = 4


@dataclass(frozen=True)
class Finding:
    """One thing :func:`diagnose` noticed.

    Attributes:
        level: "error" (the computation is wrong or cannot run), "warning" (probably
            wrong, check it), "info" (worth knowing) or "ok" (a check that passed).
        code: a short name for the finding, one of :data:`CODES` (stable, for tests).
        message: one or two plain sentences: what was seen and the usual fix.

    Source: this series' notebook 08 (article sections 4 and 5: the usual bugs).
    """

    level: str
    code: str
    message: str

    def __post_init__(self) -> None:
        if self.level not in LEVELS:
            raise ValueError(f"level must be one of {LEVELS}, got {self.level!r}.")

    def __str__(self) -> str:
        head = f"{_TAGS[self.level]:<8}[{self.code}] "
        return textwrap.fill(
            self.message,
            width=_WIDTH,
            initial_indent=head,
            subsequent_indent=" " * 10,
            break_on_hyphens=False,
            break_long_words=False,
        )


@dataclass(frozen=True)
class Diagnosis:
    """The findings of :func:`diagnose`, most serious first; prints as a report.

    Attributes:
        findings: the findings, errors first, then warnings, notes and passed checks.
        sizes: what the shapes imply ("B", "H", "L_q", "L_k", "d_k", "d_v"), or None
            when query, key and value do not fit together.

    ``str(diagnosis)`` (and the notebook display) is the report; :meth:`report`
    prints it. A Diagnosis is truthy when it has no error and no warning.

    Source: this series' notebook 08.
    """

    findings: tuple[Finding, ...]
    sizes: dict[str, int] | None

    @property
    def codes(self) -> tuple[str, ...]:
        """The codes of all findings, in order."""
        return tuple(f.code for f in self.findings)

    @property
    def problems(self) -> tuple[Finding, ...]:
        """The errors and warnings."""
        return tuple(f for f in self.findings if f.level in ("error", "warning"))

    @property
    def ok(self) -> bool:
        """True when there is no error and no warning."""
        return not self.problems

    def __bool__(self) -> bool:
        return self.ok

    def has(self, code: str) -> bool:
        """Whether a finding with this code was reported."""
        return code in self.codes

    def get(self, code: str) -> Finding | None:
        """The first finding with this code, or None."""
        return next((f for f in self.findings if f.code == code), None)

    def summary(self) -> str:
        """One line: how many errors, warnings, notes and passed checks."""
        counts = {level: sum(f.level == level for f in self.findings) for level in LEVELS}
        if self.ok:
            head = "no problem found"
        else:
            parts = [
                f"{counts[level]} {level}{'s' if counts[level] != 1 else ''}"
                for level in ("error", "warning")
                if counts[level]
            ]
            head = ", ".join(parts)
        return (
            f"Attention diagnosis: {head} ({counts['info']} note"
            f"{'s' if counts['info'] != 1 else ''}, {counts['ok']} check"
            f"{'s' if counts['ok'] != 1 else ''} passed)"
        )

    def __str__(self) -> str:
        return "\n".join([self.summary(), *(str(f) for f in self.findings)])

    def __repr__(self) -> str:
        problems = ", ".join(f.code for f in self.problems) or "no problem"
        return f"Diagnosis({problems})"

    def report(self) -> None:
        """Print the report."""
        print(str(self))

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self) if not cycle else "Diagnosis(...)")


class _Findings:
    """Collects findings; the level of each code comes from CODES."""

    def __init__(self) -> None:
        self.items: list[Finding] = []

    def add(self, code: str, message: str) -> None:
        self.items.append(Finding(CODES[code], code, message))

    def has(self, *codes: str) -> bool:
        return any(f.code in codes for f in self.items)


def _shape(t: torch.Tensor) -> str:
    return fmt_shape(t.shape)


def _is_float_tensor(t: object) -> bool:
    return isinstance(t, torch.Tensor) and t.is_floating_point()


def _tol(dtype: torch.dtype) -> float:
    """Tolerance for sums and comparisons of weights computed in ``dtype``."""
    return 1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-4


def _indices(flat: torch.Tensor, shape: Sequence[int]) -> list[tuple[int, ...]]:
    """Multi-dim indices of the True entries of a flattened bool tensor (the first few)."""
    where = flat.nonzero().flatten()[:_MAX_ROWS_NAMED].tolist()
    out = []
    for i in where:
        idx = []
        for d in reversed(shape):
            idx.append(i % d)
            i //= d
        out.append(tuple(reversed(idx)))
    return out


def _fmt_index(idx: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(i) for i in idx) + ")" if len(idx) != 1 else f"({idx[0]},)"


# --- query, key, value ------------------------------------------------------------------


def _check_qkv(found: _Findings, query: object, key: object, value: object) -> dict | None:
    """Shape checks; returns the sizes when query, key and value fit together."""
    named = (("query", query), ("key", key), ("value", value))
    ok = True
    for name, t in named:
        if not isinstance(t, torch.Tensor):
            found.add(
                "not_tensor",
                f"{name} is a {type(t).__name__}, not a torch.Tensor. Make it one with "
                f"torch.as_tensor({name}, dtype=torch.float32).",
            )
            ok = False
        elif not t.is_floating_point():
            found.add(
                "dtype",
                f"{name} has dtype {t.dtype}; attention needs floating point (scores are "
                f"scaled and exponentiated). Convert it with {name}.float().",
            )
            ok = False
    if not ok:
        return None
    q, k, v = query, key, value
    bad_rank = [(n, t) for n, t in named if not 2 <= t.dim() <= 4]
    for name, t in bad_rank:
        hint = (
            f"one vector needs a length dim: {name}.unsqueeze(0)"
            if t.dim() < 2
            else "merge the extra leading dims with reshape"
        )
        found.add(
            "rank",
            f"{name} has shape {_shape(t)} ({t.dim()}-D); attention takes (L, d), (B, L, d) "
            f"or (B, H, L, d). Here {hint}.",
        )
    if bad_rank:
        return None
    if not q.dim() == k.dim() == v.dim():
        found.add(
            "rank_mismatch",
            f"query {_shape(q)}, key {_shape(k)} and value {_shape(v)} have different ranks "
            f"({q.dim()}, {k.dim()}, {v.dim()}). Give all three the same leading dims; a "
            f"missing batch dim is added with unsqueeze(0).",
        )
        return None
    if not q.dtype == k.dtype == v.dtype:
        found.add(
            "dtype_mismatch",
            f"query, key and value have dtypes {q.dtype}, {k.dtype} and {v.dtype}; torch.matmul "
            f"refuses to mix them. Convert with .to(query.dtype).",
        )
    fits = True
    key_explained = False  # a transposed key also breaks L_k: say it once
    if q.shape[-1] != k.shape[-1]:
        fits = False
        msg = (
            f"query {_shape(q)} ends in d_k = {q.shape[-1]} but key {_shape(k)} ends in "
            f"{k.shape[-1]}: a score is the dot product of a query row and a key row, so both "
            f"need the same last dim."
        )
        reversed_k = tuple(reversed(k.shape))
        if (
            k.dim() >= 3
            and reversed_k[:-2] == tuple(q.shape[:-2])
            and reversed_k[-1] == q.shape[-1]
        ):
            key_explained = True
            msg += (
                " key looks reversed in every dim, which is what `.T` does to a batch: use "
                "key.transpose(-2, -1) or key.mT where you transpose, and pass key itself."
            )
        elif k.shape[-2] == q.shape[-1]:
            key_explained = True
            msg += (
                f" key looks transposed already, (…, d_k, L_k) = (…, {k.shape[-2]}, "
                f"{k.shape[-1]}): pass it as (…, L_k, d_k); attention transposes it itself."
            )
        else:
            msg += " Check that W_Q and W_K map to the same d_k."
        found.add("d_k_mismatch", msg)
    bq, bk, bv = q.shape[:-2], k.shape[:-2], v.shape[:-2]
    if not bq == bk == bv:
        fits = False
        msg = (
            f"the leading dims differ: query {_shape(q)}, key {_shape(k)}, value {_shape(v)} "
            f"({'(B, H)' if q.dim() == 4 else '(B,)'} must be the same for all three)."
        )
        if q.dim() == 4:
            for name, t in (("key", k), ("value", v), ("query", q)):
                others = [o for o in (q, k, v) if o is not t]
                swapped = (t.shape[0], t.shape[2], t.shape[1], t.shape[3])
                if all(tuple(o.shape[:2]) == swapped[:2] for o in others):
                    msg += (
                        f" {name} looks like (B, L, H, d): heads and positions swapped. After "
                        f"splitting heads with view(B, L, H, d_k), call transpose(1, 2) once to "
                        f"get (B, H, L, d_k)."
                    )
                    break
        elif q.dim() == 3 and (tuple(k.shape[:2]) == tuple(q.shape[:2])[::-1]):
            msg += (
                " key looks like (L, B, d) while query is (B, L, d): a batch_first mix-up. "
                "Use one layout, e.g. key.transpose(0, 1)."
            )
        found.add("batch_mismatch", msg)
    if k.shape[-2] != v.shape[-2] and not key_explained and bq == bk == bv:
        fits = False
        msg = (
            f"key {_shape(k)} has L_k = {k.shape[-2]} rows but value {_shape(v)} has "
            f"{v.shape[-2]}: every key row labels the value row at the same position."
        )
        if v.shape[-1] == k.shape[-2]:
            msg += " value looks transposed, (…, d_v, L_k): pass it as (…, L_k, d_v)."
        found.add("L_k_mismatch", msg)
    if not fits:
        return None
    sizes: dict[str, int] = {}
    if q.dim() >= 3:
        sizes["B"] = q.shape[0]
    if q.dim() == 4:
        sizes["H"] = q.shape[1]
    sizes.update(L_q=q.shape[-2], L_k=k.shape[-2], d_k=q.shape[-1], d_v=v.shape[-1])
    lead = {
        2: "no batch dim",
        3: f"B = {sizes.get('B')}",
        4: f"B = {sizes.get('B')}, H = {sizes.get('H')}",
    }[q.dim()]
    scores = (*bq, sizes["L_q"], sizes["L_k"])
    output = (*bq, sizes["L_q"], sizes["d_v"])
    kind = (
        "self-attention sizes (L_q = L_k)"
        if sizes["L_q"] == sizes["L_k"]
        else ("cross-attention (L_q ≠ L_k)")
    )
    found.add(
        "shapes",
        f"query {_shape(q)}, key {_shape(k)}, value {_shape(v)}: {lead}, L_q = {sizes['L_q']}, "
        f"L_k = {sizes['L_k']}, d_k = {sizes['d_k']}, d_v = {sizes['d_v']}; {kind}. Scores and "
        f"weights will be {fmt_shape(scores)}, the output {fmt_shape(output)}.",
    )
    H, d_k, L_k = sizes.get("H", 0), sizes["d_k"], sizes["L_k"]
    if H >= 2 and d_k == H and L_k in (H, 1):
        what = (
            "the whole attention runs without an error and returns wrong numbers of the right shape"
            if L_k == H
            else f"the scores line runs without an error (scores of shape (…, L_q, {H}) instead "
            f"of (…, L_q, 1)) and the error only shows up later, at weights @ value"
        )
        found.add(
            "transpose_trap",
            f"Here H = d_k = {H} and L_k = {L_k}: on these shapes the classic mistake "
            f"query @ key.transpose(1, 2), which swaps heads and positions, goes unnoticed: "
            f"{what}. Make sure your code uses key.transpose(-2, -1).",
        )
    return sizes


def _check_finite(found: _Findings, tensors: Sequence[tuple[str, torch.Tensor]]) -> set[str]:
    """One finding per tensor with NaN or inf; returns the names of those tensors."""
    bad_names = set()
    for name, t in tensors:
        if t.numel() == 0:
            continue
        bad = ~torch.isfinite(t)
        if not bool(bad.any()):
            continue
        bad_names.add(name)
        n_nan = int(torch.isnan(t).sum())
        n_inf = int(bad.sum()) - n_nan
        first = _indices(bad.flatten(), t.shape)
        where = ", ".join(_fmt_index(i) for i in first)
        msg = f"{name} {_shape(t)} holds {n_nan} NaN and {n_inf} ±inf value(s) (first at {where})."
        if name == "weights" and t.dim() >= 2:
            rows = bad.any(dim=-1)
            msg += (
                f" {int(rows.sum())} of {rows.numel()} rows are affected. NaN weights come from "
                f"a row whose scores are all -inf (a fully masked row filled with -inf) or "
                f"from exp overflowing in a softmax without the max trick."
            )
        else:
            msg += " NaN spreads to every output that touches it; find where it was produced."
        found.add("nonfinite", msg)
    if not bad_names and tensors:
        names = ", ".join(n for n, _ in tensors)
        found.add("finite", f"No NaN or inf in {names}.")
    return bad_names


# --- mask -------------------------------------------------------------------------------


def _mask_to_keep(found: _Findings, mask: object) -> torch.Tensor | None:
    """The mask as a bool keep-mask (True = may attend), or None if it cannot be read."""
    if not isinstance(mask, torch.Tensor):
        found.add(
            "mask_type",
            f"mask is a {type(mask).__name__}, not a tensor. Build it with a comparison "
            f"(bool), e.g. attn_lib.padding_mask(lengths) or attn_lib.causal_mask(L).",
        )
        return None
    if mask.dtype == torch.bool:
        return mask
    if mask.is_floating_point():
        values = mask[torch.isfinite(mask)]
        has_neg_inf = bool(torch.isneginf(mask).any())
        zero_one = bool(((values == 0) | (values == 1)).all()) and not has_neg_inf
        additive = bool(((values == 0) | (values <= -1e4)).all()) and (
            has_neg_inf or bool((values <= -1e4).any())
        )
        if zero_one:
            found.add(
                "mask_float",
                f"mask is a {mask.dtype} tensor of 0s and 1s. Read as a keep-mask (the "
                f"article's masked_fill(mask == 0, …)) 1 means 'may attend'; but PyTorch's "
                f"SDPA and nn.MultiheadAttention ADD a float mask to the scores, so there it "
                f"would add 1 to allowed scores and block nothing. attn_lib refuses float "
                f"masks: pass mask.bool(). Read here as a keep-mask.",
            )
            return mask != 0
        if additive:
            found.add(
                "mask_float",
                f"mask is an additive {mask.dtype} mask (0 where allowed, a large negative "
                f"number or -inf where blocked), PyTorch's float convention: it is added to the "
                f"scores. attn_lib wants a keep-mask: pass mask == 0. Read here as additive.",
            )
            return mask == 0
        found.add(
            "mask_float",
            f"mask is a {mask.dtype} tensor with values other than 0/1 or 0/-inf (e.g. "
            f"{sorted(set(values.flatten()[:4].tolist()))}); its meaning is unclear. Use a bool "
            f"keep-mask (True = may attend). Its coverage is not checked.",
        )
        return None
    if mask.is_complex() or not bool(((mask == 0) | (mask == 1)).all()):
        shown = sorted(int(v) for v in mask.unique()[:6]) if not mask.is_complex() else "complex"
        found.add(
            "mask_values",
            f"an integer mask must hold only 0 (blocked) and 1 (may attend); this one holds "
            f"{shown}. Build it with a comparison, e.g. mask = (ids != pad_id).",
        )
        return None
    return mask != 0


def _check_mask_shape(
    found: _Findings, keep: torch.Tensor, scores: tuple[int, ...], sizes: dict
) -> bool:
    """Whether the mask broadcasts onto the scores the way attn_lib reads it."""
    rank, L_q, L_k = len(scores), scores[-2], scores[-1]
    shape = tuple(keep.shape)
    where = f"the scores are {fmt_shape(scores)} = (…, L_q, L_k)"
    if keep.dim() == 2:
        if all(m in (s, 1) for m, s in zip(shape, (L_q, L_k), strict=True)):
            B = sizes.get("B")
            if (
                rank >= 3
                and B is not None
                and shape == (B, L_k)
                and B == L_q
                and not torch.equal(keep, torch.ones_like(keep).tril())
                and _rows_are_prefixes(keep)
            ):
                fix = "mask.unsqueeze(1)" if rank == 3 else "mask[:, None, None, :]"
                found.add(
                    "mask_ambiguous",
                    f"mask {fmt_shape(shape)} is read as (L_q, L_k), but its rows look like "
                    f"padding (True then False) and B = L_q = {B}. If it is a (B, L_k) padding "
                    f"mask it masks the wrong thing without any error: use {fix}.",
                )
            return True
        msg = f"mask {fmt_shape(shape)} is 2-D, which means (L_q, L_k) = {fmt_shape((L_q, L_k))}; {where}."
        if rank >= 3 and shape == (scores[0], L_k):
            fix = "mask.unsqueeze(1)" if rank == 3 else "mask[:, None, None, :]"
            msg += f" It looks like a (B, L_k) padding mask: use {fix}."
        found.add("mask_shape", msg)
        return False
    if keep.dim() != rank:
        if keep.dim() < rank:
            target = (shape[0],) + (1,) * (rank - keep.dim()) + shape[1:]
            fix = (
                f"Broadcasting lines dims up from the right and may mask the wrong axis; give "
                f"it the scores' rank, e.g. {fmt_shape(target)}."
            )
        else:
            fix = "Remove the extra dims or check which tensor was passed as mask."
        found.add(
            "mask_shape",
            f"mask {fmt_shape(shape)} ({keep.dim()}-D) does not match: {where} ({rank}-D). A mask "
            f"is 2-D (L_q, L_k) or has the scores' rank. {fix}",
        )
        return False
    bad = [i for i, (m, s) in enumerate(zip(shape, scores, strict=True)) if m not in (s, 1)]
    if bad:
        dims = ", ".join(f"dim {i}: {shape[i]} vs {scores[i]}" for i in bad)
        msg = (
            f"mask {fmt_shape(shape)} does not fit {where} ({dims}); every mask dim must equal "
            f"the scores' dim or be 1."
        )
        if rank >= 3 and shape[-1] == 1 and shape[-2] == L_k:
            msg += " A (B, L, 1) mask blanks query rows; a padding mask is (B, 1, L_k)."
        found.add("mask_shape", msg)
        return False
    return True


def _rows_are_prefixes(keep: torch.Tensor) -> bool:
    """Each row is True…True False…False (a right-padding pattern)."""
    k = keep.to(torch.int8)
    return bool((k[..., 1:] <= k[..., :-1]).all())


def _check_mask_content(
    found: _Findings, keep: torch.Tensor, scores: tuple[int, ...]
) -> torch.Tensor:
    """Coverage, fully masked rows and polarity; returns the keep-mask broadcast to the scores."""
    full = keep.expand(scores)  # (…, L_q, L_k)
    n_pairs = full.numel()
    blocked = n_pairs - int(full.sum())
    frac = blocked / n_pairs if n_pairs else 0.0
    if blocked == n_pairs:
        found.add(
            "mask_all_blocked",
            "mask blocks every key for every query. This is almost always an inverted mask "
            "(nn.MultiheadAttention uses True = blocked, the article and attn_lib True = may "
            "attend: pass ~mask) or an additive mask of zeros passed as a keep-mask.",
        )
        return full
    no_key = ~full.any(dim=-1)  # (…, L_q)
    n_rows = no_key.numel()
    n_empty = int(no_key.sum())
    found.add(
        "mask_coverage",
        f"mask blocks {frac:.1%} of the query–key pairs ({blocked} of {n_pairs}); "
        f"{n_empty} of {n_rows} query rows have no allowed key.",
    )
    L_q, L_k = scores[-2], scores[-1]
    inverted = False
    if L_q == L_k and L_q > 1:
        diag = full.diagonal(dim1=-2, dim2=-1)  # (…, L)
        if not bool(diag.any()):
            inverted = True
            found.add(
                "mask_inverted",
                "mask blocks the diagonal everywhere: no token may attend to itself. In "
                "self-attention that is almost always an inverted mask (an inverted causal mask "
                "looks exactly like this). attn_lib and the article use True = may attend; "
                "nn.MultiheadAttention uses True = blocked. Pass ~mask.",
            )
    if not inverted and frac > 0.5:
        found.add(
            "mask_inverted",
            f"mask blocks most query–key pairs ({frac:.1%}). Padding and causal masks block "
            f"less than half unless the sequences are mostly padding: is it inverted (True = "
            f"blocked, nn.MultiheadAttention's convention)? attn_lib uses True = may attend.",
        )
    if L_q == L_k and L_q > 1:
        pattern = full.reshape(-1, L_q, L_k)
        upper = torch.ones(L_q, L_k, dtype=torch.bool, device=full.device).triu()
        if bool((pattern == upper).all()):
            found.add(
                "mask_future",
                "mask keeps the diagonal and the future and blocks the past (upper triangular): "
                "a causal mask is lower triangular, torch.tril, so that query i sees keys "
                "0 … i.",
            )
    if n_empty:
        rows = ", ".join(_fmt_index(i) for i in _indices(no_key.flatten(), no_key.shape))
        msg = (
            f"{n_empty} query row(s) have every key blocked (first at {rows}). attn_lib and "
            f"PyTorch's SDPA give them all-zero weights and a zero output; a -1e9 fill makes "
            f"them uniform (the mean of V) and -inf makes them NaN."
        )
        if keep.shape[-1] == 1 and L_k > 1:
            msg += (
                f" The mask has shape {_shape(keep)}, (…, L_q, 1): it blanks whole query rows, "
                f"not key columns. A padding mask is (B, 1, L_k): use unsqueeze(1), not "
                f"unsqueeze(-1)."
            )
        elif found.has("mask_inverted"):
            msg += " Here they most likely come from the inverted mask."
        else:
            msg += " They usually are padded queries: leave them out of the loss."
        found.add("fully_masked_rows", msg)
    return full


# --- weights ----------------------------------------------------------------------------


def _masked_softmax(scores: torch.Tensor, full_keep: torch.Tensor | None) -> torch.Tensor:
    """softmax over the last dim; blocked scores get no weight, rows with no key are 0."""
    if full_keep is None:
        return torch.softmax(scores, dim=-1)
    filled = scores.masked_fill(~full_keep, float("-inf"))
    w = torch.softmax(filled, dim=-1)
    return torch.nan_to_num(w, nan=0.0)


def _close(a: torch.Tensor, b: torch.Tensor, tol: float) -> bool:
    return a.shape == b.shape and bool(((a - b).abs() <= tol + tol * b.abs()).all())


def _row_range(sums: torch.Tensor) -> str:
    return f"{sums.min().item():.4f} … {sums.max().item():.4f}"


def _check_weights_alone(
    found: _Findings,
    w: torch.Tensor,
    scores_shape: tuple[int, ...] | None,
    full_keep: torch.Tensor | None,
    ref: torch.Tensor | None,
    tol: float,
) -> bool:
    """Shape, sign and row sums of the weights; returns whether the rows are right.

    ``tol`` is the tolerance of the dtype the weights were computed in.
    """
    if scores_shape is not None and tuple(w.shape) != scores_shape:
        msg = f"weights {_shape(w)} should be (…, L_q, L_k) = {fmt_shape(scores_shape)}."
        L_q, L_k = scores_shape[-2], scores_shape[-1]
        if tuple(w.shape) == (*scores_shape[:-2], L_k, L_q):
            msg += (
                " They look transposed, (…, L_k, L_q): were the scores computed as K Qᵀ? "
                "Compute query @ key.transpose(-2, -1)."
            )
        found.add("weights_shape", msg)
        return False
    if w.dim() < 2:
        found.add("weights_shape", f"weights {_shape(w)} should be at least 2-D (L_q, L_k).")
        return False
    if bool((w < 0).any()):
        found.add(
            "weights_negative",
            f"weights hold negative values (down to {w.min().item():.4f}). Attention weights "
            f"come out of a softmax and are ≥ 0: these look like scores. Apply "
            f"torch.softmax(scores, dim=-1).",
        )
        return False
    sums = w.sum(dim=-1)  # (…, L_q)
    has_key = (
        torch.ones_like(sums, dtype=torch.bool) if full_keep is None else full_keep.any(dim=-1)
    )
    # Rows with no allowed key: zero is right, uniform is the -1e9 fill.
    if not bool(has_key.all()):
        empty = w[~has_key]  # (n, L_k)
        uniform = (empty - 1.0 / w.shape[-1]).abs().max() <= tol if empty.numel() else False
        if bool(uniform):
            found.add(
                "masked_row_uniform",
                f"the {int((~has_key).sum())} row(s) with every key blocked have uniform "
                f"weights (1/L_k = {1.0 / w.shape[-1]:.4f} each): that is what a -1e9 fill "
                f"gives. The row's output is then the mean of V, although the query may "
                f"attend to nothing; attn_lib and SDPA return zeros there.",
            )
    rows_ok = bool(((sums - 1).abs() <= tol)[has_key].all()) and bool(
        ((sums.abs() <= tol) | ((sums - 1).abs() <= tol))[~has_key].all()
    )
    if full_keep is not None:
        leak = w.masked_fill(full_keep, 0.0) * has_key.unsqueeze(-1)
        if bool((leak > tol).any()):
            n = int((leak > tol).sum())
            msg = (
                f"{n} blocked position(s) carry weight (up to {leak.max().item():.4f}) in rows "
                f"that have an allowed key: the mask was not applied, was inverted, or was "
                f"filled with 0 (exp(0) = 1 blocks nothing; fill with a large negative number)."
            )
            found.add("masked_weight", msg)
    if rows_ok:
        extra = " (0 for the rows with no allowed key)" if not bool(has_key.all()) else ""
        found.add(
            "row_sums_ok",
            f"every row of weights sums to 1{extra}. Necessary, not sufficient: a wrong scale, "
            f"an inverted mask or K Qᵀ pass this check too.",
        )
        return True
    # Why not? Dropout (entries zeroed, the rest scaled by 1/(1 - p)) ...
    if ref is not None and _dropout_factor(w, ref, tol) is not None:
        c, zeroed = _dropout_factor(w, ref, tol)
        found.add(
            "dropout_active",
            f"rows sum to {_row_range(sums)}, not 1, and the weights are the softmax weights "
            f"with {zeroed:.0%} of them set to 0 and the rest multiplied by {c:.4f} = "
            f"1/(1 − p) for p ≈ {1 - 1 / c:.2f}: dropout is on. In training that is expected "
            f"(the rows sum to 1 only on average); to evaluate, call model.eval() (or pass "
            f"training=False) so that dropout is off.",
        )
        return False
    # ... or a softmax over another dim.
    for dim, what in ((-2, "the queries (dim=-2)"), (0, "the batch (dim=0)")):
        if w.dim() >= 3 or dim == -2:
            other = w.sum(dim=dim)
            if bool(((other - 1).abs() <= tol).all()) and (dim != 0 or w.shape[0] > 1):
                found.add(
                    "softmax_dim",
                    f"the rows of weights do not sum to 1 (they sum to {_row_range(sums)}) but "
                    f"the sums over {what} do: the softmax was taken over the wrong dim. Each "
                    f"query's weights over the keys must sum to 1: torch.softmax(scores, "
                    f"dim=-1).",
                )
                return False
    has_zeros = bool(((w == 0) & (full_keep if full_keep is not None else True)).any())
    mean = sums[has_key].mean().item() if bool(has_key.any()) else 0.0
    if ref is None and has_zeros and 0.6 < mean < 1.4:
        found.add(
            "dropout_active",
            f"rows sum to {_row_range(sums)} (mean {mean:.4f}), not 1, and some allowed "
            f"weights are exactly 0: this looks like dropout on the weights (inverted dropout "
            f"keeps the sum at 1 only on average). To evaluate, call model.eval().",
        )
        return False
    found.add(
        "row_sums",
        f"the rows of weights sum to {_row_range(sums)}, not to 1. Weights must come straight "
        f"from torch.softmax(scores, dim=-1) (rows with no allowed key: all 0).",
    )
    return False


def _dropout_factor(w: torch.Tensor, ref: torch.Tensor, tol: float) -> tuple[float, float] | None:
    """(c, fraction zeroed) when w = ref · m · c with m ∈ {0, 1} and one c > 1, else None."""
    live = ref > 1e-6
    zero = (w == 0) & live
    kept = (w != 0) & live
    if not bool(zero.any()) or not bool(kept.any()) or bool(((w != 0) & ~live).any()):
        return None
    ratio = w[kept] / ref[kept]
    c = ratio.median().item()
    if c <= 1 + tol or not bool(((ratio - c).abs() <= 10 * tol * c).all()):
        return None
    return c, int(zero.sum()) / int(live.sum())


# --- scale ------------------------------------------------------------------------------


def _mean_entropy(w: torch.Tensor, counted: torch.Tensor) -> float:
    """Mean entropy (nats) of the rows selected by ``counted`` (…, L_q)."""
    return entropy(w)[counted].mean().item()


def _scale_name(scale: float, d_k: int) -> str:
    named = {
        1 / math.sqrt(d_k): "÷√d_k",
        1 / d_k: "÷d_k",
        1.0: "no scaling",
        math.sqrt(d_k): "×√d_k",
    }
    for value, name in named.items():
        if math.isclose(scale, value, rel_tol=1e-6):
            return name
    return f"× {scale:.4g}"


def _check_scale_value(found: _Findings, scale: object, d_k: int | None) -> float | None:
    if isinstance(scale, torch.Tensor) and scale.numel() == 1:
        scale = scale.item()
    if (
        isinstance(scale, bool)
        or not isinstance(scale, int | float)
        or not math.isfinite(float(scale))
        or float(scale) <= 0
    ):
        found.add(
            "scale_invalid",
            f"scale = {scale!r} is not a finite number > 0. It multiplies the scores: the "
            f"usual value is 1/√d_k.",
        )
        return None
    scale = float(scale)
    if scale > 1 and d_k is not None and d_k > 1:
        which = (
            f"= √d_k = {math.sqrt(d_k):.4f}"
            if math.isclose(scale, math.sqrt(d_k), rel_tol=1e-3)
            else "> 1"
        )
        found.add(
            "scale_multiplier",
            f"scale = {scale:.4g} {which}. In attn_lib and PyTorch's SDPA `scale` MULTIPLIES the "
            f"scores, so this sharpens them instead of dividing. For softmax(Q Kᵀ / √d_k) pass "
            f"scale = 1/√d_k = {1 / math.sqrt(d_k):.4f} (or leave it None).",
        )
    return scale


def _check_scale_entropy(
    found: _Findings,
    raw: torch.Tensor,
    full_keep: torch.Tensor | None,
    d_k: int,
    scale: float | None,
    w: torch.Tensor | None,
    tol: float = 1e-4,
) -> None:
    """Compare how flat the rows are with how flat ÷√d_k would make them.

    ``tol`` is the tolerance of the dtype the weights were computed in.
    """
    default = 1 / math.sqrt(d_k)
    ref = _masked_softmax(raw * default, full_keep)
    n_allowed = (
        raw.new_full(raw.shape[:-1], raw.shape[-1])
        if full_keep is None
        else (full_keep.sum(dim=-1).to(raw.dtype))
    )
    counted = n_allowed >= 2
    if not bool(counted.any()):
        return
    H_ref = _mean_entropy(ref, counted)
    H_max = n_allowed[counted].log().mean().item()
    matched = None
    if w is not None:
        source = "your weights"
        H_x = _mean_entropy(w.to(raw.dtype), counted)
        for cand in sorted({1 / math.sqrt(d_k), 1 / d_k, 1.0, math.sqrt(d_k)}):
            if math.isclose(cand, default, rel_tol=1e-9):
                continue
            if _close(w.to(raw.dtype), _masked_softmax(raw * cand, full_keep), tol):
                matched = cand
                break
    elif scale is not None:
        source = f"softmax at scale = {scale:.4g}"
        H_x = _mean_entropy(_masked_softmax(raw * scale, full_keep), counted)
    else:
        return
    numbers = (
        f"mean row entropy {H_x:.4f} nats against {H_ref:.4f} with ÷√d_k (a uniform row: "
        f"{H_max:.4f}, a one-hot row: 0)"
    )
    gap_ref = H_max - H_ref
    flat = (matched is not None and matched < default) or (
        matched is None and gap_ref > 1e-3 and (H_max - H_x) < 0.5 * gap_ref
    )
    sharp = (matched is not None and matched > default) or (
        matched is None and H_ref > 1e-3 and H_x < 0.5 * H_ref
    )
    cause = ""
    if matched is not None:
        cause = f" They equal softmax(Q Kᵀ {_scale_name(matched, d_k)}) exactly (d_k = {d_k})."
    if flat:
        found.add(
            "scale_flat",
            f"the rows are far flatter than ÷√d_k would make them: {numbers}.{cause} Dividing by "
            f"d_k (or by d_model) instead of √d_k shrinks the scores too much and pushes every "
            f"row towards uniform.",
        )
    elif sharp:
        found.add(
            "scale_sharp",
            f"the rows are far sharper than ÷√d_k would make them: {numbers}.{cause} Without the "
            f"1/√d_k factor (or with scale = √d_k) large d_k pushes rows towards one-hot and "
            f"their gradients towards 0.",
        )
    else:
        found.add("scale_ok", f"{source}: {numbers}, close to ÷√d_k.")


# --- the entry point --------------------------------------------------------------------


def diagnose(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None = None,
    weights: torch.Tensor | None = None,
    *,
    scale: float | None = None,
) -> Diagnosis:
    """Check the tensors of an attention computation and explain what looks wrong.

    Never raises on bad tensors: every problem becomes a :class:`Finding`.

    Args:
        query: (…, L_q, d_k), floating point; … is nothing, (B,) or (B, H).
        key: (…, L_k, d_k).
        value: (…, L_k, d_v).
        mask: optional keep-mask (True or 1 = may attend), 2-D (L_q, L_k) or of the
            scores' rank, e.g. (B, 1, L_k). A float mask is read as 0/1 keep-mask or as
            an additive 0/-inf mask when it is clearly one, and reported.
        weights: optional (…, L_q, L_k), the attention weights the learner computed
            (after softmax, and after dropout if any).
        scale: optional multiplier of the scores the learner used (the default of
            attention is 1/√d_k); checked against how flat ÷√d_k makes the rows.

    Returns:
        :class:`Diagnosis`; see :data:`CODES` for every code it may hold.

    Raises:
        Nothing for bad tensors, masks, weights or scales: each becomes a finding. The
        inputs are not modified, no gradient is recorded and the random state is untouched.

    Source: article sections 3.3 (the row-sum check), 4.1-4.3 and 5 (shape and mask
        bugs); Vaswani et al. 2017, eq. (1).
    """
    with torch.no_grad():
        return _diagnose(query, key, value, mask, weights, scale)


def _diagnose(
    query: object, key: object, value: object, mask: object, weights: object, scale: object
) -> Diagnosis:
    found = _Findings()
    sizes = _check_qkv(found, query, key, value)
    w = weights
    if w is not None and not _is_float_tensor(w):
        what = type(w).__name__ if not isinstance(w, torch.Tensor) else f"dtype {w.dtype}"
        found.add(
            "weights_type",
            f"weights is {what}; pass the floating-point tensor the softmax returned.",
        )
        w = None
    tensors = [
        (n, t)
        for n, t in (("query", query), ("key", key), ("value", value), ("weights", w))
        if _is_float_tensor(t)
    ]
    nonfinite = _check_finite(found, tensors)
    scores_shape = None
    raw = None
    if sizes is not None:
        scores_shape = (*query.shape[:-2], sizes["L_q"], sizes["L_k"])
        if not {"query", "key"} & nonfinite and query.dtype == key.dtype == value.dtype:
            raw = torch.matmul(query.double(), key.double().transpose(-2, -1))  # (…, L_q, L_k)
    d_k = sizes["d_k"] if sizes is not None else None
    scale_value = None
    if scale is not None:
        scale_value = _check_scale_value(found, scale, d_k)
    if raw is not None and raw.numel():
        s = scale_value if scale_value is not None else 1 / math.sqrt(d_k)
        top = (raw * s).max().item()
        limit = math.log(torch.finfo(query.dtype).max)
        if top > limit:
            found.add(
                "overflow_risk",
                f"the largest scaled score is {top:.4g}, above log(finfo({str(query.dtype)[6:]})"
                f".max) = {limit:.4f}: exp overflows there, so a softmax without the max trick "
                f"gives inf/inf = NaN. torch.softmax and attn_lib subtract each row's max first "
                f"and are fine.",
            )

    full_keep = None
    if mask is not None:
        keep = _mask_to_keep(found, mask)
        if keep is not None and scores_shape is not None:
            if _check_mask_shape(found, keep, scores_shape, sizes):
                full_keep = _check_mask_content(found, keep, scores_shape)
        elif keep is not None and keep.dim() >= 2:
            _check_mask_content(found, keep, tuple(keep.shape))

    weights_ok = False
    ref = None
    if raw is not None:
        s = scale_value if scale_value is not None else 1 / math.sqrt(d_k)
        ref = _masked_softmax(raw * s, full_keep)
    if w is not None and "weights" not in nonfinite:
        w64 = w.double()
        shape_ok = scores_shape is None or tuple(w.shape) == scores_shape
        tol = _tol(w.dtype)
        weights_ok = _check_weights_alone(
            found, w64, scores_shape, full_keep, ref if shape_ok else None, tol
        )
        if weights_ok and ref is not None:
            if _close(w64, ref, tol):
                name = _scale_name(scale_value, d_k) if scale_value is not None else "÷√d_k"
                found.add(
                    "weights_match",
                    f"weights equal softmax(Q Kᵀ {name}) of this query and key"
                    f"{' with this mask' if full_keep is not None else ''}.",
                )
            else:
                transposed = None
                if sizes["L_q"] == sizes["L_k"]:
                    s = scale_value if scale_value is not None else 1 / math.sqrt(d_k)
                    transposed = _masked_softmax(raw.transpose(-2, -1) * s, full_keep)
                if transposed is not None and _close(w64, transposed, tol):
                    found.add(
                        "scores_transposed",
                        "weights equal softmax(K Qᵀ …), the scores transposed: row i holds key "
                        "i against every query. Rows still sum to 1, so only a comparison "
                        "catches this. Compute query @ key.transpose(-2, -1).",
                    )
                    weights_ok = False
    if raw is not None:
        usable_w = w.double() if (w is not None and weights_ok) else None
        if usable_w is not None or scale_value is not None:
            tol = _tol(w.dtype) if w is not None else 1e-4
            _check_scale_entropy(found, raw, full_keep, d_k, scale_value, usable_w, tol)
        if usable_w is not None and not found.has(
            "weights_match", "scale_flat", "scale_sharp", "scores_transposed"
        ):
            diff = (usable_w - ref).abs().max().item()
            found.add(
                "weights_mismatch",
                f"weights are not softmax(Q Kᵀ · scale) of this query and key (largest "
                f"difference {diff:.4f}): they may come from other tensors or another mask, or "
                f"dropout was applied to the scores before the softmax.",
            )
    order = {level: i for i, level in enumerate(LEVELS)}
    findings = tuple(sorted(found.items, key=lambda f: order[f.level]))
    return Diagnosis(findings=findings, sizes=sizes)
