"""Notebook 05's data, experiments and checkers (torch only).

Used by notebook 05 (A single-head attention module, line by line), sections "7 · A dashboard:
batch element, mask, scaling", "8 · Check yourself".
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache

import torch

from ..core import scaled_dot_product_attention
from ..masks import causal_mask, padding_mask
from ._checking import (
    _ATTENTION_MISTAKES,
    _SEED,
    CheckResult,
    _call,
    _call_attention_seeded,
    _call_failed,
    _Case,
    _close,
    _explain_error,
    _finish,
    _is_random,
    _mask_difference,
    _matches,
    _name_of,
    _not_written,
    _not_yet,
    _passed,
    _raised,
    _random_text,
)
from ._examples import (
    ARTICLE_BATCH,
    ARTICLE_SEQ_LEN,
    EXAMPLE_LENGTHS,
    MASK_CHOICES,
    article_example,
    example_mask,
)


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


def check_attention(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check a hand-written attention function against attn_lib, and name the mistake if any.

    ``fn(query, key, value, mask=None)`` must return the output, or the pair
    (output, weights). It is called on four seeded float32 cases: batched
    self-attention (B=2, L=5, d_k=3, d_v=4), cross-attention (B=3, L_q=2, L_k=6,
    d_k=4, d_v=5), a (2, 1, 5) padding keep-mask and a (5, 5) causal keep-mask
    (bool, True = may attend, as in the article's ``masked_fill(mask == 0, -1e9)``).
    The inputs are copies, so the function may change them.

    Args:
        fn: the function to check; query (B, L_q, d_k), key (B, L_k, d_k),
            value (B, L_k, d_v), mask None or bool broadcastable to (B, L_q, L_k);
            returns output (B, L_q, d_v) [and weights (B, L_q, L_k)].
        verbose: print the feedback paragraph.

    Returns:
        CheckResult; ``mistake`` is None or one of: "not_written", "bad_return",
        "dot_T", "transpose_dims", "error", "scale_d_k", "no_scale",
        "scale_multiplied", "scale_length", "scale_d_v", "scale_batch",
        "scale_after_softmax", "reshape_not_transpose", "no_softmax", "softmax_dim",
        "scores_transposed", "mask_inverted", "mask_fill_zero", "mask_missing",
        "mask_transposed", "mask_after_softmax", "dropout_on" (the output changes from
        one call to the next), "wrong_shape", "weights_wrong", "unknown".

    Source: article sections 3.2-3.3 and 4.1-4.2; Vaswani et al. 2017, eq. (1).
    """
    name = _name_of(fn)
    cases = _attention_cases()
    outcomes = _call_attention_seeded(fn, cases, _SEED)

    if any(isinstance(o.error, NotImplementedError) for o in outcomes):
        return _not_written(name, verbose)
    for o in outcomes:
        if o.bad_return:
            return _finish(False, "bad_return", f"{name} {o.bad_return}", verbose)

    refs = [scaled_dot_product_attention(c.query, c.key, c.value, c.mask) for c in cases]
    ok = [
        o.error is None
        and _close(o.output, ref_out)
        and (o.weights is None or _close(o.weights, ref_w))
        for o, (ref_out, ref_w) in zip(outcomes, refs, strict=True)
    ]
    if all(ok):
        extra = " and the weights you return" if outcomes[0].weights is not None else ""
        return _passed(
            f"{name} matches attn_lib's reference on all {len(cases)} cases (batched "
            f"self-attention, cross-attention with L_q ≠ L_k, a padding mask and a causal "
            f"mask): the output{extra} agree to float32 precision.",
            verbose,
        )

    for code, explanation, make in _ATTENTION_MISTAKES:
        if _matches(outcomes, make, cases):
            return _not_yet(code, explanation, verbose)
    if _is_random(fn, cases, outcomes):
        return _not_yet("dropout_on", _random_text(fn, outcomes[0].weights), verbose)

    for o, case in zip(outcomes, cases, strict=True):
        if o.error is not None:
            code, message = _explain_error(fn, case, o.error)
            return _not_yet(code, message, verbose)

    first = ok.index(False)
    o, case, (ref_out, ref_w) = outcomes[first], cases[first], refs[first]
    if o.output.shape != ref_out.shape:
        return _not_yet(
            "wrong_shape",
            f"On the case '{case.name}' the output has shape "
            f"{tuple(o.output.shape)}; it should be (B, L_q, d_v) = {tuple(ref_out.shape)}: one "
            f"d_v-wide row per query. Check which tensors you multiply: weights (B, L_q, L_k) "
            f"@ value (B, L_k, d_v).",
            verbose,
        )
    if _close(o.output, ref_out):
        return _finish(
            False,
            "weights_wrong",
            f"Almost. Your output is right, but the weights you return are not the softmax "
            f"weights (case '{case.name}'). Return the tensor you multiplied with value, "
            f"after the softmax, not the scores.",
            verbose,
        )
    diff = (o.output - ref_out).abs().nan_to_num(nan=float("inf")).max().item()
    rows = ""
    if o.weights is not None and o.weights.shape == ref_w.shape:
        sums_ok = _close(o.weights.sum(dim=-1), torch.ones(ref_w.shape[:-1]))
        rows = (
            " Your weights' rows do sum to 1, so the mistake is elsewhere: the scale, the "
            "mask, or which tensor is transposed."
            if sums_ok
            else " Your weights' rows do not sum to 1: look at the softmax first."
        )
    return _not_yet(
        "unknown",
        f"On the case '{case.name}' your output differs from the reference by up to "
        f"{diff:.3g}, and it matches none of the classic single mistakes (÷d_k, no scaling, "
        f"softmax over the wrong dim, K Qᵀ, inverted or missing mask), so there may be two of "
        f"them at once.{rows} Compare your code with softmax(Q Kᵀ / √d_k) V line by line.",
        verbose,
    )


def _as_bool_mask(m: torch.Tensor) -> torch.Tensor | None:
    """The mask as bool, or None when it holds values other than 0 and 1."""
    if m.dtype == torch.bool:
        return m
    if not bool(((m == 0) | (m == 1)).all()):
        return None
    return m != 0


def _check_mask_fn(
    fn: Callable,
    args: list[object],
    expected: list[torch.Tensor],
    mistakes: list[tuple[str, str, Callable[[torch.Tensor], torch.Tensor]]],
    describe: Callable[[object], str],
    bool_hint: str,
    verbose: bool,
) -> CheckResult:
    name = _name_of(fn)
    results = []
    for arg in args:
        m, err = _call(fn, arg)
        if err is not None:
            return _call_failed(
                name,
                err,
                f"For {describe(arg)} your function raised {_raised(err)}. Fix that "
                f"line and run the check again.",
                verbose,
            )
        if not isinstance(m, torch.Tensor):
            return _not_yet(
                "bad_return",
                f"For {describe(arg)} {name} returned {type(m).__name__}; return a bool tensor.",
                verbose,
            )
        results.append(m)

    floats = [m.is_floating_point() for m in results]
    as_bool = [_as_bool_mask(m) for m in results]
    if any(b is None for b in as_bool):
        bad = next(m for m, b in zip(results, as_bool, strict=True) if b is None)
        return _not_yet(
            "mask_values",
            f"A keep-mask holds only True/False (or 1/0); yours holds "
            f"{sorted(set(bad.flatten().tolist()))[:6]}. Build it with a comparison, which "
            f"gives bool directly.",
            verbose,
        )

    def all_equal(transform: Callable[[torch.Tensor], torch.Tensor]) -> bool:
        for b, exp in zip(as_bool, expected, strict=True):
            want = transform(exp)
            if b.shape != want.shape or not torch.equal(b, want):
                return False
        return True

    if all_equal(lambda e: e):
        if any(floats):
            return _finish(
                False,
                "mask_float",
                f"Almost. The values and the shape are right, but the mask is "
                f"{results[floats.index(True)].dtype}. Return bool ({bool_hint}): PyTorch "
                f"reads a float mask as numbers to add to the scores, so attn_lib refuses "
                f"float masks.",
                verbose,
            )
        return _passed(
            f"{name} gives the right keep-mask (shape, dtype and values) for {len(args)} cases.",
            verbose,
        )
    for code, explanation, transform in mistakes:
        if all_equal(transform):
            return _not_yet(code, explanation, verbose)
    first = next(
        (a, b, e)
        for a, b, e in zip(args, as_bool, expected, strict=True)
        if b.shape != e.shape or not torch.equal(b, e)
    )
    arg, got, exp = first
    return _not_yet(
        "unknown",
        f"For {describe(arg)} your keep-mask differs from the expected one (True = may "
        f"attend) in {_mask_difference(got, exp)}.",
        verbose,
    )


def check_padding_mask(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check a hand-written padding-mask builder and name the mistake if any.

    ``fn(lengths)`` receives a 1-D int64 tensor of real lengths (B,) and must
    return the keep-mask for right-padded sequences of length L = max(lengths):
    bool (B, 1, L), True where position j < lengths[b] (a real token), so that it
    broadcasts over the query rows of (B, L, L) scores. Cases: lengths [4, 2],
    [3, 1, 5] and [2, 3, 1] (there B == L, where a (B, L) mask passes silently as
    an (L_q, L_k) one).

    Args:
        fn: the function to check.
        verbose: print the feedback paragraph.

    Returns:
        CheckResult; ``mistake`` is None or one of: "not_written", "error",
        "bad_return", "mask_values", "mask_float", "mask_not_unsqueezed",
        "mask_wrong_axis", "mask_inverted", "mask_off_by_one", "unknown".

    Source: article section 4.1; attn_lib.padding_mask.
    """
    lengths = [torch.tensor(v) for v in ([4, 2], [3, 1, 5], [2, 3, 1])]
    expected = [padding_mask(t) for t in lengths]

    def off_by_one(e: torch.Tensor) -> torch.Tensor:
        # (B, 1, L) with j <= length: one padded position too many is kept.
        longer = torch.cat([e[..., :1], e[..., :-1]], dim=-1) | e
        return longer

    mistakes = [
        (
            "mask_not_unsqueezed",
            (
                "Your mask has shape (B, L); it needs (B, 1, L). Scores are (B, L_q, L_k), and "
                "a 2-D mask is read as (L_q, L_k), so a (B, L) mask would either fail or, when "
                "B == L, silently mask query-key pairs instead of padded keys. Add the query axis "
                "with `.unsqueeze(1)`."
            ),
            lambda e: e[:, 0, :],
        ),
        (
            "mask_wrong_axis",
            (
                "Your mask has shape (B, L, 1): it blanks padded *query rows* instead of padded "
                "*key columns*. Put the 1 in the middle, (B, 1, L), with `.unsqueeze(1)`, so every "
                "query ignores the padded keys."
            ),
            lambda e: e.transpose(1, 2),
        ),
        (
            "mask_inverted",
            (
                "Your mask is inverted: it is True at the padding and False at the real tokens. "
                "A keep-mask is True where attention is allowed: `positions < lengths[:, None]`."
            ),
            lambda e: ~e,
        ),
        (
            "mask_not_unsqueezed",
            (
                "Your mask is inverted (True at the padding) and has shape (B, L) instead of "
                "(B, 1, L). Use `positions < lengths[:, None]`, then `.unsqueeze(1)`."
            ),
            lambda e: ~e[:, 0, :],
        ),
        (
            "mask_off_by_one",
            (
                "Your mask keeps one position too many: a sequence of length n has real tokens "
                "at positions 0 … n-1, so the test is `position < length`, not `<=`."
            ),
            off_by_one,
        ),
    ]
    return _check_mask_fn(
        fn,
        lengths,
        expected,
        mistakes,
        lambda t: f"lengths {t.tolist()}",
        "a comparison such as `positions < lengths[:, None]` already is",
        verbose,
    )


def check_causal_mask(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check a hand-written causal-mask builder and name the mistake if any.

    ``fn(L)`` receives an int and must return the causal keep-mask: bool (L, L),
    True on and below the diagonal (query i may attend to keys 0 … i). Cases:
    L = 1, 4, 6.

    Args:
        fn: the function to check.
        verbose: print the feedback paragraph.

    Returns:
        CheckResult; ``mistake`` is None or one of: "not_written", "error",
        "bad_return", "mask_values", "mask_float", "mask_future",
        "mask_diagonal", "mask_inverted", "unknown".

    Source: Vaswani et al. 2017, sec. 3.2.3; article section 4.1; attn_lib.causal_mask.
    """
    sizes = [1, 4, 6]
    expected = [causal_mask(L) for L in sizes]
    mistakes = [
        (
            "mask_future",
            (
                "Your mask is upper triangular: each query may see the keys *after* it and not "
                "the ones before. A causal mask keeps the past and the present: `torch.tril`, "
                "not `torch.triu`."
            ),
            lambda e: e.T,  # (L, L): .T is fine on a 2-D tensor
        ),
        (
            "mask_diagonal",
            (
                "Your mask blocks the diagonal: query i may not attend to itself, and query 0 has "
                "no key at all (a row with no allowed key). Keep the diagonal: "
                "`torch.ones(L, L).tril().bool()` (diagonal=0)."
            ),
            lambda e: e.tril(-1),
        ),
        (
            "mask_inverted",
            (
                "Your mask is inverted: True marks the future (blocked) positions. In a keep-mask "
                "True means 'may attend': the diagonal and below."
            ),
            lambda e: ~e,
        ),
    ]
    return _check_mask_fn(
        fn,
        sizes,
        expected,
        mistakes,
        lambda L: f"L = {L}",
        "build it with dtype=torch.bool, or call .bool() on the 0/1 tensor",
        verbose,
    )
