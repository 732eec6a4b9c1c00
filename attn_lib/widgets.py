"""Dashboards: controls → a pure function → an update of one reused figure → a PNG image.

Every dashboard of the series follows the same pattern, given by :class:`Dashboard`:

* the controls (``ipywidgets``) are kept in a dict, ``dashboard.controls``;
* a control change calls :meth:`Dashboard.update`, which reads the control values,
  asks a pure function in ``attn_lib`` (torch only) for the numbers, updates the
  artists of one ``matplotlib.figure.Figure`` built once (no pyplot, so no figure
  leaks), and writes the rendered PNG bytes into an ``ipywidgets.Image``;
* nothing is printed and no ``Output`` widget is used, so a notebook that shows a
  dashboard stays deterministic under nbval;
* ``dashboard.widget`` is what a notebook displays; ``close()`` releases the figure
  and the widgets.

Displaying a dashboard object in a notebook shows its widget; its plain-text
fallback (what nbval compares and what a viewer without a kernel shows) is a fixed
sentence, not a widget repr.
"""

from __future__ import annotations

import torch

from .plotting import BlitRenderer, SoftmaxBarsView, freeze_layout, new_figure
from .softmax import stable_softmax

__all__ = [
    "WIDGET_CHECK_TEMPERATURES",
    "Dashboard",
    "WidgetCheckDashboard",
    "control_values",
    "measure_update_latency",
]


from .lessons._dashboard import (
    Dashboard,
    _temperature_slider,
    control_values,
    measure_update_latency,
)

# ---------------------------------------------------------------------------
# Notebook 00: the widget check; notebook 01: the library retrieval dashboard
# ---------------------------------------------------------------------------


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
