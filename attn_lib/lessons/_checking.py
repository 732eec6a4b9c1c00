"""What every checker shares: CheckResult, the runner around the reader's function, and
solutions shown only after the reader has tried (a stored notebook shows each check on the
unwritten stub, so a printed solution would be visible on GitHub before anyone tried).

A checker runs the reader's function on seeded cases, compares it with attn_lib and prints what
passed, or which classic mistake the result matches and how to fix it. Also shared: the
attention checker, which names the mistake of attn_lib.mistakes a function matches (notebooks
05 and 08), mask differences (06, 07), shape hints (00, 04). Used by every "Check yourself".
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
import operator
import re
import textwrap
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ..attention import scaled_dot_product_attention
from ..mistakes import FILLS, MISTAKES, Mistake, find

_ATTEMPTED: set[str] = set()


def recording(exercise: str, checker: Callable[..., Any]) -> Callable[..., Any]:
    """``checker`` that also records an attempt at ``exercise`` (the name ``show_solution`` is
    given) once its result's ``mistake`` is no longer "not_written"."""

    @functools.wraps(checker)
    def check(fn: Callable[..., Any], **kwargs: Any) -> Any:
        result = checker(fn, **kwargs)
        if getattr(result, "mistake", None) != "not_written":
            _ATTEMPTED.add(exercise)
        return result

    return check


def mark_attempted(exercise: str) -> None:
    """Record an attempt at ``exercise`` (for exercises without a function to check)."""
    _ATTEMPTED.add(exercise)


def attempted(exercise: str) -> bool:
    """True once the reader has tried ``exercise`` in this session."""
    return exercise in _ATTEMPTED


def show_solution(exercise: str, solution: Callable[..., Any]) -> None:
    """Print the source of ``solution`` if ``exercise`` was attempted, else say to try first."""
    if exercise not in _ATTEMPTED:
        print(
            "Try it first: write your function in the cell above and run its check. Then run "
            "this cell again to see one solution."
        )
        return
    print(inspect.getsource(solution).rstrip())


_SEED = 2024


@dataclass(frozen=True)
class CheckResult:
    """A checker's verdict, truthy only when every case passed; ``mistake`` is None or a code
    ("not_written", a code of attn_lib.mistakes such as "scale_d_k" …); ``message`` is printed."""

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


def _passed(message: str, verbose: bool) -> CheckResult:
    """A passed check: "Passed. " + message."""
    return _finish(True, None, f"Passed. {message}", verbose)


def _not_yet(mistake: str, message: str, verbose: bool) -> CheckResult:
    """A failed check: "Not yet. " + message."""
    return _finish(False, mistake, f"Not yet. {message}", verbose)


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


def _call(fn: Callable, *args: object, quiet: bool = False) -> tuple[object, Exception | None]:
    """(what fn returned, None), or (None, the exception) when the learner's code raised; with
    ``quiet``, warnings (PyTorch's about `.T` on a batch) are silenced: checkers explain them."""
    try:
        if not quiet:
            return fn(*args), None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(*args), None
    except Exception as err:  # noqa: BLE001 - the learner's error is reported, in words
        return None, err


def _raised(err: BaseException, *, first_line: bool = False) -> str:
    """'TypeError: the message' (only its first line with ``first_line``) for feedback."""
    text = str(err)
    if first_line:
        text = text.splitlines()[0] if text else ""
    return f"{type(err).__name__}: {text}"


def _number(value: object) -> tuple[object, bool]:
    """(value, whether it is a real number) as an int (integer types) or a float: from numpy
    scalars, Fraction, one-element tensors or arrays too; a bool is not a number here."""
    if isinstance(value, torch.Tensor):
        if value.numel() != 1 or value.dtype == torch.bool:
            return value, False
        value = value.item()
    elif type(value).__module__ == "numpy" and getattr(value, "size", 0) == 1:
        if value.dtype.kind == "b":
            return value, False
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return value, False
    if isinstance(value, numbers.Integral):
        return operator.index(value), True
    return float(value), True


def _short(value: object, limit: int = 60) -> str:
    """repr(value) cut to about ``limit`` characters: a returned object, never a wall of it."""
    if isinstance(value, torch.Tensor) and value.numel() > 1:
        return f"a tensor of shape {tuple(value.shape)} ({value.dtype})"
    if type(value).__module__ == "numpy" and getattr(value, "size", 1) > 1:
        return f"a numpy array of shape {tuple(value.shape)} ({value.dtype})"
    text = repr(value).replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _call_failed(name: str, err: BaseException, message: str, verbose: bool) -> CheckResult:
    """NotImplementedError: "not written yet"; another error: "Not yet. " + message."""
    if isinstance(err, NotImplementedError):
        return _not_written(name, verbose)
    return _not_yet("error", message, verbose)


def _value_difference(got: torch.Tensor, want: torch.Tensor) -> str:
    """The largest difference between two float tensors of one shape, in words."""
    diff = (got.double() - want.double()).abs().nan_to_num(nan=math.inf)
    where = tuple(torch.unravel_index(diff.argmax(), diff.shape)) if diff.dim() else ()
    where = tuple(int(i) for i in where)
    return (
        f"the largest difference is at index {where}: yours is {float(got[where]):.4g}, "
        f"expected {float(want[where]):.4g}"
    )


def _known_mistake(got: float, known: list[tuple[float, str, str]]) -> tuple[str, str]:
    """The (code, hint) of the first known wrong answer that ``got`` equals, else "wrong_value"."""
    for value, code, why in known:
        if math.isclose(got, value, rel_tol=1e-9):
            return code, why
    return "wrong_value", ""


_RTOL, _ATOL = 1e-4, 1e-5  # float32 with room for a different order of operations


def _source(fn: object) -> str:
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        return ""


@dataclass(frozen=True)
class _Case:
    name: str
    query: torch.Tensor  # (B, L_q, d_k)
    key: torch.Tensor  # (B, L_k, d_k)
    value: torch.Tensor  # (B, L_k, d_v)
    mask: torch.Tensor | None  # bool keep-mask


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
    result, err = _call(fn, *args, quiet=True)
    if err is not None:
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


def _call_attention_seeded(fn: Callable, cases: list[_Case], seed: int) -> list[_Outcome]:
    """_call_attention on every case with the RNG seeded, leaving the global RNG alone."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return [_call_attention(fn, case) for case in cases]


def _is_random(fn: Callable, cases: list[_Case], outcomes: list[_Outcome]) -> bool:
    """Does fn give another output when called again on the same inputs with another seed?"""
    again = _call_attention_seeded(fn, cases, _SEED + 1)
    for first, second in zip(outcomes, again, strict=True):
        if first.output is None or second.output is None:
            continue
        with warnings.catch_warnings():  # a complex output: compared by its real part
            warnings.simplefilter("ignore")
            a, b = first.output.double().nan_to_num(), second.output.double().nan_to_num()
        if not torch.equal(a, b):
            return True
    return False


def _random_text(fn: object, weights: torch.Tensor | None) -> str:
    """Why an attention function that gives different outputs on the same inputs is wrong."""
    uses_dropout = "dropout" in _source(fn).lower()
    rows = "" if weights is None else _row_sums(weights)
    what = (
        "Your function applies dropout, and it is on every time it runs"
        if uses_dropout
        else "Something random runs inside your function, most likely dropout"
    )
    return (
        f"{what}: called twice on the same inputs, it gives two different outputs.{rows} "
        f"{find('dropout_on').why} Attention itself is deterministic."
    )


def _close(a: torch.Tensor | None, b: torch.Tensor) -> bool:
    if a is None or a.shape != b.shape:
        return False
    try:
        torch.testing.assert_close(a.to(b.dtype), b, rtol=_RTOL, atol=_ATOL, equal_nan=True)
    except AssertionError:
        return False
    return True


def _matches(
    outcomes: list[_Outcome], mistake: Mistake, cases: list[_Case], fill: float | None
) -> bool:
    """Does the learner behave like this mistake, with this fill, on every case (the same
    output, or both raise), and is it told apart from the right attention on one of them?"""
    told_apart = False
    for outcome, case in zip(outcomes, cases, strict=True):
        args = (case.query, case.key, case.value, case.mask)
        try:
            expected, _ = mistake.attention(*args, fill_value=fill)
        except Exception:  # noqa: BLE001 - the mistake itself cannot run on this case
            if outcome.error is None:
                return False
            continue
        if outcome.error is not None or not _close(outcome.output, expected):
            return False
        right, _ = scaled_dot_product_attention(*args, fill_value=fill)
        told_apart = told_apart or not _close(expected, right)
    return told_apart


def _named_mistake(outcomes: list[_Outcome], cases: list[_Case]) -> tuple[str, str] | None:
    """(code, message) of the first mistake of attn_lib.mistakes the learner matches, or None."""
    fills = FILLS if any(c.mask is not None for c in cases) else FILLS[:1]
    for mistake in (m for m in MISTAKES if m.recomputes):  # the others are text only
        for fill in fills:
            if _matches(outcomes, mistake, cases, fill):
                return mistake.code, f"Your function computes {mistake.explain(fill=fill)}"
    return None


_GOOD_TRANSPOSES = {"-2,-1", "-1,-2", "1,2", "2,1"}


def _explain_error(fn: object, case: _Case, err: BaseException) -> tuple[str, str]:
    """(mistake code, message) for an exception raised by the learner's function."""
    src = _source(fn)
    what = _raised(err, first_line=True)
    where = f"On the case '{case.name}' your function raised {what}"
    if re.search(r"\.T\b", src):
        return (
            "dot_T",
            f"{where}. Your code uses `.T`. {find('dot_T').why}",
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


def _row_sums(weights: torch.Tensor) -> str:
    """' Your rows sum to a … b, not 1.' when they do not sum to 1, else ''."""
    sums = weights.detach().double().sum(dim=-1).nan_to_num(nan=math.inf)
    if bool(((sums - 1).abs() < 1e-3).all()):
        return ""
    low, high = sums.min().item(), sums.max().item()
    span = f"{low:.4g}" if math.isclose(low, high, rel_tol=1e-4) else f"{low:.4g} … {high:.4g}"
    return f" Your rows sum to {span}, not 1."


def _check_attention_cases(
    fn: Callable, cases: list[_Case], passed: str, verbose: bool
) -> CheckResult:
    """Run ``fn(query, key, value[, mask])`` → output or (output, weights) on ``cases``,
    compare it with attn_lib, and name the mistake (notebooks 05 and 08).

    Returns:
        CheckResult; ``mistake`` is None, a code of attn_lib.mistakes ("scale_d_k",
        "softmax_dim", "dropout_on" …), or "not_written", "bad_return", "dot_T",
        "transpose_dims", "error", "wrong_shape", "weights_wrong", "unknown".
    """
    name = _name_of(fn)
    outcomes = _call_attention_seeded(fn, cases, _SEED)
    if any(isinstance(o.error, NotImplementedError) for o in outcomes):
        return _not_written(name, verbose)
    if bad := next((o.bad_return for o in outcomes if o.bad_return), None):
        return _not_yet("bad_return", f"{name} {bad}", verbose)
    refs = [scaled_dot_product_attention(c.query, c.key, c.value, c.mask) for c in cases]
    ok = [o.error is None and _close(o.output, out) and (o.weights is None or _close(o.weights, w))
          for o, (out, w) in zip(outcomes, refs, strict=True)]  # fmt: skip
    if all(ok):
        return _passed(f"{name} {passed}", verbose)
    if named := _named_mistake(outcomes, cases):
        return _not_yet(*named, verbose)
    if _is_random(fn, cases, outcomes):
        return _not_yet("dropout_on", _random_text(fn, outcomes[0].weights), verbose)
    for o, case in zip(outcomes, cases, strict=True):
        if o.error is not None:
            return _not_yet(*_explain_error(fn, case, o.error), verbose)
    i = ok.index(False)
    o, case, (ref_out, ref_w) = outcomes[i], cases[i], refs[i]
    if o.output.shape != ref_out.shape:
        return _not_yet("wrong_shape", f"On the case '{case.name}' the output has shape "
                        f"{tuple(o.output.shape)}; it should be {tuple(ref_out.shape)}: one d_v-wide "
                        f"row per query. Check which tensors you multiply: weights (…, L_q, L_k) @ "
                        f"value (…, L_k, d_v).", verbose)  # fmt: skip
    if _close(o.output, ref_out):
        return _not_yet("weights_wrong", f"Your output is right, but the weights you return are "
                        f"not the softmax weights (case '{case.name}'). Return the tensor you "
                        f"multiplied with value, after the softmax, not the scores.", verbose)  # fmt: skip
    rows = ""
    if o.weights is not None and o.weights.shape == ref_w.shape:
        rows = (" Your weights' rows do not sum to 1: look at the softmax first."
                if _row_sums(o.weights) else " Your weights' rows do sum to 1, so the mistake "
                "is elsewhere: the scale, the mask, or which tensor is transposed.")  # fmt: skip
    diff = (o.output - ref_out).abs().nan_to_num(nan=math.inf).max().item()
    return _not_yet("unknown", f"On the case '{case.name}' your output differs from the "
                    f"reference by up to {diff:.3g}, and it matches none of the classic single "
                    f"mistakes (÷d_k, no scaling, softmax over the wrong dim, K Qᵀ, inverted or "
                    f"missing mask), so there may be two of them at once.{rows} Compare your code "
                    f"with softmax(Q Kᵀ / √d_k) V line by line; Kᵀ is key.transpose(-2, -1).",
                    verbose)  # fmt: skip


def _mask_difference(
    got: torch.Tensor,
    want: torch.Tensor,
    true_means: str = "may attend",
    false_means: str = "blocked",
) -> str:
    """Where two bool masks differ, in words (never the whole masks): 'N of M cells, …'."""
    if got.shape != want.shape:
        return f"shape: yours is {tuple(got.shape)}, the expected one {tuple(want.shape)}"
    wrong = (got != want).nonzero().tolist()
    if not wrong:
        return "no cell (the values agree; only the dtype differs)"
    first = tuple(wrong[0])
    where = f"index {first}"
    if len(first) >= 2:
        where += f" (query row {first[-2]}, key column {first[-1]})"

    def word(value: bool) -> str:
        return f"{value} ({true_means if value else false_means})"

    return (
        f"{len(wrong)} of {want.numel()} cells; the first is at {where}, which should be "
        f"{word(bool(want[first]))} but is {word(bool(got[first]))} in yours"
    )


def _as_size(value: object) -> int | None:
    """An integer-valued size as an int (numpy ints, 0-d tensors, 4.0 and Fraction(4) too)."""
    value, is_number = _number(value)
    if not is_number:
        return None
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    return value


def _sizes_text(sizes: tuple[int, ...]) -> str:
    names = ("B", "L_q", "L_k", "d_model", "d_k", "d_v")
    return ", ".join(f"{n}={v}" for n, v in zip(names, sizes, strict=True))


def _as_shape_tuple(value: object) -> tuple[int, ...] | None:
    """A shape (tuple, list, torch.Size, 1-D tensor or array of integer sizes) as a tuple of
    ints, else None."""
    if isinstance(value, torch.Tensor) or type(value).__module__ == "numpy":
        if getattr(value, "ndim", None) != 1:
            return None
        value = value.tolist()
    if not isinstance(value, tuple | list):  # torch.Size is a tuple
        return None
    sizes = [_as_size(d) for d in value]
    return None if any(d is None for d in sizes) else tuple(sizes)


def _shape_hint(name: str, got: tuple[int, ...], sizes: tuple[int, ...]) -> tuple[str, str]:
    """(mistake code, explanation) for a wrong shape of one entry."""
    B, L_q, L_k, d_model, d_k, d_v = sizes
    known: dict[tuple[str, tuple[int, ...]], tuple[str, str]] = {
        ("Q", (B, L_q, d_model)): ("width_d_model", "W_Q maps each d_model-wide token to d_k numbers, so Q is d_k wide."),
        ("Q", (B, L_k, d_k)): ("query_length", "Q has one row per query: L_q rows. In cross-attention the queries come from the sequence that asks."),
        ("K", (B, L_q, d_k)): ("key_length", "K has one row per key: L_k rows. In cross-attention the keys come from the other sequence, the one being searched."),
        ("K", (B, L_k, d_model)): ("width_d_model", "W_K maps each token to d_k numbers, so K is d_k wide (it must match Q's width for the dot products)."),
        ("K", (B, d_k, L_k)): ("key_transposed", "That is Kᵀ. K itself is (B, L_k, d_k); attention transposes it when it computes Q Kᵀ."),
        ("V", (B, L_k, d_k)): ("value_width", "W_V maps d_model to d_v, and d_v need not equal d_k: V is d_v wide."),
        ("V", (B, L_q, d_v)): ("value_length", "V has one row per key (L_k rows): each value travels with its key."),
        ("V", (B, L_k, d_model)): ("width_d_model", "W_V maps each token to d_v numbers, so V is d_v wide."),
        ("scores", (B, L_k, L_q)): ("scores_transposed", "Rows are queries and columns are keys: Q Kᵀ is (L_q, d_k) @ (d_k, L_k) = (L_q, L_k)."),
        ("scores", (B, L_q, d_k)): ("scores_width", "Scores compare every query with every key, one number per pair: (L_q, L_k)."),
        ("scores", (B, L_q, L_q)): ("scores_square", "Scores pair every query with every key; with L_q ≠ L_k they are not square: (L_q, L_k)."),
        ("scores", (B, L_k, L_k)): ("scores_square", "Scores pair every query with every key; with L_q ≠ L_k they are not square: (L_q, L_k)."),
        ("output", (B, L_q, d_k)): ("output_width", "Each output row is a blend of rows of V, so it is d_v wide, not d_k."),
        ("output", (B, L_k, d_v)): ("output_length", "There is one output row per query: L_q rows."),
        ("output", (B, L_q, L_k)): ("output_is_weights", "That is the weights' shape; the output is weights @ V: (L_q, L_k) @ (L_k, d_v) = (L_q, d_v)."),
        ("output", (B, L_q, d_model)): ("output_width", "A single-head attention without an output projection returns d_v-wide rows, the width of V."),
    }  # fmt: skip
    if name == "weights":
        return "weights_shape", "Softmax keeps the shape: the weights have the scores' shape."
    if len(got) == 2:
        return "batch_missing", "Keep the batch dim B in front: every tensor here is (B, …, …)."
    return known.get((name, got), ("wrong_shape", ""))


def _shape_answer(
    name: str, got: object, want: dict[str, tuple[int, ...]], sizes: tuple[int, ...],
    verbose: bool, hint: Callable[..., tuple[str, str]] = _shape_hint,
) -> CheckResult | None:  # fmt: skip
    """None when ``got``, the reader's dict of shapes, holds every shape of ``want``; else the
    verdict, its hint from ``hint(entry, shape, sizes)`` (notebooks 00 and 04)."""
    if not isinstance(got, dict):
        return _not_yet("bad_return", f"{name} returned {type(got).__name__}; return a dict of "
                        f"shapes, such as {{{next(iter(want))!r}: (…), …}}.", verbose)  # fmt: skip
    missing = [n for n in want if n not in got]
    if missing:
        return _not_yet("missing", f"The dict has no entry for {', '.join(missing)}; give all "
                        f"{len(want)}: {', '.join(want)}.", verbose)  # fmt: skip
    for entry, shape_wanted in want.items():
        shape = _as_shape_tuple(got[entry])
        if shape is None:
            return _not_yet("bad_return", f"{entry} is {_short(got[entry])}; give each shape as "
                            "a tuple of ints, e.g. (3, 5, 7).", verbose)  # fmt: skip
        if shape != shape_wanted:
            code, why = hint(entry, shape, sizes)
            return _not_yet(code, f"For {_sizes_text(sizes)} you gave {entry} = {shape}, but it "
                            f"is {shape_wanted}. {why}".rstrip(), verbose)  # fmt: skip
    return None


def _tensors(result: object, n: int) -> bool:
    """Is result a tuple or list of exactly n tensors?"""
    return (
        isinstance(result, tuple | list)
        and len(result) == n
        and all(isinstance(t, torch.Tensor) for t in result)
    )
