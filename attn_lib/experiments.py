"""Seeded experiments behind notebooks 01–04: pure functions that return numbers.

Every random draw comes from a local ``torch.Generator`` seeded by the ``seed``
argument, so the caller's global random state is never touched and the same
arguments always give the same numbers. Torch only: the dashboards in
``attn_lib.widgets`` draw what these functions return.

- 01 attention as retrieval: :func:`retrieve`, :func:`path_lengths`,
  :func:`pair_counts`, :func:`permutation_deviation`, :func:`word_order_outputs`.
- 02 queries, keys and values: :func:`qkv_example`, :func:`token_qkv`,
  :func:`self_score_max_fraction`, :func:`dot_and_cosine`.
- 03 scaling and saturation: :func:`score_variance_table`,
  :func:`variance_estimate_spread`, :func:`default_init_score_variance`,
  :func:`score_samples`, :func:`saturation_curves`, :func:`saturation_row`.
- 04 cost: :func:`attention_cost`, :func:`cost_curves`, :func:`crossover_length`.

Shape legend: B batch, L_q query length, L_k key length, d_model, d_k, d_v;
L a sequence length when L_q = L_k.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from .core import SingleHeadAttention
from .lessons._experiments import (
    PADDING_SIDES,
    AttentionCost,
    _dim,
    _int,
    _positive,
    _vector,
    attention_cost,
    crossover_length,
    default_linear_weight,
    keep_from_lengths,
    seeded_attention,
)
from .positional import sinusoidal_positional_encoding
from .shapes import ShapeError, fmt_shape

__all__ = [
    "AttentionCost",
    "PairCounts",
    "PathLengths",
    "Retrieval",
    "WordOrderResult",
    "attention_cost",
    "crossover_length",
    "default_linear_weight",
    "pair_counts",
    "path_lengths",
    "permutation_deviation",
    "retrieve",
    "seeded_attention",
    "word_order_outputs",
]


# ---------------------------------------------------------------------------
# 01: the library analogy, path lengths, permutation equivariance
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Retrieval:
    """What one query retrieves from a library.

    Attributes:
        scores: (n_books,), q·k_j, the relevance of each book (dimensionless).
        weights: (n_books,), softmax(scores / temperature): how much of each book is read.
        blended: (d_v,), Σ_j weights_j · value_j, the mix of the books' contents.
        temperature: the temperature used.
    """

    scores: torch.Tensor
    weights: torch.Tensor
    blended: torch.Tensor
    temperature: float


def retrieve(
    query: torch.Tensor | Sequence[float],
    keys: torch.Tensor,
    values: torch.Tensor,
    temperature: float = 1.0,
) -> Retrieval:
    """Attention as a library search: score every book, soften the scores, blend the contents.

    A low temperature takes the best book (weights → one-hot; tied books share);
    a high one reads every book alike (weights → uniform); in between it takes the
    best and skims the close ones. The scores are raw dot products: this is the
    intuition of notebook 01, before the √d_k of notebook 03.

    Args:
        query: (d_k,), what the reader looks for, one number per key feature.
        keys: (n_books, d_k), each book's catalogue entry over the same features.
        values: (n_books, d_v), each book's contents.
        temperature: > 0; the scores are divided by it before the softmax.

    Returns:
        :class:`Retrieval` with scores, weights (n_books,) and blended (d_v,), in the
        dtype of keys.

    Raises:
        ShapeError: a query that is not 1-D, keys or values not 2-D, no books,
            widths or book counts that do not match.
        ValueError: temperature not finite and > 0; NaN or inf in the query.
        TypeError: keys or values not floating-point tensors.

    Source: article sections 1.1 (the library) and 2.1 (Q, K, V as need, index, content).
    """
    T = _positive("temperature", temperature)
    if not (isinstance(keys, torch.Tensor) and isinstance(values, torch.Tensor)):
        raise TypeError("keys and values must be tensors: (n_books, d_k) and (n_books, d_v).")
    if keys.dim() != 2 or values.dim() != 2 or keys.shape[0] == 0:
        raise ShapeError(
            f"keys {fmt_shape(keys.shape)} and values {fmt_shape(values.shape)} must be "
            f"(n_books, d_k) and (n_books, d_v) with at least one book."
        )
    if not (keys.is_floating_point() and values.is_floating_point()):
        raise TypeError(f"keys and values must be floating point, got {keys.dtype}, {values.dtype}.")
    if keys.shape[0] != values.shape[0]:
        raise ShapeError(
            f"keys has {keys.shape[0]} books but values has {values.shape[0]}; "
            f"each book needs one key row and one value row."
        )
    q = _vector("query", query).to(keys.dtype)
    if q.shape[0] != keys.shape[1]:
        raise ShapeError(
            f"query has {q.shape[0]} features but the keys have {keys.shape[1]}; "
            f"give one number per key feature."
        )
    scores = keys @ q  # (n_books,)
    weights = torch.softmax(scores / T, dim=-1)  # (n_books,)
    return Retrieval(scores=scores, weights=weights, blended=weights @ values, temperature=T)


@dataclass(frozen=True)
class PathLengths:
    """Steps (or layers) for information to travel between two positions |i − j| apart.

    Attributes:
        distance: (L − 1,) int64, |i − j| = 1 … L − 1.
        recurrent: (L − 1,), |i − j| steps of the recurrence.
        convolution: (L − 1,), ⌈|i − j| / (k − 1)⌉ stacked width-k convolutions.
        self_attention: (L − 1,), 1 step.
        kernel_size: k.
    """

    distance: torch.Tensor
    recurrent: torch.Tensor
    convolution: torch.Tensor
    self_attention: torch.Tensor
    kernel_size: int


def path_lengths(L: int, kernel_size: int = 3) -> PathLengths:
    """Path length between positions i and j of a length-L sequence, against |i − j|.

    A recurrent net passes information one step at a time (|i − j| steps). One
    width-k convolution (stride 1, no dilation) reaches k − 1 positions further, so m
    stacked layers reach m(k − 1): ⌈|i − j|/(k − 1)⌉ layers. Self-attention
    connects every pair directly: 1 step, whatever the distance.

    Args:
        L: sequence length (≥ 2). kernel_size: k (≥ 2).

    Returns:
        :class:`PathLengths`, int64 tensors of shape (L − 1,).

    Raises:
        ShapeError: L < 2. ValueError: kernel_size < 2 (a width-1 convolution never
            mixes positions).

    Source: Vaswani et al. 2017, sec. 4 and Table 1 (maximum path lengths); article 1.2.
    """
    L = _dim("L", L, 2)
    k = _int("kernel_size", kernel_size, 2)
    distance = torch.arange(1, L)  # (L − 1,)
    return PathLengths(
        distance=distance,
        recurrent=distance.clone(),
        convolution=(distance + k - 2) // (k - 1),  # ceil(distance / (k − 1)) in integers
        self_attention=torch.ones_like(distance),
        kernel_size=k,
    )


@dataclass(frozen=True)
class PairCounts:
    """Work per layer against sequence length.

    Attributes:
        L: (n,) int64 lengths 1 … max_L.
        self_attention: (n,), L² scores (every query with every key).
        recurrent: (n,), L state updates.
    """

    L: torch.Tensor
    self_attention: torch.Tensor
    recurrent: torch.Tensor


def pair_counts(max_L: int) -> PairCounts:
    """Pairs self-attention scores (L²) against the L steps of a recurrent net, for L = 1 … max_L.

    Raises:
        ShapeError: max_L < 1.

    Source: article section 1.2 ("L tokens need L² pairwise interactions").
    """
    L = torch.arange(1, _dim("max_L", max_L) + 1)  # (n,)
    return PairCounts(L=L, self_attention=L * L, recurrent=L.clone())


def _check_permutation(perm: torch.Tensor | Sequence[int], L: int) -> torch.Tensor:
    p = torch.as_tensor(perm)
    if p.dim() != 1 or p.dtype in (torch.bool,) or p.is_floating_point():
        raise ShapeError(f"perm must be a 1-D integer tensor, got {p.dtype} {fmt_shape(p.shape)}.")
    if p.numel() != L or not torch.equal(p.sort().values, torch.arange(L)):
        raise ValueError(f"perm must be a permutation of 0 … {L - 1}, got {p.tolist()}.")
    return p.long()


def permutation_deviation(
    model: SingleHeadAttention,
    x: torch.Tensor,
    perm: torch.Tensor | Sequence[int],
    mask: torch.Tensor | None = None,
) -> float:
    """max |f(x[perm]) − f(x)[perm]|: how far self-attention is from permutation-equivariant.

    Without positions and without a mask this is float round-off (≈ 1e-7 in float32):
    permuting the tokens permutes the outputs the same way. A mask tied to positions
    (a causal mask) stays put while the tokens move, so it breaks equivariance.

    Args:
        model: a SingleHeadAttention.
        x: (L, d_model) or (B, L, d_model), floating point.
        perm: (L,), a permutation of the positions 0 … L − 1.
        mask: a keep-mask for both calls, e.g. attn_lib.causal_mask(L), or None.

    Returns:
        The largest absolute difference, a float (no gradients).

    Raises:
        ShapeError: x not 2-D or 3-D, a perm that is not 1-D of integers.
        ValueError: perm not a permutation of 0 … L − 1.
        As SingleHeadAttention.forward for a bad x or mask.

    Source: article section 1.2; Vaswani et al. 2017, sec. 3.5 (why positions are added).
    """
    if not isinstance(x, torch.Tensor) or x.dim() not in (2, 3):
        shape = fmt_shape(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ShapeError(f"x must be (L, d_model) or (B, L, d_model), got {shape}.")
    p = _check_permutation(perm, x.shape[-2])
    with torch.no_grad():
        out = model(x, mask)  # (…, L, d_v)
        out_of_permuted = model(x[..., p, :], mask)  # (…, L, d_v)
    return (out_of_permuted - out[..., p, :]).abs().max().item()


@dataclass(frozen=True)
class WordOrderResult:
    """The same tokens in two orders, through the same attention.

    Attributes:
        tokens_a, tokens_b: the two sentences' tokens.
        positions: whether sinusoidal positional encodings were added.
        output_a: (L, d_v), output_b: (L, d_v), float32.
        match: match[i] is the position in b of the token at position i of a.
        deviation: (L,), max |output_a[i] − output_b[match[i]]| per token of a.
    """

    tokens_a: tuple[str, ...]
    tokens_b: tuple[str, ...]
    positions: bool
    output_a: torch.Tensor
    output_b: torch.Tensor
    match: tuple[int, ...]
    deviation: torch.Tensor


def _match_tokens(a: Sequence[str], b: Sequence[str]) -> tuple[int, ...]:
    if sorted(a) != sorted(b):
        raise ValueError(
            f"the two sentences must use the same tokens in another order, got {list(a)} and "
            f"{list(b)}."
        )
    unused = list(range(len(b)))
    match = []
    for token in a:
        j = next(j for j in unused if b[j] == token)  # repeated tokens pair up in order
        unused.remove(j)
        match.append(j)
    return tuple(match)


def word_order_outputs(
    tokens_a: Sequence[str],
    tokens_b: Sequence[str],
    embeddings: Mapping[str, torch.Tensor],
    model: SingleHeadAttention,
    *,
    positions: bool = False,
) -> WordOrderResult:
    """Run two orderings of the same tokens (我爱你 / 你爱我) through one self-attention.

    Each token gets the same embedding in both sentences. Without positions, every
    token's output is the same in both (self-attention is permutation-equivariant: it
    cannot tell the sentences apart); adding sinusoidal positional encodings to the
    embeddings makes the outputs differ.

    Args:
        tokens_a, tokens_b: the two sentences, the same tokens in another order
            (e.g. from attn_lib.data.tokenize).
        embeddings: token → (d_model,) vector (e.g. attn_lib.data.embedding_table).
        model: a SingleHeadAttention with the same d_model.
        positions: add sinusoidal_positional_encoding(L, d_model) to the embeddings.

    Returns:
        :class:`WordOrderResult`.

    Raises:
        ValueError: empty sentences, or sentences that are not reorderings of each other.
        KeyError: a token without an embedding.
        ShapeError: as SingleHeadAttention for embeddings of the wrong width.

    Source: article section 1.2 (我爱你 and 你爱我); Vaswani et al. 2017, sec. 3.5.
    """
    a, b = tuple(tokens_a), tuple(tokens_b)
    if len(a) == 0 or len(b) == 0:
        raise ValueError("both sentences need at least one token, got an empty token list.")
    match = _match_tokens(a, b)
    missing = [t for t in a if t not in embeddings]
    if missing:
        raise KeyError(f"no embedding for token(s) {missing}; build the table from both sentences.")
    x_a = torch.stack([embeddings[t] for t in a])  # (L, d_model)
    x_b = torch.stack([embeddings[t] for t in b])  # (L, d_model)
    if positions:
        pe = sinusoidal_positional_encoding(len(a), x_a.shape[-1], dtype=x_a.dtype)  # (L, d_model)
        x_a, x_b = x_a + pe, x_b + pe
    with torch.no_grad():
        out_a, out_b = model(x_a), model(x_b)  # (L, d_v) each
    deviation = (out_a - out_b[list(match)]).abs().amax(dim=-1)  # (L,)
    return WordOrderResult(
        tokens_a=a,
        tokens_b=b,
        positions=bool(positions),
        output_a=out_a,
        output_b=out_b,
        match=match,
        deviation=deviation,
    )


# ---------------------------------------------------------------------------
# Notebook 07: masks (article sections 3.2 and 4.1)
# ---------------------------------------------------------------------------


__all__ += [  # this section's public names, added to the list at the top
    "PADDING_SIDES",
    "keep_from_lengths",
]
