"""Notebook 00's data, experiments and checkers (torch only).

Used by notebook 00 (Start here), sections "3 · Your environment", "5 · Check yourself".
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from ..core import scaled_dot_product_attention
from ..shapes import shape_trace
from ._checking import (
    CheckResult,
    _as_shape_tuple,
    _call,
    _call_failed,
    _name_of,
    _not_yet,
    _passed,
    _raised,
    _shape_hint,
    _short,
    _sizes_text,
    _tensors,
)


def pinned_versions(requirements: Path) -> dict[str, str] | None:
    """The exact pins of a requirements file that apply on this machine: {name: version}.

    Lines with an environment marker (requirements.txt pins torch's CPU build on Linux x86-64
    only) count where the marker holds, as pip reads them; options and other lines are
    skipped. None when the file is missing (a copy of the notebook outside the repository).
    """
    if not requirements.is_file():
        return None
    pins = {}
    for raw in requirements.read_text(encoding="utf-8").splitlines():
        line = raw.split("#")[0].strip()
        try:
            requirement = Requirement(line)
        except InvalidRequirement:  # options (-e ., --find-links …) and blank lines
            continue
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        exact = [s.version for s in requirement.specifier if s.operator == "=="]
        if exact:
            pins[canonicalize_name(requirement.name)] = exact[0]
    return pins


SHAPE_NAMES = ("Q", "K", "V", "scores", "weights", "output")
# (B, L_q, L_k, d_model, d_k, d_v): cross-attention first; every case has d_v ≠ d_k.
_SHAPE_CASES = ((2, 3, 5, 16, 4, 6), (4, 7, 2, 8, 3, 5), (3, 4, 4, 10, 2, 7))


def expected_shapes(
    B: int, L_q: int, L_k: int, d_model: int, d_k: int, d_v: int
) -> dict[str, tuple[int, ...]]:
    """The shapes of Q, K, V, scores, weights and output, from attn_lib.shape_trace.

    Q is computed from a (B, L_q, d_model) input, K and V from a (B, L_k, d_model) one
    (for self-attention both are the same x and L_q = L_k). d_model only sets the inputs'
    width: it appears in none of the six shapes.

    Returns:
        {"Q": (B, L_q, d_k), "K": (B, L_k, d_k), "V": (B, L_k, d_v),
        "scores": (B, L_q, L_k), "weights": (B, L_q, L_k), "output": (B, L_q, d_v)}.

    Raises:
        ShapeError: a size < 1 (from shape_trace).

    Source: article section 2.3; Vaswani et al. 2017, eq. (1).
    """
    del d_model  # the projections remove it
    steps = {s.step: s.shape for s in shape_trace((B, L_q, d_k), (B, L_k, d_k), (B, L_k, d_v))}
    return {name: steps[name] for name in SHAPE_NAMES}


def check_shape_predictions(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check a function that predicts the six shapes of attention, and name the mistake if any.

    ``fn(B, L_q, L_k, d_model, d_k, d_v)`` must return a dict with the keys
    "Q", "K", "V", "scores", "weights", "output", each a shape (a tuple of ints, a list or a
    torch.Size), where Q comes from a (B, L_q, d_model) input and K, V from a
    (B, L_k, d_model) one. Cases: (2, 3, 5, 16, 4, 6) and (4, 7, 2, 8, 3, 5)
    (cross-attention) and (3, 4, 4, 10, 2, 7) (self-attention), all with d_v ≠ d_k.

    Args:
        fn: the function to check.
        verbose: print the feedback paragraph.

    Returns:
        CheckResult; ``mistake`` is None or one of: "not_written", "error", "bad_return",
        "missing", "width_d_model", "query_length", "key_length", "key_transposed",
        "value_width", "value_length", "scores_transposed", "scores_width",
        "scores_square", "weights_shape", "output_width", "output_length",
        "output_is_weights", "batch_missing", "wrong_shape".

    Source: article section 2.3; attn_lib.shape_trace.
    """
    name = _name_of(fn)
    for sizes in _SHAPE_CASES:
        got, err = _call(fn, *sizes)
        if err is not None:
            return _call_failed(
                name,
                err,
                f"For {_sizes_text(sizes)} your function raised {_raised(err)}. Fix "
                f"that line and run the check again.",
                verbose,
            )
        if not isinstance(got, dict):
            return _not_yet(
                "bad_return",
                f"{name} returned {type(got).__name__}; return a dict such as "
                f"{{'Q': (B, L_q, d_k), ...}} with the keys {', '.join(SHAPE_NAMES)}.",
                verbose,
            )
        missing = [n for n in SHAPE_NAMES if n not in got]
        if missing:
            return _not_yet(
                "missing",
                f"The dict has no entry for {', '.join(missing)}; give all six: "
                f"{', '.join(SHAPE_NAMES)}.",
                verbose,
            )
        want = expected_shapes(*sizes)
        for entry in SHAPE_NAMES:
            shape = _as_shape_tuple(got[entry])
            if shape is None:
                return _not_yet(
                    "bad_return",
                    f"{entry} is {_short(got[entry])}; give each shape as a tuple of ints, "
                    f"e.g. (B, L_q, d_k).",
                    verbose,
                )
            if shape != want[entry]:
                code, why = _shape_hint(entry, shape, sizes)
                return _not_yet(
                    code,
                    f"For {_sizes_text(sizes)} you predicted {entry} = {shape}, but it "
                    f"is {want[entry]}. {why}".rstrip(),
                    verbose,
                )
    return _passed(
        f"{name} predicts all six shapes for {len(_SHAPE_CASES)} size settings, "
        f"cross-attention (L_q ≠ L_k) and self-attention, with d_v ≠ d_k.",
        verbose,
    )


# (B, L_q, L_k, d_k, d_v)
_INPUT_CASES = ((2, 3, 5, 4, 6), (3, 1, 4, 2, 5), (1, 6, 2, 3, 7))


def check_attention_inputs(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check a function that builds query, key and value tensors of given sizes.

    ``fn(B, L_q, L_k, d_k, d_v)`` must return a tuple (query, key, value) of floating-point
    tensors of shapes (B, L_q, d_k), (B, L_k, d_k) and (B, L_k, d_v) (any values, e.g.
    from torch.randn), which attn_lib.scaled_dot_product_attention then accepts, giving an
    output (B, L_q, d_v). Cases: (2, 3, 5, 4, 6), (3, 1, 4, 2, 5), (1, 6, 2, 3, 7).

    Args:
        fn: the function to check.
        verbose: print the feedback paragraph.

    Returns:
        CheckResult; ``mistake`` is None or one of: "not_written", "error", "bad_return",
        "not_float", "batch_not_first", "query_length", "key_length", "key_transposed",
        "value_width", "value_length", "wrong_shape".

    Source: article section 2.3; attn_lib.scaled_dot_product_attention.
    """
    name = _name_of(fn)
    for B, L_q, L_k, d_k, d_v in _INPUT_CASES:
        sizes = f"B={B}, L_q={L_q}, L_k={L_k}, d_k={d_k}, d_v={d_v}"
        got, err = _call(fn, B, L_q, L_k, d_k, d_v)
        if err is not None:
            return _call_failed(
                name, err, f"For {sizes} your function raised {_raised(err)}.", verbose
            )
        if not _tensors(got, 3):
            return _not_yet(
                "bad_return",
                f"{name} should return three tensors, (query, key, value); it returned "
                f"{type(got).__name__}"
                + (f" of length {len(got)}." if isinstance(got, tuple | list) else "."),
                verbose,
            )
        tensors = dict(zip(("query", "key", "value"), got, strict=True))
        want = {"query": (B, L_q, d_k), "key": (B, L_k, d_k), "value": (B, L_k, d_v)}
        for role, t in tensors.items():
            if not t.is_floating_point():
                return _not_yet(
                    "not_float",
                    f"{role} has dtype {t.dtype}; attention needs floating-point "
                    f"tensors (softmax and the division by √d_k produce fractions). Use "
                    f"torch.randn, or convert with .float().",
                    verbose,
                )
        for role, t in tensors.items():
            shape = tuple(t.shape)
            if shape == want[role]:
                continue
            hints = {
                ("query", (B, L_k, d_k)): ("query_length", "query has one row per query: L_q."),
                ("key", (B, L_q, d_k)): (
                    "key_length",
                    "key has one row per key: L_k (the keys come from the sequence searched).",
                ),
                ("key", (B, d_k, L_k)): (
                    "key_transposed",
                    "That is Kᵀ; pass key as (B, L_k, d_k): attention transposes it itself.",
                ),
                ("value", (B, L_k, d_k)): (
                    "value_width",
                    "value is d_v wide, and d_v need not equal d_k.",
                ),
                ("value", (B, L_q, d_v)): (
                    "value_length",
                    "value has one row per key (L_k), like key.",
                ),
            }
            batch_second = (want[role][1], want[role][0], want[role][2])
            if shape == batch_second:
                code, why = (
                    "batch_not_first",
                    "The batch dim comes first: (B, length, width), PyTorch's batch_first layout.",
                )
            else:
                code, why = hints.get((role, shape), ("wrong_shape", ""))
            return _not_yet(
                code,
                f"For {sizes}, {role} has shape {shape}; it should be {want[role]}. {why}".rstrip(),
                verbose,
            )
        try:
            scaled_dot_product_attention(*got)  # runs: the shapes fit together
        except Exception as err:  # noqa: BLE001 - e.g. mixed dtypes: reported in words
            return _not_yet(
                "error",
                f"For {sizes} the shapes are right, but attn_lib's attention refuses the "
                f"three tensors: {_raised(err, first_line=True)} Give all three the same "
                f"floating-point dtype (torch.randn gives float32), with finite values.",
                verbose,
            )
    return _passed(
        f"{name} builds query (B, L_q, d_k), key (B, L_k, d_k) and value "
        f"(B, L_k, d_v) for {len(_INPUT_CASES)} size settings, and attn_lib's attention "
        f"returns an output (B, L_q, d_v) on each.",
        verbose,
    )
