"""Notebook 02's figures and dashboard (matplotlib, ipywidgets).

Used by notebook 02 (Queries, keys and values), sections "5 · Why not score x against x?"
(:func:`plot_weights_pair`) and "7 · The token dashboard" (:func:`plot_token_qkv`,
:func:`plot_bias_gallery`, :class:`TokenQKVDashboard`). The numbers come from
``nb02_qkv.qkv_example``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.container import BarContainer
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from ._dashboard import Dashboard, _toggle_buttons
from ._examples import qkv_sentence
from ._figures import (
    BlitRenderer,
    _weights_colorbar,
    draw_attention_heatmap,
    figure,
    freeze_layout,
    new_figure,
    subplots,
)
from .nb02_qkv import BIAS_CHOICES, QKVExample, qkv_example

BIAS_LABELS = {"none": "no bias", "q": "bias on Q", "k": "bias on K", "v": "bias on V"}

# field of QKVExample → (title, x label, y label, colour); reading order, 2 rows × 3.
_PANELS = {
    "Q": ("query q_i: what it looks for", "dimension of q_i", "entry", "tab:blue"),
    "K": ("key k_i: what it offers", "dimension of k_i", "entry", "tab:orange"),
    "V": ("value v_i: what it passes on", "dimension of v_i", "entry", "tab:green"),
    "scores": ("scores q_i·k_j / √d_k", "key token j", "score", "0.6"),
    "weights": ("weights: softmax of the scores", "key token j", "attention weight", "0.6"),
    "output": ("output_i = Σ_j w_ij v_j", "dimension of the output", "entry", "tab:purple")}  # fmt: skip
_OWN = "0.2"  # the token's own key, in the scores and weights panels
_GHOST = {"fill": False, "edgecolor": "black", "linestyle": "--", "linewidth": 1.0}
_LEGEND = [
    Patch(facecolor="0.6", label="with the chosen bias"),
    Patch(**_GHOST, label="without any bias (for comparison)"),
    Patch(facecolor=_OWN, label="the token's own key")]  # fmt: skip


def _limits(examples: Sequence[QKVExample]) -> dict[str, tuple[float, float]]:
    """y limits per field over every token and setting, so that bars compare across them."""
    tops = {f: 1.1 * max(float(getattr(e, f).abs().max()) for e in examples) for f in _PANELS}
    return {f: (0.0, top) if f == "weights" else (-top, top) for f, top in tops.items()}


def _bar_panel(
    ax: Axes, field: str, tokens: Sequence[str], limit: tuple[float, float], width: int
) -> tuple[BarContainer, BarContainer]:
    """Empty filled bars and dashed outlines for one field (``width`` entries, or L keys)."""
    title, xlabel, ylabel, color = _PANELS[field]
    n = len(tokens) if field in ("scores", "weights") else width
    positions = np.arange(n)
    bars = ax.bar(positions, np.zeros(n), width=0.7, color=color)
    ghosts = ax.bar(positions, np.zeros(n), width=0.7, **_GHOST)
    ax.axhline(0.0, color="black", linewidth=0.8)
    if field in ("scores", "weights"):
        ax.set_xticks(positions, tokens, rotation=30, ha="right")
    else:
        ax.set_xticks(positions, [str(p) for p in positions])
    ax.set(xlim=(-0.6, n - 0.4), ylim=limit, xlabel=xlabel, ylabel=ylabel)
    ax.set_title(title, fontsize=11)
    return bars, ghosts


def _set_bars(bars: BarContainer, ghosts: BarContainer, values, plain, own: int | None) -> None:
    """Filled bars at ``values``, outlines at ``plain``; bar ``own`` darker (if not None)."""
    for j, (bar, ghost) in enumerate(zip(bars.patches, ghosts.patches, strict=True)):
        bar.set_height(float(values[j]))
        ghost.set_height(float(plain[j]))
        if own is not None:
            bar.set_facecolor(_OWN if j == own else "0.6")


class TokenQKVView:
    """One token's q, k, v, row of scores, weights and output as bars, updatable (2 × 3).

    Each panel shows the chosen setting as filled bars and the no-bias setting as dashed
    outlines, so a bias that changes nothing leaves every bar inside its outline.
    """

    def __init__(self, fig: Figure, tokens: Sequence[str], examples: Sequence[QKVExample]) -> None:
        self.tokens = list(tokens)
        limits, width = _limits(examples), examples[0].Q.shape[-1]
        self.bars: dict[str, tuple[BarContainer, BarContainer]] = {
            field: _bar_panel(ax, field, self.tokens, limits[field], width)
            for ax, field in zip(fig.subplots(2, 3).flat, _PANELS, strict=True)}  # fmt: skip
        fig.legend(handles=_LEGEND, loc="outside lower center", ncols=3, frameon=False)
        self.suptitle = fig.suptitle(" ")

    @property
    def dynamic_artists(self) -> list[Artist]:
        """The artists :meth:`update` changes (the zero lines stay on top of the bars)."""
        return [*(a for bars, ghosts in self.bars.values() for a in (*bars.patches,
                  *ghosts.patches, *bars.patches[0].axes.lines)), self.suptitle]  # fmt: skip

    def update(self, example: QKVExample, plain: QKVExample, i: int) -> None:
        """Show token i of ``example`` as bars and of ``plain`` (no bias) as outlines."""
        for field, (bars, ghosts) in self.bars.items():
            own = i if field in ("scores", "weights") else None
            _set_bars(bars, ghosts, getattr(example, field)[i], getattr(plain, field)[i], own)
        dw = float((example.weights[i] - plain.weights[i]).abs().max())
        dout = float((example.output[i] - plain.output[i]).abs().max())
        head = f"Token '{self.tokens[i]}' (position {i}), {BIAS_LABELS[example.bias]}"
        tail = "the filled bars fill the outlines exactly" if example.bias == "none" else (
            f"weights change by ≤ {dw:.4f}, output by ≤ {dout:.4f}")  # fmt: skip
        self.suptitle.set_text(f"{head}: {tail}")


def plot_token_qkv(
    examples: Mapping[str, QKVExample], tokens: Sequence[str], index: int, bias: str
) -> Figure:
    """The dashboard's picture of token ``index`` under ``bias``, as a pyplot figure.

    ``examples`` maps every bias in BIAS_CHOICES to ``qkv_example(x, bias)``.
    """
    # the dashboard's layout and scale (dpi 80): it fits the notebook's 840 px
    fig = figure(figsize=(10.3, 6.4), dpi=80, layout="constrained")
    view = TokenQKVView(fig, tokens, list(examples.values()))
    view.update(examples[bias], examples["none"], index)
    return fig


def plot_bias_gallery(
    examples: Mapping[str, QKVExample], tokens: Sequence[str], index: int
) -> Figure:
    """Token ``index``'s weights (top) and output (bottom) with a bias on Q, on K, on V."""
    plain = examples["none"]
    limits, width = _limits(list(examples.values())), plain.Q.shape[-1]
    fig, axes = subplots(2, 3, figsize=(8.1, 6.4), layout="constrained", sharey="row")
    for col, bias in enumerate(("q", "k", "v")):
        titles = (f"{BIAS_LABELS[bias]}\nweights change", "output changes")
        for ax, field, title in zip(axes[:, col], ("weights", "output"), titles, strict=True):
            shown, without = getattr(examples[bias], field)[index], getattr(plain, field)[index]
            bars = _bar_panel(ax, field, tokens, limits[field], width)
            _set_bars(*bars, shown, without, index if field == "weights" else None)
            change = float((shown - without).abs().max())
            ax.set_title(f"{title} by ≤ {change:.4f}", fontsize=10)
            if col > 0:
                ax.set_ylabel("")
    fig.legend(handles=_LEGEND, loc="outside lower center", ncols=3, frameon=False)
    fig.suptitle(f"Token '{tokens[index]}' (position {index}) under each bias setting")
    return fig


def plot_weights_pair(panels: Sequence[tuple[torch.Tensor, str]], tokens: Sequence[str],
                      suptitle: str) -> Figure:  # fmt: skip
    """(weights (L_q, L_k), title) panels side by side, tokens on both axes, one 0–1 colorbar."""
    fig, axes = subplots(1, len(panels), figsize=(8.1, 4.4), layout="constrained")
    for ax, (weights, title) in zip(axes, panels, strict=True):
        heatmap = draw_attention_heatmap(
            ax, weights, query_labels=tokens, key_labels=tokens, title=title, colorbar=False)  # fmt: skip
        ax.set(xlabel="key token j (attended to)", ylabel="query token i (attending)")
        plt.setp(ax.get_xticklabels(), rotation=45, ha="right")
        for text in (t for row in heatmap.texts for t in row):
            text.set_fontsize(8)
    _weights_colorbar(fig, heatmap.image, list(axes), fraction=0.03)
    fig.suptitle(suptitle)
    return fig


class TokenQKVDashboard(Dashboard):
    """Notebook 02's token dashboard: a token and a bias → its q, k, v, scores, weights, output.

    Controls: ``token`` (position i in "a small cat sat on the mat") and ``bias`` (one of
    BIAS_CHOICES). The four settings of :func:`nb02_qkv.qkv_example` are computed once; a
    change redraws the bars of :class:`TokenQKVView`. ``dpi`` sets the PNG's resolution.

    Source: article section 2.1 (Q, K, V); torch.nn.Linear (bias=True by default).
    """

    plain_text = (
        "Dashboard: one token's query, key, value, scores, weights and output, with a bias "
        "switch (none / on Q / on K / on V). It needs a running Jupyter kernel; the static "
        "figures above show its default setting and the three bias settings.")  # fmt: skip

    def __init__(self, index: int = 2, bias: str = "none", *, dpi: float = 80) -> None:
        sentence = qkv_sentence()
        self.examples = {b: qkv_example(sentence.x, b) for b in BIAS_CHOICES}
        controls = {
            "token": widgets.Dropdown(
                options=[(f"{i}: {t}", i) for i, t in enumerate(sentence.tokens)],
                value=index, description="token", layout=widgets.Layout(width="180px"),
            ),
            "bias": _toggle_buttons([(BIAS_LABELS[b], b) for b in BIAS_CHOICES], bias, "bias",
                                    "90px"),
        }  # fmt: skip
        figure = new_figure(figsize=(10.5, 6.4), dpi=dpi)
        self.view = TokenQKVView(figure, sentence.tokens, list(self.examples.values()))
        self.render(index, bias)
        freeze_layout(figure)
        self._renderer = BlitRenderer(figure, self.view.dynamic_artists)
        super().__init__(controls, figure)
        self.update()

    def render(self, token: int, bias: str) -> None:
        """Show this token under this bias setting."""
        self.example = self.examples[bias]
        self.view.update(self.example, self.examples["none"], token)

    def to_png(self) -> bytes:
        """Redraw only the bars and the title."""
        return self._renderer.render()
