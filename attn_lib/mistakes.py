"""The learner mistakes the series names, each with its explanation and fix.

:data:`MISTAKES` is the one table of them. A mistake in the attention itself recomputes its
weights with attn_lib's own attention, so that :func:`attn_lib.diagnose` names the mistake a
learner's weights equal and the checkers the one a learner's function matches; the others (a
mask built or converted wrongly, a fill float16 cannot hold, nn.Linear and nn.MultiheadAttention
read wrongly) are text that the errors of :mod:`attn_lib.checks` and the checkers quote. Used by
notebooks 02, 05, 06, 07 and 08 ("Check yourself"), and 08 ("6 · `attn_lib.diagnose` on your
tensors").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import torch

from .attention import scaled_dot_product_attention
from .checks import QKVShapes, as_keep_mask, check_qkv

__all__ = ["FILLS", "MISTAKES", "Inputs", "Mistake", "find", "sizes_of", "why"]

# What a row with no allowed key holds: attn_lib's zeros, uniform (the article's -1e9), NaN.
FILLS = (None, -1e9, -math.inf)
_SYMBOLS = {n: n for n in ("B", "H", "L_q", "L_k", "d_k", "d_v", "d_model")}


@dataclass(frozen=True)
class Inputs:
    """What the learner's attention was given, to recompute a mistake's weights from.

    query (…, L_q, d_k), key (…, L_k, d_k); mask: the bool keep-mask as given, or None; scale:
    the right weights' multiplier (1/√d_k unless chosen); sizes: B, H where present, L_q, L_k,
    d_k, d_v (d_model when known); fill: the learner's masked_fill value, one of :data:`FILLS`;
    additive: the mask was given as an additive float mask (and read as mask == 0).
    """

    query: torch.Tensor
    key: torch.Tensor
    mask: torch.Tensor | None
    scale: float
    sizes: Mapping[str, int]
    fill: float | None = None
    additive: bool = False

    def attend(self, **change: Any) -> torch.Tensor:
        """attn_lib's weights (…, L_q, L_k), with ``change`` to query, key, mask, scale, fill."""
        a = replace(self, **change)  # the weights do not depend on value: key stands in
        return scaled_dot_product_attention(a.query, a.key, a.key, a.mask, scale=a.scale,
                                            fill_value=a.fill)[1]  # fmt: skip

    def masked(self, mask: Callable | None = None, unless: bool = False, **change: Any) -> Any:
        """:meth:`attend`, the mask changed to ``mask(mask)``; None without one or if unless."""
        if self.mask is None or unless:
            return None
        return self.attend(**change, **({} if mask is None else {"mask": mask(self.mask)}))

    def softmax_over(self, dim: int) -> torch.Tensor:
        """The weights (…, L_q, L_k) with the softmax over ``dim`` instead of the keys."""
        if dim in (-2, self.query.dim() - 2):  # over the queries: softmax(K Qᵀ), transposed
            mask = None if self.mask is None else self.mask.mT
            return self.attend(query=self.key, key=self.query, mask=mask).mT
        # Another dim: moved last, as the scores of the moved scores against identity keys.
        scores = (self.query @ self.key.mT * self.scale).movedim(dim, -1)  # (…, n)
        n = scores.shape[-1]
        eye = torch.eye(n, dtype=scores.dtype).expand(*scores.shape[:-2], n, n)
        full = (*self.query.shape[:-1], self.key.shape[-2])  # (…, L_q, L_k)
        mask = None if self.mask is None else self.mask.expand(full).movedim(dim, -1)
        return self.attend(query=scores, key=eye, mask=mask, scale=1.0).movedim(-1, dim)


@dataclass(frozen=True)
class Mistake:
    """A learner mistake: its code, what it computes, why it is wrong and the fix.

    code: the same in diagnose()'s findings and the checkers' verdicts; name: the wrong
    computation in one line ({d_k}, … stand for sizes); why: what it does and the fix; weights:
    inputs → its weights (…, L_q, L_k), None where it does not apply, raising where the mistaken
    code raises (none for dropout: its zeros are random); or scale: sizes → the multiplier of a
    scale mistake.
    """

    code: str
    name: str
    why: str
    weights: Callable[[Inputs], torch.Tensor | None] | None = None
    scale: Callable[[Mapping], float | None] | None = None

    @property
    def recomputes(self) -> bool:
        """Whether the mistake has weights to recompute (a mistake in the attention itself)."""
        return self.weights is not None or self.scale is not None

    def recompute(self, inputs: Inputs) -> torch.Tensor | None:
        """The weights (…, L_q, L_k) this mistake gives on ``inputs``, or None."""
        if self.scale is not None:
            return None if (s := self.scale(inputs.sizes)) is None else inputs.attend(scale=s)
        return None if self.weights is None else self.weights(inputs)

    def attention(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                  mask: torch.Tensor | None = None, *,
                  fill_value: float | None = -1e9) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
        """Attention with this mistake: (output (…, L_q, d_v), weights (…, L_q, L_k)).

        The right attention where the mistake does not apply; raises where its code raises.
        """
        keep = None if mask is None else as_keep_mask(mask)
        sizes = sizes_of(check_qkv(query, key, value))
        inputs = Inputs(query, key, keep, sizes["d_k"] ** -0.5, sizes, fill_value)
        weights = self.recompute(inputs)
        weights = inputs.attend() if weights is None else weights
        return weights @ value.to(weights.dtype), weights

    def explain(self, sizes: Mapping | None = None, fill: float | None = None) -> str:
        """'name. why' with these sizes (default: their symbols), and a note for a -inf fill."""
        nan = " With a -inf fill, the query rows whose keys were all blocked came out NaN."
        text = f"{self.name}. {self.why}".format(**(_SYMBOLS | dict(sizes or {})))
        return text + nan * (fill == -math.inf)


def _reversed(t: torch.Tensor) -> torch.Tensor:
    return t.permute(*range(t.dim() - 1, -1, -1))  # what .T does on any rank


def _reshaped(k: torch.Tensor) -> torch.Tensor:
    return k.reshape(k.shape[:-2] + k.shape[:-3:-1])  # (…, d_k, L_k), not a transpose


def _zeroed_after(a: Inputs) -> torch.Tensor | None:
    return None if a.mask is None else a.attend(mask=None) * a.mask  # blocked weights zeroed


def _no_softmax(a: Inputs) -> torch.Tensor:
    scores = a.query @ a.key.mT * a.scale  # (…, L_q, L_k)
    return scores if a.mask is None else scores.masked_fill(~a.mask, a.fill or -1e9)


_T_FIX = "Use key.transpose(-2, -1) (or key.mT), which swaps only the last two dims."
_DIM_FIX = "Each query's weights over the keys must sum to 1: softmax(scores, dim=-1)."
_MASK_T = ("A keep-mask is laid out like the scores, (…, L_q, L_k): transposed, a causal mask "
           "shows each query the future, not the past, and a (B, 1, L_k) padding mask blanks "
           "query rows instead of key columns. Keep that layout: (B, 1, L_k) for padding.")  # fmt: skip
_WIDTH = "the width of the queries and keys, d_k = query.size(-1)"

# The table, most common first; where two rows give the same numbers, the first is named.
MISTAKES: tuple[Mistake, ...] = (
    Mistake("scale_d_k", "softmax(Q Kᵀ / {d_k}): ÷d_k instead of ÷√d_k",
            "Dividing by d_k instead of √d_k shrinks the scores too much and flattens every row "
            "towards uniform: divide by math.sqrt(d_k).", scale=lambda z: 1 / z["d_k"]),
    Mistake("no_scale", "softmax(Q Kᵀ): the scores not scaled",
            "Unscaled scores grow with d_k and push rows towards one-hot (and their gradients "
            "towards 0): divide them by math.sqrt(d_k).", scale=lambda z: 1.0),
    Mistake("scale_multiplied", "softmax(Q Kᵀ × √{d_k}): the scores multiplied by √d_k",
            "`scale` MULTIPLIES the scores in attn_lib and PyTorch's SDPA: pass "
            "scale=1/math.sqrt(d_k), or leave it None.", scale=lambda z: math.sqrt(z["d_k"])),
    Mistake("scale_length", "softmax(Q Kᵀ / √{L_q}): ÷√L_q, the query length",
            f"query.size(1) of a 3-D query is its length; the scale uses {_WIDTH}.",
            scale=lambda z: z["L_q"] ** -0.5),
    Mistake("scale_length", "softmax(Q Kᵀ / √{L_k}): ÷√L_k, the number of keys",
            f"The scale does not depend on how many keys there are but on {_WIDTH}.",
            scale=lambda z: z["L_k"] ** -0.5),
    Mistake("scale_d_v", "softmax(Q Kᵀ / √{d_v}): ÷√d_v, the width of value",
            f"The scores are dot products of queries and keys: the scale uses {_WIDTH}.",
            scale=lambda z: z["d_v"] ** -0.5),
    Mistake("scale_batch", "softmax(Q Kᵀ / √{B}): ÷√B, the batch size",
            f"query.size(0) is the batch size; the scale uses {_WIDTH}.",
            scale=lambda z: z.get("B") and z["B"] ** -0.5),
    Mistake("scale_heads", "softmax(Q Kᵀ / √{H}): ÷√H, the number of heads",
            f"On a (B, H, L_q, d_k) query, query.size(1) is H; each head uses {_WIDTH}.",
            scale=lambda z: z.get("H") and z["H"] ** -0.5),
    Mistake("scale_d_model", "softmax(Q Kᵀ / √{d_model}): ÷√{d_model} instead of ÷√d_k = √{d_k}",
            f"If {{d_model}} is d_model, the width of x: the scale uses {_WIDTH}.",
            scale=lambda z: z.get("d_model") and z["d_model"] ** -0.5),
    Mistake("scale_after_softmax", "softmax(Q Kᵀ) / √d_k: the scale applied after the softmax",
            "Rows then sum to 1/√d_k, not 1: the scale belongs to the scores, before the softmax.",
            weights=lambda a: a.attend(scale=1.0) * a.sizes["d_k"] ** -0.5),
    Mistake("softmax_dim", "softmax(scores, dim=-2), over the queries instead of the keys",
            _DIM_FIX, weights=lambda a: a.softmax_over(-2)),
    Mistake("softmax_dim", "softmax(scores, dim=0), over the batch", _DIM_FIX,
            weights=lambda a: a.softmax_over(0) if a.query.dim() >= 3 else None),
    Mistake("softmax_dim", "softmax(scores, dim=1), over the heads", _DIM_FIX,
            weights=lambda a: a.softmax_over(1) if a.query.dim() == 4 else None),
    Mistake("no_softmax", "the scaled scores themselves: the softmax is missing",
            "Its weights can be negative and rows do not sum to 1: mask the scores, then apply "
            "softmax(scores, dim=-1).", weights=_no_softmax),
    Mistake("reshape_not_transpose", "query @ key.reshape(…, d_k, L_k): a reshape, not Kᵀ",
            "reshape and view keep the memory order, so each column mixes features of different "
            "keys: it is not Kᵀ. " + _T_FIX, lambda a: a.attend(key=_reshaped(a.key).mT)),
    Mistake("transpose_1_2", "query @ key.transpose(1, 2) on (B, H, L, d_k): heads for positions",
            "It raises unless H = L_k = d_k, and then returns wrong numbers of the right shape. "
            + _T_FIX,
            lambda a: a.attend(key=a.key.transpose(1, 2).mT) if a.key.ndim == 4 else None),
    Mistake("dot_T", "query @ key.T: every dim of key reversed",
            "On a batch .T reverses every dim ((B, L_k, d_k) becomes (d_k, L_k, B)), and PyTorch "
            "deprecates it there. " + _T_FIX, lambda a: a.attend(key=_reversed(a.key).mT)),
    Mistake("scores_transposed", "softmax(K Qᵀ …): the scores transposed",
            "Row i then holds key i against every query and still sums to 1: only a comparison "
            "catches it. Queries ask: query @ key.transpose(-2, -1).",
            lambda a: a.attend(query=a.key, key=a.query)),
    Mistake("mask_not_applied", "the softmax without the mask",
            "The code ignores the mask, or drops masked_fill's result (it is not in place): "
            "scores = scores.masked_fill(mask == 0, fill).", lambda a: a.masked(lambda m: None)),
    Mistake("mask_inverted", "the attention with the mask inverted",
            "attn_lib and the article's masked_fill(mask == 0, …) read True = may attend, "
            "nn.MultiheadAttention's attn_mask True = blocked: a mask read in the other "
            "convention blocks exactly the keys it should allow. Invert it: ~mask.",
            lambda a: a.masked(lambda m: ~m, unless=a.additive)),
    Mistake("additive_mask_as_keep", "the attention with the additive mask used as a keep-mask",
            "An additive mask is 0 where a query may attend and -inf where it may not, so read "
            "as a keep-mask it blocks the allowed keys: add it to the scores, or pass mask == 0 "
            "as the keep-mask.", lambda a: a.masked(lambda m: ~m, unless=not a.additive)),
    Mistake("mask_transposed", "the attention with mask.transpose(-2, -1)", _MASK_T,
            lambda a: a.masked(lambda m: m.mT)),
    Mistake("mask_transposed", "the attention with mask.T, every dim of the mask reversed",
            _MASK_T, lambda a: a.masked(_reversed)),
    Mistake("mask_fill_zero", "masked_fill(mask == 0, 0) then softmax: a fill of 0",
            "exp(0) = 1 is not small, so blocked keys keep their weight, as any key whose score "
            "is 0: fill with torch.finfo(scores.dtype).min.", lambda a: a.masked(fill=0.0)),
    Mistake("mask_after_softmax", "the softmax with the blocked weights zeroed after it",
            "Rows no longer sum to 1: the blocked keys' weight is lost. Mask the scores before "
            "the softmax.", _zeroed_after),
    Mistake("uniform_rows", "masked_fill(mask == 0, -1e9) then softmax: rows with no key uniform",
            "A query with every key blocked outputs the mean of V although it may attend to "
            "nothing; attn_lib and SDPA return zeros.", lambda a: a.masked(fill=-1e9)),
    Mistake("nan_rows", "masked_fill(mask == 0, float('-inf')) then softmax: rows with no key NaN",
            "softmax of a row of -inf is 0/0, and NaN spreads to the loss: fill with finfo.min "
            "and zero those rows, as attn_lib does.", lambda a: a.masked(fill=-math.inf)),
    Mistake("dropout_on", "the weights after dropout, left on",
            "F.dropout(x, p) has training=True by default and nn.Dropout is on until model.eval():"
            " it zeroes weights at random and multiplies the others by 1/(1 − p), so rows sum to 1"
            " only on average. To evaluate, call model.eval() (or pass training=False)."),
    # Around the attention: text that the errors of attn_lib.checks and the checkers quote.
    Mistake("fill_overflow", "masked_fill(mask == 0, -1e9) on float16 scores",
            "float16 holds numbers only down to -65504, so masked_fill refuses the article's "
            "-1e9 there: take the fill from the dtype, torch.finfo(scores.dtype).min."),
    Mistake("mask_not_unsqueezed", "a (B, L_k) padding mask used as it is",
            "Against (B, L_q, L_k) scores a (B, L_k) padding mask does not fit when B ≠ L_q, "
            "and is silently read as queries × keys, (L_q, L_k), when B = L_q. Add the query "
            "axis: mask.unsqueeze(1) → ({B}, 1, {L_k}), or attn_lib.padding_mask(lengths)."),
    Mistake("padded_query_rows", "a padding mask on both axes, queries and keys",
            "The rows of padded queries then have no allowed key: NaN with a -inf fill, uniform "
            "with -1e9. Block the padded keys only, (B, 1, L_k), and leave padded queries out of "
            "the loss."),
    Mistake("masks_or", "keep-masks combined with |",
            "A key is then allowed if either mask allows it. Combine keep-masks with &: a key "
            "is allowed only if every mask allows it."),
    Mistake("causal_ignored", "a causal mask left out",
            "Without it each query sees the keys after it, the future: & the padding mask with "
            "the lower triangle, torch.ones(L, L, dtype=torch.bool).tril()."),
    Mistake("bitwise_not_int", "~mask on an integer 0/1 mask",
            "On integers ~ is a bitwise not: 1 becomes -2 and 0 becomes -1, never a 0/1 mask. "
            "Compare instead: mask == 0, or mask.bool() first."),
    Mistake("keep_mask_to_mha", "a keep-mask passed to nn.MultiheadAttention as attn_mask",
            "MHA reads True as blocked: each query attends only to the keys it should not see, "
            "and a query allowed every key gets none (NaN). Invert it: keep == 0."),
    Mistake("float_mask_added", "a 0/1 float mask passed to PyTorch's attention",
            "nn.MultiheadAttention and SDPA add a float mask to the scores: a 1 only nudges a "
            "score and a 0 blocks nothing. A float mask is 0 where a query may attend and -inf "
            "where it may not; simpler, pass a bool mask."),
    Mistake("key_transposed", "key passed as Kᵀ, (…, d_k, L_k)",
            "The key looks transposed already: pass K itself, (…, L_k, d_k); attention "
            "transposes it when it computes Q Kᵀ."),
    Mistake("linear_not_transposed", "x @ layer.weight: nn.Linear's weight not transposed",
            "nn.Linear(d_model, d_k) stores its weight as (d_k, d_model), the transpose of the "
            "article's W_Q: the product is x @ layer.weight.T. Without .T it runs only when "
            "d_k = d_model, and then silently gives wrong numbers."),
    Mistake("bias_missing", "x @ layer.weight.T without layer.bias",
            "nn.Linear has bias=True by default: the layer adds layer.bias after the product."),
    Mistake("bias_none", "layer.bias added when it is None",
            "A layer built with bias=False has .bias = None, which cannot be added to a tensor: "
            "add the bias only when it exists (if layer.bias is not None)."),
    Mistake("k_bias_no_shift", "no shift: a bias on K leaves the scores as they are",
            "A bias on K moves row i of the scores by q_i·b_K / √d_k, the same for every key j; "
            "what does not change is the weights: softmax ignores a constant added to a row."),
    Mistake("no_out_proj", "the attention output without mha.out_proj",
            "nn.MultiheadAttention applies one more Linear(E, E), out_proj (multi-head "
            "attention's W^O, kept with one head): that is why the article's comparison is off "
            "by about 1 while the weights agree. Finish with mha.out_proj(output)."),
    Mistake("out_proj_transposed", "out_proj with its weight transposed",
            "A Linear stores its weight as (out, in) and computes x Wᵀ + b: call the layer "
            "itself, mha.out_proj(output)."),
    Mistake("out_proj_no_bias", "out_proj with its weight but not its bias",
            "mha.out_proj(output) applies both, the weight and the bias."),
    Mistake("in_proj_bias_missing", "Q, K and V without mha.in_proj_bias",
            "Its slices [0:E], [E:2E], [2E:3E] are b_Q, b_K, b_V, in the order of the weight's "
            "rows: add them, or use F.linear(x, W, b)."),
    Mistake("qk_swapped", "the attention with W_Q and W_K swapped",
            "Rows [0:E] of in_proj_weight are W_Q, [E:2E] W_K, [2E:3E] W_V: "
            "mha.in_proj_weight.chunk(3) gives them in that order."),
)  # fmt: skip


def sizes_of(shapes: QKVShapes) -> dict[str, int]:
    """B and H (where present), L_q, L_k, d_k, d_v, from check_qkv's sizes."""
    return dict(zip(("B", "H"), shapes.batch)) | {"L_q": shapes.L_q, "L_k": shapes.L_k,
                                                   "d_k": shapes.d_k, "d_v": shapes.d_v}  # fmt: skip


def find(code: str) -> Mistake:
    """The first row of :data:`MISTAKES` with this code (KeyError if none has it)."""
    return _FIRST[code]


def why(code: str, **sizes: int) -> str:
    """The explanation of mistake ``code``, with these sizes (their symbols where not given)."""
    return _FIRST[code].why.format(**(_SYMBOLS | sizes))


_FIRST = {m.code: m for m in reversed(MISTAKES)}
