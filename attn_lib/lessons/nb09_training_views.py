"""Notebook 09's figures and dashboard: loss curves over seeds, chaos, saturated rows, outcomes.

Used by notebook 09 (Does scaling matter in training?), every section with a figure, and its
dashboard (section "The dashboard"). The runs come from ``nb09_training``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

from ._dashboard import Dashboard, _toggle_buttons
from ._figures import (
    BlitRenderer,
    _closes_figures_on_error,
    _to_numpy,
    _weights_colorbar,
    draw_attention_heatmap,
    freeze_layout,
    new_figure,
    update_attention_heatmap,
)
from .nb09_training_runs import (
    ScalingExperiment,
    TrainingRun,
)

# One style per training setting, the same in every figure of notebook 09; the colours of
# "scaled" and "unscaled" are notebook 03's "÷ √d_k" and "none" (Okabe-Ito palette).
TRAINING_STYLES: dict[str, dict[str, str]] = {
    "scaled": {"label": "scaled (÷√d_k)", "color": "#0072B2", "linestyle": "-"},
    "unscaled": {"label": "unscaled", "color": "#D55E00", "linestyle": "--"},
    "unscaled_init": {
        "label": "unscaled, W_Q init ÷√d_k", "color": "#CC79A7", "linestyle": "-.",
    },
    "unscaled_reparam": {
        "label": "unscaled, W_Q init and step ÷√d_k", "color": "#009E73", "linestyle": ":",
    },
}  # fmt: skip
# Diverging colormap for vectors with signed entries (never ATTENTION_CMAP: that one is for
# weights in [0, 1]).
VECTOR_CMAP = "RdBu_r"
# Further curves of a setting already shown (e.g. another learning rate): Okabe-Ito too.
_EXTRA_COLORS = ("#E69F00", "#009E73", "#56B4E9")
_LOSS_YLIM = (5e-4, 3.0)  # every smoothed-loss quantile of notebook 09 lies in this range
_TARGET_EDGE = "black"


# ---------------------------------------------------------------------- tables, overviews

SETTING_LABELS = {
    "scaled": "scaled (÷√d_k)",
    "unscaled": "unscaled",
    "unscaled_init": "unscaled, W_Q init ÷√d_k",
    "unscaled_reparam": "unscaled, W_Q init and step ÷√d_k",
}


@dataclass(frozen=True)
class RunOverview:
    """What notebook 09's dashboard shows for one (setting, d_k) of a ScalingExperiment.

    Attributes:
        setting, d_k: the run shown.
        steps: number of steps of every run.
        loss_band: (3, steps), float32, the lower quartile, median and upper quartile over
            seeds of the smoothed loss (trailing mean over ``window`` steps).
        medians: {setting: (steps,) float32} the median smoothed loss of every setting of
            the experiment at this d_k (the one shown included), for comparison.
        seed: the seed whose learned weights are shown: a run with the outcome of most
            runs (``TrainingRun.typical_seed``). seed_outcome: "stalled" or "learned".
        weights: (L, L), float64, that seed's weights on ``retrieval_eval_example`` after
            training (rows: queries, query i a noisy copy of key i; columns: keys).
        n_seeds, n_reached, n_never, n_relapsed, n_stalled: counts over seeds (reached:
            the smoothed loss got to the threshold at some step; never: it did not;
            relapsed: reached, but above the threshold again at the end; stalled = never +
            relapsed).
        median_steps: the (lower) median number of updates to reach the threshold, a
            "never" counted as later than any step; None when that median is a "never".
        threshold, baseline: the task's loss threshold and uniform-weights loss.

    Source: notebook 09 of this series; article section 4.3.
    """

    setting: str
    d_k: int
    steps: int
    loss_band: torch.Tensor
    medians: dict[str, torch.Tensor]
    seed: int
    seed_outcome: str
    weights: torch.Tensor
    n_seeds: int
    n_reached: int
    n_never: int
    n_relapsed: int
    n_stalled: int
    median_steps: int | None
    threshold: float
    baseline: float

    @property
    def title(self) -> str:
        """One line: the run, its stalled count and its median steps to the threshold."""
        steps = "never" if self.median_steps is None else f"{self.median_steps} steps"
        return (
            f"{SETTING_LABELS[self.setting]}, d_k = {self.d_k}: {self.n_stalled}/{self.n_seeds} "
            f"runs stalled; median time to the threshold: {steps}"
        )


def run_overview(experiment: ScalingExperiment, setting: str, d_k: int) -> RunOverview:
    """Summarise one (setting, d_k) of an experiment for a figure: bands, counts, a heatmap.

    Pure: reads the stored runs, trains nothing.

    Args:
        experiment: from ``run_scaling_experiment``.
        setting: one of ``experiment.settings``.
        d_k: one of ``experiment.d_ks``.

    Returns:
        RunOverview.

    Raises:
        ValueError: a setting or d_k that the experiment did not run.

    Source: notebook 09 of this series.
    """
    if setting not in experiment.settings:
        raise ValueError(
            f"setting {setting!r} was not run in this experiment; choose one of "
            f"{experiment.settings}."
        )
    if d_k not in experiment.d_ks:
        raise ValueError(
            f"d_k = {d_k!r} was not run in this experiment; choose one of {experiment.d_ks}."
        )
    run = experiment[setting, d_k]
    index = run.typical_seed()
    row = run.summary()
    medians = {s: experiment[s, d_k].band("loss", (0.5,))[0] for s in experiment.settings}
    n_stalled = row["n_never"] + row["n_relapsed"]
    return RunOverview(
        setting=setting,
        d_k=d_k,
        steps=run.steps,
        loss_band=run.band("loss"),
        medians=medians,
        seed=run.seeds[index],
        seed_outcome="stalled" if float(run.final_loss()[index]) > run.task.threshold else "learned",
        weights=run.eval_weights[index].clone(),
        n_seeds=run.n_seeds,
        n_reached=run.n_seeds - row["n_never"],
        n_never=row["n_never"],
        n_relapsed=row["n_relapsed"],
        n_stalled=n_stalled,
        median_steps=row["median_steps"],
        threshold=run.task.threshold,
        baseline=run.task.baseline,
    )


def summary_table(rows: Sequence[dict[str, object]], *, show_lr: bool = False) -> str:
    """Format ``robust_summary()`` rows as a fixed-width text table, counts as k/n.

    Columns: d_k, setting, (lr), reached (runs whose smoothed loss got to the threshold),
    median steps to the threshold ("never" when the median run never got there), never,
    relapsed, stalled (never + relapsed: not below the threshold at the end), the median
    final loss, and the chaotic runs. Every count but the last is out of the runs that
    are not chaotic; "–" where none is left.

    Args:
        rows: dicts as returned by ``TrainingRun.robust_summary`` (or the
            ``robust_summary`` of a ``ScalingExperiment`` or an ``LrSweep``).
        show_lr: add a learning-rate column.

    Returns:
        The table, one line per row under a header line.

    Raises:
        ValueError: no rows.
    """
    if not rows:
        raise ValueError("give at least one summary row.")
    width = max(len(SETTING_LABELS[str(r["setting"])]) for r in rows)
    lr_head = f"{'lr':>7}" if show_lr else ""
    header = (
        f"{'d_k':>4}  {'setting':<{width}}{lr_head}  {'reached':>7}  {'median steps':>12}  "
        f"{'never':>5}  {'relapsed':>8}  {'stalled':>7}  {'final loss':>10}  {'chaotic':>7}"
    )
    lines = [header]
    for r in rows:
        n, total = r["n_robust"], r["n_seeds"]
        lr = f"{r['lr']:>7g}" if show_lr else ""
        if n:
            med = "never" if r["median_steps"] is None else str(r["median_steps"])
            cells = (
                f"{n - r['n_never']:>4}/{n:<2}  {med:>12}  {r['n_never']:>5}  "
                f"{r['n_relapsed']:>8}  {r['n_stalled']:>4}/{n:<2}  {r['final_loss']:>10.3f}"
            )
        else:
            cells = f"{'–':>7}  {'–':>12}  {'–':>5}  {'–':>8}  {'–':>7}  {'–':>10}"
        lines.append(
            f"{r['d_k']:>4}  {SETTING_LABELS[str(r['setting'])]:<{width}}{lr}  {cells}  "
            f"{r['n_chaotic']:>4}/{total:<2}"
        )
    return "\n".join(lines)


def _training_style(setting: str) -> dict[str, str]:
    if setting not in TRAINING_STYLES:
        raise ValueError(f"setting must be one of {tuple(TRAINING_STYLES)}, got {setting!r}.")
    return TRAINING_STYLES[setting]


def _plain_log_y(ax: Axes) -> None:
    """A log y axis labelled 0.001, 0.01, 0.1, 1 (plain numbers, no minor ticks).

    Plain labels read more easily than 10⁻³ and skip mathtext, which made up half the cost
    of drawing notebook 09's grid of panels.
    """
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, numticks=10))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))
    ax.yaxis.set_minor_locator(NullLocator())


def _loss_axis(ax: Axes, threshold: float, baseline: float, *, labels: bool = True) -> None:
    """Log-y loss axis with the threshold (dashed) and the uniform-weights baseline (dotted)."""
    _plain_log_y(ax)
    ax.set_ylim(*_LOSS_YLIM)
    ax.axhline(baseline, color="0.35", linestyle=":", linewidth=1)
    ax.axhline(threshold, color="black", linestyle="--", linewidth=1)
    if labels:
        ax.text(0.98, baseline, "uniform weights", transform=ax.get_yaxis_transform(),
                fontsize=8, ha="right", va="bottom", color="0.3")  # fmt: skip
        ax.text(0.98, threshold, "threshold", transform=ax.get_yaxis_transform(),
                fontsize=8, ha="right", va="bottom", color="0.1")  # fmt: skip
    ax.grid(alpha=0.3, which="major")


def _stall_count(run: TrainingRun, threshold: float, window: int) -> int:
    return int((run.loss[-window:].mean(dim=0) > threshold).sum())


def draw_loss_band(ax: Axes, run: TrainingRun, *, label: str | None = None,
                   emphasis: bool = True) -> list[Artist]:  # fmt: skip
    """Draw one run's median smoothed loss and its interquartile band over seeds on ``ax``.

    Args:
        ax: axes (give them a log y axis, e.g. with the threshold lines of notebook 09).
        run: a TrainingRun (S seeds): its ``band("loss")`` is drawn.
        label: legend label; default the setting's label.
        emphasis: a thick median and a shaded band (True), or a thin median only.

    Returns:
        The artists drawn (the band, if any, then the median line).

    Source: notebook 09 of this series (median and IQR band: robust to the odd seed).
    """
    style = _training_style(run.setting)
    band = run.band("loss").numpy()  # (3, steps)
    t = np.arange(band.shape[1])
    artists: list[Artist] = []
    if emphasis:
        artists.append(ax.fill_between(t, band[0], band[2], color=style["color"], alpha=0.2,
                                       linewidth=0))  # fmt: skip
    (line,) = ax.plot(t, band[1], color=style["color"], linestyle=style["linestyle"],
                      linewidth=2.0 if emphasis else 1.0,
                      label=style["label"] if label is None else label)  # fmt: skip
    artists.append(line)
    return artists


@_closes_figures_on_error
def plot_retrieval_task(
    keys: torch.Tensor,
    query: torch.Tensor,
    values: torch.Tensor,
    target: int,
    *,
    figsize: tuple[float, float] = (11.0, 4.6),
) -> Figure:
    """One retrieval task as a picture: the keys, the query, their dot products, the target.

    Four panels: the L key contents (rows, entries in a diverging colormap), the query
    under them (a noisy copy of key ``target``), the dot products query · key_i as bars
    (the target's bar dark), and the L values with the target row outlined: the model
    must output that row.

    Args:
        keys: (L, d_model) key contents.
        query: (d_model,) the query.
        values: (L, d_v) the values.
        target: index of the key the query copies.
        figsize: inches.

    Returns:
        A pyplot figure (end the cell with ``plt.show()``).

    Raises:
        ValueError: shapes that do not fit together, or a target outside [0, L).

    Source: notebook 09 of this series (the task of attn_lib.lessons.nb09_training).
    """
    k, q, v = _to_numpy(keys), _to_numpy(query), _to_numpy(values)
    if k.ndim != 2 or q.shape != (k.shape[1],) or v.ndim != 2 or v.shape[0] != k.shape[0]:
        raise ValueError(
            f"expected keys (L, d_model), query (d_model,), values (L, d_v); got "
            f"{k.shape}, {q.shape}, {v.shape}."
        )
    L = k.shape[0]
    if not 0 <= target < L:
        raise ValueError(f"target must be in [0, {L}), got {target}.")
    top = float(max(np.abs(k).max(), np.abs(q).max(), np.abs(v).max()))
    fig = plt.figure(figsize=figsize, layout="constrained")
    axd = fig.subplot_mosaic(
        [["keys", "dots", "values"], ["query", "note", "values"]],
        height_ratios=[L, 1.6], width_ratios=[1.0, 0.8, 1.0],
    )  # fmt: skip
    key_labels = [f"key {i}" for i in range(L)]
    image = axd["keys"].imshow(k, cmap=VECTOR_CMAP, vmin=-top, vmax=top, aspect="auto")
    axd["keys"].set_yticks(range(L), key_labels)
    axd["keys"].set_xticks([])
    axd["keys"].set_title("key contents (one row per key)")
    axd["query"].imshow(q[None, :], cmap=VECTOR_CMAP, vmin=-top, vmax=top, aspect="auto")
    axd["query"].set_yticks([0], ["query"])
    axd["query"].set_xticks(range(k.shape[1]))
    axd["query"].set_xlabel("feature (0 … d_model − 1)")
    axd["query"].set_title(f"query: a noisy copy of key {target}", fontsize=10)
    for name, width in (("keys", k.shape[1]), ("values", v.shape[1])):
        axd[name].add_patch(Rectangle((-0.5, target - 0.5), width, 1.0, fill=False,
                                      edgecolor=_TARGET_EDGE, linewidth=2.5))  # fmt: skip
    dots = k @ q
    colors = ["0.25" if i == target else "0.7" for i in range(L)]
    axd["dots"].barh(range(L), dots, color=colors, height=0.6)
    axd["dots"].axvline(0.0, color="black", linewidth=0.8)
    axd["dots"].set_ylim(L - 0.5, -0.5)
    axd["dots"].set_yticks(range(L), key_labels)
    axd["dots"].set_xlabel("query · key content")
    axd["dots"].set_title("similarity to the query")
    axd["note"].axis("off")
    axd["note"].text(0.5, 0.5, "dark bar: the matching key\noutlined row: the target",
                     ha="center", va="center", fontsize=9)  # fmt: skip
    axd["values"].imshow(v, cmap=VECTOR_CMAP, vmin=-top, vmax=top, aspect="auto")
    axd["values"].set_yticks(range(L), [f"value {i}" for i in range(L)])
    axd["values"].set_xticks(range(v.shape[1]))
    axd["values"].set_xlabel("entry (0 … d_v − 1)")
    axd["values"].set_title(f"values: the target is value {target}")
    cbar = fig.colorbar(image, ax=[axd["values"]], fraction=0.05, pad=0.02)
    cbar.set_label("entry (signed)")
    fig.suptitle("One retrieval task: find the key the query copies, return its value")
    return fig


@_closes_figures_on_error
def plot_loss_grid(
    experiment: ScalingExperiment,
    threshold: float,
    baseline: float,
    *,
    window: int = 10,
    panel_size: tuple[float, float] = (2.9, 2.1),
) -> Figure:
    """Median smoothed loss and its IQR band, one small panel per (setting, d_k).

    Rows are the settings, columns the values of d_k; every panel has the same log y
    axis, the threshold (dashed) and the uniform-weights loss (dotted), and says in its
    corner how many runs ended above the threshold ("stalled k/S").

    Args:
        experiment: a ScalingExperiment.
        threshold, baseline: the task's threshold and uniform-weights loss.
        window: steps in the trailing mean used for "stalled" (the task's window).
        panel_size: inches per panel.

    Returns:
        A pyplot figure.

    Source: notebook 09 of this series.
    """
    rows, cols = len(experiment.settings), len(experiment.d_ks)
    fig, axes = plt.subplots(
        rows, cols, figsize=(panel_size[0] * cols + 0.6, panel_size[1] * rows + 0.8),
        layout="constrained", sharex=True, sharey=True, squeeze=False,
    )  # fmt: skip
    for i, setting in enumerate(experiment.settings):
        for j, d_k in enumerate(experiment.d_ks):
            ax, run = axes[i][j], experiment[setting, d_k]
            _loss_axis(ax, threshold, baseline, labels=(i == 0 and j == 0))
            draw_loss_band(ax, run)
            n = _stall_count(run, threshold, window)
            ax.text(0.97, 0.04, f"stalled {n}/{run.n_seeds}", transform=ax.transAxes,
                    ha="right", va="bottom", fontsize=9,
                    color="#B00000" if n else "black")  # fmt: skip
            if i == 0:
                ax.set_title(f"d_k = {d_k}")
            if i == rows - 1:
                ax.set_xlabel("optimizer step")
            if j == 0:
                ax.set_ylabel(f"{_training_style(setting)['label']}\nloss (log scale)",
                              fontsize=9)  # fmt: skip
    fig.suptitle("Training loss over seeds: median (line) and interquartile band, "
                 f"trailing mean over {window} steps")  # fmt: skip
    return fig


@_closes_figures_on_error
def plot_seed_curves(
    runs: Sequence[TrainingRun],
    threshold: float,
    baseline: float,
    *,
    window: int = 10,
    panel_size: tuple[float, float] = (4.6, 3.3),
) -> Figure:
    """Every seed's smoothed loss curve, one panel per run, stalled seeds in red.

    Args:
        runs: TrainingRuns to show side by side.
        threshold, baseline: the task's threshold and uniform-weights loss.
        window: steps of the trailing mean (the task's window).
        panel_size: inches per panel.

    Returns:
        A pyplot figure.

    Raises:
        ValueError: no runs.

    Source: notebook 09 of this series (what "oscillates or stalls" looks like, seed by seed).
    """
    if not runs:
        raise ValueError("give at least one run.")
    n = len(runs)
    fig, axes = plt.subplots(1, n, figsize=(panel_size[0] * n + 0.4, panel_size[1]),
                             layout="constrained", sharey=True, squeeze=False)  # fmt: skip
    for j, (ax, run) in enumerate(zip(axes[0], runs, strict=True)):
        _loss_axis(ax, threshold, baseline, labels=(j == 0))
        curves = run.smoothed_loss().numpy()  # (steps, S)
        stalled = (run.loss[-window:].mean(dim=0) > threshold).numpy()
        t = np.arange(curves.shape[0])
        for s in range(curves.shape[1]):
            ax.plot(t, curves[:, s], color="#B00000" if stalled[s] else "0.55",
                    linewidth=1.1 if stalled[s] else 0.8, alpha=0.9)  # fmt: skip
        ax.set_title(f"{_training_style(run.setting)['label']}, d_k = {run.d_k}: "
                     f"{int(stalled.sum())}/{run.n_seeds} stalled", fontsize=10)  # fmt: skip
        ax.set_xlabel("optimizer step")
        if j == 0:
            ax.set_ylabel("loss, one line per seed (log scale)")
    fig.legend(
        handles=[Line2D([], [], color="0.55", label="ends below the threshold"),
                 Line2D([], [], color="#B00000", label="ends above it: stalled")],
        loc="outside lower center", ncols=2, frameon=False, fontsize=9,
    )  # fmt: skip
    return fig


_ROW_GRAD_FLOOR = 1e-12  # row gradients below this (down to exactly 0) are drawn on it


@_closes_figures_on_error
def plot_row_saturation(
    experiment: ScalingExperiment, *, panel_size: tuple[float, float] = (2.9, 2.3)
) -> Figure:
    """Saturated rows and the gradient that reaches a row's scores, over training, per d_k.

    Two rows of panels, one column per d_k, every setting in its own style, medians over
    seeds of the trailing mean over the task's window: the share of the batch's weight
    rows that are saturated (solid; dotted: saturated on a wrong key), and the median
    gradient that reaches a row's scores (log scale; below 1e-12 drawn at 1e-12).

    Args:
        experiment: a ScalingExperiment.
        panel_size: inches per panel.

    Returns:
        A pyplot figure.
    """
    cols = len(experiment.d_ks)
    figsize = (panel_size[0] * cols + 0.6, 2 * panel_size[1] + 1.1)
    fig, axes = plt.subplots(2, cols, figsize=figsize, layout="constrained", sharex=True,
                             sharey="row", squeeze=False)  # fmt: skip
    for j, d_k in enumerate(experiment.d_ks):
        ax_s, ax_g = axes[0][j], axes[1][j]
        for setting in experiment.settings:
            run, style = experiment[setting, d_k], _training_style(setting)
            t = np.arange(run.steps)
            kw = {"color": style["color"], "linewidth": 1.6}
            ax_s.plot(t, run.band("saturated", (0.5,))[0].numpy(), label=style["label"], **kw)
            ax_s.plot(t, run.band("saturated_wrong", (0.5,))[0].numpy(), linestyle=":", **kw)
            grad = run.band("row_grad", (0.5,))[0].clamp_min(_ROW_GRAD_FLOOR)
            ax_g.plot(t, grad.numpy(), linestyle=style["linestyle"], **kw)
        ax_s.set_ylim(-0.03, 1.03)
        ax_s.set_title(f"d_k = {d_k}")
        _plain_log_y(ax_g)
        ax_g.set_ylim(_ROW_GRAD_FLOOR / 3, 10.0)
        ax_g.set_xlabel("optimizer step")
        for ax in (ax_s, ax_g):
            ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("share of rows saturated\n(dotted: on a wrong key)")
    axes[1][0].set_ylabel("gradient reaching a row's\nscores (median, log)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=len(labels), frameon=False,
               fontsize=9)  # fmt: skip
    fig.suptitle("Rows driven to one-hot, and the gradient they pass on "
                 "(medians over seeds)")  # fmt: skip
    return fig


@_closes_figures_on_error
def plot_twin_gaps(
    experiment: ScalingExperiment, d_k: int, chaos_gap: float, *,
    figsize: tuple[float, float] = (10.0, 3.3),
) -> Figure:
    """How far each run drifts from its twin (W_Q moved by 1e-9 at the start), per setting.

    One panel per setting at one d_k, one line per seed: |smoothed loss − twin's| over
    steps (log scale), the chaos threshold dashed; a run that crosses it is chaotic.

    Args:
        experiment: a ScalingExperiment.
        d_k: one of its d_k.
        chaos_gap: the threshold drawn (``nb09_training_runs.CHAOS_GAP``).
        figsize: inches.

    Returns:
        A pyplot figure.
    """
    settings = experiment.settings
    fig, axes = plt.subplots(1, len(settings), figsize=figsize, layout="constrained",
                             sharey=True, squeeze=False)  # fmt: skip
    for ax, setting in zip(axes[0], settings, strict=True):
        run, style = experiment[setting, d_k], _training_style(setting)
        gap = run.twin_gaps().clamp_min(1e-18).numpy()  # (steps, S); exactly equal is drawn at 1e-18
        t = np.arange(run.steps)
        for s in range(run.n_seeds):
            ax.plot(t, gap[:, s], color=style["color"], linewidth=0.9, alpha=0.7)
        ax.axhline(chaos_gap, color="black", linestyle="--", linewidth=1)
        ax.set_yscale("log")
        ax.set_ylim(1e-18, 10.0)
        ax.yaxis.set_major_locator(LogLocator(numticks=8))
        ax.yaxis.set_minor_locator(NullLocator())
        ax.set_title(f"{style['label']}: {run.n_chaotic}/{run.n_seeds} chaotic", fontsize=10)
        ax.set_xlabel("optimizer step")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("|loss − twin's loss| (log)")
    axes[0][0].text(0.02, chaos_gap * 2, "chaotic above", transform=axes[0][0].get_yaxis_transform(),
                    fontsize=8, va="bottom")  # fmt: skip
    fig.suptitle(f"d_k = {d_k}: each run against its twin, one line per seed")
    return fig


@_closes_figures_on_error
def plot_seed_outcomes(
    experiment: ScalingExperiment, threshold: float, *,
    figsize: tuple[float, float] = (10.0, 3.4),
) -> Figure:
    """Every run's final loss, per setting and d_k: one dot per seed, chaotic runs hollow.

    Args:
        experiment: a ScalingExperiment.
        threshold: the task's loss threshold (dashed line).
        figsize: inches.

    Returns:
        A pyplot figure.
    """
    settings, d_ks = experiment.settings, experiment.d_ks
    fig, axes = plt.subplots(1, len(d_ks), figsize=figsize, layout="constrained", sharey=True,
                             squeeze=False)  # fmt: skip
    offsets = np.linspace(-0.25, 0.25, experiment[settings[0], d_ks[0]].n_seeds)
    for ax, d_k in zip(axes[0], d_ks, strict=True):
        for i, setting in enumerate(settings):
            run, style = experiment[setting, d_k], _training_style(setting)
            final = run.final_loss().clamp_min(1e-4).numpy()
            chaotic = run.chaotic().numpy()
            x = i + offsets
            ax.scatter(x[~chaotic], final[~chaotic], s=14, color=style["color"])
            ax.scatter(x[chaotic], final[chaotic], s=14, facecolors="none",
                       edgecolors=style["color"])  # fmt: skip
        ax.axhline(threshold, color="black", linestyle="--", linewidth=1)
        ax.set_yscale("log")
        ax.set_ylim(1e-4, 3.0)
        ax.set_xticks(range(len(settings)), [s.replace("_", "\n") for s in settings],
                      fontsize=9)  # fmt: skip
        ax.set_title(f"d_k = {d_k}")
        ax.grid(alpha=0.3, axis="y")
    axes[0][0].set_ylabel("final loss (log); --- threshold")
    fig.suptitle("Where every run ends: one dot per seed (hollow = chaotic)")
    return fig


@_closes_figures_on_error
def plot_loss_bands(
    curves: Sequence[tuple[str, TrainingRun]],
    threshold: float,
    baseline: float,
    *,
    title: str = "",
    figsize: tuple[float, float] = (7.0, 3.8),
) -> Figure:
    """Several runs' median loss and IQR band on one log axis, each with its own label.

    Args:
        curves: (label, TrainingRun) pairs; the run's setting chooses colour and line
            style, so give runs of different settings, or different labels.
        threshold, baseline: the task's threshold and uniform-weights loss.
        title: axes title.
        figsize: inches.

    Returns:
        A pyplot figure.

    Raises:
        ValueError: no curves.

    Source: notebook 09 of this series.
    """
    if not curves:
        raise ValueError("give at least one (label, run) pair.")
    fig, ax = plt.subplots(figsize=figsize, layout="constrained")
    _loss_axis(ax, threshold, baseline)
    seen: dict[str, int] = {}
    for label, run in curves:
        artists = draw_loss_band(ax, run, label=label)
        count = seen.get(run.setting, 0)
        if count:  # another curve of a setting already drawn: its own colour and dots
            color = _EXTRA_COLORS[(count - 1) % len(_EXTRA_COLORS)]
            artists[-1].set_color(color)
            artists[-1].set_linestyle(":")
            if len(artists) > 1:
                artists[0].set_color(color)
        seen[run.setting] = count + 1
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("loss (log scale)")
    ax.set_title(title)
    ax.legend(loc="lower left", fontsize=9, frameon=True)
    return fig


class RunOverviewView:
    """Loss curves of every setting at one d_k (the chosen one with its IQR band) beside
    the weights a typical run learned; updatable in place.

    Args:
        fig: an empty figure (a plain Figure for a dashboard, a pyplot one for a cell).
        settings: the settings that may be shown (each gets a median line).
        steps: steps per run.
        n_keys: L (the heatmap is L × L).
        threshold, baseline: the task's threshold and uniform-weights loss.

    Source: notebook 09 of this series.
    """

    def __init__(self, fig: Figure, settings: Sequence[str], steps: int, n_keys: int,
                 threshold: float, baseline: float) -> None:  # fmt: skip
        self.fig = fig
        self.settings = tuple(settings)
        ax_loss, ax_w = fig.subplots(1, 2, width_ratios=[1.25, 1.0])
        _loss_axis(ax_loss, threshold, baseline)
        # The threshold and baseline lines and their labels are redrawn over the curves, and
        # the band lies above the grid: a blitted update then equals a full redraw.
        self.reference_lines, self.reference_texts = list(ax_loss.lines), list(ax_loss.texts)
        for line in self.reference_lines:
            line.set_zorder(2.5)
        ax_loss.set_xlim(0, steps - 1)
        ax_loss.set_xlabel("optimizer step")
        ax_loss.set_ylabel("loss (log scale)")
        self.t = np.arange(steps)
        zeros = np.full(steps, _LOSS_YLIM[0])
        self.band = PolyCollection([np.zeros((2 * steps, 2))], alpha=0.2, linewidths=0,
                                   zorder=1.6)  # fmt: skip
        ax_loss.add_collection(self.band)
        self.lines: dict[str, Line2D] = {}
        for s in self.settings:
            style = _training_style(s)
            (self.lines[s],) = ax_loss.plot(self.t, zeros, color=style["color"],
                                            linestyle=style["linestyle"],
                                            label=style["label"])  # fmt: skip
        self.legend = ax_loss.legend(loc="lower right", fontsize=8, frameon=True)
        self.loss_title = ax_loss.set_title("")
        self.ax_loss = ax_loss
        # No numbers in the cells: trained weights are 0 or 1 almost everywhere, the colours
        # say it, and 64 texts would triple the cost of an update.
        self.heatmap = draw_attention_heatmap(
            ax_w, np.zeros((n_keys, n_keys)), None, title="", mask_legend=False,
            key_labels=[str(i) for i in range(n_keys)], annotate=False,
        )  # fmt: skip
        ax_w.set_ylabel("query i (a noisy copy of key i)")
        ax_w.set_xlabel("key j (right answer: j = i, the diagonal)")
        self.suptitle = fig.suptitle("")

    @property
    def dynamic_artists(self) -> list[Artist]:
        """The artists :meth:`update` changes, in drawing order, with the ones that must stay
        on top of them (reference lines, spines, labels, legend)."""
        return [
            self.band, *self.lines.values(), *self.reference_lines,
            *self.ax_loss.spines.values(), *self.reference_texts, self.loss_title, self.legend,
            self.heatmap.image, *self.heatmap.ax.spines.values(), self.heatmap.ax.title,
            self.suptitle,
        ]  # fmt: skip

    def update(self, overview: RunOverview) -> None:
        """Show one RunOverview (from :func:`run_overview`)."""
        band = overview.loss_band.numpy()  # (3, steps)
        lower, upper = np.clip(band[0], *_LOSS_YLIM), np.clip(band[2], *_LOSS_YLIM)
        verts = np.concatenate([np.stack([self.t, lower], 1), np.stack([self.t, upper], 1)[::-1]])
        self.band.set_verts([verts])
        self.band.set_facecolor(_training_style(overview.setting)["color"])
        for s, line in self.lines.items():
            chosen = s == overview.setting
            line.set_ydata(overview.medians[s].numpy())
            line.set_linewidth(2.4 if chosen else 1.0)
            line.set_alpha(1.0 if chosen else 0.45)
        self.loss_title.set_text(f"d_k = {overview.d_k}: median loss of each setting;\n"
                                 f"band = interquartile range of the chosen one")  # fmt: skip
        update_attention_heatmap(
            self.heatmap, overview.weights,
            title=f"weights a typical run learned (seed {overview.seed}, {overview.seed_outcome})",
        )  # fmt: skip
        self.suptitle.set_text(overview.title)


@_closes_figures_on_error
def plot_run_overview(overview: RunOverview, settings: Sequence[str], n_keys: int, *,
                      figsize: tuple[float, float] = (11.0, 4.4)) -> Figure:  # fmt: skip
    """A static pyplot rendering of :class:`RunOverviewView` (notebook 09's dashboard).

    Args:
        overview: from :func:`run_overview`.
        settings: the settings drawn as median lines (those of the experiment).
        n_keys: L.
        figsize: inches.

    Returns:
        The pyplot figure (end the cell with ``plt.show()``).

    Source: notebook 09 of this series.
    """
    fig = plt.figure(figsize=figsize, layout="constrained")
    view = RunOverviewView(fig, settings, overview.steps, n_keys, overview.threshold,
                           overview.baseline)  # fmt: skip
    view.update(overview)
    return fig


@_closes_figures_on_error
def plot_learned_weights(
    panels: Sequence[tuple[torch.Tensor, str]],
    *,
    suptitle: str | None = None,
    panel_size: float = 2.9,
) -> Figure:
    """Learned weights on notebook 09's evaluation example, side by side, one 0–1 colorbar.

    Like :func:`plot_attention_gallery`, without numbers in the cells (trained weights are
    0 or 1 almost everywhere; the colours say it, as in the dashboard), and with the axes
    named for the example: query i is a noisy copy of key i, so the right answer is the
    diagonal.

    Args:
        panels: (weights (L, L), title) per panel.
        suptitle: a title over all panels.
        panel_size: width of one panel in inches.

    Returns:
        A pyplot figure.

    Raises:
        ValueError: no panels, or weights that are not 2-D.

    Source: notebook 09 of this series; STYLE.md (queries on y, keys on x, 0–1 colorbar).
    """
    if not panels:
        raise ValueError("give at least one panel.")
    n = len(panels)
    fig, axes = plt.subplots(1, n, figsize=(panel_size * n + 1.0, panel_size + 0.9),
                             layout="constrained", squeeze=False)  # fmt: skip
    drawn = []
    for j, (ax, (weights, title)) in enumerate(zip(axes[0], panels, strict=True)):
        drawn.append(draw_attention_heatmap(ax, weights, None, title=title, colorbar=False,
                                            annotate=False, mask_legend=False))  # fmt: skip
        ax.set_xlabel("key j")
        ax.set_ylabel("query i (copies key i)" if j == 0 else "")
    _weights_colorbar(fig, drawn[0].image, list(axes[0]))
    if suptitle:
        fig.suptitle(suptitle)
    return fig

class TrainingDashboard(Dashboard):
    """Notebook 09's runs, browsed: d_k and setting → loss curves and a learned heatmap.

    Controls: ``d_k`` (ToggleButtons over ``experiment.d_ks``) and ``setting``
    (ToggleButtons over ``experiment.settings``). A change looks up
    :func:`run_overview` for the pair (precomputed for every pair when
    the dashboard is built: no training happens in a callback) and redraws
    :class:`attn_lib.lessons.nb09_training_views.RunOverviewView`: the median smoothed loss of every setting at
    that d_k, the chosen one bold with its interquartile band, and the weights its median
    seed learned on the evaluation example.

    Args:
        experiment: a ScalingExperiment already trained (e.g. the notebook's).
        setting, d_k: the initial selection.
        dpi: resolution of the PNG.

    Attributes:
        experiment: the experiment shown.
        overviews: {(setting, d_k): RunOverview}, computed at construction.
        overview: the RunOverview currently shown.
        view: the RunOverviewView that draws it.

    Raises:
        ValueError: a setting or d_k that the experiment did not run.

    Source: notebook 09 of this series; article section 4.3.
    """

    plain_text = (
        "Dashboard: d_k and scaling setting → the loss curves (median and interquartile band "
        "over seeds) and the weights a typical run learned, from the runs trained above. It "
        "needs a running Jupyter kernel; the static figure above shows its default setting."
    )

    def __init__(
        self,
        experiment: ScalingExperiment,
        setting: str = "unscaled",
        d_k: int = 512,
        *,
        dpi: float = 72,
    ) -> None:
        if setting not in experiment.settings:
            raise ValueError(f"setting must be one of {experiment.settings}, got {setting!r}.")
        if d_k not in experiment.d_ks:
            raise ValueError(f"d_k must be one of {experiment.d_ks}, got {d_k!r}.")
        self.experiment = experiment
        self.overviews: dict[tuple[str, int], RunOverview] = {
            (s, d): run_overview(experiment, s, d) for s in experiment.settings
            for d in experiment.d_ks
        }  # fmt: skip
        first = self.overviews[setting, d_k]
        controls = {
            "d_k": _toggle_buttons([(str(d), d) for d in experiment.d_ks], d_k, "d_k", "52px"),
            "setting": _toggle_buttons(
                [(SETTING_LABELS[s], s) for s in experiment.settings], setting, "setting", "190px"
            ),
        }
        n_keys = first.weights.shape[-1]
        figure = new_figure(figsize=(11.0, 4.4), dpi=dpi)
        self.view = RunOverviewView(figure, experiment.settings, first.steps, n_keys,
                                    first.threshold, first.baseline)  # fmt: skip
        self.overview = first
        self.view.update(first)
        freeze_layout(figure)  # axis ranges and tick labels never change
        self._renderer = BlitRenderer(figure, self.view.dynamic_artists)
        self._pngs: dict[tuple[str, int], bytes] = {}
        super().__init__(controls, figure)
        self._wrap_controls()
        self.update()

    def render(self, d_k: int, setting: str) -> None:
        """Look up the precomputed overview of (setting, d_k) and show it."""
        self.overview = self.overviews[setting, d_k]
        self.view.update(self.overview)

    def to_png(self) -> bytes:
        """Redraw only the curves, the band, the heatmap and the titles; a selection seen
        before reuses its PNG (the figure depends on the selection only)."""
        key = (self.overview.setting, self.overview.d_k)
        if key not in self._pngs:
            self._pngs[key] = self._renderer.render()
        return self._pngs[key]
