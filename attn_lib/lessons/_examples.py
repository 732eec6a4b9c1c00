"""The examples several notebooks share (torch only): the article's example (its seed, sizes,
input and module; notebooks 05, 06 and 08), and the sentences and deterministic token
embeddings of notebooks 01, 02 and 04.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..core import SingleHeadAttention
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
