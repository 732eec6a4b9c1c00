"""Checkers for the "check yourself" exercises: run the reader's code, name the mistake in words.

Each checker runs the reader's function on a few seeded cases, compares it with
attn_lib's reference, and prints a short paragraph: what passed, or which classic
mistake the result matches (÷d_k instead of ÷√d_k, softmax over the wrong dim,
an inverted mask, …) and how to fix it. It returns a :class:`CheckResult`, which
is truthy only when everything passed, so a notebook can ``assert`` it.

Shapes in the cases are all different (B ≠ L_q ≠ L_k ≠ d_k ≠ d_v) so that a
transpose on the wrong dims cannot hide behind equal sizes.

Shape legend: B batch, L_q query length, L_k key length, d_k, d_v.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import torch

from .core import scaled_dot_product_attention
from .lessons._checking import (
    _SEED,
    CheckResult,
    _as_shape_tuple,
    _call,
    _call_failed,
    _finish,
    _name_of,
    _not_yet,
    _passed,
    _raised,
    _shape_hint,
    _short,
    _sizes_text,
    _tensors,
)
from .shapes import shape_trace

__all__ = [
    "SHAPE_NAMES",
    "CheckResult",
    "check_attention_inputs",
    "check_init_like_scaled",
    "check_shape_predictions",
    "check_stalling_settings",
    "expected_shapes",
]


# --- attention ----------------------------------------------------------------------------


# --- masks --------------------------------------------------------------------------------


# --- notebook 02: queries, keys and values ------------------------------------------------


# --- notebooks 00 and 01: shapes, retrieval, permutations, path lengths --------------------


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


# --- notebook 03: the scale, the entropy of a row, the softmax Jacobian --------------------


# --- notebook 07: masked weights, a batch's mask from lengths, a masked loss ------------------


# --- notebook 06: checking against PyTorch (article section 3.4) ---------------------------


# --- notebook 08: a stable softmax, attention on 4-D heads, evaluation without dropout ----


# --- notebook 04: the shapes of one setting, multiply-adds per step, the crossover length ---


# --- notebook 09: reading the training table; an init that undoes the scale -----------------

_SUMMARY_FLOATS = ("final_loss", "final_entropy", "max_rebound", "grad_early", "grad_late")


def _summary_row(setting: str, d_k: int, n_seeds: int, n_never: int, n_relapsed: int) -> dict:
    """A row shaped like attn_lib.training.TrainingRun.summary(), consistent in itself."""
    reached = n_seeds - n_never
    lower_median_index = (n_seeds - 1) // 2  # the lower median of the sorted steps
    median_steps = None if reached <= lower_median_index else 20 + 5 * n_relapsed
    row = {
        "setting": setting,
        "d_k": d_k,
        "lr": 0.03,
        "median_steps": median_steps,
        "n_never": n_never,
        "n_relapsed": n_relapsed,
        "n_seeds": n_seeds,
        "stall_fraction": (n_never + n_relapsed) / n_seeds,
    }
    return row | {name: 0.0 for name in _SUMMARY_FLOATS}


def _stall_cases() -> list[tuple[str, list[dict], int]]:
    """(description, summary rows, d_k asked) — each usual slip fails at least one case."""
    s, u, ui = "scaled", "unscaled", "unscaled_init"
    return [
        (
            "16 seeds, two values of d_k, asked about d_k = 64",
            [
                _summary_row(s, 8, 16, 10, 0), _summary_row(u, 8, 16, 0, 0),
                _summary_row(ui, 8, 16, 0, 0), _summary_row(s, 64, 16, 0, 1),
                _summary_row(u, 64, 16, 2, 7), _summary_row(ui, 64, 16, 0, 8),
            ],
            64,
        ),
        (
            "4 seeds, d_k = 32",
            [_summary_row(s, 32, 4, 3, 0), _summary_row(u, 32, 4, 1, 0)],
            32,
        ),
        (
            "16 seeds, asked about d_k = 512",
            [
                _summary_row(s, 128, 16, 0, 0), _summary_row(u, 128, 16, 0, 3),
                _summary_row(s, 512, 16, 0, 0), _summary_row(u, 512, 16, 15, 1),
                _summary_row(ui, 512, 16, 8, 2),
            ],
            512,
        ),
        (
            "16 seeds, asked about d_k = 128, where no setting stalls",
            [
                _summary_row(s, 128, 16, 0, 0), _summary_row(u, 128, 16, 0, 3),
                _summary_row(s, 512, 16, 0, 0), _summary_row(u, 512, 16, 15, 1),
            ],
            128,
        ),
    ]  # fmt: skip


def _stalled(r: dict) -> int:
    return int(r["n_never"]) + int(r["n_relapsed"])


def _as_setting_set(got: object) -> set[str] | None:
    """The names as a set: from a list, tuple, set, dict keys, numpy array, … of strings."""
    if isinstance(got, str | bytes | dict) or not isinstance(got, Iterable):
        return None
    try:
        items = list(got.tolist() if type(got).__module__ == "numpy" else got)
    except TypeError:  # e.g. a 0-d tensor or array, which cannot be iterated
        return None
    if not all(isinstance(x, str) for x in items):
        return None
    return {str(x) for x in items}


def check_stalling_settings(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check a function that reads notebook 09's summary table: which settings stall at a d_k.

    ``fn(summary, d_k)`` receives a list of dicts shaped like
    ``attn_lib.training.TrainingRun.summary()`` (keys "setting", "d_k", "n_never",
    "n_relapsed", "n_seeds", "stall_fraction", "median_steps", …) and a d_k, and must
    return the settings (a list, tuple or set of names; order free) whose runs at that
    d_k stall in at least half the seeds, a run being stalled when it never reached the
    threshold *or* reached it and relapsed (stalled = n_never + n_relapsed). The cases are
    hand-made tables (one with 4 seeds, one where a setting stalls in exactly half).

    Args:
        fn: the function to check.
        verbose: print the feedback paragraph.

    Returns:
        CheckResult; ``mistake`` is None or one of: "not_written", "error", "bad_return",
        "never_only", "median_none", "strict", "all_d_k", "any_stall", "sixteen_seeds",
        "inverted", "unknown".

    Source: notebook 09 of this series (article section 4.3, claim C11).
    """
    name = _name_of(fn)
    cases = _stall_cases()
    got: list[set[str]] = []
    for description, rows, d_k in cases:
        answer, err = _call(fn, [dict(r) for r in rows], d_k)
        if err is not None:
            return _call_failed(
                name,
                err,
                f"On the table with {description}, your function raised {_raised(err)}",
                verbose,
            )
        settings = _as_setting_set(answer)
        if settings is None:
            return _not_yet("bad_return", f"{name} returned "
                           f"{_short(answer)}; return a list of setting "
                           f"names, e.g. ['unscaled'], or [] when none stalls.",
                           verbose)  # fmt: skip
        got.append(settings)

    def answers(rule: Callable[[dict, int], bool], *, every_d_k: bool = False) -> list[set[str]]:
        return [
            {r["setting"] for r in rows if (every_d_k or r["d_k"] == d_k) and rule(r, d_k)}
            for _, rows, d_k in cases
        ]

    def right(r: dict, _: int) -> bool:
        return 2 * _stalled(r) >= r["n_seeds"]

    if got == answers(right):
        return _passed(f"{name} picks the settings whose runs end above "
                       f"the threshold — never reached it, or reached it and relapsed — in at "
                       f"least half the seeds, for {len(cases)} tables (4 or 16 seeds).",
                       verbose)  # fmt: skip
    slips = [
        ("never_only", lambda r, _: 2 * r["n_never"] >= r["n_seeds"],
         ("You count only the runs that never reached the threshold. A run that reached it "
          "and then climbed back above it (n_relapsed) has not learned either: it ends above "
          "the threshold. Stalled = n_never + n_relapsed (or use stall_fraction).")),
        ("median_none", lambda r, _: r["median_steps"] is None,
         ("You pick the settings whose median time to the threshold is 'never'. That counts "
          "only runs that never got there; the relapsed ones (n_relapsed) reached it and "
          "still stalled. Use n_never + n_relapsed, or stall_fraction.")),
        ("strict", lambda r, _: 2 * _stalled(r) > r["n_seeds"],
         ("Almost: 'at least half' includes exactly half. A setting with 8 of 16 runs "
          "stalled counts; use ≥, not >.")),
        ("any_stall", lambda r, _: _stalled(r) >= 1,
         ("You pick every setting with at least one stalled run; the question asks for at "
          "least half of the seeds.")),
        ("sixteen_seeds", lambda r, _: _stalled(r) >= 8,
         ("You compare the stalled count with 8, as if there were always 16 seeds. Use the "
          "row's n_seeds (one table has 4 seeds), or stall_fraction ≥ 0.5.")),
        ("inverted", lambda r, _: 2 * _stalled(r) < r["n_seeds"],
         ("You return the settings that did learn (fewer than half the runs stalled): the "
          "comparison is the wrong way round.")),
    ]  # fmt: skip
    for code, rule, why in slips:
        if got == answers(rule):
            return _not_yet(code, why, verbose)
    if got == answers(right, every_d_k=True):
        return _not_yet("all_d_k", "You look at every row of the table, "
                       "whatever its d_k; keep only the rows with r['d_k'] == d_k.",
                       verbose)  # fmt: skip
    (description, rows, d_k), want, have = next(
        (c, w, g) for c, w, g in zip(cases, answers(right), got, strict=True) if w != g
    )
    return _not_yet("unknown", f"On the table with {description} you return "
                   f"{sorted(have)}; the settings with at least half their runs stalled "
                   f"(n_never + n_relapsed ≥ n_seeds / 2) at d_k = {d_k} are {sorted(want)}.",
                   verbose)  # fmt: skip


# (d_k, d_model) of W_Q as nn.Linear(d_model, d_k) stores it: never square, never equal.
_INIT_SHAPES = ((32, 8), (8, 50), (128, 16), (9, 4))


def _init_cases() -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(_SEED)
    return [torch.randn(d_k, d_model, generator=g) / math.sqrt(d_model)
            for d_k, d_model in _INIT_SHAPES]  # fmt: skip


def _score_gap(w_q: torch.Tensor, w_new: torch.Tensor) -> float:
    """Largest |unscaled scores with w_new − scaled scores with w_q| on a seeded example."""
    d_k, d_model = w_q.shape
    g = torch.Generator().manual_seed(_SEED + 1)
    x = torch.randn(5, d_model, generator=g)  # (L, d_model)
    w_k = torch.randn(d_k, d_model, generator=g) / math.sqrt(d_model)
    k = x @ w_k.T  # (L, d_k)
    scaled = (x @ w_q.T) @ k.T / math.sqrt(d_k)  # (L, L)
    unscaled = (x @ w_new.T) @ k.T  # (L, L)
    return float((unscaled - scaled).abs().max())


def check_init_like_scaled(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check an initialisation that makes unscaled attention start exactly like scaled attention.

    ``fn(w_q)`` receives W_Q's initial weight as ``nn.Linear(d_model, d_k)`` stores it, a
    (d_k, d_model) tensor, and must return a new (d_k, d_model) tensor W' such that scores
    computed *without* the 1/√d_k factor from W' equal the scores computed *with* it from
    W_Q: (x W'ᵀ)·k = (x W_Qᵀ)·k / √d_k for every x and k, i.e. W' = W_Q / √d_k. The
    argument must not be changed in place. Shapes tried: (d_k, d_model) = (32, 8),
    (8, 50), (128, 16), (9, 4).

    Args:
        fn: the function to check.
        verbose: print the feedback paragraph.

    Returns:
        CheckResult; ``mistake`` is None or one of: "not_written", "error", "bad_return",
        "transposed", "d_model", "d_k_not_sqrt", "inverted", "unchanged", "in_place",
        "unknown".

    Source: article section 2.2; notebooks 03 and 09 of this series (the scale as a
        reparametrisation of W_Q).
    """
    name = _name_of(fn)
    cases = _init_cases()
    got = []
    for w in cases:
        original = w.clone()
        out, err = _call(fn, w)
        if err is not None:
            return _call_failed(
                name,
                err,
                f"For W_Q of shape {tuple(w.shape)} your function raised {_raised(err)}",
                verbose,
            )
        if not isinstance(out, torch.Tensor):
            return _not_yet("bad_return", f"{name} returned "
                           f"{type(out).__name__}; return the new weight, a tensor of the "
                           f"same shape as w_q.", verbose)  # fmt: skip
        d_k, d_model = w.shape
        if out.shape != w.shape:
            if out.shape == (d_model, d_k):
                return _not_yet("transposed", f"For W_Q of shape {(d_k, d_model)} "
                               f"you return shape {tuple(out.shape)}: transposed. nn.Linear "
                               f"stores its weight as (out_features, in_features) = (d_k, "
                               f"d_model); keep that layout.", verbose)  # fmt: skip
            return _not_yet("bad_return", f"For W_Q of shape {(d_k, d_model)} you "
                           f"return shape {tuple(out.shape)}; return a tensor of the same "
                           f"shape.", verbose)  # fmt: skip
        got.append((w, original, out.detach().to(w.dtype)))  # float64 is fine too

    def all_match(factor: Callable[[int, int], float]) -> bool:
        return all(
            torch.allclose(out, orig * factor(*orig.shape), rtol=1e-5, atol=1e-7)
            for _, orig, out in got
        )

    changed = any(not torch.equal(w, orig) for w, orig, _ in got)
    gap = max(_score_gap(orig, out) for _, orig, out in got)
    if all_match(lambda d_k, _: 1 / math.sqrt(d_k)):
        if changed:
            return _finish(False, "in_place", "Almost. The values are right, but your "
                           "function also changed the tensor it was given (an in-place "
                           "operation such as `w_q /= ...` or `w_q.div_(...)`). Return a new "
                           "tensor: `w_q / math.sqrt(d_k)`.", verbose)  # fmt: skip
        # The gap itself is round-off, whose last digits depend on the CPU: not printed.
        agree = "below 1e-5, float32 round-off" if gap < 1e-5 else f"{gap:.3g}"
        return _passed(f"W' = W_Q / √d_k, with d_k = w_q.shape[0] (the "
                       f"rows of an nn.Linear weight): without the scale, W' gives the scores "
                       f"that W_Q gives with it — largest difference over {len(got)} shapes "
                       f"{agree}.", verbose)  # fmt: skip
    slips = [
        ("d_model", lambda d_k, d_model: 1 / math.sqrt(d_model),
         ("You divide by √d_model: w_q.shape[-1] is d_model, because nn.Linear(d_model, "
          "d_k) stores its weight as (d_k, d_model). The scale is 1/√d_k: use "
          "w_q.shape[0].")),
        ("d_k_not_sqrt", lambda d_k, _: 1 / d_k,
         ("You divide by d_k. The scores are divided by √d_k, and they are linear in W_Q, "
          "so W_Q must be divided by √d_k too, not by d_k.")),
        ("inverted", lambda d_k, _: math.sqrt(d_k),
         ("You multiply by √d_k; divide instead: the unscaled scores must come out √d_k "
          "times *smaller*, like the scaled ones.")),
        ("unchanged", lambda d_k, _: 1.0,
         ("You return W_Q unchanged, so the unscaled scores are √d_k times larger than the "
          "scaled ones. Divide by √d_k.")),
    ]  # fmt: skip
    for code, factor, why in slips:
        if all_match(factor):
            return _not_yet(code, f"{why} (Your W' gives unscaled scores that "
                           f"differ from the scaled ones by up to {gap:.3g}.)",
                           verbose)  # fmt: skip
    return _not_yet("unknown", f"Your W' gives unscaled scores that differ from "
                   f"the scaled scores of W_Q by up to {gap:.3g}. The scores (x Wᵀ)·k are "
                   f"linear in W, so a single factor does it: which one makes them √d_k times "
                   f"smaller?", verbose)  # fmt: skip


# --- notebook 10: one online-softmax step; the bytes of a score matrix ---------------------
