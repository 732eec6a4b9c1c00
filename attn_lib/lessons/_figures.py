"""Figures shared by every notebook: the one attention colormap, the heatmap, dashboards' figures.

Conventions (STYLE.md): queries on the y axis, keys on the x axis, one colormap for attention
weights across the series (``ATTENTION_CMAP``) on a fixed 0–1 scale, masked cells grey with a
"×". ``draw_``/``update_`` functions work on axes they are given (a dashboard builds one
``Figure`` and updates its artists); ``plot_`` functions make a pyplot figure for a cell.

Used by every notebook with a heatmap or a dashboard (00–10); the NaN cell colours by notebooks
06 and 08; the colours of the softmax bars by notebooks 00 and 01.

Shape legend: L_q query length, L_k key length.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ParamSpec, Protocol, TypeVar

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib import colormaps, font_manager
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colorbar import Colorbar
from matplotlib.container import BarContainer
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.text import Text

from ._agg import BatchedDrawing, TextCachingCanvas, encode_png

_P = ParamSpec("_P")
_R = TypeVar("_R")

# Chinese characters in figures (我爱你, the article's sentences) come from few-KB subsets of
# Noto Sans CJK SC bundled beside this file (tools/build_cjk_font.py; licence in fonts/OFL.txt),
# registered once as a fallback family: text keeps the series' font, and only the glyphs that
# font lacks are drawn from the subset. No network, no font cache rebuild.
CJK_FAMILY = "AttnLib CJK"
CJK_FONTS = tuple(
    Path(__file__).with_name("fonts") / f"AttnLibCJK-{w}.otf" for w in ("Regular", "Bold")
)
for _path in CJK_FONTS:
    font_manager.fontManager.addfont(_path)
if CJK_FAMILY not in plt.rcParams["font.family"]:
    plt.rcParams["font.family"] = [*plt.rcParams["font.family"], CJK_FAMILY]


def _closes_figures_on_error(plot: Callable[_P, _R]) -> Callable[_P, _R]:
    """Decorate a ``plot_*`` function: if it raises, close the pyplot figures it opened.

    A pyplot figure is created before it is drawn; without this, a bad argument found while
    drawing (a step out of range, a wrong shape) would leave a half-drawn figure open, and
    the next ``plt.show()`` of the notebook would display it too.
    """

    @functools.wraps(plot)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        before = set(plt.get_fignums())
        try:
            return plot(*args, **kwargs)
        except BaseException:
            for number in set(plt.get_fignums()) - before:
                plt.close(number)
            raise

    return wrapper



# The one colormap for attention weights in the whole series: sequential, perceptually
# uniform, readable in greyscale and by most colour-blind readers.
ATTENTION_CMAP = "viridis"
MASKED_COLOR = (0.80, 0.80, 0.80, 1.0)  # light grey, not a colour viridis uses
MASKED_MARK = "×"
_MASK_LEGEND = f"grey {MASKED_MARK} = masked (blocked): its weight should be 0"
_VISIBLE_WEIGHT = 0.005  # a masked cell with at least this weight shows it: "× 0.25"
_TEXT_DARK_BELOW = 0.6
_CBAR_TICKS = [0.0, 0.25, 0.5, 0.75, 1.0]  # viridis is dark below ~0.6: write white numbers there


def _weights_colorbar(
    fig: Figure, mappable: object, ax: object, *, fraction: float = 0.02, pad: float = 0.02
) -> Colorbar:
    """The series' colorbar of attention weights (0 to 1) beside ``ax`` (one or several axes)."""
    cbar = fig.colorbar(mappable, ax=ax, fraction=fraction, pad=pad)
    cbar.set_label("attention weight (0 to 1)")
    cbar.set_ticks(_CBAR_TICKS)
    return cbar


def _to_numpy(t: torch.Tensor | np.ndarray) -> np.ndarray:
    return t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)


def _as_numpy_2d(t: torch.Tensor | np.ndarray, name: str) -> np.ndarray:
    a = _to_numpy(t)
    if a.ndim != 2:
        raise ValueError(
            f"{name} must be 2-D (L_q, L_k), got shape {a.shape}; pick one batch element, "
            f"e.g. weights[0]."
        )
    return a


def _keep_array(keep: torch.Tensor | np.ndarray | None, shape: tuple[int, ...]) -> np.ndarray:
    if keep is None:
        return np.ones(shape, dtype=bool)
    k = _as_numpy_2d(keep, "keep").astype(bool)
    if k.shape != shape:
        raise ValueError(f"keep has shape {k.shape} but the weights have shape {shape}.")
    return k


def _overlay_rgba(keep: np.ndarray) -> np.ndarray:
    """(L_q, L_k, 4): opaque grey where blocked, fully transparent where kept."""
    rgba = np.zeros((*keep.shape, 4))
    rgba[~keep] = MASKED_COLOR
    return rgba


def _labels(labels: Sequence[str] | None, n: int) -> list[str]:
    if labels is None:
        return [str(i) for i in range(n)]
    labels = [str(s) for s in labels]
    if len(labels) != n:
        raise ValueError(f"expected {n} labels, got {len(labels)}: {labels}.")
    return labels


@dataclass
class HeatmapArtists:
    """The artists of one attention heatmap, kept so that it can be updated in place.

    Attributes:
        ax: the axes.
        image: the weights, drawn with ATTENTION_CMAP on a 0–1 scale.
        overlay: grey RGBA layer over the masked cells (transparent elsewhere).
        texts: (L_q, L_k) cell labels: the weight with 2 decimals; "×" if masked
            (followed by the weight if a masked cell still carries one, a bug).
        colorbar: the 0–1 colorbar, or None.
        legend: the figure legend explaining "×", or None.
    """

    ax: Axes
    image: AxesImage
    overlay: AxesImage
    texts: list[list[Text]]
    colorbar: Colorbar | None
    legend: Legend | None


def add_mask_legend(fig: Figure) -> Legend:
    """Add one legend under the figure saying what a grey "×" cell means.

    Returns:
        The figure legend, placed outside the axes at the bottom (constrained layout
        makes room for it).

    Source: matplotlib ``Figure.legend`` with ``loc="outside lower center"``.
    """
    return fig.legend(
        handles=[Patch(facecolor=MASKED_COLOR, edgecolor="0.4", label=_MASK_LEGEND)],
        loc="outside lower center",
        frameon=False,
        fontsize=10,
        handlelength=1.5,
    )


def draw_attention_heatmap(
    ax: Axes,
    weights: torch.Tensor | np.ndarray,
    keep: torch.Tensor | np.ndarray | None = None,
    *,
    query_labels: Sequence[str] | None = None,
    key_labels: Sequence[str] | None = None,
    title: str = "attention weights",
    colorbar: bool = True,
    annotate: bool = True,
    mask_legend: bool | None = None,
) -> HeatmapArtists:
    """Draw one (L_q, L_k) matrix of attention weights as a labelled heatmap.

    Queries run down the y axis (row i = query i), keys along the x axis. The
    colour scale is fixed to 0–1 with :data:`ATTENTION_CMAP`, so heatmaps are
    comparable across figures. Cells where ``keep`` is False are painted grey
    and marked "×"; if such a cell still has a weight of 0.005 or more (a
    masking bug), the weight is written after the "×".

    Args:
        ax: axes to draw on.
        weights: (L_q, L_k), values in [0, 1] (one batch element).
        keep: (L_q, L_k) bool keep-mask (True = may attend), or None for no mask.
        query_labels, key_labels: tick labels, default "0", "1", ….
        title: axes title.
        colorbar: add a colorbar labelled "attention weight" with limits 0 and 1.
        annotate: write each weight (2 decimals) in its cell.
        mask_legend: add a figure legend under the axes explaining the "×" cells:
            None (default) when some cell is masked, True always, False never.

    Returns:
        HeatmapArtists, for :func:`update_attention_heatmap`.

    Raises:
        ValueError: weights or keep not 2-D, or shapes or label counts that differ.

    Source: STYLE.md of this series (queries on y, keys on x, one colormap, 0–1).
    """
    w = _as_numpy_2d(weights, "weights")
    k = _keep_array(keep, w.shape)
    L_q, L_k = w.shape
    image = ax.imshow(
        w, cmap=ATTENTION_CMAP, vmin=0.0, vmax=1.0, interpolation="nearest", aspect="auto"
    )
    overlay = ax.imshow(_overlay_rgba(k), interpolation="nearest", aspect="auto")
    ax.set_xticks(range(L_k), _labels(key_labels, L_k))
    ax.set_yticks(range(L_q), _labels(query_labels, L_q))
    ax.set_xlabel("key position j (attended to)")
    ax.set_ylabel("query position i (attending)")
    ax.set_title(title)
    ax.tick_params(length=0)
    texts = [
        [
            ax.text(j, i, "", ha="center", va="center", fontsize=10, visible=annotate)
            for j in range(L_k)
        ]
        for i in range(L_q)
    ]
    cbar = None
    if colorbar:
        cbar = _weights_colorbar(ax.figure, image, ax, fraction=0.046, pad=0.04)
    if mask_legend is None:
        mask_legend = not bool(k.all())
    legend = add_mask_legend(ax.figure) if mask_legend else None
    artists = HeatmapArtists(ax, image, overlay, texts, cbar, legend)
    _fill_cells(artists, w, k)
    return artists


def _fill_cells(artists: HeatmapArtists, w: np.ndarray, k: np.ndarray) -> None:
    for i, row in enumerate(artists.texts):
        for j, text in enumerate(row):
            if k[i, j]:
                text.set_text(f"{w[i, j]:.2f}")
                text.set_color("white" if w[i, j] < _TEXT_DARK_BELOW else "black")
                text.set_fontsize(10)
            elif abs(w[i, j]) < _VISIBLE_WEIGHT:
                text.set_text(MASKED_MARK)
                text.set_color("0.25")
                text.set_fontsize(14)
            else:
                # A blocked cell that still carries weight is a bug worth seeing.
                text.set_text(f"{MASKED_MARK} {w[i, j]:.2f}")
                text.set_color("black")
                text.set_fontsize(10)


def update_attention_heatmap(
    artists: HeatmapArtists,
    weights: torch.Tensor | np.ndarray,
    keep: torch.Tensor | np.ndarray | None = None,
    *,
    key_labels: Sequence[str] | None = None,
    title: str | None = None,
) -> None:
    """Redraw a heatmap made by :func:`draw_attention_heatmap` with new weights, in place.

    Only the artists' data change (image, overlay, cell texts, tick labels,
    title); no axes are cleared and nothing new is created, so a dashboard can
    call this on every control change.

    Args:
        artists: from draw_attention_heatmap.
        weights: (L_q, L_k), same shape as the first drawing.
        keep: (L_q, L_k) bool keep-mask or None.
        key_labels: new key tick labels, or None to keep them.
        title: new axes title, or None to keep it.

    Raises:
        ValueError: a shape different from the first drawing.

    Source: matplotlib ``AxesImage.set_data`` (update in place instead of redrawing axes).
    """
    w = _as_numpy_2d(weights, "weights")
    old = artists.image.get_array().shape
    if w.shape != tuple(old):
        raise ValueError(f"weights have shape {w.shape}; this heatmap was drawn for {old}.")
    k = _keep_array(keep, w.shape)
    artists.image.set_data(w)
    artists.overlay.set_data(_overlay_rgba(k))
    if key_labels is not None:
        artists.ax.set_xticks(range(w.shape[1]), _labels(key_labels, w.shape[1]))
    if title is not None:
        artists.ax.set_title(title)
    _fill_cells(artists, w, k)


@_closes_figures_on_error
def plot_attention(
    weights: torch.Tensor | np.ndarray,
    keep: torch.Tensor | np.ndarray | None = None,
    *,
    title: str = "attention weights",
    query_labels: Sequence[str] | None = None,
    key_labels: Sequence[str] | None = None,
    figsize: tuple[float, float] = (5.2, 4.3),
) -> Figure:
    """One labelled heatmap in a new pyplot figure (end the cell with ``plt.show()``).

    Args:
        weights: (L_q, L_k) attention weights of one batch element.
        keep: (L_q, L_k) bool keep-mask, or None.
        title, query_labels, key_labels: as :func:`draw_attention_heatmap`.
        figsize: inches.

    Returns:
        The figure (registered with pyplot).

    Raises:
        ValueError: as :func:`draw_attention_heatmap`.

    Source: STYLE.md of this series (heatmap conventions).
    """
    fig, ax = plt.subplots(figsize=figsize, layout="constrained")
    draw_attention_heatmap(
        ax, weights, keep, query_labels=query_labels, key_labels=key_labels, title=title
    )
    return fig


@_closes_figures_on_error
def plot_attention_gallery(
    panels: Sequence[tuple[torch.Tensor, torch.Tensor | None, str]],
    *,
    suptitle: str | None = None,
    key_labels: Sequence[Sequence[str] | None] | None = None,
    panel_size: float = 3.3,
) -> Figure:
    """Several heatmaps side by side on the same 0–1 scale, with one shared colorbar.

    Args:
        panels: (weights (L_q, L_k), keep (L_q, L_k) or None, title) per panel.
        suptitle: a title over all panels.
        key_labels: per panel, key tick labels or None.
        panel_size: width of one panel in inches.

    Returns:
        A pyplot figure with one heatmap per panel.

    Raises:
        ValueError: no panels, or key_labels of another length.

    Source: STYLE.md of this series (one colormap, 0–1, masked cells marked).
    """
    if not panels:
        raise ValueError("give at least one panel.")
    n = len(panels)
    key_labels = [None] * n if key_labels is None else list(key_labels)
    if len(key_labels) != n:
        raise ValueError(f"key_labels has {len(key_labels)} entries for {n} panels.")
    fig, axes = plt.subplots(
        1, n, figsize=(panel_size * n + 1.0, panel_size + 1.0), layout="constrained", squeeze=False
    )
    drawn = []
    for ax, (weights, keep, title), labels in zip(axes[0], panels, key_labels, strict=True):
        drawn.append(
            draw_attention_heatmap(
                ax,
                weights,
                keep,
                title=title,
                key_labels=labels,
                colorbar=False,
                mask_legend=False,
            )
        )
        if ax is not axes[0][0]:
            ax.set_ylabel("")
    _weights_colorbar(fig, drawn[0].image, list(axes[0]))
    if any(keep is not None and not bool(torch.as_tensor(keep).all()) for _, keep, _ in panels):
        add_mask_legend(fig)
    if suptitle:
        fig.suptitle(suptitle)
    return fig


class _SettingLike(Protocol):
    weights: torch.Tensor
    row_sums: torch.Tensor
    keep: torch.Tensor
    key_labels: tuple[str, ...]

    @property
    def title(self) -> str: ...


def _row_sums_axis(
    ax: Axes,
    L: int,
    *,
    xmax: float,
    xticks: Sequence[float],
    text_x: float,
    text_color: str,
    bar_color: str = "0.55",
) -> tuple[BarContainer, Line2D, list[Text]]:
    """A horizontal bar per query row (empty), a dashed line at 1 and an empty number per row.

    Returns:
        (bars, the line at 1, the row texts), for a view to update.
    """
    positions = np.arange(L)
    bars = ax.barh(positions, np.zeros(L), color=bar_color, height=0.6)
    one_line = ax.axvline(1.0, color="black", linestyle="--", linewidth=1)
    ax.set_xlim(0.0, xmax)
    ax.set_xticks(xticks)
    ax.set_ylim(L - 0.5, -0.5)  # row 0 at the top, as in the heatmap
    ax.set_yticks(positions, [str(i) for i in positions])
    ax.set_ylabel("query position i")
    ax.set_xlabel("sum of row i's weights (--- = 1)")
    ax.set_title("row sums")
    texts = [
        ax.text(text_x, i, "", ha="left", va="center", color=text_color, fontsize=10)
        for i in positions
    ]
    return bars, one_line, texts


class WeightsRowSumsView:
    """A heatmap of one setting's weights beside a bar chart of its row sums, updatable.

    Built once on a figure; :meth:`update` changes only the artists' data, so a
    dashboard can redraw the same figure for every control change.

    Args:
        fig: the figure to draw into (a plain ``matplotlib.figure.Figure`` for a
            dashboard, or a pyplot figure for a static cell); it must be empty.
        L: number of query and key positions (square weights, self-attention).
        mask_legend: show the legend explaining masked cells (a dashboard keeps it
            always, so that its layout does not jump between settings).

    Source: article section 3.3 (the row-sum check); STYLE.md of this series.
    """

    def __init__(self, fig: Figure, L: int, *, mask_legend: bool = True) -> None:
        self.fig = fig
        self.L = L
        ax_w, ax_s = fig.subplots(1, 2, width_ratios=[1.35, 1.0])
        fig.get_layout_engine().set(wspace=0.08)  # room between the colorbar label and the bars
        self.heatmap = draw_attention_heatmap(
            ax_w, np.zeros((L, L)), None, title="attention weights", mask_legend=mask_legend
        )
        self.bars, self.one_line, self.sum_texts = _row_sums_axis(
            ax_s, L, xmax=1.25, xticks=[0.0, 0.5, 1.0], text_x=0.02, text_color="white"
        )
        self.ax_sums = ax_s
        self.suptitle = fig.suptitle("")

    @property
    def dynamic_artists(self) -> list[Artist]:
        """The artists :meth:`update` changes (tick labels aside), in drawing order."""
        cells = [t for row in self.heatmap.texts for t in row]
        # Spines and the reference line are redrawn too, so that they stay on top of the
        # image and the bars exactly as in a full draw.
        return [
            self.heatmap.image, self.heatmap.overlay, *self.heatmap.ax.spines.values(), *cells,
            *self.bars.patches, self.one_line, *self.ax_sums.spines.values(), *self.sum_texts,
            self.suptitle,
        ]  # fmt: skip

    def update(self, result: _SettingLike) -> None:
        """Show one setting: weights (L, L), keep (L, L), row_sums (L,), key_labels, title."""
        update_attention_heatmap(
            self.heatmap, result.weights, result.keep, key_labels=result.key_labels
        )
        sums = result.row_sums.detach().cpu().numpy()
        for bar, text, s in zip(self.bars.patches, self.sum_texts, sums, strict=True):
            bar.set_width(float(s))
            text.set_text(f"{s:.4f}")
        self.suptitle.set_text(result.title)


def new_figure(figsize: tuple[float, float] = (8.4, 3.9), dpi: float = 80) -> Figure:
    """A figure that pyplot does not know about (no leak, no inline auto-display).

    Dashboards build one with this, lay it out once with :func:`freeze_layout`, then
    update its artists and render it with :func:`figure_to_png`.

    Args:
        figsize: inches.
        dpi: dots per inch, which sets the size of the PNG.

    Returns:
        A ``matplotlib.figure.Figure`` with constrained layout and an Agg canvas.

    Source: matplotlib docs, the web-application-server example (a Figure without pyplot).
    """
    fig = Figure(figsize=figsize, dpi=dpi, layout="constrained")
    TextCachingCanvas(fig)  # attaches itself as fig.canvas; an Agg canvas that caches text
    return fig


def freeze_layout(fig: Figure) -> None:
    """Run the figure's layout engine once, then keep the axes where they are.

    Constrained layout costs tens of milliseconds per draw; a dashboard whose
    labels keep their size between updates only needs it once.

    Source: matplotlib ``Figure.set_layout_engine``.
    """
    fig.draw_without_rendering()
    fig.set_layout_engine("none")


def figure_to_png(fig: Figure) -> bytes:
    """Render a figure at its own dpi to PNG bytes (they start with b"\\x89PNG").

    One Agg draw and a fast PNG encoding (:func:`_agg.encode_png`): this is what a
    dashboard pays per update.

    Returns:
        PNG bytes (RGB, width × height = figsize × dpi).

    Source: matplotlib ``FigureCanvasAgg.buffer_rgba``.
    """
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    canvas.draw()
    return encode_png(canvas)


class BlitRenderer:
    """Render a figure to PNG by redrawing only the artists that change.

    The artists named ``dynamic`` are marked animated, so a full draw leaves them
    out; that draw (the background: axes, ticks, labels, colorbar, legend) is
    rendered once per ``background_key`` and cached, and each later render pastes
    it back and draws only the dynamic artists on top. Text rendering dominates
    the cost of a small figure, and most of its text never changes.

    Use it only on a figure whose layout is frozen (:func:`freeze_layout`) and
    whose non-dynamic artists change only together with ``background_key``.

    Args:
        fig: a figure with an Agg canvas (see :func:`new_figure`).
        dynamic: the artists whose data change between renders, in drawing order.

    Source: matplotlib tutorial "Faster rendering by using blitting".
    """

    def __init__(self, fig: Figure, dynamic: Sequence[Artist]) -> None:
        self.fig = fig
        self.dynamic = list(dynamic)
        for artist in self.dynamic:
            artist.set_animated(True)
        self._drawing = BatchedDrawing(fig, self.dynamic)  # bars in runs, as one collection
        self._backgrounds: dict[object, object] = {}

    def _paste_background(self, background_key: object) -> FigureCanvasAgg:
        """Paste the cached static part under ``background_key`` (drawn on first use)."""
        canvas = self.fig.canvas
        if background_key in self._backgrounds:
            canvas.restore_region(self._backgrounds[background_key])
        else:
            canvas.draw()  # animated (dynamic) artists are skipped
            self._backgrounds[background_key] = canvas.copy_from_bbox(self.fig.bbox)
        return canvas

    def render(self, background_key: object = None) -> bytes:
        """PNG bytes of the figure as it is now; ``background_key`` names its static part."""
        canvas = self._paste_background(background_key)
        self._drawing.draw()
        return encode_png(canvas)


NAN_FACE = (1.0, 0.86, 0.86, 1.0)  # pale red under a red hatch: a NaN weight
NAN_EDGE = (0.85, 0.25, 0.25, 1.0)


_WEIGHT_COLORS = colormaps[ATTENTION_CMAP]  # bars of attention weights share the heatmaps' colours


def _weight_color(w: float) -> tuple[float, float, float, float]:
    """The colour a weight w ∈ [0, 1] gets in every heatmap of the series."""
    return _WEIGHT_COLORS(min(max(float(w), 0.0), 1.0))
