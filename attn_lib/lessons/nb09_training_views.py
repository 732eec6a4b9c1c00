"""Notebook 09's figures and dashboard: the task, every run's loss, one run at a time.

Used by notebook 09 (Does scaling matter in training?): §2 (the task), §5 (every run's loss)
and §10 (the dashboard: every run, browsed). The runs come from ``nb09_training``.
"""

from __future__ import annotations

import textwrap
from itertools import product

import ipywidgets as widgets
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from ._dashboard import Dashboard, _toggle_buttons
from ._figures import (
    BlitRenderer,
    _closes_figures_on_error,
    _to_numpy,
    draw_attention_heatmap,
    freeze_layout,
    new_figure,
    subplots,
    update_attention_heatmap,
)
from .nb09_training import LABELS, ScalingExperiment

# One colour per setting in every figure; "scaled" and "unscaled" have notebook 03's colours
# for "÷ √d_k" and "none" (Okabe-Ito palette).
COLORS = {"scaled": "#0072B2", "unscaled": "#D55E00", "unscaled_init": "#CC79A7",
          "unscaled_reparam": "#009E73"}  # fmt: skip
VECTOR_CMAP = "RdBu_r"  # signed entries (never the weights' colormap)
_LOSS_TOP = 2.0  # the loss axes' top: a smoothed loss above it is drawn at it


# ------------------------------------------------------------------------------ figures


@_closes_figures_on_error
def plot_retrieval_task(keys, query, values, target: int, *, figsize=(8.4, 4.2)) -> Figure:
    """One task: keys (L, d_model) with the query (d_model,) below, their dot products, values
    (L, d_v) with the target row outlined."""
    k, q, v = _to_numpy(keys), _to_numpy(query), _to_numpy(values)
    L, top = k.shape[0], float(max(np.abs(k).max(), np.abs(q).max(), np.abs(v).max()))
    fig, (ax_k, ax_d, ax_v) = subplots(1, 3, figsize=figsize, width_ratios=[1.0, 0.8, 1.0],
                                       layout="constrained")  # fmt: skip
    fig.get_layout_engine().set(wspace=0.06)  # room between a panel and the next one's labels
    image = ax_k.imshow(np.vstack([k, q]), cmap=VECTOR_CMAP, vmin=-top, vmax=top, aspect="auto")
    ax_k.axhline(L - 0.5, color="black", linewidth=3)
    ax_k.set_yticks(range(L + 1), [f"key {i}" for i in range(L)] + ["query"])
    ax_k.set_title(f"key contents; the query\ncopies key {target}", fontsize=10)
    ax_k.set_xlabel("feature (0 … d_model − 1)")
    ax_d.barh(range(L), k @ q, color=["0.25" if i == target else "0.7" for i in range(L)])
    ax_d.axvline(0.0, color="black", linewidth=0.8)
    ax_d.set_ylim(L + 0.5, -0.5)  # a row for the query too: key i level with key i on the left
    ax_d.set_yticks(range(L), [f"key {i}" for i in range(L)])
    ax_d.set_title("similarity to the query\n(dark: the copied key)", fontsize=10)
    ax_d.set_xlabel("query · key")
    ax_v.imshow(v, cmap=VECTOR_CMAP, vmin=-top, vmax=top, aspect="auto")
    ax_v.set_yticks(range(L), [f"value {i}" for i in range(L)])
    ax_v.set_title(f"values: the target\nis value {target}", fontsize=10)
    ax_v.set_xlabel("entry (0 … d_v − 1)")
    for ax, width in ((ax_k, k.shape[1]), (ax_v, v.shape[1])):
        ax.add_patch(Rectangle((-0.5, target - 0.5), width, 1.0, fill=False, linewidth=2.5))
    fig.colorbar(image, cax=ax_v.inset_axes([1.04, 0, 0.05, 1])).set_label("entry (signed)")
    fig.suptitle("One retrieval task: find the key the query copies, return its value")
    return fig


def _loss_axis(ax: Axes, threshold: float, baseline: float, steps: int) -> None:
    """A linear loss axis up to _LOSS_TOP, the threshold dashed, the uniform-weights loss dotted."""
    ax.axhline(baseline, color="0.35", linestyle=":", linewidth=1, label="uniform weights")
    ax.axhline(threshold, color="black", linestyle="--", linewidth=1, label="threshold")
    ax.set(xlim=(0, steps - 1), ylim=(0, _LOSS_TOP))
    ax.grid(alpha=0.3)


@_closes_figures_on_error
def plot_loss_grid(experiment: ScalingExperiment, *, panel_size=(4.2, 1.8)) -> Figure:
    """Every run's smoothed loss, one line per seed and one panel per (setting, d_k), with
    the number of runs that end above the threshold."""
    rows, cols = len(experiment.settings), len(experiment.d_ks)
    fig, axes = subplots(rows, cols, figsize=(panel_size[0] * cols, panel_size[1] * rows),
                         sharex=True, sharey=True, squeeze=False, layout="constrained")  # fmt: skip
    for (i, setting), (j, d_k) in product(
        enumerate(experiment.settings), enumerate(experiment.d_ks)
    ):
        ax, run = axes[i][j], experiment[setting, d_k]
        _loss_axis(ax, run.task.threshold, run.task.baseline, run.loss.shape[0])
        ax.plot(
            run.smoothed().clamp(max=_LOSS_TOP).numpy(),
            color=COLORS[setting],
            linewidth=0.8,
            alpha=0.7,
        )  # (steps, S): one line per seed
        n = int(run.stalled().sum())
        ax.text(0.98, 0.93, f"stalled {n}/{run.n_seeds}", transform=ax.transAxes, ha="right",
                va="top", fontsize=9, color="#B00000" if n else "black")  # fmt: skip
        ax.set_title(f"d_k = {d_k}" if i == 0 else "")
        row = "\n".join(textwrap.wrap(LABELS[setting], 16))  # as tall as a panel at most
        ax.set_ylabel(f"{row}\nloss" if j == 0 else "", fontsize=9)
    for ax in axes[-1]:
        ax.set_xlabel("optimizer step")
    fig.legend(*axes[0][0].get_legend_handles_labels(), loc="outside lower center", ncols=2,
               frameon=False)  # fmt: skip
    fig.suptitle(f"Every run's loss (mean over the last {run.task.window} steps), one line "
                 "per seed")  # fmt: skip
    return fig


# ---------------------------------------------------------------------------- dashboard


class TrainingDashboard(Dashboard):
    """Notebook 09's runs, one at a time: ``d_k``, ``setting`` and ``seed`` → that run's loss
    and its twin's (left), the weights it learned on ``retrieval_eval_example`` (right). Nothing
    is trained in a callback. The default seed is the first that stalled, if any did."""

    plain_text = (
        "Dashboard: d_k, setting and seed → that run's loss beside its twin's, and the weights "
        "it learned, from the runs trained above. It needs a running Jupyter kernel; the "
        "static figure above shows its default setting."
    )

    def __init__(self, experiment: ScalingExperiment, setting: str = "unscaled",
                 d_k: int | None = None, seed: int | None = None, *, dpi: float = 80) -> None:  # fmt: skip
        self.experiment = experiment
        d_k = max(experiment.d_ks) if d_k is None else d_k
        run = experiment[setting, d_k]
        if seed is None:
            seed = run.seeds[int(run.stalled().int().argmax())]
        settings = [(LABELS[s], s) for s in experiment.settings]
        controls = {
            "d_k": _toggle_buttons([(str(d), d) for d in experiment.d_ks], d_k, "d_k", "52px"),
            "setting": _toggle_buttons(settings, setting, "setting", "190px"),
            "seed": widgets.IntSlider(seed, min(run.seeds), max(run.seeds), description="seed"),
        }
        figure = new_figure(figsize=(10.5, 4.0), dpi=dpi)
        ax_loss, ax_w = figure.subplots(1, 2, width_ratios=[1.3, 1.0])
        steps = run.loss.shape[0]
        _loss_axis(ax_loss, run.task.threshold, run.task.baseline, steps)
        (self.line,) = ax_loss.plot(np.zeros(steps), linewidth=2, label="this run")
        (self.twin,) = ax_loss.plot(np.zeros(steps), linestyle="--", color="0.2",
                                    label="its twin (W_Q moved by 1e-9)")  # fmt: skip
        figure.legend(*ax_loss.get_legend_handles_labels(), loc="outside lower center", ncols=4,
                      frameon=False, fontsize=9)  # fmt: skip
        ax_loss.set(xlabel="optimizer step", ylabel=f"loss (mean over {run.task.window} steps)")
        self.heatmap = draw_attention_heatmap(ax_w, np.zeros(run.eval_weights.shape[1:]),
                                              title="weights it learned", annotate=False)  # fmt: skip
        ax_w.set(ylabel="query i (a noisy copy of key i)", xlabel="key j (right: the diagonal)")
        self.ax_loss, self.suptitle = ax_loss, figure.suptitle(" ")
        super().__init__(controls, figure)
        self.render(**self.values)
        freeze_layout(figure)  # axis ranges and tick labels never change
        # What render changes, redrawn alone in drawing order (with the frames drawn over it)
        self.dynamic = [self.line, self.twin, *ax_loss.spines.values(), ax_loss.title,
                        self.heatmap.image, *ax_w.spines.values(), self.suptitle]  # fmt: skip
        self._renderer = BlitRenderer(figure, self.dynamic)
        self.update()

    def render(self, d_k: int, setting: str, seed: int) -> None:
        run = self.experiment[setting, d_k]
        i = run.seeds.index(seed)
        self.line.set_ydata(run.smoothed()[:, i].clamp(max=_LOSS_TOP).numpy())
        self.line.set_color(COLORS[setting])
        self.twin.set_ydata(run.smoothed("twin_loss")[:, i].clamp(max=_LOSS_TOP).numpy())
        reached = int(run.steps_to_threshold()[i])
        outcome = "stalled" if run.stalled()[i] else f"learned (threshold at step {reached})"
        twin = "chaotic: its twin ends elsewhere" if run.chaotic()[i] else "its twin follows it"
        self.ax_loss.set_title(f"seed {seed}: {outcome}\n{twin}", fontsize=10)
        update_attention_heatmap(self.heatmap, run.eval_weights[i])
        self.suptitle.set_text(f"{LABELS[setting]}, d_k = {d_k}: "
                               f"{int(run.stalled().sum())}/{run.n_seeds} runs stalled")  # fmt: skip

    def to_png(self) -> bytes:
        return self._renderer.render()
