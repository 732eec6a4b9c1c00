"""The Chinese edition: notebooks/zh/ is what tools/sync_translation.py builds from notebooks/en/,
with every markdown cell translated from the English cell as it is now; and the tool's behaviour
on notebooks that change (new, removed, reordered and edited cells)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))
import sync_translation as sync

ENGLISH = sorted((REPO / "notebooks" / "en").glob("*.ipynb"))
CJK = re.compile(r"[\u4e00-\u9fff]")
# Prose in a markdown cell: a word of three or more letters outside code spans and formulas.
PROSE = re.compile(r"[A-Za-z]{3,}")


def _prose(text: str) -> bool:
    text = re.sub(r"```.*?```|`[^`]*`|\$[^$]*\$|\]\([^)]*\)", " ", text, flags=re.DOTALL)
    return bool(PROSE.search(text))


@pytest.mark.parametrize("english", ENGLISH, ids=lambda p: p.name)
def test_the_chinese_notebook_is_built_and_current(english):
    chinese = sync.ZH / english.name
    assert chinese.exists(), f"no {chinese.relative_to(REPO)}: run tools/sync_translation.py"
    built, report = sync.build(sync.read(english), sync.read(chinese), english.name)
    assert not report.unkept, f"{english.name}: zh cells that translate nothing: {report.unkept}"
    assert not report.missing, f"{english.name}: untranslated cells {report.missing}"
    assert not report.stale, f"{english.name}: stale translations {[c for c, _ in report.stale]}"
    assert chinese.read_text(encoding="utf-8") == sync.text_of(built), (
        f"{chinese.name} is not what tools/sync_translation.py builds (a code cell, an output or "
        "the cell order differs from the English notebook): run the tool"
    )


@pytest.mark.parametrize("english", ENGLISH, ids=lambda p: p.name)
def test_every_translation_is_chinese(english):
    chinese = sync.read(sync.ZH / english.name) if (sync.ZH / english.name).exists() else None
    if chinese is None:
        pytest.skip("no Chinese notebook (the test above fails)")
    for en_cell, zh_cell in zip(sync.read(english).cells, chinese.cells, strict=True):
        if en_cell.cell_type == "markdown" and _prose(en_cell.source):
            assert CJK.search(zh_cell.source), f"{english.name}, cell {zh_cell.id}: no Chinese"


# --- the tool on small notebooks ----------------------------------------------------------------


@pytest.fixture
def editions(tmp_path, monkeypatch):
    en, zh = tmp_path / "en", tmp_path / "zh"
    en.mkdir()
    monkeypatch.setattr(sync, "EN", en)
    monkeypatch.setattr(sync, "ZH", zh)
    monkeypatch.setattr(sync, "_english_then", lambda *args: None)  # no git history here
    return en, zh


def _notebook(*cells):
    nb = nbformat.v4.new_notebook()
    for kind, cell_id, text in cells:
        cell = (nbformat.v4.new_markdown_cell if kind == "md" else nbformat.v4.new_code_cell)(text)
        cell.id = cell_id
        if kind == "code":
            cell.execution_count = 1
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="42\n")]
        nb.cells.append(cell)
    return nb


def _write(path, nb):
    nbformat.write(nb, path)
    return path


def _translate(zh_path, **texts):
    nb = nbformat.read(zh_path, as_version=4)
    for cell in nb.cells:
        if cell.id in texts:
            cell.source = texts[cell.id]
    nbformat.write(nb, zh_path)
    sync.accept(zh_path, list(texts))


def _cells(zh_path):
    return {c.id: c for c in nbformat.read(zh_path, as_version=4).cells}


def test_a_first_build_copies_code_and_lists_every_markdown_cell_as_missing(editions):
    en, zh = editions
    path = _write(en / "01.ipynb", _notebook(("md", "a", "# Title"), ("code", "b", "print(42)")))
    report, in_step = sync.sync(path, check=False)
    assert report.missing == ["a"] and in_step
    cells = _cells(zh / "01.ipynb")
    assert cells["b"].outputs[0]["text"] == "42\n" and cells["b"].source == "print(42)"
    assert cells["a"].metadata["translation"] == {"source": "a", "source_sha256": ""}


def test_a_translation_edited_by_hand_survives_while_its_english_cell_is_unchanged(editions):
    en, zh = editions
    path = _write(en / "01.ipynb", _notebook(("md", "a", "# Title"), ("md", "c", "Some words.")))
    sync.sync(path, check=False)
    _translate(zh / "01.ipynb", a="# 标题", c="一些话。")
    nb = nbformat.read(zh / "01.ipynb", as_version=4)
    nb.cells[1].source = "几句话。"  # edited in JupyterLab: the metadata stays
    nbformat.write(nb, zh / "01.ipynb")
    report, _ = sync.sync(path, check=False)
    assert report.current
    assert _cells(zh / "01.ipynb")["c"].source == "几句话。"


def test_a_changed_english_cell_makes_its_translation_stale_and_keeps_the_old_text(editions):
    en, zh = editions
    path = _write(en / "01.ipynb", _notebook(("md", "a", "Old words.")))
    sync.sync(path, check=False)
    _translate(zh / "01.ipynb", a="旧的话。")
    _write(path, _notebook(("md", "a", "New words.")))
    report, _ = sync.sync(path, check=False)
    assert [cell_id for cell_id, _ in report.stale] == ["a"]
    assert "New words." in report.stale[0][1]
    assert _cells(zh / "01.ipynb")["a"].source == "旧的话。"
    _translate(zh / "01.ipynb", a="新的话。")
    assert sync.sync(path, check=True)[0].current


def test_new_removed_and_reordered_cells_are_named_and_translations_follow_their_cells(editions):
    en, zh = editions
    path = _write(en / "01.ipynb", _notebook(("md", "a", "One."), ("md", "b", "Two."),
                                             ("md", "c", "Three.")))  # fmt: skip
    sync.sync(path, check=False)
    _translate(zh / "01.ipynb", a="一。", b="二。", c="三。")
    _write(path, _notebook(("md", "c", "Three."), ("md", "d", "Four."), ("md", "a", "One.")))
    report, _ = sync.sync(path, check=False)
    notes = "\n".join(report.notes)
    assert "b: its English cell was removed" in notes and "new English cells: d" in notes
    assert "reordered" in notes and report.missing == ["d"]
    assert [c.source for c in nbformat.read(zh / "01.ipynb", as_version=4).cells] == [
        "三。", "Four.", "一。",
    ]  # fmt: skip


def test_a_chinese_cell_that_translates_nothing_stops_the_write(editions):
    en, zh = editions
    path = _write(en / "01.ipynb", _notebook(("md", "a", "One.")))
    sync.sync(path, check=False)
    nb = nbformat.read(zh / "01.ipynb", as_version=4)
    extra = nbformat.v4.new_markdown_cell("我自己加的。")
    extra.id = "mine"
    nb.cells.append(extra)
    nbformat.write(nb, zh / "01.ipynb")
    before = (zh / "01.ipynb").read_text(encoding="utf-8")
    report, in_step = sync.sync(path, check=False)
    assert report.unkept and "mine" in report.unkept[0] and not in_step
    assert (zh / "01.ipynb").read_text(encoding="utf-8") == before


def test_a_code_cell_edited_in_the_chinese_notebook_is_replaced_and_named(editions):
    en, zh = editions
    path = _write(en / "01.ipynb", _notebook(("code", "b", "print(42)")))
    sync.sync(path, check=False)
    nb = nbformat.read(zh / "01.ipynb", as_version=4)
    nb.cells[0].source = "print(43)"
    nbformat.write(nb, zh / "01.ipynb")
    assert not sync.sync(path, check=True)[1]
    report, _ = sync.sync(path, check=False)
    assert "b: the zh code cell differed from English" in report.notes[0]
    assert _cells(zh / "01.ipynb")["b"].source == "print(42)"


def test_bad_input_is_refused_with_a_message(editions):
    en, zh = editions
    nb = _notebook(("md", "a", "One."), ("md", "b", "Two."))
    text = nbformat.writes(nb).replace('"id": "b"', '"id": "a"')
    (en / "01.ipynb").write_text(text, encoding="utf-8")
    with pytest.raises(sync.SyncError, match="ids used twice: a"):
        sync.sync(en / "01.ipynb", check=False)
    _write(en / "02_b.ipynb", _notebook(("md", "a", "One.")))
    sync.sync(en / "02_b.ipynb", check=False)
    with pytest.raises(sync.SyncError, match="still holds the English text"):
        sync.accept(zh / "02_b.ipynb", ["a"])
    with pytest.raises(sync.SyncError, match="no markdown cell with id z"):
        sync.accept(zh / "02_b.ipynb", ["z"])
    (en / "03.ipynb").write_text("not json", encoding="utf-8")
    with pytest.raises(sync.SyncError, match="cannot read it as a notebook"):
        sync.sync(en / "03.ipynb", check=False)
    (en / "04.ipynb").write_text(nbformat.writes(nb).replace('"id": "b",', ""), encoding="utf-8")
    with pytest.raises(sync.SyncError, match="cell 1 has no id"):
        sync.sync(en / "04.ipynb", check=False)


def test_links_to_english_headings_are_pointed_at_the_chinese_ones(editions):
    en, zh = editions
    _write(en / "02_b.ipynb", _notebook(("md", "h", "# Title\n\n## 2 · Masks (`mask`)")))
    sync.sync(en / "02_b.ipynb", check=False)
    _translate(zh / "02_b.ipynb", h="# 标题\n\n## 2 · 掩码（`mask`）")
    text = "See [masks](02_b.ipynb#2-·-Masks-(mask)), [here](#Next) and [x](02_b.ipynb#Nowhere)."
    path = _write(en / "01.ipynb", _notebook(("md", "a", text), ("md", "n", "## Next")))
    sync.sync(path, check=False)
    _translate(zh / "01.ipynb", a="见" + text, n="## 下一步")
    report, in_step = sync.sync(path, check=False)
    assert report.current and in_step
    assert _cells(zh / "01.ipynb")["a"].source == (
        "见See [masks](02_b.ipynb#2-·-掩码（mask）), [here](#下一步) and [x](02_b.ipynb#Nowhere)."
    )
    assert sync.sync(path, check=True)[0].current  # rewriting is idempotent
