"""Notebook 08's dashboards and the pure functions under them, driven headlessly."""

from __future__ import annotations

import math

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
    decode,
    each_value,
    no_new_figures,
    open_dashboard,
    png_of,
)

from attn_lib.lessons import _figures, nb08_pitfalls_views
from attn_lib.lessons._dashboard import control_values
from attn_lib.lessons._examples import article_example
from attn_lib.lessons.nb08_pitfalls import (
    DROPOUT_PLACEMENTS,
    OVERFLOW_DTYPES,
    OVERFLOW_OFFSETS,
    dropout_setting,
    softmax_overflow,
)
from attn_lib.lessons.nb08_pitfalls_views import DropoutDashboard, SoftmaxOverflowDashboard

pytestmark = pytest.mark.usefixtures("headless_backend")


@pytest.fixture(scope="module")
def shared_dropout_dash(headless_backend):
    yield from SharedDashboard.fixture(DropoutDashboard)


@pytest.fixture
def dropout_dash(shared_dropout_dash):
    """The module's DropoutDashboard, back in the setting it was built with."""
    yield from shared_dropout_dash.use()


@pytest.fixture(scope="module")
def shared_overflow_dash(headless_backend):
    yield from SharedDashboard.fixture(SoftmaxOverflowDashboard)


@pytest.fixture
def overflow_dash(shared_overflow_dash):
    """The module's SoftmaxOverflowDashboard, back in the setting it was built with."""
    yield from shared_overflow_dash.use()


# --- the pure functions ---------------------------------------------------------------------


def test_dropout_setting_after_softmax_scales_the_kept_weights():
    plain = dropout_setting(0.3, "none", True)
    after = dropout_setting(0.3, "after softmax", True)
    assert after.active and after.dropped.any() and not plain.active
    torch.testing.assert_close(after.weights[after.dropped], torch.zeros(int(after.dropped.sum())))
    kept = ~after.dropped
    torch.testing.assert_close(after.weights[kept], plain.weights[kept] / 0.7)
    assert not torch.allclose(after.row_sums, torch.ones(4))
    torch.testing.assert_close(after.row_sums, after.weights.sum(dim=-1))


def test_dropout_setting_before_softmax_keeps_row_sums_and_zeroes_scores():
    before = dropout_setting(0.3, "before softmax", True)
    torch.testing.assert_close(before.row_sums, torch.ones(4))
    dropped_scores = torch.where(before.dropped, 0.0, before.scores / 0.7)
    torch.testing.assert_close(before.weights, torch.softmax(dropped_scores, dim=-1))
    i, j = before.dropped.nonzero()[0].tolist()
    torch.testing.assert_close(before.weights[i, j], 1 / dropped_scores[i].exp().sum())


@pytest.mark.parametrize("placement", DROPOUT_PLACEMENTS)
def test_dropout_setting_in_eval_mode_is_plain_softmax(placement):
    ex = article_example()
    expected = torch.softmax(ex.Q[0] @ ex.K[0].mT / math.sqrt(8), dim=-1)
    s = dropout_setting(0.5, placement, False)
    assert not s.active and not s.dropped.any()
    torch.testing.assert_close(s.weights, expected)


def test_dropout_setting_drops_a_growing_set_and_is_pure():
    previous = torch.zeros(4, 4, dtype=torch.bool)
    for p in (0.0, 0.1, 0.2, 0.3, 0.45, 0.6):
        s = dropout_setting(p, "after softmax", True)
        assert (s.dropped | previous).equal(s.dropped)  # a superset of the cells dropped before
        previous = s.dropped
    a, b = dropout_setting(0.2), dropout_setting(0.2)
    a.weights.zero_()
    assert not torch.equal(a.weights, b.weights)  # copies, not the cache
    assert dropout_setting(0.2 + 1e-12).dropped.equal(b.dropped)  # slider float noise


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"p": 1.0}, ValueError),
        ({"p": -0.1}, ValueError),
        ({"p": "0.2"}, TypeError),
        ({"p": True}, TypeError),
        ({"placement": "inside"}, ValueError),
        ({"training": 1}, TypeError),
        ({"batch_index": 2}, ValueError),
    ],
)
def test_dropout_setting_refuses_bad_arguments(kwargs, error):
    with pytest.raises(error):
        dropout_setting(**kwargs)


@pytest.mark.parametrize("dtype", OVERFLOW_DTYPES)
def test_softmax_overflow_fails_in_two_steps(dtype):
    info = torch.finfo(getattr(torch, dtype))
    limit = math.log(info.max)
    r = softmax_overflow(5.0, dtype)
    assert r.threshold == pytest.approx(limit)
    assert r.sum_threshold == pytest.approx(
        limit - math.log(sum(math.exp(o) for o in OVERFLOW_OFFSETS))
    )
    assert r.failure == "none"
    assert softmax_overflow(r.sum_threshold + 0.1, dtype).failure == "sum overflow"
    assert softmax_overflow(limit + 0.1, dtype).failure == "nan"
    assert softmax_overflow(100.0, dtype).failure == "nan"
    expected = torch.softmax(torch.tensor(OVERFLOW_OFFSETS), dim=-1)
    for largest in (0.0, r.sum_threshold + 0.1, limit + 0.1, 100.0):
        s = softmax_overflow(largest, dtype)
        torch.testing.assert_close(s.stable, expected, atol=1e-3, rtol=0)  # never changes
        assert_no_nan(s.stable)
        assert s.stable_sum == pytest.approx(1.0, abs=1e-3)


def test_softmax_overflow_values_at_the_edges():
    assert softmax_overflow(88.5).naive_sum == 0.0  # every weight x / inf
    assert math.isnan(softmax_overflow(88.75).naive_sum)
    assert softmax_overflow(88.75).exp_largest == math.inf
    assert softmax_overflow(88.5).exp_largest == pytest.approx(math.exp(88.5), rel=1e-6)


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ((-1.0,), ValueError),
        ((math.inf,), ValueError),
        ((1e6, "float16"), ValueError),
        (("1",), TypeError),
        ((1.0, "bfloat16"), ValueError),
    ],
)
def test_softmax_overflow_refuses_bad_arguments(args, error):
    with pytest.raises(error):
        softmax_overflow(*args)


# --- the dropout dashboard -----------------------------------------------------------------


def assert_dropout_shows(dash: DropoutDashboard, p: float, placement: str, training: bool) -> None:
    expected = dropout_setting(p, placement, training)
    assert dash.last_error is None and dash.status.value == ""
    assert torch.equal(dash.result.weights, expected.weights)
    assert torch.equal(dash.result.dropped, expected.dropped)
    assert_no_nan(dash.result.weights)
    np.testing.assert_array_equal(dash.view.heatmap.image.get_array(), expected.weights.numpy())
    visible = np.array([[r.get_visible() for r in row] for row in dash.view.outlines])
    np.testing.assert_array_equal(visible, expected.dropped.numpy())
    widths = [bar.get_width() for bar in dash.view.bars.patches]
    np.testing.assert_allclose(widths, expected.row_sums.numpy())
    assert dash.figure.get_suptitle() == expected.title
    assert_png_fits_figure(dash)


def test_dropout_default_state(dropout_dash):
    assert dropout_dash.values == {"p": 0.2, "placement": "after softmax", "training": True}
    assert_dropout_shows(dropout_dash, 0.2, "after softmax", True)


@pytest.mark.parametrize("name", ["p", "placement", "training"])
def test_dropout_each_control_each_value(dropout_dash, name):
    values = control_values(dropout_dash.controls[name])
    if name == "p":
        assert values == pytest.approx([0.2, 0.0, 0.3, 0.6])  # current, min, middle, max
    view = dropout_dash.view
    for _ in each_value(dropout_dash, name):  # the figure is reused...
        settings = dropout_dash.values
        assert_dropout_shows(
            dropout_dash, settings["p"], settings["placement"], settings["training"]
        )
        assert dropout_dash.view is view  # ...and so is the view


def test_dropout_every_placement_and_mode(dropout_dash):
    seen = set()
    for placement in DROPOUT_PLACEMENTS:
        for training in (True, False):
            dropout_dash.controls["placement"].value = placement
            dropout_dash.controls["training"].value = training
            dropout_dash.controls["p"].value = 0.6
            assert_dropout_shows(dropout_dash, 0.6, placement, training)
            seen.add(png_of(dropout_dash))
    assert len(seen) == 6  # the title differs in every setting


def test_dropout_blitted_image_equals_a_full_redraw(dropout_dash):
    settings = [{"placement": pl, "p": 0.45} for pl in ("after softmax", "before softmax")]
    assert_blits_match_full_redraws(dropout_dash, settings)


# --- the overflow dashboard ----------------------------------------------------------------


def assert_overflow_shows(dash: SoftmaxOverflowDashboard, largest: float, dtype: str) -> None:
    expected = softmax_overflow(largest, dtype)
    assert dash.last_error is None and dash.status.value == ""
    torch.testing.assert_close(dash.result.naive, expected.naive, equal_nan=True)
    torch.testing.assert_close(dash.result.stable, expected.stable)
    assert_no_nan(dash.result.stable)  # NaN only where the reader asked for it
    view = dash.view
    heights = [bar.get_height() for bar in view.weights.stable.patches]
    np.testing.assert_allclose(heights, expected.stable.numpy())
    naive = expected.naive.numpy()
    for bar, text, w in zip(view.weights.naive.patches, view.weights.nan_texts, naive, strict=True):
        if np.isnan(w):
            assert bar.get_height() == 1.0 and bar.get_hatch() == "//" and text.get_text() == "NaN"
        else:
            assert bar.get_height() == pytest.approx(float(w)) and text.get_text() == ""
    scores = [bar.get_height() for bar in view.score_bars.patches]
    np.testing.assert_allclose(scores, expected.scores.float().numpy())
    assert view.threshold_line.get_ydata()[0] == pytest.approx(expected.threshold)
    assert dash.figure.get_suptitle() == nb08_pitfalls_views.overflow_title(expected)
    decode(png_of(dash))


def test_overflow_default_state(overflow_dash):
    assert overflow_dash.values == {"largest": 80.0, "dtype": "float32"}
    assert_overflow_shows(overflow_dash, 80.0, "float32")
    assert overflow_dash.result.failure == "none"


@pytest.mark.parametrize("dtype", OVERFLOW_DTYPES)
def test_overflow_slider_min_middle_max_and_the_edges(overflow_dash, dtype):
    overflow_dash.controls["dtype"].value = dtype
    figure = overflow_dash.figure
    values = control_values(overflow_dash.controls["largest"])
    assert values == [80.0, 0.0, 50.0, 100.0]
    edges = [88.25, 88.5, 88.75] if dtype == "float32" else [10.5, 10.75, 11.25]
    failures = []
    for value in values + edges:
        overflow_dash.controls["largest"].value = value
        assert_overflow_shows(overflow_dash, value, dtype)
        assert overflow_dash.figure is figure
        failures.append(overflow_dash.result.failure)
    assert failures[-3:] == ["none", "sum overflow", "nan"]


def test_overflow_blitted_image_equals_a_full_redraw(overflow_dash):
    cases = (("float32", 88.5), ("float16", 11.25), ("float16", 40.0))
    settings = [{"dtype": dtype, "largest": largest} for dtype, largest in cases]
    assert_blits_match_full_redraws(overflow_dash, settings, tolerance=2e-3)


@pytest.fixture
def fresh_overflow_dash(headless_backend):
    """A dashboard of its own: the test counts the backgrounds it caches from cold."""
    yield from open_dashboard(SoftmaxOverflowDashboard)


def test_overflow_backgrounds_are_few(fresh_overflow_dash):
    overflow_dash = fresh_overflow_dash
    for dtype in OVERFLOW_DTYPES:
        overflow_dash.controls["dtype"].value = dtype
        for value in np.arange(0.0, 100.25, 12.5):
            overflow_dash.controls["largest"].value = float(value)
    assert len(overflow_dash._renderer._backgrounds) <= 8  # fixed y-limit levels, cached


# --- both ----------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [DropoutDashboard, SoftmaxOverflowDashboard])
def test_repr_is_a_fixed_sentence(cls):
    dash = cls()
    try:
        assert_repr_is_fixed_sentence(dash, cls)
    finally:
        dash.close()


def test_static_figures_render_and_close():
    with no_new_figures():
        figures = [
            nb08_pitfalls_views.plot_dropout_setting(dropout_setting()),
            nb08_pitfalls_views.plot_dropout_gallery(
                [dropout_setting(0.3, pl, True) for pl in DROPOUT_PLACEMENTS],
                titles=["a", "b", "c"],
            ),
            nb08_pitfalls_views.plot_softmax_overflow(softmax_overflow(89.0)),
            nb08_pitfalls_views.plot_softmax_overflow_gallery(
                [softmax_overflow(s) for s in (88.0, 88.5, 89.0)]
            ),
        ]
        for fig in figures:
            decode(_figures.figure_to_png(fig))
            plt.close(fig)
    with pytest.raises(ValueError):
        nb08_pitfalls_views.plot_dropout_gallery([])
    with pytest.raises(ValueError):
        nb08_pitfalls_views.plot_dropout_gallery([dropout_setting()], titles=["a", "b"])
    with pytest.raises(ValueError):
        nb08_pitfalls_views.plot_softmax_overflow_gallery([])
