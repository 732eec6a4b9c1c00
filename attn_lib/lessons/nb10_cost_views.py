"""Notebook 10's figures and dashboard (matplotlib, ipywidgets), its numbers from ``nb10_cost``.

Used by notebook 10 (What attention costs), sections "4 · Attention without the L × L matrix"
(plot_walk_gallery), "5 · What chunking saves, and what it does not" (plot_memory_vs_length)
and "6 · The dashboard: the online softmax, step by step" (OnlineSoftmaxDashboard).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from ._dashboard import Dashboard
from ._figures import (
    MASKED_MARK,
    BlitRenderer,
    _closes_figures_on_error,
    figure,
    new_figure,
    subplots,
)
from .nb10_cost import (
    WALK_L,
    WALK_PADDING,
    OnlineSoftmaxWalk,
    format_bytes,
    log_slope,
    online_softmax_walk,
)

# Section 5's three ways to hold the intermediates (peak_intermediate_bytes's method="naive";
# the default; query_block_size=block_size): their labels and Okabe-Ito colours.
MEMORY_METHODS = {"naive": ("naive: scores + weights, 2 · L_q · L_k", "#D55E00"),
                  "chunked": ("chunked, all queries: L_q × block", "#0072B2"),
                  "tiled": ("chunked, query blocks too: block × block", "#009E73")}  # fmt: skip
_DONE, _NOW, _LATER, _MAX = "#56B4E9", "#E69F00", "#DDDDDD", "#CC0000"


@_closes_figures_on_error
def plot_memory_vs_length(
    lengths: Sequence[int], table: Mapping[str, Sequence[int]], *, min_length: int = 1024
) -> Figure:
    """Bytes each method of MEMORY_METHODS holds at once (``table``, from
    peak_intermediate_bytes) against L, log-log, labelled with its slope over L ≥ min_length."""
    fig = figure(figsize=(8.2, 4.4))  # ≤ 840 px at 100 dpi
    ax = fig.add_axes((0.1, 0.12, 0.88, 0.8))
    long = [i for i, n in enumerate(lengths) if n >= min_length]
    for name, nbytes in table.items():
        slope = log_slope([lengths[i] for i in long], [nbytes[i] for i in long])
        label, color = MEMORY_METHODS[name]
        ax.plot(lengths, nbytes, marker="o", linewidth=2, color=color,
                label=f"{label}   (slope {slope:.1f})")  # fmt: skip
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_ylim(top=2.0**30)
    for axis, ticks in ((ax.xaxis, lengths), (ax.yaxis, [2.0**e for e in range(10, 31, 5)])):
        axis.set_major_locator(FixedLocator([float(t) for t in ticks]))
        axis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0f}"))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: format_bytes(v).replace(".0 ", " ")))
    ax.set(xlabel="sequence length L = L_q = L_k (tokens)", ylabel="bytes held at once (log scale)")
    ax.set_title("Intermediate memory of self-attention, float32, d_k = d_v = 64, block = 512")
    ax.grid(True, color="0.92")
    ax.legend(fontsize=9, loc="upper left", title=f"slopes fitted over L ≥ {min_length}",
              title_fontsize=9)  # fmt: skip
    return fig


def _step_title(walk: OnlineSoftmaxWalk, step: int) -> str:
    """Two lines: the step and its keys; the running max, r and l, or why nothing moved."""
    s = walk.states[step]
    keys = f"key {s.start}" if s.stop - s.start == 1 else f"keys {s.start}–{s.stop - 1}"
    head = f"step {step + 1} of {len(walk.states)}: {keys}"
    if s.m == -math.inf:
        return f"{head}\nno allowed key yet: guard, r = p = 0"
    old = "−∞" if s.m_old == -math.inf else f"{s.m_old:.4f}"
    return f"{head}\nm {old} → {s.m:.4f}, r = {s.rescale:.4f}, l = {s.l:.4f}"


class WalkView:
    """One step of the walk on two axes: the 16 scaled scores by key block with the running
    max, and the running output acc / l (bars) against the final output (black lines)."""

    def __init__(self, ax_scores: Axes, ax_out: Axes, fontsize: float = 9) -> None:
        walk = online_softmax_walk(WALK_L)
        keep = torch.isfinite(walk.scores)
        self.bars = ax_scores.bar(range(WALK_L), walk.scores.masked_fill(~keep, 0.0).numpy(),
                                  color=_LATER, edgecolor="0.5", linewidth=0.5)  # fmt: skip
        for j in range(WALK_PADDING):
            ax_scores.text(j, 0.0, MASKED_MARK, ha="center", va="center", fontsize=12, color="0.35")
        ax_scores.set_ylim(float(walk.scores[keep].min()) - 0.4, float(walk.scores.max()) + 0.6)
        ax_scores.set_xticks([0, 5, 10, 15])
        ax_scores.set_xlabel("key j", fontsize=fontsize)
        ax_scores.axhline(0.0, color="0.6", linewidth=0.8)
        self.span = ax_scores.axvspan(-0.5, 0.5, color=_NOW, alpha=0.2, linewidth=0, zorder=0)
        (self.m_line,) = ax_scores.plot([], [], color=_MAX, linewidth=2)
        self.scores_title = ax_scores.set_title(" ", fontsize=fontsize)
        comps = np.arange(walk.output.numel())
        top = 1.15 * max(s.output.abs().max().item() for b in (1, 2, 4, 8)
                         for s in online_softmax_walk(b).states)  # fmt: skip
        self.out_bars = ax_out.bar(comps, np.zeros(len(comps)), color=_DONE, width=0.6)
        ax_out.hlines(walk.output.numpy(), comps - 0.4, comps + 0.4, colors="black", linewidth=2)
        ax_out.axhline(0.0, color="0.6", linewidth=0.8)
        ax_out.set_ylim(-top, top)
        ax_out.set_xticks(comps)
        ax_out.set_xlabel("output component", fontsize=fontsize)
        self.out_title = ax_out.set_title(" ", fontsize=fontsize)
        self.dynamic_artists = [self.span, *self.bars.patches, self.m_line, self.scores_title,
                                *self.out_bars.patches, self.out_title]  # fmt: skip

    def update(self, walk: OnlineSoftmaxWalk, step: int) -> None:
        """Show step ``step`` (0-based) of ``walk``."""
        s = walk.states[step]
        for j, bar in enumerate(self.bars.patches):
            color = _DONE if j < s.start else _NOW if j < s.stop else _LATER
            bar.set_facecolor(color if j >= WALK_PADDING else (0, 0, 0, 0))
        self.span.set_x(s.start - 0.5)  # this block, visible even when all its keys are blocked
        self.span.set_width(s.stop - s.start)
        seen = s.m > -math.inf
        self.m_line.set_data([-0.45, s.stop - 0.55] if seen else [], [s.m, s.m] if seen else [])
        self.scores_title.set_text(_step_title(walk, step))
        for bar, value in zip(self.out_bars.patches, s.output.tolist(), strict=True):
            bar.set_height(value)
        gap = (s.output - walk.output).abs().max()
        self.out_title.set_text(f"acc / l: largest gap {gap:.4f}")


def _legend_handles() -> list:
    """The walk's legend entries; built per figure (the mathtext marker costs 0.16 s at import)."""
    return [Patch(color=_DONE, label="blocks done"), Patch(color=_NOW, label="this block"),
            Patch(facecolor=_LATER, edgecolor="0.5", label="blocks to come"),
            Line2D([], [], color=_MAX, linewidth=2, label="running max m"),
            Line2D([], [], color="black", linewidth=2, label="final output"),
            Line2D([], [], linestyle="", marker=f"${MASKED_MARK}$", color="0.35",
                   label="padding key (blocked)")]  # fmt: skip


@_closes_figures_on_error
def plot_walk_gallery(walk: OnlineSoftmaxWalk) -> Figure:
    """Every step of ``walk`` (at most 8), two a row: scores and running max above, the
    running output against the final one below."""
    n = min(len(walk.states), 8)
    rows, cols = -(-n // 2), min(n, 2)  # two 4.1 in steps a row: ≤ 840 px at 100 dpi
    height = 4.2 * rows + 1.2  # inches: a step's two axes, the titles above, the legend below
    fig, axes = subplots(2 * rows, cols, figsize=(8.2, height), squeeze=False,
                             height_ratios=[1.3, 1.0] * rows,
                             gridspec_kw={"hspace": 0.6, "wspace": 0.25, "top": 1 - 1.05 / height,
                                          "bottom": 0.95 / height, "left": 0.08, "right": 0.99})  # fmt: skip
    for step in range(n):
        row, col = divmod(step, cols)
        WalkView(axes[2 * row, col], axes[2 * row + 1, col], fontsize=8).update(walk, step)
    if n % cols:  # an odd count: the last row's second step is empty
        axes[-2, -1].set_visible(False)
        axes[-1, -1].set_visible(False)
    for row in range(rows):
        axes[2 * row, 0].set_ylabel("scaled score")
        axes[2 * row + 1, 0].set_ylabel("running output")
    fig.suptitle(f"The online softmax, blocks of {walk.block_size} keys: the running max m "
                 f"(red)\nand the running output reaching the final one")  # fmt: skip
    handles = _legend_handles()
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8,
               bbox_to_anchor=(0.5, 0.0))  # fmt: skip
    return fig


class OnlineSoftmaxDashboard(Dashboard):
    """The walk through the online softmax: ``block_size`` (1 … 16 keys per block) and ``step``
    (1-based; its range follows the block size, the step clipped to it) → the cached
    :func:`nb10_cost.online_softmax_walk`, drawn by a :class:`WalkView` (blitted)."""

    plain_text = ("Dashboard: the online softmax of one query row over 16 keys, for a key-block "
                  "size and a step. It needs a running Jupyter kernel; the static figures above "
                  "show its default setting and a gallery of the walk.")  # fmt: skip

    def __init__(self, block_size: int = 2, step: int = 6, *, dpi: float = 72) -> None:
        self.walk = online_softmax_walk(block_size)
        style = {"style": {"description_width": "initial"}, "layout": widgets.Layout(width="300px")}
        controls = {
            "block_size": widgets.IntSlider(value=block_size, min=1, max=WALK_L,
                                            description="keys per block", **style),
            "step": widgets.IntSlider(value=step, min=1, max=len(self.walk.states),
                                      description="step", **style),
        }  # fmt: skip
        # Observed before the base class's observer: the step range is right before the redraw.
        controls["block_size"].observe(self._sync_step, names="value")
        figure = new_figure(figsize=(10.0, 3.8), dpi=dpi)
        figure.set_layout_engine("none")  # fixed places: the axes and legend never move
        ax_scores = figure.add_axes((0.07, 0.3, 0.56, 0.55))
        ax_out = figure.add_axes((0.72, 0.3, 0.26, 0.55))
        self.view = WalkView(ax_scores, ax_out, fontsize=10)
        ax_scores.set_ylabel("scaled score q·k_j / √d_k")
        ax_out.set_ylabel("running output")
        handles = _legend_handles()
        figure.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=10)
        self.view.update(self.walk, step - 1)
        self._renderer = BlitRenderer(figure, self.view.dynamic_artists)
        super().__init__(controls, figure)
        self.update()

    def _sync_step(self, change: dict) -> None:
        """The step slider's range: the new walk's number of blocks (no redraw)."""
        with self._held():  # a step clipped by the new range must not redraw a half-set state
            self.controls["step"].max = len(online_softmax_walk(change["new"]).states)

    def render(self, block_size: int, step: int) -> None:
        self.walk = online_softmax_walk(block_size)
        self.view.update(self.walk, min(step, len(self.walk.states)) - 1)

    def to_png(self) -> bytes:
        return self._renderer.render()  # only the changing artists, over the cached background
