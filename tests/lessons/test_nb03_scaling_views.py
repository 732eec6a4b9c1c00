"""Notebook 03's saturation dashboard and figures, driven headlessly.

Every control is set to each of its options; the dashboard must then hold and draw exactly
what attn_lib.nb03_scaling.saturation_row and saturation_curves compute, on the same figure
and the same artists, as a valid PNG, without NaN and without leaking a pyplot figure.
"""

from __future__ import annotations

import functools
import itertools

import ipywidgets
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from helpers import (
    assert_blits_match_full_redraws,
    assert_png_fits_figure,
    assert_repr_is_fixed_sentence,
    decode,
    each_value,
    no_new_figures,
    open_dashboard,
    png_of,
)

from attn_lib.lessons import _figures, nb03_scaling, nb03_scaling_views
from attn_lib.lessons._dashboard import control_values
from attn_lib.lessons.nb03_scaling_views import SATURATION_TEMPERATURES, SaturationDashboard

pytestmark = pytest.mark.usefixtures("headless_backend")
ROW_SEED, L, N_SEQUENCES = 4, 16, 64  # the dashboard's defaults
CONTROL_VALUES = {
    "d_k": list(nb03_scaling.SATURATION_D_KS),
    "scaling": list(nb03_scaling.SCALINGS),
    "temperature": list(SATURATION_TEMPERATURES),
}



@pytest.fixture(scope="module")
def dashboard():
    yield from open_dashboard(SaturationDashboard)


@pytest.fixture
def fresh(dashboard):
    """The module's dashboard, back at its default setting."""
    dashboard.controls["temperature"].value = 1.0
    dashboard.controls["scaling"].value = "sqrt"
    dashboard.controls["d_k"].value = 64
    return dashboard


@functools.cache
def expected_curves(temperature: float) -> dict[str, nb03_scaling.SaturationCurve]:
    """What the dashboard should draw at a temperature, computed independently (once)."""
    return nb03_scaling.saturation_curves(
        nb03_scaling.SATURATION_D_KS, nb03_scaling.SCALINGS, L=L, n_sequences=N_SEQUENCES,
        temperature=temperature, seed=0,
    )  # fmt: skip


def assert_shows(dash: SaturationDashboard, d_k: int, scaling: str, temperature: float) -> None:
    """The dashboard holds and draws exactly what the pure functions compute."""
    assert dash.values == {"d_k": d_k, "scaling": scaling, "temperature": temperature}
    assert dash.last_error is None and dash.status.value == ""
    row = nb03_scaling.saturation_row(d_k, scaling, temperature, L=L, seed=ROW_SEED)
    for name in ("query", "keys", "scores", "weights", "jacobian", "grad_q"):
        torch.testing.assert_close(getattr(dash.row, name), getattr(row, name), rtol=0, atol=0)
        assert torch.isfinite(getattr(dash.row, name)).all(), name
    view = dash.view
    np.testing.assert_array_equal([b.get_height() for b in view.score_bars.patches], row.scores)
    np.testing.assert_array_equal([b.get_height() for b in view.weight_bars.patches], row.weights)
    np.testing.assert_array_equal(view.jacobian.get_array(), row.jacobian.numpy())
    assert f"max {row.max_weight:.2f}" in view.weight_title.get_text()
    assert f"d_k = {d_k}," in view.suptitle.get_text()

    curves = expected_curves(temperature)
    for stat, lines in view.curve_lines.items():
        log = view.curve_axes[stat].get_yscale() == "log"
        for name, line in lines.items():
            expected = getattr(curves[name], stat).numpy()
            if log:
                expected = np.maximum(expected, view.grad_floor)  # drawn on the floor
            np.testing.assert_allclose(line.get_xdata(), curves[name].d_k.numpy())
            np.testing.assert_allclose(line.get_ydata(), expected, rtol=1e-12)
            assert (line.get_linewidth() > 2) == (name == scaling)  # the current one is bold
        marker_x, marker_y = view.markers[stat].get_data()
        i = nb03_scaling.SATURATION_D_KS.index(d_k)
        expected_y = getattr(curves[scaling], stat)[i].item()
        if log:
            expected_y = max(expected_y, view.grad_floor)
        assert list(marker_x) == [d_k]
        assert marker_y[0] == pytest.approx(expected_y, rel=1e-12, abs=0)
        assert list(view.cursors[stat].get_xdata()) == [d_k, d_k]
    assert_png_fits_figure(dash)


def test_default_state(fresh):
    assert_shows(fresh, 64, "sqrt", 1.0)
    assert isinstance(fresh.widget, ipywidgets.VBox)
    assert set(fresh.controls) == {"d_k", "scaling", "temperature"}
    assert isinstance(fresh.controls["d_k"], ipywidgets.SelectionSlider)
    assert fresh.controls["d_k"].continuous_update is False
    assert fresh.controls["temperature"].continuous_update is False


@pytest.mark.parametrize(("name", "values"), CONTROL_VALUES.items())
def test_each_control_each_value(fresh, name, values):
    assert sorted(control_values(fresh.controls[name])) == sorted(values)  # every option
    jacobian_artist = fresh.view.jacobian
    bars = fresh.view.weight_bars.patches[0]
    previous_row = fresh.row
    for _, previous_png in each_value(fresh, name):  # the figure is reused...
        assert_shows(fresh, **fresh.values)
        assert fresh.view.jacobian is jacobian_artist  # ...and so are its artists
        assert fresh.view.weight_bars.patches[0] is bars
        if not torch.equal(previous_row.weights, fresh.row.weights):
            assert png_of(fresh) != previous_png
        previous_row = fresh.row


def test_extreme_combinations(fresh):
    seen = set()
    for d_k, scaling, temperature in itertools.product((1, 1024), nb03_scaling.SCALINGS,
                                                       (0.25, 4.0)):  # fmt: skip
        fresh.set(d_k=d_k, scaling=scaling, temperature=temperature)
        assert_shows(fresh, d_k, scaling, temperature)
        seen.add(png_of(fresh))
    # At d_k = 1 the three scalings give the same row, but the bold curve and the title differ.
    assert len(seen) == 12


def test_what_the_notebook_claims(fresh):
    fresh.controls["scaling"].value = "none"
    fresh.controls["d_k"].value = 1024
    assert fresh.row.max_weight > 0.98 and fresh.row.jacobian_norm < 0.05
    fresh.controls["scaling"].value = "sqrt"
    assert fresh.row.max_weight < 0.5
    fresh.controls["scaling"].value = "linear"
    assert fresh.row.entropy > np.log(L) - 0.01  # ÷ d_k: almost uniform


def test_blitted_image_equals_a_full_redraw(fresh):
    cases = ((1024, "none"), (4, "linear"), (64, "sqrt"))
    settings = [{"d_k": d_k, "scaling": scaling} for d_k, scaling in cases]
    assert_blits_match_full_redraws(fresh, settings)


def test_repr_is_a_fixed_sentence_and_a_widget_view(fresh):
    assert_repr_is_fixed_sentence(fresh, SaturationDashboard)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"d_k": 3}, "d_k"), ({"scaling": "cube"}, "scaling"), ({"temperature": 3.0}, "temperature")],
)
def test_bad_initial_setting(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SaturationDashboard(**kwargs)


def test_close_releases_everything():
    with no_new_figures():
        dash = SaturationDashboard(d_k=1, scaling="none", temperature=4.0)
        assert_shows(dash, 1, "none", 4.0)
        dash.close()
        assert dash.closed and dash.figure.axes == []
        with pytest.raises(RuntimeError, match="closed"):
            dash.update()


# --- the static figures of notebook 03 ----------------------------------------------------------


@pytest.fixture(scope="module")
def curves():
    return nb03_scaling.saturation_curves(n_sequences=8)


def test_static_figures(curves):
    with no_new_figures():
        row = nb03_scaling.saturation_row(64, "sqrt", seed=4)
        figures = [
            nb03_scaling_views.plot_saturation_view(row, curves),
            nb03_scaling_views.plot_saturation_curves(curves, ("grad_norm_median", "saturated_fraction")),
            nb03_scaling_views.plot_gradient_quantiles(curves),
            nb03_scaling_views.plot_saturation_rows([nb03_scaling.saturation_row(d, "none") for d in (4, 64)]),
        ]
        assert [len(f.axes) for f in figures] == [7, 2, 3, 2]  # the view's colorbar is an inset
        lone = nb03_scaling_views.plot_gradient_quantiles(curves, ("none",), saturated_fraction=False)
        assert len(lone.axes) == 1
        plt.close(lone)
        for fig in figures:
            decode(_figures.figure_to_png(fig))
            plt.close(fig)


def test_static_view_draws_the_row(curves):
    row = nb03_scaling.saturation_row(1024, "none", seed=4)
    fig = nb03_scaling_views.plot_saturation_view(row, curves)
    try:
        heights = [b.get_height() for b in fig.axes[1].patches]
        np.testing.assert_array_equal(heights, row.weights.numpy())
        assert fig.get_suptitle().startswith("d_k = 1024, scores none")
    finally:
        plt.close(fig)


def test_figure_arguments_are_checked(curves):
    fig, ax = plt.subplots()
    try:
        with pytest.raises(ValueError, match="stat"):
            nb03_scaling_views.draw_saturation_curves(ax, curves, "mean_weight")
        with pytest.raises(ValueError, match="empty"):
            nb03_scaling_views.draw_saturation_curves(ax, {}, "median_entropy")
        with pytest.raises(ValueError, match="no curve"):
            nb03_scaling_views.plot_gradient_quantiles({"sqrt": curves["sqrt"]}, ("none",))
        with pytest.raises(ValueError, match="at least one"):
            nb03_scaling_views.plot_saturation_rows([])
        view = nb03_scaling_views.SaturationView(_figures.new_figure(figsize=(12, 7)), L)
        with pytest.raises(ValueError, match="scaling"):
            view.update(nb03_scaling.saturation_row(64), {"sqrt": curves["sqrt"]})
        with pytest.raises(ValueError, match="d_k = 3"):
            view.update(nb03_scaling.saturation_row(3), curves)
        with pytest.raises(ValueError, match="shape"):
            view.update(nb03_scaling.saturation_row(64, L=8), curves)
    finally:
        plt.close(fig)


def test_jacobian_uses_a_diverging_colormap_on_a_symmetric_range():
    view = nb03_scaling_views.SaturationView(_figures.new_figure(figsize=(12, 7)), L)
    assert view.jacobian.get_cmap().name == nb03_scaling_views.JACOBIAN_CMAP != _figures.ATTENTION_CMAP
    assert view.jacobian.get_clim() == (-nb03_scaling_views.JACOBIAN_LIMIT, nb03_scaling_views.JACOBIAN_LIMIT)
    row = nb03_scaling.saturation_row(2, "none", 0.25, seed=4)  # the most extreme entries
    assert row.jacobian.abs().max() <= nb03_scaling_views.JACOBIAN_LIMIT
