"""Notebook 03's figures and dashboards (matplotlib, ipywidgets).

Used by notebook 03 (Scaling and softmax saturation), sections "3 · Saturation: large scores
make rows one-hot", "4 · Vanishing gradients, measured honestly", "7 · The dashboard: d_k,
scaling, temperature". Its data and experiments come from ``nb03_scaling``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.container import BarContainer
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import LogLocator, NullLocator

from ._dashboard import Dashboard, _selection_slider, _toggle_buttons
from ._figures import BlitRenderer, _as_numpy_1d, _closes_figures_on_error, new_figure
from .nb03_scaling import (
    SATURATION_D_KS,
    SCALINGS,
    SaturationCurve,
    SaturationRow,
    saturation_curves,
    saturation_row,
)

# One style per scaling of the scores, the same in every figure of notebook 03: Okabe-Ito
# colours (readable by most colour-blind readers), told apart by marker and line style too.
SCALING_STYLES: dict[str, dict[str, str]] = {
    "none": {"label": "none (q·k)", "color": "#D55E00", "marker": "o", "linestyle": "-"},
    "sqrt": {"label": "÷ √d_k", "color": "#0072B2", "marker": "s", "linestyle": "-"},
    "linear": {"label": "÷ d_k", "color": "#009E73", "marker": "^", "linestyle": "--"},
}
# The softmax Jacobian has negative entries (−p_i p_j off the diagonal), so it gets a
# diverging colormap centred on 0, never ATTENTION_CMAP (that one is for weights in [0, 1]).
JACOBIAN_CMAP = "RdBu_r"
# Every entry of diag(p) − p pᵀ lies in [−1/4, 1/4]: p_i(1 − p_i) ≤ 1/4 and p_i p_j ≤ 1/4.
JACOBIAN_LIMIT = 0.25

# stat → (panel title, y label, log scale); "{threshold}" is filled in from the curves.
_SATURATION_STATS: dict[str, tuple[str, str, bool]] = {
    "median_max_weight": ("median largest weight", "weight (0 to 1)", False),
    "median_entropy": ("median entropy of a row", "entropy (nats)", False),
    "median_jacobian_norm": ("median ‖J‖_F of a row", "Frobenius norm (log scale)", True),
    "saturated_fraction": ("rows with ‖J‖_F < {threshold:g}", "fraction of rows", False),
    "grad_norm_median": ("median ‖∂loss/∂q‖", "gradient norm (log scale)", True),
    "grad_norm_mean": ("mean ‖∂loss/∂q‖", "gradient norm (log scale)", True),
    "grad_norm_p99": ("99th percentile of ‖∂loss/∂q‖", "gradient norm (log scale)", True),
}
_D_K_TICKS = (1, 4, 16, 64, 256, 1024)


def _check_stat(stat: str) -> None:
    if stat not in _SATURATION_STATS:
        raise ValueError(f"stat must be one of {tuple(_SATURATION_STATS)}, got {stat!r}.")


def _check_scaling(scaling: str) -> None:
    if scaling not in SCALING_STYLES:
        raise ValueError(f"scaling must be one of {tuple(SCALING_STYLES)}, got {scaling!r}.")


def _d_k_axis(ax: Axes) -> None:
    """A log2 d_k axis from 1 to 1024 with readable ticks."""
    ax.set_xscale("log", base=2)
    ax.set_xlim(0.75, 1400)
    ax.set_xticks(list(_D_K_TICKS), [str(d) for d in _D_K_TICKS])
    ax.minorticks_off()
    ax.set_xlabel("d_k (log scale)")
    ax.grid(alpha=0.3)


def _stat_reference_lines(ax: Axes, stat: str, L: int) -> None:
    """Dotted lines for the uniform row (and the one-hot row) where they help reading."""
    if stat == "median_max_weight":
        ax.axhline(1.0, color="0.35", linestyle=":", linewidth=1)
        ax.axhline(1.0 / L, color="0.35", linestyle=":", linewidth=1)
        ax.text(0.03, 1.0, "one-hot", transform=ax.get_yaxis_transform(), fontsize=8,
                ha="left", va="bottom", color="0.3")  # fmt: skip
        ax.text(0.03, 1.0 / L, f"uniform: 1/{L}", transform=ax.get_yaxis_transform(),
                fontsize=8, ha="left", va="top", color="0.3")  # fmt: skip
        ax.set_ylim(0.0, 1.12)
    elif stat == "median_entropy":
        ax.axhline(np.log(L), color="0.35", linestyle=":", linewidth=1)
        ax.text(0.03, np.log(L), f"uniform: log {L} = {np.log(L):.2f}",
                transform=ax.get_yaxis_transform(), fontsize=8, ha="left", va="bottom",
                color="0.3")  # fmt: skip
        ax.set_ylim(0.0, np.log(L) * 1.15)
    elif stat == "saturated_fraction":
        ax.set_ylim(-0.03, 1.03)


def draw_saturation_curves(
    ax: Axes,
    curves: Mapping[str, SaturationCurve],
    stat: str,
    *,
    reference_lines: bool = True,
) -> dict[str, Line2D]:
    """Draw one statistic of :func:`nb03_scaling.saturation_curves` against d_k.

    One line per scaling in ``curves``, in that scaling's :data:`SCALING_STYLES`; a
    log2 d_k axis; dotted reference lines for the uniform and one-hot rows where the
    statistic has them (largest weight, entropy).

    Args:
        ax: axes to draw on.
        curves: scaling → SaturationCurve (d_k (n,) and each statistic (n,)).
        stat: "median_max_weight", "median_entropy", "median_jacobian_norm",
            "saturated_fraction", "grad_norm_median", "grad_norm_mean" or "grad_norm_p99".
        reference_lines: draw the uniform / one-hot lines.

    Returns:
        scaling → the Line2D drawn for it.

    Raises:
        ValueError: an unknown statistic or scaling, or empty ``curves``.

    Source: Vaswani et al. 2017, sec. 3.2.1; article section 2.2.
    """
    _check_stat(stat)
    if not curves:
        raise ValueError("curves is empty: pass the dict that saturation_curves returns.")
    first = next(iter(curves.values()))
    title, ylabel, log = _SATURATION_STATS[stat]
    lines = {}
    for scaling, curve in curves.items():
        _check_scaling(scaling)
        style = SCALING_STYLES[scaling]
        (lines[scaling],) = ax.plot(
            curve.d_k.numpy(), getattr(curve, stat).numpy(), color=style["color"],
            marker=style["marker"], linestyle=style["linestyle"], label=style["label"],
            markersize=4, linewidth=1.8,
        )  # fmt: skip
    _d_k_axis(ax)
    if log:
        ax.set_yscale("log")
    if reference_lines:
        _stat_reference_lines(ax, stat, first.L)
    ax.set_title(title.format(threshold=first.threshold))
    ax.set_ylabel(ylabel)
    return lines


@_closes_figures_on_error
def plot_saturation_curves(
    curves: Mapping[str, SaturationCurve],
    stats: Sequence[str] = ("median_max_weight", "median_entropy"),
    *,
    suptitle: str | None = None,
    panel_size: tuple[float, float] = (3.9, 3.1),
) -> Figure:
    """Statistics of saturation_curves against d_k, one panel per statistic, in a pyplot figure.

    Args:
        curves: scaling → SaturationCurve, from :func:`nb03_scaling.saturation_curves`.
        stats: the statistics to draw (see :func:`draw_saturation_curves`).
        suptitle: a title over the panels (default: rows, keys and temperature).
        panel_size: (width, height) of one panel in inches.

    Returns:
        The figure, one legend for the scalings under the panels (end the cell with
        ``plt.show()``).

    Raises:
        ValueError: no statistic, or as draw_saturation_curves.

    Source: Vaswani et al. 2017, sec. 3.2.1; article section 2.2.
    """
    if not stats:
        raise ValueError("give at least one statistic to plot.")
    n = len(stats)
    fig, axes = plt.subplots(
        1, n, figsize=(panel_size[0] * n, panel_size[1] + 0.5), layout="constrained",
        squeeze=False,
    )  # fmt: skip
    for ax, stat in zip(axes[0], stats, strict=True):
        lines = draw_saturation_curves(ax, curves, stat)
    fig.legend(handles=list(lines.values()), loc="outside lower center", ncols=len(lines),
               frameon=False, title="scores divided by")  # fmt: skip
    first = next(iter(curves.values()))
    if suptitle is None:
        suptitle = (
            f"Medians over {first.n_rows} random rows of {first.L} keys per d_k "
            f"(q, k entries N(0, 1), temperature {first.temperature:g})"
        )
    fig.suptitle(suptitle)
    return fig


@_closes_figures_on_error
def plot_gradient_quantiles(
    curves: Mapping[str, SaturationCurve],
    scalings: Sequence[str] = ("none", "sqrt"),
    *,
    panel_size: tuple[float, float] = (4.0, 3.4),
    saturated_fraction: bool = True,
) -> Figure:
    """Median, mean and 99th percentile of ‖∂loss/∂q‖ against d_k, one panel per scaling.

    A heavy-tailed gradient shows as a mean and a 99th percentile far above the
    median; the gradient panels share their y axis (log scale) so scalings compare
    directly. A last panel can add the fraction of saturated rows for each scaling.

    Args:
        curves: scaling → SaturationCurve.
        scalings: which of them to draw, one panel each.
        panel_size: (width, height) of one panel in inches.
        saturated_fraction: add a panel with the fraction of rows whose ‖J‖_F is below
            the curves' threshold.

    Returns:
        The pyplot figure (end the cell with ``plt.show()``).

    Raises:
        ValueError: no scaling, or a scaling missing from ``curves``.

    Source: Vaswani et al. 2017, sec. 3.2.1; article section 2.2.
    """
    if not scalings:
        raise ValueError("give at least one scaling.")
    missing = [s for s in scalings if s not in curves]
    if missing:
        raise ValueError(f"no curve for {missing}; have {list(curves)}.")
    n = len(scalings) + int(saturated_fraction)
    fig, axes = plt.subplots(
        1, n, figsize=(panel_size[0] * n, panel_size[1] + 0.4), layout="constrained",
        squeeze=False,
    )  # fmt: skip
    for ax in axes[0][1 : len(scalings)]:
        ax.sharey(axes[0][0])
    if saturated_fraction:
        draw_saturation_curves(axes[0][-1], {s: curves[s] for s in scalings}, "saturated_fraction")
        axes[0][-1].legend(fontsize=9, loc="upper left")
    quantiles = (
        ("grad_norm_p99", "99th percentile", ":", "v"),
        ("grad_norm_mean", "mean", "--", "D"),
        ("grad_norm_median", "median", "-", "o"),
    )
    for ax, scaling in zip(axes[0], scalings, strict=False):
        curve, style = curves[scaling], SCALING_STYLES[scaling]
        handles = []
        for stat, label, linestyle, marker in quantiles:
            (line,) = ax.plot(
                curve.d_k.numpy(), getattr(curve, stat).numpy(), color=style["color"],
                linestyle=linestyle, marker=marker, markersize=4, label=label,
            )  # fmt: skip
            handles.append(line)
        _d_k_axis(ax)
        ax.set_yscale("log")
        ax.set_title(f"‖∂loss/∂q‖, scores {style['label']}")
        ax.legend(handles=handles, fontsize=9, loc="lower left")
    axes[0][0].set_ylabel("gradient norm (log scale)")
    first = curves[scalings[0]]
    fig.suptitle(f"The gradient that reaches q, over {first.n_rows} rows per d_k")
    return fig


@_closes_figures_on_error
def plot_saturation_rows(
    rows: Sequence[SaturationRow],
    *,
    ncols: int = 3,
    panel_size: tuple[float, float] = (3.3, 2.4),
    suptitle: str | None = None,
) -> Figure:
    """The softmax weights of several single rows (saturation_row), one bar chart each.

    Each panel's title gives d_k, the scaling, the largest weight and the entropy;
    bars use the scaling's colour, the y axis runs from 0 to 1 in every panel.

    Args:
        rows: SaturationRow objects (weights (L,)), in reading order.
        ncols: panels per row of the grid.
        panel_size: (width, height) of one panel in inches.
        suptitle: a title over all panels.

    Returns:
        The pyplot figure (end the cell with ``plt.show()``).

    Raises:
        ValueError: no rows, or ncols < 1.

    Source: article section 2.2 ("an almost one-hot distribution").
    """
    if not rows:
        raise ValueError("give at least one row.")
    if ncols < 1:
        raise ValueError(f"ncols must be ≥ 1, got {ncols}.")
    ncols = min(ncols, len(rows))
    nrows = -(-len(rows) // ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(panel_size[0] * ncols, panel_size[1] * nrows + 0.5),
        layout="constrained", sharey=True, squeeze=False,
    )  # fmt: skip
    for ax in axes.flat[len(rows):]:
        ax.set_visible(False)
    for ax, row in zip(axes.flat, rows, strict=False):
        w = row.weights.detach().cpu().numpy()
        style = SCALING_STYLES[row.scaling]
        ax.bar(np.arange(len(w)), w, color=style["color"], width=0.75)
        ax.set_ylim(0, 1.05)
        ax.set_xticks(range(0, len(w), 5))
        ax.set_title(
            f"d_k = {row.d_k}, scores {style['label']}\n"
            f"max {row.max_weight:.2f}, entropy {row.entropy:.2f} nats",
            fontsize=10,
        )
        ax.grid(axis="y", alpha=0.3)
    for ax in axes[-1]:
        ax.set_xlabel("key j")
    for ax in axes[:, 0]:
        ax.set_ylabel("weight p_j")
    if suptitle:
        fig.suptitle(suptitle)
    return fig


class SaturationView:
    """One row's scores, softmax and Jacobian above the saturation curves, updatable.

    Top: the scores the softmax sees (symmetric-log axis, fixed range), the weights
    (0 to 1) and the Jacobian diag(p) − p pᵀ (diverging colormap, fixed ±1/4). Bottom:
    the largest weight, the entropy, the median gradient ‖∂loss/∂q‖ and the saturated
    fraction against d_k for all three scalings, the current scaling drawn bold, a
    ○ on the current (d_k, value) and a vertical line at the current d_k. Every axis
    range and position is fixed (the view switches the figure's layout engine off and
    places the axes itself, for a 12 × 7 inch figure), so a dashboard never lays the
    figure out again and redraws only :attr:`dynamic_artists`.

    Args:
        fig: an empty figure (``new_figure`` for a dashboard, a pyplot figure for a cell),
            about 12 × 7 inches.
        L: keys per row.
        threshold: the saturated-fraction cut-off of the curves (for the panel title).
        score_limit: the scores axis runs from −score_limit to +score_limit.
        grad_floor: the lower limit of the gradient axis; smaller medians are drawn
            on it (the axis label says so).

    Source: Vaswani et al. 2017, sec. 3.2.1; article section 2.2.
    """

    _PANELS = ("median_max_weight", "median_entropy", "grad_norm_median", "saturated_fraction")

    def __init__(
        self,
        fig: Figure,
        L: int,
        *,
        threshold: float = 1e-3,
        score_limit: float = 1e3,
        grad_floor: float = 1e-10,
    ) -> None:
        self.fig, self.L, self.grad_floor = fig, L, grad_floor
        # Fixed positions (fractions of the figure) instead of a layout engine: the axes
        # never move, and a layout pass, which costs more than the drawing, is never run.
        fig.set_layout_engine("none")
        top = fig.add_gridspec(1, 3, left=0.06, right=0.9, top=0.905, bottom=0.6,
                               wspace=0.3)  # fmt: skip
        bottom = fig.add_gridspec(1, 4, left=0.06, right=0.985, top=0.475, bottom=0.155,
                                  wspace=0.36)  # fmt: skip
        ax_s, ax_w, ax_j = (fig.add_subplot(top[0, i]) for i in range(3))
        keys = np.arange(L)
        ticks = list(range(0, L, 5))

        self.score_bars: BarContainer = ax_s.bar(keys, np.zeros(L), width=0.75, zorder=3)
        ax_s.set_yscale("symlog", linthresh=1.0)
        ax_s.yaxis.set_minor_locator(NullLocator())
        ax_s.set_ylim(-score_limit, score_limit)
        ax_s.axhline(0.0, color="0.3", linewidth=0.8)
        ax_s.set_xticks(ticks)
        ax_s.set_xlabel("key j")
        ax_s.set_ylabel("score s_j (symmetric log scale)")
        ax_s.grid(axis="y", alpha=0.3)
        self.score_title = ax_s.set_title("scores: top − second = 00.00", fontsize=10)

        self.weight_bars: BarContainer = ax_w.bar(keys, np.zeros(L), width=0.75, zorder=3)
        ax_w.set_ylim(0.0, 1.05)
        ax_w.set_xticks(ticks)
        ax_w.set_xlabel("key j")
        ax_w.set_ylabel("weight p_j = softmax(s)_j")
        ax_w.grid(axis="y", alpha=0.3)
        self.weight_title = ax_w.set_title("weights: max 0.00, entropy 0.00 nats", fontsize=10)

        self.jacobian = ax_j.imshow(
            np.zeros((L, L)), cmap=JACOBIAN_CMAP, vmin=-JACOBIAN_LIMIT, vmax=JACOBIAN_LIMIT,
            interpolation="nearest", aspect="auto",
        )  # fmt: skip
        ax_j.set_xticks(ticks)
        ax_j.set_yticks(ticks)
        ax_j.set_xlabel("score s_j")
        ax_j.set_ylabel("weight p_i")
        cbar = fig.colorbar(self.jacobian, cax=ax_j.inset_axes([1.04, 0.0, 0.05, 1.0]))
        cbar.set_label("∂p_i/∂s_j (diverging: red > 0, blue < 0)")
        cbar.set_ticks([-0.25, -0.1, 0.0, 0.1, 0.25])
        self.jacobian_title = ax_j.set_title("Jacobian: ‖J‖_F = 0.00e+00, ‖∂L/∂q‖ = 0.0e+00",
                                             fontsize=10)  # fmt: skip

        self.curve_axes: dict[str, Axes] = {}
        self.curve_lines: dict[str, dict[str, Line2D]] = {}
        self.markers: dict[str, Line2D] = {}
        self.cursors: dict[str, Line2D] = {}
        for i, stat in enumerate(self._PANELS):
            ax = fig.add_subplot(bottom[0, i])
            title, ylabel, log = _SATURATION_STATS[stat]
            lines = {}
            # Dynamic artists sit above every static one (zorder 3 > grid, reference lines,
            # spines), in the order they are created: a full draw then stacks them exactly
            # as a blitted update does.
            for scaling, style in SCALING_STYLES.items():
                (lines[scaling],) = ax.plot(
                    [1], [1], color=style["color"], marker=style["marker"], markersize=3,
                    linestyle=style["linestyle"], label=style["label"], zorder=3,
                )  # fmt: skip
            self.cursors[stat] = ax.axvline(1, color="0.4", linewidth=0.8, zorder=3)
            (self.markers[stat],) = ax.plot(
                [1], [1], marker="o", markersize=9, markerfacecolor="none",
                markeredgecolor="black", markeredgewidth=1.8, linestyle="none", zorder=3,
            )  # fmt: skip
            _d_k_axis(ax)
            if log:
                ax.set_yscale("log")
                ax.set_ylim(grad_floor, 10.0)
                ax.yaxis.set_major_locator(LogLocator(numticks=7))
                ax.yaxis.set_minor_locator(NullLocator())
                ylabel = f"norm (log scale, floor {grad_floor:g})"
            _stat_reference_lines(ax, stat, L)
            ax.set_title(title.format(threshold=threshold), fontsize=10)
            ax.set_ylabel(ylabel, fontsize=9)
            self.curve_axes[stat], self.curve_lines[stat] = ax, lines
        fig.legend(handles=list(self.curve_lines[self._PANELS[0]].values()),
                   loc="lower center", bbox_to_anchor=(0.5, 0.0), ncols=3, frameon=False,
                   title="scores divided by (bold: the current choice; ○: current d_k)",
                   fontsize=9, title_fontsize=9)  # fmt: skip
        self.suptitle = fig.suptitle("d_k = 0000", fontsize=11, y=0.985)

    @property
    def dynamic_artists(self) -> list[Artist]:
        """The artists :meth:`update` changes, in drawing order."""
        curves = [
            artist
            for stat in self._PANELS
            for artist in (
                *self.curve_lines[stat].values(), self.cursors[stat], self.markers[stat]
            )
        ]
        return [
            *self.score_bars.patches, *self.weight_bars.patches, self.jacobian, *curves,
            self.score_title, self.weight_title, self.jacobian_title, self.suptitle,
        ]  # fmt: skip

    def update(self, row: SaturationRow, curves: Mapping[str, SaturationCurve]) -> None:
        """Show one row and the curves of its temperature, the row's scaling highlighted.

        Args:
            row: a SaturationRow (scores (L,), weights (L,), jacobian (L, L)).
            curves: scaling → SaturationCurve for every scaling in SCALING_STYLES, at
                the row's temperature; the row's d_k must be among their d_k.

        Raises:
            ValueError: a row of another length, a missing scaling or d_k.
        """
        scores = _as_numpy_1d(row.scores, "scores", self.L)
        weights = _as_numpy_1d(row.weights, "weights", self.L)
        missing = [s for s in SCALING_STYLES if s not in curves]
        if missing:
            raise ValueError(f"curves lacks the scaling(s) {missing}.")
        style = SCALING_STYLES[row.scaling]
        for bar, s in zip(self.score_bars.patches, scores, strict=True):
            bar.set_height(float(s))
            bar.set_color(style["color"])
        for bar, w in zip(self.weight_bars.patches, weights, strict=True):
            bar.set_height(float(w))
            bar.set_color(style["color"])
        self.jacobian.set_data(row.jacobian.detach().cpu().numpy())
        top = np.sort(scores)[::-1]
        self.score_title.set_text(f"scores the softmax sees: top − second = {top[0] - top[1]:.2f}")
        self.weight_title.set_text(
            f"weights: max {row.max_weight:.2f}, entropy {row.entropy:.2f} nats"
        )
        self.jacobian_title.set_text(
            f"Jacobian: ‖J‖_F = {row.jacobian_norm:.1e}, ‖∂L/∂q‖ = {row.grad_norm:.1e}"
        )
        for stat in self._PANELS:
            floor = self.grad_floor if _SATURATION_STATS[stat][2] else -np.inf
            for scaling, line in self.curve_lines[stat].items():
                curve = curves[scaling]
                x = curve.d_k.numpy()
                y = np.maximum(getattr(curve, stat).numpy(), floor)
                line.set_data(x, y)
                current = scaling == row.scaling
                line.set_linewidth(2.6 if current else 1.0)
                line.set_alpha(1.0 if current else 0.35)
                if current:
                    hits = np.flatnonzero(x == row.d_k)
                    if hits.size == 0:
                        raise ValueError(f"d_k = {row.d_k} is not among the curves' {x.tolist()}.")
                    self.markers[stat].set_data([row.d_k], [y[hits[0]]])
            self.cursors[stat].set_xdata([row.d_k, row.d_k])
        first = curves[row.scaling]
        self.suptitle.set_text(
            f"d_k = {row.d_k}, scores {style['label']}, temperature {row.temperature:g}: "
            f"one row of {self.L} keys (top); medians over {first.n_rows} rows (bottom)"
        )


@_closes_figures_on_error
def plot_saturation_view(
    row: SaturationRow,
    curves: Mapping[str, SaturationCurve],
    *,
    figsize: tuple[float, float] = (12.0, 7.0),
) -> Figure:
    """A static pyplot rendering of the saturation dashboard for one setting.

    Args:
        row: from :func:`nb03_scaling.saturation_row`.
        curves: from :func:`nb03_scaling.saturation_curves` at the row's temperature,
            with all three scalings.
        figsize: inches.

    Returns:
        The figure (end the cell with ``plt.show()``).

    Raises:
        ValueError: as :meth:`SaturationView.update`.

    Source: article section 2.2; the dashboard SaturationDashboard.
    """
    first = next(iter(curves.values()))
    fig = plt.figure(figsize=figsize)  # SaturationView places its axes itself
    view = SaturationView(fig, len(row.weights), threshold=first.threshold)
    view.update(row, curves)
    return fig


SATURATION_TEMPERATURES = (0.25, 0.5, 1.0, 2.0, 4.0)
SATURATION_SCALING_LABELS = {"none": "none", "sqrt": "÷ √d_k", "linear": "÷ d_k"}


@lru_cache(maxsize=32)
def _cached_saturation_curves(
    L: int, n_sequences: int, temperature: float, seed: int
) -> dict[str, SaturationCurve]:
    return saturation_curves(
        SATURATION_D_KS, SCALINGS, L=L, n_sequences=n_sequences, temperature=temperature,
        seed=seed,
    )  # fmt: skip


class SaturationDashboard(Dashboard):
    """Notebook 03's dashboard: d_k, scaling and temperature → one row and the saturation curves.

    Controls: ``d_k`` (a SelectionSlider over 1, 2, 4, …, 1024), ``scaling``
    (ToggleButtons: "none", "sqrt" = ÷√d_k, "linear" = ÷d_k) and ``temperature``
    (a SelectionSlider over :data:`SATURATION_TEMPERATURES`, an extra divisor of the
    scores). A change looks up :func:`nb03_scaling.saturation_row` (one
    query against L keys; cached) and redraws :class:`SaturationView`:
    the row's scores, its softmax weights and its Jacobian diag(p) − p pᵀ on top, and
    the median largest weight, median entropy, median ‖∂loss/∂q‖ and saturated
    fraction against d_k below, with the current point marked. The curves of
    :func:`nb03_scaling.saturation_curves` are computed once per temperature,
    for all three scalings at once: the initial temperature's when the dashboard is
    built, each other one the first time it is chosen (about 0.1 s), all cached
    across dashboards. An update only redraws the row panels, the curves' data and
    the markers; the axes never move, so the figure is never laid out again.

    Args:
        d_k, scaling, temperature: the initial setting.
        L: keys per row.
        n_sequences: sequences per d_k for the curves (rows = n_sequences · L).
        curve_seed: seed of the curves (0: the same draws as the notebook's curves).
        row_seed: seed of the single row; the default 4 gives a row whose largest
            weight is close to the median at every d_k (seed 0's row happens to be
            much less saturated than typical at d_k = 64).
        dpi: resolution of the PNG.

    Attributes:
        curves: {temperature: {scaling: SaturationCurve}} for the temperatures shown so
            far (use :meth:`curves_at` for any of them).
        row: the SaturationRow currently shown.
        view: the SaturationView that draws it.

    Raises:
        ValueError: a d_k, scaling or temperature that the controls do not offer.

    Source: Vaswani et al. 2017, sec. 3.2.1; article section 2.2.
    """

    plain_text = (
        "Dashboard: d_k, scaling (none, ÷√d_k, ÷d_k) and temperature → one row's scores, "
        "softmax weights and Jacobian, and the saturation curves against d_k. It needs a "
        "running Jupyter kernel; the static figures above show its default setting and a "
        "gallery of rows."
    )

    def __init__(
        self,
        d_k: int = 64,
        scaling: str = "sqrt",
        temperature: float = 1.0,
        *,
        L: int = 16,
        n_sequences: int = 64,
        curve_seed: int = 0,
        row_seed: int = 4,
        dpi: float = 80,
    ) -> None:
        if d_k not in SATURATION_D_KS:
            raise ValueError(f"d_k must be one of {SATURATION_D_KS}, got {d_k!r}.")
        if scaling not in SCALINGS:
            raise ValueError(f"scaling must be one of {SCALINGS}, got {scaling!r}.")
        if temperature not in SATURATION_TEMPERATURES:
            raise ValueError(
                f"temperature must be one of {SATURATION_TEMPERATURES}, got {temperature!r}."
            )
        self.L, self.row_seed = L, row_seed
        self._n_sequences, self._curve_seed = n_sequences, curve_seed
        self.curves: dict[float, dict[str, SaturationCurve]] = {}
        self._rows: dict[tuple[int, str, float], SaturationRow] = {}
        controls = {
            "d_k": _selection_slider([(str(d), d) for d in SATURATION_D_KS], d_k, "d_k"),
            "scaling": _toggle_buttons(
                [(SATURATION_SCALING_LABELS[s], s) for s in SCALINGS], scaling,
                "scores divided by", "70px",
            ),
            "temperature": _selection_slider(
                [(f"{t:g}", t) for t in SATURATION_TEMPERATURES], temperature, "temperature"
            ),
        }  # fmt: skip
        threshold = self.curves_at(temperature)[scaling].threshold
        figure = new_figure(figsize=(12.0, 7.0), dpi=dpi)
        self.view = SaturationView(figure, L, threshold=threshold)  # fixed axes, no layout
        self._show(d_k, scaling, temperature)
        self._renderer = BlitRenderer(figure, self.view.dynamic_artists)
        super().__init__(controls, figure)
        self._wrap_controls()
        self.update()

    def curves_at(self, temperature: float) -> dict[str, SaturationCurve]:
        """The saturation curves of all three scalings at a temperature (computed once)."""
        if temperature not in self.curves:
            self.curves[temperature] = _cached_saturation_curves(
                self.L, self._n_sequences, temperature, self._curve_seed
            )
        return self.curves[temperature]

    def row_for(self, d_k: int, scaling: str, temperature: float) -> SaturationRow:
        """The row shown for a setting (computed on first use, then cached)."""
        key = (d_k, scaling, temperature)
        if key not in self._rows:
            self._rows[key] = saturation_row(
                d_k, scaling, temperature, L=self.L, seed=self.row_seed
            )
        return self._rows[key]

    def _show(self, d_k: int, scaling: str, temperature: float) -> None:
        self.row = self.row_for(d_k, scaling, temperature)
        self.view.update(self.row, self.curves_at(temperature))

    def render(self, d_k: int, scaling: str, temperature: float) -> None:
        """Look up the row and the curves for this setting and redraw them."""
        self._show(d_k, scaling, temperature)

    def to_png(self) -> bytes:
        """Redraw only the row panels, the curves' data, the markers and the titles."""
        return self._renderer.render()
