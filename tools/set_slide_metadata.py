#!/usr/bin/env python3
"""Give every cell of the notebooks a slide type, so that each notebook is also a slide deck.

Usage (from anywhere; a path is taken from the current directory, or else from the
repository's root):

    python tools/set_slide_metadata.py                  # every notebooks/*.ipynb, sorted
    python tools/set_slide_metadata.py notebooks/07_masks.ipynb
    python tools/set_slide_metadata.py --check          # report cells that differ, write nothing

The slide type lives in ``cell.metadata.slideshow.slide_type``; ``jupyter nbconvert --to slides``
(reveal.js) and RISE-style viewers read it. "slide" starts a new slide (a step to the right),
"subslide" a new slide below the current one (a step down), "fragment" a piece of the current
slide that appears on the next key press, "-" a cell that joins whatever came before it, "skip"
a cell that is left out, "notes" a speaker note. The rules, applied to each cell in order (the
first that matches wins):

1. **Override.** A cell tagged ``slide-keep`` keeps the slide type it has (set one by hand, in
   JupyterLab's property inspector, then add the tag); without a valid one the rules below apply.
2. **Hidden solutions** (tag ``solution``) are "skip": a slide must not give the answer away.
3. **Title.** The first cell is a "slide": the title slide.
4. **Setup** is "skip": a code cell tagged ``setup``, or a code cell without outputs whose every
   statement is an import, an alias (``fmt = attn_lib.fmt_values``), a line magic (a cell magic
   such as ``%%bash`` is not setup), or a call that only configures the session
   (``torch.set_printoptions``, ``torch.set_grad_enabled``, ``torch.manual_seed``,
   ``warnings.filterwarnings``, ... see ``SETUP_CALLS``). Empty cells are "skip" too.
5. **Headings.** A markdown cell with a ``#`` or ``##`` heading starts a "slide" (one per
   section); one whose largest heading is ``###`` starts a "subslide" (a step, an exercise).
   A heading further down a cell counts too, so that a section that begins mid-cell still gets
   its slide (the prose above the heading then opens that slide: better split such cells).
6. **Length.** Each cell's height on nbconvert's 960 × 700 px reveal.js slide is estimated:
   prose at about 80 characters a line (56 inside a quote), headings in the theme's large font,
   code one line per line (it scrolls sideways), text outputs wrapped at about 62 characters,
   images at their PNG size scaled to the slide's width. (Measured against the rendered decks,
   the estimates are within about 15 % for most cells.) A cell that would push the current slide
   past ``MAX_HEIGHT`` px or ``MAX_CELLS`` visible cells starts a "subslide" instead. The check
   is made per step (a markdown cell with the code cells after it), so that a break falls before
   an explanation rather than between an explanation and the code that proves it; the first
   code cell with outputs after a markdown cell stays with it whenever they fit on one slide
   together (``SLIDE_HEIGHT``). A single cell taller than a slide still gets one slide:
   reveal.js crops it at the bottom, unless the deck is made with
   ``--SlidesExporter.reveal_scroll=True``, which makes it scroll.
7. **Step-by-step reveal.** Inside a slide, a markdown cell (an explanation, a "Careful."
   callout) is a "fragment", and so is a code cell with outputs: the claim appears, then the
   cell that computes it. A code cell without outputs (a definition, an assert-only check) is
   "-": it appears together with the cell before it, since there is nothing to wait for.

The script only touches ``metadata.slideshow``; it writes a notebook only if a slide type
changed, with ``nbformat.write`` like tools/execute_notebooks.py, so outputs and formatting stay
byte for byte. Running it twice changes nothing the second time. ``--check`` exits with status
1 if any cell's slide type differs from the rules (a missing one counts as different); a
notebook that does not exist gives status 2.
"""

from __future__ import annotations

import argparse
import ast
import base64
import binascii
import math
import re
import struct
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "notebooks" / "en"

SLIDE_TYPES = ("slide", "subslide", "fragment", "-", "skip", "notes")
KEEP_TAG = "slide-keep"  # leave this cell's slide type as it is
SETUP_TAG = "setup"  # always skip this cell
SOLUTION_TAG = "solution"  # the collapsed solution of an exercise

# Calls that only configure the session; a code cell made of these and imports is setup.
SETUP_CALLS = frozenset(
    {
        "torch.set_printoptions",
        "torch.set_grad_enabled",
        "torch.set_num_threads",
        "torch.set_default_dtype",
        "torch.manual_seed",
        "torch.use_deterministic_algorithms",
        "np.random.seed",
        "numpy.random.seed",
        "np.set_printoptions",
        "numpy.set_printoptions",
        "random.seed",
        "warnings.filterwarnings",
        "warnings.simplefilter",
        "plt.style.use",
        "plt.rcParams.update",
        "matplotlib.rcParams.update",
        "matplotlib.use",
    }
)

# The slide canvas of nbconvert's reveal template is 960 × 700 px (its defaults); with the
# template's 20 px text and 19 px code, and the prompt column, about 830 px are left for content.
SLIDE_HEIGHT = 700  # px: taller content is cropped by reveal.js
MAX_HEIGHT = 660  # px of estimated content per (sub)slide, leaving room for margins
MAX_CELLS = 6  # visible cells per (sub)slide
CONTENT_WIDTH = 830  # px available to an image or a line of text
CHARS_PER_LINE = 80  # characters of 20 px prose per line
TEXT_LINE = 30  # px per line of prose (20 px font, 1.5 line height)
CODE_LINE = 24  # px per line of code or text output
OUTPUT_CHARS_PER_LINE = 62  # characters of 19 px monospace per output line (outputs wrap)
WIDGET = 150  # px of a live widget's output in a static deck
CELL_GAP = 20  # px of padding around a cell
QUOTE_CHARS_PER_LINE = 56  # the same inside a quote (a "Careful." callout): indented, boxed
# (characters per line, px per line, px of margins) of a heading, by level: the theme's large
# fonts (measured in the rendered decks: 75 px for #, 42 px for ##, 31 px for ###).
HEADING = {
    1: (20, 90, 65),
    2: (42, 51, 45),
    3: (60, 37, 39),
    4: (70, 32, 30),
    5: (80, 30, 30),
    6: (80, 30, 30),
}

HEADING_LINE = re.compile(r"^(#{1,6})\s")


# --- reading a cell ------------------------------------------------------------------------


def tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def current_type(cell) -> str | None:
    """The cell's stored slide type, or None if it has none (or not a valid one)."""
    slideshow = cell.get("metadata", {}).get("slideshow", {})
    value = slideshow.get("slide_type") if isinstance(slideshow, dict) else None
    return value if value in SLIDE_TYPES else None


def fenced_lines(source: str) -> Iterator[tuple[str, str]]:
    """Each line of markdown with what it is: "fence" (a line of ``` or ~~~ that opens or
    closes a code block), "code" (inside one) or "text"."""
    fence = None  # the marker that opened the current code block
    for line in source.splitlines():
        marker = line.strip()[:3]
        if marker in ("```", "~~~") and (fence is None or marker == fence):
            fence = marker if fence is None else None
            yield line, "fence"
        else:
            yield line, "text" if fence is None else "code"


def heading_level(cell) -> int | None:
    """The level of the largest heading in a markdown cell (``## x`` → 2), None if it has none.

    Lines inside fenced code blocks (a ``# comment`` in a bash example), fenced with
    backticks or tildes, are not headings.
    """
    if cell.cell_type != "markdown":
        return None
    levels = [
        len(match.group(1))
        for line, kind in fenced_lines(cell.source)
        if kind == "text" and (match := HEADING_LINE.match(line))
    ]
    return min(levels) if levels else None


def dotted_name(node: ast.AST) -> str | None:
    """``torch.set_printoptions`` for the AST of that expression; None for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted_name(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def is_setup_statement(node: ast.stmt) -> bool:
    if isinstance(node, ast.Import | ast.ImportFrom):
        return True
    if (  # an alias: `fmt = attn_lib.fmt_values`
        isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.Attribute)
        and dotted_name(node.value) is not None
    ):
        return True
    value = None
    if isinstance(node, ast.Expr):
        value = node.value
    elif isinstance(node, ast.Assign) and all(
        isinstance(t, ast.Name) and t.id == "_" for t in node.targets
    ):
        value = node.value  # `_ = torch.manual_seed(0)`
    return isinstance(value, ast.Call) and dotted_name(value.func) in SETUP_CALLS


def is_setup(cell) -> bool:
    """A code cell tagged ``setup``, or one with no outputs that only imports and configures."""
    if cell.cell_type != "code":
        return False
    if SETUP_TAG in tags(cell):
        return True
    if cell.get("outputs"):
        return False  # whatever prints or draws is part of the lesson
    if cell.source.lstrip().startswith("%%"):
        return False  # a cell magic (%%bash, %%time …): its body is not Python to inspect
    # Line magics (%matplotlib inline, %load_ext ...) configure too; they are not Python.
    code = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith("%"))
    try:
        body = ast.parse(code).body
    except SyntaxError:
        return False
    return bool(body) and all(is_setup_statement(node) for node in body)


# --- estimating a cell's height ----------------------------------------------------------


def png_size(data: str) -> tuple[int, int] | None:
    """(width, height) in px from the header of a base64 PNG, None if it is not one."""
    start = "".join(data[:64].split())[:44]  # 33 bytes: the signature and the IHDR chunk
    try:
        head = base64.b64decode(start)
    except binascii.Error:
        return None
    if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n":
        return None
    return struct.unpack(">II", head[16:24])


def prose_height(text: str, chars_per_line: float = CHARS_PER_LINE) -> float:
    return max(1, math.ceil(len(text) / chars_per_line)) * TEXT_LINE


def markdown_height(source: str) -> float:
    height, paragraph, quoted = 0.0, [], False
    for line, kind in [*fenced_lines(source), ("", "text")]:
        if kind == "fence":
            continue
        if kind == "code":
            height += CODE_LINE
            continue
        stripped = line.strip()
        quote = stripped.startswith(">")
        stripped = stripped.lstrip(">").strip()
        heading = HEADING_LINE.match(stripped)
        item = stripped.startswith(("- ", "* ")) or re.match(r"\d+\. ", stripped)
        if paragraph and (not stripped or heading or item or stripped.startswith("|")):
            width = QUOTE_CHARS_PER_LINE if quoted else CHARS_PER_LINE
            height += prose_height(" ".join(paragraph), width) + 10
            paragraph = []
        if heading:
            chars, line_height, margins = HEADING[len(heading.group(1))]
            text = stripped[heading.end() :]
            height += max(1, math.ceil(len(text) / chars)) * line_height + margins
        elif stripped.startswith("|"):
            if not set(stripped) <= set("|-: "):  # the |---|---| separator takes no room
                cells = [c.strip() for c in stripped.strip("|").split("|")]
                per_cell = CHARS_PER_LINE / max(1, len(cells))
                height += max(math.ceil(len(c) / per_cell) for c in cells) * TEXT_LINE + 6
        elif stripped:
            quoted = quote if not paragraph else quoted
            paragraph.append(stripped)
    return height + CELL_GAP


def text_height(text: str) -> float:
    """Height of a text output; lines longer than the slide is wide wrap."""
    lines = text.splitlines()
    return sum(max(1, math.ceil(len(line) / OUTPUT_CHARS_PER_LINE)) for line in lines) * CODE_LINE


def output_height(output) -> float:
    kind = output.get("output_type")
    if kind == "stream":
        return text_height(output.get("text", ""))
    if kind == "error":
        return len(output.get("traceback", [])) * CODE_LINE * 2
    data = output.get("data", {})
    if "image/png" in data:
        size = png_size(data["image/png"])
        if size:
            width, height = size
            return height * min(1.0, CONTENT_WIDTH / width)
    if "application/vnd.jupyter.widget-view+json" in data:
        return WIDGET  # without saved widget state a static deck shows an empty box
    if "text/plain" in data:
        return text_height(data["text/plain"])
    return 0.0


def cell_height(cell) -> float:
    """Estimated height of the cell on a slide, in px (see the module docstring, rule 6)."""
    if cell.cell_type == "markdown":
        return markdown_height(cell.source)
    height = len(cell.source.splitlines()) * CODE_LINE + CELL_GAP  # code scrolls, never wraps
    return height + sum(output_height(o) for o in cell.get("outputs", []))


# --- the rules ---------------------------------------------------------------------------


def fixed_type(index: int, cell) -> str | None:
    """The slide type rules 1-5 give the cell, or None if it depends on the slide's length."""
    if KEEP_TAG in tags(cell) and current_type(cell):
        return current_type(cell)
    if SOLUTION_TAG in tags(cell):
        return "skip"  # even first: a slide never gives an answer away
    if index == 0:
        return "slide"
    if is_setup(cell) or not cell.source.strip():
        return "skip"
    level = heading_level(cell)
    if level is not None and level <= 2:
        return "slide"
    if level == 3:
        return "subslide"
    return None


def slide_types(nb) -> list[str]:
    """The slide type of every cell of the notebook, by the rules of the module docstring."""
    cells = nb.cells
    fixed = [fixed_type(i, c) for i, c in enumerate(cells)]
    shown = [f not in ("skip", "notes") for f in fixed]
    heights = [cell_height(c) if s else 0.0 for c, s in zip(cells, shown, strict=True)]

    def step_height(start: int) -> tuple[float, int]:
        """Height and cell count of the step that a markdown cell at ``start`` opens."""
        height, count = heights[start], 1
        for j in range(start + 1, len(cells)):
            if fixed[j] is not None and shown[j]:
                break  # a heading or a kept slide type ends the step
            if cells[j].cell_type == "markdown":
                break
            if shown[j]:
                height, count = height + heights[j], count + 1
        return height, count

    types: list[str] = []
    used_height, used_cells = 0.0, 0
    # Since the last markdown cell shown, no code cell with outputs has been shown.
    after_explanation = False
    for i, cell in enumerate(cells):
        kind = fixed[i]
        if kind is None:
            if cell.cell_type == "markdown":
                need_height, need_cells = step_height(i)
            else:
                need_height, need_cells = heights[i], 1
            too_long = used_height + need_height > MAX_HEIGHT or used_cells + need_cells > MAX_CELLS
            # The first code cell with outputs after an explanation stays with it, if they fit.
            keep_together = (
                cell.cell_type == "code"
                and after_explanation
                and used_height + heights[i] <= SLIDE_HEIGHT
            )
            if used_cells and too_long and not keep_together:
                kind = "subslide"
            elif cell.cell_type == "markdown" or cell.get("outputs"):
                kind = "fragment"
            else:
                kind = "-"
        if kind in ("slide", "subslide"):
            used_height, used_cells = 0.0, 0
        if shown[i]:
            used_height, used_cells = used_height + heights[i], used_cells + 1
            if cell.cell_type == "markdown":
                after_explanation = True
            elif cell.get("outputs"):
                after_explanation = False
        types.append(kind)
    return types


def differences(nb) -> list[tuple[int, str | None, str]]:
    """(index, stored slide type or None, expected slide type) for every cell that differs."""
    return [
        (i, current_type(cell), want)
        for i, (cell, want) in enumerate(zip(nb.cells, slide_types(nb), strict=True))
        if current_type(cell) != want or not isinstance(cell.metadata.get("slideshow"), dict)
    ]


def apply(nb) -> int:
    """Set every cell's slide type by the rules; return how many cells changed."""
    diffs = differences(nb)
    for index, _, want in diffs:
        cell = nb.cells[index]
        if not isinstance(cell.metadata.get("slideshow"), dict):
            cell.metadata["slideshow"] = {}  # e.g. a bare string written by hand
        cell.metadata["slideshow"]["slide_type"] = want
    return len(diffs)


def summary(types: list[str]) -> str:
    count = Counter(types)
    return ", ".join(f"{count[t]} {t if t != '-' else 'continue (-)'}" for t in SLIDE_TYPES)


def describe(cell) -> str:
    first = cell.source.strip().splitlines()[0] if cell.source.strip() else "(empty)"
    return f"{cell.cell_type}, {first[:50]!r}"


# --- command line ------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: notebooks/*.ipynb")
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; list the cells whose slide type differs and exit 1 if any",
    )
    args = parser.parse_args(argv)

    # A path is taken from the current directory, or else from the repository's root.
    given = [p if p.is_file() or p.is_absolute() else REPO / p for p in args.notebooks]
    paths = sorted(p.resolve() for p in given) or sorted(NOTEBOOKS.glob("*.ipynb"))
    if not paths:
        print(f"no notebooks found in {NOTEBOOKS}", file=sys.stderr)
        return 2
    missing = [p for p in paths if not p.is_file()]
    if missing:
        print(f"no such notebook: {missing[0]}", file=sys.stderr)
        return 2  # not 1, which means "slide types out of date"

    out_of_date = []
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        if args.check:
            diffs = differences(nb)
            if diffs:
                out_of_date.append(path.name)
                print(f"{path.name}: {len(diffs)} cell(s) differ from the rules")
                for index, have, want in diffs[:10]:
                    print(f"  cell {index} ({describe(nb.cells[index])}): {have} → {want}")
                if len(diffs) > 10:
                    print(f"  ... and {len(diffs) - 10} more")
            continue
        changed = apply(nb)
        if changed:
            nbformat.validate(nb)
            nbformat.write(nb, path)
        print(f"{path.name}: {changed} changed; {summary(slide_types(nb))}")
    if out_of_date:
        print(
            f"slide types out of date in: {', '.join(out_of_date)}; "
            "run python tools/set_slide_metadata.py",
            file=sys.stderr,
        )
        return 1
    if args.check:
        print(f"{len(paths)} notebook(s): every slide type follows the rules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
