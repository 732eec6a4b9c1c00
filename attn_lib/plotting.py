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
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.container import BarContainer
from matplotlib.figure import Figure

__all__ = [
    "ATTENTION_CMAP",
    "MASKED_COLOR",
    "MASKED_MARK",
    "NAN_EDGE",
    "NAN_FACE",
    "BlitRenderer",
    "HeatmapArtists",
    "SoftmaxBarsView",
    "WeightsRowSumsView",
    "add_mask_legend",
    "draw_attention_heatmap",
    "figure_to_png",
    "freeze_layout",
    "new_figure",
    "plot_attention",
    "plot_attention_gallery",
    "plot_softmax_bars_gallery",
    "plot_weights_and_row_sums",
    "update_attention_heatmap",
]

from .lessons._figures import (
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
    _weight_color,
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
# Notebooks 00 and 01: softmax bars, the library retrieval, path lengths and pair counts
# ---------------------------------------------------------------------------


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
