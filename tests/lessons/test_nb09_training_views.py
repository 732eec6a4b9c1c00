"""Notebook 09's figures and dashboard: the overview and the table read the runs, each control
changes the figure as computed, the static figures are built as the notebook shows them.

A small experiment (d_k 8 and 32, 4 seeds, 40 steps): the views read any ScalingExperiment.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from helpers import SharedDashboard, blit_mismatch, decode, each_value, no_new_figures, png_of

from attn_lib.lessons import nb09_training as training
from attn_lib.lessons import nb09_training_views as views
from attn_lib.lessons._dashboard import control_values

pytestmark = pytest.mark.usefixtures("headless_backend")
D_KS, STEPS = (8, 32), 40


@pytest.fixture(scope="module")
def experiment() -> training.ScalingExperiment:
    return training.run_scaling_experiment(D_KS, n_seeds=4, steps=STEPS)


@pytest.fixture(scope="module")
def shared_dashboard(headless_backend, experiment):
    yield from SharedDashboard.fixture(views.TrainingDashboard, experiment, "unscaled", 32)


@pytest.fixture
def dashboard(shared_dashboard):
    yield from shared_dashboard.use()


def assert_overview_is(overview: views.RunOverview, experiment, setting: str, d_k: int) -> None:
    run, row = experiment[setting, d_k], experiment[setting, d_k].summary()
    assert (overview.setting, overview.d_k, overview.steps) == (setting, d_k, STEPS)
    torch.testing.assert_close(overview.loss_band, run.band("loss"))
    for s in experiment.settings:
        torch.testing.assert_close(overview.medians[s], experiment[s, d_k].band("loss", (0.5,))[0])
    i = run.typical_seed()
    assert overview.seed == run.seeds[i]
    stalled = float(run.final_loss()[i]) > run.task.threshold
    assert overview.seed_outcome == ("stalled" if stalled else "learned")
    torch.testing.assert_close(overview.weights, run.eval_weights[i])
    assert overview.title.startswith(f"{views.SETTING_LABELS[setting]}, d_k = {d_k}: ")
    assert f"{row['n_stalled']}/4 runs stalled" in overview.title


def test_summary_table(experiment):
    rows = experiment.robust_summary()
    lines = views.summary_table(rows).splitlines()
    assert len(lines) == 1 + len(rows)
    for word in ("d_k", "setting", "reached", "median steps", "never", "relapsed", "stalled",
                 "final loss", "chaotic"):  # fmt: skip
        assert word in lines[0]
    for line, r in zip(lines[1:], rows, strict=True):
        n = r["n_robust"]
        assert views.SETTING_LABELS[r["setting"]] in line
        assert line.endswith(f"{r['n_chaotic']:>4}/{r['n_seeds']:<2}")
        if n:
            assert f"{r['n_stalled']:>4}/{n:<2}" in line and f"{r['final_loss']:.3f}" in line
    never = dict(rows[0], median_steps=None, n_never=4, n_robust=4)
    assert "never" in views.summary_table([never]).splitlines()[1]
    all_chaotic = dict(rows[0], n_robust=0, n_chaotic=4)
    assert views.summary_table([all_chaotic]).splitlines()[1].count("–") == 6
    with_lr = views.summary_table(rows[:1], show_lr=True).splitlines()
    assert "lr" in with_lr[0] and "0.03" in with_lr[1]


def test_default_state(dashboard, experiment):
    assert_overview_is(dashboard.overview, experiment, "unscaled", 32)
    assert dashboard.last_error is None
    assert decode(png_of(dashboard)).shape[:2] == (int(4.4 * 72), int(11.0 * 72))
    assert "needs a running Jupyter kernel" in dashboard._repr_mimebundle_()["text/plain"]


@pytest.mark.parametrize("name", ["d_k", "setting"])
def test_each_control_each_value(dashboard, experiment, name):
    want = experiment.d_ks if name == "d_k" else experiment.settings
    assert set(control_values(dashboard.controls[name])) == set(want)
    images = []
    for _ in each_value(dashboard, name):
        assert dashboard.last_error is None, dashboard.last_error
        ov, view = dashboard.overview, dashboard.view
        assert_overview_is(ov, experiment, dashboard.values["setting"], dashboard.values["d_k"])
        for s, line in view.lines.items():  # what is drawn is what the overview says
            np.testing.assert_allclose(line.get_ydata(), ov.medians[s].numpy())
            assert line.get_linewidth() == (2.4 if s == ov.setting else 1.0)
        np.testing.assert_allclose(view.heatmap.image.get_array(), ov.weights.numpy())
        assert view.suptitle.get_text() == ov.title
        images.append(decode(png_of(dashboard)))
    assert any(not np.array_equal(images[0], other) for other in images[1:])


def test_revisited_selection_reuses_its_png_and_blits_equal_a_full_redraw(dashboard):
    first = png_of(dashboard)
    dashboard.controls["setting"].value = "scaled"
    assert png_of(dashboard) != first
    dashboard.controls["setting"].value = "unscaled"
    assert png_of(dashboard) == first
    dashboard.set(d_k=8, setting="unscaled_init")
    assert blit_mismatch(dashboard, dashboard._renderer.dynamic) == 0  # pixel for pixel


def test_static_figures(experiment):
    """The figures with per-panel logic (the others are drawn by notebook 09 under nbval)."""
    task = training.RetrievalTask()
    with no_new_figures():
        grid = views.plot_loss_grid(experiment, task.threshold, task.baseline)
        assert len(grid.axes) == len(experiment.settings) * len(D_KS)
        assert grid.axes[0].get_yscale() == "log" and grid.axes[0].get_title() == "d_k = 8"
        stalled = [t.get_text() for ax in grid.axes for t in ax.texts if "stalled" in t.get_text()]
        assert len(stalled) == len(grid.axes) and all(t.endswith("/4") for t in stalled)
        overview = views.run_overview(experiment, "scaled", 8)
        static = views.plot_run_overview(overview, experiment.settings, task.n_keys)
        assert len(static.axes) == 3  # loss, heatmap, colorbar
        assert static._suptitle.get_text() == overview.title
        for f in (grid, static):
            plt.close(f)
