"""Notebook 07's figures and dashboards (matplotlib, ipywidgets).

Used by notebook 07 (Masks: padding, causal, fill values and shapes), sections "1 · Two masks",
"2 · Where rows with no allowed key come from", "8 · The mask dashboard". Its data and
experiments come from ``nb07_masks``.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

import ipywidgets as widgets
import matplotlib as _mpl
import matplotlib.cm as _mpl_cm
import matplotlib.colors as _mpl_colors
import matplotlib.legend_handler as _mpl_legend_handler
import matplotlib.lines as _mpl_lines
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.colorbar import Colorbar
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.legend import Legend

from ._dashboard import Dashboard, _toggle_buttons
from ._experiments import PADDING_SIDES
from ._figures import (
    _TEXT_DARK_BELOW,
    _VISIBLE_WEIGHT,
    ATTENTION_CMAP,
    MASKED_COLOR,
    MASKED_MARK,
    BlitRenderer,
    _as_numpy_2d,
    _closes_figures_on_error,
    _keep_array,
    _labels,
    _weights_colorbar,
    freeze_layout,
    new_figure,
)
from .nb07_masks import MASK_DEMO_L, MASK_DTYPES, MaskSetting, mask_setting

NAN_COLOR = (0.84, 0.15, 0.16, 1.0)  # red, not a colour viridis uses: a NaN weight
_NAN_CELL_TEXT = "NaN"


def add_mask_nan_legend(fig: Figure) -> Legend:
    """One legend under the figure for the three marks of masked weights.

    Grey "×": masked, weight 0. "×" on colour: masked, yet it carries weight (a leak,
    e.g. a fill of 0 or a row with no allowed key made uniform). Red: a NaN weight.

    Source: matplotlib ``Figure.legend`` with ``loc="outside lower center"``.
    """

    def cell(face: tuple[float, ...], mark: str) -> tuple[_mpl_lines.Line2D, _mpl_lines.Line2D]:
        square = _mpl_lines.Line2D(
            [], [], marker="s", markersize=13, markerfacecolor=face, markeredgecolor="0.4",
            linestyle="None",
        )  # fmt: skip
        cross = _mpl_lines.Line2D([], [], marker="x", markersize=7, color=mark, linestyle="None")
        return square, cross

    leak_face = tuple(_mpl.colormaps[ATTENTION_CMAP](0.3))
    return fig.legend(
        handles=[cell(MASKED_COLOR, "0.3"), cell(leak_face, "white"), cell(NAN_COLOR, NAN_COLOR)],
        labels=[
            f"grey {MASKED_MARK}: masked, weight 0",
            f"{MASKED_MARK} on colour: masked, yet weighted (a leak)",
            "red: the weight is NaN",
        ],
        handler_map={tuple: _mpl_legend_handler.HandlerTuple(ndivide=1)},
        loc="outside lower center",
        ncols=3,
        frameon=False,
        fontsize=10,
    )


def draw_keep_mask(
    ax: Axes,
    keep: torch.Tensor | np.ndarray,
    *,
    title: str = "keep-mask",
    query_labels: Sequence[str] | None = None,
    key_labels: Sequence[str] | None = None,
    xlabel: str = "key position j",
    ylabel: str = "query position i",
) -> AxesImage:
    """Draw a 2-D keep-mask: white where attention is allowed, grey "×" where blocked.

    Args:
        ax: axes to draw on.
        keep: (L_q, L_k) bool (True = may attend); a (1, L_k) row draws as a strip.
        title, query_labels, key_labels, xlabel, ylabel: text; labels default "0", "1", ….

    Returns:
        The image (white and grey cells; cell edges drawn as a grid; the "×" are one
        scatter of markers, cheaper to draw than a text per cell).

    Raises:
        ValueError: keep not 2-D, or label counts that do not fit.

    Source: STYLE.md of this series (queries on y, keys on x, masked cells grey "×").
    """
    k = _as_numpy_2d(keep, "keep").astype(bool)
    L_q, L_k = k.shape
    rgba = np.ones((L_q, L_k, 4))
    rgba[~k] = MASKED_COLOR
    image = ax.imshow(rgba, interpolation="nearest", aspect="equal")
    blocked = np.argwhere(~k)  # (n, 2): (query, key)
    ax.scatter(blocked[:, 1], blocked[:, 0], marker="x", s=60, color="0.3", linewidths=1.2)
    ax.set_xlim(-0.5, L_k - 0.5)
    ax.set_ylim(L_q - 0.5, -0.5)  # query 0 at the top
    ax.set_xticks(np.arange(L_k + 1) - 0.5, minor=True)
    ax.set_yticks(np.arange(L_q + 1) - 0.5, minor=True)
    ax.grid(which="minor", color="0.55", linewidth=0.6)
    ax.tick_params(which="both", length=0)
    ax.set_xticks(range(L_k), _labels(key_labels, L_k))
    ax.set_yticks(range(L_q), _labels(query_labels, L_q))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    return image


@_closes_figures_on_error
def plot_keep_masks(
    panels: Sequence[tuple[torch.Tensor | np.ndarray, str]],
    *,
    suptitle: str | None = None,
    cell_size: float = 0.34,
    ylabels: Sequence[str] | None = None,
) -> Figure:
    """Several keep-masks side by side (e.g. a (1, L) padding row, its broadcast, a causal mask).

    Args:
        panels: (keep (L_q, L_k) bool, title) per panel; shapes may differ.
        suptitle: a title over all panels.
        cell_size: inches per cell.
        ylabels: per panel, the y axis label (default "query position i").

    Returns:
        A pyplot figure (end the cell with ``plt.show()``).

    Raises:
        ValueError: no panels, or a mask that is not 2-D.

    Source: STYLE.md of this series.
    """
    if not panels:
        raise ValueError("give at least one panel.")
    arrays = [_as_numpy_2d(k, "keep") for k, _ in panels]
    widths = [max(a.shape[1], 3) for a in arrays]
    rows = max(a.shape[0] for a in arrays)
    fig, axes = plt.subplots(
        1, len(panels), width_ratios=widths, layout="constrained", squeeze=False,
        figsize=(cell_size * sum(widths) + 1.1 * len(panels) + 0.4, cell_size * rows + 2.0),
    )  # fmt: skip
    ylabels = list(ylabels) if ylabels is not None else ["query position i"] * len(panels)
    for ax, a, (_, title), ylabel in zip(axes[0], arrays, panels, ylabels, strict=True):
        draw_keep_mask(ax, a, title=title, ylabel=ylabel)
    if suptitle:
        fig.suptitle(suptitle)
    return fig


def _refusal_text(message: str, width: int) -> str:
    """PyTorch's own words when attn_lib quoted them, wrapped to ``width`` characters."""
    said = message.split("PyTorch said: ", 1)
    text = said[1].rstrip(")") if len(said) == 2 else message
    return "\n".join(textwrap.wrap(f"RuntimeError: {text}", width=width))


class MaskPanel:
    """One heatmap of masked weights, updatable: masked cells grey "×", leaks and NaN marked.

    The weights are drawn with :data:`ATTENTION_CMAP` on a fixed 0–1 scale, composed
    into one RGBA image: a masked cell with (almost) no weight is grey with "×"; a
    masked cell that still carries weight (a leak) keeps its colour and gets an "×";
    a NaN weight is red. With ``annotate`` every cell also gets its text (the weight,
    "×", "× 0.17", "NaN"); without it the "×" are markers, which a dashboard draws
    much faster than 36 texts per panel. A refused setting hides the weights and can
    write the error in the axes.

    Args:
        ax: axes to draw on.
        L_q, L_k: the size of the weights.
        annotate: write the cell texts (static figures) or only mark the cells (dashboards).
        query_labels, key_labels: tick labels, default "0", "1", ….

    Source: STYLE.md of this series (queries on y, keys on x, one colormap, 0–1,
        masked cells marked); article section 4.1.
    """

    def __init__(
        self,
        ax: Axes,
        L_q: int,
        L_k: int,
        *,
        annotate: bool = True,
        query_labels: Sequence[str] | None = None,
        key_labels: Sequence[str] | None = None,
    ) -> None:
        self.ax = ax
        self.shape = (L_q, L_k)
        self.annotate = annotate
        self._cmap = _mpl.colormaps[ATTENTION_CMAP]
        self.image = ax.imshow(np.zeros((L_q, L_k, 4)), interpolation="nearest", aspect="auto")
        ax.set_xticks(range(L_k), _labels(key_labels, L_k))
        ax.set_yticks(range(L_q), _labels(query_labels, L_q))
        ax.set_xlabel("key position j (attended to)")
        ax.set_ylabel("query position i (attending)")
        ax.tick_params(length=0)
        self.texts = [
            [ax.text(j, i, "", ha="center", va="center", fontsize=10) for j in range(L_k)]
            for i in range(L_q)
        ] if annotate else []  # fmt: skip
        empty = np.empty((0, 2))
        self.masked_marks = ax.scatter(empty[:, 0], empty[:, 1], marker="x", s=90, color="0.3",
                                       linewidths=1.3)  # fmt: skip
        self.leak_marks = ax.scatter(empty[:, 0], empty[:, 1], marker="x", s=90, color="white",
                                     linewidths=1.6)  # fmt: skip
        ax.set_xlim(-0.5, L_k - 0.5)
        ax.set_ylim(L_q - 0.5, -0.5)  # query 0 at the top
        self.error_text = ax.text(
            0.5, 0.5, "", transform=ax.transAxes, ha="center", va="center", fontsize=9,
            visible=False,
            bbox={"boxstyle": "round", "facecolor": "white", "edgecolor": NAN_COLOR},
        )  # fmt: skip
        ax.set_title(" \n ", fontsize=10)

    @property
    def dynamic_artists(self) -> list[Artist]:
        """The artists :meth:`update` changes, in drawing order (spines kept on top)."""
        cells = [t for row in self.texts for t in row]
        return [
            self.image, *self.ax.spines.values(), self.masked_marks, self.leak_marks, *cells,
            self.ax.title, self.error_text,
        ]  # fmt: skip

    def update(
        self,
        weights: torch.Tensor | np.ndarray | None,
        keep: torch.Tensor | np.ndarray,
        title: str,
        error: str | None = None,
        *,
        error_width: int = 30,
    ) -> None:
        """Show one (L_q, L_k) matrix of weights (NaN allowed), or the refusal.

        Args:
            weights: (L_q, L_k) float, or None when the setting was refused.
            keep: (L_q, L_k) bool keep-mask (True = may attend).
            title: the axes title.
            error: the refusal's message, written in the axes when weights is None
                (PyTorch's own words when attn_lib quoted them); None or "" for none.
            error_width: characters per line of that text.

        Raises:
            ValueError: weights or keep of another shape.
        """
        self.ax.set_title(title, fontsize=10)
        refused = weights is None
        self.image.set_visible(not refused)
        self.error_text.set_visible(refused and bool(error))
        if refused:
            self.error_text.set_text(_refusal_text(error, error_width) if error else "")
            for row in self.texts:
                for text in row:
                    text.set_text("")
            for marks in (self.masked_marks, self.leak_marks):
                marks.set_offsets(np.empty((0, 2)))
            return
        w = _as_numpy_2d(weights, "weights").astype(float)
        if w.shape != self.shape:
            raise ValueError(f"weights have shape {w.shape}; this panel was drawn for {self.shape}.")
        k = _keep_array(keep, w.shape)
        nan = np.isnan(w)
        leak = ~k & ~nan & (np.abs(w) >= _VISIBLE_WEIGHT)
        masked = ~k & ~nan & ~leak
        rgba = self._cmap(np.clip(np.nan_to_num(w), 0.0, 1.0))  # (L_q, L_k, 4)
        rgba[masked] = MASKED_COLOR
        rgba[nan] = NAN_COLOR
        self.image.set_data(rgba)
        if self.annotate:
            self._write_cells(w, k, nan, leak)
            return
        yx_masked, yx_leak = np.argwhere(masked), np.argwhere(leak)
        self.masked_marks.set_offsets(yx_masked[:, ::-1])  # (x, y) = (key, query)
        self.leak_marks.set_offsets(yx_leak[:, ::-1])
        dark = w[leak] < _TEXT_DARK_BELOW
        self.leak_marks.set_color(np.where(dark[:, None], 1.0, 0.0).repeat(3, axis=1))

    def _write_cells(
        self, w: np.ndarray, k: np.ndarray, nan: np.ndarray, leak: np.ndarray
    ) -> None:
        for i, row in enumerate(self.texts):
            for j, text in enumerate(row):
                on_dark = not nan[i, j] and w[i, j] < _TEXT_DARK_BELOW
                if nan[i, j]:
                    text.set(text=_NAN_CELL_TEXT, color="white", fontsize=9)
                elif leak[i, j]:
                    text.set(text=f"{MASKED_MARK}\n{w[i, j]:.2f}", fontsize=8,
                             color="white" if on_dark else "black")  # fmt: skip
                elif not k[i, j]:
                    text.set(text=MASKED_MARK, color="0.25", fontsize=14)
                else:
                    text.set(text=f"{w[i, j]:.2f}", fontsize=10,
                             color="white" if on_dark else "black")  # fmt: skip


def _mask_weights_colorbar(fig: Figure, axes: list[Axes]) -> Colorbar:
    mappable = _mpl_cm.ScalarMappable(norm=_mpl_colors.Normalize(0.0, 1.0), cmap=ATTENTION_CMAP)
    return _weights_colorbar(fig, mappable, axes)


def _mask_panel_title(head: str, mass: float, nan_rows: int, refused: bool) -> str:
    if refused:
        return f"{head}\nno weights: refused"
    if nan_rows:
        return f"{head}\n{nan_rows} NaN row{'s' if nan_rows > 1 else ''}, masked mass {mass:.3f}"
    return f"{head}\nmasked mass {mass:.3f} per row"


class MaskSettingView:
    """The mask dashboard's figure: one heatmap per sequence of the batch, updatable.

    Each panel's title gives the sequence's length and the weight its query rows put
    on masked keys (the masked mass, averaged over its rows that are not NaN). A
    refused setting (e.g. -1e9 in float16) hides the weights and writes PyTorch's
    error in the figure instead.

    Args:
        fig: an empty figure (``new_figure`` for a dashboard, pyplot for a static cell).
        B: number of sequences (panels).
        L: padded length (L_q = L_k).
        annotate: write every cell's weight (a static figure) or only mark the masked
            cells (a dashboard: markers draw much faster than texts).

    Source: article section 4.1; STYLE.md of this series.
    """

    def __init__(self, fig: Figure, B: int, L: int, *, annotate: bool = False) -> None:
        self.fig = fig
        axes = fig.subplots(1, B, squeeze=False)[0]
        self.panels = [MaskPanel(ax, L, L, annotate=annotate) for ax in axes]
        for ax in axes[1:]:
            ax.set_ylabel("")
        _mask_weights_colorbar(fig, list(axes))
        self.legend = add_mask_nan_legend(fig)
        self.error_text = fig.text(
            0.46, 0.5, "", ha="center", va="center", fontsize=10, visible=False,
            bbox={"boxstyle": "round,pad=0.6", "facecolor": "white", "edgecolor": NAN_COLOR},
        )  # fmt: skip
        self.suptitle = fig.suptitle(" ")

    @property
    def dynamic_artists(self) -> list[Artist]:
        """The artists :meth:`update` changes, in drawing order."""
        artists = [a for p in self.panels for a in p.dynamic_artists]
        return [*artists, self.error_text, self.suptitle]

    def update(self, result: MaskSetting) -> None:
        """Show one setting: keep (B, L, L), weights (B, L, L) or None, error, mass."""
        refused = result.weights is None
        for b, panel in enumerate(self.panels):
            head = f"sequence {b} · length {result.lengths[b]}"
            title = _mask_panel_title(head, result.mass[b], result.nan_rows[b], refused)
            weights = None if refused else result.weights[b]
            panel.update(weights, result.keep[b], title, error="")
        if refused:
            wrapped = "\n".join(textwrap.wrap(result.error or "", width=84))
            self.error_text.set_text(f"PyTorch refused this setting:\n\n{wrapped}")
        self.error_text.set_visible(refused)
        self.suptitle.set_text(result.title)


@_closes_figures_on_error
def plot_mask_setting(
    result: MaskSetting,
    figsize: tuple[float, float] = (11.0, 4.6),
    *,
    annotate: bool = True,
) -> Figure:
    """A static pyplot rendering of one mask-dashboard setting (the dashboard's view).

    Args:
        result: e.g. :func:`nb07_masks.mask_setting`.
        figsize: inches.
        annotate: write every cell's weight (the dashboard itself only marks the cells).

    Returns:
        The pyplot figure (end the cell with ``plt.show()``).

    Source: article section 4.1; STYLE.md of this series.
    """
    B, L = result.keep.shape[0], result.keep.shape[-1]
    fig = plt.figure(figsize=figsize, layout="constrained")
    MaskSettingView(fig, B, L, annotate=annotate).update(result)
    return fig


@_closes_figures_on_error
def plot_mask_gallery(
    results: Sequence[MaskSetting],
    batch_index: int,
    labels: Sequence[str],
    *,
    suptitle: str | None = None,
    panel_size: float = 2.9,
) -> Figure:
    """One sequence of the batch under several settings, side by side on the same 0–1 scale.

    Args:
        results: settings (e.g. from :func:`nb07_masks.mask_setting`).
        batch_index: which sequence to show.
        labels: the first title line of each panel (the setting's name).
        suptitle: a title over all panels.
        panel_size: inches per panel.

    Returns:
        A pyplot figure; masked cells grey "×", leaks "×" on colour, NaN cells red, a
        refused setting shows PyTorch's error text in its panel.

    Raises:
        ValueError: no results, or labels of another length.

    Source: article section 4.1; STYLE.md of this series.
    """
    if not results or len(labels) != len(results):
        raise ValueError(f"give one label per result ({len(results)} results, {len(labels)} labels).")
    n, L = len(results), results[0].keep.shape[-1]
    fig, axes = plt.subplots(
        1, n, figsize=(panel_size * n + 1.0, panel_size + 1.4), layout="constrained", squeeze=False
    )
    for ax, result, label in zip(axes[0], results, labels, strict=True):
        panel = MaskPanel(ax, L, L)
        refused = result.weights is None
        title = _mask_panel_title(
            label, result.mass[batch_index], result.nan_rows[batch_index], refused
        )
        weights = None if refused else result.weights[batch_index]
        panel.update(weights, result.keep[batch_index], title, result.error, error_width=24)
        if ax is not axes[0][0]:
            ax.set_ylabel("")
    _mask_weights_colorbar(fig, list(axes[0]))
    add_mask_nan_legend(fig)
    if suptitle:
        fig.suptitle(suptitle)
    return fig


_FILL_OPTIONS = (
    ("attn_lib default (dtype-safe, zero rows)", "default"),
    ("-1e9 (the article)", "-1e9"),
    ("-inf", "-inf"),
    ("0 (does not mask)", "0"),
    ("torch.finfo(dtype).min", "finfo.min"),
)


class MaskDashboard(Dashboard):
    """Masks live: sequence lengths, causal on/off, padding side, fill value, dtype.

    A seeded batch of 3 sequences padded to L = 6 (d_k = 4) is run through
    ``attn_lib.scaled_dot_product_attention`` with the keep-mask built from the
    lengths (padding (B, 1, L), combined with an (L, L) causal mask by logical and)
    and the chosen fill: "default" is attn_lib's dtype-safe fill with zero rows where
    no key is allowed; any other fill behaves exactly like the article's masked_fill,
    so -inf turns such rows into NaN, -1e9 into uniform rows, 0 masks nothing, and
    -1e9 in float16 is refused by PyTorch, whose error text the figure then shows.
    One heatmap per sequence: masked cells grey "×", leaks "×" on colour, NaN cells
    red, and the weight left on masked keys in each title.

    Controls: ``length_0``, ``length_1``, ``length_2`` (1..6), ``causal`` (False /
    True), ``padding`` ("right" / "left"), ``fill`` (see
    :data:`nb07_masks.MASK_FILLS`), ``dtype`` ("float32", "float16",
    "bfloat16"). Every change calls :func:`nb07_masks.mask_setting`.

    Args:
        lengths: the initial lengths of the 3 sequences.
        causal, padding, fill, dtype: the initial setting.
        dpi: resolution of the PNG.

    Attributes:
        result: the MaskSetting currently shown.
        view: the MaskSettingView that draws it.

    Source: article sections 3.2 and 4.1.
    """

    plain_text = (
        "Dashboard: masked attention weights of a padded batch (lengths, causal mask, padding "
        "side, fill value, dtype). It needs a running Jupyter kernel; the static figures above "
        "show its settings."
    )

    def __init__(
        self,
        lengths: tuple[int, int, int] = (6, 4, 2),
        *,
        causal: bool = False,
        padding: str = "right",
        fill: str = "default",
        dtype: str = "float32",
        dpi: float = 80,
    ) -> None:
        style = {"description_width": "initial"}
        sliders = {
            f"length_{b}": widgets.IntSlider(
                value=n, min=1, max=MASK_DEMO_L, description=f"length of seq {b}", style=style
            )
            for b, n in enumerate(lengths)
        }
        controls = {
            **sliders,
            "causal": _toggle_buttons(
                [("off", False), ("on", True)], causal, "causal mask", "64px"
            ),
            "padding": _toggle_buttons(PADDING_SIDES, padding, "padding side", "64px"),
            "fill": widgets.Dropdown(
                options=list(_FILL_OPTIONS),
                value=fill,
                description="fill value",
                style=style,
                layout=widgets.Layout(width="380px"),  # the longest option shows in full
            ),
            "dtype": _toggle_buttons(MASK_DTYPES, dtype, "dtype", "80px"),
        }  # fmt: skip
        self.result: MaskSetting = mask_setting(
            lengths, causal=causal, padding_side=padding, fill=fill, dtype=dtype
        )
        figure = new_figure(figsize=(11.0, 4.6), dpi=dpi)
        self.view = MaskSettingView(figure, len(lengths), MASK_DEMO_L)
        self.view.update(self.result)
        freeze_layout(figure)  # tick labels never change: one layout pass is enough
        self._renderer = BlitRenderer(figure, self.view.dynamic_artists)
        super().__init__(controls, figure)
        self._wrap_controls()
        self.update()

    def render(self, **values: object) -> None:
        """Compute the setting with the pure function and show it."""
        lengths = tuple(int(values[f"length_{b}"]) for b in range(len(self.view.panels)))
        self.result = mask_setting(
            lengths,
            causal=bool(values["causal"]),
            padding_side=str(values["padding"]),
            fill=str(values["fill"]),
            dtype=str(values["dtype"]),
        )
        self.view.update(self.result)

    def to_png(self) -> bytes:
        """Redraw only the changing artists over a cached background."""
        return self._renderer.render()
