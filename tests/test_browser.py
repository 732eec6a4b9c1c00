"""The live dashboards in a real JupyterLab, driven in headless Chromium with Playwright.

One JupyterLab server and one browser page (module-scoped fixtures) serve both notebooks,
which are opened in two tabs and run ("Run All Cells") at the same time, one kernel each.
Each test then waits for its notebook's run, checks that it completed with no stderr or
error output (the stored notebooks have none), moves the dashboard's controls with real key
presses, clicks and selections, and checks that the dashboard's image bytes change after
each move (SHA-256 computed in the page: every update gets a new blob: URL, so the URL
proves nothing). JupyterLab must not write the notebook files (autosave is off).

Needs Debian's Chromium (or $ATTN_CHROMIUM) and the playwright package; without them the
tests are skipped, unless REQUIRE_BROWSER=1 (as in .ci/run), where they fail.
Screenshots of each dashboard before and after each change, and of the whole page, go to
$BROWSER_SCREENSHOTS or to a pytest temporary directory; the path is printed (`pytest -s`)
and named in failure messages.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

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
    wait_until_up,
)

REPO = Path(__file__).resolve().parent.parent
RUN_TIMEOUT_S = 120  # all cells of one notebook: about 8-10 s here, both notebooks at once
CHANGE_TIMEOUT_S = 20  # one dashboard update after one control change
LOAD_TIMEOUT_S = 60  # JupyterLab's page and the kernel start


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
    """What the tests share: the page helper and the screenshot folder."""

    nb: NotebookPage
    shots: Path


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    chromium = chromium_or_unavailable()
    from playwright.sync_api import sync_playwright

    shots_env = os.environ.get("BROWSER_SCREENSHOTS")
    shots = Path(shots_env) if shots_env else tmp_path_factory.mktemp("browser-screenshots")
    shots.mkdir(parents=True, exist_ok=True)
    print(f"\nbrowser test screenshots: {shots}")

    ours_before = {p.pid for p in psutil.Process().children(recursive=True)}
    t0 = time.monotonic()
    server = launch_lab(REPO, tmp_path_factory.mktemp("jupyterlab-home"))
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
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(LOAD_TIMEOUT_S * 1000)
        t1 = time.monotonic()
        server = wait_until_up(server, timeout=LOAD_TIMEOUT_S)
        print(f"Chromium up in {t1 - t0:.1f} s, JupyterLab in {time.monotonic() - t0:.1f} s")
        yield Lab(NotebookPage(page, server), shots)
    finally:
        # Every process started since the fixture began: the server and its kernels,
        # Playwright's driver and Chromium's processes.
        started = [p for p in psutil.Process().children(recursive=True) if p.pid not in ours_before]
        try:
            if browser is not None:
                browser.close()
            if playwright is not None:
                playwright.stop()
        finally:
            leftovers = server.stop()  # SIGTERM to its group and kernels, then SIGKILL
            _, alive = psutil.wait_procs(started, timeout=10)
            for p in alive:
                with contextlib.suppress(psutil.Error):
                    leftovers.append(f"pid {p.pid}: {' '.join(p.cmdline())[:200]}")
                    p.kill()
    assert not leftovers, "processes started by the browser test survived it:\n" + "\n".join(
        leftovers
    )


# The notebook each browser test checks. Both run at the same time (two kernels, two cores):
# the `runs` fixture opens every notebook whose test is selected and starts "Run All Cells"
# in each; each test then waits for its own notebook.
NOTEBOOK_OF_TEST = {
    "test_saturation_dashboard_in_jupyterlab": "03_scaling_and_softmax_saturation.ipynb",
    "test_mask_dashboard_in_jupyterlab": "07_masks.ipynb",
}


@dataclass
class Run:
    notebook: OpenNotebook
    stored: bytes  # the file as it was opened (its code cells are counted)
    opened_s: float
    started: float


@pytest.fixture(scope="module")
def runs(lab: Lab, request: pytest.FixtureRequest) -> dict[str, Run]:
    this_module = [i for i in request.session.items if getattr(i, "module", None) is request.module]
    selected = {item.name for item in this_module}
    notebooks = [nb for test, nb in NOTEBOOK_OF_TEST.items() if test in selected]
    started = {}
    for notebook in notebooks:
        stored = (REPO / "notebooks" / notebook).read_bytes()
        t0 = time.monotonic()
        try:
            opened = lab.nb.open_notebook(f"notebooks/{notebook}", LOAD_TIMEOUT_S * 1000)
            lab.nb.start_run_all(opened)
        except PlaywrightError as err:  # reworded
            with contextlib.suppress(PlaywrightError):
                lab.nb.page.screenshot(path=lab.shots / "failure-opening.png")
            pytest.fail(
                f"notebook {notebook.removesuffix('.ipynb')}: JupyterLab did not open it and "
                f"start its kernel within {LOAD_TIMEOUT_S} s ({err}); screenshots: {lab.shots}",
                pytrace=False,
            )
        started[notebook] = Run(opened, stored, time.monotonic() - t0, time.monotonic())
    return started


def code_cell_count(notebook: bytes) -> int:
    cells = json.loads(notebook.decode("utf-8"))["cells"]
    return sum(1 for cell in cells if cell["cell_type"] == "code")


class DashboardCheck:
    """Wait for a notebook's run, then change controls of one dashboard and watch its image."""

    def __init__(self, lab: Lab, run: Run, control_label: str) -> None:
        self.lab, self.nb, self.page = lab, lab.nb, lab.nb.page
        self.notebook = run.notebook
        self.panel = run.notebook.panel
        self.stem = run.notebook.name.removesuffix(".ipynb")
        self.short = self.stem.split("_", 1)[0]
        self.where = f"notebook {self.stem}"
        self.shot_number = 0

        self.nb.activate(self.notebook)
        try:
            status = self.nb.wait_until_run_finished(self.notebook, RUN_TIMEOUT_S * 1000)
        except PlaywrightError as err:  # a timeout, reworded
            self.fail(f"the cells did not finish running within {RUN_TIMEOUT_S} s ({err})")
        self.t_ran = time.monotonic()
        print(
            f"{self.where}: opened, kernel idle in {run.opened_s:.1f} s; all cells ran "
            f"{self.t_ran - run.started:.1f} s after Run All (both notebooks run at once)"
        )
        self.assert_no_error_outputs()
        expected = code_cell_count(run.stored)
        if f"Executed {expected} cells" not in status:
            self.fail(
                f"the run stopped early: the execution indicator says {status.strip()!r}, "
                f"expected 'Executed {expected} cells'"
            )
        self.assert_not_saved()

        self.dashboard = self.nb.dashboard(self.panel, control_label)
        if self.dashboard.count() != 1:
            self.fail(
                f"expected one dashboard with a {control_label!r} control, found "
                f"{self.dashboard.count()}"
            )
        self.image_hash = self.wait_for_first_image()
        self.screenshot("initial")

    def fail(self, message: str) -> NoReturn:
        with contextlib.suppress(PlaywrightError):  # the report matters more than the picture
            self.page.screenshot(path=self.lab.shots / f"{self.short}-failure-page.png")
        pytest.fail(f"{self.where}: {message} (screenshots: {self.lab.shots})", pytrace=False)

    def assert_no_error_outputs(self) -> None:
        # The stored notebooks have no stderr output at all (no warning is expected: the
        # kernel gets a seeded matplotlib font cache), so any stderr or error here is new.
        problems = [
            f"cell {n}: {text.strip()[:500]}" for n, text in self.nb.stderr_outputs(self.panel)
        ]
        problems += [f"widget: {text.strip()[:200]}" for text in self.nb.widget_errors(self.panel)]
        if problems:
            self.fail("stderr or error output appeared:\n" + "\n".join(problems))

    def wait_for_first_image(self) -> str:
        try:
            digest = self.nb.watch_image(self.dashboard, CHANGE_TIMEOUT_S * 1000)
        except PlaywrightError:  # a timeout, reworded
            self.fail(f"the dashboard showed no image within {CHANGE_TIMEOUT_S} s")
        if not digest:
            self.fail("the dashboard's image could not be read (its bytes could not be hashed)")
        return digest

    def screenshot(self, what: str) -> None:
        self.shot_number += 1
        name = f"{self.short}-{self.shot_number}-{what}.png"
        self.dashboard.screenshot(path=self.lab.shots / name)

    def expect_new_image(self, action: str, tag: str) -> None:
        """After ``action`` (already done): the image bytes must change; no update error.

        ``tag`` names the screenshot taken afterwards ("after-<tag>").
        """
        try:
            self.image_hash = self.nb.wait_for_new_image(
                self.dashboard, self.image_hash, CHANGE_TIMEOUT_S * 1000
            )
        except PlaywrightError:  # a timeout, reworded
            self.screenshot(f"unchanged-after-{tag}")
            self.fail(
                f"the dashboard image did not change after {action} within {CHANGE_TIMEOUT_S} s"
            )
        status = self.dashboard.locator(":scope > .widget-html").inner_text().strip()
        if status:
            self.fail(f"the dashboard reports after {action}: {status}")
        self.screenshot(f"after-{tag}")

    def assert_not_saved(self) -> None:
        """JupyterLab must not write the notebook (autosave is off): it would replace the
        stored outputs with this run's. Checked on the page's requests, not on the file,
        which other tools (tools/execute_notebooks.py) may rewrite meanwhile."""
        writes = [w for w in self.nb.content_writes if f"/{self.notebook.name}" in w]
        if writes:
            self.fail(f"JupyterLab wrote the notebook file: {', '.join(writes)}")

    def finish(self) -> None:
        self.assert_no_error_outputs()
        self.assert_not_saved()
        self.page.screenshot(path=self.lab.shots / f"{self.short}-page.png")
        print(f"{self.where}: controls checked in {time.monotonic() - self.t_ran:.1f} s")


@pytest.mark.browser
@pytest.mark.slow
def test_saturation_dashboard_in_jupyterlab(lab: Lab, runs: dict[str, Run]):
    check = DashboardCheck(lab, runs["03_scaling_and_softmax_saturation.ipynb"], "d_k")

    d_k = check.nb.control(check.dashboard, "d_k")
    readout = d_k.locator(".widget-readout")
    assert readout.inner_text().strip() == "64", f"{check.where}: d_k should start at 64"
    d_k.get_by_role("slider").press("ArrowRight")  # 64 → 128, one step of the SelectionSlider
    check.expect_new_image("moving the d_k slider from 64 to 128 (ArrowRight)", "d_k-128")
    assert readout.inner_text().strip() == "128", f"{check.where}: d_k readout after ArrowRight"

    scaling = check.nb.control(check.dashboard, "scores divided by")
    scaling.get_by_role("button", name="none", exact=True).click()
    check.expect_new_image(
        "clicking 'none' on the scaling control (scores divided by)", "scaling-none"
    )
    active = scaling.locator(".mod-active").inner_text().strip()
    assert active == "none", f"{check.where}: the active scaling button is {active!r}"
    check.finish()


@pytest.mark.browser
@pytest.mark.slow
def test_mask_dashboard_in_jupyterlab(lab: Lab, runs: dict[str, Run]):
    check = DashboardCheck(lab, runs["07_masks.ipynb"], "fill value")

    causal = check.nb.control(check.dashboard, "causal mask")
    causal.get_by_role("button", name="on", exact=True).click()
    check.expect_new_image("clicking 'on' on the causal mask toggle", "causal-on")

    fill = check.nb.control(check.dashboard, "fill value").locator("select")
    fill.select_option(label="0 (does not mask)")
    check.expect_new_image("selecting fill value '0 (does not mask)'", "fill-0")
    check.finish()


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


# --- which requests count as writing a notebook -------------------------------------------


class _FakePage:
    def on(self, event, handler):
        self.handler = handler


@dataclass
class _FakeRequest:
    method: str
    url: str


def test_only_requests_that_change_a_file_count_as_writes():
    # In a fresh clone no checkpoint exists, and JupyterLab creates one (a copy) on opening a
    # notebook: that POST must not count, or the test fails on every clean checkout.
    page = _FakePage()
    nb = NotebookPage(page, server=None)
    base = "http://127.0.0.1:8888/api/contents/notebooks/07_masks.ipynb"
    for method, url in [
        ("GET", base),
        ("POST", base + "/checkpoints"),
        ("PUT", base),
        ("PATCH", base),
        ("DELETE", base),
        ("POST", base + "/checkpoints/checkpoint"),  # restoring a checkpoint rewrites the file
    ]:
        page.handler(_FakeRequest(method, url))
    assert nb.content_writes == [
        "PUT /api/contents/notebooks/07_masks.ipynb",
        "PATCH /api/contents/notebooks/07_masks.ipynb",
        "DELETE /api/contents/notebooks/07_masks.ipynb",
        "POST /api/contents/notebooks/07_masks.ipynb/checkpoints/checkpoint",
    ]
