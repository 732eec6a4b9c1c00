"""Notebook 05's checkers and their solutions (torch only).

Used by notebook 05 (A single-head attention module), section "5 · Check yourself": the
reader's attention, checked against attn_lib's; and the reader's test of an attention
function, run on attn_lib's attention and on the bugs of section 4.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from ..attention import scaled_dot_product_attention
from ..masks import causal_mask, padding_mask
from ..mistakes import find
from ._checking import (
    _SEED,
    CheckResult,
    _call,
    _call_failed,
    _Case,
    _check_attention_cases,
    _name_of,
    _not_yet,
    _passed,
    _raised,
    _short,
    recording,
)


def _attention_cases() -> list[_Case]:
    g = torch.Generator().manual_seed(_SEED)

    def qkv(B: int, L_q: int, L_k: int, d_k: int, d_v: int) -> tuple[torch.Tensor, ...]:
        return (
            torch.randn(B, L_q, d_k, generator=g),
            torch.randn(B, L_k, d_k, generator=g),
            torch.randn(B, L_k, d_v, generator=g),
        )

    return [
        _Case("batched self-attention, B=2, L=5, d_k=3, d_v=4", *qkv(2, 5, 5, 3, 4), None),
        _Case("cross-attention, B=3, L_q=2, L_k=6, d_k=4, d_v=5", *qkv(3, 2, 6, 4, 5), None),
        _Case("padding mask (2, 1, 5), lengths [5, 3]", *qkv(2, 5, 5, 3, 4), padding_mask([5, 3])),
        _Case("causal mask (5, 5)", *qkv(2, 5, 5, 3, 4), causal_mask(5)),
    ]


def _check_attention(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check ``fn(query, key, value, mask=None)`` → output (B, L_q, d_v) or (output, weights)
    against attn_lib on four seeded float32 cases (copies): batched self-attention,
    cross-attention, a (2, 1, 5) padding and a (5, 5) causal keep-mask (True = may attend).

    Returns:
        CheckResult; ``mistake`` as ``_checking._check_attention_cases`` names it.

    Source: article sections 3.2-3.3 and 4.1-4.2; Vaswani et al. 2017, eq. (1).
    """
    passed = ("matches attn_lib's reference on all 4 cases (batched self-attention, "
              "cross-attention with L_q ≠ L_k, a padding mask and a causal mask) to float32 "
              "precision.")  # fmt: skip
    return _check_attention_cases(fn, _attention_cases(), passed, verbose)


# The bugs the reader's test must reject: (code, the bug, how a test catches it). The first
# three pass the row-sum check (section 4); the last one does not.
_BUGS = [
    ("misses_scale_d_k", find("scale_d_k").attention, (
        "divides the scores by d_k instead of √d_k. Compare the output with a trusted reference, "
        "such as attn_lib.scaled_dot_product_attention, with d_k > 1: for d_k = 1, d_k and √d_k "
        "are the same number.")),
    ("misses_inverted_mask", find("mask_inverted").attention, (
        "inverts the mask. Give the attention a mask: without one, a mask bug cannot show.")),
    ("misses_k_q", find("scores_transposed").attention, (
        "computes K Qᵀ instead of Q Kᵀ. Use different tensors for query and key (with query = "
        "key, Q Kᵀ is symmetric and K Qᵀ is the same matrix), and better L_q ≠ L_k.")),
    ("misses_softmax_dim", find("softmax_dim").attention, (
        "takes the softmax over the queries. Even the row-sum check catches this one: compare "
        "the output with a reference.")),
]  # fmt: skip


def _verdict(value: object) -> bool | None:
    """A test's answer as a bool (True, 1, a one-element tensor …), or None if it is not one."""
    if isinstance(value, torch.Tensor):
        value = value.item() if value.numel() == 1 else None
    try:
        return bool(value) if value in (True, False) else None
    except (RuntimeError, ValueError):  # an array: its truth is ambiguous
        return None


def _check_attention_test(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check the reader's test ``fn(attention) → bool``: True for attn_lib's attention, False
    (or an exception) for the four bugs of :data:`_BUGS`; ``mistake`` "rejects_right",
    "misses_scale_d_k", "misses_inverted_mask", "misses_k_q", "misses_softmax_dim" …"""
    name = _name_of(fn)
    verdict, err = _call(fn, scaled_dot_product_attention)
    if err is not None and not isinstance(err, AssertionError):
        return _call_failed(name, err, f"On attn_lib's own attention your test raised "
                            f"{_raised(err)}.", verbose)  # fmt: skip
    if err is None and _verdict(verdict) is None:
        return _not_yet("bad_return", f"{name} returned {_short(verdict)}; return True when the "
                        "attention passes your test and False when it does not.", verbose)  # fmt: skip
    if err is not None or not _verdict(verdict):
        return _not_yet("rejects_right", "Your test rejects attn_lib's own attention. Compare "
                        "floats with torch.allclose or torch.testing.assert_close, not ==, and "
                        "pass a keep-mask (True = may attend).", verbose)  # fmt: skip
    for code, bug, why in _BUGS:
        verdict, err = _call(fn, bug, quiet=True)
        if err is None and _verdict(verdict):
            return _not_yet(code, f"Your test accepts an attention that {why}", verbose)
    return _passed(
        f"{name} accepts attn_lib's attention and rejects all {len(_BUGS)} bugs, the three "
        "whose rows still sum to 1 included.",
        verbose,
    )


check_attention = recording("my_attention", _check_attention)
check_attention_test = recording("my_test", _check_attention_test)


def solution_my_attention(query, key, value, mask=None):  # the reader's signature
    """Exercise 1 of notebook 05: softmax(Q Kᵀ / √d_k) V, as the article's module computes it."""
    d_k = query.size(-1)
    scores = query @ key.transpose(-2, -1) / math.sqrt(d_k)  # (B, L_q, L_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)  # blocked keys get no weight
    weights = F.softmax(scores, dim=-1)  # (B, L_q, L_k): over the keys
    return weights @ value, weights  # (B, L_q, d_v), (B, L_q, L_k)


def solution_my_test(attention: Callable) -> bool:
    """Exercise 2 of notebook 05: compare with a trusted reference on sizes that all differ."""
    g = torch.Generator().manual_seed(0)
    query = torch.randn(2, 3, 4, generator=g)  # (B, L_q, d_k): B, L_q, d_k all differ
    key = torch.randn(2, 5, 4, generator=g)  # (B, L_k, d_k): L_k = 5, another tensor
    value = torch.randn(2, 5, 6, generator=g)  # (B, L_k, d_v): d_v = 6
    mask = padding_mask([5, 2])  # (B, 1, L_k): without a mask, a mask bug cannot show
    output, _ = attention(query, key, value, mask)  # K Qᵀ fails here: L_q ≠ L_k
    expected, _ = scaled_dot_product_attention(query, key, value, mask)  # the reference
    return output.shape == expected.shape and torch.allclose(output, expected, atol=1e-6)
