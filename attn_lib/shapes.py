"""Input checks for attention, with errors written for the learner.

Most bugs in attention code are shapes and mask broadcasting (article, section 5:
"eighty percent of my bugs were shapes and mask broadcasting"). Every public
function of attn_lib runs its inputs through the checks here, so that a mistake
surfaces as one sentence naming the argument, what it got, what was expected and
the usual fix, instead of a traceback from deep inside torch or, worse, a silent
wrong number.

Shape legend used in every docstring of attn_lib:
    B batch, H heads (only in the bridge to multi-head), L_q query length,
    L_k key length, d_model model width, d_k query/key width, d_v value width.
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Sequence
from dataclasses import dataclass

import torch

__all__ = [
    "FLOAT_DTYPES",
    "MaskError",
    "ShapeError",
    "ShapeStep",
    "as_int",
    "as_keep_mask",
    "check_device",
    "check_dropout_p",
    "check_finite",
    "check_float_dtype",
    "check_float_tensor",
    "check_mask",
    "check_qkv",
    "check_scale",
    "check_scores_finite",
    "check_size",
    "fmt_shape",
    "shape_trace",
]


class ShapeError(ValueError):
    """A tensor has a shape that attention cannot use (a ValueError)."""


class MaskError(ValueError):
    """A mask has a dtype, shape or content that attention cannot use (a ValueError)."""


def fmt_shape(shape: Sequence[int]) -> str:
    """Format a shape as ``(2, 4, 8)`` (a 1-tuple as ``(4,)``)."""
    dims = tuple(int(d) for d in shape)
    if len(dims) == 1:
        return f"({dims[0]},)"
    return "(" + ", ".join(str(d) for d in dims) + ")"


_RANK_NAMES = {2: "(L, d)", 3: "(B, L, d)", 4: "(B, H, L, d)"}

# The dtypes attn_lib computes in. float8 types are floating point too, but torch has no
# softmax, aminmax or masked_fill for them: they are a storage format.
FLOAT_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
_FLOAT_NAMES = "float32, float64, float16 or bfloat16"


def _short_repr(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def as_int(name: str, value: object) -> int:
    """Return an integer-valued argument (a size, an index) as a plain int.

    Accepts what ``operator.index`` accepts: a Python int, a NumPy integer, a 0-d
    integer tensor (e.g. ``lengths.max()``).

    Raises:
        TypeError: a float (even 3.0), a bool, a tensor that is not a 0-d integer
            tensor, or anything else; the message names ``name``.
        ValueError: a 0-d tensor on the meta device (it holds no value).
    """
    if isinstance(value, bool) or (isinstance(value, torch.Tensor) and value.dtype == torch.bool):
        raise TypeError(f"{name} must be an int, got the bool {_short_repr(value)}.")
    if isinstance(value, torch.Tensor):
        if value.dim() != 0 or value.is_floating_point() or value.is_complex():
            raise TypeError(
                f"{name} must be an int, got a {value.dtype} tensor of shape "
                f"{fmt_shape(value.shape)}; pass one whole number: an int, a NumPy integer "
                f"or a 0-d integer tensor such as lengths.max()."
            )
        check_device(name, value)
    try:
        return operator.index(value)
    except TypeError:
        pass
    hint = ""
    if isinstance(value, numbers.Real) and math.isfinite(value) and float(value).is_integer():
        # The usual slip: d_model / 2 is a float; d_model // 2 is an int.
        hint = f" Pass int({name}) or write {int(value)}; / makes a float, // keeps an int."
    raise TypeError(
        f"{name} must be an int, got {type(value).__name__} {_short_repr(value)}.{hint}"
    ) from None


def check_size(
    name: str, value: object, minimum: int = 1, *, error: type[Exception] = ValueError
) -> int:
    """Return a size (a length, a width, a count) as a plain int ≥ ``minimum``.

    The one home of the rule "a size is a positive int": every size attn_lib takes is
    checked here. Python ints, NumPy integers and 0-d integer tensors are accepted (as
    ``operator.index`` does); floats, even 3.0, and bools are refused.

    Args:
        name: the argument's name, for the message.
        value: the size.
        minimum: the smallest size allowed (1 for a length, 0 for a seed).
        error: the exception raised below ``minimum`` (e.g. ShapeError, IndexError).

    Returns:
        ``value`` as a Python int.

    Raises:
        TypeError: ``value`` is not integer-valued (see :func:`as_int`).
        ValueError (or ``error``): ``value`` < ``minimum``.
    """
    n = as_int(name, value)
    if n < minimum:
        raise error(f"{name} must be ≥ {minimum}, got {n}.")
    return n


def check_float_dtype(name: str, dtype: object) -> torch.dtype:
    """Check that ``dtype`` is one attn_lib computes in: float32, float64, float16, bfloat16.

    Raises:
        TypeError: not a torch.dtype, or another dtype (an integer dtype, float8).
    """
    if not isinstance(dtype, torch.dtype) or dtype not in FLOAT_DTYPES:
        raise TypeError(
            f"{name} must be a floating point dtype that attention computes in ({_FLOAT_NAMES}), "
            f"got {dtype!r}."
        )
    return dtype


def check_device(
    name: str,
    t: torch.Tensor,
    device: torch.device | None = None,
    like: str = "query",
    *,
    error: type[ValueError] = ValueError,
) -> None:
    """Refuse a tensor on the meta device, or on another device than ``device``.

    Args:
        name: the tensor's name, for the message.
        t: the tensor.
        device: the device it must be on (that of ``like``), or None.
        like: the name of the tensor that fixes ``device``, for the fix in the message.
        error: the ValueError subclass to raise (e.g. MaskError for a mask).

    Raises:
        ValueError (or ``error``): ``t`` is on the meta device (shapes without values),
            or ``t.device != device``.
    """
    if t.device.type == "meta":
        raise error(
            f"{name} is on the meta device, which holds shapes but no values; attn_lib "
            f"computes with real tensors on one device (CPU or GPU): create it with "
            f"device='cpu' (or a GPU)."
        )
    if device is not None and t.device != device:
        raise error(
            f"{name} is on {t.device} but {like} is on {device}; attention needs all its "
            f"tensors on one device. Move it with {name}.to({like}.device)."
        )


def check_float_tensor(name: str, t: object) -> torch.Tensor:
    """Check that ``t`` is a tensor of a dtype attn_lib computes in.

    Raises:
        TypeError: ``t`` is not a tensor, or its dtype is not float32, float64, float16
            or bfloat16 (integer or bool inputs are a common slip:
            ``torch.tensor([[1, 2]])`` is int64; float8 has no softmax in torch).
    """
    if not isinstance(t, torch.Tensor):
        raise TypeError(
            f"{name} must be a torch.Tensor, got {type(t).__name__}. "
            f"Wrap it with torch.as_tensor({name}, dtype=torch.float32)."
        )
    if not t.is_floating_point():
        raise TypeError(
            f"{name} has dtype {t.dtype}; attention needs a floating-point tensor "
            f"({_FLOAT_NAMES}). Convert it with {name}.float()."
        )
    if t.dtype not in FLOAT_DTYPES:
        raise TypeError(
            f"{name} has dtype {t.dtype}, a storage format that torch cannot compute "
            f"attention in; attn_lib supports {_FLOAT_NAMES}. Convert it with {name}.float()."
        )
    return t


def _row_norm_bound(t: torch.Tensor) -> float:
    """An upper bound on ‖row‖ for every row t[..., i, :], from one pass over ``t``.

    NaN or inf in ``t`` makes it NaN or inf; so can huge finite values (then the caller
    looks element by element).
    """
    if t.dtype in (torch.float32, torch.float64) and t.is_contiguous():
        # The sum of squares of the whole tensor bounds every row's; one BLAS dot product
        # (measured at (8, 512, 64) float32: a third of torch.aminmax's time). Squares below
        # the dtype's smallest normal number may flush to zero: adding that number once per
        # element keeps the bound an upper bound (1e-25 in float32 squares to 0).
        flat = t.view(-1)
        squares = torch.dot(flat, flat).item()
        return math.sqrt(squares + t.numel() * torch.finfo(t.dtype).tiny)
    # float16 / bfloat16 (a float32 sum of squares would need a float32 copy of the tensor)
    # and views that are not contiguous: the largest magnitude, times √(row length).
    lo, hi = (v.item() for v in torch.aminmax(t))
    return max(-lo, hi) * math.sqrt(t.shape[-1])


def check_finite(name: str, t: torch.Tensor) -> float:
    """Raise if ``t`` holds NaN or ±inf, naming the first bad position; else bound its rows.

    Cheap on the good path: one reduction that reads the tensor once and allocates nothing
    of its size. For a contiguous float32/float64 tensor it is the sum of squares (a BLAS
    dot product of the flattened tensor with itself); for float16/bfloat16 and for views
    that are not contiguous, ``torch.aminmax``. NaN and ±inf make either one NaN or inf,
    so a finite result proves every element finite. Only when it is not finite is the
    exact element-wise test run: it locates the bad value, or finds none when the sum of
    squares merely overflowed (elements beyond about 1e19 in float32), and the bound is
    then inf.

    Args:
        name: the argument's name, for the message.
        t: a floating-point tensor (``...``, n) whose last dim holds the rows.

    Returns:
        R ≥ ‖t[..., i, :]‖ for every row i (as a Python float; 0.0 for an empty tensor, inf
        when it cannot be computed): the square root of the sum of squares of the whole
        tensor, or max|t| · √n. Up to float rounding (a relative 1e-7 or so), so a caller
        leaves a margin. By Cauchy-Schwarz, |q·k| ≤ R_q · R_k for any query row q and key
        row k.

    Raises:
        ValueError: ``t`` contains NaN or ±inf.
    """
    if t.numel() == 0:
        return 0.0
    t = t.detach()
    bound = _row_norm_bound(t)
    if math.isfinite(bound):
        return bound
    bad = ~torch.isfinite(t)
    if not bool(bad.any()):
        return math.inf  # every element is finite; only the sum of squares overflowed
    where = tuple(int(i) for i in bad.nonzero()[0])
    value = t[where].item()
    count = int(bad.sum())
    raise ValueError(
        f"{name} contains {count} non-finite value(s) (NaN or inf); the first is {value} "
        f"at index {where}. NaN in the inputs would spread to every output row that "
        f"attends to it; find where it was produced (often a division by zero or an "
        f"overflowing softmax upstream)."
    )


def check_scores_finite(scores: torch.Tensor) -> None:
    """Refuse scores that overflowed (finite inputs whose products are infinite or NaN).

    Call it only when :meth:`QKVShapes.scores_may_overflow` says so: it reads the scores.

    Raises:
        ValueError: a score is ±inf or NaN; the message counts them.
    """
    if bool(torch.isfinite(scores).all()):
        return
    infinite, nan = int(scores.isinf().sum()), int(scores.isnan().sum())
    found = [f"{infinite} infinite"] if infinite else []
    if nan:  # a partial sum overflowed to +inf and met one that overflowed to -inf
        found.append(f"{nan} NaN")
    what = f"{' and '.join(found)} of {scores.numel()} scores"
    raise ValueError(
        f"the scores Q Kᵀ · scale overflowed to ±inf in {scores.dtype} ({what}): the inputs "
        f"are far too large for this dtype, and a softmax of infinite "
        f"scores would silently give NaN or put weight on blocked keys. Normalise the inputs "
        f"(e.g. a LayerNorm) or use a smaller scale."
    )


@dataclass(frozen=True)
class QKVShapes:
    """Sizes read off checked query, key and value tensors."""

    batch: tuple[int, ...]
    L_q: int
    L_k: int
    d_k: int
    d_v: int
    # For query, key and value (if checked): bounds on the norm of their rows (check_finite)
    row_norms: tuple[float, float, float] | None = None

    @property
    def scores(self) -> tuple[int, ...]:
        """Shape of the scores and of the weights: (..., L_q, L_k)."""
        return (*self.batch, self.L_q, self.L_k)

    def scores_may_overflow(self, scale: float, dtype: torch.dtype) -> bool:
        """Whether a score q·k · scale could leave ``dtype``'s range (then check them).

        |q·k| · scale ≤ ‖q‖ ‖k‖ · scale ≤ R_q · R_k · scale (Cauchy-Schwarz, with the
        row-norm bounds of :func:`check_finite`); a margin of 4 covers the rounding of the
        bounds and of the product. True when the inputs were not checked.
        """
        if self.row_norms is None:
            return True
        bound_q, bound_k, _ = self.row_norms
        return not scale * bound_q * bound_k < torch.finfo(dtype).max / 4


def check_qkv(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *, finite: bool = True
) -> QKVShapes:
    """Check query, key and value for attention and return their sizes.

    Args:
        query: (..., L_q, d_k), floating point.
        key: (..., L_k, d_k), same dtype as query.
        value: (..., L_k, d_v), same dtype as query.
            ``...`` is nothing, (B,) or (B, H), the same for all three.
        finite: also refuse NaN and ±inf (default True).

    Returns:
        QKVShapes with the batch dims, L_q, L_k, d_k, d_v and (when ``finite``) a bound on
        the norm of every row of each input (see :func:`check_finite`).

    Raises:
        TypeError: a tensor is not float32, float64, float16 or bfloat16, or the dtypes
            differ.
        ShapeError: a rank outside 2..4, ranks that differ, batch dims that differ,
            d_k of query and key that differ, L_k of key and value that differ,
            or an empty d_k or L_k.
        ValueError: tensors on different devices; on the meta device or holding NaN or
            inf (when ``finite``: shape_trace checks meta stand-ins with finite=False).
    """
    for name, t in (("query", query), ("key", key), ("value", value)):
        check_float_tensor(name, t)
    if not (query.dtype == key.dtype == value.dtype):
        raise TypeError(
            f"query, key and value must share one dtype, got {query.dtype}, {key.dtype} and "
            f"{value.dtype}. Convert them with .to(query.dtype)."
        )
    if (finite and query.device.type == "meta") or not query.device == key.device == value.device:
        for name, t in (("query", query), ("key", key), ("value", value)):
            check_device(name, t, query.device, "query")
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not 2 <= t.dim() <= 4:
            raise ShapeError(
                f"{name} has shape {fmt_shape(t.shape)} ({t.dim()}-D); attention takes "
                f"2-D (L, d), 3-D (B, L, d) or 4-D (B, H, L, d) tensors. "
                + (
                    f"For a single vector use {name}.unsqueeze(0) → (1, {t.shape[0]})."
                    if t.dim() == 1
                    else "Merge or split leading dims with reshape first."
                    if t.dim() > 4
                    else ""
                )
            )
    ranks = (query.dim(), key.dim(), value.dim())
    if len(set(ranks)) != 1:
        raise ShapeError(
            f"query, key and value must have the same rank, got query "
            f"{fmt_shape(query.shape)}, key {fmt_shape(key.shape)}, value "
            f"{fmt_shape(value.shape)}. attn_lib does not broadcast across ranks, because "
            f"broadcasting lines dims up from the right and can silently pair the wrong "
            f"axes; add the missing batch dim with unsqueeze(0)."
        )
    if query.shape[-1] != key.shape[-1]:
        raise ShapeError(
            f"d_k of query and key differ: query {fmt_shape(query.shape)} ends in "
            f"{query.shape[-1]}, key {fmt_shape(key.shape)} ends in {key.shape[-1]}. Scores are "
            f"dot products of a query row with a key row, so both need the same last dim; "
            f"check that W_Q and W_K map to the same d_k."
        )
    if key.shape[-2] != value.shape[-2]:
        raise ShapeError(
            f"key and value must have the same length L_k: key {fmt_shape(key.shape)} has "
            f"L_k = {key.shape[-2]}, value {fmt_shape(value.shape)} has {value.shape[-2]}. "
            f"Each key row labels the value row at the same position; both usually come "
            f"from the same sequence."
        )
    batch_q, batch_k, batch_v = query.shape[:-2], key.shape[:-2], value.shape[:-2]
    if not (batch_q == batch_k == batch_v):
        raise ShapeError(
            f"the leading (batch) dims must match: query {fmt_shape(query.shape)}, key "
            f"{fmt_shape(key.shape)}, value {fmt_shape(value.shape)} "
            f"(expected {_RANK_NAMES[query.dim()]} for all three, with the same B"
            f"{' and H' if query.dim() == 4 else ''}). attn_lib does not broadcast batch "
            f"dims; use .expand(...) if you mean to share keys across the batch."
        )
    if query.shape[-1] == 0:
        raise ShapeError(f"d_k is 0 (query {fmt_shape(query.shape)}): there is nothing to compare.")
    if key.shape[-2] == 0:
        raise ShapeError(
            f"L_k is 0 (key {fmt_shape(key.shape)}): every query needs at least one key."
        )
    row_norms = None
    if finite:
        row_norms = tuple(
            check_finite(name, t) for name, t in (("query", query), ("key", key), ("value", value))
        )
    return QKVShapes(
        batch=tuple(query.shape[:-2]),
        L_q=query.shape[-2],
        L_k=key.shape[-2],
        d_k=query.shape[-1],
        d_v=value.shape[-1],
        row_norms=row_norms,
    )


_CONVERTER_HINT = (
    "attn_lib masks are keep-masks (True or 1 = may attend, False or 0 = blocked). "
    "If this is an additive mask (0 where kept, -inf where blocked), pass `mask == 0`; "
    "if it is a 0./1. keep-mask stored as float, pass `mask.bool()`. "
    "attn_lib.masks.to_additive converts the other way."
)


def as_keep_mask(mask: object, name: str = "mask") -> torch.Tensor:
    """Return a keep-mask as bool, refusing float masks and integers other than 0/1.

    Args:
        mask: bool, or integer holding only 0 (blocked) and 1 (may attend); any shape.
        name: the argument's name, for the error message.

    Returns:
        A bool tensor of the same shape (the same object if already bool).

    Raises:
        TypeError: not a tensor.
        MaskError: a float or complex mask (ambiguous: PyTorch reads float masks as
            additive), integer values other than 0 and 1, or a mask on the meta device.
    """
    if not isinstance(mask, torch.Tensor):
        raise TypeError(
            f"{name} must be a torch.Tensor (bool, or integer 0/1), got {type(mask).__name__}."
        )
    check_device(name, mask, error=MaskError)
    if mask.dtype == torch.bool:
        return mask
    if mask.is_floating_point() or mask.is_complex():
        raise MaskError(
            f"{name} has dtype {mask.dtype}; a float mask is refused. {_CONVERTER_HINT}"
        )
    if mask.dtype in (torch.uint16, torch.uint32, torch.uint64):  # no aminmax for these
        mask = mask.to(torch.int64)
    lo, hi = torch.aminmax(mask) if mask.numel() else (0, 1)  # one pass, no full-size temporaries
    if int(lo) < 0 or int(hi) > 1:
        found = sorted(int(v) for v in mask.unique()[:6])
        raise MaskError(
            f"an integer {name} must hold only 0 (blocked) and 1 (may attend); found values "
            f"{found}. Build it with a comparison, e.g. mask = (ids != pad_id)."
        )
    return mask.to(torch.bool)


def _padding_hint(mask_shape: tuple[int, ...], scores: tuple[int, ...]) -> str:
    """A suggestion for a (B, L_k) padding mask that was not unsqueezed."""
    rank = len(scores)
    target = (mask_shape[0],) + (1,) * (rank - 2) + (mask_shape[1],)
    how = "mask.unsqueeze(1)" if rank == 3 else "mask[:, None, None, :]"
    return (
        f"If it is a padding mask of shape (batch, L_k), use {how} → {fmt_shape(target)}, "
        f"or attn_lib.padding_mask(lengths)."
    )


def check_mask(
    mask: object, scores_shape: Sequence[int], *, device: torch.device | None = None
) -> torch.Tensor:
    """Check a keep-mask against the scores it will mask; return it as bool.

    Args:
        mask: bool, or integer holding only 0 and 1; True/1 = may attend.
            A 2-D mask means (L_q, L_k). Any other mask has the scores' rank,
            each dim equal to the scores' dim or 1: (B, 1, L_k) padding,
            (1, L_q, L_k) shared, (B, L_q, L_k) per example, (B, 1, 1, L_k) or
            (B, H, L_q, L_k) with heads.
        scores_shape: (..., L_q, L_k), the shape of the scores.
        device: the scores' device (that of the query); the mask must be on it.

    Returns:
        The mask as a bool tensor (the same object when it is already bool).

    Raises:
        MaskError: a float or complex mask (PyTorch reads float masks as additive,
            so a float 0/1 mask is ambiguous); integer values other than 0/1; a
            rank other than 2 or the scores' rank; a dim that is neither the
            scores' nor 1; a mask that blocks every key for every query; a mask on
            the meta device or on another device than ``device``.
        TypeError: ``mask`` is not a tensor.
    """
    scores = tuple(int(d) for d in scores_shape)
    mask = as_keep_mask(mask)
    if device is not None:
        check_device("mask", mask, device, "scores", error=MaskError)
    rank, L_q, L_k = len(scores), scores[-2], scores[-1]
    shape = tuple(mask.shape)
    where = f"the scores have shape {fmt_shape(scores)} = (..., L_q, L_k)"
    if mask.dim() == 2:
        if all(m in (s, 1) for m, s in zip(shape, (L_q, L_k), strict=True)):
            pass
        else:
            msg = (
                f"mask has shape {fmt_shape(shape)}; a 2-D mask means (L_q, L_k) = "
                f"{fmt_shape((L_q, L_k))}, and {where}."
            )
            if rank >= 3 and shape == (scores[0], L_k):
                msg += " " + _padding_hint(shape, scores)
            raise MaskError(msg)
    elif mask.dim() != rank:
        if mask.dim() < rank and mask.dim() >= 1:
            if mask.dim() == 1:
                target = (1,) * (rank - 1) + (shape[0],)
                fix = (
                    f"A 1-D mask is ambiguous; give it the scores' rank, e.g. "
                    f"{fmt_shape(target)} for one key mask shared by every query."
                )
            else:
                target = (shape[0],) + (1,) * (rank - mask.dim()) + shape[1:]
                fix = (
                    f"Broadcasting would line it up from the right and could mask the wrong "
                    f"axis; give it the scores' rank: {fmt_shape(target)} "
                    f"(e.g. mask.unsqueeze(1))."
                )
        elif mask.dim() == 0:
            fix = (
                "A 0-D mask (a single True/False) does not say which keys to block; build "
                "one with the scores' shape, e.g. attn_lib.padding_mask or causal_mask."
            )
        else:
            fix = "Remove the extra dims (squeeze) or check which tensor was passed as mask."
        raise MaskError(
            f"mask has shape {fmt_shape(shape)} ({mask.dim()}-D) but {where} "
            f"({rank}-D); a mask is either 2-D (L_q, L_k) or has the scores' rank. {fix}"
        )
    else:
        bad = [i for i, (m, s) in enumerate(zip(shape, scores, strict=True)) if m not in (s, 1)]
        if bad:
            dims = ", ".join(f"dim {i}: {shape[i]} vs {scores[i]}" for i in bad)
            msg = (
                f"mask has shape {fmt_shape(shape)}, which does not fit the scores {fmt_shape(scores)} "
                f"({dims}); each mask dim must equal the scores' dim or be 1."
            )
            if rank == 3 and shape[0] == scores[0] and shape[-1] == L_k:
                msg += f" A padding mask has shape (B, 1, L_k) = {fmt_shape((scores[0], 1, L_k))}."
            raise MaskError(msg)
    if mask.numel() > 0 and not bool(mask.any()):
        raise MaskError(
            f"mask (shape {fmt_shape(shape)}) blocks every key for every query. This is almost "
            f"always an inverted mask (PyTorch's nn.MultiheadAttention uses True = blocked; "
            f"attn_lib uses True = may attend: pass ~mask) or an additive mask of zeros. "
            f"{_CONVERTER_HINT}"
        )
    return mask


def check_scale(scale: object) -> float:
    """Check a score multiplier and return it as a float.

    Raises:
        TypeError: ``scale`` is not a real number (bool and tensors included).
        ValueError: ``scale`` is not finite or not > 0.
    """
    if isinstance(scale, torch.Tensor):
        raise TypeError(
            "scale must be a Python number, got a tensor (its gradient would be lost); "
            "pass float(scale), or multiply the query by a learned scale yourself."
        )
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real):
        raise TypeError(f"scale must be a real number, got {type(scale).__name__}.")
    scale = float(scale)
    if not math.isfinite(scale) or scale <= 0:
        raise ValueError(
            f"scale must be a finite number > 0 (it multiplies the scores; the default is "
            f"1/sqrt(d_k), pass 1.0 for no scaling), got {scale}."
        )
    return scale


def check_dropout_p(p: object) -> float:
    """Check a dropout probability and return it as a float.

    Raises:
        TypeError: ``p`` is not a real number.
        ValueError: ``p`` is outside [0, 1) (p = 1 would drop every weight).
    """
    if isinstance(p, bool) or not isinstance(p, numbers.Real):
        raise TypeError(f"dropout_p must be a real number in [0, 1), got {type(p).__name__}.")
    p = float(p)
    if not 0.0 <= p < 1.0:
        raise ValueError(
            f"dropout_p must be in [0, 1), got {p}: it is the probability of zeroing a weight."
        )
    return p


@dataclass(frozen=True)
class ShapeStep:
    """One step of the attention computation and the shape it produces."""

    step: str
    expression: str
    shape: tuple[int, ...]

    def __str__(self) -> str:
        return f"{self.step:<10} {self.expression:<32} {fmt_shape(self.shape)}"


def _as_shape(t: torch.Tensor | Sequence[int], name: str) -> tuple[int, ...]:
    if isinstance(t, torch.Tensor):
        return tuple(t.shape)
    if isinstance(t, str) or not isinstance(t, Sequence):
        raise TypeError(f"{name} must be a tensor or a shape tuple, got {_short_repr(t)}.")
    return tuple(check_size(f"{name}[{i}]", d, 0, error=ShapeError) for i, d in enumerate(t))


def shape_trace(
    query: torch.Tensor | Sequence[int],
    key: torch.Tensor | Sequence[int],
    value: torch.Tensor | Sequence[int],
) -> list[ShapeStep]:
    """Trace the shapes through softmax(Q Kᵀ / √d_k) V without computing it.

    Args:
        query: a tensor or a shape (..., L_q, d_k).
        key: a tensor or a shape (..., L_k, d_k).
        value: a tensor or a shape (..., L_k, d_v).

    Returns:
        Steps: Kᵀ (..., d_k, L_k), scores (..., L_q, L_k), scaled scores,
        weights (..., L_q, L_k), output (..., L_q, d_v).

    Raises:
        ShapeError: the shapes do not fit, with the same messages as attention.

    Source: Vaswani et al. 2017, eq. (1); article section 2.3.
    """
    q, k, v = (_as_shape(t, n) for t, n in ((query, "query"), (key, "key"), (value, "value")))
    # Reuse the real checks on empty stand-ins of the right shape (no data).
    fakes = [torch.empty(s, device="meta") for s in (q, k, v)]
    check_qkv(*fakes, finite=False)
    batch, L_q, d_k = q[:-2], q[-2], q[-1]
    L_k, d_v = k[-2], v[-1]
    return [
        ShapeStep("Q", "query", q),
        ShapeStep("K", "key", k),
        ShapeStep("V", "value", v),
        ShapeStep("Kᵀ", "K.transpose(-2, -1)", (*batch, d_k, L_k)),
        ShapeStep("scores", "Q @ Kᵀ / sqrt(d_k)", (*batch, L_q, L_k)),
        ShapeStep("weights", "softmax(scores, dim=-1)", (*batch, L_q, L_k)),
        ShapeStep("output", "weights @ V", (*batch, L_q, d_v)),
    ]
