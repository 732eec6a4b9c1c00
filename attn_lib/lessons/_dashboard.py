"""The Dashboard base: controls → a pure function → one reused figure → a PNG image.

A control change calls :meth:`Dashboard.update`: the control values go to a pure function
(torch only), its numbers update the artists of one ``Figure`` built once (no pyplot) and the PNG
goes into an ``ipywidgets.Image``. Nothing is printed and no ``Output`` widget is used, and the
plain-text fallback is a fixed sentence, so a notebook with a dashboard is stable under nbval.
Used by every notebook with a dashboard (00–10); the temperature slider by 00, 01 and 03.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator, Mapping
from typing import Any

import ipywidgets as widgets
from matplotlib.figure import Figure

from ._experiments import one_thread
from ._figures import figure_to_png


def _toggle_buttons(
    options: Any, value: Any, description: str, button_width: str | None = None
) -> widgets.ToggleButtons:
    """ToggleButtons with the series' style: the description in full, optional button width."""
    style = {"description_width": "initial"}
    if button_width is not None:
        style["button_width"] = button_width
    return widgets.ToggleButtons(
        options=list(options), value=value, description=description, style=style
    )


# The chosen button of every ToggleButtons carries a ticked circle, the others an empty one:
# Font Awesome icons that ipywidgets draws in the text colour, so the choice reads in light and
# dark themes alike (JupyterLab marks it only by a slightly different grey). "fa-fw" gives the
# icon a fixed width, so the labels do not move when the choice changes.
CHOSEN_ICON, OTHER_ICON = "check-circle fa-fw", "circle-o fa-fw"
_ICON_PX = 22  # the icon (1.25 em of the 13 px widget font) and its margin
# New icons make the page rebuild a toggle's buttons, which delayed the new picture by about
# 40 ms in the browser test: they follow once the controls have been still this long
# (JupyterLab shows the clicked button as chosen at once, by its own shading).
_MARK_DELAY_S = 0.3
_CHAR_PX, _PADDING_PX = 7.5, 20  # a wide sans-serif at 13 px (DejaVu Sans: 7.3 px a character)


def _style_toggle(toggle: widgets.ToggleButtons) -> None:
    """Keep a ToggleButtons' label on its buttons' line (a flex row) and mark its choice by an
    icon; every button gets the longest label's width (at least the width asked) plus the icon."""
    toggle.layout.display = "flex"
    toggle.layout.align_items = "center"
    asked = toggle.style.button_width
    longest = max(len(label) for label in toggle._options_labels)
    width = max(_CHAR_PX * longest + _PADDING_PX, float(asked[:-2]) if asked.endswith("px") else 0)
    toggle.style.button_width = f"{width + _ICON_PX:.0f}px"

    _mark_choice(toggle)


def _mark_choice(toggle: widgets.ToggleButtons) -> None:
    """The chosen button's icon ticked, the others' empty (no message if nothing changes)."""
    toggle.icons = [
        CHOSEN_ICON if i == toggle.index else OTHER_ICON for i in range(len(toggle.options))
    ]


def _selection_slider(
    options: Any, value: Any, description: str, width: str = "330px"
) -> widgets.SelectionSlider:
    """A SelectionSlider over (label, value) pairs, with the series' style and width."""
    return widgets.SelectionSlider(
        options=list(options),
        value=value,
        description=description,
        style={"description_width": "initial"},
        layout=widgets.Layout(width=width),
    )


class Dashboard:
    """Base of the series' dashboards: a dict of controls, one figure, one image.

    A subclass builds its controls and figure (:func:`_figures.new_figure`), calls
    ``super().__init__``, implements :meth:`render` (updating existing artists only), may
    override :meth:`to_png` (to blit) and calls ``self.update()`` at the end of its ``__init__``.
    ``render`` gets the control values by name; sliders redraw when released, not while dragged.
    ``widget`` (controls, image, ``status`` line) is displayed; ``last_error`` holds the
    exception of the last failed update from a control, shown in the status line.
    """

    plain_text = "Interactive dashboard (it needs a running Jupyter kernel)."

    def __init__(self, controls: Mapping[str, widgets.ValueWidget], figure: Figure) -> None:
        self.controls: dict[str, widgets.ValueWidget] = dict(controls)
        self.figure = figure
        self.image = widgets.Image(format="png")
        self.status = widgets.HTML("")
        # Controls wrap onto as many lines as they need; every child keeps its own width (the
        # image is never stretched, so the page shows the PNG pixel for pixel).
        self.widget = widgets.VBox(
            [
                widgets.HBox(list(self.controls.values()), layout={"flex_flow": "row wrap"}),
                self.image,
                self.status,
            ],
            layout={"align_items": "flex-start"},
        )
        self.last_error: Exception | None = None
        self.closed = False
        self._marker: asyncio.TimerHandle | None = None  # a pending update of toggle icons
        self._holding = False  # True inside set(): control changes wait for one update
        for control in self.controls.values():
            if hasattr(control, "continuous_update"):
                control.continuous_update = False
            if isinstance(control, widgets.ToggleButtons):
                _style_toggle(control)
            control.observe(self._on_change, names="value")

    @property
    def values(self) -> dict[str, Any]:
        """The current value of every control, by name."""
        return {name: control.value for name, control in self.controls.items()}

    def set(self, **values: Any) -> None:
        """Move several controls, then redraw once: ``dash.set(d_k=512, scaling="none")``.

        In any order (a range that follows another control included); all or nothing: if a
        value is refused, every control returns to where it was and nothing is redrawn.

        Raises:
            RuntimeError: closed. KeyError: not a control's name (the message lists them).
            ValueError: outside a slider's range (it would clamp it silently).
            traitlets.TraitError: a value the control refuses (not one of its options).
        """
        if self.closed:
            raise RuntimeError("this dashboard is closed; build a new one.")
        unknown = sorted(set(values) - set(self.controls))
        if unknown:
            raise KeyError(
                f"{type(self).__name__} has no control named {', '.join(map(repr, unknown))}; "
                f"its controls are {', '.join(map(repr, self.controls))}."
            )
        before = self.values
        with self._held():
            try:
                self._assign(values)
                clamped = {n: v for n, v in values.items() if self.controls[n].value != v}
                if clamped:
                    name, value = next(iter(clamped.items()))
                    control = self.controls[name]
                    span = f", [{control.min}, {control.max}]," if hasattr(control, "max") else ""
                    raise ValueError(
                        f"{name}={value!r} is outside the range of the {name!r} control{span} "
                        f"for the other values of this call; nothing was changed."
                    )
            except Exception:
                self._assign(before)  # all or nothing
                raise
        if self.values != before:
            self._on_change({})

    @contextlib.contextmanager
    def _held(self) -> Iterator[None]:
        """Control changes inside the block do not redraw (blocks nest)."""
        holding, self._holding = self._holding, True
        try:
            yield
        finally:
            self._holding = holding

    def _assign(self, values: Mapping[str, Any]) -> None:
        """Set controls, twice: a value clipped by a range a later control widens fits then."""
        for _ in range(2):
            for name, value in values.items():
                if self.controls[name].value != value:
                    self.controls[name].value = value

    def render(self, **values: Any) -> None:
        """Update the figure's artists for these control values (subclasses implement it)."""
        raise NotImplementedError

    def update(self) -> None:
        """Recompute for the current control values and refresh the image."""
        if self.closed:
            raise RuntimeError("this dashboard is closed; build a new one.")
        with one_thread():  # a dashboard's tensors are small
            self.render(**self.values)
        self.image.value = self.to_png()

    def to_png(self) -> bytes:
        """The figure as PNG bytes (subclasses may render faster, e.g. by blitting)."""
        return figure_to_png(self.figure)

    def _on_change(self, change: dict) -> None:
        if self._holding:  # inside set(): it redraws once, at the end
            return
        self._mark_choices_soon()
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

    def _mark_choices_soon(self) -> None:
        """Update the toggles' icons after _MARK_DELAY_S of stillness in a live kernel, else now."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._mark_choices()
            return
        if self._marker is not None:
            self._marker.cancel()
        self._marker = loop.call_later(_MARK_DELAY_S, self._mark_choices)

    def _mark_choices(self) -> None:
        self._marker = None
        if not self.closed:
            for control in self.controls.values():
                if isinstance(control, widgets.ToggleButtons):
                    _mark_choice(control)

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


def control_values(control: widgets.ValueWidget) -> list[Any]:
    """The distinct values a test or the benchmark tries for a control, the current one first:
    every option; a slider's minimum, middle (on its step grid) and maximum; True and False."""
    options = getattr(control, "options", None)
    if options:
        values = [o[1] if isinstance(o, tuple) else o for o in options]
    elif isinstance(control, (widgets.Checkbox, widgets.ToggleButton)):
        values = [True, False]
    elif hasattr(control, "min") and hasattr(control, "max"):
        lo, hi = control.min, control.max
        step = getattr(control, "step", None) or 1
        mid = lo + round((hi - lo) / 2 / step) * step
        if isinstance(control.value, int):
            mid = int(mid)
        values = [lo, mid, hi]
    else:
        values = []
    ordered = [control.value, *values]
    return [v for i, v in enumerate(ordered) if v not in ordered[:i]]


def measure_update_latency(dashboard: Dashboard, changes: int = 20) -> list[float]:
    """Time ``changes`` control changes (compute, redraw, PNG) in ms each, cycling every control
    through :func:`control_values`; the series' target is a median of at most 100 ms."""
    cyclic = [
        (name, values)
        for name, c in dashboard.controls.items()
        if len(values := control_values(c)) >= 2
    ]
    if not cyclic:
        raise ValueError("the dashboard has no control with two or more values to cycle.")
    times = []
    for n in range(changes):
        name, values = cyclic[n % len(cyclic)]
        control = dashboard.controls[name]
        current = values.index(control.value) if control.value in values else -1
        start = time.perf_counter()
        control.value = values[(current + 1) % len(values)]
        times.append((time.perf_counter() - start) * 1000.0)
    return times


def _temperature_slider(
    options: tuple[float, ...], value: float, description: str
) -> widgets.SelectionSlider:
    if value not in options:
        raise ValueError(f"temperature must be one of {options}, got {value!r}.")
    return _selection_slider([(f"{t:g}", t) for t in options], value, description)
