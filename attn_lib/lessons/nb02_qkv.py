"""Notebook 02's data, experiments and checkers (torch only).

Used by notebook 02 (Queries, keys and values), sections "4 · Biases: on K useless, on V a
shift, on Q a change of weights", "5 · Why not compare x with x directly?", "6 · A dot product
is not a cosine similarity", "7 · A dashboard: one token, and a bias switch", "8 · Check
yourself".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import permutations

import torch
from torch import nn

from ..shapes import ShapeError, fmt_shape
from ._checking import (
    _SEED,
    CheckResult,
    _call,
    _call_failed,
    _close,
    _name_of,
    _not_written,
    _not_yet,
    _passed,
    _raised,
    _tensors,
)
from ._examples import Sentence
from ._experiments import _choice, _dim, _generator, _int, _positive, _vector, default_linear_weight


def short_and_long_tokens() -> Sentence:
    """Two 2-D tokens whose x xᵀ row 0 does not peak on the diagonal.

    "short" = (0.3, 0.1) and "long" = (2.0, 0.5) point almost the same way, so
    short·long = 0.65 > short·short = 0.10: the short token scores the long one above
    itself. In high dimension a token usually scores itself highest (see
    self_score_max_fraction), but that is not a theorem.

    Returns:
        :class:`Sentence` with tokens ("short", "long") and x (2, 2) float32.

    Source: a counterexample for article section 2.1.
    """
    return Sentence(tokens=("short", "long"), x=torch.tensor([[0.3, 0.1], [2.0, 0.5]]))


BIAS_CHOICES = ("none", "q", "k", "v")


@dataclass(frozen=True)
class QKVExample:
    """Q, K, V and attention of one sequence with fixed weights, and at most one bias.

    Attributes:
        bias: "none", "q", "k" or "v" — which projection got its bias vector.
        x: (L, d_model), the input.
        W_Q, W_K: (d_k, d_model); W_V: (d_v, d_model), in nn.Linear's storage layout
            (applied as x @ W.T; the article writes the transposes, (d_model, d_k)).
        b_Q, b_K: (d_k,); b_V: (d_v,): the bias vectors (only ``bias``'s is used).
        Q, K: (L, d_k); V: (L, d_v).
        scores: (L_q, L_k) = Q Kᵀ / √d_k. weights: (L_q, L_k). output: (L_q, d_v).
    """

    bias: str
    x: torch.Tensor
    W_Q: torch.Tensor
    W_K: torch.Tensor
    W_V: torch.Tensor
    b_Q: torch.Tensor
    b_K: torch.Tensor
    b_V: torch.Tensor
    Q: torch.Tensor
    K: torch.Tensor
    V: torch.Tensor
    scores: torch.Tensor
    weights: torch.Tensor
    output: torch.Tensor


def qkv_example(
    x: torch.Tensor,
    bias: str = "none",
    *,
    d_k: int | None = None,
    d_v: int | None = None,
    bias_scale: float = 1.0,
    seed: int = 0,
) -> QKVExample:
    """Project x to Q, K, V with seeded nn.Linear-style weights and attend; optionally one bias.

    The weights and the three bias vectors are drawn in the same order whatever
    ``bias`` is, so the settings differ only by the bias that is switched on. Both use
    nn.Linear's default init (weights U(±1/√d_model), biases U(±1/√d_model)), which is
    what ``nn.Linear(d_model, d_k)`` — bias=True by default — starts with; ``bias_scale``
    multiplies the bias vectors to make their effect easier to see. What a bias
    does: on K it adds q·b_K to every score of a row, a constant shift that softmax
    ignores; on V it adds b_V to every output (the weights sum to 1); on Q it adds
    b_Q·k_j, which differs per key, so the weights change.

    Args:
        x: (L, d_model), floating point.
        bias: "none", "q", "k" or "v".
        d_k: width of queries and keys (default d_model). d_v: width of values (default d_k).
        bias_scale: multiplier of the bias vectors (> 0; 1 = nn.Linear's init).
        seed: seed of the weights and biases.

    Returns:
        :class:`QKVExample`, float32 (or x's dtype).

    Raises:
        ShapeError: x not 2-D, L = 0, or a width < 1.
        ValueError: an unknown bias, or bias_scale not finite and > 0.

    Source: article sections 2.1 and 3.2; torch.nn.Linear (bias=True by default).
    """
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        shape = fmt_shape(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ShapeError(f"x must be (L, d_model) with L, d_model ≥ 1, got {shape}.")
    bias = _choice("bias", bias, BIAS_CHOICES)
    d_model = x.shape[1]
    d_k = d_model if d_k is None else _dim("d_k", d_k)
    d_v = d_k if d_v is None else _dim("d_v", d_v)
    g = _generator(seed)
    W_Q = default_linear_weight(d_k, d_model, g).to(x.dtype)  # (d_k, d_model)
    W_K = default_linear_weight(d_k, d_model, g).to(x.dtype)  # (d_k, d_model)
    W_V = default_linear_weight(d_v, d_model, g).to(x.dtype)  # (d_v, d_model)
    bound = _positive("bias_scale", bias_scale) / math.sqrt(d_model)  # nn.Linear: U(±1/√d_model)
    b_Q, b_K, b_V = (
        torch.empty(n).uniform_(-bound, bound, generator=g).to(x.dtype) for n in (d_k, d_k, d_v)
    )
    Q = x @ W_Q.T + (b_Q if bias == "q" else 0)  # (L, d_k)
    K = x @ W_K.T + (b_K if bias == "k" else 0)  # (L, d_k)
    V = x @ W_V.T + (b_V if bias == "v" else 0)  # (L, d_v)
    scores = Q @ K.T / math.sqrt(d_k)  # (L_q, L_k)
    weights = torch.softmax(scores, dim=-1)  # (L_q, L_k)
    return QKVExample(
        bias=bias, x=x, W_Q=W_Q, W_K=W_K, W_V=W_V, b_Q=b_Q, b_K=b_K, b_V=b_V,
        Q=Q, K=K, V=V, scores=scores, weights=weights, output=weights @ V,
    )  # fmt: skip


@dataclass(frozen=True)
class TokenQKV:
    """One token's view of :func:`qkv_example`.

    Attributes:
        index: the token's position. bias: the bias setting.
        query: (d_k,), what it looks for. key: (d_k,), what it offers.
        value: (d_v,), what it passes on. scores: (L_k,), its row of Q Kᵀ / √d_k.
        weights: (L_k,), softmax of that row. output: (d_v,), its output.
    """

    index: int
    bias: str
    query: torch.Tensor
    key: torch.Tensor
    value: torch.Tensor
    scores: torch.Tensor
    weights: torch.Tensor
    output: torch.Tensor


def token_qkv(
    x: torch.Tensor,
    index: int,
    bias: str = "none",
    *,
    d_k: int | None = None,
    d_v: int | None = None,
    bias_scale: float = 1.0,
    seed: int = 0,
) -> TokenQKV:
    """A token's query, key and value, and its row of scores and weights (same weights each call).

    Args:
        x: (L, d_model). index: 0 … L − 1 (negative counts from the end).
        bias, d_k, d_v, bias_scale, seed: as :func:`qkv_example`.

    Returns:
        :class:`TokenQKV`.

    Raises:
        IndexError: index out of range. Otherwise as :func:`qkv_example`.

    Source: article section 2.1.
    """
    ex = qkv_example(x, bias, d_k=d_k, d_v=d_v, bias_scale=bias_scale, seed=seed)
    L = x.shape[0]
    i = _int("index", index, -L, IndexError)
    if i >= L:
        raise IndexError(f"index must be in 0 … {L - 1} (or negative from the end), got {i}.")
    i %= L  # a negative index counts from the end
    return TokenQKV(
        index=i, bias=ex.bias, query=ex.Q[i], key=ex.K[i], value=ex.V[i],
        scores=ex.scores[i], weights=ex.weights[i], output=ex.output[i],
    )  # fmt: skip


def self_score_max_fraction(
    d: int, *, L: int = 8, n_sequences: int = 500, seed: int = 0
) -> float:
    """How often a token's own score x_i·x_i is the largest of its row of x xᵀ.

    For x with i.i.d. N(0, 1) entries, x_i·x_i = ‖x_i‖² ≈ d while x_i·x_j has SD √d,
    so as d grows each token almost always scores itself highest: scoring x against
    x directly mostly tells a token that it is itself. It is not a theorem (a short
    vector next to a long one in its direction loses; see
    short_and_long_tokens). With Q Kᵀ, W_Q ≠ W_K breaks this.

    Args:
        d: width of the tokens (≥ 1). L: tokens per sequence (≥ 2).
        n_sequences: sequences drawn (≥ 1). seed: the generator's seed.

    Returns:
        The fraction of the n_sequences·L rows whose largest entry is the diagonal one.

    Raises:
        ShapeError: d < 1 or L < 2. ValueError: n_sequences < 1.

    Source: article section 2.1 ("why not use X itself").
    """
    d = _dim("d", d)
    L = _dim("L", L, 2)
    n = _int("n_sequences", n_sequences, 1)
    x = torch.randn(n, L, d, generator=_generator(seed))  # (n, L, d)
    scores = x @ x.transpose(-2, -1)  # (n, L, L), symmetric
    return (scores.argmax(dim=-1) == torch.arange(L)).double().mean().item()


@dataclass(frozen=True)
class DotVsCosine:
    """Dot product and cosine similarity of (factor · a, b) for several factors.

    Attributes:
        factors: (n,); dot: (n,), factor · (a·b); cosine: (n,), the same for every factor > 0.
    """

    factors: torch.Tensor
    dot: torch.Tensor
    cosine: torch.Tensor


def dot_and_cosine(
    a: torch.Tensor | Sequence[float],
    b: torch.Tensor | Sequence[float],
    factors: Sequence[float] = (0.5, 1.0, 2.0, 4.0),
) -> DotVsCosine:
    """Scale a by each factor: the dot product with b scales too, the cosine does not.

    A raw dot product is not cosine similarity: it grows with the vectors' norms.

    Args:
        a, b: (d,) vectors of the same width, neither zero.
        factors: positive numbers.

    Returns:
        :class:`DotVsCosine`, float64.

    Raises:
        ShapeError: a, b not 1-D of the same width. ValueError: a zero vector, or a
            factor that is not finite and > 0.

    Source: article section 2.1 (which calls x·x "cosine similarity").
    """
    a64 = _vector("a", a).double()
    b64 = _vector("b", b).double()
    if a64.shape != b64.shape:
        raise ShapeError(f"a {fmt_shape(a64.shape)} and b {fmt_shape(b64.shape)} differ in width.")
    if not (bool(a64.any()) and bool(b64.any())):
        raise ValueError("a and b must be non-zero: the cosine of a zero vector is undefined.")
    f = torch.tensor([_positive("factor", x) for x in factors], dtype=torch.float64)  # (n,)
    scaled = f[:, None] * a64  # (n, d)
    dot = scaled @ b64  # (n,)
    cosine = dot / (scaled.norm(dim=-1) * b64.norm())  # (n,)
    return DotVsCosine(factors=f, dot=dot, cosine=cosine)


class _NoCallLinear(nn.Linear):
    """An nn.Linear that refuses to be called: the exercise asks for the matrix product."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        raise RuntimeError(_NO_CALL)


_NO_CALL = (
    "this exercise asks for the matrix products themselves: use layer.weight and layer.bias "
    "instead of calling layer(x)"
)


def _linear(d_in: int, d_out: int, bias: bool, g: torch.Generator) -> _NoCallLinear:
    """A seeded (d_out, d_in) layer with nn.Linear's init ranges, without the global RNG."""
    layer = _NoCallLinear(d_in, d_out, bias=bias, device="meta").to_empty(device="cpu")
    bound = 1.0 / math.sqrt(d_in)
    with torch.no_grad():
        layer.weight.copy_(torch.empty(d_out, d_in).uniform_(-bound, bound, generator=g))
        if layer.bias is not None:
            layer.bias.copy_(torch.empty(d_out).uniform_(-bound, bound, generator=g))
    return layer


@dataclass(frozen=True)
class _ProjectionCase:
    name: str
    x: torch.Tensor
    layers: tuple[_NoCallLinear, _NoCallLinear, _NoCallLinear]  # W_Q, W_K, W_V


def _projection_cases() -> list[_ProjectionCase]:
    g = torch.Generator().manual_seed(_SEED + 2)

    def case(
        name: str, shape: tuple[int, ...], d_k: int, d_v: int, bias: bool
    ) -> _ProjectionCase:
        d_model = shape[-1]
        layers = (
            _linear(d_model, d_k, bias, g),
            _linear(d_model, d_k, bias, g),
            _linear(d_model, d_v, bias, g),
        )
        return _ProjectionCase(name, torch.randn(*shape, generator=g), layers)

    return [
        case("x (6, 5), d_k = 3, d_v = 4, bias=True (the default)", (6, 5), 3, 4, True),
        case("x (2, 6, 5), a batch, d_k = 3, d_v = 4, bias=True", (2, 6, 5), 3, 4, True),
        case("x (5, 4), d_model = d_k = d_v = 4, bias=True", (5, 4), 4, 4, True),
        case("x (6, 5), d_k = 3, d_v = 2, bias=False (.bias is None)", (6, 5), 3, 2, False),
    ]


def _project(x: torch.Tensor, layer: nn.Linear, *, bias: bool = True) -> torch.Tensor:
    """x @ weight.T (+ bias): what the layer computes, (…, d_out)."""
    out = x @ layer.weight.detach().T
    if bias and layer.bias is not None:
        out = out + layer.bias.detach()
    return out


def check_qkv_projection(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check Q, K, V computed with matrix products from three nn.Linear layers' parameters.

    ``fn(x, W_Q, W_K, W_V)`` receives x (L, d_model) or (B, L, d_model) and three
    ``nn.Linear`` layers (W_Q, W_K: d_model → d_k; W_V: d_model → d_v) and must
    return (Q, K, V) computed from ``layer.weight`` (stored as (d_out, d_model)) and
    ``layer.bias`` ((d_out,), or None for bias=False): Q = x @ W_Q.weight.T + b_Q.
    Calling a layer is refused in this exercise. Cases: d_k ≠ d_model ≠ d_v with
    bias, a batch, a square case (d_model = d_k = d_v, where a missing transpose runs
    silently) and bias=False.

    Args:
        fn: the function to check.
        verbose: print the feedback paragraph.

    Returns:
        CheckResult; ``mistake`` is None or one of: "not_written", "called_layer",
        "bad_return", "no_transpose", "missing_bias", "bias_none", "order", "error",
        "wrong_shape", "unknown".

    Source: article section 2.1 (W_Q written as (d_model, d_k)); torch.nn.Linear
        (weight (out_features, in_features), y = x Wᵀ + b, bias=True by default).
    """
    name = _name_of(fn)
    cases = _projection_cases()
    expected = [tuple(_project(c.x, layer) for layer in c.layers) for c in cases]
    outcomes: list[tuple[torch.Tensor, ...] | BaseException] = []
    for case in cases:
        result, err = _call(fn, case.x.clone(), *case.layers)
        if err is not None:
            outcomes.append(err)
            continue
        if not _tensors(result, 3):
            got = type(result).__name__
            if isinstance(result, tuple | list):
                got += f" of length {len(result)}"
            return _not_yet(
                "bad_return",
                f"{name} returned a {got}; return the three tensors (Q, K, V).",
                verbose,
            )
        outcomes.append(tuple(t.detach() for t in result))

    errors = [(c, o) for c, o in zip(cases, outcomes, strict=True) if isinstance(o, BaseException)]
    if any(isinstance(o, NotImplementedError) for _, o in errors):
        return _not_written(name, verbose)
    if any(_NO_CALL in str(o) for _, o in errors):
        return _not_yet(
            "called_layer",
            "Your function calls a layer, W_Q(x), which this exercise refuses: the "
            "point is to see what the layer computes. Use its parameters: "
            "`x @ W_Q.weight.T + W_Q.bias`.",
            verbose,
        )
    for case, err in errors:
        text = str(err)
        if "NoneType" in text:
            return _not_yet(
                "bias_none",
                f"On the case '{case.name}' your function raised "
                f"{_raised(err, first_line=True)}. A layer built with bias=False has `.bias = None`, "
                f"and None cannot be added to a tensor: add the bias only when it exists, "
                f"e.g. `if layer.bias is not None: Q = Q + layer.bias`.",
                verbose,
            )
        if "cannot be multiplied" in text or "size mismatch" in text:
            return _not_yet(
                "no_transpose",
                f"On the case '{case.name}' your function raised "
                f"{_raised(err, first_line=True)}. nn.Linear(d_model, d_k) stores its weight as "
                f"(d_k, d_model), the transpose of the article's (d_model, d_k) matrix, so the "
                f"product is `x @ W_Q.weight.T`, not `x @ W_Q.weight` (which runs only when "
                f"d_k = d_model, and then silently gives wrong numbers).",
                verbose,
            )

    def same(outcome: object, want: tuple[torch.Tensor, ...]) -> bool:
        return not isinstance(outcome, BaseException) and all(
            _close(a, b) for a, b in zip(outcome, want, strict=True)
        )

    if all(same(o, e) for o, e in zip(outcomes, expected, strict=True)):
        return _passed(
            f"{name} computes Q, K and V exactly as the layers would, on all "
            f"{len(cases)} cases (with and without bias, a batch, and a square case where a "
            f"missing transpose would have run silently): x @ weight.T + bias.",
            verbose,
        )
    no_bias = [tuple(_project(c.x, layer, bias=False) for layer in c.layers) for c in cases]
    if all(same(o, e) for o, e in zip(outcomes, no_bias, strict=True)):
        return _not_yet(
            "missing_bias",
            (
                "Your products are right but the bias is missing. nn.Linear has "
                "bias=True by default, so these layers (except in the bias=False case) add "
                "`layer.bias` after the product: `x @ layer.weight.T + layer.bias`."
            ),
            verbose,
        )
    if errors:
        case, err = errors[0]
        return _not_yet(
            "error",
            f"On the case '{case.name}' your function raised "
            f"{_raised(err, first_line=True)}. Fix that line and run the check again.",
            verbose,
        )
    for order in permutations(range(3)):
        if order != (0, 1, 2) and all(
            same(o, tuple(e[k] for k in order)) for o, e in zip(outcomes, expected, strict=True)
        ):
            got = ", ".join("QKV"[k] for k in order)
            return _not_yet(
                "order",
                f"Your three tensors are right but returned in the order ({got}); "
                f"return (Q, K, V): W_Q makes the queries, W_K the keys, W_V the values.",
                verbose,
            )
    for case, outcome, want in zip(cases, outcomes, expected, strict=True):
        shapes = [tuple(t.shape) for t in outcome]
        wanted = [tuple(t.shape) for t in want]
        if shapes != wanted:
            return _not_yet(
                "wrong_shape",
                f"On the case '{case.name}' your (Q, K, V) have shapes {shapes}; they "
                f"should be {wanted}: each layer maps the last dim, d_model, to its own width.",
                verbose,
            )
    return _not_yet(
        "unknown",
        "The shapes are right but the numbers are not, and they match none of the "
        "usual mistakes (no transpose, no bias, Q/K/V swapped). Compute each one as "
        "`x @ layer.weight.T + layer.bias`.",
        verbose,
    )


@dataclass(frozen=True)
class _BiasCase:
    name: str
    query: torch.Tensor  # (L_q, d_k)
    key: torch.Tensor  # (L_k, d_k)
    value: torch.Tensor  # (L_k, d_v)
    bias: torch.Tensor  # (d_k,) for K, (d_v,) for V


def _bias_cases(width_of_bias: str) -> list[_BiasCase]:
    g = torch.Generator().manual_seed(_SEED + 3)
    cases = []
    for L_q, L_k, d_k, d_v in ((5, 5, 4, 3), (3, 7, 6, 2), (8, 4, 2, 5)):
        q, k, v = (torch.randn(*s, generator=g) for s in ((L_q, d_k), (L_k, d_k), (L_k, d_v)))
        width = d_v if width_of_bias == "v" else d_k
        b = torch.randn(width, generator=g)
        name = f"L_q = {L_q}, L_k = {L_k}, d_k = {d_k}, d_v = {d_v}"
        cases.append(_BiasCase(name, q, k, v, b))
    return cases


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    weights = torch.softmax(q @ k.T / math.sqrt(q.shape[-1]), dim=-1)  # (L_q, L_k)
    return weights @ v  # (L_q, d_v)


def _call_tensor_fn(fn: Callable, *args: torch.Tensor) -> torch.Tensor | BaseException | str:
    result, err = _call(fn, *(a.clone() for a in args))
    if err is not None:
        return err
    if not isinstance(result, torch.Tensor):
        return f"returned {type(result).__name__}, not a tensor"
    return result.detach()


def _check_prediction(
    fn: Callable,
    cases: list,
    make_args: Callable,
    truth: Callable,
    mistakes: list[tuple[str, str, Callable]],
    passed: str,
    reshape: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    verbose: bool,
) -> CheckResult:
    """Run fn on every case and compare with the truth, then with each known mistake."""
    name = _name_of(fn)
    got = []
    for case in cases:
        out = _call_tensor_fn(fn, *make_args(case))
        if isinstance(out, BaseException):
            return _call_failed(
                name,
                out,
                f"On the case '{case.name}' your function raised "
                f"{_raised(out, first_line=True)}. Fix that line and run the check again.",
                verbose,
            )
        if isinstance(out, str):
            return _not_yet("bad_return", f"{name} {out}.", verbose)
        got.append(reshape(out, truth(case)))
    if all(_close(o, truth(c)) for o, c in zip(got, cases, strict=True)):
        return _passed(passed, verbose)
    for code, message, wrong in mistakes:
        if all(_close(o, wrong(c)) for o, c in zip(got, cases, strict=True)):
            return _not_yet(code, message, verbose)
    for o, c in zip(got, cases, strict=True):
        want = truth(c)
        if o.shape != want.shape:
            return _not_yet(
                "wrong_shape",
                f"On the case '{c.name}' your answer has shape {tuple(o.shape)}; it "
                f"should be {tuple(want.shape)}.",
                verbose,
            )
    return _not_yet(
        "unknown",
        "Your numbers match neither the truth nor a usual mistake. Write the "
        "changed quantity as a sum over the keys and see which terms the bias touches.",
        verbose,
    )


def check_v_bias_prediction(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check a prediction of what a bias on V does to the attention outputs.

    ``fn(output, b_V)`` receives the outputs of attention without bias, (L_q, d_v),
    and a bias vector b_V, (d_v,), and must return the outputs the same attention
    gives when every value gets b_V added, (L_q, d_v) — without recomputing
    attention (it gets no Q, K or V). The truth is computed by running attention
    with V + b_V on three seeded cases with L_q ≠ L_k and d_k ≠ d_v.

    Args:
        fn: the function to check.
        verbose: print the feedback paragraph.

    Returns:
        CheckResult; ``mistake`` is None or one of: "not_written", "error",
        "bad_return", "no_change", "times_length", "over_length", "sign",
        "wrong_shape", "unknown".

    Source: article section 3.2 (bias=False); torch.nn.Linear (bias=True by default).
    """
    cases = _bias_cases("v")

    def plain(c: _BiasCase) -> torch.Tensor:
        return _attend(c.query, c.key, c.value)

    def n_keys(c: _BiasCase) -> int:
        return c.key.shape[0]

    def n_queries(c: _BiasCase) -> int:
        return c.query.shape[0]

    mistakes = [
        (
            "no_change",
            (
                "You predict that the outputs do not change. That is true of a bias on K, not "
                "on V: every value v_j becomes v_j + b_V, and each output is a weighted sum of "
                "the values, so the bias comes through."
            ),
            plain,
        ),
        (
            "times_length",
            (
                "You add the bias once per key. But the weights of a row sum to 1, so "
                "Σ_j w_ij (v_j + b_V) = Σ_j w_ij v_j + b_V: the bias is added exactly once."
            ),
            lambda c: plain(c) + n_keys(c) * c.bias,
        ),
        (
            "times_length",
            (
                "You multiply the bias by the number of output rows. The weights of a row sum "
                "to 1, so Σ_j w_ij (v_j + b_V) = Σ_j w_ij v_j + b_V: the bias is added exactly "
                "once, to every output row."
            ),
            lambda c: plain(c) + n_queries(c) * c.bias,
        ),
        (
            "over_length",
            (
                "You divide the bias by the number of output rows. The weights need not be "
                "uniform, but they always sum to 1, so the bias comes through whole: "
                "Σ_j w_ij (v_j + b_V) = output_i + b_V."
            ),
            lambda c: plain(c) + c.bias / n_queries(c),
        ),
        (
            "over_length",
            (
                "You divide the bias by the number of keys. The weights sum to 1, so the bias "
                "comes through whole: Σ_j w_ij (v_j + b_V) = output_i + b_V."
            ),
            lambda c: plain(c) + c.bias / n_keys(c),
        ),
        (
            "sign",
            (
                "Right size, wrong sign: the bias is added to the values, so it is added to "
                "the outputs, not subtracted."
            ),
            lambda c: plain(c) - c.bias,
        ),
    ]
    return _check_prediction(
        fn,
        cases,
        lambda c: (plain(c), c.bias),
        lambda c: _attend(c.query, c.key, c.value + c.bias),
        mistakes,
        f"{_name_of(fn)} predicts the outputs of attention run with V + b_V on all "
        f"{len(cases)} cases. Each output is Σ_j w_ij v_j with weights that sum to 1, so "
        f"adding b_V to every value adds exactly b_V to every output, whatever the weights.",
        lambda out, want: out,
        verbose,
    )


def check_k_bias_shift(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check the shift a bias on K adds to each row of the scaled scores.

    ``fn(query, b_K)`` receives the queries (L_q, d_k) and a bias vector b_K (d_k,)
    and must return, for every query i, how much its row of the scaled scores
    Q Kᵀ / √d_k moves when b_K is added to every key: shape (L_q,) (a (L_q, 1)
    column is accepted too). The truth is measured from the scores themselves, with
    and without the bias, on three seeded cases.

    Args:
        fn: the function to check.
        verbose: print the feedback paragraph.

    Returns:
        CheckResult; ``mistake`` is None or one of: "not_written", "error",
        "bad_return", "zero", "no_scale", "scale_d_k", "wrong_shape", "unknown".

    Source: article sections 2.2 (scaling) and 3.2 (bias=False); Vaswani et al. 2017, eq. (1).
    """
    cases = _bias_cases("k")

    def truth(c: _BiasCase) -> torch.Tensor:
        scale = math.sqrt(c.query.shape[-1])
        shift = c.query @ (c.key + c.bias).T / scale - c.query @ c.key.T / scale  # (L_q, L_k)
        return shift[:, 0]  # every column holds the same shift: (L_q,)

    def reshape(out: torch.Tensor, want: torch.Tensor) -> torch.Tensor:
        return out[:, 0] if out.dim() == 2 and out.shape == (*want.shape, 1) else out

    mistakes = [
        (
            "zero",
            (
                "You answer 0: the scores do not change. They do: each row moves by "
                "q_i·b_K / √d_k. What does not change is the *weights*, because softmax "
                "ignores a constant added to a whole row."
            ),
            lambda c: torch.zeros(c.query.shape[0]),
        ),
        (
            "no_scale",
            (
                "Right idea, but that is the shift of the raw scores Q Kᵀ. The scores are "
                "divided by √d_k (d_k = query.size(-1)), and so is their shift: "
                "`query @ b_K / math.sqrt(d_k)`."
            ),
            lambda c: c.query @ c.bias,
        ),
        (
            "scale_d_k",
            (
                "Your shift is divided by d_k; the scores are divided by √d_k: "
                "`query @ b_K / math.sqrt(d_k)`."
            ),
            lambda c: c.query @ c.bias / c.query.shape[-1],
        ),
    ]
    return _check_prediction(
        fn,
        cases,
        lambda c: (c.query, c.bias),
        truth,
        mistakes,
        f"{_name_of(fn)} gives each row's shift, q_i·b_K / √d_k, on all {len(cases)} cases. "
        f"It is the same for every key j of row i, so softmax, which ignores a constant added "
        f"to a row, gives the same weights: a bias on K changes nothing.",
        reshape,
        verbose,
    )
