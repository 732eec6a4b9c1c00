"""Experiment helpers shared by several notebooks (torch only).

- a list of sizes, a choice among names, a seeded generator (notebooks 07, 10 and 11);
- the multiply-adds and memory of one attention layer, and the length where attention
  overtakes the projections (notebooks 01, 04 and 10);
- a seeded SingleHeadAttention (notebooks 01 and 04) and nn.Linear's default weight draw
  (notebooks 02 and 03);
- a batch's keep-mask from its lengths (notebooks 07 and 10).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from ..attention import SingleHeadAttention
from ..checks import ShapeError, check_size
from ..masks import causal_mask, combine_masks, padding_mask


def _dims(name: str, values: Sequence[int]) -> list[int]:
    if isinstance(values, (int, bool)) or len(values) == 0:
        raise ShapeError(f"{name} must be a non-empty sequence of ints ≥ 1, got {values!r}.")
    return [check_size(f"{name}[{i}]", v, error=ShapeError) for i, v in enumerate(values)]


def _generator(seed: object) -> torch.Generator:
    return torch.Generator().manual_seed(check_size("seed", seed, 0))


def _choice(name: str, value: object, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}.")
    return str(value)


@dataclass(frozen=True)
class AttentionCost:
    """Multiply-adds and memory of single-head self-attention on a (B, L, d_model) input.

    Counts are multiply-add operations (MACs; FLOPs ≈ 2 × MACs). The softmax's
    O(B·L²) exponentials and the scaling are not counted.

    Attributes:
        L, d_model, d_k, d_v, batch: the sizes. bytes_per_element: of the dtype.
        projection_macs: B·L·d_model·(2 d_k + d_v), for Q, K and V.
        score_macs: B·L²·d_k, for Q Kᵀ.
        weighted_sum_macs: B·L²·d_v, for weights @ V.
        score_matrix_bytes: B·L²·bytes, one (B, L, L) matrix (scores or weights).
    """

    L: int
    d_model: int
    d_k: int
    d_v: int
    batch: int
    bytes_per_element: int
    projection_macs: int
    score_macs: int
    weighted_sum_macs: int
    score_matrix_bytes: int

    @property
    def attention_macs(self) -> int:
        """score_macs + weighted_sum_macs, the part that grows as L²."""
        return self.score_macs + self.weighted_sum_macs

    @property
    def total_macs(self) -> int:
        """All multiply-adds: projections and attention."""
        return self.projection_macs + self.attention_macs


def _widths(d_model: int, d_k: int | None, d_v: int | None) -> tuple[int, int, int]:
    d_model = check_size("d_model", d_model, error=ShapeError)
    d_k = d_model if d_k is None else check_size("d_k", d_k, error=ShapeError)
    d_v = d_k if d_v is None else check_size("d_v", d_v, error=ShapeError)
    return d_model, d_k, d_v


def attention_cost(
    L: int,
    d_model: int,
    d_k: int | None = None,
    d_v: int | None = None,
    *,
    batch: int = 1,
    dtype: torch.dtype = torch.float32,
) -> AttentionCost:
    """Count the multiply-adds and the L × L memory of single-head self-attention.

    Args:
        L: sequence length (≥ 1). d_model: input width (≥ 1).
        d_k: query/key width (default d_model). d_v: value width (default d_k).
        batch: B (≥ 1). dtype: sets bytes per element of the score matrix.

    Returns:
        :class:`AttentionCost` (Python ints: no overflow).

    Raises:
        ShapeError: a size < 1. TypeError: dtype not a torch.dtype.

    Source: Vaswani et al. 2017, Table 1 (O(n²·d) per self-attention layer); article 1.2.
    """
    L = check_size("L", L, error=ShapeError)
    d_model, d_k, d_v = _widths(d_model, d_k, d_v)
    B = check_size("batch", batch, error=ShapeError)
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype must be a torch.dtype, got {type(dtype).__name__}.")
    nbytes = torch.empty((), dtype=dtype).element_size()
    return AttentionCost(
        L=L,
        d_model=d_model,
        d_k=d_k,
        d_v=d_v,
        batch=B,
        bytes_per_element=nbytes,
        projection_macs=B * L * d_model * (2 * d_k + d_v),
        score_macs=B * L * L * d_k,
        weighted_sum_macs=B * L * L * d_v,
        score_matrix_bytes=B * L * L * nbytes,
    )


def crossover_length(d_model: int, d_k: int | None = None, d_v: int | None = None) -> float:
    """The L above which attention's L² work exceeds the projections' L work.

    L²(d_k + d_v) = L·d_model·(2 d_k + d_v) at L* = d_model·(2 d_k + d_v)/(d_k + d_v):
    1.5·d_model when d_k = d_v, i.e. "about d_model". (Counting only Q Kᵀ against
    the Q and K projections gives 2·d_model; a Transformer layer's output projection
    and feed-forward block push it further out.)

    Raises:
        ShapeError: a width < 1.

    Source: the cost model of :func:`attention_cost`; compare Vaswani et al. 2017, sec. 4
        and Table 1 (O(n²·d) per self-attention layer, O(n·d²) per recurrent layer).
    """
    d_model, d_k, d_v = _widths(d_model, d_k, d_v)
    return d_model * (2 * d_k + d_v) / (d_k + d_v)


PADDING_SIDES = ("right", "left")


def keep_from_lengths(
    lengths: Sequence[int],
    L: int | None = None,
    *,
    causal: bool = False,
    padding_side: str = "right",
) -> torch.Tensor:
    """The keep-mask of a padded batch, at the scores' rank: padding, optionally causal.

    Padded *keys* are blocked for every query (the padding mask is (B, 1, L), so it
    broadcasts over the query rows); padded *queries* are not blocked, they still
    attend to the real keys. With ``causal`` the (L, L) causal mask is combined with
    logical and. Left padding puts the real tokens at the end: combined with a causal
    mask, the first query rows of a short sequence then have no allowed key at all.

    Args:
        lengths: (B,) real lengths, each in 0..L.
        L: the padded length L_q = L_k; default max(lengths).
        causal: also block the future (keys after the query).
        padding_side: "right" (real tokens first) or "left" (real tokens last).

    Returns:
        bool (B, L, L), True = may attend.

    Raises:
        TypeError / ValueError / ShapeError: as attn_lib.padding_mask; an unknown
            padding_side; causal not a bool.

    Source: article section 4.1; attn_lib.padding_mask, causal_mask, combine_masks.
    """
    padding_side = _choice("padding_side", padding_side, PADDING_SIDES)
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be True or False, got {causal!r}.")
    pad = padding_mask(list(lengths), L)  # (B, 1, L): True at real keys
    if padding_side == "left":
        pad = pad.flip(-1)  # the same count of real keys, at the end
    B, L = pad.shape[0], pad.shape[-1]
    masks = [pad, causal_mask(L)] if causal else [pad]  # (B, 1, L) and (L, L)
    return combine_masks(*masks).expand(B, L, L).clone()  # (B, L, L)


def seeded_attention(
    d_model: int,
    d_k: int | None = None,
    *,
    d_v: int | None = None,
    bias: bool = False,
    seed: int = 0,
) -> SingleHeadAttention:
    """A SingleHeadAttention in eval mode whose weights depend only on ``seed``.

    The same numbers as ``torch.manual_seed(seed); SingleHeadAttention(...)``, built
    inside ``torch.random.fork_rng`` so that the caller's global random state is left
    exactly as it was (nn.Linear draws its init from the global generator).

    Raises:
        TypeError / ValueError: as SingleHeadAttention; ValueError for seed < 0.

    Source: article section 3.2 (the module).
    """
    seed = check_size("seed", seed, 0)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = SingleHeadAttention(d_model, d_model if d_k is None else d_k, d_v=d_v, bias=bias)
    return model.eval()


def default_linear_weight(d_out: int, d_in: int, generator: torch.Generator) -> torch.Tensor:
    """The weight ``nn.Linear(d_in, d_out)`` starts with, drawn from ``generator``.

    nn.Linear initialises its weight with ``kaiming_uniform_(w, a=√5)``: U(-b, b) with
    b = gain·√3/√d_in and gain = √(2/(1 + a²)) = √(1/3), so b = 1/√d_in and each entry
    has variance b²/3 = 1/(3 d_in). With the same seed this gives the same numbers
    as ``torch.manual_seed(seed); nn.Linear(d_in, d_out).weight``.

    Args:
        d_out: output width (d_k or d_v). d_in: input width (d_model).
        generator: a torch.Generator (advanced by d_out·d_in draws).

    Returns:
        (d_out, d_in), float32: nn.Linear's storage layout, applied as x @ W.T.

    Source: torch.nn.Linear.reset_parameters; He et al. 2015 (Kaiming init).
    """
    w = torch.empty(d_out, d_in)
    nn.init.kaiming_uniform_(w, a=math.sqrt(5), generator=generator)
    return w
