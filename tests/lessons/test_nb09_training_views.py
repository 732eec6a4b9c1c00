"""Notebook 09 (does scaling matter in training?): the training dashboard driven headlessly,
the pure functions under it (run_overview, summary_table), the static figures, and the two
exercise checkers.

The experiment here is small (2 values of d_k, 4 seeds, 40 steps): the dashboard and the
figures read any ScalingExperiment, and the training itself is tested in test_training.py.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from helpers import (
    SharedDashboard,
    blit_mismatch,
    decode,
    each_value,
    no_new_figures,
    png_of,
)
from matplotlib.figure import Figure

from attn_lib.lessons import nb09_training as training
from attn_lib.lessons import nb09_training_runs as runs
from attn_lib.lessons import nb09_training_views as plotting
from attn_lib.lessons._dashboard import control_values
from attn_lib.lessons.nb09_training_checkers import check_init_like_scaled, check_stalling_settings
from attn_lib.lessons.nb09_training_views import TrainingDashboard

pytestmark = pytest.mark.usefixtures("headless_backend")
D_KS = (8, 32)
STEPS = 40



@pytest.fixture(scope="module")
def experiment() -> runs.ScalingExperiment:
    return training.run_scaling_experiment(D_KS, n_seeds=4, steps=STEPS)


@pytest.fixture(scope="module")
def shared_dashboard(headless_backend, experiment):
    yield from SharedDashboard.fixture(TrainingDashboard, experiment, setting="unscaled", d_k=32)


@pytest.fixture
def dashboard(shared_dashboard):
    """The module's TrainingDashboard, back in the setting it was built with."""
    yield from shared_dashboard.use()


def assert_overview_is(overview: plotting.RunOverview, experiment, setting: str, d_k: int):
    run = experiment[setting, d_k]
    row = run.summary()
    assert (overview.setting, overview.d_k, overview.steps) == (setting, d_k, STEPS)
    torch.testing.assert_close(overview.loss_band, run.band("loss"))
    for s in experiment.settings:
        torch.testing.assert_close(overview.medians[s], experiment[s, d_k].band("loss", (0.5,))[0])
    i = run.typical_seed()
    assert overview.seed == run.seeds[i]
    stalled = float(run.final_loss()[i]) > run.task.threshold
    assert overview.seed_outcome == ("stalled" if stalled else "learned")
    torch.testing.assert_close(overview.weights, run.eval_weights[i])
    assert overview.n_never == row["n_never"] and overview.n_relapsed == row["n_relapsed"]
    assert overview.n_stalled == round(row["stall_fraction"] * run.n_seeds)
    assert overview.n_reached == run.n_seeds - row["n_never"]
    assert overview.median_steps == row["median_steps"]
    assert overview.threshold == run.task.threshold and overview.baseline == run.task.baseline


# --- the pure functions ------------------------------------------------------------------------


def test_run_overview_reads_the_runs(experiment):
    for setting in experiment.settings:
        for d_k in experiment.d_ks:
            overview = plotting.run_overview(experiment, setting, d_k)
            assert_overview_is(overview, experiment, setting, d_k)
            assert plotting.SETTING_LABELS[setting] in overview.title
            assert f"d_k = {d_k}" in overview.title
            assert f"{overview.n_stalled}/4 runs stalled" in overview.title


def test_run_overview_rejects_what_was_not_run(experiment):
    with pytest.raises(ValueError, match="setting 'unscaled_reparam' was not run"):
        plotting.run_overview(experiment, "unscaled_reparam", 8)
    with pytest.raises(ValueError, match="d_k = 512 was not run"):
        plotting.run_overview(experiment, "scaled", 512)


def test_summary_table(experiment):
    rows = experiment.robust_summary()
    lines = plotting.summary_table(rows).splitlines()
    assert len(lines) == 1 + len(rows)
    for word in ("d_k", "setting", "reached", "median steps", "never", "relapsed", "stalled",
                 "chaotic"):
        assert word in lines[0]
    for line, r in zip(lines[1:], rows, strict=True):
        assert plotting.SETTING_LABELS[r["setting"]] in line
        n = r["n_robust"]
        assert line.endswith(f"{r['n_chaotic']:>4}/{r['n_seeds']:<2}")
        if n:
            assert f"{r['n_stalled']:>4}/{n:<2}" in line and f"{n - r['n_never']:>4}/{n:<2}" in line
            assert f"{r['final_loss']:.3f}" in line
    never = dict(rows[0], median_steps=None, n_never=4, n_robust=4, setting="unscaled")
    assert "never" in plotting.summary_table([never]).splitlines()[1]
    chaotic = dict(rows[0], n_robust=0, n_chaotic=4)
    assert plotting.summary_table([chaotic]).splitlines()[1].count("–") == 6
    with_lr = plotting.summary_table(rows[:1], show_lr=True).splitlines()
    assert "lr" in with_lr[0] and "0.03" in with_lr[1]
    with pytest.raises(ValueError, match="at least one summary row"):
        plotting.summary_table([])


# --- the dashboard -----------------------------------------------------------------------------


def test_default_state(dashboard, experiment):
    assert_overview_is(dashboard.overview, experiment, "unscaled", 32)
    assert dashboard.last_error is None
    image = decode(png_of(dashboard))
    assert image.shape[:2] == (int(4.4 * 72), int(11.0 * 72))
    assert "needs a running Jupyter kernel" in dashboard._repr_mimebundle_()["text/plain"]


@pytest.mark.parametrize("name", ["d_k", "setting"])
def test_each_control_each_value(dashboard, experiment, name):
    control = dashboard.controls[name]
    assert set(control_values(control)) == set(
        experiment.d_ks if name == "d_k" else experiment.settings
    )
    seen = {}
    for value, _ in each_value(dashboard, name):  # one figure, reused
        assert dashboard.last_error is None, dashboard.last_error
        values = dashboard.values
        assert_overview_is(dashboard.overview, experiment, values["setting"], values["d_k"])
        # What is drawn is what the pure function says.
        view = dashboard.view
        ov = dashboard.overview
        for s, line in view.lines.items():
            np.testing.assert_allclose(line.get_ydata(), ov.medians[s].numpy())
            assert line.get_linewidth() == (2.4 if s == ov.setting else 1.0)
        np.testing.assert_allclose(view.heatmap.image.get_array(), ov.weights.numpy())
        assert view.suptitle.get_text() == ov.title
        png = png_of(dashboard)
        assert not np.isnan(ov.loss_band.numpy()).any()
        seen[value] = decode(png)
    images = list(seen.values())
    assert any(not np.array_equal(images[0], other) for other in images[1:])


def test_revisited_selection_reuses_its_png(dashboard):
    first = png_of(dashboard)
    dashboard.controls["setting"].value = "scaled"
    assert png_of(dashboard) != first
    dashboard.controls["setting"].value = "unscaled"
    assert png_of(dashboard) == first


def test_blitted_image_equals_a_full_redraw(dashboard):
    dashboard.controls["d_k"].value = 8
    dashboard.controls["setting"].value = "unscaled_init"
    assert blit_mismatch(dashboard, dashboard._renderer.dynamic) == 0  # pixel for pixel


def test_dashboard_rejects_what_was_not_run(experiment):
    with no_new_figures():
        with pytest.raises(ValueError, match="d_k must be one of"):
            TrainingDashboard(experiment, d_k=512)
        with pytest.raises(ValueError, match="setting must be one of"):
            TrainingDashboard(experiment, setting="unscaled_reparam", d_k=8)


# --- the static figures ------------------------------------------------------------------------


def test_static_figures(experiment):
    with no_new_figures():
        task = training.RetrievalTask()
        data = training.make_retrieval_data((0,), 1, task)
        keys, query = data.keys[0, 0, 0], data.queries[0, 0, 0]
        values, target = data.values[0, 0, 0], int(data.target[0, 0, 0])
        figures = [
            plotting.plot_retrieval_task(keys, query, values, target),
            plotting.plot_loss_grid(experiment, task.threshold, task.baseline),
            plotting.plot_seed_curves([experiment["scaled", 8], experiment["unscaled", 8]],
                                      task.threshold, task.baseline),
            plotting.plot_row_saturation(experiment),
            plotting.plot_loss_bands(
                [("a", experiment["scaled", 8]), ("b", experiment["scaled", 32])],
                task.threshold, task.baseline, title="t"),
            plotting.plot_run_overview(plotting.run_overview(experiment, "scaled", 8),
                                       experiment.settings, task.n_keys),
            plotting.plot_twin_gaps(experiment, 8, runs.CHAOS_GAP),
            plotting.plot_seed_outcomes(experiment, task.threshold),
        ]  # fmt: skip
        counts = [len(f.axes) for f in figures]
        assert counts[1] == len(experiment.settings) * len(D_KS)  # one panel per (setting, d_k)
        assert counts[2] == 2 and counts[3] == 2 * len(D_KS) and counts[4] == 1
        assert counts[5] == 3  # loss, heatmap, colorbar
        assert counts[6] == len(experiment.settings) and counts[7] == len(D_KS)
        assert "chaotic" in figures[6].axes[0].get_title()
        grid = figures[1].axes
        assert grid[0].get_yscale() == "log" and grid[0].get_title() == "d_k = 8"
        # The second curve of one setting gets its own colour.
        bands = figures[4].axes[0].get_lines()
        assert bands[-1].get_color() != bands[-2].get_color()
        for f in figures:
            assert isinstance(f, Figure)
            plt.close(f)


def test_static_figures_reject_bad_input(experiment):
    with no_new_figures():
        k, q, v = torch.zeros(8, 8), torch.zeros(8), torch.zeros(8, 8)
        with pytest.raises(ValueError, match="target must be in"):
            plotting.plot_retrieval_task(k, q, v, 8)
        with pytest.raises(ValueError, match="expected keys"):
            plotting.plot_retrieval_task(k, torch.zeros(5), v, 0)
        with pytest.raises(ValueError, match="at least one run"):
            plotting.plot_seed_curves([], 0.1, 1.0)
        with pytest.raises(ValueError, match="at least one"):
            plotting.plot_loss_bands([], 0.1, 1.0)


# --- the exercise checkers ---------------------------------------------------------------------


def stalling_solution(summary, d_k):
    return [r["setting"] for r in summary
            if r["d_k"] == d_k and 2 * (r["n_never"] + r["n_relapsed"]) >= r["n_seeds"]]  # fmt: skip


def _in_d_k(summary, d_k, keep):
    return [r["setting"] for r in summary if r["d_k"] == d_k and keep(r)]


STALL_SLIPS = {
    "never_only": lambda s, d: _in_d_k(s, d, lambda r: r["n_never"] >= r["n_seeds"] / 2),
    "median_none": lambda s, d: _in_d_k(s, d, lambda r: r["median_steps"] is None),
    "strict": lambda s, d: _in_d_k(s, d, lambda r: r["stall_fraction"] > 0.5),
    "any_stall": lambda s, d: _in_d_k(s, d, lambda r: r["stall_fraction"] > 0),
    "sixteen_seeds": lambda s, d: _in_d_k(s, d, lambda r: r["n_never"] + r["n_relapsed"] >= 8),
    "inverted": lambda s, d: _in_d_k(s, d, lambda r: r["stall_fraction"] < 0.5),
    "all_d_k": lambda s, d: [r["setting"] for r in s if r["stall_fraction"] >= 0.5],
    "bad_return": lambda s, d: "unscaled",
    "error": lambda s, d: s[99],
    "unknown": lambda s, d: ["scaled"],
}


def test_check_stalling_settings(capsys):
    def stub(summary, d_k):
        raise NotImplementedError

    result = check_stalling_settings(stub)
    assert not result and result.mistake == "not_written"
    assert "Not written yet" in capsys.readouterr().out
    assert check_stalling_settings(stalling_solution, verbose=False)
    as_set = check_stalling_settings(lambda s, d: set(stalling_solution(s, d)), verbose=False)
    assert as_set.passed
    for code, fn in STALL_SLIPS.items():
        result = check_stalling_settings(fn, verbose=False)
        assert not result and result.mistake == code, (code, result.message)
        assert result.message.startswith(("Not yet", "Almost"))


def test_stalling_solution_on_a_real_table(experiment):
    rows = experiment.summary()
    for d_k in experiment.d_ks:
        want = {r["setting"] for r in rows if r["d_k"] == d_k and r["stall_fraction"] >= 0.5}
        assert set(stalling_solution(rows, d_k)) == want


def _in_place(w_q):
    w_q /= math.sqrt(w_q.shape[0])
    return w_q


INIT_SLIPS = {
    "in_place": _in_place,
    "d_model": lambda w: w / math.sqrt(w.shape[1]),
    "d_k_not_sqrt": lambda w: w / w.shape[0],
    "inverted": lambda w: w * math.sqrt(w.shape[0]),
    "unchanged": lambda w: w.clone(),
    "transposed": lambda w: w.T / math.sqrt(w.shape[0]),
    "bad_return": lambda w: 1 / math.sqrt(w.shape[0]),
    "error": lambda w: w.shape[2],
    "unknown": lambda w: w / 3.0,
}


def test_check_init_like_scaled(capsys):
    def stub(w_q):
        raise NotImplementedError

    result = check_init_like_scaled(stub)
    assert not result and result.mistake == "not_written"
    assert "Not written yet" in capsys.readouterr().out
    passed = check_init_like_scaled(lambda w: w / math.sqrt(w.shape[0]), verbose=False)
    assert passed and "Passed" in passed.message
    for code, fn in INIT_SLIPS.items():
        result = check_init_like_scaled(fn, verbose=False)
        assert not result and result.mistake == code, (code, result.message)


def test_init_like_scaled_gives_the_scaled_scores():
    """What the checker's solution claims, checked against attn_lib's attention."""
    from attn_lib import scaled_dot_product_attention

    g = torch.Generator().manual_seed(3)
    d_model, d_k = 8, 128
    w_q, w_k = (torch.randn(d_k, d_model, generator=g) / math.sqrt(d_model) for _ in range(2))
    x = torch.randn(5, d_model, generator=g)
    v = torch.randn(5, 3, generator=g)
    q, k = x @ w_q.T, x @ w_k.T
    scaled = scaled_dot_product_attention(q, k, v)  # default scale 1/√d_k
    unscaled = scaled_dot_product_attention(x @ (w_q / math.sqrt(d_k)).T, k, v, scale=1.0)
    torch.testing.assert_close(unscaled, scaled)
