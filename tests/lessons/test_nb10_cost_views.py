"""Notebook 10's figures and its dashboard, driven headlessly."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest
from helpers import (
    assert_blits_match_full_redraws,
    assert_png_fits_figure,
    assert_repr_is_fixed_sentence,
    dashboard_fixtures,
    each_value,
    no_new_figures,
    png_of,
)

from attn_lib.lessons import nb10_cost_views as views
from attn_lib.lessons.nb10_cost import online_softmax_walk
from attn_lib.lessons.nb10_cost_views import OnlineSoftmaxDashboard

pytestmark = pytest.mark.usefixtures("headless_backend")
shared_dashboard, dashboard = dashboard_fixtures(OnlineSoftmaxDashboard)


def test_static_figures():
    lengths = [256, 512, 1024]
    table = {"naive": [2 * n * n * 4 for n in lengths], "chunked": [8 * n for n in lengths],
             "tiled": [4096] * 3}  # fmt: skip
    with no_new_figures():
        figs = [views.plot_memory_vs_length(lengths, table, min_length=512),
                views.plot_walk_gallery(online_softmax_walk(8))]  # fmt: skip
        assert [len(f.axes) for f in figs] == [1, 4]
        labels = [t.get_text() for t in figs[0].axes[0].get_legend().get_texts()]
        assert labels[0].endswith("(slope 2.0)") and labels[2].endswith("(slope 0.0)")
        for f in figs:
            plt.close(f)


def shown(d: OnlineSoftmaxDashboard) -> tuple[list[float], list[float], str]:
    """The bar heights of the running output, the bar colours' alpha, the scores' title."""
    v = d.view
    return ([p.get_height() for p in v.out_bars.patches],
            [p.get_facecolor()[3] for p in v.bars.patches], v.scores_title.get_text())  # fmt: skip


def check_state(d: OnlineSoftmaxDashboard) -> None:
    block_size, step = d.values["block_size"], d.values["step"]
    walk = online_softmax_walk(block_size)
    assert d.walk is walk and d.controls["step"].max == len(walk.states)
    out, alpha, title = shown(d)
    np.testing.assert_allclose(out, walk.states[step - 1].output.numpy())
    assert np.isfinite(out).all() and alpha[:2] == [0.0, 0.0]  # padded keys: no bar
    assert title.startswith(f"step {step} of {len(walk.states)}")
    assert d.last_error is None and d.status.value == ""
    assert_png_fits_figure(d)


def test_default_dashboard(dashboard):
    assert dashboard.values == {"block_size": 2, "step": 6}
    check_state(dashboard)
    assert "m 1.7276 → 3.1021, r = 0.2530" in shown(dashboard)[2]
    assert_repr_is_fixed_sentence(dashboard)


@pytest.mark.parametrize("name", ["block_size", "step"])
def test_every_control_at_min_middle_max(dashboard, name):
    for _, previous in each_value(dashboard, name, back_to_start=True):
        check_state(dashboard)
        assert png_of(dashboard) != previous


def test_one_key_per_block_shows_the_guard(dashboard):
    dashboard.controls["block_size"].value = 1  # what moving "keys per block" to 1 does
    dashboard.controls["step"].value = 1
    assert dashboard.walk is online_softmax_walk(1) and dashboard.controls["step"].max == 16
    check_state(dashboard)
    assert "no allowed key yet" in shown(dashboard)[2]


def test_the_step_range_follows_the_block_size_with_one_redraw(dashboard, monkeypatch):
    renders = []
    original = dashboard.render
    monkeypatch.setattr(dashboard, "render", lambda **v: (renders.append(v), original(**v)))
    dashboard.controls["block_size"].value = 16  # one block: the step is clipped from 6 to 1
    assert dashboard.values == {"block_size": 16, "step": 1} and len(renders) == 1
    check_state(dashboard)


def test_set_does_not_depend_on_the_order_of_its_arguments(dashboard):
    images = []
    for order in ({"step": 16, "block_size": 1}, {"block_size": 1, "step": 16}):
        dashboard.set(block_size=8, step=1)  # a step range of 2: step 16 must not be clipped to it
        dashboard.set(**order)
        assert dashboard.values == {"block_size": 1, "step": 16}, order
        check_state(dashboard)
        images.append(png_of(dashboard))
    assert images[0] == images[1]


def test_blitted_image_equals_a_full_redraw(dashboard):
    # The bars are blitted as collections: their antialiased edges differ from a full redraw's
    # in 0.2-0.5 % of the pixels; a misplaced or missing artist differs in far more.
    settings = [{"block_size": 1, "step": 1}, {"block_size": 16, "step": 1}, {"block_size": 3}]
    assert_blits_match_full_redraws(dashboard, settings, tolerance=0.01)
