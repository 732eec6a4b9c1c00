"""Notebook 08's dashboards, driven headlessly: each control changes the data shown, and the
extremes give a picture, never an error."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import (
    assert_no_nan,
    assert_png_fits_figure,
    assert_repr_is_fixed_sentence,
    blit_mismatch,
    open_dashboard,
)

from attn_lib.lessons import nb08_pitfalls as lesson
from attn_lib.lessons.nb08_pitfalls_views import DropoutDashboard, SoftmaxOverflowDashboard

pytestmark = pytest.mark.usefixtures("headless_backend")


@pytest.fixture
def dropout_dash(headless_backend):
    yield from open_dashboard(DropoutDashboard)


@pytest.fixture
def overflow_dash(headless_backend):
    yield from open_dashboard(SoftmaxOverflowDashboard)


def test_dropout_dashboard_shows_each_setting(dropout_dash):
    assert_repr_is_fixed_sentence(dropout_dash)
    settings = [  # p at its extremes, both placements, both modes
        {"p": 0.0, "placement": "after softmax", "training": True},
        {"p": 0.5, "placement": "after softmax", "training": True},
        {"p": 0.5, "placement": "before softmax", "training": True},
        {"p": 0.5, "placement": "before softmax", "training": False},
    ]
    for values in settings:
        dropout_dash.set(**values)
        expected = lesson.dropout_setting(**values)
        assert dropout_dash.last_error is None
        view = dropout_dash.view
        np.testing.assert_array_equal(view.heatmap.image.get_array(), expected.weights.numpy())
        assert [r.get_visible() for r in view.outlines] == expected.dropped.flatten().tolist()
        np.testing.assert_allclose([b.get_width() for b in view.bars], expected.row_sums.numpy())
        assert dropout_dash.figure.get_suptitle() == expected.title
        assert_no_nan(expected.weights)
        assert_png_fits_figure(dropout_dash)


def test_overflow_dashboard_shows_each_setting(overflow_dash):
    assert_repr_is_fixed_sentence(overflow_dash)
    settings = [("float32", 0.0), ("float32", 100.0), ("float16", 10.75), ("float16", 100.0)]
    failures = []
    for dtype, largest in settings:
        overflow_dash.set(dtype=dtype, largest=largest)
        expected = lesson.softmax_overflow(largest, dtype)
        assert overflow_dash.last_error is None
        panel = overflow_dash.panel
        nan = expected.naive.isnan().numpy()
        naive = np.where(nan, 1.0, expected.naive.numpy())  # a NaN is drawn as a full bar
        np.testing.assert_allclose([b.get_height() for b in panel.naive], naive)
        assert [t.get_text() == "NaN" for t in panel.nan_texts] == nan.tolist()
        np.testing.assert_allclose([b.get_height() for b in panel.stable], expected.stable.numpy())
        assert_no_nan(expected.stable)  # NaN only in the naive softmax
        assert_png_fits_figure(overflow_dash)
        failures.append(expected.failure)
    assert failures == ["none", "nan", "sum overflow", "nan"]


def test_blitted_images_equal_full_redraws(dropout_dash, overflow_dash):
    """Each dashboard redraws only its changing artists: the image is a full redraw's."""
    dropout_dash.set(p=0.5, placement="before softmax")
    assert blit_mismatch(dropout_dash) < 1e-3
    overflow_dash.set(dtype="float16", largest=100.0)  # hatched NaN bars, drawn one by one
    assert blit_mismatch(overflow_dash, overflow_dash.panel.dynamic_artists) < 1e-3
