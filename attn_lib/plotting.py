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

__all__ = [
    "ATTENTION_CMAP",
    "MASKED_COLOR",
    "MASKED_MARK",
    "NAN_EDGE",
    "NAN_FACE",
    "BlitRenderer",
    "HeatmapArtists",
    "WeightsRowSumsView",
    "add_mask_legend",
    "draw_attention_heatmap",
    "figure_to_png",
    "freeze_layout",
    "new_figure",
    "plot_attention",
    "plot_attention_gallery",
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
