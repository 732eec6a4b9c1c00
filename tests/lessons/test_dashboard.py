"""lessons/_dashboard.py, driven headlessly: controls → pure function → one reused figure → PNG.

The dashboards here are minimal ones built the way the lessons build theirs (a slider, a
toggle, a line): what the base class promises does not depend on a lesson's figure. The
lessons' own dashboards are tested in tests/lessons/test_nbNN_*_views.py.
"""

from __future__ import annotations

import ipywidgets
import pytest
import traitlets
from helpers import SharedDashboard, decode, no_new_figures, png_of

from attn_lib.lessons import _figures
from attn_lib.lessons._dashboard import Dashboard, control_values, measure_update_latency

pytestmark = pytest.mark.usefixtures("headless_backend")


class _SliderDashboard(Dashboard):
    """A minimal dashboard, the way the lessons build theirs: n = 5 fails to render."""

    def __init__(self) -> None:
        self.calls: list[int] = []
        figure = _figures.new_figure(figsize=(1.5, 1), dpi=40)
        self.ax = figure.subplots()
        (self.line,) = self.ax.plot([0, 1], [0, 0])
        super().__init__({"n": ipywidgets.IntSlider(value=1, min=0, max=5)}, figure)
        self.update()

    def render(self, n: int) -> None:
        if n == 5:
            raise ValueError("five is not allowed")
        self.calls.append(n)
        self.line.set_ydata([0, n])


class _FrozenSliderDashboard(_SliderDashboard):
    """The minimal dashboard with its layout frozen and fixed limits, as the series' are."""

    def __init__(self) -> None:
        super().__init__()
        self.ax.set_ylim(-1, 6)
        _figures.freeze_layout(self.figure)
        self.update()


class _DriftingDashboard(_FrozenSliderDashboard):
    """Draws a little higher at every render: an image that depends on its history."""

    def render(self, n: int) -> None:
        super().render(n)
        self.line.set_ydata([0, n + 0.1 * len(self.calls)])


class _TwoControlDashboard(Dashboard):
    """A slider and a toggle, laid out once like the series' dashboards, for set(): it
    records every render's values."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, str]] = []
        figure = _figures.new_figure(figsize=(1.5, 1), dpi=40)
        ax = figure.subplots()
        (self.line,) = ax.plot([0, 1], [0, 0])
        ax.set_ylim(-10, 10)
        _figures.freeze_layout(figure)
        controls = {
            "n": ipywidgets.IntSlider(value=2, min=0, max=9),
            "mode": ipywidgets.ToggleButtons(options=["self", "cross"], value="self"),
        }
        super().__init__(controls, figure)
        self.update()

    def render(self, n: int, mode: str) -> None:
        self.calls.append((n, mode))
        self.line.set_ydata([0, n if mode == "self" else -n])


@pytest.fixture(scope="module")
def shared_dashboard(headless_backend):
    yield from SharedDashboard.fixture(_TwoControlDashboard)


@pytest.fixture
def dashboard(shared_dashboard):
    """The two-control dashboard, back in its first setting (n = 2, mode "self")."""
    for dash in shared_dashboard.use():
        dash.calls.clear()
        yield dash


@pytest.fixture
def slider_dashboard(headless_backend):
    dash = _SliderDashboard()
    yield dash
    dash.close()


def test_shared_dashboard_resets_rebuilds_and_catches_history_dependent_images():
    shared = SharedDashboard(_FrozenSliderDashboard)
    first = shared.get()
    first.controls["n"].value = 3
    assert shared.get() is first and first.values == {"n": 1}  # reset, same object
    first.controls["n"].value = 5  # a failed update: the reset clears the status line
    assert shared.get() is first and first.last_error is None and first.status.value == ""
    first.close()
    assert shared.get() is not first  # a closed one is rebuilt
    shared.close()

    drifting = SharedDashboard(_DriftingDashboard)
    drifting.get().controls["n"].value = 2
    with pytest.raises(AssertionError, match="drew another image than when it was built"):
        drifting.get()
    drifting.close()


def test_base_dashboard_pattern():
    with no_new_figures():
        dash = _SliderDashboard()
        slider = dash.controls["n"]
        assert slider.continuous_update is False  # redraw on release, not on every pixel
        decode(png_of(dash))  # magic bytes and a real decode
        slider.value = 3
        assert dash.calls == [1, 3] and dash.last_error is None
        slider.value = 5  # an error in a callback is shown in the status line, not raised
        assert isinstance(dash.last_error, ValueError)
        assert "five is not allowed" in dash.status.value
        slider.value = 2
        assert dash.last_error is None and dash.status.value == ""
        dash.close()
        assert dash.closed and dash.figure.axes == []
        slider.value = 4  # no longer observed
        assert dash.calls == [1, 3, 2]
        with pytest.raises(RuntimeError, match="closed"):
            dash.update()
        dash.close()  # closing twice is harmless


def test_set_moves_several_controls_and_redraws_once(dashboard):
    dashboard.set(n=7, mode="cross")
    assert dashboard.calls == [(7, "cross")]  # one redraw for two controls
    assert dashboard.last_error is None
    dashboard.set(n=7)  # nothing changes: nothing is redrawn
    assert len(dashboard.calls) == 1
    dashboard.controls["n"].value = 4  # single controls still redraw at once
    assert dashboard.calls == [(7, "cross"), (4, "cross")]


def test_set_refuses_unknown_names_and_bad_values(dashboard):
    with pytest.raises(KeyError, match=r"no control named 'heads'.*'n', 'mode'"):
        dashboard.set(n=1, heads=2)
    assert dashboard.values["n"] == 2  # nothing was changed
    with pytest.raises(traitlets.TraitError):
        dashboard.set(n=1, mode="both")
    assert dashboard.values == {"n": 2, "mode": "self"}  # all or nothing
    assert dashboard.calls == []  # and nothing was redrawn
    dashboard.close()
    with pytest.raises(RuntimeError, match="closed"):
        dashboard.set(n=1, heads=2)  # closed is said first


def test_set_refuses_values_a_slider_would_clamp(slider_dashboard):
    with pytest.raises(ValueError, match=r"n=9 is outside the range .*\[0, 5\]"):
        slider_dashboard.set(n=9)
    assert slider_dashboard.values == {"n": 1} and slider_dashboard.calls == [1]  # not redrawn


def test_set_reports_a_failed_render_in_the_status_line(slider_dashboard):
    slider_dashboard.set(n=5)
    assert isinstance(slider_dashboard.last_error, ValueError)
    assert "five" in slider_dashboard.status.value
    slider_dashboard.set(n=2)
    assert slider_dashboard.last_error is None and slider_dashboard.calls == [1, 2]


def test_base_render_must_be_implemented():
    with pytest.raises(NotImplementedError):
        Dashboard({}, _figures.new_figure()).update()


def test_measure_update_latency_cycles_controls_and_returns_milliseconds(slider_dashboard):
    # What the benchmark (tools/benchmark.py) relies on; the figures themselves are
    # printed by the benchmark, never asserted: a timed test fails at random on a busy machine.
    assert control_values(slider_dashboard.controls["n"]) == [1, 0, 2, 5]
    times = measure_update_latency(slider_dashboard, changes=4)
    assert len(times) == 4 and all(t > 0 for t in times)
    assert slider_dashboard.calls == [1, 0, 2, 1]  # 1 → 0 → 2 → 5 (refused) → 1
