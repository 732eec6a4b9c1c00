"""Notebook 02's biased projections and checkers (torch only).

Used by notebook 02 (Queries, keys and values), sections "4 · Biases: on K nothing, on V a
shift, on Q new weights" and "7 · The token dashboard" (:func:`qkv_example`), and "8 · Check
yourself" (the checkers and their solutions).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from ..mistakes import why
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
    _short,
    _tensors,
    recording,
)
from ._experiments import default_linear_weight

BIAS_CHOICES = ("none", "q", "k", "v")


@dataclass(frozen=True)
class QKVExample:
    """Q, K, V and attention of one sequence with ``bias`` ("none", "q", "k" or "v") switched on.

    Shapes: b_Q, b_K (d_k,), b_V (d_v,) (only ``bias``'s is added); Q, K (L, d_k); V (L, d_v);
    scores = Q Kᵀ / √d_k and weights (L_q, L_k); output (L_q, d_v).
    """

    bias: str
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
    x: torch.Tensor, bias: str = "none", *, bias_scale: float = 3.0, seed: int = 0
) -> QKVExample:
    """Project x (L, d_model) with seeded weights, add one bias (or none), and attend.

    The weights (nn.Linear's init) and the three biases (U(±bias_scale/√d_model), i.e.
    ``bias_scale`` times nn.Linear's range) are drawn in the same order whatever ``bias``
    is, so the four settings differ only by the bias switched on. d_k = d_v = d_model.

    Source: article sections 2.1 and 3.2; torch.nn.Linear (bias=True by default).
    """
    d = x.shape[-1]
    g = torch.Generator().manual_seed(seed)
    W_Q, W_K, W_V = (default_linear_weight(d, d, g) for _ in range(3))  # (d_out, d_model) each
    bound = bias_scale / math.sqrt(d)
    b_Q, b_K, b_V = (torch.empty(d).uniform_(-bound, bound, generator=g) for _ in range(3))
    Q = x @ W_Q.T + (b_Q if bias == "q" else 0)  # (L, d_k)
    K = x @ W_K.T + (b_K if bias == "k" else 0)  # (L, d_k)
    V = x @ W_V.T + (b_V if bias == "v" else 0)  # (L, d_v)
    scores = Q @ K.T / math.sqrt(d)  # (L_q, L_k)
    weights = torch.softmax(scores, dim=-1)  # (L_q, L_k)
    return QKVExample(bias, b_Q, b_K, b_V, Q, K, V, scores, weights, weights @ V)


# --- Exercise 1: Q, K and V from the layers' parameters ---------------------------------------

_NO_CALL = (
    "this exercise asks for the matrix products themselves: use layer.weight and layer.bias "
    "instead of calling layer(x)")  # fmt: skip


class _NoCallLinear(nn.Linear):
    """An nn.Linear that refuses to be called: the exercise asks for the matrix products."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        raise RuntimeError(_NO_CALL)


def _projection_cases() -> list[tuple[str, torch.Tensor, list[nn.Linear]]]:
    """(name, x, [W_Q, W_K, W_V]) per case, seeded, with nn.Linear's init ranges."""
    g = torch.Generator().manual_seed(_SEED + 2)
    cases = []
    for name, shape, d_k, d_v, bias in (
        ("x (6, 5), d_k = 3, d_v = 4, bias=True (the default)", (6, 5), 3, 4, True),
        ("x (2, 6, 5), a batch, d_k = 3, d_v = 4, bias=True", (2, 6, 5), 3, 4, True),
        ("x (5, 4), d_model = d_k = d_v = 4, bias=True", (5, 4), 4, 4, True),
        ("x (6, 5), d_k = 3, d_v = 2, bias=False (.bias is None)", (6, 5), 3, 2, False),
    ):
        layers = []
        for d_out in (d_k, d_k, d_v):
            layer = _NoCallLinear(shape[-1], d_out, bias=bias, device="meta").to_empty(device="cpu")
            for p in layer.parameters():  # weight (d_out, d_model), then bias (d_out,)
                p.data.uniform_(-1 / math.sqrt(shape[-1]), 1 / math.sqrt(shape[-1]), generator=g)
            layers.append(layer)
        cases.append((name, torch.randn(*shape, generator=g), layers))
    return cases


def _raised_on(case: str, err: Exception) -> str:
    return f"On the case '{case}' your function raised {_raised(err, first_line=True)}. "


def _projection_error(case: str, err: Exception) -> tuple[str, str]:
    """(mistake, feedback) for an error the reader's function raised on a case."""
    text, said = str(err), _raised_on(case, err)
    if _NO_CALL in text:
        return "called_layer", (
            "Your function calls a layer, W_Q(x), which this exercise refuses: the point is to "
            "see what the layer computes. Use its parameters: `x @ W_Q.weight.T + W_Q.bias`.")  # fmt: skip
    if "NoneType" in text:
        return "bias_none", said + why("bias_none")
    if "cannot be multiplied" in text or "size mismatch" in text:
        return "linear_not_transposed", said + why("linear_not_transposed")
    return "error", said + "Fix that line and run the check again."


def _check_qkv_projection(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check ``fn(x, W_Q, W_K, W_V)`` → (Q, K, V) = x @ layer.weight.T + layer.bias per layer.

    x is (L, d_model) or (B, L, d_model); the layers are nn.Linear (d_model → d_k, d_k, d_v),
    some with ``.bias = None``, and refuse to be called.

    Returns:
        CheckResult; ``mistake`` is None or one of: "not_written", "called_layer", "error",
        "bad_return", "unknown", or "bias_none", "linear_not_transposed", "bias_missing"
        (attn_lib.mistakes).

    Source: article section 2.1 (W_Q as (d_model, d_k)); torch.nn.Linear (weight
        (out_features, in_features), y = x Wᵀ + b, bias=True by default).
    """
    name, cases, outcomes = _name_of(fn), _projection_cases(), []
    for case, x, layers in cases:
        result, err = _call(fn, x.clone(), *layers)
        if isinstance(err, NotImplementedError):
            return _not_written(name, verbose)
        if err is not None:
            return _not_yet(*_projection_error(case, err), verbose)
        if not _tensors(result, 3):
            return _not_yet(
                "bad_return", f"{name} returned {_short(result)}; return (Q, K, V).", verbose)  # fmt: skip
        outcomes.append([t.detach() for t in result])

    def matches(bias: bool = True) -> bool:
        return all(
            _close(got[k], x @ layer.weight.detach().T
                   + (layer.bias.detach() if bias and layer.bias is not None else 0))
            for got, (_, x, layers) in zip(outcomes, cases, strict=True)
            for k, layer in enumerate(layers)
        )  # fmt: skip

    if matches():
        return _passed(
            f"{name} computes Q, K and V exactly as the layers would, on all {len(cases)} cases "
            f"(with and without bias, a batch, and a square case where a missing transpose would "
            f"have run silently): x @ weight.T + bias.",
            verbose)  # fmt: skip
    if matches(bias=False):
        return _not_yet("bias_missing", "Your products are right but the bias is missing. "
                        + why("bias_missing"), verbose)  # fmt: skip
    return _not_yet(
        "unknown",
        "Your tensors match none of the usual mistakes (no transpose, no bias). Return them in "
        "the order (Q, K, V), each computed as `x @ layer.weight.T + layer.bias`: each layer "
        "maps the last dim, d_model, to its own width.",
        verbose)  # fmt: skip


def solution_qkv(x: torch.Tensor, W_Q: nn.Linear, W_K: nn.Linear, W_V: nn.Linear) -> tuple:
    def project(layer):
        y = x @ layer.weight.T  # weight is (d_out, d_model): the transpose of the article's W
        if layer.bias is not None:
            y = y + layer.bias  # (d_out,), broadcast over the rows
        return y

    return project(W_Q), project(W_K), project(W_V)


# --- Exercise 2: how far a bias on K moves the scores ------------------------------------------


def _check_k_bias_shift(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check ``fn(query (L_q, d_k), b_K (d_k,))``: how far each row of Q Kᵀ / √d_k moves when
    b_K is added to every key, (L_q,) or (L_q, 1), measured from the scores themselves.

    Returns:
        CheckResult; ``mistake`` is None or one of: "not_written", "error", "bad_return",
        "wrong_shape", "unknown", or "k_bias_no_shift", "no_scale", "scale_d_k"
        (attn_lib.mistakes).

    Source: article sections 2.2 (scaling) and 3.2 (bias=False); Vaswani et al. 2017, eq. (1).
    """
    name, g = _name_of(fn), torch.Generator().manual_seed(_SEED + 3)
    mistakes = {  # a code of attn_lib.mistakes: (the wrong answer, what it shows)
        "k_bias_no_shift": (lambda q, b: torch.zeros(q.shape[0]), "You answer 0."),
        "no_scale": (lambda q, b: q @ b, ("Right idea, but that is the shift of the raw "
                     "scores Q Kᵀ, and the scores are scaled.")),
        "scale_d_k": (lambda q, b: q @ b / q.shape[-1], "Your shift is divided by d_k."),
    }  # fmt: skip
    matched = dict.fromkeys([None, *mistakes], True)
    for L_q, L_k, d_k in ((5, 5, 4), (3, 7, 6), (8, 4, 2)):
        query, key = torch.randn(L_q, d_k, generator=g), torch.randn(L_k, d_k, generator=g)
        b_K = torch.randn(d_k, generator=g)
        truth = (query @ (key + b_K).T - query @ key.T)[:, 0] / math.sqrt(d_k)  # (L_q,)
        got, err = _call(fn, query.clone(), b_K.clone())
        case = f"L_q = {L_q}, L_k = {L_k}, d_k = {d_k}"
        if err is not None:
            said = _raised_on(case, err) + "Fix that line and run the check again."
            return _call_failed(name, err, said, verbose)
        if not isinstance(got, torch.Tensor):
            return _not_yet("bad_return", f"{name} returned {_short(got)}, not a tensor.", verbose)
        got = got.detach().reshape(-1) if got.shape == (L_q, 1) else got.detach()
        if got.shape != truth.shape:
            return _not_yet(
                "wrong_shape",
                f"On the case '{case}' your answer has shape {tuple(got.shape)}; it should be "
                f"(L_q,) = ({L_q},): one number per query, the same for every key.",
                verbose)  # fmt: skip
        matched[None] &= _close(got, truth)
        for code, (wrong, _) in mistakes.items():
            matched[code] &= _close(got, wrong(query, b_K))
    if matched[None]:
        return _passed(
            f"{name} gives each row's shift, q_i·b_K / √d_k, on all 3 cases. It is the same for "
            f"every key j of row i, so softmax, which ignores a constant added to a row, gives "
            f"the same weights: a bias on K changes nothing.",
            verbose)  # fmt: skip
    for code, (_, shows) in mistakes.items():
        if matched[code]:
            return _not_yet(code, f"{shows} {why(code)}", verbose)
    return _not_yet(
        "unknown",
        "Your numbers match neither the shift nor a usual mistake. Expand q_i·(k_j + b_K) and "
        "keep the part that does not depend on j; then scale it as the scores are scaled.",
        verbose)  # fmt: skip


def solution_k_bias_shift(query: torch.Tensor, b_K: torch.Tensor) -> torch.Tensor:
    return query @ b_K / math.sqrt(query.size(-1))  # (L_q,): q_i·b_K / √d_k, for every key j


check_qkv_projection = recording("qkv", _check_qkv_projection)
check_k_bias_shift = recording("k_bias_shift", _check_k_bias_shift)
