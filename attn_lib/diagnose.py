"""Look at a learner's attention tensors and say, in plain words, what looks wrong.

:func:`diagnose` runs attn_lib's own input checks (their messages are its findings), looks at
what they let through (an inverted mask, rows that lose every key), and names the mistake the
weights equal from :mod:`attn_lib.mistakes`. Used by notebook 08, "6 · `attn_lib.diagnose` on
your tensors".
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch

from . import checks
from .mistakes import FILLS, MISTAKES, Inputs, sizes_of, why

__all__ = ["CODES", "LEVELS", "Diagnosis", "Finding", "diagnose"]

LEVELS = ("error", "warning", "info")
_OWN = {
    "error": "not_tensor dtype device_mismatch rank d_k_mismatch L_k_mismatch batch_mismatch "
    "nonfinite scale_invalid mask_type mask_values mask_nan mask_shape mask_all_blocked "
    "weights_type weights_shape weights_negative row_sums masked_weight",
    "warning": "not_checked empty mask_float mask_ambiguous mask_inverted mask_future "
    "fully_masked_rows weights_mismatch dropout_on uniform_rows scale_flat scale_sharp",
    "info": "transpose_trap weights_match"}  # fmt: skip
# Every code diagnose may report, with its level (a mistake it recomputes: error).
CODES = {m.code: "error" for m in MISTAKES if m.recomputes} | {
    c: lv for lv, cs in _OWN.items() for c in cs.split()}  # fmt: skip


@dataclass(frozen=True)
class Finding:
    """One thing :func:`diagnose` noticed.

    level: "error", "warning" (probably wrong) or "info"; code: one of :data:`CODES`; message:
    what was seen and the usual fix."""

    level: str
    code: str
    message: str

    def __str__(self) -> str:
        head = f"{self.level.upper() if self.level != 'info' else 'info':<8}[{self.code}] "
        return textwrap.fill(self.message, 92, initial_indent=head, subsequent_indent=" " * 10,
                             break_on_hyphens=False, break_long_words=False)  # fmt: skip


@dataclass(frozen=True)
class Diagnosis:
    """The findings of :func:`diagnose`; prints as a report.

    findings: errors first, then warnings and notes; sizes: B, H where present, L_q, L_k, d_k,
    d_v read off the shapes (None when they do not fit). Truthy (``ok``) with no error or warning.
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
        return tuple(f for f in self.findings if f.level != "info")

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

    def __str__(self) -> str:
        n = {level: sum(f.level == level for f in self.findings) for level in LEVELS}
        said = [f"{n[lv]} {lv}{'s' * (n[lv] != 1)}" for lv in ("error", "warning") if n[lv]]
        notes = f" ({n['info']} note{'s' * (n['info'] != 1)})" if n["info"] else ""
        head = f"Attention diagnosis: {', '.join(said) or 'no problem found'}{notes}"
        return "\n".join([head, *(str(f) for f in self.findings)])

    def __repr__(self) -> str:
        return f"Diagnosis({', '.join(f.code for f in self.problems) or 'no problem'})"

    def report(self) -> None:
        """Print the report."""
        print(str(self))

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # the report in a notebook
        p.text(str(self))


class _Findings(list):
    """The findings so far; ``add`` takes the level from CODES."""

    def add(self, code: str, message: str) -> None:  # errors first, then warnings, notes
        at = sum(LEVELS.index(f.level) <= LEVELS.index(CODES[code]) for f in self)
        self.insert(at, Finding(CODES[code], code, message))

    def has(self, code: str) -> bool:
        return any(f.code == code for f in self)


def _error(check: Callable, *args: Any, **kwargs: Any) -> str | None:
    """The message of the error an attn_lib check raises on these arguments, or None."""
    try:
        check(*args, **kwargs)
    except (TypeError, ValueError) as err:
        return str(err)
    return None


def _close(w: torch.Tensor, other: torch.Tensor, tol: float) -> bool:
    return w.shape == other.shape and bool(torch.isclose(w, other, tol, tol, equal_nan=True).all())


def _shape_code(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> str:
    """Which of check_qkv's shape rules failed, in its order."""
    if any(not 2 <= t.dim() <= 4 for t in (q, k, v)) or not q.dim() == k.dim() == v.dim():
        return "rank"
    if q.shape[-1] != k.shape[-1]:
        return "d_k_mismatch"
    if k.shape[-2] != v.shape[-2]:
        return "L_k_mismatch"
    return "batch_mismatch" if not q.shape[:-2] == k.shape[:-2] == v.shape[:-2] else "empty"


def _check_qkv(found: _Findings, query: Any, key: Any, value: Any) -> dict | None:
    """Types, dtypes and shapes by check_qkv's own rules; the sizes when the shapes fit."""
    qkv = (query, key, value)
    if bad := [(n, t) for n, t in zip(("query", "key", "value"), qkv) if not torch.is_tensor(t)]:
        return found.add("not_tensor", _error(checks.check_float_tensor, *bad[0]))
    # The dtype rules on stand-ins of the right dtypes, the shape rules on float32 ones.
    if err := _error(checks.check_qkv, *(torch.empty(1, 1, dtype=t.dtype, device="meta")
                                         for t in qkv), finite=False):  # fmt: skip
        found.add("dtype", err)
    try:
        s = checks.check_qkv(*(torch.empty(t.shape, device="meta") for t in qkv), finite=False)
    except checks.ShapeError as err:
        return found.add(_shape_code(query, key, value), str(err))
    sizes = sizes_of(s)
    if (H := sizes.get("H", 0)) >= 2 and s.d_k == H and s.L_k in (H, 1):
        what = "returns wrong numbers" if s.L_k == H else "fails only at weights @ value"
        found.add("transpose_trap", f"Here H = d_k = {H} and L_k = {s.L_k}: query @ key.transpose("
                  f"1, 2), heads for positions, runs and {what}. Use key.transpose(-2, -1).")  # fmt: skip
    if empty := [n for n, size in sizes.items() if size == 0]:
        found.add("empty", f"{', '.join(f'{n} = 0' for n in empty)}: the scores {s.scores} are "
                  f"empty, nothing to check (a slice or a filter left nothing?).")  # fmt: skip
    return sizes


def _check_devices(found: _Findings, tensors: dict[str, torch.Tensor]) -> None:
    """Tensors on the meta device (shapes only) and tensors on different devices."""
    if meta := [n for n, t in tensors.items() if t.device.type == "meta"]:
        found.add("not_checked", f"{', '.join(meta)} {'is' if len(meta) == 1 else 'are'} on the "
                  f"meta device: shapes without values, so only shapes are checked. Create real "
                  f"tensors (device='cpu') to check the numbers.")  # fmt: skip
    if len({t.device for t in tensors.values()}) > 1:
        where = ", ".join(f"{n} on {t.device}" for n, t in tensors.items())
        found.add("device_mismatch", f"{where}: attention needs all of them on one device. Move "
                  f"them with .to(query.device).")  # fmt: skip


def _name_scale(found: _Findings, s: float, sizes: dict) -> None:
    """A scale the learner passed: named from the table, or judged against 1/√d_k."""
    default = sizes["d_k"] ** -0.5
    for m in MISTAKES:
        if m.scale is not None and (t := m.scale(sizes)) and math.isclose(t, s, rel_tol=1e-6):
            if not math.isclose(s, default, rel_tol=1e-6):
                found.add(m.code, f"scale = {s:.4g} gives {m.explain(sizes)}")
            return
    if not default / 2 <= s <= 2 * default:
        _off_scale(found, f"scale = {s:.4g}", s, default)


def _off_scale(found: _Findings, what: str, s: float, default: float) -> None:
    flat, times = s < default, max(s, default) / min(s, default)
    found.add("scale_flat" if flat else "scale_sharp", f"{what} is {times:.3g}× "
              f"{'smaller' if flat else 'larger'} than 1/√d_k = {default:.4g}: rows "
              f"{'flatter' if flat else 'sharper'} than attention's. Divide by math.sqrt(d_k).")  # fmt: skip


def _read_mask(found: _Findings, mask: Any) -> tuple[torch.Tensor | None, bool]:
    """The mask as a bool keep-mask on the CPU (None if unreadable), and whether additive."""
    if not isinstance(mask, torch.Tensor):
        found.add("mask_type", f"{_error(checks.as_keep_mask, mask)} Build it with a comparison "
                  f"or attn_lib.padding_mask / causal_mask.")  # fmt: skip
        return None, False
    if mask.device.type == "meta":
        return None, False  # reported by not_checked
    m = mask.detach().cpu()
    if not m.is_floating_point():
        if m.dtype != torch.bool and not m.is_complex():
            m = m.to(torch.int64)  # not every integer dtype has the kernels the check uses
        err = _error(checks.as_keep_mask, m)
        return (found.add("mask_values", err), False) if err else (m.bool(), False)
    refused, m = _error(checks.as_keep_mask, m), m.double()
    if n_nan := int(m.isnan().sum()):
        found.add("mask_nan", f"mask ({mask.dtype}) holds {n_nan} NaN of {m.numel()}: added to "
                  f"the scores (PyTorch's float convention) NaN makes its rows NaN; read as a "
                  f"keep-mask (NaN == 0 is False) it lets them attend. Use a comparison (bool).")  # fmt: skip
        return None, False
    for reading, fits, keep, additive in (
        ("a keep-mask (1 = may attend)", (m == 0) | (m == 1), m != 0, False),
        ("an additive mask (0 = may attend)", (m == 0) | (m <= -1e4), m == 0, True),
    ):
        if bool(fits.all()):
            found.add("mask_float", f"{refused} Read here as {reading}.")
            return keep, additive
    found.add("mask_float", f"{refused} Its values are neither 0/1 nor 0/-inf: not read further.")
    return None, False


def _check_mask(found: _Findings, keep: torch.Tensor, scores: tuple) -> torch.Tensor | None:
    """The mask by check_mask's rules, then its content; the mask broadcast to the scores."""
    if err := _error(checks.check_mask, torch.ones_like(keep), scores):  # the shape rules
        return found.add("mask_shape", err)
    if err := _error(checks.check_mask, keep, scores):
        return found.add("mask_all_blocked", err)
    B, L_q, L_k = scores[0], scores[-2], scores[-1]
    padding_like = keep.dim() == 2 and bool((keep[:, 1:].int() <= keep[:, :-1].int()).all())
    if padding_like and len(scores) > 2 and keep.shape == (B, L_k) and B == L_q:
        found.add("mask_ambiguous", f"mask {tuple(keep.shape)} is read as (L_q, L_k), but its "
                  f"rows look like padding and B = L_q = {B}. {why('mask_not_unsqueezed', B=B, L_k=L_k)}")  # fmt: skip
    full = keep.expand(scores)  # (…, L_q, L_k)
    if L_q == L_k > 1 and not bool(full.diagonal(dim1=-2, dim2=-1).any()):
        found.add("mask_inverted", "mask blocks the diagonal everywhere, as an inverted causal "
                  f"mask does: no token may attend to itself. {why('mask_inverted')}")  # fmt: skip
    elif (blocked := 1 - full.sum().item() / full.numel()) > 0.5:
        found.add("mask_inverted", f"mask blocks {blocked:.1%} of the query–key pairs: is it "
                  f"inverted? {why('mask_inverted')}")  # fmt: skip
    if L_q == L_k > 1 and torch.equal(full, full.new_ones(L_q, L_k).triu().expand(scores)):
        found.add("mask_future", "mask is upper triangular, so each query sees the future: a "
                  "causal mask is torch.tril, query i sees keys 0 … i.")  # fmt: skip
    if bool((no_key := ~full.any(dim=-1)).any()):  # (…, L_q)
        note = " They usually are padded queries: leave them out of the loss."
        if keep.shape[-1] == 1 and L_k > 1:
            note = f" The mask is (…, L_q, 1), as if transposed. {why('mask_transposed')}"
        elif found.has("mask_inverted"):
            note = " Here they most likely come from the inverted mask."
        first = tuple(no_key.nonzero()[0].tolist())
        found.add("fully_masked_rows", f"{int(no_key.sum())} query row(s), the first at {first}, "
                  f"have every key blocked: attn_lib and SDPA give them zero weights, a -1e9 fill "
                  f"uniform ones (the mean of V), -inf NaN.{note}")  # fmt: skip
    return full


def _fit_scale(w: torch.Tensor, raw: torch.Tensor, keep: torch.Tensor | None) -> float | None:
    """The s of weights = softmax(raw · s), by least squares on log w (None if none fits)."""
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


def _name_mistake(found: _Findings, w: torch.Tensor, inputs: Inputs,
                  full: torch.Tensor | None, tol: float) -> bool:  # fmt: skip
    """Recompute the right weights and every mistake's; report what ``w`` equals, if any."""
    right, d_k = inputs.attend(), inputs.sizes["d_k"]
    if _close(w, right, tol):
        how = "/ √d_k" if math.isclose(inputs.scale, d_k**-0.5) else f"× {inputs.scale:.4g}"
        found.add("weights_match", f"weights equal softmax(Q Kᵀ {how}) of this query and key"
                  f"{' with this mask' if inputs.mask is not None else ''}.")  # fmt: skip
        return True
    n = round(fit**-2) if (fit := _fit_scale(w, inputs.query @ inputs.key.mT, full)) else 0
    if n > d_k and n % d_k == 0 and math.isclose(fit**-2, n, rel_tol=0.05):  # ÷√(H · d_k)?
        inputs = replace(inputs, sizes={**inputs.sizes, "d_model": n})
    fills = FILLS if inputs.mask is not None else FILLS[:1]
    rights = {fill: inputs.attend(fill=fill) for fill in fills}
    for m, fill in ((m, fill) for m in MISTAKES for fill in fills):
        try:
            cand = m.recompute(replace(inputs, fill=fill))
        except (TypeError, ValueError, RuntimeError, IndexError):
            continue  # the mistake cannot run on these shapes: not this one
        if cand is not None and not _close(cand, rights[fill], tol) and _close(w, cand, tol):
            return found.add(m.code, f"weights equal {m.explain(inputs.sizes, fill)}") or True
    if drop := _dropout_factor(w, right, tol):
        found.add("dropout_on", f"rows sum to {(r := w.sum(-1)).min():.4f} … {r.max():.4f}, not 1:"
                  f" {drop[1]:.0%} of the weights are 0, the others softmax's × {drop[0]:.4f} = "
                  f"1/(1 − p) for p ≈ {1 - 1 / drop[0]:.2f}. Dropout is on, as in training. "
                  f"{why('dropout_on')}")  # fmt: skip
        return True
    if fit is not None and _close(w, inputs.attend(scale=fit), tol):
        return _off_scale(found, f"the weights' scale, {fit:.4g},", fit, d_k**-0.5) or True
    return False


def _check_weights(found: _Findings, weights: Any, w: torch.Tensor | None, scores: tuple | None,
                   full: torch.Tensor | None, inputs: Inputs | None, tol: float) -> None:  # fmt: skip
    """The learner's weights (w: float64 on the CPU): shape, what they equal, sign and rows."""
    if not isinstance(weights, torch.Tensor) or not weights.is_floating_point():
        return found.add("weights_type", _error(checks.check_float_tensor, "weights", weights))
    if w is None:
        return None  # on the meta device: reported by not_checked
    if scores is not None and w.shape != scores or w.dim() < 2:
        flipped = scores is not None and w.shape == (*scores[:-2], scores[-1], scores[-2])
        return found.add("weights_shape", f"weights have shape {tuple(w.shape)}, not (…, L_q, "
                         f"L_k){f' = {scores}' if scores else ''}." + (" Transposed: were the "
                         "scores computed as K Qᵀ? Use query @ key.transpose(-2, -1)."
                         if flipped else ""))  # fmt: skip
    if inputs is not None and _name_mistake(found, w, inputs, full, tol):
        return None
    sums = w.sum(dim=-1)  # (…, L_q)
    has_key = torch.ones_like(sums, dtype=torch.bool) if full is None else full.any(dim=-1)
    one, zero = (sums - 1).abs() <= tol, sums.abs() <= tol
    if not bool((finite := w.isfinite()).all()):
        found.add("nonfinite", f"weights hold {int((~finite).sum())} NaN or inf: from a row of "
                  f"-inf scores (masked with -inf), or exp overflowing without the max trick.")  # fmt: skip
    elif bool((w < 0).any()):
        found.add("weights_negative", f"weights hold negative values (down to {w.min():.4f}): "
                  f"these look like scores. {why('no_softmax')}")  # fmt: skip
    elif not bool(one[has_key].all() and (one | zero)[~has_key].all()):
        found.add("row_sums", f"the rows of weights sum to {sums.min():.4f} … {sums.max():.4f}, "
                  f"not 1 (0 for a row with no allowed key): use softmax(scores, dim=-1).")  # fmt: skip
    elif full is not None and bool((leak := w * ~full * has_key[..., None] > tol).any()):
        found.add("masked_weight", f"{int(leak.sum())} blocked position(s) carry weight (up to "
                  f"{w[leak].max():.4f}) in rows with a key: the mask was not applied as given.")  # fmt: skip
    elif inputs is not None:
        found.add("weights_mismatch", f"weights are not softmax(Q Kᵀ · scale) of these tensors "
                  f"(off by up to {(w - inputs.attend()).abs().max():.4f}), nor a known mistake's.")  # fmt: skip


@torch.no_grad()
def diagnose(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
             mask: torch.Tensor | None = None, weights: torch.Tensor | None = None, *,
             scale: float | None = None) -> Diagnosis:  # fmt: skip
    """Check the tensors of an attention computation and explain what looks wrong.

    Args:
        query, key, value: (…, L_q, d_k), (…, L_k, d_k), (…, L_k, d_v); … is (), (B,) or (B, H).
        mask: optional keep-mask (True or 1 = may attend). A float mask is reported (attn_lib
            refuses it) and read as a 0/1 keep-mask or a 0/-inf additive one when it is one.
        weights: optional (…, L_q, L_k), the weights the learner computed (after softmax,
            and after dropout if any); named when they equal a mistake of the table.
        scale: optional multiplier of the scores the learner used (default 1/√d_k).

    Returns:
        :class:`Diagnosis`; :data:`CODES` lists every code it may hold.

    Never raises on a learner's tensors (what it cannot check is a finding), nor changes them.
    """
    found = _Findings()
    sizes = _check_qkv(found, query, key, value)
    named = {"query": query, "key": key, "value": value, "mask": mask, "weights": weights}
    tensors = {n: t for n, t in named.items() if isinstance(t, torch.Tensor)}
    _check_devices(found, tensors)
    values = {  # float64 CPU copies of the tensors whose numbers can be read
        n: t.detach().to("cpu", torch.float64).contiguous() for n, t in tensors.items()
        if n != "mask" and t.is_floating_point() and t.device.type != "meta"
    }  # fmt: skip
    for n in values.keys() - {"weights"}:
        if err := _error(checks.check_finite, n, values[n]):
            found.add("nonfinite", err)
    if scale is not None and (err := _error(checks.check_scale, scale)):
        found.add("scale_invalid", f"attn_lib refuses this scale: {err} Checked with 1/√d_k.")
    s = None if scale is None or found.has("scale_invalid") else checks.check_scale(scale)
    keep, additive = (None, False) if mask is None else _read_mask(found, mask)
    if sizes is None or found.has("empty"):
        if weights is not None:
            _check_weights(found, weights, values.get("weights"), None, None, None, 1e-4)
        return Diagnosis(tuple(found), sizes)
    scores = (*query.shape[:-2], sizes["L_q"], sizes["L_k"])
    full = None if keep is None else _check_mask(found, keep, scores)
    if s is not None:
        _name_scale(found, s, sizes)
    inputs = None
    if (mask is None or full is not None) and not {"query", "key"} - values.keys():
        inputs = Inputs(values["query"], values["key"], keep, s or sizes["d_k"] ** -0.5, sizes,
                        additive=additive)  # fmt: skip
        inputs = None if _error(inputs.attend) else inputs  # NaN in them, or overflowing scores
    if weights is not None:  # the tolerance of the least precise dtype
        size = min((t.dtype.itemsize for t in (weights, query, key)
                    if isinstance(t, torch.Tensor) and t.is_floating_point()), default=4)  # fmt: skip
        tol = {1: 0.1, 2: 1e-2}.get(size, 1e-4)
        _check_weights(found, weights, values.get("weights"), scores, full, inputs, tol)
    return Diagnosis(tuple(found), sizes)
