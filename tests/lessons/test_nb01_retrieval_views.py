"""Notebook 01's retrieval dashboard and figures, driven headlessly."""

from __future__ import annotations

import ipywidgets
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from helpers import (
    SharedDashboard,
    assert_blits_match_full_redraws,
    assert_no_nan,
    assert_png_fits_figure,
    assert_repr_is_fixed_sentence,
    each_value,
    no_new_figures,
    png_of,
)

from attn_lib.lessons import _figures, nb01_retrieval, nb01_retrieval_views
from attn_lib.lessons._dashboard import control_values
from attn_lib.lessons.nb01_retrieval_views import (
    RETRIEVAL_TEMPERATURES,
    RetrievalDashboard,
    retrieval_title,
)

pytestmark = pytest.mark.usefixtures("headless_backend")


@pytest.fixture(scope="module")
def shared_dashboard(headless_backend):
    yield from SharedDashboard.fixture(RetrievalDashboard)


@pytest.fixture
def dashboard(shared_dashboard):
    """The module's RetrievalDashboard, back in the setting it was built with."""
    yield from shared_dashboard.use()


def expected_for(values: dict) -> nb01_retrieval.Retrieval:
    """What the pure function says for these control values."""
    lib = nb01_retrieval.library_books()
    query = nb01_retrieval.library_query({name: values[name] for name in nb01_retrieval.KEY_FEATURES})
    return nb01_retrieval.retrieve(query, lib.keys, lib.values, values["temperature"])


def assert_shows(dash: RetrievalDashboard) -> None:
    """The dashboard holds and draws exactly what nb01_retrieval.retrieve computes."""
    expected = expected_for(dash.values)
    assert dash.last_error is None and dash.status.value == ""
    torch.testing.assert_close(dash.result.scores, expected.scores, rtol=0, atol=0)
    torch.testing.assert_close(dash.result.weights, expected.weights, rtol=0, atol=0)
    torch.testing.assert_close(dash.result.blended, expected.blended, rtol=0, atol=0)
    assert_no_nan(dash.result.weights, dash.result.blended)
    torch.testing.assert_close(dash.result.weights.sum(), torch.tensor(1.0))
    view = dash.view
    np.testing.assert_allclose(
        [b.get_width() for b in view.score_bars.patches], expected.scores.numpy(), rtol=1e-6
    )
    np.testing.assert_allclose(
        [b.get_width() for b in view.weight_bars.patches], expected.weights.numpy(), rtol=1e-6
    )
    np.testing.assert_allclose(
        [b.get_height() for b in view.value_bars.patches], expected.blended.numpy(), rtol=1e-6
    )
    assert [t.get_text() for t in view.weight_texts] == [f"{w:.2f}" for w in expected.weights]
    assert view.suptitle.get_text() == retrieval_title(dash.query, dash.values["temperature"])
    assert_png_fits_figure(dash)


def test_default_state(dashboard):
    assert set(dashboard.controls) == {*nb01_retrieval.KEY_FEATURES, "temperature"}
    assert dashboard.values == {
        "maths": 1.0, "deep learning": 1.0, "history": 0.0, "cooking": 0.0, "temperature": 0.5,
    }  # fmt: skip
    assert_shows(dashboard)
    assert isinstance(dashboard.widget, ipywidgets.VBox)
    assert dashboard.library.titles[int(dashboard.result.weights.argmax())] == (
        "Mathematics for Deep Learning"
    )


@pytest.mark.parametrize("name", [*nb01_retrieval.KEY_FEATURES, "temperature"])
def test_each_control_min_middle_max(dashboard, name):
    bars = dashboard.view.weight_bars
    tried = control_values(dashboard.controls[name])
    if name == "temperature":
        assert tried == [0.5, *[t for t in RETRIEVAL_TEMPERATURES if t != 0.5]]
    else:
        assert {-1.0, 0.0, 1.0} <= set(tried)  # minimum, middle, maximum
    before = dashboard.result
    for _, before_png in each_value(dashboard, name):  # checks the figure is reused
        assert_shows(dashboard)
        assert dashboard.view.weight_bars is bars  # reused
        if not torch.equal(before.weights, dashboard.result.weights) or not torch.equal(
            before.scores, dashboard.result.scores
        ):
            assert png_of(dashboard) != before_png
        before = dashboard.result


def test_extremes_take_the_best_or_read_everything(dashboard):
    dashboard.controls["temperature"].value = min(RETRIEVAL_TEMPERATURES)
    assert dashboard.result.weights.max() > 0.99
    dashboard.controls["temperature"].value = max(RETRIEVAL_TEMPERATURES)
    torch.testing.assert_close(dashboard.result.weights, torch.full((7,), 1 / 7), atol=0.02, rtol=0)


def test_an_all_zero_query_gives_uniform_weights(dashboard):
    for name in ("maths", "deep learning"):
        dashboard.controls[name].value = 0.0
    assert_shows(dashboard)
    torch.testing.assert_close(dashboard.result.weights, torch.full((7,), 1 / 7))


def test_negative_amounts_give_negative_scores_drawn_on_the_left(dashboard):
    dashboard.controls["cooking"].value = -1.0
    assert_shows(dashboard)
    home_cooking = dashboard.library.titles.index("Home Cooking")
    assert dashboard.result.scores[home_cooking] < 0
    assert dashboard.view.score_bars.patches[home_cooking].get_width() < 0
    assert dashboard.view.score_texts[home_cooking].get_horizontalalignment() == "left"


def test_blitted_image_equals_a_full_redraw(dashboard):
    assert_blits_match_full_redraws(dashboard, [{"history": v} for v in (-1.0, 0.3, 1.0)])


def test_repr_is_a_fixed_sentence(dashboard):
    assert_repr_is_fixed_sentence(dashboard, RetrievalDashboard)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"query": {"poetry": 1.0}}, ValueError),
        ({"query": {"maths": 2.0}}, ValueError),
        ({"temperature": 0.3}, ValueError),
    ],
)
def test_bad_settings_are_refused(kwargs, error):
    with no_new_figures("a refused dashboard"), pytest.raises(error):
        RetrievalDashboard(**kwargs)


def test_custom_start():
    dash = RetrievalDashboard({"history": 1.0}, temperature=2.0)
    try:
        assert dash.values["history"] == 1.0 and dash.values["maths"] == 0.0
        assert_shows(dash)
    finally:
        dash.close()


# --- the static figures ----------------------------------------------------------------------


def test_retrieval_view_refuses_wrong_lengths():
    fig = _figures.new_figure()
    lib = nb01_retrieval.library_books()
    view = nb01_retrieval_views.RetrievalView(fig, lib.titles, lib.value_features)
    with pytest.raises(ValueError, match="weights"):
        view.update(torch.zeros(7), torch.zeros(6), torch.zeros(5), "x")
    with pytest.raises(ValueError, match="blended"):
        view.update(torch.zeros(7), torch.zeros(7), torch.zeros(4), "x")


def test_static_figures_draw_what_they_are_given():
    lib = nb01_retrieval.library_books()
    query = nb01_retrieval.library_query()
    results = [nb01_retrieval.retrieve(query, lib.keys, lib.values, t) for t in (0.1, 0.5, 5.0)]
    fig = nb01_retrieval_views.plot_retrieval(
        results[1].scores, results[1].weights, results[1].blended,
        titles=lib.titles, value_features=lib.value_features, title="default",
    )  # fmt: skip
    try:
        assert len(fig.axes) == 3 and fig.get_suptitle() == "default"
        widths = [p.get_width() for p in fig.axes[1].patches]
        np.testing.assert_allclose(widths, results[1].weights.numpy(), rtol=1e-6)
    finally:
        plt.close(fig)
    fig = nb01_retrieval_views.plot_retrieval_gallery(
        [(r.weights, r.blended, f"T = {r.temperature:g}") for r in results],
        titles=lib.titles, value_features=lib.value_features,
    )  # fmt: skip
    try:
        assert len(fig.axes) == 6
        assert [ax.get_title() for ax in fig.axes[:3]] == ["T = 0.1", "T = 0.5", "T = 5"]
    finally:
        plt.close(fig)
    with pytest.raises(ValueError):
        nb01_retrieval_views.plot_retrieval_gallery([], titles=lib.titles, value_features=lib.value_features)


def test_path_length_figure():
    paths = [nb01_retrieval.path_lengths(32, k) for k in (3, 5)]
    pairs = nb01_retrieval.pair_counts(64)
    fig = nb01_retrieval_views.plot_path_lengths_and_pairs(paths, pairs)
    try:
        ax_p, ax_c = fig.axes
        labels = [line.get_label() for line in ax_p.get_lines()]
        assert labels[0].startswith("recurrent") and labels[-1].startswith("self-attention")
        np.testing.assert_array_equal(ax_p.get_lines()[1].get_ydata(), paths[0].convolution)
        np.testing.assert_array_equal(ax_c.get_lines()[0].get_ydata(), pairs.self_attention)
        assert ax_c.get_xscale() == "log" and ax_c.get_yscale() == "log"
    finally:
        plt.close(fig)
    with pytest.raises(ValueError):
        nb01_retrieval_views.plot_path_lengths_and_pairs([], pairs)
