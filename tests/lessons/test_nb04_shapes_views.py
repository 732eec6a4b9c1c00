"""Notebook 04: the shape walkthrough, its figures and dashboard, the cost counts, the checkers."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from helpers import (
    SharedDashboard,
    assert_blits_match_full_redraws,
    assert_no_nan,
    assert_png_fits_figure,
    assert_repr_is_fixed_sentence,
    decode,
    each_value,
    no_new_figures,
    png_of,
)

from attn_lib import ShapeError, scaled_dot_product_attention, shape_trace
from attn_lib.lessons import _figures, nb04_shapes_views
from attn_lib.lessons._dashboard import control_values
from attn_lib.lessons._examples import qkv_sentence, tokenize
from attn_lib.lessons._experiments import attention_cost, crossover_length, seeded_attention
from attn_lib.lessons.nb04_shapes import (
    CROSS_SENTENCE,
    SHAPE_MODES,
    STEP_SHAPES_SETTING,
    check_crossover_length,
    check_step_macs,
    check_step_shapes,
    cost_curves,
    cross_sentence,
    shape_walkthrough,
    step_macs,
)
from attn_lib.lessons.nb04_shapes_views import ShapeDashboard

pytestmark = pytest.mark.usefixtures("headless_backend")
SIZES = ("B", "L_q", "L_k", "d_model", "d_k", "d_v")



# --- data -------------------------------------------------------------------------------------


def test_cross_sentence():
    s = cross_sentence(6)
    assert s.tokens == tokenize(CROSS_SENTENCE) and len(s.tokens) == 8
    assert len(set(s.tokens)) == 8  # distinct tokens: L_k = 8 keys
    assert s.x.shape == (8, 6) and s.x.dtype == torch.float32
    torch.testing.assert_close(cross_sentence(6).x, s.x)  # deterministic
    english = qkv_sentence(6).x
    assert not any(torch.equal(a, b) for a in s.x for b in english)  # no shared vector
    with pytest.raises(ShapeError):
        cross_sentence(0)


# --- the pure function --------------------------------------------------------------------------


def walk(values: dict) -> object:
    return shape_walkthrough(*(values[k] for k in SIZES), values["mode"])


@pytest.mark.parametrize("mode", SHAPE_MODES)
@pytest.mark.parametrize("B", [None, 1, 3])
def test_walkthrough_rows_match_a_real_run(mode, B):
    for L_q, L_k, d_model, d_k, d_v in [(7, 8, 10, 6, 4), (1, 1, 1, 1, 1), (3, 5, 12, 2, 9)]:
        r = shape_walkthrough(B, L_q, L_k, d_model, d_k, d_v, mode)
        L_k_eff = L_k if mode == "cross" else L_q
        assert (r.L_q, r.L_k) == (L_q, L_k_eff)
        steps = [row.step for row in r.rows]
        assert ("context" in steps) == (mode == "cross")
        assert set(steps) == set(r.real_shapes)
        for row in r.rows:
            assert r.real_shapes[row.step] == row.shape, row.step
        batch = () if B is None else (B,)
        assert r.shape("scores") == (*batch, L_q, L_k_eff)
        assert r.shape("output") == (*batch, L_q, d_v)
        assert r.shape("W_V") == (d_model, d_v)
        assert r.weights.shape == (L_q, L_k_eff) and r.output.shape == (L_q, d_v)
        torch.testing.assert_close(r.weights.sum(dim=-1), torch.ones(L_q))
        assert r.query_tokens == qkv_sentence().tokens[:L_q]
        assert len(r.key_tokens) == L_k_eff


def test_walkthrough_against_the_module_and_shape_trace():
    r = shape_walkthrough(2, 7, 8, 10, 6, 4, "cross")
    model = seeded_attention(10, 6, d_v=4, seed=0)
    out, w = model(qkv_sentence(10).x, return_attn=True, context=cross_sentence(10).x)
    torch.testing.assert_close(r.weights, w)
    torch.testing.assert_close(r.output, out)
    traced = {s.step: s.shape for s in shape_trace((2, 7, 6), (2, 8, 6), (2, 8, 4))}
    for step, shape in traced.items():
        assert r.shape(step) == shape


def test_walkthrough_table_and_title():
    r = shape_walkthrough(2, 7, 8, 10, 6, 4, "cross")
    lines = r.table().splitlines()
    assert lines[0].split() == ["step", "computed", "as", "shape", "sizes"]
    assert len(lines) == 1 + len(r.rows) == 13
    assert lines[-1].split()[0] == "output" and lines[-1].endswith("(2, 7, 4)")
    assert r.title == "cross-attention: B = 2, L_q = 7, L_k = 8, d_model = 10, d_k = 6, d_v = 4"
    assert shape_walkthrough(None, 3, None, 4, 2, 2).title.startswith(
        "self-attention: no batch dim, L = 3"
    )
    with pytest.raises(KeyError, match="context"):
        shape_walkthrough(1, 3, None, 4, 2, 2).shape("context")


def test_walkthrough_facts_the_notebook_states():
    a, b = (
        shape_walkthrough(2, 7, 8, 10, 6, 1, "cross"),
        shape_walkthrough(2, 7, 8, 10, 6, 12, "cross"),
    )
    assert torch.equal(a.weights, b.weights)  # d_v never changes a weight
    torch.testing.assert_close(shape_walkthrough(4, 3, 8, 10, 6, 4, "cross").weights, a.weights[:3])
    self_full = shape_walkthrough(2, 7, None, 10, 6, 4)
    assert not torch.allclose(
        shape_walkthrough(2, 3, None, 10, 6, 4).weights, self_full.weights[:3, :3]
    )
    assert shape_walkthrough(2, 7, 3, 10, 6, 4, "self") is self_full  # L_k ignored in self mode
    assert shape_walkthrough(1, 7, None, 10, 6, 4) is shape_walkthrough(1, 7, None, 10, 6, 4)


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        ((2, 8, None, 10, 6, 4, "self"), ShapeError, "L_q must be ≤ 7"),
        ((2, 7, 9, 10, 6, 4, "cross"), ShapeError, "L_k must be ≤ 8"),
        ((2, 7, None, 10, 6, 4, "cross"), ShapeError, "L_k"),
        ((0, 7, 8, 10, 6, 4, "cross"), ShapeError, "B"),
        ((2, 7, 8, 10, 0, 4, "cross"), ShapeError, "d_k"),
        ((2, 7, 8, 10, 6, 4, "both"), ValueError, "mode"),
        ((2, 7.0, 8, 10, 6, 4, "cross"), TypeError, "L_q"),
    ],
)
def test_walkthrough_bad_arguments(args, error, match):
    with pytest.raises(error, match=match):
        shape_walkthrough(*args)


# --- cost ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("B", "L", "d_model", "d_k", "d_v"), [(2, 7, 10, 6, 4), (1, 33, 16, 16, 16)]
)
def test_attention_cost_matches_pytorchs_flop_counter(B, L, d_model, d_k, d_v):
    from torch.utils.flop_counter import FlopCounterMode

    model = seeded_attention(d_model, d_k, d_v=d_v)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(torch.randn(B, L, d_model))
    assert counter.get_total_flops() == 2 * attention_cost(L, d_model, d_k, d_v, batch=B).total_macs


def test_step_macs_agrees_with_attention_cost_for_self_attention():
    m = step_macs(3, 9, 9, 16, 4, 5)
    c = attention_cost(9, 16, 4, 5, batch=3)
    assert m["Q"] + m["K"] + m["V"] == c.projection_macs
    assert (m["scores"], m["output"]) == (c.score_macs, c.weighted_sum_macs)


def test_crossover_claims():
    assert crossover_length(512) == 768.0
    below, at, above = (attention_cost(n, 512) for n in (767, 768, 769))
    assert below.attention_macs < below.projection_macs
    assert at.attention_macs == at.projection_macs
    assert above.attention_macs > above.projection_macs
    assert attention_cost(16384, 512).score_matrix_bytes == 2**30


# --- checkers ----------------------------------------------------------------------------------


def _raise():
    raise NotImplementedError


def right_shapes():
    s = STEP_SHAPES_SETTING
    B, L_q, L_k, d_k, d_v = s["B"], s["L_q"], s["L_k"], s["d_k"], s["d_v"]
    return {"Kᵀ": (B, d_k, L_k), "scores": (B, L_q, L_k), "weights": (B, L_q, L_k),
            "output": (B, L_q, d_v)}  # fmt: skip


@pytest.mark.parametrize(
    ("change", "mistake"),
    [
        ({}, None),
        ({"Kᵀ": (3, 7, 16)}, "key_not_transposed"),
        ({"Kᵀ": (3, 16, 5)}, "key_transpose_length"),
        ({"Kᵀ": (16, 7)}, "batch_missing"),
        ({"scores": (3, 7, 5)}, "scores_transposed"),
        ({"scores": (3, 5, 5)}, "scores_square"),
        ({"output": (3, 5, 16)}, "output_width"),
        ({"output": (3, 5, 7)}, "output_is_weights"),
        ({"output": torch.Size([3, 5, 4])}, None),
        ({"output": "3, 5, 4"}, "bad_return"),
    ],
)
def test_check_step_shapes(change, mistake):
    answer = {**right_shapes(), **change}
    result = check_step_shapes(lambda: answer, verbose=False)
    assert result.mistake == mistake and bool(result) == (mistake is None)
    assert result.message


def test_check_step_shapes_other_returns():
    assert check_step_shapes(_raise, verbose=False).mistake == "not_written"
    as_k_t = {("K_T" if k == "Kᵀ" else k): v for k, v in right_shapes().items()}
    assert check_step_shapes(lambda: as_k_t, verbose=False)
    assert check_step_shapes(lambda: [1], verbose=False).mistake == "bad_return"
    assert check_step_shapes(lambda: {"scores": (3, 5, 7)}, verbose=False).mistake == "missing"
    assert check_step_shapes(lambda: 1 / 0, verbose=False).mistake == "error"


def _macs_with(**overrides):
    def fn(B, L_q, L_k, d_model, d_k, d_v):
        counts = step_macs(B, L_q, L_k, d_model, d_k, d_v)
        sizes = {"B": B, "L_q": L_q, "L_k": L_k, "d_model": d_model, "d_k": d_k, "d_v": d_v}
        counts.update({k: f(**sizes) for k, f in overrides.items()})
        return counts

    return fn


@pytest.mark.parametrize(
    ("fn", "mistake"),
    [
        (_macs_with(), None),
        (_macs_with(scores=lambda B, L_q, L_k, **_: B * L_q * L_k), "pairs_only"),
        (_macs_with(Q=lambda B, L_q, d_model, d_k, **_: 2 * B * L_q * d_model * d_k), "flops"),
        (_macs_with(K=lambda L_k, d_model, d_k, **_: L_k * d_model * d_k), "batch_missing"),
        (_macs_with(V=lambda B, L_k, d_model, d_k, **_: B * L_k * d_model * d_k), "value_width"),
        (_macs_with(V=lambda B, L_q, d_model, d_v, **_: B * L_q * d_model * d_v), "value_length"),
        (_macs_with(K=lambda B, L_q, d_model, d_k, **_: B * L_q * d_model * d_k), "key_length"),
        (_macs_with(output=lambda B, L_q, L_k, d_k, **_: B * L_q * L_k * d_k), "output_width"),
        (_macs_with(output=lambda **_: 7), "wrong_count"),
        (lambda *a: _raise(), "not_written"),
        (lambda *a: [1, 2], "bad_return"),
        (lambda *a: {"Q": 1}, "missing"),
    ],
)
def test_check_step_macs(fn, mistake):
    result = check_step_macs(fn, verbose=False)
    assert result.mistake == mistake and bool(result) == (mistake is None)


@pytest.mark.parametrize(
    ("fn", "mistake"),
    [
        (lambda d, k, v: d * (2 * k + v) / (k + v), None),
        (lambda d, k, v: torch.tensor(d * (2 * k + v) / (k + v)), None),
        (lambda d, k, v: d, "just_d_model"),
        (lambda d, k, v: 2 * d, "scores_vs_qk"),
        (lambda d, k, v: d * (2 * k + v) / k, "scores_only"),
        (lambda d, k, v: (d * (2 * k + v) / (k + v)) ** 2, "squared"),
        (lambda d, k, v: 7, "wrong_value"),
        (lambda d, k, v: "96", "bad_return"),
        (lambda d, k, v: _raise(), "not_written"),
        (lambda d, k, v: 1 / 0, "error"),
    ],
)
def test_check_crossover_length(fn, mistake):
    result = check_crossover_length(fn, verbose=False)
    assert result.mistake == mistake and bool(result) == (mistake is None)


def test_checkers_print_words(capsys):
    check_crossover_length(lambda d, k, v: d)
    out = capsys.readouterr().out
    assert "rule of thumb" in out and "Traceback" not in out


# --- static figures ----------------------------------------------------------------------------


def test_static_figures_and_limits():
    with no_new_figures():
        default = shape_walkthrough(2, 7, None, 10, 6, 4)
        cross = shape_walkthrough(2, 7, 8, 10, 6, 4, "cross")
        curves = cost_curves([16, 256, 4096], 64)
        assert curves.crossover == 96.0
        for fig in (
            nb04_shapes_views.plot_shape_walkthrough(default),
            nb04_shapes_views.plot_shape_gallery([default, cross], suptitle="gallery"),
            nb04_shapes_views.plot_attention_cost(curves, qkv_bytes=curves.L * 3 * 64 * 4),
        ):
            decode(_figures.figure_to_png(fig))
            plt.close(fig)
    with pytest.raises(ValueError, match="give at least one"):
        nb04_shapes_views.plot_shape_gallery([])
    view = nb04_shapes_views.ShapeWalkthroughView(_figures.new_figure(), nb04_shapes_views.ShapeDiagramLimits(B=2))
    with pytest.raises(ValueError, match="does not fit"):
        view.update(shape_walkthrough(3, 7, None, 10, 6, 4))


def test_power_of_ten_labels():
    label = nb04_shapes_views._power_of_ten_label
    assert [label(v) for v in (1e-3, 1.0, 100.0, 1e11)] == ["10⁻³", "10⁰", "10²", "10¹¹"]
    assert label(300.0) == "" and label(0.0) == ""


# --- the dashboard -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shared_dashboard(headless_backend):
    yield from SharedDashboard.fixture(ShapeDashboard)


@pytest.fixture
def dashboard(shared_dashboard):
    """The module's ShapeDashboard, back in the setting it was built with."""
    yield from shared_dashboard.use()


def assert_shows(dash: ShapeDashboard) -> None:
    """The dashboard holds and draws exactly what the pure function computes."""
    values = dash.values
    expected = walk(values)
    assert dash.last_error is None and dash.status.value == ""
    assert dash.result is expected  # cached: the very same result
    r, view = expected, dash.view
    assert_no_nan(r.weights)
    np.testing.assert_array_equal(view.heatmap.artists.image.get_array(), r.weights.numpy())
    assert view.ax_heat.get_xlim() == (-0.5, r.L_k - 0.5)
    shown = [t.get_text() for t in view.heatmap.key_labels if t.get_visible()]
    assert shown == list(r.key_tokens)
    shown = [t.get_text() for t in view.heatmap.query_labels if t.get_visible()]
    assert shown == list(r.query_tokens)
    # boxes: (rows, cols) of Q, Kᵀ, scores, weights and of weights, V, output
    scores_row, output_row = view.attention.scores_row, view.attention.output_row
    expected_boxes = [(r.L_q, r.d_k), (r.d_k, r.L_k), (r.L_q, r.L_k), (r.L_q, r.L_k),
                      (r.L_q, r.L_k), (r.L_k, r.d_v), (r.L_q, r.d_v)]  # fmt: skip
    boxes = [b.box for b in scores_row.boxes + output_row.boxes]
    assert [(b.get_height(), b.get_width()) for b in boxes] == expected_boxes
    for eq in (scores_row, output_row, *view.projections.rows):
        for box in eq.boxes:
            assert sum(c.get_visible() for c in box.copies) == (r.B - 1 if box.copies else 0)
    labels = [b.size.get_text() for b in scores_row.boxes]
    assert labels == [str(r.shape(s)) for s in ("Q", "Kᵀ", "scores", "weights")]
    names = [b.name.get_text() for b in view.projections.rows[1].boxes]
    assert names == ["x" if r.mode == "self" else "context", "W_K", "K"]
    assert view.table_sizes.get_text().splitlines()[1:] == [str(row.shape) for row in r.rows]
    assert dash.controls["L_k"].disabled == (r.mode == "self")
    assert_png_fits_figure(dash)


def test_default_state(dashboard):
    assert dashboard.values == {"B": 2, "L_q": 7, "L_k": 8, "d_model": 10, "d_k": 6, "d_v": 4,
                                "mode": "self"}  # fmt: skip
    assert_shows(dashboard)
    assert dashboard.controls["L_k"].disabled
    for name in SIZES:
        assert dashboard.controls[name].continuous_update is False


@pytest.mark.parametrize("mode", SHAPE_MODES)
@pytest.mark.parametrize("name", SIZES)
def test_each_slider_min_mid_max(dashboard, name, mode):
    dashboard.controls["mode"].value = mode
    image_artist = dashboard.view.heatmap.artists.image
    control = dashboard.controls[name]
    values = control_values(control)  # the current value, then min, middle and max
    assert {control.min, control.max} <= set(values)
    previous = dashboard.result
    # end back at the default; each_value checks that the figure is reused
    for _, previous_png in each_value(dashboard, name, back_to_start=True):
        assert_shows(dashboard)
        assert dashboard.view.heatmap.artists.image is image_artist
        if dashboard.result is not previous:
            assert png_of(dashboard) != previous_png
        elif name == "L_k" and mode == "self":
            assert dashboard.result is previous  # L_k does nothing in self-attention
        previous = dashboard.result


def test_mode_toggle(dashboard):
    dashboard.controls["mode"].value = "cross"
    assert_shows(dashboard)
    assert dashboard.result.key_tokens == tokenize(CROSS_SENTENCE)
    assert not dashboard.controls["L_k"].disabled
    dashboard.controls["mode"].value = "self"
    assert_shows(dashboard)
    assert dashboard.controls["L_k"].disabled


def test_blitted_image_equals_a_full_redraw(dashboard):
    settings = [
        {"mode": mode, "B": B, "L_q": L_q}
        for mode, B, L_q in [("self", 1, 1), ("self", 4, 7), ("cross", 1, 7), ("cross", 4, 1)]
    ]
    assert_blits_match_full_redraws(dashboard, settings)


def test_bad_initial_values():
    with pytest.raises(ValueError, match="L_q"):
        ShapeDashboard(L_q=8)
    with pytest.raises(ValueError, match="mode"):
        ShapeDashboard(mode="both")


def test_repr_and_close():
    dash = ShapeDashboard(mode="cross")
    assert_repr_is_fixed_sentence(dash, ShapeDashboard)
    assert not dash.controls["L_k"].disabled
    dash.close()
    assert dash.closed
    dash.close()  # twice is harmless


def test_weights_are_a_convex_combination_of_values():
    # The notebook's section 3, on the library's own run.
    r = shape_walkthrough(None, 7, None, 10, 6, 4)
    model = seeded_attention(10, 6, d_v=4)
    x = qkv_sentence(10).x
    V = model.W_V(x).detach()
    Q, K = model.W_Q(x).detach(), model.W_K(x).detach()
    keep = torch.ones(7, 7, dtype=torch.bool).tril()
    keep[3] = False
    out, w = scaled_dot_product_attention(Q, K, V, keep)
    torch.testing.assert_close(w.sum(-1), keep.any(-1).float())
    assert torch.equal(out[3], torch.zeros(4))
    torch.testing.assert_close(r.output, scaled_dot_product_attention(Q, K, V)[0])
    lo, hi = V.min(0).values, V.max(0).values
    assert ((r.output >= lo - 1e-6) & (r.output <= hi + 1e-6)).all()
