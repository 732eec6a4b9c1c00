"""Notebook 06's figure and dashboard (matplotlib, ipywidgets).

Used by notebook 06, section "7 · A dashboard: one mask, three conventions"; the numbers come
from ``nb06_pytorch.convention_setting``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib.artist import Artist
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.text import Text
from matplotlib.transforms import Bbox

from ._agg import encode_png
from ._dashboard import Dashboard, _toggle_buttons
from ._figures import (
    _MASK_LEGEND,
    MASKED_COLOR,
    NAN_FACE,
    _closes_figures_on_error,
    _weights_colorbar,
    draw_attention_heatmap,
    figure,
    freeze_layout,
    new_figure,
    update_attention_heatmap,
)
from .nb06_pytorch import (
    CONVENTION_MASK_CHOICES,
    IMPLEMENTATIONS,
    MASK_CONVENTIONS,
    ULPS,
    ConventionResult,
    convention_setting,
)

_PASSED_BLOCKED = (0.55, 0.55, 0.55, 1.0)  # left panel: a cell its receiver reads as blocked
_TITLES = {"attn_lib": "attn_lib (the reference)", "MHA": "nn.MultiheadAttention",
           "SDPA": "SDPA (weights via value = I)"}  # fmt: skip


def verdict(result: ConventionResult, name: str) -> str:
    """Two title lines: how ``name``'s weights compare with attn_lib's. NaN rows are counted,
    never called agreement; only the other rows are compared."""
    w = result.weights[name]
    if name == "attn_lib":
        return "the intended keep-mask\n "
    n_nan, L = result.nan_rows[name], w.shape[0]
    if n_nan == L:
        return f"NaN in all {L} rows\n "
    diff = result.max_abs_diff[name]
    close = (f"≤ {ULPS} ulps from attn_lib" if diff <= ULPS * torch.finfo(w.dtype).eps
             else f"differs by up to {diff:.4f}")  # fmt: skip
    if n_nan == 0:
        return f"{close}\n "
    return f"NaN in {n_nan} row{'s' * (n_nan > 1)}; the rest:\n{close}"


def _cells(ax: object, L: int) -> PolyCollection:
    """L × L unit squares on the cells of an image's axes, one collection: drawing it costs a
    fraction of resampling an image, and a dashboard redraws four of them on every move."""
    j, i = np.meshgrid(np.arange(L), np.arange(L))  # (L, L): column, row of each cell
    corners = [(j - 0.5, i - 0.5), (j + 0.5, i - 0.5), (j + 0.5, i + 0.5), (j - 0.5, i + 0.5)]
    verts = np.stack([np.stack([x.ravel(), y.ravel()], -1) for x, y in corners], 1)  # (L², 4, 2)
    return ax.add_collection(PolyCollection(verts, linewidths=0, antialiaseds=False),
                             autolim=False)  # fmt: skip


class ConventionView:
    """Four panels, updatable: the mask as passed (values in the cells, dark where its
    receiver reads "blocked"), then attn_lib's, MHA's and SDPA's (L, L) weights on the 0–1
    scale, cells the intended mask blocks grey "×", NaN cells pale red, titles from
    :func:`verdict`."""

    def __init__(self, fig: Figure, L: int = 4) -> None:
        self.fig, self.L, self.axes, self.keys = fig, L, list(fig.subplots(1, 4)), None
        ax = self.axes[0]
        ax.imshow(np.ones((L, L, 4)), aspect="auto", visible=False)  # the axes of an image
        self.mask_cells = _cells(ax, L)
        self.mask_texts = [[ax.text(j, i, "", ha="center", va="center", fontsize=9)
                            for j in range(L)] for i in range(L)]  # fmt: skip
        ax.set(xticks=range(L), yticks=range(L), xlabel="key position j",
               ylabel="query position i")  # fmt: skip
        ax.set_title("\n\n", fontsize=10)
        self.message = ax.text((L - 1) / 2, (L - 1) / 2, "", ha="center", va="center")
        self.heatmaps = {}
        for ax, name in zip(self.axes[1:], IMPLEMENTATIONS, strict=True):
            self.heatmaps[name] = draw_attention_heatmap(
                ax, np.zeros((L, L)), title="\n\n", colorbar=False, mask_legend=False)  # fmt: skip
            ax.set(xlabel="key position j", ylabel="")
            ax.title.set_fontsize(10)
            self.heatmaps[name].image.set_visible(False)  # the cells show its colours
            self.heatmaps[name].overlay.set_visible(False)
        self.cells = {name: _cells(art.ax, L) for name, art in self.heatmaps.items()}
        _weights_colorbar(fig, self.heatmaps["attn_lib"].image, self.axes[1:])
        fig.legend(handles=[
            Patch(facecolor=MASKED_COLOR, edgecolor="0.4", label=_MASK_LEGEND),
            Patch(facecolor=NAN_FACE, edgecolor="0.4", label="pale red = NaN: no weights at all"),
            Patch(facecolor=_PASSED_BLOCKED, edgecolor="0.4",
                  label="left panel: dark = read as blocked by the function it is passed to"),
        ], loc="outside lower center", ncols=2, frameon=False, fontsize=9)  # fmt: skip
        self.suptitle = fig.suptitle("", fontsize=12)
        titles = {ax.title for ax in self.axes}  # cell labels lie inside their axes: the
        for artist in self.dynamic_artists[:-1]:  # layout need not measure them (it is faster)
            artist.set_in_layout(artist in titles)

    @property
    def panels(self) -> list[list[Artist]]:
        """What :meth:`update` changes, tick labels aside: each axes' cells, frame and texts
        (in drawing order), then the titles."""
        texts = [[t for row in self.mask_texts for t in row] + [self.message]]
        texts += [[t for row in art.texts for t in row] for art in self.heatmaps.values()]
        cells = [self.mask_cells, *self.cells.values()]
        panels = [[c, *ax.spines.values(), *t] for c, ax, t in zip(cells, self.axes, texts, strict=True)]  # fmt: skip
        return panels + [[*(ax.title for ax in self.axes), self.suptitle]]

    @property
    def dynamic_artists(self) -> list[Artist]:
        """:attr:`panels`, flattened."""
        return [artist for panel in self.panels for artist in panel]

    def update(self, result: ConventionResult) -> None:
        """Show one setting of :func:`nb06_pytorch.convention_setting`."""
        L, blocked = self.L, result.passed_blocked.numpy()
        keys = [label.replace(" (", "\n(") for label in result.key_labels]  # "2\n(pad)": fits
        if keys == self.keys:  # new tick labels cost a millisecond or two per axes
            keys = None
        else:
            self.keys = keys
            self.axes[0].set_xticks(range(L), keys)
        rgba = np.ones((L, L, 4))
        rgba[blocked] = _PASSED_BLOCKED
        self.mask_cells.set_facecolor(rgba.reshape(-1, 4))
        for i, j in np.ndindex(L, L):
            self.mask_texts[i][j].set(text=result.passed_text[i][j],
                                      color="white" if blocked[i, j] else "black")  # fmt: skip
        self.message.set_text("" if any(any(row) for row in result.passed_text) else "no mask")
        self.axes[0].set_title("mask as passed\n(its values in the cells)\n ")
        for name, art in self.heatmaps.items():
            w = result.weights[name].numpy()
            update_attention_heatmap(art, w, result.keep.numpy(), key_labels=keys)
            rgba = art.image.to_rgba(w)  # (L, L, 4): the colormap, then grey and NaN on top
            rgba[~result.keep.numpy()] = MASKED_COLOR
            rgba[np.isnan(w)] = NAN_FACE
            self.cells[name].set_facecolor(rgba.reshape(-1, 4))
            for i, j in zip(*np.nonzero(np.isnan(w)), strict=True):
                art.texts[i][j].set(text="NaN", color="darkred", fontsize=10)
            art.ax.set_title(f"{_TITLES[name]}\n{verdict(result, name)}")
        how, b = MASK_CONVENTIONS[result.convention], result.batch_index
        self.suptitle.set_text(f"mask: {result.mask} · passed as: {how} · sequence {b}\n"
                               f"left: {result.passed_name}")  # fmt: skip


def _drawn(artists: list[Artist]) -> tuple:
    """What a panel's artists draw (cell colours, texts), to tell whether the panel changed."""
    return tuple(a.get_facecolor().tobytes() if isinstance(a, PolyCollection)
                 else (a.get_text(), str(a.get_color()), a.get_fontsize())
                 if isinstance(a, Text) else None for a in artists)  # fmt: skip


class PanelRenderer:
    """Blit panel by panel, from a cache of the panels as drawn.

    Each panel's axes (its cells, frame and cell texts, 3 px around) and the band above them
    (the titles) is a tile. A render pastes the static background (drawn once per
    ``background_key``: the key labels under the axes), then each tile: from the cache if its
    panel was drawn so before (keyed by what it draws), else drawn and kept. attn_lib's panel
    has 8 pictures, MHA's and SDPA's about 16: after a few moves, a move draws the left panel's
    16 cells and the titles, not 64 cells.
    """

    TILES = 64  # kept (about 150 kB each), least recently used dropped first

    def __init__(self, fig: Figure, panels: list[list[Artist]]) -> None:
        self.fig, self.panels = fig, panels
        for artist in (a for panel in panels for a in panel):
            artist.set_animated(True)
        axes = [panel[0].axes.bbox for panel in panels[:-1]]
        self.boxes = [Bbox.from_extents(b.x0 - 3, b.y0 - 3, b.x1 + 3, b.y1 + 3) for b in axes]
        self.boxes.append(Bbox.from_extents(0, max(b.y1 for b in self.boxes), *fig.bbox.max))
        self._backgrounds: dict[object, object] = {}
        self._tiles: OrderedDict[tuple, object] = OrderedDict()

    def render(self, background_key: object) -> bytes:
        """PNG bytes of the figure as it is now; ``background_key`` names its static part."""
        canvas = self.fig.canvas
        if background_key not in self._backgrounds:
            canvas.draw()  # animated (dynamic) artists are skipped
            self._backgrounds[background_key] = canvas.copy_from_bbox(self.fig.bbox)
        canvas.restore_region(self._backgrounds[background_key])
        for n, (box, panel) in enumerate(zip(self.boxes, self.panels, strict=True)):
            key = (n, _drawn(panel))
            if key in self._tiles:
                self._tiles.move_to_end(key)
                canvas.restore_region(self._tiles[key])
                continue
            for artist in panel:
                self.fig.draw_artist(artist)
            self._tiles[key] = canvas.copy_from_bbox(box)
            if len(self._tiles) > self.TILES:
                self._tiles.popitem(last=False)
        return encode_png(canvas)


@_closes_figures_on_error
def plot_convention_gallery(results: Sequence[ConventionResult], width: float = 10.3) -> Figure:
    """Settings of :func:`nb06_pytorch.convention_setting`, one row of four panels each (a
    pyplot figure: end the cell with ``plt.show()``), at the dashboard's 80 dpi: 10.3 inches
    fit the notebook column (about 830 px) and its smallest text, 9 pt, is 10 px."""
    fig = figure(figsize=(width, 4.6 * len(results)), dpi=80, layout="constrained")
    rows = fig.subfigures(len(results), 1, hspace=0.04) if len(results) > 1 else [fig]
    for row, result in zip(rows, results, strict=True):
        ConventionView(row).update(result)
    return fig


class MaskConventionDashboard(Dashboard):
    """How one mask is passed → attn_lib's, MHA's and SDPA's weights.

    Controls: ``convention`` (:data:`nb06_pytorch.MASK_CONVENTIONS`), ``mask``
    (:data:`nb06_pytorch.CONVENTION_MASK_CHOICES`) and ``sequence`` (0 or 1); each change
    shows :func:`nb06_pytorch.convention_setting` in a :class:`ConventionView` (``view``;
    ``result`` is the setting shown). Each setting's PNG is drawn once, then reused.
    """

    plain_text = ("Dashboard: one mask passed in each convention and the weights of attn_lib, "
                  "nn.MultiheadAttention and SDPA. It needs a running Jupyter kernel; the static "
                  "figures above show its settings.")  # fmt: skip

    def __init__(self, convention: str = "keep", mask: str = "padding", sequence: int = 1,
                 *, dpi: float = 80) -> None:  # fmt: skip
        self.result = convention_setting(convention, mask, sequence)
        controls = {
            "convention": widgets.Dropdown(
                options=[(label, key) for key, label in MASK_CONVENTIONS.items()],
                value=convention, description="mask passed as",
                style={"description_width": "initial"}, layout=widgets.Layout(width="300px")),
            "mask": _toggle_buttons(CONVENTION_MASK_CHOICES, mask, "mask", "118px"),
            "sequence": _toggle_buttons([("0", 0), ("1", 1)], sequence, "sequence", "48px"),
        }  # fmt: skip
        figure = new_figure(figsize=(10.5, 4.6), dpi=dpi)  # 840 px: the notebook's width
        self.view = ConventionView(figure)
        self.view.update(self.result)
        freeze_layout(figure)  # every title has three lines, so the layout never changes
        self._renderer, self._pngs = PanelRenderer(figure, self.view.panels), {}
        # The static part has two forms, with "(pad)" key labels and without: draw the other
        # one now (and that setting's PNG), so that no first move pays a full redraw.
        padded = mask in ("padding", "fully masked row")
        self.render(convention, "causal" if padded else "padding", sequence)
        self.to_png()
        super().__init__(controls, figure)
        self.update()

    def render(self, convention: str, mask: str, sequence: int) -> None:
        self.result = convention_setting(convention, mask, sequence)
        self.view.update(self.result)

    def to_png(self) -> bytes:
        """The static part is pasted (it changes with the key labels), the rest drawn."""
        key = (self.result.convention, self.result.mask, self.result.batch_index)
        if key not in self._pngs:
            self._pngs[key] = self._renderer.render(self.result.key_labels)
        return self._pngs[key]
