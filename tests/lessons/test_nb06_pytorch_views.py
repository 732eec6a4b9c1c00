"""Notebook 06: the mask-convention pure function, its figure and its dashboard, headlessly."""

from __future__ import annotations

import itertools
import math

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers import (
    SharedDashboard,
    assert_no_nan,
    assert_png_fits_figure,
    assert_repr_is_fixed_sentence,
    decode,
    each_value,
    no_new_figures,
    open_dashboard,
    png_of,
)

import attn_lib
from attn_lib.lessons import nb06_pytorch, nb06_pytorch_views
from attn_lib.lessons._dashboard import control_values
from attn_lib.lessons.nb06_pytorch_views import MaskConventionDashboard
from attn_lib.reference import from_multihead_attention

pytestmark = pytest.mark.usefixtures("headless_backend")
CONVENTIONS = list(nb06_pytorch.MASK_CONVENTIONS)
MASKS = list(nb06_pytorch.CONVENTION_MASK_CHOICES)
# Conventions that hand every function the mask converted correctly.
CORRECT = ("keep", "mha_attn_mask", "sdpa_bool", "sdpa_additive")



@pytest.fixture(scope="module")
def shared_dashboard(headless_backend):
    yield from SharedDashboard.fixture(MaskConventionDashboard)


@pytest.fixture
def dashboard(shared_dashboard):
    """The module's MaskConventionDashboard, back in the setting it was built with."""
    yield from shared_dashboard.use()


# --- the setup --------------------------------------------------------------------------------


def test_article_mha_example_is_the_articles_order_and_leaves_the_rng_alone():
    torch.manual_seed(0)
    expected_next = torch.randn(3)
    torch.manual_seed(0)
    ex = nb06_pytorch.article_mha_example()
    torch.testing.assert_close(torch.randn(3), expected_next)

    torch.manual_seed(42)  # the article: seed, x, its module, then PyTorch's module
    x = torch.randn(2, 4, 8)
    attn_lib.SingleHeadAttention(8, 8)
    mha = torch.nn.MultiheadAttention(8, 1, bias=False, batch_first=True)
    assert torch.equal(ex.x, x)
    assert torch.equal(ex.mha.in_proj_weight, mha.in_proj_weight)
    assert torch.equal(ex.mha.out_proj.weight, mha.out_proj.weight)
    loaded = from_multihead_attention(mha)
    for name in ("W_Q", "W_K", "W_V"):
        assert torch.equal(getattr(ex.model, name).weight, getattr(loaded, name).weight)
    with torch.no_grad():
        torch.testing.assert_close(ex.Q, loaded.W_Q(x))
        torch.testing.assert_close(ex.V, loaded.W_V(x))


def test_convention_keep_masks():
    assert nb06_pytorch.convention_keep_mask("none") is None
    assert nb06_pytorch.convention_keep_mask("padding").shape == (2, 1, 4)
    assert torch.equal(nb06_pytorch.convention_keep_mask("causal"), attn_lib.causal_mask(4))
    full = nb06_pytorch.convention_keep_mask("fully masked row")
    assert full.shape == (2, 4, 4)
    assert full[0].all()
    assert torch.equal(full[1].any(dim=-1), torch.tensor([True, True, False, False]))
    with pytest.raises(ValueError, match="mask must be one of"):
        nb06_pytorch.convention_keep_mask("future")


# --- the pure function ------------------------------------------------------------------------


def expected_lib_weights(mask: str) -> torch.Tensor:
    ex = nb06_pytorch.article_mha_example()
    _, w = attn_lib.scaled_dot_product_attention(ex.Q, ex.K, ex.V, nb06_pytorch.convention_keep_mask(mask))
    return w  # (B, L, L)


@pytest.mark.parametrize(
    ("convention", "mask", "b"), list(itertools.product(CONVENTIONS, MASKS, (0, 1)))
)
def test_convention_setting_matches_direct_computation(convention, mask, b):
    r = nb06_pytorch.convention_setting(convention, mask, b)
    ref = expected_lib_weights(mask)[b]
    torch.testing.assert_close(r.weights["attn_lib"], ref)
    assert r.max_abs_diff["attn_lib"] == 0.0 and r.nan_rows["attn_lib"] == 0
    assert_no_nan(r.weights["SDPA"])  # SDPA never gives NaN
    rows_with_key = r.keep.any(dim=-1)  # (L,)
    if (
        convention in CORRECT
        or mask == "none"
        or (convention == "mha_key_padding" and mask == "padding")
    ):
        # Every function got the intended mask: all agree on every row that has a key,
        # attn_lib and SDPA also on the others (zeros).
        assert r.error is None
        torch.testing.assert_close(r.weights["SDPA"], ref)
        torch.testing.assert_close(r.weights["MHA"][rows_with_key], ref[rows_with_key])
        assert r.max_abs_diff["SDPA"] <= 1e-6 and r.max_abs_diff["MHA"] <= 1e-6
        # MHA returns NaN exactly on the rows with no allowed key.
        assert r.nan_rows["MHA"] == int((~rows_with_key).sum())
        assert torch.isnan(r.weights["MHA"][~rows_with_key]).all()
    elif convention == "mha_key_padding":  # causal or per-query: not expressible
        assert r.error is not None and "key_padding_mask" in r.error
        assert r.weights["MHA"] is None and math.isnan(r.max_abs_diff["MHA"])
        torch.testing.assert_close(r.weights["SDPA"], ref)
        assert not r.passed_blocked.any()
        assert "not possible" in r.passed_name
    else:  # inverted by mistake: both PyTorch functions are visibly wrong
        assert convention == "inverted"
        assert r.error is None
        sdpa_err = (r.weights["SDPA"] - ref).abs().max()
        assert sdpa_err > 0.1
        mha = r.weights["MHA"]
        assert r.nan_rows["MHA"] > 0 or (mha - ref).abs().max() > 0.1
        # what MHA reads as blocked is exactly what should have been kept
        assert torch.equal(r.passed_blocked, r.keep)


def test_convention_setting_what_is_passed():
    r = nb06_pytorch.convention_setting("mha_attn_mask", "padding", 1)
    assert r.passed_text[0] == ("False", "False", "True", "True")  # True = blocked
    r = nb06_pytorch.convention_setting("keep", "padding", 1)
    assert r.passed_text[0] == ("True", "True", "False", "False")
    assert torch.equal(r.passed_blocked, ~r.keep)
    r = nb06_pytorch.convention_setting("sdpa_additive", "causal", 0)
    assert r.passed_text[0] == ("0", "-inf", "-inf", "-inf")
    r = nb06_pytorch.convention_setting("mha_key_padding", "padding", 1)
    assert all(row == ("False", "False", "True", "True") for row in r.passed_text)
    r = nb06_pytorch.convention_setting("keep", "none", 0)
    assert r.passed_name == "no mask passed"
    assert all(t == "" for row in r.passed_text for t in row)
    assert nb06_pytorch.convention_setting("keep", "padding", 1).key_labels == (
        "0", "1", "2 (pad)", "3 (pad)",
    )  # fmt: skip
    assert nb06_pytorch.convention_setting("keep", "padding", 0).key_labels == ("0", "1", "2", "3")


def test_fully_masked_row_values():
    r = nb06_pytorch.convention_setting("keep", "fully masked row", 1)
    torch.testing.assert_close(r.weights["attn_lib"][2:], torch.zeros(2, 4))
    torch.testing.assert_close(r.weights["SDPA"][2:], torch.zeros(2, 4))
    assert torch.isnan(r.weights["MHA"][2:]).all()
    assert r.nan_rows == {"attn_lib": 0, "MHA": 2, "SDPA": 0}
    inverted = nb06_pytorch.convention_setting("inverted", "padding", 0)  # full sequence: all blocked
    assert inverted.nan_rows["MHA"] == 4 and math.isnan(inverted.max_abs_diff["MHA"])
    torch.testing.assert_close(inverted.weights["SDPA"], torch.zeros(4, 4))


def test_convention_setting_sdpa_weights_are_the_identity_trick():
    ex = nb06_pytorch.article_mha_example()
    keep = nb06_pytorch.convention_keep_mask("causal")
    eye = torch.eye(4).expand(2, 4, 4)
    with torch.no_grad():
        direct = F.scaled_dot_product_attention(ex.Q, ex.K, eye, attn_mask=keep)
    r = nb06_pytorch.convention_setting("sdpa_bool", "causal", 1)
    assert torch.equal(r.weights["SDPA"], direct[1])


def test_convention_setting_returns_copies():
    first = nb06_pytorch.convention_setting("keep", "padding", 1)
    first.weights["attn_lib"].zero_()
    first.keep.zero_()
    again = nb06_pytorch.convention_setting("keep", "padding", 1)
    assert again.weights["attn_lib"].sum() > 0 and again.keep.any()


@pytest.mark.parametrize(
    "args",
    [("bogus", "none", 0), ("keep", "future", 0), ("keep", "none", 2), ("keep", "none", True)],
)
def test_convention_setting_refuses_bad_settings(args):
    with pytest.raises(ValueError):
        nb06_pytorch.convention_setting(*args)


# --- the figure ---------------------------------------------------------------------------------


def test_static_figures_draw_and_mark_nan():
    with no_new_figures():
        r = nb06_pytorch.convention_setting("keep", "fully masked row", 1)
        fig = nb06_pytorch_views.plot_convention_setting(r)
        fig.canvas.draw()
        assert len(fig.axes) == 5  # mask, three heatmaps, colorbar
        titles = [ax.get_title() for ax in fig.axes[:4]]
        assert "NaN in 2 rows" in titles[2]
        assert titles[1].startswith("attn_lib") and titles[3].startswith("SDPA")
        plt.close(fig)
        gallery = nb06_pytorch_views.plot_convention_gallery(
            [r, nb06_pytorch.convention_setting("mha_key_padding", "causal", 1)]
        )
        assert len(gallery.axes) == 10
        plt.close(gallery)
    with pytest.raises(ValueError):
        nb06_pytorch_views.plot_convention_gallery([])


# --- the dashboard ------------------------------------------------------------------------------


def assert_shows(dash: MaskConventionDashboard, convention: str, mask: str, sequence: int) -> None:
    """The dashboard holds and draws exactly what the pure function computes."""
    expected = nb06_pytorch.convention_setting(convention, mask, sequence)
    assert dash.values == {"convention": convention, "mask": mask, "sequence": sequence}
    assert dash.last_error is None and dash.status.value == ""
    view = dash.view
    for name in nb06_pytorch.IMPLEMENTATIONS:
        got, want = dash.result.weights[name], expected.weights[name]
        if want is None:
            assert got is None
            assert np.isnan(view.heatmaps[name].image.get_array().filled(np.nan)).all()
            assert view.messages[name].get_text() != ""
            continue
        assert torch.equal(got.isnan(), want.isnan())
        torch.testing.assert_close(got, want, equal_nan=True, rtol=0, atol=0)
        shown = np.asarray(view.heatmaps[name].image.get_array().filled(np.nan))
        np.testing.assert_array_equal(shown, want.numpy())
        nan = want.isnan().numpy()
        patches = np.array([[p.get_visible() for p in row] for row in view.nan_patches[name]])
        np.testing.assert_array_equal(patches, nan)  # NaN cells, and only those, are hatched
        texts = np.array([[t.get_text() for t in row] for row in view.heatmaps[name].texts])
        assert (texts[nan] == "NaN").all()
        # NaN only where the reader asked for it: MHA with a row it reads as fully blocked
        if nan.any():
            assert name == "MHA" and (mask == "fully masked row" or convention == "inverted")
    overlay = np.asarray(view.heatmaps["attn_lib"].overlay.get_array())
    np.testing.assert_array_equal(overlay[..., 3] == 1.0, ~expected.keep.numpy())
    mask_texts = [[t.get_text() for t in row] for row in view.mask_texts]
    assert mask_texts == [list(row) for row in expected.passed_text]
    assert dash.figure.get_suptitle() == expected.title
    labels = [t.get_text() for t in view.axes[1].get_xticklabels()]
    assert labels == list(expected.key_labels)
    assert_png_fits_figure(dash)


def test_default_state(dashboard):
    assert_shows(dashboard, "keep", "padding", 1)
    assert set(dashboard.controls) == {"convention", "mask", "sequence"}
    labels = [o[0] for o in dashboard.controls["convention"].options]
    assert labels == list(nb06_pytorch.MASK_CONVENTIONS.values())
    assert "inverted by mistake" in labels


@pytest.mark.parametrize(
    ("name", "values"), [("convention", CONVENTIONS), ("mask", MASKS), ("sequence", [0, 1])]
)
def test_each_control_each_value(dashboard, name, values):
    assert sorted(control_values(dashboard.controls[name])) == sorted(values)  # every option
    image_artist = dashboard.view.heatmaps["MHA"].image
    previous = dashboard.result
    for _, previous_png in each_value(dashboard, name, back_to_start=True):  # figure reused...
        assert_shows(dashboard, **dashboard.values)
        assert dashboard.view.heatmaps["MHA"].image is image_artist  # ...and its artists
        if dashboard.result.title != previous.title:
            assert png_of(dashboard) != previous_png
        previous = dashboard.result


def test_every_combination_and_cached_panels_equal_a_fresh_render(dashboard):
    seen = set()
    for convention, mask, sequence in itertools.product(CONVENTIONS, MASKS, (0, 1)):
        dashboard.set(convention=convention, mask=mask, sequence=sequence)
        assert_shows(dashboard, convention, mask, sequence)
        cached = decode(png_of(dashboard))
        seen.add(png_of(dashboard))
        if (convention, mask) in {("inverted", "causal"), ("sdpa_additive", "padding"),
                                  ("mha_key_padding", "causal"), ("keep", "none")}:  # fmt: skip
            renderer = dashboard._renderer
            renderer._cache.clear()
            renderer._backgrounds.clear()
            fresh = decode(dashboard.to_png())
            assert renderer.redrawn == [0, 1, 2, 3]
            np.testing.assert_array_equal(cached, fresh)
    assert len(seen) == len(CONVENTIONS) * len(MASKS) * 2  # every setting looks different


@pytest.fixture
def fresh_dashboard(headless_backend):
    """A dashboard of its own, caches cold (the shared one's are warm from other tests)."""
    yield from open_dashboard(MaskConventionDashboard)


def test_panel_cache_redraws_only_what_changed(fresh_dashboard):
    dashboard = fresh_dashboard
    dashboard.controls["convention"].value = "mha_attn_mask"  # same weights, other mask panel
    assert dashboard._renderer.redrawn == [0]
    dashboard.controls["convention"].value = "keep"  # seen before: nothing redrawn
    assert dashboard._renderer.redrawn == []


def test_repr_is_a_fixed_sentence(dashboard):
    assert_repr_is_fixed_sentence(dashboard, MaskConventionDashboard)


def test_bad_initial_setting_is_refused():
    with no_new_figures(), pytest.raises(ValueError):
        MaskConventionDashboard(convention="bogus")
