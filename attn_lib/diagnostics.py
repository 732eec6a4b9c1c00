"""Look at a learner's attention tensors and say, in plain words, what looks wrong.

:func:`diagnose` checks query, key, value and, when given, the mask, the weights the
learner computed and the scale they used. It returns a :class:`Diagnosis`: findings
(level, code, message) that print as a short report. It never raises on a learner's
tensors: what it cannot check (a meta tensor, an empty batch) is a finding too.

It names a mistake by recomputing the weights for every entry of :data:`MISTAKES`
(÷d_k, a softmax over the wrong dim, key.reshape instead of a transpose, a fill of 0, …)
with attn_lib's own attention, and reporting the one the learner's weights equal.

Used by notebook 08, section 8 (a diagnostic helper); article sections 3.3, 4 and 5.

Shape legend: B batch, H heads, L_q query length, L_k key length, d_k, d_v.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from .core import scaled_dot_product_attention
from .shapes import as_keep_mask, check_mask, check_scale, fmt_shape
from .softmax import entropy

__all__ = ["CODES", "LEVELS", "MISTAKES", "Diagnosis", "Finding", "Mistake", "diagnose"]

LEVELS = ("error", "warning", "info", "ok")
_TAGS = {"error": "ERROR", "warning": "WARNING", "info": "info", "ok": "ok"}

# Every finding diagnose can report: code → (level, message). A message names the tensor,
# what was seen and the usual fix, in one or two plain sentences; {fields} are filled in
# where it is reported. Levels: see Finding.
_SAY: dict[str, tuple[str, str]] = {
    # query, key, value
    "not_tensor": ("error", ("{name} is a {kind}, not a torch.Tensor. Make it one with "
                             "torch.as_tensor({name}, dtype=torch.float32).")),
    "dtype": ("error", "{names} {has} dtype {dtype}{why}"),
    "dtype_mismatch": ("error", ("query, key and value have dtypes {dtypes}; torch.matmul refuses "
                                 "to mix them. Convert with .to(query.dtype).")),
    "device_mismatch": ("error", ("{where}: attention needs all of them on one device. Move them "
                                  "with .to(query.device).")),
    "not_checked": ("warning", ("{names} {are} on the meta device: shapes without values, so only "
                                "shapes are checked. Create real tensors (device='cpu') to check "
                                "the numbers.")),
    "rank": ("error", ("{name} has shape {shape} ({rank}-D); attention takes (L, d), (B, L, d) or "
                       "(B, H, L, d). Here {hint}.")),
    "rank_mismatch": ("error", ("query {q}, key {k} and value {v} have different ranks ({ranks}). "
                                "Give all three the same leading dims; a missing batch dim is "
                                "added with unsqueeze(0).")),
    "d_k_mismatch": ("error", ("query {q} ends in d_k = {d_q} but key {k} ends in {d_k}: a score "
                               "is the dot product of a query row and a key row, so both need the "
                               "same last dim. {hint}")),
    "L_k_mismatch": ("error", ("key {k} has L_k = {L_k} rows but value {v} has {L_v}: every key "
                               "row labels the value row at the same position.{hint}")),
    "batch_mismatch": ("error", ("the leading dims differ: query {q}, key {k}, value {v} ({lead} "
                                 "must be the same for all three).{hint}")),
    "empty": ("warning", ("{zeros}: the scores {scores} are empty, so there is nothing to attend "
                          "and the mask and weights are not checked.{refused} An empty batch "
                          "usually means a slice or a filter left nothing.")),
    "shapes": ("info", ("query {q}, key {k}, value {v}: {lead}, L_q = {L_q}, L_k = {L_k}, d_k = "
                        "{d_k}, d_v = {d_v}; {kind}. Scores and weights will be {scores}, the "
                        "output {output}.")),
    "transpose_trap": ("info", ("Here H = d_k = {H} and L_k = {L_k}: on these shapes the classic "
                                "mistake query @ key.transpose(1, 2), which swaps heads and "
                                "positions, goes unnoticed: {what}. Make sure your code uses "
                                "key.transpose(-2, -1).")),
    "nonfinite": ("error", ("{name} {shape} holds {nan} NaN and {inf} ±inf value(s) (first at "
                            "{where}){rest}")),
    "finite": ("ok", "No NaN or inf in {names}."),
    "overflow_risk": ("info", ("the largest scaled score is {top:.4g}, above "
                               "log(finfo({dtype}).max) = {limit:.4f}: exp overflows there, so a "
                               "softmax without the max trick gives inf/inf = NaN. torch.softmax "
                               "and attn_lib subtract each row's max first and are fine.")),
    # scale
    "scale_invalid": ("error", "attn_lib refuses this scale: {err} The checks here use 1/√d_k."),
    "scale_multiplier": ("warning", ("scale = {s:.4g} {which}. In attn_lib and PyTorch's SDPA "
                                     "`scale` MULTIPLIES the scores, so this sharpens them instead "
                                     "of dividing. For softmax(Q Kᵀ / √d_k) pass scale = 1/√d_k = "
                                     "{default:.4f} (or leave it None).")),
    "scale_ok": ("ok", "{text}"),
    "scale_flat": ("warning", "{text}"),
    "scale_sharp": ("warning", "{text}"),
    # mask
    "mask_type": ("error", ("mask is a {kind}, not a tensor. Build it with a comparison (bool), "
                            "e.g. attn_lib.padding_mask(lengths) or attn_lib.causal_mask(L).")),
    "mask_float": ("warning", "mask is {what} attn_lib refuses float masks{fix}"),
    "mask_nan": ("error", ("mask ({dtype}) holds {n} NaN of {total}. Added to the scores "
                           "(PyTorch's float convention) NaN turns every row it touches into NaN; "
                           "read as a keep-mask, NaN == 0 is False, so those pairs may attend. "
                           "attn_lib refuses float masks: build it with a comparison (bool). Its "
                           "coverage is not checked.")),
    "mask_values": ("error", "{text}"),
    "mask_shape": ("error", "{text}"),
    "mask_ambiguous": ("warning", ("mask {shape} is read as (L_q, L_k), but its rows look like "
                                   "padding (True then False) and B = L_q = {B}. If it is a (B, "
                                   "L_k) padding mask it masks the wrong thing without any error: "
                                   "use {fix}.")),
    "mask_all_blocked": ("error", ("mask blocks every key for every query. This is almost always "
                                   "an inverted mask (nn.MultiheadAttention uses True = blocked, "
                                   "the article and attn_lib True = may attend: pass ~mask) or an "
                                   "additive mask of zeros passed as a keep-mask.")),
    "mask_coverage": ("info", ("mask blocks {frac:.1%} of the query–key pairs ({blocked} of "
                               "{pairs}); {empty} of {rows} query rows have no allowed key.")),
    "mask_inverted": ("warning", "{text}"),  # the two readings: see _check_mask_content
    "mask_future": ("warning", ("mask keeps the diagonal and the future and blocks the past (upper "
                                "triangular): a causal mask is lower triangular, torch.tril, so "
                                "that query i sees keys 0 … i.")),
    "fully_masked_rows": ("warning", ("{n} query row(s) have every key blocked (first at {where}). "
                                      "attn_lib and PyTorch's SDPA give them all-zero weights and "
                                      "a zero output; a -1e9 fill makes them uniform (the mean of "
                                      "V) and -inf makes them NaN.{why}")),
    # the weights: what they look like ...
    "weights_type": ("error", ("weights is {what}; pass the floating-point tensor the softmax "
                               "returned.")),
    "weights_shape": ("error", "weights {shape} should be (…, L_q, L_k){want}"),
    "weights_negative": ("error", ("weights hold negative values (down to {low:.4f}). Attention "
                                   "weights come out of a softmax and are ≥ 0: these look like "
                                   "scores. Apply torch.softmax(scores, dim=-1).")),
    "row_sums": ("error", ("the rows of weights sum to {sums}, not to 1. Weights must come "
                           "straight from torch.softmax(scores, dim=-1) (rows with no allowed key: "
                           "all 0).")),
    "row_sums_ok": ("ok", ("every row of weights sums to 1{extra}. Necessary, not sufficient: a "
                           "wrong scale, an inverted mask or K Qᵀ pass this check too.")),
    "masked_weight": ("error", ("{n} blocked position(s) carry weight (up to {top:.4f}) in rows "
                                "that have an allowed key: the mask was not applied as given. Fill "
                                "the blocked scores with a large negative number before the "
                                "softmax.")),
    "weights_mismatch": ("warning", ("weights are not softmax(Q Kᵀ · scale) of this query and key, "
                                     "nor one of the usual mistakes (largest difference "
                                     "{diff:.4f}): they may come from other tensors or another "
                                     "mask, or dropout was applied before the softmax.")),
    "weights_match": ("ok", "weights equal softmax(Q Kᵀ {how}) of this query and key{masked}."),
    "dropout_active": ("warning", "{text}"),
    # ... and the mistake they come from: the message is the MISTAKES entry's
    **dict.fromkeys(
        ("softmax_dim", "key_transpose_1_2", "key_reshape", "key_dot_T", "scores_transposed",
         "mask_not_applied", "weights_mask_inverted", "additive_mask_as_keep", "fill_zero",
         "masked_row_nan"),
        ("error", "{text}"),
    ),
    "masked_row_uniform": ("warning", "{text}"),
}  # fmt: skip
CODES = {code: level for code, (level, _) in _SAY.items()}  # every code, with its level

_WIDTH = 92
_MAX_NAMED = 4  # positions named in a message


@dataclass(frozen=True)
class Finding:
    """One thing :func:`diagnose` noticed.

    Attributes:
        level: "error" (the computation is wrong or cannot run), "warning" (probably
            wrong, check it), "info" (worth knowing) or "ok" (a check that passed).
        code: a short name for the finding, one of :data:`CODES` (stable, for tests).
        message: one or two plain sentences: what was seen and the usual fix.
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
        n = {level: sum(f.level == level for f in self.findings) for level in LEVELS}
        problems = [f"{n[lv]} {lv}{'s' * (n[lv] != 1)}" for lv in ("error", "warning") if n[lv]]
        head = ", ".join(problems) or "no problem found"
        return (
            f"Attention diagnosis: {head} ({n['info']} note{'s' * (n['info'] != 1)}, "
            f"{n['ok']} check{'s' * (n['ok'] != 1)} passed)"
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

    def add(self, code: str, **fields: Any) -> None:
        """Add the finding ``code`` with its message from _SAY, ``fields`` filled in."""
        level, message = _SAY[code]
        self.items.append(Finding(level, code, message.format(**fields)))

    def has(self, *codes: str) -> bool:
        return any(f.code in codes for f in self.items)


# --- small helpers ----------------------------------------------------------------------


def _shape(t: torch.Tensor) -> str:
    return fmt_shape(t.shape)


def _values(t: torch.Tensor) -> torch.Tensor:
    """A detached float64 copy of ``t`` on the CPU (from any device and float dtype)."""
    return t.detach().to("cpu", torch.float64)


def _is_real_float(t: object) -> bool:
    return isinstance(t, torch.Tensor) and t.is_floating_point()


def _tol(*dtypes: torch.dtype) -> float:
    """Tolerance for weights computed in the least precise of ``dtypes``."""
    return {1: 0.1, 2: 1e-2}.get(min(d.itemsize for d in dtypes), 1e-4)


def _where(bad: torch.Tensor) -> str:
    """The first few positions where ``bad`` is True, as "(0, 3), (1, 3)"."""
    idx = bad.nonzero()[:_MAX_NAMED].tolist()
    return ", ".join("(" + ", ".join(map(str, i)) + "," * (len(i) == 1) + ")" for i in idx)


def _and(names: list[str]) -> str:
    """ "query", "query and key", "query, key and value"."""
    return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)


def _row_range(sums: torch.Tensor) -> str:
    return f"{sums.min().item():.4f} … {sums.max().item():.4f}"


# --- query, key, value ------------------------------------------------------------------


def _dtype_problem(names: list[str], dtype: torch.dtype) -> str | None:
    """Why attention cannot run in ``dtype`` (the end of a "dtype" message); None if it can."""
    fix = f"Convert {'it' if len(names) == 1 else 'them'} with .float()"
    if dtype.is_complex:
        return "; attention needs real numbers (a softmax cannot order complex scores)."
    if not dtype.is_floating_point:
        return f"; attention needs floating point (scores are scaled and exponentiated). {fix}."
    if dtype.itemsize == 1:  # float8: a storage format (a local rule for now)
        return (
            f", an 8-bit storage format: torch has no softmax for it and attn_lib refuses it. "
            f"{fix} before attention (their values are checked here after that conversion)."
        )
    return None


def _check_qkv(found: _Findings, query: object, key: object, value: object) -> dict | None:
    """Types, dtypes and shapes; returns the sizes when query, key and value fit together."""
    named = {"query": query, "key": key, "value": value}
    by_dtype: dict[torch.dtype, list[str]] = {}
    for name, t in named.items():
        if isinstance(t, torch.Tensor):
            by_dtype.setdefault(t.dtype, []).append(name)
        else:
            found.add("not_tensor", name=name, kind=type(t).__name__)
    for dtype, names in by_dtype.items():
        if why := _dtype_problem(names, dtype):
            found.add("dtype", names=_and(names), has="has" if len(names) == 1 else "have",
                      dtype=dtype, why=why)  # fmt: skip
    if not all(isinstance(t, torch.Tensor) for t in named.values()):
        return None
    q, k, v = query, key, value
    if len(by_dtype) > 1:
        found.add("dtype_mismatch", dtypes=f"{q.dtype}, {k.dtype} and {v.dtype}")
    hints = {0: "a single number is no sequence: give it (L, d)", 1: "one vector needs a length "
             "dim: {name}.unsqueeze(0)"}  # fmt: skip
    for name, t in named.items():
        if not 2 <= t.dim() <= 4:
            hint = hints.get(t.dim(), "merge the extra leading dims with reshape")
            found.add("rank", name=name, shape=_shape(t), rank=t.dim(), hint=hint.format(name=name))
    if found.has("rank"):
        return None
    shapes = {"q": _shape(q), "k": _shape(k), "v": _shape(v)}
    if not q.dim() == k.dim() == v.dim():
        found.add("rank_mismatch", **shapes, ranks=f"{q.dim()}, {k.dim()}, {v.dim()}")
        return None
    if not _shapes_fit(found, q, k, v, shapes):
        return None
    sizes = dict(zip(("B", "H")[: q.dim() - 2], q.shape[:-2], strict=True))
    sizes.update(L_q=q.shape[-2], L_k=k.shape[-2], d_k=q.shape[-1], d_v=v.shape[-1])
    scores = fmt_shape((*q.shape[:-2], sizes["L_q"], sizes["L_k"]))
    kind = "self-attention sizes (L_q = L_k)" if sizes["L_q"] == sizes["L_k"] else None
    found.add(
        "shapes", **shapes, **sizes, scores=scores, output=fmt_shape((*q.shape[:-1], v.shape[-1])),
        lead=", ".join(f"{n} = {sizes[n]}" for n in ("B", "H") if n in sizes) or "no batch dim",
        kind=kind or "cross-attention (L_q ≠ L_k)",
    )  # fmt: skip
    H, L_k = sizes.get("H", 0), sizes["L_k"]
    if H >= 2 and sizes["d_k"] == H and L_k in (H, 1):
        what = (
            "the whole attention runs without an error and returns wrong numbers of the right shape"
            if L_k == H
            else f"the scores line runs without an error (scores of shape (…, L_q, {H}) instead "
            f"of (…, L_q, 1)) and the error only shows up later, at weights @ value"
        )
        found.add("transpose_trap", H=H, L_k=L_k, what=what)
    if empty := [n for n, size in sizes.items() if size == 0]:
        refused = {"L_k", "d_k"} & set(empty)
        found.add(
            "empty", zeros=", ".join(f"{n} = 0" for n in empty), scores=scores,
            refused=" attn_lib refuses it: every query needs a key and d_k ≥ 1." if refused else "",
        )  # fmt: skip
    return sizes


def _shapes_fit(found: _Findings, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                shapes: dict) -> bool:  # fmt: skip
    """d_k, the leading dims and L_k, each mismatch explained; whether they all fit."""
    key_explained = False  # a transposed key also breaks L_k: say it once
    if q.shape[-1] != k.shape[-1]:
        reversed_k, key_explained = k.shape[::-1], True
        if k.dim() >= 3 and reversed_k[:-2] == q.shape[:-2] and reversed_k[-1] == q.shape[-1]:
            hint = (
                "key looks reversed in every dim, which is what `.T` does to a batch: use "
                "key.transpose(-2, -1) or key.mT where you transpose, and pass key itself."
            )
        elif k.shape[-2] == q.shape[-1]:
            hint = (
                f"key looks transposed already, (…, d_k, L_k) = (…, {k.shape[-2]}, "
                f"{k.shape[-1]}): pass it as (…, L_k, d_k); attention transposes it itself."
            )
        else:
            hint, key_explained = "Check that W_Q and W_K map to the same d_k.", False
        found.add("d_k_mismatch", **shapes, d_q=q.shape[-1], d_k=k.shape[-1], hint=hint)
    same_lead = q.shape[:-2] == k.shape[:-2] == v.shape[:-2]
    if not same_lead:
        swapped = [  # the one tensor that is (B, L, H, d) while the others are (B, H, L, d)
            n for n, t in (("key", k), ("value", v), ("query", q))
            if q.dim() == 4 and all(o.shape[:2] == (t.shape[0], t.shape[2]) for o in (q, k, v)
                                    if o is not t)
        ]  # fmt: skip
        hint = ""
        if swapped:
            hint = (
                f" {swapped[0]} looks like (B, L, H, d): heads and positions swapped. After "
                f"splitting heads with view(B, L, H, d_k), call transpose(1, 2) once to get "
                f"(B, H, L, d_k)."
            )
        elif q.dim() == 3 and k.shape[:2] == q.shape[:2][::-1]:
            hint = (
                " key looks like (L, B, d) while query is (B, L, d): a batch_first mix-up. "
                "Use one layout, e.g. key.transpose(0, 1)."
            )
        found.add("batch_mismatch", **shapes, lead="(B, H)" if q.dim() == 4 else "(B,)", hint=hint)
    if k.shape[-2] != v.shape[-2] and not key_explained and same_lead:
        hint = " value looks transposed, (…, d_v, L_k): pass it as (…, L_k, d_v)."
        found.add("L_k_mismatch", **shapes, L_k=k.shape[-2], L_v=v.shape[-2],
                  hint=hint if v.shape[-1] == k.shape[-2] else "")  # fmt: skip
    return q.shape[-1] == k.shape[-1] and same_lead and k.shape[-2] == v.shape[-2]


def _check_devices(found: _Findings, tensors: dict[str, torch.Tensor]) -> None:
    """Tensors on the meta device (shapes only) and tensors on different devices."""
    if meta := [n for n, t in tensors.items() if t.device.type == "meta"]:
        found.add("not_checked", names=_and(meta), are="is" if len(meta) == 1 else "are")
    on = {n: t.device for n, t in tensors.items() if n != "weights"}
    if len(set(on.values())) > 1:
        found.add("device_mismatch", where=", ".join(f"{n} on {d}" for n, d in on.items()))


def _nonfinite(found: _Findings, name: str, t: torch.Tensor, rest: str) -> None:
    bad = ~t.isfinite()
    n_nan = int(t.isnan().sum())
    found.add("nonfinite", name=name, shape=_shape(t), nan=n_nan, inf=int(bad.sum()) - n_nan,
              where=_where(bad), rest=rest)  # fmt: skip


def _check_finite(found: _Findings, values: dict[str, torch.Tensor]) -> set[str]:
    """One finding per input with NaN or inf (weights: see _check_weights); returns their names."""
    bad_names = [n for n, t in values.items() if not bool(t.isfinite().all())]
    for name in bad_names:
        if name != "weights":
            rest = ". NaN spreads to every output that touches it; find where it was produced."
            _nonfinite(found, name, values[name], rest)
    if values and not bad_names:
        found.add("finite", names=", ".join(values))
    return set(bad_names)


def _read_scale(found: _Findings, scale: object, d_k: int | None) -> float | None:
    """The learner's scale if attn_lib accepts it (its own rule, check_scale), else None."""
    if scale is None:
        return None
    try:
        s = check_scale(scale)
    except (TypeError, ValueError) as err:
        found.add("scale_invalid", err=err)
        return None
    if s > 1 and d_k is not None and d_k > 1:
        root = math.isclose(s, math.sqrt(d_k), rel_tol=1e-3)
        which = f"= √d_k = {math.sqrt(d_k):.4f}" if root else "> 1"
        found.add("scale_multiplier", s=s, which=which, default=d_k**-0.5)
    return s


# --- mask -------------------------------------------------------------------------------


def _read_mask(found: _Findings, mask: object) -> tuple[torch.Tensor | None, bool]:
    """The mask as a bool keep-mask on the CPU (or None), and whether it was additive."""
    if not isinstance(mask, torch.Tensor):
        found.add("mask_type", kind=type(mask).__name__)
        return None, False
    if mask.device.type == "meta":
        return None, False  # reported by not_checked
    if mask.is_floating_point():
        return _read_float_mask(found, mask)
    if mask.is_complex():
        text = (
            f"mask has dtype {mask.dtype}; a mask is bool (True = may attend) or integer 0/1. "
            f"Build it with a comparison, e.g. mask = (ids != pad_id)."
        )
        found.add("mask_values", text=text)
        return None, False
    if mask.dtype != torch.bool:  # not every integer dtype has the kernels as_keep_mask uses
        mask = mask.detach().to("cpu", torch.int64)
    try:
        return as_keep_mask(mask.detach().cpu()), False  # the library's rule and message
    except (TypeError, ValueError) as err:
        found.add("mask_values", text=str(err))
        return None, False


def _read_float_mask(found: _Findings, mask: torch.Tensor) -> tuple[torch.Tensor | None, bool]:
    """A float mask: read as a 0/1 keep-mask or a 0/-inf additive mask when it clearly is one."""
    m = _values(mask)
    if n_nan := int(m.isnan().sum()):
        found.add("mask_nan", dtype=mask.dtype, n=n_nan, total=m.numel())
        return None, False
    if bool(((m == 0) | (m == 1)).all()):
        what = (
            f"a {mask.dtype} tensor of 0s and 1s. Read as a keep-mask (the article's "
            f"masked_fill(mask == 0, …)) 1 means 'may attend'; but PyTorch's SDPA and "
            f"nn.MultiheadAttention ADD a float mask to the scores, so there it would add 1 to "
            f"allowed scores and block nothing."
        )
        found.add("mask_float", what=what, fix=": pass mask.bool(). Read here as a keep-mask.")
        return m != 0, False
    if bool(((m == 0) | (m <= -1e4)).all()):
        what = (
            f"an additive {mask.dtype} mask (0 where allowed, a large negative number or -inf "
            f"where blocked), PyTorch's float convention: it is added to the scores."
        )
        found.add("mask_float", what=what, fix="; as a keep-mask pass mask == 0. Read here as "
                  "additive.")  # fmt: skip
        return m == 0, True
    what = (
        f"a {mask.dtype} tensor with values other than 0/1 or 0/-inf (e.g. "
        f"{sorted(set(m.flatten()[:4].tolist()))}): neither a keep-mask nor an additive mask."
    )
    found.add("mask_float", what=what, fix=": use a bool keep-mask (True = may attend). Its "
              "coverage is not checked.")  # fmt: skip
    return None, False


def _check_mask_shape(found: _Findings, keep: torch.Tensor, scores: tuple, B: int | None) -> bool:
    """Whether the mask fits the scores by attn_lib's rule (check_mask); ambiguity noted."""
    if keep.dim() == 0:
        text = (
            f"mask is a 0-d tensor (one value, {bool(keep)}); a mask is 2-D (L_q, L_k) = "
            f"{fmt_shape(scores[-2:])} or has the scores' shape {fmt_shape(scores)}, with 1 "
            f"where it is shared. Build it with attn_lib.padding_mask or causal_mask."
        )
        found.add("mask_shape", text=text)
        return False
    try:
        check_mask(torch.ones_like(keep), scores)  # all True: only the shape rule can fail
    except (TypeError, ValueError) as err:
        rows = keep.dim() == len(scores) >= 3 and keep.shape[-2:] == (scores[-1], 1)
        hint = " A (B, L, 1) mask blanks query rows; a padding mask is (B, 1, L_k)."
        found.add("mask_shape", text=f"{err}{hint if rows else ''}")
        return False
    if (
        keep.dim() == 2
        and len(scores) >= 3
        and keep.shape == (B, scores[-1])
        and B == scores[-2]
        and not torch.equal(keep, torch.ones_like(keep).tril())
        and bool((keep[..., 1:].int() <= keep[..., :-1].int()).all())  # True…True False…False
    ):
        fix = "mask.unsqueeze(1)" if len(scores) == 3 else "mask[:, None, None, :]"
        found.add("mask_ambiguous", shape=_shape(keep), B=B, fix=fix)
    return True


def _check_mask_content(found: _Findings, keep: torch.Tensor, scores: tuple) -> torch.Tensor:
    """Coverage, fully masked rows and polarity; returns the keep-mask broadcast to the scores."""
    full = keep.expand(scores)  # (…, L_q, L_k)
    n_pairs = full.numel()
    blocked = n_pairs - int(full.sum())
    if n_pairs and blocked == n_pairs:
        found.add("mask_all_blocked")
        return full
    frac, no_key = blocked / max(n_pairs, 1), ~full.any(dim=-1)  # no_key: (…, L_q)
    n_empty = int(no_key.sum())
    found.add("mask_coverage", frac=frac, blocked=blocked, pairs=n_pairs, empty=n_empty,
              rows=no_key.numel())  # fmt: skip
    L_q, L_k = scores[-2], scores[-1]
    if L_q == L_k > 1 and not bool(full.diagonal(dim1=-2, dim2=-1).any()):
        text = (
            "mask blocks the diagonal everywhere: no token may attend to itself. In "
            "self-attention that is almost always an inverted mask (an inverted causal mask "
            "looks exactly like this). attn_lib and the article use True = may attend; "
            "nn.MultiheadAttention uses True = blocked. Pass ~mask."
        )
        found.add("mask_inverted", text=text)
    elif frac > 0.5:
        text = (
            f"mask blocks most query–key pairs ({frac:.1%}). Padding and causal masks block "
            f"less than half unless the sequences are mostly padding: is it inverted (True = "
            f"blocked, nn.MultiheadAttention's convention)? attn_lib uses True = may attend."
        )
        found.add("mask_inverted", text=text)
    if L_q == L_k > 1 and bool((full == torch.ones(L_q, L_k, dtype=torch.bool).triu()).all()):
        found.add("mask_future")
    if n_empty:
        if keep.shape[-1] == 1 and L_k > 1:
            why = (
                f" The mask has shape {_shape(keep)}, (…, L_q, 1): it blanks whole query rows, "
                f"not key columns. A padding mask is (B, 1, L_k): use unsqueeze(1), not "
                f"unsqueeze(-1)."
            )
        elif found.has("mask_inverted"):
            why = " Here they most likely come from the inverted mask."
        else:
            why = " They usually are padded queries: leave them out of the loss."
        found.add("fully_masked_rows", n=n_empty, where=_where(no_key), why=why)
    return full


# --- the mistakes, recomputed with attn_lib's own attention ------------------------------


@dataclass
class _Case:
    """The learner's query and key (float64, CPU), mask and scale, to recompute weights from."""

    q: torch.Tensor  # (…, L_q, d_k)
    k: torch.Tensor  # (…, L_k, d_k)
    keep: torch.Tensor | None  # (…, L_q, L_k) bool keep-mask, or None
    scale: float  # the learner's scale if given, else 1/√d_k
    additive: bool  # the mask was given as an additive float mask
    sizes: dict[str, float] = field(default_factory=dict)  # B, H, …, and a fitted scale

    def attend(self, **change: Any) -> torch.Tensor:
        """attn_lib's weights (…, L_q, L_k), with ``change`` to query, key, mask, scale or fill."""
        a = {"query": self.q, "key": self.k, "mask": self.keep, "scale": self.scale} | change
        key = a["key"]  # the weights do not depend on value: key stands in for it
        return scaled_dot_product_attention(
            a["query"], key, key, a["mask"], scale=a["scale"], fill_value=a.get("fill_value")
        )[1]

    def masked(self, **change: Any) -> torch.Tensor | None:
        """:meth:`attend` for a mistake that needs a mask (None without one)."""
        return None if self.keep is None else self.attend(**change)

    def softmax_over(self, dim: int) -> torch.Tensor:
        """The weights (…, L_q, L_k) with the softmax taken over ``dim`` instead of the keys."""
        if dim in (-2, self.q.dim() - 2):  # over the queries: the softmax of K Qᵀ, transposed
            mask = None if self.keep is None else self.keep.mT
            return self.attend(query=self.k, key=self.q, mask=mask).mT
        # Another dim (batch, heads): move it last and let attention's softmax run over it,
        # as the scores of queries against identity keys.
        scores = (self.q @ self.k.mT * self.scale).movedim(dim, -1)  # (…, n)
        n = scores.shape[-1]
        eye = torch.eye(n, dtype=scores.dtype).expand(*scores.shape[:-2], n, n)
        mask = None if self.keep is None else self.keep.movedim(dim, -1)
        return self.attend(query=scores, key=eye, mask=mask, scale=1.0).movedim(-1, dim)


@dataclass(frozen=True)
class Mistake:
    """A learner mistake that :func:`diagnose` names by recomputing the weights it gives.

    Attributes:
        code: the finding's code; "scale" means scale_flat or scale_sharp, by the scale.
        name: the wrong computation, read after "weights equal"; {d_k}, {n}, … are sizes.
        why: what it does and the usual fix, one or two sentences.
        weights: case → the weights (…, L_q, L_k) it gives, or None where it cannot occur.
        scale: sizes → the multiplier of the scores it uses, for a scale mistake.
    """

    code: str
    name: str
    why: str
    weights: Callable[[_Case], torch.Tensor | None] | None = None
    scale: Callable[[dict], float] | None = None

    def scale_in(self, sizes: dict) -> float | None:
        """The multiplier this scale mistake uses with these sizes (None if it needs another)."""
        try:
            return None if self.scale is None else self.scale(sizes)
        except (KeyError, ZeroDivisionError):
            return None

    def recompute(self, case: _Case) -> torch.Tensor | None:
        """The weights this mistake gives on ``case``, or None where it cannot occur."""
        try:
            if self.scale is not None:
                s = self.scale_in(case.sizes)
                if s is None or math.isclose(s, case.scale, rel_tol=1e-6):
                    return None  # not applicable, or the scale the weights should have
                return case.attend(scale=s)
            return self.weights(case)
        except Exception:  # noqa: BLE001 — shapes it does not fit: not this mistake
            return None

    def finding(self, found: _Findings, sizes: dict, head: str, also: str = "") -> None:
        """Report this mistake: ``head`` (what was seen) equals it, and the usual fix."""
        fields = {"default": sizes["d_k"] ** -0.5, **sizes}
        code = self.code
        if code == "scale":
            code = "scale_flat" if self.scale(sizes) < fields["default"] else "scale_sharp"
        found.add(code, text=f"{head} {self.name}{also}. {self.why}".format(**fields))


_T_FIX = "Use key.transpose(-2, -1) (or key.mT)."
_DIM_FIX = "Each query's weights over the keys must sum to 1: torch.softmax(scores, dim=-1)."

# The table: what a learner may have computed instead of softmax(Q Kᵀ / √d_k) with the
# mask, in order of precedence when two give the same numbers.
MISTAKES: tuple[Mistake, ...] = (
    Mistake("scale", "softmax(Q Kᵀ) with no scaling",
            "Without 1/√d_k the scores grow with d_k and push rows towards one-hot (and their "
            "gradients towards 0): divide the scores by math.sqrt(d_k).",
            scale=lambda z: 1.0),
    Mistake("scale", "softmax(Q Kᵀ / {d_k}), ÷d_k instead of ÷√d_k",
            "Dividing by d_k shrinks the scores too much and pushes every row towards uniform: "
            "divide by math.sqrt(d_k).",
            scale=lambda z: 1 / z["d_k"]),
    Mistake("scale", "softmax(Q Kᵀ × √d_k), scale=√d_k",
            "scale MULTIPLIES the scores in attn_lib and PyTorch's SDPA: pass "
            "scale=1/math.sqrt(d_k), or leave it None.",
            scale=lambda z: math.sqrt(z["d_k"])),
    Mistake("scale", "softmax(Q Kᵀ / √d_v), ÷√d_v instead of ÷√d_k",
            "d_v is the width of the values; the scale uses d_k = query.size(-1).",
            scale=lambda z: z["d_v"] ** -0.5),
    Mistake("scale", "softmax(Q Kᵀ / √L_k), ÷√L_k instead of ÷√d_k",
            "L_k is the number of keys; the scale uses their width, d_k = query.size(-1).",
            scale=lambda z: z["L_k"] ** -0.5),
    Mistake("scale", "softmax(Q Kᵀ / √H), ÷√H instead of ÷√d_k",
            "H is the number of heads; each head scales by its own width d_k = query.size(-1).",
            scale=lambda z: z["H"] ** -0.5),
    Mistake("scale", "softmax(Q Kᵀ / √{n}), ÷√{n} instead of ÷√d_k = √{d_k}",
            "If {n} is d_model (the width of x), divide by √d_k instead: d_k is the width of "
            "the queries and keys, query.size(-1).",
            scale=lambda z: z["n"] ** -0.5),
    Mistake("scale", "softmax(Q Kᵀ × {fit:.4g}) instead of × 1/√d_k = {default:.4g}",
            "Check the number the scores are divided by: it should be math.sqrt(d_k).",
            scale=lambda z: z["fit"]),
    Mistake("softmax_dim", "softmax(scores, dim=-2), over the queries instead of the keys",
            _DIM_FIX, weights=lambda c: c.softmax_over(-2)),
    Mistake("softmax_dim", "softmax(scores, dim=0), over the batch", _DIM_FIX,
            weights=lambda c: c.softmax_over(0) if c.q.dim() >= 3 else None),
    Mistake("softmax_dim", "softmax(scores, dim=1), over the heads", _DIM_FIX,
            weights=lambda c: c.softmax_over(1) if c.q.dim() == 4 else None),
    Mistake("key_transpose_1_2",
            "the attention of query @ key.transpose(1, 2), heads and positions swapped",
            "On (B, H, L, d_k) tensors transpose(1, 2) swaps heads and positions, and with "
            "H = L = d_k it runs without an error. " + _T_FIX,
            weights=lambda c: c.attend(key=c.k.transpose(1, 2).mT) if c.q.dim() == 4 else None),
    Mistake("key_reshape", "the attention of query @ key.reshape(…, d_k, L_k), a reshape (or "
            "view) in place of a transpose",
            "reshape and view keep the memory order: they regroup the numbers instead of "
            "swapping two dims. " + _T_FIX,
            weights=lambda c: c.attend(key=c.k.reshape(*c.k.shape[:-2], *c.k.shape[:-3:-1]).mT)),
    Mistake("key_dot_T", "the attention of query @ key.T, every dim of key reversed",
            "On a batch .T reverses every dim, not only the last two. " + _T_FIX,
            weights=lambda c: c.attend(key=c.k.permute(*range(c.k.dim() - 1, -1, -1)).mT)
            if c.k.dim() >= 3 else None),
    Mistake("scores_transposed", "softmax(K Qᵀ …), the scores transposed",
            "Row i then holds key i against every query, and the rows still sum to 1, so only "
            "a comparison catches it: compute query @ key.transpose(-2, -1).",
            weights=lambda c: c.attend(query=c.k, key=c.q)),
    Mistake("mask_not_applied", "softmax(Q Kᵀ / √d_k) without the mask",
            "masked_fill is not in place: write scores = scores.masked_fill(mask == 0, -1e9) "
            "(or the mask was never passed).",
            weights=lambda c: c.masked(mask=None)),
    Mistake("weights_mask_inverted", "the attention with the mask inverted",
            "Blocked pairs got the weight and allowed ones none: the mask was read as True = "
            "blocked (nn.MultiheadAttention's convention). attn_lib and the article use "
            "True = may attend: pass ~mask, or fill where mask == 0.",
            weights=lambda c: None if c.additive else c.masked(mask=~c.keep)),
    Mistake("additive_mask_as_keep", "the attention with the additive mask used as a keep-mask",
            "An additive mask is 0 where allowed, so masked_fill(mask == 0, …) blocks exactly "
            "the allowed pairs: add it to the scores (scores + mask), or use mask == 0 as the "
            "keep-mask.",
            weights=lambda c: c.masked(mask=~c.keep) if c.additive else None),
    Mistake("fill_zero", "masked_fill(mask == 0, 0) then softmax, a fill of 0",
            "exp(0) = 1 is not small, so blocked keys keep their weight: fill with a large "
            "negative number, -1e9 or torch.finfo(scores.dtype).min.",
            weights=lambda c: c.masked(fill_value=0.0)),
    Mistake("masked_row_uniform", "masked_fill(mask == 0, -1e9) then softmax",
            "Rows with every key blocked come out uniform (1/L_k each), so their output is the "
            "mean of V although the query may attend to nothing; attn_lib and SDPA return "
            "zeros there.",
            weights=lambda c: c.masked(fill_value=-1e9)),
    Mistake("masked_row_nan", "masked_fill(mask == 0, float('-inf')) then softmax",
            "Rows with every key blocked come out NaN (softmax of all -inf is 0/0), and NaN "
            "spreads to the output and the loss: fill with torch.finfo(scores.dtype).min and "
            "zero those rows, as attn_lib does.",
            weights=lambda c: c.masked(fill_value=-math.inf)),
)  # fmt: skip
_RIGHT = Mistake("", "", "", weights=lambda c: c.attend())  # softmax(Q Kᵀ · scale), masked


def _fit_scale(w: torch.Tensor, raw: torch.Tensor, keep: torch.Tensor | None) -> float | None:
    """The s of weights = softmax(raw · s), by least squares on log w (None if it is no fit)."""
    live = (w > 0) & w.isfinite() & (True if keep is None else keep)
    m = live.double()
    if m.sum() - (m.sum(-1) > 0).sum() < 2:  # no more equations than unknowns: any s fits
        return None
    n = m.sum(-1, keepdim=True).clamp_min(1)
    y = torch.where(live, w.clamp_min(1e-300).log(), 0.0)
    x, y = (t - (t * m).sum(-1, keepdim=True) / n for t in (raw, y))  # centred per row
    den = (x * x * m).sum().item()
    s = (x * y * m).sum().item() / den if den > 0 else math.nan
    return s if math.isfinite(s) and s > 0 else None


def _entropy_note(w: torch.Tensor, ref: torch.Tensor, keep: torch.Tensor | None) -> str | None:
    """Mean row entropy of w against ref (÷√d_k) and a uniform row, over rows with ≥ 2 keys."""
    n = keep.sum(-1).double() if keep is not None else torch.full(w.shape[:-1], w.shape[-1] * 1.0)
    if not bool((counted := n >= 2).any()):
        return None
    H_x, H_ref = (entropy(t)[counted].mean().item() for t in (w, ref))
    return (
        f"mean row entropy {H_x:.4f} nats against {H_ref:.4f} with ÷√d_k (a uniform row: "
        f"{n[counted].log().mean().item():.4f}, a one-hot row: 0)"
    )


def _dropout_factor(w: torch.Tensor, ref: torch.Tensor, tol: float) -> tuple[float, float] | None:
    """(c, fraction zeroed) when w = ref · m · c with m ∈ {0, 1} and one c > 1, else None."""
    live = ref > 1e-6
    zero, kept = (w == 0) & live, (w != 0) & live
    if not bool(zero.any()) or not bool(kept.any()) or bool(((w != 0) & ~live).any()):
        return None
    ratio = w[kept] / ref[kept]
    c = ratio.median().item()
    if c <= 1 + tol or not bool(((ratio - c).abs() <= 10 * tol * c).all()):
        return None
    return c, int(zero.sum()) / int(live.sum())


def _name_the_mistake(found: _Findings, w: torch.Tensor, case: _Case, tol: float) -> bool:
    """Recompute the right weights and every mistake's; report the one ``w`` equals.

    Args:
        w: (…, L_q, L_k) the learner's weights, float64.
        tol: the tolerance of their dtype.

    Returns:
        Whether the weights were explained: right, a mistake (exactly, or its closest
        match), or dropout.
    """

    def close(cand: torch.Tensor, strict: bool = False) -> torch.Tensor:  # (…, L_q, L_k)
        ok = torch.isclose(w, cand, rtol=tol, atol=tol, equal_nan=True)
        if strict:
            return ok
        # In a row the mistake's mask blocks entirely, zeros (attn_lib), uniform (a -1e9 fill)
        # and NaN (-inf) are the same mistake.
        uniform = ((w - 1 / w.shape[-1]).abs() <= tol).all(-1, keepdim=True)
        blank = uniform | w.isnan().all(-1, keepdim=True) | (w == 0).all(-1, keepdim=True)
        return ok | ((cand == 0).all(-1, keepdim=True) & blank)

    default = case.sizes["d_k"] ** -0.5
    right = _RIGHT.recompute(case)
    if right is not None and bool(close(right, strict=True).all()):
        how = "÷√d_k" if math.isclose(case.scale, default) else f"× {case.scale:.4g}"
        masked = " with this mask" if case.keep is not None else ""
        found.add("weights_match", how=how, masked=masked)
        if how == "÷√d_k" and (note := _entropy_note(w, right, case.keep)):
            found.add("scale_ok", text=f"your weights: {note}, close to ÷√d_k.")
        return True
    if (fit := _fit_scale(w, case.q @ case.k.mT, case.keep)) is not None:
        case.sizes["fit"] = fit  # the weights may be softmax(Q Kᵀ × fit): a scale mistake
        if fit**-2 >= 0.5 and abs(fit**-2 - round(fit**-2)) <= 0.05 * fit**-2:
            case.sizes["n"] = round(fit**-2)  # ÷√n, e.g. n = d_model
    # What a mistake must explain: the entries where the weights are not the right ones.
    wrong = torch.ones_like(w, dtype=torch.bool) if right is None else ~close(right, True)
    scored = []  # ((wrong entries it explains - right entries it breaks) / wrong ones, m)
    for m in MISTAKES:
        cand = m.recompute(case)
        if cand is None or cand.shape != w.shape:
            continue
        if right is not None and bool(torch.isclose(cand, right, tol, tol, equal_nan=True).all()):
            continue  # indistinguishable from the right weights on these tensors
        hits = close(cand)
        scored.append((int((hits & wrong).sum() - (~hits & ~wrong).sum()) / int(wrong.sum()), m))
    if exact := [m for score, m in scored if score == 1.0]:
        same = [m.name for m in exact[1:] if "{fit" not in m.name]  # the fit only restates
        also = f" (here the same numbers as {same[0]})" if same else ""
        exact[0].finding(found, case.sizes, "weights equal", also)
        return True
    if right is not None and (drop := _dropout_factor(w, right, tol)) is not None:
        c, zeroed = drop
        text = (
            f"rows sum to {_row_range(w.sum(-1))}, not 1, and the weights are the softmax weights "
            f"with {zeroed:.0%} of them set to 0 and the rest multiplied by {c:.4f} = 1/(1 − p) "
            f"for p ≈ {1 - 1 / c:.2f}: dropout is on. In training that is expected (the rows sum "
            f"to 1 only on average); to evaluate, call model.eval() (or pass training=False) so "
            f"that dropout is off."
        )
        found.add("dropout_active", text=text)
        return True
    scored.sort(key=lambda sm: -sm[0])
    if scored and scored[0][0] >= 0.9 and (len(scored) == 1 or scored[1][0] < scored[0][0]):
        also = f" (the closest match: it explains {scored[0][0]:.0%} of the entries that are off)"
        scored[0][1].finding(found, case.sizes, "weights equal", also)
        return True
    return False


def _name_scale(found: _Findings, s: float, sizes: dict) -> None:
    """A scale the learner passed: named from the table, or judged against 1/√d_k."""
    default = sizes["d_k"] ** -0.5
    if found.has("scale_multiplier"):
        return
    if math.isclose(s, default, rel_tol=1e-6):
        found.add("scale_ok", text=f"scale = {s:.4g} = 1/√d_k, the default.")
        return
    for m in MISTAKES:
        if m.code == "scale" and (t := m.scale_in(sizes)) and math.isclose(t, s, rel_tol=1e-6):
            m.finding(found, sizes, f"scale = {s:.4g} gives")
            return
    if not default / 2 <= s <= 2 * default:
        flat = s < default
        text = (
            f"scale = {s:.4g} is {max(s / default, default / s):.3g}× "
            f"{'smaller' if flat else 'larger'} than 1/√d_k = {default:.4g}: the rows come out "
            f"{'flatter' if flat else 'sharper'} than attention's. Leave scale None."
        )
        found.add("scale_flat" if flat else "scale_sharp", text=text)


# --- the weights ------------------------------------------------------------------------


def _check_weights(
    found: _Findings, w: torch.Tensor, scores: tuple | None, keep: torch.Tensor | None,
    case: _Case | None, tol: float,
) -> None:  # fmt: skip
    """Shape, sign and rows of the learner's weights (float64), then what they equal."""
    if scores is not None and w.shape != scores or w.dim() < 2:
        transposed = scores is not None and w.shape == (*scores[:-2], scores[-1], scores[-2])
        want = f" = {fmt_shape(scores)}." if scores else ", at least 2-D."
        if transposed:
            want += (
                " They look transposed, (…, L_k, L_q): were the scores computed as K Qᵀ? "
                "Compute query @ key.transpose(-2, -1)."
            )
        found.add("weights_shape", shape=_shape(w), want=want)
        return
    finite = w.isfinite()
    if bool((w[finite] < 0).any()):
        found.add("weights_negative", low=w[finite].min().item())
        return
    sums = w.sum(dim=-1)  # (…, L_q)
    has_key = torch.ones_like(sums, dtype=torch.bool) if keep is None else keep.any(dim=-1)
    one, zero = (sums - 1).abs() <= tol, sums.abs() <= tol
    rows_ok = bool(finite.all() and one[has_key].all() and (one | zero)[~has_key].all())
    if rows_ok:
        extra = "" if bool(has_key.all()) else " (0 for the rows with no allowed key)"
        found.add("row_sums_ok", extra=extra)
    if case is not None and _name_the_mistake(found, w, case, tol):
        return
    # No recomputed mistake explains them: say what their rows show.
    if not bool(finite.all()):
        rest = (
            f"; {int((~finite).any(-1).sum())} of {sums.numel()} rows are affected. NaN weights "
            f"come from a row whose scores are all -inf (a fully masked row filled with -inf) "
            f"or from exp overflowing in a softmax without the max trick."
        )
        _nonfinite(found, "weights", w, rest)
        return
    leak = (w * ~keep * has_key[..., None] > tol) if keep is not None else torch.zeros(())
    if rows_ok and bool(leak.any()):  # blocked keys with weight in rows that have a key
        found.add("masked_weight", n=int(leak.sum()), top=(w * leak).max().item())
    elif rows_ok and case is not None and (right := _RIGHT.recompute(case)) is not None:
        found.add("weights_mismatch", diff=(w - right).abs().max().item())
    elif not rows_ok:
        _check_row_sums(found, w, sums, keep, has_key, tol, case is None)


def _check_row_sums(
    found: _Findings, w: torch.Tensor, sums: torch.Tensor, keep: torch.Tensor | None,
    has_key: torch.Tensor, tol: float, no_reference: bool,
) -> None:  # fmt: skip
    """Rows that do not sum to 1: dropout (its exact zeros), a softmax over another dim, or not."""
    mean = sums[has_key].mean().item() if bool(has_key.any()) else 0.0
    zeros = bool(((w == 0) & (True if keep is None else keep)).any())
    if no_reference and zeros and 0.6 < mean < 1.4:
        text = (
            f"rows sum to {_row_range(sums)} (mean {mean:.4f}), not 1, and some allowed weights "
            f"are exactly 0: this looks like dropout on the weights (inverted dropout keeps the "
            f"sum at 1 only on average). To evaluate, call model.eval()."
        )
        found.add("dropout_active", text=text)
        return
    for dim in range(-2, -w.dim() - 1, -1):
        if w.shape[dim] > 1 and bool(((w.sum(dim=dim) - 1).abs() <= tol).all()):
            text = (
                f"the rows of weights do not sum to 1 (they sum to {_row_range(sums)}) but the "
                f"sums over dim={w.dim() + dim} do: the softmax was taken over the wrong dim. "
            )
            found.add("softmax_dim", text=text + _DIM_FIX)
            return
    found.add("row_sums", sums=_row_range(sums))


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

    Args:
        query: (…, L_q, d_k), floating point; … is nothing, (B,) or (B, H).
        key: (…, L_k, d_k).
        value: (…, L_k, d_v).
        mask: optional keep-mask (True or 1 = may attend), 2-D (L_q, L_k) or of the
            scores' rank, e.g. (B, 1, L_k). A float mask is reported (attn_lib refuses
            it) and read as a 0/1 keep-mask or a 0/-inf additive mask when it is one.
        weights: optional (…, L_q, L_k), the weights the learner computed (after
            softmax, and after dropout if any); named if they equal a known mistake.
        scale: optional multiplier of the scores the learner used (a Python number, as
            attn_lib requires; default 1/√d_k).

    Returns:
        :class:`Diagnosis`; see :data:`CODES` for every code it may hold.

    Never raises on a learner's tensors, of any rank, dtype, device or shape: what it
    cannot check is a finding. The inputs and the random state are left untouched.
    """
    with torch.no_grad():
        found = _Findings()
        sizes = _diagnose(found, query, key, value, mask, weights, scale)
    order = {level: i for i, level in enumerate(LEVELS)}
    return Diagnosis(tuple(sorted(found.items, key=lambda f: order[f.level])), sizes)


def _diagnose(
    found: _Findings, query: Any, key: Any, value: Any, mask: Any, weights: Any, scale: Any
) -> dict | None:
    """Run the checks in order, adding to ``found``; returns the sizes (or None)."""
    sizes = _check_qkv(found, query, key, value)
    named = {"query": query, "key": key, "value": value, "mask": mask, "weights": weights}
    tensors = {n: t for n, t in named.items() if isinstance(t, torch.Tensor)}
    _check_devices(found, tensors)
    if weights is not None and not _is_real_float(weights):
        what = f"dtype {weights.dtype}" if "weights" in tensors else type(weights).__name__
        found.add("weights_type", what=what)
    values = {  # float64 CPU copies of what holds readable numbers
        n: _values(t)
        for n, t in tensors.items()
        if n != "mask" and _is_real_float(t) and t.device.type != "meta"
    }
    bad = _check_finite(found, values)
    s = _read_scale(found, scale, sizes and sizes["d_k"])
    keep, additive = (None, False) if mask is None else _read_mask(found, mask)
    if sizes is not None and 0 in sizes.values():
        return sizes  # empty: reported, nothing more to check
    scores = None if sizes is None else (*query.shape[:-2], sizes["L_q"], sizes["L_k"])
    full_keep = None
    if keep is not None and scores is not None:
        if _check_mask_shape(found, keep, scores, sizes.get("B")):
            full_keep = _check_mask_content(found, keep, scores)
    elif keep is not None and keep.dim() >= 2 and keep.numel():
        _check_mask_content(found, keep, tuple(keep.shape))
    if sizes is not None and s is not None:
        _name_scale(found, s, sizes)
    case = None
    mask_read = mask is None or full_keep is not None
    if sizes and mask_read and {"query", "key"} <= values.keys() and not {"query", "key"} & bad:
        d_k = sizes["d_k"]
        q, k = values["query"], values["key"]
        case = _Case(q, k, full_keep, s or d_k**-0.5, additive, dict(sizes))
        top = (case.q @ case.k.mT).max().item() * case.scale
        if top > (limit := math.log(torch.finfo(query.dtype).max)):
            found.add("overflow_risk", top=top, dtype=str(query.dtype)[6:], limit=limit)
    if "weights" in values:
        dtypes = [t.dtype for t in (weights, query, key) if _is_real_float(t)]
        _check_weights(found, values["weights"], scores, full_keep, case, _tol(*dtypes))
    return sizes
