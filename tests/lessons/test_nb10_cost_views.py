"""Notebook 10's figures and its dashboard, driven headlessly."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest
from helpers import (
    SharedDashboard,
    assert_png_fits_figure,
    assert_repr_is_fixed_sentence,
    each_value,
    no_new_figures,
    png_of,
)

from attn_lib.lessons import nb10_cost_views as views
from attn_lib.lessons.nb10_cost import online_softmax_walk
from attn_lib.lessons.nb10_cost_views import OnlineSoftmaxDashboard

pytestmark = pytest.mark.usefixtures("headless_backend")


@pytest.fixture(scope="module")
def shared(headless_backend):
    yield from SharedDashboard.fixture(OnlineSoftmaxDashboard)


@pytest.fixture
def dash(shared):
    yield from shared.use()


def test_static_figures_and_no_leak_when_a_step_is_out_of_range():
    lengths = [256, 512, 1024]
    ms = {"attn_lib": {256: 1.0, 512: 4.0, 1024: 16.0}, "SDPA": {256: 2.0, 512: 7.0, 1024: 30.0}}
    table = {"naive": [2 * n * n * 4 for n in lengths], "chunked": [8 * n for n in lengths],
             "tiled": [4096] * 3}  # fmt: skip
    with no_new_figures():
        figs = [views.plot_attention_timings(ms),
                views.plot_memory_vs_length(lengths, table, min_length=512),
                views.plot_walk_step(online_softmax_walk(2), 5),
                views.plot_walk_gallery(online_softmax_walk(8))]  # fmt: skip
        assert [len(f.axes) for f in figs] == [1, 1, 2, 4]
        labels = [t.get_text() for t in figs[0].axes[0].get_legend().get_texts()]
        assert labels[0] == "attn_lib   (slope 2.0)" and "slope 2" in labels[-1]
        for f in figs:
            plt.close(f)
        with pytest.raises(IndexError):  # the figure is made, then the step is out of range
            views.plot_walk_step(online_softmax_walk(2), 8)


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


def test_default_dashboard(dash):
    assert dash.values == {"block_size": 2, "step": 6}
    check_state(dash)
    assert "m 1.7276 → 3.1021, r = 0.2530" in shown(dash)[2]
    assert_repr_is_fixed_sentence(dash)


@pytest.mark.parametrize("name", ["block_size", "step"])
def test_every_control_at_min_middle_max(dash, name):
    for _, previous in each_value(dash, name, back_to_start=True):
        check_state(dash)
        assert png_of(dash) != previous


def test_one_key_per_block_shows_the_guard(dash):
    dash.controls["block_size"].value = 1  # what moving "keys per block" to 1 does
    dash.controls["step"].value = 1
    assert dash.walk is online_softmax_walk(1) and dash.controls["step"].max == 16
    check_state(dash)
    assert "no allowed key yet" in shown(dash)[2]


def test_the_step_range_follows_the_block_size_with_one_redraw(dash, monkeypatch):
    renders = []
    original = dash.render
    monkeypatch.setattr(dash, "render", lambda **v: (renders.append(v), original(**v)))
    dash.controls["block_size"].value = 16  # one block: the step is clipped from 6 to 1
    assert dash.values == {"block_size": 16, "step": 1} and len(renders) == 1
    check_state(dash)


def test_set_does_not_depend_on_the_order_of_its_arguments(dash):
    images = []
    for order in ({"step": 16, "block_size": 1}, {"block_size": 1, "step": 16}):
        dash.set(block_size=8, step=1)  # a step range of 2: step 16 must not be clipped to it
        dash.set(**order)
        assert dash.values == {"block_size": 1, "step": 16}, order
        check_state(dash)
        images.append(png_of(dash))
    assert images[0] == images[1]
