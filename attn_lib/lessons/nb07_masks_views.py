"""Notebook 07's figures and dashboard (matplotlib, ipywidgets).

Used by notebook 07 (Masks: padding, causal, fill values and shapes), sections "1 · Padding and
causal masks" (``plot_keep_masks``) and "7 · The mask dashboard"; data from ``nb07_masks``.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

import ipywidgets as widgets
import matplotlib as mpl
import numpy as np
import torch
from matplotlib.artist import Artist
from matplotlib.figure import Figure

from ._dashboard import Dashboard, _toggle_buttons
from ._experiments import PADDING_SIDES
from ._figures import (
    _TEXT_DARK_BELOW,
    _VISIBLE_WEIGHT,
    ATTENTION_CMAP,
    MASKED_COLOR,
    MASKED_MARK,
    BlitRenderer,
    _weights_colorbar,
    figure,
    freeze_layout,
    new_figure,
    subplots,
)
from .nb07_masks import MASK_DEMO_L, MASK_DTYPES, MaskSetting, mask_setting

NAN_COLOR = (0.84, 0.15, 0.16, 1.0)  # red, not a colour viridis uses: a NaN weight


def plot_keep_masks(panels: Sequence[tuple[torch.Tensor, str]], *, suptitle: str) -> Figure:
    """Keep-masks (L_q, L_k) side by side, one (keep, title) per panel: white where a query may
    attend, grey "×" where blocked; queries on y, keys on x (end the cell with plt.show())."""
    fig, axes = subplots(
        1, len(panels), figsize=(2.6 * len(panels) + 0.2, 3.2), layout="compressed", squeeze=False
    )  # square panels: no empty band
    for ax, (keep, title) in zip(axes[0], panels, strict=True):
        k = np.asarray(keep, dtype=bool)
        rgba = np.ones((*k.shape, 4))
        rgba[~k] = MASKED_COLOR
        ax.imshow(rgba)
        for i, j in np.argwhere(~k):
            ax.text(j, i, MASKED_MARK, ha="center", va="center", color="0.3", fontsize=13)
        ax.set_xticks(np.arange(k.shape[1] + 1) - 0.5, minor=True)
        ax.set_yticks(np.arange(k.shape[0] + 1) - 0.5, minor=True)
        ax.grid(which="minor", color="0.55", linewidth=0.6)
        ax.tick_params(which="both", length=0)
        ax.set(xticks=range(k.shape[1]), yticks=range(k.shape[0]), xlabel="key position j")
        ax.set_title(title, fontsize=10)
    axes[0][0].set_ylabel("query position i")
    fig.suptitle(suptitle)
    return fig


class MaskPanels:
    """n masked-weight heatmaps (L, L), ``ncols`` a row (default all), on one 0–1 scale,
    updatable in place.

    Queries on y, keys on x; masked cells grey "×", a leak (a masked cell with weight) its
    colour and "×", NaN red. With ``annotate`` every cell is written (static figures), else
    the "×" are markers, much faster to draw (the dashboard). Source: article section 4.1.
    """

    def __init__(
        self, fig: Figure, n: int, L: int, *, annotate: bool = True, ncols: int | None = None
    ) -> None:
        ncols = n if ncols is None else ncols
        grid = list(fig.subplots(-(-n // ncols), ncols, squeeze=False).flat)
        self.axes = grid[:n]
        for ax in grid[n:]:
            ax.set_visible(False)
        self.images = [ax.imshow(np.zeros((L, L, 4)), aspect="auto") for ax in self.axes]
        self.texts = [[ax.text(j, i, "", ha="center", va="center") for i in range(L)
                       for j in range(L)] if annotate else [] for ax in self.axes]  # fmt: skip
        self.marks = [ax.scatter([], [], marker="x", s=80, linewidths=1.3) for ax in self.axes]
        for index, ax in enumerate(self.axes):
            ax.set(xticks=range(L), yticks=range(L))
            ax.tick_params(length=0)
            if index + ncols >= n:  # no panel below
                ax.set_xlabel("key position j (attended to)")
            if index % ncols == 0:
                ax.set_ylabel("query position i (attending)")
        mappable = mpl.cm.ScalarMappable(mpl.colors.Normalize(0.0, 1.0), ATTENTION_CMAP)
        _weights_colorbar(fig, mappable, list(self.axes))
        fig.legend(
            handles=[mpl.patches.Patch(facecolor=c, edgecolor="0.4") for c in (MASKED_COLOR,
                                                                                NAN_COLOR)],
            labels=[f"grey {MASKED_MARK} = masked, weight 0 ({MASKED_MARK} on colour: a leak)",
                    "red = the weight is NaN"],
            loc="outside lower center", ncols=2, frameon=False, fontsize=10,
        )  # fmt: skip
        self.error_text = fig.text(
            0.46, 0.5, "", ha="center", va="center", fontsize=10, visible=False,
            bbox={"boxstyle": "round,pad=0.6", "facecolor": "white", "edgecolor": NAN_COLOR},
        )  # fmt: skip
        self.suptitle = fig.suptitle(" ")

    @property
    def dynamic_artists(self) -> list[Artist]:
        """The artists :meth:`update` changes, in drawing order (spines over the images)."""
        spines = [spine for ax in self.axes for spine in ax.spines.values()]
        cells = [t for texts in self.texts for t in texts] + [ax.title for ax in self.axes]
        return [*self.images, *self.marks, *spines, *cells, self.error_text, self.suptitle]

    def update(self, panels: Sequence[tuple[torch.Tensor | None, torch.Tensor, str]],
               suptitle: str, error: str | None = None) -> None:  # fmt: skip
        """Show (weights (L, L) or None, keep (L, L), title) per panel; ``error`` if refused."""
        for ax, image, marks, texts, (weights, keep, title) in zip(
            self.axes, self.images, self.marks, self.texts, panels, strict=True
        ):
            ax.set_title(title, fontsize=10)
            for artist in (image, marks, *texts):
                artist.set_visible(weights is not None)
            if weights is None:
                continue
            w, k = weights.numpy().astype(float), keep.numpy()
            nan = np.isnan(w)
            blocked = ~k & ~nan
            leak = blocked & (w >= _VISIBLE_WEIGHT)  # masked, yet weighted
            rgba = mpl.colormaps[ATTENTION_CMAP](np.clip(np.nan_to_num(w), 0.0, 1.0))  # (L, L, 4)
            rgba[blocked & ~leak], rgba[nan] = MASKED_COLOR, NAN_COLOR
            image.set_data(rgba)
            light = ~nan & (w >= _TEXT_DARK_BELOW)  # viridis is light there: write in black
            if not texts:  # the dashboard: "×" markers draw much faster than texts
                marks.set_offsets(np.argwhere(blocked)[:, ::-1])  # (x, y) = (key, query)
                marks.set_color(np.where(leak, np.where(light, "black", "white"), "0.3")[blocked])
                continue
            for text, x, b, lk, n, lt in zip(texts, w.flat, blocked.flat, leak.flat, nan.flat,
                                             light.flat, strict=True):  # fmt: skip
                grey = b and not lk
                label = f"{MASKED_MARK}\n{x:.2f}" if lk else MASKED_MARK if b else f"{x:.2f}"
                text.set(text="NaN" if n else label, fontsize=8 if lk else 13 if grey else 9,
                         color="0.3" if grey else "black" if lt or n else "white")  # fmt: skip
        wrapped = "\n".join(textwrap.wrap(error or "", width=84))
        self.error_text.set_text(f"PyTorch refused this setting:\n\n{wrapped}")
        self.error_text.set_visible(error is not None)
        self.suptitle.set_text(suptitle)

    def show(self, result: MaskSetting) -> None:
        """One setting: a panel per sequence of the batch."""
        panels = [(None if result.weights is None else result.weights[b], result.keep[b],
                   _panel_title(f"sequence {b} · length {n}", result, b))
                  for b, n in enumerate(result.lengths)]  # fmt: skip
        self.update(panels, result.title, result.error)


def _panel_title(head: str, result: MaskSetting, b: int) -> str:
    if result.weights is None:
        return f"{head}\nno weights: refused"
    nan = result.nan_rows[b]
    nan_text = f"{nan} NaN row{'s' if nan > 1 else ''}, " if nan else ""
    return f"{head}\n{nan_text}masked mass {result.mass[b]:.3f} per row"


def plot_mask_setting(result: MaskSetting) -> Figure:
    """One mask-dashboard setting, as the dashboard draws it (end the cell with plt.show())."""
    fig = figure(figsize=(8.2, 4.1), layout="constrained")  # 100 dpi inline: fits 840 px
    MaskPanels(fig, len(result.lengths), MASK_DEMO_L).show(result)
    return fig


def plot_mask_gallery(results: Sequence[MaskSetting], b: int, labels: Sequence[str], *,
                      suptitle: str) -> Figure:  # fmt: skip
    """Sequence ``b`` under several settings (none refused), two a row on one 0–1 scale."""
    rows = -(-len(results) // 2)
    fig = figure(figsize=(7.0, 3.5 * rows + 0.6), layout="constrained")
    panels = [(r.weights[b], r.keep[b], _panel_title(label, r, b))
              for r, label in zip(results, labels, strict=True)]  # fmt: skip
    MaskPanels(fig, len(results), MASK_DEMO_L, ncols=2).update(panels, suptitle)
    return fig


_FILL_OPTIONS = (
    ("attn_lib default (dtype-safe, zero rows)", "default"), ("-1e9 (the article)", "-1e9"),
    ("-inf", "-inf"), ("0 (does not mask)", "0"), ("torch.finfo(dtype).min", "finfo.min"),
)  # fmt: skip


class MaskDashboard(Dashboard):
    """Masks live: each control → :func:`nb07_masks.mask_setting` → one heatmap per sequence.

    Controls: ``length_0``, ``length_1``, ``length_2`` (1..6), ``causal`` (False / True),
    ``padding`` ("right" / "left"), ``fill`` (MASK_FILLS), ``dtype`` (MASK_DTYPES).
    Attributes: ``result`` (the MaskSetting shown), ``view`` (the MaskPanels drawing it).
    Source: article sections 3.2 and 4.1.
    """

    plain_text = ("Dashboard: masked attention weights of a padded batch. It needs a running "
                  "Jupyter kernel; the static figures above show its settings.")  # fmt: skip

    def __init__(self, dpi: float = 80) -> None:
        style = {"description_width": "initial"}
        controls = {
            **{f"length_{b}": widgets.IntSlider(value=n, min=1, max=MASK_DEMO_L, style=style,
                                                description=f"length of seq {b}")
               for b, n in enumerate((6, 4, 2))},
            "causal": _toggle_buttons([("off", False), ("on", True)], False, "causal mask", "64px"),
            "padding": _toggle_buttons(PADDING_SIDES, "right", "padding side", "64px"),
            "fill": widgets.Dropdown(options=list(_FILL_OPTIONS), value="default",
                                     description="fill value", style=style,
                                     layout=widgets.Layout(width="380px")),
            "dtype": _toggle_buttons(MASK_DTYPES, "float32", "dtype", "80px"),
        }  # fmt: skip
        figure = new_figure(figsize=(10.5, 4.6), dpi=dpi)  # 840 px: the notebook's width
        self.view = MaskPanels(figure, 3, MASK_DEMO_L, annotate=False)
        self.result = mask_setting()
        self.view.show(self.result)
        freeze_layout(figure)  # tick labels never change: one layout pass is enough
        self._renderer = BlitRenderer(figure, self.view.dynamic_artists)
        super().__init__(controls, figure)
        self.update()

    def render(self, **v: object) -> None:
        """Compute the setting with the pure function and show it."""
        lengths = tuple(int(v[f"length_{b}"]) for b in range(3))
        self.result = mask_setting(lengths, causal=bool(v["causal"]), fill=str(v["fill"]),
                                   padding_side=str(v["padding"]), dtype=str(v["dtype"]))  # fmt: skip
        self.view.show(self.result)

    def to_png(self) -> bytes:
        """Redraw only the changing artists over a cached background."""
        return self._renderer.render()
