"""Notebook 04's data, experiments and checkers (torch only).

Used by notebook 04 (One formula, every shape), sections "2 · The shape table", "4 · A
dashboard: every shape, drawn to scale", "5 · What attention costs", "6 · Check yourself".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch

from ..core import scaled_dot_product_attention
from ..shapes import ShapeError, fmt_shape, shape_trace
from ._checking import (
    CheckResult,
    _as_shape_tuple,
    _call,
    _call_failed,
    _known_mistake,
    _name_of,
    _not_yet,
    _number,
    _passed,
    _raised,
    _shape_hint,
    _short,
    _sizes_text,
)
from ._examples import Sentence, embed, embedding_table, qkv_sentence, tokenize
from ._experiments import (
    _choice,
    _dim,
    _dims,
    _int,
    attention_cost,
    crossover_length,
    seeded_attention,
)

# French for QKV_SENTENCE: eight distinct tokens, so L_k = 8 ≠ L_q = 7. When a model
# translates French into English, the English words being written ask (queries) and
# the French source words answer (keys and values).
CROSS_SENTENCE = "un petit chat était assis sur le tapis"


def cross_sentence(d_model: int = 8, *, seed: int = 1) -> Sentence:
    """Notebook 04's source sentence, :data:`CROSS_SENTENCE`, embedded: x of shape (8, d_model).

    Its embedding table is its own (seed 1 by default, not 0 as for
    :func:`qkv_sentence`), so that no French token shares its vector with an English one
    by the accident of sorting first in both vocabularies.

    Args:
        d_model: embedding width (≥ 1).
        seed: the embedding table's seed (≥ 0).

    Returns:
        :class:`Sentence` with 8 tokens and x (8, d_model) float32.

    Raises:
        ShapeError: d_model < 1. ValueError: seed < 0.

    Source: a made-up example for article sections 1.1 (encoder-decoder attention) and 2.3.
    """
    tokens = tokenize(CROSS_SENTENCE)
    return Sentence(tokens=tokens, x=embed(tokens, embedding_table(tokens, d_model, seed=seed)))


@dataclass(frozen=True)
class CostCurves:
    """:func:`attention_cost` over many lengths, as (n,) float64 tensors for plotting.

    Attributes:
        L: (n,) int64. projection_macs, attention_macs: (n,). score_matrix_bytes: (n,).
        crossover: :func:`crossover_length` for these widths.
    """

    L: torch.Tensor
    projection_macs: torch.Tensor
    attention_macs: torch.Tensor
    score_matrix_bytes: torch.Tensor
    crossover: float


def cost_curves(
    lengths: Sequence[int],
    d_model: int,
    d_k: int | None = None,
    d_v: int | None = None,
    *,
    batch: int = 1,
    dtype: torch.dtype = torch.float32,
) -> CostCurves:
    """Projection and attention multiply-adds, and score-matrix bytes, for each length.

    Raises:
        ShapeError: lengths empty, or a size < 1.

    Source: as :func:`attention_cost`.
    """
    costs = [
        attention_cost(L, d_model, d_k, d_v, batch=batch, dtype=dtype)
        for L in _dims("lengths", lengths)
    ]

    def column(name: str) -> torch.Tensor:
        return torch.tensor([float(getattr(c, name)) for c in costs], dtype=torch.float64)

    return CostCurves(
        L=torch.tensor([c.L for c in costs]),
        projection_macs=column("projection_macs"),
        attention_macs=column("attention_macs"),
        score_matrix_bytes=column("score_matrix_bytes"),
        crossover=crossover_length(d_model, d_k, d_v),
    )


SHAPE_MODES = ("self", "cross")


@dataclass(frozen=True)
class ShapeRow:
    """One line of a shape table.

    Attributes:
        step: the tensor's name ("x", "W_Q", "Q", "Kᵀ", "scores", …).
        expression: how it is computed ("x W_Q", "Q Kᵀ / √d_k", …).
        symbols: its shape in letters, e.g. "(B, L_q, d_k)".
        shape: its shape in numbers.
    """

    step: str
    expression: str
    symbols: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class ShapeWalkthrough:
    """The shapes of one attention computation, traced and run on a short sentence.

    Attributes:
        mode: "self" (keys and values from x itself) or "cross" (from a second sentence).
        B: batch size, or None for unbatched (L, d_model) input.
        L_q, L_k, d_model, d_k, d_v: the sizes (L_k = L_q in self-attention).
        rows: the shape table, predicted from the sizes alone: x, (context,) W_Q, W_K,
            W_V, Q, K, V, Kᵀ, scores, weights, output. W_Q, W_K, W_V are written in
            the article's math layout (d_model, d_k); nn.Linear stores the transpose.
        real_shapes: {step: shape} measured on tensors from an actual run.
        query_tokens: L_q tokens (English). key_tokens: L_k tokens (English in
            self-attention, French in cross-attention).
        weights: (L_q, L_k) float32, the attention weights of batch element 0.
        output: (L_q, d_v) float32, the output of batch element 0.

    Do not modify the tensors: results are cached and shared.
    """

    mode: str
    B: int | None
    L_q: int
    L_k: int
    d_model: int
    d_k: int
    d_v: int
    rows: tuple[ShapeRow, ...]
    real_shapes: Mapping[str, tuple[int, ...]]
    query_tokens: tuple[str, ...]
    key_tokens: tuple[str, ...]
    weights: torch.Tensor
    output: torch.Tensor

    def shape(self, step: str) -> tuple[int, ...]:
        """The predicted shape of one step, e.g. ``shape("scores")``.

        Raises:
            KeyError: no such step (e.g. "context" in self-attention).
        """
        for row in self.rows:
            if row.step == step:
                return row.shape
        raise KeyError(f"no step {step!r}; the steps are {[r.step for r in self.rows]}.")

    def table(self) -> str:
        """The rows as a fixed-width text table (step, computed as, shape, sizes)."""
        header = ("step", "computed as", "shape", "sizes")
        lines = [(r.step, r.expression, r.symbols, fmt_shape(r.shape)) for r in self.rows]
        widths = [max(len(line[i]) for line in [header, *lines]) for i in range(4)]
        fmt = "  ".join(f"{{:<{w}}}" for w in widths)
        return "\n".join(fmt.format(*line).rstrip() for line in [header, *lines])

    @property
    def title(self) -> str:
        """A one-line summary of the setting."""
        batch = "no batch dim" if self.B is None else f"B = {self.B}"
        if self.mode == "self":
            lengths = f"L = {self.L_q}"
        else:
            lengths = f"L_q = {self.L_q}, L_k = {self.L_k}"
        return (
            f"{self.mode}-attention: {batch}, {lengths}, d_model = {self.d_model}, "
            f"d_k = {self.d_k}, d_v = {self.d_v}"
        )


def shape_walkthrough(
    B: int | None,
    L_q: int,
    L_k: int | None,
    d_model: int,
    d_k: int,
    d_v: int,
    mode: str = "self",
    *,
    seed: int = 0,
) -> ShapeWalkthrough:
    """Predict every shape of attention from the sizes, then run it on a sentence.

    The queries come from the first L_q tokens of :data:`_examples.QKV_SENTENCE`
    ("a small cat sat on the mat", 7 tokens). In self-attention the keys and values
    come from the same tokens (L_k = L_q; the ``L_k`` argument is ignored); in
    cross-attention from the first L_k tokens of :data:`CROSS_SENTENCE`
    (its French translation, 8 tokens), as when a model writing English looks up the
    French source. A batch holds B copies of the sentence. The module is
    :func:`seeded_attention` (untrained, so the weights show no real alignment).

    Args:
        B: batch size ≥ 1, or None for unbatched (L, d_model) input.
        L_q: 1 … 7. L_k: 1 … 8 in cross-attention; ignored (may be None) in self-attention.
        d_model, d_k, d_v: widths ≥ 1.
        mode: "self" or "cross".
        seed: seed of the module's weights (the embeddings use the sentences' own seeds).

    Returns:
        :class:`ShapeWalkthrough` (cached: the same arguments return the same object).

    Raises:
        ShapeError: a size < 1, L_q > 7, or (cross) L_k > 8 or None.
        ValueError: an unknown mode, or seed < 0. TypeError: a size that is not an int.

    Source: Vaswani et al. 2017, eq. (1); article section 2.3 (write every shape down).
    """
    mode = _choice("mode", mode, SHAPE_MODES)
    B = None if B is None else _dim("B", B)
    if mode == "cross":
        if L_k is None:
            raise ShapeError("cross-attention needs L_k, the number of key tokens (1 … 8).")
        L_k = _dim("L_k", L_k)
    args = (
        B, _dim("L_q", L_q), L_k if mode == "cross" else None, _dim("d_model", d_model),
        _dim("d_k", d_k), _dim("d_v", d_v), mode, _int("seed", seed, 0),
    )  # fmt: skip
    if args not in _WALKTHROUGHS:
        if len(_WALKTHROUGHS) >= 1024:
            _WALKTHROUGHS.clear()
        _WALKTHROUGHS[args] = _compute_shape_walkthrough(*args)
    return _WALKTHROUGHS[args]


_WALKTHROUGHS: dict[tuple, ShapeWalkthrough] = {}  # cache: a dashboard revisits settings


def _compute_shape_walkthrough(
    B: int | None, L_q: int, L_k: int | None, d_model: int, d_k: int, d_v: int, mode: str,
    seed: int,
) -> ShapeWalkthrough:  # fmt: skip

    queries = qkv_sentence(d_model)
    keys = cross_sentence(d_model) if mode == "cross" else queries
    if L_q > len(queries.tokens):
        raise ShapeError(
            f"L_q must be ≤ {len(queries.tokens)} (the sentence's length), got {L_q}."
        )
    if L_k is None:
        L_k = L_q
    elif L_k > len(keys.tokens):
        raise ShapeError(f"L_k must be ≤ {len(keys.tokens)} (the sentence's length), got {L_k}.")

    # --- predicted from the sizes alone ---
    batch = () if B is None else (B,)
    b = "" if B is None else "B, "
    q_len, k_len = ("L", "L") if mode == "self" else ("L_q", "L_k")
    source = "x" if mode == "self" else "context"
    what = "the sentence, embedded" if mode == "self" else "the query sentence, embedded"
    rows = [ShapeRow("x", what, f"({b}{q_len}, d_model)", (*batch, L_q, d_model))]
    if mode == "cross":
        rows.append(ShapeRow("context", "the key sentence, embedded", f"({b}L_k, d_model)",
                             (*batch, L_k, d_model)))  # fmt: skip
    rows += [
        ShapeRow("W_Q", "learned (shared by the batch)", "(d_model, d_k)", (d_model, d_k)),
        ShapeRow("W_K", "learned (shared by the batch)", "(d_model, d_k)", (d_model, d_k)),
        ShapeRow("W_V", "learned (shared by the batch)", "(d_model, d_v)", (d_model, d_v)),
    ]
    symbols = {
        "Q": f"({b}{q_len}, d_k)", "K": f"({b}{k_len}, d_k)", "V": f"({b}{k_len}, d_v)",
        "Kᵀ": f"({b}d_k, {k_len})", "scores": f"({b}{q_len}, {k_len})",
        "weights": f"({b}{q_len}, {k_len})", "output": f"({b}{q_len}, d_v)",
    }  # fmt: skip
    expressions = {
        "Q": "x W_Q", "K": f"{source} W_K", "V": f"{source} W_V",
        "Kᵀ": "K.transpose(-2, -1)", "scores": "Q Kᵀ / √d_k",
        "weights": "softmax(scores, dim=-1)", "output": "weights V",
    }  # fmt: skip
    traced = shape_trace((*batch, L_q, d_k), (*batch, L_k, d_k), (*batch, L_k, d_v))
    for step in traced:
        rows.append(ShapeRow(step.step, expressions[step.step], symbols[step.step], step.shape))

    # --- measured on a real run ---
    model = seeded_attention(d_model, d_k, d_v=d_v, seed=seed)
    x = queries.x[:L_q]  # (L_q, d_model)
    context = keys.x[:L_k]  # (L_k, d_model)
    if B is not None:
        x = x.expand(B, L_q, d_model)  # (B, L_q, d_model): B copies
        context = context.expand(B, L_k, d_model)  # (B, L_k, d_model)
    with torch.no_grad():
        Q, K, V = model.W_Q(x), model.W_K(context), model.W_V(context)
        K_T = K.transpose(-2, -1)  # (..., d_k, L_k)
        scores = Q @ K_T / math.sqrt(d_k)  # (..., L_q, L_k)
        output, weights = scaled_dot_product_attention(Q, K, V)
    real = {"x": x, "context": context, "Q": Q, "K": K, "V": V, "Kᵀ": K_T, "scores": scores,
            "weights": weights, "output": output}  # fmt: skip
    real_shapes = {name: tuple(t.shape) for name, t in real.items()}
    if mode == "self":
        del real_shapes["context"]
    for name, linear in (("W_Q", model.W_Q), ("W_K", model.W_K), ("W_V", model.W_V)):
        real_shapes[name] = tuple(linear.weight.T.shape)  # math layout (d_model, d_out)
    first = (0,) if B is not None else ()
    return ShapeWalkthrough(
        mode=mode, B=B, L_q=L_q, L_k=L_k, d_model=d_model, d_k=d_k, d_v=d_v, rows=tuple(rows),
        real_shapes=real_shapes, query_tokens=queries.tokens[:L_q],
        key_tokens=keys.tokens[:L_k], weights=weights[first].clone(),
        output=output[first].clone(),
    )  # fmt: skip


# The setting of notebook 04's first exercise: x (B, L_q, d_model), context (B, L_k, d_model).
STEP_SHAPES_SETTING = {"B": 3, "L_q": 5, "L_k": 7, "d_model": 32, "d_k": 16, "d_v": 4}
_STEP_SHAPE_NAMES = ("Kᵀ", "scores", "weights", "output")


def check_step_shapes(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check the shapes of Kᵀ, scores, weights and output for one fixed setting.

    ``fn()`` takes no argument and returns a dict with the keys "Kᵀ" (or "K_T"),
    "scores", "weights" and "output", each a shape (tuple, list or torch.Size), for
    cross-attention with B = 3, L_q = 5, L_k = 7, d_model = 32, d_k = 16, d_v = 4
    (:data:`STEP_SHAPES_SETTING`).

    Args:
        fn: the function to check.
        verbose: print the feedback paragraph.

    Returns:
        CheckResult; ``mistake`` is None or one of: "not_written", "error", "bad_return",
        "missing", "key_not_transposed", "key_transpose_length", "scores_transposed",
        "scores_width", "scores_square", "weights_shape", "output_width",
        "output_length", "output_is_weights", "batch_missing", "wrong_shape".

    Source: article section 2.3; attn_lib.shape_trace.
    """
    name = _name_of(fn)
    s = STEP_SHAPES_SETTING
    sizes = (s["B"], s["L_q"], s["L_k"], s["d_model"], s["d_k"], s["d_v"])
    B, L_q, L_k, _, d_k, d_v = sizes
    got, err = _call(fn)
    if err is not None:
        return _call_failed(
            name,
            err,
            f"Your function raised {_raised(err)}. Fix that line and run the check again.",
            verbose,
        )
    if not isinstance(got, dict):
        return _not_yet("bad_return", f"{name} returned {type(got).__name__}; "
                       f"return a dict such as {{'Kᵀ': (…), 'scores': (…), 'weights': (…), "
                       f"'output': (…)}}.", verbose)  # fmt: skip
    if "K_T" in got and "Kᵀ" not in got:
        got = {**got, "Kᵀ": got["K_T"]}
    missing = [n for n in _STEP_SHAPE_NAMES if n not in got]
    if missing:
        return _not_yet("missing", f"The dict has no entry for "
                       f"{', '.join(missing)}; give all four: {', '.join(_STEP_SHAPE_NAMES)} "
                       f"(\"K_T\" is accepted for Kᵀ).", verbose)  # fmt: skip
    want = {step.step: step.shape for step in shape_trace((B, L_q, d_k), (B, L_k, d_k),
                                                          (B, L_k, d_v))}  # fmt: skip
    for entry in _STEP_SHAPE_NAMES:
        shape = _as_shape_tuple(got[entry])
        if shape is None:
            return _not_yet("bad_return", f"{entry} is {_short(got[entry])}; give "
                           f"each shape as a tuple of ints, e.g. (3, 5, 7).", verbose)  # fmt: skip
        if shape == want[entry]:
            continue
        if entry == "Kᵀ":
            if shape == (B, L_k, d_k):
                code, why = "key_not_transposed", (
                    "That is K itself, (B, L_k, d_k). transpose(-2, -1) swaps its last two "
                    "dims: Kᵀ is (B, d_k, L_k), so that Q (B, L_q, d_k) @ Kᵀ lines up d_k "
                    "with d_k."
                )
            elif shape == (B, d_k, L_q):
                code, why = "key_transpose_length", (
                    "Kᵀ has one column per key: L_k columns, not L_q. The keys come from the "
                    "context (L_k = 7 tokens), the queries from x (L_q = 5)."
                )
            elif len(shape) == 2:
                code, why = "batch_missing", "Keep the batch dim B in front: (B, d_k, L_k)."
            else:
                code, why = "wrong_shape", "Kᵀ is K (B, L_k, d_k) with its last two dims swapped."
        else:
            code, why = _shape_hint(entry, shape, sizes)
        return _not_yet(code, f"For {_sizes_text(sizes)} you gave {entry} = "
                       f"{shape}, but it is {want[entry]}. {why}".rstrip(), verbose)  # fmt: skip
    return _passed(
        f"Kᵀ {want['Kᵀ']}, scores and weights {want['scores']}, output "
        f"{want['output']}: d_model = 32 appears in none of them (the projections remove it), "
        f"and d_k = 16 disappears in Q Kᵀ, summed over.",
        verbose,
    )


_MAC_NAMES = ("Q", "K", "V", "scores", "output")
# (B, L_q, L_k, d_model, d_k, d_v): cross-attention with all sizes different, then self.
_MAC_CASES = ((3, 5, 7, 32, 16, 4), (2, 9, 4, 6, 3, 5), (1, 8, 8, 12, 12, 12))


def step_macs(
    B: int, L_q: int, L_k: int, d_model: int, d_k: int, d_v: int
) -> dict[str, int]:
    """Multiply-adds of each matrix product of (cross-)attention.

    A product (a × b) @ (b × c) takes a·b·c multiply-adds, once per batch element.
    Q = x W_Q: B·L_q·d_model·d_k; K = context W_K: B·L_k·d_model·d_k; V = context W_V:
    B·L_k·d_model·d_v; scores = Q Kᵀ: B·L_q·L_k·d_k; output = weights V: B·L_q·L_k·d_v.
    The scaling, the softmax and any mask are not counted (O(B·L_q·L_k) each).

    Returns:
        {"Q", "K", "V", "scores", "output"} → Python ints.

    Source: the cost model of _experiments.attention_cost, for L_q ≠ L_k.
    """
    return {
        "Q": B * L_q * d_model * d_k,
        "K": B * L_k * d_model * d_k,
        "V": B * L_k * d_model * d_v,
        "scores": B * L_q * L_k * d_k,
        "output": B * L_q * L_k * d_v,
    }


def _mac_hint(entry: str, got: float, sizes: tuple[int, ...]) -> tuple[str, str]:
    """(mistake code, explanation) for a wrong count of one step."""
    B, L_q, L_k, d_model, d_k, d_v = sizes
    right = step_macs(*sizes)[entry]
    products = {
        "Q": "(L_q × d_model) @ (d_model × d_k)", "K": "(L_k × d_model) @ (d_model × d_k)",
        "V": "(L_k × d_model) @ (d_model × d_v)", "scores": "(L_q × d_k) @ (d_k × L_k)",
        "output": "(L_q × L_k) @ (L_k × d_v)",
    }  # fmt: skip
    rule = (f"{entry} is {products[entry]} per batch element, and (a × b) @ (b × c) takes "
            f"a·b·c multiply-adds.")  # fmt: skip
    if got == 2 * right:
        return "flops", (f"That is twice the count: you counted FLOPs (a multiply and an add "
                         f"each). Count multiply-adds: {rule}")  # fmt: skip
    if B > 1 and got * B == right:
        return "batch_missing", f"That is the count for one batch element; multiply by B. {rule}"
    pairs = "That counts query–key pairs, not the work: each pair is a dot product of length d_k."
    per_key = "has one row per key: L_k rows, from the context."
    wrong = {
        "scores": {B * L_q * L_k: ("pairs_only", pairs)},
        "output": {B * L_q * L_k * d_k: ("output_width", "The values are d_v wide, not d_k."),
                   B * L_q * L_k: ("pairs_only", "Each pair adds a row of V: d_v per pair.")},
        "V": {B * L_k * d_model * d_k: ("value_width", "W_V maps d_model to d_v, not d_k."),
              B * L_q * d_model * d_v: ("value_length", f"V {per_key}")},
        "K": {B * L_q * d_model * d_k: ("key_length", f"K {per_key}")},
    }  # fmt: skip
    if got in wrong.get(entry, {}):
        code, why = wrong[entry][got]
        return code, f"{why} {rule}"
    return "wrong_count", rule


def check_step_macs(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check a function that counts the multiply-adds of each step of attention.

    ``fn(B, L_q, L_k, d_model, d_k, d_v)`` must return a dict with the keys "Q", "K",
    "V", "scores" and "output": the multiply-adds of x W_Q, context W_K, context W_V,
    Q Kᵀ and weights V (see :func:`step_macs`). Cases: (3, 5, 7, 32, 16, 4) and
    (2, 9, 4, 6, 3, 5) (cross-attention), (1, 8, 8, 12, 12, 12) (self-attention).

    Args:
        fn: the function to check.
        verbose: print the feedback paragraph.

    Returns:
        CheckResult; ``mistake`` is None or one of: "not_written", "error", "bad_return",
        "missing", "flops", "batch_missing", "pairs_only", "output_width", "value_width",
        "value_length", "key_length", "wrong_count".

    Source: article section 1.2 (L² interactions); _experiments.attention_cost.
    """
    name = _name_of(fn)
    for sizes in _MAC_CASES:
        got, err = _call(fn, *sizes)
        if err is not None:
            return _call_failed(
                name,
                err,
                f"For {_sizes_text(sizes)} your function raised {_raised(err)}.",
                verbose,
            )
        if not isinstance(got, dict):
            return _not_yet("bad_return", f"{name} returned "
                           f"{type(got).__name__}; return a dict with the keys "
                           f"{', '.join(_MAC_NAMES)}.", verbose)  # fmt: skip
        missing = [n for n in _MAC_NAMES if n not in got]
        if missing:
            return _not_yet("missing", f"The dict has no entry for "
                           f"{', '.join(missing)}; give all five: {', '.join(_MAC_NAMES)}.",
                           verbose)  # fmt: skip
        want = step_macs(*sizes)
        for entry in _MAC_NAMES:
            value = got[entry]
            value, is_number = _number(value)
            if not is_number:
                return _not_yet("bad_return", f"{entry} is {_short(value)}; give "
                               f"each count as a number.", verbose)  # fmt: skip
            if value != want[entry]:
                code, why = _mac_hint(entry, value, sizes)
                return _not_yet(code, f"For {_sizes_text(sizes)} you counted "
                               f"{value:,} multiply-adds for {entry}, but it takes "
                               f"{want[entry]:,}. {why}", verbose)  # fmt: skip
    return _passed(
        f"{name} counts every product for {len(_MAC_CASES)} settings. The two "
        f"products that grow with L_q·L_k are Q Kᵀ and weights V; the three projections grow "
        f"with L_q or L_k alone.",
        verbose,
    )


# (d_model, d_k, d_v) → the crossover lengths are exact integers.
_CROSSOVER_CASES = ((64, 64, 64), (512, 64, 64), (100, 20, 60))
_CROSSOVER_HINTS = {
    "just_d_model": (
        "That is the rule of thumb \"attention dominates once L exceeds about d_model\"; it "
        "has the right order of magnitude, but the exact balance point is another number."
    ),
    "scores_vs_qk": (
        "You balanced Q Kᵀ against the Q and K projections only; count weights V and the V "
        "projection too."
    ),
    "scores_only": (
        "You compared Q Kᵀ alone with all three projections; weights V also grows as L²."
    ),
    "flops_mixed": (
        "That is twice the answer: did one side count FLOPs and the other multiply-adds?"
    ),
}


def check_crossover_length(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check a function that finds the L at which attention costs as much as the projections.

    ``fn(d_model, d_k, d_v)`` must return the sequence length L (a number) at which, in
    self-attention, the multiply-adds of Q Kᵀ and weights V (L²·(d_k + d_v)) equal those
    of the three projections (L·d_model·(2 d_k + d_v)). Cases: (64, 64, 64) → 96,
    (512, 64, 64) → 1536, (100, 20, 60) → 125.

    Args:
        fn: the function to check.
        verbose: print the feedback paragraph.

    Returns:
        CheckResult; ``mistake`` is None or one of: "not_written", "error", "bad_return",
        "just_d_model", "scores_vs_qk", "scores_only", "flops_mixed", "squared",
        "wrong_value".

    Source: _experiments.crossover_length; article section 1.2.
    """
    name = _name_of(fn)
    for d_model, d_k, d_v in _CROSSOVER_CASES:
        args = f"d_model={d_model}, d_k={d_k}, d_v={d_v}"
        got, err = _call(fn, d_model, d_k, d_v)
        if err is not None:
            return _call_failed(
                name, err, f"For {args} your function raised {_raised(err)}.", verbose
            )
        got, is_number = _number(got)
        if not is_number:
            return _not_yet("bad_return", f"{name} returned {_short(got)}; return "
                           f"the length L as a number.", verbose)  # fmt: skip
        want = crossover_length(d_model, d_k, d_v)
        if math.isclose(got, want, rel_tol=1e-9):
            continue
        known = [  # the first match names the mistake
            (float(d_model), "just_d_model", _CROSSOVER_HINTS["just_d_model"]),
            (2.0 * d_model, "scores_vs_qk", _CROSSOVER_HINTS["scores_vs_qk"]),
            (d_model * (2 * d_k + d_v) / d_k, "scores_only", _CROSSOVER_HINTS["scores_only"]),
            (2 * want, "flops_mixed", _CROSSOVER_HINTS["flops_mixed"]),
            (want**2, "squared", "That is L², not L."),
        ]
        code, why = _known_mistake(got, known)
        return _not_yet(
            code,
            f"For {args} you gave L = {got:g}; the balance point is L = {want:g}. "
            f"{why} Set L²·(d_k + d_v) = L·d_model·(2 d_k + d_v) and divide by L.".replace(
                "  ", " "
            ),
            verbose,
        )
    return _passed(
        f"{name} finds the balance point L = d_model·(2 d_k + d_v)/(d_k + d_v): "
        f"96 tokens for d_model = d_k = d_v = 64, i.e. 1.5·d_model when d_k = d_v = d_model. "
        f"Beyond it, attention's L² terms cost more than the projections.",
        verbose,
    )
