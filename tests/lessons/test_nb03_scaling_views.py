"""Notebook 03's saturation dashboard and figures, driven headlessly.

Each control set to a value must make the dashboard hold and draw exactly what
nb03_scaling.saturation_row and the curves of its temperature compute; the extremes must give
a picture without NaN; no pyplot figure may leak. The browser test (tests/test_browser.py)
relies on the controls' labels ("d_k", "scores divided by", a "none" button) and on d_k
starting at 64 with 128 one step to the right.
"""

from __future__ import annotations

import ipywidgets
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from helpers import (
    assert_png_fits_figure,
    assert_repr_is_fixed_sentence,
    blit_mismatch,
    dashboard_fixtures,
    no_new_figures,
)

from attn_lib.lessons import _figures
from attn_lib.lessons import nb03_scaling as lesson
from attn_lib.lessons import nb03_scaling_views as views
from attn_lib.lessons._dashboard import control_values
from attn_lib.lessons.nb03_scaling_views import SaturationDashboard

pytestmark = pytest.mark.usefixtures("headless_backend")
shared_dashboard, dashboard = dashboard_fixtures(SaturationDashboard)  # d_k = 64, ÷ √d_k, T = 1


def assert_shows(dash: SaturationDashboard, d_k: int, scaling: str, temperature: float) -> None:
    """The dashboard holds and draws exactly the row and the curves of this setting."""
    assert dash.values == {"d_k": d_k, "scaling": scaling, "temperature": temperature}
    assert dash.last_error is None and dash.status.value == ""
    row = lesson.saturation_row(d_k, scaling, temperature, seed=views.ROW_SEED)
    torch.testing.assert_close(dash.row.weights, row.weights, rtol=0, atol=0)
    torch.testing.assert_close(dash.row.jacobian, row.jacobian, rtol=0, atol=0)
    assert torch.isfinite(dash.row.scores).all() and torch.isfinite(dash.row.jacobian).all()
    np.testing.assert_array_equal([b.get_height() for b in dash.score_bars], row.scores)
    np.testing.assert_array_equal([b.get_height() for b in dash.weight_bars], row.weights)
    np.testing.assert_array_equal(dash.jacobian.get_array(), row.jacobian.numpy())
    assert f"d_k = {d_k}," in dash.suptitle.get_text()
    curves = lesson.saturation_curves(temperature=temperature)  # computed anew: the same curves
    i = lesson.SATURATION_D_KS.index(d_k)
    for stat, lines in dash.lines.items():
        floor = dash.GRAD_FLOOR if lines["none"].axes.get_yscale() == "log" else -1.0
        for name, line in lines.items():
            expected = np.maximum(getattr(curves[name], stat).numpy(), floor)
            np.testing.assert_array_equal(line.get_ydata(), expected)
            assert (line.get_linewidth() > 2) == (name == scaling)  # the current one is bold
        marker_x, marker_y = dash.markers[stat].get_data()
        assert list(marker_x) == [d_k]
        assert marker_y[0] == max(getattr(curves[scaling], stat)[i].item(), floor)


def test_default_state_and_what_the_browser_test_relies_on(dashboard):
    assert_shows(dashboard, 64, "sqrt", 1.0)
    assert_png_fits_figure(dashboard)
    assert isinstance(dashboard.widget, ipywidgets.VBox) and set(dashboard.controls) == {
        "d_k", "scaling", "temperature"}  # fmt: skip
    d_k, scaling = dashboard.controls["d_k"], dashboard.controls["scaling"]
    assert isinstance(d_k, ipywidgets.SelectionSlider) and d_k.description == "d_k"
    values = [value for _, value in d_k.options]
    assert values[values.index(64) + 1] == 128  # the browser's ArrowRight: 64 → 128
    assert scaling.description == "scores divided by"
    assert scaling.options[0] == ("none", "none")  # the button the browser clicks
    assert sorted(control_values(scaling)) == sorted(lesson.SCALINGS)


def test_each_control_changes_the_figure_as_computed(dashboard):
    for setting in ({"d_k": 1024}, {"scaling": "none"}, {"scaling": "linear"},
                    {"temperature": 0.25}, {"d_k": 1, "temperature": 4.0}):  # fmt: skip
        before = dashboard.row.weights
        dashboard.set(**setting)
        assert_shows(dashboard, **dashboard.values)
        assert not torch.equal(before, dashboard.row.weights) or setting.get("d_k") == 1


def test_extremes_give_a_picture(dashboard):
    for d_k, scaling, temperature in ((1024, "none", 0.25), (1024, "linear", 4.0), (1, "none", 4)):
        dashboard.set(d_k=d_k, scaling=scaling, temperature=temperature)
        assert_shows(dashboard, d_k, scaling, temperature)
        image = assert_png_fits_figure(dashboard)
        assert image[..., :3].std() > 10  # a picture, not a blank


def test_what_the_notebook_says_the_dashboard_shows(dashboard):
    dashboard.set(scaling="none", d_k=1024)
    assert dashboard.row.max_weight > 0.98 and dashboard.row.jacobian_norm < 0.05
    torch.testing.assert_close(dashboard.row.query[:64], lesson.saturation_row(64, seed=4).query)
    dashboard.set(scaling="sqrt")
    assert dashboard.row.max_weight < 0.5
    dashboard.set(scaling="linear")
    assert dashboard.row.entropy > np.log(16) - 0.01  # ÷ d_k: almost uniform


def test_a_temperature_never_visited_computes_no_curves(dashboard, monkeypatch):
    monkeypatch.setattr(views, "saturation_curves", None)  # a call would fail the update
    for temperature in views.SATURATION_TEMPERATURES:  # computed when the dashboard was built
        dashboard.set(temperature=temperature)
        assert_shows(dashboard, 64, "sqrt", temperature)


def test_blitted_image_equals_a_full_redraw(dashboard):
    dashboard.set(d_k=1024, scaling="none")
    assert blit_mismatch(dashboard, dashboard._renderer.dynamic) < 1e-3


def test_static_figures_draw_the_curves():
    curves = lesson.saturation_curves(n_sequences=4)
    with no_new_figures():
        stats = ("grad_norm_median", "grad_norm_p99", "saturated_fraction")
        fig = views.plot_saturation_curves(curves, stats, ("none", "sqrt"))
        try:
            median, p99, saturated = fig.axes
            assert median.get_shared_y_axes().joined(median, p99)  # one y axis for the gradients
            low, high = median.get_ylim()
            none = curves["none"]
            assert low <= none.grad_norm_median.min() and none.grad_norm_p99.max() <= high
            np.testing.assert_array_equal(saturated.lines[0].get_ydata(), none.saturated_fraction)
        finally:
            plt.close(fig)


def test_jacobian_uses_a_diverging_colormap_on_a_symmetric_range(dashboard):
    assert dashboard.jacobian.get_cmap().name == views.JACOBIAN_CMAP != _figures.ATTENTION_CMAP
    assert dashboard.jacobian.get_clim() == (-views.JACOBIAN_LIMIT, views.JACOBIAN_LIMIT)
    row = lesson.saturation_row(2, "none", 0.25, seed=4)  # the most extreme entries
    assert row.jacobian.abs().max() <= views.JACOBIAN_LIMIT


def test_repr_is_a_fixed_sentence_and_close_releases_everything(dashboard):  # last: it closes
    assert_repr_is_fixed_sentence(dashboard, SaturationDashboard)
    dashboard.close()
    assert dashboard.closed and dashboard.figure.axes == []
    with pytest.raises(RuntimeError, match="closed"):
        dashboard.update()
