"""Figures of attention weights, shared by every notebook of the series.

Conventions (STYLE.md): queries on the y axis, keys on the x axis, one colormap
for attention weights across the series (:data:`ATTENTION_CMAP`) on a fixed 0–1
colour scale, masked cells drawn grey with a "×". Functions that start with
``draw_`` or ``update_`` work on axes or figures they are given (so a dashboard
can build one ``matplotlib.figure.Figure`` and update its artists); ``plot_``
functions create a pyplot figure for a notebook cell, which ends with
``plt.show()``.

Shape legend: L_q query length, L_k key length.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib import colormaps
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.container import BarContainer
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import LogLocator, NullLocator

from .experiments import (
    CostCurves,
    PairCounts,
    PathLengths,
    SaturationCurve,
    SaturationRow,
    ShapeWalkthrough,
    TokenQKV,
)

__all__ = [
    "ATTENTION_CMAP",
    "BIAS_LABELS",
    "JACOBIAN_CMAP",
    "JACOBIAN_LIMIT",
    "MASKED_COLOR",
    "MASKED_MARK",
    "NAN_EDGE",
    "NAN_FACE",
    "SCALING_STYLES",
    "BlitRenderer",
    "HeatmapArtists",
    "RetrievalView",
    "SaturationView",
    "ShapeDiagramLimits",
    "ShapeWalkthroughView",
    "SoftmaxBarsView",
    "TokenQKVView",
    "WeightsRowSumsView",
    "add_mask_legend",
    "draw_attention_heatmap",
    "draw_saturation_curves",
    "figure_to_png",
    "freeze_layout",
    "new_figure",
    "plot_attention",
    "plot_attention_cost",
    "plot_attention_gallery",
    "plot_bias_gallery",
    "plot_gradient_quantiles",
    "plot_path_lengths_and_pairs",
    "plot_retrieval",
    "plot_retrieval_gallery",
    "plot_saturation_curves",
    "plot_saturation_rows",
    "plot_saturation_view",
    "plot_shape_gallery",
    "plot_shape_walkthrough",
    "plot_softmax_bars_gallery",
    "plot_token_attention_gallery",
    "plot_token_qkv",
    "plot_vectors_2d",
    "plot_weights_and_row_sums",
    "token_qkv_limits",
    "update_attention_heatmap",
]

from .lessons._figures import (
    _TEXT_DARK_BELOW,
    ATTENTION_CMAP,
    MASKED_COLOR,
    MASKED_MARK,
    NAN_EDGE,
    NAN_FACE,
    BlitRenderer,
    HeatmapArtists,
    WeightsRowSumsView,
    _as_numpy_2d,
    _closes_figures_on_error,
    _fill_cells,
    _labels,
    _to_numpy,
    _weights_colorbar,
    add_mask_legend,
    draw_attention_heatmap,
    figure_to_png,
    freeze_layout,
    new_figure,
    plot_attention,
    plot_attention_gallery,
    plot_weights_and_row_sums,
    update_attention_heatmap,
)

# ---------------------------------------------------------------------------
# Notebook 02: one token's query, key and value, and what a bias does to them
# ---------------------------------------------------------------------------

# How the series names the four bias settings of attn_lib.experiments.qkv_example.
BIAS_LABELS = {"none": "no bias", "q": "bias on Q", "k": "bias on K", "v": "bias on V"}


# (field, title, x label, y label, colour); panels in reading order, 2 rows × 3.
_TOKEN_PANELS = (
    ("query", "query q_i: what it looks for", "dimension (0 … d_k − 1)", "entry", "tab:blue"),
    ("key", "key k_i: what it offers", "dimension (0 … d_k − 1)", "entry", "tab:orange"),
    ("value", "value v_i: what it passes on", "dimension (0 … d_v − 1)", "entry", "tab:green"),
    ("scores", "scores q_i·k_j / √d_k", "key token j", "score", "0.6"),
    ("weights", "weights: softmax of the scores", "key token j", "attention weight", "0.6"),
    ("output", "output_i = Σ_j w_ij v_j", "dimension (0 … d_v − 1)", "entry", "tab:purple"),
)
_OTHER_TOKEN_COLOR = "0.6"
_OWN_TOKEN_COLOR = "0.2"  # the token's own key in the scores and weights panels
_GHOST = {"fill": False, "edgecolor": "black", "linestyle": "--", "linewidth": 1.0}


def token_qkv_limits(results: Sequence[TokenQKV]) -> dict[str, tuple[float, float]]:
    """Shared y limits per field over several results, so that bars compare across settings.

    Args:
        results: TokenQKV-like objects (e.g. every token × every bias setting).

    Returns:
        {field: (low, high)} for "query", "key", "value", "scores", "weights", "output":
        symmetric about 0 with 10 % headroom, except "weights", which starts at 0.

    Raises:
        ValueError: no results.

    Source: STYLE.md of this series (a dashboard's axes do not jump between settings).
    """
    if not results:
        raise ValueError("give at least one result to compute limits from.")
    limits = {}
    for field, *_ in _TOKEN_PANELS:
        top = max(float(np.abs(_to_numpy(getattr(r, field))).max()) for r in results)
        top = 1.1 * top if top > 0 else 1.0
        limits[field] = (0.0, top) if field == "weights" else (-top, top)
    return limits


def _dashed_outline_handles() -> list[Patch]:
    return [
        Patch(facecolor=_OTHER_TOKEN_COLOR, label="with the chosen bias"),
        Patch(**_GHOST, label="without any bias (for comparison)"),
        Patch(facecolor=_OWN_TOKEN_COLOR, label="the token's own key"),
    ]


class TokenQKVView:
    """One token's query, key, value, row of scores, weights and output, as bars; updatable.

    Six panels (2 × 3): the token's query q_i (d_k,), key k_i (d_k,) and value v_i
    (d_v,) on top; its scores (L_k,) and weights (L_k,) over the key tokens and its
    output (d_v,) below. Each panel shows the current setting as filled bars and the
    no-bias setting of the same token as dashed outlines, so a bias that changes
    nothing leaves the bars exactly inside their outlines. The token's own key is
    drawn darker in the scores and weights panels.

    Args:
        fig: an empty figure (a plain Figure for a dashboard, a pyplot one for a cell).
        tokens: the L_k token labels.
        d_k, d_v: widths of query/key and of value/output.
        limits: y limits per field (see :func:`token_qkv_limits`); None: set by the
            first :meth:`update`.

    Source: article section 2.1 (Q, K, V); torch.nn.Linear (bias=True by default).
    """

    def __init__(
        self,
        fig: Figure,
        tokens: Sequence[str],
        d_k: int,
        d_v: int,
        *,
        limits: dict[str, tuple[float, float]] | None = None,
    ) -> None:
        self.fig = fig
        self.tokens = [str(t) for t in tokens]
        self.limits = limits
        axes = fig.subplots(2, 3)
        widths = {"query": d_k, "key": d_k, "value": d_v, "output": d_v}
        self.axes: dict[str, Axes] = {}
        self.bars: dict[str, BarContainer] = {}
        self.ghosts: dict[str, BarContainer] = {}
        for ax, (field, title, xlabel, ylabel, color) in zip(
            axes.flat, _TOKEN_PANELS, strict=True
        ):
            n = widths.get(field, len(self.tokens))
            positions = np.arange(n)
            self.bars[field] = ax.bar(positions, np.zeros(n), width=0.7, color=color)
            self.ghosts[field] = ax.bar(positions, np.zeros(n), width=0.7, **_GHOST)
            ax.axhline(0.0, color="black", linewidth=0.8)
            if field in ("scores", "weights"):
                ax.set_xticks(positions, self.tokens, rotation=30, ha="right")
            else:
                ax.set_xticks(positions, [str(p) for p in positions])
            ax.set_xlim(-0.6, n - 0.4)
            ax.set_title(title, fontsize=11)
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
            self.axes[field] = ax
        self.weight_texts = [
            self.axes["weights"].text(j, 0.0, "", ha="center", va="bottom", fontsize=8)
            for j in range(len(self.tokens))
        ]
        self.legend = fig.legend(
            handles=_dashed_outline_handles(), loc="outside lower center", ncols=3,
            frameon=False, fontsize=10,
        )  # fmt: skip
        self.suptitle = fig.suptitle("")
        if limits is not None:
            self._set_limits(limits)

    def _set_limits(self, limits: dict[str, tuple[float, float]]) -> None:
        for field, ax in self.axes.items():
            ax.set_ylim(*limits[field])
        self.limits = limits

    @property
    def dynamic_artists(self) -> list[Artist]:
        """The artists :meth:`update` changes, in drawing order."""
        artists: list[Artist] = []
        for field in self.axes:
            artists += [*self.bars[field].patches, *self.ghosts[field].patches]
            artists += self.axes[field].lines  # the zero line stays on top of the bars
        return [*artists, *self.weight_texts, self.suptitle]

    def update(self, result: TokenQKV, reference: TokenQKV) -> None:
        """Show ``result`` as filled bars and ``reference`` (no bias) as dashed outlines."""
        if self.limits is None:
            self._set_limits(token_qkv_limits([result, reference]))
        i = result.index
        for field in self.axes:
            values, ghost = _to_numpy(getattr(result, field)), _to_numpy(getattr(reference, field))
            for j, (bar, outline) in enumerate(
                zip(self.bars[field].patches, self.ghosts[field].patches, strict=True)
            ):
                bar.set_height(float(values[j]))
                outline.set_height(float(ghost[j]))
                if field in ("scores", "weights"):
                    bar.set_facecolor(_OWN_TOKEN_COLOR if j == i else _OTHER_TOKEN_COLOR)
        weights, plain = _to_numpy(result.weights), _to_numpy(reference.weights)
        pad = 0.01 * self.limits["weights"][1]
        for j, text in enumerate(self.weight_texts):
            text.set_text(f"{weights[j]:.2f}")
            text.set_y(max(float(weights[j]), float(plain[j])) + pad)
        dw = float(np.abs(weights - plain).max())
        dout = float(np.abs(_to_numpy(result.output) - _to_numpy(reference.output)).max())
        head = f"Token '{self.tokens[i]}' (position {i}), {BIAS_LABELS[result.bias]}"
        if result.bias == "none":
            self.suptitle.set_text(f"{head}: the filled bars fill the outlines exactly")
        else:
            self.suptitle.set_text(
                f"{head}: weights change by ≤ {dw:.4f}, output by ≤ {dout:.4f}"
            )


@_closes_figures_on_error
def plot_token_qkv(
    result: TokenQKV,
    reference: TokenQKV,
    tokens: Sequence[str],
    *,
    limits: dict[str, tuple[float, float]] | None = None,
    figsize: tuple[float, float] = (10.5, 6.4),
) -> Figure:
    """A static pyplot rendering of :class:`TokenQKVView` (end the cell with ``plt.show()``).

    Args:
        result: e.g. ``attn_lib.experiments.token_qkv(x, i, bias)``.
        reference: the same token with ``bias="none"``.
        tokens: the L_k token labels.
        limits: y limits per field, default from these two results.
        figsize: inches.

    Returns:
        The pyplot figure.

    Source: article section 2.1.
    """
    fig = plt.figure(figsize=figsize, layout="constrained")
    view = TokenQKVView(fig, tokens, len(result.query), len(result.value), limits=limits)
    view.update(result, reference)
    return fig


@_closes_figures_on_error
def plot_bias_gallery(
    results: Sequence[TokenQKV],
    reference: TokenQKV,
    tokens: Sequence[str],
    *,
    panel_size: float = 2.7,
) -> Figure:
    """One token under several bias settings: its weights (top row) and output (bottom row).

    Each panel shows the setting as filled bars and the no-bias ``reference`` as
    dashed outlines; its title gives the largest change against the reference.

    Args:
        results: TokenQKV-like objects of the same token (e.g. one per bias setting).
        reference: the same token with no bias.
        tokens: the L_k token labels.
        panel_size: width of one panel in inches.

    Returns:
        A pyplot figure (end the cell with ``plt.show()``).

    Raises:
        ValueError: no results, or results of another token than the reference.

    Source: article section 2.1; torch.nn.Linear (bias=True by default).
    """
    if not results:
        raise ValueError("give at least one result.")
    if any(r.index != reference.index for r in results):
        raise ValueError("every result must be of the same token as the reference.")
    n = len(results)
    limits = token_qkv_limits([*results, reference])
    fig, axes = plt.subplots(
        2, n, figsize=(panel_size * n + 0.6, 2 * panel_size + 1.0), layout="constrained",
        squeeze=False, sharey="row",
    )  # fmt: skip
    labels = [str(t) for t in tokens]
    i = reference.index
    for col, result in enumerate(results):
        for row, field in enumerate(("weights", "output")):
            ax = axes[row][col]
            values, ghost = _to_numpy(getattr(result, field)), _to_numpy(getattr(reference, field))
            positions = np.arange(len(values))
            if field == "weights":
                colors = [_OTHER_TOKEN_COLOR] * len(values)
                colors[i] = _OWN_TOKEN_COLOR
            else:
                colors = ["tab:purple"] * len(values)
            ax.bar(positions, values, width=0.7, color=colors)
            ax.bar(positions, ghost, width=0.7, **_GHOST)
            ax.axhline(0.0, color="black", linewidth=0.8)
            ax.set_ylim(*limits[field])
            change = float(np.abs(values - ghost).max())
            if field == "weights":
                ax.set_xticks(positions, labels, rotation=45, ha="right", fontsize=9)
                ax.set_title(
                    f"{BIAS_LABELS[result.bias]}\nweights change by ≤ {change:.4f}", fontsize=10
                )
                ax.set_xlabel("key token j")
            else:
                ax.set_xticks(positions, [str(p) for p in positions], fontsize=9)
                ax.set_title(f"output changes by ≤ {change:.4f}", fontsize=10)
                ax.set_xlabel("dimension of the output")
    axes[0][0].set_ylabel("attention weight")
    axes[1][0].set_ylabel("output entry")
    fig.legend(
        handles=_dashed_outline_handles(), loc="outside lower center", ncols=3, frameon=False,
        fontsize=10,
    )  # fmt: skip
    fig.suptitle(f"Token '{labels[i]}' (position {i}) under each bias setting")
    return fig


@_closes_figures_on_error
def plot_token_attention_gallery(
    panels: Sequence[tuple[torch.Tensor | np.ndarray, str]],
    tokens: Sequence[str],
    *,
    suptitle: str | None = None,
    panel_size: float = 4.0,
) -> Figure:
    """Heatmaps of (L, L) weights side by side, tokens on both axes, one 0–1 colorbar.

    Args:
        panels: (weights (L, L), title) per panel; self-attention, so queries and
            keys are the same tokens.
        tokens: the L token labels.
        suptitle: a title over all panels.
        panel_size: width of one panel in inches.

    Returns:
        A pyplot figure (end the cell with ``plt.show()``).

    Raises:
        ValueError: no panels, or weights whose shape does not match the tokens.

    Source: STYLE.md of this series (queries on y, keys on x, one colormap, 0–1).
    """
    if not panels:
        raise ValueError("give at least one panel.")
    n = len(panels)
    fig, axes = plt.subplots(
        1, n, figsize=(panel_size * n + 1.0, panel_size + 0.6), layout="constrained",
        squeeze=False,
    )  # fmt: skip
    drawn = []
    for ax, (weights, title) in zip(axes[0], panels, strict=True):
        heatmap = draw_attention_heatmap(
            ax, weights, None, query_labels=tokens, key_labels=tokens, title=title,
            colorbar=False, mask_legend=False,
        )  # fmt: skip
        drawn.append(heatmap)
        ax.set_xlabel("key token j (attended to)")
        ax.set_ylabel("query token i (attending)")
        plt.setp(ax.get_xticklabels(), rotation=45, ha="right")
        for row in drawn[-1].texts:
            for text in row:
                text.set_fontsize(8)
    _weights_colorbar(fig, drawn[0].image, list(axes[0]), fraction=0.03)
    if suptitle:
        fig.suptitle(suptitle)
    return fig


@_closes_figures_on_error
def plot_vectors_2d(
    x: torch.Tensor | np.ndarray,
    labels: Sequence[str],
    *,
    title: str = "token vectors",
    figsize: tuple[float, float] = (6.0, 2.6),
) -> Figure:
    """Draw (L, 2) token vectors as labelled arrows from the origin.

    Args:
        x: (L, 2) vectors, one per token.
        labels: the L token labels.
        title: axes title.
        figsize: inches.

    Returns:
        A pyplot figure (end the cell with ``plt.show()``).

    Raises:
        ValueError: x not (L, 2), or a label count that differs from L.

    Source: a picture for article section 2.1 (scoring x against x).
    """
    a = _to_numpy(x)
    if a.ndim != 2 or a.shape[1] != 2:
        raise ValueError(f"x must be (L, 2), got shape {a.shape}.")
    labels = _labels(labels, a.shape[0])
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, ax = plt.subplots(figsize=figsize, layout="constrained")
    handles = []
    for k, ((u, v), label) in enumerate(zip(a, labels, strict=True)):
        color = colors[k % len(colors)]
        ax.annotate(
            "", xy=(u, v), xytext=(0, 0),
            arrowprops={"arrowstyle": "-|>", "color": color, "linewidth": 2},
        )  # fmt: skip
        # Labels go in a legend: next to the tips they would sit on each other's arrows.
        handles.append(Line2D([], [], color=color, linewidth=2, label=f"{label} ({u:g}, {v:g})"))
    ax.legend(handles=handles, loc="upper left", fontsize=10)
    span = float(np.abs(a).max())
    lo, hi = np.minimum(a.min(axis=0), 0.0), np.maximum(a.max(axis=0), 0.0)
    ax.set_xlim(lo[0] - 0.1 * span, hi[0] + 0.1 * span)
    ax.set_ylim(lo[1] - 0.1 * span, hi[1] + 0.3 * span)  # room for the legend
    ax.set_aspect("equal")
    ax.set_xlabel("feature 0")
    ax.set_ylabel("feature 1")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    return fig


# ---------------------------------------------------------------------------
# Notebooks 00 and 01: softmax bars, the library retrieval, path lengths and pair counts
# ---------------------------------------------------------------------------


_WEIGHT_COLORS = colormaps[ATTENTION_CMAP]  # bars of attention weights share the heatmaps' colours
_INSIDE_BAR_ABOVE = 0.45  # a weight bar longer than this carries its number inside


def _weight_color(w: float) -> tuple[float, float, float, float]:
    """The colour a weight w ∈ [0, 1] gets in every heatmap of the series."""
    return _WEIGHT_COLORS(min(max(float(w), 0.0), 1.0))


def _as_numpy_1d(t: torch.Tensor | np.ndarray | Sequence[float], name: str, n: int) -> np.ndarray:
    a = t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t, dtype=float)
    if a.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},), got {a.shape}.")
    return a


class SoftmaxBarsView:
    """One row of softmax weights as vertical bars on a fixed 0–1 axis, updatable in place.

    Each bar is coloured by its weight with :data:`ATTENTION_CMAP` (the heatmaps' colours)
    and labelled with the weight (2 decimals). Used by notebook 00's widget check.

    Args:
        ax: the axes to draw on.
        labels: one x tick label per key (L_k labels).
        ylabel: the y axis label; None for none.

    Source: STYLE.md of this series (one colormap for attention weights, 0–1 scale).
    """

    def __init__(
        self, ax: Axes, labels: Sequence[str], *, ylabel: str | None = "attention weight (0 to 1)"
    ) -> None:
        self.ax = ax
        self.n = len(labels)
        x = np.arange(self.n)
        self.bars: BarContainer = ax.bar(x, np.zeros(self.n), width=0.65, edgecolor="0.3")
        ax.set_xticks(x, [str(s) for s in labels])
        ax.set_ylim(0.0, 1.12)
        ax.set_yticks([0.0, 0.25, 0.5, 0.75, 1.0])
        if ylabel:
            ax.set_ylabel(ylabel)
        self.texts = [ax.text(i, 0.0, "", ha="center", va="bottom", fontsize=10) for i in x]
        self.title = ax.set_title("")

    @property
    def dynamic_artists(self) -> list[Artist]:
        """The artists :meth:`update` changes, in drawing order."""
        return [*self.bars.patches, *self.ax.spines.values(), *self.texts, self.title]

    def update(self, weights: torch.Tensor | np.ndarray | Sequence[float], title: str) -> None:
        """Show weights (L_k,), each in [0, 1], under a new title.

        Raises:
            ValueError: weights not of shape (L_k,).
        """
        w = _as_numpy_1d(weights, "weights", self.n)
        for bar, text, wi in zip(self.bars.patches, self.texts, w, strict=True):
            bar.set_height(float(wi))
            bar.set_facecolor(_weight_color(wi))
            text.set_position((bar.get_x() + bar.get_width() / 2, float(wi) + 0.015))
            text.set_text(f"{wi:.2f}")
        self.title.set_text(title)


@_closes_figures_on_error
def plot_softmax_bars_gallery(
    panels: Sequence[tuple[torch.Tensor | np.ndarray, str]],
    labels: Sequence[str],
    *,
    suptitle: str | None = None,
    panel_size: tuple[float, float] = (2.9, 2.7),
) -> Figure:
    """Several rows of softmax weights side by side, as :class:`SoftmaxBarsView` draws them.

    Args:
        panels: (weights (L_k,), title) per panel.
        labels: the L_k key labels, shared by all panels.
        suptitle: a title over all panels.
        panel_size: (width, height) of one panel in inches.

    Returns:
        A pyplot figure (end the cell with ``plt.show()``).

    Raises:
        ValueError: no panels, or weights of the wrong shape.

    Source: STYLE.md of this series.
    """
    if not panels:
        raise ValueError("give at least one panel.")
    n = len(panels)
    fig, axes = plt.subplots(
        1, n, figsize=(panel_size[0] * n, panel_size[1]), layout="constrained", squeeze=False
    )
    for i, (ax, (weights, title)) in enumerate(zip(axes[0], panels, strict=True)):
        view = SoftmaxBarsView(ax, labels, ylabel="attention weight (0 to 1)" if i == 0 else None)
        view.update(weights, title)
    if suptitle:
        fig.suptitle(suptitle)
    return fig


class RetrievalView:
    """Notebook 01's library search in three panels, updatable in place.

    1. the relevance score q·k of every book (horizontal bars, book titles on the y axis);
    2. its weight softmax(score / T) (bars coloured with :data:`ATTENTION_CMAP`, 0–1 axis);
    3. the blended value Σ_j weight_j · value_j over the value features (vertical bars).

    Args:
        fig: an empty figure (a ``Figure`` from :func:`new_figure` for a dashboard, or a
            pyplot figure for a static cell).
        titles: the n_books book titles.
        value_features: the d_v names of the value columns.
        score_limit: the score axis runs from −score_limit to +score_limit.

    Source: article section 1.1 (the library) and 2.1 (query, key, value).
    """

    def __init__(
        self,
        fig: Figure,
        titles: Sequence[str],
        value_features: Sequence[str],
        *,
        score_limit: float = 2.0,
    ) -> None:
        self.fig = fig
        self.n_books, self.d_v = len(titles), len(value_features)
        ax_s, ax_w, ax_v = fig.subplots(1, 3, width_ratios=[1.0, 1.0, 1.05])
        y = np.arange(self.n_books)
        zeros = np.zeros(self.n_books)

        self.score_bars: BarContainer = ax_s.barh(y, zeros, height=0.6, color="0.6")
        ax_s.axvline(0.0, color="black", linewidth=0.8)
        ax_s.set_xlim(-score_limit, score_limit)
        ax_s.set_yticks(y, [str(t) for t in titles])
        ax_s.set_ylim(self.n_books - 0.5, -0.5)  # first book at the top
        ax_s.set_xlabel("score q·k (dimensionless)")
        ax_s.set_title("1 · relevance score q·k")
        # Each score is written on the other side of the zero line from its bar.
        self.score_texts = [ax_s.text(0.0, i, "", va="center", fontsize=9) for i in y]

        self.weight_bars: BarContainer = ax_w.barh(y, zeros, height=0.6, edgecolor="0.3")
        ax_w.set_xlim(0.0, 1.0)
        ax_w.set_xticks([0.0, 0.25, 0.5, 0.75, 1.0])
        ax_w.set_yticks(y, [""] * self.n_books)
        ax_w.set_ylim(self.n_books - 0.5, -0.5)
        ax_w.set_xlabel("weight (0 to 1; the weights sum to 1)")
        ax_w.set_title("2 · weight = softmax(score / T)")
        self.weight_texts = [ax_w.text(0.0, i, "", va="center", fontsize=9) for i in y]

        x = np.arange(self.d_v)
        self.value_bars: BarContainer = ax_v.bar(x, np.zeros(self.d_v), width=0.65, color="C1")
        ax_v.set_xticks(x, [str(f) for f in value_features], rotation=30, ha="right")
        ax_v.set_ylim(0.0, 1.0)
        ax_v.set_ylabel("share of the blend")
        ax_v.set_title("3 · blend = Σ weight × value")
        self.value_texts = [ax_v.text(i, 0.0, "", ha="center", va="bottom", fontsize=9) for i in x]

        self.axes = (ax_s, ax_w, ax_v)
        self.suptitle = fig.suptitle("")

    @property
    def dynamic_artists(self) -> list[Artist]:
        """The artists :meth:`update` changes, in drawing order."""
        spines = [s for ax in self.axes for s in ax.spines.values()]
        return [
            *self.score_bars.patches, *self.weight_bars.patches, *self.value_bars.patches,
            *spines, *self.score_texts, *self.weight_texts, *self.value_texts, self.suptitle,
        ]  # fmt: skip

    def update(
        self,
        scores: torch.Tensor | np.ndarray,
        weights: torch.Tensor | np.ndarray,
        blended: torch.Tensor | np.ndarray,
        title: str,
    ) -> None:
        """Show scores (n_books,), weights (n_books,) and blended (d_v,) under a title.

        Raises:
            ValueError: a vector of the wrong length.
        """
        s = _as_numpy_1d(scores, "scores", self.n_books)
        w = _as_numpy_1d(weights, "weights", self.n_books)
        v = _as_numpy_1d(blended, "blended", self.d_v)
        pad = 0.04 * self.axes[0].get_xlim()[1]
        for bar, text, si in zip(self.score_bars.patches, self.score_texts, s, strict=True):
            bar.set_width(float(si))
            text.set_text(f"{si:.2f}")
            text.set_x(-pad if si >= 0 else pad)
            text.set_horizontalalignment("right" if si >= 0 else "left")
        for bar, text, wi in zip(self.weight_bars.patches, self.weight_texts, w, strict=True):
            bar.set_width(float(wi))
            bar.set_facecolor(_weight_color(wi))
            inside = wi > _INSIDE_BAR_ABOVE
            text.set_text(f"{wi:.2f}")
            text.set_x(float(wi) - 0.02 if inside else float(wi) + 0.02)
            text.set_horizontalalignment("right" if inside else "left")
            text.set_color("black" if not inside or wi >= _TEXT_DARK_BELOW else "white")
        for bar, text, vi in zip(self.value_bars.patches, self.value_texts, v, strict=True):
            bar.set_height(float(vi))
            text.set_y(float(vi) + 0.01)
            text.set_text(f"{vi:.2f}")
        self.suptitle.set_text(title)


@_closes_figures_on_error
def plot_retrieval(
    scores: torch.Tensor,
    weights: torch.Tensor,
    blended: torch.Tensor,
    *,
    titles: Sequence[str],
    value_features: Sequence[str],
    title: str,
    figsize: tuple[float, float] = (11.0, 3.8),
) -> Figure:
    """A static pyplot rendering of :class:`RetrievalView` (what the dashboard shows).

    Args:
        scores, weights: (n_books,). blended: (d_v,). titles: n_books book titles.
        value_features: d_v names. title: the figure's title. figsize: inches.

    Returns:
        The pyplot figure (end the cell with ``plt.show()``).

    Source: article section 1.1.
    """
    fig = plt.figure(figsize=figsize, layout="constrained")
    RetrievalView(fig, titles, value_features).update(scores, weights, blended, title)
    return fig


@_closes_figures_on_error
def plot_retrieval_gallery(
    panels: Sequence[tuple[torch.Tensor, torch.Tensor, str]],
    *,
    titles: Sequence[str],
    value_features: Sequence[str],
    suptitle: str | None = None,
    figsize: tuple[float, float] | None = None,
) -> Figure:
    """Weights (top row) and blended values (bottom row) for several settings, side by side.

    Args:
        panels: (weights (n_books,), blended (d_v,), title) per column.
        titles: the n_books book titles (y tick labels of the first column).
        value_features: the d_v value names.
        suptitle: a title over all panels.
        figsize: inches; default 3.4 per column (plus room for the titles) by 5.4.

    Returns:
        A pyplot figure (end the cell with ``plt.show()``).

    Raises:
        ValueError: no panels, or vectors of the wrong length.

    Source: article section 1.1 ("take the best, skim the close ones").
    """
    if not panels:
        raise ValueError("give at least one panel.")
    n, n_books, d_v = len(panels), len(titles), len(value_features)
    fig, axes = plt.subplots(
        2,
        n,
        figsize=figsize or (3.4 * n + 1.8, 5.4),
        layout="constrained",
        squeeze=False,
        height_ratios=[1.25, 1.0],
    )
    y, x = np.arange(n_books), np.arange(d_v)
    for col, (weights, blended, title) in enumerate(panels):
        w = _as_numpy_1d(weights, "weights", n_books)
        v = _as_numpy_1d(blended, "blended", d_v)
        ax_w, ax_v = axes[0][col], axes[1][col]
        ax_w.barh(y, w, height=0.6, color=[_weight_color(wi) for wi in w], edgecolor="0.3")
        for i, wi in enumerate(w):
            ax_w.text(min(wi + 0.02, 0.8), i, f"{wi:.2f}", va="center", fontsize=9)
        ax_w.set_xlim(0.0, 1.0)
        ax_w.set_xticks([0.0, 0.5, 1.0])
        ax_w.set_ylim(n_books - 0.5, -0.5)
        ax_w.set_yticks(y, [str(t) for t in titles] if col == 0 else [""] * n_books)
        ax_w.set_xlabel("weight (0 to 1)")
        ax_w.set_title(title)
        ax_v.bar(x, v, width=0.65, color="C1")
        for j, vj in enumerate(v):
            ax_v.text(j, vj + 0.01, f"{vj:.2f}", ha="center", va="bottom", fontsize=8)
        ax_v.set_ylim(0.0, 1.0)
        ax_v.set_xticks(x, [str(f) for f in value_features], rotation=35, ha="right")
        ax_v.set_ylabel("share of the blend" if col == 0 else "")
    if suptitle:
        fig.suptitle(suptitle)
    return fig


@_closes_figures_on_error
def plot_path_lengths_and_pairs(
    paths: Sequence[PathLengths],
    pairs: PairCounts,
    *,
    figsize: tuple[float, float] = (10.0, 3.9),
) -> Figure:
    """Left: path length against distance |i − j|; right: L² pairs against L, log-log.

    Args:
        paths: results of :func:`attn_lib.experiments.path_lengths` (one per kernel size k,
            same L): distance, recurrent, convolution, self_attention (L − 1,) and kernel_size.
        pairs: a result of :func:`attn_lib.experiments.pair_counts`: L, self_attention (L²)
            and recurrent (L), each (n,).
        figsize: inches.

    Returns:
        A pyplot figure (end the cell with ``plt.show()``).

    Raises:
        ValueError: no paths.

    Source: Vaswani et al. 2017, Table 1 (maximum path lengths); article section 1.2.
    """
    if not paths:
        raise ValueError("give at least one PathLengths result.")
    fig, (ax_p, ax_c) = plt.subplots(1, 2, figsize=figsize, layout="constrained")
    d = paths[0].distance.numpy()
    ax_p.plot(d, paths[0].recurrent.numpy(), color="C3", label="recurrent net: |i − j| steps")
    for p, color in zip(paths, ("C0", "C2", "C4", "C5"), strict=False):
        k = p.kernel_size
        ax_p.plot(
            d,
            p.convolution.numpy(),
            color=color,
            drawstyle="steps-post",
            label=f"width-{k} convolutions: ⌈|i − j| / {k - 1}⌉ layers",
        )
    ax_p.plot(d, paths[0].self_attention.numpy(), color="black", label="self-attention: 1 step")
    ax_p.set_xlim(0, d[-1] + 1)
    ax_p.set_ylim(0, d[-1] + 1)
    ax_p.set_xlabel("distance |i − j| (positions)")
    ax_p.set_ylabel("steps or layers on the path")
    ax_p.set_title("Path length between positions i and j")
    ax_p.legend(fontsize=9, loc="upper left")

    L = pairs.L.numpy()
    ax_c.loglog(L, pairs.self_attention.numpy(), color="black", label="self-attention: L² pairs")
    ax_c.loglog(L, pairs.recurrent.numpy(), color="C3", label="recurrent net: L steps")
    ax_c.set_xscale("log", base=2)
    ax_c.set_yscale("log", base=2)
    ax_c.set_xlabel("sequence length L (tokens, log scale)")
    ax_c.set_ylabel("count per layer (log scale)")
    ax_c.set_title("Pairs scored: L² (slope 2 on log-log axes)")
    ax_c.legend(fontsize=9, loc="upper left")
    return fig


# ---------------------------------------------------------------------------
# Notebook 03: scaling and softmax saturation (article section 2.2)
# ---------------------------------------------------------------------------


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
    """Draw one statistic of :func:`attn_lib.experiments.saturation_curves` against d_k.

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
        curves: scaling → SaturationCurve, from :func:`attn_lib.experiments.saturation_curves`.
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
        row: from :func:`attn_lib.experiments.saturation_row`.
        curves: from :func:`attn_lib.experiments.saturation_curves` at the row's temperature,
            with all three scalings.
        figsize: inches.

    Returns:
        The figure (end the cell with ``plt.show()``).

    Raises:
        ValueError: as :meth:`SaturationView.update`.

    Source: article section 2.2; the dashboard attn_lib.widgets.SaturationDashboard.
    """
    first = next(iter(curves.values()))
    fig = plt.figure(figsize=figsize)  # SaturationView places its axes itself
    view = SaturationView(fig, len(row.weights), threshold=first.threshold)
    view.update(row, curves)
    return fig


# ---------------------------------------------------------------------------
# Notebook 04: every shape of softmax(Q Kᵀ / √d_k) V, drawn to scale; what attention costs
# ---------------------------------------------------------------------------


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

    Source: the bounds of :class:`attn_lib.widgets.ShapeDashboard`'s sliders.
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
        """Show one setting (e.g. :func:`attn_lib.experiments.shape_walkthrough`).

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
        result: e.g. ``attn_lib.experiments.shape_walkthrough(2, 7, None, 10, 6, 4)``;
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
            :func:`attn_lib.experiments.shape_walkthrough`; sizes within the default
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
        curves: :func:`attn_lib.experiments.cost_curves` (L, projection_macs,
            attention_macs, score_matrix_bytes, crossover).
        qkv_bytes: (n,) bytes of Q, K and V for each L, or None.
        title: a title over both panels.
        figsize: inches.

    Returns:
        The pyplot figure (end the cell with ``plt.show()``).

    Source: Vaswani et al. 2017, Table 1; the cost model of attn_lib.experiments.attention_cost.
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
