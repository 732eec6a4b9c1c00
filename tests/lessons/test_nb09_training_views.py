"""Notebook 09's figures and dashboard: each control changes the figure as the runs say, a
blitted update equals a full redraw, the static figures are built as the notebook shows them.

A small experiment (d_k 8 and 64, 4 seeds, 40 steps): the views read any ScalingExperiment.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from helpers import (
    SharedDashboard,
    assert_repr_is_fixed_sentence,
    blit_mismatch,
    decode,
    each_value,
    no_new_figures,
    png_of,
)
from matplotlib.backends.backend_agg import FigureCanvasAgg

from attn_lib.lessons import _figures
from attn_lib.lessons import nb09_training as training
from attn_lib.lessons import nb09_training_views as views

pytestmark = pytest.mark.usefixtures("headless_backend")
D_KS, STEPS = (8, 64), 40


@pytest.fixture(scope="module")
def experiment() -> training.ScalingExperiment:
    return training.run_scaling_experiment(D_KS, n_seeds=4, steps=STEPS)


@pytest.fixture(scope="module")
def shared_dashboard(headless_backend, experiment):
    yield from SharedDashboard.fixture(views.TrainingDashboard, experiment, "unscaled")


@pytest.fixture
def dashboard(shared_dashboard):
    yield from shared_dashboard.use()


def assert_shows(dash) -> None:
    """What is drawn is the chosen run: its loss and its twin's, its weights, its outcome."""
    d_k, setting, seed = dash.values["d_k"], dash.values["setting"], dash.values["seed"]
    run = dash.experiment[setting, d_k]
    loss = run.smoothed()[:, seed].clamp(max=2.0).numpy()
    np.testing.assert_allclose(dash.line.get_ydata(), loss)
    twin = run.smoothed("twin_loss")[:, seed].clamp(max=2.0).numpy()
    np.testing.assert_allclose(dash.twin.get_ydata(), twin)
    np.testing.assert_allclose(dash.heatmap.image.get_array(), run.eval_weights[seed].numpy())
    outcome = "stalled" if run.stalled()[seed] else "learned"
    assert dash.ax_loss.get_title().startswith(f"seed {seed}: {outcome}")
    assert dash.suptitle.get_text().startswith(f"{training.LABELS[setting]}, d_k = {d_k}: ")


def test_default_state(dashboard, experiment):
    run = experiment["unscaled", 64]
    assert dashboard.values["d_k"] == 64  # the largest d_k
    stalled = run.stalled().nonzero().flatten().tolist()
    assert dashboard.values["seed"] == (stalled[0] if stalled else 0)  # the first stalled seed
    assert_shows(dashboard)
    assert dashboard.last_error is None
    assert decode(png_of(dashboard)).shape[:2] == (int(4.0 * 80), int(10.5 * 80))
    assert_repr_is_fixed_sentence(dashboard)


@pytest.mark.parametrize("name", ["d_k", "setting", "seed"])
def test_each_control_each_value(dashboard, name):
    images = []
    for _ in each_value(dashboard, name):
        assert dashboard.last_error is None, dashboard.last_error
        assert_shows(dashboard)
        images.append(decode(png_of(dashboard)))
    assert any(not np.array_equal(images[0], other) for other in images[1:])


def test_blitted_updates_equal_full_redraws(dashboard):
    for setting in ({"setting": "scaled"}, {"d_k": 8, "seed": 3}, {"setting": "unscaled_init"}):
        dashboard.set(**setting)
        assert blit_mismatch(dashboard, dashboard.dynamic) == 0, setting  # pixel for pixel


def test_static_figures(experiment):
    task = training.RetrievalTask()
    with no_new_figures():
        grid = views.plot_loss_grid(experiment)
        assert len(grid.axes) == len(experiment.settings) * len(D_KS)
        assert grid.axes[0].get_title() == "d_k = 8" and grid.axes[1].get_title() == "d_k = 64"
        for ax, (setting, d_k) in zip(
            grid.axes, [(s, d) for s in experiment.settings for d in D_KS]
        ):
            n = int(experiment[setting, d_k].stalled().sum())
            assert [t.get_text() for t in ax.texts] == [f"stalled {n}/4"]
            assert len(ax.lines) == 2 + 4  # threshold, uniform weights, one line per seed
        one = training.make_retrieval_data((0,), 1, task)
        keys, query, values = one.keys[0, 0, 0], one.queries[0, 0, 0], one.values[0, 0, 0]
        target = int(one.target[0, 0, 0])
        task_figure = views.plot_retrieval_task(keys, query, values, target)
        bars = task_figure.axes[1].patches
        heights = torch.tensor([bar.get_width() for bar in bars], dtype=keys.dtype)
        torch.testing.assert_close(heights, keys @ query)
        for f in (grid, task_figure):
            canvas = FigureCanvasAgg(f)
            canvas.draw()
            assert _figures._all_inside(canvas)  # a notebook shows it as drawn, uncropped
            plt.close(f)


def test_every_setting_has_a_colour_and_the_outlines_span_their_rows():
    assert set(views.COLORS) == set(training.LABELS)  # any setting can be plotted
    keys, query, values = torch.randn(5, 3), torch.randn(3), torch.randn(5, 7)  # d_v ≠ d_model
    fig = views.plot_retrieval_task(keys, query, values, target=2)
    try:
        ax_k, ax_d, ax_v = fig.axes[:3]
        for ax, width in ((ax_k, 3), (ax_v, 7)):
            (outline,) = [p for p in ax.patches if not p.get_fill()]
            assert outline.get_width() == width and outline.get_y() == 1.5  # row 2, all of it
        assert ax_d.get_ylim() == ax_k.get_ylim()  # key i level with key i
    finally:
        plt.close(fig)
