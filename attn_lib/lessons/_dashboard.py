"""The Dashboard base: controls → a pure function → one reused figure → a PNG image.

Every dashboard of the series follows this pattern:

* the controls (``ipywidgets``) are kept in a dict, ``dashboard.controls``;
* a control change calls :meth:`Dashboard.update`, which reads the control values, asks a pure
  function (torch only) for the numbers, updates the artists of one ``matplotlib.figure.Figure``
  built once (no pyplot, so no figure leaks) and writes the PNG into an ``ipywidgets.Image``;
* nothing is printed and no ``Output`` widget is used, so a notebook that shows a dashboard
  stays deterministic under nbval;
* ``dashboard.widget`` is what a notebook displays; its plain-text fallback (what nbval compares
  and what a viewer without a kernel shows) is a fixed sentence, not a widget repr.

Used by every notebook with a dashboard (00–10); the temperature slider by notebooks 00 and 01.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator, Mapping
from typing import Any

import ipywidgets as widgets
from matplotlib.figure import Figure

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
    """Show a ToggleButtons' label on its buttons' line, and its choice by an icon.

    ipywidgets 8 lays ToggleButtons out as a block, which puts the label on a line of its own
    above the buttons; a flex row keeps them together. Every button gets the width of the
    longest label and the icon (at least the width asked for, plus the icon), so no label is
    cut and the buttons keep their places when the choice moves.
    """
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
            :func:`_figures.new_figure`); its dpi sets the PNG's resolution.

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
        """Move several controls at once and redraw once, e.g. ``dash.set(d_k=512, scaled=False)``.

        Setting the controls one by one (``dash.controls["d_k"].value = 512``) redraws after
        each; this sets them all, then redraws once, which is what a teacher jumping to a
        prepared setting wants. Controls not named keep their values; if no value changes,
        nothing is redrawn. The result does not depend on the order of the arguments, even
        where one control's range follows another's (a step slider whose maximum follows the
        sequence length).

        All or nothing: if a value is refused, every control returns to where it was and
        nothing is redrawn.

        Args:
            **values: control name → new value (see ``dash.controls`` for the names).

        Raises:
            RuntimeError: the dashboard has been closed.
            KeyError: a name that is not one of this dashboard's controls (the message
                lists them).
            ValueError: a value outside a slider's range (a slider would silently clamp
                it); the message gives the range.
            traitlets.TraitError: a value the control refuses (e.g. not one of a dropdown's
                options).
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
        """Control changes inside the block do not redraw; the previous state comes back
        after it (so a block inside set() leaves set()'s hold in place)."""
        holding, self._holding = self._holding, True
        try:
            yield
        finally:
            self._holding = holding

    def _assign(self, values: Mapping[str, Any]) -> None:
        """Set controls (no redraw: inside set()). Twice, so that a value clipped by a range
        that a later control widened (a step slider's maximum) is set again once it fits."""
        for _ in range(2):
            for name, value in values.items():
                if self.controls[name].value != value:
                    self.controls[name].value = value

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
        """Update the toggles' icons after _MARK_DELAY_S of stillness when a kernel's event
        loop runs (a live notebook), at once otherwise (tests, scripts)."""
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
    """The values a test or a benchmark should try for one control, current value first.

    Controls with ``options`` (ToggleButtons, Dropdown, SelectionSlider …) give every
    option; numeric sliders give their minimum, a middle value on the step grid and
    their maximum; a Checkbox or ToggleButton gives True and False. Other controls give
    only their current value.

    Args:
        control: an ipywidget with a ``value``.

    Returns:
        A list of distinct values, the current one first.
    """
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
    ordered = [control.value] + [v for v in values if v != control.value]
    return list(dict.fromkeys(ordered)) if all(_hashable(v) for v in ordered) else ordered


def _hashable(v: Any) -> bool:
    try:
        hash(v)
    except TypeError:
        return False
    return True


def measure_update_latency(dashboard: Dashboard, changes: int = 20) -> list[float]:
    """Time ``changes`` control changes of a dashboard, in milliseconds each.

    Cycles every control through the values of :func:`control_values` (every option;
    a slider's minimum, middle and maximum; both states of a toggle), one change at a
    time, and times the synchronous update each change triggers (compute + redraw +
    PNG), as a reader would experience it minus the browser.

    Args:
        dashboard: a Dashboard.
        changes: how many changes to time.

    Returns:
        The latencies in ms, in order.

    Raises:
        ValueError: no control with at least two values to try.

    Source: this series' target, a median of at most 100 ms per update.
    """
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
