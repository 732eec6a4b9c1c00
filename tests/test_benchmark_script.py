"""tools/benchmark.py's bookkeeping (its timings are printed, never asserted here)."""

import inspect
import json

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


def test_p2b_reports_the_browser_tests_latencies(benchmark, tmp_path, capsys):
    measured = {
        "measured": "2026-12-02 02:00:00", "load": 1.5, "viewport": {"width": 1280, "height": 800},
        "dashboards": {
            "MaskDashboard": {"notebook": "07_masks.ipynb", "first_ms": 90.0, "median_ms": 80.0,
                              "steady_median_ms": 75.0},
            "round trip, no drawing": {"notebook": None, "first_ms": 50.0, "median_ms": 45.0,
                                       "steady_median_ms": 44.0},
        },
    }  # fmt: skip
    (tmp_path / "b.json").write_text(json.dumps(measured))
    benchmark.rows.clear()
    benchmark.bench_browser(tmp_path / "b.json")  # the file exists: no browser run
    out = capsys.readouterr().out
    assert benchmark.rows == [
        ("P2b", "MaskDashboard (07; first move 90, then 75)", "80 ms", "<= 100 ms ok")
    ]
    assert "round trip alone (a box swapping ready-made PNGs): 45 ms" in out
    benchmark.rows.clear()


def test_p1_sorts_test_cases_into_notebooks_unit_tests_and_the_browser_test(benchmark):
    import xml.etree.ElementTree as ET

    def case(classname):
        return ET.Element("testcase", classname=classname, name="x", time="1.0")

    assert benchmark.group_of(case("notebooks.en.07_masks.ipynb")) == "notebooks"
    assert benchmark.group_of(case("tests.test_browser")) == "browser"
    assert benchmark.group_of(case("tests.lessons.test_nb07_masks_views")) == "unit"


def test_notebook_seconds_sums_each_notebooks_cells(benchmark, tmp_path):
    (tmp_path / "junit.xml").write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="notebooks.en.07_masks.ipynb" name="Cell 0" time="2.5"/>'
        '<testcase classname="notebooks.en.07_masks.ipynb" name="Cell 1" time="1.25"/>'
        '<testcase classname="notebooks.en.00_start_here.ipynb" name="Cell 0" time="3.0"/>'
        '<testcase classname="tests.test_attention" name="test_x" time="9.0"/>'
        "</testsuite></testsuites>"
    )
    assert benchmark.notebook_seconds(tmp_path / "junit.xml") == {
        "00_start_here.ipynb": 3.0,
        "07_masks.ipynb": 3.75,
    }


def test_p1_judges_the_median_of_several_runs(benchmark, monkeypatch, capsys):
    def fake_runs(*runs):
        walls = iter(runs)

        def run():
            wall, failed = next(walls)
            return {"wall": wall, "cpu": 100.0, "tail": "9 passed", "failed": failed,
                    "last_lines": [], "groups": {"notebooks": 1.0, "unit": 2.0, "browser": 3.0},
                    "notebooks": {"07_masks.ipynb": 4.0}}  # fmt: skip

        monkeypatch.setattr(benchmark, "one_pytest_run", run)

    def judged():
        return [r[1:] for r in benchmark.rows if r[3].endswith(("ok", "MISSED"))]

    try:
        benchmark.rows.clear()
        fake_runs((70.0, False), (55.0, False), (58.0, False))
        benchmark.bench_pytest(3)
        assert judged() == [("full pytest run, median of 3", "58.0 s", "<= 60 s ok")]
        assert sum("run " in r[1] for r in benchmark.rows) == 3  # each run printed, unjudged
        assert "07_masks.ipynb" in capsys.readouterr().out
        benchmark.rows.clear()
        fake_runs((5.0, True), (58.0, False), (70.0, False))  # a crash is not a fast run
        benchmark.bench_pytest(3)
        assert judged() == [("full pytest run, median of 2 (1 failed)", "70.0 s", "<= 60 s MISSED")]
        benchmark.rows.clear()
        fake_runs((50.0, False), (70.0, False))  # an even count: a run's own time, the upper one
        benchmark.bench_pytest(2)
        assert judged() == [("full pytest run, median of 2", "70.0 s", "<= 60 s MISSED")]
    finally:
        benchmark.rows.clear()
