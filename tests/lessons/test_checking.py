"""lessons/_checking.py: a solution is shown only after the reader's own function was checked;
every lesson's checker answers a stub (``raise NotImplementedError``) in words, not a traceback."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from attn_lib import lessons
from attn_lib.lessons import _checking


@dataclass
class Result:
    mistake: str | None


def answer(x):
    return x + 1


def test_solution_waits_for_an_attempt(capsys, monkeypatch):
    monkeypatch.setattr(_checking, "_ATTEMPTED", set())
    verdicts = iter(["not_written", "scale_d_k"])
    check = _checking.recording("ex", lambda fn, **kw: Result(next(verdicts)))
    check(answer)  # the stub: not an attempt
    _checking.show_solution("ex", answer)
    assert "Try it first" in capsys.readouterr().out
    assert check(answer).mistake == "scale_d_k"  # a wrong answer is an attempt
    _checking.show_solution("ex", answer)
    assert "return x + 1" in capsys.readouterr().out
    _checking.show_solution("other", answer)
    assert "Try it first" in capsys.readouterr().out


def _checkers() -> list[tuple[str, Callable[..., Any]]]:
    """Every lesson's exercise checker: the ``check_*`` names that ``recording`` made."""
    found = []
    for info in pkgutil.iter_modules(lessons.__path__):
        if info.name.startswith("nb") and not info.name.endswith("_views"):
            module = importlib.import_module(f"{lessons.__name__}.{info.name}")
            for name, obj in vars(module).items():
                code = getattr(obj, "__code__", None)
                if name.startswith("check_") and code and code.co_qualname == _RECORDING:
                    found.append((f"{info.name}.{name}", obj))
    return found


_RECORDING = _checking.recording("-", answer).__code__.co_qualname
CHECKERS = _checkers()


def test_every_lesson_has_its_checkers_here():
    assert len(CHECKERS) >= 20 and any(n.startswith("nb10_") for n, _ in CHECKERS), CHECKERS


@pytest.mark.parametrize("check", [c for _, c in CHECKERS], ids=[n for n, _ in CHECKERS])
def test_a_stub_is_not_written_yet_in_words_and_no_attempt(check, capsys, monkeypatch):
    def stub(*args, **kwargs):
        raise NotImplementedError

    monkeypatch.setattr(_checking, "_ATTEMPTED", set())
    result = check(stub)
    assert not result and result.mistake == "not_written"
    out = capsys.readouterr().out
    assert "Not written yet" in out and "Traceback" not in out
    assert not _checking._ATTEMPTED  # a stub is no attempt: the solution stays hidden
