"""Checks of the repository itself: README test command, stored notebooks, import hygiene, pins."""

from __future__ import annotations

import ast
import functools
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import load_tool
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((REPO / "notebooks" / "en").glob("*.ipynb"))
START_MARK = "<!-- test-command -->"
END_MARK = "<!-- /test-command -->"


# --- (a) README test command ------------------------------------------------------------------


def readme_test_block() -> str:
    """The lines inside the fenced block between the README markers (independent parser)."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert text.count(START_MARK) == 1, f"README.md needs exactly one {START_MARK}"
    assert text.count(END_MARK) == 1, f"README.md needs exactly one {END_MARK}"
    block = text.split(START_MARK, 1)[1].split(END_MARK, 1)[0].strip().splitlines()
    assert len(block) >= 3, "the markers must surround a fenced code block"
    assert block[0].startswith("```") and block[-1].strip() == "```", block
    return "\n".join(line for line in block[1:-1] if line.strip())


def test_readme_has_one_test_command():
    command = readme_test_block()
    assert "-m pytest" in command
    torch_first = "pip install --no-deps -r requirements-torch.txt"  # see test_binder.py
    assert torch_first in command and "pip install -r requirements.txt" in command
    assert command.index(torch_first) < command.index("pip install -r requirements.txt")


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_ci_run_extracts_the_readme_command():
    result = subprocess.run(
        ["bash", str(REPO / ".ci" / "run"), "--print-command"],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == readme_test_block()


# --- (b) stored notebooks ---------------------------------------------------------------------

LOCAL_PATH = re.compile(r"/root/|/home/|/tmp/|/work/|/Users/|[A-Za-z]:\\Users\\")
# The file name ipykernel gives a cell (/tmp/ipykernel_<pid>/<hash>.py) appears in every warning
# raised from notebook code; it names no user or checkout, and nbval sanitises it.
IPYKERNEL_CELL_FILE = re.compile(r"[^\s\"'()]*ipykernel_\d+[/\\]\d+\.py")
SYS_PATH_EDIT = re.compile(r"\bsys\.path\s*(\.\s*(insert|append|extend)\b|\+?=)")
PIP_INSTALL = re.compile(r"\bpip3?\s+install\b|^\s*%pip\b|^\s*!\s*pip", re.MULTILINE)


@functools.cache
def load(path: Path) -> dict:
    """The notebook's JSON, read once per process (the tests only read it)."""
    return json.loads(path.read_text(encoding="utf-8"))


def markdown_sources(path: Path) -> list[str]:
    return [
        "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
        for c in load(path)["cells"]
        if c["cell_type"] == "markdown"
    ]


def code_cells(nb: dict) -> list[tuple[int, dict, str]]:
    cells = []
    for index, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code":
            source = cell["source"]
            cells.append((index, cell, source if isinstance(source, str) else "".join(source)))
    return cells


def output_texts(output: dict) -> list[str]:
    """Every text in an output, images excluded (base64 can contain anything)."""
    texts = []
    if "text" in output:
        texts.append(output["text"])
    for mime, value in output.get("data", {}).items():
        if mime.startswith("image/") and mime != "image/svg+xml":
            continue
        texts.append(value if isinstance(value, str) else json.dumps(value))
    texts.extend(output.get("traceback", []))
    if "evalue" in output:
        texts.append(output["evalue"])
    return ["".join(t) if isinstance(t, list) else t for t in texts]


def require_notebooks():
    if not NOTEBOOKS:
        pytest.skip("no notebooks in notebooks/ yet")


@pytest.fixture(params=NOTEBOOKS or [None], ids=lambda p: p.name if p else "none")
def notebook(request):
    require_notebooks()
    return request.param.name, load(request.param)


def test_execution_counts_are_1_to_n(notebook):
    name, nb = notebook
    counts = [cell.get("execution_count") for _, cell, src in code_cells(nb) if src.strip()]
    assert counts == list(range(1, len(counts) + 1)), (
        f"{name}: execution counts {counts}; re-run tools/execute_notebooks.py"
    )


def test_no_stored_errors(notebook):
    name, nb = notebook
    for index, cell, _ in code_cells(nb):
        for output in cell.get("outputs", []):
            assert output["output_type"] != "error", (
                f"{name}: cell {index} stores an error: {output.get('ename')}: "
                f"{output.get('evalue')}"
            )


def test_no_local_paths_in_outputs(notebook):
    name, nb = notebook
    for index, cell, _ in code_cells(nb):
        for output in cell.get("outputs", []):
            for text in output_texts(output):
                text = IPYKERNEL_CELL_FILE.sub("IPYKERNEL_CELL.py", text)
                found = LOCAL_PATH.search(text)
                assert not found, (
                    f"{name}: cell {index} output shows a local path: "
                    f"...{text[max(0, found.start() - 40) : found.end() + 40]}..."
                )


NOTEBOOK_COLUMN_PX = 840  # JupyterLab's notebook column at 1280 × 800, file browser open


def test_stored_figures_fit_the_column_and_lose_nothing_at_the_edge(notebook):
    """Each stored PNG is at most the notebook column wide (JupyterLab would shrink it), and its
    outermost pixels are background: no label runs into the edge and is cut there."""
    import base64
    import io

    import numpy as np
    from PIL import Image

    from attn_lib.lessons._figures import ink_on_edge

    name, nb = notebook
    for index, cell, _ in code_cells(nb):
        for output in cell.get("outputs", []):
            data = output.get("data", {}).get("image/png")
            if data is None:
                continue
            image = Image.open(io.BytesIO(base64.b64decode("".join(data))))
            assert image.width <= NOTEBOOK_COLUMN_PX, (
                f"{name}: cell {index}: a figure {image.width} px wide, wider than the "
                f"notebook's {NOTEBOOK_COLUMN_PX} px column"
            )
            pixels = np.asarray(image.convert("RGB"))
            assert not ink_on_edge(pixels, background=pixels[0, 0].astype(np.int16)), (
                f"{name}: cell {index}: a figure has ink on its edge (cut?)"
            )


def test_kernelspec_metadata(notebook):
    name, nb = notebook
    kernelspec = nb.get("metadata", {}).get("kernelspec", {})
    assert kernelspec.get("name") == "python3", f"{name}: kernelspec is {kernelspec!r}"
    assert kernelspec.get("language") == "python"
    assert kernelspec.get("display_name")


def test_no_sys_path_edits_or_pip_installs(notebook):
    name, nb = notebook
    for index, _, source in code_cells(nb):
        assert not SYS_PATH_EDIT.search(source), (
            f"{name}: cell {index} edits sys.path; attn_lib is installed with `pip install -e .`"
        )
        assert not PIP_INSTALL.search(source), (
            f"{name}: cell {index} installs packages; they belong in requirements.txt"
        )


# --- (c) import hygiene -----------------------------------------------------------------------


def _module_level_imports(path: Path) -> list[tuple[str, int]]:
    """The modules a file imports when it is imported: (absolute name or ".name", level) pairs,
    from its top level and the blocks there (if / try / with), not from functions or classes,
    nor from ``if TYPE_CHECKING:`` blocks."""
    found = []

    def walk(statements):
        for node in statements:
            if isinstance(node, ast.Import):
                found.extend((alias.name, 0) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                found.append((node.module or "", node.level))
                if node.level and not node.module:  # `from . import name`: a submodule
                    found.extend((alias.name, node.level) for alias in node.names)
            elif isinstance(node, ast.If):
                if "TYPE_CHECKING" not in ast.unparse(node.test):
                    walk(node.body)
                walk(node.orelse)
            elif isinstance(node, (ast.Try, ast.With)):
                for block in ("body", "orelse", "finalbody"):
                    walk(getattr(node, block, []))
                for handler in getattr(node, "handlers", []):
                    walk(handler.body)

    walk(ast.parse(path.read_text(encoding="utf-8")).body)
    return found


def test_import_attn_lib_needs_no_plotting_or_widgets():
    """`import attn_lib` loads torch, numpy and the standard library only (pyproject's
    dependencies): every module it reaches, followed through attn_lib's own imports, imports
    nothing else at its top level. (Read from the sources: a fresh interpreter that imports
    torch would cost 2 s of CPU.)"""
    package = REPO / "attn_lib"
    allowed = {"torch", "numpy", "attn_lib", *sys.stdlib_module_names}
    todo, seen, outside = ["attn_lib"], set(), {}
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        path = package.joinpath(*name.split(".")[1:])
        path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        assert path.exists(), f"{name} is imported but {path} does not exist"
        parent = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for module, level in _module_level_imports(path):
            if level:  # relative: resolve against the importing package
                base = parent.rsplit(".", level - 1)[0] if level > 1 else parent
                module = f"{base}.{module}" if module else base
            if module.split(".")[0] == "attn_lib":
                candidate = package.joinpath(*module.split(".")[1:])
                if candidate.is_dir() or candidate.with_suffix(".py").exists():
                    todo.append(module)
            elif module.split(".")[0] not in allowed:
                outside[name] = module
    assert "attn_lib.lessons" not in seen, "`import attn_lib` imports the lessons (and matplotlib)"
    assert not outside, f"`import attn_lib` imports more than torch and numpy: {outside}"
    assert {"attn_lib.attention", "attn_lib.checks", "attn_lib.softmax"} <= seen, sorted(seen)


# --- (d) requirements.txt ---------------------------------------------------------------------

LINUX_X86_64 = {"sys_platform": "linux", "platform_machine": "x86_64"}
MACOS_ARM = {"sys_platform": "darwin", "platform_machine": "arm64"}
REQUIRED = {
    "torch", "numpy", "matplotlib", "ipywidgets", "jupyterlab", "ipykernel", "nbval",
    "nbclient", "nbformat", "nbconvert", "pytest", "pytest-xdist", "ruff",
}  # fmt: skip


def requirement_lines() -> list[str]:
    lines = []
    for raw in (REPO / "requirements.txt").read_text(encoding="utf-8").splitlines():
        line = re.sub(r"(^|\s)#.*$", "", raw).strip()
        if line:
            lines.append(line)
    return lines


def test_requirements_are_exact_pins():
    pinned, torch_pins = {}, {}
    for line in requirement_lines():
        if line == "-e ." or line.startswith(("--extra-index-url ", "--find-links ")):
            continue
        requirement = Requirement(line)
        name = canonicalize_name(requirement.name)
        specifiers = list(requirement.specifier)
        assert len(specifiers) == 1 and specifiers[0].operator == "==", (
            f"requirements.txt: {line!r} is not an exact `==` pin"
        )
        if requirement.marker is not None:  # only torch's build differs by platform
            assert name == "torch", f"requirements.txt: {line!r}: only torch has a marker"
            for platform in LINUX_X86_64, MACOS_ARM:
                if requirement.marker.evaluate(platform):
                    assert platform["sys_platform"] not in torch_pins, "torch pinned twice"
                    torch_pins[platform["sys_platform"]] = specifiers[0].version
        pinned[name] = specifiers[0].version
    # CPU builds both; on Linux 2.13.0 (CUDA) after README.md's fallback for no PyTorch site
    assert torch_pins["linux"] in {"2.13.0+cpu", "2.13.0"} and torch_pins["darwin"] == "2.13.0"
    assert REQUIRED <= set(pinned), f"missing pins: {sorted(REQUIRED - set(pinned))}"
    assert "-e ." in requirement_lines()


@functools.cache
def _heading_ids(path: Path) -> set[str]:
    """JupyterLab's ids for a notebook's headings (the rule tools/sync_translation.py maps by)."""
    sync = load_tool("sync_translation")
    return set(sync.heading_anchors(sync.read(path)).values())


# A link to a notebook, with an optional #fragment (which may hold balanced parentheses).
NOTEBOOK_LINK = re.compile(r"\]\((\d\d_[\w.-]+\.ipynb)(?:#((?:[^()\s]|\([^()\s]*\))*))?\)")


@pytest.mark.parametrize(
    "notebook",
    NOTEBOOKS + sorted((REPO / "notebooks" / "zh").glob("*.ipynb")),
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_links_between_notebooks_resolve(notebook):
    text = "\n".join(markdown_sources(notebook))
    for target, fragment in NOTEBOOK_LINK.findall(text):
        path = notebook.parent / target
        assert path.exists(), f"{notebook.name} links to {target}, which does not exist"
        if fragment:
            assert fragment in _heading_ids(path), (
                f"{notebook.name}: no heading #{fragment} in {target}"
            )


def test_kernel_startup_skips_the_dtensor_lookup_and_collects_after_the_imports(monkeypatch):
    """tests/kernel_startup.py, as the test kernels run it: the collector is off until a cell
    has run with torch imported, then that cell's objects are frozen and it is on again; from
    the first cell on, assert_close no longer looks for DTensors; the notebook's namespace gets
    nothing."""
    import gc

    import torch.testing._comparison as comparison
    from IPython.core.interactiveshell import InteractiveShell

    calls = []
    for name in ("disable", "enable", "freeze"):
        monkeypatch.setattr(gc, name, lambda name=name: calls.append(name))
    shell = InteractiveShell()
    try:
        before, doc = set(shell.user_ns), shell.user_ns.get("__doc__")
        startup = REPO / "tests" / "kernel_startup.py"
        shell.safe_execfile(str(startup), shell.user_ns, raise_exceptions=True)
        assert calls == ["disable"] and shell.user_ns.get("__doc__") == doc
        monkeypatch.setattr(comparison, "_HAS_DTENSOR", True)
        assert shell.run_cell("import torch\nx = 1").success
        assert comparison._HAS_DTENSOR is False
        assert calls == ["disable", "freeze", "enable"]
        assert shell.run_cell("y = 2").success
        assert calls == ["disable", "freeze", "enable"]  # once only
        assert {name for name in set(shell.user_ns) - before if not name.startswith("_")} == {
            "torch",
            "x",
            "y",
        }
    finally:
        shell.clear_instance()


def test_stored_outputs_come_from_kernels_without_the_callers_ipython_profile(monkeypatch):
    """tools/execute_notebooks.py gives its kernels an empty IPYTHONDIR of its own: a startup
    file or an inline-backend setting (retina figures) in the maintainer's profile never reaches
    the stored outputs."""
    execute_notebooks = load_tool("execute_notebooks")
    monkeypatch.setenv("IPYTHONDIR", "/somewhere/with/a/profile")
    folder = Path(execute_notebooks.kernel_env()["IPYTHONDIR"])
    assert folder.is_dir() and not any(folder.iterdir())
    assert execute_notebooks.kernel_env()["PYTHONHASHSEED"] == "0"
