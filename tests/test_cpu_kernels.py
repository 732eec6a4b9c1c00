"""tools/cpu_kernels.py: the second set of CPU kernels that CI re-runs nbval under.

Checks: the description names the ATen capability and any kernel variable set; the environment
it hands pytest replaces, not adds to, the kernel variables; .ci/run runs it after the README's
test command. (That the second configuration really changes computed float32 values is checked
by the tool itself before every such run: `nbval` exits with an error when no candidate changes
anything, so CI proves it on its own machine; a test here would start torch in a fresh process,
~2 s of CPU.)
"""

from __future__ import annotations

from pathlib import Path

import torch
from helpers import load_tool

REPO = Path(__file__).resolve().parent.parent


def test_describe_names_the_kernels(monkeypatch):
    kernels = load_tool("cpu_kernels")
    for var in kernels.KERNEL_VARS:
        monkeypatch.delenv(var, raising=False)
    line = kernels.describe()
    assert torch.__version__ in line and torch.backends.cpu.get_cpu_capability() in line
    assert "native kernels" in line
    monkeypatch.setenv("MKL_CBWR", "COMPATIBLE")
    assert "MKL_CBWR=COMPATIBLE" in kernels.describe()


def test_environment_replaces_the_kernel_variables(monkeypatch):
    kernels = load_tool("cpu_kernels")
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    monkeypatch.setenv("MKL_ENABLE_INSTRUCTIONS", "AVX2")
    env = kernels.environment({"MKL_CBWR": "COMPATIBLE"})
    assert env["MKL_CBWR"] == "COMPATIBLE"
    assert "ATEN_CPU_CAPABILITY" not in env and "MKL_ENABLE_INSTRUCTIONS" not in env
    assert not set(kernels.KERNEL_VARS) & set(kernels.environment(None))


def test_ci_runs_nbval_under_the_second_kernels():
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert "tools/cpu_kernels.py nbval" in ci
    assert ci.index("tools/cpu_kernels.py nbval") > ci.index('bash -eo pipefail -c "$command"')
