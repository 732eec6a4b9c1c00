"""Experiment helpers shared by several notebooks (torch only).

- a list of sizes, a seeded generator (notebooks 09, 10 and 11);
- the multiply-adds and memory of one attention layer, and the length where attention
  overtakes the projections (notebooks 01 and 10);
- a seeded SingleHeadAttention (notebooks 01 and 04) and nn.Linear's default weight draw (02);
- a batch's keep-mask from its lengths (notebooks 07 and 10);
- torch on one thread, for small tensors (the dashboards, notebooks 06, 09 and 10).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
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


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """torch on one intra-op thread: for small tensors two threads only wait on each other,
    and on a loaded machine far longer than one thread computes."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _generator(seed: object) -> torch.Generator:
    return torch.Generator().manual_seed(check_size("seed", seed, 0))


@dataclass(frozen=True)
class AttentionCost:
    """Multiply-adds (MACs; FLOPs ≈ 2 × MACs; softmax and scaling not counted) and memory of
    single-head self-attention on (B, L, d_model): projection_macs B·L·d_model·(2 d_k + d_v),
    score_macs B·L²·d_k, weighted_sum_macs B·L²·d_v, score_matrix_bytes of one (B, L, L) matrix."""

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
    """Count the multiply-adds and the L × L memory of single-head self-attention, in Python
    ints; d_k defaults to d_model, d_v to d_k; dtype sets the bytes of the score matrix.

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
    """The L above which attention's L² work exceeds the projections': L* = d_model·(2 d_k +
    d_v)/(d_k + d_v), 1.5·d_model when d_k = d_v. ShapeError for a width < 1.

    Source: Vaswani et al. 2017, Table 1 (the cost model of :func:`attention_cost`).
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
    """The bool (B, L, L) keep-mask of a padded batch: padded keys blocked for every query
    (padded queries still attend), and with ``causal`` the future too.

    Args:
        lengths: (B,) real lengths, each in 0..L. L: the padded length, default max(lengths).
        padding_side: "right" (real tokens first) or "left" (last: with a causal mask, the
            first query rows of a short sequence then have no allowed key).

    Raises:
        TypeError / ValueError / ShapeError: as attn_lib.padding_mask; an unknown
            padding_side; causal not a bool.

    Source: article section 4.1.
    """
    if padding_side not in PADDING_SIDES:
        raise ValueError(f"padding_side must be one of {PADDING_SIDES}, got {padding_side!r}.")
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
    """``torch.manual_seed(seed); SingleHeadAttention(...).eval()``, leaving the caller's global
    random state as it was. Raises as SingleHeadAttention; ValueError for seed < 0."""
    seed = check_size("seed", seed, 0)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = SingleHeadAttention(d_model, d_model if d_k is None else d_k, d_v=d_v, bias=bias)
    return model.eval()


def default_linear_weight(d_out: int, d_in: int, generator: torch.Generator) -> torch.Tensor:
    """The (d_out, d_in) weight ``nn.Linear(d_in, d_out)`` starts with, drawn from ``generator``:
    U(-1/√d_in, 1/√d_in), variance 1/(3 d_in). Source: torch.nn.Linear.reset_parameters."""
    w = torch.empty(d_out, d_in)
    nn.init.kaiming_uniform_(w, a=math.sqrt(5), generator=generator)
    return w
