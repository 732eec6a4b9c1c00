"""Notebook 04's data, shape tables and checkers (torch only).

Used by notebook 04 (One formula, every shape), sections "2 · The shape table", "4 · The shape
dashboard" and "5 · Check yourself".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..checks import fmt_shape, shape_trace
from ._checking import (
    CheckResult,
    _call,
    _call_failed,
    _name_of,
    _not_yet,
    _passed,
    _raised,
    _shape_answer,
    _shape_hint,
    _short,
    _source,
    recording,
)
from ._examples import Sentence, embed, embedding_table, tokenize

# The French of _examples.QKV_SENTENCE: eight distinct tokens, so L_k = 8 ≠ L_q = 7.
CROSS_SENTENCE = "un petit chat était assis sur le tapis"


def cross_sentence(d_model: int = 8, *, seed: int = 1) -> Sentence:
    """:data:`CROSS_SENTENCE` embedded: 8 tokens, x (8, d_model) float32, from its own table
    (seed 1, not qkv_sentence's 0), so that no French token shares an English one's vector."""
    tokens = tokenize(CROSS_SENTENCE)
    return Sentence(tokens=tokens, x=embed(tokens, embedding_table(tokens, d_model, seed=seed)))


@dataclass(frozen=True)
class ShapeRow:
    """One line of a shape table: the tensor, how it is computed, its shape in letters and numbers."""

    step: str
    expression: str
    symbols: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class ShapeTable:
    """Every shape of one attention computation, from the sizes alone: ``mode`` "self" or
    "cross" (keys and values from the context), B None for unbatched input, and the rows x,
    (context,) W_Q, W_K, W_V (the article's (d_model, d_out) layout), Q, K, V, Kᵀ, scores, weights,
    output."""

    mode: str
    B: int | None
    L_q: int
    L_k: int
    d_model: int
    d_k: int
    d_v: int
    rows: tuple[ShapeRow, ...]

    def shape(self, step: str) -> tuple[int, ...]:
        """The shape of one step, e.g. ``shape("scores")``; KeyError for a missing step."""
        return {r.step: r.shape for r in self.rows}[step]

    def __str__(self) -> str:
        """The rows as a fixed-width text table: step, computed as, shape, sizes."""
        lines = [("step", "computed as", "shape", "sizes")]
        lines += [(r.step, r.expression, r.symbols, fmt_shape(r.shape)) for r in self.rows]
        widths = [max(len(line[i]) for line in lines) for i in range(4)]
        return "\n".join(
            "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
            for line in lines
        )

    @property
    def title(self) -> str:
        """A one-line summary of the setting."""
        lengths = f"L = {self.L_q}" if self.mode == "self" else f"L_q = {self.L_q}, L_k = {self.L_k}"  # fmt: skip
        batch = "no batch dim" if self.B is None else f"B = {self.B}"
        return (f"{self.mode}-attention: {batch}, {lengths}, d_model = {self.d_model}, "
                f"d_k = {self.d_k}, d_v = {self.d_v}")  # fmt: skip


def shape_table(
    B: int | None, L_q: int, L_k: int | None, d_model: int, d_k: int, d_v: int, mode: str = "self"
) -> ShapeTable:
    """The shape table of attention for these sizes (B None: unbatched; L_k ignored in
    self-attention). Source: Vaswani et al. 2017, eq. (1); article section 2.3."""
    cross = mode == "cross"
    L_k = L_k if cross else L_q
    batch, b = ((), "") if B is None else ((B,), "B, ")
    q, k = ("L_q", "L_k") if cross else ("L", "L")
    source = "context" if cross else "x"
    rows = [ShapeRow("x", "the queries' sentence" if cross else "the sentence",
                     f"({b}{q}, d_model)", (*batch, L_q, d_model))]  # fmt: skip
    if cross:
        rows.append(ShapeRow("context", "the keys' sentence", f"({b}L_k, d_model)",
                             (*batch, L_k, d_model)))  # fmt: skip
    for name, d_out, size in (("W_Q", "d_k", d_k), ("W_K", "d_k", d_k), ("W_V", "d_v", d_v)):
        rows.append(ShapeRow(name, "learned, one for the batch", f"(d_model, {d_out})",
                             (d_model, size)))  # fmt: skip
    computed = {  # step: (computed as, shape in letters)
        "Q": ("x W_Q", f"({b}{q}, d_k)"), "K": (f"{source} W_K", f"({b}{k}, d_k)"),
        "V": (f"{source} W_V", f"({b}{k}, d_v)"), "Kᵀ": ("K.transpose(-2, -1)", f"({b}d_k, {k})"),
        "scores": ("Q Kᵀ / √d_k", f"({b}{q}, {k})"),
        "weights": ("softmax(scores, dim=-1)", f"({b}{q}, {k})"),
        "output": ("weights V", f"({b}{q}, d_v)"),
    }  # fmt: skip
    for step in shape_trace((*batch, L_q, d_k), (*batch, L_k, d_k), (*batch, L_k, d_v)):
        rows.append(ShapeRow(step.step, *computed[step.step], step.shape))
    return ShapeTable(mode, B, L_q, L_k, d_model, d_k, d_v, tuple(rows))


# --- check yourself -----------------------------------------------------------------------

# Exercise 1's setting: cross-attention, x (B, L_q, d_model), context (B, L_k, d_model).
STEP_SHAPES_SETTING = {"B": 3, "L_q": 5, "L_k": 7, "d_model": 32, "d_k": 16, "d_v": 4}


def _check_step_shapes(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check ``fn()`` → {"Kᵀ" (or "K_T"), "scores", "weights", "output": shape} for
    :data:`STEP_SHAPES_SETTING`; ``mistake`` names the wrong shape ("key_not_transposed",
    "scores_transposed", "batch_missing" …). Source: article section 2.3."""
    name = _name_of(fn)
    sizes = B, L_q, L_k, _, d_k, d_v = tuple(STEP_SHAPES_SETTING.values())
    got, err = _call(fn)
    if err is not None:
        return _call_failed(name, err, f"Your function raised {_raised(err)}.", verbose)
    if isinstance(got, dict):
        got = {("Kᵀ" if k == "K_T" else k): v for k, v in got.items()}  # "K_T" accepted
    trace = {t.step: t.shape for t in shape_trace((B, L_q, d_k), (B, L_k, d_k), (B, L_k, d_v))}
    want = {step: trace[step] for step in ("Kᵀ", "scores", "weights", "output")}

    def hint(entry: str, shape: tuple[int, ...], sizes: tuple[int, ...]) -> tuple[str, str]:
        if entry == "Kᵀ" and shape == (B, L_k, d_k):
            return "key_not_transposed", "That is K: transpose(-2, -1) swaps its last two dims."
        if entry == "Kᵀ" and shape == (B, d_k, L_q):
            return "key_transpose_length", "Kᵀ has one column per key: L_k, not L_q."
        if entry == "Kᵀ" and len(shape) != 2:
            return "wrong_shape", "Kᵀ is K (B, L_k, d_k) with its last two dims swapped."
        return _shape_hint(entry, shape, sizes)  # shared with notebook 00

    verdict = _shape_answer(name, got, want, sizes, verbose, hint)
    if verdict is not None:
        return verdict
    return _passed(
        f"Kᵀ {want['Kᵀ']}, scores and weights {want['scores']}, output {want['output']}: "
        "d_model = 32 appears in none of them (the projections remove it), and d_k = 16 "
        "disappears in Q Kᵀ, summed over.",
        verbose,
    )


def _blend_cases() -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(weights (B, L_q, L_k), V (B, L_k, d_v)) with sizes that all differ."""
    g = torch.Generator().manual_seed(4)
    return [
        (torch.randn(B, L_q, L_k, generator=g).softmax(-1), torch.randn(B, L_k, d_v, generator=g))
        for B, L_q, L_k, d_v in ((2, 3, 5, 4), (1, 4, 6, 3))
    ]


def _check_blend(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check ``fn(weights, V)`` → Σ_j weights[..., i, j] V[..., j, :], written out; ``mistake``
    None, "summed_over_d_v", "summed_over_queries", "wrong_values", "used_matmul" … (article 2.2)."""
    name = _name_of(fn)
    for weights, V in _blend_cases():
        B, L_q, L_k = weights.shape
        got, err = _call(fn, weights.clone(), V.clone())
        if err is not None:
            return _call_failed(name, err, f"For weights {tuple(weights.shape)} and V "
                                f"{tuple(V.shape)} your function raised {_raised(err)}.", verbose)  # fmt: skip
        if not isinstance(got, torch.Tensor):
            return _not_yet("bad_return", f"{name} returned {_short(got)}; return a tensor.",
                            verbose)  # fmt: skip
        want, shape = weights @ V, tuple(got.shape)
        if shape != want.shape:
            code, why = "bad_return", f"It should be {tuple(want.shape)}: one row per query."
            if shape == (B, L_q, L_k):
                code, why = "summed_over_d_v", ("The sum ran over d_v; it runs over the keys j: "
                                                "(B, L_q, L_k, 1) * (B, 1, L_k, d_v), summed over "
                                                "dim -2.")  # fmt: skip
            elif shape == (B, L_k, V.shape[-1]):
                code, why = "summed_over_queries", "One row per key: the sum ran over the queries."
            return _not_yet(code, f"Your result has shape {shape}. {why}", verbose)
        if not torch.allclose(got, want, atol=1e-6):
            return _not_yet("wrong_values", "The shape is right, the numbers are not. Output "
                            "row i is Σ_j weights[..., i, j] · V[..., j, :].", verbose)  # fmt: skip
    code = "\n".join(line.split("#")[0] for line in _source(fn).splitlines())  # no comments
    if any(op in code for op in ("@", "matmul", "bmm", "einsum")):
        return _not_yet("used_matmul", "The numbers are right, but write the sum out this "
                        "time, without @, matmul or einsum: broadcasting shows which dim is "
                        "summed away.", verbose)  # fmt: skip
    return _passed(
        f"{name} is weights @ V written out: each output row is a blend of V's rows, the "
        "keys' dim L_k is the one summed away, and the result is (B, L_q, d_v).",
        verbose,
    )


check_step_shapes = recording("my_shapes", _check_step_shapes)
check_blend = recording("my_blend", _check_blend)


def solution_my_shapes() -> dict[str, tuple[int, ...]]:
    """Exercise 1 of notebook 04: the four shapes for B=3, L_q=5, L_k=7, d_k=16, d_v=4."""
    B, L_q, L_k, d_k, d_v = 3, 5, 7, 16, 4
    return {
        "Kᵀ": (B, d_k, L_k),  # K (B, L_k, d_k) with its last two dims swapped
        "scores": (B, L_q, L_k),  # one score per (query, key) pair
        "weights": (B, L_q, L_k),  # softmax keeps the shape
        "output": (B, L_q, d_v),  # one d_v-wide blend of values per query
    }


def solution_my_blend(weights: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
    """Exercise 2 of notebook 04: Σ_j weights[..., i, j] V[..., j, :] by broadcasting."""
    terms = weights.unsqueeze(-1) * V.unsqueeze(-3)  # (B, L_q, L_k, 1) * (B, 1, L_k, d_v)
    return terms.sum(dim=-2)  # sum over the keys j: (B, L_q, d_v)
