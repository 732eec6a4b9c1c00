"""Notebook 01's figures and dashboard (matplotlib, ipywidgets).

Used by notebook 01 (Attention as retrieval), sections "1 · A library search" (three panels,
static and live), "3 · Self-attention" and "5 · Word order" (heatmaps), "4 · Path length".
"""

from __future__ import annotations

from collections.abc import Sequence

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib.artist import Artist
from matplotlib.figure import Figure, SubFigure

from . import nb01_retrieval as lesson
from ._dashboard import Dashboard, _temperature_slider
from ._figures import (
    _TEXT_DARK_BELOW,
    BlitRenderer,
    _weight_color,
    _weights_colorbar,
    draw_attention_heatmap,
    figure,
    freeze_layout,
    new_figure,
    subplots,
)

TEMPERATURES = (0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0)  # the slider's values


class RetrievalView:
    """The library search in three panels, updated in place: scores, weights, blend."""

    def __init__(self, fig: Figure | SubFigure) -> None:
        lib = lesson.library_books()
        n, d_v = len(lib.titles), len(lesson.VALUE_FEATURES)
        ax_s, ax_w, ax_v = fig.subplots(1, 3, width_ratios=[1.0, 1.0, 1.05])
        fig.get_layout_engine().set(wspace=0.04)  # room between the score and weight axes
        y = np.arange(n)
        self.score_bars = ax_s.barh(y, np.zeros(n), height=0.6, color="0.6")
        ax_s.axvline(0.0, color="black", linewidth=0.8)
        ax_s.set(xlim=(-2, 2), ylim=(n - 0.5, -0.5), xlabel="score q·k (dimensionless)")
        ax_s.set_yticks(y, lib.titles)
        ax_s.set_title("1 · relevance score q·k")
        self.weight_bars = ax_w.barh(y, np.zeros(n), height=0.6, edgecolor="0.3")
        ax_w.set(xlim=(0, 1), ylim=(n - 0.5, -0.5), xlabel="weight (0 to 1; they sum to 1)")
        ax_w.set_yticks(y, [""] * n)
        ax_w.set_title("2 · weight = softmax(score / T)")
        x = np.arange(d_v)
        self.value_bars = ax_v.bar(x, np.zeros(d_v), width=0.65, color="C1")
        ax_v.set(ylim=(0, 1), ylabel="share of the blend")
        ax_v.set_xticks(x, lesson.VALUE_FEATURES, rotation=30, ha="right")
        ax_v.set_title("3 · blend = Σ weight × value")
        self.texts = [  # the numbers beside the bars: scores, weights, blend
            [ax.text(0.0, i, "", va="center", fontsize=9) for i in y] for ax in (ax_s, ax_w)
        ] + [[ax_v.text(i, 0.0, "", ha="center", va="bottom", fontsize=9) for i in x]]
        self.suptitle = fig.suptitle("")
        bars = (self.score_bars, self.weight_bars, self.value_bars)
        spines = (s for ax in (ax_s, ax_w, ax_v) for s in ax.spines.values())
        self.dynamic_artists: list[Artist] = [  # what update changes, in drawing order
            *(p for b in bars for p in b.patches), *spines, *(t for row in self.texts for t in row),
            self.suptitle,
        ]  # fmt: skip

    def update(self, query: torch.Tensor, r: lesson.Retrieval) -> None:
        """Show what a query (d_k,) retrieved: scores, weights and blend, under the settings."""
        score_texts, weight_texts, value_texts = self.texts
        for bar, text, s in zip(self.score_bars, score_texts, r.scores.tolist(), strict=True):
            bar.set_width(s)  # the number goes on the other side of the zero line
            text.set(text=f"{s:.2f}", x=-0.08 if s >= 0 else 0.08, ha="right" if s >= 0 else "left")
        for bar, text, w in zip(self.weight_bars, weight_texts, r.weights.tolist(), strict=True):
            bar.set_width(w)
            bar.set_facecolor(_weight_color(w))
            inside = w > 0.45  # a long bar carries its number inside
            color = "white" if inside and w < _TEXT_DARK_BELOW else "black"
            x, ha = (w - 0.02, "right") if inside else (w + 0.02, "left")
            text.set(text=f"{w:.2f}", x=x, ha=ha, color=color)
        for bar, text, v in zip(self.value_bars, value_texts, r.blended.tolist(), strict=True):
            bar.set_height(v)
            text.set(text=f"{v:.2f}", y=v + 0.01)
        parts = " · ".join(
            f"{n} {q + 0.0:.1f}" for n, q in zip(lesson.KEY_FEATURES, query.tolist())
        )
        self.suptitle.set_text(f"query: {parts}   |   temperature T = {r.temperature:g}")


def plot_retrievals(query: torch.Tensor, temperatures: Sequence[float]) -> Figure:
    """One row of :class:`RetrievalView` per temperature, for one query (d_k,)."""
    lib = lesson.library_books()
    # the dashboard's layout and scale (dpi 80): three panels a row fit the notebook's 840 px
    fig = figure(figsize=(10.3, 3.6 * len(temperatures)), dpi=80, layout="constrained")
    for sub, T in zip(
        np.atleast_1d(fig.subfigures(len(temperatures), 1)), temperatures, strict=True
    ):
        RetrievalView(sub).update(query, lesson.retrieve(query, lib.keys, lib.values, T))
    return fig


class RetrievalDashboard(Dashboard):
    """The library search, live: four query sliders (−1 to 1) and a temperature slider.

    Attributes:
        result: the :class:`lesson.Retrieval` currently shown.
    """

    plain_text = (
        "Dashboard: a library search (query sliders and a temperature → relevance scores, "
        "softmax weights, blended contents). It needs a running Jupyter kernel; the static "
        "figure above shows its default setting and two other temperatures."
    )

    def __init__(self, temperature: float = 0.5, *, dpi: float = 80) -> None:
        self.library = lesson.library_books()
        start, style = lesson.library_query(), {"description_width": "initial"}
        controls: dict[str, widgets.ValueWidget] = {
            name: widgets.FloatSlider(
                value=float(q), min=-1.0, max=1.0, step=0.1, readout_format=".1f",
                description=name, style=style, layout=widgets.Layout(width="250px"),
            )
            for name, q in zip(lesson.KEY_FEATURES, start, strict=True)
        }  # fmt: skip
        controls["temperature"] = _temperature_slider(TEMPERATURES, temperature, "temperature T")
        figure = new_figure(figsize=(10.5, 3.8), dpi=dpi)  # 840 px: the notebook's width
        self.view = RetrievalView(figure)
        self.render(temperature, **dict(zip(lesson.KEY_FEATURES, start.tolist(), strict=True)))
        freeze_layout(figure)
        self._renderer = BlitRenderer(figure, self.view.dynamic_artists)
        super().__init__(controls, figure)
        self.update()

    def render(self, temperature: float, **amounts: float) -> None:
        query = lesson.library_query(amounts)  # (d_k,)
        self.result = lesson.retrieve(query, self.library.keys, self.library.values, temperature)
        self.view.update(query, self.result)

    def to_png(self) -> bytes:
        """Redraw only the bars, their numbers and the title."""
        return self._renderer.render()


def plot_heatmaps(
    panels: Sequence[tuple[torch.Tensor, Sequence[str], Sequence[str], str]],
    *,
    suptitle: str,
    rows: int = 1,
) -> Figure:
    """Heatmaps on one 0–1 scale, row by row: (weights (L_q, L_k), queries, keys, title) each."""
    cols = -(-len(panels) // rows)
    fig, axes = subplots(
        rows, cols, figsize=(3.6 * cols + 0.9, 3.3 * rows + 0.6),  # ≤ 840 px with 2 columns
        layout="constrained", squeeze=False,
    )  # fmt: skip
    for ax, (weights, queries, keys, title) in zip(axes.flat, panels, strict=True):
        artists = draw_attention_heatmap(
            ax, weights, query_labels=queries, key_labels=keys, title=title, colorbar=False
        )
    _weights_colorbar(fig, artists.image, axes)
    fig.suptitle(suptitle)
    return fig


def plot_path_lengths(max_distance: int, kernel_sizes: Sequence[int]) -> Figure:
    """Steps between positions i and j against |i − j| = 1 … max_distance: a recurrent net,
    stacked width-k convolutions (one line per k), self-attention.

    Source: Vaswani et al. 2017, Table 1 (maximum path lengths); article section 1.2.
    """
    fig, ax = subplots(figsize=(6.4, 4.0), layout="constrained")
    d = torch.arange(1, max_distance + 1)
    ax.plot(d, d, color="C3", label="recurrent net: |i − j| steps")
    for k, color in zip(kernel_sizes, ("C0", "C2", "C4"), strict=False):
        label = f"width-{k} convolutions: ⌈|i − j| / {k - 1}⌉ layers"
        ax.plot(d, lesson.conv_layers(d, k), color=color, drawstyle="steps-post", label=label)
    ax.plot(d, torch.ones_like(d), color="black", label="self-attention: 1 step")
    ax.set(xlim=(0, max_distance + 1), ylim=(0, max_distance + 1))
    ax.set(xlabel="distance |i − j| (positions)", ylabel="steps or layers on the path")
    ax.set_title("Path length between positions i and j")
    ax.legend(fontsize=9, loc="upper left")
    return fig
