"""Notebook 02's token dashboard and figures, driven headlessly.

Controls → :func:`attn_lib.nb02_qkv.token_qkv` → one reused figure → PNG. Every
control takes every value; the bars must show exactly what the pure function returns.
"""

from __future__ import annotations

import itertools

import ipywidgets
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from helpers import (
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

from attn_lib.lessons import _examples, nb02_qkv, nb02_qkv_views
from attn_lib.lessons._dashboard import control_values
from attn_lib.lessons.nb02_qkv_views import TokenQKVDashboard

pytestmark = pytest.mark.usefixtures("headless_backend")

BIAS_SCALE = 3.0  # as in the notebook
SENTENCE = _examples.qkv_sentence()
FIELDS = ("query", "key", "value", "scores", "weights", "output")



@pytest.fixture(scope="module")
def shared_dashboard(headless_backend):
    """One dashboard for the module (building one takes a while); closed at the end."""
    yield from open_dashboard(TokenQKVDashboard, bias_scale=BIAS_SCALE)


@pytest.fixture
def dashboard(shared_dashboard):
    """The shared dashboard, back in its default setting ("cat", no bias)."""
    shared_dashboard.controls["token"].value = 2
    shared_dashboard.controls["bias"].value = "none"
    with no_new_figures("an update"):
        yield shared_dashboard


def expected(index: int, bias: str) -> nb02_qkv.TokenQKV:
    return nb02_qkv.token_qkv(SENTENCE.x, index, bias, bias_scale=BIAS_SCALE)


def assert_shows(dash: TokenQKVDashboard, index: int, bias: str) -> None:
    """The dashboard holds and draws exactly what token_qkv computes."""
    want, reference = expected(index, bias), expected(index, "none")
    assert dash.values == {"token": index, "bias": bias}
    assert dash.last_error is None and dash.status.value == ""
    assert dash.result.index == index and dash.result.bias == bias
    for field in FIELDS:
        got = getattr(dash.result, field)
        assert torch.equal(got, getattr(want, field)), field
        assert_no_nan(got)
        heights = [bar.get_height() for bar in dash.view.bars[field].patches]
        np.testing.assert_allclose(heights, getattr(want, field).numpy(), rtol=0, atol=1e-6)
        outlines = [bar.get_height() for bar in dash.view.ghosts[field].patches]
        np.testing.assert_allclose(outlines, getattr(reference, field).numpy(), atol=1e-6)
    texts = [t.get_text() for t in dash.view.weight_texts]
    assert texts == [f"{w:.2f}" for w in want.weights.tolist()]
    title = dash.figure.get_suptitle()
    assert f"'{SENTENCE.tokens[index]}' (position {index})" in title
    assert nb02_qkv_views.BIAS_LABELS[bias] in title
    dark = [bar.get_facecolor() for bar in dash.view.bars["weights"].patches]
    assert sum(c == dark[index] for c in dark) == 1  # only the token's own key is darker
    assert_png_fits_figure(dash)


def test_default_state(dashboard):
    assert_shows(dashboard, 2, "none")
    assert isinstance(dashboard.widget, ipywidgets.VBox)
    assert set(dashboard.controls) == {"token", "bias"}
    labels = [t.get_text() for t in dashboard.view.axes["weights"].get_xticklabels()]
    assert labels == list(SENTENCE.tokens)


@pytest.mark.parametrize("name", ["token", "bias"])
def test_each_control_each_value(dashboard, name):
    values = control_values(dashboard.controls[name])
    if name == "token":  # min, middle and max are among the options
        assert {0, 3, 6} <= set(values)
    else:
        assert set(values) == set(nb02_qkv.BIAS_CHOICES)
    bars = dashboard.view.bars["weights"]
    for _, previous in each_value(dashboard, name, back_to_start=True):  # one figure, reused
        assert_shows(dashboard, index=dashboard.values["token"], bias=dashboard.values["bias"])
        assert dashboard.view.bars["weights"] is bars
        assert png_of(dashboard) != previous  # every change shows something new


def test_every_combination_and_what_each_bias_does(dashboard):
    seen = set()
    for index, bias in itertools.product(range(len(SENTENCE.tokens)), nb02_qkv.BIAS_CHOICES):
        dashboard.set(token=index, bias=bias)
        assert_shows(dashboard, index, bias)
        seen.add(png_of(dashboard))
        shown, plain = dashboard.result, dashboard.reference
        if bias in ("none", "k", "v"):
            torch.testing.assert_close(shown.weights, plain.weights)
        if bias == "k":
            torch.testing.assert_close(shown.output, plain.output)
            shift = shown.scores - plain.scores
            torch.testing.assert_close(shift, shift[0].expand_as(shift))  # one constant
        if bias == "v":
            b_V = nb02_qkv.qkv_example(SENTENCE.x, "v", bias_scale=BIAS_SCALE).b_V
            torch.testing.assert_close(shown.output - plain.output, b_V)
        if bias == "q":
            assert (shown.weights - plain.weights).abs().max() > 0.05
    assert len(seen) == 28  # every setting looks different


def test_blitted_image_equals_a_full_redraw(dashboard):
    settings = [{"token": i, "bias": b} for i, b in ((0, "q"), (6, "v"), (3, "k"))]
    assert_blits_match_full_redraws(dashboard, settings)


def test_repr_is_a_fixed_sentence(dashboard):
    assert_repr_is_fixed_sentence(dashboard, TokenQKVDashboard)


def test_other_sentence_and_widths():
    pair = nb02_qkv.short_and_long_tokens()
    with no_new_figures("the dashboard"):
        dash = TokenQKVDashboard(index=-1, bias="q", sentence=pair, d_k=3, d_v=5, dpi=50)
        try:
            assert dash.values == {"token": 1, "bias": "q"}
            assert len(dash.view.bars["query"].patches) == 3
            assert len(dash.view.bars["value"].patches) == 5
            assert len(dash.view.bars["weights"].patches) == 2
            want = nb02_qkv.token_qkv(pair.x, 1, "q", d_k=3, d_v=5, bias_scale=3.0)
            assert torch.equal(dash.result.output, want.output)
            decode(png_of(dash))
        finally:
            dash.close()


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [({"index": 7}, IndexError), ({"index": -8}, IndexError), ({"bias": "Q"}, ValueError),
     ({"bias_scale": 0.0}, ValueError)],
)  # fmt: skip
def test_bad_arguments_are_refused(kwargs, error):
    with no_new_figures(), pytest.raises(error):
        TokenQKVDashboard(**kwargs)


# --- the static figures of notebook 02 -----------------------------------------------------


def test_static_token_figure_matches_the_dashboard_default(dashboard):
    results = [expected(i, b) for i in range(7) for b in nb02_qkv.BIAS_CHOICES]
    limits = nb02_qkv_views.token_qkv_limits(results)
    assert limits == dashboard.view.limits
    assert limits["weights"][0] == 0.0
    for field in FIELDS:
        top = max(getattr(r, field).abs().max().item() for r in results)
        assert limits[field][1] == pytest.approx(1.1 * top)
    fig = nb02_qkv_views.plot_token_qkv(expected(2, "none"), expected(2, "none"), SENTENCE.tokens,
                                  limits=limits)  # fmt: skip
    try:
        assert len(fig.axes) == 6
        assert fig.get_suptitle() == dashboard.figure.get_suptitle()
    finally:
        plt.close(fig)


def test_bias_gallery():
    reference = expected(2, "none")
    results = [expected(2, b) for b in ("q", "k", "v")]
    fig = nb02_qkv_views.plot_bias_gallery(results, reference, SENTENCE.tokens)
    try:
        assert len(fig.axes) == 6
        titles = [ax.get_title() for ax in fig.axes]
        assert titles[0].startswith("bias on Q") and "0.0000" not in titles[0]
        assert titles[1].startswith("bias on K") and titles[1].endswith("≤ 0.0000")
        assert titles[2].startswith("bias on V") and titles[2].endswith("≤ 0.0000")
        assert titles[4] == "output changes by ≤ 0.0000"  # K: outputs unchanged
    finally:
        plt.close(fig)
    with pytest.raises(ValueError, match="same token"):
        nb02_qkv_views.plot_bias_gallery([expected(3, "q")], reference, SENTENCE.tokens)
    with pytest.raises(ValueError):
        nb02_qkv_views.plot_bias_gallery([], reference, SENTENCE.tokens)


def test_token_attention_gallery_and_vectors():
    w = torch.softmax(SENTENCE.x @ SENTENCE.x.T, dim=-1)
    fig = nb02_qkv_views.plot_token_attention_gallery([(w, "a"), (w.T, "b")], SENTENCE.tokens)
    try:
        heatmaps = [ax for ax in fig.axes if ax.get_images()]
        assert len(heatmaps) == 2
        for ax in heatmaps:
            assert [t.get_text() for t in ax.get_yticklabels()] == list(SENTENCE.tokens)
            assert ax.get_images()[0].get_clim() == (0.0, 1.0)
    finally:
        plt.close(fig)
    pair = nb02_qkv.short_and_long_tokens()
    fig = nb02_qkv_views.plot_vectors_2d(pair.x, pair.tokens, title="t")
    try:
        labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
        assert labels == ["short (0.3, 0.1)", "long (2, 0.5)"]
    finally:
        plt.close(fig)
    with pytest.raises(ValueError, match=r"\(L, 2\)"):
        nb02_qkv_views.plot_vectors_2d(torch.zeros(2, 3), ["a", "b"])
    with pytest.raises(ValueError):
        nb02_qkv_views.plot_vectors_2d(torch.zeros(2, 2), ["a"])
