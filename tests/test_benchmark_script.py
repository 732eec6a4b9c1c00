"""tools/benchmark.py's bookkeeping (its timings are printed, never asserted here)."""

import inspect

import pytest
from helpers import load_tool


@pytest.fixture(scope="module")
def benchmark():
    return load_tool("benchmark")


def test_report_prints_the_verdict_beside_the_target(benchmark, capsys):
    benchmark.rows.clear()
    benchmark.report("P9", "a figure", "12.0 ms", "<= 100 ms", True)
    benchmark.report("P9", "another", "3.0x", "<= 1.10", False)
    benchmark.report("P9", "not judged", "-", "<= 1", None)
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("<= 100 ms ok") and out[1].endswith("<= 1.10 MISSED")
    assert out[2].endswith("<= 1")
    assert [r[3] for r in benchmark.rows] == ["<= 100 ms ok", "<= 1.10 MISSED", "<= 1"]
    benchmark.rows.clear()


def test_load_line_warns_only_before_the_run_and_only_when_busy(benchmark, monkeypatch):
    import psutil

    monkeypatch.setattr(benchmark.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(psutil, "cpu_percent", lambda interval: 10.0)
    assert benchmark.load_line() == "CPU use over the last second: 10 % of 2 CPUs"
    monkeypatch.setattr(psutil, "cpu_percent", lambda interval: 90.0)
    assert "a busy machine (other work is using 1.8 of 2 CPUs)" in benchmark.load_line()
    assert "busy" not in benchmark.load_line(warn=False)  # the end of a run: its own load


def test_p2_times_every_dashboard_of_the_series(benchmark):
    from attn_lib.lessons._dashboard import Dashboard

    found = {cls.__name__ for cls in benchmark.dashboard_classes()}
    every = {
        name
        for module in benchmark.dashboard_modules()
        for name, obj in inspect.getmembers(module, inspect.isclass)
        if issubclass(obj, Dashboard) and obj is not Dashboard and not name.startswith("_")
    }  # fmt: skip
    assert found == every and len(found) >= 8, sorted(found)  # one or two per notebook
