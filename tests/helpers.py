"""Helpers shared by the dashboard and figure tests.

Imported as ``from helpers import ...``: tests/ has no ``__init__.py``, so pytest's default
("prepend") import mode puts tests/ on ``sys.path`` when it loads tests/conftest.py.
The matching fixture, ``headless_backend``, lives in tests/conftest.py.
"""

from __future__ import annotations

import importlib.util
import io
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from PIL import Image

from attn_lib.lessons import _figures
from attn_lib.lessons._dashboard import control_values

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
TOOLS = Path(__file__).resolve().parent.parent / "tools"


def load_tool(name: str) -> Any:
    """tools/<name>.py as a module (tools/ is not a package), loaded once per process."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, TOOLS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def decode(png: bytes | memoryview) -> np.ndarray:
    """Check that ``png`` is a PNG (magic bytes, then a real decode) and return its RGBA pixels."""
    png = bytes(png)  # the Image widget holds a memoryview
    assert png.startswith(PNG_MAGIC), "not a PNG"
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGBA"))


def png_of(dash: Any) -> bytes:
    """The dashboard's image widget value (ipywidgets keeps it as a memoryview) as bytes."""
    return bytes(dash.image.value)


def assert_png_fits_figure(dash: Any) -> np.ndarray:
    """The dashboard's image is a valid PNG of exactly its figure's size; returns the pixels."""
    image = decode(png_of(dash))
    assert image.shape[:2] == dash.figure.canvas.get_width_height()[::-1]
    return image


def assert_no_nan(*tensors: torch.Tensor) -> None:
    for t in tensors:
        assert not torch.isnan(t).any(), "NaN where none was asked for"


@contextmanager
def no_new_figures(what: str = "the code") -> Iterator[None]:
    """Fail if the block leaves pyplot with a different set of open figures."""
    before = plt.get_fignums()
    yield
    assert plt.get_fignums() == before, f"{what} leaked a pyplot figure"


def open_dashboard(
    factory: Callable[..., Any], *args: Any, what: str = "the dashboard", **kwargs: Any
) -> Iterator[Any]:
    """Body of a dashboard fixture (``yield from open_dashboard(Cls)``): build it, check that
    building made no pyplot figure, hand it to the test, close it, check that nothing leaked."""
    before = plt.get_fignums()
    dash = factory(*args, **kwargs)
    assert plt.get_fignums() == before, f"building {what} created a pyplot figure"
    yield dash
    dash.close()
    assert plt.get_fignums() == before, f"{what} leaked a pyplot figure"


class SharedDashboard:
    """One dashboard per test module, handed to every test back in its initial setting.

    Building a dashboard draws its whole figure (0.2-0.7 s); resetting one redraws only
    what changes. :meth:`use` (the body of the function-scoped fixture) moves the controls
    back to the values the dashboard was built with, redraws, asserts that the image is byte
    for byte the one it showed when built (so a render that depends on earlier settings
    fails here) and that the update reported no error, then hands it to the test and checks
    that the test left pyplot with the figures it found. A test that closed the dashboard
    gets a new one next time. Caches inside the dashboard stay warm: a test about what a
    cold cache does builds its own dashboard.

    :func:`dashboard_fixtures` makes the two fixtures that use it (module scope, then per test).
    """

    def __init__(self, factory: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        self._build = lambda: factory(*args, **kwargs)
        self.what = getattr(factory, "__name__", "the dashboard")
        self.dash: Any = None

    @classmethod
    def fixture(cls, factory: Callable[..., Any], *args: Any, **kwargs: Any) -> Iterator[Any]:
        shared = cls(factory, *args, **kwargs)
        yield shared
        shared.close()

    def get(self) -> Any:
        """The dashboard, built on first use (or after a close), else reset and checked."""
        if self.dash is None or self.dash.closed:
            with no_new_figures(f"building {self.what}"):
                self.dash = self._build()
            self.initial = self.dash.values
            self.initial_png = png_of(self.dash)
            return self.dash
        if self.dash.values != self.initial:
            self.dash.set(**self.initial)  # one redraw
        else:
            self.dash._on_change({})  # redraw anyway, as a control change does (status line)
        assert self.dash.last_error is None and self.dash.status.value == ""
        assert self.dash.values == self.initial
        assert png_of(self.dash) == self.initial_png, (
            f"{self.what}, set back to {self.initial}, drew another image than when it was built"
        )
        return self.dash

    def use(self) -> Iterator[Any]:
        """Body of the function-scoped fixture: the reset dashboard, and no leaked figure."""
        dash = self.get()
        with no_new_figures(f"a test of {self.what}"):
            yield dash

    def close(self) -> None:
        if self.dash is not None:
            with no_new_figures(f"closing {self.what}"):
                self.dash.close()


def dashboard_fixtures(factory: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, Any]:
    """A test module's two dashboard fixtures: ``shared_dashboard`` (module scope, one
    SharedDashboard of ``factory(*args, **kwargs)``) and ``dashboard`` (per test, it reset).
    Use: ``shared_dashboard, dashboard = dashboard_fixtures(MaskDashboard)``."""

    @pytest.fixture(scope="module", name="shared_dashboard")
    def shared(headless_backend: None) -> Iterator[SharedDashboard]:
        yield from SharedDashboard.fixture(factory, *args, **kwargs)

    @pytest.fixture(name="dashboard")
    def dashboard(shared_dashboard: SharedDashboard) -> Iterator[Any]:
        yield from shared_dashboard.use()

    return shared, dashboard


def blit_mismatch(dash: Any, dynamic: Any = None) -> float:
    """Fraction of pixels where the dashboard's blitted PNG differs from a full redraw of its
    figure (the dynamic artists drawn as ordinary artists); they are animated again after."""
    dynamic = dash.view.dynamic_artists if dynamic is None else dynamic
    fast = decode(png_of(dash))
    for artist in dynamic:
        artist.set_animated(False)
    try:
        full = decode(_figures.figure_to_png(dash.figure))
    finally:
        for artist in dynamic:
            artist.set_animated(True)
    assert fast.shape == full.shape
    return float((fast != full).any(axis=-1).mean())


def assert_repr_is_fixed_sentence(dash: Any, cls: type | None = None) -> dict:
    """A dashboard displays as its widget, with its class's fixed sentence as the plain text."""
    bundle = dash._repr_mimebundle_()
    assert bundle["text/plain"] == (cls or type(dash)).plain_text
    assert "application/vnd.jupyter.widget-view+json" in bundle
    return bundle


def each_value(dash: Any, name: str, *, back_to_start: bool = False) -> Iterator[tuple[Any, bytes]]:
    """Set control ``name`` to each value of ``control_values`` (the current value, then every
    option, or min, middle and max), yielding ``(value, png before the change)`` once the
    dashboard has updated. After every change the control holds the value and the figure is
    the same object. ``back_to_start`` tries the current value last (so every step changes)."""
    control = dash.controls[name]
    values = control_values(control)
    if back_to_start:
        values = values[1:] + values[:1]
    figure = dash.figure
    for value in values:
        previous_png = png_of(dash)
        control.value = value
        assert control.value == value
        assert dash.figure is figure, "the figure was rebuilt, not reused"
        yield value, previous_png


def assert_blits_match_full_redraws(
    dash: Any, settings: list[dict[str, Any]], tolerance: float = 1e-3
) -> None:
    """For each setting (control name → value, set in order), the blitted image differs from a
    full redraw in fewer than ``tolerance`` of its pixels (antialiasing at the edges only)."""
    for setting in settings:
        dash.set(**setting)
        differs = blit_mismatch(dash)
        assert differs < tolerance, f"{differs:.2%} of the pixels differ for {setting}"
