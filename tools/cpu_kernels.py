#!/usr/bin/env python3
"""Which CPU kernels compute the notebooks, and a second set of them to check the outputs with.

Stored outputs must not depend on the CPU: on another machine, PyTorch picks other vectorised
kernels (AVX-512, AVX2, NEON …) and MKL other code paths, and float32 results change in their
last bits. This machine can compute like another one: ``ATEN_CPU_CAPABILITY`` selects ATen's
kernels (``default`` = no vector instructions) and ``MKL_CBWR`` MKL's. Re-running nbval under
such a configuration shows whether any stored output depends on the last bits.

Usage (from the repository root, with the venv's Python):

    python tools/cpu_kernels.py describe        # the kernels this process would use
    python tools/cpu_kernels.py check           # the second configuration changes results?
    python tools/cpu_kernels.py nbval [ARGS]    # check, then nbval on notebooks/en/ under it

``nbval`` passes ARGS on to pytest, with ``notebooks/en`` unless ARGS name a path; its exit status
is pytest's.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# The variables that choose kernels; "native" means none of them set.
KERNEL_VARS = ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "MKL_ENABLE_INSTRUCTIONS")
# Second configurations, tried in order; the first that changes a computed value is used.
# (On an x86 CPU with AVX2 the first one changes float32 randn, exp, softmax and matmul.)
CANDIDATES = (
    {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"},
    {"ATEN_CPU_CAPABILITY": "default"},
    {"MKL_CBWR": "COMPATIBLE"},
    {"ATEN_CPU_CAPABILITY": "avx2"},
)


def describe() -> str:
    """One line: torch, the ATen CPU capability in use, the BLAS, and any kernel variable set."""
    import torch

    blas = "MKL" if torch.backends.mkl.is_available() else "no MKL"
    chosen = ", ".join(f"{v}={os.environ[v]}" for v in KERNEL_VARS if v in os.environ)
    return (
        f"torch {torch.__version__}, ATen CPU capability {torch.backends.cpu.get_cpu_capability()}"
        f", {blas}; {chosen or 'native kernels (no ATEN_CPU_CAPABILITY / MKL_* set)'}"
    )


def fingerprint() -> dict[str, str]:
    """Hashes of a few float32 results that vectorised kernels round differently."""
    import torch

    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 64, generator=g)  # float32 randn itself is vectorised
    results = {
        "randn": x,
        "exp": torch.exp(x),
        "softmax": torch.softmax(x, dim=-1),
        "matmul": x @ x.T,
        "sum": x.sum(dim=-1),
    }
    return {k: hashlib.sha256(v.numpy().tobytes()).hexdigest()[:16] for k, v in results.items()}


def environment(config: dict[str, str] | None) -> dict[str, str]:
    """This process's environment with the kernel variables replaced by ``config``."""
    env = {k: v for k, v in os.environ.items() if k not in KERNEL_VARS}
    env.update(config or {})
    return env


def fingerprint_under(config: dict[str, str] | None) -> dict[str, str]:
    code = "import json, cpu_kernels; print(json.dumps(cpu_kernels.fingerprint()))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=environment(config) | {"PYTHONPATH": str(REPO / "tools")},
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


def second_configuration() -> tuple[dict[str, str], list[str]]:
    """The first candidate configuration that changes a result, and the results it changes.

    Raises:
        SystemExit: no candidate changes anything (the check would prove nothing).
    """
    native = fingerprint_under(None)
    for config in CANDIDATES:
        other = fingerprint_under(config)
        changed = [k for k in native if native[k] != other[k]]
        if changed:
            return config, changed
    raise SystemExit(
        "none of the second kernel configurations changes a computed value on this machine "
        f"(tried {CANDIDATES}); a re-run of nbval under them would prove nothing."
    )


def main(argv: list[str]) -> int:
    command, rest = (argv[0], argv[1:]) if argv else ("describe", [])
    if command == "describe":
        print(describe())
        return 0
    if command not in ("check", "nbval"):
        print(__doc__, file=sys.stderr)
        return 2
    config, changed = second_configuration()
    words = " ".join(f"{k}={v}" for k, v in config.items())
    print(f"== second CPU kernels: {words} (changes float32 {', '.join(changed)})")
    if command == "check":
        return 0
    # Paths given: test those; only options (e.g. -q, -x): the notebooks, with those options.
    args = rest if any((REPO / a).exists() for a in rest) else ["notebooks/en", *rest]
    cmd = [sys.executable, "-m", "pytest", *args, "-p", "no:cacheprovider"]
    print(f"== {words} {' '.join(cmd[1:])}", flush=True)
    return subprocess.run(cmd, cwd=REPO, env=environment(config), check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
