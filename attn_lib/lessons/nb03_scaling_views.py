"""Notebook 03's figures and dashboard (matplotlib, ipywidgets), its numbers from ``nb03_scaling``.

Used by notebook 03 (Scaling and softmax saturation), sections "3 · Saturation: large scores
make rows one-hot" (SCALING_STYLES colours its bar chart too), "4 · Gradients, measured
honestly" and "7 · The dashboard: d_k, scaling, temperature".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

from ._dashboard import Dashboard, _selection_slider, _temperature_slider, _toggle_buttons
from ._figures import BlitRenderer, _closes_figures_on_error, figure, new_figure
from .nb03_scaling import (
    SATURATION_D_KS,
    SCALINGS,
    SaturationCurve,
    saturation_curves,
    saturation_row,
)

# One style per scaling in every figure of notebook 03: Okabe-Ito colours, marker, line style.
SCALING_STYLES: dict[str, dict[str, str]] = {
    "none": {"label": "none (q·k)", "color": "#D55E00", "marker": "o", "linestyle": "-"},
    "sqrt": {"label": "÷ √d_k", "color": "#0072B2", "marker": "s", "linestyle": "-"},
    "linear": {"label": "÷ d_k", "color": "#009E73", "marker": "^", "linestyle": "--"},
}
# The Jacobian has negative entries (−p_i p_j): a diverging colormap centred on 0, not the
# attention colormap (weights in [0, 1]). Every entry of diag(p) − p pᵀ lies in [−1/4, 1/4].
JACOBIAN_CMAP, JACOBIAN_LIMIT = "RdBu_r", 0.25
# stat → (panel title, y label, y limits; None: a log scale); "{threshold}" from the curves.
_STATS: dict[str, tuple[str, str, tuple[float, float] | None]] = {
    "median_max_weight": ("median largest weight", "weight (0 to 1)", (0.0, 1.12)),
    "median_entropy": ("median entropy of a row", "entropy (nats)", (0.0, 3.2)),
    "saturated_fraction": ("rows with ‖J‖_F < {threshold:g}", "fraction of rows", (-0.03, 1.03)),
    "grad_norm_median": ("median ‖∂loss/∂q‖", "gradient norm (log scale)", None),
    "grad_norm_p99": ("99th percentile of ‖∂loss/∂q‖", "gradient norm (log scale)", None),
}
_D_K_TICKS = (1, 4, 16, 64, 256, 1024)
ROW_SEED = 4  # a row whose largest weight is close to the median at every d_k
SATURATION_TEMPERATURES = (0.25, 0.5, 1.0, 2.0, 4.0)
# Powers of ten as 10⁻⁴: plain text, so a log axis needs no mathtext layout.
_POWER_OF_TEN = FuncFormatter(lambda v, _: "10" + str(round(math.log10(v))).translate(
    str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")))  # fmt: skip


def _axes_row(fig: Figure, n: int, top: float, bottom: float, right: float = 0.985) -> list[Axes]:
    """n axes side by side at fixed places (no layout engine: cheap to draw, never moves)."""
    grid = fig.add_gridspec(1, n, left=0.085 if n > 2 else 0.1, right=right, top=top,
                            bottom=bottom, wspace=0.35)  # fmt: skip
    return [fig.add_subplot(grid[0, i]) for i in range(n)]


def draw_curves(
    ax: Axes, curves: Mapping[str, SaturationCurve], stat: str, *, zorder: float = 2
) -> dict[str, Line2D]:
    """One statistic of saturation_curves against d_k, one line per scaling (returned by
    scaling), with dotted lines for the one-hot and the uniform row where it has them."""
    first = next(iter(curves.values()))
    L, (title, ylabel, ylim) = first.L, _STATS[stat]
    references = {
        "median_max_weight": [(1.0, "one-hot", "bottom"), (1 / L, f"uniform: 1/{L}", "top")],
        "median_entropy": [(math.log(L), f"uniform: log {L} = {math.log(L):.2f}", "bottom")],
    }
    for y, text, va in references.get(stat, []):
        ax.axhline(y, color="0.35", linestyle=":", linewidth=1)
        ax.text(0.03, y, text, va=va, transform=ax.get_yaxis_transform(), fontsize=9, color="0.3")
    lines = {}
    for scaling, curve in curves.items():
        style = SCALING_STYLES[scaling]
        (lines[scaling],) = ax.plot(
            curve.d_k.numpy(), getattr(curve, stat).numpy(), color=style["color"],
            marker=style["marker"], linestyle=style["linestyle"], label=style["label"],
            markersize=4, linewidth=1.8, zorder=zorder,
        )  # fmt: skip
    ax.set_xscale("log", base=2)
    ax.set_xlim(0.75, 1400)
    ax.set_xticks(list(_D_K_TICKS), [str(d) for d in _D_K_TICKS])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("d_k (log scale)")
    ax.grid(alpha=0.3)
    if ylim is None:
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(numticks=7))
        ax.yaxis.set_minor_locator(NullLocator())
        ax.yaxis.set_major_formatter(_POWER_OF_TEN)
    else:
        ax.set_ylim(*ylim)
    ax.set_title(title.format(threshold=first.threshold), fontsize=10)
    ax.set_ylabel(ylabel, fontsize=9)
    return lines


@_closes_figures_on_error
def plot_saturation_curves(
    curves: Mapping[str, SaturationCurve],
    stats: Sequence[str] = ("median_max_weight", "median_entropy"),
    scalings: Sequence[str] | None = None,
) -> Figure:
    """Statistics (keys of ``_STATS``) of saturation_curves against d_k, one panel each, log
    panels sharing y, for ``scalings`` (default: all); a pyplot figure.

    Source: Vaswani et al. 2017, sec. 3.2.1; article section 2.2.
    """
    chosen = {s: curves[s] for s in (scalings or curves)}
    fig = figure(figsize=(min(3.9 * len(stats), 8.25), 3.8))  # ≤ 840 px at 100 dpi
    axes = _axes_row(fig, len(stats), top=0.84, bottom=0.27)
    log_axes = [ax for ax, stat in zip(axes, stats, strict=True) if _STATS[stat][2] is None]
    for ax in log_axes[1:]:
        ax.sharey(log_axes[0])
    for ax, stat in zip(axes, stats, strict=True):
        lines = draw_curves(ax, chosen, stat)
    for ax in log_axes[1:]:  # the shared scale is labelled once
        ax.set_ylabel("")
        ax.tick_params(labelleft=False)
    fig.legend(handles=list(lines.values()), loc="lower center", ncols=len(lines),
               frameon=False, title="scores divided by")  # fmt: skip
    first = next(iter(chosen.values()))
    fig.suptitle(f"Over {first.n_rows} random rows of {first.L} keys per d_k "
                 f"(q, k entries N(0, 1), temperature {first.temperature:g})")  # fmt: skip
    return fig


def _bar_axes(ax: Axes, L: int, ylabel: str) -> list[Artist]:
    bars = ax.bar(np.arange(L), np.zeros(L), width=0.75, zorder=3).patches
    ax.set(xticks=range(0, L, 5), xlabel="key j", ylabel=ylabel)
    ax.grid(axis="y", alpha=0.3)
    return bars


class SaturationDashboard(Dashboard):
    """d_k, scaling ("scores divided by") and temperature (an extra divisor) → ``row``, the
    saturation_row (seed ROW_SEED) drawn on top: scores (symmetric log), weights, Jacobian
    (±1/4); below, three curves against d_k, the current scaling bold, ○ at the current d_k.
    ``curves`` (temperature → {scaling: SaturationCurve}) are computed when it is built and
    the axes never move, so a change computes one row and redraws only what it changes.

    Source: Vaswani et al. 2017, sec. 3.2.1; article section 2.2.
    """

    plain_text = ("Dashboard: d_k, scaling (none, ÷√d_k, ÷d_k) and temperature → one row's scores, "
                  "softmax weights and Jacobian, and the saturation curves against d_k. It needs a "
                  "running Jupyter kernel; the static figures above show its default setting and "
                  "a gallery of rows.")  # fmt: skip
    PANELS = ("median_max_weight", "grad_norm_median", "saturated_fraction")
    GRAD_FLOOR = 1e-10  # smaller medians are drawn on the axis' floor

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
        self.curves = {t: saturation_curves(temperature=t) for t in SATURATION_TEMPERATURES}
        self.L = L = self.curves[temperature]["sqrt"].L
        fig = new_figure(figsize=(10.5, 6.6), dpi=dpi)  # 840 px: the notebook's width
        fig.set_layout_engine("none")
        ax_s, ax_w, ax_j = _axes_row(fig, 3, top=0.84, bottom=0.6, right=0.9)
        self.score_bars = _bar_axes(ax_s, L, "score s_j (symmetric log scale)")
        ax_s.set_yscale("symlog", linthresh=1.0)
        ax_s.yaxis.set_minor_locator(NullLocator())
        ax_s.set_ylim(-1e3, 1e3)
        ax_s.axhline(0.0, color="0.3", linewidth=0.8)
        self.weight_bars = _bar_axes(ax_w, L, "weight p_j = softmax(s)_j")
        ax_w.set_ylim(0.0, 1.05)
        self.jacobian = ax_j.imshow(np.zeros((L, L)), cmap=JACOBIAN_CMAP, aspect="auto",
                                    interpolation="nearest", vmin=-JACOBIAN_LIMIT,
                                    vmax=JACOBIAN_LIMIT)  # fmt: skip
        ax_j.set(xticks=range(0, L, 5), yticks=range(0, L, 5), xlabel="score s_j",
                 ylabel="weight p_i")  # fmt: skip
        cbar = fig.colorbar(self.jacobian, cax=ax_j.inset_axes([1.04, 0.0, 0.05, 1.0]))
        cbar.set_label("∂p_i/∂s_j (red > 0, blue < 0)")
        self.titles = [ax.set_title(" ", fontsize=10) for ax in (ax_s, ax_w, ax_j)]
        self.lines: dict[str, dict[str, Line2D]] = {}
        self.markers: dict[str, Line2D] = {}
        for ax, stat in zip(_axes_row(fig, 3, top=0.47, bottom=0.155), self.PANELS, strict=True):
            self.lines[stat] = draw_curves(ax, self.curves[temperature], stat, zorder=3)
            (self.markers[stat],) = ax.plot([], [], marker="o", markersize=9, markerfacecolor="none",
                                            markeredgecolor="black", markeredgewidth=1.8)  # fmt: skip
            if _STATS[stat][2] is None:
                ax.set_ylim(self.GRAD_FLOOR, 10.0)
                ax.set_ylabel(f"norm (log scale, floor {self.GRAD_FLOOR:g})", fontsize=9)
        fig.legend(handles=list(self.lines[self.PANELS[0]].values()), loc="lower center", ncols=3,
                   frameon=False, fontsize=9, title_fontsize=9,
                   title="scores divided by (bold: the current choice; ○: current d_k)")  # fmt: skip
        self.suptitle = fig.suptitle(" ", fontsize=11, y=0.985)
        self.render(d_k, scaling, temperature)
        curves = [a for stat in self.PANELS for a in (*self.lines[stat].values(),
                                                       self.markers[stat])]  # fmt: skip
        self._renderer = BlitRenderer(fig, [*self.score_bars, *self.weight_bars, self.jacobian,
                                            *curves, *self.titles, self.suptitle])  # fmt: skip
        super().__init__(controls, fig)
        self.update()

    def render(self, d_k: int, scaling: str, temperature: float) -> None:
        """Show the row of this setting and the curves of its temperature, its scaling bold."""
        self.row = row = saturation_row(d_k, scaling, temperature, seed=ROW_SEED)
        style, curves = SCALING_STYLES[scaling], self.curves[temperature]
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
        i = SATURATION_D_KS.index(d_k)
        for stat in self.PANELS:
            floor = self.GRAD_FLOOR if _STATS[stat][2] is None else -np.inf
            for name, line in self.lines[stat].items():
                y = np.maximum(getattr(curves[name], stat).numpy(), floor)
                line.set_ydata(y)
                line.set_linewidth(2.6 if name == scaling else 1.0)
                line.set_alpha(1.0 if name == scaling else 0.35)
                if name == scaling:
                    self.markers[stat].set_data([d_k], [y[i]])
        self.suptitle.set_text(f"d_k = {d_k}, scores {style['label']}, temperature "
                               f"{temperature:g}: one row of {self.L} keys (top); medians over "
                               f"{curves[scaling].n_rows} rows (bottom)")  # fmt: skip

    def to_png(self) -> bytes:
        """Redraw only the row panels, the curves' data, the markers and the titles."""
        return self._renderer.render()
