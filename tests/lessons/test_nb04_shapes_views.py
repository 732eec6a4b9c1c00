"""Notebook 04: the shape figures and the shape dashboard."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest
from helpers import (
    assert_blits_match_full_redraws,
    assert_png_fits_figure,
    assert_repr_is_fixed_sentence,
    decode,
    no_new_figures,
)

from attn_lib.lessons import _figures
from attn_lib.lessons.nb04_shapes import shape_table
from attn_lib.lessons.nb04_shapes_views import (
    _MONO_ADVANCE,
    _SCALE,
    LIMITS,
    ShapeDashboard,
    plot_shape_gallery,
    plot_shapes,
)

pytestmark = pytest.mark.usefixtures("headless_backend")


def drawn(fig) -> tuple[set[tuple[float, float]], str]:
    """(rows, cols) of every box drawn, and the shape table's text as drawn (its two columns
    of text put back together, line by line), in a ShapeView figure."""
    ax = fig.axes[0]
    boxes = {(p.get_height(), p.get_width()) for p in ax.patches if p.get_visible()}
    left, right = sorted(
        (t for t in ax.texts if "monospace" in t.get_fontfamily()), key=lambda t: t.get_position()
    )
    column = round(
        (right.get_position()[0] - left.get_position()[0]) / (_MONO_ADVANCE * 10 / 72 / _SCALE)
    )
    lines = zip(left.get_text().split("\n"), right.get_text().split("\n"), strict=True)
    return boxes, "\n".join(a.ljust(column) + b for a, b in lines)


def assert_draws(fig, table) -> None:
    boxes, text = drawn(fig)
    assert text == str(table)
    t = table
    for step, size in [("x", (t.L_q, t.d_model)), ("W_V", (t.d_model, t.d_v)),
                       ("Kᵀ", (t.d_k, t.L_k)), ("scores", (t.L_q, t.L_k)),
                       ("output", (t.L_q, t.d_v))]:  # fmt: skip
        assert size in boxes, step
        assert t.shape(step)[-2:] == size


def test_static_figures():
    self_, cross = shape_table(2, 7, None, 10, 6, 4), shape_table(2, 7, 8, 10, 6, 4, "cross")
    with no_new_figures():
        fig = plot_shapes(cross)
        assert_draws(fig, cross)
        assert sum(t.get_text() == "context" for t in fig.axes[0].texts) == 2  # W_K's and W_V's
        decode(_figures.figure_to_png(fig))
        plt.close(fig)
        gallery = plot_shape_gallery([self_, cross], suptitle="g")
        assert len(gallery.axes) == 2 and gallery.axes[1].get_title(loc="left").startswith("cross")
        plt.close(gallery)


# --- the dashboard -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shared(headless_backend):
    with no_new_figures("building the dashboard"):
        dash = ShapeDashboard()
    yield dash
    dash.close()


@pytest.fixture
def dashboard(shared, monkeypatch):
    """The shared dashboard, drawing its figure without encoding a PNG (the slow part), and
    back in its default setting afterwards."""
    initial = shared.values
    monkeypatch.setattr(shared, "to_png", lambda: b"")
    with no_new_figures("a test of the dashboard"):
        yield shared
    monkeypatch.setattr(shared, "to_png", lambda: b"")
    shared.set(**initial)


def assert_shows(dash) -> None:
    """The dashboard holds and draws exactly what the pure function computes."""
    values = dict(dash.values)
    expected = shape_table(**values)
    assert dash.last_error is None and dash.status.value == ""
    assert dash.result == expected
    assert dash.controls["L_k"].disabled == (values["mode"] == "self")
    assert_draws(dash.figure, expected)


def test_default_state(shared):
    assert shared.values == {"B": 2, "L_q": 7, "L_k": 8, "d_model": 10, "d_k": 6, "d_v": 4,
                             "mode": "self"}  # fmt: skip
    assert_shows(shared)
    assert shared.result == shape_table(2, 7, None, 10, 6, 4)  # the notebook's static figure
    assert_png_fits_figure(shared)
    assert_repr_is_fixed_sentence(shared, ShapeDashboard)


@pytest.mark.parametrize("name", [*LIMITS, "mode"])
def test_each_control_changes_the_figure_as_computed(dashboard, name):
    dashboard.set(mode="cross")
    before = drawn(dashboard.figure)
    dashboard.controls[name].value = "self" if name == "mode" else 3
    assert_shows(dashboard)
    assert drawn(dashboard.figure) != before


@pytest.mark.parametrize(("mode", "end"), [("cross", "min"), ("cross", "max"), ("self", "max")])
def test_every_control_at_its_extremes_gives_a_picture(dashboard, monkeypatch, mode, end):
    monkeypatch.undo()  # encode the PNG: the picture itself
    dashboard.set(mode=mode, **{name: 1 if end == "min" else top for name, top in LIMITS.items()})
    assert_shows(dashboard)
    assert_png_fits_figure(dashboard)


def test_blitted_image_equals_a_full_redraw(dashboard, monkeypatch):
    monkeypatch.undo()  # encode the PNG: the picture itself
    assert_blits_match_full_redraws(dashboard, [{"B": 4, "L_q": 8}, {"mode": "cross", "d_v": 1}])


def test_close(shared):  # the last test of the module
    shared.close()
    assert shared.closed and shared.figure.axes == []
