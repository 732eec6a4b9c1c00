"""Notebook 04's figures and dashboard (matplotlib, ipywidgets).

Used by notebook 04 (One formula, every shape), section "4 · The shape dashboard". Its shape
tables come from ``nb04_shapes``.
"""

from __future__ import annotations

from collections.abc import Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from ..shapes import fmt_shape
from ._dashboard import Dashboard
from ._figures import _closes_figures_on_error, new_figure
from .nb04_shapes import ShapeTable, shape_table

# The sliders' bounds; the drawing's scale is set for the largest sizes, so boxes compare
# across settings.
LIMITS = {"B": 4, "L_q": 8, "L_k": 8, "d_model": 12, "d_k": 12, "d_v": 12}
# Box colours: inputs grey, learned matrices brown, then one colour per intermediate.
_COLORS = {
    "x": "0.45", "context": "0.45", "W_Q": "tab:brown", "W_K": "tab:brown", "W_V": "tab:brown",
    "Q": "tab:blue", "K": "tab:orange", "Kᵀ": "tab:orange", "V": "tab:green",
    "scores": "tab:red", "weights": "tab:olive", "output": "tab:purple",
}  # fmt: skip
_COPY = 0.7  # offset of each stacked batch copy, in units (one unit = one matrix entry)
_RISE = _COPY * (LIMITS["B"] - 1)  # room taken by the tallest stack of copies
_SLOT = 12 + _RISE + 0.5  # horizontal room of one box, its copies included
_GAP, _ARROW = 5.0, 9.0  # between two boxes: for "·" or "=", for the softmax arrow
_LABEL = 4.8  # room above a stack for its name and shape
_ROW = _LABEL + _RISE + 12 + 2.0  # one equation row
_MARGIN = 7.0  # between the projections and the attention
_SCALE = 0.075  # inches per unit
_LEGEND = ("Boxes drawn to scale (rows × columns of each matrix); stacked copies: one per "
           "batch element; hatched: learned, one matrix for the whole batch.")  # fmt: skip


def _box(ax: Axes, x: float, y: float, step: str, rows: int, cols: int, B: int | None) -> float:
    """One matrix, rows × cols units, top-left corner at (x, y); B stacked copies unless it is
    learned (hatched: one for the batch). Returns its right edge."""
    color = np.asarray(to_rgb(_COLORS[step]))
    learned = step.startswith("W_")
    n = 0 if learned or B is None else B - 1
    for c in range(n, -1, -1):  # the back copy first
        face = (0.80 + 0.20 * color) if c else (0.55 + 0.45 * color)
        ax.add_patch(Rectangle((x + c * _COPY, y - c * _COPY), cols, rows, facecolor=face,
                               edgecolor=color, linewidth=0.7 if c else 1.4,
                               hatch="////" if learned else None))  # fmt: skip
    shape = (rows, cols) if learned or B is None else (B, rows, cols)
    ax.text(x, y - _RISE - 0.3, fmt_shape(shape), ha="left", va="bottom", fontsize=9, color="0.2")
    ax.text(x, y - _RISE - 2.5, step, ha="left", va="bottom", fontsize=10, fontweight="bold")
    return x + cols + n * _COPY


def _equation(
    ax: Axes, x: float, y: float, items: Sequence[tuple[str, int, int]], ops: str, B: int | None
) -> None:
    """Boxes (step, rows, cols) in fixed slots from x, joined by ops: "•", "=" or "→" (softmax)."""
    for i, (step, rows, cols) in enumerate(items):
        right = _box(ax, x, y, step, rows, cols, B)
        if i == len(ops):
            break
        x += _SLOT + (_ARROW if ops[i] == "→" else _GAP)
        mid_x, mid_y = (right + x) / 2, y + min(rows, items[i + 1][1]) / 2
        if ops[i] == "→":
            ax.annotate("", (mid_x + 2.6, mid_y), (mid_x - 2.6, mid_y),
                        arrowprops={"arrowstyle": "->", "color": "0.1"})  # fmt: skip
            ax.text(mid_x, mid_y - 0.8, "softmax", ha="center", va="bottom", fontsize=9)
        else:
            ax.text(mid_x, mid_y, ops[i], ha="center", va="center", fontsize=16 if ops[i] == "=" else 12)


def _attention(ax: Axes, t: ShapeTable, x: float) -> float:
    """Q · Kᵀ = scores → weights and weights · V = output from x; returns the right edge."""
    _equation(ax, x, _LABEL + _RISE, [("Q", t.L_q, t.d_k), ("Kᵀ", t.d_k, t.L_k),
              ("scores", t.L_q, t.L_k), ("weights", t.L_q, t.L_k)], "•=→", t.B)  # fmt: skip
    _equation(ax, x, _LABEL + _RISE + _ROW, [("weights", t.L_q, t.L_k), ("V", t.L_k, t.d_v),
              ("output", t.L_q, t.d_v)], "•=", t.B)  # fmt: skip
    return x + 4 * _SLOT + 2 * _GAP + _ARROW


def draw_shapes(fig: Figure, t: ShapeTable) -> None:
    """Draw the projections, the attention (boxes to scale) and the shape table on ``fig``.

    The figure is cleared first, so a dashboard can redraw the same figure for every setting.

    Source: article section 2.3 (write down the shape of every intermediate result).
    """
    fig.clear()
    source = "context" if t.mode == "cross" else "x"
    width = 3 * _SLOT + 2 * _GAP + _MARGIN + 4 * _SLOT + 2 * _GAP + _ARROW
    height = 2 * _ROW + 28  # the third row: the projection of V, and the shape table
    header = 1.0  # inches for the three title lines
    fig.set_size_inches(width * _SCALE + 0.3, height * _SCALE + header)
    fig.set_layout_engine("none")
    ax = fig.add_axes((0.15 / fig.get_figwidth(), 0, width * _SCALE / fig.get_figwidth(),
                       height * _SCALE / fig.get_figheight()))  # fmt: skip
    ax.set_xlim(-0.5, width)
    ax.set_ylim(height, -0.5)  # y grows downwards, like the rows of a matrix
    ax.set_axis_off()
    for n, (out, L, d_out) in enumerate((("Q", t.L_q, t.d_k), ("K", t.L_k, t.d_k),
                                         ("V", t.L_k, t.d_v))):  # fmt: skip
        first = "x" if out == "Q" else source
        _equation(ax, 0, _LABEL + _RISE + n * _ROW, [(first, L, t.d_model),
                  (f"W_{out}", t.d_model, d_out), (out, L, d_out)], "•=", t.B)  # fmt: skip
    x_attention = 3 * _SLOT + 2 * _GAP + _MARGIN
    _attention(ax, t, x_attention)
    ax.text(x_attention, 2 * _ROW + 1.0, str(t), ha="left", va="top", family="monospace",
            fontsize=8)  # fmt: skip
    title = ("Self-attention: x supplies the queries, the keys and the values" if t.mode == "self"
             else "Cross-attention: x supplies the queries, the context the keys and the values")
    for y, text, size in ((0.22, title, 13), (0.5, t.title, 10), (0.75, _LEGEND, 9.5)):
        fig.text(0.01, 1 - y / fig.get_figheight(), text, va="center", fontsize=size)


@_closes_figures_on_error
def plot_shapes(t: ShapeTable) -> Figure:
    """:func:`draw_shapes` in a new pyplot figure (end the cell with ``plt.show()``)."""
    fig = plt.figure()
    draw_shapes(fig, t)
    return fig


@_closes_figures_on_error
def plot_shape_gallery(tables: Sequence[ShapeTable], *, suptitle: str) -> Figure:
    """The attention of several settings side by side, boxes to one scale (pyplot figure)."""
    width, height = 4 * _SLOT + 2 * _GAP + _ARROW, 2 * _ROW
    col = width * _SCALE + 0.4
    fig = plt.figure(figsize=(w := col * len(tables) + 0.15, h := height * _SCALE + 0.9))
    for n, t in enumerate(tables):
        ax = fig.add_axes(((0.15 + n * col) / w, 0, width * _SCALE / w, height * _SCALE / h))
        ax.set_xlim(-0.5, width)
        ax.set_ylim(height, -0.5)
        ax.set_axis_off()
        ax.set_title(t.title.replace(": ", ":\n", 1), loc="left", fontsize=10)
        _attention(ax, t, 0)
    fig.suptitle(suptitle, x=0.01, ha="left", y=1 - 0.15 / fig.get_figheight(), fontsize=13)
    return fig


class ShapeDashboard(Dashboard):
    """Every shape of softmax(Q Kᵀ / √d_k) V, drawn to scale, for sizes the reader picks.

    Controls: the sizes within :data:`LIMITS` (L_k only in cross-attention) and ``mode``.
    Every change calls :func:`nb04_shapes.shape_table` (kept as ``result``) and redraws
    :func:`draw_shapes`. Source: article section 2.3; Vaswani et al. 2017, eq. (1).
    """

    plain_text = (
        "Dashboard: the shapes of attention for the sizes B, L_q, L_k, d_model, d_k, d_v "
        "and self- or cross-attention. It needs a running Jupyter kernel; the static "
        "figures above show its default setting and a self/cross gallery."
    )

    def __init__(self, dpi: float = 72) -> None:
        initial = {"B": 2, "L_q": 7, "L_k": 8, "d_model": 10, "d_k": 6, "d_v": 4}
        controls: dict[str, widgets.ValueWidget] = {
            name: widgets.IntSlider(value=value, min=1, max=LIMITS[name], description=name,
                                    style={"description_width": "60px"},
                                    layout=widgets.Layout(width="260px"))
            for name, value in initial.items()
        }  # fmt: skip
        controls["mode"] = widgets.ToggleButtons(
            options=[("self-attention", "self"), ("cross-attention", "cross")], value="self",
            description="mode", style={"description_width": "45px"},
        )  # fmt: skip
        super().__init__(controls, new_figure(dpi=dpi))
        self._wrap_controls()
        self.update()

    def render(self, mode: str, **sizes: int) -> None:
        """Compute the table with the pure function and redraw the figure."""
        self.controls["L_k"].disabled = mode == "self"  # self-attention: L_k = L_q
        self.result: ShapeTable = shape_table(**sizes, mode=mode)
        draw_shapes(self.figure, self.result)
