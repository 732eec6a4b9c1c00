"""The notebooks as slide decks: every cell's slide type follows tools/set_slide_metadata.py,
and each notebook converts, with nbconvert's SlidesExporter and the settings of
slides/offline.py, into the slides its metadata says, as a page that loads nothing from the
network (reveal.js and MathJax are written into it from slides/vendor/).

The conversion runs in-process. What does not depend on the slide metadata tested is skipped:
pygments colouring and bleach cleaning of the code (two filters replaced by cheap ones), the
notebook's validation after each (disabled) preprocessor, and the pass that re-parses the
finished page with BeautifulSoup to add alt texts and tab stops (together four fifths of the
conversion time). tests/test_browser.py opens a deck in Chromium with the network cut off.
"""

from __future__ import annotations

import hashlib
import html
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
from helpers import load_tool
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output
from traitlets.config.loader import PyFileConfigLoader

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((REPO / "notebooks" / "en").glob("*.ipynb"))
HIDDEN = ("skip", "notes")  # slide types reveal.js does not show on a slide
SLIDES = REPO / "slides"


tool = load_tool("set_slide_metadata")


def stored_types(nb) -> list[str]:
    return [c.metadata.get("slideshow", {}).get("slide_type", "-") for c in nb.cells]


# --- the stored metadata --------------------------------------------------------------------


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_cell_has_the_slide_type_the_rules_give(path):
    nb = nbformat.read(path, as_version=4)
    invalid = [
        (i, c.metadata.get("slideshow", {}).get("slide_type"))
        for i, c in enumerate(nb.cells)
        if tool.current_type(c) is None
    ]
    assert not invalid, (
        f"{path.name}: cells without a valid slide type (index, value): {invalid[:10]}; "
        "run python tools/set_slide_metadata.py"
    )
    wrong = tool.differences(nb)
    assert not wrong, (
        f"{path.name}: slide types that differ from the rules (index, stored, expected): "
        f"{wrong[:10]}; run python tools/set_slide_metadata.py"
    )


# --- the rules on small notebooks -------------------------------------------------------------


def stream(text: str):
    return new_output("stream", name="stdout", text=text)


def test_the_rules_on_a_small_lesson():
    solution = new_code_cell("# Solution\nx = 1", outputs=[stream("1\n")])
    solution.metadata["tags"] = ["solution"]
    nb = new_notebook(
        cells=[
            new_markdown_cell("# 99 · A lesson\n\nWhat you will learn."),
            new_code_cell(
                "import math\n\nimport torch\n\ntorch.manual_seed(0)\n%matplotlib inline"
            ),
            new_markdown_cell("## 1 · A section\n\nIts introduction."),
            new_code_cell("print(math.pi)", outputs=[stream("3.1416\n")]),
            new_markdown_cell("> **Careful.** The article says otherwise."),
            new_code_cell("assert math.pi > 3"),
            new_code_cell("print(2)", outputs=[stream("2\n")]),
            new_code_cell(""),
            new_markdown_cell("### Exercise 1 · Try it"),
            new_code_cell("def f(x):\n    ..."),
            new_code_cell("check(f)", outputs=[stream("Not yet.\n")]),
            solution,
        ]
    )
    assert tool.slide_types(nb) == [
        "slide",  # the title
        "skip",  # imports, seeding and a magic: setup
        "slide",  # ## heading
        "fragment",  # a result, revealed after the introduction
        "fragment",  # a Careful callout
        "-",  # no output: shown with the callout it checks
        "fragment",
        "skip",  # empty
        "subslide",  # ### heading
        "-",
        "fragment",
        "skip",  # the solution
    ]


def test_a_long_section_is_split_between_steps_not_inside_one():
    steps = [
        cell
        for _ in range(4)
        for cell in (
            new_markdown_cell("A claim."),
            new_code_cell("print(table)", outputs=[stream("row\n" * 12)]),  # ~350 px
        )
    ]
    nb = new_notebook(cells=[new_markdown_cell("# T"), new_markdown_cell("## S"), *steps])
    types = tool.slide_types(nb)
    assert types[:4] == ["slide", "slide", "fragment", "fragment"]
    # Every later claim opens a subslide (two steps do not fit), and its code stays with it.
    assert types[4:] == ["subslide", "fragment"] * 3


def test_a_heading_counts_anywhere_in_a_cell_but_not_inside_a_code_block():
    def level(source):
        return tool.heading_level(new_markdown_cell(source))

    assert level("## 8 · Check yourself\n\nIntro.\n\n### Exercise 1") == 2
    assert level("The end of section 2.\n\n## 3 · The next section") == 2
    assert level("Run this:\n\n```bash\n# a comment, not a heading\nls\n```") is None
    assert level("#hashtag is no heading either") is None
    assert level("Or this:\n\n~~~bash\n# a comment\n~~~\n\nText.") is None  # tilde fences
    assert level("~~~\n```\n# inside\n```\n~~~\n## After") == 2  # a fence ends with its kind
    # The height estimate reads fences the same way: a tilde block is code, not a heading.
    assert tool.markdown_height("~~~\n# a comment\n~~~") == tool.markdown_height(
        "```\n# a comment\n```"
    )


def test_setup_is_only_imports_and_configuration():
    def setup(source, outputs=()):
        return tool.is_setup(new_code_cell(source, outputs=list(outputs)))

    assert setup("import torch\ntorch.set_printoptions(precision=4)\n_ = torch.manual_seed(0)")
    assert not setup("import torch\nx = torch.zeros(3)")  # computes something
    assert setup("import attn_lib\nfmt = attn_lib.fmt_values")  # an alias
    assert not setup("import attn_lib\nfmt = attn_lib.fmt_values(1.0)")  # a call
    assert not setup("import sys\nprint(sys.version)", [stream("3.11\n")])  # the reader sees it
    assert not setup("!pip install torch")  # not Python
    assert not setup("%%bash\nimport this_is_bash")  # a cell magic's body is not Python
    tagged = new_code_cell("x = load_everything()")
    tagged.metadata["tags"] = ["setup"]
    assert tool.is_setup(tagged)


def test_a_solution_is_skipped_even_as_the_first_cell_and_bad_metadata_is_replaced():
    first = new_code_cell("answer = 42", outputs=[stream("42\n")])
    first.metadata["tags"] = ["solution"]
    odd = new_markdown_cell("## A section")
    odd.metadata["slideshow"] = "slide"  # a bare string, not {"slide_type": ...}
    nb = new_notebook(cells=[first, odd])
    assert [want for _, _, want in tool.differences(nb)] == ["skip", "slide"]
    assert tool.apply(nb) == 2
    assert stored_types(nb) == ["skip", "slide"] and tool.differences(nb) == []


def test_slide_keep_is_respected_and_applying_twice_changes_nothing():
    kept = new_markdown_cell("Say this aloud.")
    kept.metadata.update(tags=["slide-keep"], slideshow={"slide_type": "notes"})
    nb = new_notebook(cells=[new_markdown_cell("# T"), kept, new_markdown_cell("More.")])
    assert tool.apply(nb) == 2
    assert stored_types(nb) == ["slide", "notes", "fragment"]
    assert tool.apply(nb) == 0
    assert tool.differences(nb) == []


def test_the_script_writes_only_slide_metadata_and_check_then_passes(tmp_path, capsys):
    source = REPO / "notebooks" / "en" / "00_start_here.ipynb"
    copy = tmp_path / source.name
    shutil.copyfile(source, copy)
    for cell in (nb := nbformat.read(copy, as_version=4)).cells:
        cell.metadata.pop("slideshow", None)
    nbformat.write(nb, copy)

    assert tool.main(["--check", str(copy)]) == 1
    assert tool.main([str(copy)]) == 0
    assert tool.main(["--check", str(copy)]) == 0
    capsys.readouterr()

    written = nbformat.read(copy, as_version=4)
    assert all(tool.current_type(c) for c in written.cells)
    for cell in written.cells:
        del cell.metadata["slideshow"]
    assert written == nb, "the script changed something besides metadata.slideshow"


# --- conversion with nbconvert --------------------------------------------------------------


def plain_code(source: str, **_: object) -> str:
    return f"<pre>{html.escape(source)}</pre>"


class PageAsRendered:
    """Stands in for BeautifulSoup in nbconvert's HTML exporter: selects nothing, so the page
    comes back exactly as the template rendered it (no alt texts, no tabindex added)."""

    def __init__(self, page: str, features: str | None = None) -> None:
        self.page = page

    def select(self, selector: str) -> list:
        return []

    def __str__(self) -> str:
        return self.page


def offline_config():
    """slides/offline.py, read as `jupyter nbconvert --config slides/offline.py` reads it."""
    return PyFileConfigLoader("offline.py", path=str(SLIDES)).load_config()


@pytest.fixture(scope="module")
def exporter():
    from nbconvert import SlidesExporter
    from nbconvert.exporters import html as html_exporter

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(html_exporter, "BeautifulSoup", PageAsRendered)
        slides = SlidesExporter(
            config=offline_config(),
            filters={"clean_html": lambda text: text, "highlight_code": plain_code},
        )
        slides._validate_preprocessor = lambda nb, preprocessor: None
        yield slides


def section_counts(page: str) -> tuple[int, int]:
    """(top-level sections, sections one level down) in the HTML; checks that they nest."""
    depth, counts = 0, [0, 0, 0]
    for match in re.finditer(r"<(/?)section\b", page):
        if match.group(1):
            depth -= 1
            assert depth >= 0, "a </section> closes nothing"
        else:
            counts[min(depth, 2)] += 1
            depth += 1
    assert depth == 0, "a <section> is never closed"
    assert counts[2] == 0, "reveal.js slides nest two levels deep, not three"
    return counts[0], counts[1]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_converts_to_the_slides_its_metadata_describes(path, exporter):
    nb = nbformat.read(path, as_version=4)
    types = stored_types(nb)
    # nbconvert turns the first shown cell into a slide, whatever its type.
    first = next(i for i, t in enumerate(types) if t not in HIDDEN)
    types[first] = "slide"

    page, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": path.stem}})

    slides, subslides = section_counts(page)
    assert slides == types.count("slide")
    assert subslides == types.count("slide") + types.count("subslide")  # one per slide, too
    assert page.count('<div class="fragment"') == types.count("fragment")
    shown = sum(t != "skip" for t in types)  # notes are rendered, as speaker notes
    assert len(re.findall(r'class="jp-Cell ', page)) == shown, "a skipped cell was rendered"
    title = nb.cells[0].source.strip().splitlines()[0].lstrip("#").strip()
    assert title in html.unescape(page), f"title {title!r} missing"  # "·" comes as &#183;
    assert not remote_loads(page), f"{path.name}: the slides load {remote_loads(page)}"
    assert "Reveal.initialize(" in page and ("window.MathJax" in page) == has_math(nb)


# --- nothing from the network ---------------------------------------------------------------

# What a page fetches by itself: an element's source, a stylesheet, a CSS import or url(),
# an ES module import. (A link the reader may click is no load.)
LOADING_ATTRIBUTES = {
    "script": ("src",), "link": ("href",), "img": ("src", "srcset"), "iframe": ("src",),
    "source": ("src", "srcset"), "video": ("src", "poster"), "audio": ("src",),
    "embed": ("src",), "object": ("data",), "input": ("src",),
}  # fmt: skip
REMOTE = r"""(?:https?:)?//[^\s'"<>)]+"""
CSS_LOADS = re.compile(rf"""@import\s+(?:url\()?\s*['"]?({REMOTE})|url\(\s*['"]?({REMOTE})""")
MODULE_LOADS = re.compile(rf"""(?:\bfrom|\bimport\s*\(?)\s*['"]({REMOTE})""")


class _LoadFinder(HTMLParser):
    """Collects the URLs a page would fetch by itself (see remote_loads)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.urls: list[str] = []
        self.inside: str | None = None  # "style", or "module" inside <script type="module">

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        for name in LOADING_ATTRIBUTES.get(tag, ()):
            for url in (values.get(name) or "").replace(",", " ").split():
                if re.fullmatch(REMOTE, url):
                    self.urls.append(url)
        self.urls += [u for pair in CSS_LOADS.findall(values.get("style") or "") for u in pair if u]
        if tag == "style" or (tag == "script" and values.get("type") == "module"):
            self.inside = "style" if tag == "style" else "module"

    def handle_endtag(self, tag: str) -> None:
        self.inside = None

    def handle_data(self, data: str) -> None:
        if self.inside == "style":
            self.urls += [u for pair in CSS_LOADS.findall(data) for u in pair if u]
        elif self.inside == "module":
            self.urls += MODULE_LOADS.findall(data)


def remote_loads(page: str) -> list[str]:
    """The http(s) or protocol-relative URLs that the page's HTML and CSS would load."""
    finder = _LoadFinder()
    finder.feed(page)
    finder.close()
    return finder.urls


def has_math(nb) -> bool:
    return any(
        c.cell_type == "markdown" and any(m in c.source for m in ("$", "\\(", "\\["))
        for c in nb.cells
    )


def test_remote_loads_finds_what_nbconvert_loads_from_cdns():
    page = """<html><head>
    <script src="https://cdnjs.cloudflare.com/ajax/libs/require.js/2.1.10/require.min.js"></script>
    <link rel="stylesheet" href="//unpkg.com/reveal.js@4.0.2/dist/reveal.css">
    <style>@import url(https://fonts.googleapis.com/css?family=Lato);
    .a { background: url('https://example.org/x.png') }</style>
    <script type="module">import mermaid from 'https://cdn.example/mermaid.mjs';</script>
    <script>const ns = "http://www.w3.org/2000/svg"; // a string, not a load</script>
    </head><body><a href="https://arxiv.org/abs/1706.03762">a link</a>
    <img src="data:image/png;base64,AAAA"><img src="https://example.org/y.png"></body></html>"""
    assert remote_loads(page) == [
        "https://cdnjs.cloudflare.com/ajax/libs/require.js/2.1.10/require.min.js",
        "//unpkg.com/reveal.js@4.0.2/dist/reveal.css",
        "https://fonts.googleapis.com/css?family=Lato",
        "https://example.org/x.png",
        "https://cdn.example/mermaid.mjs",
        "https://example.org/y.png",
    ]


def test_nbconvert_alone_would_load_from_cdns(exporter):
    """Why slides/offline.py exists: the same notebook through nbconvert's own template."""
    from nbconvert import SlidesExporter
    from nbconvert.exporters import html as html_exporter

    nb = new_notebook(cells=[new_markdown_cell("# T\n\n$x^2$")])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(html_exporter, "BeautifulSoup", PageAsRendered)
        page, _ = SlidesExporter(filters=exporter.filters).from_notebook_node(nb)
    assert any("reveal.js" in url for url in remote_loads(page))
    offline, _ = exporter.from_notebook_node(nb)
    assert not remote_loads(offline) and "window.MathJax" in offline


def test_vendored_files_are_the_ones_listed():
    """slides/vendor/README.md names each file's package and SHA-256: they must still agree."""
    readme = (SLIDES / "vendor" / "README.md").read_text(encoding="utf-8")
    listed = re.findall(r"^([0-9a-f]{64})  (\S+)$", readme, flags=re.MULTILINE)
    assert listed, "slides/vendor/README.md lists no SHA-256"
    for digest, name in listed:
        data = (SLIDES / "vendor" / name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == digest, f"slides/vendor/{name} changed"
    licences = {p.parent.name for p in (SLIDES / "vendor").glob("*/LICENSE")}
    assert licences == {p.parent.name for p in (SLIDES / "vendor").glob("*/*.js")}
