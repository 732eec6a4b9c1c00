"""Does scaling matter in training? A retrieval task, trained over many seeds at once.

The article (section 4.3) says that without the 1/√d_k scale "training is very likely
to oscillate or not converge", and that if removing the scale makes training slower
while keeping it makes it faster, "the scale is wrong". This module measures the first
claim on a task small enough to train 16 seeds × 3 settings × 4 values of d_k in a few
seconds on a CPU; the second is not an experiment but a non sequitur (a slower run
without the scale says nothing about the scale being wrong).

The task (``RetrievalTask``): a set of L keys, each with a random *content* vector
c_i ∈ R^d_model and a *value* vector v_i ∈ R^d_v. The query is a noisy copy of the
content of one key j, chosen at random; the target is v_j. The model is one
attention head:

    q = x_q W_Qᵀ,  K = C W_Kᵀ,  out = softmax(q Kᵀ · scale) V,  V = (v_1 … v_L),
    loss = mean((out - v_j)²)

W_Q and W_K (d_k × d_model, as ``nn.Linear`` stores them) are learned; the values are
given, not projected (W_V is the identity and fixed), so the *only* way to lower the
loss is to move the weights: every gradient passes through the softmax, which is where
the scale acts. The task is solved when q·k_j stands out from the other scores; the
best bilinear form is W_Qᵀ W_K ∝ I (d_model × d_model), which every d_k ≥ d_model can
represent, so d_k changes the parametrisation and the scale of the scores, not what
can be learned.

Settings (``SETTINGS``): "scaled" (scale 1/√d_k), "unscaled" (scale 1), and
"unscaled_init" (scale 1, W_Q's initial draw divided by √d_k: at step 0 its scores are
exactly the scaled model's, but the optimizer then moves W_Q by steps of the unscaled
size). "unscaled_reparam" (not run by default) also rescales W_Q's optimizer step, so
that it is *exactly* the scaled model written another way (Adam: lr × 1/√d_k and
eps × √d_k on W_Q; SGD: lr × 1/d_k), which the tests check: the scale is a
reparametrisation of W_Q, and what differs between "scaled" and "unscaled" is the
initial size of the scores and the effective step size, not what the model can express.

Seeds are a batch dimension: parameters are (S, d_k, d_model) and the loss summed over
the S seeds is differentiated once per step; each seed's gradient depends only on its
own slice, and Adam and SGD act elementwise, so S stacked runs are S independent runs
(tested against separate runs). Each seed owns two ``torch.Generator`` streams, one
for its initial weights (per d_k) and one for its data; the data stream does not depend
on the setting or on d_k, so every setting sees the same tasks for a given seed
(common random numbers: the comparison between settings is paired).

Torch only. Imports only attn_lib's lower modules (core, softmax).

Shape legend: S seeds, B tasks per step, L keys per task (L_k), d_model, d_k, d_v.

Source: Vaswani et al. 2017, sec. 3.2.1 and its footnote 4 (q·k has variance d_k for
unit-variance entries, hence the 1/√d_k); article section 4.3 (claims C11 and C19 of
the series design).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from .core import scaled_dot_product_attention
from .softmax import entropy

__all__ = [
    "DEFAULT_D_KS",
    "SETTINGS",
    "SETTINGS_ALL",
    "OptimizerConfig",
    "RetrievalData",
    "RetrievalTask",
    "ScalingExperiment",
    "TrainingRun",
    "make_retrieval_data",
    "retrieval_eval_example",
    "run_scaling_experiment",
    "steps_to_threshold",
    "trailing_mean",
    "train_retrieval",
]

SETTINGS = ("scaled", "unscaled", "unscaled_init")
SETTINGS_ALL = (*SETTINGS, "unscaled_reparam")
DEFAULT_D_KS = (8, 32, 128, 512)

_SETTING_HELP = (
    "'scaled' (scores × 1/√d_k), 'unscaled' (× 1), 'unscaled_init' (× 1, W_Q initialised "
    "÷√d_k) or 'unscaled_reparam' (× 1, W_Q initialised ÷√d_k and its optimizer step "
    "rescaled: exactly the scaled model)"
)


# ----------------------------------------------------------------------------- configs


def _check_int(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}.")
    if value < minimum:
        raise ValueError(f"{name} must be ≥ {minimum}, got {value}.")
    return value


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
        lr: learning rate. Default 0.01 for Adam: the best of the grid {0.001, 0.003,
            0.01, 0.03, 0.1} for the *scaled* model (median steps to threshold over
            16 seeds, d_k = 32; see the module's tests and the report of notebook 09).
            It is not tuned for the unscaled model: how much the comparison depends on
            this choice is part of what notebook 09 shows.
        betas: Adam's (β1, β2). Default (0.9, 0.999), PyTorch's.
        eps: Adam's ε. Default 1e-8, PyTorch's.

    Raises:
        ValueError: an unknown name, lr ≤ 0, betas outside [0, 1), eps ≤ 0.
    """

    name: str = "adam"
    lr: float = 0.01
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


def _generator(*parts: object) -> torch.Generator:
    return torch.Generator().manual_seed(_derive_seed(*parts))


def _check_seeds(seeds: Sequence[int] | None, n_seeds: int, seed: int) -> tuple[int, ...]:
    if seeds is None:
        _check_int("n_seeds", n_seeds, 1)
        _check_int("seed", seed, 0)
        return tuple(range(seed, seed + n_seeds))
    seeds = tuple(seeds)
    if len(seeds) < 1:
        raise ValueError("seeds is empty; give at least one seed (n_seeds must be ≥ 1).")
    for s in seeds:
        _check_int("each seed", s, 0)
    return seeds


@contextmanager
def _intra_op_threads(n: int | None) -> Iterator[None]:
    """Run with ``n`` intra-op threads, restoring the previous number afterwards."""
    if n is None:
        yield
        return
    _check_int("num_threads", n, 1)
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
        keys: (steps, S, B, L, d_model), float32, key contents (rows of norm √d_model).
        queries: (steps, S, B, d_model), float32, noisy copies of the target key's
            content (rows of norm √d_model).
        values: (steps, S, B, L, d_v), float32, i.i.d. N(0, 1).
        target: (steps, S, B), int64 in [0, L), which key each query copies.
        seeds: the S seeds, in order.
    """

    keys: torch.Tensor
    queries: torch.Tensor
    values: torch.Tensor
    target: torch.Tensor
    seeds: tuple[int, ...]

    @property
    def steps(self) -> int:
        return self.keys.shape[0]


def _make_tasks(
    g: torch.Generator, shape: tuple[int, ...], task: RetrievalTask
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """keys (*shape, L, m), queries (*shape, m), values (*shape, L, d_v), target (*shape)."""
    L, m = task.n_keys, task.d_model
    keys = _unit_variance_rows(torch.randn(*shape, L, m, generator=g))
    values = torch.randn(*shape, L, task.d_v, generator=g)
    target = torch.randint(0, L, shape, generator=g)
    noise = torch.randn(*shape, m, generator=g)
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
    _check_int("steps", steps, 1)
    per_seed = [
        _make_tasks(_generator("attn_lib.training/data", s), (steps, task.batch_size), task)
        for s in seeds
    ]
    keys, queries, values, target = (torch.stack(parts, dim=1) for parts in zip(*per_seed))
    return RetrievalData(keys, queries, values, target, seeds)


def retrieval_eval_example(task: RetrievalTask | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """A fixed example for heatmaps: L keys, and query i a noisy copy of key i.

    Returns:
        keys (L, d_model) and queries (L, d_model), float32; a model that has learned the
        task puts its weight on the diagonal of the (L_q, L_k) = (L, L) weights.
    """
    task = RetrievalTask() if task is None else task
    g = _generator("attn_lib.training/eval")
    L, m = task.n_keys, task.d_model
    keys = _unit_variance_rows(torch.randn(L, m, generator=g))
    queries = _unit_variance_rows(keys + task.noise * torch.randn(L, m, generator=g))
    return keys, queries


# ------------------------------------------------------------------------ measurements


def trailing_mean(x: torch.Tensor, window: int) -> torch.Tensor:
    """Mean of x over the last ``window`` steps (fewer at the start), along dim 0.

    Args:
        x: (steps, ...) floating point.
        window: ≥ 1.

    Returns:
        (steps, ...), entry t the mean of x[max(0, t - window + 1) : t + 1].
    """
    _check_int("window", window, 1)
    c = torch.cumsum(x.double(), dim=0)
    shifted = torch.zeros_like(c)
    shifted[window:] = c[:-window]
    counts = torch.arange(1, x.shape[0] + 1, dtype=torch.float64).clamp(max=window)
    counts = counts.reshape(-1, *([1] * (x.dim() - 1)))
    return ((c - shifted) / counts).to(x.dtype)


def steps_to_threshold(loss: torch.Tensor, threshold: float, window: int) -> torch.Tensor:
    """First step at which the trailing-mean loss is ≤ threshold, per run; -1 if never.

    Args:
        loss: (steps, S), loss[t] measured after t optimizer updates.
        threshold: a loss value.
        window: trailing-mean width, in steps (only full windows count, so a lucky
            first batch cannot pass).

    Returns:
        (S,) int64: the number of updates t (window - 1 ≤ t < steps) at which the mean of
        loss[t - window + 1 : t + 1] first is ≤ threshold, or -1 when it never is
        (count those with ``(result < 0).sum()``; no inf, no NaN).
    """
    smooth = trailing_mean(loss, window)[window - 1 :]  # (steps - window + 1, S)
    below = smooth <= threshold
    first = below.to(torch.int64).argmax(dim=0) + (window - 1)
    return torch.where(below.any(dim=0), first, torch.full_like(first, -1))


def _lower_median(x: torch.Tensor) -> float:
    return float(x.median())


@dataclass(frozen=True)
class TrainingRun:
    """One setting at one d_k, S seeds trained side by side.

    Step t (0 ≤ t < steps) measures the model after t updates on batch t, then updates.

    Attributes:
        setting: one of ``SETTINGS_ALL``.
        d_k: query/key width.
        scale: the multiplier of the scores (1/√d_k or 1.0).
        seeds: the S seeds, in order (dim 1 of the per-step tensors, dim 0 of the rest).
        task, optimizer: the pinned configuration used.
        loss: (steps, S), float32, mean squared error per entry of the retrieved value on
            the step's fresh batch (dimensionless; ``task.baseline`` is the uniform-weights
            loss, 2(L-1)/L the loss of a one-hot row on a random key).
        entropy: (steps, S), float32, mean entropy of the B weight rows, in nats
            (log L for uniform rows, 0 for one-hot rows).
        grad_norm_q: (steps, S), float32, Frobenius norm of ∂loss/∂W_Q for each seed,
            before the update (the raw gradient: in the scaled model it carries the
            factor 1/√d_k, so compare shapes over training more than levels across
            settings).
        eval_weights_init: (S, L, L), float32, weights on ``retrieval_eval_example`` at
            initialisation (row i: query copying key i).
        eval_weights: (S, L, L), float32, the same after ``steps`` updates.
    """

    setting: str
    d_k: int
    scale: float
    seeds: tuple[int, ...]
    task: RetrievalTask
    optimizer: OptimizerConfig
    loss: torch.Tensor
    entropy: torch.Tensor
    grad_norm_q: torch.Tensor
    eval_weights_init: torch.Tensor
    eval_weights: torch.Tensor

    @property
    def steps(self) -> int:
        return self.loss.shape[0]

    @property
    def n_seeds(self) -> int:
        return self.loss.shape[1]

    def smoothed_loss(self) -> torch.Tensor:
        """(steps, S): trailing mean of the loss over ``task.window`` steps."""
        return trailing_mean(self.loss, self.task.window)

    def loss_band(self, quantiles: Sequence[float] = (0.25, 0.5, 0.75)) -> torch.Tensor:
        """(len(quantiles), steps): quantiles over seeds of the smoothed loss at each step.

        The default gives the lower quartile, the median curve and the upper quartile
        (an interquartile band: robust to the odd seed, unlike mean ± SD).
        """
        q = torch.tensor(list(quantiles), dtype=torch.float64)
        return torch.quantile(self.smoothed_loss().double(), q, dim=1).to(torch.float32)

    def steps_to_threshold(self) -> torch.Tensor:
        """(S,) int64: updates until the smoothed loss first is ≤ task.threshold; -1 never."""
        return steps_to_threshold(self.loss, self.task.threshold, self.task.window)

    @property
    def n_never(self) -> int:
        """Runs whose smoothed loss never reached the threshold within ``steps``."""
        return int((self.steps_to_threshold() < 0).sum())

    @property
    def stall_fraction(self) -> float:
        """Fraction of runs not below the threshold at the end (last ``window`` steps).

        A run that reached the threshold earlier and then climbed back above it counts
        as stalled here; one still improving slowly counts too. "Stalled" means "not
        learned within the step budget", nothing about later.
        """
        return float((self.final_loss() > self.task.threshold).float().mean())

    def final_loss(self) -> torch.Tensor:
        """(S,): mean loss over the last ``task.window`` steps."""
        return self.loss[-self.task.window :].mean(dim=0)

    def final_entropy(self) -> torch.Tensor:
        """(S,): mean weight entropy over the last ``task.window`` steps, in nats."""
        return self.entropy[-self.task.window :].mean(dim=0)

    def max_rebound(self) -> torch.Tensor:
        """(S,): how far the smoothed loss ever climbs above its best value so far.

        max over t of (smoothed[t] - min_{t' ≤ t} smoothed[t']), in loss units: 0 for a
        curve that only goes down; a measure of the "oscillation" the article reports.
        """
        s = self.smoothed_loss()
        return (s - torch.cummin(s, dim=0).values).amax(dim=0)

    def median_seed(self) -> int:
        """Index (into ``seeds``) of the run with the (lower) median final loss."""
        final = self.final_loss()
        return int((final == final.median()).nonzero()[0])

    def summary(self) -> dict[str, object]:
        """Plain numbers for a table: medians over seeds, counts.

        Keys: setting, d_k, median_steps (int, lower median with "never" counted as later
        than any step; None when that median is a "never"), n_never, n_seeds,
        stall_fraction, final_loss, final_entropy (nats), max_rebound, grad_early,
        grad_late (median W_Q gradient norm over the first and the last ``window``
        steps).
        """
        reach = self.steps_to_threshold()
        big = self.steps + 1
        med = int(torch.where(reach < 0, big, reach).median())
        w = self.task.window
        return {
            "setting": self.setting,
            "d_k": self.d_k,
            "median_steps": None if med == big else med,
            "n_never": self.n_never,
            "n_seeds": self.n_seeds,
            "stall_fraction": self.stall_fraction,
            "final_loss": _lower_median(self.final_loss()),
            "final_entropy": _lower_median(self.final_entropy()),
            "max_rebound": _lower_median(self.max_rebound()),
            "grad_early": _lower_median(self.grad_norm_q[:w].mean(dim=0)),
            "grad_late": _lower_median(self.grad_norm_q[-w:].mean(dim=0)),
        }


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
        g = _generator("attn_lib.training/init", s, d_k, d_model)
        wq.append(torch.randn(d_k, d_model, generator=g) / math.sqrt(d_model))
        wk.append(torch.randn(d_k, d_model, generator=g) / math.sqrt(d_model))
    return torch.stack(wq), torch.stack(wk)


def _check_setting(setting: object) -> str:
    if setting not in SETTINGS_ALL:
        raise ValueError(f"unknown setting {setting!r}; choose one of {_SETTING_HELP}.")
    return setting  # type: ignore[return-value]


def _weights(
    x_q: torch.Tensor, x_k: torch.Tensor, w_q: torch.Tensor, w_k: torch.Tensor, scale: float
) -> torch.Tensor:
    """Attention weights for (S, n, m) queries and (S, L, m) keys: (S, n, L)."""
    q = x_q @ w_q.transpose(1, 2)  # (S, n, d_k)
    k = x_k @ w_k.transpose(1, 2)  # (S, L, d_k)
    v = torch.zeros(*k.shape[:-1], 1, dtype=k.dtype)  # unused: we want the weights
    return scaled_dot_product_attention(q, k, v, scale=scale)[1]


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
        optimizer: default ``OptimizerConfig()`` (Adam, lr 0.01).
        data: a stream from ``make_retrieval_data`` for the same seeds, task and at least
            ``steps`` steps (to share one stream across settings; drawn here if None).
        num_threads: intra-op threads while training, restored afterwards; None leaves
            torch's setting alone. Default 1: these tensors are small (≤ 0.5 M entries),
            and measured on 2 cores one thread is as fast as two when the machine is idle
            and many times faster when anything else runs. Results are bitwise
            reproducible for a fixed thread count.

    Returns:
        TrainingRun with per-step (steps, S) float32 loss, entropy (nats) and W_Q
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
    _check_int("d_k", d_k, 1)
    _check_int("steps", steps, 1)
    seeds = _check_seeds(seeds, n_seeds, seed)
    task = RetrievalTask() if task is None else task
    opt = OptimizerConfig() if optimizer is None else optimizer

    with _intra_op_threads(num_threads):
        if data is None:
            data = make_retrieval_data(seeds, steps, task)
        elif data.seeds != seeds or data.steps < steps or data.keys.shape[2:] != (
            task.batch_size,
            task.n_keys,
            task.d_model,
        ) or data.values.shape[-1] != task.d_v:
            raise ValueError(
                f"data holds seeds {data.seeds}, {data.steps} steps and keys of shape "
                f"{tuple(data.keys.shape)}; this run needs seeds {seeds}, ≥ {steps} steps and "
                f"(steps, S, B, L, d_model) = (…, {len(seeds)}, {task.batch_size}, "
                f"{task.n_keys}, {task.d_model}). Draw it with make_retrieval_data(seeds, "
                f"steps, task)."
            )
        return _train(setting, d_k, seeds, steps, task, opt, data)


def _train(
    setting: str,
    d_k: int,
    seeds: tuple[int, ...],
    steps: int,
    task: RetrievalTask,
    opt: OptimizerConfig,
    data: RetrievalData,
) -> TrainingRun:
    S, B, L, m = len(seeds), task.batch_size, task.n_keys, task.d_model
    c = 1.0 / math.sqrt(d_k)
    scale = c if setting == "scaled" else 1.0
    w_q, w_k = _init_weights(seeds, d_k, m)
    if setting in ("unscaled_init", "unscaled_reparam"):
        w_q = w_q * c  # the scaled model's scores at step 0, exactly: (c W_Q) x · W_K x
    # Per-parameter step multipliers: only "unscaled_reparam" rescales W_Q's step so that
    # W'_Q = c W_Q follows the scaled model's trajectory (derivation in the module docstring).
    lr = [opt.lr, opt.lr]
    eps = [opt.eps, opt.eps]
    if setting == "unscaled_reparam":
        lr[0] = opt.lr * (c if opt.name == "adam" else c * c)
        eps[0] = opt.eps / c
    params = [w_q.requires_grad_(), w_k.requires_grad_()]
    m1 = [torch.zeros_like(p) for p in params]
    m2 = [torch.zeros_like(p) for p in params]
    beta1, beta2 = opt.betas

    eval_keys, eval_queries = retrieval_eval_example(task)
    eval_q = eval_queries.expand(S, L, m)
    eval_k = eval_keys.expand(S, L, m)

    loss_log = torch.empty(steps, S)
    entropy_log = torch.empty(steps, S)
    grad_log = torch.empty(steps, S)
    with torch.no_grad():
        eval_init = _weights(eval_q, eval_k, w_q, w_k, scale)

    for t in range(steps):
        x_k, x_q, values, target = data.keys[t], data.queries[t], data.values[t], data.target[t]
        q = (x_q @ w_q.transpose(1, 2)).unsqueeze(2)  # (S, B, 1, d_k)
        k = (x_k.reshape(S, B * L, m) @ w_k.transpose(1, 2)).reshape(S, B, L, d_k)
        out, weights = scaled_dot_product_attention(q, k, values, scale=scale)
        # out (S, B, 1, d_v), weights (S, B, 1, L)
        wanted = values.gather(2, target[..., None, None].expand(S, B, 1, task.d_v))
        per_seed = ((out - wanted) ** 2).mean(dim=(1, 2, 3))  # (S,)
        # Summed over seeds: seed s's gradient is ∂per_seed[s]/∂(its own slice) only.
        per_seed.sum().backward()
        with torch.no_grad():
            loss_log[t] = per_seed
            entropy_log[t] = entropy(weights.squeeze(2)).mean(dim=1)
            grad_log[t] = w_q.grad.flatten(1).norm(dim=1)
            for i, p in enumerate(params):
                g = p.grad
                if opt.name == "sgd":
                    p.sub_(lr[i] * g)
                else:  # Adam, Kingma & Ba 2015, Algorithm 1, elementwise
                    m1[i].mul_(beta1).add_(g, alpha=1 - beta1)
                    m2[i].mul_(beta2).addcmul_(g, g, value=1 - beta2)
                    m_hat = m1[i] / (1 - beta1 ** (t + 1))
                    v_hat = m2[i] / (1 - beta2 ** (t + 1))
                    p.sub_(lr[i] * m_hat / (v_hat.sqrt() + eps[i]))
                p.grad = None

    with torch.no_grad():
        eval_final = _weights(eval_q, eval_k, w_q, w_k, scale)
    return TrainingRun(
        setting=setting,
        d_k=d_k,
        scale=scale,
        seeds=seeds,
        task=task,
        optimizer=opt,
        loss=loss_log,
        entropy=entropy_log,
        grad_norm_q=grad_log,
        eval_weights_init=eval_init,
        eval_weights=eval_final,
    )


# -------------------------------------------------------------------------- experiment


@dataclass(frozen=True)
class ScalingExperiment:
    """Every (setting, d_k) run of one experiment, on one shared data stream.

    Attributes:
        settings: the settings run, in order.
        d_ks: the d_k values run, in order.
        runs: {(setting, d_k): TrainingRun}.
    """

    settings: tuple[str, ...]
    d_ks: tuple[int, ...]
    runs: dict[tuple[str, int], TrainingRun] = field(repr=False)

    def __getitem__(self, key: tuple[str, int]) -> TrainingRun:
        return self.runs[key]

    def summary(self) -> list[dict[str, object]]:
        """One ``TrainingRun.summary()`` row per (d_k, setting), d_k-major."""
        return [self.runs[(s, d)].summary() for d in self.d_ks for s in self.settings]


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
    _check_int("steps", steps, 1)
    task = RetrievalTask() if task is None else task
    with _intra_op_threads(num_threads):
        data = make_retrieval_data(seeds, steps, task)
        runs = {
            (s, d): train_retrieval(
                s, d, seeds=seeds, steps=steps, task=task, optimizer=optimizer,
                data=data, num_threads=None,
            )
            for d in d_ks
            for s in settings
        }
    return ScalingExperiment(settings, d_ks, runs)
