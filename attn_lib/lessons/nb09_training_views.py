"""Notebook 09's figures and dashboard: the task, the table, chaos, loss curves, saturated rows.

Used by notebook 09 (Does scaling matter in training?): §2 (the task), §4 (the table and the
twins), §5 (the loss curves), §6 (saturated rows), §7 (the table with lr), §9 (every run, one
dot) and §11 (the dashboard). The runs come from ``nb09_training``.
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
    draw_attention_heatmap,
    freeze_layout,
    new_figure,
    update_attention_heatmap,
)
from .nb09_training import ScalingExperiment

# One style per setting in every figure; "scaled" and "unscaled" have notebook 03's colours
# for "÷ √d_k" and "none" (Okabe-Ito palette).
TRAINING_STYLES = {
    setting: {"label": label, "color": color, "linestyle": linestyle}
    for setting, label, color, linestyle in (
        ("scaled", "scaled (÷√d_k)", "#0072B2", "-"),
        ("unscaled", "unscaled", "#D55E00", "--"),
        ("unscaled_init", "unscaled, W_Q init ÷√d_k", "#CC79A7", "-."),
        ("unscaled_reparam", "unscaled, W_Q init and step ÷√d_k", "#009E73", ":"),
    )
}
SETTING_LABELS = {s: style["label"] for s, style in TRAINING_STYLES.items()}
VECTOR_CMAP = "RdBu_r"  # signed entries (never the weights' colormap)
_LOSS_YLIM = (5e-4, 3.0)  # every smoothed-loss quantile of notebook 09 lies in this range
_ROW_GRAD_FLOOR = 1e-12  # row gradients below this (down to exactly 0) are drawn on it


# ------------------------------------------------------------------------------ figures


def summary_table(rows: Sequence[dict[str, object]], *, show_lr: bool = False) -> str:
    """``robust_summary()`` rows as a fixed-width table; counts out of the runs not chaotic."""
    width = max(len(SETTING_LABELS[str(r["setting"])]) for r in rows)
    lr_head = f"{'lr':>7}" if show_lr else ""
    lines = [(
        f"{'d_k':>4}  {'setting':<{width}}{lr_head}  {'reached':>7}  {'median steps':>12}  "
        f"{'never':>5}  {'relapsed':>8}  {'stalled':>7}  {'final loss':>10}  {'chaotic':>7}"
    )]  # fmt: skip
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


def _plain_log_y(ax: Axes) -> None:
    """A log y axis labelled 0.001, 0.01, … (no mathtext, no minor ticks: faster to draw)."""
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


@_closes_figures_on_error
def plot_retrieval_task(keys, query, values, target: int, *, figsize=(11.0, 4.6)) -> Figure:
    """One task: keys (L, d_model), the query (d_model,), their dot products, values (L, d_v)
    with the target row outlined."""
    k, q, v = _to_numpy(keys), _to_numpy(query), _to_numpy(values)
    L = k.shape[0]
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
                                      edgecolor="black", linewidth=2.5))  # fmt: skip
    colors = ["0.25" if i == target else "0.7" for i in range(L)]
    axd["dots"].barh(range(L), k @ q, color=colors, height=0.6)
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
def plot_twin_gaps(experiment: ScalingExperiment, d_k: int, chaos_gap: float, *,
                   figsize=(10.0, 3.3)) -> Figure:  # fmt: skip
    """|smoothed loss − twin's| over steps, one panel per setting at one d_k, one line per seed."""
    settings = experiment.settings
    fig, axes = plt.subplots(1, len(settings), figsize=figsize, layout="constrained",
                             sharey=True, squeeze=False)  # fmt: skip
    for ax, setting in zip(axes[0], settings, strict=True):
        run, style = experiment[setting, d_k], TRAINING_STYLES[setting]
        gap = run.twin_gaps().clamp_min(1e-18).numpy()  # exactly equal is drawn at 1e-18
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
def plot_loss_grid(experiment: ScalingExperiment, threshold: float, baseline: float, *,
                   window: int = 10, panel_size=(2.9, 2.1)) -> Figure:  # fmt: skip
    """Median smoothed loss and its IQR band, one panel per (setting, d_k), "stalled k/S"."""
    rows, cols = len(experiment.settings), len(experiment.d_ks)
    fig, axes = plt.subplots(
        rows, cols, figsize=(panel_size[0] * cols + 0.6, panel_size[1] * rows + 0.8),
        layout="constrained", sharex=True, sharey=True, squeeze=False,
    )  # fmt: skip
    for i, setting in enumerate(experiment.settings):
        for j, d_k in enumerate(experiment.d_ks):
            ax, run = axes[i][j], experiment[setting, d_k]
            _loss_axis(ax, threshold, baseline, labels=(i == 0 and j == 0))
            style, band = TRAINING_STYLES[setting], run.band("loss").numpy()  # (3, steps)
            t = np.arange(band.shape[1])
            ax.fill_between(t, band[0], band[2], color=style["color"], alpha=0.2, linewidth=0)
            ax.plot(t, band[1], color=style["color"], linestyle=style["linestyle"],
                    linewidth=2.0, label=style["label"])  # fmt: skip
            n = int((run.loss[-window:].mean(dim=0) > threshold).sum())
            ax.text(0.97, 0.04, f"stalled {n}/{run.n_seeds}", transform=ax.transAxes,
                    ha="right", va="bottom", fontsize=9,
                    color="#B00000" if n else "black")  # fmt: skip
            if i == 0:
                ax.set_title(f"d_k = {d_k}")
            if i == rows - 1:
                ax.set_xlabel("optimizer step")
            if j == 0:
                ax.set_ylabel(f"{SETTING_LABELS[setting]}\nloss (log scale)", fontsize=9)
    fig.suptitle("Training loss over seeds: median (line) and interquartile band, "
                 f"trailing mean over {window} steps")  # fmt: skip
    return fig


@_closes_figures_on_error
def plot_row_saturation(experiment: ScalingExperiment, *, panel_size=(2.9, 2.3)) -> Figure:
    """Per d_k: the share of saturated rows (dotted: on a wrong key) and the gradient reaching
    a row's scores, medians over seeds of the smoothed records."""
    cols = len(experiment.d_ks)
    figsize = (panel_size[0] * cols + 0.6, 2 * panel_size[1] + 1.1)
    fig, axes = plt.subplots(2, cols, figsize=figsize, layout="constrained", sharex=True,
                             sharey="row", squeeze=False)  # fmt: skip
    for j, d_k in enumerate(experiment.d_ks):
        ax_s, ax_g = axes[0][j], axes[1][j]
        for setting in experiment.settings:
            run, style = experiment[setting, d_k], TRAINING_STYLES[setting]
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
def plot_seed_outcomes(experiment: ScalingExperiment, threshold: float, *,
                       figsize=(10.0, 3.4)) -> Figure:  # fmt: skip
    """Every run's final loss, per setting and d_k: one dot per seed, chaotic runs hollow."""
    settings, d_ks = experiment.settings, experiment.d_ks
    fig, axes = plt.subplots(1, len(d_ks), figsize=figsize, layout="constrained", sharey=True,
                             squeeze=False)  # fmt: skip
    offsets = np.linspace(-0.25, 0.25, experiment[settings[0], d_ks[0]].n_seeds)
    for ax, d_k in zip(axes[0], d_ks, strict=True):
        for i, setting in enumerate(settings):
            run, color = experiment[setting, d_k], TRAINING_STYLES[setting]["color"]
            final = run.final_loss().clamp_min(1e-4).numpy()
            chaotic = run.chaotic().numpy()
            x = i + offsets
            ax.scatter(x[~chaotic], final[~chaotic], s=14, color=color)
            ax.scatter(x[chaotic], final[chaotic], s=14, facecolors="none", edgecolors=color)
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


# ---------------------------------------------------------------------------- dashboard


@dataclass(frozen=True)
class RunOverview:
    """What the dashboard shows for one (setting, d_k): every setting's median smoothed loss
    (``medians``, {setting: (steps,)}), the chosen one's quartiles (``loss_band``, (3, steps)),
    and the (L, L) ``weights`` a typical run (``seed``, "stalled" or "learned") learned."""

    setting: str
    d_k: int
    steps: int
    loss_band: torch.Tensor
    medians: dict[str, torch.Tensor]
    seed: int
    seed_outcome: str
    weights: torch.Tensor
    title: str
    threshold: float
    baseline: float


def run_overview(experiment: ScalingExperiment, setting: str, d_k: int) -> RunOverview:
    """Read one (setting, d_k) of an experiment for the dashboard (trains nothing)."""
    run = experiment[setting, d_k]
    index, row = run.typical_seed(), run.summary()
    steps = "never" if row["median_steps"] is None else f"{row['median_steps']} steps"
    return RunOverview(
        setting=setting,
        d_k=d_k,
        steps=run.steps,
        loss_band=run.band("loss"),
        medians={s: experiment[s, d_k].band("loss", (0.5,))[0] for s in experiment.settings},
        seed=run.seeds[index],
        seed_outcome="stalled" if float(run.final_loss()[index]) > run.task.threshold else "learned",
        weights=run.eval_weights[index].clone(),
        title=f"{SETTING_LABELS[setting]}, d_k = {d_k}: {row['n_stalled']}/{run.n_seeds} runs "
        f"stalled; median time to the threshold: {steps}",
        threshold=run.task.threshold,
        baseline=run.task.baseline,
    )


class RunOverviewView:
    """Every setting's median loss at one d_k (the chosen one bold, with its band) beside the
    weights a typical run learned; ``update`` redraws it in place."""

    def __init__(self, fig: Figure, settings: Sequence[str], steps: int, n_keys: int,
                 threshold: float, baseline: float) -> None:  # fmt: skip
        self.fig = fig
        ax_loss, ax_w = fig.subplots(1, 2, width_ratios=[1.25, 1.0])
        _loss_axis(ax_loss, threshold, baseline, labels=False)  # named in the legend instead
        # Reference lines are redrawn over the curves (so a blitted update equals a full
        # redraw), and the band lies above the grid.
        self.reference_lines = list(ax_loss.lines)
        for line, name in zip(self.reference_lines, ("uniform weights", "threshold"), strict=True):
            line.set(zorder=2.5, label=name)
        ax_loss.set_xlim(0, steps - 1)
        ax_loss.set_xlabel("optimizer step")
        ax_loss.set_ylabel("loss (log scale)")
        self.t = np.arange(steps)
        self.band = PolyCollection([np.zeros((2 * steps, 2))], alpha=0.2, linewidths=0,
                                   zorder=1.6)  # fmt: skip
        ax_loss.add_collection(self.band)
        self.lines: dict[str, Line2D] = {}
        for s in settings:
            style = TRAINING_STYLES[s]
            (self.lines[s],) = ax_loss.plot(self.t, np.full(steps, _LOSS_YLIM[0]),
                                            color=style["color"], linestyle=style["linestyle"],
                                            label=style["label"])  # fmt: skip
        # Below the panels: no legend or label covers a curve.
        self.legend = fig.legend(handles=[*self.lines.values(), *self.reference_lines],
                                 loc="outside lower center", ncols=5, frameon=False)  # fmt: skip
        self.loss_title = ax_loss.set_title("")
        self.ax_loss = ax_loss
        # No numbers in the cells: trained weights are 0 or 1 almost everywhere.
        self.heatmap = draw_attention_heatmap(
            ax_w, np.zeros((n_keys, n_keys)), None, title="", mask_legend=False,
            key_labels=[str(i) for i in range(n_keys)], annotate=False,
        )  # fmt: skip
        ax_w.set_ylabel("query i (a noisy copy of key i)")
        ax_w.set_xlabel("key j (right answer: j = i, the diagonal)")
        self.suptitle = fig.suptitle("")

    @property
    def dynamic_artists(self) -> list[Artist]:
        """What ``update`` changes, in drawing order, and what must stay on top of it."""
        return [
            self.band, *self.lines.values(), *self.reference_lines,
            *self.ax_loss.spines.values(), self.loss_title,
            self.heatmap.image, *self.heatmap.ax.spines.values(), self.heatmap.ax.title,
            self.suptitle,
        ]  # fmt: skip

    def update(self, overview: RunOverview) -> None:
        band = overview.loss_band.numpy()  # (3, steps)
        lower, upper = np.clip(band[0], *_LOSS_YLIM), np.clip(band[2], *_LOSS_YLIM)
        verts = np.concatenate([np.stack([self.t, lower], 1), np.stack([self.t, upper], 1)[::-1]])
        self.band.set_verts([verts])
        self.band.set_facecolor(TRAINING_STYLES[overview.setting]["color"])
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
                      figsize=(11.0, 4.4)) -> Figure:  # fmt: skip
    """The dashboard's figure for one overview, as a static pyplot figure."""
    fig = plt.figure(figsize=figsize, layout="constrained")
    view = RunOverviewView(fig, settings, overview.steps, n_keys, overview.threshold,
                           overview.baseline)  # fmt: skip
    view.update(overview)
    return fig


class TrainingDashboard(Dashboard):
    """Notebook 09's runs, browsed: ``d_k`` and ``setting`` → :class:`RunOverviewView`.

    Every (setting, d_k) overview is computed when the dashboard is built (no training in a
    callback), and each selection's PNG is kept once drawn.
    """

    plain_text = (
        "Dashboard: d_k and scaling setting → the loss curves (median and interquartile band "
        "over seeds) and the weights a typical run learned, from the runs trained above. It "
        "needs a running Jupyter kernel; the static figure above shows its default setting."
    )

    def __init__(self, experiment: ScalingExperiment, setting: str = "unscaled", d_k: int = 512,
                 *, dpi: float = 72) -> None:  # fmt: skip
        self.experiment = experiment
        self.overviews = {(s, d): run_overview(experiment, s, d)
                          for s in experiment.settings for d in experiment.d_ks}  # fmt: skip
        self.overview = self.overviews[setting, d_k]
        controls = {
            "d_k": _toggle_buttons([(str(d), d) for d in experiment.d_ks], d_k, "d_k", "52px"),
            "setting": _toggle_buttons(
                [(SETTING_LABELS[s], s) for s in experiment.settings], setting, "setting", "190px"
            ),
        }
        figure = new_figure(figsize=(11.0, 4.4), dpi=dpi)
        self.view = RunOverviewView(figure, experiment.settings, self.overview.steps,
                                    self.overview.weights.shape[-1], self.overview.threshold,
                                    self.overview.baseline)  # fmt: skip
        self.view.update(self.overview)
        freeze_layout(figure)  # axis ranges and tick labels never change
        self._renderer = BlitRenderer(figure, self.view.dynamic_artists)
        self._pngs: dict[tuple[str, int], bytes] = {}
        super().__init__(controls, figure)
        self.update()

    def render(self, d_k: int, setting: str) -> None:
        self.overview = self.overviews[setting, d_k]
        self.view.update(self.overview)

    def to_png(self) -> bytes:
        """Blit the changing artists; a selection seen before reuses its PNG."""
        key = (self.overview.setting, self.overview.d_k)
        if key not in self._pngs:
            self._pngs[key] = self._renderer.render()
        return self._pngs[key]
