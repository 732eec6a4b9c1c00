"""Notebook 01's data, experiments and checkers (torch only).

Used by notebook 01 (Attention as retrieval), sections "1 · A library search (1.1)", "2 ·
Temperature: take the best, or read everything", "6 · Path length: one step between any two
positions (1.2)", "7 · Word order: equivariant, not invariant (1.2)", "8 · Check yourself".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch

from ..core import SingleHeadAttention
from ..positional import sinusoidal_positional_encoding
from ..shapes import ShapeError, fmt_shape
from ._checking import (
    _SEED,
    CheckResult,
    _call,
    _call_failed,
    _close,
    _finish,
    _name_of,
    _not_yet,
    _number,
    _passed,
    _raised,
    _tensors,
)
from ._experiments import _dim, _int, _positive, _vector, seeded_attention

# A key says how the catalogue describes a book (the article: its title and index);
# a value is what is inside it (the article: the book's content).
KEY_FEATURES = ("maths", "deep learning", "history", "cooking")
VALUE_FEATURES = ("equations", "code", "dates", "recipes", "stories")

# title; key over KEY_FEATURES (0 = not about it, 1 = all about it);
# value over VALUE_FEATURES (share of the book's pages, summing to 1).
_BOOKS = (
    ("Mathematics for Deep Learning", (0.9, 0.9, 0.0, 0.0), (0.6, 0.3, 0.0, 0.0, 0.1)),
    ("Linear Algebra", (1.0, 0.1, 0.0, 0.0), (0.9, 0.0, 0.0, 0.0, 0.1)),
    ("Deep Learning in Practice", (0.3, 1.0, 0.0, 0.0), (0.1, 0.8, 0.0, 0.0, 0.1)),
    ("A History of AI", (0.1, 0.6, 0.9, 0.0), (0.0, 0.1, 0.4, 0.0, 0.5)),
    ("The Silk Road", (0.0, 0.0, 1.0, 0.2), (0.0, 0.0, 0.5, 0.1, 0.4)),
    ("Home Cooking", (0.0, 0.0, 0.1, 1.0), (0.0, 0.0, 0.0, 0.8, 0.2)),
    ("Kitchen Chemistry", (0.5, 0.0, 0.0, 0.8), (0.3, 0.0, 0.0, 0.5, 0.2)),
)

# The article's reader wants "a book on the mathematical foundations of deep learning".
ARTICLE_QUERY = {"maths": 1.0, "deep learning": 1.0}


@dataclass(frozen=True)
class Library:
    """A small library for notebook 01: n_books = 7, d_k = 4 key features, d_v = 5 value features.

    Attributes:
        titles: one per book.
        key_features: the names of the key columns (:data:`KEY_FEATURES`).
        value_features: the names of the value columns (:data:`VALUE_FEATURES`).
        keys: (n_books, d_k) float32 in [0, 1], how the catalogue describes each book.
        values: (n_books, d_v) float32, each row the shares of a book's pages (sum 1), so
            any blend with weights summing to 1 is again a set of shares.
    """

    titles: tuple[str, ...]
    key_features: tuple[str, ...]
    value_features: tuple[str, ...]
    keys: torch.Tensor
    values: torch.Tensor


def library_books() -> Library:
    """The books of notebook 01's library, keys and values as tensors.

    Returns:
        :class:`Library` with keys (7, 4) and values (7, 5), float32.

    Source: article section 1.1 (the library) and 2.1 (Q: the need, K: title and
        index, V: the content).
    """
    return Library(
        titles=tuple(title for title, _, _ in _BOOKS),
        key_features=KEY_FEATURES,
        value_features=VALUE_FEATURES,
        keys=torch.tensor([key for _, key, _ in _BOOKS]),  # (n_books, d_k)
        values=torch.tensor([value for _, _, value in _BOOKS]),  # (n_books, d_v)
    )


def library_query(features: Mapping[str, float] | None = None) -> torch.Tensor:
    """A query vector over :data:`KEY_FEATURES` from named amounts; missing features are 0.

    Args:
        features: e.g. {"maths": 1.0, "deep learning": 0.5}; default :data:`ARTICLE_QUERY`.

    Returns:
        (d_k,) = (4,), float32.

    Raises:
        ValueError: an unknown feature name, or an amount that is not a finite number.

    Source: article section 1.1.
    """
    features = ARTICLE_QUERY if features is None else features
    unknown = [name for name in features if name not in KEY_FEATURES]
    if unknown:
        raise ValueError(f"unknown feature(s) {unknown}; the key features are {KEY_FEATURES}.")
    amounts = [float(features.get(name, 0.0)) for name in KEY_FEATURES]
    if not all(math.isfinite(a) for a in amounts):
        raise ValueError(f"feature amounts must be finite numbers, got {dict(features)}.")
    return torch.tensor(amounts)  # (d_k,)


# The same tokens in two orders (article section 1.2). The English "I love you" /
# "you love me" would not do: "I" and "me" are different tokens.
WORD_ORDER_PAIRS = (("我爱你", "你爱我"), ("dog bites man", "man bites dog"))


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
            (e.g. from _examples.tokenize).
        embeddings: token → (d_model,) vector (e.g. _examples.embedding_table).
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


def _retrieve_cases() -> list[tuple[str, torch.Tensor, torch.Tensor, torch.Tensor, float]]:
    """(description, query (d_k,), keys (n, d_k), values (n, d_v), temperature)."""
    lib = library_books()
    g = torch.Generator().manual_seed(_SEED)
    keys, values = torch.randn(5, 3, generator=g), torch.randn(5, 6, generator=g)
    return [
        ("the library, the article's query, T = 1", library_query(), lib.keys, lib.values, 1.0),
        ("the library, the article's query, T = 0.2", library_query(), lib.keys, lib.values, 0.2),
        (
            "the library, history +1 and cooking −1, T = 2",
            library_query({"history": 1.0, "cooking": -1.0}),
            lib.keys,
            lib.values,
            2.0,
        ),
        ("random keys (5, 3) and values (5, 6), T = 0.7", torch.randn(3, generator=g), keys, values, 0.7),
    ]  # fmt: skip


def _retrieval_mistakes() -> list[tuple[str, str, Callable]]:
    def soft(scores: torch.Tensor) -> torch.Tensor:
        return torch.softmax(scores, dim=-1)

    def hard(scores: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.one_hot(scores.argmax(), scores.numel()).to(scores.dtype)

    return [
        (
            "no_temperature",
            (
                "Your weights ignore the temperature: divide the scores by T before the "
                "softmax, softmax(scores / T)."
            ),
            lambda q, k, v, T: soft(k @ q),
        ),
        (
            "temperature_multiplied",
            (
                "Your scores are multiplied by T instead of divided: a high temperature must "
                "flatten the weights, a low one sharpen them. Use softmax(scores / T)."
            ),
            lambda q, k, v, T: soft(k @ q * T),
        ),
        (
            "sum_normalised",
            (
                "Your weights are the scores divided by their sum. That breaks as soon as a "
                "score is negative or the scores sum to 0, and it has no temperature. Softmax "
                "makes every weight positive first (exp), then normalises: softmax(scores / T)."
            ),
            lambda q, k, v, T: (k @ q) / (k @ q).sum(),
        ),
        (
            "hard_max",
            (
                "You take only the best book (weight 1 for the top score, 0 for the rest). That "
                "is the limit T → 0; attention is soft: softmax(scores / T) also reads the close "
                "ones."
            ),
            lambda q, k, v, T: hard(k @ q),
        ),
        (
            "scores_as_weights",
            (
                "You return the scores (divided by T) as the weights, before the softmax. Apply "
                "torch.softmax(scores / T, dim=-1)."
            ),
            lambda q, k, v, T: (k @ q) / T,
        ),
    ]


def check_retrieve(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check a hand-written library search (notebook 01) and name the mistake if any.

    ``fn(query, keys, values, temperature)`` receives query (d_k,), keys (n_books, d_k),
    values (n_books, d_v) (float32 copies) and a temperature > 0, and must return
    ``(weights, blended)``: weights = softmax(keys @ query / temperature), shape
    (n_books,), and blended = weights @ values, shape (d_v,) — as
    retrieve computes them. Cases: notebook 01's library with three
    queries and temperatures, and random keys (5, 3) and values (5, 6).

    Args:
        fn: the function to check.
        verbose: print the feedback paragraph.

    Returns:
        CheckResult; ``mistake`` is None or one of: "not_written", "error", "bad_return",
        "no_temperature", "temperature_multiplied", "sum_normalised", "hard_max",
        "scores_as_weights", "blend_keys", "blend_unweighted", "blend_wrong", "unknown".

    Source: article section 1.1; retrieve.
    """
    name = _name_of(fn)
    outcomes = []
    for desc, q, k, v, T in _retrieve_cases():
        got, err = _call(fn, q.clone(), k.clone(), v.clone(), T)
        if err is not None:
            return _call_failed(
                name,
                err,
                f"On the case '{desc}' your function raised {_raised(err)}. The "
                f"inputs were query {tuple(q.shape)}, keys {tuple(k.shape)}, "
                f"values {tuple(v.shape)}.",
                verbose,
            )
        if not _tensors(got, 2):
            return _not_yet(
                "bad_return",
                f"{name} should return two tensors, (weights, blended).",
                verbose,
            )
        outcomes.append((desc, q, k, v, T, got[0].detach(), got[1].detach()))

    for desc, q, k, v, T, w, _ in outcomes:
        ref = retrieve(q, k, v, T)
        if _close(w, ref.weights):
            continue
        for code, why, make in _retrieval_mistakes():
            if all(_close(w2, make(q2, k2, v2, T2)) for _, q2, k2, v2, T2, w2, _ in outcomes):
                return _not_yet(code, why, verbose)
        shape = tuple(w.shape)
        return _not_yet(
            "unknown",
            f"On the case '{desc}' your weights (shape {shape}) differ from "
            f"softmax(keys @ query / T) (shape {tuple(ref.weights.shape)}): one weight per "
            f"book, positive, summing to 1. Compare your code with those three steps.",
            verbose,
        )

    for desc, q, k, v, T, w, b in outcomes:
        ref = retrieve(q, k, v, T)
        if _close(b, ref.blended):
            continue
        if b.shape == (k.shape[1],) and k.shape[1] != v.shape[1]:
            code, why = "blend_keys", (
                f"Your blend has {k.shape[1]} numbers, one per key feature: you blended the keys. "
                f"The blend mixes the books' contents, the values: weights @ values, "
                f"{v.shape[1]} numbers."
            )
        elif _close(b, v.mean(dim=0)):
            code, why = "blend_unweighted", (
                "Your blend is the plain average of all the values; weight each book's value "
                "by its attention weight: weights @ values."
            )
        else:
            code, why = "blend_wrong", (
                f"Your weights are right, but the blend is not weights @ values (shape "
                f"{tuple(ref.blended.shape)}): Σ_j weights[j] · values[j]."
            )
        return _finish(False, code, f"Not yet (case '{desc}'). {why}", verbose)

    return _passed(
        f"{name} gives the same weights and blend as attn_lib.lessons.nb01_retrieval.retrieve "
        f"on all {len(outcomes)} cases, at temperatures from 0.2 to 2.",
        verbose,
    )


# (L, permutation); none is its own inverse, so perm and its inverse give different answers.
_PERMUTATION_CASES = ((4, (1, 2, 3, 0)), (5, (2, 0, 4, 1, 3)), (3, (2, 0, 1)))


def check_permuted_output(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check a prediction of self-attention's output on a permuted sentence (equivariance).

    ``fn(output, perm)`` receives output = f(x), shape (L, d_v), of a self-attention f with
    no positions and no mask, and perm (L,) int64, and must return f(x[perm]) without
    running f: the outputs permute as the tokens do, so the answer is output[perm]
    (row i of the new output is the old output of the token now at position i, old
    position perm[i]). The checker runs a seeded SingleHeadAttention(8, 8, d_v=6) on
    random x for three permutations, none its own inverse.

    Args:
        fn: the function to check.
        verbose: print the feedback paragraph.

    Returns:
        CheckResult; ``mistake`` is None or one of: "not_written", "error", "bad_return",
        "inverse_permutation", "unchanged", "columns_permuted", "unknown".

    Source: article section 1.2; permutation_deviation.
    """
    name = _name_of(fn)
    model = seeded_attention(8, 8, d_v=6, seed=_SEED)
    g = torch.Generator().manual_seed(_SEED)
    for L, perm_tuple in _PERMUTATION_CASES:
        perm = torch.tensor(perm_tuple)
        x = torch.randn(L, 8, generator=g)  # (L, d_model)
        with torch.no_grad():
            out, actual = model(x), model(x[perm])  # (L, d_v) each
        got, err = _call(fn, out.clone(), perm.clone())
        if err is not None:
            return _call_failed(
                name,
                err,
                f"For perm {list(perm_tuple)} your function raised {_raised(err)}.",
                verbose,
            )
        if not isinstance(got, torch.Tensor):
            return _not_yet("bad_return", f"{name} should return a tensor (L, d_v).", verbose)
        if _close(got.detach(), actual):
            continue
        if _close(got.detach(), out[torch.argsort(perm)]):
            code, why = "inverse_permutation", (
                "You applied the inverse permutation: you sent old row i to position perm[i]. "
                "x[perm] puts the token from old position perm[i] at new position i, and its "
                "output goes with it, so new row i = old row perm[i]: output[perm]."
            )
        elif _close(got.detach(), out):
            code, why = "unchanged", (
                "You returned the output unchanged. That would be permutation *invariance*. "
                "Self-attention is *equivariant*: each token keeps its own output, so the rows "
                "move with the tokens: output[perm]."
            )
        elif tuple(got.shape) == (L, L):
            code, why = "columns_permuted", (
                "You permuted the columns (the d_v features). The tokens are the rows: "
                "output[perm] (or output[perm, :])."
            )
        else:
            code, why = "unknown", (
                f"Your prediction (shape {tuple(got.shape)}) is not what the model gives on "
                f"x[perm] (shape {tuple(actual.shape)}). Reorder the rows of output the way "
                f"x[perm] reorders the tokens."
            )
        return _finish(False, code, f"Not yet (perm {list(perm_tuple)}). {why}", verbose)
    return _passed(
        f"{name} predicts the model's output on the permuted tokens for "
        f"{len(_PERMUTATION_CASES)} permutations without running it: the outputs permute "
        f"exactly as the tokens do.",
        verbose,
    )


_CONV_KERNELS = (2, 3, 4, 5, 7)
_CONV_DISTANCES = range(1, 31)


def check_conv_layers(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check a function giving the number of stacked width-k convolutions on a path |i − j| long.

    ``fn(distance, kernel_size)`` receives ints distance = |i − j| ≥ 1 and kernel_size k ≥ 2
    and must return, as an int, the number of stacked width-k convolutions (stride 1, no
    dilation; each layer reaches k − 1 positions further) after which position j can
    see position i: ⌈distance / (k − 1)⌉, as path_lengths gives.
    Cases: k ∈ {2, 3, 4, 5, 7}, distance 1 … 30.

    Args:
        fn: the function to check.
        verbose: print the feedback paragraph.

    Returns:
        CheckResult; ``mistake`` is None or one of: "not_written", "error", "bad_return",
        "not_integer", "floor", "divide_by_k", "plus_one", "half_width", "unknown".

    Source: article section 1.2; Vaswani et al. 2017, Table 1.
    """
    name = _name_of(fn)
    answers: dict[tuple[int, int], object] = {}
    for k in _CONV_KERNELS:
        for d in _CONV_DISTANCES:
            answers[d, k], err = _call(fn, d, k)
            if err is not None:
                return _call_failed(
                    name,
                    err,
                    f"For distance {d} and kernel_size {k} your function raised {_raised(err)}.",
                    verbose,
                )
    values: dict[tuple[int, int], float] = {}
    for (d, k), a in answers.items():
        a, is_number = _number(a)
        if not is_number:
            return _not_yet(
                "bad_return",
                f"For distance {d} and kernel_size {k} {name} returned "
                f"{type(a).__name__}; return a number of layers (an int).",
                verbose,
            )
        values[d, k] = float(a)
    reference = {}
    for k in _CONV_KERNELS:
        layers = path_lengths(max(_CONV_DISTANCES) + 1, k).convolution  # (L − 1,) for |i − j| = 1 …
        reference.update({(d, k): float(layers[d - 1]) for d in _CONV_DISTANCES})
    if values == reference:
        return _passed(
            f"{name} gives ⌈|i − j| / (k − 1)⌉ layers for every distance 1 … 30 and "
            f"kernel sizes {list(_CONV_KERNELS)}: the path grows linearly with the distance, "
            f"k − 1 times more slowly than a recurrent net's.",
            verbose,
        )
    first = next(key for key in reference if values[key] != reference[key])
    d, k = first
    fractional = [key for key, a in values.items() if not a.is_integer()]
    mistakes = [
        ("floor", ("You round down: with |i − j| = 5 and k = 3 two layers reach only 4 "
         "positions, so a third is needed. Round up: math.ceil(distance / (k - 1)), or "
         "(distance + k - 2) // (k - 1) in integers."),
         lambda d, k: d // (k - 1)),
        ("divide_by_k", ("You divide by k. One width-k layer covers k positions, itself and "
         "k − 1 others, so it moves information k − 1 positions: ⌈distance / (k − 1)⌉."),
         lambda d, k: math.ceil(d / k)),
        ("divide_by_k", ("You divide by k (and round down). One width-k layer moves "
         "information k − 1 positions: ⌈distance / (k − 1)⌉."),
         lambda d, k: d // k),
        ("plus_one", ("You add one layer too many when the distance is a multiple of k − 1 "
         "(distance // (k − 1) + 1). Round up instead: ⌈distance / (k − 1)⌉."),
         lambda d, k: d // (k - 1) + 1),
        ("half_width", ("You count (k − 1)/2 positions per layer, the reach of a centred "
         "window on each side. This exercise counts a window that reaches k − 1 positions "
         "back (as in the notebook): ⌈distance / (k − 1)⌉."),
         lambda d, k: math.ceil(2 * d / (k - 1))),
    ]  # fmt: skip
    if fractional:
        return _not_yet(
            "not_integer",
            f"For distance {fractional[0][0]} and kernel_size {fractional[0][1]} you "
            f"returned {values[fractional[0]]:g} layers; layers come in whole numbers. Round "
            f"up: math.ceil(distance / (k - 1)).",
            verbose,
        )
    for code, why, make in mistakes:
        if all(values[key] == make(*key) for key in values):
            return _not_yet(code, why, verbose)
    return _not_yet(
        "unknown",
        f"For distance {d} and kernel_size {k} you gave {values[first]:g} layers; "
        f"the answer is {reference[first]:g} = ⌈{d} / {k - 1}⌉.",
        verbose,
    )
