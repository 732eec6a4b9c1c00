"""The CJK font subset attn_lib bundles for the Chinese characters in its figures."""

from __future__ import annotations

import tomllib
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from helpers import load_tool
from matplotlib import font_manager
from matplotlib.ft2font import FT2Font

from attn_lib.lessons import _figures
from attn_lib.lessons import nb01_retrieval_views as nb01_views

pytestmark = pytest.mark.usefixtures("headless_backend")
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def figure_characters() -> str:
    """Every CJK character of the figures' sources, scanned as tools/build_cjk_font.py does."""
    chars = load_tool("build_cjk_font").cjk_characters()
    assert set("我爱你") <= set(chars)  # the scan finds notebook 01's sentences
    return chars


def missing_glyph_warnings(fig) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig.canvas.draw()
    return [str(w.message) for w in caught if "missing from font" in str(w.message)]


@pytest.mark.parametrize("path", _figures.CJK_FONTS, ids=lambda p: p.stem)
def test_the_bundled_fonts_have_every_cjk_character_of_the_figures(path, figure_characters):
    charmap = FT2Font(str(path)).get_charmap()
    missing = "".join(c for c in figure_characters if ord(c) not in charmap)
    assert not missing, (
        f"{missing} appear in attn_lib or a notebook's code but not in {path.name}: "
        "rebuild the subsets with tools/build_cjk_font.py"
    )


def test_cjk_text_draws_without_a_missing_glyph_warning(figure_characters, caplog):
    fig = nb01_views.plot_heatmaps(
        [(torch.full((3, 3), 1 / 3), list("我爱你"), list("你爱我"), "我爱你")],
        suptitle=f"every character: {figure_characters}",
    )
    fig.text(0.0, 0.0, f"bold: {figure_characters}", fontweight="bold")
    try:
        with caplog.at_level("WARNING", logger="matplotlib.font_manager"):
            assert missing_glyph_warnings(fig) == []
        assert caplog.messages == []  # e.g. "Failed to find font weight bold", in a cell's output
    finally:
        plt.close(fig)


def test_a_character_outside_the_subset_is_still_reported():
    """The check above can fail: a character the subset lacks warns as before."""
    if set(plt.rcParams["font.family"]) & set(_figures.SYSTEM_CJK_FAMILIES):
        pytest.skip("a full CJK font of this system draws every character")
    fig = plt.figure()
    fig.text(0.5, 0.5, "猫")
    try:
        assert len(missing_glyph_warnings(fig)) == 1
    finally:
        plt.close(fig)


def test_latin_text_keeps_the_series_font():
    assert plt.rcParams["font.family"][-1] == _figures.CJK_FAMILY  # a fallback, last
    regular = Path(font_manager.findfont(font_manager.FontProperties()))
    assert regular.name == "DejaVuSans.ttf"
    pixels = []
    for family in (["sans-serif"], plt.rcParams["font.family"]):
        fig = plt.figure(figsize=(3, 1), dpi=80)
        fig.text(0.05, 0.4, "query · key → weight 0.25", family=family)
        fig.canvas.draw()
        pixels.append(np.asarray(fig.canvas.buffer_rgba()).copy())
        plt.close(fig)
    np.testing.assert_array_equal(pixels[0], pixels[1])


def test_the_font_ships_in_the_package_with_its_licence():
    fonts = _figures.CJK_FONTS[0].parent
    licence = (fonts / "OFL.txt").read_text(encoding="utf-8")
    assert "SIL OPEN FONT LICENSE Version 1.1" in licence and "Reserved Font Name" in licence
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    globs = config["tool"]["setuptools"]["package-data"]["attn_lib.lessons"]
    shipped = {p for g in globs for p in fonts.parent.glob(g)}
    assert {*_figures.CJK_FONTS, fonts / "OFL.txt"} <= shipped


def test_a_full_system_cjk_font_comes_before_the_subset():
    assert _figures.cjk_fallbacks({"DejaVu Sans"}) == [_figures.CJK_FAMILY]
    found = _figures.cjk_fallbacks({"DejaVu Sans", "Microsoft YaHei", "Noto Sans CJK SC"})
    assert found == ["Noto Sans CJK SC", _figures.CJK_FAMILY]
