"""Notebook 02's token dashboard and figures, driven headlessly.

Controls → the four settings of :func:`nb02_qkv.qkv_example` → one reused figure → PNG. The
bars must show exactly the numbers of the chosen token and setting, and the static figures
the dashboard's.
"""

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
    each_value,
    open_dashboard,
    png_of,
)

from attn_lib.lessons import _examples, nb02_qkv, nb02_qkv_views
from attn_lib.lessons.nb02_qkv_views import BIAS_LABELS, TokenQKVDashboard

pytestmark = pytest.mark.usefixtures("headless_backend")

SENTENCE = _examples.qkv_sentence()
EXAMPLES = {b: nb02_qkv.qkv_example(SENTENCE.x, b) for b in nb02_qkv.BIAS_CHOICES}
FIELDS = ("Q", "K", "V", "scores", "weights", "output")


@pytest.fixture(scope="module")
def dashboard(headless_backend):
    yield from open_dashboard(TokenQKVDashboard)


def heights(bars) -> list[float]:
    return [bar.get_height() for bar in bars.patches]


def assert_shows(bars: dict, title: str, index: int, bias: str) -> None:
    """Filled bars: token ``index`` under ``bias``; outlines: the same token without bias."""
    for field in FIELDS:
        shown, plain = bars[field]
        want = getattr(EXAMPLES[bias], field)[index]
        assert_no_nan(want)
        np.testing.assert_allclose(heights(shown), want.numpy(), rtol=0, atol=1e-6)
        np.testing.assert_allclose(heights(plain), getattr(EXAMPLES["none"], field)[index])
    assert f"'{SENTENCE.tokens[index]}' (position {index}), {BIAS_LABELS[bias]}" in title
    dark = [bar.get_facecolor() for bar in bars["weights"][0].patches]
    assert dark.count(dark[index]) == 1  # only the token's own key is darker


def test_default_state(dashboard):
    assert dashboard.values == {"token": 2, "bias": "none"}
    assert_shows(dashboard.view.bars, dashboard.view.suptitle.get_text(), 2, "none")
    assert_png_fits_figure(dashboard)
    assert_repr_is_fixed_sentence(dashboard, TokenQKVDashboard)


@pytest.mark.parametrize("name", ["token", "bias"])
def test_each_control_each_value(dashboard, name):
    for _, previous in each_value(dashboard, name, back_to_start=True):  # first and last token too
        assert dashboard.last_error is None
        token, bias = dashboard.values["token"], dashboard.values["bias"]
        assert_shows(dashboard.view.bars, dashboard.view.suptitle.get_text(), token, bias)
        assert png_of(dashboard) != previous  # every change shows something new
        assert_png_fits_figure(dashboard)


def test_what_each_bias_shows(dashboard):
    for bias, weights_move, output_moves in (("k", False, False), ("v", False, True),
                                             ("q", True, True)):  # fmt: skip
        dashboard.set(token=6, bias=bias)
        title = dashboard.view.suptitle.get_text()
        assert ("weights change by ≤ 0.0000" in title) is not weights_move
        assert ("output by ≤ 0.0000" in title) is not output_moves
    dashboard.set(token=2, bias="none")


def test_blitted_image_equals_a_full_redraw(dashboard):
    assert_blits_match_full_redraws(dashboard, [{"token": 6, "bias": "q"}])
    dashboard.set(token=2, bias="none")


def test_static_figures(dashboard):
    fig = nb02_qkv_views.plot_token_qkv(EXAMPLES, SENTENCE.tokens, index=2, bias="none")
    try:  # the dashboard's default, as a static figure: same bars, same limits, same title
        for (shown, _), ax in zip(dashboard.view.bars.values(), fig.axes, strict=True):
            assert heights(ax.containers[0]) == heights(shown)
            assert ax.get_ylim() == shown.patches[0].axes.get_ylim()
        assert fig.get_suptitle() == dashboard.view.suptitle.get_text()
    finally:
        plt.close(fig)
    fig = nb02_qkv_views.plot_bias_gallery(EXAMPLES, SENTENCE.tokens, index=2)
    try:
        titles = [ax.get_title() for ax in fig.axes]  # row by row: weights, then output
        assert titles[0].startswith("bias on Q") and not titles[0].endswith("0.0000")
        assert titles[1].startswith("bias on K") and titles[1].endswith("≤ 0.0000")
        assert titles[2].startswith("bias on V") and titles[2].endswith("≤ 0.0000")
        assert titles[4].endswith("≤ 0.0000") and not titles[5].endswith("0.0000")
    finally:
        plt.close(fig)


def test_weights_pair():
    w = torch.softmax(SENTENCE.x @ SENTENCE.x.T, dim=-1)
    fig = nb02_qkv_views.plot_weights_pair([(w, "a"), (w.T, "b")], SENTENCE.tokens, "title")
    try:
        heatmaps = [ax for ax in fig.axes if ax.get_images()]
        assert len(heatmaps) == 2
        for ax in heatmaps:
            assert [t.get_text() for t in ax.get_yticklabels()] == list(SENTENCE.tokens)
            assert ax.get_images()[0].get_clim() == (0.0, 1.0)
    finally:
        plt.close(fig)
