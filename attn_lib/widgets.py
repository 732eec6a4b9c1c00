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

import time
from collections.abc import Mapping
from typing import Any

import ipywidgets as widgets
from matplotlib.figure import Figure

from .data import MASK_CHOICES, SettingResult, example_setting
from .plotting import (
    BlitRenderer,
    WeightsRowSumsView,
    figure_to_png,
    freeze_layout,
    new_figure,
)

__all__ = ["ArticleExampleDashboard", "Dashboard", "measure_update_latency"]


class Dashboard:
    """Base of the series' dashboards: a dict of controls, one figure, one image.

    Subclasses build their controls and figure, call ``super().__init__``,
    implement :meth:`render` (which must only update existing artists), may
    override :meth:`to_png` (e.g. to blit), and call ``self.update()`` once at the
    end of their ``__init__`` so that the image shows the initial setting.

    Args:
        controls: name → ipywidget with a ``value``; ``render`` receives the values
            as keyword arguments under these names. Controls that have a
            ``continuous_update`` trait (sliders, text boxes) get it set to False,
            so a drag redraws once, when released.
        figure: a ``matplotlib.figure.Figure`` not managed by pyplot (see
            :func:`attn_lib.plotting.new_figure`); its dpi sets the PNG's resolution.

    Attributes:
        controls: the dict of controls.
        figure: the figure, reused for every update.
        image: the ``ipywidgets.Image`` showing the figure.
        status: an ``ipywidgets.HTML`` line, empty unless an update failed.
        widget: the box to display: controls above the image.
        last_error: the exception of the last failed update from a control, or None.

    Source: ARCHITECTURE.md of this series (controls → pure function → figure);
        NOTES_browser_and_nbval.md (why an Image widget and no Output widget).
    """

    plain_text = "Interactive dashboard (it needs a running Jupyter kernel)."

    def __init__(self, controls: Mapping[str, widgets.ValueWidget], figure: Figure) -> None:
        self.controls: dict[str, widgets.ValueWidget] = dict(controls)
        self.figure = figure
        self.image = widgets.Image(format="png")
        self.status = widgets.HTML("")
        self.widget = widgets.VBox(
            [widgets.HBox(list(self.controls.values())), self.image, self.status]
        )
        self.last_error: Exception | None = None
        self.closed = False
        for control in self.controls.values():
            if hasattr(control, "continuous_update"):
                control.continuous_update = False
            control.observe(self._on_change, names="value")

    @property
    def values(self) -> dict[str, Any]:
        """The current value of every control, by name."""
        return {name: control.value for name, control in self.controls.items()}

    def render(self, **values: Any) -> None:
        """Update the figure's artists for these control values (subclasses implement it)."""
        raise NotImplementedError

    def update(self) -> None:
        """Recompute for the current control values and refresh the image.

        Raises:
            RuntimeError: the dashboard has been closed.
        """
        if self.closed:
            raise RuntimeError("this dashboard is closed; build a new one.")
        self.render(**self.values)
        self.image.value = self.to_png()

    def to_png(self) -> bytes:
        """The figure as PNG bytes (subclasses may render faster, e.g. by blitting)."""
        return figure_to_png(self.figure)

    def _on_change(self, change: dict) -> None:
        # An exception escaping a widget callback would be printed into the notebook by
        # the kernel; show it in the status line instead, and keep it for tests.
        try:
            self.update()
        except Exception as err:  # noqa: BLE001 - reported to the reader, not swallowed
            self.last_error = err
            self.status.value = f"<b>Update failed:</b> {type(err).__name__}: {err}"
        else:
            self.last_error = None
            self.status.value = ""

    def close(self) -> None:
        """Stop reacting to the controls, close the widgets and release the figure."""
        if self.closed:
            return
        for control in self.controls.values():
            control.unobserve(self._on_change, names="value")
        for w in (*self.controls.values(), self.image, self.status, *self.widget.children):
            w.close()
        self.widget.close()
        self.figure.clear()
        self.closed = True

    def _repr_mimebundle_(self, **kwargs: Any) -> dict:
        bundle = self.widget._repr_mimebundle_(**kwargs)
        bundle["text/plain"] = self.plain_text
        return bundle


class ArticleExampleDashboard(Dashboard):
    """The article's example (seed 42, x of shape (2, 4, 8)): weights and row sums, live.

    Controls: ``batch`` (0 or 1), ``mask`` ("none", "padding" with lengths (4, 2),
    "causal"), ``scaled`` (True: scores ÷ √d_k, False: none). Every change calls
    :func:`attn_lib.data.example_setting` and redraws a heatmap of the (4, 4)
    weights (masked cells grey with "×") beside a bar chart of the row sums.

    Args:
        batch, mask, scaled: the initial setting.
        dpi: resolution of the PNG.

    Attributes:
        result: the SettingResult currently shown.
        view: the WeightsRowSumsView that draws it.

    Source: article sections 3.1-3.3 (the example) and 4.1 (masks).
    """

    plain_text = (
        "Dashboard: attention weights of the article's example (batch element, mask, "
        "scaling). It needs a running Jupyter kernel; the static figures above show its "
        "settings."
    )

    def __init__(
        self, batch: int = 0, mask: str = "none", scaled: bool = True, *, dpi: float = 80
    ) -> None:
        style = {"description_width": "initial", "button_width": "72px"}
        controls = {
            "batch": widgets.ToggleButtons(
                options=[("0", 0), ("1", 1)],
                value=batch,
                description="batch element",
                style=style,
            ),
            "mask": widgets.ToggleButtons(
                options=list(MASK_CHOICES), value=mask, description="mask", style=style
            ),
            "scaled": widgets.ToggleButtons(
                options=[("÷√d_k", True), ("none", False)],
                value=scaled,
                description="scaling",
                style=style,
            ),
        }
        self.result: SettingResult = example_setting(batch, mask, scaled)
        figure = new_figure(dpi=dpi)
        self.view = WeightsRowSumsView(figure, self.result.weights.shape[-1])
        self.view.update(self.result)
        # Tick labels keep their size across settings, so one layout pass is enough.
        freeze_layout(figure)
        self._renderer = BlitRenderer(figure, self.view.dynamic_artists)
        super().__init__(controls, figure)
        self.widget.layout = widgets.Layout(align_items="flex-start")
        self.widget.children[0].layout = widgets.Layout(flex_flow="row wrap")
        self.update()

    def render(self, batch: int, mask: str, scaled: bool) -> None:
        """Compute the setting with the pure function and show it."""
        self.result = example_setting(batch, mask, scaled)
        self.view.update(self.result)

    def to_png(self) -> bytes:
        """Redraw only the changing artists; the key tick labels decide the background."""
        return self._renderer.render(background_key=self.result.key_labels)


def measure_update_latency(dashboard: Dashboard, changes: int = 20) -> list[float]:
    """Time ``changes`` control changes of a dashboard, in milliseconds each.

    Cycles every control through its options (ToggleButtons, Dropdown …), one
    change at a time, and times the synchronous update each change triggers
    (compute + redraw + PNG), as a reader would experience it minus the browser.

    Args:
        dashboard: a Dashboard whose controls have ``options``.
        changes: how many changes to time.

    Returns:
        The latencies in ms, in order.

    Raises:
        ValueError: no control with at least two options.

    Source: this series' target, a median of at most 100 ms per update.
    """
    cyclic = [
        (name, [o[1] if isinstance(o, tuple) else o for o in c.options])
        for name, c in dashboard.controls.items()
        if len(getattr(c, "options", ())) >= 2
    ]
    if not cyclic:
        raise ValueError("the dashboard has no control with two or more options to cycle.")
    times = []
    for n in range(changes):
        name, options = cyclic[n % len(cyclic)]
        control = dashboard.controls[name]
        current = options.index(control.value)
        start = time.perf_counter()
        control.value = options[(current + 1) % len(options)]
        times.append((time.perf_counter() - start) * 1000.0)
    return times
