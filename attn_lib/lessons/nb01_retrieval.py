"""Notebook 01's data, experiments and checkers (torch only).

Used by notebook 01 (Attention as retrieval), sections "1 · A library search" (the books,
retrieve), "4 · Path length" (conv_layers), "5 · Word order" (word_order_outputs) and
"6 · Check yourself".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

import torch

from ..attention import SingleHeadAttention
from ..positional import sinusoidal_positional_encoding
from ._checking import (
    _SEED,
    CheckResult,
    _call,
    _call_failed,
    _close,
    _name_of,
    _not_yet,
    _passed,
    _raised,
    _tensors,
    recording,
)
from ._experiments import seeded_attention

# A key: how the catalogue describes a book (its title and index); a value: what is inside it.
KEY_FEATURES = ("maths", "deep learning", "history", "cooking")
VALUE_FEATURES = ("equations", "code", "dates", "recipes", "stories")

# title; key over KEY_FEATURES (0 to 1); value over VALUE_FEATURES (shares of the pages, sum 1)
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

# The same tokens in two orders (article 1.2); "I love you" / "you love me" are not ("I" ≠ "me").
WORD_ORDER_PAIRS = (("我爱你", "你爱我"), ("dog bites man", "man bites dog"))


class Library(NamedTuple):
    """Seven books: titles, keys (7, d_k = 4) in [0, 1], values (7, d_v = 5) whose rows sum to 1."""

    titles: tuple[str, ...]
    keys: torch.Tensor
    values: torch.Tensor


def library_books() -> Library:
    """The books of notebook 01's library. Source: article sections 1.1 and 2.1."""
    return Library(
        titles=tuple(title for title, _, _ in _BOOKS),
        keys=torch.tensor([key for _, key, _ in _BOOKS]),  # (n_books, d_k)
        values=torch.tensor([value for _, _, value in _BOOKS]),  # (n_books, d_v)
    )


def library_query(features: Mapping[str, float] | None = None) -> torch.Tensor:
    """A query (d_k,) = (4,) over KEY_FEATURES from named amounts (missing ones 0; ValueError
    for a name that is not a key feature)."""
    features = ARTICLE_QUERY if features is None else features
    unknown = [name for name in features if name not in KEY_FEATURES]
    if unknown:
        raise ValueError(f"unknown feature(s) {unknown}; the key features are {KEY_FEATURES}.")
    return torch.tensor([float(features.get(name, 0.0)) for name in KEY_FEATURES])


class Retrieval(NamedTuple):
    """What one query retrieves: scores and weights (n_books,), blended (d_v,), the temperature."""

    scores: torch.Tensor
    weights: torch.Tensor
    blended: torch.Tensor
    temperature: float


def retrieve(
    query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, temperature: float = 1.0
) -> Retrieval:
    """Score every book, soften the scores by a temperature > 0, blend the contents.

    query (d_k,), keys (n_books, d_k), values (n_books, d_v). Source: article 1.1 and 2.1.
    """
    scores = keys @ query  # (n_books,)
    weights = torch.softmax(scores / temperature, dim=-1)  # (n_books,)
    return Retrieval(scores, weights, weights @ values, temperature)  # blended: (d_v,)


def conv_layers(distance: torch.Tensor, kernel_size: int) -> torch.Tensor:
    """⌈distance / (k − 1)⌉ stacked width-k convolutions (stride 1), each reaching k − 1
    positions further, on a path |i − j| long. Source: Vaswani et al. 2017, Table 1."""
    return (distance + kernel_size - 2) // (kernel_size - 1)


class WordOrder(NamedTuple):
    """Two orders of the same tokens through one self-attention: weights (L, L) each; match
    (L,), where token i of a stands in b; deviation (L,), max |output_a[i] − output_b[match[i]]|."""

    weights_a: torch.Tensor
    weights_b: torch.Tensor
    match: torch.Tensor
    deviation: torch.Tensor


def word_order_outputs(
    tokens_a: Sequence[str],
    tokens_b: Sequence[str],
    embeddings: Mapping[str, torch.Tensor],
    model: SingleHeadAttention,
    *,
    positions: bool = False,
) -> WordOrder:
    """Run two orders of the same distinct tokens (我爱你 / 你爱我) through a self-attention.

    Each token has one embedding (d_model,); ``positions`` adds the sinusoidal encoding of its
    place. Source: article section 1.2; Vaswani et al. 2017, sec. 3.5.
    """
    a, b = tuple(tokens_a), tuple(tokens_b)
    if sorted(a) != sorted(b) or len(set(a)) < len(a):
        raise ValueError(f"not the same distinct tokens in another order: {list(a)}, {list(b)}.")
    match = torch.tensor([b.index(t) for t in a])  # (L,)
    x_a, x_b = (torch.stack([embeddings[t] for t in s]) for s in (a, b))  # (L, d_model) each
    if positions:
        pe = sinusoidal_positional_encoding(len(a), x_a.shape[-1])  # (L, d_model)
        x_a, x_b = x_a + pe, x_b + pe
    with torch.no_grad():
        (out_a, w_a), (out_b, w_b) = (model(x, return_attn=True) for x in (x_a, x_b))
    deviation = (out_a - out_b[match]).abs().amax(dim=-1)  # (L,)
    return WordOrder(w_a, w_b, match, deviation)


# ---------------------------------------------------------------------- check yourself


def _retrieve_cases() -> list[tuple[str, torch.Tensor, torch.Tensor, torch.Tensor, float]]:
    """(description, query (d_k,), keys (n, d_k), values (n, d_v), temperature)."""
    lib = library_books()
    g = torch.Generator().manual_seed(_SEED)
    keys, values = torch.randn(5, 3, generator=g), torch.randn(5, 6, generator=g)
    history, g_query = library_query({"history": 1.0, "cooking": -1.0}), torch.randn(3, generator=g)
    return [
        ("the library, the article's query, T = 1", library_query(), lib.keys, lib.values, 1.0),
        ("the library, the article's query, T = 0.2", library_query(), lib.keys, lib.values, 0.2),
        ("the library, history +1 and cooking −1, T = 2", history, lib.keys, lib.values, 2.0),
        ("random keys (5, 3), values (5, 6), T = 0.7", g_query, keys, values, 0.7),
    ]  # fmt: skip


def _soft(s: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return s.softmax(-1), s.softmax(-1) @ v  # weights from scores s, and their blend


def _hard(s: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    w = torch.nn.functional.one_hot(s.argmax(), s.numel()).to(s.dtype)
    return w, w @ v


# (mistake, explanation, the (weights, blended) it returns for query, keys, values, T)
_RETRIEVE_MISTAKES = (
    ("no_temperature", ("Your weights ignore the temperature: divide the scores by T before "
     "the softmax, softmax(scores / T)."), lambda q, k, v, T: _soft(k @ q, v)),
    ("temperature_multiplied", ("Your scores are multiplied by T instead of divided: a high "
     "temperature must flatten the weights, a low one sharpen them. Use softmax(scores / T)."),
     lambda q, k, v, T: _soft(k @ q * T, v)),
    ("sum_normalised", ("Your weights are the scores divided by their sum. That breaks as soon "
     "as a score is negative, and it has no temperature. Softmax makes every weight positive "
     "first (exp), then normalises: softmax(scores / T)."),
     lambda q, k, v, T: ((k @ q) / (k @ q).sum(), (k @ q) / (k @ q).sum() @ v)),
    ("hard_max", ("You take only the best book (weight 1 for the top score, 0 for the rest). "
     "That is the limit T → 0; attention is soft: softmax(scores / T) also reads the close "
     "ones."), lambda q, k, v, T: _hard(k @ q, v)),
    ("scores_as_weights", ("You return the scores (divided by T) as the weights, before the "
     "softmax. Apply torch.softmax(scores / T, dim=-1)."),
     lambda q, k, v, T: ((k @ q) / T, (k @ q) / T @ v)),
    ("blend_keys", ("Your blend has one number per key feature: you blended the keys. The "
     "blend mixes the books' contents, the values: weights @ values."),
     lambda q, k, v, T: (_soft(k @ q / T, v)[0], _soft(k @ q / T, v)[0] @ k)),
    ("blend_unweighted", ("Your blend is the plain average of all the values; weight each "
     "book's value by its attention weight: weights @ values."),
     lambda q, k, v, T: (_soft(k @ q / T, v)[0], v.mean(dim=0))),
)  # fmt: skip


def _check_retrieve(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check ``fn(query, keys, values, temperature)`` → (weights, blended), as retrieve gives;
    ``mistake`` a code of :data:`_RETRIEVE_MISTAKES`, "blend_wrong", "unknown" …"""
    name, cases, got = _name_of(fn), _retrieve_cases(), []
    for desc, q, k, v, T in cases:
        answer, err = _call(fn, q.clone(), k.clone(), v.clone(), T)
        if err is not None:
            why = f"On the case '{desc}' your function raised {_raised(err)}."
            return _call_failed(name, err, why, verbose)
        if not _tensors(answer, 2):
            return _not_yet("bad_return", f"{name} should return (weights, blended).", verbose)
        got.append([t.detach() for t in answer])

    def gives(make: Callable, part: slice = slice(0, 2)) -> bool:
        pairs = zip(cases, got, strict=True)
        return all(
            all(map(_close, answer[part], make(q, k, v, T)[part]))
            for (_, q, k, v, T), answer in pairs
        )

    if gives(solution_my_retrieve):
        return _passed(
            f"{name} gives the same weights and blend as retrieve on all {len(cases)} cases, "
            f"at temperatures from 0.2 to 2.",
            verbose,
        )
    for code, why, make in _RETRIEVE_MISTAKES:
        if gives(make):
            return _not_yet(code, why, verbose)
    if gives(solution_my_retrieve, slice(0, 1)):
        why = "Your weights are right, but the blend is not weights @ values."
        return _not_yet("blend_wrong", why, verbose)
    why = "Your weights differ from softmax(keys @ query / T): one per book, summing to 1."
    return _not_yet("unknown", why, verbose)


# (L, permutation); none is its own inverse, so perm and its inverse give different answers.
_PERMUTATION_CASES = ((4, (1, 2, 3, 0)), (5, (2, 0, 4, 1, 3)), (3, (2, 0, 1)))
# (mistake, explanation, what it returns from output (L, d_v = 6) and perm)
_PERMUTATION_MISTAKES = (
    ("inverse_permutation", ("You applied the inverse permutation: you sent old row i to "
     "position perm[i]. x[perm] puts the token from old position perm[i] at new position i, and "
     "its output goes with it, so new row i = old row perm[i]: output[perm]."),
     lambda out, perm: out[torch.argsort(perm)]),
    ("unchanged", ("You returned the output unchanged. That would be permutation *invariance*. "
     "Self-attention is *equivariant*: each token keeps its own output, so the rows move with "
     "the tokens: output[perm]."), lambda out, perm: out),
    ("columns_permuted", ("You permuted the columns (the d_v features). The tokens are the "
     "rows: output[perm] (or output[perm, :])."), lambda out, perm: out[:, perm]),
)  # fmt: skip


def _check_permuted_output(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check ``fn(output, perm)`` → f(x[perm]) without running f, given output = f(x) (L, d_v);
    ``mistake`` a code of :data:`_PERMUTATION_MISTAKES`, "unknown" …"""
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
            why = f"For perm {list(perm_tuple)} your function raised {_raised(err)}."
            return _call_failed(name, err, why, verbose)
        if not isinstance(got, torch.Tensor):
            return _not_yet("bad_return", f"{name} should return a tensor (L, d_v).", verbose)
        if _close(got.detach(), actual):
            continue
        unknown = ("unknown", "Reorder the rows of output the way x[perm] reorders the tokens.")
        code, why = next(
            (
                (c, w)
                for c, w, make in _PERMUTATION_MISTAKES
                if _close(got.detach(), make(out, perm))
            ),
            unknown,
        )
        return _not_yet(code, f"(perm {list(perm_tuple)}) {why}", verbose)
    return _passed(
        f"{name} predicts the output on the permuted tokens for {len(_PERMUTATION_CASES)} "
        f"permutations without running the model: the outputs permute as the tokens do.",
        verbose,
    )


check_retrieve = recording("my_retrieve", _check_retrieve)
check_permuted_output = recording("predict_permuted_output", _check_permuted_output)


def solution_my_retrieve(query, keys, values, temperature):
    scores = keys @ query  # (n_books,)
    weights = torch.softmax(scores / temperature, dim=-1)  # (n_books,)
    return weights, weights @ values  # (n_books,), (d_v,)


def solution_predict_permuted_output(output, perm):
    return output[perm]  # new position i holds old token perm[i]; its output travels with it
