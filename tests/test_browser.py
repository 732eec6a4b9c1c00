"""Every dashboard of the series in a real JupyterLab, driven in headless Chromium with Playwright;
then a Chinese notebook, JupyterLab's Chinese language pack, and a slide deck with no network.

One JupyterLab server and one browser page at 1280 × 800 (JupyterLab's default layout: the
file browser open, 100 % zoom) serve one notebook that this module writes into a temporary
folder: for each dashboard a notebook shows live, a cell that builds it with the notebook's own
constructor call (found in the notebook's code cells) and displays it; then a box that swaps
ready-made PNGs (the round trip with no drawing, the floor under every latency); a last cell
prints the smallest font of each figure. The kernel starts, imports and makes the data some
dashboards need while the page loads; the notebook then runs once ("Run All Cells"), and each
dashboard's test

- checks the dashboard's layout, and fails on a fault: the picture scaled by the page (rendered
  size ≠ the PNG's), a cut label or button, a control's label on another line than the
  control, controls and picture not visible together in the notebook's view, figure text
  under 10 px on screen (font size × dpi / 72 × rendered / natural width);
- moves each of its controls with real key presses, clicks and selections, one step at a time,
  and times each move from the input event to the load of the new image (whose bytes must
  differ: SHA-256 in the page, since every update gets a new blob: URL). The latencies are
  printed and, when $BROWSER_LATENCY_JSON names a file (tools/benchmark.py's run), written
  there, from at least four moves a dashboard; they are never asserted (this machine is
  shared; the target, 100 ms, is the benchmark's).

A deck made with slides/offline.py opens in a second, offline browser context, its formulas
typeset. Then, on the same page: 中文 offered in Settings > Language, the language pack served;
notebooks/zh/00 opened with File > Open from Path…, run on the same kernel (its imports done),
its dashboard moved, its Chinese text on the page; and every request the page made went to the
local server (no CDN, no web font).

Needs Debian's Chromium (or $ATTN_CHROMIUM) and the playwright package; without them the
tests are skipped, unless REQUIRE_BROWSER=1 (as in .ci/run), where they fail.
With $BROWSER_SCREENSHOTS set, screenshots of each dashboard (before and after its moves, in
the light theme, then in the dark one), of the page, and of the Chinese notebook go there.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

import nbformat
import psutil
import pytest
from jupyterlab_driver import (
    CHROMIUM_ARGS,
    BrowserUnavailable,
    NotebookPage,
    OpenNotebook,
    PlaywrightError,
    find_chromium,
    launch_lab,
    require_playwright,
    running,
    wait_until_ended,
    wait_until_up,
)

REPO = Path(__file__).resolve().parent.parent
VIEWPORT = {"width": 1280, "height": 800}
# The server's folder mirrors the repository: the generated notebook sits where an English one
# would, a copy of a Chinese one in notebooks/zh/, and requirements.txt two levels up (00 reads
# it). One kernel serves both notebooks, so the Chinese one runs with its imports already done.
DASHBOARDS = "notebooks/en/dashboards.ipynb"
ZH_NOTEBOOK = "notebooks/zh/00_start_here.ipynb"
CJK = re.compile(r"[\u4e00-\u9fff]")
RUN_TIMEOUT_S = 120  # building every dashboard: about 5-10 s here
CHANGE_TIMEOUT_S = 20  # one dashboard update after one control change
LOAD_TIMEOUT_S = 60  # JupyterLab's page and the kernel start
# Timed moves per dashboard, the first included, and at least one per control: a test needs one
# per control; the benchmark's medians (with $BROWSER_LATENCY_JSON) take four or more.
MOVES = 4 if os.environ.get("BROWSER_LATENCY_JSON") else 1
SMALLEST_TEXT_PX = 10.0

# Names a notebook's dashboard call uses besides `views`, and how this notebook makes them.
# Notebook 09 trains 16 seeds (and two more arms at d_k = 256); 2 seeds of its default runs give
# the dashboard the same settings and figure (its seed slider still moves), in a third of the time.
# (The kernel starts while the page loads, and runs the imports and these set-ups then: see
# warm_up; a cell's set-up finds its result made.)
SETUP = {
    "experiment": (
        "from attn_lib.lessons.nb09_training import run_scaling_experiment\n"
        "if 'experiment' not in globals():\n"
        "    experiment = run_scaling_experiment(n_seeds=2)"
    ),
}


def warm_up(calls: list[DashboardCall]) -> str:
    """Code for the kernel while the page loads: the imports and set-ups the cells need."""
    modules = ["matplotlib.pyplot", "torch", "ipywidgets", *dict.fromkeys(c.module for c in calls)]
    setups = dict.fromkeys(SETUP[name] for c in calls for name in c.needs)
    return "\n".join([*(f"import {m}" for m in modules), *setups])


# The round trip alone: a dashboard's box whose slider swaps between ready-made PNGs of a
# dashboard's size (840 × 420, plot-like), so a move costs no drawing. Its latency is the floor
# under every dashboard's on this machine at this moment (comm, JupyterLab, image decoding).
ROUND_TRIP_CELL = """\
import io

import ipywidgets as widgets
import numpy as np
import PIL.Image


def picture(k):
    pixels = np.full((420, 840, 3), 255, np.uint8)
    for i in range(12):
        top, left = 20 + 30 * i, 40 + (37 * (i + k)) % 400
        pixels[top : top + 20, left : left + 300] = (40 + 15 * i, 100, 200 - 10 * k)
    out = io.BytesIO()
    PIL.Image.fromarray(pixels).save(out, format="png", compress_level=1)
    return out.getvalue()


pictures = [picture(k) for k in range(11)]
image = widgets.Image(value=pictures[0], format="png")
slider = widgets.IntSlider(0, 0, 10, description="picture", continuous_update=False)
slider.observe(lambda change: setattr(image, "value", pictures[change["new"]]), names="value")
widgets.VBox([widgets.HBox([slider]), image, widgets.HTML("")],
             layout={"align_items": "flex-start"})"""
ROUND_TRIP = "round trip, no drawing"

# The last cell: for each figure, its dpi and its smallest text (font size in points).
FACTS_CELL = """\
import json
from matplotlib.text import Text


def smallest_text(board):
    texts = [t for t in board.figure.findobj(Text) if t.get_text().strip()]
    small = min(texts, key=Text.get_fontsize)
    return {"dpi": board.figure.dpi, "pt": small.get_fontsize(), "text": small.get_text()}


print(json.dumps({name: smallest_text(board) for name, board in boards.items()}))"""


@dataclass(frozen=True)
class DashboardCall:
    """One dashboard as a notebook builds it: `views.<name>(...)` with its views module."""

    notebook: str
    module: str
    name: str
    call: str
    needs: tuple[str, ...] = ()


def dashboard_calls(notebooks: Path = REPO / "notebooks" / "en") -> list[DashboardCall]:
    """The first `views.<Name>Dashboard(...)` call of each class in each notebook's code cells,
    with the module the notebook imports as `views`."""
    found: dict[str, DashboardCall] = {}
    for path in sorted(notebooks.glob("[0-9][0-9]_*.ipynb")):
        trees = []
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            source = "".join(cell["source"])
            if cell["cell_type"] == "code" and "views" in source:
                with contextlib.suppress(SyntaxError):  # a cell with an IPython magic
                    trees.append(ast.parse(source))
        nodes = [node for tree in trees for node in ast.walk(tree)]
        module = next(
            (
                f"{node.module}.{alias.name}"
                for node in nodes
                if isinstance(node, ast.ImportFrom)
                for alias in node.names
                if alias.asname == "views"
            ),
            None,
        )
        for node in nodes:
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "views"
                and node.func.attr.endswith("Dashboard")
                and node.func.attr not in found
            ):
                names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} - {"views"}
                found[node.func.attr] = DashboardCall(
                    path.name, module, node.func.attr, ast.unparse(node), tuple(sorted(names))
                )
    return list(found.values())


def dashboard_notebook(calls: list[DashboardCall]) -> nbformat.NotebookNode:
    """A notebook with one cell per dashboard (built and displayed), the round-trip cell,
    then the facts cell."""
    cells = [nbformat.v4.new_code_cell("boards = {}")]
    for c in calls:
        setup = [SETUP[name] for name in c.needs]
        package, module = c.module.rsplit(".", 1)
        lines = [
            f"# {c.notebook}",
            *setup,
            f"from {package} import {module} as views",
            f'board = boards["{c.name}"] = {c.call}',
            "board",
        ]
        cells.append(nbformat.v4.new_code_cell("\n".join(lines)))
    cells.append(nbformat.v4.new_code_cell(ROUND_TRIP_CELL))
    cells.append(nbformat.v4.new_code_cell(FACTS_CELL))
    nb = nbformat.v4.new_notebook(cells=cells)
    # Without a kernelspec JupyterLab opens a "Select Kernel" dialog.
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    return nb


CALLS = dashboard_calls()


def unavailable(reason: str) -> NoReturn:
    """Skip, or fail when REQUIRE_BROWSER=1 (CI must not silently skip the browser test)."""
    if os.environ.get("REQUIRE_BROWSER") == "1":
        pytest.fail(f"REQUIRE_BROWSER=1, but {reason}", pytrace=False)
    pytest.skip(reason)


def chromium_or_unavailable() -> str:
    """The Chromium to drive, after checking that Playwright is importable."""
    try:
        require_playwright()
        return find_chromium()
    except BrowserUnavailable as err:
        reason = str(err)
    unavailable(reason)  # outside the except block: no chained traceback in the report
    raise AssertionError("unreachable")


@dataclass
class Lab:
    """What the tests share: the page helper, the screenshot folder (or None), the facts."""

    nb: NotebookPage
    shots: Path | None
    started: float
    calls: list[DashboardCall]  # the dashboards whose tests are selected, in notebook order
    panel: object = None  # the notebook's panel (a Locator), once it has run
    kernel_id: str = ""
    remote: list[str] = field(default_factory=list)  # requests to anything but the server
    facts: dict = field(default_factory=dict)
    latencies: dict[str, list[float]] = field(default_factory=dict)
    moves: dict[str, list[str]] = field(default_factory=dict)

    def fail(self, message: str) -> NoReturn:
        if self.shots is not None:
            with contextlib.suppress(PlaywrightError):  # the report matters more
                self.nb.page.screenshot(path=self.shots / "failure-page.png")
        where = f" (screenshots: {self.shots})" if self.shots else ""
        pytest.fail(f"{message}{where}", pytrace=False)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Lab]:
    """JupyterLab on a temporary folder holding the dashboards' notebook, and one page.

    The notebook builds only the dashboards whose tests are selected (`-k TrainingDashboard`).
    """
    chromium = chromium_or_unavailable()
    selected = {
        item.callspec.params["call"]
        for item in request.session.items
        if getattr(item, "module", None) is request.module and hasattr(item, "callspec")
    }
    calls = [c for c in CALLS if c in selected]
    from playwright.sync_api import sync_playwright

    shots_env = os.environ.get("BROWSER_SCREENSHOTS")
    shots = Path(shots_env) if shots_env else None
    if shots is not None:
        shots.mkdir(parents=True, exist_ok=True)
        print(f"\nbrowser test screenshots: {shots}")
    root = tmp_path_factory.mktemp("dashboards")
    (root / DASHBOARDS).parent.mkdir(parents=True)
    nbformat.write(dashboard_notebook(calls), root / DASHBOARDS)
    if (REPO / ZH_NOTEBOOK).is_file():
        (root / ZH_NOTEBOOK).parent.mkdir(parents=True)
        shutil.copyfile(REPO / ZH_NOTEBOOK, root / ZH_NOTEBOOK)
        shutil.copyfile(REPO / "requirements.txt", root / "requirements.txt")

    ours_before = {p.pid for p in psutil.Process().children(recursive=True)}
    t0 = time.monotonic()
    server = launch_lab(root, tmp_path_factory.mktemp("jupyterlab-home"))
    playwright = browser = None
    leftovers: list[str] = []
    try:
        # Chromium starts while the server does.
        playwright = sync_playwright().start()
        launch_error = None
        try:
            browser = playwright.chromium.launch(
                executable_path=chromium, headless=True, args=CHROMIUM_ARGS
            )
        except PlaywrightError as err:  # e.g. ATTN_CHROMIUM=/bin/false: say so in one line
            launch_error = str(err).strip().splitlines()[0]
        if launch_error is not None:
            unavailable(f"the browser at {chromium} did not start: {launch_error}")
        page = browser.new_page(viewport=VIEWPORT)
        page.set_default_timeout(LOAD_TIMEOUT_S * 1000)
        server = wait_until_up(server, timeout=LOAD_TIMEOUT_S)
        print(f"JupyterLab up in {time.monotonic() - t0:.1f} s")
        shared = Lab(NotebookPage(page, server), shots, t0, calls)
        local = (server.base_url + "/", "data:", "blob:")
        page.context.on(
            "request", lambda r: None if r.url.startswith(local) else shared.remote.append(r.url)
        )
        yield shared
        report_latencies(shared)
    finally:
        # Every process started since the fixture began: the server and its kernels,
        # Playwright's driver and Chromium's processes.
        t_stop = time.monotonic()
        started = [p for p in psutil.Process().children(recursive=True) if p.pid not in ours_before]
        # The server and its kernels stop (SIGTERM to its group and kernels, then SIGKILL)
        # while Chromium closes.
        stopping = ThreadPoolExecutor(max_workers=1)
        server_stopped = stopping.submit(server.stop)
        try:
            if browser is not None:
                browser.close()
            if playwright is not None:
                playwright.stop()
        finally:
            leftovers = server_stopped.result()
            stopping.shutdown()
            alive = wait_until_ended(started, timeout=10)
            for p in alive:
                with contextlib.suppress(psutil.Error):
                    leftovers.append(f"pid {p.pid}: {' '.join(p.cmdline())[:200]}")
                    p.kill()
            print(f"Chromium and JupyterLab stopped in {time.monotonic() - t_stop:.1f} s")
    assert not leftovers, "processes started by the browser test survived it:\n" + "\n".join(
        leftovers
    )


@pytest.fixture(scope="module")
def ran(lab: Lab) -> Lab:
    """The dashboards' notebook opened and run; its dashboards' figure facts read."""
    nb, t0 = lab.nb, time.monotonic()
    lab.kernel_id, kernel = nb.server.start_kernel(DASHBOARDS)
    try:
        kernel.execute(warm_up(lab.calls), silent=True)  # while the page loads
        opened = nb.open_notebook(DASHBOARDS, LOAD_TIMEOUT_S * 1000)
        print(f"notebook open, kernel warmed up and idle in {time.monotonic() - t0:.1f} s")
        t0 = time.monotonic()
        nb.start_run_all(opened)
        status = nb.wait_until_run_finished(opened, RUN_TIMEOUT_S * 1000)
    except PlaywrightError as err:  # a timeout, reworded
        lab.fail(f"JupyterLab did not open and run the dashboards' notebook ({err})")
    finally:
        kernel.stop_channels()
    print(f"all dashboards built and shown in {time.monotonic() - t0:.1f} s")
    if problems := run_problems(nb, opened):
        lab.fail("stderr or error output appeared:\n" + "\n".join(problems))
    if f"Executed {len(lab.calls) + 3} cells" not in status:
        lab.fail(f"the run stopped early: the execution indicator says {status.strip()!r}")
    if nb.page.locator("#filebrowser").bounding_box() is None:
        lab.fail("JupyterLab's file browser is not open (the layout is checked with it open)")
    last = opened.panel.locator(".jp-Cell").last.locator(".jp-OutputArea-output")
    lab.facts = json.loads(last.inner_text())
    lab.panel = opened.panel
    return lab


def report_latencies(lab: Lab) -> None:
    """Print each dashboard's latencies; write them to $BROWSER_LATENCY_JSON if set."""
    rows = {
        name: {
            "notebook": next((c.notebook for c in CALLS if c.name == name), None),
            "first_ms": ms[0],
            "median_ms": statistics.median(ms),
            "steady_median_ms": statistics.median(ms[1:]) if len(ms) > 1 else ms[0],
            "moves_ms": ms,
            "moves": lab.moves[name],
        }
        for name, ms in lab.latencies.items()
    }
    if not rows:
        return
    print("\nbrowser latency, input event → new image loaded (ms):")
    for name, row in rows.items():
        print(
            f"  {name:26s} median {row['median_ms']:5.0f}  first {row['first_ms']:5.0f}  "
            f"steady {row['steady_median_ms']:5.0f}   ({', '.join(row['moves'])})"
        )
    print(f"browser test: {time.monotonic() - lab.started:.1f} s")
    target = os.environ.get("BROWSER_LATENCY_JSON")
    if target:
        Path(target).write_text(
            json.dumps(
                {
                    "measured": time.strftime("%Y-%m-%d %H:%M:%S"),
                    "load": os.getloadavg()[0],
                    "viewport": VIEWPORT,
                    "dashboards": rows,
                },
                indent=1,
            )
        )


def layout_faults(layout: dict, facts: dict) -> list[str]:
    """What a reader at 1280 × 800 would see wrong, from LAYOUT_JS's facts and the figure's."""
    faults = []
    (nw, nh), (rw, rh) = layout["natural"], layout["rendered"]
    if abs(nw - rw) > 0.5 or abs(nh - rh) > 0.5:
        faults.append(
            f"the page scales the picture: the PNG is {nw} × {nh} px, shown at "
            f"{rw:.0f} × {rh:.0f} px"
        )
    faults += [f"cut text: {text!r}" for text in layout["cut"]]
    faults += [f"the label {label!r} is not beside its control" for label in layout["stranded"]]
    box, view = layout["box"], layout["view"]
    if box["right"] > view["right"] + 0.5 or box["left"] < view["left"] - 0.5:
        faults.append(
            f"wider than the notebook's view: x {box['left']:.0f}-{box['right']:.0f} px, "
            f"view {view['left']:.0f}-{view['right']:.0f} px"
        )
    height = box["bottom"] - box["top"]
    if height > view["bottom"] - view["top"] + 0.5:
        faults.append(
            f"controls and picture do not fit the view together: {height:.0f} px tall, the "
            f"notebook shows {view['bottom'] - view['top']:.0f} px"
        )
    px = facts["pt"] * facts["dpi"] / 72 * (rw / nw if nw else 1.0)
    if px < SMALLEST_TEXT_PX - 0.05:
        faults.append(
            f"figure text of {px:.1f} px on screen ({facts['pt']:g} pt at {facts['dpi']:g} dpi): "
            f"{facts['text']!r}"
        )
    return faults


def timed_moves(
    lab: Lab, board: object, where: str, count: int = MOVES
) -> tuple[list[float], list[str]]:
    """``count`` moves of the board's controls in turn (disabled ones passed over), at least one
    per control: each one's latency in ms, and what it was. Fails if a picture does not change
    or an update fails."""
    controls = lab.nb.controls(board)
    count = max(count, len(controls))
    latencies, moves = [], []
    for n in range(2 * count * len(controls)):
        if len(latencies) == count:
            break
        index = n % len(controls)
        try:
            move = lab.nb.timed_move(board, index, CHANGE_TIMEOUT_S * 1000)
        except PlaywrightError:
            lab.fail(
                f"{where}: the picture did not change within {CHANGE_TIMEOUT_S} s after a move "
                f"of {controls[index][1]!r}"
            )
        if move is None:
            continue
        what, (_, ms) = move
        latencies.append(ms)
        moves.append(what)
    # A failed update leaves the picture as it was (the move above times out) and says why
    # in the status line; the last one must have succeeded too.
    status = board.locator(":scope > .widget-html").inner_text().strip()
    if status:
        lab.fail(f"{where}: after {', '.join(moves)} the dashboard reports: {status}")
    return latencies, moves


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("call", CALLS, ids=[c.name for c in CALLS])
def test_dashboard_in_jupyterlab(ran: Lab, call: DashboardCall):
    lab, nb = ran, ran.nb
    where = f"{call.name} ({call.notebook}: {call.call})"
    board = nb.dashboards(lab.panel).nth(lab.calls.index(call))
    try:
        nb.watch_image(board, CHANGE_TIMEOUT_S * 1000)
    except PlaywrightError:
        lab.fail(f"{where}: no image within {CHANGE_TIMEOUT_S} s")
    layout = nb.layout(board)
    shot = f"{CALLS.index(call):02d}-{call.name}"
    if lab.shots is not None:
        nb.page.screenshot(path=lab.shots / f"{shot}-page.png")
        board.screenshot(path=lab.shots / f"{shot}-0.png")

    latencies, moves = timed_moves(lab, board, where)
    lab.latencies[call.name], lab.moves[call.name] = latencies, moves
    print(f"{call.name}: {', '.join(f'{ms:.0f}' for ms in latencies)} ms")
    if lab.shots is not None:
        time.sleep(0.5)  # the toggles' icons follow the controls 0.3 s after the last change
        board.screenshot(path=lab.shots / f"{shot}-{MOVES}.png")

    faults = layout_faults(layout, lab.facts[call.name])
    if faults:
        lab.fail(f"{where}: layout faults at 1280 × 800 with the file browser open:\n  "
                 + "\n  ".join(faults))  # fmt: skip


@pytest.mark.browser
@pytest.mark.slow
def test_round_trip_floor(ran: Lab):
    """The latency of a box that swaps ready-made PNGs: what no dashboard can go below here."""
    board = ran.nb.dashboards(ran.panel).nth(len(ran.calls))
    ran.nb.watch_image(board, CHANGE_TIMEOUT_S * 1000)
    board.evaluate("(box) => box.scrollIntoView({block: 'start'})")
    ran.latencies[ROUND_TRIP], ran.moves[ROUND_TRIP] = timed_moves(ran, board, ROUND_TRIP)


@pytest.mark.browser
@pytest.mark.slow
def test_dark_theme_screenshots(ran: Lab):
    """With $BROWSER_SCREENSHOTS: every dashboard in JupyterLab's dark theme, to look at (the
    chosen toggle must stand out there too)."""
    if ran.shots is None:
        pytest.skip("screenshots only: set BROWSER_SCREENSHOTS to a folder")
    page = ran.nb.page
    page.locator(".lm-MenuBar-item", has_text=re.compile("^Settings$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile("^Theme$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile("^JupyterLab Dark$")).click()
    page.locator("body[data-jp-theme-light='false']").wait_for(state="attached")
    page.wait_for_timeout(1000)  # the theme's stylesheet applied
    for n, call in enumerate(ran.calls):
        board = ran.nb.dashboards(ran.panel).nth(n)
        board.evaluate("(box) => box.scrollIntoView({block: 'start'})")
        board.screenshot(path=ran.shots / f"{CALLS.index(call):02d}-{call.name}-dark.png")


def run_problems(nb: NotebookPage, opened: OpenNotebook) -> list[str]:
    """Every stderr or error output and every widget that failed to display, in words."""
    problems = [f"cell {n}: {text.strip()[:500]}" for n, text in nb.stderr_outputs(opened.panel)]
    return problems + [f"widget: {text.strip()[:200]}" for text in nb.widget_errors(opened.panel)]


@pytest.mark.browser
@pytest.mark.slow
def test_slides_open_offline(lab: Lab, tmp_path: Path):
    """A deck made with slides/offline.py, holding every formula of the series, opened with the
    network cut off: reveal.js runs, MathJax typesets every formula, nothing is requested."""
    from nbconvert import SlidesExporter
    from traitlets.config.loader import PyFileConfigLoader

    formulas = {
        cell.source: None  # each text once, in a new cell (the editions share cell ids)
        for path in sorted((REPO / "notebooks").glob("*/*.ipynb"))
        for cell in nbformat.read(path, as_version=4).cells
        if cell.cell_type == "markdown" and "$" in cell.source
    }
    cells = [
        nbformat.v4.new_markdown_cell(text, metadata={"slideshow": {"slide_type": "slide"}})
        for text in ["# Formulas", *formulas]
    ]
    nb = nbformat.v4.new_notebook(cells=cells)
    config = PyFileConfigLoader("offline.py", path=str(REPO / "slides")).load_config()
    page_html, _ = SlidesExporter(config=config).from_notebook_node(nb)
    deck = tmp_path / "formulas.slides.html"
    deck.write_text(page_html, encoding="utf-8")

    context = lab.nb.page.context.browser.new_context(viewport=VIEWPORT, offline=True)
    try:
        requests, errors = [], []
        context.on("request", lambda r: requests.append(r.url))
        page = context.new_page()
        page.on("pageerror", lambda err: errors.append(str(err)))
        page.goto(deck.as_uri())
        page.wait_for_function("() => window.Reveal && Reveal.isReady()", timeout=20_000)
        page.evaluate("() => MathJax.startup.promise")
        typeset = page.evaluate(
            """() => [document.querySelectorAll('mjx-container').length,
                      document.querySelectorAll('mjx-merror').length,
                      [...document.querySelectorAll('.jp-RenderedMarkdown')]
                          .filter((cell) => cell.textContent.includes('$')).length,
                      Reveal.getTotalSlides()]"""
        )
    finally:
        context.close()
    containers, failed, raw, slides = typeset
    assert requests == [deck.as_uri()], f"the deck requested {requests[1:]}"
    assert not errors, f"script errors: {errors}"
    assert slides == len(nb.cells), "one slide per cell expected"
    assert containers >= len(formulas) and not failed and not raw, (
        f"{containers} formulas typeset, {failed} with errors, {raw} cells with raw TeX"
    )


@pytest.mark.browser
@pytest.mark.slow
def test_chinese_edition(ran: Lab):
    """As README.zh-CN.md says: Settings > Language offers 中文, and the server gives JupyterLab
    the language pack's strings: the pack pinned in requirements.txt works with this JupyterLab.
    (Choosing it reloads the whole application, seconds of CPU; that step is left out.) Then a
    Chinese notebook opened (File > Open from Path…), run, its dashboard moved: the page shows
    its Chinese text, and the picture changes."""
    if not (REPO / ZH_NOTEBOOK).is_file():
        pytest.skip(f"{ZH_NOTEBOOK} does not exist yet: build it with tools/sync_translation.py")
    nb, page = ran.nb, ran.nb.page
    source = nbformat.read(REPO / ZH_NOTEBOOK, as_version=4)
    languages = {command: label for label, command in nb.language_menu()}
    assert "中文" in languages.get("jupyterlab-translation:zh_CN", ""), (
        f"Settings > Language offers no 中文 (the zh_CN language pack): {languages}"
    )
    pack = nb.server.get_json("lab/api/translations/zh_CN")
    assert not pack["message"] and pack["data"]["jupyterlab"].get("menu\x04File") == ["文件"], (
        f"JupyterLab's server gives no Chinese strings: {pack['message'] or 'File is not 文件'}"
    )

    nb.server.new_session(ZH_NOTEBOOK, kernel_id=ran.kernel_id)
    try:
        opened = nb.open_notebook(ZH_NOTEBOOK, LOAD_TIMEOUT_S * 1000)
        nb.start_run_all(opened)
        status = nb.wait_until_run_finished(opened, RUN_TIMEOUT_S * 1000)
    except PlaywrightError as err:
        ran.fail(f"JupyterLab did not open and run {ZH_NOTEBOOK} ({err})")
    if problems := run_problems(nb, opened):
        ran.fail(f"{ZH_NOTEBOOK}: stderr or error output appeared:\n" + "\n".join(problems))
    code_cells = sum(c.cell_type == "code" for c in source.cells)
    if f"Executed {code_cells} cells" not in status:
        ran.fail(f"{ZH_NOTEBOOK}: the run stopped early: {status.strip()!r}")

    markdown = [c.source for c in source.cells if c.cell_type == "markdown"]
    shown = "\n".join(
        opened.panel.locator(".jp-MarkdownCell .jp-RenderedMarkdown").all_inner_texts()
    )
    title = markdown[0].strip().splitlines()[0].lstrip("#").strip()
    written = sum(len(CJK.findall(text)) for text in markdown)
    assert written > 0, f"{ZH_NOTEBOOK} holds no Chinese text: is it translated?"
    assert title in shown, f"the page does not show the title {title!r}"
    assert len(CJK.findall(shown)) >= 0.95 * written, (
        f"the page shows {len(CJK.findall(shown))} Chinese characters of the {written} in "
        f"{ZH_NOTEBOOK}'s markdown"
    )

    board = nb.dashboards(opened.panel).first
    try:
        nb.watch_image(board, CHANGE_TIMEOUT_S * 1000)
    except PlaywrightError:
        ran.fail(f"{ZH_NOTEBOOK}: its dashboard shows no image within {CHANGE_TIMEOUT_S} s")
    nb.layout(board)  # scrolls the dashboard's top into view, where its controls are
    latencies, moves = timed_moves(ran, board, ZH_NOTEBOOK, count=1)
    print(f"{ZH_NOTEBOOK}: {', '.join(moves)}: {', '.join(f'{ms:.0f}' for ms in latencies)} ms")
    if ran.shots is not None:
        board.screenshot(path=ran.shots / "zh-00-dashboard.png")
        page.screenshot(path=ran.shots / "zh-00-page.png")


@pytest.mark.browser
@pytest.mark.slow
def test_nothing_loaded_from_the_network(ran: Lab):
    """Everything JupyterLab and the notebooks showed came from the local server: no CDN, no
    web font, no script from elsewhere (runs after the other browser tests)."""
    assert not ran.remote, f"the page loaded from outside the local server: {ran.remote[:10]}"


def test_every_dashboard_is_shown_by_a_notebook():
    """Each Dashboard subclass of a views module is built by some notebook's code."""
    views = REPO / "attn_lib" / "lessons"
    defined = set()
    for path in views.glob("nb*_views.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                bases = {ast.unparse(b) for b in node.bases}
                if "Dashboard" in bases:
                    defined.add(node.name)
    assert defined == {c.name for c in CALLS}


def test_dashboard_calls_use_the_notebooks_constructor_call(tmp_path):
    (tmp_path / "03_x.ipynb").write_text(
        nbformat.writes(
            nbformat.v4.new_notebook(
                cells=[
                    nbformat.v4.new_code_cell("from attn_lib.lessons import nb03_x_views as views"),
                    nbformat.v4.new_code_cell(
                        "dash = views.XDashboard(run, d_k=512)  # live\ndash"
                    ),
                    nbformat.v4.new_code_cell("views.XDashboard(d_k=8)"),
                ]
            )
        )
    )
    (call,) = dashboard_calls(tmp_path)
    assert call == DashboardCall(
        "03_x.ipynb", "attn_lib.lessons.nb03_x_views", "XDashboard",
        "views.XDashboard(run, d_k=512)", ("run",),
    )  # fmt: skip


def test_layout_faults_name_what_a_reader_sees():
    good = {
        "natural": [800, 400], "rendered": [800, 400], "cut": [], "stranded": [],
        "box": {"left": 300, "top": 100, "right": 1100, "bottom": 600},
        "view": {"left": 290, "top": 90, "right": 1270, "bottom": 790},
    }  # fmt: skip
    facts = {"dpi": 72, "pt": 10, "text": "d_k"}
    assert layout_faults(good, facts) == []
    bad = good | {"rendered": [700, 350], "cut": ["paddi"], "stranded": ["mask"]}
    bad["box"] = good["box"] | {"bottom": 900}
    faults = layout_faults(bad, facts | {"dpi": 80})
    assert [f.split(":")[0].split(" ")[0] for f in faults] == ["the", "cut", "the", "controls",
                                                               "figure"]  # fmt: skip
    assert "9.7 px" in faults[-1]  # 10 pt at 80 dpi is 11.1 px, shown at 7/8 of its size


# --- the skip/fail decision, without a browser ------------------------------------------------


def test_missing_chromium_skips(monkeypatch):
    monkeypatch.setenv("ATTN_CHROMIUM", "/nonexistent/chromium")
    monkeypatch.delenv("REQUIRE_BROWSER", raising=False)
    with pytest.raises(pytest.skip.Exception, match="ATTN_CHROMIUM=/nonexistent/chromium"):
        chromium_or_unavailable()


def test_missing_playwright_skips(monkeypatch):
    monkeypatch.setitem(sys.modules, "playwright.sync_api", None)  # import now fails
    monkeypatch.delenv("REQUIRE_BROWSER", raising=False)
    with pytest.raises(pytest.skip.Exception, match="playwright is not importable"):
        chromium_or_unavailable()


def test_missing_chromium_fails_when_required(monkeypatch):
    monkeypatch.setenv("ATTN_CHROMIUM", "/nonexistent/chromium")
    monkeypatch.setenv("REQUIRE_BROWSER", "1")
    with pytest.raises(pytest.fail.Exception, match="REQUIRE_BROWSER=1, but ATTN_CHROMIUM="):
        chromium_or_unavailable()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="zombies as Linux shows them")
def test_a_zombie_counts_as_ended():
    child = subprocess.Popen([sys.executable, "-c", "pass"])  # exits; not waited for yet
    process = psutil.Process(child.pid)
    deadline = time.monotonic() + 10
    while process.status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        assert running([process]) == []
        assert running([psutil.Process()]) == [psutil.Process()]  # this one runs
    finally:
        child.wait()
    # Its main thread gone, a thread still at work: shown as a zombie, but running.
    code = (
        "import ctypes, threading, time\n"
        "threading.Thread(target=time.sleep, args=(30,)).start()\n"
        "ctypes.CDLL(None).pthread_exit(None)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code])
    process = psutil.Process(child.pid)
    try:
        while process.status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline + 10:
            time.sleep(0.01)
        assert running([process]) == [process]
    finally:
        child.kill()
        child.wait()
