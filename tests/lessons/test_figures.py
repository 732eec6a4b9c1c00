"""lessons/_figures.py: heatmaps of attention weights (labels, a fixed 0-1 colour scale, masked
cells marked), the pyplot helpers, PNG rendering, and the rule that a plot function that raises
closes its figure."""

from __future__ import annotations

import inspect
import warnings

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from helpers import decode, no_new_figures
from matplotlib.layout_engine import ConstrainedLayoutEngine

from attn_lib import causal_mask
from attn_lib.lessons import _figures

pytestmark = pytest.mark.usefixtures("headless_backend")


@pytest.fixture
def ax():
    fig = _figures.new_figure(figsize=(3, 2), dpi=40)
    return fig.subplots()


def weights_4x4(masked: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    keep = causal_mask(4) if masked else None
    scores = torch.arange(16.0).reshape(4, 4) / 10
    if keep is not None:
        scores = scores.masked_fill(~keep, float("-inf"))
    return scores.softmax(dim=-1), keep


def test_heatmap_labels_title_and_colour_scale(ax):
    w, _ = weights_4x4()
    art = _figures.draw_attention_heatmap(ax, w, title="my title", key_labels=["a", "b", "c", "d"])
    assert ax.get_title() == "my title"
    assert "query" in ax.get_ylabel() and "key" in ax.get_xlabel()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b", "c", "d"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["0", "1", "2", "3"]
    assert art.image.get_clim() == (0.0, 1.0)
    assert art.image.get_cmap().name == _figures.ATTENTION_CMAP
    assert art.colorbar is not None
    assert tuple(art.colorbar.ax.get_ylim()) == (0.0, 1.0)
    assert "attention weight" in art.colorbar.ax.get_ylabel()
    bottom, top = ax.get_ylim()
    assert bottom > top  # query 0 at the top
    np.testing.assert_allclose(art.image.get_array(), w.numpy())
    assert art.texts[0][0].get_text() == f"{w[0, 0]:.2f}"
    assert art.legend is None  # nothing masked, nothing to explain


def test_masked_cells_are_grey_with_a_cross(ax):
    w, keep = weights_4x4(masked=True)
    art = _figures.draw_attention_heatmap(ax, w, keep)
    overlay = np.asarray(art.overlay.get_array())  # (L_q, L_k, 4) RGBA
    blocked = ~keep.numpy()
    assert (overlay[blocked][:, 3] == 1.0).all()  # opaque grey where blocked
    np.testing.assert_allclose(overlay[blocked][0], _figures.MASKED_COLOR)
    assert (overlay[~blocked][:, 3] == 0.0).all()  # transparent where kept
    for i in range(4):
        for j in range(4):
            text = art.texts[i][j].get_text()
            assert (text == _figures.MASKED_MARK) == bool(blocked[i, j])
    assert art.legend is not None
    assert "masked" in art.legend.get_texts()[0].get_text()


def test_a_masked_cell_with_weight_shows_it(ax):
    w = torch.full((4, 4), 0.25)
    art = _figures.draw_attention_heatmap(ax, w, causal_mask(4))
    assert art.texts[0][3].get_text() == f"{_figures.MASKED_MARK} 0.25"


def test_update_changes_data_in_place(ax):
    w, _ = weights_4x4()
    art = _figures.draw_attention_heatmap(ax, w)
    n_images, n_texts = len(ax.images), len(ax.texts)
    w2, keep2 = weights_4x4(masked=True)
    _figures.update_attention_heatmap(art, w2, keep2, key_labels=list("wxyz"), title="new")
    assert len(ax.images) == n_images and len(ax.texts) == n_texts
    np.testing.assert_allclose(art.image.get_array(), w2.numpy())
    assert art.texts[0][1].get_text() == _figures.MASKED_MARK
    assert ax.get_title() == "new"
    assert [t.get_text() for t in ax.get_xticklabels()] == list("wxyz")


def test_bad_inputs_are_refused(ax):
    with pytest.raises(ValueError, match="2-D"):
        _figures.draw_attention_heatmap(ax, torch.zeros(2, 4, 4))
    with pytest.raises(ValueError, match="keep has shape"):
        _figures.draw_attention_heatmap(ax, torch.zeros(4, 4), causal_mask(3))
    with pytest.raises(ValueError, match="labels"):
        _figures.draw_attention_heatmap(ax, torch.zeros(4, 4), key_labels=["a"])


def test_pyplot_helpers_and_png():
    before = len(plt.get_fignums())
    w, keep = weights_4x4(masked=True)
    with plt.rc_context({"figure.dpi": 30}):  # small PNGs: what is checked is that they decode
        figs = [
            _figures.plot_attention(w, keep, key_labels=("0", "1", "2", "3")),
            _figures.plot_attention_gallery([(w, keep, "a"), (w, None, "b")], suptitle="g"),
        ]
    try:
        assert len(plt.get_fignums()) == before + 2
        gallery = figs[1]
        assert gallery.get_suptitle() == "g"
        assert len(gallery.legends) == 1  # one legend for all panels
        # One full draw (layout and text are the cost, ~0.4 s a figure): the gallery, which has
        # the most artists. Notebook 05 draws plot_attention and the gallery again under nbval.
        decode(_figures.figure_to_png(gallery))  # magic bytes and a real decode
        heatmap = figs[0].axes[0]
        assert heatmap.images and heatmap.get_xlabel()
    finally:
        for fig in figs:
            plt.close(fig)


def test_new_figure_is_not_managed_by_pyplot():
    with no_new_figures("new_figure"):
        fig = _figures.new_figure(figsize=(2, 1), dpi=40)
        fig.subplots()
    decode(_figures.figure_to_png(fig))  # magic bytes and a real decode


def test_every_plot_function_closes_its_figure_when_it_raises():
    plots = {
        name: fn
        for name, fn in inspect.getmembers(_figures, inspect.isfunction)
        if name.startswith("plot_") and fn.__module__ == _figures.__name__
    }
    assert {"plot_attention", "plot_attention_gallery"} <= set(plots)
    unguarded = [name for name, fn in plots.items() if not hasattr(fn, "__wrapped__")]
    assert not unguarded, f"plot functions that would leak a figure when they raise: {unguarded}"


def test_gallery_wraps_to_fit_the_notebook_column():
    w, keep = weights_4x4(masked=True)
    fig = _figures.plot_attention_gallery([(w, keep, str(n)) for n in range(5)], panel_size=2.9)
    try:
        assert fig.get_figwidth() <= _figures.MAX_FIGURE_WIDTH  # ≤ 840 px at 100 dpi
        shown = [ax for ax in fig.axes[:-1] if ax.get_visible()]  # the last axes: the colorbar
        assert len(shown) == 5 and len(fig.axes) - 1 == 6  # 2 a row, 3 rows, one axes hidden
        assert [bool(ax.get_xlabel()) for ax in shown] == [False, False, False, True, True]
        assert [bool(ax.get_ylabel()) for ax in shown] == [True, False, True, False, True]
    finally:
        plt.close(fig)


# --- how a notebook shows a lesson's figure (IPython's image/png output) ----------------------


@pytest.fixture
def ipython(monkeypatch):
    """A shell whose figure formats are set as the inline backend sets them: call it with the
    formats and print_figure's keywords (``set_matplotlib_formats`` does the same)."""
    import IPython
    from IPython.core.formatters import DisplayFormatter
    from IPython.core.pylabtools import select_figure_formats

    shell = type("Shell", (), {"display_formatter": DisplayFormatter()})()
    monkeypatch.setattr(IPython, "get_ipython", lambda: shell)

    def choose(*formats, **kwargs):
        select_figure_formats(shell, set(formats), **kwargs)
        return shell.display_formatter.formatters["image/png"]

    return choose


def shown(fig) -> bytes | None:
    import base64

    text = _figures._inline_png(fig)
    return None if text is None else base64.b64decode(text)


def inline_default(png_formatter, fig) -> bytes:
    """What the inline backend itself would show: its printer for any Figure."""
    import base64

    from matplotlib.figure import Figure

    return base64.b64decode(png_formatter.lookup_by_type(Figure)(fig))


def png_size(png: bytes) -> tuple[int, int]:
    height, width = decode(png).shape[:2]
    return width, height


def line_figure(layout="constrained"):
    fig, ax = _figures.subplots(figsize=(4, 2.5), dpi=50, layout=layout)
    ax.plot([0, 1], [1, 0])
    ax.set(xlabel="key position j", title="weights")
    return fig, ax


def test_lesson_figures_come_from_figure_and_subplots():
    fig, ax = _figures.subplots(1, 2, figsize=(4, 2), layout="constrained")
    other = _figures.figure(figsize=(3, 2))
    try:
        assert isinstance(fig, _figures.LessonFigure) and isinstance(other, _figures.LessonFigure)
        assert plt.fignum_exists(fig.number) and len(ax) == 2  # pyplot's, shown by plt.show()
    finally:
        plt.close("all")


@pytest.mark.parametrize("layout", ["constrained", None])
def test_a_figure_is_drawn_once_at_its_size(ipython, layout):
    ipython("png", bbox_inches="tight")
    fig, _ = line_figure(layout)
    if layout is None:
        fig.subplots_adjust(left=0.2, bottom=0.3, top=0.8)  # a fixed layout with room for labels
    canvas = fig.canvas
    try:
        assert png_size(shown(fig)) == (200, 125)  # 4 × 2.5 in at 50 dpi: not cropped
        assert fig.canvas is canvas  # pyplot's canvas is given back
    finally:
        plt.close(fig)


CASES = {
    "transparent": lambda fig, ax: fig.patch.set_alpha(0.0),
    "no background": lambda fig, ax: fig.patch.set_visible(False),
    "figure text past the edge": lambda fig, ax: fig.text(0.5, -0.05, "a note", ha="center"),
    "axes text past the edge": lambda fig, ax: ax.text(1.3, 0.5, "note", transform=ax.transAxes),
    "legend past the edge": lambda fig, ax: ax.legend(["line"], bbox_to_anchor=(1.35, 1.0)),
    "tick labels past the edge": lambda fig, ax: ax.set_position((0.1, 0.02, 0.85, 0.9)),
}


@pytest.mark.parametrize("case", CASES)
def test_anything_else_is_shown_as_the_inline_backend_does(ipython, case):
    png = ipython("png", bbox_inches="tight")
    fig, ax = line_figure(layout=None if "past the edge" in case else "constrained")
    CASES[case](fig, ax)
    try:
        ours = shown(fig)
        assert ours == inline_default(png, fig)
        if "past the edge" in case:
            assert png_size(ours) != (200, 125)  # the tight crop reaches out to it
    finally:
        plt.close(fig)


def test_other_inline_settings_are_ipythons_own(ipython):
    import base64

    fig, _ = line_figure()
    try:
        png = ipython("png", bbox_inches="tight", dpi=25)  # set_matplotlib_formats("png", dpi=25)
        ours = shown(fig)
        assert ours == inline_default(png, fig)
        assert png_size(ours)[0] < 120  # at 25 dpi
        ipython("retina", bbox_inches="tight")
        data, metadata = _figures._inline_png(fig)  # twice the pixels, shown at half their size
        assert metadata["width"] == png_size(base64.b64decode(data))[0] // 2
        ipython("svg")
        assert shown(fig) is None  # no PNG asked for: IPython shows the SVG alone
    finally:
        plt.close(fig)


def test_outside_ipython_nothing_is_shown(monkeypatch):
    import IPython

    monkeypatch.setattr(IPython, "get_ipython", lambda: None)
    fig, _ = line_figure()
    try:
        assert _figures._inline_png(fig) is None
        _figures._register_inline_png()  # nothing to register with, and no error
    finally:
        plt.close(fig)


def test_ipython_shows_lesson_figures_through_inline_png(ipython):
    png = ipython("png", bbox_inches="tight")
    _figures._register_inline_png()
    assert png.lookup_by_type(_figures.LessonFigure) is _figures._inline_png


def test_freeze_layout_runs_the_engine_as_a_draw_would():
    empty = _figures.new_figure()  # no axes: nothing to lay out, no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _figures.freeze_layout(empty)
    assert not isinstance(empty.get_layout_engine(), ConstrainedLayoutEngine)  # frozen
    fig = _figures.new_figure(figsize=(4, 2), dpi=50)
    ax = fig.subplots()
    ax.set(xlabel="key position j", title="weights")
    _figures.freeze_layout(fig)
    frozen = ax.get_position().bounds
    assert frozen != (0.125, 0.11, 0.775, 0.77)  # laid out, not matplotlib's default place
    ax.set_title("a much longer title that would move the axes if laid out again")
    decode(_figures.figure_to_png(fig))
    assert ax.get_position().bounds == frozen  # kept where the layout put it
