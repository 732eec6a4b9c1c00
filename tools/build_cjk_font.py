#!/usr/bin/env python3
"""Build the CJK font subset that attn_lib bundles for the Chinese characters in its figures.

Usage (maintainers only, from anywhere; needs fontTools, which matplotlib already depends on):

    sudo apt-get install fonts-noto-cjk        # Debian/Ubuntu: the source font
    python tools/build_cjk_font.py             # writes attn_lib/lessons/fonts/*
    python tools/build_cjk_font.py --list      # only print the characters it would keep

Source fonts: Noto Sans CJK SC Regular and Bold (Adobe's Source Han Sans under Google's name),
version 2.004, the "SC" faces of ``NotoSansCJK-Regular.ttc`` and ``NotoSansCJK-Bold.ttc`` from
Debian's ``fonts-noto-cjk`` (1:20220127+repack1-1; upstream
https://github.com/googlefonts/noto-cjk), licensed under the SIL Open Font License 1.1; the
licence text is taken from that package's copyright file. ``--source-dir`` takes another
directory holding the two collections. Bold is there because some figures draw bold text
(matplotlib would otherwise log "Failed to find font weight bold" into the notebook's output).

Character set: every CJK character (ideographs, CJK punctuation, full-width forms; ``CJK``
below) that occurs in the library's sources (``attn_lib/**/*.py``) or in the code cells of the
notebooks (``notebooks/**/*.ipynb``): that is where every figure's text comes from, the
article's sentences included once a figure quotes them. tests/test_cjk_font.py scans the same
way and fails, naming this script, when a character is missing from the bundled subset.

Output, in ``attn_lib/lessons/fonts/``: ``AttnLibCJK-Regular.otf`` and ``AttnLibCJK-Bold.otf``
(outlines of those characters only, no hinting, no OpenType layout features, no vertical
metrics: a few KB each) and ``OFL.txt`` (the copyright notice and the licence). The OFL counts
a subset as a Modified Version, so it gets its own family name, "AttnLib CJK": it never poses
as the full Noto font (nor collides with an installed one in matplotlib's font list) and uses
no Reserved Font Name. The build is deterministic: same source fonts and characters, same bytes.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FONTS = REPO / "attn_lib" / "lessons" / "fonts"
SOURCE_DIR = Path("/usr/share/fonts/opentype/noto")
SOURCE_FAMILY = "Noto Sans CJK SC"
FAMILY = "AttnLib CJK"
WEIGHTS = ("Regular", "Bold")  # NotoSansCJK-<weight>.ttc -> AttnLibCJK-<weight>.otf
# CJK radicals, CJK symbols and punctuation, extension A, unified and compatibility ideographs,
# half-width and full-width forms: the characters the series' Latin font (DejaVu Sans) lacks.
CJK = re.compile("[\u2e80-\u2fdf\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]")
COPYRIGHT = "Copyright 2014-2021 Adobe (http://www.adobe.com/), with Reserved Font Name 'Source'."
LICENSE_URL = "https://openfontlicense.org"


def figure_sources(repo: Path = REPO) -> dict[str, str]:
    """Relative path -> text of every source a figure's text can come from."""
    texts = {
        p.relative_to(repo).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted((repo / "attn_lib").rglob("*.py"))
    }
    for p in sorted((repo / "notebooks").rglob("*.ipynb")):
        if any(part.startswith(".") for part in p.relative_to(repo).parts):
            continue  # .ipynb_checkpoints
        cells = json.loads(p.read_text(encoding="utf-8"))["cells"]
        code = ("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        texts[p.relative_to(repo).as_posix()] = "\n".join(code)
    return texts


def cjk_characters(repo: Path = REPO) -> str:
    """The CJK characters of ``figure_sources``, sorted, each once."""
    return "".join(sorted({c for text in figure_sources(repo).values() for c in CJK.findall(text)}))


def licence_text() -> str:
    """OFL.txt: what the file is, the copyright notice, and the licence (from Debian's copy)."""
    debian = Path("/usr/share/doc/fonts-noto-cjk/copyright").read_text(encoding="utf-8")
    body = debian.split("License: SIL-1.1\n", 2)[2].split("\nLicense: ", 1)[0]
    lines = [line[1:] for line in body.rstrip().splitlines()]  # drop the one-space indent
    licence = "\n".join("" if line == "." else line for line in lines)
    return (
        f"AttnLibCJK-Regular.otf and AttnLibCJK-Bold.otf (family {FAMILY}) are subsets of\n"
        f"{SOURCE_FAMILY} Regular and Bold made by tools/build_cjk_font.py; they keep only the\n"
        "CJK characters that the figures of attn_lib use.\n\n"
        f"{COPYRIGHT}\n"
        f"This Font Software is licensed under the SIL Open Font License, Version 1.1.\n"
        f"This license is copied below, and is also available with a FAQ at: {LICENSE_URL}\n\n"
        f"{licence}\n"
    )


def build(source: Path, weight: str, chars: str) -> Path:
    """Subset the SC face of the collection ``source`` to ``chars``, rename it, write it."""
    from fontTools import subset  # a build-time tool only: attn_lib never imports fontTools
    from fontTools.ttLib import TTCollection, TTFont

    faces = TTCollection(source, lazy=True).fonts
    number = next(i for i, f in enumerate(faces) if f["name"].getDebugName(1) == SOURCE_FAMILY)
    font = TTFont(source, fontNumber=number, recalcTimestamp=False)
    options = subset.Options()
    options.layout_features = []  # isolated ideographs need no substitution or positioning
    options.hinting = False
    options.drop_tables += ["BASE", "VORG", "vhea", "vmtx"]
    options.name_IDs = [0, 5]  # copyright, version; the names are set below
    subsetter = subset.Subsetter(options)
    subsetter.populate(text=chars)
    subsetter.subset(font)
    version = font["name"].getDebugName(5)
    postscript = f"AttnLibCJK-{weight}"
    names = {
        1: FAMILY,
        2: weight,
        3: f"{postscript};subset of {SOURCE_FAMILY} {weight} {version.split(';')[0]}",
        4: f"{FAMILY} {weight}",
        6: postscript,
        13: "This Font Software is licensed under the SIL Open Font License, Version 1.1.",
        14: LICENSE_URL,
    }
    for name_id, text in names.items():
        font["name"].setName(text, name_id, 3, 1, 0x409)
    cff = font["CFF "].cff
    cff.fontNames = [postscript]
    top = cff.topDictIndex[0]
    top.FamilyName, top.FullName = FAMILY, f"{FAMILY} {weight}"
    path = FONTS / f"{postscript}.otf"
    font.save(path)
    return path


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source-dir", type=Path, default=SOURCE_DIR, help=f"default {SOURCE_DIR}")
    parser.add_argument("--list", action="store_true", help="only print the characters")
    args = parser.parse_args(argv)
    chars = cjk_characters()
    print(f"{len(chars)} CJK characters in the figures' sources: {chars}")
    if args.list:
        return 0
    sources = [args.source_dir / f"NotoSansCJK-{weight}.ttc" for weight in WEIGHTS]
    if not all(source.exists() for source in sources):
        names = " and ".join(str(source) for source in sources)
        print(f"{names} not found: apt-get install fonts-noto-cjk, or pass --source-dir.")
        return 1
    FONTS.mkdir(parents=True, exist_ok=True)
    for source, weight in zip(sources, WEIGHTS, strict=True):
        path = build(source, weight, chars)
        print(f"wrote {path.relative_to(REPO)} ({path.stat().st_size:,} bytes)")
    (FONTS / "OFL.txt").write_text(licence_text(), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
