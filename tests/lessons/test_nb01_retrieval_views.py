"""Notebook 01's library dashboard and figures, driven headlessly."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from helpers import (
    assert_blits_match_full_redraws,
    assert_no_nan,
    assert_png_fits_figure,
    assert_repr_is_fixed_sentence,
    dashboard_fixtures,
    each_value,
    png_of,
)

from attn_lib.lessons import nb01_retrieval as lesson
from attn_lib.lessons import nb01_retrieval_views as views

pytestmark = pytest.mark.usefixtures("headless_backend")


shared_dashboard, dashboard = dashboard_fixtures(views.RetrievalDashboard)


def assert_shows(dash: views.RetrievalDashboard) -> None:
    """The dashboard holds and draws exactly what retrieve computes for its controls."""
    values = dash.values
    query = lesson.library_query({n: values[n] for n in lesson.KEY_FEATURES})
    lib = lesson.library_books()
    expected = lesson.retrieve(query, lib.keys, lib.values, values["temperature"])
    assert dash.last_error is None and dash.status.value == ""
    for got, want in zip(dash.result[:3], expected[:3], strict=True):  # scores, weights, blend
        assert torch.equal(got, want)
    assert_no_nan(dash.result.weights, dash.result.blended)
    view = dash.view
    widths = [b.get_width() for b in view.weight_bars.patches]
    np.testing.assert_allclose(widths, expected.weights.numpy(), rtol=1e-6)
    np.testing.assert_allclose([b.get_width() for b in view.score_bars], expected.scores, rtol=1e-6)
    np.testing.assert_allclose(
        [b.get_height() for b in view.value_bars], expected.blended, rtol=1e-6
    )
    assert [t.get_text() for t in view.texts[1]] == [f"{w:.2f}" for w in expected.weights]
    assert f"temperature T = {values['temperature']:g}" in view.suptitle.get_text()
    assert_png_fits_figure(dash)


def test_default_state_is_the_articles_query(dashboard):
    assert dashboard.values == {
        "maths": 1.0, "deep learning": 1.0, "history": 0.0, "cooking": 0.0, "temperature": 0.5,
    }  # fmt: skip
    assert_shows(dashboard)
    assert lesson.library_books().titles[int(dashboard.result.weights.argmax())] == (
        "Mathematics for Deep Learning"
    )


@pytest.mark.parametrize("name", lesson.KEY_FEATURES)  # the temperature: next test
def test_each_control_changes_the_figure_as_computed(dashboard, name):
    before = dashboard.result
    for _, before_png in each_value(dashboard, name):  # minimum, middle, maximum
        assert_shows(dashboard)
        if not torch.equal(before.scores, dashboard.result.scores) or not torch.equal(
            before.weights, dashboard.result.weights
        ):
            assert png_of(dashboard) != before_png
        before = dashboard.result


def test_extremes_give_a_picture(dashboard):
    start = png_of(dashboard)
    dashboard.set(temperature=min(views.TEMPERATURES), cooking=-1.0, history=-1.0)
    assert_shows(dashboard)
    assert png_of(dashboard) != start
    assert dashboard.result.weights.max() > 0.99
    home_cooking = lesson.library_books().titles.index("Home Cooking")
    assert dashboard.view.score_bars.patches[home_cooking].get_width() < 0  # drawn on the left
    dashboard.set(temperature=max(views.TEMPERATURES), maths=0.0, **{"deep learning": 0.0})
    assert_shows(dashboard)
    torch.testing.assert_close(dashboard.result.weights, torch.full((7,), 1 / 7), atol=0.02, rtol=0)


def test_blitted_image_equals_a_full_redraw(dashboard):
    assert_blits_match_full_redraws(dashboard, [{"history": v} for v in (-1.0, 1.0)])


def test_repr_is_a_fixed_sentence(dashboard):
    assert_repr_is_fixed_sentence(dashboard, views.RetrievalDashboard)


# --- the static figures -----------------------------------------------------------------------


def test_the_gallery_draws_one_row_per_temperature():
    query, lib = lesson.library_query(), lesson.library_books()
    fig = views.plot_retrievals(query, (0.5, 5.0))
    try:
        assert len(fig.axes) == 6
        hot = lesson.retrieve(query, lib.keys, lib.values, 5.0)
        np.testing.assert_allclose([p.get_width() for p in fig.axes[4].patches], hot.weights)
        assert "T = 5" in fig.subfigs[1].get_suptitle()
    finally:
        plt.close(fig)


def test_heatmaps_label_queries_and_keys_with_their_tokens():
    w = torch.full((2, 3), 1 / 3)
    fig = views.plot_heatmaps([(w, ["I", "you"], ["我", "爱", "你"], "t")], suptitle="s")
    try:
        ax = fig.axes[0]
        assert [t.get_text() for t in ax.get_xticklabels()] == ["我", "爱", "你"]
        assert [t.get_text() for t in ax.get_yticklabels()] == ["I", "you"]
    finally:
        plt.close(fig)


def test_path_length_figure():
    fig = views.plot_path_lengths(31, (3, 5))
    try:
        lines = fig.axes[0].get_lines()
        assert lines[0].get_label().startswith("recurrent")
        assert lines[-1].get_label().startswith("self-attention")
        assert lines[1].get_ydata()[-1] == 16 and lines[2].get_ydata()[-1] == 8  # distance 31
    finally:
        plt.close(fig)
