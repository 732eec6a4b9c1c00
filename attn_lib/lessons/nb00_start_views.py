"""Notebook 00's figures and dashboards (matplotlib, ipywidgets).

Used by notebook 00 (Start here), sections "3 · Your environment". Its data and experiments
come from ``nb00_start``.
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

from ..softmax import stable_softmax
from ._dashboard import Dashboard, _temperature_slider
from ._figures import (
    BlitRenderer,
    _as_numpy_1d,
    _closes_figures_on_error,
    _weight_color,
    freeze_layout,
    new_figure,
)


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


# Temperatures offered by the sliders (a SelectionSlider: exact, reproducible values).
WIDGET_CHECK_TEMPERATURES = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)


class WidgetCheckDashboard(Dashboard):
    """Notebook 00's widget check: a temperature slider that redraws a row of softmax weights.

    If the slider and the bar chart appear and the bars change when the slider moves,
    widgets work; where they cannot render, the cell shows :attr:`plain_text` instead.

    Controls: ``temperature`` (a SelectionSlider over :data:`WIDGET_CHECK_TEMPERATURES`).
    Every change computes ``stable_softmax(scores / temperature)`` and redraws the bars.

    Args:
        temperature: the initial temperature (one of the slider's values).
        scores: (L_k,) the fixed scores of one query against L_k keys.
        dpi: resolution of the PNG.

    Attributes:
        weights: (L_k,) float32, the weights currently shown.
        view: the SoftmaxBarsView that draws them.

    Raises:
        ValueError: a temperature that is not one of the slider's values.

    Source: NOTES_browser_and_nbval.md of this series (widgets need a running kernel).
    """

    plain_text = (
        "Widget check: if you are reading this sentence instead of a slider and a bar chart, "
        "widgets are not rendering here (see 'If widgets do not render' above)."
    )
    SCORES = (2.0, 1.0, 0.5, -1.0)  # one query's scores against 4 keys

    def __init__(
        self,
        temperature: float = 1.0,
        *,
        scores: tuple[float, ...] = SCORES,
        dpi: float = 80,
    ) -> None:
        self.scores = torch.tensor(scores)  # (L_k,)
        self.labels = tuple(f"key {j}\nscore {s:g}" for j, s in enumerate(scores))
        controls = {
            "temperature": _temperature_slider(
                WIDGET_CHECK_TEMPERATURES, temperature, "temperature T"
            )
        }
        figure = new_figure(figsize=(4.6, 2.9), dpi=dpi)
        self.view = SoftmaxBarsView(figure.subplots(), self.labels)
        self.weights = self.compute(temperature)
        self.view.update(self.weights, self.title(temperature))
        freeze_layout(figure)
        self._renderer = BlitRenderer(figure, self.view.dynamic_artists)
        super().__init__(controls, figure)
        self.update()

    def compute(self, temperature: float) -> torch.Tensor:
        """softmax(scores / temperature): (L_k,) float32 weights summing to 1."""
        return stable_softmax(self.scores / temperature)

    @staticmethod
    def title(temperature: float) -> str:
        """The panel title for one temperature."""
        return f"softmax(scores / T), T = {temperature:g}"

    def render(self, temperature: float) -> None:
        """Compute the weights for this temperature and redraw the bars."""
        self.weights = self.compute(temperature)
        self.view.update(self.weights, self.title(temperature))

    def to_png(self) -> bytes:
        """Redraw only the bars, their labels and the title."""
        return self._renderer.render()
