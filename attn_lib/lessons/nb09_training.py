"""Notebook 09's experiment: one attention head trained with and without the scale, many seeds.

Used by notebook 09 (Does scaling matter in training?): the task and the threshold (§2), the
batched training loop that the visible step of §3 is checked against, the experiment and its
table of runs with their twins (§4), the per-row records of §6, the learning-rate sweep (§7),
the dashboard's overviews (§11) and the exercises (§12). Figures: ``nb09_training_views``.

The task: L keys with contents c_i and values v_i; the query is a noisy copy of one key's
content and the target is that key's value; loss = mean((Σ_i w_i v_i − v_j)²). Only W_Q and
W_K are trained, so every gradient passes through the softmax. Settings: "scaled" (scores ×
1/√d_k), "unscaled", "unscaled_init" (W_Q's start ÷√d_k) and "unscaled_reparam" (start and
Adam step of W_Q rescaled: the scaled model written another way).

Seeds (and settings) are a batch dimension: each row's gradient depends on its own slice only
and Adam acts entry by entry, so stacked runs equal separate runs. Each seed draws its data
from its own generator (the same tasks for every setting and d_k: paired comparisons).

Shape legend: S seeds, B tasks per step, L keys per task (L_k), d_model, d_k, d_v.

Source: Vaswani et al. 2017, sec. 3.2.1 and footnote 4; Kingma & Ba 2015, Algorithm 1 (Adam);
article sections 2.2 and 4.3.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from ..core import scaled_dot_product_attention
from ..shapes import check_size
from ..softmax import entropy, softmax_jacobian
from ._checking import recording
from .nb09_training_checkers import check_init_like_scaled as _check_init_like_scaled
from .nb09_training_checkers import check_stalling_settings as _check_stalling_settings
from .nb09_training_runs import TWIN_GAP, LrSweep, ScalingExperiment, TrainingRun

__all__ = [
    "DEFAULT_D_KS",
    "DTYPE",
    "SATURATED",
    "SETTINGS",
    "SETTINGS_ALL",
    "OptimizerConfig",
    "RetrievalData",
    "RetrievalTask",
    "check_init_like_scaled",
    "check_stalling_settings",
    "initial_weights",
    "lr_sweep",
    "make_retrieval_data",
    "retrieval_eval_example",
    "run_scaling_experiment",
    "solution_init_like_scaled",
    "solution_stalling_settings",
    "train_retrieval",
]

SETTINGS = ("scaled", "unscaled", "unscaled_init")
SETTINGS_ALL = (*SETTINGS, "unscaled_reparam")
DEFAULT_D_KS = (8, 32, 128, 512)
# Draws and training in float64: training is chaotic, and float32 round-off, which differs
# between CPUs' kernels (and float32 randn itself), moved seeds between "learned" and
# "stalled". float64 randn is the same on every kernel, and float64 training keeps the
# round-off far below the printed digits. Costs about 1.3x the float32 time here.
DTYPE = torch.float64
# A weight row counts as saturated when its softmax Jacobian (Frobenius norm) is below this:
# it passes on less than 0.1 % of any gradient (notebook 03's cut-off).
SATURATED = 1e-3

_SETTING_HELP = (
    "'scaled' (scores × 1/√d_k), 'unscaled' (× 1), 'unscaled_init' (× 1, W_Q initialised "
    "÷√d_k) or 'unscaled_reparam' (× 1, W_Q initialised ÷√d_k and its optimizer step "
    "rescaled: exactly the scaled model)"
)


# ----------------------------------------------------------------------------- configs


def _check_int(name: str, value: object, minimum: int) -> int:
    """``value`` as a plain int ≥ ``minimum`` (shapes.check_size: the one home of the rule)."""
    return check_size(name, value, minimum)


def _check_real(name: str, value: object, *, positive: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}.")
    value = float(value)
    if not math.isfinite(value) or (value <= 0 if positive else value < 0):
        raise ValueError(f"{name} must be finite and {'> 0' if positive else '≥ 0'}, got {value}.")
    return value


@dataclass(frozen=True)
class RetrievalTask:
    """Sizes of the retrieval task and of the measurement; the defaults are pinned.

    Attributes:
        n_keys: L, keys (and values) per task. Default 8: chance of picking the right key
            at random is 1/8, and log L = 2.0794 nats is the entropy of a uniform row.
        d_model: width of key contents and queries. Default 8 = the smallest d_k of
            ``DEFAULT_D_KS``, so that W_Qᵀ W_K (rank ≤ min(d_k, d_model)) can reach the
            solution ∝ I for every d_k tried: d_k then changes the parametrisation and the
            size of the scores, never the capacity.
        d_v: width of the values. Default 8.
        batch_size: B, tasks per seed per step (fresh tasks every step, so the training
            loss is also a held-out loss). Default 8.
        noise: σ of the Gaussian noise added to each entry of the copied key content
            before the query is renormalised. Default 0.3: retrieval must be by
            similarity, not identity, yet the right key stays the most similar one almost
            always (the loss floor is far below the threshold).
        threshold_fraction: a run has "learned" once its loss (trailing mean over
            ``window`` steps) is ≤ this fraction of ``baseline``. Default 0.1.
        window: steps in the trailing mean used for thresholds and final values.
            Default 10.

    Key contents are Gaussian vectors rescaled to norm √d_model (entries of variance 1,
    and every key the same norm, so the matching key is the one with the largest dot
    product with a noise-free query); queries are rescaled the same way; values are
    i.i.d. N(0, 1).

    Raises:
        TypeError / ValueError: a size that is not an int ≥ 1 (n_keys ≥ 2), a negative
            noise, a threshold_fraction outside (0, 1).
    """

    n_keys: int = 8
    d_model: int = 8
    d_v: int = 8
    batch_size: int = 8
    noise: float = 0.3
    threshold_fraction: float = 0.1
    window: int = 10

    def __post_init__(self) -> None:
        _check_int("n_keys", self.n_keys, 2)
        _check_int("d_model", self.d_model, 1)
        _check_int("d_v", self.d_v, 1)
        _check_int("batch_size", self.batch_size, 1)
        _check_int("window", self.window, 1)
        _check_real("noise", self.noise, positive=False)
        frac = _check_real("threshold_fraction", self.threshold_fraction)
        if frac >= 1:
            raise ValueError(f"threshold_fraction must be in (0, 1), got {frac}.")

    @property
    def baseline(self) -> float:
        """Loss of uniform weights (the output is the mean of the L values): (L - 1)/L.

        out - v_j = -(1 - 1/L) v_j + (1/L) Σ_{i≠j} v_i has per-entry variance
        (1 - 1/L)² + (L - 1)/L² = (L - 1)/L for unit-variance values. A model that has
        learned nothing about which key matches cannot do better on average.
        """
        return (self.n_keys - 1) / self.n_keys

    @property
    def threshold(self) -> float:
        """Loss below which a run counts as having learned: threshold_fraction × baseline."""
        return self.threshold_fraction * self.baseline


@dataclass(frozen=True)
class OptimizerConfig:
    """The pinned optimizer.

    Attributes:
        name: "adam" (default; Adam is what attention models are trained with, Vaswani
            et al. 2017 sec. 5.3) or "sgd" (plain gradient descent, no momentum).
        lr: learning rate. Default 0.03: the choice a practitioner would make, tuned
            on the *scaled* model only. On the grid {0.001, 0.003, 0.01, 0.03, 0.1}
            (16 seeds, 300 steps, d_k in DEFAULT_D_KS) the scaled model never fails to
            reach the threshold nor ends above it at 0.01 and 0.03 (0.001 and 0.003 are
            too slow at d_k = 8; at 0.1 runs reach it and then climb back above it: 3 of
            16 at d_k = 8, 8 at d_k = 32, 15 at d_k = 128 and 512), and 0.03 is the
            faster of the two (worst median over d_k: 49 steps against 122; it also has
            the lower worst final loss, 0.016 against 0.018). It is not tuned for the
            unscaled model: how much the comparison depends on this choice is what
            ``lr_sweep`` shows.
        betas: Adam's (β1, β2). Default (0.9, 0.999), PyTorch's.
        eps: Adam's ε. Default 1e-8, PyTorch's.

    Raises:
        ValueError: an unknown name, lr ≤ 0, betas outside [0, 1), eps ≤ 0.
    """

    name: str = "adam"
    lr: float = 0.03
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8

    def __post_init__(self) -> None:
        if self.name not in ("adam", "sgd"):
            raise ValueError(f"optimizer name must be 'adam' or 'sgd', got {self.name!r}.")
        _check_real("lr", self.lr)
        _check_real("eps", self.eps)
        if len(self.betas) != 2 or not all(0.0 <= float(b) < 1.0 for b in self.betas):
            raise ValueError(f"betas must be two numbers in [0, 1), got {self.betas!r}.")


# ------------------------------------------------------------------------------ seeds


def _derive_seed(*parts: object) -> int:
    """A 63-bit seed from a tag and integers, stable across runs and Python versions."""
    digest = hashlib.sha256("/".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


# The random streams' names are part of the seeds, not a module path: renaming them changes
# every task, starting weight and twin, so every number notebook 09 shows.
_STREAMS = "attn_lib.training"


def _generator(*parts: object) -> torch.Generator:
    return torch.Generator().manual_seed(_derive_seed(*parts))


def _check_seeds(seeds: Sequence[int] | None, n_seeds: int, seed: int) -> tuple[int, ...]:
    if seeds is None:
        n_seeds = _check_int("n_seeds", n_seeds, 1)
        seed = _check_int("seed", seed, 0)
        return tuple(range(seed, seed + n_seeds))
    seeds = tuple(seeds)
    if len(seeds) < 1:
        raise ValueError("seeds is empty; give at least one seed (n_seeds must be ≥ 1).")
    return tuple(_check_int("each seed", s, 0) for s in seeds)


@contextmanager
def _intra_op_threads(n: int | None) -> Iterator[None]:
    """Run with ``n`` intra-op threads, restoring the previous number afterwards."""
    if n is None:
        yield
        return
    n = _check_int("num_threads", n, 1)
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


# ------------------------------------------------------------------------------- data


def _unit_variance_rows(x: torch.Tensor) -> torch.Tensor:
    """Rescale each row (last dim) to norm √d: entries of mean square 1."""
    return x * (math.sqrt(x.shape[-1]) / x.norm(dim=-1, keepdim=True))


@dataclass(frozen=True)
class RetrievalData:
    """A stream of retrieval tasks for S seeds, ``steps`` steps of B tasks each.

    Attributes:
        keys: (steps, S, B, L, d_model), float64, key contents (rows of norm √d_model).
        queries: (steps, S, B, d_model), float64, noisy copies of the target key's
            content (rows of norm √d_model).
        values: (steps, S, B, L, d_v), float64, i.i.d. N(0, 1).
        target: (steps, S, B), int64 in [0, L), which key each query copies.
        seeds: the S seeds, in order.
        task: the task it was drawn for.

    A stream of n steps is not the first n steps of a longer one (each seed draws all
    its keys, then all its values, …), so a run takes a stream of exactly its length.
    """

    keys: torch.Tensor
    queries: torch.Tensor
    values: torch.Tensor
    target: torch.Tensor
    seeds: tuple[int, ...]
    task: RetrievalTask

    @property
    def steps(self) -> int:
        return self.keys.shape[0]


def _make_tasks(
    g: torch.Generator, shape: tuple[int, ...], task: RetrievalTask
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """keys (*shape, L, m), queries (*shape, m), values (*shape, L, d_v), target (*shape)."""
    L, m = task.n_keys, task.d_model
    keys = _unit_variance_rows(torch.randn(*shape, L, m, generator=g, dtype=DTYPE))
    values = torch.randn(*shape, L, task.d_v, generator=g, dtype=DTYPE)
    target = torch.randint(0, L, shape, generator=g)
    noise = torch.randn(*shape, m, generator=g, dtype=DTYPE)
    picked = keys.gather(-2, target[..., None, None].expand(*shape, 1, m)).squeeze(-2)
    queries = _unit_variance_rows(picked + task.noise * noise)
    return keys, queries, values, target


def make_retrieval_data(
    seeds: Sequence[int], steps: int, task: RetrievalTask | None = None
) -> RetrievalData:
    """Draw each seed's stream of tasks from its own generator.

    Seed s's stream depends only on s, ``steps`` and ``task`` (not on the other seeds, the
    setting or d_k), so stacked and separate runs see identical data.

    Args:
        seeds: S non-negative ints.
        steps: number of steps (≥ 1).
        task: sizes; default ``RetrievalTask()``.

    Returns:
        RetrievalData with leading dims (steps, S).

    Raises:
        ValueError: no seeds, a negative seed, steps < 1.
    """
    task = RetrievalTask() if task is None else task
    seeds = _check_seeds(seeds, 1, 0)
    steps = _check_int("steps", steps, 1)
    per_seed = [
        _make_tasks(_generator(f"{_STREAMS}/data", s), (steps, task.batch_size), task)
        for s in seeds
    ]
    keys, queries, values, target = (torch.stack(parts, dim=1) for parts in zip(*per_seed))
    return RetrievalData(keys, queries, values, target, seeds, task)


def retrieval_eval_example(task: RetrievalTask | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """A fixed example for heatmaps: L keys, and query i a noisy copy of key i.

    Returns:
        keys (L, d_model) and queries (L, d_model), float64; a model that has learned the
        task puts its weight on the diagonal of the (L_q, L_k) = (L, L) weights.
    """
    task = RetrievalTask() if task is None else task
    g = _generator(f"{_STREAMS}/eval")
    L, m = task.n_keys, task.d_model
    keys = _unit_variance_rows(torch.randn(L, m, generator=g, dtype=DTYPE))
    queries = _unit_variance_rows(keys + task.noise * torch.randn(L, m, generator=g, dtype=DTYPE))
    return keys, queries


# ---------------------------------------------------------------------------- training


def _init_weights(seeds: tuple[int, ...], d_k: int, d_model: int) -> tuple[torch.Tensor, ...]:
    """W_Q, W_K: (S, d_k, d_model), entries N(0, 1/d_model), one generator per (seed, d_k).

    N(0, 1/d_model) gives q and k entries of variance 1 for inputs of mean square 1:
    the premise of the paper's footnote, under which the unscaled scores have variance
    d_k at initialisation (PyTorch's default nn.Linear init would give d_k/9: smaller,
    still ∝ d_k). The same draw is used by every setting (paired comparison).
    """
    wq, wk = [], []
    for s in seeds:
        g = _generator(f"{_STREAMS}/init", s, d_k, d_model)
        wq.append(torch.randn(d_k, d_model, generator=g, dtype=DTYPE) / math.sqrt(d_model))
        wk.append(torch.randn(d_k, d_model, generator=g, dtype=DTYPE) / math.sqrt(d_model))
    return torch.stack(wq), torch.stack(wk)


def initial_weights(seed: int, d_k: int, task: RetrievalTask | None = None) -> tuple[torch.Tensor, ...]:
    """One seed's W_Q and W_K at the start, (d_k, d_model) each, as every setting draws them."""
    task = RetrievalTask() if task is None else task
    w_q, w_k = _init_weights(_check_seeds((seed,), 1, 0), _check_int("d_k", d_k, 1), task.d_model)
    return w_q[0], w_k[0]


def _twin(w_q0: torch.Tensor, seeds: tuple[int, ...], d_k: int) -> torch.Tensor:
    """W_Q's initial draw, each entry moved by a relative TWIN_GAP (its own generator)."""
    noise = [
        torch.randn(w_q0.shape[1:], generator=_generator(f"{_STREAMS}/twin", s, d_k),
                    dtype=DTYPE)
        for s in seeds
    ]
    return w_q0 * (1 + TWIN_GAP * torch.stack(noise))


def _check_setting(setting: object) -> str:
    if setting not in SETTINGS_ALL:
        raise ValueError(f"unknown setting {setting!r}; choose one of {_SETTING_HELP}.")
    return setting  # type: ignore[return-value]


def _weights(
    x_q: torch.Tensor,
    x_k: torch.Tensor,
    w_q: torch.Tensor,
    w_k: torch.Tensor,
    scale: torch.Tensor,
) -> torch.Tensor:
    """Attention weights for (R, n, m) queries, (R, L, m) keys, (R, 1, 1) scales: (R, n, L)."""
    q = (x_q @ w_q.transpose(1, 2)) * scale  # (R, n, d_k)
    k = x_k @ w_k.transpose(1, 2)  # (R, L, d_k)
    v = torch.zeros(*k.shape[:-1], 1, dtype=k.dtype)  # unused: we want the weights
    return scaled_dot_product_attention(q, k, v, scale=1.0)[1]


def train_retrieval(
    setting: str,
    d_k: int,
    *,
    n_seeds: int = 16,
    seed: int = 0,
    seeds: Sequence[int] | None = None,
    steps: int = 300,
    task: RetrievalTask | None = None,
    optimizer: OptimizerConfig | None = None,
    data: RetrievalData | None = None,
    num_threads: int | None = 1,
) -> TrainingRun:
    """Train one attention head on the retrieval task, S seeds at once.

    Args:
        setting: one of ``SETTINGS_ALL``: "scaled", "unscaled", "unscaled_init",
            "unscaled_reparam" (see the module docstring).
        d_k: query/key width (≥ 1).
        n_seeds, seed: run seeds seed, seed + 1, …, seed + n_seeds - 1 (ignored when
            ``seeds`` is given).
        seeds: explicit seeds (non-negative ints).
        steps: optimizer updates (≥ 1); ``steps`` measurements are recorded.
        task: task sizes; default ``RetrievalTask()``.
        optimizer: default ``OptimizerConfig()`` (Adam, lr 0.03).
        data: a stream from ``make_retrieval_data`` for the same seeds, steps and task
            (to share one stream across settings; drawn here if None).
        num_threads: intra-op threads while training, restored afterwards; None leaves
            torch's setting alone. Default 1: these tensors are small (≤ 0.5 M entries),
            and measured on 2 cores one thread is as fast as two when the machine is idle
            and many times faster when anything else runs. Results are bitwise
            reproducible for a fixed thread count.

    Returns:
        TrainingRun with per-step (steps, S) float64 loss, entropy (nats) and W_Q
        gradient norm, and the (S, L, L) weights on the evaluation example before and
        after training.

    Raises:
        ValueError: an unknown setting, d_k < 1, n_seeds < 1, steps < 1, a negative
            seed, data that does not match the seeds, task or steps.
        TypeError: a size that is not an int.

    Source: Vaswani et al. 2017, sec. 3.2.1 and footnote 4; Kingma & Ba 2015
        (Adam, Algorithm 1); article section 4.3.
    """
    setting = _check_setting(setting)
    d_k = _check_int("d_k", d_k, 1)
    steps = _check_int("steps", steps, 1)
    seeds = _check_seeds(seeds, n_seeds, seed)
    task = RetrievalTask() if task is None else task
    opt = OptimizerConfig() if optimizer is None else optimizer

    with _intra_op_threads(num_threads):
        if data is None:
            data = make_retrieval_data(seeds, steps, task)
        else:
            _check_data(data, seeds, steps, task)
        return _train([(setting, opt)], d_k, seeds, steps, task, data)[0]


def _check_data(
    data: RetrievalData, seeds: tuple[int, ...], steps: int, task: RetrievalTask
) -> None:
    if data.seeds != seeds or data.steps != steps or data.task != task:
        raise ValueError(
            f"data was drawn for seeds {data.seeds}, {data.steps} steps and {data.task}; this "
            f"run needs seeds {seeds}, {steps} steps and {task}. Draw it with "
            f"make_retrieval_data(seeds, steps, task)."
        )


def _train(
    arms: Sequence[tuple[str, OptimizerConfig]],
    d_k: int,
    seeds: tuple[int, ...],
    steps: int,
    task: RetrievalTask,
    data: RetrievalData,
) -> list[TrainingRun]:
    """Train A arms (setting, optimizer) × S seeds as R = A·S rows of one batch.

    Row r = a·S + s is arm a with seed s. Every per-row difference (the scale, the
    initial size of W_Q, the step size and ε) is a (R, 1, 1) tensor, so each row does
    exactly the arithmetic it would do alone, and the loss summed over rows gives each
    row the gradient of its own loss only. The arms must share the optimizer's name
    and betas.
    """
    A, S = len(arms), len(seeds)
    R, B, L, m = A * S, task.batch_size, task.n_keys, task.d_model
    name, (beta1, beta2) = arms[0][1].name, arms[0][1].betas
    if any((o.name, o.betas) != (name, (beta1, beta2)) for _, o in arms):
        raise ValueError("arms trained together must share the optimizer name and betas.")
    c = 1.0 / math.sqrt(d_k)

    def per_row(values: Sequence[float]) -> torch.Tensor:  # one value per arm → (2R, 1, 1)
        return torch.tensor(values, dtype=DTYPE).repeat_interleave(S).repeat(2).reshape(-1, 1, 1)

    scales = [c if st == "scaled" else 1.0 for st, _ in arms]
    scale = per_row(scales)
    # "unscaled_init" and "unscaled_reparam" start from c·W_Q: the scaled model's scores at
    # step 0, exactly ((c W_Q) x · W_K x = c (W_Q x · W_K x)).
    init_q = per_row([c if st in ("unscaled_init", "unscaled_reparam") else 1.0 for st, _ in arms])
    # Only "unscaled_reparam" rescales W_Q's step, so that W'_Q = c W_Q follows the scaled
    # model's trajectory (gradient g/c; Adam needs lr·c and ε/c, SGD lr·c²).
    lr_q = per_row(
        [
            o.lr * ((c if name == "adam" else c * c) if st == "unscaled_reparam" else 1.0)
            for st, o in arms
        ]
    )
    eps_q = per_row([o.eps / c if st == "unscaled_reparam" else o.eps for st, o in arms])
    lr_k = per_row([o.lr for _, o in arms])
    eps_k = per_row([o.eps for _, o in arms])

    w_q0, w_k0 = _init_weights(seeds, d_k, m)  # (S, d_k, m) each, shared by the arms
    # Rows R … 2R-1 are twins: the same runs with W_Q moved by a relative 1e-9 at the start.
    # Where a twin ends elsewhere, the run is chaotic (see TrainingRun.chaotic).
    w_q0 = torch.cat([w_q0.repeat(A, 1, 1), _twin(w_q0, seeds, d_k).repeat(A, 1, 1)])
    w_q = (w_q0 * init_q).requires_grad_()  # (2R, d_k, m)
    w_k = w_k0.repeat(2 * A, 1, 1).requires_grad_()
    params, lrs, epss = (w_q, w_k), (lr_q, lr_k), (eps_q, eps_k)
    m1 = [torch.zeros_like(p) for p in params]
    m2 = [torch.zeros_like(p) for p in params]
    buffers = [(torch.empty_like(p), torch.empty_like(p)) for p in params]

    eval_keys, eval_queries = retrieval_eval_example(task)
    eval_q, eval_k = eval_queries.expand(2 * R, L, m), eval_keys.expand(2 * R, L, m)
    with torch.no_grad():
        eval_init = _weights(eval_q, eval_k, w_q, w_k, scale)  # (2R, L, L)

    R2 = 2 * R
    loss_log = torch.empty(steps, R2, dtype=DTYPE)
    entropy_log = torch.empty(steps, R2, dtype=DTYPE)
    grad_log = torch.empty(steps, R2, dtype=DTYPE)
    saturated_log = torch.empty(steps, R2, dtype=DTYPE)
    wrong_log = torch.empty(steps, R2, dtype=DTYPE)
    row_grad_log = torch.empty(steps, R2, dtype=DTYPE)
    scale4 = scale.unsqueeze(-1)  # (2R, 1, 1, 1)
    for t in range(steps):
        x_k = data.keys[t].repeat(2 * A, 1, 1, 1)  # (2R, B, L, m)
        x_q = data.queries[t].repeat(2 * A, 1, 1)  # (2R, B, m)
        values = data.values[t].repeat(2 * A, 1, 1, 1)  # (2R, B, L, d_v)
        target = data.target[t].repeat(2 * A, 1)  # (2R, B)
        # q·k_i = (x_q W_Qᵀ)·(c_i W_Kᵀ) = (x_q W_Qᵀ W_K)·c_i: the same scores from an m × m
        # product, without the (2R, B, L, d_k) keys (about 5x faster at d_k = 512).
        q_in_key_space = (x_q @ (w_q.transpose(1, 2) @ w_k)).unsqueeze(2)  # (2R, B, 1, m)
        # softmax(q Kᵀ · scale) V with a per-row scale: scaling the query is what
        # scaled_dot_product_attention does with its own ``scale`` (hence scale=1.0 here).
        out, weights = scaled_dot_product_attention(q_in_key_space * scale4, x_k, values, scale=1.0)
        # out (2R, B, 1, d_v), weights (2R, B, 1, L)
        weights.retain_grad()  # for the gradient that reaches each row's scores
        wanted = values.gather(2, target[..., None, None].expand(R2, B, 1, task.d_v))
        per_row_loss = ((out - wanted) ** 2).mean(dim=(1, 2, 3))  # (2R,)
        # Summed over rows: row r's gradient is ∂loss[r]/∂(its own slice) only.
        per_row_loss.sum().backward()
        with torch.no_grad():
            loss_log[t] = per_row_loss
            entropy_log[t] = entropy(weights.squeeze(2)).mean(dim=1)
            grad_log[t] = w_q.grad.flatten(1).norm(dim=1)
            p, g_w = weights.squeeze(2), weights.grad.squeeze(2)  # (2R, B, L) each
            saturated = torch.linalg.matrix_norm(softmax_jacobian(p)) < SATURATED  # (2R, B)
            saturated_log[t] = saturated.to(DTYPE).mean(dim=1)
            wrong = p.argmax(dim=-1) != target  # (2R, B): the largest weight on a wrong key
            wrong_log[t] = (saturated & wrong).to(DTYPE).mean(dim=1)
            # ∂loss/∂scores = J ∂loss/∂p = p ⊙ (g − p·g), per row; × B undoes the batch mean.
            d_scores = p * (g_w - (p * g_w).sum(dim=-1, keepdim=True)) * B  # (2R, B, L)
            row_grad_log[t] = d_scores.norm(dim=-1).median(dim=1).values
            for i, p in enumerate(params):
                g = p.grad
                if name == "sgd":
                    p.sub_(lrs[i] * g)
                else:  # Adam, Kingma & Ba 2015, Algorithm 1, elementwise
                    m1[i].lerp_(g, 1 - beta1)  # running mean of g
                    m2[i].mul_(beta2).addcmul_(g, g, value=1 - beta2)  # ... and of g²
                    # step = lr · m̂ / (√v̂ + ε), m̂ = m / (1 - β1^t), v̂ = v / (1 - β2^t)
                    # (into two buffers reused every step: no page faults for fresh tensors)
                    denom = torch.sqrt(m2[i], out=buffers[i][0])
                    denom.div_(math.sqrt(1 - beta2 ** (t + 1))).add_(epss[i])
                    step = torch.mul(m1[i], lrs[i] / (1 - beta1 ** (t + 1)), out=buffers[i][1])
                    p.addcdiv_(step, denom, value=-1)
                p.grad = None

    with torch.no_grad():
        eval_final = _weights(eval_q, eval_k, w_q, w_k, scale)
    runs = []
    for a, (setting, opt) in enumerate(arms):
        rows, twins = slice(a * S, (a + 1) * S), slice(R + a * S, R + (a + 1) * S)
        runs.append(
            TrainingRun(
                setting=setting,
                d_k=d_k,
                scale=scales[a],
                seeds=seeds,
                task=task,
                optimizer=opt,
                loss=loss_log[:, rows].clone(),
                entropy=entropy_log[:, rows].clone(),
                grad_norm_q=grad_log[:, rows].clone(),
                saturated=saturated_log[:, rows].clone(),
                saturated_wrong=wrong_log[:, rows].clone(),
                row_grad=row_grad_log[:, rows].clone(),
                eval_weights_init=eval_init[rows].clone(),
                eval_weights=eval_final[rows].clone(),
                twin_loss=loss_log[:, twins].clone(),
            )
        )
    return runs


# -------------------------------------------------------------------------- experiment


def run_scaling_experiment(
    d_ks: Sequence[int] = DEFAULT_D_KS,
    settings: Sequence[str] = SETTINGS,
    *,
    n_seeds: int = 16,
    seed: int = 0,
    steps: int = 300,
    task: RetrievalTask | None = None,
    optimizer: OptimizerConfig | None = None,
    num_threads: int | None = 1,
) -> ScalingExperiment:
    """Run every setting at every d_k over the same seeds and the same data.

    Args:
        d_ks: query/key widths (each ≥ 1). Default (8, 32, 128, 512).
        settings: names from ``SETTINGS_ALL``. Default ``SETTINGS`` (the three runs of
            notebook 09).
        n_seeds, seed: seeds seed … seed + n_seeds - 1. Default 16 seeds from 0.
        steps: optimizer updates per run. Default 300.
        task, optimizer: default ``RetrievalTask()``, ``OptimizerConfig()``.
        num_threads: as in ``train_retrieval``.

    Returns:
        ScalingExperiment with one TrainingRun per (setting, d_k).

    Raises:
        ValueError: as ``train_retrieval``; also empty d_ks or settings.
    """
    settings = tuple(_check_setting(s) for s in settings)
    d_ks = tuple(_check_int("d_k", d, 1) for d in d_ks)
    if not settings or not d_ks:
        raise ValueError("give at least one setting and one d_k.")
    seeds = _check_seeds(None, n_seeds, seed)
    steps = _check_int("steps", steps, 1)
    task = RetrievalTask() if task is None else task
    opt = OptimizerConfig() if optimizer is None else optimizer
    with _intra_op_threads(num_threads):
        data = make_retrieval_data(seeds, steps, task)
        runs = {}
        for d in d_ks:  # all settings of one d_k in one batch of len(settings) × S rows
            trained = _train([(s, opt) for s in settings], d, seeds, steps, task, data)
            runs.update({(s, d): run for s, run in zip(settings, trained, strict=True)})
    return ScalingExperiment(settings, d_ks, runs)


def lr_sweep(
    d_k: int,
    lrs: Sequence[float] = (0.003, 0.01, 0.03, 0.1),
    settings: Sequence[str] = ("scaled", "unscaled"),
    *,
    n_seeds: int = 16,
    seed: int = 0,
    steps: int = 300,
    task: RetrievalTask | None = None,
    optimizer: OptimizerConfig | None = None,
    num_threads: int | None = 1,
) -> LrSweep:
    """Train the settings at one d_k for each learning rate: how much hangs on the pin.

    Args:
        d_k: query/key width (≥ 1).
        lrs: learning rates (each > 0). Default (0.003, 0.01, 0.03, 0.1), half-decades
            around the pinned 0.03.
        settings: names from ``SETTINGS_ALL``. Default ("scaled", "unscaled").
        n_seeds, seed, steps, task, num_threads: as ``run_scaling_experiment``.
        optimizer: the optimizer whose name, betas and eps are kept (lr is replaced);
            default ``OptimizerConfig()``.

    Returns:
        LrSweep with one TrainingRun per (setting, lr).

    Raises:
        ValueError: as ``train_retrieval``; also empty lrs or settings, an lr ≤ 0.
    """
    settings = tuple(_check_setting(s) for s in settings)
    lrs = tuple(_check_real("lr", lr) for lr in lrs)
    if not settings or not lrs:
        raise ValueError("give at least one setting and one learning rate.")
    d_k = _check_int("d_k", d_k, 1)
    seeds = _check_seeds(None, n_seeds, seed)
    steps = _check_int("steps", steps, 1)
    task = RetrievalTask() if task is None else task
    base = OptimizerConfig() if optimizer is None else optimizer
    with _intra_op_threads(num_threads):
        data = make_retrieval_data(seeds, steps, task)
        arms = [
            (s, OptimizerConfig(base.name, lr, base.betas, base.eps))
            for lr in lrs
            for s in settings
        ]
        trained = _train(arms, d_k, seeds, steps, task, data)  # one batch of all arms
        runs = {(s, o.lr): run for (s, o), run in zip(arms, trained, strict=True)}
    return LrSweep(d_k, settings, lrs, runs)


# ---------------------------------------------------------------------- check yourself

check_stalling_settings = recording("stalling_settings", _check_stalling_settings)
check_init_like_scaled = recording("init_like_scaled", _check_init_like_scaled)


def solution_stalling_settings(summary: list[dict], d_k: int) -> list[str]:
    """Exercise 1 of notebook 09: the settings whose runs stall in at least half the seeds."""
    return [
        r["setting"]
        for r in summary
        if r["d_k"] == d_k and 2 * (r["n_never"] + r["n_relapsed"]) >= r["n_seeds"]
    ]


def solution_init_like_scaled(w_q: torch.Tensor) -> torch.Tensor:
    """Exercise 2 of notebook 09: W_Q / √d_k, a new tensor (w_q is left as it was)."""
    d_k = w_q.shape[0]  # nn.Linear stores (out_features, in_features) = (d_k, d_model)
    return w_q / math.sqrt(d_k)


