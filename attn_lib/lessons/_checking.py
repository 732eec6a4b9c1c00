"""What every checker shares: CheckResult, the runner around the reader's function, and the
rule that a solution is shown only after the reader has tried.

Each checker (in its notebook's lesson module) runs the reader's function on a few seeded
cases, compares it with attn_lib's reference, and prints a short paragraph: what passed, or
which classic mistake the result matches and how to fix it. It returns a :class:`CheckResult`,
which is truthy only when everything passed, so a notebook can ``assert`` it.

A stored notebook shows each exercise's check as it runs on the unwritten stub ("Not written
yet"), so a solution printed by a cell would be visible on GitHub before anyone tried. Instead
the solution lives in the lesson module, and ``show_solution`` prints its source only once the
reader's own function has been checked in this session.

Used by every notebook's "Check yourself" section.
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
import operator
import textwrap
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

_ATTEMPTED: set[str] = set()


def recording(exercise: str, checker: Callable[..., Any]) -> Callable[..., Any]:
    """``checker`` that also records an attempt at ``exercise`` once the function is written.

    Args:
        exercise: the exercise's name, as ``show_solution`` is given it.
        checker: a checker returning a result with a ``mistake`` attribute ("not_written"
            while the reader's function still raises NotImplementedError).
    """

    @functools.wraps(checker)
    def check(fn: Callable[..., Any], **kwargs: Any) -> Any:
        result = checker(fn, **kwargs)
        if getattr(result, "mistake", None) != "not_written":
            _ATTEMPTED.add(exercise)
        return result

    return check


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
    """(what fn returned, None), or (None, the exception) when the learner's code raised.

    With ``quiet``, warnings (e.g. PyTorch's about `.T` on a batch) are silenced: the
    checkers explain them in words instead.
    """
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
    """(value, whether it is a real number), as a Python int or float.

    Accepts what a learner may reasonably return: int, float, numpy scalars, Fraction,
    and one-element tensors or arrays. An integer type becomes an int (exact);
    any other real number a float. A bool is not a number here, so True cannot pass for 1.
    """
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
