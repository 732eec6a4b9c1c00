"""Notebook 10's data, experiments and checkers (torch only).

Used by notebook 10 (What attention costs: time, memory, and attention without the L × L
matrix), sections "1 · The bill, counted", "2 · Memory: the score matrix grows as L²", "3 ·
Time, measured", "4 · Attention without the L × L matrix: the online softmax", "6 · The guard:
exp(−∞ − (−∞)) is NaN", "8 · What chunking saves: memory", "9 · What chunking does not save:
work", "10 · A dashboard: the memory each method needs, and the walk step by step", "11 · Check
yourself".
"""

from __future__ import annotations

import math
import statistics
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import torch

from ..chunked import (
    BlockState,
    chunked_attention,
    chunked_attention_trace,
    peak_intermediate_bytes,
)
from ..core import scaled_dot_product_attention
from ..masks import causal_mask
from ..shapes import VALIDATING
from ._checking import (
    _SEED,
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
)
from ._experiments import _choice, _dim, _dims, _generator, _int

# The dashboard's grids: sequence lengths, query/key widths and key-block sizes.
COST_LENGTHS = (256, 512, 1024, 2048, 4096, 8192)
COST_D_KS = (16, 32, 64, 128, 256)
COST_BLOCK_SIZES = tuple(2**i for i in range(12))  # 1 … 2048
# "naive": the article's code (scores and weights, both L_q × L_k; attn_lib's
#          scaled_dot_product_attention holds both with autograd on, one without);
# "chunked": attn_lib.chunked_attention with every query at once (L_q × block scores);
# "tiled": the same with query blocks as large as the key blocks (block × block scores).
MEMORY_METHODS = ("naive", "chunked", "tiled")
MEMORY_METHOD_LABELS = {
    "naive": "naive: scores + weights, 2 · L_q · L_k",
    "chunked": "chunked, all queries: L_q × block",
    "tiled": "chunked, query blocks too: block × block",
}
# The small example the dashboard walks through: one query row, 16 keys of which the first
# WALK_PADDING are padding (blocked), so a walk in blocks of 1 or 2 starts with a block that
# has no allowed key at all.
WALK_L = 16
WALK_D_K = 8
WALK_D_V = 4
WALK_PADDING = 2
WALK_SEED = 10
WALK_QUERY_GAIN = 1.5  # sharpens the row a little, so the running max has something to do


def format_bytes(n: float) -> str:
    """A byte count in binary units with 1 decimal: '512.0 MiB', '3.3 KiB', '292 B'."""
    n = float(n)
    if n < 1024:
        return f"{n:.0f} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024.0
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}"
    raise AssertionError("unreachable")


def _log_slope(x: Sequence[float], y: Sequence[float]) -> float:
    """Least-squares slope of log y against log x (a power law y ∝ x^p has slope p)."""
    lx = torch.tensor([math.log(v) for v in x], dtype=torch.float64)
    ly = torch.tensor([math.log(v) for v in y], dtype=torch.float64)
    if lx.numel() < 2:
        raise ValueError("a slope needs at least two points.")
    dx = lx - lx.mean()
    return float((dx * (ly - ly.mean())).sum() / (dx * dx).sum())


@dataclass(frozen=True)
class MemoryTable:
    """Peak intermediate bytes of the three methods over many lengths (self-attention).

    Computed with :func:`attn_lib.chunked.peak_intermediate_bytes` (tensor sizes, not a
    measurement), one sequence (B = 1), L_q = L_k = L, d_v = d_k.

    Attributes:
        lengths: (n,) int64, the L values.
        d_k, d_v, block_size: the widths and the key-block size asked for (each method
            uses min(block_size, L)).
        dtype: the inputs' dtype.
        naive, chunked, tiled: (n,) float64 bytes of each method (see MEMORY_METHODS).
    """

    lengths: torch.Tensor
    d_k: int
    d_v: int
    block_size: int
    dtype: torch.dtype
    naive: torch.Tensor
    chunked: torch.Tensor
    tiled: torch.Tensor

    def bytes(self, method: str) -> torch.Tensor:
        """(n,) bytes of one method."""
        return getattr(self, _choice("method", method, MEMORY_METHODS))

    def slope(self, method: str, min_length: int = 1) -> float:
        """Log-log slope of a method's bytes against L, over the lengths ≥ ``min_length``."""
        keep = self.lengths >= min_length
        return _log_slope(self.lengths[keep].tolist(), self.bytes(method)[keep].tolist())


def memory_table(
    lengths: Sequence[int],
    d_k: int = 64,
    block_size: int = 512,
    *,
    d_v: int | None = None,
    dtype: torch.dtype = torch.float32,
) -> MemoryTable:
    """Bytes each method holds at once in self-attention, for each sequence length L.

    * naive (the article's code; ``scaled_dot_product_attention`` with autograd on):
      scores and weights, 2·L² numbers — grows as L², whatever d_k;
    * chunked (``chunked_attention``, all queries at once): one (L, block) block of scores
      plus per-query accumulators — grows as L (the L_q side), not with L_k;
    * tiled (``chunked_attention(..., query_block_size=block_size)``): one (block, block)
      tile plus accumulators for one query block — flat once L ≥ block.

    Args:
        lengths: (n,) sequence lengths L ≥ 1.
        d_k: query/key width; d_v: value width (default d_k).
        block_size: keys per block (and queries per block for "tiled").
        dtype: the inputs' dtype (float32: 4 bytes a number).

    Returns:
        :class:`MemoryTable`.

    Raises:
        ShapeError: an empty list or a size < 1. TypeError / ValueError: as
            peak_intermediate_bytes.

    Source: attn_lib.chunked.peak_intermediate_bytes; Rabe & Staats 2021; Dao et al. 2022.
    """
    Ls = _dims("lengths", lengths)
    d_k = _dim("d_k", d_k)
    d_v = d_k if d_v is None else _dim("d_v", d_v)
    block_size = _dim("block_size", block_size)

    def column(**kwargs: object) -> torch.Tensor:
        sizes = [
            peak_intermediate_bytes(L, L, d_k, d_v, block_size=block_size, dtype=dtype, **kwargs)
            for L in Ls
        ]
        return torch.tensor(sizes, dtype=torch.float64)

    return MemoryTable(
        lengths=torch.tensor(Ls),
        d_k=d_k,
        d_v=d_v,
        block_size=block_size,
        dtype=dtype,
        naive=column(method="naive"),
        chunked=column(method="chunked"),
        tiled=column(method="chunked", query_block_size=block_size),
    )


def walk_block_size(L: int, block_size: int) -> int:
    """The block size of the 16-key walk that mirrors a setting's number of key blocks.

    A setting with L keys in blocks of ``block_size`` has ceil(L / block_size) blocks; the
    walk shows the same number of blocks over its WALK_L = 16 keys, capped at 16 blocks of
    one key: ``ceil(16 / min(16, n_blocks))``.

    Raises:
        ShapeError: L or block_size < 1.
    """
    L, block_size = _dim("L", L), _dim("block_size", block_size)
    n_blocks = min(WALK_L, -(-L // min(block_size, L)))
    return -(-WALK_L // n_blocks)


@dataclass(frozen=True)
class MemorySetting:
    """One setting of the chunked-attention dashboard: memory at L and over all lengths.

    Attributes:
        L, d_k: the sequence length and the query/key width (d_v = d_k).
        block_size: the key-block size asked for; block: the one used, min(block_size, L).
        n_blocks: ceil(L / block), key blocks per query row.
        table: :func:`memory_table` over COST_LENGTHS for this d_k and block size.
        at: method → bytes at L (ints).
        walk_block: the walk's block size, :func:`walk_block_size`.
    """

    L: int
    d_k: int
    block_size: int
    block: int
    n_blocks: int
    table: MemoryTable
    at: dict[str, int]
    walk_block: int

    @property
    def title(self) -> str:
        """One line naming the setting and its number of key blocks."""
        clipped = ""
        if self.block != self.block_size:
            clipped = f" (asked {self.block_size}, clipped to L)"
        plural = "s" if self.n_blocks > 1 else ""
        return (f"L = {self.L}, d_k = d_v = {self.d_k}, key block = {self.block}{clipped}: "
                f"{self.n_blocks} block{plural} per query row")


def memory_setting(L: int = 4096, d_k: int = 64, block_size: int = 512) -> MemorySetting:
    """Memory of the three methods at one (L, d_k, block size), float32, one sequence.

    Args:
        L: one of COST_LENGTHS. d_k: one of COST_D_KS. block_size: one of COST_BLOCK_SIZES
            (used as min(block_size, L)).

    Returns:
        :class:`MemorySetting` (cached: the same arguments return the same object).

    Raises:
        ValueError: a value outside the dashboard's grids. TypeError: not an int.

    Source: attn_lib.chunked.peak_intermediate_bytes.
    """
    for name, value, grid in (("L", L, COST_LENGTHS), ("d_k", d_k, COST_D_KS),
                              ("block_size", block_size, COST_BLOCK_SIZES)):  # fmt: skip
        _int(name, value, 1)
        if value not in grid:
            raise ValueError(f"{name} must be one of {grid}, got {value}.")
    return _memory_setting(int(L), int(d_k), int(block_size))


@lru_cache(maxsize=512)
def _memory_setting(L: int, d_k: int, block_size: int) -> MemorySetting:
    table = memory_table(COST_LENGTHS, d_k, block_size)
    i = COST_LENGTHS.index(L)
    block = min(block_size, L)
    return MemorySetting(
        L=L,
        d_k=d_k,
        block_size=block_size,
        block=block,
        n_blocks=-(-L // block),
        table=table,
        at={m: int(table.bytes(m)[i]) for m in MEMORY_METHODS},
        walk_block=walk_block_size(L, block_size),
    )


@dataclass(frozen=True)
class WalkExample:
    """The dashboard's small example: one query row against 16 keys, the first 2 padding.

    Attributes:
        query: (d_k,) float32. keys: (16, d_k). values: (16, d_v). keep: (16,) bool,
            False at the padded keys.
        scores: (16,) the scaled scores q·k_j / √d_k, -inf at blocked keys.
        weights: (16,) softmax of the scores (0 at blocked keys).
        output: (d_v,) weights @ values, from attn_lib.scaled_dot_product_attention.
    """

    query: torch.Tensor
    keys: torch.Tensor
    values: torch.Tensor
    keep: torch.Tensor
    scores: torch.Tensor
    weights: torch.Tensor
    output: torch.Tensor


@lru_cache(maxsize=1)
def _walk_example() -> WalkExample:
    g = _generator(WALK_SEED)
    query = torch.randn(WALK_D_K, generator=g) * WALK_QUERY_GAIN  # (d_k,)
    keys = torch.randn(WALK_L, WALK_D_K, generator=g)  # (L_k, d_k)
    values = torch.randn(WALK_L, WALK_D_V, generator=g)  # (L_k, d_v)
    keep = torch.arange(WALK_L) >= WALK_PADDING  # (L_k,): left padding
    out, w = scaled_dot_product_attention(query[None], keys, values, keep[None])  # (1, d_v), (1, L)
    scores = (keys @ query / math.sqrt(WALK_D_K)).masked_fill(~keep, -math.inf)  # (L_k,)
    return WalkExample(query, keys, values, keep, scores, w[0], out[0])


def walk_example() -> WalkExample:
    """The seeded example of the dashboard's walk (seed 10; d_k = 8, d_v = 4; copies).

    Source: this series (notebook 10).
    """
    ex = _walk_example()
    return WalkExample(*(t.clone() for t in (ex.query, ex.keys, ex.values, ex.keep, ex.scores,
                                             ex.weights, ex.output)))  # fmt: skip


@dataclass(frozen=True)
class OnlineSoftmaxWalk:
    """The online softmax of the walk example's query row, one key block at a time.

    Attributes:
        block_size: keys per block.
        example: the :class:`WalkExample`.
        states: one :class:`attn_lib.chunked.BlockState` per key block, from
            :func:`attn_lib.chunked.chunked_attention_trace` (the library's own recurrence).
        gaps: (n_blocks,) float32, max |running output − final output| after each block.
    """

    block_size: int
    example: WalkExample
    states: tuple[BlockState, ...]
    gaps: torch.Tensor

    @property
    def n_steps(self) -> int:
        """Number of key blocks (steps of the walk)."""
        return len(self.states)

    def l_before(self, step: int) -> float:
        """The running sum l before block ``step`` (0 before the first block)."""
        return 0.0 if step == 0 else self.states[step - 1].l

    def acc_before(self, step: int) -> torch.Tensor:
        """The running (unnormalised) output before block ``step`` ((d_v,) zeros at first)."""
        return torch.zeros(WALK_D_V) if step == 0 else self.states[step - 1].acc


def online_softmax_walk(block_size: int) -> OnlineSoftmaxWalk:
    """Trace the walk example's online softmax with keys in blocks of ``block_size``.

    Args:
        block_size: keys per block, 1 … 16 (a larger block is one block).

    Returns:
        :class:`OnlineSoftmaxWalk` (cached: the same block size returns the same object).

    Raises:
        TypeError: not an int. ValueError: < 1 or > 16.

    Source: attn_lib.chunked.chunked_attention_trace; Milakov & Gimelshein 2018.
    """
    block_size = _int("block_size", block_size, 1)
    if block_size > WALK_L:
        raise ValueError(f"block_size must be in 1 … {WALK_L}, got {block_size}.")
    return _online_softmax_walk(block_size)


@lru_cache(maxsize=WALK_L)
def _online_softmax_walk(block_size: int) -> OnlineSoftmaxWalk:
    ex = _walk_example()
    states = chunked_attention_trace(ex.query[None], ex.keys, ex.values, ex.keep[None],
                                     block_size=block_size)  # fmt: skip
    gaps = torch.stack([(s.output - ex.output).abs().max() for s in states])  # (n_blocks,)
    return OnlineSoftmaxWalk(block_size, ex, tuple(states), gaps)


@dataclass(frozen=True)
class AttentionTimings:
    """Wall-clock times of attention implementations against L (see :func:`time_attention`).

    Attributes:
        methods: the method names, in the order given.
        lengths: every L attempted (timed or skipped).
        ms: method → {L: median milliseconds per call}, for the lengths it was timed at.
        skipped: lengths not timed because the time budget would have been exceeded.
        seconds: wall time of the whole measurement, warm-up included.
        threads: torch intra-op threads used. d_k: width of q, k, v. repeats: timed calls
            per method and length (after one warm-up call).
    """

    methods: tuple[str, ...]
    lengths: tuple[int, ...]
    ms: dict[str, dict[int, float]]
    skipped: tuple[int, ...]
    seconds: float
    threads: int
    d_k: int
    repeats: int

    def slope(self, method: str, min_length: int = 512) -> float:
        """Log-log slope of a method's time against L over its lengths ≥ ``min_length``."""
        points = {L: t for L, t in self.ms[method].items() if L >= min_length}
        return _log_slope(list(points), list(points.values()))

    def table(self) -> str:
        """The times as a text table, one row per length (ms, 2 decimals; '—' = not timed)."""
        head = f"{'L':>6}" + "".join(f"{m:>12}" for m in self.methods)
        rows = [head + "   (ms per call, median)"]
        for L in self.lengths:
            cells = [self.ms[m].get(L) for m in self.methods]
            rows.append(f"{L:>6}" + "".join(f"{'—':>12}" if c is None else f"{c:>12.2f}"
                                            for c in cells))  # fmt: skip
        return "\n".join(rows)


def time_attention(
    methods: Mapping[str, Callable[[torch.Tensor, torch.Tensor, torch.Tensor], object]],
    lengths: Sequence[int],
    *,
    d_k: int = 64,
    repeats: int = 3,
    max_length: Mapping[str, int] | None = None,
    budget_s: float | None = None,
    budget_from: int = 0,
    threads: int | None = 1,
    seed: int = 0,
) -> AttentionTimings:
    """Time each method on (1, L, d_k) float32 query, key and value, for each L.

    Protocol: for each L (in the order given), draw q, k, v once (seeded); call every
    method once to warm up (first-touch allocation, lazy initialisation); then ``repeats``
    rounds in which every method is called once, interleaved (so that a slow spell of a
    shared machine hits all methods alike); keep each method's median. Runs under
    ``torch.no_grad()`` on ``threads`` intra-op threads (restored afterwards).

    With ``budget_s``, a length ≥ ``budget_from`` is skipped (with every longer one) when
    its predicted cost, the last length's time scaled by (L / L_prev)², would take the
    total past the budget; shorter lengths are always timed.

    Timings are volatile: they differ on every run and every machine. Show them; never
    assert them.

    Args:
        methods: name → fn(q, k, v).
        lengths: the L values, increasing.
        d_k: width of q, k and v.
        repeats: timed calls per method and length.
        max_length: name → the largest L at which to time that method (default: all).
        budget_s: total seconds not to exceed, or None.
        budget_from: the shortest length the budget may skip.
        threads: torch threads during the measurement, or None to leave it.
        seed: for q, k, v.

    Returns:
        :class:`AttentionTimings`.

    Raises:
        ShapeError / TypeError / ValueError: bad sizes, repeats < 1, an empty ``methods``.

    Source: Python ``time.perf_counter``; torch.utils.benchmark's advice (warm up, repeat,
        report a median).
    """
    if not methods:
        raise ValueError("give at least one method to time.")
    Ls = _dims("lengths", lengths)
    d_k = _dim("d_k", d_k)
    repeats = _int("repeats", repeats, 1)
    limits = dict(max_length or {})
    g = _generator(seed)
    ms: dict[str, dict[int, float]] = {name: {} for name in methods}
    skipped: list[int] = []
    previous_threads = torch.get_num_threads()
    start = time.perf_counter()
    last_L, last_s = 0, {}  # the previous length, and each method's seconds per call there
    try:
        if threads is not None:
            torch.set_num_threads(_int("threads", threads, 1))
        with torch.no_grad():
            for L in Ls:
                active = {n: fn for n, fn in methods.items() if L <= limits.get(n, L)}
                if budget_s is not None and L >= budget_from and last_s:
                    per_round = sum(last_s.get(n, max(last_s.values())) for n in active)
                    predicted = per_round * (L / last_L) ** 2 * (repeats + 1)
                    if time.perf_counter() - start + predicted > budget_s:
                        skipped.extend(n for n in Ls if n >= L)
                        break
                q, k, v = (torch.randn(1, L, d_k, generator=g) for _ in range(3))
                samples: dict[str, list[float]] = {n: [] for n in active}
                for round_ in range(repeats + 1):  # round 0 is the warm-up
                    for name, fn in active.items():
                        t0 = time.perf_counter()
                        fn(q, k, v)
                        if round_:
                            samples[name].append(time.perf_counter() - t0)
                for name, t in samples.items():
                    ms[name][L] = 1000.0 * statistics.median(t)
                last_L, last_s = L, {n: statistics.median(t) for n, t in samples.items()}
    finally:
        torch.set_num_threads(previous_threads)
    return AttentionTimings(
        methods=tuple(methods),
        lengths=tuple(Ls),
        ms=ms,
        skipped=tuple(skipped),
        seconds=time.perf_counter() - start,
        threads=threads if threads is not None else previous_threads,
        d_k=d_k,
        repeats=repeats,
    )


@dataclass(frozen=True)
class NewTensor:
    """The largest tensor created while a function ran (see :func:`largest_new_tensor`).

    Attributes:
        nbytes: bytes of its storage. shape: its shape. op: the ATen operator that made it.
    """

    nbytes: int
    shape: tuple[int, ...]
    op: str


def new_tensors(fn: Callable[[], object], *, grad: bool = False) -> list[NewTensor]:
    """Run ``fn()`` and list the tensors its PyTorch function calls created, in order.

    Every call of a PyTorch function or tensor method made by the code (``@``,
    ``torch.exp``, ``masked_fill``, ``torch.zeros``, …) is intercepted (a
    ``TorchFunctionMode``) and each tensor it returns is recorded with its storage size;
    tensors that existed before the call (its inputs, an ``out=`` argument, the tensor an
    in-place method writes into) and views of them do not count. Buffers that a single C++
    kernel uses internally and frees before returning are not seen.

    Args:
        fn: the code to run, e.g. ``lambda: attn_lib.scaled_dot_product_attention(q, k, v)``.
        grad: run it with autograd on (default off, as ``torch.no_grad()``); the inputs
            must require grad for autograd to record anything.

    Returns:
        A list of :class:`NewTensor`.

    Source: torch.overrides.TorchFunctionMode (PyTorch's ``__torch_function__`` protocol).
    """
    from torch.overrides import TorchFunctionMode
    from torch.utils._pytree import tree_flatten

    made: list[NewTensor] = []

    class _Record(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            given = {t.untyped_storage().data_ptr() for t in tree_flatten((args, kwargs))[0]
                     if isinstance(t, torch.Tensor)}  # fmt: skip
            out = func(*args, **kwargs)
            for t in tree_flatten(out)[0]:
                if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in given:
                    name = getattr(func, "__qualname__", None) or getattr(func, "__name__", "")
                    made.append(NewTensor(t.untyped_storage().nbytes(), tuple(t.shape), str(name)))
            return out

    with torch.set_grad_enabled(grad), _Record():
        fn()
    return made


def largest_new_tensor(fn: Callable[[], object]) -> NewTensor:
    """Run ``fn()`` (without autograd) and report the largest tensor it created.

    See :func:`new_tensors` for what is seen. This measures what the code really creates,
    as a check of the sizes computed by :func:`attn_lib.chunked.peak_intermediate_bytes`.

    Returns:
        :class:`NewTensor` (nbytes 0, shape (), op "" if nothing was created).

    Source: torch.overrides.TorchFunctionMode (PyTorch's ``__torch_function__`` protocol).
    """
    return max(new_tensors(fn), key=lambda t: t.nbytes, default=NewTensor(0, (), ""))


def matmul_flops(fn: Callable[[], object]) -> int:
    """Run ``fn()`` and count the floating-point operations of its matrix products.

    Every PyTorch function call made by the code is intercepted (a ``TorchFunctionMode``);
    each matrix product — ``@``, ``torch.matmul``, ``mm``, ``bmm``, ``mv``, ``dot``,
    ``addmm``, ``baddbmm``, as functions or tensor methods — counts 2·a·b·c FLOPs for
    (a × b) @ (b × c) (one multiply and one add per multiply-add), times the broadcast
    batch size. Element-wise work (exponentials, the rescaling of a running sum) is not
    counted, nor are the dot products with which attn_lib's input checks take the norm of
    each input (validation, not attention's work), nor a fused kernel such as
    ``F.scaled_dot_product_attention`` or ``einsum``. The convention of ``torch.utils.flop_counter.FlopCounterMode`` (the tests
    compare both), without the second that its first use takes to import.

    Returns:
        FLOPs, an int.

    Source: torch.utils.flop_counter (the counting convention); torch.overrides.
    """
    from torch.overrides import TorchFunctionMode

    def product(a: torch.Tensor, b: torch.Tensor) -> int:
        sa = tuple(a.shape) if a.dim() > 1 else (1, *a.shape)  # a vector is one row
        sb = tuple(b.shape) if b.dim() > 1 else (*b.shape, 1)  # ... or one column
        batch = math.prod(torch.broadcast_shapes(sa[:-2], sb[:-2]))
        return 2 * batch * sa[-2] * sa[-1] * sb[-1]

    T = torch.Tensor
    plain = {torch.matmul, T.matmul, T.__matmul__, torch.mm, T.mm, torch.bmm, T.bmm,
             torch.mv, T.mv, torch.dot, T.dot}  # fmt: skip
    accumulate = {torch.addmm, T.addmm, torch.baddbmm, T.baddbmm}  # input + a @ b
    total = [0]

    class _Count(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if VALIDATING.get():  # attn_lib's input checks (a dot product): not the work
                pass
            elif func in plain:
                total[0] += product(args[0], args[1])
            elif func is T.__rmatmul__:
                total[0] += product(args[1], args[0])
            elif func in accumulate:
                total[0] += product(args[1], args[2])
            return func(*args, **(kwargs or {}))

    with torch.no_grad(), _Count():
        fn()
    return total[0]


@dataclass(frozen=True)
class _StepCase:
    name: str
    query: torch.Tensor  # (n_q, d_k)
    key: torch.Tensor  # (L_k, d_k)
    value: torch.Tensor  # (L_k, d_v)
    keep: torch.Tensor  # (n_q, L_k) bool
    block_size: int

    def blocks(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """(scores (n_q, n_k) with -inf at blocked keys, value block (n_k, d_v)) per block."""
        q = self.query * (1.0 / math.sqrt(self.query.shape[-1]))  # as chunked_attention scales
        out = []
        for k0 in range(0, self.key.shape[0], self.block_size):
            k1 = min(k0 + self.block_size, self.key.shape[0])
            s = (q @ self.key[k0:k1].T).masked_fill(~self.keep[:, k0:k1], -math.inf)
            out.append((s, self.value[k0:k1]))
        return out


def _step_cases() -> list[_StepCase]:
    g = torch.Generator().manual_seed(_SEED + 10)

    def qkv(n_q: int, L_k: int, d_k: int, d_v: int, gain: float) -> tuple[torch.Tensor, ...]:
        return (torch.randn(n_q, d_k, generator=g) * gain, torch.randn(L_k, d_k, generator=g),
                torch.randn(L_k, d_v, generator=g))  # fmt: skip

    # Case 1: the keys get more and more aligned with the query, so the running max rises.
    q1, k1, v1 = qkv(1, 10, 4, 3, 1.0)
    k1 = k1 * 0.3 + torch.linspace(0.0, 3.0, 10)[:, None] * q1 / q1.norm()
    pad = torch.arange(9) >= 3  # case 2: the first 3 keys are padding for row 0
    return [
        _StepCase("one row, 10 keys in blocks of 4, 4 and 2 (the max rises)", q1, k1, v1,
                  torch.ones(1, 10, dtype=torch.bool), 4),
        _StepCase("two rows, 9 keys in blocks of 3, row 0's first block all padding",
                  *qkv(2, 9, 5, 2, 2.0), torch.stack([pad, torch.ones(9, dtype=torch.bool)]), 3),
        _StepCase("three rows, 6 keys in blocks of 2, causal mask", *qkv(3, 6, 3, 4, 2.0),
                  causal_mask(3, 6), 2),
    ]  # fmt: skip


def _reference_states(case: _StepCase) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """(m (n_q, 1), l (n_q, 1), acc (n_q, d_v)) after each block, from attn_lib's trace."""
    rows = [chunked_attention_trace(case.query, case.key, case.value, case.keep,
                                    block_size=case.block_size, row=i)
            for i in range(case.query.shape[0])]  # fmt: skip
    states = []
    for j in range(len(rows[0])):
        m = torch.tensor([[r[j].m] for r in rows])
        l = torch.tensor([[r[j].l] for r in rows])
        acc = torch.stack([r[j].acc for r in rows])
        states.append((m, l, acc))
    return states


def _variant_step(m: torch.Tensor, l: torch.Tensor, acc: torch.Tensor, s: torch.Tensor,
                  v: torch.Tensor, slip: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One step of the recurrence with a classic slip (see check_online_softmax_step)."""
    m_blk = s.amax(dim=-1, keepdim=True)
    m_new = m_blk if slip == "block_max" else torch.maximum(m, m_blk)
    ref = m_new if slip == "no_guard" else m_new.masked_fill(m_new == -math.inf, 0.0)
    r = torch.exp(ref - m) if slip == "inverted_rescale" else torch.exp(m - ref)
    p = torch.exp(s - ref)
    l_new = (l if slip in ("no_rescale", "acc_only") else r * l) + p.sum(dim=-1, keepdim=True)
    acc_new = (acc if slip in ("no_rescale", "l_only") else r * acc) + p @ v
    return (m if slip == "m_not_updated" else m_new), l_new, acc_new


_STEP_SLIPS = {
    "no_guard": (
        "Your running values turn into NaN on the row whose first block has no allowed key. "
        "There m and the block's max are both -inf, and exp(-inf - (-inf)) = exp(NaN) = NaN. "
        "Subtract 0 instead of m_new where m_new is -inf (`m_new.masked_fill(m_new == "
        "-math.inf, 0.0)`): all that row's scores are -inf, so r and p come out 0 and the row "
        "stays empty, as it should."
    ),
    "no_rescale": (
        "You add the new block to l and acc without rescaling what they already hold. When "
        "the running max rises from m to m_new, every earlier term exp(s - m) must become "
        "exp(s - m_new): multiply the old l and acc by r = exp(m - m_new) first."
    ),
    "l_only": (
        "You rescale l by r = exp(m - m_new) but not acc. Both hold sums of exp(s - m) "
        "terms, so both need the factor when the max rises."
    ),
    "acc_only": (
        "You rescale acc by r = exp(m - m_new) but not l. Both hold sums of exp(s - m) "
        "terms, so both need the factor when the max rises."
    ),
    "inverted_rescale": (
        "Your rescale factor is upside down: exp(m_new - m) ≥ 1 grows the old sums instead "
        "of shrinking them. It is r = exp(m_old - m_new) ≤ 1."
    ),
    "block_max": (
        "You keep the block's own max as m, not the running max. The output can still come "
        "out right (every term is rescaled consistently), but m is no longer the largest "
        "score seen so far, so exp(s - m) can overflow for a later block with a low max "
        "(and a block with no allowed key resets m to -inf). Use m_new = max(m, block max)."
    ),
    "m_not_updated": (
        "You return the old m. The next step must see the new running max: return m_new."
    ),
}


def _run_steps(
    fn: Callable, case: _StepCase
) -> tuple[list[tuple[torch.Tensor, ...]] | None, str | None]:
    """Run fn over every block of a case; (states, None) or (None, problem sentence)."""
    n_q, d_v = case.query.shape[0], case.value.shape[-1]
    m = torch.full((n_q, 1), -math.inf)
    l = torch.zeros(n_q, 1)
    acc = torch.zeros(n_q, d_v)
    states = []
    for j, (s, v) in enumerate(case.blocks()):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = fn(m.clone(), l.clone(), acc.clone(), s.clone(), v.clone())
        if not isinstance(out, tuple | list) or len(out) != 3:
            return None, (f"returned {type(out).__name__}; return the tuple (m_new, l_new, "
                          f"acc_new).")  # fmt: skip
        if not all(isinstance(t, torch.Tensor) for t in out):
            return None, "must return three tensors (m_new, l_new, acc_new)."
        shapes = [tuple(t.shape) for t in out]
        if shapes != [(n_q, 1), (n_q, 1), (n_q, d_v)]:
            return None, (f"returned shapes {shapes} after block {j} of case '{case.name}'; "
                          f"they should be m (n_q, 1) = {(n_q, 1)}, l {(n_q, 1)} and acc "
                          f"(n_q, d_v) = {(n_q, d_v)}. Reduce with keepdim=True "
                          f"(`scores.amax(dim=-1, keepdim=True)`, `p.sum(dim=-1, "
                          f"keepdim=True)`).")  # fmt: skip
        m, l, acc = (t.detach().float() for t in out)
        states.append((m, l, acc))
    return states, None


def _same_states(a: list[tuple[torch.Tensor, ...]], b: list[tuple[torch.Tensor, ...]]) -> bool:
    return all(
        torch.allclose(x, y, rtol=1e-4, atol=1e-6, equal_nan=True)
        for sa, sb in zip(a, b, strict=True)
        for x, y in zip(sa, sb, strict=True)
    )


def check_online_softmax_step(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check one step of the online softmax against attn_lib's trace, block by block.

    ``fn(m, l, acc, scores, v_block)`` receives the running state of n_q query rows —
    m (n_q, 1) the running max (-inf before any allowed key), l (n_q, 1) the running sum of
    exp(score - m), acc (n_q, d_v) the running sum of exp(score - m)·v — and one key
    block: scores (n_q, n_k), already scaled, -inf at blocked keys, and v_block (n_k, d_v).
    It returns (m_new, l_new, acc_new). The checker starts from m = -inf, l = 0, acc = 0,
    feeds every block of three cases (a rising max; a row whose first block is all
    padding; a causal mask), and compares every state with
    :func:`attn_lib.chunked.chunked_attention_trace`, then acc / l with
    :func:`attn_lib.chunked.chunked_attention`.

    Args:
        fn: the function to check.
        verbose: print the feedback paragraph.

    Returns:
        CheckResult; ``mistake`` is None or one of: "not_written", "error", "bad_return",
        "no_guard", "no_rescale", "l_only", "acc_only", "inverted_rescale", "block_max",
        "m_not_updated", "unknown".

    Source: Milakov & Gimelshein 2018; attn_lib.chunked (module docstring).
    """
    name = _name_of(fn)
    cases = _step_cases()
    got = []
    for case in cases:
        run, err = _call(_run_steps, fn, case)
        if err is not None:
            return _call_failed(
                name,
                err,
                f"For the case '{case.name}' your function raised {_raised(err)}",
                verbose,
            )
        states, problem = run
        if problem is not None:
            return _not_yet("bad_return", f"{name} {problem}", verbose)
        got.append(states)
    want = [_reference_states(c) for c in cases]
    if all(_same_states(g, w) for g, w in zip(got, want, strict=True)):
        outputs = [(st[-1][2] / st[-1][1].masked_fill(st[-1][0] == -math.inf, 1.0))
                   for st in got]  # fmt: skip
        for case, out in zip(cases, outputs, strict=True):
            ref = chunked_attention(case.query, case.key, case.value, case.keep,
                                    block_size=case.block_size)  # fmt: skip
            torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)
        return _passed(f"{name} gives the same running max, running sum and "
                       f"accumulator as attn_lib's trace after every block of all "
                       f"{len(cases)} cases, including the row whose first block is all "
                       f"padding (no NaN), and acc / l after the last block is the attention "
                       f"output.", verbose)  # fmt: skip
    for slip, why in _STEP_SLIPS.items():
        variant = []
        for case in cases:
            n_q, d_v = case.query.shape[0], case.value.shape[-1]
            state = (torch.full((n_q, 1), -math.inf), torch.zeros(n_q, 1), torch.zeros(n_q, d_v))
            seq = []
            for s, v in case.blocks():
                state = _variant_step(*state, s, v, slip)
                seq.append(state)
            variant.append(seq)
        if all(_same_states(g, v) for g, v in zip(got, variant, strict=True)):
            return _not_yet(slip, why, verbose)
    for case, g, w in zip(cases, got, want, strict=True):
        for j, (sg, sw) in enumerate(zip(g, w, strict=True)):
            for label, x, y in zip(("m", "l", "acc"), sg, sw, strict=True):
                if not torch.allclose(x, y, rtol=1e-4, atol=1e-6, equal_nan=True):
                    return _not_yet("unknown", f"In the case '{case.name}', "
                                   f"after block {j} your {label} is off: "
                                   f"{_value_difference(x, y)}. Recall: m_new = "
                                   f"max(m, block max); r = exp(m - m_new); p = exp(scores - "
                                   f"m_new); l_new = r·l + Σp; acc_new = r·acc + p @ v_block.",
                                   verbose)  # fmt: skip
    raise AssertionError("unreachable: states differ but no difference was found")


# (B, L, dtype) → bytes of one (B, L, L) score matrix.
_SCORE_BYTES_CASES = (
    (8, 4096, torch.float32),
    (2, 1000, torch.float16),
    (3, 77, torch.float64),
    (1, 8192, torch.bfloat16),
)


def score_matrix_bytes(B: int, L: int, dtype: torch.dtype) -> int:
    """Bytes of one (B, L, L) score matrix: B·L²·(bytes per element of dtype).

    Source: _experiments.attention_cost (score_matrix_bytes).
    """
    return B * L * L * torch.empty((), dtype=dtype).element_size()


def check_score_matrix_bytes(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check a function that gives the bytes of one (B, L, L) score matrix.

    ``fn(B, L, dtype)`` must return B·L²·(bytes per element) as a number. Cases: (8, 4096,
    float32) → 536,870,912 (512 MiB); (2, 1000, float16); (3, 77, float64); (1, 8192,
    bfloat16).

    Args:
        fn: the function to check.
        verbose: print the feedback paragraph.

    Returns:
        CheckResult; ``mistake`` is None or one of: "not_written", "error", "bad_return",
        "numbers_not_bytes", "bits", "batch_missing", "linear_in_L", "scores_and_weights",
        "always_4_bytes", "mib", "megabytes", "wrong_value".

    Source: _experiments.attention_cost; article section 1.2.
    """
    name = _name_of(fn)
    for B, L, dtype in _SCORE_BYTES_CASES:
        args = f"B={B}, L={L}, dtype={dtype}"
        got, err = _call(fn, B, L, dtype)
        if err is not None:
            return _call_failed(
                name, err, f"For {args} your function raised {_raised(err)}", verbose
            )
        got, is_number = _number(got)
        if not is_number:
            return _not_yet("bad_return", f"{name} returned {_short(got)}; return the "
                           f"number of bytes.", verbose)  # fmt: skip
        want = score_matrix_bytes(B, L, dtype)
        if math.isclose(got, want, rel_tol=1e-12):
            continue
        size = torch.empty((), dtype=dtype).element_size()
        known = [  # the first match names the mistake
            (B * L * L, "numbers_not_bytes", ("That is the number of scores, not their bytes: "
             "multiply by the bytes of one element (dtype.itemsize).")),
            (8 * want, "bits", "That is in bits; a byte is 8 bits."),
            (L * L * size, "batch_missing", "That is one sequence; the batch holds B of them."),
            (B * L * size, "linear_in_L", ("A score matrix has L × L entries per sequence: one "
             "per query–key pair, so L², not L.")),
            (B * L * L * 4, "always_4_bytes", (f"You assume 4 bytes per element, but {dtype} "
             f"takes {size}: use dtype.itemsize.")),
            (2 * want, "scores_and_weights", ("That is two L × L matrices (scores and "
             "weights); the question asks for the score matrix alone.")),
            (want / 2**20, "mib", "That is in MiB; return bytes."),
            (want / 1e6, "megabytes", "That is in megabytes; return bytes."),
        ]  # fmt: skip
        code, why = _known_mistake(got, known)
        return _not_yet(code, f"For {args} you gave {got:,}; it is {want:,} "
                       f"bytes. {why}".rstrip(), verbose)  # fmt: skip
    return _passed(
        f"{name} gives B·L²·itemsize for all {len(_SCORE_BYTES_CASES)} cases: at B = 8, "
        f"L = 4096 a float32 score matrix takes 536,870,912 bytes = 512 MiB — and the weights "
        f"of the same shape as much again.",
        verbose,
    )
