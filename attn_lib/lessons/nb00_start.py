"""Notebook 00's data and checker (torch only).

Used by notebook 00 (Start here), sections "3 · Your environment" (the version report, the
widget check's scores) and "5 · Check yourself" (the shapes exercise).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from ..checks import shape_trace
from ._checking import (
    CheckResult,
    _call,
    _call_failed,
    _name_of,
    _passed,
    _raised,
    _shape_answer,
    _sizes_text,
    recording,
)

PACKAGES = ("torch", "numpy", "matplotlib", "ipywidgets")
CHECK_SCORES = (2.0, 1.0, 0.5, -1.0)  # the widget check: one query's scores against 4 keys


def pinned_versions(requirements: Path) -> dict[str, str] | None:
    """The exact pins of a requirements file that apply on this machine: {name: version}.

    Lines with an environment marker count where the marker holds, as pip reads them
    (requirements.txt pins torch's CPU build on Linux x86-64 only); options and other lines
    are skipped. None when the file is missing (a copy of the notebook outside the repository).
    """
    if not requirements.is_file():
        return None
    pins = {}
    for raw in requirements.read_text(encoding="utf-8").splitlines():
        try:
            requirement = Requirement(raw.split("#")[0].strip())
        except InvalidRequirement:  # options (-e ., --find-links …) and blank lines
            continue
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        exact = [s.version for s in requirement.specifier if s.operator == "=="]
        if exact:
            pins[canonicalize_name(requirement.name)] = exact[0]
    return pins


def _installed(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def environment_report(requirements: Path) -> list[str]:
    """Two lines: the major.minor versions this kernel runs, and how they compare with the pins.

    Only major.minor is printed (so the stored output reads the same on every patch release);
    the comparison with the pins uses the full versions, without local tags such as "+cpu".
    """
    installed = {name: _installed(name) for name in PACKAGES}
    running = [f"Python {sys.version_info.major}.{sys.version_info.minor}"] + [
        f"{n} {'.'.join(v.split('.')[:2]) if v else 'missing'}" for n, v in installed.items()
    ]
    pins = pinned_versions(requirements)
    if pins is None:
        return [" · ".join(running), "requirements.txt not found: the pins cannot be checked."]
    differ = [
        f"{n} {v} (pinned {pins[n]})"
        for n, v in installed.items()
        if n in pins and (v or "").split("+")[0] != pins[n].split("+")[0]
    ]
    if differ:
        verdict = f"Not the pinned versions: {'; '.join(differ)}. Expect small differences."
    else:
        verdict = f"{', '.join(PACKAGES)}: exactly the versions pinned in requirements.txt."
    return [" · ".join(running), verdict]


# ---------------------------------------------------------------------- check yourself

SHAPE_NAMES = ("Q", "K", "V", "scores", "weights", "output")
# (B, L_q, L_k, d_model, d_k, d_v): cross-attention first; every case has d_v ≠ d_k.
_SHAPE_CASES = ((2, 3, 5, 16, 4, 6), (4, 7, 2, 8, 3, 5), (3, 4, 4, 10, 2, 7))


def expected_shapes(
    B: int, L_q: int, L_k: int, d_model: int, d_k: int, d_v: int
) -> dict[str, tuple[int, ...]]:
    """The shapes of Q, K, V, scores, weights and output, from attn_lib.shape_trace.

    Q comes from a (B, L_q, d_model) input, K and V from a (B, L_k, d_model) one; d_model
    appears in none of the six shapes (the projections remove it).
    """
    del d_model
    steps = {s.step: s.shape for s in shape_trace((B, L_q, d_k), (B, L_k, d_k), (B, L_k, d_v))}
    return {name: steps[name] for name in SHAPE_NAMES}


def _check_shape_predictions(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check ``fn(B, L_q, L_k, d_model, d_k, d_v)`` → {"Q": shape, …, "output": shape};
    ``mistake`` names the wrong shape as ``_checking._shape_hint`` does ("width_d_model",
    "key_transposed", "batch_missing" …). Source: article section 2.3."""
    name = _name_of(fn)
    for sizes in _SHAPE_CASES:
        got, err = _call(fn, *sizes)
        if err is not None:
            why = f"For {_sizes_text(sizes)} your function raised {_raised(err)}."
            return _call_failed(name, err, why, verbose)
        verdict = _shape_answer(name, got, expected_shapes(*sizes), sizes, verbose)
        if verdict is not None:
            return verdict
    return _passed(
        f"{name} predicts all six shapes for {len(_SHAPE_CASES)} size settings, "
        f"cross-attention (L_q ≠ L_k) and self-attention, with d_v ≠ d_k.",
        verbose,
    )


check_shape_predictions = recording("predict_shapes", _check_shape_predictions)


def solution_predict_shapes(B, L_q, L_k, d_model, d_k, d_v):
    return {
        "Q": (B, L_q, d_k),  # W_Q maps d_model → d_k
        "K": (B, L_k, d_k),  # one row per key
        "V": (B, L_k, d_v),  # values travel with their keys, d_v wide
        "scores": (B, L_q, L_k),  # one score per (query, key) pair
        "weights": (B, L_q, L_k),  # softmax keeps the shape
        "output": (B, L_q, d_v),  # one blend of values per query
    }
