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

__all__ = [
    "Dashboard",
    "control_values",
    "measure_update_latency",
]


from .lessons._dashboard import (
    Dashboard,
    control_values,
    measure_update_latency,
)
