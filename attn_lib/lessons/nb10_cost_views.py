"""Notebook 10's figures and dashboards (matplotlib, ipywidgets).

Used by notebook 10 (What attention costs: time, memory, and attention without the L × L
matrix), sections "3 · Time, measured", "8 · What chunking saves: memory", "10 · A dashboard:
the memory each method needs, and the walk step by step". Its data and experiments come from
``nb10_cost``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from ..shapes import check_size
from ._dashboard import Dashboard, _selection_slider
from ._figures import MASKED_MARK, BlitRenderer, _closes_figures_on_error, freeze_layout, new_figure
from .nb10_cost import (
    COST_BLOCK_SIZES,
    COST_D_KS,
    COST_LENGTHS,
    MEMORY_METHOD_LABELS,
    MEMORY_METHODS,
    WALK_L,
    WALK_PADDING,
    AttentionTimings,
    MemorySetting,
    MemoryTable,
    OnlineSoftmaxWalk,
    format_bytes,
    memory_setting,
    online_softmax_walk,
    walk_block_size,
    walk_example,
)

# One colour per method in every figure of notebook 10 (Okabe-Ito palette).
COST_COLORS = {
    "naive": "#D55E00",  # attn_lib's plain path: the L × L matrices
    "attn_lib": "#D55E00",
    "chunked": "#0072B2",
    "tiled": "#009E73",
    "SDPA": "#555555",
}
_BYTES_LIM = (2.0**8, 2.0**30)  # every memory figure of the dashboard's grids lies inside
_BYTES_TICKS = [2.0**e for e in (10, 15, 20, 25, 30)]
_WALK_DONE, _WALK_NOW, _WALK_LATER = "#56B4E9", "#E69F00", "#DDDDDD"
_MONO = "DejaVu Sans Mono"


def _bytes_tick(value: float, _position: object = None) -> str:
    """'1 KiB', '32 MiB', '1 GiB' for powers of two; '' otherwise."""
    if value <= 0 or abs(math.log2(value) - round(math.log2(value))) > 1e-9:
        return ""
    return format_bytes(value).replace(".0 ", " ")


def _keys(start: int, stop: int) -> str:
    """'keys 4–7', or 'key 4' for a block of one key."""
    return f"key {start}" if stop - start == 1 else f"keys {start}–{stop - 1}"


def _bytes_axis(axis: object) -> None:
    axis.set_major_locator(FixedLocator(_BYTES_TICKS))
    axis.set_minor_locator(NullLocator())
    axis.set_major_formatter(FuncFormatter(_bytes_tick))


def _length_axis(ax: Axes, lengths: Sequence[int]) -> None:
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator([float(n) for n in lengths]))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([str(n) for n in lengths])
    ax.set_xlabel("sequence length L = L_q = L_k (tokens)")


def _slopes_legend(ax: Axes, min_length: int) -> None:
    """A light grid and the legend of a log-log plot whose labels give fitted slopes."""
    ax.grid(True, color="0.92")
    ax.legend(fontsize=9, loc="upper left", title=f"slopes fitted over L ≥ {min_length}",
              title_fontsize=9)  # fmt: skip


def _fmt(x: float) -> str:
    """4 decimals, with −∞ for -inf (the running max before any allowed key)."""
    return "−∞" if x == -math.inf else f"{x:.4f}"


def walk_step_text(walk: OnlineSoftmaxWalk, step: int) -> str:
    """The numbers of one step of the walk, as the dashboard's text panel shows them.

    Args:
        walk: from :func:`nb10_cost.online_softmax_walk`.
        step: 0-based index of the key block.

    Returns:
        A few lines: m_old, the block max, m, r = exp(m_old − m), Σ p and l, with a
        sentence when the guard is what keeps NaN out.
    """
    s = walk.states[step]
    l_old = walk.l_before(step)
    lines = [
        f"block {step + 1} of {walk.n_steps}: {_keys(s.start, s.stop)}",
        f"m_old     = {_fmt(s.m_old):>8}  max so far",
        f"block max = {_fmt(s.block_max):>8}",
        f"m         = {_fmt(s.m):>8}  the larger",
        f"r         = {s.rescale:>8.4f}  exp(m_old − m)",
        f"Σ p       = {float(s.p.sum()):>8.4f}  Σ exp(s − m)",
        f"l_old     = {l_old:>8.4f}",
        f"l         = {s.l:>8.4f}  r·l_old + Σ p",
        "acc       = r·acc_old + p·V_block",
    ]
    if s.m == -math.inf:
        lines += ["", "No allowed key yet: m_old = m = −∞, and",
                  "exp(−∞ − (−∞)) would be NaN.",
                  "The guard subtracts 0 instead: r = p = 0,", "l and acc stay 0."]  # fmt: skip
    elif s.m_old == -math.inf:
        lines += ["", "First allowed keys: r = exp(−∞) = 0", "(nothing was summed before)."]
    elif s.block_max == -math.inf:
        lines += ["", "Every key of this block is blocked:", "p = 0, nothing changes."]
    elif s.m > s.m_old:
        lines += ["", "The max rose: the old l and acc", f"shrink by r = {s.rescale:.4f}."]
    else:
        lines += ["", "The max did not change: r = 1."]
    return "\n".join(lines)


class ChunkedAttentionView:
    """Memory of three attention methods, and the online softmax walking over key blocks.

    Top left: peak intermediate bytes against L (log-log) for the naive path (scores and
    weights), the chunked path (all queries, one key block) and the chunked path with
    query blocks, current L marked. Top right: the three at the current L, as bars.
    Bottom: the walk example's query row — its 16 scaled scores with the blocks done,
    the current block and the blocks to come, the running max before and after; the
    numbers of the step; and the running output acc / l against the final output.

    Args:
        fig: the figure to draw into (a dashboard's, or a pyplot figure).

    Source: attn_lib.chunked (the recurrence); notebook 10 of this series.
    """

    def __init__(self, fig: Figure) -> None:
        self.fig = fig
        grid = fig.add_gridspec(2, 10, height_ratios=[1.0, 1.1])
        self.ax_mem = fig.add_subplot(grid[0, :5])
        self.ax_bars = fig.add_subplot(grid[0, 5:])
        self.ax_scores = fig.add_subplot(grid[1, :5])
        self.ax_text = fig.add_subplot(grid[1, 5:8])
        self.ax_out = fig.add_subplot(grid[1, 8:])
        self._build_memory()
        self._build_walk()
        self.suptitle = fig.suptitle(" ", fontsize=12)

    # -- memory --------------------------------------------------------------------------
    def _build_memory(self) -> None:
        ax = self.ax_mem
        L = [float(n) for n in COST_LENGTHS]
        self.mem_lines = {m: ax.plot(L, L, color=COST_COLORS[m], marker="o", markersize=3,
                                     linewidth=2, label=MEMORY_METHOD_LABELS[m])[0]
                          for m in MEMORY_METHODS}  # fmt: skip
        self.mem_marks = {m: ax.plot([L[0]], [L[0]], "o", color=COST_COLORS[m], markersize=8,
                                     markeredgecolor="black")[0]
                          for m in MEMORY_METHODS}  # fmt: skip
        self.mem_vline = ax.axvline(L[0], color="0.4", linestyle=":", linewidth=1)
        ax.set_yscale("log", base=2)
        ax.set_ylim(*_BYTES_LIM)
        _bytes_axis(ax.yaxis)
        _length_axis(ax, COST_LENGTHS)
        ax.set_ylabel("bytes held at once")
        ax.set_title("intermediate memory against L (float32, one sequence)", fontsize=10)
        ax.grid(True, color="0.92")
        ax.legend(fontsize=8, loc="upper left", handlelength=1.5)

        ax = self.ax_bars
        y = np.arange(len(MEMORY_METHODS))
        self.bars = ax.barh(y, [1.0] * len(y), left=_BYTES_LIM[0],
                            color=[COST_COLORS[m] for m in MEMORY_METHODS], height=0.6)  # fmt: skip
        self.bar_texts = [ax.text(1.0, i, "", va="center", ha="left", fontsize=9) for i in y]
        ax.set_xscale("log", base=2)
        ax.set_xlim(_BYTES_LIM[0], 2.0**33)  # room for the labels right of the bars
        _bytes_axis(ax.xaxis)
        ax.set_yticks(y, ["naive\nscores + weights", "chunked\nall queries",
                          "chunked\nquery blocks"], fontsize=9)  # fmt: skip
        ax.invert_yaxis()
        ax.set_xlabel("bytes held at once (log scale)")
        self.bars_title = ax.set_title(" ", fontsize=10)
        ax.grid(True, axis="x", color="0.92")

    def _update_memory(self, setting: MemorySetting) -> None:
        L = float(setting.L)
        for m in MEMORY_METHODS:
            self.mem_lines[m].set_ydata(setting.table.bytes(m).numpy())
            self.mem_marks[m].set_data([L], [float(setting.at[m])])
        self.mem_vline.set_xdata([L, L])
        for bar, text, m in zip(self.bars.patches, self.bar_texts, MEMORY_METHODS, strict=True):
            nbytes = float(setting.at[m])
            bar.set_width(nbytes - _BYTES_LIM[0])
            text.set_x(nbytes * 1.3)
            text.set_text(format_bytes(nbytes))
        share = setting.at["chunked"] / setting.at["naive"]
        self.bars_title.set_text(f"at L = {setting.L}: chunked holds {100 * share:.1f} % "
                                 f"of naive")  # fmt: skip

    # -- walk ----------------------------------------------------------------------------
    def _build_walk(self) -> None:

        ex = walk_example()
        finite = ex.scores[ex.keep]
        keys = np.arange(WALK_L)
        ax = self.ax_scores
        heights = np.where(ex.keep.numpy(), ex.scores.numpy(), 0.0)
        self.score_bars = ax.bar(keys, heights, color=_WALK_LATER, edgecolor="0.5",
                                 linewidth=0.5, width=0.8)  # fmt: skip
        for j in range(WALK_PADDING):  # blocked keys: the series' masked mark, drawn once
            ax.text(j, 0.0, MASKED_MARK, ha="center", va="center", fontsize=13, color="0.35")
        lo, hi = float(finite.min()), float(finite.max())
        ax.set_ylim(lo - 0.4, hi + 1.6)  # room above for the legend
        ax.set_xlim(-0.6, WALK_L - 0.4)
        ax.axhline(0.0, color="0.6", linewidth=0.8)
        self.boundaries = LineCollection([], colors="0.25", linestyles=":", linewidths=1)
        ax.add_collection(self.boundaries)
        from matplotlib.patches import Rectangle as _Rectangle
        from matplotlib.transforms import blended_transform_factory

        # The current block's column band (visible even when all its keys are blocked).
        self.block_span = _Rectangle((0.0, 0.0), 1.0, 1.0, color=_WALK_NOW, alpha=0.18,
                                     linewidth=0, zorder=0.5,
                                     transform=blended_transform_factory(ax.transData,
                                                                         ax.transAxes))  # fmt: skip
        ax.add_patch(self.block_span)
        (self.m_line,) = ax.plot([], [], color="#CC0000", linewidth=2)
        (self.m_old_line,) = ax.plot([], [], color="#CC0000", linewidth=1.2, linestyle="--",
                                     alpha=0.6)  # fmt: skip
        ax.set_xticks(keys)
        ax.set_xlabel(f"key j (keys 0–{WALK_PADDING - 1} are padding: blocked, {MASKED_MARK})")
        ax.set_ylabel("scaled score q·k_j / √d_k")
        self.scores_title = ax.set_title(" ", fontsize=10)
        handles = [Patch(color=_WALK_DONE, label="blocks done"),
                   Patch(color=_WALK_NOW, label="this block"),
                   Patch(facecolor=_WALK_LATER, edgecolor="0.5", label="blocks to come"),
                   Line2D([], [], color="#CC0000", linewidth=2, label="running max m"),
                   Line2D([], [], color="#CC0000", linestyle="--", alpha=0.6,
                          label="m before this block")]  # fmt: skip
        ax.legend(handles=handles, fontsize=7.5, loc="upper left", ncol=3, handlelength=1.6)

        ax = self.ax_text
        ax.set_axis_off()
        self.step_text = ax.text(0.0, 1.0, "", family=_MONO, fontsize=8, va="top", ha="left",
                                 transform=ax.transAxes)  # fmt: skip
        self.step_text.set_in_layout(False)  # its length varies; the panel is sized for it

        ax = self.ax_out
        comps = np.arange(ex.output.numel())
        self.out_bars = ax.bar(comps, np.zeros(len(comps)), color=_WALK_DONE, width=0.6)
        ax.hlines(ex.output.numpy(), comps - 0.4, comps + 0.4, colors="black", linewidth=2)
        everything = [ex.output] + [s.output for b in (1, 2, 4, 8, 16)
                                    for s in _walk_states(b)]  # fmt: skip
        top = float(torch.stack(everything).abs().max())
        ax.set_ylim(-1.15 * top, 1.15 * top)
        ax.axhline(0.0, color="0.6", linewidth=0.8)
        ax.set_xticks(comps, [str(int(c)) for c in comps])
        ax.set_xlabel("output component")
        self.out_title = ax.set_title(" ", fontsize=9)

    def _update_walk(self, walk: OnlineSoftmaxWalk, step: int) -> None:
        s = walk.states[step]
        keep = walk.example.keep
        for j, bar in enumerate(self.score_bars.patches):
            color = _WALK_DONE if j < s.start else _WALK_NOW if j < s.stop else _WALK_LATER
            bar.set_facecolor(color if keep[j] else (0, 0, 0, 0))
        self.block_span.set_x(s.start - 0.5)
        self.block_span.set_width(s.stop - s.start)
        edges = [st.start - 0.5 for st in walk.states[1:]]
        y0, y1 = self.ax_scores.get_ylim()
        self.boundaries.set_segments([[(x, y0), (x, y1)] for x in edges])
        if s.m > -math.inf:
            self.m_line.set_data([-0.45, s.stop - 0.55], [s.m, s.m])
        else:
            self.m_line.set_data([], [])
        if s.m_old > -math.inf:
            self.m_old_line.set_data([-0.45, s.start - 0.55], [s.m_old, s.m_old])
        else:
            self.m_old_line.set_data([], [])
        keys = _keys(s.start, s.stop)
        self.scores_title.set_text(f"the walk: step {step + 1} of {walk.n_steps}, {keys} "
                                   f"(blocks of {walk.block_size})")  # fmt: skip
        self.step_text.set_text(walk_step_text(walk, step))
        for bar, value in zip(self.out_bars.patches, s.output.tolist(), strict=True):
            bar.set_height(value)
        self.out_title.set_text(f"running output acc / l\n(bars); final: black\n"
                                f"largest gap {float(walk.gaps[step]):.4f}")  # fmt: skip

    def update(self, setting: MemorySetting, walk: OnlineSoftmaxWalk, step: int) -> None:
        """Show a memory setting and step ``step`` (0-based) of a walk."""
        if not 0 <= step < walk.n_steps:
            raise ValueError(f"step must be in 0 … {walk.n_steps - 1}, got {step}.")
        self._update_memory(setting)
        self._update_walk(walk, step)
        self.suptitle.set_text(setting.title)

    @property
    def dynamic_artists(self) -> list[Artist]:
        """Everything an update changes, for :class:`BlitRenderer`."""
        return [
            *self.mem_lines.values(), *self.mem_marks.values(), self.mem_vline,
            *self.bars.patches, *self.bar_texts, self.bars_title,
            self.block_span, *self.score_bars.patches, self.boundaries, self.m_line,
            self.m_old_line,
            self.scores_title, self.step_text, *self.out_bars.patches, self.out_title,
            self.suptitle,
        ]  # fmt: skip


def _walk_states(block_size: int) -> tuple:

    return online_softmax_walk(block_size).states


@_closes_figures_on_error
def plot_chunked_setting(
    setting: MemorySetting,
    walk: OnlineSoftmaxWalk,
    step: int,
    figsize: tuple[float, float] = (11.0, 7.2),
) -> Figure:
    """A static pyplot rendering of one setting of the chunked-attention dashboard.

    Args:
        setting: :func:`nb10_cost.memory_setting`.
        walk: :func:`nb10_cost.online_softmax_walk` (e.g. at setting.walk_block).
        step: 0-based block index of the walk.
        figsize: inches.

    Returns:
        The pyplot figure (end the cell with ``plt.show()``).

    Source: notebook 10 of this series.
    """
    fig = plt.figure(figsize=figsize, layout="constrained")
    ChunkedAttentionView(fig).update(setting, walk, step)
    return fig


@_closes_figures_on_error
def plot_walk_gallery(
    walk: OnlineSoftmaxWalk,
    steps: Sequence[int] | None = None,
    *,
    panel_size: tuple[float, float] = (2.6, 4.6),
) -> Figure:
    """The walk's steps side by side: scores with the running max, and the running output.

    Args:
        walk: :func:`nb10_cost.online_softmax_walk`.
        steps: 0-based steps to show (default all, at most 8).
        panel_size: inches per column.

    Returns:
        The pyplot figure (end the cell with ``plt.show()``).

    Source: notebook 10 of this series; Milakov & Gimelshein 2018.
    """
    steps = list(range(min(walk.n_steps, 8))) if steps is None else list(steps)
    ex = walk.example
    n = len(steps)
    fig, axes = plt.subplots(2, n, figsize=(panel_size[0] * n, panel_size[1]), squeeze=False,
                             layout="constrained", height_ratios=[1.3, 1.0])  # fmt: skip
    keys = np.arange(WALK_L)
    finite = ex.scores[ex.keep]
    top = float(torch.stack([ex.output] + [s.output for s in walk.states]).abs().max())
    for col, step in enumerate(steps):
        s = walk.states[step]
        ax = axes[0, col]
        colors = [(0, 0, 0, 0) if not ex.keep[j] else _WALK_DONE if j < s.start
                  else _WALK_NOW if j < s.stop else _WALK_LATER for j in keys]  # fmt: skip
        ax.bar(keys, np.where(ex.keep.numpy(), ex.scores.numpy(), 0.0), color=colors,
               edgecolor="0.5", linewidth=0.5, width=0.8)  # fmt: skip
        for j in range(WALK_PADDING):
            ax.text(j, 0.0, MASKED_MARK, ha="center", va="center", fontsize=11, color="0.35")
        if s.m > -math.inf:
            ax.plot([-0.45, s.stop - 0.55], [s.m, s.m], color="#CC0000", linewidth=2)
        ax.set_ylim(float(finite.min()) - 0.4, float(finite.max()) + 0.6)
        ax.set_xticks([0, 5, 10, 15])
        ax.set_title(f"step {step + 1}: {_keys(s.start, s.stop)}\nm = {_fmt(s.m)}, "
                     f"r = {s.rescale:.2f}", fontsize=9)  # fmt: skip
        ax.set_xlabel("key j", fontsize=8)
        ax = axes[1, col]
        comps = np.arange(ex.output.numel())
        ax.bar(comps, s.output.numpy(), color=_WALK_DONE, width=0.6)
        ax.hlines(ex.output.numpy(), comps - 0.4, comps + 0.4, colors="black", linewidth=2)
        ax.axhline(0.0, color="0.6", linewidth=0.8)
        ax.set_ylim(-1.15 * top, 1.15 * top)
        ax.set_xticks(comps)
        ax.set_title(f"acc / l: gap {float(walk.gaps[step]):.4f}", fontsize=9)
        ax.set_xlabel("output component", fontsize=8)
    axes[0, 0].set_ylabel("scaled score")
    axes[1, 0].set_ylabel("running output\n(bars; final —)")
    fig.suptitle(f"The online softmax, one block of {walk.block_size} keys at a time: the running "
                 f"max m (red) and the running output converging to the final one")  # fmt: skip
    handles = [Patch(color=_WALK_DONE, label="blocks done"),
               Patch(color=_WALK_NOW, label="this block"),
               Patch(facecolor=_WALK_LATER, edgecolor="0.5", label="blocks to come"),
               Line2D([], [], color="#CC0000", linewidth=2, label="running max m"),
               Line2D([], [], color="black", linewidth=2, label="final output"),
               Line2D([], [], linestyle="", marker=f"${MASKED_MARK}$", color="0.35",
                      label="padding key (blocked)")]  # fmt: skip
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize=8)
    return fig


@_closes_figures_on_error
def plot_memory_vs_length(
    table: MemoryTable,
    *,
    min_length: int = 1024,
    title: str | None = None,
    figsize: tuple[float, float] = (8.6, 4.4),
) -> Figure:
    """Bytes each method holds at once against L, log-log, with the fitted slopes.

    Args:
        table: :func:`nb10_cost.memory_table`.
        min_length: the slopes are fitted over L ≥ this.
        title: the figure title (default: names d_k and the block size).
        figsize: inches.

    Returns:
        The pyplot figure (end the cell with ``plt.show()``).

    Source: attn_lib.chunked.peak_intermediate_bytes.
    """
    fig, ax = plt.subplots(figsize=figsize, layout="constrained")
    L = table.lengths.double().numpy()
    for m in MEMORY_METHODS:
        slope = table.slope(m, min_length)
        ax.plot(L, table.bytes(m).numpy(), color=COST_COLORS[m], marker="o", linewidth=2,
                label=f"{MEMORY_METHOD_LABELS[m]}   (slope {slope:.1f})")  # fmt: skip
    _length_axis(ax, [int(n) for n in L])
    ax.set_yscale("log", base=2)
    lo = float(min(table.bytes(m).min() for m in MEMORY_METHODS))
    ax.set_ylim(2.0 ** math.floor(math.log2(lo)), _BYTES_LIM[1])
    _bytes_axis(ax.yaxis)
    ax.set_ylabel("bytes held at once (log scale)")
    _slopes_legend(ax, min_length)
    ax.set_title(title or f"Intermediate memory of attention, float32, d_k = d_v = {table.d_k}, "
                 f"block = {table.block_size}")  # fmt: skip
    return fig


@_closes_figures_on_error
def plot_attention_timings(
    timings: AttentionTimings,
    *,
    min_length: int = 1024,
    figsize: tuple[float, float] = (8.6, 4.6),
) -> Figure:
    """Measured time per call against L, log-log, with fitted slopes and a slope-2 guide.

    Args:
        timings: :func:`nb10_cost.time_attention`.
        min_length: the slopes are fitted over L ≥ this.
        figsize: inches.

    Returns:
        The pyplot figure (end the cell with ``plt.show()``). Its numbers are volatile:
        they change on every run.

    Source: notebook 10 of this series.
    """
    fig, ax = plt.subplots(figsize=figsize, layout="constrained")
    styles = {"SDPA": "--"}
    for name in timings.methods:
        points = sorted(timings.ms[name].items())
        if not points:
            continue
        Ls, ms = zip(*points, strict=True)
        enough = sum(L >= min_length for L in Ls) >= 2
        label = name + (f"   (slope {timings.slope(name, min_length):.1f})" if enough else "")
        ax.plot(Ls, ms, marker="o", linewidth=2, color=COST_COLORS.get(name, None),
                linestyle=styles.get(name, "-"), label=label)  # fmt: skip
    timed = sorted({L for d in timings.ms.values() for L in d})
    first = timings.methods[0]
    anchor = max(timings.ms[first])
    guide = np.array([L for L in timed if L >= min_length] or timed, dtype=float)
    ax.plot(guide, timings.ms[first][anchor] * (guide / anchor) ** 2, color="0.6",
            linestyle=":", linewidth=1.5, label="∝ L² (slope 2), for reference")  # fmt: skip
    _length_axis(ax, timings.lengths)
    ax.set_yscale("log")
    ax.set_ylabel("time per call (ms, log scale)")
    _slopes_legend(ax, min_length)
    threads = f"{timings.threads} thread" + ("s" if timings.threads > 1 else "")
    ax.set_title(f"Measured time, B = 1, d_k = d_v = {timings.d_k}, float32, CPU, {threads}; "
                 f"median of {timings.repeats}")  # fmt: skip
    return fig


class ChunkedAttentionDashboard(Dashboard):
    """Memory of naive and chunked attention for L, d_k and a block size; the walk, step by step.

    Controls: ``L`` (256 … 8192, powers of two), ``d_k`` (16 … 256, d_v = d_k),
    ``block_size`` (1 … 2048 keys, powers of two; used as min(block_size, L)) and
    ``step`` (1 … the number of blocks of the walk). A change calls
    :func:`nb10_cost.memory_setting` (cached) and
    :func:`nb10_cost.online_softmax_walk` (the walk example's 16 keys split
    into as many blocks as the setting has, at most 16: see
    :func:`nb10_cost.walk_block_size`; cached per block size), and redraws
    :class:`ChunkedAttentionView`: bytes against L with the current L
    marked, the three methods at L as bars, and one step of the online softmax (scores,
    running max, the step's numbers, running output against the final output). When L
    or the block size changes the number of steps, the step slider's range follows
    (the step is clipped to it).

    Args:
        L, d_k, block_size: the initial setting (values of the grids above).
        step: the initial step, 1-based (clipped to the number of steps).
        dpi: resolution of the PNG.

    Attributes:
        setting: the MemorySetting shown. walk: the OnlineSoftmaxWalk shown.
        view: the ChunkedAttentionView that draws them.

    Raises:
        ValueError: an initial value outside the grids, or step < 1.

    Source: attn_lib.chunked (online softmax); article section 1.2; notebook 10.
    """

    plain_text = (
        "Dashboard: memory of naive and chunked attention for L, d_k and the key-block size, "
        "and the chunked walk over key blocks step by step. It needs a running Jupyter kernel; "
        "the static figures above show its default setting and a gallery of the walk."
    )

    def __init__(
        self,
        L: int = 4096,
        d_k: int = 64,
        block_size: int = 512,
        step: int = 6,
        *,
        dpi: float = 72,
    ) -> None:
        step = check_size("step", step)
        self.setting: MemorySetting = memory_setting(L, d_k, block_size)  # checks the grids
        self.walk: OnlineSoftmaxWalk = online_softmax_walk(self.setting.walk_block)
        step = min(step, self.walk.n_steps)
        controls: dict[str, widgets.ValueWidget] = {
            "L": _selection_slider([(str(n), n) for n in COST_LENGTHS], L, "L (tokens)"),
            "d_k": _selection_slider([(str(n), n) for n in COST_D_KS], d_k, "d_k = d_v"),
            "block_size": _selection_slider(
                [(str(n), n) for n in COST_BLOCK_SIZES], block_size, "key block"
            ),
            "step": widgets.IntSlider(
                value=step, min=1, max=self.walk.n_steps, step=1, description="walk step",
                style={"description_width": "initial"}, layout=widgets.Layout(width="330px"),
            ),
        }  # fmt: skip
        # Registered before the base class's observers, so the step range is right
        # before the update that the L or block-size change triggers.
        for name in ("L", "block_size"):
            controls[name].observe(self._sync_step, names="value")
        figure = new_figure(figsize=(11.0, 7.2), dpi=dpi)
        self.view = ChunkedAttentionView(figure)
        self.view.update(self.setting, self.walk, step - 1)
        freeze_layout(figure)  # axes, ticks and legends never move
        self._renderer = BlitRenderer(figure, self.view.dynamic_artists)
        super().__init__(controls, figure)
        self._wrap_controls()
        self.update()

    def _sync_step(self, change: dict) -> None:
        """Set the step slider's range to the new walk's number of steps (no redraw)."""
        values = self.values
        n_steps = online_softmax_walk(walk_block_size(values["L"], values["block_size"])).n_steps
        # Held: a step clipped by the new range must not redraw a half-set state (the L or
        # block-size change redraws next, or set() at its end).
        with self._held():
            self.controls["step"].max = n_steps

    def render(self, L: int, d_k: int, block_size: int, step: int) -> None:
        """Look up the (cached) memory setting and walk, and show the step."""
        self.setting = memory_setting(L, d_k, block_size)
        self.walk = online_softmax_walk(self.setting.walk_block)
        self.view.update(self.setting, self.walk, min(step, self.walk.n_steps) - 1)

    def to_png(self) -> bytes:
        """Redraw only the changing artists over the cached background."""
        return self._renderer.render()

    def close(self) -> None:
        """As :meth:`Dashboard.close`, and stop following L and the block size."""
        if not self.closed:
            for name in ("L", "block_size"):
                self.controls[name].unobserve(self._sync_step, names="value")
        super().close()
