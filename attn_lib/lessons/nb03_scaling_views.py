"""Notebook 03's figures and dashboard (matplotlib, ipywidgets).

Used by notebook 03 (Scaling and softmax saturation), sections "3 · Saturation: large scores
make rows one-hot", "4 · Gradients, measured honestly" and "7 · The dashboard: d_k, scaling,
temperature". Its numbers come from ``nb03_scaling``; SCALING_STYLES colours the notebook's
own bar charts too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import LogLocator, NullLocator

from ._dashboard import Dashboard, _selection_slider, _temperature_slider, _toggle_buttons
from ._figures import BlitRenderer, _closes_figures_on_error, new_figure
from .nb03_scaling import (
    SATURATION_D_KS,
    SCALINGS,
    SaturationCurve,
    SaturationRow,
    saturation_curves,
    saturation_row,
)

# One style per scaling in every figure of notebook 03: Okabe-Ito colours (readable by most
# colour-blind readers), told apart by marker and line style too.
SCALING_STYLES: dict[str, dict[str, str]] = {
    "none": {"label": "none (q·k)", "color": "#D55E00", "marker": "o", "linestyle": "-"},
    "sqrt": {"label": "÷ √d_k", "color": "#0072B2", "marker": "s", "linestyle": "-"},
    "linear": {"label": "÷ d_k", "color": "#009E73", "marker": "^", "linestyle": "--"},
}
# The softmax Jacobian has negative entries (−p_i p_j), so it gets a diverging colormap centred
# on 0, never the series' attention colormap (that one is for weights in [0, 1]). Every entry
# of diag(p) − p pᵀ lies in [−1/4, 1/4].
JACOBIAN_CMAP, JACOBIAN_LIMIT = "RdBu_r", 0.25
# stat → (panel title, y label, log scale); "{threshold}" is filled in from the curves.
_STATS: dict[str, tuple[str, str, bool]] = {
    "median_max_weight": ("median largest weight", "weight (0 to 1)", False),
    "median_entropy": ("median entropy of a row", "entropy (nats)", False),
    "saturated_fraction": ("rows with ‖J‖_F < {threshold:g}", "fraction of rows", False),
    "grad_norm_median": ("median ‖∂loss/∂q‖", "gradient norm (log scale)", True),
    "grad_norm_p99": ("99th percentile of ‖∂loss/∂q‖", "gradient norm (log scale)", True),
}
_D_K_TICKS = (1, 4, 16, 64, 256, 1024)
ROW_SEED = 4  # a row whose largest weight is close to the median at every d_k
SATURATION_TEMPERATURES = (0.25, 0.5, 1.0, 2.0, 4.0)


def _d_k_axis(ax: Axes) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xlim(0.75, 1400)
    ax.set_xticks(list(_D_K_TICKS), [str(d) for d in _D_K_TICKS])
    ax.minorticks_off()
    ax.set_xlabel("d_k (log scale)")
    ax.grid(alpha=0.3)


def _reference_lines(ax: Axes, stat: str, L: int) -> None:
    """Dotted lines for the uniform and the one-hot row, where the statistic has them."""
    at = {"transform": ax.get_yaxis_transform(), "fontsize": 9, "ha": "left", "color": "0.3"}
    if stat == "median_max_weight":
        for y, text, va in ((1.0, "one-hot", "bottom"), (1 / L, f"uniform: 1/{L}", "top")):
            ax.axhline(y, color="0.35", linestyle=":", linewidth=1)
            ax.text(0.03, y, text, va=va, **at)
        ax.set_ylim(0.0, 1.12)
    elif stat == "median_entropy":
        ax.axhline(np.log(L), color="0.35", linestyle=":", linewidth=1)
        ax.text(0.03, np.log(L), f"uniform: log {L} = {np.log(L):.2f}", va="bottom", **at)
        ax.set_ylim(0.0, np.log(L) * 1.15)
    elif stat == "saturated_fraction":
        ax.set_ylim(-0.03, 1.03)


def draw_curves(
    ax: Axes, curves: Mapping[str, SaturationCurve], stat: str, *, zorder: float = 2
) -> dict[str, Line2D]:
    """One statistic of nb03_scaling.saturation_curves against d_k, one line per scaling.

    Returns:
        scaling → the Line2D drawn for it.
    """
    first = next(iter(curves.values()))
    title, ylabel, log = _STATS[stat]
    lines = {}
    for scaling, curve in curves.items():
        style = SCALING_STYLES[scaling]
        (lines[scaling],) = ax.plot(
            curve.d_k.numpy(), getattr(curve, stat).numpy(), color=style["color"],
            marker=style["marker"], linestyle=style["linestyle"], label=style["label"],
            markersize=4, linewidth=1.8, zorder=zorder,
        )  # fmt: skip
    _d_k_axis(ax)
    if log:
        ax.set_yscale("log")
    _reference_lines(ax, stat, first.L)
    ax.set_title(title.format(threshold=first.threshold), fontsize=10)
    ax.set_ylabel(ylabel, fontsize=9)
    return lines


@_closes_figures_on_error
def plot_saturation_curves(
    curves: Mapping[str, SaturationCurve],
    stats: Sequence[str] = ("median_max_weight", "median_entropy"),
    scalings: Sequence[str] | None = None,
) -> Figure:
    """Statistics of saturation_curves against d_k, one panel each (log panels share y).

    Args:
        curves: scaling → SaturationCurve. stats: keys of ``_STATS``.
        scalings: the scalings to draw (default: all of ``curves``).

    Returns:
        The pyplot figure (end the cell with ``plt.show()``).

    Source: Vaswani et al. 2017, sec. 3.2.1; article section 2.2.
    """
    chosen = {s: curves[s] for s in (scalings or curves)}
    fig, axes = plt.subplots(1, len(stats), figsize=(3.9 * len(stats), 3.6),
                             layout="constrained", squeeze=False)  # fmt: skip
    log_axes = [ax for ax, stat in zip(axes[0], stats, strict=True) if _STATS[stat][2]]
    for ax in log_axes[1:]:
        ax.sharey(log_axes[0])
    for ax, stat in zip(axes[0], stats, strict=True):
        lines = draw_curves(ax, chosen, stat)
    fig.legend(handles=list(lines.values()), loc="outside lower center", ncols=len(lines),
               frameon=False, title="scores divided by")  # fmt: skip
    first = next(iter(chosen.values()))
    fig.suptitle(f"Over {first.n_rows} random rows of {first.L} keys per d_k "
                 f"(q, k entries N(0, 1), temperature {first.temperature:g})")  # fmt: skip
    return fig


def _bar_axes(ax: Axes, L: int, ylabel: str) -> list[Artist]:
    bars = ax.bar(np.arange(L), np.zeros(L), width=0.75, zorder=3).patches
    ax.set_xticks(range(0, L, 5))
    ax.set_xlabel("key j")
    ax.set_ylabel(ylabel)
    ax.grid(axis="y", alpha=0.3)
    return bars


class SaturationView:
    """One row's scores, weights and Jacobian above three saturation curves, updatable.

    Top: the scores softmax sees (symmetric-log axis), the weights (0 to 1) and the Jacobian
    diag(p) − p pᵀ (diverging colormap, fixed ±1/4). Bottom: median largest weight, median
    ‖∂loss/∂q‖ and saturated fraction against d_k for the three scalings, the current one
    bold, ○ at the current d_k. Every axis is placed once at a fixed position (12 × 7 inch
    figure, no layout engine), so an update redraws only :attr:`dynamic_artists`.
    """

    PANELS = ("median_max_weight", "grad_norm_median", "saturated_fraction")
    GRAD_FLOOR = 1e-10  # smaller medians are drawn on the axis' floor

    def __init__(self, fig: Figure, curves: Mapping[str, SaturationCurve]) -> None:
        self.L = L = next(iter(curves.values())).L
        fig.set_layout_engine("none")
        top = fig.add_gridspec(1, 3, left=0.085, right=0.9, top=0.84, bottom=0.6, wspace=0.35)
        bottom = fig.add_gridspec(1, 3, left=0.085, right=0.985, top=0.47, bottom=0.155,
                                  wspace=0.35)  # fmt: skip
        ax_s, ax_w, ax_j = (fig.add_subplot(top[0, i]) for i in range(3))
        self.score_bars = _bar_axes(ax_s, L, "score s_j (symmetric log scale)")
        ax_s.set_yscale("symlog", linthresh=1.0)
        ax_s.yaxis.set_minor_locator(NullLocator())
        ax_s.set_ylim(-1e3, 1e3)
        ax_s.axhline(0.0, color="0.3", linewidth=0.8)
        self.weight_bars = _bar_axes(ax_w, L, "weight p_j = softmax(s)_j")
        ax_w.set_ylim(0.0, 1.05)
        self.jacobian = ax_j.imshow(np.zeros((L, L)), cmap=JACOBIAN_CMAP, vmin=-JACOBIAN_LIMIT,
                                    vmax=JACOBIAN_LIMIT, interpolation="nearest", aspect="auto")
        ax_j.set(xticks=range(0, L, 5), yticks=range(0, L, 5), xlabel="score s_j",
                 ylabel="weight p_i")  # fmt: skip
        cbar = fig.colorbar(self.jacobian, cax=ax_j.inset_axes([1.04, 0.0, 0.05, 1.0]))
        cbar.set_label("∂p_i/∂s_j (red > 0, blue < 0)")
        self.titles = [ax.set_title(" ", fontsize=10) for ax in (ax_s, ax_w, ax_j)]

        self.lines: dict[str, dict[str, Line2D]] = {}
        self.markers: dict[str, Line2D] = {}
        self.cursors: dict[str, Line2D] = {}
        for i, stat in enumerate(self.PANELS):
            ax = fig.add_subplot(bottom[0, i])
            self.lines[stat] = draw_curves(ax, curves, stat, zorder=3)
            self.cursors[stat] = ax.axvline(1, color="0.4", linewidth=0.8, zorder=3)
            (self.markers[stat],) = ax.plot(
                [1], [1], marker="o", markersize=9, markerfacecolor="none",
                markeredgecolor="black", markeredgewidth=1.8, linestyle="none", zorder=3,
            )  # fmt: skip
            if _STATS[stat][2]:
                ax.set_ylim(self.GRAD_FLOOR, 10.0)
                ax.yaxis.set_major_locator(LogLocator(numticks=7))
                ax.yaxis.set_minor_locator(NullLocator())
                ax.set_ylabel(f"norm (log scale, floor {self.GRAD_FLOOR:g})", fontsize=9)
        fig.legend(handles=list(self.lines[self.PANELS[0]].values()), loc="lower center",
                   ncols=3, frameon=False, fontsize=9, title_fontsize=9,
                   title="scores divided by (bold: the current choice; ○: current d_k)")
        self.suptitle = fig.suptitle(" ", fontsize=11, y=0.985)

    @property
    def dynamic_artists(self) -> list[Artist]:
        """The artists :meth:`update` changes, in drawing order."""
        curves = [a for stat in self.PANELS for a in
                  (*self.lines[stat].values(), self.cursors[stat], self.markers[stat])]
        return [*self.score_bars, *self.weight_bars, self.jacobian, *curves, *self.titles,
                self.suptitle]  # fmt: skip

    def update(self, row: SaturationRow, curves: Mapping[str, SaturationCurve]) -> None:
        """Show one row and the curves of its temperature, the row's scaling highlighted."""
        style = SCALING_STYLES[row.scaling]
        for bars, values in ((self.score_bars, row.scores), (self.weight_bars, row.weights)):
            for bar, v in zip(bars, values.tolist(), strict=True):
                bar.set_height(v)
                bar.set_color(style["color"])
        self.jacobian.set_data(row.jacobian.numpy())
        top = row.scores.topk(2).values.tolist()
        self.titles[0].set_text(f"scores the softmax sees\ntop − second = {top[0] - top[1]:.2f}")
        self.titles[1].set_text(f"weights: max {row.max_weight:.2f}\n"
                                f"entropy {row.entropy:.2f} nats")  # fmt: skip
        self.titles[2].set_text(f"Jacobian: ‖J‖_F = {row.jacobian_norm:.1e}\n"
                                f"‖∂L/∂q‖ = {row.grad_norm:.1e}")  # fmt: skip
        i = SATURATION_D_KS.index(row.d_k)
        for stat in self.PANELS:
            floor = self.GRAD_FLOOR if _STATS[stat][2] else -np.inf
            for scaling, line in self.lines[stat].items():
                y = np.maximum(getattr(curves[scaling], stat).numpy(), floor)
                line.set_data(curves[scaling].d_k.numpy(), y)
                line.set_linewidth(2.6 if scaling == row.scaling else 1.0)
                line.set_alpha(1.0 if scaling == row.scaling else 0.35)
                if scaling == row.scaling:
                    self.markers[stat].set_data([row.d_k], [y[i]])
            self.cursors[stat].set_xdata([row.d_k, row.d_k])
        n_rows = curves[row.scaling].n_rows
        self.suptitle.set_text(
            f"d_k = {row.d_k}, scores {style['label']}, temperature {row.temperature:g}: "
            f"one row of {self.L} keys (top); medians over {n_rows} rows (bottom)"
        )


@lru_cache(maxsize=len(SATURATION_TEMPERATURES))
def curves_at(temperature: float) -> dict[str, SaturationCurve]:
    """The dashboard's curves at one temperature: the notebook's draws (seed 0), all scalings."""
    return saturation_curves(SATURATION_D_KS, SCALINGS, temperature=temperature)


class SaturationDashboard(Dashboard):
    """Notebook 03's dashboard: d_k, scaling and temperature → one row and the curves.

    Controls: ``d_k`` (a SelectionSlider over 1, 2, 4, …, 1024), ``scaling`` (ToggleButtons
    "scores divided by": none, ÷ √d_k, ÷ d_k) and ``temperature`` (a SelectionSlider over
    :data:`SATURATION_TEMPERATURES`, an extra divisor of the scores). A change shows
    :func:`nb03_scaling.saturation_row` (seed :data:`ROW_SEED`) and the curves of its
    temperature (:func:`curves_at`, computed once per temperature) in a :class:`SaturationView`.

    Attributes:
        row: the SaturationRow shown. view: the SaturationView that draws it.

    Source: Vaswani et al. 2017, sec. 3.2.1; article section 2.2.
    """

    plain_text = (
        "Dashboard: d_k, scaling (none, ÷√d_k, ÷d_k) and temperature → one row's scores, "
        "softmax weights and Jacobian, and the saturation curves against d_k. It needs a "
        "running Jupyter kernel; the static figures above show its default setting and a "
        "gallery of rows."
    )

    def __init__(
        self, d_k: int = 64, scaling: str = "sqrt", temperature: float = 1.0, *, dpi: float = 80
    ) -> None:
        labels = {"none": "none", "sqrt": "÷ √d_k", "linear": "÷ d_k"}
        controls = {
            "d_k": _selection_slider([(str(d), d) for d in SATURATION_D_KS], d_k, "d_k"),
            "scaling": _toggle_buttons([(labels[s], s) for s in SCALINGS], scaling,
                                       "scores divided by", "70px"),
            "temperature": _temperature_slider(SATURATION_TEMPERATURES, temperature,
                                               "temperature"),
        }  # fmt: skip
        figure = new_figure(figsize=(10.5, 6.6), dpi=dpi)  # 840 px: the notebook's width
        self.view = SaturationView(figure, curves_at(temperature))
        self.render(d_k, scaling, temperature)
        self._renderer = BlitRenderer(figure, self.view.dynamic_artists)
        super().__init__(controls, figure)
        self.update()

    def render(self, d_k: int, scaling: str, temperature: float) -> None:
        """Compute the row for this setting and redraw it with its temperature's curves."""
        self.row = saturation_row(d_k, scaling, temperature, seed=ROW_SEED)
        self.view.update(self.row, curves_at(temperature))

    def to_png(self) -> bytes:
        """Redraw only the row panels, the curves' data, the markers and the titles."""
        return self._renderer.render()
