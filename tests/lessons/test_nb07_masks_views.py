"""Notebook 07 (masks): the mask dashboard driven headlessly, its pure function, its figures,
and the three exercise checkers."""

from __future__ import annotations

import itertools
import math

import ipywidgets
import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers import (
    SharedDashboard,
    assert_blits_match_full_redraws,
    assert_png_fits_figure,
    assert_repr_is_fixed_sentence,
    each_value,
    no_new_figures,
    png_of,
)

import attn_lib
from attn_lib.lessons import _figures, nb07_masks, nb07_masks_views
from attn_lib.lessons._dashboard import control_values
from attn_lib.lessons._experiments import PADDING_SIDES, keep_from_lengths
from attn_lib.lessons.nb07_masks import (
    MASK_DEMO_L,
    MASK_DTYPES,
    MASK_FILLS,
    check_batch_mask,
    check_masked_mean_loss,
    check_masked_softmax,
    fill_value_for,
    mask_setting,
    masked_mass,
)
from attn_lib.lessons.nb07_masks_views import MaskDashboard

pytestmark = pytest.mark.usefixtures("headless_backend")
SLIDERS = ("length_0", "length_1", "length_2")



@pytest.fixture(scope="module")
def shared_dashboard(headless_backend):
    yield from SharedDashboard.fixture(MaskDashboard)


@pytest.fixture
def dashboard(shared_dashboard):
    """The module's MaskDashboard, back in the setting it was built with."""
    yield from shared_dashboard.use()


def setting_of(values: dict) -> nb07_masks.MaskSetting:
    return mask_setting(
        tuple(values[s] for s in SLIDERS),
        causal=values["causal"],
        padding_side=values["padding"],
        fill=values["fill"],
        dtype=values["dtype"],
    )


def expected_rgba(weights: torch.Tensor, keep: torch.Tensor) -> np.ndarray:
    """What a panel's image must hold: viridis, grey where masked, red where NaN."""
    w = weights.numpy().astype(float)
    k = keep.numpy()
    nan = np.isnan(w)
    leak = ~k & ~nan & (np.abs(w) >= 0.005)
    rgba = matplotlib.colormaps[_figures.ATTENTION_CMAP](np.clip(np.nan_to_num(w), 0, 1))
    rgba[~k & ~nan & ~leak] = _figures.MASKED_COLOR
    rgba[nan] = nb07_masks_views.NAN_COLOR
    return rgba


def assert_shows(dash: MaskDashboard) -> None:
    """The dashboard holds and draws exactly what the pure function computes."""
    expected = setting_of(dash.values)
    result = dash.result
    assert dash.last_error is None and dash.status.value == ""
    assert result.lengths == expected.lengths
    assert torch.equal(result.keep, expected.keep)
    assert result.error == expected.error
    view = dash.view
    if expected.error is None:
        torch.testing.assert_close(result.weights, expected.weights, rtol=0, atol=0, equal_nan=True)
        # NaN only where the reader asked for it: fill -inf and a row with no allowed key.
        empty = ~expected.keep.any(dim=-1)
        nan_rows = result.weights.isnan().any(dim=-1)
        if dash.values["fill"] == "-inf":
            assert torch.equal(nan_rows, empty)
        else:
            assert not nan_rows.any()
        for b, panel in enumerate(view.panels):
            assert panel.image.get_visible()
            np.testing.assert_allclose(
                panel.image.get_array(), expected_rgba(expected.weights[b], expected.keep[b])
            )
            assert f"length {expected.lengths[b]}" in panel.ax.get_title()
            assert f"{expected.mass[b]:.3f}" in panel.ax.get_title()
        assert not view.error_text.get_visible()
    else:
        assert result.weights is None
        assert view.error_text.get_visible()
        assert "overflow" in view.error_text.get_text()
        assert all(not p.image.get_visible() for p in view.panels)
        assert all("refused" in p.ax.get_title() for p in view.panels)
    assert dash.figure.get_suptitle() == expected.title
    assert_png_fits_figure(dash)


def test_default_state(dashboard):
    assert dashboard.values == {
        "length_0": 6, "length_1": 4, "length_2": 2, "causal": False, "padding": "right",
        "fill": "default", "dtype": "float32",
    }  # fmt: skip
    assert_shows(dashboard)
    assert dashboard.result.mass == (0.0, 0.0, 0.0)
    assert isinstance(dashboard.widget, ipywidgets.VBox)
    for name in SLIDERS:
        assert dashboard.controls[name].continuous_update is False


@pytest.mark.parametrize("name", [*SLIDERS, "causal", "padding", "fill", "dtype"])
def test_each_control_each_value(dashboard, name):
    first_image = dashboard.view.panels[0].image
    values = control_values(dashboard.controls[name])
    if name in SLIDERS:
        assert {1, 3, 6} <= set(values)  # min, middle, max (and the current value)
    previous_result = dashboard.result
    for _, previous in each_value(dashboard, name, back_to_start=True):  # one figure, reused
        assert_shows(dashboard)
        assert dashboard.view.panels[0].image is first_image
        same = (
            previous_result.error == dashboard.result.error
            and torch.equal(previous_result.keep, dashboard.result.keep)
            and previous_result.title == dashboard.result.title
        )
        if not same:
            assert png_of(dashboard) != previous
        previous_result = dashboard.result


def test_sliders_change_only_their_sequence(dashboard):
    before = dashboard.result
    dashboard.controls["length_1"].value = 2
    after = dashboard.result
    assert after.lengths == (6, 2, 2)
    torch.testing.assert_close(after.weights[[0, 2]], before.weights[[0, 2]])
    assert after.keep[1, :, 2:].any() == torch.tensor(False)
    assert after.weights[1, :, 2:].sum() == 0


def test_every_fill_and_dtype_with_left_padding_and_causal(dashboard):
    dashboard.controls["causal"].value = True
    dashboard.controls["padding"].value = "left"
    seen = set()
    for fill, dtype in itertools.product(MASK_FILLS, MASK_DTYPES):
        dashboard.set(fill=fill, dtype=dtype)
        assert_shows(dashboard)
        r = dashboard.result
        seen.add(png_of(dashboard))
        if fill == "-1e9" and dtype == "float16":
            assert r.error is not None and "cannot be stored in torch.float16" in r.error
            continue
        assert r.error is None
        empty = ~r.keep.any(dim=-1)  # rows 0-1 of sequence 1, rows 0-3 of sequence 2
        assert r.empty_rows == (0, 2, 4)
        rows = r.weights[empty]
        if fill == "default":
            assert (rows == 0).all() and r.mass == (0.0, 0.0, 0.0)
        elif fill == "-inf":
            assert rows.isnan().all() and r.nan_rows == (0, 2, 4)
        else:  # a finite fill: uniform rows over blocked keys
            torch.testing.assert_close(rows, torch.full_like(rows, 1 / MASK_DEMO_L), atol=2e-3,
                                       rtol=0)  # fmt: skip
        if fill in ("-1e9", "finfo.min"):
            torch.testing.assert_close(torch.tensor(r.mass[2]), torch.tensor(4 / 6), atol=2e-3,
                                       rtol=0)  # fmt: skip
    assert len(seen) >= 12  # settings look different


def test_refused_setting_is_drawn_not_raised(dashboard):
    dashboard.controls["fill"].value = "-1e9"
    dashboard.controls["dtype"].value = "float16"
    assert dashboard.last_error is None
    assert dashboard.result.error is not None
    assert "PyTorch refused" in dashboard.view.error_text.get_text()
    dashboard.controls["dtype"].value = "bfloat16"  # -1e9 fits in bfloat16
    assert dashboard.result.error is None
    assert not dashboard.view.error_text.get_visible()
    assert all(p.image.get_visible() for p in dashboard.view.panels)


def test_blitted_image_equals_a_full_redraw(dashboard):
    settings = [
        {"causal": True, "padding": "left", "fill": fill,
         "dtype": "float16" if fill == "-1e9" else "float32"}
        for fill in ("0", "-inf", "-1e9")
    ]  # fmt: skip
    assert_blits_match_full_redraws(dashboard, settings)


def test_repr_is_a_fixed_sentence(dashboard):
    assert_repr_is_fixed_sentence(dashboard, MaskDashboard)


# --- the pure functions under the dashboard --------------------------------------------------


def test_mask_setting_matches_attention_and_is_pure():
    g = torch.Generator().manual_seed(7)
    q, k, v = (torch.randn(3, 6, 4, generator=g) for _ in range(3))
    keep = attn_lib.combine_masks(attn_lib.padding_mask([6, 4, 2]).flip(-1), attn_lib.causal_mask(6))
    _, w = attn_lib.scaled_dot_product_attention(q, k, v, keep)
    r = mask_setting((6, 4, 2), causal=True, padding_side="left")
    torch.testing.assert_close(r.weights, w)
    assert torch.equal(r.keep, keep)
    r.weights.zero_()  # a fresh copy: the cache is untouched
    assert mask_setting((6, 4, 2), causal=True, padding_side="left").weights.sum() > 0


def test_mask_setting_fill_zero_leaks():
    r = mask_setting((6, 4, 2), fill="0")
    assert r.mass[0] == 0.0  # no padding in sequence 0
    assert r.mass[1] > 0.1 and r.mass[2] > 0.1
    torch.testing.assert_close(r.row_mass, masked_mass(r.weights, r.keep))


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"lengths": (0, 2, 3)}, ValueError),
        ({"lengths": (7, 2, 3)}, ValueError),
        ({"lengths": ()}, ValueError),
        ({"lengths": (2.0, 3)}, TypeError),
        ({"fill": "-1e10"}, ValueError),
        ({"dtype": "float64"}, ValueError),
        ({"padding_side": "middle"}, ValueError),
        ({"causal": 1}, TypeError),
    ],
)
def test_mask_setting_rejects_bad_arguments(kwargs, error):
    with pytest.raises(error):
        mask_setting(**kwargs)


def test_fill_value_for():
    assert fill_value_for("default", torch.float16) is None
    assert fill_value_for("finfo.min", torch.float16) == -65504.0
    assert fill_value_for("-inf", torch.float32) == float("-inf")
    assert fill_value_for("0", torch.bfloat16) == 0.0
    with pytest.raises(ValueError):
        fill_value_for("-1", torch.float32)
    with pytest.raises(TypeError):
        fill_value_for("0", torch.int64)


def test_keep_from_lengths():
    keep = keep_from_lengths([3, 1], causal=False)
    assert keep.shape == (2, 3, 3)
    assert torch.equal(keep[1], torch.tensor([[True, False, False]] * 3))
    left = keep_from_lengths([3, 1], causal=True, padding_side="left")
    assert torch.equal(left[1], torch.tensor([[False] * 3, [False] * 3, [False, False, True]]))
    assert torch.equal(keep_from_lengths([2, 2], 4, causal=True)[0], attn_lib.causal_mask(4) & (
        torch.arange(4) < 2))  # fmt: skip
    with pytest.raises(ValueError):
        keep_from_lengths([2], padding_side="up")


def test_masked_mass():
    w = torch.tensor([[[0.5, 0.5], [1.0, 0.0]]])
    keep = torch.tensor([[[True, False]]])
    torch.testing.assert_close(masked_mass(w, keep), torch.tensor([[0.5, 0.0]]))
    with pytest.raises(TypeError):
        masked_mass(w, keep.float())


def test_padding_and_side_options_are_what_the_dashboard_offers(dashboard):
    assert control_values(dashboard.controls["padding"])[0] == "right"
    assert set(control_values(dashboard.controls["padding"])) == set(PADDING_SIDES)
    assert set(control_values(dashboard.controls["fill"])) == set(MASK_FILLS)
    assert set(control_values(dashboard.controls["dtype"])) == set(MASK_DTYPES)


# --- the static figures ----------------------------------------------------------------------


def test_static_figures_draw_and_mark_cells():
    with no_new_figures():
        pad = attn_lib.padding_mask([6, 4, 2])
        fig = nb07_masks_views.plot_keep_masks([(pad[1], "row"), (pad[1].expand(6, 6), "broadcast")])
        assert len(fig.axes) == 2
        marks = fig.axes[1].collections[0].get_offsets()  # one "×" per blocked cell
        assert sorted(map(tuple, np.asarray(marks).tolist())) == [
            (float(j), float(i)) for j in (4, 5) for i in range(6)
        ]
        plt.close(fig)

        r = mask_setting((6, 4, 2), causal=True, padding_side="left", fill="-inf")
        fig = nb07_masks_views.plot_mask_setting(r)
        panel_texts = [t.get_text() for t in fig.axes[2].texts]
        assert panel_texts.count("NaN") == 4 * 6  # sequence 2: four NaN rows
        plt.close(fig)

        settings = [
            *(mask_setting((6, 4, 2), causal=True, padding_side="left", fill=f)
              for f in ("default", "-1e9")),
            mask_setting(fill="-1e9", dtype="float16"),
        ]  # fmt: skip
        fig = nb07_masks_views.plot_mask_gallery(settings, 2, ["default", "-1e9", "float16"])
        leak_texts = [t.get_text() for t in fig.axes[1].texts if t.get_text().startswith("×\n")]
        assert len(leak_texts) == 4 * 6  # four uniform rows of blocked keys, weight written
        refused = [t for t in fig.axes[2].texts if t.get_visible() and "overflow" in t.get_text()]
        assert len(refused) == 1
        plt.close(fig)
    with pytest.raises(ValueError):
        nb07_masks_views.plot_mask_gallery(settings, 2, ["one label"])


# --- the exercise checkers -------------------------------------------------------------------


def masked_softmax_with(*, fill=None, invert=False, zero_rows=True, ignore=False, dim=-1):
    def learner(scores, keep):
        if ignore:
            return scores.softmax(dim=-1)
        value = torch.finfo(scores.dtype).min if fill is None else fill
        weights = scores.masked_fill(keep if invert else ~keep, value).softmax(dim=dim)
        if zero_rows:
            weights = weights.masked_fill(~keep.any(dim=-1, keepdim=True), 0.0)
        return weights

    return learner


def with_nan_to_num(scores, keep):
    return scores.masked_fill(~keep, float("-inf")).softmax(dim=-1).nan_to_num(0.0)


def not_written(*args):
    raise NotImplementedError


@pytest.mark.parametrize(
    ("learner", "mistake"),
    [
        (masked_softmax_with(), None),
        (with_nan_to_num, None),
        (not_written, "not_written"),
        (masked_softmax_with(invert=True), "mask_inverted"),
        (masked_softmax_with(invert=True, fill=float("-inf"), zero_rows=False), "mask_inverted"),
        (masked_softmax_with(fill=0.0), "mask_fill_zero"),
        (masked_softmax_with(ignore=True), "mask_ignored"),
        (masked_softmax_with(fill=float("-inf"), zero_rows=False), "nan_rows"),
        (masked_softmax_with(fill=-1e9, zero_rows=False), "fill_overflow"),
        (masked_softmax_with(fill=-1e4, zero_rows=False), "uniform_rows"),
        (masked_softmax_with(zero_rows=False), "uniform_rows"),
        (masked_softmax_with(dim=-2), "rows_not_normalised"),
        (lambda s, k: s, "rows_not_normalised"),
        (lambda s, k: s.sum(), "wrong_shape"),
        (lambda s, k: "weights", "bad_return"),
    ],
)
def test_check_masked_softmax(learner, mistake):
    result = check_masked_softmax(learner, verbose=False)
    assert result.mistake == mistake, result.message
    assert bool(result) == (mistake is None)


def batch_mask_with(mistake=None):
    def learner(lengths, causal):
        L = int(lengths.max())
        positions = torch.arange(L)
        real = positions <= lengths[:, None] if mistake == "off" else positions < lengths[:, None]
        real = real[:, :L]
        tri = torch.ones(L, L, dtype=torch.bool)
        tri = tri.triu() if mistake == "future" else tri.tril()
        pad = {"noun": real, "axis": real[:, :, None],
               "both": real[:, None, :] & real[:, :, None]}.get(mistake, real[:, None, :])  # fmt: skip
        if causal and mistake != "no_causal":
            pad = pad | tri if mistake == "or" else pad & tri
        if mistake == "invert":
            pad = ~pad
        if mistake == "float":
            return pad.float()
        if mistake == "int":
            return pad.int()
        return pad

    return learner


@pytest.mark.parametrize(
    ("mistake", "code"),
    [
        (None, None), ("int", None), ("noun", "mask_not_unsqueezed"), ("axis", "mask_wrong_axis"),
        ("invert", "mask_inverted"), ("or", "mask_or"), ("future", "mask_future"),
        ("no_causal", "mask_causal_ignored"), ("both", "mask_query_rows"),
        ("off", "mask_off_by_one"), ("float", "mask_float"),
    ],
)  # fmt: skip
def test_check_batch_mask(mistake, code):
    result = check_batch_mask(batch_mask_with(mistake), verbose=False)
    assert result.mistake == code, result.message


def test_check_batch_mask_other_answers():
    assert check_batch_mask(not_written, verbose=False).mistake == "not_written"

    def full(lengths, causal):  # (B, L, L) in both cases is fine too
        L = int(lengths.max())
        pad = attn_lib.padding_mask(lengths)
        return attn_lib.combine_masks(pad, attn_lib.causal_mask(L)) if causal else pad.expand(
            -1, L, -1
        )

    assert check_batch_mask(full, verbose=False)
    assert check_batch_mask(lambda lengths, c: [1], verbose=False).mistake == "bad_return"
    assert check_batch_mask(lambda n, c: torch.ones(5, dtype=torch.bool), verbose=False).mistake == (
        "wrong_shape"
    )


def masked_loss_with(kind):
    def learner(token_loss, lengths):
        real = torch.arange(token_loss.shape[1]) < lengths[:, None]
        zeroed = torch.where(real, token_loss, 0.0)
        return {
            "right": lambda: token_loss[real].mean(),
            "where": lambda: zeroed.sum() / real.sum(),
            "float": lambda: float(token_loss[real].mean()),
            "mean_all": lambda: token_loss.mean(),
            "multiply": lambda: (token_loss * real).sum() / real.sum(),
            "mean_of_means": lambda: (zeroed.sum(1) / real.sum(1)).mean(),
            "divide_by_all": lambda: zeroed.sum() / token_loss.numel(),
            "inverted": lambda: token_loss[~real].mean(),
            "sum": lambda: token_loss[real].sum(),
        }[kind]()

    return learner


@pytest.mark.parametrize(
    ("kind", "code"),
    [
        ("right", None), ("where", None), ("float", None), ("mean_all", "mean_all"),
        ("multiply", "nan_through_mask"), ("mean_of_means", "mean_of_means"),
        ("divide_by_all", "divide_by_all"), ("inverted", "mask_inverted"),
        ("sum", "sum_not_mean"),
    ],
)  # fmt: skip
def test_check_masked_mean_loss(kind, code):
    result = check_masked_mean_loss(masked_loss_with(kind), verbose=False)
    assert result.mistake == code, result.message


def test_check_masked_mean_loss_other_answers():
    assert check_masked_mean_loss(not_written, verbose=False).mistake == "not_written"
    assert check_masked_mean_loss(lambda t, n: "1", verbose=False).mistake == "bad_return"
    assert check_masked_mean_loss(lambda t, n: 0.0, verbose=False).mistake == "unknown"


def test_sdpa_gives_zero_rows_like_attn_lib():
    """The claim the notebook and the checker rely on: SDPA zeroes rows with no allowed key."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 5, 3, generator=g) for _ in range(3))
    keep = attn_lib.combine_masks(attn_lib.padding_mask([5, 2]).flip(-1), attn_lib.causal_mask(5))
    out, _ = attn_lib.scaled_dot_product_attention(q, k, v, keep)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=keep))
    assert not math.isnan(float(out.sum()))
