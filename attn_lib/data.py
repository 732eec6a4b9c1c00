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
    "ARTICLE_SEED",
    "ARTICLE_SEQ_LEN",
    "EXAMPLE_LENGTHS",
    "MASK_CHOICES",
    "QKV_SENTENCE",
    "ArticleExample",
    "Sentence",
    "article_example",
    "embed",
    "embedding_table",
    "example_mask",
    "qkv_sentence",
    "tokenize",
]
