"""The article's worked example as data, and pure functions the dashboards draw.

Article section 3.1 builds one small example and every later section reuses it:
``torch.manual_seed(42)``, then ``x = torch.randn(2, 4, 8)``, then
``SingleHeadAttention(8, 8)``. :func:`article_example` rebuilds exactly that
(same numbers as the article's code, run in that order) without touching the
caller's random state, and :func:`example_setting` computes the attention
weights of one dashboard setting from it. Torch only: no plotting here.

Shape legend: B batch, L_q query length, L_k key length, d_model, d_k, d_v.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import torch

from .lessons._examples import (
    ARTICLE_BATCH,
    ARTICLE_D_K,
    ARTICLE_D_MODEL,
    ARTICLE_SEED,
    ARTICLE_SEQ_LEN,
    EXAMPLE_LENGTHS,
    MASK_CHOICES,
    QKV_SENTENCE,
    ArticleExample,
    Sentence,
    article_example,
    embed,
    embedding_table,
    example_mask,
    qkv_sentence,
    tokenize,
)

__all__ = [
    "ARTICLE_BATCH",
    "ARTICLE_D_K",
    "ARTICLE_D_MODEL",
    "ARTICLE_QUERY",
    "ARTICLE_SEED",
    "ARTICLE_SEQ_LEN",
    "EXAMPLE_LENGTHS",
    "KEY_FEATURES",
    "MASK_CHOICES",
    "QKV_SENTENCE",
    "VALUE_FEATURES",
    "WORD_ORDER_PAIRS",
    "ArticleExample",
    "Library",
    "Sentence",
    "article_example",
    "embed",
    "embedding_table",
    "example_mask",
    "library_books",
    "library_query",
    "qkv_sentence",
    "tokenize",
]


# ---------------------------------------------------------------------------
# Notebook 01: the library analogy (article sections 1.1 and 2.1)
# ---------------------------------------------------------------------------

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


# ---------------------------------------------------------------------------
# Notebooks 01 and 02: sentences and deterministic token embeddings
# ---------------------------------------------------------------------------

# The same tokens in two orders (article section 1.2). The English "I love you" /
# "you love me" would not do: "I" and "me" are different tokens.
WORD_ORDER_PAIRS = (("我爱你", "你爱我"), ("dog bites man", "man bites dog"))
