"""Notebook 01's figures and dashboards (matplotlib, ipywidgets).

Used by notebook 01 (Attention as retrieval), sections "2 · Temperature: take the best, or read
everything", "6 · Path length: one step between any two positions (1.2)". Its data and
experiments come from ``nb01_retrieval``.
"""

from __future__ import annotations

from collections.abc import Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.artist import Artist
from matplotlib.container import BarContainer
from matplotlib.figure import Figure

from ._dashboard import Dashboard, _temperature_slider
from ._figures import (
    _TEXT_DARK_BELOW,
    BlitRenderer,
    _as_numpy_1d,
    _closes_figures_on_error,
    _weight_color,
    freeze_layout,
    new_figure,
)
from .nb01_retrieval import (
    KEY_FEATURES,
    Library,
    PairCounts,
    PathLengths,
    Retrieval,
    library_books,
    library_query,
    retrieve,
)

_INSIDE_BAR_ABOVE = 0.45  # a weight bar longer than this carries its number inside


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
        paths: results of :func:`nb01_retrieval.path_lengths` (one per kernel size k,
            same L): distance, recurrent, convolution, self_attention (L − 1,) and kernel_size.
        pairs: a result of :func:`nb01_retrieval.pair_counts`: L, self_attention (L²)
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


RETRIEVAL_TEMPERATURES = (0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0)


def retrieval_title(query: torch.Tensor, temperature: float) -> str:
    """A one-line description of a query (d_k,) over KEY_FEATURES and a temperature.

    Source: article section 1.1 (the reader's need as a query).
    """
    parts = " · ".join(
        f"{name} {float(q) + 0.0:.1f}" for name, q in zip(KEY_FEATURES, query, strict=True)
    )
    return f"query: {parts}   |   temperature T = {temperature:g}"


class RetrievalDashboard(Dashboard):
    """Notebook 01's library search, live: query sliders and a temperature → scores, weights, blend.

    Controls: one FloatSlider per key feature (:data:`nb01_retrieval.KEY_FEATURES`:
    "maths", "deep learning", "history", "cooking"; −1 to 1 in steps of 0.1: how much
    the reader wants, or avoids, the topic) and ``temperature`` (a SelectionSlider over
    :data:`RETRIEVAL_TEMPERATURES`). Every change builds the query with
    :func:`nb01_retrieval.library_query`, calls :func:`nb01_retrieval.retrieve`
    and redraws the three panels of :class:`RetrievalView`.

    Args:
        query: initial amounts by feature name; default the article's reader
            (:data:`nb01_retrieval.ARTICLE_QUERY`: maths 1, deep learning 1).
        temperature: the initial temperature (one of :data:`RETRIEVAL_TEMPERATURES`).
        dpi: resolution of the PNG.

    Attributes:
        library: the books (keys (7, 4), values (7, 5)).
        query: (d_k,) = (4,) float32, the query currently shown.
        result: the :class:`nb01_retrieval.Retrieval` currently shown.
        view: the RetrievalView that draws it.

    Raises:
        ValueError: an unknown feature, an amount outside [−1, 1], or a temperature that
            is not one of the slider's values.

    Source: article sections 1.1 (the library) and 2.1 (Q: the need, K: title and index,
        V: the content).
    """

    plain_text = (
        "Dashboard: a library search (query sliders and a temperature → relevance scores, "
        "softmax weights, blended contents). It needs a running Jupyter kernel; the static "
        "figures above show its default setting and three temperatures."
    )

    def __init__(
        self,
        query: dict[str, float] | None = None,
        temperature: float = 0.5,
        *,
        dpi: float = 80,
    ) -> None:
        self.library: Library = library_books()
        start = library_query(query)  # (d_k,); refuses unknown feature names
        if bool((start.abs() > 1.0).any()):
            raise ValueError(f"query amounts must lie in [-1, 1], got {start.tolist()}.")
        style = {"description_width": "initial"}
        controls: dict[str, widgets.ValueWidget] = {
            name: widgets.FloatSlider(
                value=round(float(q), 1),
                min=-1.0,
                max=1.0,
                step=0.1,
                readout_format=".1f",
                description=name,
                style=style,
                layout=widgets.Layout(width="250px"),
            )
            for name, q in zip(KEY_FEATURES, start, strict=True)
        }
        controls["temperature"] = _temperature_slider(
            RETRIEVAL_TEMPERATURES, temperature, "temperature T"
        )
        figure = new_figure(figsize=(11.0, 3.8), dpi=dpi)
        self.view = RetrievalView(figure, self.library.titles, self.library.value_features)
        self._show(start, temperature)
        freeze_layout(figure)
        self._renderer = BlitRenderer(figure, self.view.dynamic_artists)
        super().__init__(controls, figure)
        self._wrap_controls()
        self.update()

    def compute(self, query: torch.Tensor, temperature: float) -> Retrieval:
        """The pure step: :func:`nb01_retrieval.retrieve` on this library."""
        return retrieve(query, self.library.keys, self.library.values, temperature)

    def _show(self, query: torch.Tensor, temperature: float) -> None:
        self.query = query
        self.result = self.compute(query, temperature)
        self.view.update(
            self.result.scores,
            self.result.weights,
            self.result.blended,
            retrieval_title(query, temperature),
        )

    def render(self, temperature: float, **amounts: float) -> None:
        """Build the query from the feature sliders, retrieve, and redraw."""
        self._show(library_query(amounts), temperature)

    def to_png(self) -> bytes:
        """Redraw only the bars, their numbers and the title."""
        return self._renderer.render()
