#!/usr/bin/env python3
"""Count the series' size budgets (../shared/design/SERIES.md, ARCHITECTURE.md) and print them.

Usage (from anywhere):

    python tools/budgets.py            # every notebook, the library, each lesson pair
    python tools/budgets.py 03         # one notebook and its lesson pair

Words are the whitespace-separated tokens of the markdown cells; a notebook's code cells are
counted as stored. Library lines are the lines of ``attn_lib/**/*.py``. Exits 1 when a budget
is exceeded, so it can guard a commit; speed budgets live in ``tools/benchmark.py``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
WORDS = {"09": 2200, "10": 2200, "11": 1500}  # per notebook; the rest 1,800
WORDS_DEFAULT, WORDS_TOTAL, CODE_CELLS = 1800, 16000, 30
LIBRARY_LINES, MODULE_LINES = 10000, 900


def notebook_counts(path: Path) -> tuple[int, int]:
    nb = nbformat.read(path, as_version=4)
    words = sum(len(re.findall(r"\S+", c.source)) for c in nb.cells if c.cell_type == "markdown")
    code = sum(c.cell_type == "code" for c in nb.cells)
    return words, code


def lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def main(argv: list[str]) -> int:
    only = argv[0] if argv else None
    ok = True
    total = 0
    print(f"{'notebook':<44}{'words':>7}{'budget':>8}{'code':>6}{'pair lines':>12}")
    for path in sorted((ROOT / "notebooks" / "en").glob("[0-9][0-9]_*.ipynb")):
        number = path.name[:2]
        words, code = notebook_counts(path)
        if number <= "10":
            total += words
        if only and number != only:
            continue
        budget = WORDS.get(number, WORDS_DEFAULT)
        pair = sum(lines(p) for p in (ROOT / "attn_lib" / "lessons").glob(f"nb{number}_*.py"))
        flag = "" if words <= budget and code <= CODE_CELLS else "  <- over"
        ok &= not flag
        print(f"{path.name[:43]:<44}{words:>7}{budget:>8}{code:>6}{pair:>12}{flag}")
    modules = sorted((ROOT / "attn_lib").rglob("*.py"))
    library = sum(lines(p) for p in modules)
    big = [f"{p.relative_to(ROOT)} {lines(p)}" for p in modules if lines(p) > MODULE_LINES]
    ok &= total <= WORDS_TOTAL and library <= LIBRARY_LINES and not big
    print(f"\nwords 00-10: {total} (budget {WORDS_TOTAL})")
    print(
        f"attn_lib: {library} lines (budget {LIBRARY_LINES}); "
        f"top level {sum(lines(p) for p in (ROOT / 'attn_lib').glob('*.py'))}, "
        f"lessons/_* {sum(lines(p) for p in (ROOT / 'attn_lib' / 'lessons').glob('_*.py'))}"
    )
    print(f"modules over {MODULE_LINES} lines: {', '.join(big) or 'none'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
