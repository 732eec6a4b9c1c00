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

import ipywidgets as widgets
import torch

from .data import KEY_FEATURES, Library, library_books, library_query
from .experiments import Retrieval, retrieve
from .plotting import BlitRenderer, RetrievalView, SoftmaxBarsView, freeze_layout, new_figure
from .softmax import stable_softmax

__all__ = [
    "RETRIEVAL_TEMPERATURES",
    "WIDGET_CHECK_TEMPERATURES",
    "Dashboard",
    "RetrievalDashboard",
    "WidgetCheckDashboard",
    "control_values",
    "measure_update_latency",
    "retrieval_title",
]


from .lessons._dashboard import (
    Dashboard,
    _selection_slider,
    control_values,
    measure_update_latency,
)

# ---------------------------------------------------------------------------
# Notebook 00: the widget check; notebook 01: the library retrieval dashboard
# ---------------------------------------------------------------------------


# Temperatures offered by the sliders (a SelectionSlider: exact, reproducible values).
WIDGET_CHECK_TEMPERATURES = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)
RETRIEVAL_TEMPERATURES = (0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0)


def _temperature_slider(
    options: tuple[float, ...], value: float, description: str
) -> widgets.SelectionSlider:
    if value not in options:
        raise ValueError(f"temperature must be one of {options}, got {value!r}.")
    return _selection_slider([(f"{t:g}", t) for t in options], value, description)


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

    Controls: one FloatSlider per key feature (:data:`attn_lib.data.KEY_FEATURES`:
    "maths", "deep learning", "history", "cooking"; −1 to 1 in steps of 0.1: how much
    the reader wants, or avoids, the topic) and ``temperature`` (a SelectionSlider over
    :data:`RETRIEVAL_TEMPERATURES`). Every change builds the query with
    :func:`attn_lib.data.library_query`, calls :func:`attn_lib.experiments.retrieve`
    and redraws the three panels of :class:`attn_lib.plotting.RetrievalView`.

    Args:
        query: initial amounts by feature name; default the article's reader
            (:data:`attn_lib.data.ARTICLE_QUERY`: maths 1, deep learning 1).
        temperature: the initial temperature (one of :data:`RETRIEVAL_TEMPERATURES`).
        dpi: resolution of the PNG.

    Attributes:
        library: the books (keys (7, 4), values (7, 5)).
        query: (d_k,) = (4,) float32, the query currently shown.
        result: the :class:`attn_lib.experiments.Retrieval` currently shown.
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
        """The pure step: :func:`attn_lib.experiments.retrieve` on this library."""
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
