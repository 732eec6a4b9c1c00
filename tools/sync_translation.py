#!/usr/bin/env python3
"""Build the Chinese edition (notebooks/zh/) from the English one (notebooks/en/).

Usage (from anywhere; paths are relative to the repository):

    python tools/sync_translation.py                  # rebuild every notebooks/zh/*.ipynb
    python tools/sync_translation.py --check          # report, write nothing
    python tools/sync_translation.py notebooks/en/03_scaling_and_softmax_saturation.ipynb
    python tools/sync_translation.py --accept notebooks/zh/03_x.ipynb CELL_ID [CELL_ID ...]

A Chinese notebook has the English notebook's cells, in the same order and with the same cell
ids. Code and raw cells are copies of the English ones (source, outputs, metadata). Each
markdown cell is a translation: its source is Chinese, and its metadata records the English
cell it translates and a hash of that cell's source at the time of translation::

    "translation": {"source": "<English cell id>", "source_sha256": "<16 hex digits>"}

A rebuild keeps every translation whose recorded hash matches the English cell's source now,
whatever was edited in it (in JupyterLab, say). It reports, per notebook and cell id:

- missing: an English markdown cell without a translation (new, or never translated). The cell
  is written with the English text and an empty hash, so the edition stays in step and the
  test suite fails until it is translated;
- stale: the English cell changed since it was translated. The old translation is kept, with its
  old hash, and the report shows how the English text changed (found in git history) or, failing
  that, the English text now;
- removed: a translation whose English cell is gone (dropped), and reordered cells.

Links to a heading of an English notebook (as a translator leaves them) are pointed at the same
heading of the Chinese notebook: the heading in the same cell, in the same place.

A Chinese markdown cell that translates no English cell (a cell added or split by hand) cannot
be kept in step: that notebook is not written, and the report names the cell.

After translating or updating cells, ``--accept`` records that their text now translates the
current English cells (it refuses a cell whose text is still the English text). Exit status: 0
when every translation is present and current (and, with --check, every file is what a rebuild
would write); 1 otherwise; 2 for bad arguments or unreadable notebooks.
"""

from __future__ import annotations

import argparse
import copy
import difflib
import functools
import hashlib
import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parent.parent
EN = REPO / "notebooks" / "en"
ZH = REPO / "notebooks" / "zh"
KEY = "translation"
LANGUAGE = "zh-CN"
HEADING = re.compile(r"^#{1,6} (.+)$", re.MULTILINE)
# A link to a heading: "](NN_name.ipynb#fragment)" or "](#fragment)"; a fragment may hold
# balanced parentheses, as headings do.
LINK = re.compile(r"\]\((\d\d_[\w.-]+\.ipynb)?#((?:[^()\s]|\([^()\s]*\))+)\)")


class SyncError(Exception):
    """A notebook that cannot be read or kept in step; the message says which and why."""


def source_hash(text: str) -> str:
    """The first 16 hex digits of the SHA-256 of a cell's source (UTF-8)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclass
class Report:
    """What a rebuild found in one notebook."""

    name: str
    missing: list[str] = field(default_factory=list)
    stale: list[tuple[str, str]] = field(default_factory=list)  # (cell id, how English changed)
    notes: list[str] = field(default_factory=list)  # removed, reordered, added cells
    unkept: list[str] = field(default_factory=list)  # zh cells that translate no English cell

    @property
    def current(self) -> bool:
        return not (self.missing or self.stale or self.unkept)


def read(path: Path) -> nbformat.NotebookNode:
    """Read a notebook and check that its cells have unique ids (nbformat would renumber them)."""
    try:
        text = path.read_text(encoding="utf-8")
        raw = json.loads(text)
        ids = [cell.get("id") for cell in raw.get("cells", [])]
    except (OSError, ValueError, AttributeError) as exc:
        raise SyncError(f"{path}: cannot read it as a notebook ({exc})") from None
    if None in ids:
        raise SyncError(
            f"{path.name}: cell {ids.index(None)} has no id (nbformat 4.5 cell ids pair "
            "translations with English cells; save the notebook again with JupyterLab)"
        )
    doubled = sorted({i for i in ids if ids.count(i) > 1})
    if doubled:
        raise SyncError(f"{path.name}: cell ids used twice: {', '.join(doubled)}")
    try:
        return nbformat.reads(text, as_version=4)
    except ValueError as exc:  # nbformat's read and validation errors
        raise SyncError(f"{path}: cannot read it as a notebook ({exc})") from None


def _git(*args: str) -> str | None:
    proc = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=False)
    return proc.stdout if proc.returncode == 0 else None


def _english_then(name: str, cell_id: str, digest: str) -> str | None:
    """The English cell's source as it was when translated, from git history, if found."""
    for rel in (f"notebooks/en/{name}", f"notebooks/{name}"):
        for rev in (_git("log", "--format=%H", "-n", "40", "--", rel) or "").split():
            shown = _git("show", f"{rev}:{rel}")
            for cell in json.loads(shown).get("cells", []) if shown else []:
                text = "".join(cell.get("source", ""))
                if cell.get("id") == cell_id and source_hash(text) == digest:
                    return text
    return None


def _how_changed(name: str, cell_id: str, digest: str, now: str) -> str:
    then = _english_then(name, cell_id, digest)
    if then is None:
        return "the English text now:\n" + "\n".join("    " + ln for ln in now.splitlines())
    diff = difflib.unified_diff(then.splitlines(), now.splitlines(), "then", "now", lineterm="")
    return "the English text changed:\n" + "\n".join("    " + ln for ln in diff)


def heading_anchors(nb: nbformat.NotebookNode) -> dict[tuple[str, int], str]:
    """JupyterLab's anchor of each heading, by (cell id, heading number in the cell)."""
    anchors = {}
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for k, m in enumerate(HEADING.finditer(cell.source)):
                anchors[cell.id, k] = m.group(1).replace("`", "").strip().replace(" ", "-")
    return anchors


def localise_links(nb: nbformat.NotebookNode, name: str) -> None:
    """Point links at English headings (kept as written by a translator) to the same headings
    of the Chinese notebooks: the heading in the same cell, in the same place."""
    own = heading_anchors(nb)

    @functools.cache
    def target_anchors(target: str) -> dict[tuple[str, int], str]:
        if target == name:
            return own
        path = ZH / target
        return heading_anchors(read(path)) if path.exists() else {}

    @functools.cache
    def english_anchors(target: str) -> dict[str, tuple[str, int]]:
        return {a: key for key, a in heading_anchors(read(EN / target)).items()}

    def replace(m: re.Match) -> str:
        target, fragment = m.group(1) or name, m.group(2)
        zh = target_anchors(target)
        if fragment in zh.values() or not (EN / target).exists():
            return m.group(0)
        key = english_anchors(target).get(fragment)
        if key not in zh:
            return m.group(0)
        return f"]({m.group(1) or ''}#{zh[key]})"

    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = LINK.sub(replace, cell.source)


def build(en: nbformat.NotebookNode, zh: nbformat.NotebookNode | None, name: str):
    """The Chinese notebook a rebuild writes, and its report. ``zh`` is the one on disk."""
    report = Report(name)
    translations = {}
    old_order = []
    en_cells = {cell.id: cell for cell in en.cells}
    for cell in zh.cells if zh is not None else []:
        if cell.cell_type != "markdown":
            old_order.append(cell.get("id"))
            english = en_cells.get(cell.get("id"))
            if english is not None and english.source != cell.source:
                report.notes.append(f"{cell.id}: the zh code cell differed from English; replaced")
            continue
        meta = cell.get("metadata", {}).get(KEY)
        source_id = meta.get("source") if isinstance(meta, dict) else None
        if source_id is None:
            report.unkept.append(f"{cell.get('id')} (a markdown cell with no '{KEY}' metadata)")
            continue
        translations[source_id] = (cell.source, meta.get("source_sha256") or "")
        old_order.append(source_id)
    en_ids = [cell.id for cell in en.cells]
    en_markdown = {cell.id for cell in en.cells if cell.cell_type == "markdown"}
    for source_id in translations.keys() - en_markdown:
        if source_id in en_ids:
            report.notes.append(f"{source_id}: the English cell is no longer markdown; dropped")
        else:
            report.notes.append(f"{source_id}: its English cell was removed; translation dropped")
    if zh is not None:
        new = [i for i in en_ids if i not in old_order]
        kept = [i for i in old_order if i in en_ids]
        if new:
            report.notes.append("new English cells: " + ", ".join(new))
        if kept != [i for i in en_ids if i in old_order]:
            report.notes.append("the English cells were reordered; translations moved with them")

    out = copy.deepcopy(en)
    out.metadata[KEY] = {"language": LANGUAGE, "source": f"../en/{name}"}
    for cell in out.cells:
        if cell.cell_type != "markdown":
            continue
        digest = source_hash(cell.source)
        text, recorded = translations.get(cell.id, (cell.source, ""))
        if not recorded:
            report.missing.append(cell.id)
        elif recorded != digest:
            report.stale.append((cell.id, _how_changed(name, cell.id, recorded, cell.source)))
        cell.source = text
        cell.metadata[KEY] = {"source": cell.id, "source_sha256": recorded}
    localise_links(out, name)
    return out, report


def accept(path: Path, cell_ids: list[str]) -> None:
    """Record that the named zh cells now translate the current English cells."""
    zh = read(path)
    en = {cell.id: cell for cell in read(EN / path.name).cells}
    by_id = {cell.id: cell for cell in zh.cells}
    for cell_id in cell_ids:
        cell = by_id.get(cell_id)
        if cell is None or cell.cell_type != "markdown":
            raise SyncError(f"{path.name}: no markdown cell with id {cell_id}")
        english = en.get(cell.metadata.get(KEY, {}).get("source", cell_id))
        if english is None:
            raise SyncError(f"{path.name}: cell {cell_id} translates no English cell")
        if cell.source.strip() == english.source.strip():
            raise SyncError(f"{path.name}: cell {cell_id} still holds the English text")
        cell.metadata[KEY] = {"source": english.id, "source_sha256": source_hash(english.source)}
    nbformat.write(zh, path)


def text_of(nb: nbformat.NotebookNode) -> str:
    """The notebook as nbformat.write would store it."""
    text = nbformat.writes(nb)
    return text if text.endswith("\n") else text + "\n"


def sync(en_path: Path, check: bool) -> tuple[Report, bool]:
    """Rebuild one Chinese notebook; returns its report and whether the file is (now) in step."""
    zh_path = ZH / en_path.name
    en = read(en_path)
    zh = read(zh_path) if zh_path.exists() else None
    out, report = build(en, zh, en_path.name)
    fresh = text_of(out)
    on_disk = zh_path.read_text(encoding="utf-8") if zh_path.exists() else None
    if report.unkept or fresh == on_disk:
        return report, fresh == on_disk
    if not check:
        ZH.mkdir(parents=True, exist_ok=True)
        zh_path.write_text(fresh, encoding="utf-8")
        return report, True
    return report, False


def print_report(report: Report, in_step: bool, check: bool) -> None:
    lines = [f"  {note}" for note in report.notes]
    lines += [f"  missing: cell {cell_id}" for cell_id in report.missing]
    for cell_id, how in report.stale:
        lines.append(f"  stale: cell {cell_id}: {how}")
    for what in report.unkept:
        lines.append(f"  cannot keep in step: zh cell {what}; notebook not written")
    if not in_step and not report.unkept:
        lines.append("  the file differs from a rebuild" + ("" if check else "; rewritten"))
    status = "ok" if report.current and in_step else "needs work"
    print(f"{report.name}: {status}")
    for line in lines:
        print(line)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: notebooks/en/*.ipynb")
    parser.add_argument("--check", action="store_true", help="report only, write nothing")
    parser.add_argument(
        "--accept",
        nargs="+",
        metavar=("ZH_NOTEBOOK", "CELL_ID"),
        help="record that these cells of a zh notebook translate the current English cells",
    )
    args = parser.parse_args(argv)
    try:
        if args.accept:
            if len(args.accept) < 2:
                parser.error("--accept needs a zh notebook and at least one cell id")
            accept(Path(args.accept[0]).resolve(), args.accept[1:])
            print(f"accepted {len(args.accept) - 1} cell(s) in {Path(args.accept[0]).name}")
            return 0
        paths = [p.resolve() for p in args.notebooks] or sorted(EN.glob("*.ipynb"))
        if not paths:
            print(f"no notebooks found in {EN}", file=sys.stderr)
            return 2
        ok = True
        for path in paths:
            if path.parent != EN:
                raise SyncError(f"{path}: give the English notebooks (notebooks/en/*.ipynb)")
            report, in_step = sync(path, args.check)
            print_report(report, in_step, args.check)
            ok &= report.current and (in_step or not args.check)
        return 0 if ok else 1
    except SyncError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
