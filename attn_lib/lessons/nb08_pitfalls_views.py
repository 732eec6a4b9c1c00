"""Notebook 08's figures and dashboards (matplotlib, ipywidgets).

Used by notebook 08 (Pitfalls and numerics): "3 · A softmax that overflows, and the max trick"
and "4 · Dropout on the attention weights", each a static gallery, then live. Their numbers
come from ``nb08_pitfalls``.
"""

from __future__ import annotations

from collections.abc import Sequence

import ipywidgets as widgets
import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure, SubFigure
from matplotlib.patches import Patch, Rectangle

from . import nb08_pitfalls as lesson
from ._dashboard import Dashboard, _toggle_buttons
from ._figures import (
    NAN_EDGE,
    NAN_FACE,
    BlitRenderer,
    draw_attention_heatmap,
    figure,
    freeze_layout,
    new_figure,
    subplots,
    update_attention_heatmap,
)

_NAIVE_COLOR = "0.62"
_STABLE_COLOR = (0.16, 0.45, 0.56, 1.0)  # a blue-teal from viridis' middle
_DROPPED_EDGE = (0.85, 0.15, 0.15, 1.0)  # red dashed outline: a cell dropout touched
_SUM_OFF_COLOR = (0.80, 0.40, 0.10, 1.0)  # orange: a row sum that is not 1
_SUMS_MAX = 2.2  # 1/(1 − p) at the slider's largest p = 0.5 is 2


class OverflowPanel:
    """One row's naive and max-trick weights side by side; a NaN weight as a hatched red bar."""

    def __init__(self, ax: Axes) -> None:
        x = np.arange(len(lesson.OVERFLOW_OFFSETS))
        self.ax = ax
        self.naive = ax.bar(x - 0.2, np.zeros(len(x)), 0.38, color=_NAIVE_COLOR, edgecolor="0.3")
        self.stable = ax.bar(x + 0.2, np.zeros(len(x)), 0.38, color=_STABLE_COLOR, edgecolor="0.3")
        box = {"facecolor": "white", "edgecolor": "none", "pad": 1}
        self.nan_texts = [
            ax.text(i - 0.2, 0.5, "", ha="center", va="center", rotation=90, bbox=box) for i in x
        ]
        ax.set_xticks(x, ["max" if o == 0 else f"max{o:g}" for o in lesson.OVERFLOW_OFFSETS])
        ax.set_xlabel("key, by its score")
        ax.set_ylim(0.0, 1.08)
        ax.set_ylabel("weight (0 to 1)")

    def update(self, result: lesson.SoftmaxOverflow) -> None:
        """Show the naive and the max-trick weights of ``result``, its verdict as the title."""
        for bar, text, w in zip(self.naive, self.nan_texts, result.naive.tolist(), strict=True):
            nan = bool(np.isnan(w))
            bar.set_height(1.0 if nan else w)
            bar.set(facecolor=NAN_FACE if nan else _NAIVE_COLOR, hatch="//" if nan else None,
                    edgecolor=NAN_EDGE if nan else "0.3")  # fmt: skip
            text.set_text("NaN" if nan else "")
        for bar, w in zip(self.stable, result.stable.tolist(), strict=True):
            bar.set_height(w)
        self.ax.set_title(result.title.replace(": ", ":\n", 1), fontsize=10)

    @property
    def dynamic_artists(self) -> list[Artist]:
        """What :meth:`update` changes, in drawing order (the spines stay over the bars)."""
        return [*self.naive.patches, *self.stable.patches, *self.ax.spines.values(),
                *self.nan_texts, self.ax.title]  # fmt: skip


def _overflow_legend(fig: Figure) -> None:
    handles = [
        Patch(facecolor=_NAIVE_COLOR, edgecolor="0.3", label="naive: exp(x) / Σ exp(x)"),
        Patch(facecolor=_STABLE_COLOR, edgecolor="0.3", label="max trick: exp(x − max) / Σ"),
        Patch(facecolor=NAN_FACE, edgecolor=NAN_EDGE, hatch="//", label="NaN"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=3, frameon=False, fontsize=9)


def plot_overflow_gallery(results: Sequence[lesson.SoftmaxOverflow], suptitle: str) -> Figure:
    """Naive softmax against the max trick for several settings, two a row (pyplot)."""
    rows, cols = -(-len(results) // 2), min(len(results), 2)  # two 4.1 in panels: ≤ 840 px
    fig, axes = subplots(rows, cols, figsize=(4.1 * cols, 2.9 * rows + 0.7),
                             layout="constrained", sharey=True, squeeze=False)  # fmt: skip
    for ax in axes.flat[len(results) :]:
        ax.set_visible(False)
    for ax, result in zip(axes.flat, results, strict=False):
        OverflowPanel(ax).update(result)
        ax.label_outer()  # the y label once, on the left
    _overflow_legend(fig)
    fig.suptitle(suptitle)
    return fig


class DropoutView:
    """The weights of one dropout setting (dropped cells outlined) beside their row sums."""

    def __init__(self, fig: Figure | SubFigure, L: int = 4) -> None:
        ax_w, ax_s = fig.subplots(1, 2, width_ratios=[1.35, 1.0])
        fig.get_layout_engine().set(wspace=0.08)  # room between the colorbar label and the bars
        self.heatmap = draw_attention_heatmap(
            ax_w, np.zeros((L, L)), title="weights (red dashed = dropped)", mask_legend=False
        )
        rows = np.arange(L)
        self.bars = ax_s.barh(rows, np.zeros(L), color="0.55", height=0.6)
        self.one_line = ax_s.axvline(1.0, color="black", linestyle="--", linewidth=1)
        ax_s.set(xlim=(0.0, _SUMS_MAX), ylim=(L - 0.5, -0.5), title="row sums",  # row 0 on top
                 xlabel="sum of row i's weights (--- = 1)", ylabel="query position i")  # fmt: skip
        ax_s.set_xticks([0.0, 0.5, 1.0, 1.5, 2.0])
        ax_s.set_yticks(rows, [str(i) for i in rows])
        self.sum_texts = [ax_s.text(0.02, i, "", va="center", fontsize=10) for i in rows]
        self.ax_sums, self.suptitle = ax_s, fig.suptitle("")
        style = {"fill": False, "edgecolor": _DROPPED_EDGE, "linestyle": "--", "linewidth": 2.2}
        self.outlines = [  # row by row, as setting.dropped.flatten()
            ax_w.add_patch(Rectangle((j - 0.44, i - 0.44), 0.88, 0.88, **style))
            for i in range(L)
            for j in range(L)
        ]

    @property
    def dynamic_artists(self) -> list[Artist]:
        """What :meth:`update` changes, in a full draw's order: the outlines over the weights
        and under the numbers, the spines and the line at 1 over the image and the bars."""
        h, cells = self.heatmap, [t for row in self.heatmap.texts for t in row]
        return [h.image, h.overlay, *self.outlines, *h.ax.spines.values(), *cells,
                *self.bars.patches, self.one_line, *self.ax_sums.spines.values(),
                *self.sum_texts, self.suptitle]  # fmt: skip

    def update(self, setting: lesson.DropoutSetting) -> None:
        """Show a setting: weights and dropped (L, L), row_sums (L,), title."""
        update_attention_heatmap(self.heatmap, setting.weights)
        for rect, dropped in zip(self.outlines, setting.dropped.flatten().tolist(), strict=True):
            rect.set_visible(dropped)
        for bar, text, s in zip(self.bars, self.sum_texts, setting.row_sums.tolist(), strict=True):
            bar.set_width(s)
            bar.set_color(_SUM_OFF_COLOR if abs(s - 1.0) > 1e-4 else "0.55")
            text.set_text(f"{s:.4f}")
            text.set_x(s + 0.04)  # just right of the bar's end
        self.suptitle.set_text(setting.title)


def plot_dropout_gallery(settings: Sequence[lesson.DropoutSetting]) -> Figure:
    """Several dropout settings, one above the other (pyplot)."""
    fig = figure(figsize=(8.2, 3.5 * len(settings)), layout="constrained")  # ≤ 840 px
    for subfig, setting in zip(fig.subfigures(len(settings), 1), settings, strict=True):
        DropoutView(subfig).update(setting)
    return fig


class SoftmaxOverflowDashboard(Dashboard):
    """A naive softmax against the max trick as one row's scores grow; ``result`` is shown."""

    plain_text = (
        "Dashboard: a naive softmax against the max trick as the scores grow (largest score, "
        "dtype). It needs a running Jupyter kernel; the static figure above shows its settings."
    )

    def __init__(self, largest: float = 80.0, dtype: str = "float32", *, dpi: float = 80) -> None:
        controls = {
            "largest": widgets.FloatSlider(
                value=largest, min=0.0, max=100.0, step=0.25, description="largest score",
                style={"description_width": "initial"}, layout=widgets.Layout(width="420px"),
            ),
            "dtype": _toggle_buttons(lesson.OVERFLOW_DTYPES, dtype, "dtype", "80px"),
        }  # fmt: skip
        figure = new_figure(figsize=(6.0, 3.9), dpi=dpi)
        self.panel = OverflowPanel(figure.subplots())
        _overflow_legend(figure)
        self.panel.update(lesson.softmax_overflow(largest, dtype))
        freeze_layout(figure)  # the two-line title keeps its size: one layout pass is enough
        self._renderer = BlitRenderer(figure, self.panel.dynamic_artists)  # axes drawn once
        super().__init__(controls, figure)
        self.update()

    def render(self, largest: float, dtype: str) -> None:
        """Compute the setting and show it."""
        self.result = lesson.softmax_overflow(largest, dtype)
        self.panel.update(self.result)

    def to_png(self) -> bytes:
        """Redraw only the bars, the NaN labels and the title over the cached axes."""
        return self._renderer.render()


class DropoutDashboard(Dashboard):
    """Dropout on sequence 0 of the article's example (p, placement, mode); ``result`` is shown."""

    plain_text = (
        "Dashboard: dropout on the article's example (p, placement, train/eval). It needs a "
        "running Jupyter kernel; the static figure above shows its settings."
    )

    def __init__(
        self, p: float = 0.3, placement: str = "after softmax", training: bool = True, *,
        dpi: float = 80,
    ) -> None:  # fmt: skip
        controls = {
            "p": widgets.FloatSlider(value=p, min=0.0, max=0.5, step=0.05, description="dropout p"),
            "placement": _toggle_buttons(lesson.DROPOUT_PLACEMENTS, placement, "placement"),
            "training": _toggle_buttons([("train()", True), ("eval()", False)], training, "mode"),
        }
        figure = new_figure(figsize=(8.4, 3.9), dpi=dpi)
        self.view = DropoutView(figure)
        self.view.update(lesson.dropout_setting(p, placement, training))
        freeze_layout(figure)  # the labels keep their size: one layout pass is enough
        self._renderer = BlitRenderer(figure, self.view.dynamic_artists)  # axes drawn once
        super().__init__(controls, figure)
        self.update()

    def render(self, p: float, placement: str, training: bool) -> None:
        """Compute the setting and show it."""
        self.result = lesson.dropout_setting(p, placement, training)
        self.view.update(self.result)

    def to_png(self) -> bytes:
        """Redraw only the weights, the outlines, the row sums and the title."""
        return self._renderer.render()
