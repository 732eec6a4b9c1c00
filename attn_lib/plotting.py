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

from collections.abc import Sequence

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

from .experiments import PairCounts, PathLengths, TokenQKV

__all__ = [
    "ATTENTION_CMAP",
    "BIAS_LABELS",
    "MASKED_COLOR",
    "MASKED_MARK",
    "NAN_EDGE",
    "NAN_FACE",
    "BlitRenderer",
    "HeatmapArtists",
    "RetrievalView",
    "SoftmaxBarsView",
    "TokenQKVView",
    "WeightsRowSumsView",
    "add_mask_legend",
    "draw_attention_heatmap",
    "figure_to_png",
    "freeze_layout",
    "new_figure",
    "plot_attention",
    "plot_attention_gallery",
    "plot_bias_gallery",
    "plot_path_lengths_and_pairs",
    "plot_retrieval",
    "plot_retrieval_gallery",
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
    _as_numpy_1d,
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
