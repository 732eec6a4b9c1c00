"""Notebook 00's figure and widget check (matplotlib, ipywidgets).

Used by notebook 00 (Start here), section "3 · Your environment": the widget check, drawn
statically at three temperatures, then live.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ..softmax import stable_softmax
from ._dashboard import Dashboard, _temperature_slider
from ._figures import BlitRenderer, _weight_color, freeze_layout, new_figure, subplots
from .nb00_start import CHECK_SCORES

LABELS = tuple(f"key {j}\nscore {s:g}" for j, s in enumerate(CHECK_SCORES))
KEY_LABELS = tuple(f"key {j}" for j in range(len(CHECK_SCORES)))  # the gallery: scores in its title
TEMPERATURES = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)  # the slider's values


class _Bars:
    """One row of weights (L_k,) as bars coloured by weight on a fixed 0–1 axis."""

    def __init__(self, ax: Axes, ylabel: bool = True, labels: Sequence[str] = LABELS) -> None:
        x = np.arange(len(labels))
        self.ax, self.bars = ax, ax.bar(x, np.zeros(len(x)), width=0.65, edgecolor="0.3")
        self.texts = [ax.text(i, 0.0, "", ha="center", va="bottom") for i in x]
        ax.set_xticks(x, labels)
        ax.set_ylim(0.0, 1.12)
        ax.set_yticks([0.0, 0.25, 0.5, 0.75, 1.0])
        if ylabel:
            ax.set_ylabel("attention weight (0 to 1)")

    def show(self, weights: torch.Tensor, title: str) -> None:
        for bar, text, w in zip(self.bars, self.texts, weights.tolist(), strict=True):
            bar.set_height(w)
            bar.set_facecolor(_weight_color(w))
            text.set_position((bar.get_x() + bar.get_width() / 2, w + 0.015))
            text.set_text(f"{w:.2f}")
        self.ax.set_title(title)


def plot_weights_gallery(weights: Mapping[float, torch.Tensor]) -> Figure:
    """The widget check's bars, one panel per temperature T: {T: weights (L_k,)}."""
    fig, axes = subplots(  # 2.7 in a panel: three fit the notebook's 840 px at 100 dpi
        1, len(weights), figsize=(2.7 * len(weights), 2.8), layout="constrained", sharey=True
    )
    for i, (ax, (T, w)) in enumerate(zip(np.atleast_1d(axes), weights.items(), strict=True)):
        _Bars(ax, ylabel=i == 0, labels=KEY_LABELS).show(w, f"T = {T:g}")
    scores = ", ".join(f"{s:g}" for s in CHECK_SCORES)
    fig.suptitle(f"What the widget check draws: softmax(scores / T) for key scores {scores}")
    return fig


class WidgetCheckDashboard(Dashboard):
    """A temperature slider that redraws softmax(scores / T) as bars: if it moves, widgets work.

    Attributes:
        weights: (L_k,) the weights currently shown.
    """

    plain_text = (
        "Widget check: if you are reading this sentence instead of a slider and a bar chart, "
        "widgets are not rendering here (see the list above)."
    )

    def __init__(self, temperature: float = 1.0, *, dpi: float = 80) -> None:
        self.scores = torch.tensor(CHECK_SCORES)  # (L_k,)
        slider = _temperature_slider(TEMPERATURES, temperature, "temperature T")
        figure = new_figure(figsize=(4.6, 2.9), dpi=dpi)
        self.view = _Bars(figure.subplots())
        self.render(temperature)
        freeze_layout(figure)  # lay out once: the labels keep their size
        dynamic = [*self.view.bars, *self.view.texts, self.view.ax.title]
        self._renderer = BlitRenderer(figure, dynamic)  # axes and ticks drawn once
        super().__init__({"temperature": slider}, figure)
        self.update()

    def render(self, temperature: float) -> None:
        self.weights = stable_softmax(self.scores / temperature)  # (L_k,)
        self.view.show(self.weights, f"softmax(scores / T), T = {temperature:g}")

    def to_png(self) -> bytes:
        """Redraw only the bars, their values and the title over the cached axes."""
        return self._renderer.render()
