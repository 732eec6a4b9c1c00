"""Chunked attention with an online softmax: attention's output without the L_q × L_k matrix.

Keys are processed one block at a time, keeping per query row the running maximum of the
scores, the running softmax denominator and the running weighted sum of value rows; each new
block rescales the last two to its new maximum. Only (..., L_q, block) scores exist at any
time, so memory does not grow with L_k; the work (FLOPs) is the same as the full path's.
A row with no allowed key gives a zero output, as in ``scaled_dot_product_attention``.
The recurrence and its two NaN guards are derived in notebook 10, section 4.

Source: Milakov & Gimelshein 2018, "Online normalizer calculation for softmax"; Rabe &
Staats 2021, "Self-attention does not need O(n²) memory"; Dao et al. 2022, "FlashAttention".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .shapes import (
    as_int,
    check_float_dtype,
    check_mask,
    check_qkv,
    check_scale,
    check_scores_finite,
    check_size,
)

__all__ = [
    "BlockState",
    "chunked_attention",
    "chunked_attention_trace",
    "peak_intermediate_bytes",
]

_NEG_INF = float("-inf")

# 128 keys: at L = 8192, d_k = 64 (float32) the chunked path then holds 10.3 MiB, 4.0 % of a
# single L × L matrix (2.0 % of the naive path's scores and weights), at 1.1-1.3x the time
# of the fastest block size measured on a 2-core CPU (512: 8.7 % of one L × L) and 0.3-0.4x
# F.scaled_dot_product_attention's time; tools/benchmark.py (P4) prints both figures.
DEFAULT_BLOCK_SIZE = 128


def _accumulation_dtype(dtype: torch.dtype) -> torch.dtype:
    """float32 for float16/bfloat16 (their running sums would lose digits), else the dtype."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _mask_block(keep: torch.Tensor, q0: int, q1: int, k0: int, k1: int) -> torch.Tensor:
    """The part of a keep-mask that covers queries q0:q1 and keys k0:k1 (a view).

    A mask dim of size 1 broadcasts (a (B, 1, L_k) padding mask is the same for every
    query), so it is kept whole instead of sliced.
    """
    rows = slice(q0, q1) if keep.shape[-2] > 1 else slice(None)
    cols = slice(k0, k1) if keep.shape[-1] > 1 else slice(None)
    return keep[..., rows, cols]


def _online_softmax_step(
    m: torch.Tensor, l: torch.Tensor, acc: torch.Tensor, scores: torch.Tensor, v_blk: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One key block of the recurrence; returns (m, l, acc, block max, rescale, p).

    ``scores`` is (..., n_q, n_k) with -inf at blocked keys; it is overwritten by p,
    and ``acc`` is updated in place (both to hold one block and one accumulator only).
    """
    m_blk = scores.amax(dim=-1, keepdim=True)  # (..., n_q, 1), -inf if the block is all blocked
    m_new = torch.maximum(m, m_blk)  # (..., n_q, 1)
    # Guard: a row with no allowed key so far has m_new = -inf, and -inf - (-inf) is NaN.
    # Subtracting 0 there is safe: its scores are all -inf, so the exps below are 0.
    m_ref = m_new.masked_fill(m_new == _NEG_INF, 0.0)  # (..., n_q, 1)
    rescale = torch.exp(m - m_ref)  # (..., n_q, 1): exp(m_old - m_new); 0 while m_old = -inf
    p = scores.sub_(m_ref).exp_()  # (..., n_q, n_k); in place: reuses the scores' memory
    l = rescale * l + p.sum(dim=-1, keepdim=True)  # (..., n_q, 1)
    acc = acc.mul_(rescale).add_(p @ v_blk)  # (..., n_q, d_v); in place: no second copy of acc
    return m_new, l, acc, m_blk, rescale, p


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
    """softmax(Q Kᵀ · scale) V, walking over key blocks with an online softmax.

    Same output as ``attn_lib.scaled_dot_product_attention(query, key, value, mask,
    scale=scale)[0]``, masks and fully masked rows (zero output) included, but the
    (..., L_q, L_k) scores and weights are never held: only (..., n_q, block_size)
    scores for one block at a time, plus the running state m, l, acc (see the module
    docstring for the recurrence and its sources). No fused PyTorch attention kernel
    is called. Chunking saves memory, not FLOPs: the work is the same.

    Args:
        query: (..., L_q, d_k), floating point; ``...`` is nothing, (B,) or (B, H).
        key: (..., L_k, d_k), same dtype and leading dims.
        value: (..., L_k, d_v), same dtype and leading dims.
        mask: keep-mask as in ``scaled_dot_product_attention``: True (or 1) = may
            attend; 2-D means (L_q, L_k), otherwise the scores' rank with each dim
            equal to the scores' or 1, e.g. (B, 1, L_k) padding.
        scale: multiplier of the scores; default 1/√d_k with d_k = query.size(-1).
        block_size: number of keys per block (an int ≥ 1; larger than L_k means one
            block). The default, 128, keeps the block's scores small next to an L × L
            matrix from a few thousand keys on, at nearly the speed of larger blocks
            (timed on CPU by tools/benchmark.py, P4).
        query_block_size: number of queries per block (an int ≥ 1), or None (default)
            for all L_q queries at once. Smaller query blocks shrink the per-block
            scores further, to (..., query_block_size, block_size).

    Returns:
        output: (..., L_q, d_v), query's dtype. The weights are not returned: not
        holding them is the point.

    Precision: float32 and float64 inputs are accumulated in their own dtype; float16
    and bfloat16 inputs are computed and accumulated in float32 (a block at a time) and
    the output is cast back at the end.

    Gradients: none. This is the forward pass only (FlashAttention recomputes the blocks
    in its backward pass instead of storing them; that is not done here).

    Raises:
        TypeError, ShapeError, MaskError, ValueError: exactly as
            ``scaled_dot_product_attention`` for the same inputs; and TypeError /
            ValueError for a block size that is not an int ≥ 1.
        RuntimeError: an input requires grad while grad mode is on (see Gradients).

    Source: Milakov & Gimelshein 2018; Rabe & Staats 2021; Dao et al. 2022.
    """
    shapes = check_qkv(query, key, value)
    scale = 1.0 / math.sqrt(shapes.d_k) if scale is None else check_scale(scale)
    block_size = check_size("block_size", block_size)
    if query_block_size is not None:
        query_block_size = check_size("query_block_size", query_block_size)
    keep = None if mask is None else check_mask(mask, shapes.scores, device=query.device)
    if torch.is_grad_enabled() and any(t.requires_grad for t in (query, key, value)):
        raise RuntimeError(
            "chunked_attention computes the output only, without gradients: it overwrites "
            "each block of scores in place so that one block is held at a time, and autograd "
            "would need every block kept. Call it under torch.no_grad() (or on tensors that "
            "do not require grad), or use attn_lib.scaled_dot_product_attention for training."
        )

    batch, L_q, L_k, d_v = shapes.batch, shapes.L_q, shapes.L_k, shapes.d_v
    q_step = max(L_q, 1) if query_block_size is None else query_block_size
    dtype = _accumulation_dtype(query.dtype)
    # As in scaled_dot_product_attention: each block's scores are read again only when they
    # could have overflowed (they would turn into NaN here).
    may_overflow = shapes.scores_may_overflow(scale, dtype)
    device = query.device
    output = torch.empty((*batch, L_q, d_v), dtype=query.dtype, device=device)  # (..., L_q, d_v)

    for q0 in range(0, L_q, q_step):
        q1 = min(q0 + q_step, L_q)
        n_q = q1 - q0
        q = query[..., q0:q1, :].to(dtype) * scale  # (..., n_q, d_k)
        m = torch.full((*batch, n_q, 1), _NEG_INF, dtype=dtype, device=device)  # running max
        l = torch.zeros((*batch, n_q, 1), dtype=dtype, device=device)  # running sum
        acc = torch.zeros((*batch, n_q, d_v), dtype=dtype, device=device)  # running output

        for k0 in range(0, L_k, block_size):
            k1 = min(k0 + block_size, L_k)
            k_blk = key[..., k0:k1, :].to(dtype)  # (..., n_k, d_k); no copy if same dtype
            v_blk = value[..., k0:k1, :].to(dtype)  # (..., n_k, d_v)
            scores = q @ k_blk.transpose(-2, -1)  # (..., n_q, n_k)
            if may_overflow:
                check_scores_finite(scores)
            if keep is not None:
                scores.masked_fill_(~_mask_block(keep, q0, q1, k0, k1), _NEG_INF)
            m, l, acc = _online_softmax_step(m, l, acc, scores, v_blk)[:3]
            # Drop this block's scores now: otherwise they are still alive (under the name
            # `scores`) while the next block's scores are made, and two blocks are held.
            del scores

        # m is still -inf exactly for the rows that had no allowed key: zero output there.
        has_key = m > _NEG_INF  # (..., n_q, 1)
        output[..., q0:q1, :] = acc / l.masked_fill(~has_key, 1.0)  # acc is 0 on those rows
    return output


@dataclass(frozen=True)
class BlockState:
    """The state of one query row after one key block of the online softmax.

    Attributes:
        block: index of the key block (0, 1, …).
        start, stop: the block covers keys start..stop-1.
        scores: (n_k,) the row's scaled scores in this block, -inf at blocked keys.
        block_max: max of ``scores`` (-inf if the whole block is blocked).
        m_old, m: running max before and after this block.
        rescale: exp(m_old - m), the factor applied to l and acc (0 while m_old = -inf).
        p: (n_k,) exp(scores - m), this block's unnormalised weights (0 where blocked).
        l: running sum of the unnormalised weights after this block.
        acc: (d_v,) running unnormalised output after this block.
        output: (d_v,) acc / l, the output if the keys stopped here (zeros while l = 0).
    """

    block: int
    start: int
    stop: int
    scores: torch.Tensor
    block_max: float
    m_old: float
    m: float
    rescale: float
    p: torch.Tensor
    l: float
    acc: torch.Tensor
    output: torch.Tensor


def chunked_attention_trace(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    scale: float | None = None,
    block_size: int = DEFAULT_BLOCK_SIZE,
    row: int = 0,
) -> list[BlockState]:
    """The online softmax of one query row, one :class:`BlockState` per key block.

    Runs the same recurrence as :func:`chunked_attention` (the same step function) for
    query row ``row`` of the first batch element (index 0 of every leading dim), and
    records the state after each key block, for notebook 10 to step through. The last
    state's ``output`` equals ``chunked_attention(...)`` at that row.

    Args:
        query, key, value, mask, scale, block_size: as :func:`chunked_attention`.
        row: the query row to follow, 0 ≤ row < L_q (negative counts from the end).

    Returns:
        list of BlockState, one per key block, in order. Numbers are Python floats,
        vectors are tensors in the accumulation dtype (float32 for float16/bfloat16).

    Raises:
        as :func:`chunked_attention` (except that inputs requiring grad are fine: the
        trace runs under torch.no_grad()); TypeError / IndexError for a bad ``row``.
    """
    shapes = check_qkv(query, key, value)
    scale = 1.0 / math.sqrt(shapes.d_k) if scale is None else check_scale(scale)
    block_size = check_size("block_size", block_size)
    keep = None if mask is None else check_mask(mask, shapes.scores, device=query.device)
    row = as_int("row", row)
    if not -shapes.L_q <= row < shapes.L_q:
        raise IndexError(f"row {row} is out of range for L_q = {shapes.L_q} queries.")
    row %= shapes.L_q

    with torch.no_grad():  # a trace is for looking at, not for training
        return _trace_row(query, key, value, keep, scale, block_size, row, shapes.d_v)


def _trace_row(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    keep: torch.Tensor | None,
    scale: float,
    block_size: int,
    row: int,
    d_v: int,
) -> list[BlockState]:
    """The body of chunked_attention_trace, on checked inputs."""
    L_k = key.shape[-2]
    first = (0,) * (query.dim() - 2)  # index of the first batch element
    dtype = _accumulation_dtype(query.dtype)
    q = query[first][row : row + 1].to(dtype) * scale  # (1, d_k)
    keys, values = key[first].to(dtype), value[first].to(dtype)  # (L_k, d_k), (L_k, d_v)
    if keep is not None:
        keep = keep[(0,) * (keep.dim() - 2)]  # (L_q or 1, L_k or 1), first batch element

    m = torch.full((1, 1), _NEG_INF, dtype=dtype, device=query.device)
    l = torch.zeros((1, 1), dtype=dtype, device=query.device)
    acc = torch.zeros((1, d_v), dtype=dtype, device=query.device)
    states = []
    for j, k0 in enumerate(range(0, L_k, block_size)):
        k1 = min(k0 + block_size, L_k)
        scores = q @ keys[k0:k1].T  # (1, n_k)
        if keep is not None:
            scores.masked_fill_(~_mask_block(keep, row, row + 1, k0, k1), _NEG_INF)
        m_old = m
        shown = scores.clone()  # the step overwrites scores with p
        m, l, acc, m_blk, rescale, p = _online_softmax_step(m, l, acc, scores, values[k0:k1])
        has_key = bool(m > _NEG_INF)
        states.append(
            BlockState(
                block=j,
                start=k0,
                stop=k1,
                scores=shown[0],
                block_max=float(m_blk),
                m_old=float(m_old),
                m=float(m),
                rescale=float(rescale),
                p=p[0].clone(),
                l=float(l),
                acc=acc[0].clone(),
                output=acc[0] / l[0] if has_key else torch.zeros_like(acc[0]),
            )
        )
    return states


def peak_intermediate_bytes(
    L_q: int,
    L_k: int,
    d_k: int,
    d_v: int,
    *,
    block_size: int = DEFAULT_BLOCK_SIZE,
    query_block_size: int | None = None,
    batch: tuple[int, ...] = (),
    dtype: torch.dtype = torch.float32,
    method: str = "chunked",
) -> int:
    """Bytes of the intermediates each method holds at once, computed from tensor sizes.

    Inputs and the output are not counted (both methods need them); masks are not
    counted either (a mask is an input; its blocks are views or bool copies of at most
    one block).

    * ``"naive"`` (the article's code, and ``scaled_dot_product_attention`` with autograd
      on): the scores and the weights, both (..., L_q, L_k), in the input dtype:
      2 · L_q · L_k numbers per batch slice. (Without autograd ``scaled_dot_product_attention``
      writes the weights over the scores and holds half of this.)
    * ``"chunked"`` (:func:`chunked_attention`), with n_q = query_block_size or L_q and
      n_k = min(block_size, L_k), in the accumulation dtype (float32 for float16 and
      bfloat16): the block's scores (overwritten in place by their exponentials),
      n_q · n_k; the scaled query block, n_q · d_k; the accumulator and the block's
      contribution p · V, 2 · n_q · d_v; the running max and sum and the per-row
      helpers (block max, rescale factor, …), 8 · n_q; a copy of the key block that
      the matmul may make, n_k · d_k; and for float16/bfloat16 the float32 copies of
      the key and value blocks, n_k · (d_k + d_v).
      None of it depends on L_k once L_k ≥ block_size.

    Args:
        L_q, L_k, d_k, d_v: sizes (ints ≥ 1).
        block_size, query_block_size: as :func:`chunked_attention`.
        batch: the leading dims, e.g. (B,) or (B, H).
        dtype: the inputs' dtype.
        method: "chunked" or "naive".

    Returns:
        bytes, an int.
    """
    L_q, L_k, d_k, d_v = (
        check_size(name, n) for name, n in (("L_q", L_q), ("L_k", L_k), ("d_k", d_k), ("d_v", d_v))
    )
    block_size = check_size("block_size", block_size)
    if query_block_size is not None:
        query_block_size = check_size("query_block_size", query_block_size)
    check_float_dtype("dtype", dtype)
    slices = math.prod(batch)
    if method == "naive":
        return 2 * L_q * L_k * slices * dtype.itemsize
    if method != "chunked":
        raise ValueError(f'method must be "chunked" or "naive", got {method!r}.')
    n_q = L_q if query_block_size is None else min(query_block_size, L_q)
    n_k = min(block_size, L_k)
    acc_itemsize = _accumulation_dtype(dtype).itemsize
    numbers = n_q * n_k + n_q * d_k + 2 * n_q * d_v + 8 * n_q + n_k * d_k
    if acc_itemsize != dtype.itemsize:
        numbers += n_k * (d_k + d_v)
    return numbers * slices * acc_itemsize
