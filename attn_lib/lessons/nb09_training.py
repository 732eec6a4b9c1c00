"""Notebook 09's apparatus (torch only): the retrieval task, the training runs, the checkers.

Used by notebook 09 (Does scaling matter in training?): the task and its threshold (§2), the
batched loop that §3's visible Adam steps are checked against, the experiment, its twins and
its tables (§4-§9), the smaller learning rate (§7) and the exercises (§12, "Check yourself").
Figures and the dashboard: ``nb09_training_views``.

Settings: "scaled" (scores × 1/√d_k), "unscaled", "unscaled_init" (W_Q starts ÷√d_k) and
"unscaled_reparam" (W_Q's start and Adam step ÷√d_k: the scaled model written another way).
Seeds and settings are one batch dimension: a row's gradient depends on its own slice only and
Adam acts entry by entry, so stacked runs equal separate runs.

Shape legend: S seeds, R rows (settings × seeds), B tasks per step, L keys (L_k), d_model.

Source: Vaswani et al. 2017, sec. 3.2.1 and footnote 4; Kingma & Ba 2015, Algorithm 1 (Adam);
article sections 2.2 and 4.3.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import torch

from ..attention import scaled_dot_product_attention
from ..softmax import entropy
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
    recording,
)

SETTINGS = ("scaled", "unscaled", "unscaled_init")
SETTINGS_ALL = (*SETTINGS, "unscaled_reparam")
# float64: training is chaotic, and float32 round-off (which differs between CPUs' kernels)
# moved seeds between "learned" and "stalled".
DTYPE = torch.float64
LR, BETAS, EPS = 0.03, (0.9, 0.999), 1e-8  # Adam; lr tuned on the scaled model only
# A row is saturated when its softmax Jacobian's Frobenius norm is below this (notebook 03).
SATURATED = 1e-3
# Each run's twin starts with W_Q moved by a relative TWIN_GAP (10⁷ × float64 round-off); a
# run whose smoothed loss ever moves more than CHAOS_GAP from its twin's is chaotic.
TWIN_GAP = 1e-9
CHAOS_GAP = 1e-3
# The random streams' names are part of the seeds: renaming them changes every number shown.
_STREAMS = "attn_lib.training"


# ------------------------------------------------------------------------------- data


@dataclass(frozen=True)
class RetrievalTask:
    """Sizes of the retrieval task and of the measurement.

    Attributes:
        n_keys: L. d_model: width of key contents and queries (= the smallest d_k tried, so
            W_Qᵀ W_K can reach the solution at every d_k). d_v: width of the values.
        batch_size: B, fresh tasks per seed per step.
        noise: σ of the noise added to the copied key content before renormalising.
        threshold_fraction: a run has learned once its loss (trailing mean over ``window``
            steps) is ≤ this fraction of ``baseline``.
    """

    n_keys: int = 8
    d_model: int = 8
    d_v: int = 8
    batch_size: int = 8
    noise: float = 0.3
    threshold_fraction: float = 0.1
    window: int = 10

    @property
    def baseline(self) -> float:
        """Loss of uniform weights (the output is the mean of the values): (L - 1)/L."""
        return (self.n_keys - 1) / self.n_keys

    @property
    def threshold(self) -> float:
        return self.threshold_fraction * self.baseline


def _generator(*parts: object) -> torch.Generator:
    """A generator seeded from a tag and integers, the same on every run and Python."""
    digest = hashlib.sha256("/".join(str(p) for p in parts).encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "little") >> 1)


def _unit_variance_rows(x: torch.Tensor) -> torch.Tensor:
    """Rescale each row (last dim) to norm √d: entries of mean square 1."""
    return x * (math.sqrt(x.shape[-1]) / x.norm(dim=-1, keepdim=True))


@dataclass(frozen=True)
class RetrievalData:
    """S seeds' streams of tasks: keys (steps, S, B, L, d_model) with rows of norm √d_model,
    queries (steps, S, B, d_model) noisy copies of the target key's content, values
    (steps, S, B, L, d_v) i.i.d. N(0, 1), target (steps, S, B) int64: the key each copies."""

    keys: torch.Tensor
    queries: torch.Tensor
    values: torch.Tensor
    target: torch.Tensor


def make_retrieval_data(seeds: Iterable[int], steps: int, task: RetrievalTask) -> RetrievalData:
    """Each seed's stream from its own generator: the same tasks for every setting and d_k.

    A stream of n steps is not the first n steps of a longer one (each seed draws all its
    keys, then all its values, …).
    """
    L, m, shape = task.n_keys, task.d_model, (steps, task.batch_size)
    parts = []
    for s in seeds:
        g = _generator(f"{_STREAMS}/data", s)
        keys = _unit_variance_rows(torch.randn(*shape, L, m, generator=g, dtype=DTYPE))
        values = torch.randn(*shape, L, task.d_v, generator=g, dtype=DTYPE)
        target = torch.randint(0, L, shape, generator=g)
        noise = torch.randn(*shape, m, generator=g, dtype=DTYPE)
        picked = keys.gather(-2, target[..., None, None].expand(*shape, 1, m)).squeeze(-2)
        parts.append((keys, _unit_variance_rows(picked + task.noise * noise), values, target))
    keys, queries, values, target = (torch.stack(p, dim=1) for p in zip(*parts))
    return RetrievalData(keys, queries, values, target)


def retrieval_eval_example(task: RetrievalTask) -> tuple[torch.Tensor, torch.Tensor]:
    """Keys (L, d_model) and queries (L, d_model), query i a noisy copy of key i."""
    g = _generator(f"{_STREAMS}/eval")
    L, m = task.n_keys, task.d_model
    keys = _unit_variance_rows(torch.randn(L, m, generator=g, dtype=DTYPE))
    queries = _unit_variance_rows(keys + task.noise * torch.randn(L, m, generator=g, dtype=DTYPE))
    return keys, queries


def _init_weights(seeds: Sequence[int], d_k: int, d_model: int) -> tuple[torch.Tensor, ...]:
    """W_Q, W_K: (S, d_k, d_model), entries N(0, 1/d_model): q, k entries of variance 1."""
    wq, wk = [], []
    for s in seeds:
        g = _generator(f"{_STREAMS}/init", s, d_k, d_model)
        wq.append(torch.randn(d_k, d_model, generator=g, dtype=DTYPE) / math.sqrt(d_model))
        wk.append(torch.randn(d_k, d_model, generator=g, dtype=DTYPE) / math.sqrt(d_model))
    return torch.stack(wq), torch.stack(wk)


def initial_weights(seed: int, d_k: int, task: RetrievalTask) -> tuple[torch.Tensor, ...]:
    """One seed's W_Q and W_K at the start, (d_k, d_model) each, as every setting draws them."""
    w_q, w_k = _init_weights((seed,), d_k, task.d_model)
    return w_q[0], w_k[0]


def _twin(w_q0: torch.Tensor, seeds: Sequence[int], d_k: int) -> torch.Tensor:
    """W_Q's initial draw (S, d_k, d_model), each entry moved by a relative TWIN_GAP."""
    noise = [
        torch.randn(w_q0.shape[1:], generator=_generator(f"{_STREAMS}/twin", s, d_k), dtype=DTYPE)
        for s in seeds
    ]
    return w_q0 * (1 + TWIN_GAP * torch.stack(noise))


# ----------------------------------------------------------------------------- records


def trailing_mean(x: torch.Tensor, window: int) -> torch.Tensor:
    """(steps, ...): entry t the mean of x[max(0, t - window + 1) : t + 1] along dim 0."""
    c = torch.cumsum(x.double(), dim=0)
    shifted = torch.zeros_like(c)
    shifted[window:] = c[:-window]
    counts = torch.arange(1, x.shape[0] + 1, dtype=torch.float64).clamp(max=window)
    return ((c - shifted) / counts.reshape(-1, *([1] * (x.dim() - 1)))).to(x.dtype)


def steps_to_threshold(loss: torch.Tensor, threshold: float, window: int) -> torch.Tensor:
    """(S,) int64: the first step whose full-window trailing mean of loss (steps, S) is
    ≤ threshold; -1 where none is."""
    if loss.shape[0] < window:
        return torch.full(loss.shape[1:], -1, dtype=torch.int64)
    below = trailing_mean(loss, window)[window - 1 :] <= threshold
    first = below.to(torch.int64).argmax(dim=0) + (window - 1)
    return torch.where(below.any(dim=0), first, torch.full_like(first, -1))


@dataclass(frozen=True)
class TrainingRun:
    """One setting at one d_k, S seeds. Step t measures the model after t updates.

    Per-step records, (steps, S) float64: loss (mean squared error of the retrieved value),
    entropy (mean over the B weight rows, nats), grad_norm_q (‖∂loss/∂W_Q‖_F), saturated
    (share of rows with softmax Jacobian norm < SATURATED), saturated_wrong (… with the
    largest weight on a wrong key), row_grad (median over rows of ‖∂loss_row/∂scores_row‖),
    twin_loss (the twin's loss). eval_weights_init, eval_weights: (S, L, L) weights on
    ``retrieval_eval_example`` before and after training.
    """

    setting: str
    d_k: int
    scale: float
    lr: float
    seeds: tuple[int, ...]
    task: RetrievalTask
    loss: torch.Tensor
    entropy: torch.Tensor
    grad_norm_q: torch.Tensor
    saturated: torch.Tensor
    saturated_wrong: torch.Tensor
    row_grad: torch.Tensor
    eval_weights_init: torch.Tensor
    eval_weights: torch.Tensor
    twin_loss: torch.Tensor

    @property
    def steps(self) -> int:
        return self.loss.shape[0]

    @property
    def n_seeds(self) -> int:
        return self.loss.shape[1]

    def band(self, what: str = "loss", quantiles: Sequence[float] = (0.25, 0.5, 0.75)):
        """(len(quantiles), steps) float32: quantiles over seeds of a smoothed record."""
        x = trailing_mean(getattr(self, what), self.task.window)
        q = torch.tensor(list(quantiles), dtype=torch.float64)
        return torch.quantile(x.double(), q, dim=1).to(torch.float32)

    def final_loss(self) -> torch.Tensor:
        """(S,): mean loss over the last ``window`` steps."""
        return self.loss[-self.task.window :].mean(dim=0)

    @property
    def n_never(self) -> int:
        return self.summary()["n_never"]

    @property
    def n_relapsed(self) -> int:  # reached the threshold, but end above it
        return self.summary()["n_relapsed"]

    def max_rebound(self) -> torch.Tensor:
        """(S,): the largest climb of the smoothed loss above its best value so far."""
        s = trailing_mean(self.loss, self.task.window)
        return (s - torch.cummin(s, dim=0).values).amax(dim=0)

    def twin_gaps(self) -> torch.Tensor:
        """(steps, S): |smoothed loss − the twin's smoothed loss|."""
        w = self.task.window
        return (trailing_mean(self.loss, w) - trailing_mean(self.twin_loss, w)).abs()

    def twin_gap(self) -> torch.Tensor:
        return self.twin_gaps().amax(dim=0)

    def chaotic(self) -> torch.Tensor:
        """(S,) bool: runs whose exact numbers depend on round-off, hence on the CPU."""
        return self.twin_gap() > CHAOS_GAP

    @property
    def n_chaotic(self) -> int:
        return int(self.chaotic().sum())

    def typical_seed(self) -> int:
        """Index of the median run among those with the majority's outcome (stalled or not)."""
        final = self.final_loss()
        stalled = final > self.task.threshold
        group = stalled if 2 * int(stalled.sum()) > self.n_seeds else ~stalled
        return int(((final == final[group].median()) & group).nonzero()[0])

    def summary(self, robust: bool = False) -> dict[str, object]:
        """Counts and (lower) medians over seeds, or with ``robust`` over the runs that are not
        chaotic (None where none is left).

        Keys: setting, d_k, lr, n_seeds, n_chaotic, n_robust (the runs counted), median_steps
        (None when the median run never reached the threshold), n_never, n_relapsed,
        n_stalled (= never + relapsed), stall_fraction (n_stalled / n_robust), final_loss.
        """
        keep = ~self.chaotic() if robust else torch.ones(self.n_seeds, dtype=torch.bool)
        n, big = int(keep.sum()), self.steps + 1
        reach = steps_to_threshold(self.loss, self.task.threshold, self.task.window)[keep]
        final = self.final_loss()[keep]
        med = int(torch.where(reach < 0, big, reach).median()) if n else big
        never = int((reach < 0).sum())
        relapsed = int(((reach >= 0) & (final > self.task.threshold)).sum())
        return {
            "setting": self.setting, "d_k": self.d_k, "lr": self.lr, "n_seeds": self.n_seeds,
            "n_chaotic": self.n_chaotic, "n_robust": n,
            "median_steps": None if med == big else med,
            "n_never": never, "n_relapsed": relapsed, "n_stalled": never + relapsed,
            "stall_fraction": (never + relapsed) / n if n else None,
            "final_loss": float(final.median()) if n else None,
        }  # fmt: skip

    def robust_summary(self) -> dict[str, object]:
        return self.summary(robust=True)


@dataclass(frozen=True)
class ScalingExperiment:
    """Every (setting, d_k) run of one experiment on one data stream, in ``runs``."""

    settings: tuple[str, ...]
    d_ks: tuple[int, ...]
    runs: dict[tuple[str, int], TrainingRun] = field(repr=False)

    def __getitem__(self, key: tuple[str, int]) -> TrainingRun:
        return self.runs[key]

    def summary(self, robust: bool = False) -> list[dict[str, object]]:
        """One ``TrainingRun.summary`` row per run, d_k-major."""
        return [self.runs[s, d].summary(robust) for d in self.d_ks for s in self.settings]

    def robust_summary(self) -> list[dict[str, object]]:
        return self.summary(robust=True)


# --------------------------------------------------------------------------- training


def _weights(x_q, x_k, w_q, w_k, scale) -> torch.Tensor:
    """Weights (R, n, L) for queries (R, n, m), keys (R, L, m), scales (R, 1, 1)."""
    q = (x_q @ w_q.transpose(1, 2)) * scale  # (R, n, d_k)
    k = x_k @ w_k.transpose(1, 2)  # (R, L, d_k)
    v = torch.zeros(*k.shape[:-1], 1, dtype=k.dtype)  # unused: we want the weights
    return scaled_dot_product_attention(q, k, v, scale=1.0)[1]


def _per_row(arms: Sequence[tuple[str, float]], d_k: int, S: int) -> dict[str, torch.Tensor]:
    """Each arm's scale, W_Q start factor, step sizes and ε as (2R, 1, 1) tensors."""
    c = 1.0 / math.sqrt(d_k)
    reparam = [st == "unscaled_reparam" for st, _ in arms]

    def rows(values: list[float]) -> torch.Tensor:  # one value per arm → rows, twins too
        return torch.tensor(values, dtype=DTYPE).repeat_interleave(S).repeat(2).reshape(-1, 1, 1)

    # "unscaled_init" and "unscaled_reparam" start from c·W_Q: the scaled model's scores.
    # "unscaled_reparam" also follows its trajectory: W_Q's gradient is g/c, so lr·c, ε/c.
    return {
        "scale": rows([c if st == "scaled" else 1.0 for st, _ in arms]),
        "init_q": rows([c if st in ("unscaled_init", "unscaled_reparam") else 1.0
                        for st, _ in arms]),
        "lr_q": rows([lr * (c if r else 1.0) for (_, lr), r in zip(arms, reparam)]),
        "eps_q": rows([EPS / c if r else EPS for r in reparam]),
        "lr_k": rows([lr for _, lr in arms]),
        "eps_k": rows([EPS for _ in arms]),
    }  # fmt: skip


def _adam_step(params, lrs, epss, m1, m2, buffers, t: int) -> None:
    """One Adam update of each parameter in place (Kingma & Ba 2015, Algorithm 1)."""
    beta1, beta2 = BETAS
    for i, p in enumerate(params):
        g = p.grad
        m1[i].lerp_(g, 1 - beta1)
        m2[i].mul_(beta2).addcmul_(g, g, value=1 - beta2)
        # lr · m̂ / (√v̂ + ε), in two buffers reused every step
        denom = torch.sqrt(m2[i], out=buffers[i][0])
        denom.div_(math.sqrt(1 - beta2 ** (t + 1))).add_(epss[i])
        step = torch.mul(m1[i], lrs[i] / (1 - beta1 ** (t + 1)), out=buffers[i][1])
        p.addcdiv_(step, denom, value=-1)
        p.grad = None


def _measure(logs, t: int, weights: torch.Tensor, target: torch.Tensor, B: int) -> None:
    """Write step t's entropy, saturated rows and row gradients (from weights.grad)."""
    p, g_w = weights.squeeze(2), weights.grad.squeeze(2)  # (2R, B, L) each
    logs["entropy"][t] = entropy(p).mean(dim=1)
    # ‖diag(p) − p pᵀ‖_F² = Σ p² − 2 Σ p³ + (Σ p²)², without the (2R, B, L, L) Jacobians
    p2 = (p * p).sum(dim=-1)
    saturated = (p2 - 2 * (p * p * p).sum(dim=-1) + p2 * p2).clamp_min(0).sqrt() < SATURATED
    logs["saturated"][t] = saturated.to(DTYPE).mean(dim=1)
    wrong = p.argmax(dim=-1) != target  # the largest weight on a wrong key
    logs["saturated_wrong"][t] = (saturated & wrong).to(DTYPE).mean(dim=1)
    # ∂loss/∂scores = p ⊙ (g − p·g) per row; × B undoes the batch mean
    d_scores = p * (g_w - (p * g_w).sum(dim=-1, keepdim=True)) * B
    logs["row_grad"][t] = d_scores.norm(dim=-1).median(dim=1).values


def _train(arms, d_k: int, seeds, steps: int, task: RetrievalTask, data) -> list[TrainingRun]:
    """Train A arms (setting, lr) × S seeds, and their twins, as 2R = 2·A·S rows of one batch.

    Row a·S + s is arm a with seed s; row R + a·S + s its twin. Every per-row difference is a
    (2R, 1, 1) tensor, and the loss summed over rows gives each row its own gradient.
    """
    A, S = len(arms), len(seeds)
    R, B, L, m = A * S, task.batch_size, task.n_keys, task.d_model
    rows = _per_row(arms, d_k, S)
    w_q0, w_k0 = _init_weights(seeds, d_k, m)  # (S, d_k, m) each, shared by the arms
    w_q0 = torch.cat([w_q0.repeat(A, 1, 1), _twin(w_q0, seeds, d_k).repeat(A, 1, 1)])
    w_q = (w_q0 * rows["init_q"]).requires_grad_()  # (2R, d_k, m)
    w_k = w_k0.repeat(2 * A, 1, 1).requires_grad_()
    params, lrs, epss = (w_q, w_k), (rows["lr_q"], rows["lr_k"]), (rows["eps_q"], rows["eps_k"])
    m1, m2 = ([torch.zeros_like(p) for p in params] for _ in range(2))  # Adam's moments
    buffers = [(torch.empty_like(p), torch.empty_like(p)) for p in params]
    scale, scale4 = rows["scale"], rows["scale"].unsqueeze(-1)

    eval_keys, eval_queries = retrieval_eval_example(task)
    eval_q, eval_k = eval_queries.expand(2 * R, L, m), eval_keys.expand(2 * R, L, m)
    with torch.no_grad():
        eval_init = _weights(eval_q, eval_k, w_q, w_k, scale)  # (2R, L, L)
    names = ("loss", "entropy", "grad_norm_q", "saturated", "saturated_wrong", "row_grad")
    logs = {name: torch.empty(steps, 2 * R, dtype=DTYPE) for name in names}
    for t in range(steps):
        x_k = data.keys[t].repeat(2 * A, 1, 1, 1)  # (2R, B, L, m)
        x_q = data.queries[t].repeat(2 * A, 1, 1)  # (2R, B, m)
        values = data.values[t].repeat(2 * A, 1, 1, 1)  # (2R, B, L, d_v)
        target = data.target[t].repeat(2 * A, 1)  # (2R, B)
        # q·k_i = (x_q W_Qᵀ W_K)·c_i: the scores from an m × m product, no (2R, B, L, d_k) keys
        q_in_key_space = (x_q @ (w_q.transpose(1, 2) @ w_k)).unsqueeze(2)  # (2R, B, 1, m)
        out, weights = scaled_dot_product_attention(q_in_key_space * scale4, x_k, values, scale=1.0)
        weights.retain_grad()  # (2R, B, 1, L), for the gradient that reaches each row's scores
        wanted = values.gather(2, target[..., None, None].expand(2 * R, B, 1, task.d_v))
        loss = ((out - wanted) ** 2).mean(dim=(1, 2, 3))  # (2R,)
        loss.sum().backward()
        with torch.no_grad():
            logs["loss"][t] = loss
            logs["grad_norm_q"][t] = w_q.grad.flatten(1).norm(dim=1)
            _measure(logs, t, weights, target, B)
            _adam_step(params, lrs, epss, m1, m2, buffers, t)
    with torch.no_grad():
        eval_final = _weights(eval_q, eval_k, w_q, w_k, scale)
    return [
        TrainingRun(setting, d_k, float(scale[a * S]), lr, tuple(seeds), task,
                    **{name: log[:, a * S : (a + 1) * S].clone() for name, log in logs.items()},
                    eval_weights_init=eval_init[a * S : (a + 1) * S].clone(),
                    eval_weights=eval_final[a * S : (a + 1) * S].clone(),
                    twin_loss=logs["loss"][:, R + a * S : R + (a + 1) * S].clone())
        for a, (setting, lr) in enumerate(arms)
    ]  # fmt: skip


def _train_all(jobs, n_seeds: int, seed: int, steps: int, task: RetrievalTask) -> list[TrainingRun]:
    """Train each (arms, d_k) job as one batch on one shared data stream, with one thread
    (these tensors are small: one thread is as fast as two, and far faster under load)."""
    seeds = tuple(range(seed, seed + n_seeds))
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        data = make_retrieval_data(seeds, steps, task)
        return [run for arms, d_k in jobs for run in _train(arms, d_k, seeds, steps, task, data)]
    finally:
        torch.set_num_threads(before)


def run_scaling_experiment(
    d_ks: Sequence[int] = (8, 32, 128, 512),
    settings: Sequence[str] = SETTINGS,
    *,
    n_seeds: int = 16,
    seed: int = 0,
    steps: int = 200,
    task: RetrievalTask | None = None,
    lr: float = LR,
) -> ScalingExperiment:
    """Every setting at every d_k, seeds seed … seed + n_seeds - 1, the same data for all."""
    task = RetrievalTask() if task is None else task
    jobs = [([(s, lr) for s in settings], d) for d in d_ks]
    runs = _train_all(jobs, n_seeds, seed, steps, task)
    return ScalingExperiment(tuple(settings), tuple(d_ks), {(r.setting, r.d_k): r for r in runs})


def lr_sweep(
    d_k: int,
    lrs: Sequence[float] = (0.003, 0.01, 0.03, 0.1),
    settings: Sequence[str] = ("scaled", "unscaled"),
    *,
    n_seeds: int = 16,
    seed: int = 0,
    steps: int = 200,
    task: RetrievalTask | None = None,
) -> dict[tuple[str, float], TrainingRun]:
    """The settings at one d_k for each learning rate, as one batch: {(setting, lr): run}."""
    task = RetrievalTask() if task is None else task
    jobs = [([(s, lr) for lr in lrs for s in settings], d_k)]
    return {(r.setting, r.lr): r for r in _train_all(jobs, n_seeds, seed, steps, task)}


# ---------------------------------------------------------------------- check yourself


def _summary_row(setting: str, d_k: int, n_seeds: int, n_never: int, n_relapsed: int) -> dict:
    """A row shaped like ``TrainingRun.summary()``, consistent in itself."""
    median = None if n_seeds - n_never <= (n_seeds - 1) // 2 else 20 + 5 * n_relapsed
    stalled = n_never + n_relapsed
    return {"setting": setting, "d_k": d_k, "lr": LR, "n_seeds": n_seeds, "n_chaotic": 0,
            "n_robust": n_seeds, "median_steps": median, "n_never": n_never,
            "n_relapsed": n_relapsed, "n_stalled": stalled, "stall_fraction": stalled / n_seeds,
            "final_loss": 0.0}  # fmt: skip


def _stall_cases() -> list[tuple[str, list[dict], int]]:
    """(description, summary rows, d_k asked): each usual slip fails at least one case."""
    s, u, ui, row = "scaled", "unscaled", "unscaled_init", _summary_row
    return [
        ("16 seeds, two values of d_k, asked about d_k = 64",
         [row(s, 8, 16, 10, 0), row(u, 8, 16, 0, 0), row(ui, 8, 16, 0, 0),
          row(s, 64, 16, 0, 1), row(u, 64, 16, 2, 7), row(ui, 64, 16, 0, 8)], 64),
        ("4 seeds, d_k = 32", [row(s, 32, 4, 3, 0), row(u, 32, 4, 1, 0)], 32),
        ("16 seeds, asked about d_k = 512",
         [row(s, 128, 16, 0, 0), row(u, 128, 16, 0, 3), row(s, 512, 16, 0, 0),
          row(u, 512, 16, 15, 1), row(ui, 512, 16, 8, 2)], 512),
        ("16 seeds, asked about d_k = 128, where no setting stalls",
         [row(s, 128, 16, 0, 0), row(u, 128, 16, 0, 3), row(s, 512, 16, 0, 0),
          row(u, 512, 16, 15, 1)], 128),
    ]  # fmt: skip


def _stalled(r: dict) -> int:
    return int(r["n_never"]) + int(r["n_relapsed"])


_STALL_SLIPS = [
    ("never_only", lambda r: 2 * r["n_never"] >= r["n_seeds"],
     ("You count only the runs that never reached the threshold. A run that reached it and "
      "then climbed back above it (n_relapsed) has not learned either: it ends above the "
      "threshold. Stalled = n_never + n_relapsed (or use stall_fraction).")),
    ("median_none", lambda r: r["median_steps"] is None,
     ("You pick the settings whose median time to the threshold is 'never'. That counts only "
      "runs that never got there; the relapsed ones (n_relapsed) reached it and still stalled. "
      "Use n_never + n_relapsed, or stall_fraction.")),
    ("strict", lambda r: 2 * _stalled(r) > r["n_seeds"],
     ("Almost: 'at least half' includes exactly half. A setting with 8 of 16 runs stalled "
      "counts; use ≥, not >.")),
    ("any_stall", lambda r: _stalled(r) >= 1,
     ("You pick every setting with at least one stalled run; the question asks for at least "
      "half of the seeds.")),
    ("sixteen_seeds", lambda r: _stalled(r) >= 8,
     ("You compare the stalled count with 8, as if there were always 16 seeds. Use the row's "
      "n_seeds (one table has 4 seeds), or stall_fraction ≥ 0.5.")),
    ("inverted", lambda r: 2 * _stalled(r) < r["n_seeds"],
     ("You return the settings that did learn (fewer than half the runs stalled): the "
      "comparison is the wrong way round.")),
]  # fmt: skip


def _as_setting_set(got: object) -> set[str] | None:
    """The names as a set: from a list, tuple, set, dict keys, numpy array, … of strings."""
    if isinstance(got, str | bytes | dict) or not isinstance(got, Iterable):
        return None
    try:
        items = list(got.tolist() if type(got).__module__ == "numpy" else got)
    except TypeError:  # e.g. a 0-d tensor or array
        return None
    return {str(x) for x in items} if all(isinstance(x, str) for x in items) else None


def _check_stalling_settings(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check ``fn(summary, d_k)``: the settings whose runs at d_k stall (n_never + n_relapsed)
    in at least half the seeds, on hand-made tables.

    Returns:
        CheckResult; ``mistake`` is None or one of: "not_written", "error", "bad_return",
        "never_only", "median_none", "strict", "any_stall", "sixteen_seeds", "inverted",
        "all_d_k", "unknown".
    """
    name, cases, got = _name_of(fn), _stall_cases(), []
    for description, rows, d_k in cases:
        answer, err = _call(fn, [dict(r) for r in rows], d_k)
        if err is not None:
            return _call_failed(name, err, f"On the table with {description}, your function "
                                f"raised {_raised(err)}", verbose)  # fmt: skip
        settings = _as_setting_set(answer)
        if settings is None:
            return _not_yet("bad_return", f"{name} returned {_short(answer)}; return a list "
                            f"of setting names, e.g. ['unscaled'], or [] when none stalls.",
                            verbose)  # fmt: skip
        got.append(settings)

    def answers(rule: Callable[[dict], bool], every_d_k: bool = False) -> list[set[str]]:
        return [{r["setting"] for r in rows if (every_d_k or r["d_k"] == d_k) and rule(r)}
                for _, rows, d_k in cases]  # fmt: skip

    def right(r: dict) -> bool:
        return 2 * _stalled(r) >= r["n_seeds"]

    if got == answers(right):
        return _passed(f"{name} picks the settings whose runs end above the threshold — never "
                       f"reached it, or reached it and relapsed — in at least half the seeds, "
                       f"for {len(cases)} tables (4 or 16 seeds).", verbose)  # fmt: skip
    for code, rule, why in _STALL_SLIPS:
        if got == answers(rule):
            return _not_yet(code, why, verbose)
    if got == answers(right, every_d_k=True):
        return _not_yet("all_d_k", "You look at every row of the table, whatever its d_k; "
                        "keep only the rows with r['d_k'] == d_k.", verbose)  # fmt: skip
    (description, _, d_k), want, have = next(
        (c, w, g) for c, w, g in zip(cases, answers(right), got, strict=True) if w != g
    )
    return _not_yet("unknown", f"On the table with {description} you return {sorted(have)}; "
                    f"the settings with at least half their runs stalled (n_never + n_relapsed "
                    f"≥ n_seeds / 2) at d_k = {d_k} are {sorted(want)}.", verbose)  # fmt: skip


# (d_k, d_model) of W_Q as nn.Linear(d_model, d_k) stores it: never square, never equal.
_INIT_SHAPES = ((32, 8), (8, 50), (128, 16), (9, 4))
_INIT_SLIPS = [
    ("d_model", lambda d_k, d_model: 1 / math.sqrt(d_model),
     ("You divide by √d_model: w_q.shape[-1] is d_model, because nn.Linear(d_model, d_k) "
      "stores its weight as (d_k, d_model). The scale is 1/√d_k: use w_q.shape[0].")),
    ("d_k_not_sqrt", lambda d_k, _: 1 / d_k,
     ("You divide by d_k. The scores are divided by √d_k, and they are linear in W_Q, so W_Q "
      "must be divided by √d_k too, not by d_k.")),
    ("inverted", lambda d_k, _: math.sqrt(d_k),
     ("You multiply by √d_k; divide instead: the unscaled scores must come out √d_k times "
      "*smaller*, like the scaled ones.")),
    ("unchanged", lambda d_k, _: 1.0,
     ("You return W_Q unchanged, so the unscaled scores are √d_k times larger than the scaled "
      "ones. Divide by √d_k.")),
]  # fmt: skip


def _score_gap(w_q: torch.Tensor, w_new: torch.Tensor) -> float:
    """Largest |unscaled scores with w_new − scaled scores with w_q| on a seeded example."""
    d_k, d_model = w_q.shape
    g = torch.Generator().manual_seed(_SEED + 1)
    x = torch.randn(5, d_model, generator=g)  # (L, d_model)
    k = x @ (torch.randn(d_k, d_model, generator=g) / math.sqrt(d_model)).T  # (L, d_k)
    return float(((x @ w_new.T) @ k.T - (x @ w_q.T) @ k.T / math.sqrt(d_k)).abs().max())


def _init_answers(fn: Callable, verbose: bool) -> list | CheckResult:
    """(tensor given, its original, fn's answer) per shape, or the verdict on a bad answer."""
    name, g, got = _name_of(fn), torch.Generator().manual_seed(_SEED), []
    for d_k, d_model in _INIT_SHAPES:
        w = torch.randn(d_k, d_model, generator=g) / math.sqrt(d_model)
        original = w.clone()
        out, err = _call(fn, w)
        if err is not None:
            return _call_failed(name, err, f"For W_Q of shape {(d_k, d_model)} your function "
                                f"raised {_raised(err)}", verbose)  # fmt: skip
        if not isinstance(out, torch.Tensor):
            return _not_yet("bad_return", f"{name} returned {type(out).__name__}; return the "
                            f"new weight, a tensor of the same shape as w_q.", verbose)  # fmt: skip
        if out.shape == (d_model, d_k):
            return _not_yet("transposed", f"For W_Q of shape {(d_k, d_model)} you return shape "
                            f"{tuple(out.shape)}: transposed. nn.Linear stores its weight as "
                            f"(out_features, in_features) = (d_k, d_model); keep that layout.",
                            verbose)  # fmt: skip
        if out.shape != w.shape:
            return _not_yet("bad_return", f"For W_Q of shape {(d_k, d_model)} you return shape "
                            f"{tuple(out.shape)}; return a tensor of the same shape.", verbose)  # fmt: skip
        got.append((w, original, out.detach().to(w.dtype)))  # float64 is fine too
    return got


def _check_init_like_scaled(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check ``fn(w_q)``: a new (d_k, d_model) tensor W' = W_Q / √d_k, whose unscaled scores
    equal W_Q's scaled ones; w_q itself left unchanged.

    Returns:
        CheckResult; ``mistake`` is None or one of: "not_written", "error", "bad_return",
        "transposed", "d_model", "d_k_not_sqrt", "inverted", "unchanged", "in_place",
        "unknown".
    """
    got = _init_answers(fn, verbose)
    if isinstance(got, CheckResult):
        return got

    def all_match(factor: Callable[[int, int], float]) -> bool:
        return all(torch.allclose(out, orig * factor(*orig.shape), rtol=1e-5, atol=1e-7)
                   for _, orig, out in got)  # fmt: skip

    gap = max(_score_gap(orig, out) for _, orig, out in got)
    if all_match(lambda d_k, _: 1 / math.sqrt(d_k)):
        if any(not torch.equal(w, orig) for w, orig, _ in got):
            return _finish(False, "in_place", "Almost. The values are right, but your function "
                           "also changed the tensor it was given (an in-place operation such as "
                           "`w_q /= ...` or `w_q.div_(...)`). Return a new tensor: "
                           "`w_q / math.sqrt(d_k)`.", verbose)  # fmt: skip
        # The gap itself is round-off, whose last digits depend on the CPU: not printed.
        agree = "below 1e-5, float32 round-off" if gap < 1e-5 else f"{gap:.3g}"
        return _passed(f"W' = W_Q / √d_k, with d_k = w_q.shape[0] (the rows of an nn.Linear "
                       f"weight): without the scale, W' gives the scores that W_Q gives with "
                       f"it — largest difference over {len(got)} shapes {agree}.", verbose)  # fmt: skip
    for code, factor, why in _INIT_SLIPS:
        if all_match(factor):
            return _not_yet(code, f"{why} (Your W' gives unscaled scores that differ from the "
                            f"scaled ones by up to {gap:.3g}.)", verbose)  # fmt: skip
    return _not_yet("unknown", f"Your W' gives unscaled scores that differ from the scaled "
                    f"scores of W_Q by up to {gap:.3g}. The scores (x Wᵀ)·k are linear in W, so "
                    f"a single factor does it: which one makes them √d_k times smaller?",
                    verbose)  # fmt: skip


check_stalling_settings = recording("stalling_settings", _check_stalling_settings)
check_init_like_scaled = recording("init_like_scaled", _check_init_like_scaled)


def solution_stalling_settings(summary: list[dict], d_k: int) -> list[str]:
    return [
        r["setting"]
        for r in summary
        if r["d_k"] == d_k and 2 * (r["n_never"] + r["n_relapsed"]) >= r["n_seeds"]
    ]


def solution_init_like_scaled(w_q: torch.Tensor) -> torch.Tensor:
    d_k = w_q.shape[0]  # nn.Linear stores (out_features, in_features) = (d_k, d_model)
    return w_q / math.sqrt(d_k)
