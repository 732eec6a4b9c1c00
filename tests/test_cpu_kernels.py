"""tools/cpu_kernels.py: the second set of CPU kernels that CI re-runs nbval under.

Checks: the description names the ATen capability and any kernel variable set; the second
configuration really changes computed float32 values here (else re-running nbval under it
would prove nothing); the environment it hands pytest replaces, not adds to, the kernel
variables; .ci/run runs it after the README's test command.
"""

from __future__ import annotations

import os
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


def test_the_second_configuration_changes_results(monkeypatch):
    kernels = load_tool("cpu_kernels")
    # The kernels are chosen when torch starts, so each candidate needs a fresh process; the
    # native one is this process's when no kernel variable is set here (one torch start less).
    if not set(kernels.KERNEL_VARS) & set(os.environ):
        native, under = kernels.fingerprint(), kernels.fingerprint_under
        monkeypatch.setattr(
            kernels, "fingerprint_under", lambda config: under(config) if config else native
        )
    config, changed = kernels.second_configuration()
    assert config in kernels.CANDIDATES and changed
    assert set(changed) <= set(kernels.fingerprint())


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
