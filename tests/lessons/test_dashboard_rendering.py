"""How dashboards render: text from the coverage cache, PNG in one pass, toggles that show
their choice and keep their label beside them."""

import asyncio
import io

import ipywidgets as widgets
import numpy as np
import PIL.Image
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from attn_lib.lessons import _agg
from attn_lib.lessons._dashboard import _MARK_DELAY_S, CHOSEN_ICON, OTHER_ICON, Dashboard
from attn_lib.lessons._figures import new_figure


def _figure(canvas_class: type) -> Figure:
    fig = Figure(figsize=(3.0, 1.2), dpi=80)
    canvas_class(fig)
    fig.text(0.05, 0.6, "weights 0.25 · √d_k", fontsize=10)
    fig.text(0.05, 0.2, "key j", fontsize=12, rotation=90, ha="left")
    fig.text(0.6, 0.3, r"$\sqrt{d_k}$", fontsize=12)  # math text: drawn by Agg itself
    return fig


def _pixels(fig: Figure) -> np.ndarray:
    fig.canvas.draw()
    return np.asarray(fig.canvas.buffer_rgba())[..., :3].astype(int)


def test_cached_text_looks_like_agg_text():
    plain, cached = _pixels(_figure(FigureCanvasAgg)), _pixels(_figure(_agg.TextCachingCanvas))
    differ = np.abs(plain - cached).max(axis=-1)
    assert (plain < 128).sum() > 100  # there is text to compare
    # Strings are placed to a quarter pixel instead of 1/64: edges shift by at most that.
    assert differ.max() < 100 and (differ > 40).mean() < 0.01


def test_a_string_is_rendered_once_then_drawn_from_the_cache():
    fig = _figure(_agg.TextCachingCanvas)
    _pixels(fig)
    before = len(_agg._coverage_cache)
    again = _pixels(fig)
    assert len(_agg._coverage_cache) == before
    assert (again == _pixels(fig)).all()


def test_encode_png_is_the_canvas_in_rgb():
    fig = _figure(_agg.TextCachingCanvas)
    fig.patch.set_facecolor((0.9, 0.95, 1.0))
    pixels = _pixels(fig)
    png = _agg.encode_png(fig.canvas)
    image = PIL.Image.open(io.BytesIO(png))
    assert image.mode == "RGB" and image.size == (240, 96)
    assert (np.asarray(image).astype(int) == pixels).all()


class _ToggleDashboard(Dashboard):
    def render(self, mode: int) -> None:
        self.figure.suptitle(str(mode))


def test_a_toggle_marks_its_choice_and_fits_its_labels():
    toggle = widgets.ToggleButtons(options=[("off", 0), ("fully masked row", 1)], value=0)
    toggle.style.button_width = "64px"
    dash = _ToggleDashboard({"mode": toggle}, new_figure((2.0, 1.0)))
    assert toggle.icons == (CHOSEN_ICON, OTHER_ICON)
    toggle.value = 1  # no event loop runs here: the icons follow at once
    assert toggle.icons == (OTHER_ICON, CHOSEN_ICON)
    assert toggle.layout.display == "flex"  # the label on the buttons' line
    assert int(toggle.style.button_width.removesuffix("px")) >= 16 * 7 + 40  # the long label
    dash.close()


def test_in_a_running_event_loop_the_icons_follow_once_the_controls_are_still():
    toggle = widgets.ToggleButtons(options=["a", "b", "c"], value="a")
    dash = _ToggleDashboard({"mode": toggle}, new_figure((2.0, 1.0)))

    async def click_twice() -> tuple:
        toggle.value = "b"
        toggle.value = "c"
        right_after = toggle.icons
        await asyncio.sleep(_MARK_DELAY_S + 0.1)
        return right_after, toggle.icons

    right_after, later = asyncio.run(click_twice())
    assert right_after == (CHOSEN_ICON, OTHER_ICON, OTHER_ICON)  # the picture first
    assert later == (OTHER_ICON, OTHER_ICON, CHOSEN_ICON)
    dash.close()


def test_bars_drawn_as_one_collection_look_like_bars_drawn_one_by_one():
    fig = Figure(figsize=(3.0, 2.0), dpi=80)
    _agg.TextCachingCanvas(fig)
    ax = fig.subplots()
    bars = ax.bar(range(6), [0.2, -0.5, 0.9, 0.1, 0.0, 0.7], color="0.6", edgecolor="none")
    outlines = ax.bar(range(6), [0.3, -0.4, 0.8, 0.2, 0.1, 0.6], fill=False, linestyle="--")
    bars.patches[3].set_visible(False)
    bars.patches[2].set_facecolor("tab:red")
    ax.set_ylim(-1, 1)
    dynamic = [*bars.patches, *outlines.patches, ax.title]
    drawing = _agg.BatchedDrawing(fig, dynamic)
    assert len(drawing.items) == 2  # the bars of both containers in one collection, the title
    for artist in dynamic:
        artist.set_animated(True)
    fig.canvas.draw()
    background = fig.canvas.copy_from_bbox(fig.bbox)
    drawing.draw()
    batched = np.asarray(fig.canvas.buffer_rgba()).copy()
    fig.canvas.restore_region(background)
    for artist in dynamic:
        fig.draw_artist(artist)
    one_by_one = np.asarray(fig.canvas.buffer_rgba())
    differ = np.abs(batched.astype(int) - one_by_one).max(axis=-1)
    assert (differ > 64).sum() == 0 and (differ > 0).mean() < 0.01


def test_text_is_laid_out_as_agg_lays_it_out():
    """The renderer hands matplotlib the fonts' vertical metrics from a cache: same boxes."""
    boxes = []
    for canvas_class in (FigureCanvasAgg, _agg.TextCachingCanvas):
        fig = _figure(canvas_class)
        text = fig.text(0.1, 0.5, "two lines\nof (text)", fontsize=11, linespacing=1.4)
        fig.canvas.draw()
        boxes.append(text.get_window_extent().bounds)
    assert boxes[0] == boxes[1]
