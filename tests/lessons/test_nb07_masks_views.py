"""Notebook 07 (masks): the mask dashboard driven headlessly, and its static figures."""

from __future__ import annotations

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from helpers import (
    assert_blits_match_full_redraws,
    assert_png_fits_figure,
    assert_repr_is_fixed_sentence,
    dashboard_fixtures,
    no_new_figures,
    png_of,
)

import attn_lib
from attn_lib.lessons import _figures, nb07_masks_views
from attn_lib.lessons.nb07_masks import MASK_FILLS, mask_setting
from attn_lib.lessons.nb07_masks_views import MaskDashboard

pytestmark = pytest.mark.usefixtures("headless_backend")
SLIDERS = ("length_0", "length_1", "length_2")


shared_dashboard, dashboard = dashboard_fixtures(MaskDashboard)


def expected_rgba(weights: torch.Tensor, keep: torch.Tensor) -> np.ndarray:
    """What a panel's image must hold: viridis, grey where masked, red where NaN."""
    w, k = weights.numpy().astype(float), keep.numpy()
    nan = np.isnan(w)
    leak = ~k & ~nan & (w >= 0.005)
    rgba = matplotlib.colormaps[_figures.ATTENTION_CMAP](np.clip(np.nan_to_num(w), 0, 1))
    rgba[~k & ~nan & ~leak] = _figures.MASKED_COLOR
    rgba[nan] = nb07_masks_views.NAN_COLOR
    return rgba


def assert_shows(dash: MaskDashboard) -> None:
    """The dashboard draws exactly what the pure function computes for its controls."""
    v = dash.values
    expected = mask_setting(tuple(v[s] for s in SLIDERS), causal=v["causal"],
                            padding_side=v["padding"], fill=v["fill"], dtype=v["dtype"])  # fmt: skip
    assert dash.last_error is None and dash.status.value == ""
    assert torch.equal(dash.result.keep, expected.keep) and dash.result.error == expected.error
    view = dash.view
    if expected.error is None:
        for b, (ax, image) in enumerate(zip(view.axes, view.images, strict=True)):
            assert image.get_visible()
            np.testing.assert_allclose(
                image.get_array(), expected_rgba(expected.weights[b], expected.keep[b])
            )
            assert f"length {expected.lengths[b]}" in ax.get_title()
            assert f"{expected.mass[b]:.3f}" in ax.get_title()
        assert not view.error_text.get_visible()
    else:
        assert "overflow" in view.error_text.get_text() and view.error_text.get_visible()
        assert not any(image.get_visible() for image in view.images)
    assert dash.figure.get_suptitle() == expected.title
    assert_png_fits_figure(dash)


def test_each_control_changes_the_picture_as_computed(dashboard):
    assert dashboard.values == {
        "length_0": 6, "length_1": 4, "length_2": 2, "causal": False, "padding": "right",
        "fill": "default", "dtype": "float32",
    }  # fmt: skip
    assert_shows(dashboard)
    for name, value in [("length_1", 1), ("causal", True), ("padding", "left"), ("fill", "0"),
                        ("dtype", "bfloat16"), ("length_2", 6)]:  # fmt: skip
        before = png_of(dashboard)
        dashboard.controls[name].value = value
        assert_shows(dashboard)
        assert png_of(dashboard) != before, name


def test_extremes_draw_a_picture_never_an_exception(dashboard):
    dashboard.set(causal=True, padding="left", length_0=1, length_1=1, length_2=6)
    for fill in MASK_FILLS:  # in float16: -1e9 is refused, drawn as PyTorch's error
        dashboard.set(fill=fill, dtype="float16")
        assert_shows(dashboard)
    assert "PyTorch refused" in dashboard.view.error_text.get_text()
    dashboard.set(fill="-inf", dtype="float32")
    assert dashboard.result.nan_rows == (5, 5, 0)  # length 1, left padding: only row 5 has a key
    assert_shows(dashboard)


def test_blitted_image_equals_a_full_redraw(dashboard):
    settings = [
        {"causal": True, "padding": "left", "fill": "0"},
        {"fill": "-1e9", "dtype": "float16"},
    ]
    assert_blits_match_full_redraws(dashboard, settings)


def test_repr_is_a_fixed_sentence(dashboard):
    assert_repr_is_fixed_sentence(dashboard, MaskDashboard)


def test_static_figures_write_every_cell():
    with no_new_figures():
        pad = attn_lib.padding_mask([6, 4, 2])
        fig = nb07_masks_views.plot_keep_masks([(pad[1].expand(6, 6), "broadcast")], suptitle="t")
        marks = [t.get_position() for t in fig.axes[0].texts if t.get_text() == "×"]
        assert sorted(marks) == [(j, i) for j in (4, 5) for i in range(6)]
        plt.close(fig)

        r = mask_setting((6, 4, 2), causal=True, padding_side="left", fill="-inf")
        fig = nb07_masks_views.plot_mask_setting(r)
        assert [t.get_text() for t in fig.axes[2].texts].count("NaN") == 4 * 6
        assert fig.get_figwidth() <= 8.2  # inline, 100 dpi: within the notebook column, 840 px
        plt.close(fig)

        settings = [
            mask_setting(causal=True, padding_side="left", fill=f) for f in ("default", "-1e9")
        ]
        fig = nb07_masks_views.plot_mask_gallery(settings, 2, ["default", "-1e9"], suptitle="t")
        leaks = [t.get_text() for t in fig.axes[1].texts if t.get_text().startswith("×\n")]
        assert leaks == ["×\n0.17"] * (4 * 6)  # four uniform rows of blocked keys
        plt.close(fig)
