#!/usr/bin/env python3
"""Build the Chinese edition (notebooks/zh/) from the English one (notebooks/en/).

Usage (from anywhere; paths are relative to the repository):

    python tools/sync_translation.py                  # rebuild every notebooks/zh/*.ipynb
    python tools/sync_translation.py --check          # report, write nothing
    python tools/sync_translation.py notebooks/en/03_scaling_and_softmax_saturation.ipynb
    python tools/sync_translation.py --drop           # also let translations of removed cells go
    python tools/sync_translation.py --accept notebooks/zh/03_x.ipynb CELL_ID [CELL_ID ...]

A Chinese notebook has the English notebook's cells, in the same order and with the same cell
ids. Code and raw cells are copies of the English ones (source, outputs, metadata). Each
markdown cell is a translation: its source is Chinese, and its metadata records the English
cell it translates and a hash of that cell's source at the time of translation::

    "translation": {"source": "<English cell id>", "source_sha256": "<16 hex digits>"}

A rebuild keeps every translation whose recorded hash matches the English cell's source now,
whatever was edited in it (in JupyterLab, say), with its attachments. It reports, per notebook
and cell id:

- missing: an English markdown cell without a translation (new, or never translated). The cell
  holds the current English text and an empty hash, so the edition stays in step and the test
  suite fails until it is translated;
- stale: the English cell changed since it was translated. The old translation is kept, with its
  old hash, and the report shows how the English text changed (found in git history) or, failing
  that, the English text now;
- a translation accepted but still in English (the English text, or six English words in a row
  outside code and formulas), and a link to a heading that does not exist;
- English cells new to zh, zh cells in another order, zh code cells that differed (replaced),
  and which cells a rewrite changed.

Links to a heading of an English notebook (as a translator leaves them) are pointed at the same
heading of the Chinese notebook: the heading in the same cell, in the same place. The cell
records the English fragment behind each Chinese one, so links follow a retranslated heading.

What cannot be kept in step stops that notebook's write, and the report names the zh cell: a
markdown cell that translates no English cell, two cells that translate the same one (a split or
a duplicate), a translation turned into a code cell, a code cell English does not have, and the
translation of an English cell that is gone (``--drop`` lets it go; one whose English text moved
to a cell with a new id, by cut and paste, follows it by its hash).

After translating or updating cells, ``--accept`` records that their text now translates the
current English cells (it refuses text still in English) and rebuilds that notebook. A Chinese
notebook with no English one is reported. Exit status: 0 when every translation is present and
current (and, with --check, every file is what a rebuild would write); 1 otherwise; 2 when a
notebook cannot be read (the others are still synced) or for bad arguments.
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
CJK = re.compile(r"[\u4e00-\u9fff]")
ENGLISH_RUN = re.compile(r"(?:[A-Za-z][A-Za-z'’-]*[\s,;:.!?()]+){5}[A-Za-z][A-Za-z'’-]*")
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
    unkept: list[str] = field(default_factory=list)  # zh cells that cannot be kept in step
    problems: list[str] = field(default_factory=list)  # links to no heading, English left

    @property
    def current(self) -> bool:
        return not (self.missing or self.stale or self.unkept or self.problems)


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


def localise_links(nb: nbformat.NotebookNode, name: str, report: Report) -> None:
    """Point links at English headings (as a translator leaves them) to the same headings of
    the Chinese notebooks: the heading in the same cell, in the same place. Each cell records
    the English fragment behind each Chinese one, so a link follows a retranslated heading."""
    own = heading_anchors(nb)

    @functools.cache
    def zh_anchors(target: str) -> dict[tuple[str, int], str]:
        if target == name:
            return own
        path = ZH / target
        return heading_anchors(read(path)) if path.exists() else {}

    @functools.cache
    def en_anchors(target: str) -> dict[str, tuple[str, int]]:
        path = EN / target
        anchors = {}
        for key, anchor in heading_anchors(read(path)).items() if path.exists() else ():
            anchors.setdefault(anchor, key)  # JupyterLab jumps to the first of equal headings
        return anchors

    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        known, used = cell.metadata[KEY].pop("links", {}), {}

        def replace(m: re.Match, known=known, used=used, cell=cell) -> str:
            target, fragment = m.group(1) or name, m.group(2)
            zh, en = zh_anchors(target), en_anchors(target)
            if fragment in zh.values():  # a Chinese heading: note its English one
                key = next(k for k, a in zh.items() if a == fragment)
                english = next((a for a, k in en.items() if k == key), None)
                if english is not None and english != fragment:
                    used[fragment] = english
                return m.group(0)
            key = en.get(fragment if fragment in en else known.get(fragment))
            if key not in zh:
                report.problems.append(f"cell {cell.id}: no heading #{fragment} in {target}")
                return m.group(0)
            if zh[key] != fragment:
                used[zh[key]] = next(a for a, k in en.items() if k == key)
            return f"]({m.group(1) or ''}#{zh[key]})"

        cell.source = LINK.sub(replace, cell.source)
        if used:
            cell.metadata[KEY]["links"] = dict(sorted(used.items()))


def _prose(text: str) -> str:
    """The text without code, formulas, link targets and HTML tags."""
    return re.sub(r"```.*?```|`[^`]*`|\$[^$]*\$|\]\([^)]*\)|<[^>]*>", " ", text, flags=re.DOTALL)


def has_prose(text: str) -> bool:
    """Whether a markdown text has words to translate: three letters in a row outside code."""
    return re.search(r"[A-Za-z]{3,}", _prose(text)) is not None


def still_english(zh_text: str, en_text: str) -> bool:
    """Whether a "translation" of English prose is English: the English text itself, or a run
    of six or more English words outside code, formulas, link targets and HTML tags."""
    if not has_prose(en_text):
        return False  # nothing to translate (a formula, a table of numbers)
    if LINK.sub("", zh_text).strip() == LINK.sub("", en_text).strip():
        return True
    return ENGLISH_RUN.search(_prose(zh_text)) is not None


def _translations(zh: nbformat.NotebookNode, en_by_id: dict, report: Report) -> dict:
    """The zh notebook's translations by English cell id; zh cells that cannot be kept go to
    ``report.unkept``, zh code cells that differ from English to ``report.notes``."""
    translations = {}
    for cell in zh.cells:
        meta = cell.get("metadata", {}).get(KEY)
        if meta is None:
            english = en_by_id.get(cell.id)
            if cell.cell_type == "markdown":
                report.unkept.append(f"{cell.id} (a markdown cell with no '{KEY}' metadata)")
            elif english is None:
                report.unkept.append(f"{cell.id} (a {cell.cell_type} cell English does not have)")
            elif english.source != cell.source:
                report.notes.append(f"{cell.id}: the zh code cell differed from English; replaced")
            continue
        if not isinstance(meta, dict) or not isinstance(meta.get("source"), str):
            report.unkept.append(f"{cell.id} (its '{KEY}' metadata is not a source cell id)")
        elif cell.cell_type != "markdown":
            report.unkept.append(f"{cell.id} (a translation turned into a {cell.cell_type} cell)")
        elif meta["source"] in translations:
            first = translations[meta["source"]].id
            report.unkept.append(f"{first} and {cell.id} (both translate {meta['source']}: merge)")
        else:
            translations[meta["source"]] = cell
    return translations


def build(en, zh, name: str, drop: bool = False):
    """The Chinese notebook a rebuild writes, and its report. ``zh`` is the one on disk (or
    None); ``drop`` lets translations of removed English cells go."""
    report = Report(name)
    en_by_id = {cell.id: cell for cell in en.cells}
    translations = _translations(zh, en_by_id, report) if zh is not None else {}
    wanted = [c.id for c in en.cells if c.cell_type == "markdown"]
    orphans = {i: t for i, t in translations.items() if i not in wanted}
    for old_id, cell in orphans.items():  # a moved cell gets a new id: re-attach by its hash
        digest = cell.metadata[KEY].get("source_sha256")
        same = [i for i in wanted if i not in translations and digest
                and source_hash(en_by_id[i].source) == digest]  # fmt: skip
        if len(same) == 1:
            translations[same[0]] = cell
            report.notes.append(f"{old_id} → {same[0]}: same English text, translation moved")
        elif drop:
            report.notes.append(f"{old_id}: its English cell is gone; translation dropped")
        else:
            first = cell.source.strip().splitlines()[0][:60] if cell.source.strip() else ""
            report.unkept.append(f"{cell.id} (translates {old_id}, which English no longer has "
                                 f"as markdown: {first!r}; pass --drop to drop it)")  # fmt: skip
    if zh is not None:
        # Where each English cell stands in zh: its translation's cell, or a cell of its own id.
        place = {c.id: k for k, c in enumerate(zh.cells)}
        where = {i: place.get(translations[i].id if i in translations else i) for i in en_by_id}
        absent = [i for i, k in where.items() if k is None]
        if absent:
            report.notes.append("English cells new to zh: " + ", ".join(absent))
        found = [k for k in where.values() if k is not None]
        if found != sorted(found):
            report.notes.append("the zh cells were in another order; now in the English order")

    out = copy.deepcopy(en)
    out.metadata[KEY] = {"language": LANGUAGE, "source": f"../en/{name}"}
    for cell in out.cells:
        if cell.cell_type != "markdown":
            continue
        digest, zh_cell = source_hash(cell.source), translations.get(cell.id)
        recorded = zh_cell.metadata[KEY].get("source_sha256") or "" if zh_cell else ""
        if not recorded:
            report.missing.append(cell.id)
        elif recorded != digest:
            report.stale.append((cell.id, _how_changed(name, cell.id, recorded, cell.source)))
        if zh_cell is not None and (recorded or CJK.search(zh_cell.source)):
            cell.source = zh_cell.source  # else a placeholder: the English text as it is now
            cell.attachments = {**cell.get("attachments", {}), **zh_cell.get("attachments", {})}
            if not cell.attachments:
                del cell["attachments"]
        cell.metadata[KEY] = {"source": cell.id, "source_sha256": recorded}
        if zh_cell is not None and zh_cell.metadata[KEY].get("links"):
            cell.metadata[KEY]["links"] = zh_cell.metadata[KEY]["links"]
    localise_links(out, name, report)
    for cell in out.cells:
        accepted = cell.cell_type == "markdown" and cell.metadata[KEY]["source_sha256"]
        if accepted and still_english(cell.source, en_by_id[cell.id].source):
            report.problems.append(f"cell {cell.id}: accepted, but still in English")
    return out, report


def accept(path: Path, cell_ids: list[str]) -> None:
    """Record that the named zh cells now translate the current English cells."""
    if path.parent != ZH:
        raise SyncError(f"{path}: --accept takes a Chinese notebook (notebooks/zh/*.ipynb)")
    zh = read(path)
    en = {cell.id: cell for cell in read(EN / path.name).cells}
    by_id = {cell.id: cell for cell in zh.cells}
    for cell_id in cell_ids:
        cell = by_id.get(cell_id)
        if cell is None or cell.cell_type != "markdown":
            raise SyncError(f"{path.name}: no markdown cell with id {cell_id}")
        meta = cell.metadata.get(KEY, {})
        english = en.get(meta.get("source", cell_id) if isinstance(meta, dict) else cell_id)
        if english is None or english.cell_type != "markdown":
            raise SyncError(f"{path.name}: cell {cell_id} translates no English markdown cell")
        if still_english(cell.source, english.source):
            raise SyncError(f"{path.name}: cell {cell_id} is still (partly) in English")
        cell.metadata[KEY] = {**meta, "source": english.id,
                              "source_sha256": source_hash(english.source)}  # fmt: skip
    nbformat.write(zh, path)


def text_of(nb: nbformat.NotebookNode) -> str:
    """The notebook as nbformat.write would store it."""
    text = nbformat.writes(nb)
    return text if text.endswith("\n") else text + "\n"


def _changed_cells(old: str | None, new: str) -> list[str]:
    if old is None:
        return ["(new notebook)"]
    before = {c.get("id"): c for c in json.loads(old).get("cells", [])}
    after = json.loads(new)
    changed = [c["id"] for c in after["cells"] if before.get(c["id"]) != c]
    gone = [i for i in before if i not in {c["id"] for c in after["cells"]}]
    meta = [] if json.loads(old).get("metadata") == after.get("metadata") else ["metadata"]
    return changed + [f"{i} (removed)" for i in gone] + meta


def sync(en_path: Path, check: bool, drop: bool = False) -> tuple[Report, list[str], bool]:
    """Rebuild one Chinese notebook. Returns its report, what differs between the file and a
    rebuild (cell ids), and whether the file was written."""
    zh_path = ZH / en_path.name
    zh = read(zh_path) if zh_path.exists() else None
    out, report = build(read(en_path), zh, en_path.name, drop)
    fresh = text_of(out)
    on_disk = zh_path.read_text(encoding="utf-8") if zh_path.exists() else None
    differs = [] if fresh == on_disk else _changed_cells(on_disk, fresh)
    if differs and not check and not report.unkept:
        ZH.mkdir(parents=True, exist_ok=True)
        zh_path.write_text(fresh, encoding="utf-8")
        return report, differs, True
    return report, differs, False


def print_report(report: Report, differs: list[str], wrote: bool) -> None:
    lines = [f"  {note}" for note in report.notes]
    lines += [f"  missing: cell {cell_id}" for cell_id in report.missing]
    lines += [f"  stale: cell {cell_id}: {how}" for cell_id, how in report.stale]
    lines += [f"  {problem}" for problem in report.problems]
    lines += [f"  cannot keep in step: zh cell {what}" for what in report.unkept]
    if differs:
        verb = (
            "rewritten" if wrote else "not written" if report.unkept else "differs from a rebuild"
        )
        lines.append(f"  {verb}: " + ", ".join(differs))
    status = "ok" if report.current and (wrote or not differs) else "needs work"
    print(f"{report.name}: {status}")
    for line in lines:
        print(line)


def _resolve(path: Path) -> Path:
    return path.resolve() if path.exists() or path.is_absolute() else (REPO / path).resolve()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: notebooks/en/*.ipynb")
    parser.add_argument("--check", action="store_true", help="report only, write nothing")
    parser.add_argument("--drop", action="store_true",
                        help="let translations of removed English cells go")  # fmt: skip
    parser.add_argument(
        "--accept",
        nargs="+",
        metavar=("ZH_NOTEBOOK", "CELL_ID"),
        help="record that these cells of a zh notebook translate the current English cells",
    )
    args = parser.parse_args(argv)
    if args.accept:
        if len(args.accept) < 2:
            parser.error("--accept needs a zh notebook and at least one cell id")
        path = _resolve(Path(args.accept[0]))
        try:
            accept(path, args.accept[1:])
        except SyncError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(f"accepted {len(args.accept) - 1} cell(s) in {path.name}; rebuilding it")
        args.notebooks = [EN / path.name]
    paths = [_resolve(p) for p in args.notebooks] or sorted(EN.glob("*.ipynb"))
    if not paths:
        print(f"no notebooks found in {EN}", file=sys.stderr)
        return 2
    status = 0
    for path in paths:
        try:
            if path.parent != EN:
                raise SyncError(f"{path}: give the English notebooks (notebooks/en/*.ipynb)")
            report, differs, wrote = sync(path, args.check, args.drop)
        except SyncError as exc:
            print(f"error: {exc}", file=sys.stderr)
            status = 2
            continue
        print_report(report, differs, wrote)
        if not (report.current and (wrote or not differs)):
            status = max(status, 1)
    if not args.notebooks:
        for orphan in sorted({p.name for p in ZH.glob("*.ipynb")} - {p.name for p in paths}):
            print(f"{orphan}: a Chinese notebook with no English one (renamed? remove it)")
            status = max(status, 1)
    return status


if __name__ == "__main__":
    sys.exit(main())
