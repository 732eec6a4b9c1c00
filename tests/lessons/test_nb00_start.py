"""Notebook 00's library pieces: the widget check, its figures, and the two shape checkers."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from helpers import (
    assert_no_nan,
    assert_png_fits_figure,
    assert_repr_is_fixed_sentence,
    each_value,
    no_new_figures,
    open_dashboard,
    png_of,
)

from attn_lib import stable_softmax
from attn_lib.lessons import nb00_start_views
from attn_lib.lessons._dashboard import control_values
from attn_lib.lessons.nb00_start import (
    SHAPE_NAMES,
    check_attention_inputs,
    check_shape_predictions,
    expected_shapes,
)
from attn_lib.lessons.nb00_start_views import WIDGET_CHECK_TEMPERATURES, WidgetCheckDashboard

pytestmark = pytest.mark.usefixtures("headless_backend")


@pytest.fixture
def check():
    yield from open_dashboard(WidgetCheckDashboard, what="the widget check")


def test_widget_check_every_temperature(check):
    bars = check.view.bars
    scores = torch.tensor(WidgetCheckDashboard.SCORES)
    assert check.controls["temperature"].value == 1.0
    tried = control_values(check.controls["temperature"])
    assert sorted(tried) == sorted(WIDGET_CHECK_TEMPERATURES)  # min, max and all between
    seen = set()
    for t, _ in each_value(check, "temperature"):  # the figure is reused: checked there
        assert check.last_error is None and check.status.value == ""
        expected = stable_softmax(scores / t)
        torch.testing.assert_close(check.weights, expected, rtol=0, atol=0)
        assert_no_nan(check.weights)
        heights = [b.get_height() for b in check.view.bars.patches]
        np.testing.assert_allclose(heights, expected.numpy(), rtol=1e-6)
        assert check.view.title.get_text() == f"softmax(scores / T), T = {t:g}"
        assert_png_fits_figure(check)
        assert check.view.bars is bars
        seen.add(png_of(check))
    assert len(seen) == len(tried)  # every temperature looks different


def test_widget_check_repr_tells_the_reader_what_to_do(check):
    bundle = assert_repr_is_fixed_sentence(check, WidgetCheckDashboard)
    assert "widgets are not rendering" in bundle["text/plain"]


def test_widget_check_refuses_an_unknown_temperature():
    with no_new_figures("a refused widget check"), pytest.raises(ValueError, match="temperature"):
        WidgetCheckDashboard(temperature=0.3)


def test_softmax_bars_gallery():
    w = torch.tensor([0.7, 0.2, 0.1])
    fig = nb00_start_views.plot_softmax_bars_gallery([(w, "a"), (w.flip(0), "b")], ["x", "y", "z"])
    try:
        assert [ax.get_title() for ax in fig.axes] == ["a", "b"]
        np.testing.assert_allclose([p.get_height() for p in fig.axes[1].patches], w.flip(0))
    finally:
        plt.close(fig)
    with pytest.raises(ValueError):
        nb00_start_views.plot_softmax_bars_gallery([], ["x"])
    fig, ax = plt.subplots()
    try:
        with pytest.raises(ValueError, match="weights"):
            nb00_start_views.SoftmaxBarsView(ax, ["x", "y"]).update(w, "three weights for two keys")
    finally:
        plt.close(fig)


# --- shapes -----------------------------------------------------------------------------------


def test_expected_shapes():
    assert expected_shapes(2, 3, 5, 16, 4, 6) == {
        "Q": (2, 3, 4), "K": (2, 5, 4), "V": (2, 5, 6),
        "scores": (2, 3, 5), "weights": (2, 3, 5), "output": (2, 3, 6),
    }  # fmt: skip
    assert tuple(expected_shapes(1, 1, 1, 1, 1, 1)) == SHAPE_NAMES


def shapes_with(**changes):
    def learner(B, L_q, L_k, d_model, d_k, d_v):
        s = dict(expected_shapes(B, L_q, L_k, d_model, d_k, d_v))
        local = {"B": B, "L_q": L_q, "L_k": L_k, "d_model": d_model, "d_k": d_k, "d_v": d_v}
        for name, dims in changes.items():
            s[name] = tuple(local[d] for d in dims)
        return s

    return learner


def test_shape_predictions_right_answers_pass():
    assert check_shape_predictions(shapes_with(), verbose=False)
    as_lists = lambda *a: {k: list(v) for k, v in expected_shapes(*a).items()}
    assert check_shape_predictions(as_lists, verbose=False)
    as_sizes = lambda *a: {k: torch.Size(v) for k, v in expected_shapes(*a).items()}
    assert check_shape_predictions(as_sizes, verbose=False)


@pytest.mark.parametrize(
    ("changes", "mistake"),
    [
        ({"Q": ("B", "L_q", "d_model")}, "width_d_model"),
        ({"Q": ("B", "L_k", "d_k")}, "query_length"),
        ({"K": ("B", "L_q", "d_k")}, "key_length"),
        ({"K": ("B", "d_k", "L_k")}, "key_transposed"),
        ({"V": ("B", "L_k", "d_k")}, "value_width"),
        ({"V": ("B", "L_q", "d_v")}, "value_length"),
        ({"scores": ("B", "L_k", "L_q")}, "scores_transposed"),
        ({"scores": ("B", "L_q", "d_k")}, "scores_width"),
        ({"scores": ("B", "L_q", "L_q")}, "scores_square"),
        ({"weights": ("B", "L_q", "L_q")}, "weights_shape"),
        ({"output": ("B", "L_q", "d_k")}, "output_width"),
        ({"output": ("B", "L_k", "d_v")}, "output_length"),
        ({"output": ("B", "L_q", "L_k")}, "output_is_weights"),
        ({"output": ("L_q", "d_v")}, "batch_missing"),
        ({"output": ("d_v", "L_q", "B")}, "wrong_shape"),
    ],
)
def test_shape_prediction_mistakes_are_named(changes, mistake):
    result = check_shape_predictions(shapes_with(**changes), verbose=False)
    assert not result and result.mistake == mistake
    assert result.message.startswith("Not yet")


@pytest.mark.parametrize(
    ("fn", "mistake"),
    [
        (lambda *a: None, "bad_return"),
        (lambda *a: {"Q": (1, 2, 3)}, "missing"),
        (lambda *a: {n: "shape" for n in SHAPE_NAMES}, "bad_return"),
        (lambda B, *a: 1 / 0, "error"),
    ],
)
def test_shape_prediction_bad_returns(fn, mistake):
    result = check_shape_predictions(fn, verbose=False)
    assert result.mistake == mistake


def test_shape_prediction_stub(capsys):
    def predict_shapes(*args):
        raise NotImplementedError

    assert check_shape_predictions(predict_shapes).mistake == "not_written"
    assert "Not written yet" in capsys.readouterr().out


# --- inputs -----------------------------------------------------------------------------------


def inputs_with(query="B L_q d_k", key="B L_k d_k", value="B L_k d_v", dtype=torch.float32):
    def learner(B, L_q, L_k, d_k, d_v):
        local = {"B": B, "L_q": L_q, "L_k": L_k, "d_k": d_k, "d_v": d_v}
        return tuple(
            torch.zeros(*(local[d] for d in dims.split()), dtype=dtype)
            for dims in (query, key, value)
        )

    return learner


def test_attention_inputs_right_answer_passes():
    assert check_attention_inputs(inputs_with(), verbose=False)
    assert check_attention_inputs(inputs_with(dtype=torch.float64), verbose=False)


@pytest.mark.parametrize(
    ("kwargs", "mistake"),
    [
        ({"query": "B L_k d_k"}, "query_length"),
        ({"key": "B L_q d_k"}, "key_length"),
        ({"key": "B d_k L_k"}, "key_transposed"),
        ({"value": "B L_k d_k"}, "value_width"),
        ({"value": "B L_q d_v"}, "value_length"),
        ({"query": "L_q B d_k"}, "batch_not_first"),
        ({"value": "B d_v L_k"}, "wrong_shape"),
        ({"dtype": torch.int64}, "not_float"),
    ],
)
def test_attention_input_mistakes_are_named(kwargs, mistake):
    result = check_attention_inputs(inputs_with(**kwargs), verbose=False)
    assert not result and result.mistake == mistake


@pytest.mark.parametrize(
    ("fn", "mistake"),
    [
        (lambda *a: torch.zeros(2), "bad_return"),
        (lambda *a: (torch.zeros(2),) * 2, "bad_return"),
        (lambda *a: torch.randn(-1), "error"),
    ],
)
def test_attention_input_bad_returns(fn, mistake):
    assert check_attention_inputs(fn, verbose=False).mistake == mistake


def test_attention_inputs_stub():
    def make_inputs(*args):
        raise NotImplementedError

    assert check_attention_inputs(make_inputs, verbose=False).mistake == "not_written"


def test_pinned_versions_reads_markers_as_pip_does(tmp_path):
    from attn_lib.lessons.nb00_start import pinned_versions

    req = tmp_path / "requirements.txt"
    req.write_text(
        "--find-links https://example.invalid/torch/\n"
        'torch==2.13.0+cpu ; sys_platform == "nowhere"\n'
        'torch==2.13.0 ; sys_platform != "nowhere"  # this one applies\n'
        "numpy==2.4.6\n-e .\n"
    )
    assert pinned_versions(req) == {"torch": "2.13.0", "numpy": "2.4.6"}
    assert pinned_versions(tmp_path / "missing.txt") is None
