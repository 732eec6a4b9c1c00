"""Notebook 06's data, experiments and checkers (torch only).

Used by notebook 06 (Checking against PyTorch): "2 · Weights first" (``agreement``),
"7 · A dashboard: one mask, three conventions" (``convention_setting``) and "8 · Check
yourself" (``check_mha_forward``, ``check_mha_mask`` and their solutions).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .. import masks
from ..attention import SingleHeadAttention, scaled_dot_product_attention
from ..mistakes import find, why
from . import _examples as article
from ._checking import (
    _SEED,
    CheckResult,
    _call,
    _call_failed,
    _close,
    _mask_difference,
    _name_of,
    _not_yet,
    _passed,
    _raised,
    recording,
)
from ._experiments import one_thread

ULPS = 16  # a few dozen roundings in any order stay below 16 ulps; a real mistake is ~1e5 ulps
_B, _L, _E = article.ARTICLE_BATCH, article.ARTICLE_SEQ_LEN, article.ARTICLE_D_MODEL  # 2, 4, 8
CONVENTION_MASK_CHOICES = ("none", "padding", "causal", "fully masked row")
IMPLEMENTATIONS = ("attn_lib", "MHA", "SDPA")
# How a mask is handed over: key → (the dashboard's label, the tensor passed, in words).
_CONVENTIONS = {
    "keep": ("article keep-mask", "keep-mask to attn_lib (True = may attend)"),
    "mha_attn_mask": ("MHA attn_mask", "attn_mask to MHA (True = blocked)"),
    "sdpa_bool": ("SDPA bool", "attn_mask to SDPA (True = takes part)"),
    "sdpa_additive": ("SDPA additive", "float attn_mask to SDPA and MHA (added)"),
    "inverted": ("inverted by mistake", "keep-mask to MHA as attn_mask (read as True = blocked)")}  # fmt: skip
MASK_CONVENTIONS = {key: label for key, (label, _) in _CONVENTIONS.items()}


def agreement(a: torch.Tensor, b: torch.Tensor, ulps: int = ULPS) -> str:
    """Assert |a - b| <= ulps · ε · max|b|, ε the epsilon of b's dtype (one ulp at 1.0), and
    say so: "within 16 float32 ulps". The bound scales with the values; it holds for any
    correct kernel on any CPU, whose last bits may differ."""
    eps = torch.finfo(b.dtype).eps
    torch.testing.assert_close(a, b, rtol=0.0, atol=ulps * eps * b.abs().max().item())
    return f"within {ulps} {str(b.dtype).removeprefix('torch.')} ulps"


@functools.cache
def _article_setup() -> tuple[torch.Tensor, nn.MultiheadAttention, tuple[torch.Tensor, ...]]:
    """Section 3.4 in the article's order: seed 42, x, its module, then the one-head MHA (eval
    mode); returns x, mha and x's Q, K, V. The caller's random state is left as it was. Cached:
    read them, do not modify them."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(article.ARTICLE_SEED)
        x = torch.randn(_B, _L, _E)  # (B, L, d_model)
        SingleHeadAttention(_E, article.ARTICLE_D_K)  # draws its weights, as in the article
        mha = nn.MultiheadAttention(_E, 1, bias=False, batch_first=True).eval()
    with torch.no_grad():
        Q, K, V = (F.linear(x, w) for w in mha.in_proj_weight.chunk(3))  # (B, L, d_k) each
    return x, mha, (Q, K, V)


def _keep_mask(mask: str) -> torch.Tensor | None:
    """The intended keep-mask: None, (B, 1, L) padding (lengths 4, 2), (L, L) causal, or
    (B, L, L) for "fully masked row": padded queries of sequence 1 may attend to nothing."""
    if mask == "fully masked row":
        pad = masks.padding_mask(list(article.EXAMPLE_LENGTHS), max_len=_L)  # (B, 1, L)
        return pad.transpose(1, 2) & pad  # (B, L, L): real query and real key
    return article.example_mask(mask)


@dataclass(frozen=True)
class ConventionResult:
    """One dashboard setting: one intended mask, passed one way, three functions.

    keep, passed_blocked: (L, L) bool, the intended keep-mask of the sequence shown and the
    cells the receiving function reads as blocked; passed_text: the tensor passed, cell by
    cell ("True", "-inf"; "" if none); weights: implementation → (L, L) (MHA's may be NaN;
    SDPA's come from value = I); nan_rows and max_abs_diff (from attn_lib, over the finite
    entries; nan if none): per implementation.
    """

    convention: str
    mask: str
    batch_index: int
    keep: torch.Tensor
    passed_name: str
    passed_text: tuple[tuple[str, ...], ...]
    passed_blocked: torch.Tensor
    weights: Mapping[str, torch.Tensor]
    nan_rows: Mapping[str, int]
    max_abs_diff: Mapping[str, float]
    key_labels: tuple[str, ...]


def _as_passed(convention: str, keep: torch.Tensor, full: torch.Tensor) -> tuple:
    """(MHA's attn_mask, SDPA's attn_mask, the (B, L, L) tensor shown, what its receiver
    blocks) for a keep-mask passed in ``convention``; ``full`` is keep as (B, L, L)."""
    keep_mha = keep if keep.dim() == 2 else full  # MHA's 3-D attn_mask is (B·H, L_q, L_k)
    mha, sdpa = masks.to_multihead_attn_mask(keep_mha), masks.to_sdpa_mask(keep)
    if convention == "mha_attn_mask":
        return mha, sdpa, ~full, ~full
    if convention == "sdpa_additive":  # 0 kept, -inf blocked; both functions add it
        return masks.to_additive(keep_mha), masks.to_additive(keep), masks.to_additive(full), ~full
    if convention == "inverted":  # each PyTorch function gets the other one's convention
        return keep_mha, mha, full, full
    return mha, sdpa, full, ~full


def _cell_text(shown: torch.Tensor) -> tuple[tuple[str, ...], ...]:
    """(L, L) bool or additive mask → its values as they read in code: "True", "0", "-inf"."""
    return tuple(tuple(str(v) if isinstance(v, bool) else "-inf" if v < 0 else "0" for v in row)
                 for row in shown.tolist())  # fmt: skip


@functools.cache
def convention_setting(
    convention: str = "keep", mask: str = "padding", batch_index: int = 1
) -> ConventionResult:
    """Weights of attn_lib, nn.MultiheadAttention and SDPA when one mask is passed one way.

    attn_lib always gets the intended keep-mask. "keep", "mha_attn_mask" and "sdpa_bool"
    give each PyTorch function the mask in its own convention (only the tensor shown
    differs); "sdpa_additive" gives both 0 / -inf; "inverted" gives MHA the keep-mask and
    SDPA MHA's convention. Cached: read the tensors, do not modify them. Raises ValueError
    on an unknown setting. Source: the MultiheadAttention and SDPA docs (attn_mask).
    """
    if convention not in MASK_CONVENTIONS or mask not in CONVENTION_MASK_CHOICES:
        raise ValueError(f"convention must be one of {tuple(MASK_CONVENTIONS)} and mask one "
                         f"of {CONVENTION_MASK_CHOICES}; got {convention!r}, {mask!r}.")  # fmt: skip
    if isinstance(batch_index, bool) or batch_index not in range(_B):
        raise ValueError(f"batch_index must be 0 or 1, got {batch_index!r}.")
    with one_thread(), torch.no_grad():
        (x, mha, (Q, K, V)), b, B, L = _article_setup(), batch_index, _B, _L
        keep = _keep_mask(mask)  # None, (B, 1, L), (L, L) or (B, L, L)
        full = torch.ones(B, L, L, dtype=torch.bool)
        mha_mask, sdpa_mask, shown, blocked = None, None, None, torch.zeros_like(full)
        if keep is not None:
            full = full & keep  # (B, L, L)
            mha_mask, sdpa_mask, shown, blocked = _as_passed(convention, keep, full)
        _, w_lib = scaled_dot_product_attention(Q, K, V, keep)  # (B, L, L)
        _, w_mha = mha(x, x, x, attn_mask=mha_mask)  # (B, L, L)
        eye = torch.eye(L).expand(B, L, L)  # value = I: the output is the weights
        w_sdpa = F.scaled_dot_product_attention(Q, K, eye, attn_mask=sdpa_mask)
    weights = {"attn_lib": w_lib[b], "MHA": w_mha[b], "SDPA": w_sdpa[b]}
    diff = {name: (w - w_lib[b]).abs() for name, w in weights.items()}
    padded = mask in ("padding", "fully masked row")
    return ConventionResult(
        convention, mask, b, full[b],
        "no mask passed" if keep is None else _CONVENTIONS[convention][1],
        (("",) * L,) * L if shown is None else _cell_text(shown[b]),
        blocked[b], weights,
        {name: int(w.isnan().any(dim=-1).sum()) for name, w in weights.items()},
        {name: float(d[d.isfinite()].max()) if bool(d.isfinite().any()) else float("nan")
         for name, d in diff.items()},
        tuple(f"{j} (pad)" if padded and j >= article.EXAMPLE_LENGTHS[b] else str(j)
              for j in range(L)),
    )  # fmt: skip


# --- Exercise 1: a one-head nn.MultiheadAttention, forward pass by hand ----------------------


def _mha_cases() -> list[tuple[str, nn.MultiheadAttention, torch.Tensor]]:
    """Seeded one-head modules whose sizes all differ; two with non-zero biases."""
    cases = []
    for i, (E, B, L, bias) in enumerate([(6, 2, 5, False), (4, 3, 2, True), (8, 1, 7, True)]):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(_SEED + 60 + i)
            mha = nn.MultiheadAttention(E, num_heads=1, bias=bias, batch_first=True).eval()
            with torch.no_grad():
                if bias:  # PyTorch initialises the biases to 0; make them matter
                    mha.in_proj_bias.normal_(0.0, 0.5)
                    mha.out_proj.bias.normal_(0.0, 0.5)
            x = torch.randn(B, L, E)
        name = f"E={E}, {'with biases' if bias else 'no bias'}, x {(B, L, E)}"
        cases.append((name, mha, x))  # x: (B, L, E)
    return cases


def _attend(mha: nn.MultiheadAttention, x: torch.Tensor, *, swap_qk: bool = False,
            in_bias: bool = True, scale: float | None = None) -> torch.Tensor:  # fmt: skip
    """The attention output before out_proj, (B, L, E), with optional mistakes."""
    b = mha.in_proj_bias.chunk(3) if in_bias and mha.in_proj_bias is not None else [None] * 3
    Q, K, V = (F.linear(x, w, bias) for w, bias in zip(mha.in_proj_weight.chunk(3), b))
    if swap_qk:
        Q, K = K, Q
    return scaled_dot_product_attention(Q, K, V, scale=scale)[0]


# A mistake of attn_lib.mistakes → the forward pass that makes it, (mha, x) → (B, L, E).
_MHA_MISTAKES: dict[str, Callable] = {
    "no_out_proj": lambda m, x: _attend(m, x),
    "out_proj_transposed": lambda m, x: F.linear(_attend(m, x), m.out_proj.weight.T, m.out_proj.bias),
    "out_proj_no_bias": lambda m, x: _attend(m, x) @ m.out_proj.weight.T,
    "in_proj_bias_missing": lambda m, x: m.out_proj(_attend(m, x, in_bias=False)),
    "qk_swapped": lambda m, x: m.out_proj(_attend(m, x, swap_qk=True)),
    "no_scale": lambda m, x: m.out_proj(_attend(m, x, scale=1.0)),
}  # fmt: skip


def _check_mha_forward(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check ``fn(mha, x)`` against ``mha(x, x, x)[0]`` on three one-head modules.

    ``mha`` is an ``nn.MultiheadAttention(E, num_heads=1, batch_first=True)`` in eval
    mode (E = 6 without biases, E = 4 and 8 with non-zero biases), x is (B, L, E).
    ``mistake`` is None or one of "not_written", "error", "called_module",
    "bad_return", "wrong_shape", a code of attn_lib.mistakes (:data:`_MHA_MISTAKES`), "unknown".
    """
    name, cases, outputs = _name_of(fn), _mha_cases(), []
    for case, mha, x in cases:
        calls: list[int] = []
        hook = mha.register_forward_hook(lambda *_, calls=calls: calls.append(1))
        try:
            with torch.no_grad():
                result, err = _call(fn, mha, x.clone(), quiet=True)
        finally:
            hook.remove()
        if err is not None:
            why = f"On the case {case}, {name} raised {_raised(err, first_line=True)}."
            return _call_failed(name, err, why, verbose)
        if calls:
            return _not_yet("called_module", f"{name} calls the module itself, so it cannot "
                            "disagree with it: slice in_proj_weight, attend, then apply "
                            "mha.out_proj.", verbose)  # fmt: skip
        result = result[0] if isinstance(result, tuple | list) and len(result) == 2 else result
        if not isinstance(result, torch.Tensor):
            return _not_yet("bad_return", f"{name} returned {type(result).__name__}; return the "
                            "output tensor (B, L, E).", verbose)  # fmt: skip
        if result.shape != x.shape:
            return _not_yet("wrong_shape", f"On the case {case} your output has shape "
                            f"{tuple(result.shape)}; the module returns (B, L, E) = "
                            f"{tuple(x.shape)}.", verbose)  # fmt: skip
        outputs.append(result.detach())
    with torch.no_grad():
        if all(_close(o, m(x, x, x)[0]) for o, (_, m, x) in zip(outputs, cases, strict=True)):
            return _passed(f"{name} reproduces nn.MultiheadAttention's output on all "
                           f"{len(cases)} cases, with and without biases.", verbose)  # fmt: skip
        for code, make in _MHA_MISTAKES.items():
            if all(_close(o, make(m, x)) for o, (_, m, x) in zip(outputs, cases, strict=True)):
                return _not_yet(code, f"Your function computes {find(code).explain()}", verbose)
    return _not_yet("unknown", "Your output matches none of the usual single mistakes. Check "
                    "each step against the module: the three slices of in_proj_weight (and "
                    "in_proj_bias), softmax(Q Kᵀ / √E) V, then mha.out_proj.", verbose)  # fmt: skip


def solution_mha_forward(mha: nn.MultiheadAttention, x: torch.Tensor) -> torch.Tensor:
    W_Q, W_K, W_V = mha.in_proj_weight.chunk(3)  # each (E, E): rows [0:E], [E:2E], [2E:3E]
    if mha.in_proj_bias is None:
        b_Q = b_K = b_V = None
    else:
        b_Q, b_K, b_V = mha.in_proj_bias.chunk(3)  # each (E,)
    Q, K, V = F.linear(x, W_Q, b_Q), F.linear(x, W_K, b_K), F.linear(x, W_V, b_V)  # (B, L, E)
    output, _ = scaled_dot_product_attention(Q, K, V)  # (B, L, E)
    return mha.out_proj(output)  # the step the article's comparison leaves out


# --- Exercise 2: the article's keep-mask → MHA's attn_mask ----------------------------------


def _mha_mask_cases() -> list[tuple[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(_SEED + 66)
    per_example = torch.rand(2, 4, 6, generator=g) < 0.6
    per_example[..., 0] = True  # every query keeps at least one key
    return [
        ("a causal keep-mask (5, 5), bool", masks.causal_mask(5)),
        ("a per-example keep-mask (2, 4, 6), bool", per_example),
        ("an integer 0/1 keep-mask (3, 6), int64", masks.causal_mask(3, 6).long())]  # fmt: skip


_VERY_NEGATIVE = -1e4  # an additive fill at or below this blocks a key: exp(-1e4) is 0


def _verdict_on_masks(name: str, cases: list, results: list, verbose: bool) -> CheckResult:
    """Compare each returned mask with True = blocked; name the mistake it matches."""
    pairs = [(m, ~k.bool()) for (_, k), m in zip(cases, results, strict=True)]
    if all(m.dtype == torch.bool and torch.equal(m, b) for m, b in pairs):
        return _passed(f"{name} gives nn.MultiheadAttention's attn_mask: bool, True where "
                       "attention is blocked (the opposite of the article's mask).", verbose)  # fmt: skip
    if all(m.is_floating_point() and torch.equal(m <= _VERY_NEGATIVE, b)
           and bool((m[~b] == 0).all()) for m, b in pairs):  # fmt: skip
        return _passed(f"{name} returns an additive mask (0 where kept, a very negative number "
                       "where blocked); MHA adds it to the scores, which blocks the same "
                       "cells.", verbose)  # fmt: skip
    if any(set(m.unique().tolist()) <= {-1, -2} for m, _ in pairs):  # ~ on an int tensor
        return _not_yet("bitwise_not_int", f"Your mask holds -1 and -2. {why('bitwise_not_int')}",
                        verbose)  # fmt: skip
    if all(not m.is_floating_point() and torch.equal(m != 0, ~b) for m, b in pairs):
        return _not_yet("keep_mask_to_mha", "Your mask still says True = may attend. "
                        + why("keep_mask_to_mha"), verbose)  # fmt: skip
    (desc, _), (m, b) = next((c, p) for c, p in zip(cases, pairs, strict=True)
                             if not (p[0].dtype == torch.bool and torch.equal(*p)))  # fmt: skip
    if m.is_floating_point():
        values = ", ".join(f"{v:g}" for v in sorted(set(m.flatten().tolist()))[:4])
        return _not_yet("float_mask_added", f"For {desc}, your mask is a float tensor holding "
                        f"{values}. {why('float_mask_added')}", verbose)  # fmt: skip
    return _not_yet("unknown", f"For {desc}, your attn_mask ({m.dtype}) differs from the "
                    "expected one (bool, True = blocked) in "
                    f"{_mask_difference(m != 0, b, 'blocked', 'may attend')}. MHA takes bool "
                    "or float masks: return `keep == 0`.", verbose)  # fmt: skip


def _check_mha_mask(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check ``fn(keep)``: a keep-mask (bool or 0/1 integer, (L_q, L_k) or (B, L_q, L_k))
    → MHA's attn_mask (bool, same shape, True = blocked; an additive 0 / -inf mask passes).

    ``mistake`` is None or one of "not_written", "error", "bad_return", "wrong_shape",
    "bitwise_not_int", "keep_mask_to_mha", "float_mask_added" (attn_lib.mistakes), "unknown".
    """
    name, cases, results = _name_of(fn), _mha_mask_cases(), []
    for desc, keep in cases:
        m, err = _call(fn, keep.clone())
        if err is not None:
            return _call_failed(name, err, f"For {desc}, {name} raised {_raised(err)}.", verbose)
        if not isinstance(m, torch.Tensor):
            return _not_yet("bad_return", f"For {desc}, {name} returned {type(m).__name__}; "
                            "return a bool tensor of the same shape.", verbose)  # fmt: skip
        if m.shape != keep.shape:
            return _not_yet("wrong_shape", f"For {desc}, your mask has shape {tuple(m.shape)}; "
                            f"it must keep the shape {tuple(keep.shape)}: only the meaning of "
                            "True changes.", verbose)  # fmt: skip
        results.append(m)
    return _verdict_on_masks(name, cases, results, verbose)


def solution_mha_mask(keep: torch.Tensor) -> torch.Tensor:
    return keep == 0  # bool for bool and integer masks alike; True = blocked


check_mha_forward = recording("mha_forward", _check_mha_forward)
check_mha_mask = recording("mha_mask", _check_mha_mask)
