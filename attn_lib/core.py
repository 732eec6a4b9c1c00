"""Scaled dot-product attention and the article's single-head module.

Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V        (Vaswani et al. 2017, eq. 1)
"""

from __future__ import annotations

import math
import numbers

import torch
from torch import nn

from .shapes import (
    ShapeError,
    check_device,
    check_dropout_p,
    check_finite,
    check_float_tensor,
    check_mask,
    check_qkv,
    check_scale,
    check_scores_finite,
    check_size,
    fmt_shape,
)

__all__ = ["SingleHeadAttention", "scaled_dot_product_attention"]


def _check_fill_value(fill_value: object) -> float:
    if isinstance(fill_value, bool) or not isinstance(fill_value, numbers.Real):
        raise TypeError(
            f"fill_value must be a number (e.g. -1e9 or float('-inf')) or None, "
            f"got {type(fill_value).__name__}."
        )
    fill_value = float(fill_value)
    if math.isnan(fill_value):
        raise ValueError("fill_value is NaN; every masked score would turn the row into NaN.")
    return fill_value


def _check_fill_fits(fill_value: float, dtype: torch.dtype) -> None:
    """Raise masked_fill's own error when the fill cannot be stored in the inputs' dtype."""
    try:
        torch.zeros(1, dtype=dtype).masked_fill(torch.ones(1, dtype=torch.bool), fill_value)
    except RuntimeError as err:
        raise RuntimeError(
            f"fill_value={fill_value:g} cannot be stored in {dtype} (its largest magnitude is "
            f"{torch.finfo(dtype).max:g}), so masked_fill refuses it, as it refuses the "
            f"article's -1e9 in float16. Leave fill_value=None for a fill that is safe in "
            f"every dtype. (PyTorch said: {err})"
        ) from err


def scaled_dot_product_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    scale: float | None = None,
    fill_value: float | None = None,
    dropout_p: float = 0.0,
    training: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(Q Kᵀ · scale) V with a keep-mask, returning the output and the weights.

    Args:
        query: (..., L_q, d_k), floating point; ``...`` is nothing, (B,) or (B, H).
        key: (..., L_k, d_k), same dtype and leading dims.
        value: (..., L_k, d_v), same dtype and leading dims.
        mask: keep-mask, True (or 1) = may attend, False (or 0) = blocked; bool or
            integer 0/1. 2-D means (L_q, L_k); otherwise it has the scores' rank with
            each dim equal to the scores' or 1: (B, 1, L_k) padding, (B, L_q, L_k),
            (B, 1, 1, L_k) with heads. See attn_lib.padding_mask / causal_mask.
        scale: multiplier of the scores (dimensionless); default 1/√d_k with
            d_k = query.size(-1), as in PyTorch. Pass 1.0 for no scaling.
        fill_value: None (default) fills blocked scores with a value safe for the
            dtype (torch.finfo(dtype).min), and a query row whose keys are all blocked
            gets zero weights and a zero output, as F.scaled_dot_product_attention
            does. A number (-1e9, float('-inf'), 0, …) does exactly what the article's
            ``scores.masked_fill(mask == 0, fill_value)`` does, NaN and errors
            included: -inf turns a fully masked row into NaN, -1e9 into a uniform
            row, 0 does not mask at all, and -1e9 cannot be stored in float16.
        dropout_p: probability of zeroing a weight, in [0, 1); applied after the
            softmax, before V, only when ``training`` (inverted dropout: kept weights
            are divided by 1 - p, so rows sum to 1 only in expectation).
        training: apply dropout or not.

    Returns:
        output: (..., L_q, d_v), query's dtype.
        weights: (..., L_q, L_k), the weights that multiplied V (after dropout):
            each row ≥ 0 and sums to 1, or is all zeros for a row with no allowed key.

    Memory: one (..., L_q, L_k) matrix without autograd (the weights are written over the
    scores, in place, with the same values bit for bit); two with autograd on, as in the
    article's code (the backward pass needs the weights).

    Raises:
        TypeError: inputs that are not float32, float64, float16 or bfloat16 (integer,
            bool, float8) or of mixed dtypes, a bad scale, fill_value or dropout_p type.
        ShapeError: ranks outside 2..4 or unequal, d_k or L_k mismatches, batch dims
            that differ.
        MaskError: a float mask, a mask that does not fit the scores (a (B, L_k)
            padding mask not unsqueezed, a lower-rank mask), one that blocks
            every key for every query, or one on another device than the query.
        ValueError: NaN/inf in the inputs, inputs on different devices or on the meta
            device, scale not finite or ≤ 0, dropout_p not in [0, 1), fill_value NaN.
        RuntimeError: an explicit fill_value that the dtype cannot hold (as masked_fill).

    Source: Vaswani et al. 2017, eq. (1); article sections 2.3 and 3.2;
        torch.nn.functional.scaled_dot_product_attention (scale and masking conventions).
    """
    shapes = check_qkv(query, key, value)
    scale = 1.0 / math.sqrt(shapes.d_k) if scale is None else check_scale(scale)
    dropout_p = check_dropout_p(dropout_p)
    if not isinstance(training, bool):
        raise TypeError(f"training must be True or False, got {training!r}.")
    if fill_value is not None:
        fill_value = _check_fill_value(fill_value)
    keep = None if mask is None else check_mask(mask, shapes.scores, device=query.device)

    dtype = query.dtype
    if fill_value is not None:
        _check_fill_fits(fill_value, dtype)
    if dtype in (torch.float16, torch.bfloat16):
        # Half-precision scores overflow early (float16 stops at 65504): compute scores and
        # softmax in float32 and round the results back, as PyTorch's CPU kernels do.
        query, key, value = query.float(), key.float(), value.float()

    # Scaling the query (L_q × d_k numbers) instead of the scores (L_q × L_k) is the
    # same product and saves a full pass over the score matrix.
    scores = torch.matmul(query * scale, key.transpose(-2, -1))  # (..., L_q, L_k)
    if shapes.scores_may_overflow(scale, scores.dtype):  # else the matrix is not read again
        check_scores_finite(scores)

    if keep is not None:
        # fill_value=None: finfo.min is finite in every dtype, so exp(min - row max)
        # underflows to exactly 0 in any row with an allowed key and no NaN is formed. An
        # explicit fill (0, -1e9, -inf) does what the article's masked_fill line does. In
        # place, even with autograd: the matmul's backward does not need its output.
        fill = torch.finfo(scores.dtype).min if fill_value is None else fill_value
        scores.masked_fill_(~keep, fill)
    # Without autograd the weights are written over the scores (same values, bit for bit):
    # one (L_q, L_k) matrix is held instead of two. With autograd the softmax's backward
    # needs its output untouched, so the weights get a matrix of their own.
    in_place = not scores.requires_grad
    weights = torch.softmax(scores, dim=-1, out=scores if in_place else None)
    del scores  # (with autograd: no longer needed; freeing it lets the allocator reuse it)
    if keep is not None and fill_value is None:
        no_key = ~keep.any(dim=-1, keepdim=True)  # (..., L_q or 1, 1)
        if bool(no_key.any()):
            # A row whose keys are all blocked came out uniform; make it zero, like SDPA.
            weights = (
                weights.masked_fill_(no_key, 0.0) if in_place else weights.masked_fill(no_key, 0.0)
            )

    if dropout_p > 0.0 and training:
        weights = torch.nn.functional.dropout(weights, p=dropout_p, training=True)
    output = torch.matmul(weights, value)  # (..., L_q, d_v)
    return output.to(dtype), weights.to(dtype)


class SingleHeadAttention(nn.Module):
    """The article's single-head self-attention module (section 3.2).

    Q = x W_Qᵀ, K = x W_Kᵀ, V = x W_Vᵀ, then softmax(Q Kᵀ / √d_k) V.
    ``nn.Linear(d_model, d_k).weight`` is stored as (d_k, d_model) and applied as
    x @ weight.T; the article writes the same matrix as (d_model, d_k).

    Args:
        d_model: width of the input x (an int, NumPy integer or 0-d integer tensor,
            as every width below).
        d_k: width of queries and keys (the article takes d_k = d_model; a convention).
        bias: give W_Q, W_K, W_V a bias (default False, as in the article; note that
            ``nn.Linear`` itself defaults to bias=True).
        dropout: probability of dropping a weight after softmax, in training mode only.
        d_v: width of values and of the output; default d_k.

    Attributes:
        W_Q, W_K: nn.Linear(d_model, d_k). W_V: nn.Linear(d_model, d_v).

    Raises:
        TypeError / ValueError: a width that is not an int ≥ 1, a bad dropout.

    Source: article section 3.2; Vaswani et al. 2017, sec. 3.2.1.
    """

    def __init__(
        self,
        d_model: int,
        d_k: int,
        *,
        bias: bool = False,
        dropout: float = 0.0,
        d_v: int | None = None,
    ) -> None:
        super().__init__()
        d_model, d_k = check_size("d_model", d_model), check_size("d_k", d_k)
        d_v = d_k if d_v is None else check_size("d_v", d_v)
        self.d_model, self.d_k, self.d_v = d_model, d_k, d_v
        self.dropout = check_dropout_p(dropout)
        self.W_Q = nn.Linear(d_model, d_k, bias=bias)
        self.W_K = nn.Linear(d_model, d_k, bias=bias)
        self.W_V = nn.Linear(d_model, d_v, bias=bias)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, d_k={self.d_k}, d_v={self.d_v}, dropout={self.dropout}"

    def _check_input(self, name: str, x: torch.Tensor) -> None:
        check_float_tensor(name, x)
        if x.dim() not in (2, 3):
            raise ShapeError(
                f"{name} has shape {fmt_shape(x.shape)}; SingleHeadAttention takes (L, d_model) "
                f"or (B, L, d_model) with d_model = {self.d_model}."
            )
        if x.shape[-1] != self.d_model:
            raise ShapeError(
                f"{name} has shape {fmt_shape(x.shape)}, whose last dim {x.shape[-1]} should be "
                f"d_model = {self.d_model} (the module was built as "
                f"SingleHeadAttention({self.d_model}, {self.d_k})). Check the embedding width "
                f"or build the module with d_model={x.shape[-1]}."
            )
        weight = self.W_Q.weight
        if x.dtype != weight.dtype:
            raise TypeError(
                f"{name} has dtype {x.dtype} but the module's weights are {weight.dtype}. "
                f"Convert one of them: {name}.to({weight.dtype}) or module.to({x.dtype})."
            )
        check_device(name, x)
        if x.device != weight.device:
            if weight.device.type == "meta":
                raise ValueError(
                    "the module's weights are on the meta device, which holds shapes but no "
                    "values; build the module on the CPU (or a GPU), or give it real weights "
                    "with module.to_empty(device='cpu') and load a state_dict."
                )
            raise ValueError(
                f"{name} is on {x.device} but the module's weights are on {weight.device}; "
                f"attention needs one device. Move one of them: "
                f"{name}.to(module.W_Q.weight.device) or module.to({name}.device)."
            )
        check_finite(name, x)

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        return_attn: bool = False,
        *,
        context: torch.Tensor | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Attend from x to x (self-attention), or from x to ``context`` (cross-attention).

        Args:
            x: (L_q, d_model) or (B, L_q, d_model), floating point: the queries' source.
            mask: keep-mask as in :func:`scaled_dot_product_attention`:
                (L_q, L_k), (B, 1, L_k) or (B, L_q, L_k).
            return_attn: also return the weights.
            context: (B, L_k, d_model), the keys' and values' source; default x.

        Returns:
            output (…, L_q, d_v), and with ``return_attn`` the weights (…, L_q, L_k)
            that multiplied V (after dropout in training mode).

        Raises:
            ShapeError, MaskError, TypeError, ValueError: as scaled_dot_product_attention,
                and when x's last dim is not d_model, or x is not on the module's device.
        """
        self._check_input("x", x)
        source = x
        if context is not None:
            self._check_input("context", context)
            if context.dim() != x.dim() or context.shape[:-2] != x.shape[:-2]:
                raise ShapeError(
                    f"x has shape {fmt_shape(x.shape)} and context {fmt_shape(context.shape)}; "
                    f"they must have the same batch dims, (B, L_q, d_model) and (B, L_k, "
                    f"d_model), because each sequence attends to its own context."
                )
            source = context
        Q = self.W_Q(x)  # (B, L_q, d_k)
        K = self.W_K(source)  # (B, L_k, d_k)
        V = self.W_V(source)  # (B, L_k, d_v)
        output, weights = scaled_dot_product_attention(
            Q, K, V, mask, dropout_p=self.dropout, training=self.training
        )  # (B, L_q, d_v), (B, L_q, L_k)
        if return_attn:
            return output, weights
        return output
