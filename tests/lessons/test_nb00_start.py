"""Notebook 00's library pieces: the version report, the widget check and the shapes checker."""

from __future__ import annotations

from fractions import Fraction

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from helpers import (
    assert_no_nan,
    assert_png_fits_figure,
    assert_repr_is_fixed_sentence,
    each_value,
    open_dashboard,
    png_of,
)

from attn_lib import stable_softmax
from attn_lib.lessons import _checking
from attn_lib.lessons import nb00_start as lesson
from attn_lib.lessons import nb00_start_views as views
from attn_lib.lessons._checking import show_solution
from attn_lib.lessons.nb00_start import SHAPE_NAMES, check_shape_predictions, expected_shapes

# --- environment ------------------------------------------------------------------------------


def test_pinned_versions_reads_markers_as_pip_does(tmp_path):
    req = tmp_path / "requirements.txt"
    req.write_text(
        "--find-links https://example.invalid/torch/\n"
        'torch==2.13.0+cpu ; sys_platform == "nowhere"\n'
        'torch==2.13.0 ; sys_platform != "nowhere"  # this one applies\n'
        "numpy==2.4.6\n-e .\n"
    )
    assert lesson.pinned_versions(req) == {"torch": "2.13.0", "numpy": "2.4.6"}
    assert lesson.pinned_versions(tmp_path / "missing.txt") is None


def test_environment_report_names_what_differs(tmp_path, monkeypatch):
    installed = {
        "torch": "2.13.0+cpu",
        "numpy": "2.4.6",
        "matplotlib": "3.11.0",
        "ipywidgets": None,
    }
    monkeypatch.setattr(lesson, "_installed", installed.get)
    req = tmp_path / "requirements.txt"
    req.write_text("torch==2.13.0\nnumpy==2.4.5\nmatplotlib==3.11.0\nipywidgets==8.1.8\n")
    running, verdict = lesson.environment_report(req)
    assert "torch 2.13 · numpy 2.4 · matplotlib 3.11 · ipywidgets missing" in running
    assert verdict.startswith("Not the pinned versions")
    assert "numpy 2.4.6 (pinned 2.4.5)" in verdict and "ipywidgets" in verdict
    assert "torch" not in verdict  # the local tag +cpu is not a difference
    req.write_text("torch==2.13.0\nnumpy==2.4.6\nmatplotlib==3.11.0\nipywidgets==8.1.8\n")
    installed["ipywidgets"] = "8.1.8"
    assert "exactly the versions pinned" in lesson.environment_report(req)[1]
    assert "not found" in lesson.environment_report(tmp_path / "missing.txt")[1]


# --- the widget check -------------------------------------------------------------------------


@pytest.fixture
def check(headless_backend):
    yield from open_dashboard(views.WidgetCheckDashboard, what="the widget check")


def test_widget_check_draws_the_softmax_at_every_temperature(check):
    scores = torch.tensor(lesson.CHECK_SCORES)
    seen = set()
    for T, _ in each_value(check, "temperature"):  # every value of the slider
        assert check.last_error is None
        expected = stable_softmax(scores / T)
        assert torch.equal(check.weights, expected)  # the same computation, exactly
        assert_no_nan(check.weights)
        heights = [bar.get_height() for bar in check.view.bars]
        np.testing.assert_allclose(heights, expected.numpy(), rtol=1e-6)
        assert check.view.ax.get_title() == f"softmax(scores / T), T = {T:g}"
        assert_png_fits_figure(check)
        seen.add(png_of(check))
    assert len(seen) == len(views.TEMPERATURES)  # every temperature looks different


def test_widget_check_repr_tells_the_reader_what_to_do(check):
    bundle = assert_repr_is_fixed_sentence(check, views.WidgetCheckDashboard)
    assert "widgets are not rendering" in bundle["text/plain"]


def test_the_gallery_draws_the_weights_it_is_given(headless_backend):
    w = {0.5: torch.tensor([0.7, 0.2, 0.05, 0.05]), 2.0: torch.tensor([0.4, 0.3, 0.2, 0.1])}
    fig = views.plot_weights_gallery(w)
    try:
        assert [ax.get_title() for ax in fig.axes] == ["T = 0.5", "T = 2"]
        np.testing.assert_allclose([p.get_height() for p in fig.axes[1].patches], w[2.0])
    finally:
        plt.close(fig)


# --- the shapes exercise ----------------------------------------------------------------------


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


def _shapes_as(convert):
    return lambda *a: {k: convert(v) for k, v in expected_shapes(*a).items()}


@pytest.mark.parametrize(
    "convert",
    [
        list,
        torch.Size,
        lambda v: tuple(np.int64(d) for d in v),
        lambda v: tuple(torch.tensor(d) for d in v),
        lambda v: tuple(float(d) for d in v),
        lambda v: tuple(Fraction(d, 1) for d in v),
    ],
)
def test_shape_predictions_right_answers_pass(convert):
    result = check_shape_predictions(_shapes_as(convert), verbose=False)
    assert result, result.message
    assert check_shape_predictions(lesson.solution_predict_shapes, verbose=False)


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
        (_shapes_as(lambda v: tuple(bool(d) for d in v)), "bad_return"),
        (_shapes_as(lambda v: tuple(d + 0.5 for d in v)), "bad_return"),
        (lambda B, *a: 1 / 0, "error"),
    ],
)
def test_shape_prediction_bad_returns(fn, mistake):
    assert check_shape_predictions(fn, verbose=False).mistake == mistake


def test_the_solution_is_shown_only_after_an_attempt(capsys, monkeypatch):
    def predict_shapes(*args):
        raise NotImplementedError

    monkeypatch.setattr(_checking, "_ATTEMPTED", set())  # a fresh session
    assert check_shape_predictions(predict_shapes).mistake == "not_written"
    assert "Not written yet" in capsys.readouterr().out
    show_solution("predict_shapes", lesson.solution_predict_shapes)  # a stub is no attempt
    assert "Try it first" in capsys.readouterr().out
    check_shape_predictions(shapes_with(K=("B", "d_k", "L_k")))
    capsys.readouterr()
    show_solution("predict_shapes", lesson.solution_predict_shapes)
    assert "def solution_predict_shapes" in capsys.readouterr().out
