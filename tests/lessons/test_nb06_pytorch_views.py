"""Notebook 06: the mask-convention pure function, its figure and its dashboard, headlessly."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers import (
    assert_blits_match_full_redraws,
    assert_png_fits_figure,
    assert_repr_is_fixed_sentence,
    dashboard_fixtures,
    decode,
    no_new_figures,
    png_of,
)

import attn_lib
from attn_lib.lessons import nb06_pytorch, nb06_pytorch_views
from attn_lib.lessons._dashboard import control_values
from attn_lib.lessons.nb06_pytorch_views import MaskConventionDashboard
from attn_lib.reference import from_multihead_attention

pytestmark = pytest.mark.usefixtures("headless_backend")
setting = nb06_pytorch.convention_setting


shared_dashboard, dashboard = dashboard_fixtures(MaskConventionDashboard)


# --- the pure function ------------------------------------------------------------------------


def test_the_setup_is_the_articles_order_and_leaves_the_rng_alone():
    torch.manual_seed(0)
    expected_next = torch.randn(3)
    torch.manual_seed(0)
    x, mha, (_, _, V) = nb06_pytorch._article_setup()
    torch.testing.assert_close(torch.randn(3), expected_next)
    torch.manual_seed(42)  # the article: seed, x, its module, then PyTorch's module
    x_article = torch.randn(2, 4, 8)
    attn_lib.SingleHeadAttention(8, 8)
    mha_article = torch.nn.MultiheadAttention(8, 1, bias=False, batch_first=True)
    assert torch.equal(x, x_article)
    assert torch.equal(mha.in_proj_weight, mha_article.in_proj_weight)
    with torch.no_grad():
        torch.testing.assert_close(V, from_multihead_attention(mha).W_V(x))


def lib_weights(mask: str, b: int) -> torch.Tensor:
    _, _, (Q, K, V) = nb06_pytorch._article_setup()
    return attn_lib.scaled_dot_product_attention(Q, K, V, nb06_pytorch._keep_mask(mask))[1][b]


@pytest.mark.parametrize(
    ("convention", "mask", "b"),
    [("keep", "padding", 1), ("mha_attn_mask", "causal", 0), ("sdpa_additive", "padding", 1),
     ("sdpa_bool", "none", 0)],
)  # fmt: skip
def test_converted_masks_agree_with_attn_lib(convention, mask, b):
    r = setting(convention, mask, b)
    ref = lib_weights(mask, b)
    for name in nb06_pytorch.IMPLEMENTATIONS:
        torch.testing.assert_close(r.weights[name], ref)
        assert r.nan_rows[name] == 0 and r.max_abs_diff[name] <= 16 * 2**-23


def test_a_row_with_no_allowed_key_is_nan_in_mha_and_zero_elsewhere():
    r = setting("keep", "fully masked row", 1)
    assert r.nan_rows == {"attn_lib": 0, "MHA": 2, "SDPA": 0}
    assert torch.isnan(r.weights["MHA"][2:]).all()
    torch.testing.assert_close(r.weights["SDPA"][2:], torch.zeros(2, 4))
    torch.testing.assert_close(r.weights["MHA"][:2], r.weights["attn_lib"][:2])


def test_inverted_masks_are_visibly_wrong():
    r = setting("inverted", "causal", 0)
    assert r.nan_rows["MHA"] == 1 and r.max_abs_diff["SDPA"] > 0.1
    assert torch.equal(r.passed_blocked, r.keep)  # MHA blocks exactly what should be kept
    _, _, (Q, K, _) = nb06_pytorch._article_setup()
    with torch.no_grad():  # SDPA's weights are its output with value = I
        direct = F.scaled_dot_product_attention(
            Q, K, torch.eye(4).expand(2, 4, 4), attn_mask=attn_lib.to_multihead_attn_mask(r.keep))  # fmt: skip
    assert torch.equal(r.weights["SDPA"], direct[0])
    full = setting("inverted", "padding", 0)  # no padding in sequence 0: every key blocked
    assert full.nan_rows["MHA"] == 4 and math.isnan(full.max_abs_diff["MHA"])
    torch.testing.assert_close(full.weights["SDPA"], torch.zeros(4, 4))


def test_what_is_passed_reads_as_in_code():
    blocked = setting("mha_attn_mask", "padding", 1)
    assert blocked.passed_text[0] == ("False", "False", "True", "True")
    assert setting("keep", "padding", 1).passed_text[0] == ("True", "True", "False", "False")
    assert setting("sdpa_additive", "causal", 0).passed_text[0] == ("0", "-inf", "-inf", "-inf")
    none = setting("keep", "none", 0)
    assert none.passed_name == "no mask passed" and not any(map(any, none.passed_text))
    assert setting("keep", "padding", 1).key_labels == ("0", "1", "2 (pad)", "3 (pad)")


@pytest.mark.parametrize("args", [("bogus", "none", 0), ("keep", "future", 0), ("keep", "none", 2),
                                  ("keep", "none", True)])  # fmt: skip
def test_bad_settings_are_refused(args):
    with pytest.raises(ValueError):
        setting(*args)


# --- the titles and the figure ------------------------------------------------------------------


def test_a_title_never_calls_nan_agreement():
    verdict = nb06_pytorch_views.verdict
    assert verdict(setting("keep", "padding", 1), "MHA").startswith("≤ 16 ulps")
    partial = verdict(setting("keep", "fully masked row", 1), "MHA")
    assert partial.startswith("NaN in 2 rows; the rest:") and "≤ 16 ulps" in partial
    assert "ulps" not in verdict(setting("inverted", "padding", 0), "MHA")  # all NaN
    assert "differs by up to 1.0000" in verdict(setting("inverted", "causal", 0), "SDPA")


def test_gallery_draws_one_row_per_setting():
    with no_new_figures():
        fig = nb06_pytorch_views.plot_convention_gallery([setting("keep", "fully masked row", 1)])
        assert len(fig.axes) == 5  # mask, three heatmaps, colorbar
        assert "NaN in 2 rows" in fig.axes[2].get_title()
        assert fig.axes[2].texts[-1].get_text() == "NaN"  # cell (3, 3) of MHA's heatmap
        plt.close(fig)


# --- the dashboard ------------------------------------------------------------------------------


def assert_shows(dash: MaskConventionDashboard, convention: str, mask: str, sequence: int) -> None:
    """The dashboard draws exactly what the pure function computes."""
    expected = setting(convention, mask, sequence)
    assert dash.values == {"convention": convention, "mask": mask, "sequence": sequence}
    assert dash.last_error is None and dash.result is expected
    for name in nb06_pytorch.IMPLEMENTATIONS:
        shown = np.asarray(dash.view.heatmaps[name].image.get_array().filled(np.nan))
        np.testing.assert_array_equal(shown, expected.weights[name].numpy())
    texts = [[t.get_text() for t in row] for row in dash.view.mask_texts]
    assert texts == [list(row) for row in expected.passed_text]
    assert dash.figure.get_suptitle().startswith(f"mask: {mask} · passed as:")
    assert_png_fits_figure(dash)


def test_default_state_and_repr(dashboard):
    assert_shows(dashboard, "keep", "padding", 1)
    assert sorted(control_values(dashboard.controls["convention"])) == sorted(
        nb06_pytorch.MASK_CONVENTIONS)  # fmt: skip
    assert_repr_is_fixed_sentence(dashboard, MaskConventionDashboard)


@pytest.mark.parametrize(
    "change",
    [{"convention": "inverted"}, {"mask": "fully masked row", "sequence": 0}, {"mask": "none"}],
)  # fmt: skip
def test_a_control_changes_the_figure_as_computed(dashboard, change):
    before = png_of(dashboard)
    dashboard.set(**change)
    assert_shows(dashboard, **dashboard.values)
    assert png_of(dashboard) != before


def test_blits_and_cached_images_match_full_redraws(dashboard):
    # a NaN row, weights on blocked cells, other key labels: every kind of change at once
    assert_blits_match_full_redraws(dashboard, [{"convention": "inverted", "mask": "causal",
                                                 "sequence": 0}])  # fmt: skip
    cached = decode(png_of(dashboard))
    dashboard._pngs.clear()
    np.testing.assert_array_equal(decode(dashboard.to_png()), cached)


def test_panels_from_the_tile_cache_are_the_panels_drawn_afresh(dashboard):
    renderer = dashboard._renderer
    moves = [{"mask": "fully masked row", "sequence": 1}, {"convention": "inverted"},
             {"mask": "causal", "sequence": 0}, {"convention": "sdpa_additive"}]  # fmt: skip
    for move in moves:  # draws each setting's panels, and keeps them
        dashboard.set(**move)
    for move in [*moves[-2::-1], {"convention": "keep", "mask": "padding", "sequence": 1}]:
        dashboard._pngs.clear()
        tiles = dict(renderer._tiles)
        dashboard.set(**move)  # every panel from the cache
        assert renderer._tiles.keys() == tiles.keys()
        renderer._tiles.clear()
        dashboard._pngs.clear()
        np.testing.assert_array_equal(decode(dashboard.to_png()), decode(png_of(dashboard)))
        renderer._tiles.update(tiles)


def test_bad_initial_setting_is_refused():
    with no_new_figures(), pytest.raises(ValueError):
        MaskConventionDashboard(convention="bogus")
