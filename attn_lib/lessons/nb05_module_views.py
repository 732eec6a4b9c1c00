"""Notebook 05's figures and dashboards (matplotlib, ipywidgets).

Used by notebook 05 (A single-head attention module, line by line), sections "7 · A dashboard:
batch element, mask, scaling". Its data and experiments come from ``nb05_module``.
"""

from __future__ import annotations

from ._dashboard import Dashboard, _toggle_buttons
from ._examples import MASK_CHOICES
from ._figures import BlitRenderer, WeightsRowSumsView, freeze_layout, new_figure
from .nb05_module import SettingResult, example_setting


class ArticleExampleDashboard(Dashboard):
    """The article's example (seed 42, x of shape (2, 4, 8)): weights and row sums, live.

    Controls: ``batch`` (0 or 1), ``mask`` ("none", "padding" with lengths (4, 2),
    "causal"), ``scaled`` (True: scores ÷ √d_k, False: none). Every change calls
    :func:`nb05_module.example_setting` and redraws a heatmap of the (4, 4)
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
        controls = {
            "batch": _toggle_buttons([("0", 0), ("1", 1)], batch, "batch element", "72px"),
            "mask": _toggle_buttons(MASK_CHOICES, mask, "mask", "72px"),
            "scaled": _toggle_buttons(
                [("÷√d_k", True), ("none", False)], scaled, "scaling", "72px"
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
        self._wrap_controls()
        self.update()

    def render(self, batch: int, mask: str, scaled: bool) -> None:
        """Compute the setting with the pure function and show it."""
        self.result = example_setting(batch, mask, scaled)
        self.view.update(self.result)

    def to_png(self) -> bytes:
        """Redraw only the changing artists; the key tick labels decide the background."""
        return self._renderer.render(background_key=self.result.key_labels)
