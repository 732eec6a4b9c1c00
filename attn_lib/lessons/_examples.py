"""The examples several notebooks share (torch only): the article's example, its seed, sizes,
input and module (notebooks 06 and 08) and its masks (06); the sentences and their deterministic
token embeddings (notebooks 01, 02 and 04).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import torch

from ..attention import SingleHeadAttention
from ..checks import ShapeError, check_size
from ..masks import causal_mask, padding_mask

ARTICLE_SEED = 42
ARTICLE_BATCH = 2
ARTICLE_SEQ_LEN = 4
ARTICLE_D_MODEL = 8
ARTICLE_D_K = 8


@dataclass(frozen=True)
class ArticleExample:
    """The article's input x (B, L, d_model) = (2, 4, 8), its SingleHeadAttention(8, 8) in eval
    mode, and Q, K, V (2, 4, 8) = x projected by W_Q, W_K, W_V. Source: article section 3.1."""

    x: torch.Tensor
    model: SingleHeadAttention
    Q: torch.Tensor
    K: torch.Tensor
    V: torch.Tensor


def article_example() -> ArticleExample:
    """The article's example: seed 42, x = randn(2, 4, 8), then the module; Q, K, V without
    gradients. The caller's global random state is left as it was. Source: article 3.1, 3.3."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(ARTICLE_SEED)
        # Same order as the article: first the input, then the module's weights.
        x = torch.randn(ARTICLE_BATCH, ARTICLE_SEQ_LEN, ARTICLE_D_MODEL)  # (B, L, d_model)
        model = SingleHeadAttention(ARTICLE_D_MODEL, ARTICLE_D_K).eval()
    with torch.no_grad():
        Q = model.W_Q(x)  # (B, L, d_k)
        K = model.W_K(x)  # (B, L, d_k)
        V = model.W_V(x)  # (B, L, d_v)
    return ArticleExample(x=x, model=model, Q=Q, K=K, V=V)


# Real lengths used for the padding example: element 0 is full, element 1 has 2 real tokens.
EXAMPLE_LENGTHS = (4, 2)
MASK_CHOICES = ("none", "padding", "causal")


def example_mask(mask: str, L: int = ARTICLE_SEQ_LEN) -> torch.Tensor | None:
    """The keep-mask "none" (None), "padding" (bool (B, 1, L), lengths EXAMPLE_LENGTHS) or
    "causal" (bool (L, L)); ValueError for another name. Source: article section 4.1."""
    if mask == "none":
        return None
    if mask == "padding":
        return padding_mask(list(EXAMPLE_LENGTHS), max_len=L)  # (B, 1, L)
    if mask == "causal":
        return causal_mask(L)  # (L, L)
    raise ValueError(f"mask must be one of {MASK_CHOICES}, got {mask!r}.")


# Notebook 02's sentence: seven distinct tokens.
QKV_SENTENCE = "a small cat sat on the mat"


def tokenize(sentence: str) -> tuple[str, ...]:
    """Split a sentence on whitespace if it has any, else into characters: "dog bites man" →
    ("dog", "bites", "man"), "我爱你" → ("我", "爱", "你"). TypeError: not a str; ValueError: blank."""
    if not isinstance(sentence, str):
        raise TypeError(f"sentence must be a str, got {type(sentence).__name__}.")
    stripped = sentence.strip()
    tokens = tuple(stripped.split()) if any(c.isspace() for c in stripped) else tuple(stripped)
    if not tokens:
        raise ValueError(f"sentence {sentence!r} has no tokens.")
    return tokens


def embedding_table(
    tokens: Iterable[str], d_model: int = 8, *, seed: int = 0
) -> dict[str, torch.Tensor]:
    """{token: (d_model,) float32}: row r of a seeded N(0, 1) draw for the r-th distinct token
    in sorted order, so a token gets the same vector in every sentence built from one table.

    Raises:
        ValueError: no tokens, or seed < 0. TypeError: a token that is not a str.
        ShapeError: d_model < 1.
    """
    vocabulary = sorted(set(tokens))
    if not vocabulary:
        raise ValueError("tokens is empty: an embedding table needs at least one token.")
    if not all(isinstance(t, str) for t in vocabulary):
        raise TypeError(f"tokens must be strings, got {vocabulary}.")
    d_model = check_size("d_model", d_model, error=ShapeError)
    seed = check_size("seed", seed, 0)
    g = torch.Generator().manual_seed(seed)
    rows = torch.randn(len(vocabulary), d_model, generator=g)  # (V, d_model)
    return dict(zip(vocabulary, rows, strict=True))


def embed(tokens: Sequence[str], table: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """Stack the embeddings of L tokens: (L, d_model). ValueError: none; KeyError: not in table."""
    if len(tokens) == 0:
        raise ValueError("tokens is empty: nothing to embed.")
    missing = [t for t in tokens if t not in table]
    if missing:
        raise KeyError(f"no embedding for {missing}; build the table from every sentence used.")
    return torch.stack([table[t] for t in tokens])  # (L, d_model)


@dataclass(frozen=True)
class Sentence:
    """L tokens and their embeddings x (L, d_model) float32."""

    tokens: tuple[str, ...]
    x: torch.Tensor


def qkv_sentence(d_model: int = 8, *, seed: int = 0) -> Sentence:
    """Notebook 02's sentence, :data:`QKV_SENTENCE`, embedded: x (7, d_model)."""
    tokens = tokenize(QKV_SENTENCE)
    return Sentence(tokens=tokens, x=embed(tokens, embedding_table(tokens, d_model, seed=seed)))
