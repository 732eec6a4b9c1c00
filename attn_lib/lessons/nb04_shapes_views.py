"""Notebook 04's figures and dashboards (matplotlib, ipywidgets).

Used by notebook 04 (One formula, every shape), sections "4 · A dashboard: every shape, drawn
to scale", "5 · What attention costs". Its data and experiments come from ``nb04_shapes``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from ._dashboard import Dashboard
from ._figures import (
    BlitRenderer,
    HeatmapArtists,
    _as_numpy_2d,
    _closes_figures_on_error,
    _fill_cells,
    _to_numpy,
    draw_attention_heatmap,
    new_figure,
)
from .nb04_shapes import SHAPE_MODES, CostCurves, ShapeWalkthrough, shape_walkthrough

# Box colours; Q, K, V and the output as in notebook 02's token panels.
_SHAPE_COLORS = {
    "x": "0.45", "context": "0.45", "W_Q": "tab:brown", "W_K": "tab:brown", "W_V": "tab:brown",
    "Q": "tab:blue", "K": "tab:orange", "Kᵀ": "tab:orange", "V": "tab:green",
    "scores": "tab:red", "weights": "tab:olive", "output": "tab:purple",
}  # fmt: skip
_SHAPE_GAP = 4.5  # units between two boxes of an equation, where "·" or "=" goes
_SHAPE_ARROW = 9.0  # units between scores and weights, where "softmax →" goes
_SHAPE_MIN_SLOT = 7.5  # a narrow box still gets this much width, so labels do not collide
_SHAPE_STEP = 0.7  # offset of each stacked batch copy, in units
_SHAPE_LABEL = 4.6  # room above a box (and its copies) for its two label lines, in units
_SHAPE_SPACING = 1.4  # between two rows of equations, in units
_SOFTMAX_OP = "softmax"  # drawn as an arrow with this caption


@dataclass(frozen=True)
class ShapeDiagramLimits:
    """The largest sizes a shape diagram must hold; its axes limits are set from them.

    Attributes:
        B, L_q, L_k: largest batch size and lengths. d: largest of d_model, d_k, d_v.

    Source: the bounds of :class:`ShapeDashboard`'s sliders.
    """

    B: int = 4
    L_q: int = 7
    L_k: int = 8
    d: int = 12

    @property
    def rise(self) -> float:
        """Units taken by the stacked copies of a batched box (up and to the right)."""
        return _SHAPE_STEP * (self.B - 1)

    def slot(self, width: float, batched: bool = True) -> float:
        """Horizontal room of a box ``width`` units wide, its copies included."""
        return max(width + (self.rise if batched else 0.0), _SHAPE_MIN_SLOT)

    def row_height(self, box_height: float) -> float:
        return self.rise + _SHAPE_LABEL + box_height + _SHAPE_SPACING

    @property
    def projection_size(self) -> tuple[float, float]:
        """(width, height) in units of the three projection equations x W = Q, K, V."""
        width = self.slot(self.d) + self.slot(self.d, False) + self.slot(self.d) + 2 * _SHAPE_GAP
        return width, 3 * self.row_height(max(self.L_q, self.L_k, self.d))

    @property
    def attention_size(self) -> tuple[float, float]:
        """(width, height) in units of Q · Kᵀ = scores → weights and weights · V = output."""
        first = (
            self.slot(self.d) + 3 * self.slot(self.L_k) + 2 * _SHAPE_GAP + _SHAPE_ARROW
        )  # Q, Kᵀ, scores, weights
        second = self.slot(self.L_k) + 2 * self.slot(self.d) + 2 * _SHAPE_GAP
        height = self.row_height(max(self.L_q, self.d)) + self.row_height(
            max(self.L_q, self.L_k)
        )
        return max(first, second), height


class _ShapeBox:
    """One matrix drawn as a box of rows × cols units, with stacked copies for a batch.

    Its labels sit at fixed places above the largest box its slot can hold: the name
    (which changes only with the mode) and the numeric shape (which changes always).
    """

    def __init__(self, ax: Axes, step: str, max_B: int) -> None:
        from matplotlib.colors import to_rgb

        color = np.asarray(to_rgb(_SHAPE_COLORS[step]))
        front = (*(0.55 + 0.45 * color), 1.0)  # opaque tints of the step's colour
        back = (*(0.80 + 0.20 * color), 1.0)
        n_copies = max_B - 1 if step not in ("W_Q", "W_K", "W_V") else 0
        self.copies = [
            Rectangle((0, 0), 1, 1, facecolor=back, edgecolor=color, linewidth=0.7)
            for _ in range(n_copies)
        ]
        self.box = Rectangle((0, 0), 1, 1, facecolor=front, edgecolor=color, linewidth=1.4)
        if not self.copies:
            self.box.set_hatch("////")  # learned parameters: one matrix for the whole batch
            self.box.set_hatch_linewidth(0.6)
        for patch in (*reversed(self.copies), self.box):  # the back copy first
            ax.add_patch(patch)
        self.name = ax.text(0, 0, "", ha="left", va="bottom", fontsize=10, fontweight="bold")
        self.size = ax.text(0, 0, "", ha="left", va="bottom", fontsize=9, color="0.2")

    def place(
        self, x: float, y: float, rows: int, cols: int, B: int | None, name: str, rise: float
    ) -> float:
        """Draw with the front box's top-left corner at (x, y); return its right edge.

        ``rise`` is the height the tallest stack of copies can take (labels go above it).
        """
        n = min((B or 1) - 1, len(self.copies))
        for k, patch in enumerate(self.copies, start=1):
            patch.set_visible(k <= n)
            patch.set_bounds(x + k * _SHAPE_STEP, y - k * _SHAPE_STEP, cols, rows)
        self.box.set_bounds(x, y, cols, rows)
        batch = () if B is None or not self.copies else (B,)
        self.size.set_position((x, y - rise - 0.3))
        self.size.set_text("(" + ", ".join(str(d) for d in (*batch, rows, cols)) + ")")
        self.name.set_position((x, y - rise - 2.4))
        self.name.set_text(name)
        return x + cols + n * _SHAPE_STEP

    @property
    def dynamic_artists(self) -> list[Artist]:
        return [*reversed(self.copies), self.box, self.size]


class _ShapeEquation:
    """One row of boxes joined by "·", "=" or a softmax arrow, each box in a fixed slot.

    The slots are as wide as the largest box they can hold, so boxes stay in place
    while their sizes change; the operators follow the right edge of the box before.
    """

    def __init__(
        self,
        ax: Axes,
        steps: Sequence[str],
        ops: Sequence[str],
        max_cols: Sequence[int],
        limits: ShapeDiagramLimits,
        captions: Sequence[str] = (),
    ) -> None:
        self.limits = limits
        self.boxes = [_ShapeBox(ax, step, limits.B) for step in steps]
        self.kinds = list(ops)
        # Operators are lines, not text: far cheaper to redraw on every update.
        op_styles = {
            "·": {"marker": "o", "markersize": 3.5, "linestyle": "none"},
            _SOFTMAX_OP: {"marker": ">", "markevery": [1], "markersize": 6, "linewidth": 1.3},
            "=": {"linewidth": 1.6},
        }
        self.ops = [
            ax.plot([], [], color="0.1", solid_capstyle="butt", **op_styles[op])[0] for op in ops
        ]
        self.captions = [  # a word over an operator, e.g. "softmax" over the arrow
            ax.text(0, 0, text, ha="center", va="bottom", fontsize=9, color="0.1")
            for text in list(captions) + [""] * (len(ops) - len(captions))
        ]
        self.xs = [0.0]  # fixed left edges of the slots
        for i, op in enumerate(ops):
            batched = bool(self.boxes[i].copies)
            gap = _SHAPE_ARROW if op == _SOFTMAX_OP else _SHAPE_GAP
            self.xs.append(self.xs[-1] + limits.slot(max_cols[i], batched) + gap)

    def place(self, y: float, items: Sequence[tuple[int, int, str]], B: int | None) -> None:
        """Place the boxes with their tops at y; items: (rows, cols, name) per box."""
        rise = self.limits.rise
        for i, (box, (rows, cols, name)) in enumerate(zip(self.boxes, items, strict=True)):
            right = box.place(self.xs[i], y, rows, cols, B, name, rise)
            if i == len(self.boxes) - 1:
                break
            # The operator sits halfway between this box and the next slot, at the
            # height of the middle of the shorter of the two boxes.
            x_op = (right + self.xs[i + 1]) / 2
            y_op = y + min(rows, items[i + 1][0]) / 2
            kind = self.kinds[i]
            if kind == "·":
                self.ops[i].set_data([x_op], [y_op])
            elif kind == _SOFTMAX_OP:
                self.ops[i].set_data([x_op - 2.2, x_op + 2.0], [y_op, y_op])
            else:  # "=": two short bars
                nan = float("nan")
                self.ops[i].set_data(
                    [x_op - 0.9, x_op + 0.9, nan, x_op - 0.9, x_op + 0.9],
                    [y_op - 0.4, y_op - 0.4, nan, y_op + 0.4, y_op + 0.4],
                )
            self.captions[i].set_position((x_op, y_op - 0.9))

    @property
    def dynamic_artists(self) -> list[Artist]:
        """Everything but the names (which change only with the mode)."""
        boxes = [a for box in self.boxes for a in box.dynamic_artists]
        return boxes + self.ops + [c for c in self.captions if c.get_text()]


class _ProjectionDiagram:
    """x W_Q = Q, x W_K = K, x W_V = V as three rows of boxes (context for K, V if cross)."""

    def __init__(self, ax: Axes, limits: ShapeDiagramLimits) -> None:
        self.limits = limits
        d = limits.d
        self.rows = [
            _ShapeEquation(ax, ["x", w, out], ["·", "="], [d, d, d], limits)
            for w, out in (("W_Q", "Q"), ("W_K", "K"), ("W_V", "V"))
        ]

    def update(self, r: ShapeWalkthrough) -> None:
        lim = self.limits
        source = "x" if r.mode == "self" else "context"
        row_h = lim.row_height(max(lim.L_q, lim.L_k, lim.d))
        for n, (eq, out, d_out) in enumerate(
            zip(self.rows, ("Q", "K", "V"), (r.d_k, r.d_k, r.d_v), strict=True)
        ):
            L, src = (r.L_q, "x") if out == "Q" else (r.L_k, source)
            eq.place(
                lim.rise + _SHAPE_LABEL + n * row_h,
                [(L, r.d_model, src), (r.d_model, d_out, f"W_{out}"), (L, d_out, out)],
                r.B,
            )

    @property
    def dynamic_artists(self) -> list[Artist]:
        return [a for eq in self.rows for a in eq.dynamic_artists]


class _AttentionDiagram:
    """Q · Kᵀ = scores → softmax → weights, and weights · V = output, as boxes."""

    def __init__(self, ax: Axes, limits: ShapeDiagramLimits) -> None:
        self.limits = limits
        d, L_k = limits.d, limits.L_k
        self.scores_row = _ShapeEquation(
            ax, ["Q", "Kᵀ", "scores", "weights"], ["·", "=", _SOFTMAX_OP], [d, L_k, L_k, L_k],
            limits, captions=["", "", "softmax"],
        )  # fmt: skip
        self.output_row = _ShapeEquation(
            ax, ["weights", "V", "output"], ["·", "="], [L_k, d, d], limits
        )

    def update(self, r: ShapeWalkthrough) -> None:
        lim = self.limits
        _check_shape_limits(r, lim)
        top = lim.rise + _SHAPE_LABEL
        self.scores_row.place(
            top,
            [(r.L_q, r.d_k, "Q"), (r.d_k, r.L_k, "Kᵀ"), (r.L_q, r.L_k, "scores ÷ √d_k"),
             (r.L_q, r.L_k, "weights")],
            r.B,
        )  # fmt: skip
        self.output_row.place(
            top + lim.row_height(max(lim.L_q, lim.d)),
            [(r.L_q, r.L_k, "weights"), (r.L_k, r.d_v, "V"), (r.L_q, r.d_v, "output")],
            r.B,
        )

    @property
    def dynamic_artists(self) -> list[Artist]:
        return self.scores_row.dynamic_artists + self.output_row.dynamic_artists


def _check_shape_limits(r: ShapeWalkthrough, lim: ShapeDiagramLimits) -> None:
    too_big = (r.B or 1) > lim.B or r.L_q > lim.L_q or r.L_k > lim.L_k
    if too_big or max(r.d_model, r.d_k, r.d_v) > lim.d:
        raise ValueError(f"{r.title} does not fit the diagram's limits {lim}.")


_SHAPE_SUPTITLES = {
    "self": "Self-attention: the sentence x supplies the queries, the keys and the values",
    "cross": "Cross-attention: x supplies the queries, a second sentence (context) the keys "
    "and the values",
}
_MONO_ADVANCE = 0.602  # width of one DejaVu Sans Mono character, in font sizes (em)


class ShapeWalkthroughView:
    """Attention drawn to scale, with its shape table and a heatmap; updatable in place.

    Four panels: the three projections x W_Q = Q, x W_K = K, x W_V = V (the keys'
    and values' source is ``context`` in cross-attention); the attention itself,
    Q · Kᵀ = scores → softmax → weights and weights · V = output; the shape table;
    and the weights of batch element 0 as a heatmap with token labels (queries on
    y, keys on x). Every box is rows × columns of its matrix in one common unit, so
    sizes compare across boxes and settings; a batched tensor shows B stacked copies,
    a learned matrix (hatched) one. :meth:`update` only changes artists, so a
    dashboard can redraw the same figure for every setting; everything that depends
    on more than the mode is in :attr:`dynamic_artists` (for blitting).

    Args:
        fig: an empty figure; its size is set to fit the panels (about 10.3 × 8.7 in).
        limits: the largest sizes to fit (the dashboard's slider bounds).
        annotate: write each weight in its heatmap cell.

    Source: article section 2.3 (write down the shape of every intermediate result).
    """

    scale = 0.085  # inches per unit (one unit = one entry along a matrix dim)
    table_fontsize = 8.5

    def __init__(
        self, fig: Figure, limits: ShapeDiagramLimits | None = None, *, annotate: bool = True
    ) -> None:
        self.fig = fig
        self.limits = limits = limits or ShapeDiagramLimits()
        s = self.scale
        (pw, ph), (aw, ah) = limits.projection_size, limits.attention_size
        left, top, middle, title_h, table_h, heat_h = 0.25, 0.95, 0.45, 0.35, 2.15, 3.7
        width = left + pw * s + middle + aw * s + 0.15
        height = top + max(ph * s + title_h + table_h, ah * s + title_h + heat_h) + 0.1
        fig.set_size_inches(width, height)
        fig.set_layout_engine("none")

        def rect(x0: float, y_top: float, w: float, h: float) -> list[float]:
            return [x0 / width, 1 - (y_top + h) / height, w / width, h / height]

        self.ax_proj = fig.add_axes(rect(left, top, pw * s, ph * s))
        self.ax_attn = fig.add_axes(rect(left + pw * s + middle, top, aw * s, ah * s))
        for ax, (w, h) in ((self.ax_proj, (pw, ph)), (self.ax_attn, (aw, ah))):
            ax.set_xlim(-0.3, w)
            ax.set_ylim(h, -0.3)  # y grows downwards, like the rows of a matrix
            ax.set_axis_off()
        self.ax_proj.set_title(
            "1 · projections: each token's row times a learned matrix", loc="left", fontsize=11
        )
        self.ax_attn.set_title("2 · attention: softmax(Q Kᵀ / √d_k) V", loc="left", fontsize=11)

        table_w = pw * s + middle - 0.1
        self.ax_table = fig.add_axes(rect(left, top + ph * s + title_h, table_w, table_h))
        self.ax_table.set_axis_off()
        self.ax_table.set_title("4 · the shape table", loc="left", fontsize=11)
        self._table_width_in = table_w
        text = {"ha": "left", "va": "top", "family": "monospace", "fontsize": self.table_fontsize,
                "transform": self.ax_table.transAxes}  # fmt: skip
        self.table_static = self.ax_table.text(0.0, 1.0, "", **text)
        self.table_sizes = self.ax_table.text(0.0, 1.0, "", **text)

        heat_x = left + pw * s + middle + 1.0
        heat_w = min(aw * s - 1.6, 0.58 * limits.L_k)
        self.ax_heat = fig.add_axes(rect(heat_x, top + ah * s + title_h + 0.1, heat_w,
                                         heat_h - 1.05))  # fmt: skip
        self.heatmap = _SizedHeatmap(self.ax_heat, limits.L_q, limits.L_k, annotate=annotate)

        self.projections = _ProjectionDiagram(self.ax_proj, limits)
        self.attention = _AttentionDiagram(self.ax_attn, limits)
        self.suptitle = fig.text(0.01, 1 - 0.22 / height, "", ha="left", va="center",
                                 fontsize=13)  # fmt: skip
        fig.text(
            0.01, 1 - 0.52 / height,
            "Boxes drawn to scale (rows × columns of each matrix); stacked copies: one per "
            "batch element; hatched: learned, shared by the batch.",
            ha="left", va="center", fontsize=9.5, color="0.25",
        )  # fmt: skip

    def background_key(self, result: ShapeWalkthrough) -> object:
        """What the non-dynamic artists depend on: the mode, and whether there is a batch."""
        return (result.mode, result.B is None)

    def update(self, result: ShapeWalkthrough) -> None:
        """Show one setting (e.g. :func:`nb04_shapes.shape_walkthrough`).

        Raises:
            ValueError: a size beyond the view's limits.
        """
        r = result
        self.attention.update(r)  # checks the limits first
        self.projections.update(r)
        self._update_table(r)
        self.heatmap.update(r)
        self.suptitle.set_text(_SHAPE_SUPTITLES[r.mode])

    def _update_table(self, r: ShapeWalkthrough) -> None:
        # Columns that depend only on the mode are one text; the numbers are another,
        # placed after them, so that a blitting dashboard redraws only the numbers.
        header = ("step", "computed as", "shape")
        cells = [header, *((row.step, row.expression, row.symbols) for row in r.rows)]
        widths = [max(len(c[i]) for c in cells) + 2 for i in range(3)]
        self.table_static.set_text(
            "\n".join("".join(c[i].ljust(widths[i]) for i in range(3)).rstrip() for c in cells)
        )
        sizes = ["sizes"] + [
            "(" + ", ".join(str(d) for d in row.shape) + ")" for row in r.rows
        ]
        self.table_sizes.set_text("\n".join(sizes))
        chars = sum(widths)
        self.table_sizes.set_x(
            chars * _MONO_ADVANCE * self.table_fontsize / 72 / self._table_width_in
        )

    @property
    def dynamic_artists(self) -> list[Artist]:
        """The artists that :meth:`update` changes beyond :meth:`background_key`."""
        return [
            *self.projections.dynamic_artists, *self.attention.dynamic_artists, self.table_sizes,
            *self.heatmap.dynamic_artists,
        ]  # fmt: skip


class _SizedHeatmap:
    """An attention heatmap whose numbers of rows and columns can change in place.

    Room is made for max_L_q × max_L_k cells; :meth:`update` shows the current ones,
    filling the axes. The token labels are text artists (not tick labels), so that a
    blitting dashboard can redraw them alone.
    """

    def __init__(self, ax: Axes, max_L_q: int, max_L_k: int, *, annotate: bool) -> None:
        self.ax = ax
        self.annotate = annotate
        self.artists = draw_attention_heatmap(
            ax, np.zeros((max_L_q, max_L_k)), title="3 · the weights of batch element 0",
            annotate=annotate, mask_legend=False,
        )  # fmt: skip
        self.artists.overlay.set_visible(False)  # nothing is masked in this view
        ax.set_autoscale_on(False)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.title.set_fontsize(11)
        ax.set_ylabel("query token i (attending)", labelpad=40)
        self.key_labels = [
            ax.text(j, -0.03, "", transform=ax.get_xaxis_transform(), ha="center", va="top",
                    fontsize=9)
            for j in range(max_L_k)
        ]  # fmt: skip
        self.query_labels = [
            ax.text(-0.03, i, "", transform=ax.get_yaxis_transform(), ha="right",
                    va="center", fontsize=9)
            for i in range(max_L_q)
        ]  # fmt: skip

    def update(self, result: ShapeWalkthrough) -> None:
        w = _as_numpy_2d(result.weights, "weights")
        L_q, L_k = w.shape
        extent = (-0.5, L_k - 0.5, L_q - 0.5, -0.5)
        keep = np.ones(w.shape, dtype=bool)
        self.artists.image.set_data(w)
        self.artists.image.set_extent(extent)
        self.ax.set_xlim(extent[0], extent[1])
        self.ax.set_ylim(extent[2], extent[3])
        for i, row in enumerate(self.artists.texts):
            for j, text in enumerate(row):
                text.set_visible(self.annotate and i < L_q and j < L_k)
        if self.annotate:
            shown = [row[:L_k] for row in self.artists.texts[:L_q]]
            _fill_cells(HeatmapArtists(self.ax, self.artists.image, self.artists.overlay,
                                       shown, None, None), w, keep)  # fmt: skip
            for text in (t for row in shown for t in row):
                text.set_fontsize(8)
        for labels, tokens in ((self.key_labels, result.key_tokens),
                               (self.query_labels, result.query_tokens)):  # fmt: skip
            for n, label in enumerate(labels):
                label.set_visible(n < len(tokens))
                label.set_text(tokens[n] if n < len(tokens) else "")
        source = "the French sentence" if result.mode == "cross" else "the same sentence"
        self.ax.set_xlabel(f"key token j (attended to), from {source}", labelpad=20)

    @property
    def dynamic_artists(self) -> list[Artist]:
        # No mask here: the overlay stays transparent and belongs to the background.
        cells = [t for row in self.artists.texts for t in row] if self.annotate else []
        return [self.artists.image, *cells, *self.key_labels, *self.query_labels]


@_closes_figures_on_error
def plot_shape_walkthrough(result: ShapeWalkthrough, *, annotate: bool = False) -> Figure:
    """A static pyplot rendering of :class:`ShapeWalkthroughView` (end with ``plt.show()``).

    Args:
        result: e.g. ``nb04_shapes.shape_walkthrough(2, 7, None, 10, 6, 4)``;
            its sizes must fit the default :class:`ShapeDiagramLimits`.
        annotate: write each weight in its heatmap cell.

    Returns:
        The pyplot figure.

    Raises:
        ValueError: a size beyond the limits.

    Source: article section 2.3.
    """
    fig = plt.figure()
    view = ShapeWalkthroughView(fig, annotate=annotate)
    view.update(result)
    return fig


@_closes_figures_on_error
def plot_shape_gallery(
    results: Sequence[ShapeWalkthrough], *, annotate: bool = True, suptitle: str | None = None
) -> Figure:
    """Several settings side by side: the attention diagram above the heatmap, to one scale.

    Args:
        results: e.g. a self- and a cross-attention
            :func:`nb04_shapes.shape_walkthrough`; sizes within the default
            :class:`ShapeDiagramLimits`.
        annotate: write each weight in its heatmap cell.
        suptitle: a title over all columns (default: none).

    Returns:
        A pyplot figure with one column per setting (end the cell with ``plt.show()``).

    Raises:
        ValueError: no results, or a size beyond the limits.

    Source: article section 2.3; STYLE.md of this series (heatmap conventions).
    """
    if not results:
        raise ValueError("give at least one result.")
    limits = ShapeDiagramLimits()
    s = ShapeWalkthroughView.scale
    aw, ah = limits.attention_size
    col_w, heat_h, title_h, top = aw * s + 0.35, 3.5, 0.6, 0.3 if suptitle else 0.05
    width, height = col_w * len(results) + 0.2, top + title_h + ah * s + heat_h
    fig = plt.figure(figsize=(width, height))

    def rect(x0: float, y_top: float, w: float, h: float) -> list[float]:
        return [x0 / width, 1 - (y_top + h) / height, w / width, h / height]

    for n, result in enumerate(results):
        x0 = 0.2 + n * col_w
        ax = fig.add_axes(rect(x0, top + title_h, aw * s, ah * s))
        ax.set_xlim(-0.3, aw)
        ax.set_ylim(ah, -0.3)
        ax.set_axis_off()
        ax.set_title(result.title.replace(": ", ":\n", 1), loc="left", fontsize=11)
        diagram = _AttentionDiagram(ax, limits)
        diagram.update(result)
        heat_ax = fig.add_axes(
            rect(x0 + 1.0, top + title_h + ah * s + 0.3, min(aw * s - 1.6, 0.58 * limits.L_k),
                 heat_h - 1.1)
        )  # fmt: skip
        heatmap = _SizedHeatmap(heat_ax, limits.L_q, limits.L_k, annotate=annotate)
        heatmap.update(result)
        heat_ax.set_title("the weights of batch element 0", fontsize=11)
    if suptitle:
        fig.suptitle(suptitle, x=0.01, ha="left", y=1 - 0.2 / height, va="center", fontsize=13)
    return fig


_SUPERSCRIPTS = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


def _power_of_ten_label(value: float, _position: object = None) -> str:
    """'10³' for 1000 (plain text, no mathtext); '' for a value that is not a power of 10."""
    if value <= 0:
        return ""
    exponent = round(float(np.log10(value)))
    if abs(np.log10(value) - exponent) > 1e-9:
        return ""
    return "10" + str(exponent).translate(_SUPERSCRIPTS)


@_closes_figures_on_error
def plot_attention_cost(
    curves: CostCurves,
    *,
    qkv_bytes: torch.Tensor | np.ndarray | None = None,
    title: str | None = None,
    figsize: tuple[float, float] = (10.5, 4.2),
) -> Figure:
    """Multiply-adds and memory of single-head self-attention against L, log-log.

    Left: the projections' multiply-adds (∝ L) and attention's (Q Kᵀ and weights @ V,
    ∝ L²), with the crossover length marked. Right: the bytes of one L × L score
    matrix (∝ L²), and, if given, of Q, K and V together (∝ L).

    Args:
        curves: :func:`nb04_shapes.cost_curves` (L, projection_macs,
            attention_macs, score_matrix_bytes, crossover).
        qkv_bytes: (n,) bytes of Q, K and V for each L, or None.
        title: a title over both panels.
        figsize: inches.

    Returns:
        The pyplot figure (end the cell with ``plt.show()``).

    Source: Vaswani et al. 2017, Table 1; the cost model of _experiments.attention_cost.
    """
    L = _to_numpy(curves.L).astype(float)
    projections = _to_numpy(curves.projection_macs)
    fig, (ax_w, ax_m) = plt.subplots(1, 2, figsize=figsize, layout="constrained")
    ax_w.loglog(L, projections, color="tab:brown", linewidth=2,
                label="projections x W_Q, x W_K, x W_V  (∝ L)")  # fmt: skip
    ax_w.loglog(L, _to_numpy(curves.attention_macs), color="tab:red", linewidth=2,
                label="attention Q Kᵀ and weights V  (∝ L²)")  # fmt: skip
    L_star = float(curves.crossover)
    at_star = float(np.exp(np.interp(np.log(L_star), np.log(L), np.log(projections))))
    ax_w.axvline(L_star, color="0.3", linestyle="--", linewidth=1)
    ax_w.plot([L_star], [at_star], "o", color="black", markersize=6)
    ax_w.annotate(f"crossover L = {L_star:g}", (L_star, at_star), xytext=(8, -16),
                  textcoords="offset points", fontsize=10)  # fmt: skip
    ax_w.set_xlabel("sequence length L (tokens)")
    ax_w.set_ylabel("multiply-adds per sequence")
    ax_w.set_title("work: attention overtakes the projections")
    ax_w.legend(fontsize=9, loc="upper left")
    mib = 2.0**20
    ax_m.loglog(L, _to_numpy(curves.score_matrix_bytes) / mib, color="tab:red", linewidth=2,
                label="one L × L score matrix  (∝ L²)")  # fmt: skip
    if qkv_bytes is not None:
        ax_m.loglog(L, _to_numpy(qkv_bytes) / mib, color="tab:brown", linewidth=2,
                    label="Q, K and V together  (∝ L)")  # fmt: skip
    ax_m.set_xlabel("sequence length L (tokens)")
    ax_m.set_ylabel("memory (MiB)")
    ax_m.set_title("memory held at once, per sequence")
    ax_m.legend(fontsize=9, loc="upper left")
    from matplotlib.ticker import FuncFormatter, NullLocator

    for ax in (ax_w, ax_m):
        ax.grid(True, which="major", color="0.9")
        # One tick per decade is enough to read slopes; the minor ticks of a log axis
        # spanning many decades, and mathtext tick labels, cost most of the drawing time.
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_minor_locator(NullLocator())
            axis.set_major_formatter(FuncFormatter(_power_of_ten_label))
    if title:
        fig.suptitle(title)
    return fig


class ShapeDashboard(Dashboard):
    """Every shape of softmax(Q Kᵀ / √d_k) V, drawn to scale, for sizes the reader picks.

    Controls: ``B`` (1 … 4), ``L_q`` (1 … 7), ``L_k`` (1 … 8, used in cross-attention
    only; disabled in self-attention, where L_k = L_q), ``d_model``, ``d_k``, ``d_v``
    (1 … 12) and ``mode`` ("self" or "cross"). Every change calls
    :func:`nb04_shapes.shape_walkthrough` and redraws, in one figure, the
    projections and the attention as boxes whose sides are the matrices' sizes, the
    shape table, and the weights of batch element 0 as a heatmap with token labels
    (keys from the French sentence in cross-attention).

    Args:
        B, L_q, L_k, d_model, d_k, d_v, mode: the initial setting.
        dpi: resolution of the PNG.

    Attributes:
        result: the :class:`nb04_shapes.ShapeWalkthrough` currently shown.
        view: the :class:`ShapeWalkthroughView` that draws it.

    Raises:
        ValueError: an initial value outside the sliders' bounds, or an unknown mode.

    Source: article section 2.3; Vaswani et al. 2017, eq. (1).
    """

    plain_text = (
        "Dashboard: the shapes of attention for the sizes B, L_q, L_k, d_model, d_k, d_v "
        "and self- or cross-attention. It needs a running Jupyter kernel; the static "
        "figures above show its default setting and a self/cross gallery."
    )
    limits = ShapeDiagramLimits()

    def __init__(
        self,
        B: int = 2,
        L_q: int = 7,
        L_k: int = 8,
        d_model: int = 10,
        d_k: int = 6,
        d_v: int = 4,
        mode: str = "self",
        *,
        dpi: float = 72,
    ) -> None:
        lim = self.limits
        bounds = {"B": lim.B, "L_q": lim.L_q, "L_k": lim.L_k, "d_model": lim.d, "d_k": lim.d,
                  "d_v": lim.d}  # fmt: skip
        initial = {"B": B, "L_q": L_q, "L_k": L_k, "d_model": d_model, "d_k": d_k, "d_v": d_v}
        for name, value in initial.items():
            if not 1 <= value <= bounds[name]:
                raise ValueError(f"{name} must be in 1 … {bounds[name]}, got {value}.")
        if mode not in SHAPE_MODES:
            raise ValueError(f"mode must be one of {SHAPE_MODES}, got {mode!r}.")
        descriptions = {"B": "B (batch)", "L_q": "L_q (queries)", "L_k": "L_k (keys)"}
        controls: dict[str, widgets.ValueWidget] = {
            name: widgets.IntSlider(
                value=initial[name], min=1, max=bounds[name], step=1,
                description=descriptions.get(name, name), style={"description_width": "95px"},
                layout=widgets.Layout(width="300px"),
            )
            for name in initial
        }  # fmt: skip
        controls["mode"] = widgets.ToggleButtons(
            options=[("self-attention", "self"), ("cross-attention", "cross")],
            value=mode, description="mode", style={"description_width": "45px"},
        )  # fmt: skip
        self.result: ShapeWalkthrough = shape_walkthrough(B, L_q, L_k, d_model, d_k, d_v, mode)
        figure = new_figure(dpi=dpi)
        self.view = ShapeWalkthroughView(figure, lim, annotate=False)
        self.view.update(self.result)
        self._renderer = BlitRenderer(figure, self.view.dynamic_artists)
        super().__init__(controls, figure)
        self._wrap_controls()
        controls["mode"].observe(self._on_mode, names="value")
        self._on_mode({"new": mode})
        self.update()

    def _on_mode(self, change: dict) -> None:
        # In self-attention the keys are the queries' own tokens: L_k follows L_q.
        self.controls["L_k"].disabled = change["new"] == "self"

    def render(
        self, B: int, L_q: int, L_k: int, d_model: int, d_k: int, d_v: int, mode: str
    ) -> None:
        """Compute the setting with the pure function and show it."""
        self.result = shape_walkthrough(B, L_q, L_k, d_model, d_k, d_v, mode)
        self.view.update(self.result)

    def to_png(self) -> bytes:
        """Redraw only the changing artists; the mode decides the background."""
        return self._renderer.render(background_key=self.view.background_key(self.result))

    def close(self) -> None:
        """As :meth:`Dashboard.close`, and stop following the mode."""
        if not self.closed:
            self.controls["mode"].unobserve(self._on_mode, names="value")
        super().close()
