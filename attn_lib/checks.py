"""The input checks of attn_lib, and their errors written for the learner.

Each error names the argument, what it got, what was expected and the usual fix, instead of a
traceback from inside torch or a silent wrong number. Every top-level function and diagnose()
call these checks; notebooks 02 (section 3) and 07 (section 5) show their messages, notebooks
00 (section 4) and 04 use shape_trace.

Shape legend: B batch, H heads, L_q query length, L_k key length, d_model, d_k, d_v.
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Sequence
from dataclasses import dataclass

import torch

__all__ = ["FLOAT_DTYPES", "MaskError", "ShapeError", "ShapeStep", "as_int", "as_keep_mask",
           "check_attention", "check_device", "check_dropout_p", "check_fill_value", "check_finite",
           "check_float_dtype", "check_float_tensor", "check_mask", "check_qkv", "check_scale",
           "check_scores_finite", "check_size", "fmt_shape", "shape_trace"]  # fmt: skip


class ShapeError(ValueError):
    """A tensor has a shape that attention cannot use."""


class MaskError(ValueError):
    """A mask has a dtype, shape or content that attention cannot use."""


def fmt_shape(shape: Sequence[int]) -> str:
    """A shape as ``(2, 4, 8)``, a 1-tuple as ``(4,)``."""
    dims = tuple(int(d) for d in shape)
    return f"({dims[0]},)" if len(dims) == 1 else "(" + ", ".join(map(str, dims)) + ")"


def _short_repr(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _why(code: str, **sizes: int) -> str:
    """The explanation of a learner mistake from attn_lib.mistakes, the one table of them
    (imported here, when an error is worded: the table recomputes mistakes with these checks)."""
    from .mistakes import why

    return why(code, **sizes)


# --- sizes, dtypes, devices -------------------------------------------------------------------


def as_int(name: str, value: object) -> int:
    """An integer argument as a plain int: a Python int, a NumPy integer or a 0-d integer tensor.

    Raises:
        TypeError: a float (even 3.0), a bool, any other tensor or object.
        ValueError: a 0-d tensor on the meta device.
    """
    if isinstance(value, bool) or (isinstance(value, torch.Tensor) and value.dtype == torch.bool):
        raise TypeError(f"{name} must be an int, got the bool {_short_repr(value)}.")
    if isinstance(value, torch.Tensor):
        if value.dim() != 0 or value.is_floating_point() or value.is_complex():
            raise TypeError(
                f"{name} must be an int, got a {value.dtype} tensor of shape "
                f"{fmt_shape(value.shape)}; pass one whole number: an int, a NumPy integer "
                f"or a 0-d integer tensor such as lengths.max().")  # fmt: skip
        check_device(name, value)
    try:
        return operator.index(value)
    except TypeError:
        pass
    hint = ""
    if isinstance(value, numbers.Real) and math.isfinite(value) and float(value).is_integer():
        hint = f" Pass int({name}) or write {int(value)}; / makes a float, // keeps an int."
    raise TypeError(
        f"{name} must be an int, got {type(value).__name__} {_short_repr(value)}.{hint}") from None  # fmt: skip


def check_size(
    name: str, value: object, minimum: int = 1, *, error: type[Exception] = ValueError
) -> int:
    """A size (a length, a width, a count) as a plain int ≥ ``minimum``: attn_lib's one size check.

    Raises:
        TypeError: ``value`` is not integer-valued (see :func:`as_int`).
        ValueError (or ``error``): ``value`` < ``minimum``.
    """
    n = as_int(name, value)
    if n < minimum:
        raise error(f"{name} must be ≥ {minimum}, got {n}.")
    return n


# The dtypes attention computes in; float8 is a storage format (no softmax in torch).
FLOAT_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
_FLOAT_NAMES = "float32, float64, float16 or bfloat16"


def check_float_dtype(name: str, dtype: object) -> torch.dtype:
    """Refuse a dtype other than float32, float64, float16 or bfloat16 (TypeError)."""
    if not isinstance(dtype, torch.dtype) or dtype not in FLOAT_DTYPES:
        raise TypeError(
            f"{name} must be a floating point dtype that attention computes in ({_FLOAT_NAMES}), "
            f"got {dtype!r}.")  # fmt: skip
    return dtype


def check_float_tensor(name: str, t: object) -> torch.Tensor:
    """Refuse anything but a float32, float64, float16 or bfloat16 tensor (TypeError)."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(
            f"{name} must be a torch.Tensor, got {type(t).__name__}. "
            f"Wrap it with torch.as_tensor({name}, dtype=torch.float32).")  # fmt: skip
    if not t.is_floating_point():
        raise TypeError(
            f"{name} has dtype {t.dtype}; attention needs a floating-point tensor "
            f"({_FLOAT_NAMES}). Convert it with {name}.float().")  # fmt: skip
    if t.dtype not in FLOAT_DTYPES:
        raise TypeError(
            f"{name} has dtype {t.dtype}, a storage format that torch cannot compute "
            f"attention in; attn_lib supports {_FLOAT_NAMES}. Convert it with {name}.float().")  # fmt: skip
    return t


def check_device(name: str, t: torch.Tensor, device: torch.device | None = None,
                 like: str = "query", *, error: type[ValueError] = ValueError) -> None:  # fmt: skip
    """Refuse a tensor on the meta device, or on another device than ``device`` (that of ``like``).

    Raises:
        ValueError (or ``error``, e.g. MaskError): with the move that fixes it.
    """
    if t.device.type == "meta":
        raise error(
            f"{name} is on the meta device, which holds shapes but no values; attn_lib "
            f"computes with real tensors on one device (CPU or GPU): create it with "
            f"device='cpu' (or a GPU).")  # fmt: skip
    if device is not None and t.device != device:
        raise error(
            f"{name} is on {t.device} but {like} is on {device}; attention needs all its "
            f"tensors on one device. Move it with {name}.to({like}.device).")  # fmt: skip


# --- values -----------------------------------------------------------------------------------


def check_finite(name: str, t: torch.Tensor) -> float:
    """Refuse NaN and ±inf in ``t``, naming the first; return a bound on the norm of its rows.

    One reduction reads ``t`` (NaN or inf make it non-finite); only then is ``t`` searched.

    Returns:
        R ≥ ‖t[..., i, :]‖ for every row i (up to float rounding; inf when the squares
        overflow), so that |q·k| ≤ R_query · R_key (Cauchy-Schwarz).

    Raises:
        ValueError: ``t`` holds NaN or ±inf.
    """
    t = t.detach()
    if t.numel() == 0:
        return 0.0
    norm = torch.linalg.vector_norm(t).item()
    if math.isfinite(norm):
        return norm + math.sqrt(t.numel() * torch.finfo(t.dtype).tiny)  # squares that underflow
    bad = ~torch.isfinite(t)
    if not bool(bad.any()):
        return math.inf  # every element is finite; only the sum of squares overflowed
    where = tuple(int(i) for i in bad.nonzero()[0])
    raise ValueError(
        f"{name} contains {int(bad.sum())} non-finite value(s) (NaN or inf); the first is "
        f"{t[where].item()} at index {where}. NaN in the inputs would spread to every output "
        f"row that attends to it; find where it was produced (often a division by zero or an "
        f"overflowing softmax upstream).")  # fmt: skip


def check_scores_finite(scores: torch.Tensor) -> None:
    """Refuse scores that overflowed to ±inf or NaN although the inputs were finite (ValueError)."""
    if bool(torch.isfinite(scores).all()):
        return
    infinite, nan = int(scores.isinf().sum()), int(scores.isnan().sum())
    found = " and ".join(
        ([f"{infinite} infinite"] if infinite else []) + ([f"{nan} NaN"] if nan else []))  # fmt: skip
    raise ValueError(
        f"the scores Q Kᵀ · scale overflowed to ±inf in {scores.dtype} ({found} of "
        f"{scores.numel()} scores): the inputs are far too large for this dtype, and a softmax "
        f"of infinite scores would silently give NaN or put weight on blocked keys. Normalise "
        f"the inputs (e.g. a LayerNorm) or use a smaller scale.")  # fmt: skip


def check_scale(scale: object) -> float:
    """A score multiplier as a float > 0; a tensor is refused (its gradient would be lost).

    Raises:
        TypeError: not a real number (bools and tensors included).
        ValueError: not finite, or ≤ 0.
    """
    if isinstance(scale, torch.Tensor):
        raise TypeError(
            "scale must be a Python number, got a tensor (its gradient would be lost); "
            "pass float(scale), or multiply the query by a learned scale yourself.")  # fmt: skip
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real):
        raise TypeError(f"scale must be a real number, got {type(scale).__name__}.")
    scale = float(scale)
    if not math.isfinite(scale) or scale <= 0:
        raise ValueError(
            f"scale must be a finite number > 0 (it multiplies the scores; the default is "
            f"1/sqrt(d_k), pass 1.0 for no scaling), got {scale}.")  # fmt: skip
    return scale


def check_dropout_p(p: object) -> float:
    """A dropout probability as a float in [0, 1) (TypeError, ValueError)."""
    if isinstance(p, bool) or not isinstance(p, numbers.Real):
        raise TypeError(f"dropout_p must be a real number in [0, 1), got {type(p).__name__}.")
    p = float(p)
    if not 0.0 <= p < 1.0:
        raise ValueError(
            f"dropout_p must be in [0, 1), got {p}: it is the probability of zeroing a weight.")  # fmt: skip
    return p


def check_fill_value(fill_value: object, dtype: torch.dtype) -> float:
    """An explicit fill for blocked scores, as a float that ``dtype`` can hold.

    Raises:
        TypeError: not a real number.
        ValueError: NaN.
        RuntimeError: finite but beyond the dtype's range (-1e9 in float16), as masked_fill.
    """
    if isinstance(fill_value, bool) or not isinstance(fill_value, numbers.Real):
        raise TypeError(
            f"fill_value must be a number (e.g. -1e9 or float('-inf')) or None, "
            f"got {type(fill_value).__name__}.")  # fmt: skip
    fill_value = float(fill_value)
    if math.isnan(fill_value):
        raise ValueError("fill_value is NaN; every masked score would turn the row into NaN.")
    if math.isfinite(fill_value) and abs(fill_value) > torch.finfo(dtype).max:
        limit = f"It holds magnitudes up to {torch.finfo(dtype).max:g}, so masked_fill refuses it."
        raise RuntimeError(
            f"fill_value={fill_value:g} overflows {dtype}. "
            f"{_why('fill_overflow') if dtype == torch.float16 else limit} Or leave "
            f"fill_value=None, attn_lib's fill, safe in every dtype.")  # fmt: skip
    return fill_value


# --- query, key, value ------------------------------------------------------------------------


@dataclass(frozen=True)
class QKVShapes:
    """Sizes read off checked query, key and value."""

    batch: tuple[int, ...]
    L_q: int
    L_k: int
    d_k: int
    d_v: int
    row_norms: tuple[float, float, float] | None = None  # check_finite's bounds, if checked

    @property
    def scores(self) -> tuple[int, ...]:
        """The shape of the scores and the weights, (..., L_q, L_k)."""
        return (*self.batch, self.L_q, self.L_k)

    def scores_may_overflow(self, scale: float, dtype: torch.dtype) -> bool:
        """False when |q·k| · scale ≤ R_q · R_k · scale is safely inside ``dtype``'s range."""
        if self.row_norms is None:
            return True
        bound_q, bound_k, _ = self.row_norms
        return not scale * bound_q * bound_k < torch.finfo(dtype).max / 4  # 4: rounding margin


_RANK_NAMES = {2: "(L, d)", 3: "(B, L, d)", 4: "(B, H, L, d)"}


def _check_rank(name: str, t: torch.Tensor) -> None:
    if 2 <= t.dim() <= 4:
        return
    fix = (
        f"For a single vector use {name}.unsqueeze(0) → (1, {t.shape[0]})."
        if t.dim() == 1
        else "Merge or split leading dims with reshape first."
        if t.dim() > 4
        else "")  # fmt: skip
    raise ShapeError(
        f"{name} has shape {fmt_shape(t.shape)} ({t.dim()}-D); attention takes 2-D (L, d), "
        f"3-D (B, L, d) or 4-D (B, H, L, d) tensors. {fix}")  # fmt: skip


def check_qkv(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *, finite: bool = True
) -> QKVShapes:
    """Check query (..., L_q, d_k), key (..., L_k, d_k) and value (..., L_k, d_v); return their sizes.

    ``...`` is nothing, (B,) or (B, H), the same for all three. ``finite=False`` skips the
    values (NaN, inf) and the meta-device check, for shapes-only stand-ins.

    Raises:
        TypeError: a dtype other than float32, float64, float16, bfloat16, or mixed dtypes.
        ShapeError: ranks outside 2..4 or unequal, batch dims, d_k or L_k that differ, or an
            empty d_k or L_k.
        ValueError: tensors on different devices or on the meta device; NaN or inf.
    """
    named = (("query", query), ("key", key), ("value", value))
    for name, t in named:
        check_float_tensor(name, t)
    if not (query.dtype == key.dtype == value.dtype):
        raise TypeError(
            f"query, key and value must share one dtype, got {query.dtype}, {key.dtype} and "
            f"{value.dtype}. Convert them with .to(query.dtype).")  # fmt: skip
    if (finite and query.device.type == "meta") or not query.device == key.device == value.device:
        for name, t in named:
            check_device(name, t, query.device, "query")
    for name, t in named:
        _check_rank(name, t)
    shapes = f"query {fmt_shape(query.shape)}, key {fmt_shape(key.shape)}, value {fmt_shape(value.shape)}"
    if not query.dim() == key.dim() == value.dim():
        raise ShapeError(
            f"query, key and value must have the same rank, got {shapes}. attn_lib does not "
            f"broadcast across ranks, because broadcasting lines dims up from the right and can "
            f"silently pair the wrong axes; add the missing batch dim with unsqueeze(0).")  # fmt: skip
    if query.shape[-1] != key.shape[-1]:
        transposed = key.shape[-2] == query.shape[-1]  # key looks like Kᵀ, (…, d_k, L_k)
        raise ShapeError(
            f"d_k of query and key differ: query {fmt_shape(query.shape)} ends in "
            f"{query.shape[-1]}, key {fmt_shape(key.shape)} ends in {key.shape[-1]}. Scores are "
            f"dot products of a query row with a key row, so both need the same last dim"
            + (f". {_why('key_transposed')}" if transposed else "; check that W_Q and W_K map "
               "to the same d_k.")
        )  # fmt: skip
    if key.shape[-2] != value.shape[-2]:
        raise ShapeError(
            f"key and value must have the same length L_k: key {fmt_shape(key.shape)} has "
            f"L_k = {key.shape[-2]}, value {fmt_shape(value.shape)} has {value.shape[-2]}. "
            f"Each key row labels the value row at the same position; both usually come "
            f"from the same sequence.")  # fmt: skip
    if not query.shape[:-2] == key.shape[:-2] == value.shape[:-2]:
        raise ShapeError(
            f"the leading (batch) dims must match: {shapes} (expected {_RANK_NAMES[query.dim()]} "
            f"for all three, with the same B{' and H' if query.dim() == 4 else ''}). attn_lib "
            f"does not broadcast batch dims; use .expand(...) if you mean to share keys across "
            f"the batch.")  # fmt: skip
    if query.shape[-1] == 0:
        raise ShapeError(f"d_k is 0 (query {fmt_shape(query.shape)}): there is nothing to compare.")
    if key.shape[-2] == 0:
        raise ShapeError(
            f"L_k is 0 (key {fmt_shape(key.shape)}): every query needs at least one key.")  # fmt: skip
    norms = tuple(check_finite(name, t) for name, t in named) if finite else None
    return QKVShapes(tuple(query.shape[:-2]), query.shape[-2], key.shape[-2], query.shape[-1],
                     value.shape[-1], norms)  # fmt: skip


# --- masks ------------------------------------------------------------------------------------

_CONVERTER_HINT = (
    "attn_lib masks are keep-masks (True or 1 = may attend, False or 0 = blocked). "
    "If this is an additive mask (0 where kept, -inf where blocked), pass `mask == 0`; "
    "if it is a 0./1. keep-mask stored as float, pass `mask.bool()`. "
    "attn_lib.masks.to_additive converts the other way.")  # fmt: skip


def as_keep_mask(mask: object, name: str = "mask") -> torch.Tensor:
    """A keep-mask as bool (the same object if already bool); any shape.

    Raises:
        TypeError: not a tensor.
        MaskError: a float or complex mask (PyTorch reads float masks as additive, so a float
            0/1 mask is ambiguous), integers other than 0 and 1, the meta device.
    """
    if not isinstance(mask, torch.Tensor):
        raise TypeError(
            f"{name} must be a torch.Tensor (bool, or integer 0/1), got {type(mask).__name__}.")  # fmt: skip
    check_device(name, mask, error=MaskError)
    if mask.dtype == torch.bool:
        return mask
    if mask.is_floating_point() or mask.is_complex():
        raise MaskError(
            f"{name} has dtype {mask.dtype}; a float mask is refused. {_CONVERTER_HINT}")  # fmt: skip
    if mask.dtype in (torch.uint16, torch.uint32, torch.uint64):  # no aminmax for these
        mask = mask.to(torch.int64)
    lo, hi = torch.aminmax(mask) if mask.numel() else (0, 1)  # one pass, no temporaries
    if int(lo) < 0 or int(hi) > 1:
        found = sorted(int(v) for v in mask.unique()[:6])
        fix = "Build it with a comparison, e.g. mask = (ids != pad_id)."
        raise MaskError(
            f"an integer {name} must hold only 0 (blocked) and 1 (may attend); found values "
            f"{found}. {_why('bitwise_not_int') if set(found) <= {-2, -1} else fix}")  # fmt: skip
    return mask.to(torch.bool)


def _rank_fix(shape: tuple[int, ...], rank: int) -> str:
    """The fix for a mask whose rank is neither 2 nor the scores' ``rank``."""
    if len(shape) == 0:
        return (
            "A 0-D mask (a single True/False) does not say which keys to block; build "
            "one with the scores' shape, e.g. attn_lib.padding_mask or causal_mask.")  # fmt: skip
    if len(shape) == 1:
        return (
            f"A 1-D mask is ambiguous; give it the scores' rank, e.g. "
            f"{fmt_shape((1,) * (rank - 1) + shape)} for one key mask shared by every query.")  # fmt: skip
    if len(shape) < rank:
        target = (shape[0],) + (1,) * (rank - len(shape)) + shape[1:]
        return (
            f"Broadcasting would line it up from the right and could mask the wrong axis; "
            f"give it the scores' rank: {fmt_shape(target)} (e.g. mask.unsqueeze(1)).")  # fmt: skip
    return "Remove the extra dims (squeeze) or check which tensor was passed as mask."


def check_mask(
    mask: object, scores_shape: Sequence[int], *, device: torch.device | None = None
) -> torch.Tensor:
    """Check a keep-mask against the scores (..., L_q, L_k) it will mask; return it as bool.

    A 2-D mask means (L_q, L_k); any other has the scores' rank, each dim the scores' or 1:
    (B, 1, L_k) padding, (1, L_q, L_k) shared, (B, L_q, L_k), (B, 1, 1, L_k) with heads.

    Raises:
        TypeError: not a tensor.
        MaskError: as :func:`as_keep_mask`; a shape that does not fit (with the fix: a
            (B, L_k) padding mask not unsqueezed, a lower rank); a mask that blocks every key
            for every query; a mask on another device than ``device`` (the query's).
    """
    scores = tuple(int(d) for d in scores_shape)
    mask = as_keep_mask(mask)
    if device is not None:
        check_device("mask", mask, device, "scores", error=MaskError)
    rank, L_q, L_k, shape = len(scores), scores[-2], scores[-1], tuple(mask.shape)
    where = f"the scores have shape {fmt_shape(scores)} = (..., L_q, L_k)"
    if mask.dim() == 2 and not (shape[0] in (L_q, 1) and shape[1] in (L_k, 1)):
        msg = f"mask has shape {fmt_shape(shape)}; a 2-D mask means (L_q, L_k) = {fmt_shape((L_q, L_k))}, and {where}."
        if rank >= 3 and shape == (scores[0], L_k):  # a (B, L_k) padding mask
            msg += f" {_why('mask_not_unsqueezed', B=scores[0], L_k=L_k)}"
            msg += f" With heads: mask[:, None, None, :] → {fmt_shape((scores[0], 1, 1, L_k))}." * (rank == 4)  # fmt: skip
        raise MaskError(msg)  # fmt: skip
    if mask.dim() not in (2, rank):
        raise MaskError(
            f"mask has shape {fmt_shape(shape)} ({mask.dim()}-D) but {where} ({rank}-D); a mask "
            f"is either 2-D (L_q, L_k) or has the scores' rank. {_rank_fix(shape, rank)}")  # fmt: skip
    bad = [i for i, (m, s) in enumerate(zip(shape, scores)) if m not in (s, 1)]
    if mask.dim() == rank and bad:
        dims = ", ".join(f"dim {i}: {shape[i]} vs {scores[i]}" for i in bad)
        msg = (
            f"mask has shape {fmt_shape(shape)}, which does not fit the scores {fmt_shape(scores)} "
            f"({dims}); each mask dim must equal the scores' dim or be 1.")  # fmt: skip
        if rank == 3 and shape[0] == scores[0] and shape[-1] == L_k:
            msg += f" A padding mask has shape (B, 1, L_k) = {fmt_shape((scores[0], 1, L_k))}."
        raise MaskError(msg)
    if mask.numel() > 0 and not bool(mask.any()):
        raise MaskError(
            f"mask (shape {fmt_shape(shape)}) blocks every key for every query: almost always "
            f"an inverted or an additive mask. {_why('mask_inverted')} "
            f"{_why('additive_mask_as_keep')}")  # fmt: skip
    return mask


def check_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: object | None,
    scale: object | None,
) -> tuple[QKVShapes, torch.Tensor | None, float]:
    """The checks every attention runs: query, key, value, the mask and the scale.

    Returns:
        The sizes, the mask as bool (or None), and the scale (default 1/√d_k).
    """
    shapes = check_qkv(query, key, value)
    scale = 1.0 / math.sqrt(shapes.d_k) if scale is None else check_scale(scale)
    keep = None if mask is None else check_mask(mask, shapes.scores, device=query.device)
    return shapes, keep, scale


# --- the shapes through attention, without computing it ---------------------------------------


@dataclass(frozen=True)
class ShapeStep:
    """One step of attention and the shape it produces; prints as a table row."""

    step: str
    expression: str
    shape: tuple[int, ...]

    def __str__(self) -> str:
        return f"{self.step:<10} {self.expression:<32} {fmt_shape(self.shape)}"


def shape_trace(query: torch.Tensor | Sequence[int], key: torch.Tensor | Sequence[int],
                value: torch.Tensor | Sequence[int]) -> list[ShapeStep]:  # fmt: skip
    """The shapes through softmax(Q Kᵀ / √d_k) V, from tensors or shape tuples, without computing.

    Returns:
        Q, K, V, Kᵀ (..., d_k, L_k), scores (..., L_q, L_k), weights (..., L_q, L_k) and
        output (..., L_q, d_v).

    Raises:
        ShapeError: shapes that do not fit, with attention's messages.

    Source: Vaswani et al. 2017, eq. (1); article section 2.3.
    """
    shapes = []
    for name, t in (("query", query), ("key", key), ("value", value)):
        if isinstance(t, torch.Tensor):
            shapes.append(tuple(t.shape))
        elif isinstance(t, Sequence) and not isinstance(t, str):
            shapes.append(
                tuple(check_size(f"{name}[{i}]", d, 0, error=ShapeError) for i, d in enumerate(t)))  # fmt: skip
        else:
            raise TypeError(f"{name} must be a tensor or a shape tuple, got {_short_repr(t)}.")
    q, k, v = shapes
    check_qkv(*(torch.empty(s, device="meta") for s in shapes), finite=False)  # stand-ins, no data
    batch, L_q, d_k, L_k, d_v = q[:-2], q[-2], q[-1], k[-2], v[-1]
    return [
        ShapeStep("Q", "query", q),
        ShapeStep("K", "key", k),
        ShapeStep("V", "value", v),
        ShapeStep("Kᵀ", "K.transpose(-2, -1)", (*batch, d_k, L_k)),
        ShapeStep("scores", "Q @ Kᵀ / sqrt(d_k)", (*batch, L_q, L_k)),
        ShapeStep("weights", "softmax(scores, dim=-1)", (*batch, L_q, L_k)),
        ShapeStep("output", "weights @ V", (*batch, L_q, d_v))]  # fmt: skip
