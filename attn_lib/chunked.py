"""Chunked attention with an online softmax: attention's output without the L_q × L_k matrix.

Keys are taken one block at a time. Each query row keeps the running maximum m of its
scores, the running sum l of exp(score - m) and the running output acc = Σ exp(score - m) · v;
when a block raises the maximum, l and acc are rescaled by exp(m_old - m_new). The output is
acc / l. Only (..., L_q, block) scores exist at a time; the work is the same as the full path's.

Used by notebook 10, sections 4 (the online softmax) and 5 (what chunking saves).

Source: Milakov & Gimelshein 2018, "Online normalizer calculation for softmax"; Rabe &
Staats 2021, "Self-attention does not need O(n²) memory"; Dao et al. 2022, "FlashAttention".
"""

from __future__ import annotations

import math

import torch

from .attention import compute_dtype
from .checks import check_attention, check_scores_finite, check_size

__all__ = ["DEFAULT_BLOCK_SIZE", "chunked_attention", "online_softmax_step"]

# At L = 8192, d_k = 64 the block's scores and the running state are 4 % of one L × L matrix.
DEFAULT_BLOCK_SIZE = 128


def online_softmax_step(m: torch.Tensor, l: torch.Tensor, acc: torch.Tensor, scores: torch.Tensor,
                        v_block: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
    """One key block of the online softmax: the running max, sum and output after it.

    Args:
        m: (..., n_q, 1) the running max of the scores, -inf before any allowed key.
        l: (..., n_q, 1) the running sum of exp(score - m).
        acc: (..., n_q, d_v) the running sum of exp(score - m) · v; updated in place.
        scores: (..., n_q, n_k) this block's scaled scores, -inf where blocked; overwritten.
        v_block: (..., n_k, d_v) this block's value rows.

    Returns:
        m, l, acc after the block.
    """
    m_new = torch.maximum(m, scores.amax(dim=-1, keepdim=True))  # (..., n_q, 1)
    # A row with no allowed key yet has m_new = -inf, and -inf - (-inf) is NaN: subtract 0 there.
    m_ref = m_new.masked_fill(m_new == -math.inf, 0.0)  # (..., n_q, 1)
    rescale = torch.exp(m - m_ref)  # (..., n_q, 1): exp(m_old - m_new), 0 while m_old = -inf
    p = scores.sub_(m_ref).exp_()  # (..., n_q, n_k); in place: no second block of scores
    l = rescale * l + p.sum(dim=-1, keepdim=True)  # (..., n_q, 1)
    acc = acc.mul_(rescale).add_(p @ v_block)  # (..., n_q, d_v); in place: no second accumulator
    return m_new, l, acc


def _check_inputs(query, key, value, mask, scale, block_size, query_block_size):
    """All of chunked_attention's checks; returns the sizes (QKVShapes), the keep-mask as bool
    (or None), the scale, and the keys and queries per block."""
    shapes, keep, scale = check_attention(query, key, value, mask, scale)
    n_k = check_size("block_size", block_size)
    n_q = (
        shapes.L_q if query_block_size is None else check_size("query_block_size", query_block_size)
    )
    if torch.is_grad_enabled() and any(t.requires_grad for t in (query, key, value)):
        raise RuntimeError(
            "chunked_attention computes the output only, without gradients: it overwrites "
            "each block of scores in place so that one block is held at a time, and autograd "
            "would need every block kept. Call it under torch.no_grad() (or on tensors that "
            "do not require grad), or use attn_lib.scaled_dot_product_attention for training.")  # fmt: skip
    return shapes, keep, scale, n_k, max(n_q, 1)


def chunked_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    scale: float | None = None,
    block_size: int = DEFAULT_BLOCK_SIZE,
    query_block_size: int | None = None,
) -> torch.Tensor:
    """softmax(Q Kᵀ · scale) V, one block of keys at a time, without the weights.

    The output of ``attn_lib.scaled_dot_product_attention(query, key, value, mask,
    scale=scale)[0]``, zero rows for queries with no allowed key included, holding only
    (..., n_q, block_size) scores at a time. Forward only: no gradients.

    Args:
        query, key, value, mask, scale: as :func:`attn_lib.scaled_dot_product_attention`.
        block_size: keys per block.
        query_block_size: queries per block; default all L_q at once.

    Returns:
        output (..., L_q, d_v), query's dtype (float16 and bfloat16 are computed in float32).

    Raises:
        TypeError, ShapeError, MaskError, ValueError: as scaled_dot_product_attention, and
            for a block size that is not an int ≥ 1.
        RuntimeError: an input requires grad while grad mode is on.

    Source: Milakov & Gimelshein 2018; Rabe & Staats 2021; Dao et al. 2022.
    """
    shapes, keep, scale, n_k, n_q = _check_inputs(
        query, key, value, mask, scale, block_size, query_block_size)  # fmt: skip
    dtype = compute_dtype(query.dtype)
    may_overflow = shapes.scores_may_overflow(scale, dtype)  # as scaled_dot_product_attention
    batch, d_v = shapes.batch, shapes.d_v
    output = torch.empty((*batch, shapes.L_q, d_v), dtype=query.dtype, device=query.device)

    for q0 in range(0, shapes.L_q, n_q):
        q = query[..., q0 : q0 + n_q, :].to(dtype) * scale  # (..., n_q, d_k)
        rows = q.shape[-2]
        m = torch.full((*batch, rows, 1), -math.inf, dtype=dtype, device=query.device)
        l = torch.zeros((*batch, rows, 1), dtype=dtype, device=query.device)
        acc = torch.zeros((*batch, rows, d_v), dtype=dtype, device=query.device)
        for k0 in range(0, shapes.L_k, n_k):
            k_blk = key[..., k0 : k0 + n_k, :].to(dtype)  # (..., n_k, d_k)
            v_blk = value[..., k0 : k0 + n_k, :].to(dtype)  # (..., n_k, d_v)
            scores = q @ k_blk.transpose(-2, -1)  # (..., n_q, n_k)
            if may_overflow:
                check_scores_finite(scores)
            if keep is not None:  # a mask dim of size 1 broadcasts: keep it whole
                block = keep[..., q0 : q0 + n_q, :] if keep.shape[-2] > 1 else keep
                block = block[..., k0 : k0 + n_k] if keep.shape[-1] > 1 else block
                scores.masked_fill_(~block, -math.inf)
            m, l, acc = online_softmax_step(m, l, acc, scores, v_blk)
            del scores  # frees this block before the next one is made: one block held, not two
        has_key = m > -math.inf  # (..., n_q, 1): m is -inf only for rows with no allowed key
        output[..., q0 : q0 + n_q, :] = acc / l.masked_fill(~has_key, 1.0)  # acc is 0 there
    return output
