"""Notebook 06's figure and dashboard (matplotlib, ipywidgets).

Used by notebook 06, section "7 · A dashboard: one mask, three conventions"; the numbers come
from ``nb06_pytorch.convention_setting``.
"""

from __future__ import annotations

from collections.abc import Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from ._dashboard import Dashboard, _toggle_buttons
from ._figures import (
    _MASK_LEGEND,
    MASKED_COLOR,
    NAN_FACE,
    BlitRenderer,
    _closes_figures_on_error,
    _weights_colorbar,
    draw_attention_heatmap,
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
        return "gets the intended keep-mask\n "
    n_nan, L = result.nan_rows[name], w.shape[0]
    if n_nan == L:
        return f"NaN in all {L} rows\n "
    diff = result.max_abs_diff[name]
    close = (f"≤ {ULPS} ulps from attn_lib" if diff <= ULPS * torch.finfo(w.dtype).eps
             else f"max |Δ| from attn_lib {diff:.4f}")  # fmt: skip
    if n_nan == 0:
        return f"{close}\n "
    return f"NaN in {n_nan} row{'s' * (n_nan > 1)}; other {L - n_nan} rows:\n{close}"


class ConventionView:
    """Four panels, updatable: the mask as passed (values in the cells, dark where its
    receiver reads "blocked"), then attn_lib's, MHA's and SDPA's (L, L) weights on the 0–1
    scale, cells the intended mask blocks grey "×", NaN cells pale red, titles from
    :func:`verdict`."""

    def __init__(self, fig: Figure, L: int = 4) -> None:
        self.fig, self.L, self.axes = fig, L, list(fig.subplots(1, 4))
        ax = self.axes[0]
        self.mask_image = ax.imshow(np.ones((L, L, 4)), aspect="auto")
        self.mask_texts = [[ax.text(j, i, "", ha="center", va="center", fontsize=9)
                            for j in range(L)] for i in range(L)]  # fmt: skip
        ax.set(xticks=range(L), yticks=range(L), xlabel="key position j",
               ylabel="query position i")  # fmt: skip
        ax.set_title("\n\n", fontsize=10)
        self.message = ax.text((L - 1) / 2, (L - 1) / 2, "", ha="center", va="center")
        self.heatmaps = {}
        for ax, name in zip(self.axes[1:], IMPLEMENTATIONS, strict=True):
            self.heatmaps[name] = draw_attention_heatmap(
                ax, np.zeros((L, L)), title="\n\n", colorbar=False, mask_legend=False)
            ax.set(xlabel="key position j", ylabel="")
            ax.title.set_fontsize(10)
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
    def dynamic_artists(self) -> list:
        """What :meth:`update` changes, tick labels aside, in drawing order."""
        out = [self.mask_image, *(t for row in self.mask_texts for t in row), self.axes[0].title]
        for art in self.heatmaps.values():
            out += [art.image, art.overlay, *(t for row in art.texts for t in row), art.ax.title]
        spines = [s for ax in self.axes for s in ax.spines.values()]  # drawn over the images
        return out + [self.message, *spines, self.suptitle]

    def update(self, result: ConventionResult) -> None:
        """Show one setting of :func:`nb06_pytorch.convention_setting`."""
        L, blocked = self.L, result.passed_blocked.numpy()
        keys = [label.replace(" (", "\n(") for label in result.key_labels]  # "2\n(pad)": fits
        rgba = np.ones((L, L, 4))
        rgba[blocked] = _PASSED_BLOCKED
        self.mask_image.set_data(rgba)
        for i, j in np.ndindex(L, L):
            self.mask_texts[i][j].set(text=result.passed_text[i][j],
                                      color="white" if blocked[i, j] else "black")  # fmt: skip
        self.message.set_text("" if any(any(row) for row in result.passed_text) else "no mask")
        self.axes[0].set_title("mask as passed\n(its values in the cells)\n ")
        for name, art in self.heatmaps.items():
            w = result.weights[name].numpy()
            update_attention_heatmap(art, w, result.keep.numpy(), key_labels=keys)
            overlay = np.asarray(art.overlay.get_array()).copy()
            overlay[np.isnan(w)] = NAN_FACE
            art.overlay.set_data(overlay)
            for i, j in zip(*np.nonzero(np.isnan(w)), strict=True):
                art.texts[i][j].set(text="NaN", color="darkred", fontsize=10)
            art.ax.set_title(f"{_TITLES[name]}\n{verdict(result, name)}")
        self.axes[0].set_xticks(range(L), keys)
        how, b = MASK_CONVENTIONS[result.convention], result.batch_index
        self.suptitle.set_text(f"mask: {result.mask} · passed as: {how} · sequence {b}\n"
                               f"left: {result.passed_name}")  # fmt: skip


@_closes_figures_on_error
def plot_convention_gallery(results: Sequence[ConventionResult], width: float = 10.5) -> Figure:
    """Settings of :func:`nb06_pytorch.convention_setting`, one row of four panels each (a
    pyplot figure: end the cell with ``plt.show()``)."""
    fig = plt.figure(figsize=(width, 4.6 * len(results)), layout="constrained")
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
                  "figures above show its settings.")

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
        self._renderer, self._pngs = BlitRenderer(figure, self.view.dynamic_artists), {}
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
            self._pngs[key] = self._renderer.render(background_key=self.result.key_labels)
        return self._pngs[key]
