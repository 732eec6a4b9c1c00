"""Figures shared by every notebook: the one attention colormap, the heatmap, dashboards' figures.

Queries on the y axis, keys on the x axis, ``ATTENTION_CMAP`` on a fixed 0–1 scale, masked cells
grey with a "×". ``draw_``/``update_`` work on given axes (a dashboard updates one
``Figure``); ``plot_`` make a pyplot figure for a cell. Used by every notebook with a heatmap or
a dashboard (00–10); the NaN colours by 06 and 08; the weight colours of bars by 00 and 01.
"""

from __future__ import annotations

import base64
import contextlib
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ParamSpec, TypeVar

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib import colormaps, font_manager
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colorbar import Colorbar
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.legend import Legend
from matplotlib.patches import Patch
from matplotlib.text import Text

from ._agg import BatchedDrawing, TextCachingCanvas, encode_png

_P = ParamSpec("_P")
_R = TypeVar("_R")

# Chinese characters in figures (我爱你, the article's sentences) come from few-KB subsets of
# Noto Sans CJK SC bundled beside this file (tools/build_cjk_font.py; licence in fonts/OFL.txt),
# registered once as the last fallback family: text keeps the series' font, and only the glyphs
# that font lacks are drawn from a CJK font. A full CJK font of the system, when there is one,
# comes before the subset, so that a learner's own sentences draw too.
CJK_FAMILY = "AttnLib CJK"
CJK_FONTS = tuple(
    Path(__file__).with_name("fonts") / f"AttnLibCJK-{w}.otf" for w in ("Regular", "Bold")
)
SYSTEM_CJK_FAMILIES = (  # Linux, macOS, Windows
    "Noto Sans CJK SC", "Noto Sans SC", "Source Han Sans SC", "WenQuanYi Micro Hei",
    "WenQuanYi Zen Hei", "Droid Sans Fallback", "PingFang SC", "Hiragino Sans GB", "Heiti SC",
    "Microsoft YaHei", "SimHei", "DengXian",
)  # fmt: skip


def cjk_fallbacks(installed: set[str]) -> list[str]:
    """The CJK fallback families, in order: the first full system font found, then the subset."""
    system = [family for family in SYSTEM_CJK_FAMILIES if family in installed]
    return [*system[:1], CJK_FAMILY]


for _path in CJK_FONTS:
    font_manager.fontManager.addfont(_path)
if CJK_FAMILY not in plt.rcParams["font.family"]:
    _installed = {font.name for font in font_manager.fontManager.ttflist}
    plt.rcParams["font.family"] = [*plt.rcParams["font.family"], *cjk_fallbacks(_installed)]


def _closes_figures_on_error(plot: Callable[_P, _R]) -> Callable[_P, _R]:
    """Decorate a ``plot_*`` function: if it raises, close the pyplot figures it opened (else
    the notebook's next ``plt.show()`` would display a half-drawn figure)."""

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
# A static figure at most this wide (inches; 100 dpi inline, tight bbox) fits JupyterLab's
# notebook column (~848 px at 1280×800 with the file browser open) without being scaled down.
MAX_FIGURE_WIDTH = 8.2


class LessonFigure(Figure):
    """A pyplot figure made by a lesson (``figure``, ``subplots``). A notebook shows it as a PNG
    drawn once, at its own dpi, with the dashboards' text cache (:func:`_inline_png`); the
    inline backend's default draws a figure three times (layout, tight crop, picture)."""


def figure(**kwargs: object) -> LessonFigure:
    """``plt.figure`` making a :class:`LessonFigure`."""
    return plt.figure(FigureClass=LessonFigure, **kwargs)


def subplots(*args: object, **kwargs: object) -> tuple[LessonFigure, object]:
    """``plt.subplots`` on a :class:`LessonFigure`."""
    return plt.subplots(*args, FigureClass=LessonFigure, **kwargs)


def _inline_png(fig: Figure) -> object:
    """IPython's image/png output for a LessonFigure.

    Where the inline backend would show the figure as its default PNG (``print_figure`` with
    the tight crop, no other setting) and the figure is opaque: one draw of the whole figure at
    its size, base64 as the inline backend writes it. Its layout keeps everything inside, so
    the tight crop would cut nothing; where it would reach past an edge, or touch one, the
    tight crop after all. Any other inline setting (retina, SVG only, a dpi) is IPython's own.
    """
    from IPython import get_ipython
    from IPython.core.pylabtools import print_figure

    shell = get_ipython()
    try:
        printer = shell.display_formatter.formatters["image/png"].lookup_by_type(Figure)
    except (AttributeError, KeyError):  # no shell, or PNG not among the chosen formats
        return None
    default = {"fmt": "png", "base64": True, "bbox_inches": "tight"}
    plain = getattr(printer, "func", None) is print_figure and printer.keywords == default
    if not plain or not _opaque(fig):
        return printer(fig)
    canvas = fig.canvas
    try:
        drawn = canvas if isinstance(canvas, TextCachingCanvas) else TextCachingCanvas(fig)
        drawn.draw()
        png = encode_png(drawn) if _all_inside(drawn) else None
    finally:
        fig.set_canvas(canvas)
    if png is None:  # the tight crop shows what reaches past the edge (or pads what touches it)
        return printer(fig)
    return base64.b64encode(png).decode("ascii")


def _opaque(fig: Figure) -> bool:
    """Whether the figure's PNG has no transparent background (as the inline backend saves it)."""
    return (
        fig.patch.get_visible()
        and fig.get_facecolor()[3] == 1.0
        and not plt.rcParams["savefig.transparent"]
    )


def _all_inside(canvas: FigureCanvasAgg) -> bool:
    """Whether a drawn figure keeps all it shows inside its edges: its tight bounding box (what
    the tight crop would keep) lies within the figure, and its outermost pixels are background."""
    fig = canvas.figure
    tight = fig.get_tightbbox(canvas.get_renderer())
    width, height = fig.get_size_inches()
    if tight.x0 < 0 or tight.y0 < 0 or tight.x1 > width or tight.y1 > height:
        return False
    background = np.round(np.asarray(fig.get_facecolor()[:3]) * 255)
    return not ink_on_edge(np.asarray(canvas.buffer_rgba())[..., :3], background)


def ink_on_edge(pixels: np.ndarray, background: np.ndarray) -> bool:
    """Whether an RGB image (H, W, 3), 0-255, has anything but ``background`` on its outermost
    pixels (a label running into the edge, maybe cut there)."""
    pixels = pixels.astype(np.int16)
    edges = np.concatenate([pixels[0], pixels[-1], pixels[:, 0], pixels[:, -1]])
    return bool((np.abs(edges - background).sum(axis=-1) > 24).any())


def _register_inline_png() -> None:
    """Show LessonFigures through :func:`_inline_png` in IPython; elsewhere, nothing."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None and hasattr(shell, "display_formatter"):
        shell.display_formatter.formatters["image/png"].for_type(LessonFigure, _inline_png)


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
    k = np.ones(shape, dtype=bool) if keep is None else _as_numpy_2d(keep, "keep").astype(bool)
    if k.shape != shape:
        raise ValueError(f"keep has shape {k.shape} but the weights have shape {shape}.")
    return k


def _overlay_rgba(keep: np.ndarray) -> np.ndarray:
    """(L_q, L_k, 4): opaque grey where blocked, fully transparent where kept."""
    rgba = np.zeros((*keep.shape, 4))
    rgba[~keep] = MASKED_COLOR
    return rgba


def _labels(labels: Sequence[str] | None, n: int) -> list[str]:
    labels = [str(s) for s in (range(n) if labels is None else labels)]
    if len(labels) != n:
        raise ValueError(f"expected {n} labels, got {len(labels)}: {labels}.")
    return labels


@dataclass
class HeatmapArtists:
    """The artists of one attention heatmap, kept to update it in place: the image, a grey
    RGBA overlay on the masked cells, the (L_q, L_k) cell texts, the colorbar and legend or None."""

    ax: Axes
    image: AxesImage
    overlay: AxesImage
    texts: list[list[Text]]
    colorbar: Colorbar | None
    legend: Legend | None


def add_mask_legend(fig: Figure) -> Legend:
    """Add one legend under the figure (outside the axes) saying what a grey "×" cell means."""
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

    Cells where ``keep`` is False are grey and marked "×", followed by the weight if it is
    0.005 or more (a masking bug).

    Args:
        weights: (L_q, L_k) in [0, 1], one batch element. keep: (L_q, L_k) bool or None.
        query_labels, key_labels: tick labels, default "0", "1", ….
        annotate: write each weight (2 decimals) in its cell.
        mask_legend: a legend explaining "×": None (default) when a cell is masked.

    Raises:
        ValueError: weights or keep not 2-D, or shapes or label counts that differ.
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
    """Show new (L_q, L_k) weights (the first drawing's shape) and keep-mask in a heatmap of
    :func:`draw_attention_heatmap`, in place; key_labels and title are kept if None."""
    w = _to_numpy(weights)
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
    """:func:`draw_attention_heatmap` of weights (L_q, L_k) in a new pyplot figure."""
    fig, ax = subplots(figsize=figsize, layout="constrained")
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
    ncols: int | None = None,
) -> Figure:
    """Heatmaps in rows on one 0–1 scale and colorbar: panels are (weights (L_q, L_k), keep or
    None, title); key_labels, per panel, tick labels or None; panel_size in inches; ncols panels
    a row, by default as many as fit in ``MAX_FIGURE_WIDTH`` inches (the notebook column)."""
    n = len(panels)
    key_labels = [None] * n if key_labels is None else key_labels
    if ncols is None:
        ncols = max(1, min(n, int((MAX_FIGURE_WIDTH - 1.0) // panel_size)))
    nrows = -(-n // ncols)
    fig, axes = subplots(
        nrows,
        ncols,
        figsize=(panel_size * ncols + 1.0, (panel_size + 0.5) * nrows + 0.5),
        layout="constrained",
        squeeze=False,
    )
    flat = list(axes.flat)
    drawn = []
    for index, ((weights, keep, title), labels) in enumerate(zip(panels, key_labels, strict=True)):
        ax = flat[index]
        drawn.append(
            draw_attention_heatmap(
                ax, weights, keep, title=title, key_labels=labels, colorbar=False,
                mask_legend=False,
            )
        )  # fmt: skip
        if index % ncols:
            ax.set_ylabel("")
        if index + ncols < n:  # a panel below carries the x label
            ax.set_xlabel("")
    for ax in flat[n:]:
        ax.set_visible(False)
    _weights_colorbar(fig, drawn[0].image, flat, fraction=0.03)
    if any(keep is not None and not bool(torch.as_tensor(keep).all()) for _, keep, _ in panels):
        add_mask_legend(fig)
    if suptitle:
        fig.suptitle(suptitle)
    return fig


def new_figure(figsize: tuple[float, float] = (8.4, 3.9), dpi: float = 80) -> Figure:
    """A constrained-layout figure that pyplot does not know about (no leak, no inline
    display), on a text-caching Agg canvas; ``dpi`` sets the size of the PNG."""
    fig = Figure(figsize=figsize, dpi=dpi, layout="constrained")
    TextCachingCanvas(fig)  # attaches itself as fig.canvas; an Agg canvas that caches text
    return fig


def freeze_layout(fig: Figure) -> None:
    """Run the layout engine once, then keep the axes where they are (constrained layout costs
    tens of ms a draw; a dashboard whose labels keep their size needs it once). The layout
    alone: a draw without rendering would also walk every artist, for the same positions."""
    engine = fig.get_layout_engine()
    if engine is not None and fig.axes:  # as Figure.draw runs it, ValueError ignored
        with contextlib.suppress(ValueError):
            engine.execute(fig)
    fig.set_layout_engine("none")


def figure_to_png(fig: Figure) -> bytes:
    """Render a figure at its own dpi to RGB PNG bytes: one Agg draw and a fast encoding."""
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    canvas.draw()
    return encode_png(canvas)


class BlitRenderer:
    """Render a figure to PNG by redrawing only the ``dynamic`` artists (in drawing order).

    They are marked animated, so a full draw (the background) leaves them out; it is cached
    per ``background_key``. For a figure whose layout is frozen and whose other artists change
    only with ``background_key``: matplotlib's blitting, to PNG bytes.
    """

    def __init__(self, fig: Figure, dynamic: Sequence[Artist]) -> None:
        self.fig = fig
        self.dynamic = list(dynamic)
        for artist in self.dynamic:
            artist.set_animated(True)
        self._drawing = BatchedDrawing(fig, self.dynamic)  # bars in runs, as one collection
        self._backgrounds: dict[object, object] = {}

    def render(self, background_key: object = None) -> bytes:
        """PNG bytes of the figure as it is now; ``background_key`` names its static part."""
        canvas = self.fig.canvas
        if background_key in self._backgrounds:
            canvas.restore_region(self._backgrounds[background_key])
        else:
            canvas.draw()  # animated (dynamic) artists are skipped
            self._backgrounds[background_key] = canvas.copy_from_bbox(self.fig.bbox)
        self._drawing.draw()
        return encode_png(canvas)


NAN_FACE = (1.0, 0.86, 0.86, 1.0)  # pale red under a red hatch: a NaN weight
NAN_EDGE = (0.85, 0.25, 0.25, 1.0)
_WEIGHT_COLORS = colormaps[ATTENTION_CMAP]  # bars of attention weights share the heatmaps' colours


def _weight_color(w: float) -> tuple[float, float, float, float]:
    """The colour a weight w ∈ [0, 1] gets in every heatmap of the series."""
    return _WEIGHT_COLORS(min(max(float(w), 0.0), 1.0))


_register_inline_png()
