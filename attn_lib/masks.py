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
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Sequence

import torch

from .shapes import MaskError, ShapeError, as_keep_mask, fmt_shape

__all__ = [
    "as_keep_mask",
    "causal_mask",
    "combine_masks",
    "padding_mask",
    "to_additive",
    "to_key_padding_mask",
    "to_multihead_attn_mask",
    "to_sdpa_mask",
]


def _lengths_tensor(lengths: torch.Tensor | Sequence[int]) -> torch.Tensor:
    if not isinstance(lengths, torch.Tensor):
        if hasattr(lengths, "dtype"):  # a NumPy array of lengths
            lengths = torch.as_tensor(lengths)
        else:
            if not isinstance(lengths, Iterable):
                raise TypeError(
                    f"lengths must be a sequence (B,) of ints, one per sequence, got {lengths!r}; "
                    f"for one sequence write [{lengths!r}]."
                )
            values = list(lengths)
            if not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in values):
                raise TypeError(
                    f"lengths must hold ints (one length per sequence), got {lengths!r}."
                )
            lengths = torch.tensor([int(v) for v in values], dtype=torch.long)
    if lengths.is_floating_point() or lengths.dtype == torch.bool or lengths.is_complex():
        raise TypeError(f"lengths must hold integers, got dtype {lengths.dtype}.")
    t = lengths
    if t.dim() != 1:
        raise ShapeError(
            f"lengths must be 1-D (B,), one length per sequence, got shape {fmt_shape(t.shape)}."
        )
    if t.numel() == 0:
        raise ShapeError("lengths is empty: give one length per sequence in the batch.")
    if bool((t < 0).any()):
        raise ValueError(f"lengths must be ≥ 0, got {t.tolist()}.")
    return t


def padding_mask(lengths: torch.Tensor | Sequence[int], max_len: int | None = None) -> torch.Tensor:
    """Keep-mask for right-padded sequences: position j of sequence b is real iff j < lengths[b].

    Args:
        lengths: (B,) integers ≥ 0, the real length of each sequence.
        max_len: L_k, the padded length; default max(lengths).

    Returns:
        bool (B, 1, L_k): the 1 broadcasts over the query rows, so the mask blanks
        the padded *key columns* for every query (article section 4.1). For
        (B, H, L_q, L_k) scores use ``.unsqueeze(1)`` → (B, 1, 1, L_k).

    Raises:
        TypeError: lengths not integers.
        ShapeError: lengths not 1-D or empty.
        ValueError: a negative length, a length > max_len, or max_len < 0.

    Source: article section 4.1; Vaswani et al. 2017 (padding masks in the encoder).
    """
    t = _lengths_tensor(lengths)
    longest = int(t.max())
    if max_len is None:
        max_len = longest
    if isinstance(max_len, bool) or not isinstance(max_len, int):
        raise TypeError(f"max_len must be an int, got {type(max_len).__name__}.")
    if max_len < 0:
        raise ValueError(f"max_len must be ≥ 0, got {max_len}.")
    if longest > max_len:
        raise ValueError(
            f"a length exceeds max_len: lengths {t.tolist()} but max_len = {max_len}. "
            f"Raise max_len or truncate the sequences."
        )
    positions = torch.arange(max_len, device=t.device)  # (L_k,)
    return (positions < t[:, None]).unsqueeze(1)  # (B, 1, L_k)


def causal_mask(
    L_q: int, L_k: int | None = None, *, device: torch.device | str | None = None
) -> torch.Tensor:
    """Keep-mask that lets query i attend to keys 0..i only (no peeking at the future).

    Args:
        L_q: number of queries.
        L_k: number of keys (default L_q). When they differ the mask is aligned
            top-left, like ``is_causal=True`` in F.scaled_dot_product_attention.
        device: where to build it.

    Returns:
        bool (L_q, L_k), lower triangular: True on and below the diagonal.

    Raises:
        TypeError / ValueError: a length that is not an int ≥ 1.

    Source: Vaswani et al. 2017, sec. 3.2.3 (masking in the decoder); article section 4.1.
    """
    for name, n in (("L_q", L_q), ("L_k", L_k)):
        if n is None:
            continue
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError(f"{name} must be an int, got {type(n).__name__}.")
        if n < 1:
            raise ValueError(f"{name} must be ≥ 1, got {n}.")
    L_k = L_q if L_k is None else L_k
    return torch.ones(L_q, L_k, dtype=torch.bool, device=device).tril()


def combine_masks(*masks: torch.Tensor) -> torch.Tensor:
    """Combine keep-masks with logical and: a key is allowed only if every mask allows it.

    Masks are combined with ``&``, never by adding: two additive masks filled with
    ``finfo.min`` add up to -inf (and two -1e9 fills to -2e9), which breaks the
    dtype-safe fill.

    Args:
        *masks: keep-masks (bool or integer 0/1) whose shapes broadcast, e.g. a
            (B, 1, L) padding mask and an (L, L) causal mask → (B, L, L).

    Returns:
        bool, the broadcast shape.

    Raises:
        MaskError: no mask given, a float mask, or shapes that do not broadcast.
    """
    if not masks:
        raise MaskError("combine_masks needs at least one mask.")
    out = as_keep_mask(masks[0], "mask 0")
    for i, m in enumerate(masks[1:], start=1):
        m = as_keep_mask(m, f"mask {i}")
        try:
            out = out & m
        except RuntimeError as err:
            raise MaskError(
                f"masks of shapes {fmt_shape(out.shape)} and {fmt_shape(m.shape)} do not "
                f"broadcast together; give them the same rank, e.g. padding (B, 1, L) with "
                f"causal (1, L, L)."
            ) from err
    return out


def to_multihead_attn_mask(
    mask: torch.Tensor,
    *,
    L_q: int | None = None,
    L_k: int | None = None,
    num_heads: int = 1,
) -> torch.Tensor:
    """Convert a keep-mask to ``nn.MultiheadAttention``'s ``attn_mask`` (True = blocked).

    nn.MultiheadAttention takes an (L_q, L_k) mask shared by the batch, or a
    (B * num_heads, L_q, L_k) one; it does not broadcast size-1 dims. So a mask with a
    batch dim of 1 becomes 2-D, and size-1 query or key dims are expanded to ``L_q``
    and ``L_k``.

    Args:
        mask: keep-mask, (L_q, L_k), or 3-D (B or 1, L_q or 1, L_k or 1).
        L_q: the number of queries, needed when the mask's query dim is 1.
        L_k: the number of keys, needed when the mask's key dim is 1.
        num_heads: nn.MultiheadAttention's num_heads.

    Returns:
        bool (L_q, L_k) or (B * num_heads, L_q, L_k), True where attention is blocked.

    Raises:
        MaskError: a float mask, a rank other than 2 or 3, or a size-1 query/key dim
            without ``L_q`` / ``L_k``.

    Source: torch.nn.MultiheadAttention.forward docs (attn_mask).
    """
    keep = as_keep_mask(mask)
    if keep.dim() not in (2, 3):
        raise MaskError(
            f"nn.MultiheadAttention takes a 2-D (L_q, L_k) or 3-D (B * num_heads, L_q, L_k) "
            f"attn_mask; got a mask of shape {fmt_shape(keep.shape)}."
        )
    sizes = []
    for dim, (name, n) in zip((-2, -1), (("L_q", L_q), ("L_k", L_k)), strict=True):
        if keep.shape[dim] == 1 and n is not None:
            sizes.append(n)
        elif keep.shape[dim] == 1 and n is None and not (name == "L_q" and keep.dim() == 2):
            raise MaskError(
                f"mask has shape {fmt_shape(keep.shape)}; nn.MultiheadAttention does not "
                f"broadcast, so pass {name}=... to expand its size-1 dim (or use "
                f"to_key_padding_mask for a (B, 1, L_k) padding mask)."
            )
        else:
            sizes.append(keep.shape[dim])
    if keep.dim() == 3 and keep.shape[0] == 1:
        keep = keep[0]  # one mask for the whole batch: MHA's 2-D form
    keep = keep.expand(*keep.shape[:-2], *sizes)
    if keep.dim() == 2:
        return ~keep  # (L_q, L_k)
    return (~keep).repeat_interleave(num_heads, dim=0)  # (B * num_heads, L_q, L_k)


def to_key_padding_mask(mask: torch.Tensor) -> torch.Tensor:
    """Convert a (B, 1, L_k) padding keep-mask to ``key_padding_mask`` ((B, L_k), True = padding).

    Args:
        mask: keep-mask (B, 1, L_k), as made by :func:`padding_mask`.

    Returns:
        bool (B, L_k), True at padded keys.

    Raises:
        MaskError: a float mask, or a shape other than (B, 1, L_k) (a key padding
            mask is the same for every query, so it cannot express a causal mask).

    Source: torch.nn.MultiheadAttention.forward docs (key_padding_mask).
    """
    keep = as_keep_mask(mask)
    if keep.dim() != 3 or keep.shape[1] != 1:
        raise MaskError(
            f"a key padding mask is the same for every query, so it is made from a (B, 1, L_k) "
            f"keep-mask; got shape {fmt_shape(keep.shape)}. Use to_multihead_attn_mask for "
            f"masks that differ per query (causal)."
        )
    return ~keep[:, 0, :]


def to_sdpa_mask(mask: torch.Tensor) -> torch.Tensor:
    """Convert a keep-mask to the bool ``attn_mask`` of F.scaled_dot_product_attention.

    SDPA's bool convention is the keep convention (True = takes part), so this
    only checks the mask and makes it bool; its shape must broadcast to SDPA's
    (..., L_q, L_k).

    Returns:
        bool, same shape.

    Raises:
        MaskError: a float mask, or integer values other than 0/1.

    Source: torch.nn.functional.scaled_dot_product_attention docs (attn_mask).
    """
    return as_keep_mask(mask)


def to_additive(mask: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Convert a keep-mask to an additive float mask: 0 where kept, -inf where blocked.

    This is what SDPA and nn.MultiheadAttention expect of a float mask: it is
    added to the scores. SDPA returns zero rows where a whole row is -inf; a
    finite fill (e.g. -1e9) would instead give that row uniform weights, i.e.
    the mean of V.

    Args:
        mask: keep-mask, any shape.
        dtype: a floating dtype, that of the scores.

    Returns:
        ``dtype``, same shape as mask.

    Raises:
        MaskError: a float mask.
        TypeError: ``dtype`` is not floating point.
    """
    keep = as_keep_mask(mask)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating dtype, got {dtype}.")
    zeros = torch.zeros(keep.shape, dtype=dtype, device=keep.device)
    return zeros.masked_fill(~keep, float("-inf"))
