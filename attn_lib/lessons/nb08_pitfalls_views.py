"""Notebook 08's figures and dashboards (matplotlib, ipywidgets).

Used by notebook 08 (Pitfalls and numerics), sections "4 · A softmax that overflows, and the
max trick (4.3)", "5 · Dropout on the attention weights (4.3)". Its data and experiments come
from ``nb08_pitfalls``.
"""

from __future__ import annotations

from collections.abc import Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.patches import Patch, Rectangle

from ._dashboard import Dashboard, _toggle_buttons
from ._examples import ARTICLE_SEQ_LEN
from ._figures import (
    NAN_EDGE,
    NAN_FACE,
    BlitRenderer,
    _closes_figures_on_error,
    _row_sums_axis,
    _weights_colorbar,
    draw_attention_heatmap,
    freeze_layout,
    new_figure,
    update_attention_heatmap,
)
from .nb08_pitfalls import (
    DROPOUT_PLACEMENTS,
    OVERFLOW_DTYPES,
    OVERFLOW_OFFSETS,
    DropoutSetting,
    SoftmaxOverflow,
    dropout_setting,
    softmax_overflow,
)

DROPPED_EDGE = (0.85, 0.15, 0.15, 1.0)  # red dashed outline: a cell dropout touched
_DROPPED_LEGEND = (
    "red dashed outline = dropped: weight set to 0 (after softmax) or score set to 0 "
    "(before softmax)"
)
_SUM_OFF_COLOR = (0.80, 0.40, 0.10, 1.0)  # a row sum that is not 1
_SUM_ONE_COLOR = "0.55"
_DROPOUT_SUMS_MAX = 2.6  # 1/(1 - p) at the slider's largest p = 0.6 is 2.5
_NAIVE_COLOR = "0.62"
_STABLE_COLOR = (0.16, 0.45, 0.56, 1.0)  # a blue-teal from viridis' middle
_OVERFLOW_NAN_TEXT = (0.55, 0.0, 0.0, 1.0)


def _dropout_legend(fig: Figure) -> Legend:
    """The legend under a dropout figure: dropped cells and row sums that are not 1."""
    return fig.legend(
        handles=[
            Patch(fill=False, edgecolor=DROPPED_EDGE, linestyle="--", label=_DROPPED_LEGEND),
            Patch(facecolor=_SUM_OFF_COLOR, label="row sum ≠ 1"),
        ],
        loc="outside lower center", ncols=2, frameon=False, fontsize=9,
    )  # fmt: skip


class DropoutView:
    """Weights of one dropout setting (dropped cells outlined) and their row sums, updatable.

    The heatmap uses the series' colormap on 0–1 (a kept weight divided by 1 − p can
    exceed 1: its cell shows the top colour and its number). The row sums are
    horizontal bars on 0–2.6 with a dashed line at 1, orange when a sum is not 1.

    Args:
        fig: the figure (a plain Figure for a dashboard, a pyplot one for a cell).
        L: number of queries and keys.
        axes: (heatmap axes, row-sum axes) to draw into; None makes a 1 × 2 grid.
        legend: add the figure legend explaining the outlines.

    Source: article section 4.3; STYLE.md of this series.
    """

    def __init__(
        self,
        fig: Figure,
        L: int,
        *,
        axes: tuple[Axes, Axes] | None = None,
        legend: bool = True,
    ) -> None:

        self.fig = fig
        self.L = L
        own_figure = axes is None  # a whole figure: the setting's title goes on top
        if axes is None:
            axes = tuple(fig.subplots(1, 2, width_ratios=[1.35, 1.0]))
            engine = fig.get_layout_engine()
            if engine is not None and "wspace" in engine.get():
                # room between the colorbar's label and the row sums' y label
                engine.set(wspace=0.12)
        ax_w, ax_s = axes
        self.heatmap = draw_attention_heatmap(
            ax_w, np.zeros((L, L)), None, title="attention weights", mask_legend=False
        )
        self.outlines = [
            [
                ax_w.add_patch(
                    Rectangle(
                        (j - 0.44, i - 0.44), 0.88, 0.88, fill=False, edgecolor=DROPPED_EDGE,
                        linestyle="--", linewidth=2.2, visible=False,
                    )
                )
                for j in range(L)
            ]
            for i in range(L)
        ]  # fmt: skip
        self.bars, self.one_line, self.sum_texts = _row_sums_axis(
            ax_s, L, xmax=_DROPOUT_SUMS_MAX, xticks=[0.0, 0.5, 1.0, 1.5, 2.0, 2.5],
            text_x=0.04, text_color="black", bar_color=_SUM_ONE_COLOR,
        )  # fmt: skip
        self.ax_sums = ax_s
        self.legend = None
        if legend:
            self.legend = _dropout_legend(fig)
        self.suptitle = fig.suptitle("") if own_figure else None

    @property
    def dynamic_artists(self) -> list[Artist]:
        """The artists :meth:`update` changes, in drawing order."""
        cells = [t for row in self.heatmap.texts for t in row]
        outlines = [r for row in self.outlines for r in row]
        # The mask overlay stays fully transparent here (dropout is not a mask), so it can
        # stay in the cached background.
        artists = [
            self.heatmap.image, *self.heatmap.ax.spines.values(), *cells,
            *outlines, *self.bars.patches, self.one_line, *self.ax_sums.spines.values(),
            *self.sum_texts,
        ]  # fmt: skip
        return artists + ([self.suptitle] if self.suptitle is not None else [])

    def update(self, setting: DropoutSetting, title: str | None = None) -> None:
        """Show a setting: weights (L, L), dropped (L, L), row_sums (L,), key_labels, title."""
        update_attention_heatmap(self.heatmap, setting.weights, None, key_labels=setting.key_labels)
        dropped = setting.dropped.detach().cpu().numpy()
        for i, row in enumerate(self.outlines):
            for j, rect in enumerate(row):
                rect.set_visible(bool(dropped[i, j]))
        sums = setting.row_sums.detach().cpu().numpy()
        for bar, text, s in zip(self.bars.patches, self.sum_texts, sums, strict=True):
            bar.set_width(float(s))
            bar.set_facecolor(_SUM_OFF_COLOR if abs(float(s) - 1.0) > 1e-4 else _SUM_ONE_COLOR)
            text.set_text(f"{s:.4f}")
            text.set_x(float(s) + 0.04)  # just right of the bar's end
        if self.suptitle is not None:
            self.suptitle.set_text(setting.title if title is None else title)
        else:
            self.heatmap.ax.set_title(setting.title if title is None else title, fontsize=10)


@_closes_figures_on_error
def plot_dropout_setting(
    setting: DropoutSetting, figsize: tuple[float, float] = (8.4, 4.2)
) -> Figure:
    """A static pyplot rendering of one dropout setting, as the dashboard shows it.

    Args:
        setting: e.g. :func:`nb08_pitfalls.dropout_setting`.
        figsize: inches.

    Returns:
        The pyplot figure (end the cell with ``plt.show()``).

    Source: article section 4.3; STYLE.md of this series.
    """
    fig = plt.figure(figsize=figsize, layout="constrained")
    DropoutView(fig, setting.weights.shape[-1]).update(setting)
    return fig


@_closes_figures_on_error
def plot_dropout_gallery(
    settings: Sequence[DropoutSetting],
    *,
    titles: Sequence[str] | None = None,
    suptitle: str | None = None,
    panel_width: float = 3.4,
) -> Figure:
    """Several dropout settings side by side: heatmaps on top, their row sums below.

    Args:
        settings: e.g. a few :func:`nb08_pitfalls.dropout_setting` results.
        titles: one short title per column; default each setting's title.
        suptitle: a title over all panels.
        panel_width: width of one column in inches.

    Returns:
        A pyplot figure (end the cell with ``plt.show()``).

    Raises:
        ValueError: no settings, or titles of another length.

    Source: article section 4.3; STYLE.md of this series.
    """
    if not settings:
        raise ValueError("give at least one setting.")
    n = len(settings)
    titles = [s.title for s in settings] if titles is None else list(titles)
    if len(titles) != n:
        raise ValueError(f"titles has {len(titles)} entries for {n} settings.")
    fig, axes = plt.subplots(
        2, n, figsize=(panel_width * n + 0.6, 6.6), layout="constrained", squeeze=False,
        height_ratios=[1.25, 1.0],
    )  # fmt: skip
    views = []
    for col, setting in enumerate(settings):
        view = DropoutView(fig, setting.weights.shape[-1], axes=(axes[0][col], axes[1][col]),
                           legend=False)  # fmt: skip
        view.heatmap.colorbar.remove()
        view.update(setting, title=titles[col])
        views.append(view)
        if col:
            axes[0][col].set_ylabel("")
            axes[1][col].set_ylabel("")
    _weights_colorbar(fig, views[0].heatmap.image, list(axes[0]))
    _dropout_legend(fig)
    if suptitle:
        fig.suptitle(suptitle)
    return fig


class OverflowWeightsPanel:
    """Naive and stable softmax weights of one row side by side; NaN drawn as a hatched bar.

    Args:
        ax: the axes.
        n: number of keys.
        ylabel: y axis label, or None.

    Source: article section 4.3.
    """

    def __init__(self, ax: Axes, n: int, *, ylabel: str | None = "weight (0 to 1)") -> None:
        self.ax = ax
        x = np.arange(n)
        self.naive = ax.bar(x - 0.2, np.zeros(n), width=0.38, color=_NAIVE_COLOR, edgecolor="0.3",
                            label="naive: exp(x) / Σ exp(x)")  # fmt: skip
        self.stable = ax.bar(x + 0.2, np.zeros(n), width=0.38, color=_STABLE_COLOR,
                             edgecolor="0.3", label="max trick: exp(x − max) / Σ …")  # fmt: skip
        self.nan_texts = [
            ax.text(i - 0.2, 0.5, "", ha="center", va="center", rotation=90, fontsize=11,
                    fontweight="bold", color=_OVERFLOW_NAN_TEXT)
            for i in x
        ]  # fmt: skip
        self.note = ax.text(
            0.97, 0.95, "", transform=ax.transAxes, ha="right", va="top", fontsize=9,
            color=_OVERFLOW_NAN_TEXT, wrap=True,
        )  # fmt: skip
        ax.set_xticks(x, [f"key {i}" for i in x])
        ax.set_ylim(0.0, 1.08)
        ax.set_yticks([0.0, 0.25, 0.5, 0.75, 1.0])
        if ylabel:
            ax.set_ylabel(ylabel)
        self.title = ax.set_title("")

    @property
    def dynamic_artists(self) -> list[Artist]:
        """The artists :meth:`update` changes, in drawing order."""
        return [*self.naive.patches, *self.stable.patches, *self.nan_texts, self.note, self.title]

    def update(self, result: SoftmaxOverflow, title: str | None = None) -> None:
        """Show the naive and stable weights of ``result``."""
        naive = result.naive.detach().cpu().numpy()
        stable = result.stable.detach().cpu().numpy()
        for bar, text, w in zip(self.naive.patches, self.nan_texts, naive, strict=True):
            if np.isnan(w):
                bar.set_height(1.0)
                bar.set(facecolor=NAN_FACE, edgecolor=NAN_EDGE, hatch="//")
                text.set_text("NaN")
            else:
                bar.set_height(float(w))
                bar.set(facecolor=_NAIVE_COLOR, edgecolor="0.3", hatch=None)
                text.set_text("")
        for bar, w in zip(self.stable.patches, stable, strict=True):
            bar.set_height(float(w))
        notes = {
            "none": "",
            "sum overflow": "naive: Σ exp(x) = inf,\nso every weight is 0",
            "nan": "naive: exp(largest) = inf,\ninf / inf = NaN",
        }
        self.note.set_text(notes[result.failure])
        if title is None:
            title = f"{result.dtype}, largest score {result.largest:g}"
        self.title.set_text(title)


def _overflow_legend_handles() -> list[Patch]:
    return [
        Patch(facecolor=_NAIVE_COLOR, edgecolor="0.3", label="naive softmax: exp(x) / Σ exp(x)"),
        Patch(facecolor=_STABLE_COLOR, edgecolor="0.3", label="max trick: exp(x − max) / Σ"),
        Patch(facecolor=NAN_FACE, edgecolor=NAN_EDGE, hatch="//", label="NaN (inf / inf)"),
    ]


def overflow_title(result: SoftmaxOverflow) -> str:
    """A one-line verdict for a SoftmaxOverflow result, for figure titles.

    Source: article section 4.3.
    """
    head = f"{result.dtype}, largest score {result.largest:g}: exp({result.largest:g}) = "
    if result.failure == "nan":
        return head + f"inf (above {result.threshold:.2f}), so the naive softmax gives NaN"
    if result.failure == "sum overflow":
        return head + (
            f"{result.exp_largest:.3g}, but Σ exp overflows (above {result.sum_threshold:.2f}): "
            f"naive weights all 0"
        )
    return head + f"{result.exp_largest:.3g}: both softmaxes agree"


class SoftmaxOverflowView:
    """One row of scores with the overflow threshold, and its naive and stable softmax.

    Left: the scores as bars and a dashed red line at log(finfo(dtype).max), above
    which exp overflows. Right: :class:`OverflowWeightsPanel`.

    Args:
        fig: an empty figure.
        n: number of keys in the row.

    Source: article section 4.3.
    """

    def __init__(self, fig: Figure, n: int) -> None:
        self.fig = fig
        ax_s, ax_w = fig.subplots(1, 2, width_ratios=[1.0, 1.35])
        x = np.arange(n)
        self.score_bars = ax_s.bar(x, np.zeros(n), width=0.6, color="0.45")
        ax_s.axhline(0.0, color="black", linewidth=0.8)
        self.threshold_line = ax_s.axhline(1.0, color=NAN_EDGE, linestyle="--", linewidth=1.5)
        self.threshold_text = ax_s.text(
            0.97, 1.0, "", ha="right", va="bottom", color=_OVERFLOW_NAN_TEXT, fontsize=9,
            transform=ax_s.get_yaxis_transform(),  # x in axes fraction, y in score units
        )
        ax_s.set_xticks(x, [f"key {i}" for i in x])
        ax_s.set_ylabel("score x (a logit)")
        ax_s.set_title("one row of scores")
        self.ax_scores = ax_s
        self.zero_line = ax_s.lines[0]
        self.weights = OverflowWeightsPanel(ax_w, n)
        fig.legend(handles=_overflow_legend_handles(), loc="outside lower center", ncols=3,
                   frameon=False, fontsize=9)  # fmt: skip
        self.suptitle = fig.suptitle("", fontsize=11)

    @property
    def dynamic_artists(self) -> list[Artist]:
        """The artists :meth:`update` changes, in drawing order (the y limits aside)."""
        return [
            *self.score_bars.patches, self.zero_line, self.threshold_line, self.threshold_text,
            *self.ax_scores.spines.values(), *self.weights.dynamic_artists, self.suptitle,
        ]  # fmt: skip

    @staticmethod
    def score_top(result: SoftmaxOverflow) -> float:
        """Upper y limit of the scores panel: one of a few fixed levels (15, 30, 60, 120)."""
        need = 1.15 * max(float(result.scores.float().max()), result.threshold)
        return next((top for top in (15.0, 30.0, 60.0, 120.0) if need <= top), need)

    def update(self, result: SoftmaxOverflow) -> None:
        """Show one :class:`nb08_pitfalls.SoftmaxOverflow` result."""
        scores = result.scores.float().numpy()
        for bar, s in zip(self.score_bars.patches, scores, strict=True):
            bar.set_height(float(s))
        top = self.score_top(result)
        self.ax_scores.set_ylim(-(3.0 + 0.05 * top), top)  # the lowest score is ≥ -3
        self.threshold_line.set_ydata([result.threshold, result.threshold])
        self.threshold_text.set_y(result.threshold)
        self.threshold_text.set_text(f"exp overflows above {result.threshold:.2f}")
        self.weights.update(result, title="weights of this row")
        self.suptitle.set_text(overflow_title(result))


@_closes_figures_on_error
def plot_softmax_overflow(result: SoftmaxOverflow, figsize: tuple[float, float] = (9.0, 4.0)) -> Figure:
    """A static pyplot rendering of one overflow setting, as the dashboard shows it.

    Returns:
        The pyplot figure (end the cell with ``plt.show()``).

    Source: article section 4.3.
    """
    fig = plt.figure(figsize=figsize, layout="constrained")
    SoftmaxOverflowView(fig, result.scores.shape[-1]).update(result)
    return fig


@_closes_figures_on_error
def plot_softmax_overflow_gallery(
    results: Sequence[SoftmaxOverflow], *, suptitle: str | None = None, panel_width: float = 2.7
) -> Figure:
    """Naive against stable softmax for several (dtype, largest score) settings.

    Returns:
        A pyplot figure (end the cell with ``plt.show()``).

    Raises:
        ValueError: no results.

    Source: article section 4.3.
    """
    if not results:
        raise ValueError("give at least one result.")
    n = len(results)
    fig, axes = plt.subplots(1, n, figsize=(panel_width * n + 0.4, 3.5), layout="constrained",
                             squeeze=False)  # fmt: skip
    for i, (ax, result) in enumerate(zip(axes[0], results, strict=True)):
        panel = OverflowWeightsPanel(ax, result.scores.shape[-1], ylabel=None if i else
                                     "weight (0 to 1)")  # fmt: skip
        panel.update(result)
        ax.tick_params(axis="x", labelsize=8)
    fig.legend(handles=_overflow_legend_handles(), loc="outside lower center", ncols=3,
               frameon=False, fontsize=9)  # fmt: skip
    if suptitle:
        fig.suptitle(suptitle)
    return fig


class DropoutDashboard(Dashboard):
    """Dropout on the article's example: probability, placement, train/eval mode, live.

    Controls: ``p`` (0 … 0.6, step 0.05), ``placement`` ("after softmax", "before
    softmax", "none"), ``training`` (True for ``model.train()``, False for
    ``model.eval()``). Every change calls :func:`nb08_pitfalls.dropout_setting` and
    redraws the weights of sequence 0 (dropped cells outlined in red) beside their row
    sums (orange where a sum is not 1, a dashed line at 1).

    Args:
        p, placement, training: the initial setting.
        dpi: resolution of the PNG.

    Attributes:
        result: the DropoutSetting currently shown.
        view: the DropoutView that draws it.

    Source: article section 4.3; torch.nn.functional.dropout.
    """

    plain_text = (
        "Dashboard: dropout on the attention weights of the article's example (p, placement, "
        "train/eval). It needs a running Jupyter kernel; the static figures above show its "
        "settings."
    )

    def __init__(
        self,
        p: float = 0.2,
        placement: str = "after softmax",
        training: bool = True,
        *,
        dpi: float = 80,
    ) -> None:
        style = {"description_width": "initial"}
        controls = {
            "p": widgets.FloatSlider(
                value=p, min=0.0, max=0.6, step=0.05, readout_format=".2f",
                description="dropout p", style=style,
            ),
            "placement": _toggle_buttons(DROPOUT_PLACEMENTS, placement, "placement", "110px"),
            "training": _toggle_buttons(
                [("train()", True), ("eval()", False)], training, "mode", "70px"
            ),
        }  # fmt: skip
        self.result: DropoutSetting = dropout_setting(p, placement, training)
        figure = new_figure(figsize=(8.4, 4.2), dpi=dpi)
        self.view = DropoutView(figure, ARTICLE_SEQ_LEN)
        self.view.update(self.result)
        freeze_layout(figure)  # tick labels never change: one layout pass is enough
        self._renderer = BlitRenderer(figure, self.view.dynamic_artists)
        super().__init__(controls, figure)
        self._wrap_controls()
        self.update()

    def render(self, p: float, placement: str, training: bool) -> None:
        """Compute the setting with the pure function and show it."""
        self.result = dropout_setting(float(p), placement, bool(training))
        self.view.update(self.result)

    def to_png(self) -> bytes:
        """Redraw only the changing artists over a cached background."""
        return self._renderer.render()


class SoftmaxOverflowDashboard(Dashboard):
    """A naive softmax against the max trick as the scores grow, in float32 or float16.

    Controls: ``largest`` (the row's largest score, 0 … 100, step 0.25; the row is
    largest + :data:`nb08_pitfalls.OVERFLOW_OFFSETS`) and ``dtype`` ("float32",
    "float16"). Every change calls :func:`nb08_pitfalls.softmax_overflow` and
    redraws the scores with the overflow line at log(finfo(dtype).max), and the two
    softmaxes' weights side by side (NaN as a red hatched bar).

    Args:
        largest, dtype: the initial setting.
        dpi: resolution of the PNG.

    Attributes:
        result: the SoftmaxOverflow currently shown.
        view: the SoftmaxOverflowView that draws it.

    Source: article section 4.3 (the max trick).
    """

    plain_text = (
        "Dashboard: a naive softmax against the max trick as the scores grow (largest score, "
        "dtype). It needs a running Jupyter kernel; the static figures above show its settings."
    )

    def __init__(self, largest: float = 80.0, dtype: str = "float32", *, dpi: float = 80) -> None:
        controls = {
            "largest": widgets.FloatSlider(
                value=largest, min=0.0, max=100.0, step=0.25, readout_format=".2f",
                description="largest score", style={"description_width": "initial"},
                layout=widgets.Layout(width="420px"),
            ),
            "dtype": _toggle_buttons(OVERFLOW_DTYPES, dtype, "dtype", "80px"),
        }  # fmt: skip
        self.result: SoftmaxOverflow = softmax_overflow(largest, dtype)
        figure = new_figure(figsize=(9.0, 4.0), dpi=dpi)
        self.view = SoftmaxOverflowView(figure, len(OVERFLOW_OFFSETS))
        self.view.update(self.result)
        freeze_layout(figure)
        self._renderer = BlitRenderer(figure, self.view.dynamic_artists)
        super().__init__(controls, figure)
        self._wrap_controls()
        self.update()

    def render(self, largest: float, dtype: str) -> None:
        """Compute the setting with the pure function and show it."""
        self.result = softmax_overflow(float(largest), dtype)
        self.view.update(self.result)

    def to_png(self) -> bytes:
        """Redraw only the changing artists; the scores axis' y limits pick the background."""
        return self._renderer.render(background_key=self.view.ax_scores.get_ylim())
