"""Checkers for the "check yourself" exercises: run the reader's code, name the mistake in words.

Each checker runs the reader's function on a few seeded cases, compares it with
attn_lib's reference, and prints a short paragraph: what passed, or which classic
mistake the result matches (÷d_k instead of ÷√d_k, softmax over the wrong dim,
an inverted mask, …) and how to fix it. It returns a :class:`CheckResult`, which
is truthy only when everything passed, so a notebook can ``assert`` it.

Shapes in the cases are all different (B ≠ L_q ≠ L_k ≠ d_k ≠ d_v) so that a
transpose on the wrong dims cannot hide behind equal sizes.

Shape legend: B batch, L_q query length, L_k key length, d_k, d_v.
"""

from __future__ import annotations

import inspect
import math
import re
import textwrap
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch

from .core import scaled_dot_product_attention
from .masks import causal_mask, padding_mask

__all__ = [
    "CheckResult",
    "check_attention",
    "check_causal_mask",
    "check_padding_mask",
]

_SEED = 2024
_RTOL, _ATOL = 1e-4, 1e-5  # float32 with room for a different order of operations


@dataclass(frozen=True)
class CheckResult:
    """The verdict of a checker.

    Attributes:
        passed: True when every case matched the reference.
        mistake: None when passed, else a short code naming what went wrong, e.g.
            "not_written", "scale_d_k", "softmax_dim", "mask_inverted" (see the
            checker's docstring for the list).
        message: the feedback paragraph the checker printed.

    Source: SERIES.md of this series ("feedback in words, not a bare assert").
    """

    passed: bool
    mistake: str | None
    message: str

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        verdict = "passed" if self.passed else f"not passed: {self.mistake}"
        return f"CheckResult({verdict})"


def _finish(passed: bool, mistake: str | None, message: str, verbose: bool) -> CheckResult:
    text = "\n".join(
        textwrap.fill(p, width=88, break_on_hyphens=False, break_long_words=False)
        for p in message.split("\n")
    )
    if verbose:
        print(text)
    return CheckResult(passed=passed, mistake=mistake, message=text)


def _not_written(name: str, verbose: bool) -> CheckResult:
    return _finish(
        False,
        "not_written",
        f"Not written yet: {name} raised NotImplementedError. Replace the "
        f"`raise NotImplementedError` line with your code, run that cell, then run this "
        f"check again.",
        verbose,
    )


def _name_of(fn: object) -> str:
    return f"`{getattr(fn, '__name__', type(fn).__name__)}`"


def _source(fn: object) -> str:
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        return ""


# --- attention ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Case:
    name: str
    query: torch.Tensor  # (B, L_q, d_k)
    key: torch.Tensor  # (B, L_k, d_k)
    value: torch.Tensor  # (B, L_k, d_v)
    mask: torch.Tensor | None  # bool keep-mask


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


def _wrong_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None,
    *,
    scale: float,
    softmax_dim: int = -1,
    fill: float = -1e9,
    invert: bool = False,
    ignore_mask: bool = False,
    transpose_scores: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention with one deliberate mistake, as a learner might write it."""
    if transpose_scores:
        scores = torch.matmul(k, q.transpose(-2, -1))  # K Qᵀ: (B, L_k, L_q)
    else:
        scores = torch.matmul(q, k.transpose(-2, -1))  # (B, L_q, L_k)
    scores = scores * scale
    if mask is not None and not ignore_mask:
        blocked = mask if invert else ~mask
        scores = scores.masked_fill(blocked, fill)
    weights = torch.softmax(scores, dim=softmax_dim)
    return torch.matmul(weights, v), weights


# (code, explanation, how to build it from q, k, v, mask); order: most common first.
_MistakeFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None], tuple]


def _d_k(q: torch.Tensor) -> int:
    return q.shape[-1]


_ATTENTION_MISTAKES: list[tuple[str, str, _MistakeFn]] = [
    (
        "scale_d_k",
        (
            "Your scores are divided by d_k instead of √d_k. The dot product of two vectors "
            "with unit-variance entries has variance d_k, so dividing by √d_k brings its standard "
            "deviation back to 1; dividing by d_k shrinks the scores too much and flattens every "
            "row towards uniform. Use `scores / math.sqrt(d_k)` with d_k = query.size(-1)."
        ),
        lambda q, k, v, m: _wrong_attention(q, k, v, m, scale=1 / _d_k(q)),
    ),
    (
        "no_scale",
        (
            "Your scores are not scaled at all. Divide them by √d_k (d_k = query.size(-1)) "
            "before the softmax; without it, large d_k pushes rows towards one-hot and their "
            "gradients towards zero."
        ),
        lambda q, k, v, m: _wrong_attention(q, k, v, m, scale=1.0),
    ),
    (
        "scale_multiplied",
        (
            "Your scores are multiplied by √d_k instead of divided by it. Use "
            "`scores / math.sqrt(d_k)`."
        ),
        lambda q, k, v, m: _wrong_attention(q, k, v, m, scale=math.sqrt(_d_k(q))),
    ),
    (
        "scale_length",
        (
            "Your scores are divided by the square root of the sequence length, not of d_k. "
            "query.size(1) is L_q for a (B, L_q, d_k) query; the width you want is the last "
            "dim: query.size(-1)."
        ),
        lambda q, k, v, m: _wrong_attention(q, k, v, m, scale=1 / math.sqrt(q.shape[-2])),
    ),
    (
        "softmax_dim",
        (
            "Your softmax normalises over the queries (dim=-2, which is dim=1 for a 3-D batch) "
            "instead of over the keys. Each query's weights over all keys must sum to 1, so "
            "use `F.softmax(scores, dim=-1)`. The row-sum check catches this one: your rows do "
            "not sum to 1."
        ),
        lambda q, k, v, m: _wrong_attention(
            q, k, v, m, scale=1 / math.sqrt(_d_k(q)), softmax_dim=-2
        ),
    ),
    (
        "softmax_dim",
        (
            "Your softmax normalises over the batch (dim=0) instead of over the keys. Each "
            "query's weights over all keys must sum to 1: use `F.softmax(scores, dim=-1)`."
        ),
        lambda q, k, v, m: _wrong_attention(
            q, k, v, m, scale=1 / math.sqrt(_d_k(q)), softmax_dim=0
        ),
    ),
    (
        "scores_transposed",
        (
            "Your scores are K Qᵀ instead of Q Kᵀ: row i holds how key i scores against every "
            "query, so the weights come out transposed (and cross-attention with L_q ≠ L_k "
            "fails). Compute `torch.matmul(query, key.transpose(-2, -1))`: queries ask, keys "
            "answer."
        ),
        lambda q, k, v, m: _wrong_attention(
            q, k, v, m, scale=1 / math.sqrt(_d_k(q)), transpose_scores=True
        ),
    ),
    (
        "mask_inverted",
        (
            "Your mask polarity is inverted: you block the positions the mask allows and keep "
            "the ones it blocks. In the article's convention (and attn_lib's) True or 1 means "
            "'may attend', so fill where the mask is 0: `scores.masked_fill(mask == 0, -1e9)`. "
            "Note that PyTorch's nn.MultiheadAttention uses the opposite convention."
        ),
        lambda q, k, v, m: _wrong_attention(q, k, v, m, scale=1 / math.sqrt(_d_k(q)), invert=True),
    ),
    (
        "mask_inverted",
        (
            "Your mask polarity is inverted (and with a -inf fill, the rows where every key "
            "ended up blocked became NaN). In the article's convention True or 1 means 'may "
            "attend': `scores.masked_fill(mask == 0, -1e9)`."
        ),
        lambda q, k, v, m: _wrong_attention(
            q, k, v, m, scale=1 / math.sqrt(_d_k(q)), invert=True, fill=float("-inf")
        ),
    ),
    (
        "mask_fill_zero",
        (
            "Your masked scores are filled with 0, which does not mask anything: exp(0) = 1, so "
            "a blocked key still gets as much weight as a key with score 0. Fill with a large "
            "negative number instead: `scores.masked_fill(mask == 0, -1e9)`."
        ),
        lambda q, k, v, m: _wrong_attention(q, k, v, m, scale=1 / math.sqrt(_d_k(q)), fill=0.0),
    ),
    (
        "mask_missing",
        (
            "Your function ignores the mask: without a mask it is right, with one it is not. "
            "Before the softmax, add `if mask is not None: scores = scores.masked_fill(mask == "
            "0, -1e9)`."
        ),
        lambda q, k, v, m: _wrong_attention(
            q, k, v, m, scale=1 / math.sqrt(_d_k(q)), ignore_mask=True
        ),
    ),
]


@dataclass
class _Outcome:
    output: torch.Tensor | None = None
    weights: torch.Tensor | None = None
    error: BaseException | None = None
    bad_return: str | None = None


def _call_attention(fn: Callable, case: _Case) -> _Outcome:
    args = [case.query.clone(), case.key.clone(), case.value.clone()]
    if case.mask is not None:
        args.append(case.mask.clone())
    try:
        # Warnings (e.g. PyTorch's about `.T` on a batch) are explained in words instead.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = fn(*args)
    except Exception as err:  # noqa: BLE001 - the learner's error is reported, in words
        return _Outcome(error=err)
    if isinstance(result, tuple | list):
        if len(result) != 2 or not all(isinstance(t, torch.Tensor) for t in result):
            return _Outcome(
                bad_return=f"returned a {type(result).__name__} of length {len(result)}; "
                f"return either the output tensor or a pair (output, weights)."
            )
        return _Outcome(output=result[0].detach(), weights=result[1].detach())
    if not isinstance(result, torch.Tensor):
        return _Outcome(
            bad_return=f"returned {type(result).__name__}, not a tensor; return the output "
            f"tensor (or a pair (output, weights))."
        )
    return _Outcome(output=result.detach())


def _close(a: torch.Tensor | None, b: torch.Tensor) -> bool:
    if a is None or a.shape != b.shape:
        return False
    try:
        torch.testing.assert_close(a.to(b.dtype), b, rtol=_RTOL, atol=_ATOL, equal_nan=True)
    except AssertionError:
        return False
    return True


def _matches(outcomes: list[_Outcome], make: _MistakeFn, cases: list[_Case]) -> bool:
    """Does the learner behave like this mistake on every case (same output, or both raise)?"""
    for outcome, case in zip(outcomes, cases, strict=True):
        try:
            expected, _ = make(case.query, case.key, case.value, case.mask)
        except Exception:  # noqa: BLE001 - the mistake itself cannot run on this case
            if outcome.error is None:
                return False
            continue
        if outcome.error is not None or not _close(outcome.output, expected):
            return False
    return True


_GOOD_TRANSPOSES = {"-2,-1", "-1,-2", "1,2", "2,1"}


def _explain_error(fn: object, case: _Case, err: BaseException) -> tuple[str, str]:
    """(mistake code, message) for an exception raised by the learner's function."""
    src = _source(fn)
    what = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
    where = f"On the case '{case.name}' your function raised {what}"
    if re.search(r"\.T\b", src):
        return (
            "dot_T",
            (
                f"{where}. Your code uses `.T`. On a batch of matrices `.T` does not swap the "
                f"last two dims: it reverses every dim ((B, L_k, d_k) becomes (d_k, L_k, B)), "
                f"and PyTorch has deprecated it for tensors that are not 2-D. Use "
                f"`key.transpose(-2, -1)` or `key.mT`, which swap only the last two dims."
            ),
        )
    odd = [
        args
        for args in re.findall(r"transpose\(([^()]*)\)", src)
        if args.replace(" ", "") not in _GOOD_TRANSPOSES
    ]
    shape_words = ("size", "shape", "dimension", "Dimension", "match", "multiplied")
    if odd or (
        isinstance(err, RuntimeError | IndexError) and any(w in str(err) for w in shape_words)
    ):
        hint = f" (your code calls transpose({odd[0]}))" if odd else ""
        return (
            "transpose_dims",
            (
                f"{where}. That is a shape mismatch{hint}. For query (B, L_q, d_k) and key "
                f"(B, L_k, d_k), Q Kᵀ needs key with its last two dims swapped: "
                f"`key.transpose(-2, -1)` → (B, d_k, L_k), giving scores (B, L_q, L_k). Swapping "
                f"any other pair of dims (or none) only works by accident when sizes happen to be "
                f"equal; the check uses different sizes on purpose."
            ),
        )
    return (
        "error",
        f"{where}. Read the message, fix the line it points to, and run the check again. "
        f"The inputs were query {tuple(case.query.shape)}, key {tuple(case.key.shape)}, "
        f"value {tuple(case.value.shape)}"
        + ("." if case.mask is None else f", mask {tuple(case.mask.shape)} (bool, True = attend)."),
    )


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
        "scale_multiplied", "scale_length", "softmax_dim", "scores_transposed",
        "mask_inverted", "mask_fill_zero", "mask_missing", "wrong_shape",
        "weights_wrong", "unknown".

    Source: article sections 3.2-3.3 and 4.1-4.2; Vaswani et al. 2017, eq. (1).
    """
    name = _name_of(fn)
    cases = _attention_cases()
    outcomes = [_call_attention(fn, case) for case in cases]

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
        return _finish(
            True,
            None,
            f"Passed. {name} matches attn_lib's reference on all {len(cases)} cases (batched "
            f"self-attention, cross-attention with L_q ≠ L_k, a padding mask and a causal "
            f"mask): the output{extra} agree to float32 precision.",
            verbose,
        )

    for code, explanation, make in _ATTENTION_MISTAKES:
        if _matches(outcomes, make, cases):
            return _finish(False, code, f"Not yet. {explanation}", verbose)

    for o, case in zip(outcomes, cases, strict=True):
        if o.error is not None:
            code, message = _explain_error(fn, case, o.error)
            return _finish(False, code, f"Not yet. {message}", verbose)

    first = ok.index(False)
    o, case, (ref_out, ref_w) = outcomes[first], cases[first], refs[first]
    if o.output.shape != ref_out.shape:
        return _finish(
            False,
            "wrong_shape",
            f"Not yet. On the case '{case.name}' the output has shape "
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
    return _finish(
        False,
        "unknown",
        f"Not yet. On the case '{case.name}' your output differs from the reference by up to "
        f"{diff:.3g}, and it matches none of the classic single mistakes (÷d_k, no scaling, "
        f"softmax over the wrong dim, K Qᵀ, inverted or missing mask), so there may be two of "
        f"them at once.{rows} Compare your code with softmax(Q Kᵀ / √d_k) V line by line.",
        verbose,
    )


# --- masks --------------------------------------------------------------------------------


def _as_bool_mask(m: torch.Tensor) -> torch.Tensor | None:
    """The mask as bool, or None when it holds values other than 0 and 1."""
    if m.dtype == torch.bool:
        return m
    if not bool(((m == 0) | (m == 1)).all()):
        return None
    return m != 0


def _call_mask_fn(fn: Callable, arg: object) -> tuple[torch.Tensor | None, BaseException | None]:
    try:
        return fn(arg), None
    except Exception as err:  # noqa: BLE001 - reported in words
        return None, err


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
        m, err = _call_mask_fn(fn, arg)
        if isinstance(err, NotImplementedError):
            return _not_written(name, verbose)
        if err is not None:
            return _finish(
                False,
                "error",
                f"Not yet. For {describe(arg)} your function raised {type(err).__name__}: "
                f"{err}. Fix that line and run the check again.",
                verbose,
            )
        if not isinstance(m, torch.Tensor):
            return _finish(
                False,
                "bad_return",
                f"Not yet. For {describe(arg)} {name} returned {type(m).__name__}; return a "
                f"bool tensor.",
                verbose,
            )
        results.append(m)

    floats = [m.is_floating_point() for m in results]
    as_bool = [_as_bool_mask(m) for m in results]
    if any(b is None for b in as_bool):
        bad = next(m for m, b in zip(results, as_bool, strict=True) if b is None)
        return _finish(
            False,
            "mask_values",
            f"Not yet. A keep-mask holds only True/False (or 1/0); yours holds "
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
        return _finish(
            True,
            None,
            f"Passed. {name} gives the right keep-mask (shape, dtype and values) for "
            f"{len(args)} cases.",
            verbose,
        )
    for code, explanation, transform in mistakes:
        if all_equal(transform):
            return _finish(False, code, f"Not yet. {explanation}", verbose)
    first = next(
        (a, b, e)
        for a, b, e in zip(args, as_bool, expected, strict=True)
        if b.shape != e.shape or not torch.equal(b, e)
    )
    arg, got, exp = first
    return _finish(
        False,
        "unknown",
        f"Not yet. For {describe(arg)} the expected keep-mask has shape {tuple(exp.shape)} "
        f"and is\n{exp.int().tolist()}\nbut yours has shape {tuple(got.shape)} and is\n"
        f"{got.int().tolist()}\n(1 = may attend, 0 = blocked).",
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
