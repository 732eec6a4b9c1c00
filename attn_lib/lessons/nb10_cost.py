"""Notebook 10's experiments and checkers (torch only), used by its sections "2 · Memory: scores
and weights grow as L²" (peak_intermediate_bytes, format_bytes), "3 · Time, measured"
(time_attention), "4 · Attention without the L × L matrix" (online_softmax_walk), "5 · What
chunking saves, and what it does not" (peak_intermediate_bytes, log_slope, largest_new_tensor,
matmul_flops), "6 · The dashboard" and "7 · Check yourself"; tools/benchmark.py (P4) uses
peak_intermediate_bytes too."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

from ..attention import scaled_dot_product_attention
from ..chunked import DEFAULT_BLOCK_SIZE, online_softmax_step
from ..masks import causal_mask
from ._checking import (
    CheckResult,
    _call,
    _call_failed,
    _known_mistake,
    _name_of,
    _not_yet,
    _number,
    _passed,
    _raised,
    _short,
    _value_difference,
    recording,
)
from ._experiments import _generator, crossover_length, one_thread

# The walk: one query row against 16 keys, the first 2 padding (blocked), so a walk in blocks
# of 1 or 2 keys starts with a block that has no allowed key.
WALK_L, WALK_D_K, WALK_D_V, WALK_PADDING, WALK_SEED = 16, 8, 4, 2, 10


def format_bytes(n: float) -> str:
    """A byte count in binary units with 1 decimal: '512.0 MiB', '3.3 KiB', '292 B'."""
    e = min(int(math.log2(max(n, 1))) // 10, 3)  # 0: B, 1: KiB, 2: MiB, 3: GiB
    return f"{n:.0f} B" if e == 0 else f"{n / 1024**e:.1f} {('KiB', 'MiB', 'GiB')[e - 1]}"


def peak_intermediate_bytes(L_q: int, L_k: int, d_k: int, d_v: int, *,
                            block_size: int = DEFAULT_BLOCK_SIZE, query_block_size: int | None = None,
                            batch: tuple[int, ...] = (), dtype: torch.dtype = torch.float32,
                            method: str = "chunked") -> int:  # fmt: skip
    """Bytes of the intermediates attention holds at once (not inputs, output, masks), from sizes,
    times the leading ``batch`` dims. ``method="naive"``, the article's code: scores and weights,
    2·L_q·L_k numbers. ``"chunked"``, attn_lib.chunked_attention (n_q = query_block_size or L_q,
    n_k = min(block_size, L_k), float32 for half-precision inputs): a block of scores n_q·n_k, the
    scaled queries n_q·d_k, acc and p·V 2·n_q·d_v, row state 8·n_q, a key block n_k·d_k (and for
    half precision the float32 key and value blocks n_k·(d_k + d_v)); nothing grows with L_k."""
    slices = math.prod(batch)
    if method == "naive":
        return 2 * L_q * L_k * slices * dtype.itemsize
    n_q = L_q if query_block_size is None else min(query_block_size, L_q)
    n_k = min(block_size, L_k)
    half = dtype in (torch.float16, torch.bfloat16)
    numbers = n_q * n_k + n_q * d_k + 2 * n_q * d_v + 8 * n_q + n_k * d_k + half * n_k * (d_k + d_v)
    return numbers * slices * (torch.float32.itemsize if half else dtype.itemsize)


def log_slope(x: Sequence[float], y: Sequence[float]) -> float:
    """Least-squares slope of log y against log x: a power law y ∝ x^p has slope p."""
    lx, ly = (torch.tensor([math.log(float(v)) for v in t], dtype=torch.float64) for t in (x, y))
    dx = lx - lx.mean()
    return float((dx * (ly - ly.mean())).sum() / (dx * dx).sum())


def time_attention(methods: Mapping[str, Callable], lengths: Sequence[int], *, d_k: int = 64,
                   repeats: int = 3, seed: int = 0) -> dict[str, dict[int, float]]:  # fmt: skip
    """method → {L: median CPU ms per call} on (1, L, d_k) float32 q, k, v (seeded), after a
    warm-up round, over ``repeats`` rounds in which the methods take turns; one intra-op thread,
    no autograd. The calling thread's CPU time: a busy machine delays a call but does not add to
    it. Still volatile (caches, CPU, build): assert only what no machine changes."""
    g, ms = _generator(seed), {name: {} for name in methods}
    with one_thread(), torch.no_grad():
        for L in lengths:
            q, k, v = (torch.randn(1, L, d_k, generator=g) for _ in range(3))  # (1, L, d_k)
            seconds: dict[str, list[float]] = {name: [] for name in methods}
            for _ in range(repeats + 1):  # the first round warms up
                for name, fn in methods.items():
                    start = time.thread_time()
                    fn(q, k, v)
                    seconds[name].append(time.thread_time() - start)
            for name, s in seconds.items():
                ms[name][L] = 1000.0 * statistics.median(s[1:])
    return ms


def largest_new_tensor(fn: Callable[[], object]) -> tuple[tuple[int, ...], int]:
    """Run ``fn()``; (shape, bytes) of the largest tensor its PyTorch calls (``@``, ``torch.exp``,
    ``masked_fill``, …, each intercepted) created, unless its storage is an argument's (an
    in-place result, a view). Buffers freed inside one C++ kernel are not seen.

    Source: torch.overrides.TorchFunctionMode (PyTorch's ``__torch_function__`` protocol).
    """
    largest: tuple[tuple[int, ...], int] = ((), 0)

    class _Watch(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            nonlocal largest
            kwargs = kwargs or {}
            given = {t.untyped_storage().data_ptr() for t in tree_flatten((args, kwargs))[0]
                     if isinstance(t, torch.Tensor)}  # fmt: skip
            out = func(*args, **kwargs)
            for t in tree_flatten(out)[0]:
                new = isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in given
                if new and t.untyped_storage().nbytes() > largest[1]:
                    largest = (tuple(t.shape), t.untyped_storage().nbytes())
            return out

    with torch.no_grad(), _Watch():
        fn()
    return largest


_T = torch.Tensor
_MATMULS = {torch.matmul, _T.matmul, _T.__matmul__, torch.mm, _T.mm, torch.bmm, _T.bmm}


def matmul_flops(fn: Callable[[], object]) -> int:
    """Run ``fn()``; the FLOPs of its matrix products: 2·a·b·c times the batch for each ``@``,
    ``matmul``, ``mm`` or ``bmm`` of (batches of) matrices (a × b) @ (b × c), as FlopCounterMode
    counts them (it sees ``F.linear``, ``einsum`` and fused kernels too, but takes a second to
    start); products with a vector, reductions and element-wise work are left out.

    Source: torch.utils.flop_counter (the convention); torch.overrides.TorchFunctionMode.
    """
    total = 0

    class _Count(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            nonlocal total
            a, b = (args + (None, None))[:2]
            out = func(*args, **(kwargs or {}))
            if func in _MATMULS and a.dim() >= 2 and b.dim() >= 2:  # out: (batch…, a, c)
                total += 2 * out.numel() * a.shape[-1]  # (torch.broadcast_shapes imports sympy)
            return out

    with torch.no_grad(), _Count():
        fn()
    return total


@dataclass(frozen=True)
class BlockState:
    """The walk's row after the key block start..stop-1: the running max before (m_old) and
    after (m), r = exp(m_old - m) (0 while m = -inf), the running sum l, and the running output
    acc / l (d_v,) (zeros while no key is allowed)."""

    start: int
    stop: int
    m_old: float
    m: float
    rescale: float
    l: float
    output: torch.Tensor


@dataclass(frozen=True)
class OnlineSoftmaxWalk:
    """The walk's query row, one key block at a time: its scores (16,), scaled, -inf at the
    padded keys 0 and 1; values (16, d_v); output (d_v,), from attn_lib's attention; states,
    one BlockState per key block, by attn_lib.chunked's own step."""

    block_size: int
    scores: torch.Tensor
    values: torch.Tensor
    output: torch.Tensor
    states: tuple[BlockState, ...]


@lru_cache(maxsize=WALK_L)
def online_softmax_walk(block_size: int) -> OnlineSoftmaxWalk:
    """The walk example (seed 10; d_k = 8, d_v = 4) in blocks of ``block_size`` keys (cached).

    Source: Milakov & Gimelshein 2018.
    """
    g = _generator(WALK_SEED)
    query = torch.randn(WALK_D_K, generator=g) * 1.5  # (d_k,); sharper, the max moves more
    keys = torch.randn(WALK_L, WALK_D_K, generator=g)  # (L_k, d_k)
    values = torch.randn(WALK_L, WALK_D_V, generator=g)  # (L_k, d_v)
    keep = torch.arange(WALK_L) >= WALK_PADDING  # (L_k,): left padding
    out, _ = scaled_dot_product_attention(query[None], keys, values, keep[None])  # (1, d_v)
    scores = (keys @ query / math.sqrt(WALK_D_K)).masked_fill(~keep, -math.inf)  # (L_k,)
    m, l, acc = torch.full((1, 1), -math.inf), torch.zeros(1, 1), torch.zeros(1, WALK_D_V)
    states = []
    for k0 in range(0, WALK_L, block_size):
        k1, m_old = min(k0 + block_size, WALK_L), float(m)
        m, l, acc = online_softmax_step(m, l, acc, scores[None, k0:k1].clone(), values[k0:k1])
        seen = float(m) > -math.inf
        rescale, output = (math.exp(m_old - float(m)), acc[0] / l[0]) if seen else (0.0, acc[0])
        states.append(BlockState(k0, k1, m_old, float(m), rescale, float(l), output.clone()))
    return OnlineSoftmaxWalk(block_size, scores, values, out[0], tuple(states))


# --- Check yourself ---------------------------------------------------------------------------


def _step_cases() -> list[tuple]:
    """(name, scaled scores (n_q, L_k), keep (n_q, L_k), values (L_k, d_v), a block size)."""
    g = torch.Generator().manual_seed(2034)
    s1, s2, s3 = (torch.randn(n_q, L_k, generator=g) * gain for n_q, L_k, gain in
                  ((1, 10, 1.0), (2, 9, 2.0), (3, 6, 2.0)))  # fmt: skip
    v1, v2, v3 = (torch.randn(L_k, d_v, generator=g) for L_k, d_v in ((10, 3), (9, 2), (6, 4)))
    pad = torch.stack([torch.arange(9) >= 3, torch.ones(9, dtype=torch.bool)])
    return [
        ("one row, 10 keys in blocks of 4, 4 and 2 (the max rises)",
         s1 + torch.linspace(0.0, 4.0, 10), torch.ones(1, 10, dtype=torch.bool), v1, 4),
        ("two rows, 9 keys in blocks of 3, row 0's first block all padding", s2, pad, v2, 3),
        ("three rows, 6 keys in blocks of 2, causal mask", s3, causal_mask(3, 6), v3, 2),
    ]  # fmt: skip


def _slipped_step(m: torch.Tensor, l: torch.Tensor, acc: torch.Tensor, s: torch.Tensor,
                  v: torch.Tensor, slip: str | None = None) -> tuple[torch.Tensor, ...]:  # fmt: skip
    """One step of the recurrence, right (slip None) or with one classic slip."""
    m_blk = s.amax(dim=-1, keepdim=True)
    m_new = m_blk if slip == "block_max" else torch.maximum(m, m_blk)
    ref = m_new if slip == "no_guard" else m_new.masked_fill(m_new == -math.inf, 0.0)
    r = torch.exp(ref - m) if slip == "inverted_rescale" else torch.exp(m - ref)
    p = torch.exp(s - ref)
    l_new = (l if slip in ("no_rescale", "acc_only") else r * l) + p.sum(dim=-1, keepdim=True)
    acc_new = (acc if slip in ("no_rescale", "l_only") else r * acc) + p @ v
    return (m if slip == "m_not_updated" else m_new), l_new, acc_new


_BOTH = "Both hold sums of exp(s − m) terms, so both need the factor r = exp(m_old − m_new)."
_STEP_SLIPS = {
    "no_guard": "Your running values turn into NaN on the row whose first block has no allowed "
                "key: m and the block's max are both -inf there, and exp(-inf - (-inf)) is NaN. "
                "Subtract 0 where m_new is -inf (`m_new.masked_fill(m_new == -math.inf, 0.0)`): "
                "the row's scores are all -inf, so r and p come out 0.",
    "no_rescale": "You add the new block to l and acc without rescaling what they hold. When "
                  "the max rises from m to m_new, every earlier exp(s − m) must become "
                  "exp(s − m_new): multiply the old l and acc by r = exp(m − m_new) first.",
    "l_only": f"You rescale l but not acc. {_BOTH}",
    "acc_only": f"You rescale acc but not l. {_BOTH}",
    "inverted_rescale": "Your rescale factor is upside down: exp(m_new − m) ≥ 1 grows the old "
                        "sums. It is r = exp(m_old − m_new) ≤ 1.",
    "block_max": "You keep the block's own max as m, not the running max: m_new = max(m, "
                 "block max). Otherwise a later block with a low max can overflow exp(s − m).",
    "m_not_updated": "You return the old m; the next step must see the new one: return m_new.",
}  # fmt: skip


def _run_steps(fn: Callable | None, case: tuple, slip: str | None = None) -> list | str:
    """Every block of a case through fn (None: the recurrence with ``slip``); m, l, acc after
    each block in one list, or a sentence saying what is wrong with what fn returned."""
    name, s, keep, v, size = case
    n_q, d_v = s.shape[0], v.shape[-1]
    s = s.masked_fill(~keep, -math.inf)
    state = (torch.full((n_q, 1), -math.inf), torch.zeros(n_q, 1), torch.zeros(n_q, d_v))
    states = []
    for k0 in range(0, s.shape[-1], size):
        block = (s[:, k0 : k0 + size], v[k0 : k0 + size])  # (n_q, n_k), (n_k, d_v)
        out = _slipped_step(*state, *block, slip) if fn is None else fn(
            *(t.clone() for t in (*state, *block)))  # fmt: skip
        if not isinstance(out, tuple | list) or len(out) != 3 or not all(
                isinstance(t, torch.Tensor) for t in out):  # fmt: skip
            return f"returned {_short(out)}; return the three tensors (m_new, l_new, acc_new)."
        if [tuple(t.shape) for t in out] != [(n_q, 1), (n_q, 1), (n_q, d_v)]:
            return (f"returned shapes {[tuple(t.shape) for t in out]} in the case '{name}'; m "
                    f"and l should be (n_q, 1) = {(n_q, 1)}, acc (n_q, d_v) = {(n_q, d_v)}. "
                    f"Reduce with keepdim=True (`scores.amax(dim=-1, keepdim=True)`).")  # fmt: skip
        state = tuple(t.detach().float() for t in out)
        states += state
    return states


def _close(x: torch.Tensor, y: torch.Tensor) -> bool:
    return torch.allclose(x, y, rtol=1e-4, atol=1e-6, equal_nan=True)


def _check_online_step(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check ``fn(m, l, acc, scores, v_block)`` → (m_new, l_new, acc_new), one step of the
    online softmax for n_q rows (m, l (n_q, 1); acc (n_q, d_v); scores (n_q, n_k), -inf where
    blocked; v_block (n_k, d_v)), block by block on three cases: a rising max, a row whose
    first block is all padding, a causal mask. ``mistake``: None, "not_written", "error",
    "bad_return", a key of _STEP_SLIPS or "unknown".

    Source: Milakov & Gimelshein 2018.
    """
    name, cases, got = _name_of(fn), _step_cases(), []
    for case in cases:
        run, err = _call(_run_steps, fn, case, quiet=True)
        if err is not None:
            return _call_failed(name, err, f"For the case '{case[0]}' your function raised "
                                f"{_raised(err)}", verbose)  # fmt: skip
        if isinstance(run, str):
            return _not_yet("bad_return", f"{name} {run}", verbose)
        got.append(run)
    want = [_run_steps(None, c) for c in cases]
    flat = [x for g in got for x in g]
    if all(map(_close, flat, [x for w in want for x in w])):
        return _passed(f"{name} gives the running max, sum and output of attn_lib's chunked "
                       f"attention after every block of all {len(cases)} cases, including the "
                       f"row whose first block is all padding (no NaN).", verbose)  # fmt: skip
    for slip, why in _STEP_SLIPS.items():
        if all(map(_close, flat, [x for c in cases for x in _run_steps(None, c, slip)])):
            return _not_yet(slip, why, verbose)
    case, g, w, i = next((c, g, w, i) for c, g, w in zip(cases, got, want, strict=True)
                         for i in range(len(g)) if not _close(g[i], w[i]))  # fmt: skip
    return _not_yet("unknown", f"In the case '{case[0]}', after block {i // 3} your "
                    f"{('m', 'l', 'acc')[i % 3]} is off: {_value_difference(g[i], w[i])}. Recall: "
                    f"m_new = max(m, block max); r = exp(m − m_new); p = exp(scores − m_new); "
                    f"l_new = r·l + Σp; acc_new = r·acc + p @ v_block.", verbose)  # fmt: skip


def _check_crossover(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check ``fn(d_model, d_k, d_v)`` → the L where L²·(d_k + d_v) = L·d_model·(2 d_k + d_v),
    on (100, 20, 60) → 125 (first: d_k ≠ d_v tells the mistakes apart), (512, 64, 64) → 768 and
    (64, 64, 64) → 96. ``mistake``: None, "not_written", "error", "bad_return", "just_d_model",
    "qk_only", "scores_only", "flops_mixed" or "wrong_value".

    Source: _experiments.crossover_length; article section 1.2.
    """
    name = _name_of(fn)
    for d_model, d_k, d_v in ((100, 20, 60), (512, 64, 64), (64, 64, 64)):
        args = f"d_model={d_model}, d_k={d_k}, d_v={d_v}"
        got, err = _call(fn, d_model, d_k, d_v)
        if err is not None:
            return _call_failed(name, err, f"For {args} your function raised {_raised(err)}",
                                verbose)  # fmt: skip
        got, is_number = _number(got)
        if not is_number:
            return _not_yet("bad_return", f"{name} returned {_short(got)}; return L, a number.",
                            verbose)  # fmt: skip
        want = crossover_length(d_model, d_k, d_v)
        if math.isclose(got, want, rel_tol=1e-9):
            continue
        code, why = _known_mistake(got, [
            (d_model, "just_d_model", 'That is the rule of thumb "about d_model".'),
            (2 * d_model, "qk_only", ("You balanced Q Kᵀ against the Q and K projections only; "
             "weights @ V and the V projection count too.")),
            (d_model * (2 * d_k + d_v) / d_k, "scores_only", "You left out weights @ V (L²·d_v)."),
            (2 * want, "flops_mixed", "Twice the answer: FLOPs against multiply-adds?"),
        ])  # fmt: skip
        return _not_yet(code, f"For {args} you gave L = {got:g}; the balance point is "
                        f"L = {want:g}. {why} Set L²·(d_k + d_v) = L·d_model·(2 d_k + d_v) and "
                        f"divide by L.".replace("  ", " "), verbose)  # fmt: skip
    return _passed(f"{name} finds L* = d_model·(2 d_k + d_v)/(d_k + d_v): 768 tokens for "
                   f"d_model = 512, d_k = d_v = 64, i.e. 1.5·d_model. Beyond it, attention's L² "
                   f"terms cost more than the projections.", verbose)  # fmt: skip


check_online_step = recording("online_step", _check_online_step)
check_crossover_length = recording("crossover_length", _check_crossover)


def solution_online_step(m, l, acc, scores, v_block):
    """Exercise 1 of notebook 10: one key block of the online softmax, with the guard."""
    m_new = torch.maximum(m, scores.amax(dim=-1, keepdim=True))  # (n_q, 1)
    ref = m_new.masked_fill(m_new == -math.inf, 0.0)  # the guard: never -inf - (-inf)
    r = torch.exp(m - ref)  # (n_q, 1): shrinks what was summed against the old max
    p = torch.exp(scores - ref)  # (n_q, n_k): 0 at blocked keys
    return m_new, r * l + p.sum(dim=-1, keepdim=True), r * acc + p @ v_block


def solution_crossover_length(d_model, d_k, d_v):
    """Exercise 2 of notebook 10: L²·(d_k + d_v) = L·d_model·(2 d_k + d_v), divided by L."""
    return d_model * (2 * d_k + d_v) / (d_k + d_v)
