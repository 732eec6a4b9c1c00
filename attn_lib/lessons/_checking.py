"""Exercises: a solution is shown only after the reader has tried.

A stored notebook shows each exercise's check as it runs on the unwritten stub ("Not written
yet"), so a solution printed by a cell would be visible on GitHub before anyone tried. Instead
the solution lives in the lesson module, and ``show_solution`` prints its source only once the
reader's own function has been checked in this session.

Used by every notebook's "Check yourself" section.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

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
