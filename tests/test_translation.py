"""The Chinese edition: notebooks/zh/ is what tools/sync_translation.py builds from notebooks/en/,
with every markdown cell translated from the English cell as it is now; and the tool's behaviour
on notebooks that change (new, removed, reordered and edited cells)."""

from __future__ import annotations

import copy

import nbformat
import pytest
from helpers import load_tool

sync = load_tool("sync_translation")
ENGLISH = sorted(sync.EN.glob("*.ipynb"))


@pytest.mark.parametrize("english", ENGLISH, ids=lambda p: p.name)
def test_the_chinese_notebook_is_built_and_current(english):
    chinese = sync.ZH / english.name
    assert chinese.exists(), f"no {chinese.relative_to(sync.REPO)}: run tools/sync_translation.py"
    built, report = sync.build(sync.read(english), sync.read(chinese), english.name)
    assert not report.unkept, f"{english.name}: zh cells out of step: {report.unkept}"
    assert not report.missing, f"{english.name}: untranslated cells {report.missing}"
    assert not report.stale, f"{english.name}: stale translations {[c for c, _ in report.stale]}"
    assert not report.problems, f"{english.name}: {report.problems}"
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
        if en_cell.cell_type == "markdown" and sync.has_prose(en_cell.source):
            assert sync.CJK.search(zh_cell.source), f"{english.name}, cell {zh_cell.id}: no Chinese"


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
        make = {"md": nbformat.v4.new_markdown_cell, "code": nbformat.v4.new_code_cell}[kind]
        cell = make(text)
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


def _edit(zh_path, change):
    nb = nbformat.read(zh_path, as_version=4)
    change(nb)
    nbformat.write(nb, zh_path)


def _cells(zh_path):
    return {c.id: c for c in nbformat.read(zh_path, as_version=4).cells}


@pytest.fixture
def translated(editions):
    """01.ipynb: a title, a code cell and a paragraph, translated and in step."""
    en, zh = editions
    path = _write(en / "01.ipynb", _notebook(("md", "a", "# Title"), ("code", "b", "print(42)"),
                                             ("md", "c", "Some words here.")))  # fmt: skip
    sync.sync(path, check=False)
    _translate(zh / "01.ipynb", a="# 标题", c="一些话。")
    assert sync.sync(path, check=False)[0].current
    return path, zh / "01.ipynb"


def test_a_first_build_copies_code_and_lists_every_markdown_cell_as_missing(editions):
    en, zh = editions
    path = _write(en / "01.ipynb", _notebook(("md", "a", "# Title"), ("code", "b", "print(42)")))
    report, differs, wrote = sync.sync(path, check=False)
    assert report.missing == ["a"] and wrote and differs == ["(new notebook)"]
    cells = _cells(zh / "01.ipynb")
    assert cells["b"].outputs[0]["text"] == "42\n" and cells["b"].source == "print(42)"
    assert cells["a"].metadata["translation"] == {"source": "a", "source_sha256": ""}
    _write(path, _notebook(("md", "a", "# New title"), ("code", "b", "print(42)")))
    sync.sync(path, check=False)  # an untranslated placeholder follows the English text
    assert _cells(zh / "01.ipynb")["a"].source == "# New title"


def test_a_translation_edited_by_hand_survives_while_its_english_cell_is_unchanged(translated):
    path, zh_path = translated
    _edit(zh_path, lambda nb: setattr(nb.cells[2], "source", "几句话。"))  # as in JupyterLab
    report, _, _ = sync.sync(path, check=False)
    assert report.current and _cells(zh_path)["c"].source == "几句话。"


def test_a_changed_english_cell_makes_its_translation_stale_and_keeps_the_old_text(translated):
    path, zh_path = translated
    nb = nbformat.read(path, as_version=4)
    nb.cells[2].source = "Other words here."
    _write(path, nb)
    report, _, _ = sync.sync(path, check=False)
    assert [cell_id for cell_id, _ in report.stale] == ["c"]
    assert "Other words here." in report.stale[0][1] and _cells(zh_path)["c"].source == "一些话。"
    _translate(zh_path, c="别的话。")
    assert sync.sync(path, check=True)[0].current


def test_new_removed_and_reordered_cells_are_named_and_translations_follow_their_cells(editions):
    en, zh = editions
    path = _write(en / "01.ipynb", _notebook(("md", "a", "One."), ("md", "b", "Two."),
                                             ("md", "c", "Three.")))  # fmt: skip
    sync.sync(path, check=False)
    _translate(zh / "01.ipynb", a="一。", b="二。", c="三。")
    _write(path, _notebook(("md", "c", "Three."), ("md", "d", "Four."), ("md", "a", "One.")))
    report, _, wrote = sync.sync(path, check=False)
    assert not wrote and "translates b, which English no longer has" in report.unkept[0]
    report, _, wrote = sync.sync(path, check=False, drop=True)
    notes = "\n".join(report.notes)
    assert wrote and "b: its English cell is gone; translation dropped" in notes
    assert "English cells new to zh: d" in notes and "another order" in notes
    assert report.missing == ["d"]
    assert [c.source for c in nbformat.read(zh / "01.ipynb", as_version=4).cells] == [
        "三。", "Four.", "一。",
    ]  # fmt: skip


def test_a_moved_english_cell_with_a_new_id_keeps_its_translation(translated):
    path, zh_path = translated
    nb = nbformat.read(path, as_version=4)
    moved = nb.cells.pop(2)
    moved.id = "3f2a9c1e"  # JupyterLab's cut and paste gives a markdown cell a new id
    nb.cells.insert(0, moved)
    _write(path, nb)
    report, _, wrote = sync.sync(path, check=False)
    assert wrote and report.current and "c → 3f2a9c1e" in report.notes[0]
    assert _cells(zh_path)["3f2a9c1e"].source == "一些话。"


def _copy(cell, new_id):
    twin = copy.deepcopy(cell)  # JupyterLab's split and duplicate copy the metadata too
    twin.id = new_id
    return twin


@pytest.mark.parametrize(
    "change, named",
    [
        (lambda nb: nb.cells.append(_notebook(("md", "mine", "我加的。")).cells[0]), "mine"),
        (lambda nb: nb.cells.append(_notebook(("code", "zh1", "1 + 1")).cells[0]), "zh1"),
        (lambda nb: nb.cells.insert(3, _copy(nb.cells[2], "c2")), "both"),
        (lambda nb: nb.cells.__setitem__(2, nbformat.v4.new_code_cell(
            "一些话。", id="c", metadata=nb.cells[2].metadata)), "turned into a code cell"),
        (lambda nb: nb.cells[2].metadata.__setitem__("translation", "c"), "metadata"),
    ],
    ids=["markdown added", "code added", "split or duplicated", "type changed", "bad metadata"],
)  # fmt: skip
def test_a_chinese_cell_that_cannot_be_kept_in_step_stops_the_write(translated, change, named):
    path, zh_path = translated
    _edit(zh_path, change)
    before = zh_path.read_text(encoding="utf-8")
    report, differs, wrote = sync.sync(path, check=False)
    assert not wrote and differs and named in " ".join(report.unkept)
    assert zh_path.read_text(encoding="utf-8") == before


def test_a_code_cell_edited_in_the_chinese_notebook_is_replaced_and_named(translated):
    path, zh_path = translated
    _edit(zh_path, lambda nb: setattr(nb.cells[1], "source", "print(43)"))
    assert sync.sync(path, check=True)[1] == ["b"]
    report, _, wrote = sync.sync(path, check=False)
    assert "b: the zh code cell differed from English" in report.notes[0] and wrote
    assert _cells(zh_path)["b"].source == "print(42)"


def test_attachments_of_a_translation_are_kept(translated):
    path, zh_path = translated
    png = {"image/png": "iVBORw0KGgo="}

    def attach(nb):
        nb.cells[2].source = "一些话。![图](attachment:zh.png)"
        nb.cells[2].attachments = {"zh.png": png}

    _edit(zh_path, attach)
    assert sync.sync(path, check=False)[0].current
    assert _cells(zh_path)["c"].attachments == {"zh.png": png}


def test_a_translation_still_in_english_is_refused_and_reported(translated):
    path, zh_path = translated
    with pytest.raises(sync.SyncError, match="still"):
        _translate(zh_path, c="Some words here.")
    with pytest.raises(sync.SyncError, match="still"):
        _translate(zh_path, c="一些 words that were left here in English。")
    _edit(zh_path, lambda nb: setattr(nb.cells[2], "source", "Some words here."))
    report, _, _ = sync.sync(path, check=False)
    assert report.problems == ["cell c: accepted, but still in English"]


def test_links_to_english_headings_are_pointed_at_the_chinese_ones(editions):
    en, zh = editions
    _write(en / "02_b.ipynb", _notebook(("md", "h", "# Title\n\n## 2 · Masks (`mask`)")))
    sync.sync(en / "02_b.ipynb", check=False)
    _translate(zh / "02_b.ipynb", h="# 标题\n\n## 2 · 掩码（`mask`）")
    text = "See [masks](02_b.ipynb#2-·-Masks-(mask)), [here](#Next) and [x](02_b.ipynb#Nowhere)."
    path = _write(en / "01.ipynb", _notebook(("md", "a", text), ("md", "n", "## Next")))
    sync.sync(path, check=False)
    _translate(zh / "01.ipynb", a="见" + text.removeprefix("See "), n="## 下一步")
    report, _, _ = sync.sync(path, check=False)
    assert report.problems == ["cell a: no heading #Nowhere in 02_b.ipynb"]
    assert _cells(zh / "01.ipynb")["a"].source == (
        "见[masks](02_b.ipynb#2-·-掩码（mask）), [here](#下一步) and [x](02_b.ipynb#Nowhere)."
    )
    _translate(zh / "02_b.ipynb", h="# 标题\n\n## 2 · 用什么掩码（`mask`）")  # retranslated
    sync.sync(path, check=False)
    assert "(02_b.ipynb#2-·-用什么掩码（mask）)" in _cells(zh / "01.ipynb")["a"].source
    assert sync.sync(path, check=True)[1] == []  # rewriting is idempotent


def test_bad_input_is_refused_with_a_message(editions):
    en, zh = editions
    nb = _notebook(("md", "a", "One."), ("md", "b", "Two."))
    (en / "01.ipynb").write_text(nbformat.writes(nb).replace('"id": "b"', '"id": "a"'), "utf-8")
    with pytest.raises(sync.SyncError, match="ids used twice: a"):
        sync.sync(en / "01.ipynb", check=False)
    _write(en / "02_b.ipynb", _notebook(("md", "a", "One word or two.")))
    sync.sync(en / "02_b.ipynb", check=False)
    with pytest.raises(sync.SyncError, match="still"):
        sync.accept(zh / "02_b.ipynb", ["a"])
    with pytest.raises(sync.SyncError, match="no markdown cell with id z"):
        sync.accept(zh / "02_b.ipynb", ["z"])
    with pytest.raises(sync.SyncError, match="takes a Chinese notebook"):
        sync.accept(en / "02_b.ipynb", ["a"])
    (en / "03.ipynb").write_text("not json", encoding="utf-8")
    with pytest.raises(sync.SyncError, match="cannot read it as a notebook"):
        sync.sync(en / "03.ipynb", check=False)
    (en / "04.ipynb").write_text(nbformat.writes(nb).replace('"id": "b",', ""), encoding="utf-8")
    with pytest.raises(sync.SyncError, match="cell 1 has no id"):
        sync.sync(en / "04.ipynb", check=False)


def test_the_command_line_reports_every_notebook_and_orphans(editions, capsys):
    en, zh = editions
    _write(en / "01.ipynb", _notebook(("md", "a", "# Title")))
    (en / "02.ipynb").write_text("not json", encoding="utf-8")
    assert sync.main(["--check"]) == 2  # 02 unreadable; 01 still reported
    out = capsys.readouterr()
    assert "01.ipynb: needs work" in out.out and "02.ipynb: cannot read" in out.err
    (en / "02.ipynb").unlink()
    assert sync.main([]) == 1  # written, but missing a translation
    (zh / "01.ipynb").rename(zh / "01_old.ipynb")
    sync.main([])
    assert "01_old.ipynb: a Chinese notebook with no English one" in capsys.readouterr().out
