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
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import psutil
from jupyter_client import BlockingKernelClient

try:
    from playwright.sync_api import Error as PlaywrightError  # TimeoutError is a subclass
except ImportError:  # the browser tests skip (or fail, with REQUIRE_BROWSER=1) before using it
    PlaywrightError = RuntimeError

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page

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
    # No blinking cursor: the blink is a CSS animation that Chromium runs on the main thread
    # (a trace showed the cursor layers of the notebook's editors animating while dashboards
    # were moved), so it makes the page draw frames for nothing. Layout is unaffected.
    "@jupyterlab/codemirror-extension:plugin": {"defaultConfig": {"cursorBlinkRate": 0}},
    # English menus on any machine: by default JupyterLab takes the server's locale, so with
    # the zh_CN language pack installed a Chinese system would start in Chinese.
    "@jupyterlab/translation-extension:plugin": {"locale": "en"},
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
    # The kernels' startup file, as nbval's kernels have it (see tests/kernel_startup.py).
    startup = Path(env["IPYTHONDIR"], "profile_default", "startup")
    startup.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(Path(__file__).with_name("kernel_startup.py"), startup / "00-tests.py")
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

    def get_json(self, path: str) -> dict:
        """GET an API path of the server ("lab/api/translations/zh_CN"), as JSON."""
        with urllib.request.urlopen(self.url(path), timeout=30) as response:
            return json.loads(response.read())

    def new_session(self, notebook: str, kernel_id: str | None = None) -> str:
        """Create the notebook's session, as JupyterLab does when it opens the notebook: with a
        new kernel, or with the running kernel ``kernel_id`` (JupyterLab's "use the kernel of
        another notebook"). Returns the kernel's id.

        JupyterLab then opens the notebook on this session (it reuses the session of a path).
        """
        kernel = {"id": kernel_id} if kernel_id else {"name": "python3"}
        request = urllib.request.Request(
            self.url("api/sessions"),
            data=json.dumps(
                {"path": notebook, "type": "notebook", "name": notebook, "kernel": kernel}
            ).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())["kernel"]["id"]

    def start_kernel(self, notebook: str) -> tuple[str, BlockingKernelClient]:
        """Start the notebook's kernel now (see new_session); return its id and a client
        connected to it (stop its channels when done).

        Code the client executes runs while the page loads; the page then opens the notebook
        on this kernel, once the kernel is idle.
        """
        kernel_id = self.new_session(notebook)
        connection = Path(self.env["JUPYTER_RUNTIME_DIR"], f"kernel-{kernel_id}.json")
        client = BlockingKernelClient(connection_file=str(connection))
        client.load_connection_file()
        client.start_channels()
        return kernel_id, client

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
                if os.getsid(p.pid) == self.process.pid:
                    found.append(p)
            except (ProcessLookupError, PermissionError, psutil.Error):
                continue
        return running(found)

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
        alive = wait_until_ended(self.started, timeout=5)
        alive += [p for p in self.session_processes() if p not in alive]
        if alive:
            _killpg(pgid)
            for p in alive:
                with contextlib.suppress(psutil.Error):
                    p.kill()
            wait_until_ended(alive, timeout=5)
        return [_describe(p) for p in alive]


def running(processes: list[psutil.Process]) -> list[psutil.Process]:
    """Those of ``processes`` still running. A zombie has exited (only its parent's wait, or
    init's, is left), unless other threads outlive its main one: Linux shows that too as Z."""
    left = []
    for p in processes:
        with contextlib.suppress(psutil.Error):
            if p.is_running() and (p.status() != psutil.STATUS_ZOMBIE or p.num_threads() > 1):
                left.append(p)
    return left


def wait_until_ended(processes: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Wait until every one of ``processes`` has ended (see running()); those still running
    after ``timeout`` seconds. (psutil.wait_procs would also wait for the zombies: Chromium's
    zygotes stay zombies until init reaps them, up to 2 s on some machines.)"""
    deadline = time.monotonic() + timeout
    while (alive := running(processes)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return alive


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
# indicator is idle and every code cell shows an execution count ("[12]:", neither "[*]:" nor
# "[ ]:"), or an error output has appeared (a failing cell stops the run). Returns "Executed N
# cells", N the code cells with a count. (The indicator's own "Executed N cells" text is not
# always written for a short run.)
RUN_FINISHED_JS = """(panel) => {
    const indicator = panel.querySelector('.jp-Notebook-ExecutionIndicator');
    if (!indicator || indicator.dataset.status !== 'idle') return false;
    const prompts = [...panel.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')];
    const counted = prompts.filter((p) => /\\[\\d+\\]/.test(p.textContent)).length;
    const failed = panel.querySelector('.jp-OutputArea-output[data-mime-type="STDERR_MIME"]');
    if (counted === prompts.length || failed) return `Executed ${counted} cells`;
    return false;
}""".replace("STDERR_MIME", STDERR_MIME)

# Keeps the SHA-256 (hex) of the bytes behind an <img>'s current (blob:) URL in
# img.dataset.sha256, updated when each new image has loaded (not before: the hashing would
# compete with the decoding that a latency measurement times), and tells the dashboard's latency
# probe (ARM_LATENCY_JS) each time; resolves once the hash of the current src is known. Each
# image update gets a new blob: URL, so only the bytes tell whether the picture changed.
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
            img.parentElement.latencyProbe?.check();
        }
    };
    if (!img.dataset.watched) {
        img.dataset.watched = 'yes';
        img.addEventListener('load', record);
    }
    await record();
    return img.dataset.sha256Of === img.src ? img.dataset.sha256 : null;
}"""


# Every stderr/error output of the notebook: [cell number (1-based, all cells), text].
STDERR_OUTPUTS_JS = """(panel) => {
    const cells = [...panel.querySelectorAll('.jp-Notebook .jp-Cell')];
    const outputs = panel.querySelectorAll('.jp-OutputArea-output[data-mime-type="STDERR_MIME"]');
    return [...outputs].map((out) => [cells.indexOf(out.closest('.jp-Cell')) + 1, out.textContent]);
}""".replace("STDERR_MIME", STDERR_MIME)

WIDGET_ERROR = re.compile(r"Error displaying widget|Error rendering widget|Failed to render")


# Dashboards: their controls, their layout and their latency.

# The controls of a dashboard box, in page order: [kind, label] with kind "slider", "toggle",
# "dropdown" or "checkbox" and label the control's description (its <label>).
CONTROLS_JS = """(root) => {
    const kinds = [['.widget-slider', 'slider'], ['.widget-toggle-buttons', 'toggle'],
                   ['.widget-dropdown', 'dropdown'], ['.widget-checkbox', 'checkbox']];
    const found = [];
    for (const el of root.querySelectorAll(':scope > .widget-hbox > *')) {
        const kind = kinds.find(([selector]) => el.matches(selector));
        const label = el.querySelector(':scope > label.widget-label');
        found.push([kind ? kind[1] : 'other', label ? label.textContent.trim() : '']);
    }
    return found;
}"""

# Layout facts of a dashboard box, after scrolling its top to the top of the notebook's view.
# Returns {image: natural and rendered size, cut: texts wider than their box (a label or a
# button whose text is cut), stranded: control labels not on the line of their control,
# box: the union of the controls', the image's and the status line's boxes, view: the part of
# the notebook panel visible in the window, fileBrowser: its width (0 if closed)}.
LAYOUT_JS = """(root) => {
    let scroller = root.parentElement;
    while (scroller && !(scroller.scrollHeight > scroller.clientHeight + 1 &&
                         /(auto|scroll)/.test(getComputedStyle(scroller).overflowY))) {
        scroller = scroller.parentElement;
    }
    root.scrollIntoView({block: 'start'});
    const rect = (el) => el.getBoundingClientRect();
    const img = root.querySelector(':scope > .widget-image');
    const parts = [...root.querySelectorAll(':scope > .widget-hbox > *'), img];
    const status = root.querySelector(':scope > .widget-html');
    if (status && status.textContent.trim()) parts.push(status);
    const boxes = parts.map(rect).filter((r) => r.width > 0 && r.height > 0);
    const box = {left: Math.min(...boxes.map((r) => r.left)), top: Math.min(...boxes.map((r) => r.top)),
                 right: Math.max(...boxes.map((r) => r.right)),
                 bottom: Math.max(...boxes.map((r) => r.bottom))};
    const s = rect(scroller);
    const view = {left: Math.max(s.left, 0), top: Math.max(s.top, 0),
                  right: Math.min(s.left + scroller.clientWidth, window.innerWidth),
                  bottom: Math.min(s.top + scroller.clientHeight, window.innerHeight)};
    // A label, button or readout whose text is wider than its box (cut, or "…"); a dropdown
    // whose chosen option's text is wider than its box less the arrow (about 24 px).
    const shown = (el) => el.offsetParent !== null;
    const cut = [...root.querySelectorAll('label.widget-label, button, .widget-readout')]
        .filter((el) => shown(el) && el.scrollWidth > el.clientWidth + 1)
        .map((el) => el.textContent.trim());
    const context = document.createElement('canvas').getContext('2d');
    for (const select of root.querySelectorAll('select')) {
        if (!shown(select) || select.selectedIndex < 0) continue;
        context.font = getComputedStyle(select).font;
        const text = select.options[select.selectedIndex].text;
        if (context.measureText(text).width > select.clientWidth - 24) cut.push(text);
    }
    const stranded = [];
    for (const label of root.querySelectorAll(':scope > .widget-hbox > * > label.widget-label')) {
        if (label.offsetParent === null || !label.textContent.trim()) continue;
        const body = label.nextElementSibling;
        const first = body && (body.querySelector('button, select, input, .noUi-handle') || body);
        if (!first) continue;
        const a = rect(label), b = rect(first);
        if (!(a.top < b.bottom && b.top < a.bottom && a.right <= b.left + 2)) {
            stranded.push(label.textContent.trim());
        }
    }
    const fb = document.querySelector('#filebrowser');
    return {
        natural: [img.naturalWidth, img.naturalHeight],
        rendered: [rect(img).width, rect(img).height],
        cut, stranded, box, view,
        fileBrowser: fb && fb.offsetParent !== null ? rect(fb).width : 0,
        window: [window.innerWidth, window.innerHeight],
    };
}"""

# Arms a latency probe on a dashboard box: the time of the first input event (key press, mouse
# press, a select's change), and a promise, `done`, that resolves with [hash, milliseconds from
# that event to the load of the new image] once an image whose bytes differ from the ones shown
# now has loaded and been hashed (WATCH_IMAGE_JS calls check()). Event-driven: no polling, so
# the page draws no frame while it waits. Returns the hash of the image shown now.
ARM_LATENCY_JS = """(root) => {
    const img = root.querySelector(':scope > .widget-image');
    const shown = () => (img.dataset.sha256Of === img.src ? img.dataset.sha256 : null);
    if (!root.latencyProbe) {
        const probe = root.latencyProbe = {start: null, loaded: {}};
        for (const type of ['keydown', 'mousedown', 'change']) {
            root.addEventListener(type, (event) => {
                if (probe.start === null) probe.start = event.timeStamp;
            }, true);
        }
        img.addEventListener('load', (event) => {
            probe.loaded[img.src] = event.timeStamp;
            probe.check();
        });
        probe.check = () => {
            const hash = shown(), loaded = probe.loaded[img.src];
            if (hash && hash !== probe.before && loaded !== undefined && probe.start !== null) {
                probe.resolve([hash, loaded - probe.start]);
            }
        };
    }
    const probe = root.latencyProbe;
    probe.start = null;
    probe.loaded = {};
    probe.before = shown();
    probe.done = new Promise((resolve) => { probe.resolve = resolve; });
    return probe.before;
}"""


# One step of control `index` of a dashboard box, prepared in one call (see
# NotebookPage.timed_move): arms the latency probe (ARM_LATENCY_JS), focuses a slider's handle,
# and says what to do: {kind: 'key' | 'mouse' | 'option' | 'disabled', key, x, y, index, what}.
MOVE_PLAN_JS = """(root, index) => {
    const arm = ARM_LATENCY_JS;
    const control = root.querySelectorAll(':scope > .widget-hbox > *')[index];
    const label = control.querySelector(':scope > label.widget-label');
    const name = label ? label.textContent.trim() : '?';
    if (control.querySelector('[disabled], .noUi-target[disabled]')) return {kind: 'disabled'};
    arm(root);
    const handle = control.querySelector('.noUi-handle');
    if (handle) {
        const atMax = handle.getAttribute('aria-valuenow') === handle.getAttribute('aria-valuemax');
        const key = atMax ? 'ArrowLeft' : 'ArrowRight';
        handle.focus();
        return {kind: 'key', key, what: `${key} on the ${name} slider`};
    }
    const centre = (el) => {
        const r = el.getBoundingClientRect();
        return {x: r.left + r.width / 2, y: r.top + r.height / 2};
    };
    const buttons = [...control.querySelectorAll('button')];
    if (buttons.length) {
        const active = buttons.findIndex((b) => b.classList.contains('mod-active'));
        const next = buttons[(active + 1) % buttons.length];
        return {kind: 'mouse', ...centre(next),
                what: `${name}: '${next.textContent.trim()}'`};
    }
    const select = control.querySelector('select');
    if (select) {
        const next = (select.selectedIndex + 1) % select.options.length;
        return {kind: 'option', index: next,
                what: `${name}: '${select.options[next].text}'`};
    }
    return {kind: 'mouse', ...centre(control.querySelector('input')),
            what: `a click on ${name}`};
}""".replace("ARM_LATENCY_JS", ARM_LATENCY_JS)

# Waits for the armed probe (ARM_LATENCY_JS): [hash, milliseconds]; rejects after `ms`.
NEW_IMAGE_JS = """(root, ms) => Promise.race([
    root.latencyProbe.done,
    new Promise((_, reject) => setTimeout(
        () => reject(new Error(`no new picture within ${ms} ms`)), ms)),
])"""


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

    def open_notebook(self, path: str, timeout_ms: float = 60_000) -> OpenNotebook:
        """Open ``path`` (relative to the server root) and wait until its kernel is idle.

        The first notebook loads JupyterLab at its URL (?reset: no restored workspace); the
        next ones are opened as a reader would, with File > Open from Path… (the file browser's
        folder can still be changing while JupyterLab restores its workspace; loading the URL
        again would reload the whole application and close the notebooks already open).
        """
        name = path.rsplit("/", 1)[-1]
        exact = re.compile(f"^{re.escape(name)}$")
        if self.loaded:
            menu_bar = self.page.locator(".lm-MenuBar-item")
            menu_bar.filter(has_text=re.compile("^(File|文件)$")).click(timeout=timeout_ms)
            self.page.locator('.lm-Menu-item[data-command="filebrowser:open-path"]').click()
            self.page.locator(".jp-Dialog input").fill(path)
            self.page.locator(".jp-Dialog .jp-mod-accept").click()
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
        self.page.locator(".lm-MenuBar-item", has_text=re.compile("^(Run|运行)$")).click()
        self.page.locator('.lm-Menu [data-command="runmenu:run-all"]').click()

    def language_menu(self) -> list[tuple[str, str]]:
        """Open Settings > Language and read its items: (label, command) each, the command of a
        language pack being "jupyterlab-translation:<locale>"; then close the menus."""
        menu_bar = self.page.locator(".lm-MenuBar-item")
        menu_bar.filter(has_text=re.compile("^(Settings|设置)$")).click()
        self.page.locator(".lm-Menu-itemLabel", has_text=re.compile("^(Language|语言)$")).click()
        items = self.page.locator(".lm-Menu").last.locator(".lm-Menu-item[data-command]")
        items.first.wait_for()
        found = items.evaluate_all(
            "(items) => items.map((item) => [item.innerText.trim(), item.dataset.command])"
        )
        self.page.keyboard.press("Escape")
        self.page.keyboard.press("Escape")
        return [tuple(item) for item in found]

    def wait_until_run_finished(self, notebook: OpenNotebook, timeout_ms: float) -> str:
        """Wait until the run has finished or an error output shows.

        Returns:
            "Executed N cells", N the code cells that have an execution count.
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
    def dashboards(panel: Locator) -> Locator:
        """Every dashboard box (controls, image, status line) in the notebook, in page order."""
        return panel.locator(".jp-OutputArea-output .widget-vbox:has(> .widget-image)")

    @staticmethod
    def watch_image(dashboard: Locator, timeout_ms: float) -> str:
        """Wait for the dashboard's image, start hashing each new one; return the current hash."""
        img = dashboard.locator(":scope > .widget-image")
        img.and_(dashboard.page.locator("img[src]")).wait_for(timeout=timeout_ms)
        return img.evaluate(WATCH_IMAGE_JS)

    @staticmethod
    def controls(dashboard: Locator) -> list[tuple[str, str]]:
        """(kind, label) of each control, in page order (see CONTROLS_JS)."""
        return [tuple(c) for c in dashboard.evaluate(CONTROLS_JS)]

    @staticmethod
    def layout(dashboard: Locator) -> dict:
        """Scroll the dashboard's top to the top of the notebook's view; its layout facts."""
        return dashboard.evaluate(LAYOUT_JS)

    def timed_move(
        self, dashboard: Locator, index: int, timeout_ms: float
    ) -> tuple[str, tuple[str, float]] | None:
        """Move control ``index`` one step as a reader would, wait for the new picture.

        A slider: ArrowRight on its handle (ArrowLeft at its maximum); toggle buttons: a click
        on the next button; a dropdown: the next option; a checkbox: a click.

        Returns:
            (what was done, (the new image's hash, milliseconds from the input event to the
            new image's load)), or None if the control is disabled (nothing was done).

        Raises:
            PlaywrightError: no image with other bytes within ``timeout_ms``.
        """
        plan = dashboard.evaluate(MOVE_PLAN_JS, index)
        if plan["kind"] == "disabled":
            return None
        # Real input events, without Playwright's actionability checks (tens of ms each):
        # the dashboard's top is in view (see layout()) and its controls are at its top.
        if plan["kind"] == "key":
            self.page.keyboard.press(plan["key"])  # the handle has the focus
        elif plan["kind"] == "mouse":
            self.page.mouse.click(plan["x"], plan["y"])
        else:
            control = dashboard.locator(":scope > .widget-hbox > *").nth(index)
            control.locator("select").select_option(index=plan["index"])
        return plan["what"], tuple(dashboard.evaluate(NEW_IMAGE_JS, timeout_ms))
