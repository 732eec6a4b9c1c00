"""Notebook 06's figures and dashboards (matplotlib, ipywidgets).

Used by notebook 06 (Checking against PyTorch), sections "6 · One mask, three conventions", "9
· A dashboard: one mask, three conventions". Its data and experiments come from
``nb06_pytorch``.
"""

from __future__ import annotations

from collections.abc import Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.artist import Artist
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle
from matplotlib.text import Text

from ._dashboard import Dashboard, _toggle_buttons
from ._figures import (
    _MASK_LEGEND,
    MASKED_COLOR,
    NAN_EDGE,
    NAN_FACE,
    BlitRenderer,
    HeatmapArtists,
    _as_numpy_2d,
    _closes_figures_on_error,
    _encode_png,
    _weights_colorbar,
    draw_attention_heatmap,
    freeze_layout,
    new_figure,
    update_attention_heatmap,
)
from .nb06_pytorch import (
    CONVENTION_MASK_CHOICES,
    MASK_CONVENTIONS,
    ConventionResult,
    convention_setting,
)

_NAN_TEXT = (0.55, 0.0, 0.0, 1.0)
_NAN_LEGEND = "red hatch = NaN (not a number): no weights at all"
_PASSED_BLOCKED = (0.55, 0.55, 0.55, 1.0)  # mask panel: a cell the receiver reads as blocked
_PASSED_KEPT = (1.0, 1.0, 1.0, 1.0)
_IMPLEMENTATION_TITLES = {
    "attn_lib": "attn_lib (the reference)",
    "MHA": "nn.MultiheadAttention",
    "SDPA": "SDPA (weights via value = I)",
}


def _diff_lines(name: str, diff: float, nan_rows: int, missing: bool) -> str:
    """Second and third title lines of a weights panel: how far it is from attn_lib."""
    if name == "attn_lib":
        return "gets the keep-mask as intended\n "
    if missing:
        return "cannot take this mask\n "
    nan = f"NaN in {nan_rows} row{'s' if nan_rows != 1 else ''}" if nan_rows else " "
    if np.isnan(diff):
        return f"no finite weight\n{nan}"
    # Weights are at most 1, so 16 float32 ulps at 1.0 covers any correct kernel's round-off;
    # the exact size below that (0 on one CPU, 6e-08 on another) is not worth a title.
    if diff <= 16 * torch.finfo(torch.float32).eps:
        return f"max |Δ| vs attn_lib ≤ 16 ulps (round-off)\n{nan}"
    return f"max |Δ| vs attn_lib: {diff:.1e}\n{nan}"


def _wrap(text: str, width: int) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width=width, break_long_words=False))


def _two_lines(text: str, width: int) -> str:
    """Exactly two lines, a "(convention)" on the second, so a frozen layout always fits."""
    head, paren, tail = text.partition(" (")
    if paren:
        return f"{head}\n({tail}"
    lines = _wrap(text, width).split("\n")
    if len(lines) > 2:
        lines = [lines[0], " ".join(lines[1:])]
    return "\n".join((lines + [" "])[:2])


class ConventionView:
    """The mask as passed, beside attn_lib's, MHA's and SDPA's weights; updatable in place.

    Four panels in a row: (1) the tensor handed over, with its values written in
    each cell and grey where the receiving function reads "blocked"; (2-4) the
    (L_q, L_k) weights of attn_lib, ``nn.MultiheadAttention`` and
    ``F.scaled_dot_product_attention`` on the series' 0–1 viridis scale, cells
    blocked by the *intended* mask grey with "×" (a blocked cell that still gets
    weight shows it after the ×), NaN cells pale red with a red hatch and "NaN".
    Each weights panel's title says its max |Δ| against attn_lib.

    Args:
        fig: an empty Figure or SubFigure.
        L: number of query and key positions.

    Source: torch.nn.MultiheadAttention and torch.nn.functional.scaled_dot_product_attention
        docs (mask conventions); STYLE.md of this series.
    """

    def __init__(self, fig: Figure, L: int = 4) -> None:

        self.fig = fig
        self.L = L
        axes = fig.subplots(1, 4, width_ratios=[1.0, 1.0, 1.0, 1.0])
        ax_mask = axes[0]
        self.mask_image = ax_mask.imshow(
            np.ones((L, L, 4)), interpolation="nearest", aspect="auto"
        )
        self.mask_texts = [
            [ax_mask.text(j, i, "", ha="center", va="center", fontsize=9) for j in range(L)]
            for i in range(L)
        ]
        self.mask_message = ax_mask.text(
            (L - 1) / 2, (L - 1) / 2, "", ha="center", va="center", fontsize=9, wrap=False
        )
        ax_mask.set_xticks(range(L), [str(j) for j in range(L)])
        ax_mask.set_yticks(range(L), [str(i) for i in range(L)])
        ax_mask.set_xlabel("key position j")
        ax_mask.set_ylabel("query position i")
        ax_mask.tick_params(length=0)
        self.mask_title = ax_mask.set_title("\n\n", fontsize=10)
        self.heatmaps: dict[str, HeatmapArtists] = {}
        self.nan_patches: dict[str, list[list[Artist]]] = {}
        self.messages: dict[str, Text] = {}
        for ax, name in zip(axes[1:], _IMPLEMENTATION_TITLES, strict=True):
            art = draw_attention_heatmap(
                ax, np.zeros((L, L)), None, title="\n\n", colorbar=False, mask_legend=False
            )
            art.ax.title.set_fontsize(10)
            ax.set_xlabel("key position j")
            ax.set_ylabel("")
            self.heatmaps[name] = art
            nan_style = {"facecolor": NAN_FACE, "edgecolor": NAN_EDGE, "hatch": "//"}
            self.nan_patches[name] = [
                [
                    ax.add_patch(
                        Rectangle(
                            (j - 0.5, i - 0.5), 1.0, 1.0, **nan_style, linewidth=0.0,
                            visible=False, zorder=2,
                        )
                    )
                    for j in range(L)
                ]
                for i in range(L)
            ]
            self.messages[name] = ax.text(
                (L - 1) / 2, (L - 1) / 2, "", ha="center", va="center", fontsize=9
            )
        self.colorbar = _weights_colorbar(fig, self.heatmaps["attn_lib"].image, list(axes[1:]))
        handles = [
            Patch(facecolor=MASKED_COLOR, edgecolor="0.4", label=_MASK_LEGEND),
            Patch(facecolor=NAN_FACE, edgecolor=NAN_EDGE, hatch="//", label=_NAN_LEGEND),
            Patch(facecolor=_PASSED_BLOCKED, edgecolor="0.4",
                  label="left panel: dark = read as blocked by the function it is passed to"),
        ]  # fmt: skip
        self.legend = fig.legend(
            handles=handles, loc="outside lower center", ncols=3, frameon=False, fontsize=9
        )
        self.suptitle = fig.suptitle("", fontsize=12)
        self.axes = list(axes)
        # Cell labels, hatches and messages stay inside their axes: leaving them out of the
        # layout computation saves measuring ~100 texts on every layout pass.
        titles = {self.mask_title, *(art.ax.title for art in self.heatmaps.values())}
        for panel in self.panel_artists:
            for artist in panel:
                if artist not in titles:
                    artist.set_in_layout(False)

    @property
    def panel_artists(self) -> list[list[Artist]]:
        """The artists :meth:`update` changes in each panel (mask, attn_lib, MHA, SDPA)."""
        mask: list[Artist] = [self.mask_image]
        mask += [t for row in self.mask_texts for t in row]
        panels = [[*mask, self.mask_message, self.mask_title]]
        for name, art in self.heatmaps.items():
            artists: list[Artist] = [art.image, art.overlay]
            artists += [p for row in self.nan_patches[name] for p in row]
            artists += [t for row in art.texts for t in row]
            panels.append([*artists, self.messages[name], art.ax.title])
        return panels

    @property
    def dynamic_artists(self) -> list[Artist]:
        """The artists :meth:`update` changes (tick labels aside), in drawing order."""
        return [a for panel in self.panel_artists for a in panel] + [self.suptitle]

    def panel_regions(self) -> list[object]:
        """Each panel's area in display pixels (a Bbox): its axes and title, not the suptitle.

        Neighbouring regions meet halfway between the axes, so a title a little wider
        than its axes still falls inside its own region. Valid once the layout is frozen
        and the figure has been drawn.
        """
        from matplotlib.transforms import Bbox

        renderer = self.fig.canvas.get_renderer()
        top = self.suptitle.get_window_extent(renderer).y0 - 1
        edges = [ax.bbox for ax in self.axes]
        right_end = self.colorbar.ax.bbox.x0
        regions = []
        for i, box in enumerate(edges):
            x0 = 0.0 if i == 0 else (edges[i - 1].x1 + box.x0) / 2
            x1 = (box.x1 + (edges[i + 1].x0 if i + 1 < len(edges) else right_end)) / 2
            regions.append(Bbox([[x0, box.y0 - 1], [x1, top]]))
        return regions

    @staticmethod
    def panel_keys(result: ConventionResult) -> list[tuple]:
        """Hashable descriptions of what each panel shows for ``result`` (for caching)."""
        keep = _as_numpy_2d(result.keep, "keep").astype(bool).tobytes()
        mask_key = (
            result.passed_name,
            tuple(tuple(row) for row in result.passed_text),
            _as_numpy_2d(result.passed_blocked, "passed_blocked").astype(bool).tobytes(),
            result.error,
        )
        keys: list[tuple] = [mask_key]
        for name in _IMPLEMENTATION_TITLES:
            w = result.weights[name]
            data = None if w is None else _as_numpy_2d(w, name).astype(np.float32).tobytes()
            title = _diff_lines(name, result.max_abs_diff[name], result.nan_rows[name], w is None)
            keys.append((name, data, keep, title))
        return keys

    def update(self, result: ConventionResult) -> None:
        """Show one setting (see :func:`nb06_pytorch.convention_setting`)."""
        L = self.L
        keep = _as_numpy_2d(result.keep, "keep").astype(bool)
        blocked = _as_numpy_2d(result.passed_blocked, "passed_blocked").astype(bool)
        rgba = np.empty((L, L, 4))
        rgba[:] = _PASSED_KEPT
        rgba[blocked] = _PASSED_BLOCKED
        self.mask_image.set_data(rgba)
        for i in range(L):
            for j in range(L):
                text = self.mask_texts[i][j]
                text.set_text(result.passed_text[i][j] if result.passed_text[i] else "")
                text.set_color("white" if blocked[i, j] else "black")
        message = ""
        if result.error is not None:
            message = _wrap(result.error, 24)
        elif not any(any(row) for row in result.passed_text):
            message = "no mask"
        self.mask_message.set_text(message)
        self.mask_title.set_text("mask as passed\n" + _two_lines(result.passed_name, 36))
        for name, art in self.heatmaps.items():
            w = result.weights[name]
            missing = w is None
            w_np = np.full((L, L), np.nan) if missing else _as_numpy_2d(w, name)
            update_attention_heatmap(art, w_np, keep, key_labels=result.key_labels)
            nan = np.isnan(w_np) & (not missing)
            for i in range(L):
                for j in range(L):
                    self.nan_patches[name][i][j].set_visible(bool(nan[i, j]))
                    if missing:
                        art.texts[i][j].set_text("")
                    elif nan[i, j]:
                        art.texts[i][j].set_text("NaN")
                        art.texts[i][j].set_color(_NAN_TEXT)
                        art.texts[i][j].set_fontsize(10)
                    art.texts[i][j].set_fontweight("bold" if nan[i, j] else "normal")
            if missing:
                art.overlay.set_data(np.zeros((L, L, 4)))
            self.messages[name].set_text("cannot take\nthis mask" if missing else "")
            lines = _diff_lines(name, result.max_abs_diff[name], result.nan_rows[name], missing)
            art.ax.set_title(f"{_IMPLEMENTATION_TITLES[name]}\n{lines}", fontsize=10)
        for ax in self.axes:
            ax.set_xticks(range(L), list(result.key_labels))
        self.suptitle.set_text(result.title)


class PanelCacheRenderer(BlitRenderer):
    """Render a figure to PNG, redrawing only the panels whose content changed.

    Like :class:`BlitRenderer`, the static part (axes, ticks, colorbar, legend) is
    drawn once per ``background_key``. In addition, each panel's rendered pixels are
    kept under (background_key, panel key): a panel whose key was seen before is
    pasted back instead of redrawn. Cells full of text are what a heatmap costs to
    draw, and a dashboard control usually changes one or two panels out of four.

    Use it only on a figure whose layout is frozen, whose panel regions do not
    overlap, and whose panel keys describe everything the panel's artists show.

    Args:
        fig: a figure with an Agg canvas.
        panels: per panel, the artists that change (marked animated here).
        regions: called once after the first full draw; returns one Bbox (display
            pixels) per panel, the area its artists draw into.
        always: artists drawn on every render, after the panels (e.g. a suptitle).
        max_entries: how many panel images to keep (the oldest are dropped first).

    Source: matplotlib tutorial "Faster rendering by using blitting"
        (``copy_from_bbox`` / ``restore_region``).
    """

    def __init__(
        self,
        fig: Figure,
        panels: Sequence[Sequence[Artist]],
        regions: object,
        always: Sequence[Artist] = (),
        *,
        max_entries: int = 256,
    ) -> None:
        super().__init__(fig, always)  # the background cache; ``always`` drawn last
        self.always = self.dynamic
        self.panels = [list(p) for p in panels]
        self._regions_fn = regions
        self._regions: list[object] | None = None
        for artist in [a for p in self.panels for a in p]:
            artist.set_animated(True)
        self._cache: dict[tuple, object] = {}
        self.max_entries = max_entries
        self.redrawn: list[int] = []  # the panels drawn (not pasted) by the last render

    def render(self, panel_keys: Sequence[object], background_key: object = None) -> bytes:
        """PNG bytes of the figure as it is now; ``panel_keys`` describe each panel."""
        canvas = self._paste_background(background_key)
        if self._regions is None:
            self._regions = list(self._regions_fn())
        fresh = []
        for i, key in enumerate(panel_keys):
            cached = self._cache.get((background_key, i, key))
            if cached is not None:
                canvas.restore_region(cached)
            else:
                fresh.append(i)
        for i in fresh:
            for artist in self.panels[i]:
                self.fig.draw_artist(artist)
        for i in fresh:
            if len(self._cache) >= self.max_entries:
                self._cache.pop(next(iter(self._cache)))
            region = canvas.copy_from_bbox(self._regions[i])
            self._cache[(background_key, i, panel_keys[i])] = region
        for artist in self.always:
            self.fig.draw_artist(artist)
        self.redrawn = fresh
        return _encode_png(canvas)


@_closes_figures_on_error
def plot_convention_setting(
    result: ConventionResult, figsize: tuple[float, float] = (13.0, 4.3)
) -> Figure:
    """A static pyplot rendering of one mask-convention setting (the dashboard's view).

    Args:
        result: e.g. :func:`nb06_pytorch.convention_setting`.
        figsize: inches.

    Returns:
        The pyplot figure (end the cell with ``plt.show()``).

    Source: article section 3.4; STYLE.md of this series.
    """
    fig = plt.figure(figsize=figsize, layout="constrained")
    ConventionView(fig, result.keep.shape[-1]).update(result)
    return fig


@_closes_figures_on_error
def plot_convention_gallery(
    results: Sequence[ConventionResult], *, panel_height: float = 4.0, width: float = 13.0
) -> Figure:
    """Several mask-convention settings, one row of four panels each (a static gallery).

    Args:
        results: settings from :func:`nb06_pytorch.convention_setting`.
        panel_height: inches per row.
        width: inches.

    Returns:
        A pyplot figure (end the cell with ``plt.show()``).

    Raises:
        ValueError: no results.

    Source: article section 3.4; STYLE.md of this series.
    """
    if not results:
        raise ValueError("give at least one setting.")
    fig = plt.figure(figsize=(width, panel_height * len(results)), layout="constrained")
    subfigs = fig.subfigures(len(results), 1, hspace=0.04)
    for sub, result in zip(np.atleast_1d(subfigs), results, strict=True):
        ConventionView(sub, result.keep.shape[-1]).update(result)
    return fig


class MaskConventionDashboard(Dashboard):
    """Notebook 06's dashboard: how a mask is passed → attn_lib's, MHA's and SDPA's weights.

    Controls: ``convention`` (a Dropdown over :data:`nb06_pytorch.MASK_CONVENTIONS`:
    the article's keep-mask, MHA's attn_mask, MHA's key_padding_mask, SDPA's bool
    mask, SDPA's additive mask, or the keep-mask passed to MHA unconverted "by
    mistake"), ``mask`` ("none", "padding", "causal", "fully masked row") and
    ``sequence`` (0 or 1). Every change calls
    :func:`nb06_pytorch.convention_setting` and redraws the tensor as passed and the
    three (4, 4) heatmaps, with each one's max |Δ| against attn_lib in its title and
    NaN cells hatched red.

    Args:
        convention, mask, sequence: the initial setting.
        dpi: resolution of the PNG.

    Attributes:
        result: the ConventionResult currently shown.
        view: the ConventionView that draws it.

    Source: article section 3.4; torch.nn.MultiheadAttention and
        torch.nn.functional.scaled_dot_product_attention docs (mask conventions).
    """

    plain_text = (
        "Dashboard: one mask passed in each convention (article keep-mask, "
        "nn.MultiheadAttention, scaled_dot_product_attention) and the weights each gives. "
        "It needs a running Jupyter kernel; the static figures above show its settings."
    )

    def __init__(
        self,
        convention: str = "keep",
        mask: str = "padding",
        sequence: int = 1,
        *,
        dpi: float = 80,
    ) -> None:
        # The pure function checks the setting first and says what is wrong in a sentence.
        self.result: ConventionResult = convention_setting(convention, mask, sequence)
        style = {"description_width": "initial"}
        controls = {
            "convention": widgets.Dropdown(
                options=[(label, key) for key, label in MASK_CONVENTIONS.items()],
                value=convention,
                description="mask passed as",
                style=style,
                layout=widgets.Layout(width="300px"),
            ),
            "mask": _toggle_buttons(CONVENTION_MASK_CHOICES, mask, "mask", "118px"),
            "sequence": _toggle_buttons([("0", 0), ("1", 1)], sequence, "sequence", "48px"),
        }
        figure = new_figure(figsize=(13.0, 4.3), dpi=dpi)
        self.view = ConventionView(figure, self.result.keep.shape[-1])
        self.view.update(self.result)
        freeze_layout(figure)  # titles always have the same number of lines
        # Four panels, one or two of which change per click: redraw only those.
        self._renderer = PanelCacheRenderer(
            figure, self.view.panel_artists, self.view.panel_regions, [self.view.suptitle]
        )
        super().__init__(controls, figure)
        self._wrap_controls()
        self.update()

    def render(self, convention: str, mask: str, sequence: int) -> None:
        """Compute the setting with the pure function and show it."""
        self.result = convention_setting(convention, mask, sequence)
        self.view.update(self.result)

    def to_png(self) -> bytes:
        """Redraw the panels whose content changed; the key tick labels decide the background."""
        return self._renderer.render(
            self.view.panel_keys(self.result), background_key=self.result.key_labels
        )
