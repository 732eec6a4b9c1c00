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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache

import torch

from .core import SingleHeadAttention, scaled_dot_product_attention
from .lessons._examples import (
    ARTICLE_BATCH,
    ARTICLE_D_K,
    ARTICLE_D_MODEL,
    ARTICLE_SEED,
    ARTICLE_SEQ_LEN,
    ArticleExample,
    article_example,
)
from .masks import causal_mask, padding_mask
from .shapes import ShapeError, check_size

__all__ = [
    "ARTICLE_BATCH",
    "ARTICLE_D_K",
    "ARTICLE_D_MODEL",
    "ARTICLE_QUERY",
    "ARTICLE_SEED",
    "ARTICLE_SEQ_LEN",
    "CROSS_SENTENCE",
    "EXAMPLE_LENGTHS",
    "KEY_FEATURES",
    "MASK_CHOICES",
    "QKV_SENTENCE",
    "VALUE_FEATURES",
    "WORD_ORDER_PAIRS",
    "ArticleExample",
    "Library",
    "Sentence",
    "SettingResult",
    "article_example",
    "cross_sentence",
    "embed",
    "embedding_table",
    "example_mask",
    "example_setting",
    "library_books",
    "library_query",
    "qkv_sentence",
    "short_and_long_tokens",
    "tokenize",
]

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


@dataclass(frozen=True)
class SettingResult:
    """What a dashboard shows for one setting of the article's example.

    Attributes:
        batch_index: which batch element (0 or 1).
        mask: "none", "padding" or "causal".
        scaled: True for scores ÷ √d_k, False for raw dot products.
        weights: (L_q, L_k) = (4, 4), float32, the attention weights of that element.
        row_sums: (L_q,) = (4,), float32, each row's sum (1 for every row here).
        keep: (L_q, L_k) bool, True where the query may attend to the key.
        key_labels: one tick label per key position; "2 (pad)" for a padded key.

    Source: article sections 3.3 and 4.1.
    """

    batch_index: int
    mask: str
    scaled: bool
    weights: torch.Tensor
    row_sums: torch.Tensor
    keep: torch.Tensor
    key_labels: tuple[str, ...]

    @property
    def title(self) -> str:
        """A one-line description of the setting, for figure titles."""
        scaling = "scores ÷ √d_k" if self.scaled else "no scaling"
        return f"sequence {self.batch_index} · mask: {self.mask} · {scaling}"


def example_setting(batch_index: int = 0, mask: str = "none", scaled: bool = True) -> SettingResult:
    """Attention weights of the article's example for one (batch element, mask, scaling) setting.

    A pure function of its arguments: same arguments, same numbers. Each of the
    12 settings is computed once and remembered (a dashboard asks for them again
    and again); the tensors returned are fresh copies, safe to modify.

    Args:
        batch_index: 0 or 1, the batch element to return.
        mask: "none", "padding" (lengths (4, 2): element 1 has two padded keys)
            or "causal".
        scaled: divide the scores by √d_k (the article's module) or not.

    Returns:
        SettingResult with weights (4, 4), row_sums (4,), keep (4, 4).

    Raises:
        ValueError: batch_index not 0 or 1, or an unknown mask name.
        TypeError: scaled not a bool.

    Source: article sections 3.2 and 4.1; Vaswani et al. 2017, eq. (1).
    """
    if isinstance(batch_index, bool) or batch_index not in range(ARTICLE_BATCH):
        raise ValueError(f"batch_index must be 0 or 1, got {batch_index!r}.")
    if not isinstance(scaled, bool):
        raise TypeError(f"scaled must be True or False, got {scaled!r}.")
    if mask not in MASK_CHOICES:
        raise ValueError(f"mask must be one of {MASK_CHOICES}, got {mask!r}.")
    cached = _example_setting(batch_index, mask, scaled)
    return replace(
        cached,
        weights=cached.weights.clone(),
        row_sums=cached.row_sums.clone(),
        keep=cached.keep.clone(),
    )


@cache
def _example_setting(batch_index: int, mask: str, scaled: bool) -> SettingResult:
    ex = article_example()
    keep = example_mask(mask)
    scale = 1.0 / math.sqrt(ex.Q.shape[-1]) if scaled else 1.0
    _, weights = scaled_dot_product_attention(ex.Q, ex.K, ex.V, keep, scale=scale)  # (B, L, L)
    L = ARTICLE_SEQ_LEN
    full_keep = torch.ones(ARTICLE_BATCH, L, L, dtype=torch.bool)
    if keep is not None:
        full_keep = full_keep & keep  # (B, L, L)
    w = weights[batch_index]  # (L_q, L_k)
    labels = tuple(
        f"{j} (pad)" if mask == "padding" and j >= EXAMPLE_LENGTHS[batch_index] else str(j)
        for j in range(L)
    )
    return SettingResult(
        batch_index=batch_index,
        mask=mask,
        scaled=scaled,
        weights=w,
        row_sums=w.sum(dim=-1),  # (L_q,)
        keep=full_keep[batch_index],
        key_labels=labels,
    )


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


def short_and_long_tokens() -> Sentence:
    """Two 2-D tokens whose x xᵀ row 0 does not peak on the diagonal.

    "short" = (0.3, 0.1) and "long" = (2.0, 0.5) point almost the same way, so
    short·long = 0.65 > short·short = 0.10: the short token scores the long one above
    itself. In high dimension a token usually scores itself highest (see
    attn_lib.experiments.self_score_max_fraction), but that is not a theorem.

    Returns:
        :class:`Sentence` with tokens ("short", "long") and x (2, 2) float32.

    Source: a counterexample for article section 2.1.
    """
    return Sentence(tokens=("short", "long"), x=torch.tensor([[0.3, 0.1], [2.0, 0.5]]))


# ---------------------------------------------------------------------------
# Notebook 04: a second sentence, for cross-attention
# ---------------------------------------------------------------------------

# French for QKV_SENTENCE: eight distinct tokens, so L_k = 8 ≠ L_q = 7. When a model
# translates French into English, the English words being written ask (queries) and
# the French source words answer (keys and values).
CROSS_SENTENCE = "un petit chat était assis sur le tapis"


def cross_sentence(d_model: int = 8, *, seed: int = 1) -> Sentence:
    """Notebook 04's source sentence, :data:`CROSS_SENTENCE`, embedded: x of shape (8, d_model).

    Its embedding table is its own (seed 1 by default, not 0 as for
    :func:`qkv_sentence`), so that no French token shares its vector with an English one
    by the accident of sorting first in both vocabularies.

    Args:
        d_model: embedding width (≥ 1).
        seed: the embedding table's seed (≥ 0).

    Returns:
        :class:`Sentence` with 8 tokens and x (8, d_model) float32.

    Raises:
        ShapeError: d_model < 1. ValueError: seed < 0.

    Source: a made-up example for article sections 1.1 (encoder-decoder attention) and 2.3.
    """
    tokens = tokenize(CROSS_SENTENCE)
    return Sentence(tokens=tokens, x=embed(tokens, embedding_table(tokens, d_model, seed=seed)))


# ---------------------------------------------------------------------------
# Notebook 06: checking against PyTorch (article section 3.4)
# ---------------------------------------------------------------------------

# How a mask is handed over, as the notebook 06 dashboard offers it (key → label).
MASK_CONVENTIONS = {
    "keep": "article keep-mask",
    "mha_attn_mask": "MHA attn_mask",
    "mha_key_padding": "MHA key_padding_mask",
    "sdpa_bool": "SDPA bool",
    "sdpa_additive": "SDPA additive",
    "inverted": "inverted by mistake",
}
CONVENTION_MASK_CHOICES = ("none", "padding", "causal", "fully masked row")
IMPLEMENTATIONS = ("attn_lib", "MHA", "SDPA")


@dataclass(frozen=True)
class ArticleMHAExample:
    """The article's section 3.4 setup: x, PyTorch's module, and the module aligned with it.

    Attributes:
        x: (B, L, d_model) = (2, 4, 8), float32, the input of section 3.1.
        mha: nn.MultiheadAttention(embed_dim=8, num_heads=1, bias=False,
            batch_first=True), built right after the article's module (same seed,
            same order), in eval mode.
        model: SingleHeadAttention(8, 8) whose W_Q, W_K, W_V are rows [0:8], [8:16],
            [16:24] of ``mha.in_proj_weight``, in eval mode.
        Q, K: (B, L, d_k) = (2, 4, 8), float32, x projected by the copied W_Q, W_K.
        V: (B, L, d_v) = (2, 4, 8), float32, x projected by the copied W_V.

    Source: article section 3.4; torch.nn.MultiheadAttention.
    """

    x: torch.Tensor
    mha: torch.nn.MultiheadAttention
    model: SingleHeadAttention
    Q: torch.Tensor
    K: torch.Tensor
    V: torch.Tensor


def article_mha_example() -> ArticleMHAExample:
    """Rebuild section 3.4: seed 42, x, the article's module, then nn.MultiheadAttention.

    The random state is saved and restored (the caller's next draw is unchanged).
    The article's module is built only to draw the same random numbers as the
    article before ``nn.MultiheadAttention`` is built; its weights are then
    replaced by slices of ``in_proj_weight``, as the article does.

    Returns:
        ArticleMHAExample; tensors float32, computed without gradients.

    Source: article section 3.4.
    """
    E = ARTICLE_D_MODEL
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(ARTICLE_SEED)
        x = torch.randn(ARTICLE_BATCH, ARTICLE_SEQ_LEN, E)  # (B, L, d_model)
        model = SingleHeadAttention(E, ARTICLE_D_K).eval()
        mha = torch.nn.MultiheadAttention(E, num_heads=1, bias=False, batch_first=True).eval()
    with torch.no_grad():
        for i, lin in enumerate((model.W_Q, model.W_K, model.W_V)):
            lin.weight.copy_(mha.in_proj_weight[i * E : (i + 1) * E])  # (d_k, d_model)
        Q, K, V = model.W_Q(x), model.W_K(x), model.W_V(x)  # (B, L, d_k) each
    return ArticleMHAExample(x=x, mha=mha, model=model, Q=Q, K=K, V=V)


def convention_keep_mask(mask: str, L: int = ARTICLE_SEQ_LEN) -> torch.Tensor | None:
    """The intended keep-mask of a notebook 06 mask setting (True = may attend).

    Args:
        mask: "none"; "padding" (lengths :data:`EXAMPLE_LENGTHS`, padded keys
            blocked); "causal"; or "fully masked row": padding applied to the queries
            too (a query×key mask), so the padded *query* rows of sequence 1 have no
            allowed key at all.
        L: sequence length, at least max(EXAMPLE_LENGTHS).

    Returns:
        None, bool (B, 1, L) padding, bool (L, L) causal, or bool (B, L, L) for
        "fully masked row".

    Raises:
        ValueError: an unknown mask name.

    Source: article section 4.1; SERIES.md notebook 06 (a fully masked row).
    """
    if mask == "fully masked row":
        pad = padding_mask(list(EXAMPLE_LENGTHS), max_len=L)  # (B, 1, L)
        return pad.transpose(1, 2) & pad  # (B, L, L): real query and real key
    if mask in ("none", "padding", "causal"):
        return example_mask(mask, L)
    raise ValueError(f"mask must be one of {CONVENTION_MASK_CHOICES}, got {mask!r}.")


@dataclass(frozen=True)
class ConventionResult:
    """One setting of the mask-convention dashboard: the same intended mask, three functions.

    Attributes:
        convention: a key of :data:`MASK_CONVENTIONS`.
        mask: one of :data:`CONVENTION_MASK_CHOICES`.
        batch_index: the sequence shown (0 or 1).
        keep: (L, L) bool, the intended keep-mask of that sequence (all True for "none").
        passed_name: what tensor is handed over, in words, with its convention.
        passed_text: (L, L) cell labels: the values of that tensor as passed
            ("True", "False", "0", "-inf"), broadcast to (L_q, L_k); empty when
            nothing is passed.
        passed_blocked: (L, L) bool, the cells the receiving function reads as blocked.
        error: None, or why this convention cannot express this mask (then MHA's
            weights are None).
        weights: implementation ("attn_lib", "MHA", "SDPA") → (L, L) float32 weights of
            the shown sequence, or None; MHA's may hold NaN. SDPA's are derived by
            running SDPA with value = the (L_k, L_k) identity matrix.
        max_abs_diff: implementation → max |Δ| against attn_lib over the entries where
            both are finite (nan when there is none, or no weights).
        nan_rows: implementation → number of query rows holding a NaN.
        key_labels: one tick label per key; "2 (pad)" for a padded key of sequence 1.

    Source: torch.nn.MultiheadAttention and torch.nn.functional.scaled_dot_product_attention
        docs (attn_mask, key_padding_mask); article sections 3.2 and 3.4.
    """

    convention: str
    mask: str
    batch_index: int
    keep: torch.Tensor
    passed_name: str
    passed_text: tuple[tuple[str, ...], ...]
    passed_blocked: torch.Tensor
    error: str | None
    weights: Mapping[str, torch.Tensor | None]
    max_abs_diff: Mapping[str, float]
    nan_rows: Mapping[str, int]
    key_labels: tuple[str, ...]

    @property
    def title(self) -> str:
        """A one-line description of the setting, for figure titles."""
        return (
            f"mask: {self.mask} · passed as: {MASK_CONVENTIONS[self.convention]} · "
            f"sequence {self.batch_index}"
        )


def convention_setting(
    convention: str = "keep", mask: str = "padding", batch_index: int = 1
) -> ConventionResult:
    """Weights of attn_lib, nn.MultiheadAttention and SDPA when a mask is passed one way.

    attn_lib always receives the intended keep-mask (it is the reference). The
    convention decides what PyTorch's two functions receive:

    - "keep", "mha_attn_mask", "sdpa_bool": each gets the mask converted to its own
      convention (``to_multihead_attn_mask``, ``to_sdpa_mask``); the three names
      differ only in which tensor the figure shows.
    - "mha_key_padding": MHA gets ``key_padding_mask`` (B, L_k), True = padding;
      it cannot express a causal or a per-query mask (``error`` says so).
    - "sdpa_additive": both get ``to_additive`` (0 kept, -inf blocked), added to the
      scores.
    - "inverted": the classic mistake: MHA gets the keep-mask itself as
      ``attn_mask`` (which it reads as True = blocked), and SDPA gets MHA's
      convention (which it reads as True = takes part).

    Pure and cached: each (convention, mask) pair is computed once for the whole
    batch; the tensors returned are fresh copies.

    Args:
        convention: a key of :data:`MASK_CONVENTIONS`.
        mask: one of :data:`CONVENTION_MASK_CHOICES`.
        batch_index: 0 or 1, the sequence to return.

    Returns:
        ConventionResult with (L, L) = (4, 4) tensors.

    Raises:
        ValueError: an unknown convention or mask, or batch_index not 0 or 1.

    Source: torch.nn.MultiheadAttention.forward and
        torch.nn.functional.scaled_dot_product_attention docs; article section 3.4.
    """
    if convention not in MASK_CONVENTIONS:
        raise ValueError(
            f"convention must be one of {tuple(MASK_CONVENTIONS)}, got {convention!r}."
        )
    if mask not in CONVENTION_MASK_CHOICES:
        raise ValueError(f"mask must be one of {CONVENTION_MASK_CHOICES}, got {mask!r}.")
    if isinstance(batch_index, bool) or batch_index not in range(ARTICLE_BATCH):
        raise ValueError(f"batch_index must be 0 or 1, got {batch_index!r}.")
    full = _convention_batch(convention, mask)
    b = batch_index

    def pick(t: torch.Tensor | None) -> torch.Tensor | None:
        return None if t is None else t[b].clone()

    weights = {name: pick(w) for name, w in full["weights"].items()}
    ref = weights["attn_lib"]
    diffs, nan_rows = {}, {}
    for name, w in weights.items():
        if w is None:
            diffs[name], nan_rows[name] = float("nan"), 0
            continue
        d = (w - ref).abs()  # (L, L); NaN where w is NaN
        finite = torch.isfinite(d)
        diffs[name] = float(d[finite].max()) if bool(finite.any()) else float("nan")
        nan_rows[name] = int(torch.isnan(w).any(dim=-1).sum())
    L = ARTICLE_SEQ_LEN
    padded = mask in ("padding", "fully masked row")
    labels = tuple(
        f"{j} (pad)" if padded and j >= EXAMPLE_LENGTHS[b] else str(j) for j in range(L)
    )
    return ConventionResult(
        convention=convention,
        mask=mask,
        batch_index=b,
        keep=full["keep"][b].clone(),
        passed_name=full["passed_name"],
        passed_text=full["passed_text"][b],
        passed_blocked=full["passed_blocked"][b].clone(),
        error=full["error"],
        weights=weights,
        max_abs_diff=diffs,
        nan_rows=nan_rows,
        key_labels=labels,
    )


def _cell_text(values: torch.Tensor) -> tuple[tuple[tuple[str, ...], ...], ...]:
    """(B, L_q, L_k) bool or float mask values → per-cell labels as they read in code."""
    if values.dtype == torch.bool:
        text = [[["True" if v else "False" for v in row] for row in m] for m in values.tolist()]
    else:
        text = [
            [["-inf" if v == float("-inf") else f"{v:g}" for v in row] for row in m]
            for m in values.tolist()
        ]
    return tuple(tuple(tuple(row) for row in m) for m in text)


@cache
def _convention_batch(convention: str, mask: str) -> dict:
    """Everything :func:`convention_setting` needs, for the whole batch (cached)."""
    from .masks import to_additive, to_key_padding_mask, to_multihead_attn_mask, to_sdpa_mask
    from .shapes import MaskError

    ex = article_mha_example()
    B, L = ARTICLE_BATCH, ARTICLE_SEQ_LEN
    keep = convention_keep_mask(mask)  # None, (B, 1, L), (L, L) or (B, L, L)
    full_keep = torch.ones(B, L, L, dtype=torch.bool)
    if keep is not None:
        full_keep = full_keep & keep  # (B, L, L)

    mha_kwargs: dict[str, torch.Tensor] = {}
    sdpa_mask: torch.Tensor | None = None
    error: str | None = None
    shown: torch.Tensor | None = None  # (B, L, L) values of the tensor the figure shows
    blocked = torch.zeros(B, L, L, dtype=torch.bool)  # as the receiving function reads it
    names = {
        "keep": "keep-mask to attn_lib (True = may attend)",
        "mha_attn_mask": "attn_mask to MHA (True = blocked)",
        "mha_key_padding": "key_padding_mask to MHA (True = padding)",
        "sdpa_bool": "attn_mask to SDPA (True = takes part)",
        "sdpa_additive": "float attn_mask to SDPA and MHA (added)",
        "inverted": "keep-mask to MHA as attn_mask (read as True = blocked)",
    }
    if keep is not None:
        # A 3-D attn_mask for nn.MultiheadAttention must spell out (B * heads, L_q, L_k).
        keep_mha = keep if keep.dim() == 2 else full_keep  # (L, L) or (B, L, L)
        mha_kwargs = {"attn_mask": to_multihead_attn_mask(keep_mha)}
        sdpa_mask = to_sdpa_mask(keep)
        blocked = ~full_keep
        if convention in ("keep", "sdpa_bool"):
            shown = full_keep
        elif convention == "mha_attn_mask":
            shown = ~full_keep
        elif convention == "mha_key_padding":
            try:
                kpm = to_key_padding_mask(keep)  # (B, L_k), True = padding
            except MaskError:
                error = (
                    "a key_padding_mask blocks the same keys for every query, so it cannot "
                    f"express a {mask} mask: use attn_mask"
                )
                mha_kwargs = {}
            else:
                mha_kwargs = {"key_padding_mask": kpm}
                shown = kpm[:, None, :].expand(B, L, L)
        elif convention == "sdpa_additive":
            mha_kwargs = {"attn_mask": to_additive(keep_mha)}  # 0 kept, -inf blocked
            sdpa_mask = to_additive(keep)
            shown = to_additive(full_keep)
        else:  # "inverted": each PyTorch function is handed the other one's convention
            mha_kwargs = {"attn_mask": keep_mha}
            sdpa_mask = to_multihead_attn_mask(keep_mha)
            shown = full_keep
            blocked = full_keep
    if shown is None:
        empty = tuple(tuple("" for _ in range(L)) for _ in range(L))
        passed_text = (empty,) * B
    else:
        passed_text = _cell_text(shown)
    if keep is None:
        passed_name = "no mask passed"
    elif error is not None:
        passed_name = "key_padding_mask to MHA (not possible)"
    else:
        passed_name = names[convention]

    with torch.no_grad():
        _, w_lib = scaled_dot_product_attention(ex.Q, ex.K, ex.V, keep)  # (B, L, L)
        w_mha = None
        if error is None:
            _, w_mha = ex.mha(
                ex.x, ex.x, ex.x, need_weights=True, average_attn_weights=True, **mha_kwargs
            )  # (B, L, L)
        eye = torch.eye(L).expand(B, L, L)  # value = I makes SDPA's output its weights
        w_sdpa = torch.nn.functional.scaled_dot_product_attention(
            ex.Q, ex.K, eye, attn_mask=sdpa_mask
        )  # (B, L, L)
    return {
        "keep": full_keep,
        "passed_name": passed_name,
        "passed_text": passed_text,
        "passed_blocked": blocked if error is None else torch.zeros(B, L, L, dtype=torch.bool),
        "error": error,
        "weights": {"attn_lib": w_lib, "MHA": w_mha, "SDPA": w_sdpa},
    }


__all__ += [  # notebook 06's public names, added to the list at the top
    "CONVENTION_MASK_CHOICES",
    "IMPLEMENTATIONS",
    "MASK_CONVENTIONS",
    "ArticleMHAExample",
    "ConventionResult",
    "article_mha_example",
    "convention_keep_mask",
    "convention_setting",
]
