"""Keep-masks, and converters to the conventions of PyTorch's attention functions.

In attn_lib a mask is a *keep-mask*: True (or integer 1) means "may attend",
False (or 0) means "blocked", as in the article's ``masked_fill(mask == 0, ...)``
(section 3.2). PyTorch uses three conventions, converted to here:

================================  =====================================
function                          what True / a float means
================================  =====================================
attn_lib (the article)            True = may attend
nn.MultiheadAttention attn_mask   True = blocked (float: added)
nn.MultiheadAttention key_padding True = padding (blocked), (B, L_k)
F.scaled_dot_product_attention    True = takes part (float: added)
================================  =====================================

Used by notebooks 01 and 05-08 (padding and causal masks), 06 sections 5 and 7 (the
converters), 07 (combine_masks) and 10 (through keep_from_lengths).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

import torch

from .checks import (
    MaskError,
    ShapeError,
    as_int,
    as_keep_mask,
    check_device,
    check_float_dtype,
    check_size,
    fmt_shape,
)

__all__ = ["as_keep_mask", "causal_mask", "combine_masks", "padding_mask", "to_additive",
           "to_key_padding_mask", "to_multihead_attn_mask", "to_sdpa_mask"]  # fmt: skip


def _lengths_tensor(lengths: torch.Tensor | Sequence[int]) -> torch.Tensor:
    """Lengths as a 1-D integer tensor (B,) of values ≥ 0."""
    if hasattr(lengths, "dtype") and not isinstance(lengths, torch.Tensor):
        lengths = torch.as_tensor(lengths)  # a NumPy array
    if not isinstance(lengths, torch.Tensor):
        if not isinstance(lengths, Iterable):
            raise TypeError(
                f"lengths must be a sequence (B,) of ints, one per sequence, got {lengths!r}; "
                f"for one sequence write [{lengths!r}].")  # fmt: skip
        try:
            lengths = torch.tensor([as_int("lengths", v) for v in lengths], dtype=torch.long)
        except TypeError:
            raise TypeError(
                f"lengths must hold ints (one length per sequence), got {lengths!r}.") from None  # fmt: skip
    if lengths.is_floating_point() or lengths.dtype == torch.bool or lengths.is_complex():
        raise TypeError(f"lengths must hold integers, got dtype {lengths.dtype}.")
    check_device("lengths", lengths)
    if lengths.dim() != 1:
        raise ShapeError(
            f"lengths must be 1-D (B,), one length per sequence, got shape "
            f"{fmt_shape(lengths.shape)}.")  # fmt: skip
    if lengths.numel() == 0:
        raise ShapeError("lengths is empty: give one length per sequence in the batch.")
    if bool((lengths < 0).any()):
        raise ValueError(f"lengths must be ≥ 0, got {lengths.tolist()}.")
    return lengths


def padding_mask(lengths: torch.Tensor | Sequence[int], max_len: int | None = None) -> torch.Tensor:
    """Keep-mask for right-padded sequences: key j of sequence b is real iff j < lengths[b].

    Args:
        lengths: (B,) integers ≥ 0, the real length of each sequence.
        max_len: L_k, the padded length; default max(lengths).

    Returns:
        bool (B, 1, L_k): the 1 broadcasts over the queries, so the padded key columns are
        blocked for every query. For (B, H, L_q, L_k) scores use ``.unsqueeze(1)``.

    Raises:
        TypeError: lengths or max_len not integers.
        ShapeError: lengths not 1-D, or empty.
        ValueError: a negative length, a length > max_len, lengths on the meta device.

    Source: article section 4.1.
    """
    lengths = _lengths_tensor(lengths)
    longest = int(lengths.max())
    max_len = longest if max_len is None else check_size("max_len", max_len, 0)
    if longest > max_len:
        raise ValueError(
            f"a length exceeds max_len: lengths {lengths.tolist()} but max_len = {max_len}. "
            f"Raise max_len or truncate the sequences.")  # fmt: skip
    positions = torch.arange(max_len, device=lengths.device)  # (L_k,)
    return (positions < lengths[:, None]).unsqueeze(1)  # (B, 1, L_k)


def causal_mask(L_q: int, L_k: int | None = None, *,
                align: Literal["top_left", "bottom_right"] = "top_left",
                device: torch.device | str | None = None) -> torch.Tensor:  # fmt: skip
    """Keep-mask that lets each query attend to its own and earlier positions only.

    The two alignments differ only when L_q ≠ L_k. "top_left" (default): query i sees keys
    0..i, like SDPA's ``is_causal=True``. "bottom_right": the queries are the last L_q
    positions, so query i sees keys 0..i + L_k - L_q, the mask for decoding with cached keys
    (L_q < L_k); when L_q > L_k the first L_q - L_k queries see no key (zero output).

    Args:
        L_q: number of queries.
        L_k: number of keys (default L_q).
        align: "top_left" or "bottom_right", where the diagonal starts.
        device: where to build it.

    Returns:
        bool (L_q, L_k), True on and below the diagonal.

    Raises:
        TypeError: a length that is not an int.
        ValueError: a length < 1, or an unknown ``align``.

    Source: Vaswani et al. 2017, sec. 3.2.3; torch.nn.attention.bias (causal_upper_left,
        causal_lower_right).
    """
    L_q = check_size("L_q", L_q)
    L_k = L_q if L_k is None else check_size("L_k", L_k)
    if align not in ("top_left", "bottom_right"):
        raise ValueError(
            f"align must be 'top_left' (query i sees keys 0..i, as SDPA's is_causal) or "
            f"'bottom_right' (the last query sees every key, for decoding; PyTorch's "
            f"causal_lower_right), got {align!r}.")  # fmt: skip
    diagonal = 0 if align == "top_left" else L_k - L_q
    return torch.ones(L_q, L_k, dtype=torch.bool, device=device).tril(diagonal)


def combine_masks(*masks: torch.Tensor) -> torch.Tensor:
    """Combine keep-masks with ``&``: a key is allowed only where every mask allows it.

    Args:
        *masks: keep-masks whose shapes broadcast, e.g. (B, 1, L) padding and (L, L) causal.

    Returns:
        bool, the broadcast shape, e.g. (B, L, L).

    Raises:
        MaskError: no mask, a float mask, shapes that do not broadcast, different devices.
    """
    if not masks:
        raise MaskError("combine_masks needs at least one mask.")
    out = as_keep_mask(masks[0], "mask 0")
    for i, m in enumerate(masks[1:], start=1):
        m = as_keep_mask(m, f"mask {i}")
        check_device(f"mask {i}", m, out.device, "mask 0", error=MaskError)
        try:
            out = out & m
        except RuntimeError as err:
            raise MaskError(
                f"masks of shapes {fmt_shape(out.shape)} and {fmt_shape(m.shape)} do not "
                f"broadcast together; give them the same rank, e.g. padding (B, 1, L) with "
                f"causal (1, L, L).") from err  # fmt: skip
    return out


def to_multihead_attn_mask(mask: torch.Tensor, *, L_q: int | None = None, L_k: int | None = None,
                           num_heads: int = 1) -> torch.Tensor:  # fmt: skip
    """Convert a keep-mask to ``nn.MultiheadAttention``'s ``attn_mask`` (True = blocked).

    MHA takes (L_q, L_k) or (B * num_heads, L_q, L_k) and does not broadcast, so a batch dim of
    1 is dropped and size-1 dims are expanded to ``L_q`` / ``L_k`` when given. A (…, 1, L_k)
    mask without ``L_q`` is refused: it is usually a padding mask meant for every query.

    Args:
        mask: keep-mask (L_q or 1, L_k or 1), or (B or 1, L_q or 1, L_k or 1).
        L_q, L_k: the scores' sizes, to expand size-1 dims.
        num_heads: MHA's num_heads.

    Returns:
        bool (L_q, L_k) or (B * num_heads, L_q, L_k), True where attention is blocked.

    Raises:
        MaskError: a float mask, a rank other than 2 or 3, (…, 1, L_k) without ``L_q``, a dim
            that is neither 1 nor the given size.
        TypeError / ValueError: ``L_q``, ``L_k`` or ``num_heads`` not an int ≥ 1.

    Source: torch.nn.MultiheadAttention.forward docs (attn_mask).
    """
    keep = as_keep_mask(mask)
    num_heads = check_size("num_heads", num_heads)
    if keep.dim() not in (2, 3):
        raise MaskError(
            f"nn.MultiheadAttention takes a 2-D (L_q, L_k) or 3-D (B * num_heads, L_q, L_k) "
            f"attn_mask; got a mask of shape {fmt_shape(keep.shape)}.")  # fmt: skip
    rows, cols = keep.shape[-2:]
    if L_q is None and rows == 1 and cols > 1:
        raise MaskError(
            f"mask has shape {fmt_shape(keep.shape)}: one row for {cols} keys, which "
            f"usually stands for every query. nn.MultiheadAttention does not broadcast, "
            f"so pass L_q=... to expand it (L_q=1 if there is one query), or use "
            f"to_key_padding_mask for a (B, 1, L_k) padding mask.")  # fmt: skip
    sizes = []
    for name, m, n in (("L_q", rows, L_q), ("L_k", cols, L_k)):
        n = m if n is None else check_size(name, n)
        if m not in (1, n):
            raise MaskError(
                f"mask has shape {fmt_shape(keep.shape)}, whose {name} dim {m} is "
                f"neither 1 nor {name}={n}; pass the sizes of the scores.")  # fmt: skip
        sizes.append(n)
    if keep.dim() == 3 and keep.shape[0] == 1:
        keep = keep[0]  # one mask for the whole batch: MHA's 2-D form
    blocked = ~keep.expand(*keep.shape[:-2], *sizes)
    if blocked.dim() == 2:
        return blocked  # (L_q, L_k)
    return blocked.repeat_interleave(num_heads, dim=0)  # (B * num_heads, L_q, L_k)


def to_key_padding_mask(mask: torch.Tensor, *, B: int | None = None) -> torch.Tensor:
    """Convert a (B, 1, L_k) padding keep-mask to ``key_padding_mask`` ((B, L_k), True = padding).

    Args:
        mask: keep-mask (B, 1, L_k), as :func:`padding_mask` makes, or (1, 1, L_k).
        B: the batch size, to expand a batch dim of 1 (MHA does not broadcast it).

    Returns:
        bool (B, L_k), True at padded keys.

    Raises:
        MaskError: a float mask, a shape other than (B, 1, L_k) (a key padding mask is the
            same for every query: no causal mask), a batch dim neither 1 nor ``B``.
        TypeError / ValueError: ``B`` not an int ≥ 1.

    Source: torch.nn.MultiheadAttention.forward docs (key_padding_mask).
    """
    keep = as_keep_mask(mask)
    if keep.dim() != 3 or keep.shape[1] != 1:
        hint = (
            f" If it is a (B, L_k) padding keep-mask, pass mask.unsqueeze(1) → "
            f"{fmt_shape((keep.shape[0], 1, keep.shape[1]))}."
            if keep.dim() == 2
            else "")  # fmt: skip
        raise MaskError(
            f"a key padding mask is the same for every query, so it is made from a (B, 1, L_k) "
            f"keep-mask; got shape {fmt_shape(keep.shape)}. Use to_multihead_attn_mask for "
            f"masks that differ per query (causal).{hint}")  # fmt: skip
    if B is not None:
        B = check_size("B", B)
        if keep.shape[0] not in (1, B):
            raise MaskError(
                f"mask has shape {fmt_shape(keep.shape)}, whose batch dim "
                f"{keep.shape[0]} is neither 1 nor B={B}.")  # fmt: skip
        keep = keep.expand(B, 1, keep.shape[-1])
    return ~keep[:, 0, :]


def to_sdpa_mask(mask: torch.Tensor) -> torch.Tensor:
    """Convert a keep-mask to SDPA's bool ``attn_mask``: the same convention, checked, as bool.

    Raises:
        MaskError: a float mask, or integers other than 0/1.

    Source: torch.nn.functional.scaled_dot_product_attention docs (attn_mask).
    """
    return as_keep_mask(mask)


def to_additive(mask: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Convert a keep-mask to an additive float mask: 0 where kept, -inf where blocked.

    SDPA and nn.MultiheadAttention add a float mask to the scores; SDPA gives a zero row
    where a whole row is -inf (a finite fill such as -1e9 would give the mean of V).

    Args:
        mask: keep-mask, any shape.
        dtype: the scores' dtype, float32, float64, float16 or bfloat16.

    Returns:
        ``dtype``, the mask's shape.

    Raises:
        MaskError: a float mask.
        TypeError: another ``dtype`` (float8 has no -inf).

    Source: torch.nn.functional.scaled_dot_product_attention docs (attn_mask).
    """
    keep = as_keep_mask(mask)
    check_float_dtype("dtype", dtype)
    zeros = torch.zeros(keep.shape, dtype=dtype, device=keep.device)
    return zeros.masked_fill(~keep, float("-inf"))
