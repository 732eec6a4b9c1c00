"""Scaled dot-product attention and the article's single-head module.

Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V        (Vaswani et al. 2017, eq. 1)

Used by every notebook; notebook 05 writes the module out and compares it with this one,
notebook 07 shows the fills of blocked scores.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .checks import (
    ShapeError,
    check_attention,
    check_device,
    check_dropout_p,
    check_fill_value,
    check_finite,
    check_float_tensor,
    check_scores_finite,
    check_size,
    fmt_shape,
)

__all__ = ["SingleHeadAttention", "scaled_dot_product_attention"]


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """float32 for float16 and bfloat16, whose scores overflow early (as PyTorch's CPU kernels)."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _check_inputs(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                  mask: torch.Tensor | None, scale: float | None, fill_value: float | None,
                  dropout_p: float, training: bool) -> tuple[torch.Tensor | None, float, bool]:  # fmt: skip
    """All of attention's checks; returns the keep-mask as bool (or None), the scale, and
    whether the scores could overflow (then they are checked)."""
    shapes, keep, scale = check_attention(query, key, value, mask, scale)
    check_dropout_p(dropout_p)
    if not isinstance(training, bool):
        raise TypeError(f"training must be True or False, got {training!r}.")
    if fill_value is not None:
        check_fill_value(fill_value, query.dtype)
    may_overflow = shapes.scores_may_overflow(scale, compute_dtype(query.dtype))
    return keep, scale, may_overflow


def scaled_dot_product_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                                 mask: torch.Tensor | None = None, *, scale: float | None = None,
                                 fill_value: float | None = None, dropout_p: float = 0.0,
                                 training: bool = False) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """softmax(Q Kᵀ · scale) V with a keep-mask; returns the output and the weights.

    Args:
        query: (..., L_q, d_k), floating point; ``...`` is nothing, (B,) or (B, H).
        key: (..., L_k, d_k), same dtype and leading dims.
        value: (..., L_k, d_v), same dtype and leading dims.
        mask: keep-mask, True (or 1) = may attend; bool or integer 0/1. 2-D means (L_q, L_k);
            otherwise the scores' rank, each dim the scores' or 1: (B, 1, L_k) padding,
            (B, L_q, L_k), (B, 1, 1, L_k) with heads.
        scale: the scores' multiplier; default 1/√d_k (d_k = query.size(-1)). 1.0 for none.
        fill_value: None fills blocked scores with the dtype's most negative number, and a
            query with no allowed key gets zero weights and a zero output, as
            F.scaled_dot_product_attention. A number does exactly what the article's
            ``scores.masked_fill(mask == 0, fill_value)`` does: -inf turns such a row into
            NaN, -1e9 into a uniform row (and cannot be stored in float16), 0 masks nothing.
        dropout_p: probability of zeroing a weight, in [0, 1), only when ``training``; kept
            weights are divided by 1 - p.
        training: apply dropout or not.

    Returns:
        output (..., L_q, d_v) and weights (..., L_q, L_k), the ones multiplied with V (after
        dropout), in query's dtype. Each row of weights sums to 1, or is all zeros for a query
        with no allowed key.

    Raises:
        TypeError: inputs that are not float32, float64, float16 or bfloat16, or of mixed
            dtypes; a bad scale, fill_value, dropout_p or training.
        ShapeError: ranks outside 2..4 or unequal; d_k, L_k or batch dims that differ.
        MaskError: a float mask, a mask that does not fit the scores, one that blocks every
            key, one on another device.
        ValueError: NaN or inf in the inputs or the scores; inputs on different devices or on
            the meta device; scale ≤ 0, dropout_p outside [0, 1), fill_value NaN.
        RuntimeError: an explicit fill_value the dtype cannot hold, as masked_fill.

    Source: Vaswani et al. 2017, eq. (1); article sections 2.3 and 3.2;
        torch.nn.functional.scaled_dot_product_attention (scale and masks).
    """
    keep, scale, may_overflow = _check_inputs(
        query, key, value, mask, scale, fill_value, dropout_p, training)  # fmt: skip
    dtype = query.dtype
    query, key, value = (t.to(compute_dtype(dtype)) for t in (query, key, value))  # half: float32

    # Scaling Q rather than the scores saves a pass over the (L_q, L_k) matrix.
    scores = (query * scale) @ key.transpose(-2, -1)  # (..., L_q, L_k)
    if may_overflow:  # else the inputs' norms bound every score: no pass over the scores
        check_scores_finite(scores)
    if keep is not None:
        fill = torch.finfo(scores.dtype).min if fill_value is None else fill_value
        scores.masked_fill_(~keep, fill)  # in place: saves a copy of the scores
    # Without autograd the weights overwrite the scores: one (L_q, L_k) matrix, not two.
    weights = torch.softmax(scores, dim=-1, out=None if scores.requires_grad else scores)
    if keep is not None and fill_value is None:
        no_key = ~keep.any(dim=-1, keepdim=True)  # (..., L_q or 1, 1)
        if bool(no_key.any()):  # a query with no allowed key came out uniform: zeros, as SDPA
            weights = weights.masked_fill(no_key, 0.0)
    if training and dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    output = weights @ value  # (..., L_q, d_v)
    return output.to(dtype), weights.to(dtype)


class SingleHeadAttention(nn.Module):
    """The article's single-head self-attention module: softmax(Q Kᵀ / √d_k) V of projections.

    Q = x W_Qᵀ, K = x W_Kᵀ, V = x W_Vᵀ; ``nn.Linear(d_model, d_k).weight`` is (d_k, d_model),
    the transpose of the article's (d_model, d_k) matrix.

    Args:
        d_model: width of the input x.
        d_k: width of queries and keys (the article takes d_k = d_model).
        bias: give W_Q, W_K, W_V a bias (default False, as the article; nn.Linear's is True).
        dropout: probability of dropping a weight after softmax, in training mode only.
        d_v: width of values and of the output; default d_k.

    Attributes:
        W_Q, W_K: nn.Linear(d_model, d_k). W_V: nn.Linear(d_model, d_v).

    Raises:
        TypeError / ValueError: a width that is not an int ≥ 1, a bad dropout.

    Source: article section 3.2; Vaswani et al. 2017, sec. 3.2.1.
    """

    def __init__(self, d_model: int, d_k: int, *, bias: bool = False, dropout: float = 0.0,
                 d_v: int | None = None) -> None:  # fmt: skip
        super().__init__()
        self.d_model, self.d_k = check_size("d_model", d_model), check_size("d_k", d_k)
        self.d_v = self.d_k if d_v is None else check_size("d_v", d_v)
        self.dropout = check_dropout_p(dropout)
        self.W_Q = nn.Linear(self.d_model, self.d_k, bias=bias)
        self.W_K = nn.Linear(self.d_model, self.d_k, bias=bias)
        self.W_V = nn.Linear(self.d_model, self.d_v, bias=bias)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, d_k={self.d_k}, d_v={self.d_v}, dropout={self.dropout}"

    def _check_input(self, name: str, x: torch.Tensor) -> None:
        check_float_tensor(name, x)
        if x.dim() not in (2, 3):
            raise ShapeError(
                f"{name} has shape {fmt_shape(x.shape)}; SingleHeadAttention takes (L, d_model) "
                f"or (B, L, d_model) with d_model = {self.d_model}.")  # fmt: skip
        if x.shape[-1] != self.d_model:
            raise ShapeError(
                f"{name} has shape {fmt_shape(x.shape)}, whose last dim {x.shape[-1]} should be "
                f"d_model = {self.d_model} (the module was built as "
                f"SingleHeadAttention({self.d_model}, {self.d_k})). Check the embedding width "
                f"or build the module with d_model={x.shape[-1]}.")  # fmt: skip
        weight = self.W_Q.weight
        if x.dtype != weight.dtype:
            raise TypeError(
                f"{name} has dtype {x.dtype} but the module's weights are {weight.dtype}. "
                f"Convert one of them: {name}.to({weight.dtype}) or module.to({x.dtype}).")  # fmt: skip
        check_device(name, x)
        if weight.device.type == "meta":
            raise ValueError(
                "the module's weights are on the meta device, which holds shapes but no "
                "values; build the module on the CPU (or a GPU), or give it real weights "
                "with module.to_empty(device='cpu') and load a state_dict.")  # fmt: skip
        check_device(name, x, weight.device, "module.W_Q.weight")
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
            mask: keep-mask as in :func:`scaled_dot_product_attention`.
            return_attn: also return the weights.
            context: (B, L_k, d_model), the keys' and values' source; default x.

        Returns:
            output (..., L_q, d_v), and with ``return_attn`` the weights (..., L_q, L_k).

        Raises:
            ShapeError, MaskError, TypeError, ValueError: as scaled_dot_product_attention;
                also for x's last dim ≠ d_model, or x not on the module's device.
        """
        self._check_input("x", x)
        source = x
        if context is not None:
            self._check_input("context", context)
            if context.dim() != x.dim() or context.shape[:-2] != x.shape[:-2]:
                raise ShapeError(
                    f"x has shape {fmt_shape(x.shape)} and context {fmt_shape(context.shape)}; "
                    f"they must have the same batch dims, (B, L_q, d_model) and (B, L_k, "
                    f"d_model), because each sequence attends to its own context.")  # fmt: skip
            source = context
        Q = self.W_Q(x)  # (B, L_q, d_k)
        K = self.W_K(source)  # (B, L_k, d_k)
        V = self.W_V(source)  # (B, L_k, d_v)
        output, weights = scaled_dot_product_attention(
            Q, K, V, mask, dropout_p=self.dropout, training=self.training
        )  # (B, L_q, d_v), (B, L_q, L_k)
        return (output, weights) if return_attn else output
