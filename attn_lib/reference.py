"""Checking attn_lib against PyTorch's own attention (article section 3.4).

Two references: ``nn.MultiheadAttention`` with ``num_heads=1`` (its ``in_proj_weight`` stacks
W_Q, W_K, W_V; its ``out_proj`` is a further Linear(E, E) that the article's module does not
have), and ``torch.nn.functional.scaled_dot_product_attention`` (a fused kernel).

Used by notebook 06 (Checking against PyTorch), sections 1, 3 and 6.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .attention import SingleHeadAttention, scaled_dot_product_attention
from .checks import MaskError, ShapeError, check_attention, check_device, check_mask, fmt_shape
from .masks import to_key_padding_mask, to_multihead_attn_mask

__all__ = ["AlignmentReport", "apply_out_proj", "compare_with_multihead_attention",
           "compare_with_sdpa", "from_multihead_attention"]  # fmt: skip


def _check_single_head(mha: nn.MultiheadAttention) -> None:
    if not isinstance(mha, nn.MultiheadAttention):
        raise TypeError(f"expected an nn.MultiheadAttention, got {type(mha).__name__}.")
    if mha.num_heads != 1:
        raise ValueError(
            f"the module has num_heads={mha.num_heads}; a single-head module can only be "
            f"loaded from nn.MultiheadAttention(..., num_heads=1).")  # fmt: skip
    if not mha.batch_first:
        raise ValueError(
            "the module has batch_first=False, so it reads (B, L, E) input as (L, B, E) and "
            "mixes the batch instead of the tokens (its weights come out (L, B, B)). Build it "
            "with batch_first=True, as the article does.")  # fmt: skip
    if mha.bias_k is not None or mha.add_zero_attn:
        raise ValueError(
            "add_bias_kv / add_zero_attn append an extra key, which SingleHeadAttention does "
            "not model; build nn.MultiheadAttention without them.")  # fmt: skip


def from_multihead_attention(mha: nn.MultiheadAttention) -> SingleHeadAttention:
    """A SingleHeadAttention with the Q, K, V projections of a one-head nn.MultiheadAttention.

    W_Q, W_K, W_V are rows [0:E], [E:2E], [2E:3E] of ``in_proj_weight`` (3E, E), and of
    ``in_proj_bias``; ``out_proj`` is not copied (see :func:`apply_out_proj`).

    Args:
        mha: nn.MultiheadAttention(embed_dim=E, num_heads=1, batch_first=True).

    Returns:
        SingleHeadAttention(E, E), mha's dtype, device and training mode.

    Raises:
        TypeError: not an nn.MultiheadAttention.
        ValueError: num_heads != 1, batch_first=False, add_bias_kv or add_zero_attn,
            or kdim/vdim different from embed_dim.

    Source: torch.nn.MultiheadAttention docs (in_proj_weight); article section 3.4.
    """
    _check_single_head(mha)
    E = mha.embed_dim
    if not mha._qkv_same_embed_dim:
        raise ValueError(
            f"the module has kdim={mha.kdim}, vdim={mha.vdim} ≠ embed_dim={E}: keys and "
            f"values come from inputs of another width, which SingleHeadAttention (one x) "
            f"does not model.")  # fmt: skip
    has_bias = mha.in_proj_bias is not None
    ref = mha.in_proj_weight
    module = SingleHeadAttention(E, E, bias=has_bias, dropout=mha.dropout).to(
        dtype=ref.dtype, device=ref.device)  # fmt: skip
    with torch.no_grad():
        for i, lin in enumerate((module.W_Q, module.W_K, module.W_V)):
            lin.weight.copy_(mha.in_proj_weight[i * E : (i + 1) * E])  # (E, E)
            if has_bias:
                lin.bias.copy_(mha.in_proj_bias[i * E : (i + 1) * E])  # (E,)
    module.train(mha.training)
    return module


def apply_out_proj(mha: nn.MultiheadAttention, output: torch.Tensor) -> torch.Tensor:
    """nn.MultiheadAttention's output projection of an attention output (..., L_q, E).

    Source: torch.nn.MultiheadAttention (out_proj is applied after attention).
    """
    return F.linear(output, mha.out_proj.weight, mha.out_proj.bias)


@dataclass(frozen=True)
class AlignmentReport:
    """Largest absolute differences between attn_lib and a PyTorch reference.

    Attributes:
        weights_max_abs_diff: over the weights (None when the reference returns none).
        output_max_abs_diff: over the outputs, in the units of the values.
        rows_compared: query rows compared.
        fully_masked_rows: query rows whose keys are all blocked: left out against
            nn.MultiheadAttention (NaN there), compared against SDPA (zeros in both).
        fully_masked_compared: whether those rows were compared.
    """

    weights_max_abs_diff: float | None
    output_max_abs_diff: float
    rows_compared: int
    fully_masked_rows: int
    fully_masked_compared: bool = False

    def __str__(self) -> str:
        w = "n/a" if self.weights_max_abs_diff is None else f"{self.weights_max_abs_diff:.2e}"
        return (
            f"max |Δ| weights: {w}, output: {self.output_max_abs_diff:.2e} "
            f"over {self.rows_compared} rows ({self.fully_masked_rows} fully masked rows "
            f"{'compared' if self.fully_masked_compared else 'left out'})")  # fmt: skip


def _row_keep(
    keep: torch.Tensor | None, scores_shape: tuple[int, ...], device: torch.device
) -> torch.Tensor:
    """(..., L_q) bool: rows that have at least one allowed key."""
    if keep is None:
        return torch.ones(scores_shape[:-1], dtype=torch.bool, device=device)
    return keep.any(dim=-1).expand(scores_shape[:-1])


def _max_diff(a: torch.Tensor, b: torch.Tensor, rows: torch.Tensor) -> float:
    if not bool(rows.any()):
        return 0.0
    return (a[rows] - b[rows]).abs().max().item()


def compare_with_multihead_attention(module: SingleHeadAttention, mha: nn.MultiheadAttention,
                                     x: torch.Tensor, mask: torch.Tensor | None = None, *,
                                     use_key_padding_mask: bool = False) -> AlignmentReport:  # fmt: skip
    """Run ``module`` and ``mha`` on x and compare the weights, then the outputs after out_proj.

    Both run in eval mode and without gradients; the keep-mask is converted to MHA's
    ``attn_mask`` (True = blocked) or, with ``use_key_padding_mask``, ``key_padding_mask``.

    Args:
        module: a SingleHeadAttention, e.g. from :func:`from_multihead_attention`.
        mha: nn.MultiheadAttention(E, num_heads=1, batch_first=True).
        x: (B, L, E), floating point.
        mask: keep-mask (L, L), (B, 1, L) or (B, L, L), or None.
        use_key_padding_mask: send a (B, 1, L) padding mask as key_padding_mask.

    Returns:
        AlignmentReport over the rows that keep at least one key.

    Raises:
        ValueError, ShapeError, MaskError: as from_multihead_attention and attention;
            MaskError also for use_key_padding_mask with a mask that differs per query.

    Source: article section 3.4; torch.nn.MultiheadAttention docs.
    """
    _check_single_head(mha)
    if not isinstance(x, torch.Tensor) or x.dim() != 3:
        got = fmt_shape(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ShapeError(f"x must be (B, L, E) for batch_first=True, got {got}.")
    E = mha.embed_dim
    if (module.d_model, module.d_k, module.d_v) != (E, E, E):
        raise ShapeError(
            f"the module has d_model={module.d_model}, d_k={module.d_k}, d_v={module.d_v} but "
            f"the nn.MultiheadAttention has embed_dim={E}; a one-head MHA has d_k = d_v = "
            f"embed_dim. Build the module with from_multihead_attention(mha).")  # fmt: skip
    dtypes = {x.dtype, module.W_Q.weight.dtype, mha.in_proj_weight.dtype}
    if len(dtypes) != 1:
        raise TypeError(
            f"x, the module and the nn.MultiheadAttention must share one dtype, got x "
            f"{x.dtype}, module {module.W_Q.weight.dtype}, mha {mha.in_proj_weight.dtype}; "
            f"convert them with .to(dtype).")  # fmt: skip
    weight = mha.in_proj_weight
    check_device("mha.in_proj_weight", weight)
    check_device("x", x, weight.device, "mha.in_proj_weight")
    B, L, _ = x.shape
    keep = None if mask is None else check_mask(mask, (B, L, L), device=x.device)
    kwargs = {}
    if keep is not None:
        if use_key_padding_mask:
            if keep.dim() == 2 and keep.shape[0] == 1:
                keep = keep.unsqueeze(0)  # (1, L): one key mask for every query → (1, 1, L)
            if keep.dim() != 3 or keep.shape[1] != 1:
                raise MaskError(
                    f"use_key_padding_mask=True sends the mask as key_padding_mask, which is "
                    f"the same for every query, so it takes a (B, 1, L) padding mask; got "
                    f"shape {fmt_shape(keep.shape)}. Leave use_key_padding_mask=False to send "
                    f"it as attn_mask.")  # fmt: skip
            kwargs["key_padding_mask"] = to_key_padding_mask(keep, B=B)
        else:
            # The sizes are given, so a size-1 dim (L = 1 included) is never ambiguous.
            kwargs["attn_mask"] = to_multihead_attn_mask(keep, L_q=L, L_k=L)
    was = (module.training, mha.training)
    module.eval()
    mha.eval()
    try:
        with torch.no_grad():
            out, weights = module(x, keep, return_attn=True)
            ref_out, ref_weights = mha(
                x, x, x, need_weights=True, average_attn_weights=True, **kwargs)  # fmt: skip
    finally:
        module.train(was[0])
        mha.train(was[1])
    rows = _row_keep(keep, (B, L, L), x.device)
    return AlignmentReport(
        weights_max_abs_diff=_max_diff(weights, ref_weights, rows),
        output_max_abs_diff=_max_diff(apply_out_proj(mha, out), ref_out, rows),
        rows_compared=int(rows.sum()),
        fully_masked_rows=int((~rows).sum()))  # fmt: skip


def compare_with_sdpa(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    scale: float | None = None,
) -> AlignmentReport:
    """Compare attn_lib's attention with torch.nn.functional.scaled_dot_product_attention.

    SDPA returns no weights, so only the outputs are compared, every row included.

    Args:
        query, key, value, mask, scale: as :func:`attn_lib.scaled_dot_product_attention`.

    Returns:
        AlignmentReport (weights_max_abs_diff is None).

    Raises:
        as :func:`attn_lib.scaled_dot_product_attention`.

    Source: torch.nn.functional.scaled_dot_product_attention docs.
    """
    shapes, keep, _ = check_attention(query, key, value, mask, scale)
    with torch.no_grad():
        out, _ = scaled_dot_product_attention(query, key, value, keep, scale=scale)
        ref = F.scaled_dot_product_attention(query, key, value, attn_mask=keep, scale=scale)
    rows = torch.ones(out.shape[:-1], dtype=torch.bool, device=out.device)
    fully = 0 if keep is None else int((~_row_keep(keep, shapes.scores, out.device)).sum())
    return AlignmentReport(
        weights_max_abs_diff=None,
        output_max_abs_diff=_max_diff(out, ref, rows),
        rows_compared=int(rows.sum()),
        fully_masked_rows=fully,
        fully_masked_compared=True)  # fmt: skip
