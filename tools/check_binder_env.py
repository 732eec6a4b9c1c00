#!/usr/bin/env python3
"""Build Binder's Python environment in a fresh venv, run the tests in it, and measure it.

Usage (from anywhere; the repository is found from this file's location):

    python3 tools/check_binder_env.py                   # temp venv, removed afterwards
    python3 tools/check_binder_env.py --keep            # keep the temp venv (path printed)
    python3 tools/check_binder_env.py --venv /tmp/bvenv # build there (always kept)
    python3 tools/check_binder_env.py --skip-tests      # install and measure only

What it does, in the order repo2docker would (without Docker):

1. ``python3.11 -m venv VENV`` (binder/runtime.txt asks for python-3.11).
2. ``VENV/bin/pip install --no-cache-dir -r binder/requirements.txt`` with the repository root
   as working directory. repo2docker runs the same command from the repo root, so the ``-e .``
   in that file installs this checkout's attn_lib (pip resolves it against the working
   directory). Afterwards the script checks that ``import attn_lib`` in the venv comes from
   this checkout and that torch is the ``+cpu`` build.
3. ``VENV/bin/python -m pytest`` from the repository root: the README's test command, i.e.
   unit tests plus nbval over every notebook (and the browser test, which needs Chromium).
4. The venv's size: the sum of its file sizes and the disk blocks in use (as ``du`` counts
   them, hard links once), each against the target of 1.5 GiB for Binder's environment.

Exit status 0 only if the install and the tests pass and both sizes are within the target.

pip runs with PIP_RETRIES=0 and a 5 s timeout: binder/requirements.txt names PyTorch's CPU
index, and where that index cannot be reached (as on machines without outside access) pip's
defaults would retry every package for many minutes; with these settings pip gives up on that
index at once and takes each package from the indexes it can reach (PyPI, or a local wheel
mirror set in pip's config, which must then hold a ``torch-…+cpu`` wheel).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
REQUIREMENTS = REPO / "binder" / "requirements.txt"
RUNTIME = REPO / "binder" / "runtime.txt"
TARGET_BYTES = int(1.5 * 1024**3)  # 1.5 GiB
MIB = 1024**2

# Fail fast on an unreachable index instead of retrying each package (see the docstring).
PIP_ENV = {
    "PIP_RETRIES": "0",
    "PIP_TIMEOUT": "5",
    "PIP_DEFAULT_TIMEOUT": "5",
    "PIP_NO_INPUT": "1",
    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
}


def runtime_version() -> str:
    """`3.11` for a binder/runtime.txt that says `python-3.11` (also read by the tests).

    Raises:
        ValueError: the file says something else.
    """
    runtime = RUNTIME.read_text(encoding="utf-8").strip()
    if not re.fullmatch(r"python-\d+\.\d+", runtime):
        raise ValueError(
            f"binder/runtime.txt says {runtime!r}; expected one line like 'python-3.11'"
        )
    return runtime.removeprefix("python-")


def venv_env(venv: Path) -> dict[str, str]:
    """The caller's environment as if the venv were activated, plus the pip settings."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.pop("PYTHONHOME", None)
    env["VIRTUAL_ENV"] = str(venv)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env.update(PIP_ENV)
    return env


def run(step: str, command: list[str], *, cwd: Path, env: dict[str, str]) -> tuple[int, float]:
    """Run a command with its output streaming through; return (exit status, seconds)."""
    print(f"\n== {step}: {' '.join(command)}   (in {cwd})", flush=True)
    start = time.perf_counter()
    completed = subprocess.run(command, check=False, cwd=cwd, env=env, stdin=subprocess.DEVNULL)
    status = completed.returncode
    seconds = time.perf_counter() - start
    print(f"== {step}: exit status {status} after {seconds:.1f} s", flush=True)
    return status, seconds


def probe(venv: Path, code: str, env: dict[str, str]) -> str:
    """Run `code` in the venv's Python outside the repository; return its stdout."""
    result = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code],
        check=False,
        cwd=venv,  # not the repo root: the import must come from the install, not from cwd
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=300,
    )
    if result.returncode != 0:
        raise RuntimeError(result.stderr.strip() or f"exit status {result.returncode}")
    return result.stdout.strip()


def tree_size(root: Path) -> tuple[int, int]:
    """(sum of file sizes, bytes of disk blocks in use) under root; symlinks are not followed
    and a file with several hard links counts once, as du does."""
    apparent = on_disk = 0
    seen: set[tuple[int, int]] = set()
    for directory, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            info = os.lstat(os.path.join(directory, name))
            if info.st_nlink > 1 and not stat.S_ISDIR(info.st_mode):
                if (info.st_dev, info.st_ino) in seen:
                    continue
                seen.add((info.st_dev, info.st_ino))
            if not stat.S_ISDIR(info.st_mode):
                apparent += info.st_size
            on_disk += info.st_blocks * 512
    return apparent, on_disk + os.lstat(root).st_blocks * 512


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--venv",
        type=Path,
        help="build the venv at this path (must not exist yet; it is kept afterwards)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary venv")
    parser.add_argument("--skip-tests", action="store_true", help="install and measure only")
    parser.add_argument(
        "--python",
        help="interpreter that creates the venv (default: from binder/runtime.txt, python3.11)",
    )
    args = parser.parse_args(argv)

    if not REQUIREMENTS.is_file():
        print(f"missing {REQUIREMENTS}", file=sys.stderr)
        return 1
    python = args.python or f"python{runtime_version()}"
    if shutil.which(python) is None:
        print(f"{python} not found on PATH", file=sys.stderr)
        return 1

    if args.venv is not None:
        venv = args.venv.resolve()
        if venv.exists():
            print(f"{venv} already exists; give a new path", file=sys.stderr)
            return 1
        temp_dir = None
    else:
        temp_dir = Path(tempfile.mkdtemp(prefix="binder-env-"))
        venv = temp_dir / "venv"
    env = venv_env(venv)
    failures: list[str] = []
    figures: list[str] = []

    try:
        status, seconds = run("venv", [python, "-m", "venv", str(venv)], cwd=REPO, env=env)
        if status != 0:
            failures.append(f"`{python} -m venv` failed")
            return report(figures, failures)

        # Exactly repo2docker's command (its pip is the environment's; cwd is the repo root).
        install = [str(venv / "bin" / "pip"), "install", "--no-cache-dir", "-r"]
        status, seconds = run("install", [*install, "binder/requirements.txt"], cwd=REPO, env=env)
        figures.append(f"install: {seconds:.0f} s (exit status {status})")
        if status != 0:
            failures.append("pip install -r binder/requirements.txt failed")
            return report(figures, failures)

        try:
            where = Path(probe(venv, "import attn_lib; print(attn_lib.__file__)", env))
            torch_version = probe(venv, "import torch; print(torch.__version__)", env)
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            failures.append(f"importing attn_lib or torch in the venv failed: {exc}")
            return report(figures, failures)
        figures.append(f"attn_lib imported from {where}")
        figures.append(f"torch {torch_version}")
        if not where.is_relative_to(REPO):
            failures.append(f"attn_lib comes from {where}, not from {REPO} (`-e .` missed)")
        if not torch_version.endswith("+cpu"):
            failures.append(f"torch {torch_version} is not the +cpu build")

        if args.skip_tests:
            figures.append("tests: skipped (--skip-tests)")
        else:
            python_in_venv = str(venv / "bin" / "python")
            status, seconds = run("tests", [python_in_venv, "-m", "pytest"], cwd=REPO, env=env)
            figures.append(f"tests: {seconds:.0f} s (pytest exit status {status})")
            if status != 0:
                failures.append(f"the test suite failed (pytest exit status {status})")

        apparent, on_disk = tree_size(venv)
        target = TARGET_BYTES / MIB
        figures.append(
            f"venv size: {apparent / MIB:.0f} MiB of files, {on_disk / MIB:.0f} MiB on disk "
            f"(du); target <= {target:.0f} MiB (1.5 GiB)"
        )
        if max(apparent, on_disk) > TARGET_BYTES:
            failures.append(f"the venv exceeds {target:.0f} MiB")
        return report(figures, failures)
    finally:
        if temp_dir is not None:
            if args.keep:
                print(f"\n== kept the venv at {venv}")
            else:
                shutil.rmtree(temp_dir, ignore_errors=True)
        elif venv.exists():
            print(f"\n== the venv is at {venv}")


def report(figures: list[str], failures: list[str]) -> int:
    print("\n== summary")
    for line in figures:
        print(f"   {line}")
    for line in failures:
        print(f"   FAILED: {line}")
    print("== OK" if not failures else "== FAILED")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
