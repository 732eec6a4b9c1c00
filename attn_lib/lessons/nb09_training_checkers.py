"""Notebook 09's checkers (torch only): reading the table of runs, an init that undoes the scale.

Used by notebook 09 (Does scaling matter in training?), section "12 · Check yourself", through
``nb09_training``, which records each attempt before a solution is shown.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import torch

from ._checking import (
    _SEED,
    CheckResult,
    _call,
    _call_failed,
    _finish,
    _name_of,
    _not_yet,
    _passed,
    _raised,
    _short,
)

_SUMMARY_FLOATS = ("final_loss", "final_entropy", "max_rebound", "grad_early", "grad_late")


def _summary_row(setting: str, d_k: int, n_seeds: int, n_never: int, n_relapsed: int) -> dict:
    """A row shaped like attn_lib.lessons.nb09_training_runs.TrainingRun.summary(), consistent in itself."""
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
    ``attn_lib.lessons.nb09_training_runs.TrainingRun.summary()`` (keys "setting", "d_k", "n_never",
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
