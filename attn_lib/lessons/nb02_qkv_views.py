"""Notebook 02's figures and dashboards (matplotlib, ipywidgets).

Used by notebook 02 (Queries, keys and values), sections "5 · Why not compare x with x
directly?", "7 · A dashboard: one token, and a bias switch". Its data and experiments come from
``nb02_qkv``.
"""

from __future__ import annotations

from collections.abc import Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.container import BarContainer
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ._dashboard import Dashboard, _toggle_buttons
from ._examples import Sentence, qkv_sentence
from ._figures import (
    BlitRenderer,
    _closes_figures_on_error,
    _labels,
    _to_numpy,
    _weights_colorbar,
    draw_attention_heatmap,
    freeze_layout,
    new_figure,
)
from .nb02_qkv import BIAS_CHOICES, TokenQKV, token_qkv

# How the series names the four bias settings of nb02_qkv.qkv_example.
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
        result: e.g. ``nb02_qkv.token_qkv(x, i, bias)``.
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


class TokenQKVDashboard(Dashboard):
    """Notebook 02's token dashboard: a token and a bias → its q, k, v, scores, weights, output.

    Controls: ``token`` (a Dropdown over the sentence's tokens; its value is the
    position i) and ``bias`` (ToggleButtons over "none", "q", "k", "v": which
    projection gets its bias vector). Every change looks up
    :func:`nb02_qkv.token_qkv` for that token and setting (all L × 4
    results are computed once, when the dashboard is built, which also fixes the y
    limits so that bars compare across settings) and redraws
    :class:`TokenQKVView`: the setting as filled bars, the same
    token without any bias as dashed outlines. A bias on K leaves the scores shifted
    by a constant and the weights unchanged; a bias on V leaves the weights unchanged
    and shifts the output by b_V; a bias on Q changes the weights.

    Args:
        index: the initial token position (negative counts from the end).
        bias: the initial bias setting, one of :data:`nb02_qkv.BIAS_CHOICES`.
        sentence: tokens and x (L, d_model); default :func:`_examples.qkv_sentence`.
        bias_scale: multiplier of the bias vectors (1 = nn.Linear's init range
            U(±1/√d_model)); the default 3 makes a Q bias's effect easy to see.
        d_k, d_v, seed: as :func:`nb02_qkv.qkv_example`.
        dpi: resolution of the PNG.

    Attributes:
        sentence: the sentence shown.
        results: {(position, bias): TokenQKV}, every setting, computed once.
        result: the TokenQKV currently shown; reference: the same token with no bias.
        view: the TokenQKVView that draws them.

    Raises:
        IndexError: index out of range. ValueError: an unknown bias, a bias_scale
            that is not > 0. ShapeError: as :func:`nb02_qkv.qkv_example`.

    Source: article section 2.1 (Q, K, V); torch.nn.Linear (bias=True by default).
    """

    plain_text = (
        "Dashboard: one token's query, key, value, scores, weights and output, with a bias "
        "switch (none / on Q / on K / on V). It needs a running Jupyter kernel; the static "
        "figures above show its default setting and the four bias settings."
    )

    def __init__(
        self,
        index: int = 2,
        bias: str = "none",
        *,
        sentence: Sentence | None = None,
        bias_scale: float = 3.0,
        d_k: int | None = None,
        d_v: int | None = None,
        seed: int = 0,
        dpi: float = 80,
    ) -> None:
        self.sentence = qkv_sentence() if sentence is None else sentence
        tokens, x = self.sentence.tokens, self.sentence.x
        first = token_qkv(x, index, bias, d_k=d_k, d_v=d_v, bias_scale=bias_scale, seed=seed)
        self.results: dict[tuple[int, str], TokenQKV] = {
            (i, b): token_qkv(x, i, b, d_k=d_k, d_v=d_v, bias_scale=bias_scale, seed=seed)
            for i in range(len(tokens))
            for b in BIAS_CHOICES
        }
        style = {"description_width": "initial"}
        controls = {
            "token": widgets.Dropdown(
                options=[(f"{i}: {t}", i) for i, t in enumerate(tokens)],
                value=first.index,
                description="token",
                style=style,
                layout=widgets.Layout(width="180px"),
            ),
            "bias": _toggle_buttons(
                [(BIAS_LABELS[b], b) for b in BIAS_CHOICES], first.bias, "bias", "90px"
            ),
        }
        figure = new_figure(figsize=(10.5, 6.4), dpi=dpi)
        self.view = TokenQKVView(
            figure,
            tokens,
            len(first.query),
            len(first.value),
            limits=token_qkv_limits(list(self.results.values())),
        )
        self._show(first.index, first.bias)
        freeze_layout(figure)
        self._renderer = BlitRenderer(figure, self.view.dynamic_artists)
        super().__init__(controls, figure)
        self._wrap_controls()
        self.update()

    def _show(self, token: int, bias: str) -> None:
        self.result = self.results[(token, bias)]
        self.reference = self.results[(token, "none")]
        self.view.update(self.result, self.reference)

    def render(self, token: int, bias: str) -> None:
        """Look up this token and bias setting and redraw the bars."""
        self._show(token, bias)

    def to_png(self) -> bytes:
        """Redraw only the bars, the weight labels and the title."""
        return self._renderer.render()
