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

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib import colormaps
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.container import BarContainer
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import LogLocator, NullLocator

from .experiments import PairCounts, PathLengths, SaturationCurve, SaturationRow, TokenQKV

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
    "plot_attention_gallery",
    "plot_bias_gallery",
    "plot_gradient_quantiles",
    "plot_path_lengths_and_pairs",
    "plot_retrieval",
    "plot_retrieval_gallery",
    "plot_saturation_curves",
    "plot_saturation_rows",
    "plot_saturation_view",
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
    _closes_figures_on_error,
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
