"""Notebook 04's figures and dashboard (matplotlib, ipywidgets).

Used by notebook 04 (One formula, every shape), section "4 · The shape dashboard". Its shape
tables come from ``nb04_shapes``.
"""

from __future__ import annotations

from collections.abc import Sequence

import ipywidgets as widgets
import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from ..checks import fmt_shape
from ._dashboard import Dashboard
from ._figures import BlitRenderer, _closes_figures_on_error, figure, new_figure
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
_MONO_ADVANCE = 0.602  # DejaVu Sans Mono's advance, in em (matplotlib's monospace font)
_LEGEND = ("Boxes drawn to scale (rows × columns of each matrix); stacked copies: one per "
           "batch element; hatched: learned, one matrix for the whole batch.")  # fmt: skip


class _Box:
    """One matrix drawn to scale: up to LIMITS["B"] stacked copies (hatched and single if
    learned), its name and its shape above; :meth:`show` resizes it."""

    def __init__(self, ax: Axes, x: float, y: float, step: str) -> None:
        self.x, self.y = x, y
        color = np.asarray(to_rgb(_COLORS[step]))
        learned = step.startswith("W_")
        self.rects = [  # the back copy first
            ax.add_patch(Rectangle((x + c * _COPY, y - c * _COPY), 1, 1,
                                   facecolor=(0.80 + 0.20 * color) if c else (0.55 + 0.45 * color),
                                   edgecolor=color, linewidth=0.7 if c else 1.4,
                                   hatch="////" if learned else None))
            for c in range(0 if learned else LIMITS["B"] - 1, -1, -1)
        ]  # fmt: skip
        self.shape = ax.text(x, y - _RISE - 0.3, "", ha="left", va="bottom", fontsize=10,
                             color="0.2")  # fmt: skip
        self.name = ax.text(x, y - _RISE - 2.8, step, ha="left", va="bottom", fontsize=10,
                            fontweight="bold")  # fmt: skip

    def show(self, step: str, rows: int, cols: int, B: int | None) -> float:
        """Draw ``step`` as rows × cols, B copies; return its right edge."""
        learned = len(self.rects) == 1
        n = 0 if learned or B is None else B - 1
        for c, rect in zip(range(len(self.rects) - 1, -1, -1), self.rects, strict=True):
            rect.set(visible=c <= n, width=cols, height=rows)
        self.shape.set_text(fmt_shape((rows, cols) if learned or B is None else (B, rows, cols)))
        self.name.set_text(step)
        return self.x + cols + n * _COPY


class _Equation:
    """Boxes in fixed slots from (x, y), joined by ops "•", "=" or "→" (softmax), centred
    between the boxes they join; :meth:`show` resizes them."""

    def __init__(self, ax: Axes, x: float, y: float, steps: Sequence[str], ops: str) -> None:
        self.ops, self.boxes, self.signs = ops, [], []
        for i, step in enumerate(steps):
            self.boxes.append(_Box(ax, x, y, step))
            if i == len(ops):
                break
            x += _SLOT + (_ARROW if ops[i] == "→" else _GAP)
            if ops[i] == "→":
                self.arrow = ax.annotate(
                    "", (0, 0), (0, 0), arrowprops={"arrowstyle": "->", "color": "0.1"}
                )
                self.signs.append(ax.text(0, 0, "softmax", ha="center", va="bottom", fontsize=10))
            else:
                self.signs.append(ax.text(0, 0, ops[i], ha="center", va="center",
                                          fontsize=16 if ops[i] == "=" else 12))  # fmt: skip

    def show(self, items: Sequence[tuple[str, int, int]], B: int | None) -> None:
        """Show each box as (step, rows, cols) with B copies."""
        rights = [box.show(*item, B) for box, item in zip(self.boxes, items, strict=True)]
        for i, sign in enumerate(self.signs):
            mid_x = (rights[i] + self.boxes[i + 1].x) / 2
            mid_y = self.boxes[i].y + min(items[i][1], items[i + 1][1]) / 2
            if self.ops[i] == "→":
                self.arrow.xy, self.arrow.xyann = (mid_x + 2.6, mid_y), (mid_x - 2.6, mid_y)
                sign.set_position((mid_x, mid_y - 0.8))
            else:
                sign.set_position((mid_x, mid_y))


class _Attention:
    """Q · Kᵀ = scores → weights and weights · V = output, from x."""

    def __init__(self, ax: Axes, x: float) -> None:
        y = _LABEL + _RISE
        self.rows = (_Equation(ax, x, y, ("Q", "Kᵀ", "scores", "weights"), "•=→"),
                     _Equation(ax, x, y + _ROW, ("weights", "V", "output"), "•="))  # fmt: skip

    def show(self, t: ShapeTable) -> None:
        self.rows[0].show([("Q", t.L_q, t.d_k), ("Kᵀ", t.d_k, t.L_k), ("scores", t.L_q, t.L_k),
                           ("weights", t.L_q, t.L_k)], t.B)  # fmt: skip
        self.rows[1].show([("weights", t.L_q, t.L_k), ("V", t.L_k, t.d_v),
                           ("output", t.L_q, t.d_v)], t.B)  # fmt: skip


class ShapeView:
    """The projections, the attention (boxes to scale) and the shape table, updatable.

    The figure is sized and laid out once (the slots are fixed; the boxes grow within them),
    so an update only resizes boxes and rewrites texts.
    """

    def __init__(self, fig: Figure) -> None:
        width = 3 * _SLOT + 2 * _GAP + _MARGIN + 4 * _SLOT + 2 * _GAP + _ARROW
        height = 2 * _ROW + 32  # the third row: the projection of V, and the shape table
        header = 1.0  # inches for the three title lines
        fig.set_size_inches(width * _SCALE + 0.3, height * _SCALE + header)
        fig.set_layout_engine("none")
        ax = fig.add_axes((0.15 / fig.get_figwidth(), 0, width * _SCALE / fig.get_figwidth(),
                           height * _SCALE / fig.get_figheight()))  # fmt: skip
        ax.set_xlim(-0.5, width)
        ax.set_ylim(height, -0.5)  # y grows downwards, like the rows of a matrix
        ax.set_axis_off()
        self.projections = [_Equation(ax, 0, _LABEL + _RISE + n * _ROW, ("x", f"W_{out}", out),
                                      "•=") for n, out in enumerate("QKV")]  # fmt: skip
        x_attention = 3 * _SLOT + 2 * _GAP + _MARGIN
        self.attention = _Attention(ax, x_attention)
        # The shape table in two texts: each step, how it is computed and its shape (these
        # change with the mode only), then the sizes. An update redraws the lines that changed;
        # the others come from the text cache. (Both columns have parentheses on the same
        # lines, so their lines are spaced alike.)
        self.table = [ax.text(x_attention, 2 * _ROW + 1.0, "", ha="left", va="top",
                              family="monospace", fontsize=10) for _ in range(2)]  # fmt: skip
        self.titles = [fig.text(0.01, 1 - y / fig.get_figheight(), "", va="center", fontsize=size)
                       for y, size in ((0.22, 13), (0.5, 10), (0.75, 10))]  # fmt: skip
        self.titles[2].set_text(_LEGEND)

    def update(self, t: ShapeTable) -> None:
        source = "context" if t.mode == "cross" else "x"
        for out, equation, (L, d_out) in zip("QKV", self.projections, ((t.L_q, t.d_k),
                                             (t.L_k, t.d_k), (t.L_k, t.d_v)), strict=True):  # fmt: skip
            first = "x" if out == "Q" else source
            equation.show([(first, L, t.d_model), (f"W_{out}", t.d_model, d_out),
                           (out, L, d_out)], t.B)  # fmt: skip
        self.attention.show(t)
        lines = str(t).split("\n")
        start = lines[0].index("sizes")  # the last column of str(ShapeTable)
        left, right = self.table
        left.set_text("\n".join(line[:start].rstrip() for line in lines))
        right.set_text("\n".join(line[start:] for line in lines))
        right.set_x(left.get_position()[0] + start * _MONO_ADVANCE * 10 / 72 / _SCALE)
        self.titles[0].set_text(
            "Self-attention: x supplies the queries, the keys and the values"
            if t.mode == "self"
            else "Cross-attention: x supplies the queries, the context the keys and the values"
        )
        self.titles[1].set_text(t.title)

    @property
    def dynamic_artists(self) -> list[Artist]:
        """What :meth:`update` changes with the sizes, boxes first (as a full draw orders
        them); the names and the first title change with the mode only, the legend never."""
        equations = [*self.projections, *self.attention.rows]
        boxes = [box for equation in equations for box in equation.boxes]
        arrows = [e.arrow for e in equations if hasattr(e, "arrow")]
        return [*(r for box in boxes for r in box.rects), *(box.shape for box in boxes),
                *(sign for e in equations for sign in e.signs), *arrows, *self.table,
                self.titles[1]]  # fmt: skip


@_closes_figures_on_error
def plot_shapes(t: ShapeTable) -> Figure:
    """:class:`ShapeView` of one setting in a new pyplot figure, at the dashboard's 72 dpi (10.7
    inches: 770 px, within the notebook column; 10 pt text is 10 px). Source: article section 2.3."""
    fig = figure(dpi=72)
    ShapeView(fig).update(t)
    return fig


@_closes_figures_on_error
def plot_shape_gallery(tables: Sequence[ShapeTable], *, suptitle: str) -> Figure:
    """The attention of several settings one under the other, boxes to one scale (pyplot
    figure, 7 inches wide)."""
    width, height = 4 * _SLOT + 2 * _GAP + _ARROW, 2 * _ROW
    row = height * _SCALE + 0.55  # inches: the drawing and its two-line title
    fig = figure(figsize=(w := width * _SCALE + 0.3, h := row * len(tables) + 0.35))
    for n, t in enumerate(tables):
        bottom = h - 0.35 - (n + 1) * row
        ax = fig.add_axes((0.15 / w, bottom / h, width * _SCALE / w, height * _SCALE / h))
        ax.set_xlim(-0.5, width)
        ax.set_ylim(height, -0.5)
        ax.set_axis_off()
        ax.set_title(t.title.replace(": ", ":\n", 1), loc="left", fontsize=10)
        _Attention(ax, 0).show(t)
    fig.suptitle(suptitle, x=0.01, ha="left", y=1 - 0.15 / fig.get_figheight(), fontsize=13)
    return fig


class ShapeDashboard(Dashboard):
    """Every shape of softmax(Q Kᵀ / √d_k) V, drawn to scale, for sizes within :data:`LIMITS`
    (L_k in cross-attention only) and the mode; ``result`` is the :class:`ShapeTable` shown."""

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
        figure = new_figure(dpi=dpi)
        self.view = ShapeView(figure)
        self._renderer = BlitRenderer(figure, self.view.dynamic_artists)
        super().__init__(controls, figure)
        self.update()

    def render(self, mode: str, **sizes: int) -> None:
        """Compute the table with the pure function and update the figure."""
        self.controls["L_k"].disabled = mode == "self"  # self-attention: L_k = L_q
        self.result: ShapeTable = shape_table(**sizes, mode=mode)
        self.view.update(self.result)

    def to_png(self) -> bytes:
        """Redraw what the sizes change over the mode's cached names, titles and legend."""
        return self._renderer.render(background_key=self.result.mode)
