"""Notebook 08's figures and dashboards, driven headlessly: each control changes the data shown."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import (
    SharedDashboard,
    assert_no_nan,
    assert_png_fits_figure,
    assert_repr_is_fixed_sentence,
    each_value,
)

from attn_lib.lessons import nb08_pitfalls as lesson
from attn_lib.lessons.nb08_pitfalls_views import DropoutDashboard, SoftmaxOverflowDashboard

pytestmark = pytest.mark.usefixtures("headless_backend")


@pytest.fixture(scope="module")
def shared_dropout(headless_backend):
    yield from SharedDashboard.fixture(DropoutDashboard)


@pytest.fixture
def dropout_dash(shared_dropout):
    yield from shared_dropout.use()


@pytest.fixture(scope="module")
def shared_overflow(headless_backend):
    yield from SharedDashboard.fixture(SoftmaxOverflowDashboard)


@pytest.fixture
def overflow_dash(shared_overflow):
    yield from shared_overflow.use()


def assert_dropout_shows(dash: DropoutDashboard) -> None:
    expected = lesson.dropout_setting(**dash.values)
    assert dash.last_error is None
    np.testing.assert_array_equal(dash.view.heatmap.image.get_array(), expected.weights.numpy())
    visible = [rect.get_visible() for rect in dash.view.outlines]
    assert visible == expected.dropped.flatten().tolist()
    widths = [bar.get_width() for bar in dash.view.bars]
    np.testing.assert_allclose(widths, expected.row_sums.numpy())
    assert dash.figure.get_suptitle() == expected.title
    assert_no_nan(expected.weights)
    assert_png_fits_figure(dash)


@pytest.mark.parametrize("name", ["p", "placement", "training"])
def test_dropout_each_control_each_value(dropout_dash, name):
    for _ in each_value(dropout_dash, name):  # p: 0.3, then its extremes 0 and 0.5
        assert_dropout_shows(dropout_dash)


def assert_overflow_shows(dash: SoftmaxOverflowDashboard) -> None:
    expected = lesson.softmax_overflow(**dash.values)
    assert dash.last_error is None
    naive = [bar.get_height() for bar in dash.panel.naive]
    nan = expected.naive.isnan().numpy()
    np.testing.assert_allclose(np.where(nan, 1.0, expected.naive.numpy()), naive)
    assert [t.get_text() == "NaN" for t in dash.panel.nan_texts] == nan.tolist()
    stable = [bar.get_height() for bar in dash.panel.stable]
    np.testing.assert_allclose(stable, expected.stable.numpy())
    assert_no_nan(expected.stable)  # NaN only in the naive softmax
    assert_png_fits_figure(dash)


@pytest.mark.parametrize("dtype", lesson.OVERFLOW_DTYPES)
def test_overflow_slider_extremes_and_edges(overflow_dash, dtype):
    overflow_dash.controls["dtype"].value = dtype
    edges = [88.25, 88.5, 88.75] if dtype == "float32" else [10.5, 10.75, 11.25]
    failures = []
    for value in [0.0, 100.0, *edges]:
        overflow_dash.controls["largest"].value = value
        assert_overflow_shows(overflow_dash)
        failures.append(overflow_dash.result.failure)
    assert failures == ["none", "nan", "none", "sum overflow", "nan"]


def test_repr_is_a_fixed_sentence(dropout_dash, overflow_dash):
    assert_repr_is_fixed_sentence(dropout_dash)
    assert_repr_is_fixed_sentence(overflow_dash)
