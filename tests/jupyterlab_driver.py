"""Start an isolated JupyterLab and drive it from headless Chromium (support for test_browser.py).

Nothing here touches the user's Jupyter setup: every config, data, runtime, settings and
workspace directory, IPython's and matplotlib's too, lives in a directory the caller owns.
The server runs in a process session of its own; stopping it sends SIGTERM to its process
group and to the kernels it started (they have sessions of their own), then SIGKILL to
whatever is left, and reports any process that survived. See NOTES_browser_and_nbval.md for
the pitfalls this module works around.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import psutil

try:
    from playwright.sync_api import Error as PlaywrightError  # TimeoutError is a subclass
except ImportError:  # the browser tests skip (or fail, with REQUIRE_BROWSER=1) before using it
    PlaywrightError = RuntimeError

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page, Request

# Debian's Chromium, driven by Playwright's Python package without its own browser download.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]

# JupyterLab user settings written before the server starts (plugin id → values).
LAB_SETTINGS = {
    # No "Jupyter news" toast and no update check: both would need the network and the toast
    # covers part of the page.
    "@jupyterlab/apputils-extension:notification": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
    # Running cells marks the notebook as changed; autosave would then overwrite the stored
    # notebook in the repository with the browser's outputs.
    "@jupyterlab/docmanager-extension:plugin": {"autosave": False},
    # Lay out every cell. With the default ("contentVisibility") cells out of view have a
    # placeholder height until they scroll in, so an element screenshot right after scrolling
    # captured the wrong part of the notebook.
    "@jupyterlab/notebook-extension:tracker": {"windowingMode": "none"},
}

ISOLATED_DIRS = {
    "JUPYTER_CONFIG_DIR": "jupyter-config",
    "JUPYTER_DATA_DIR": "jupyter-data",
    "JUPYTER_RUNTIME_DIR": "jupyter-runtime",
    "JUPYTERLAB_SETTINGS_DIR": "lab-settings",
    "JUPYTERLAB_WORKSPACES_DIR": "lab-workspaces",
    "IPYTHONDIR": "ipython",
    "MPLCONFIGDIR": "matplotlib",
}


class BrowserUnavailable(Exception):
    """Chromium or Playwright is missing; the message says which and how to get it."""


def find_chromium() -> str:
    """The Chromium executable to drive: $ATTN_CHROMIUM if set, else Debian's chromium.

    Raises:
        BrowserUnavailable: no executable Chromium there.
    """
    override = os.environ.get("ATTN_CHROMIUM")
    if override:
        if os.path.isfile(override) and os.access(override, os.X_OK):
            return override
        raise BrowserUnavailable(f"ATTN_CHROMIUM={override} is not an executable file")
    found = shutil.which("chromium") or "/usr/bin/chromium"
    if os.path.isfile(found) and os.access(found, os.X_OK):
        return found
    raise BrowserUnavailable(
        "Chromium not found (no `chromium` on PATH, no /usr/bin/chromium); on Debian: "
        "apt-get install chromium"
    )


def require_playwright() -> None:
    """Raise BrowserUnavailable unless Playwright's Python package can be imported."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError as err:
        raise BrowserUnavailable(
            f"the Python package playwright is not importable ({err}); "
            "pip install -r requirements.txt"
        ) from err


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def prepare_home(home: Path) -> dict[str, str]:
    """Create the isolated directories under ``home`` and return the server's environment."""
    env = dict(os.environ)
    for var, name in ISOLATED_DIRS.items():
        path = home / name
        path.mkdir(parents=True, exist_ok=True)
        env[var] = str(path)
    for plugin, values in LAB_SETTINGS.items():
        package, plugin_name = plugin.split(":")
        target = Path(env["JUPYTERLAB_SETTINGS_DIR"], *package.split("/"))
        target.mkdir(parents=True, exist_ok=True)
        (target / f"{plugin_name}.jupyterlab-settings").write_text(json.dumps(values))
    # No build check on page load (it costs seconds of CPU, and the build is Python-packaged).
    labconfig = Path(env["JUPYTER_CONFIG_DIR"], "labconfig")
    labconfig.mkdir(exist_ok=True)
    (labconfig / "page_config.json").write_text(
        json.dumps({"buildCheck": False, "buildAvailable": False})
    )
    _seed_font_cache(Path(env["MPLCONFIGDIR"]), env)
    return env


def _seed_font_cache(mpl_dir: Path, env: dict[str, str]) -> None:
    """Give the fresh MPLCONFIGDIR a font cache, so the kernel does not rebuild it.

    Rebuilding costs seconds and, when slow, writes "Matplotlib is building the font cache"
    to the notebook's stderr. Copy this machine's cache; without one, build it here.
    """
    import matplotlib

    cached = sorted(Path(matplotlib.get_cachedir()).glob("fontlist-v*.json"))
    if cached:
        for path in cached:
            shutil.copy2(path, mpl_dir / path.name)
        return
    subprocess.run(
        [sys.executable, "-c", "import matplotlib.font_manager"],
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )


@dataclass
class LabServer:
    """A running JupyterLab: its process, address and token, and its log file."""

    process: subprocess.Popen
    port: int
    token: str
    log_path: Path
    root: Path
    env: dict[str, str] = field(repr=False)
    started: list[psutil.Process] = field(default_factory=list)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str, **query: str) -> str:
        """An authenticated URL for ``path`` ("lab/tree/notebooks/x.ipynb", "api/status")."""
        params = [f"{k}={v}" if v else k for k, v in query.items()] + [f"token={self.token}"]
        return f"{self.base_url}/{path}?{'&'.join(params)}"

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no server log)"
        return "\n".join(text.splitlines()[-lines:])

    def remember_processes(self) -> None:
        """Note the server and every process it has started so far (kernels included)."""
        with contextlib.suppress(psutil.Error):  # the server has already exited
            server = psutil.Process(self.process.pid)
            known = {p.pid for p in self.started}
            for p in [server, *server.children(recursive=True)]:
                if p.pid not in known:
                    self.started.append(p)

    def session_processes(self) -> list[psutil.Process]:
        """Live processes in the server's session (its own, from start_new_session)."""
        found = []
        for p in psutil.process_iter(["pid"]):
            try:
                if os.getsid(p.pid) == self.process.pid and p.status() != psutil.STATUS_ZOMBIE:
                    found.append(p)
            except (ProcessLookupError, PermissionError, psutil.Error):
                continue
        return found

    def stop(self, timeout: float = 15.0) -> list[str]:
        """Stop the server and its kernels; SIGKILL whatever does not go.

        The kernels run in sessions of their own (jupyter_client starts them so), so the
        server's process group does not include them: they get SIGTERM directly, at the same
        time as the group (the server would otherwise ask each to shut down and wait, about a
        second more). Then wait, and SIGKILL what is left.

        Returns:
            a description of every started process still alive afterwards (empty if none).
        """
        self.remember_processes()
        pgid = self.process.pid
        for p in self.started[1:]:  # [0] is the server
            with contextlib.suppress(psutil.Error, ProcessLookupError):
                if os.getpgid(p.pid) != pgid:
                    p.terminate()
        _killpg(pgid, signal.SIGTERM)
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _killpg(pgid)
            self.process.wait(timeout=5)
        _, alive = psutil.wait_procs(self.started, timeout=5)
        alive += [p for p in self.session_processes() if p not in alive]
        if alive:
            _killpg(pgid)
            for p in alive:
                with contextlib.suppress(psutil.Error):
                    p.kill()
            psutil.wait_procs(alive, timeout=5)
        return [_describe(p) for p in alive]


def _killpg(pgid: int, sig: int = signal.SIGKILL) -> None:
    """Signal a process group that may already be gone."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def _describe(p: psutil.Process) -> str:
    try:
        return f"pid {p.pid}: {' '.join(p.cmdline())[:200]}"
    except psutil.Error:
        return f"pid {p.pid}"


def launch_lab(root: Path, home: Path) -> LabServer:
    """Start ``jupyter lab`` on 127.0.0.1 (free port, random token); do not wait for it.

    Args:
        root: the directory the server shows (the repository).
        home: an empty directory for every Jupyter/IPython/matplotlib file and the log.
    """
    return _spawn(root, prepare_home(home), home / "jupyterlab.log")


def _terminate_with_parent() -> None:
    """In the child, before exec: ask Linux to send SIGTERM when the parent dies.

    The server runs in its own session (so that one signal to its group stops it), which also
    means that killing pytest does not reach it: a SIGTERM to pytest skips the fixture's
    teardown and would leave JupyterLab and its kernels running. On SIGTERM the server shuts
    its kernels down. Elsewhere than Linux this does nothing.
    """
    if sys.platform.startswith("linux"):
        pr_set_pdeathsig = 1  # from <sys/prctl.h>
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def _spawn(root: Path, env: dict[str, str], log_path: Path) -> LabServer:
    port, token = free_port(), secrets.token_hex(24)
    # Opening a notebook makes JupyterLab create a checkpoint (a copy of the file) when it has
    # none, in .ipynb_checkpoints/ beside it; keep those copies out of the repository. (An
    # absolute checkpoint_dir is used as it is: jupyter_server joins it to each file's folder.)
    checkpoints = log_path.parent / "checkpoints"
    command = [
        sys.executable, "-m", "jupyterlab",
        "--no-browser", "--allow-root",
        "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
        # Nothing this test needs, and each costs start-up time or network look-ups.
        "--ServerApp.terminals_enabled=False", "--LabApp.extension_manager=readonly",
        "--ServerApp.jpserver_extensions={'jupyter_lsp': False}",
        f"--FileCheckpoints.checkpoint_dir={checkpoints}",
    ]  # fmt: skip
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            command,
            cwd=root,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: one signal reaches everything
            preexec_fn=_terminate_with_parent,  # noqa: PLW1509 - one prctl call, no locks
        )
    return LabServer(process, port, token, log_path, root, env)


def wait_until_up(server: LabServer, timeout: float = 60.0) -> LabServer:
    """Poll /api/status until the server answers; return it.

    If another process took the port between choosing it and the server binding it (the
    server then exits: ``port_retries=0``), start it again on a new port, up to twice.

    Raises:
        RuntimeError: the server exited or did not answer in time; the message ends with the
            tail of its log.
    """
    for attempt in range(3):
        if _wait_until_up(server, timeout):
            server.remember_processes()
            return server
        status = server.process.poll()
        server.stop()
        if status is None or "already in use" not in server.log_tail(10) or attempt == 2:
            raise RuntimeError(
                f"JupyterLab did not answer on {server.base_url}/api/status within "
                f"{timeout:.0f} s (exit status {status}); last lines of {server.log_path}:\n"
                f"{server.log_tail()}"
            )
        server = _spawn(server.root, server.env, server.log_path)
    raise AssertionError("unreachable")


def _wait_until_up(server: LabServer, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    delay = 0.05
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(server.url("api/status"), timeout=2) as response:
                if response.status == 200:
                    return True
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(delay)
        delay = min(delay * 1.5, 0.5)
    return False


# --- the page: JupyterLab in the browser --------------------------------------------------------

STDERR_MIME = "application/vnd.jupyter.stderr"  # JupyterLab renders stderr and errors with it

# Resolves once the notebook in `panel` has finished a "Run All Cells": the toolbar's execution
# indicator is idle and says "Executed N cells" (no "x/N": that is the busy form), or an error
# output has appeared (a failing cell stops the run, and the indicator then says no count).
RUN_FINISHED_JS = """(panel) => {
    const indicator = panel.querySelector('.jp-Notebook-ExecutionIndicator');
    if (!indicator || indicator.dataset.status !== 'idle') return false;
    const text = indicator.textContent;
    if (/Executed \\d+ cells?(?!\\/)/.test(text)) return text;
    if (panel.querySelector('.jp-OutputArea-output[data-mime-type="STDERR_MIME"]')) return text;
    return false;
}""".replace("STDERR_MIME", STDERR_MIME)

# Keeps the SHA-256 (hex) of the bytes behind an <img>'s current (blob:) URL in
# img.dataset.sha256, updated by a MutationObserver on every new src; resolves once the hash of
# the current src is known. Each image update gets a new blob: URL, so only the bytes tell
# whether the picture changed.
WATCH_IMAGE_JS = """async (img) => {
    const sha256 = async (url) => {
        try {
            const bytes = await (await fetch(url)).arrayBuffer();
            const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
            return Array.from(digest, (b) => b.toString(16).padStart(2, '0')).join('');
        } catch (err) {
            return null;  // revoked by a newer image meanwhile: that one gets hashed instead
        }
    };
    const record = async () => {
        const url = img.src;
        const hash = url ? await sha256(url) : null;
        if (hash !== null && img.src === url) {
            img.dataset.sha256 = hash;
            img.dataset.sha256Of = url;
        }
    };
    if (!img.dataset.watched) {
        img.dataset.watched = 'yes';
        new MutationObserver(record).observe(img, {attributes: true, attributeFilter: ['src']});
    }
    await record();
    return img.dataset.sha256Of === img.src ? img.dataset.sha256 : null;
}"""

# Synchronous on purpose: wait_for_function treats a returned Promise as truthy at once.
# True once the bytes of the image's current src are hashed and differ from `before`.
IMAGE_CHANGED_JS = """([img, before]) => {
    const current = img.dataset.sha256Of === img.src ? img.dataset.sha256 : null;
    return current !== undefined && current !== null && current !== before ? current : false;
}"""

# Every stderr/error output of the notebook: [cell number (1-based, all cells), text].
STDERR_OUTPUTS_JS = """(panel) => {
    const cells = [...panel.querySelectorAll('.jp-Notebook .jp-Cell')];
    const outputs = panel.querySelectorAll('.jp-OutputArea-output[data-mime-type="STDERR_MIME"]');
    return [...outputs].map((out) => [cells.indexOf(out.closest('.jp-Cell')) + 1, out.textContent]);
}""".replace("STDERR_MIME", STDERR_MIME)

WIDGET_ERROR = re.compile(r"Error displaying widget|Error rendering widget|Failed to render")


@dataclass
class OpenNotebook:
    """A notebook open in a JupyterLab tab: its name, tab and panel (toolbar, cells, outputs)."""

    name: str
    tab: Locator
    panel: Locator


class NotebookPage:
    """One browser tab on the JupyterLab of a LabServer, opening and running notebooks."""

    def __init__(self, page: Page, server: LabServer) -> None:
        self.page = page
        self.server = server
        self.loaded = False
        # Every request of the page that would change a file through the server (a save, a
        # rename, a deletion, restoring a checkpoint …): "PUT /api/contents/notebooks/x.ipynb".
        # Creating a checkpoint ("POST …/x.ipynb/checkpoints", which JupyterLab does when it
        # opens a file that has none) copies the file and leaves it as it is.
        self.content_writes: list[str] = []
        page.on("request", self._note_content_write)

    def _note_content_write(self, request: Request) -> None:
        path = urllib.parse.unquote(urllib.parse.urlsplit(request.url).path)
        if request.method == "GET" or not path.startswith("/api/contents"):
            return
        if request.method == "POST" and path.endswith("/checkpoints"):
            return
        self.content_writes.append(f"{request.method} {path}")

    def open_notebook(self, path: str, timeout_ms: float = 60_000) -> OpenNotebook:
        """Open ``path`` (relative to the server root) and wait until its kernel is idle.

        The first notebook loads JupyterLab at its URL (?reset: no restored workspace); the
        next ones are opened by double-clicking them in the file browser, which shows the
        first one's folder, as a reader would. (Loading the URL again would reload the whole
        application and close the notebooks already open.)
        """
        name = path.rsplit("/", 1)[-1]
        exact = re.compile(f"^{re.escape(name)}$")
        if self.loaded:
            self.page.locator(".jp-DirListing-itemText", has_text=exact).dblclick(
                timeout=timeout_ms
            )
        else:
            self.page.goto(self.server.url(f"lab/tree/{path}", reset=""), timeout=timeout_ms)
            self.loaded = True
        tab = self.page.locator(
            ".lm-DockPanel-tabBar .lm-TabBar-tab",
            has=self.page.locator(".lm-TabBar-tabLabel", has_text=exact),
        )
        self.page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current").filter(
            has=self.page.locator(".lm-TabBar-tabLabel", has_text=exact)
        ).wait_for(timeout=timeout_ms)
        panel = self.page.locator(f"#{tab.get_attribute('data-id')}")
        # The indicator says "idle" before a kernel exists: wait for the kernel's name first.
        panel.locator(".jp-Toolbar-kernelName", has_text="Python 3").wait_for(timeout=timeout_ms)
        panel.locator('.jp-Notebook-ExecutionIndicator[data-status="idle"]').wait_for(
            timeout=timeout_ms
        )
        return OpenNotebook(name, tab, panel)

    def activate(self, notebook: OpenNotebook) -> None:
        """Bring the notebook's tab to the front (a click on the tab)."""
        if "lm-mod-current" not in (notebook.tab.get_attribute("class") or ""):
            notebook.tab.click()
        notebook.panel.wait_for(state="visible")

    def start_run_all(self, notebook: OpenNotebook) -> None:
        """Run > Run All Cells on this notebook; returns at once (see wait_until_run_finished)."""
        self.activate(notebook)
        self.page.locator(".lm-MenuBar-item", has_text=re.compile("^Run$")).click()
        self.page.locator('.lm-Menu [data-command="runmenu:run-all"]').click()

    def wait_until_run_finished(self, notebook: OpenNotebook, timeout_ms: float) -> str:
        """Wait until the run has finished or an error output shows.

        Returns:
            the execution indicator's text ("Kernel status: Idle Executed 35 cells…").
        """
        result = self.page.wait_for_function(
            RUN_FINISHED_JS, arg=notebook.panel.element_handle(), polling=100, timeout=timeout_ms
        )
        return result.json_value()

    @staticmethod
    def stderr_outputs(panel: Locator) -> list[tuple[int, str]]:
        """(cell number, text) of every stderr stream and error in the notebook."""
        return [tuple(item) for item in panel.evaluate(STDERR_OUTPUTS_JS)]

    @staticmethod
    def widget_errors(panel: Locator) -> list[str]:
        """Texts of outputs where a widget failed to display."""
        texts = panel.locator(".jp-OutputArea-output").evaluate_all(
            "(outputs) => outputs.map((out) => out.textContent)"
        )
        return [t for t in texts if WIDGET_ERROR.search(t)]

    @staticmethod
    def dashboard(panel: Locator, control_label: str) -> Locator:
        """The dashboard box (controls, image, status line) that has a control so labelled."""
        label = panel.page.locator(
            "label.widget-label", has_text=re.compile(f"^{re.escape(control_label)}$")
        )
        return panel.locator(".widget-vbox:has(> .widget-image)").filter(has=label)

    @staticmethod
    def control(dashboard: Locator, label: str) -> Locator:
        """The widget (slider, toggle buttons, dropdown …) whose description is ``label``."""
        return dashboard.locator(
            f"xpath=.//label[contains(concat(' ', @class, ' '), ' widget-label ')]"
            f"[normalize-space(.)='{label}']/.."
        )

    @staticmethod
    def watch_image(dashboard: Locator, timeout_ms: float) -> str:
        """Wait for the dashboard's image, start hashing each new one; return the current hash."""
        img = dashboard.locator(":scope > .widget-image")
        img.and_(dashboard.page.locator("img[src]")).wait_for(timeout=timeout_ms)
        return img.evaluate(WATCH_IMAGE_JS)

    def wait_for_new_image(self, dashboard: Locator, before: str, timeout_ms: float) -> str:
        """Wait until the dashboard's image bytes differ from ``before``; return the new hash.

        Raises:
            PlaywrightError (a TimeoutError): no such change within ``timeout_ms``.
        """
        img = dashboard.locator(":scope > .widget-image").element_handle()
        result = self.page.wait_for_function(
            IMAGE_CHANGED_JS, arg=[img, before], polling="raf", timeout=timeout_ms
        )
        return result.json_value()
