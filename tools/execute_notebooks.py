#!/usr/bin/env python3
"""Re-execute the notebooks in place, so that their stored outputs are the ones nbval checks.

Usage (from anywhere; paths are relative to the repository):

    python tools/execute_notebooks.py                 # every notebooks/*.ipynb, sorted
    python tools/execute_notebooks.py notebooks/03_masks.ipynb
    python tools/execute_notebooks.py --check         # run to a temp copy, report changes

Each notebook runs top to bottom in a fresh ``python3`` kernel (the Python running this
script) with ``notebooks/`` as working directory. The run stops at the first failing cell and
names the notebook and the cell. Afterwards the notebook gets the standard ``python3``
kernelspec and the kernel's ``language_info`` (so JupyterLab opens it without a "Select
Kernel" dialog), loses the saved widget state (readers without a kernel see the static
gallery cells instead), gets every cell's slide type from the rules of
``tools/set_slide_metadata.py`` (some rules look at the outputs, so this comes after the run),
and is checked for execution counts 1, 2, 3, ... before it is written.

The script prints which CPU kernels it ran with (``tools/cpu_kernels.py``: the ATen CPU
capability and any ``ATEN_CPU_CAPABILITY`` / ``MKL_*`` variable set) and records the same line
in each notebook's metadata as ``executed_with``. The stored outputs must not depend on it:
``python tools/cpu_kernels.py nbval`` checks them under a second set of kernels.
"""

from __future__ import annotations

import argparse
import atexit
import functools
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cpu_kernels  # sibling scripts in tools/, not a package
import set_slide_metadata

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "notebooks" / "en"
KERNEL_NAME = "python3"
# The kernelspec ipykernel installs as "python3"; fixed text so that the stored metadata does
# not depend on the machine that last executed the notebook.
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": KERNEL_NAME}
SANITIZE_CFG = REPO / "tests" / "sanitize.cfg"  # the patterns nbval applies before comparing
# Text outputs nbval compares; images are not compared by nbval and are only reported.
TEXT_MIME = ("text/plain", "text/html", "text/latex", "text/markdown", "image/svg+xml")


class NotebookFailed(Exception):
    """A notebook could not be executed; the message says where and why."""


def kernel_env() -> dict[str, str]:
    """Environment of the kernel: the caller's, made reproducible where it matters."""
    env = dict(os.environ)
    env["PYTHONHASHSEED"] = "0"  # set/dict iteration order of strings is stable
    # The inline backend (ipykernel's default) is what a learner sees in JupyterLab; a
    # MPLBACKEND=Agg inherited from a CI shell would turn every figure into a warning.
    env["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    # One intra-op thread: the notebooks use small tensors, and under the test run two
    # kernels share two cores, where competing thread pools made small ops 10x slower.
    env["OMP_NUM_THREADS"] = "1"
    # No IPython profile of the caller's (a startup file, `InlineBackend.figure_formats =
    # {'retina'}`): an empty one, made for this run, as a fresh learner's kernel has.
    env["IPYTHONDIR"] = _empty_ipython_dir()
    return env


@functools.cache
def _empty_ipython_dir() -> str:
    folder = tempfile.mkdtemp(prefix="attn-lib-execute-ipython-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def execute(path: Path, timeout: int) -> nbformat.NotebookNode:
    """Execute one notebook and return it; the file itself is not touched."""
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        kernel_name=KERNEL_NAME,
        timeout=timeout,
        allow_errors=False,
        record_timing=False,  # no per-cell timestamps in the stored notebook
        resources={"metadata": {"path": str(path.parent)}},  # notebooks/
    )
    current = {"index": None}

    def on_cell_execute(cell, cell_index):
        current["index"] = cell_index

    client.on_cell_execute = on_cell_execute
    try:
        client.execute(env=kernel_env())
    except (CellExecutionError, CellTimeoutError, DeadKernelError) as exc:
        index = current["index"]
        what = {
            CellTimeoutError: f"timed out after {timeout} s",
            DeadKernelError: "killed the kernel",
        }.get(type(exc), "raised an exception")
        first_line = ""
        if index is not None:
            first_line = nb.cells[index].source.strip().splitlines()[0][:80]
        raise NotebookFailed(
            f"{path.name}: cell {index} (counting all cells from 0) {what}\n"
            f"  first line of the cell: {first_line!r}\n{exc}"
        ) from None
    return nb


def finalise(nb: nbformat.NotebookNode, name: str, kernels: str) -> None:
    """Set the metadata, drop widget state, and check the execution counts."""
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata["executed_with"] = kernels
    if "language_info" not in nb.metadata:
        raise NotebookFailed(f"{name}: the kernel sent no language_info")
    nb.metadata.pop("widgets", None)
    set_slide_metadata.apply(nb)
    expected = 1
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        if not cell.source.strip():
            cell.execution_count = None
            cell.outputs = []
            continue
        if cell.execution_count != expected:
            raise NotebookFailed(
                f"{name}: cell {index} has execution count {cell.execution_count}, expected "
                f"{expected} (was it skipped, e.g. by a 'skip-execution' tag?)"
            )
        expected += 1
    nbformat.validate(nb)


def sanitizer():
    """A function applying tests/sanitize.cfg the way nbval does."""
    from nbval.plugin import get_sanitize_patterns  # nbval's own parser of the file

    patterns = []
    if SANITIZE_CFG.is_file():
        patterns = get_sanitize_patterns(SANITIZE_CFG.read_text(encoding="utf-8"))

    def sanitize(text):
        if not isinstance(text, str):
            return text
        for regex, replace in patterns:
            text = re.sub(regex, replace, text)
        return text

    return sanitize


def text_of(outputs: list, sanitize) -> list:
    """The parts of a cell's outputs that nbval compares (images left out), sanitised."""
    parts = []
    for out in outputs:
        kind = out.get("output_type")
        if kind == "stream":
            parts.append((out.get("name"), sanitize(out.get("text"))))
        elif kind in ("execute_result", "display_data"):
            data = out.get("data", {})
            parts.append({mime: sanitize(data[mime]) for mime in TEXT_MIME if mime in data})
        elif kind == "error":
            parts.append(("error", out.get("ename"), sanitize(out.get("evalue"))))
    return parts


def images_of(outputs: list) -> list:
    return [
        out.get("data", {}).get(mime)
        for out in outputs
        for mime in ("image/png", "image/jpeg")
        if mime in out.get("data", {})
    ]


def compare(stored: nbformat.NotebookNode, fresh: nbformat.NotebookNode, name: str) -> bool:
    """Print which cells' outputs changed; return True if any text output changed."""
    text_changed = False
    sanitize = sanitizer()
    for index, (old, new) in enumerate(zip(stored.cells, fresh.cells, strict=True)):
        if old.cell_type != "code":
            continue
        if text_of(old.outputs, sanitize) != text_of(new.outputs, sanitize):
            print(f"  {name}: cell {index}: text output would change")
            text_changed = True
        elif images_of(old.outputs) != images_of(new.outputs):
            print(f"  {name}: cell {index}: image bytes would change (nbval ignores images)")
    if stored.metadata.get("kernelspec") != fresh.metadata.get("kernelspec"):
        print(f"  {name}: kernelspec metadata would change")
        text_changed = True
    return text_changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: notebooks/*.ipynb")
    parser.add_argument(
        "--timeout", type=int, default=300, help="seconds allowed per cell (default 300)"
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="execute without writing; report whether the stored outputs would change",
    )
    args = parser.parse_args(argv)

    paths = sorted(p.resolve() for p in args.notebooks) or sorted(NOTEBOOKS.glob("*.ipynb"))
    if not paths:
        print(f"no notebooks found in {NOTEBOOKS}", file=sys.stderr)
        return 1
    for path in paths:
        if not path.is_file():
            print(f"no such notebook: {path}", file=sys.stderr)
            return 1

    kernels = cpu_kernels.describe()
    print(f"CPU kernels: {kernels}")
    changed = []
    total = time.perf_counter()
    for path in paths:
        start = time.perf_counter()
        try:
            stored = nbformat.read(path, as_version=4)
            fresh = execute(path, args.timeout)
            finalise(fresh, path.name, kernels)
        except NotebookFailed as exc:
            print(f"FAILED {exc}", file=sys.stderr)
            return 1
        seconds = time.perf_counter() - start
        if args.check:
            if compare(stored, fresh, path.name):
                changed.append(path.name)
            print(f"checked  {path.name}  {seconds:6.1f} s")
        else:
            nbformat.write(fresh, path)
            print(f"executed {path.name}  {seconds:6.1f} s")
    print(f"{len(paths)} notebook(s) in {time.perf_counter() - total:.1f} s")
    if args.check and changed:
        print(f"stored outputs are out of date in: {', '.join(changed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
