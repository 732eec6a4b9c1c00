"""The examples several notebooks share (torch only).

- the article's example: its seed, sizes, input and module (notebooks 05, 06 and 08);
- the example's padding lengths and masks (notebooks 05 and 06);
- the sentences and their deterministic token embeddings (notebooks 01, 02 and 04).
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
    """The article's input and module, with the projections it computes.

    Attributes:
        x: (B, L, d_model) = (2, 4, 8), float32, the input.
        model: SingleHeadAttention(8, 8), no bias, in eval mode.
        Q, K: (B, L, d_k) = (2, 4, 8), float32, x projected by W_Q and W_K.
        V: (B, L, d_v) = (2, 4, 8), float32, x projected by W_V.

    Source: article section 3.1.
    """

    x: torch.Tensor
    model: SingleHeadAttention
    Q: torch.Tensor
    K: torch.Tensor
    V: torch.Tensor


def article_example() -> ArticleExample:
    """Rebuild the article's worked example: seed 42, x = randn(2, 4, 8), then the module.

    The global random state is saved and restored, so calling this does not
    change what the caller's next ``torch.randn`` returns.

    Returns:
        ArticleExample with x (2, 4, 8), the module and its Q, K, V (2, 4, 8),
        all float32, computed without gradients.

    Source: article section 3.1 (the setup) and 3.3 (the module call).
    """
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
    """The keep-mask of a named setting, shaped to broadcast over (B, L, L) scores.

    Args:
        mask: "none", "padding" (lengths :data:`EXAMPLE_LENGTHS`) or "causal".
        L: sequence length; for "padding" it must be at least max(EXAMPLE_LENGTHS).

    Returns:
        None, a bool (B, 1, L) padding mask, or a bool (L, L) causal mask.

    Raises:
        ValueError: an unknown mask name.

    Source: article section 4.1 (padding and future masks).
    """
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
    """Split a sentence into tokens: on whitespace if it has any, else one token per character.

    So "dog bites man" → ("dog", "bites", "man") and "我爱你" → ("我", "爱", "你").

    Raises:
        TypeError: not a str. ValueError: no tokens (an empty or blank sentence).
    """
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
    """One fixed random embedding per distinct token, from a seeded generator.

    The vocabulary is sorted and row r of a (V, d_model) N(0, 1) draw goes to the r-th
    token, so the result depends only on the set of tokens, d_model and seed: the same
    token gets the same vector in every sentence built from one table (no hashing, no
    global random state). Build one table from all the sentences you compare.

    Args:
        tokens: any iterable of token strings (repeats are fine).
        d_model: embedding width (≥ 1).
        seed: the generator's seed (≥ 0).

    Returns:
        {token: (d_model,) float32 tensor}, in sorted token order.

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
    """Stack the embeddings of a token sequence: (L, d_model).

    Raises:
        ValueError: no tokens. KeyError: a token missing from the table.
    """
    if len(tokens) == 0:
        raise ValueError("tokens is empty: nothing to embed.")
    missing = [t for t in tokens if t not in table]
    if missing:
        raise KeyError(f"no embedding for {missing}; build the table from every sentence used.")
    return torch.stack([table[t] for t in tokens])  # (L, d_model)


@dataclass(frozen=True)
class Sentence:
    """Tokens and their embeddings.

    Attributes:
        tokens: L token strings. x: (L, d_model) float32, one row per token.
    """

    tokens: tuple[str, ...]
    x: torch.Tensor


def qkv_sentence(d_model: int = 8, *, seed: int = 0) -> Sentence:
    """Notebook 02's sentence, :data:`QKV_SENTENCE`, embedded: x of shape (7, d_model).

    Raises:
        ShapeError: d_model < 1. ValueError: seed < 0.

    Source: a made-up example for article section 2.1.
    """
    tokens = tokenize(QKV_SENTENCE)
    return Sentence(tokens=tokens, x=embed(tokens, embedding_table(tokens, d_model, seed=seed)))
