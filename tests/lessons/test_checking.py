"""lessons/_checking.py: a solution is shown only after the reader's own function was checked."""

from __future__ import annotations

from dataclasses import dataclass

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
