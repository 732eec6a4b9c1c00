"""Notebook 09's apparatus (torch only): the retrieval task, the batched training, the checkers.

Used by notebook 09 (Does scaling matter in training?): the task (§2), the batched loop that
§3's visible Adam steps are checked against, the runs, their twins and tables (§4-§8) and the
exercises (§11, "Check yourself"). Figures and the dashboard: ``nb09_training_views``.

Settings: "scaled" (scores × 1/√d_k), "unscaled", "unscaled_init" (W_Q starts ÷√d_k) and
"unscaled_reparam" (W_Q's start and Adam step ÷√d_k: the scaled model written another way).
Arms (setting, lr), seeds and twins are batch dimensions: a run's gradient depends on its own
slice only and Adam acts entry by entry, so stacked runs equal separate runs.
Shape legend: A arms, S seeds, B tasks per step, L keys.

Source: Vaswani et al. 2017, sec. 3.2.1; Kingma & Ba 2015, Algorithm 1 (Adam); article
sections 2.2 and 4.3.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import torch

from ._checking import (
    _SEED,
    CheckResult,
    _call,
    _call_failed,
    _finish,
    _name_of,
    _not_yet,
    _number,
    _passed,
    _raised,
    _short,
    recording,
)
from ._experiments import one_thread

SETTINGS = ("scaled", "unscaled", "unscaled_init")
# float64: training is chaotic, and the twins below must differ by far more than round-off.
DTYPE = torch.float64
LR, EPS = 0.03, 1e-8  # Adam (betas 0.9, 0.999); lr tuned on the scaled model only
# A row is saturated when its softmax Jacobian's Frobenius norm is below this (notebook 03).
SATURATED = 1e-3
# Each run's twin starts with W_Q moved by a relative TWIN_GAP (10⁷ × float64 round-off); a
# run whose smoothed loss ever moves more than CHAOS_GAP from its twin's is chaotic.
TWIN_GAP, CHAOS_GAP = 1e-9, 1e-3
# The random streams' names are part of the seeds: renaming them changes every number shown.
_STREAMS = "attn_lib.training"


# ------------------------------------------------------------------------------- data


@dataclass(frozen=True)
class RetrievalTask:
    """L keys with contents of width d_model (≤ every d_k tried), values of width d_v, B tasks
    per step, the query's noise σ; a run has learned once its loss averaged over ``window``
    steps is at most ``threshold_fraction`` of ``baseline``."""

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


class RetrievalData(NamedTuple):
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
    keys, then all its values, …). Drawn in float32 (several times faster), used in float64.
    """
    L, m, shape = task.n_keys, task.d_model, (steps, task.batch_size)
    parts = []
    for s in seeds:
        g = _generator(f"{_STREAMS}/data", s)
        keys = _unit_variance_rows(torch.randn(*shape, L, m, generator=g).to(DTYPE))
        values = torch.randn(*shape, L, task.d_v, generator=g).to(DTYPE)
        target = torch.randint(0, L, shape, generator=g)
        noise = torch.randn(*shape, m, generator=g).to(DTYPE)
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


def initial_weights(
    seeds: Iterable[int], d_k: int, task: RetrievalTask
) -> tuple[torch.Tensor, ...]:
    """W_Q, W_K at the start, (S, d_k, d_model) each, entries N(0, 1/d_model): q and k then
    have entries of variance 1, and the unscaled scores variance d_k."""
    wq, wk = [], []
    for s in seeds:
        g = _generator(f"{_STREAMS}/init", s, d_k, task.d_model)
        std = 1 / math.sqrt(task.d_model)
        wq.append(torch.randn(d_k, task.d_model, generator=g, dtype=DTYPE) * std)
        wk.append(torch.randn(d_k, task.d_model, generator=g, dtype=DTYPE) * std)
    return torch.stack(wq), torch.stack(wk)


# ----------------------------------------------------------------------------- records


def trailing_mean(x: torch.Tensor, window: int) -> torch.Tensor:
    """(steps, ...): entry t the mean of x[max(0, t - window + 1) : t + 1] along dim 0."""
    c = torch.cumsum(x, dim=0)
    shifted = torch.zeros_like(c)
    shifted[window:] = c[:-window]
    counts = torch.arange(1, x.shape[0] + 1, dtype=x.dtype).clamp(max=window)
    return (c - shifted) / counts.reshape(-1, *([1] * (x.dim() - 1)))


@dataclass(frozen=True)
class TrainingRun:
    """One setting at one d_k and lr, S seeds. Step t measures the model after t updates.

    Per-step records, (steps, S) float64: loss (mean squared error of the retrieved value),
    twin_loss (the twin's), grad_norm_q (‖∂loss/∂W_Q‖_F), saturated (share of the B rows with
    softmax Jacobian norm < SATURATED), saturated_wrong (… with the largest weight on a wrong
    key), row_grad (median over rows of ‖∂loss_row/∂scores_row‖). eval_weights (S, L, L): the
    weights on ``retrieval_eval_example`` after training.
    """

    setting: str
    d_k: int
    lr: float
    scale: float
    seeds: tuple[int, ...]
    task: RetrievalTask
    loss: torch.Tensor
    twin_loss: torch.Tensor
    grad_norm_q: torch.Tensor
    saturated: torch.Tensor
    saturated_wrong: torch.Tensor
    row_grad: torch.Tensor
    eval_weights: torch.Tensor

    @property
    def n_seeds(self) -> int:
        return self.loss.shape[1]

    def smoothed(self, what: str = "loss") -> torch.Tensor:
        """(steps, S): a record's trailing mean over the task's window."""
        return trailing_mean(getattr(self, what), self.task.window)

    def final_loss(self) -> torch.Tensor:
        """(S,): the mean loss over the last ``window`` steps."""
        return self.smoothed()[-1]

    def stalled(self) -> torch.Tensor:
        """(S,) bool: runs that end above the threshold."""
        return self.final_loss() > self.task.threshold

    def steps_to_threshold(self) -> torch.Tensor:
        """(S,) int64: the first step whose full-window mean loss is ≤ the threshold; -1 never."""
        w = self.task.window
        below = self.smoothed()[w - 1 :] <= self.task.threshold
        first = below.to(torch.int64).argmax(dim=0) + (w - 1)
        return torch.where(below.any(dim=0), first, -1)

    def max_rebound(self) -> torch.Tensor:
        """(S,): the largest climb of the smoothed loss above its best value so far."""
        s = self.smoothed()
        return (s - torch.cummin(s, dim=0).values).amax(dim=0)

    def twin_gaps(self) -> torch.Tensor:
        """(steps, S): |smoothed loss − the twin's smoothed loss|."""
        return (self.smoothed() - self.smoothed("twin_loss")).abs()

    def chaotic(self) -> torch.Tensor:
        """(S,) bool: runs whose exact numbers depend on round-off, hence on the CPU."""
        return self.twin_gaps().amax(dim=0) > CHAOS_GAP

    def summary(self) -> dict[str, object]:
        """Counts over the settled runs (n_robust): not chaotic, and ending more than CHAOS_GAP
        from the threshold, so that round-off cannot flip their outcome. n_stalled, the (lower)
        median steps to the threshold (None when the median run never reaches it), the median
        final loss (None when no run is settled); n_chaotic out of n_seeds."""
        final = self.final_loss()
        keep = ~self.chaotic() & ((final - self.task.threshold).abs() > CHAOS_GAP)
        n, never = int(keep.sum()), self.loss.shape[0] + 1
        reach = self.steps_to_threshold()[keep]
        median = int(torch.where(reach < 0, never, reach).median()) if n else never
        return {
            "setting": self.setting, "d_k": self.d_k, "lr": self.lr, "n_seeds": self.n_seeds,
            "n_chaotic": int(self.chaotic().sum()), "n_robust": n,
            "n_stalled": int(self.stalled()[keep].sum()),
            "median_steps": None if median == never else median,
            "final_loss": float(final[keep].median()) if n else None,
        }  # fmt: skip


@dataclass(frozen=True)
class ScalingExperiment:
    """The runs of one experiment on one data stream, by (setting, d_k, lr); ``ex[setting,
    d_k]`` is the run at the experiment's ``lr``."""

    settings: tuple[str, ...]
    d_ks: tuple[int, ...]
    lr: float
    runs: dict[tuple[str, int, float], TrainingRun] = field(repr=False)

    def __getitem__(self, key: tuple) -> TrainingRun:
        setting, d_k, *lr = key
        return self.runs[setting, d_k, lr[0] if lr else self.lr]

    def summary(self) -> list[dict[str, object]]:
        """One ``TrainingRun.summary`` row per run of the main settings, d_k-major."""
        return [self[s, d].summary() for d in self.d_ks for s in self.settings]


LABELS = {"scaled": "scaled (÷√d_k)", "unscaled": "unscaled", "unscaled_init":
          "unscaled, W_Q init ÷√d_k", "unscaled_reparam": "unscaled, W_Q init and step ÷√d_k"}  # fmt: skip


def summary_table(rows: Sequence[dict[str, object]]) -> str:
    """``summary()`` rows as a fixed-width table: counts out of the settled runs, "–" where no
    run is."""
    width = max(len(LABELS[str(r["setting"])]) for r in rows)
    head = ["d_k", "setting".ljust(width), "   lr", "stalled", "median steps", "final loss",
            "chaotic"]  # fmt: skip
    lines = ["  ".join(head)]
    for r in rows:
        n = r["n_robust"]
        med = "never" if r["median_steps"] is None else r["median_steps"]
        cells = [f"{r['n_stalled']}/{n}", med, f"{r['final_loss']:.3f}"] if n else ["–"] * 3
        cells = [f"{r['d_k']:>3}", LABELS[str(r["setting"])].ljust(width), f"{r['lr']:g}", *cells,
                 f"{r['n_chaotic']}/{r['n_seeds']}"]  # fmt: skip
        lines.append("  ".join(f"{c:>{len(h)}}" for c, h in zip(cells, head, strict=True)))
    return "\n".join(lines)


# --------------------------------------------------------------------------- training


def _records(loss, scores, w_qs, target) -> dict[str, torch.Tensor]:
    """One step's records, (2A, S) each, from the loss (2A, S), the scores (2A, S, B, L) with
    their gradient, the arms' W_Q with theirs and the targets (S, B)."""
    p, B = torch.softmax(scores, dim=-1), scores.shape[2]
    # ‖diag(p) − p pᵀ‖_F² = Σ p² − 2 Σ p³ + (Σ p²)², without the (…, L, L) Jacobians
    p2 = (p * p).sum(dim=-1)
    saturated = (p2 - 2 * (p * p * p).sum(dim=-1) + p2 * p2).clamp_min(0).sqrt() < SATURATED
    wrong = p.argmax(dim=-1) != target  # the largest weight on a wrong key
    return {
        "grad_norm_q": torch.stack([w.grad.norm(dim=(1, 2)) for w in w_qs]).view_as(loss),
        "saturated": saturated.to(DTYPE).mean(dim=-1),
        "saturated_wrong": (saturated & wrong).to(DTYPE).mean(dim=-1),
        # × B undoes the mean over the batch: each row's own loss
        "row_grad": (scores.grad * B).norm(dim=-1).median(dim=-1).values,
    }


def _train(arms, d_k: int, seeds, steps: int, task: RetrievalTask, data) -> list[TrainingRun]:
    """Train A arms (setting, lr) × S seeds, and their twins, as one batch of (2A, S) runs:
    row 2a holds arm a's seeds, row 2a + 1 their twins. Records other than the loss are
    taken over the first ``window`` + 1 and the last ``window`` steps (NaN between)."""
    A, S, m, c = len(arms), len(seeds), task.d_model, 1 / math.sqrt(d_k)
    w_q0, w_k0 = initial_weights(seeds, d_k, task)  # (S, d_k, d_model) each
    # (2S, d_model, d_k), seeds then twins, as the article writes W (x W): the fast layout here
    gens = [_generator(f"{_STREAMS}/twin", s, d_k) for s in seeds]  # the twins' nudges
    nudge = torch.stack([torch.randn(w_q0.shape[1:], generator=g, dtype=DTYPE) for g in gens])
    w_q0 = torch.cat([w_q0, w_q0 * (1 + TWIN_GAP * nudge)]).mT.contiguous()
    w_k0, w_qs, w_ks, groups = w_k0.repeat(2, 1, 1).mT.contiguous(), [], [], {}
    for setting, lr in arms:
        # "unscaled_init" and "unscaled_reparam" start from c·W_Q: the scaled model's scores;
        # "unscaled_reparam" also takes its steps: W_Q's gradient is g/c, so lr·c and ε/c.
        reparam = setting == "unscaled_reparam"
        w_qs.append(w_q0 * (c if setting in ("unscaled_init", "unscaled_reparam") else 1.0))
        w_ks.append(w_k0.clone())
        groups.setdefault((lr * c, EPS / c) if reparam else (lr, EPS), []).append(w_qs[-1])
        groups.setdefault((lr, EPS), []).append(w_ks[-1])
    optimizer = torch.optim.Adam([{"params": ps, "lr": lr, "eps": eps}
                                  for (lr, eps), ps in groups.items()], fused=True)  # fmt: skip
    scale = torch.tensor([c if s == "scaled" else 1.0 for s, _ in arms], dtype=DTYPE)
    scale = scale.repeat_interleave(2).reshape(2 * A, 1, 1, 1)
    logs = {name: torch.full((steps, 2 * A, S), math.nan, dtype=DTYPE) for name in
            ("loss", "grad_norm_q", "saturated", "saturated_wrong", "row_grad")}  # fmt: skip
    for t in range(steps):
        x_k, x_q, values, target = (x[t] for x in data)  # (S, B, …), broadcast over arms
        # q·k_i = x_q W_Q W_Kᵀ c_iᵀ: the scores need only M = W_Q W_Kᵀ (d_model × d_model), so
        # autograd stops at M and the two d_k-wide gradients are written out below.
        M = torch.stack([w_q @ w_k.mT for w_q, w_k in zip(w_qs, w_ks)]).view(2 * A, S, m, m)
        M.requires_grad_()
        scores = (x_k @ (x_q @ M).unsqueeze(-1)).squeeze(-1) * scale  # (2A, S, B, L)
        scores.retain_grad()
        out = (torch.softmax(scores, dim=-1).unsqueeze(-2) @ values).squeeze(-2)  # (…, B, d_v)
        wanted = values.gather(-2, target[..., None, None].expand(*target.shape, 1, task.d_v))
        loss = ((out - wanted.squeeze(-2)) ** 2).mean(dim=(-2, -1))  # (2A, S)
        loss.sum().backward()
        with torch.no_grad():
            for w_q, w_k, g in zip(w_qs, w_ks, M.grad.view(A, 2 * S, m, m)):
                w_q.grad, w_k.grad = g @ w_k, g.mT @ w_q  # ∂loss/∂W_Q = G W_K, ∂/∂W_K = Gᵀ W_Q
            logs["loss"][t] = loss
            if t <= task.window or t >= steps - task.window:
                for name, value in _records(loss, scores, w_qs, target).items():
                    logs[name][t] = value
            optimizer.step()
    eval_keys, eval_queries = retrieval_eval_example(task)
    M = torch.stack([w_q @ w_k.mT for w_q, w_k in zip(w_qs, w_ks)]).view(2 * A, S, m, m)
    eval_weights = torch.softmax(eval_queries @ M @ eval_keys.T * scale, dim=-1)  # (…, L, L)
    return [
        TrainingRun(setting, d_k, lr, float(scale[2 * a]), tuple(seeds), task,
                    twin_loss=logs["loss"][:, 2 * a + 1], eval_weights=eval_weights[2 * a],
                    **{name: log[:, 2 * a] for name, log in logs.items()})
        for a, (setting, lr) in enumerate(arms)
    ]  # fmt: skip


def run_scaling_experiment(
    d_ks: Sequence[int] = (32, 256),
    settings: Sequence[str] = SETTINGS,
    *,
    n_seeds: int = 16,
    seed: int = 0,
    steps: int = 200,
    task: RetrievalTask | None = None,
    lr: float = LR,
    extra: Sequence[tuple[str, float]] = (),
) -> ScalingExperiment:
    """Every setting at every d_k, seeds seed … seed + n_seeds - 1, on one data stream; the
    ``extra`` (setting, lr) arms at the largest d_k only. One thread: these tensors are small,
    and one thread is as fast as two, and far faster under load."""
    task = RetrievalTask() if task is None else task
    seeds = tuple(range(seed, seed + n_seeds))
    jobs = [(d, [(s, lr) for s in settings] + (list(extra) if d == max(d_ks) else []))
            for d in d_ks]  # fmt: skip
    with one_thread():
        data = make_retrieval_data(seeds, steps, task)
        runs = [r for d, arms in jobs for r in _train(arms, d, seeds, steps, task, data)]
    runs = {(r.setting, r.d_k, r.lr): r for r in runs}
    return ScalingExperiment(tuple(settings), tuple(d_ks), lr, runs)


# ---------------------------------------------------------------------- check yourself


_ADAM_CASES = ((0.03, 1e-8, 64), (0.001, 1e-6, 256), (0.1, 1e-8, 2))  # (lr, ε, d_k)
# Slips by the power k of √d_k that the answer is off by (answer = right · √d_k^k).
_LR_SLIPS = {
    1: ("unchanged", ("You keep the learning rate. Adam's step hardly depends on the gradient's "
        "size (it divides by √v̂), so W_Q' would move as far as W_Q does, and its scores √d_k "
        "times further. W_Q' = W_Q/√d_k must move √d_k times less: lr' = lr/√d_k.")),
    -1: ("d_k_not_sqrt", ("You divide the learning rate by d_k. W_Q' = W_Q/√d_k must move √d_k "
         "times less than W_Q, not d_k times: lr' = lr/√d_k.")),
    2: ("inverted", ("You multiply the learning rate by √d_k: the wrong way round. W_Q' is √d_k "
        "times smaller than W_Q, so its steps must be too: lr' = lr/√d_k.")),
}  # fmt: skip
_EPS_SLIPS = {
    -1: ("eps_unchanged", ("Almost. The learning rate is right, but ε is not. W_Q' gets a "
         "gradient √d_k times larger, so √v̂ is √d_k times larger too, and ε, added to it, must "
         "grow with it: ε' = ε·√d_k. (It matters where gradients are tiny.)")),
    -2: ("eps_inverted", ("Almost. The learning rate is right, but ε goes the wrong way. √v̂ is "
         "√d_k times larger for W_Q', and ε is added to it: ε' = ε·√d_k.")),
}  # fmt: skip


def _power(got: float, right: float, d_k: int) -> int | None:
    """k in -2 … 2 with got = right · √d_k^k, else None."""
    return next((k for k in range(-2, 3) if math.isclose(got, right * d_k ** (k / 2),
                                                         rel_tol=1e-6)), None)  # fmt: skip


def _check_adam_like_scaled(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check ``fn(lr, eps, d_k)``: Adam's (lr', ε') for the unscaled W_Q' = W_Q/√d_k, so that it
    follows the scaled model trained with (lr, ε) step for step: (lr/√d_k, ε·√d_k).

    Returns:
        CheckResult; ``mistake`` is None or one of: "not_written", "error", "bad_return",
        "unchanged", "d_k_not_sqrt", "inverted", "eps_unchanged", "eps_inverted", "unknown".
    """
    name, powers = _name_of(fn), set()
    for lr, eps, d_k in _ADAM_CASES:
        answer, err = _call(fn, lr, eps, d_k)
        if err is not None:
            return _call_failed(name, err, f"For lr = {lr}, ε = {eps}, d_k = {d_k} your "
                                f"function raised {_raised(err)}", verbose)  # fmt: skip
        got = [_number(x) for x in answer] if isinstance(answer, tuple | list) else []
        if len(got) != 2 or not all(ok for _, ok in got):
            return _not_yet("bad_return", f"{name} returned {_short(answer)}; return a pair "
                            f"(lr', eps') of numbers.", verbose)  # fmt: skip
        root = math.sqrt(d_k)
        powers.add((_power(got[0][0], lr / root, d_k), _power(got[1][0], eps * root, d_k)))
    if powers == {(0, 0)}:
        return _passed("lr' = lr/√d_k and ε' = ε·√d_k: W_Q' = W_Q/√d_k gets a gradient √d_k "
                       "times larger and takes steps √d_k times smaller, so the unscaled model "
                       "moves exactly as the scaled one.", verbose)  # fmt: skip
    (lr_power, eps_power), *others = powers
    if not others and lr_power in _LR_SLIPS:
        return _not_yet(*_LR_SLIPS[lr_power], verbose)
    if not others and lr_power == 0 and eps_power in _EPS_SLIPS:
        return _finish(False, *_EPS_SLIPS[eps_power], verbose)
    return _not_yet("unknown", "For W_Q' = W_Q/√d_k the gradient is √d_k times larger and the "
                    "step must be √d_k times smaller. Adam's step is lr·m̂/(√v̂ + ε): which "
                    "factor does lr need, and which does ε, added to √v̂?", verbose)  # fmt: skip


# (d_k, d_model) of W_Q as nn.Linear(d_model, d_k) stores it: never square, never equal.
_INIT_SHAPES = ((32, 8), (8, 50), (128, 16), (9, 4))
_INIT_SLIPS = {  # mistake → (the factor it multiplies W_Q by, given d_k and d_model; why)
    "d_model": (lambda d_k, d_model: d_model**-0.5, (
        "You divide by √d_model: w_q.shape[-1] is d_model, because nn.Linear(d_model, d_k) "
        "stores its weight as (d_k, d_model). The scale is 1/√d_k: use w_q.shape[0].")),
    "d_k_not_sqrt": (lambda d_k, _: 1 / d_k, (
        "You divide by d_k. The scores are divided by √d_k, and they are linear in W_Q, so W_Q "
        "must be divided by √d_k too, not by d_k.")),
    "inverted": (lambda d_k, _: d_k**0.5, (
        "You multiply by √d_k; divide instead: the unscaled scores must come out √d_k times "
        "*smaller*, like the scaled ones.")),
    "unchanged": (lambda d_k, _: 1.0, (
        "You return W_Q unchanged, so the unscaled scores are √d_k times larger than the "
        "scaled ones. Divide by √d_k.")),
}  # fmt: skip


def _check_init_like_scaled(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check ``fn(w_q)``: a new (d_k, d_model) tensor W' = W_Q / √d_k, whose unscaled scores
    equal W_Q's scaled ones; w_q itself left unchanged.

    Returns:
        CheckResult; ``mistake`` is None or one of: "not_written", "error", "bad_return",
        "transposed", "d_model", "d_k_not_sqrt", "inverted", "unchanged", "in_place",
        "unknown".
    """
    name, g, got = _name_of(fn), torch.Generator().manual_seed(_SEED), []
    for d_k, d_model in _INIT_SHAPES:
        w = torch.randn(d_k, d_model, generator=g) / math.sqrt(d_model)
        original, shape = w.clone(), (d_k, d_model)
        out, err = _call(fn, w)
        if err is not None:
            return _call_failed(name, err, f"For W_Q of shape {shape} your function raised "
                                f"{_raised(err)}", verbose)  # fmt: skip
        if isinstance(out, torch.Tensor) and out.shape == (d_model, d_k):
            return _not_yet("transposed", f"For W_Q of shape {shape} you return shape "
                            f"{tuple(out.shape)}: transposed. nn.Linear stores its weight as "
                            f"(out_features, in_features) = (d_k, d_model); keep that layout.",
                            verbose)  # fmt: skip
        if not isinstance(out, torch.Tensor) or out.shape != shape:
            return _not_yet("bad_return", f"For W_Q of shape {shape} {name} returned "
                            f"{_short(out)}; return a new tensor of the same shape.", verbose)  # fmt: skip
        got.append((original, out.detach().to(w.dtype), torch.equal(w, original)))

    def all_match(factor: Callable[[int, int], float]) -> bool:
        return all(torch.allclose(out, orig * factor(*orig.shape), rtol=1e-5, atol=1e-7)
                   for orig, out, _ in got)  # fmt: skip

    if all_match(lambda d_k, _: d_k**-0.5):
        if all(kept for *_, kept in got):
            return _passed("W' = W_Q / √d_k, with d_k = w_q.shape[0] (the rows of an nn.Linear "
                           "weight): without the scale, W' gives the scores that W_Q gives with "
                           f"it, for {len(got)} shapes.", verbose)  # fmt: skip
        return _finish(False, "in_place", "Almost. The values are right, but your function also "
                       "changed the tensor it was given (an in-place operation such as `w_q /= "
                       "...`). Return a new tensor: `w_q / math.sqrt(d_k)`.", verbose)  # fmt: skip
    for code, (factor, why) in _INIT_SLIPS.items():
        if all_match(factor):
            return _not_yet(code, why, verbose)
    return _not_yet("unknown", "Your W' does not give W_Q's scaled scores without the scale. The "
                    "scores (x Wᵀ)·k are linear in W, so a single factor does it: which one "
                    "makes them √d_k times smaller?", verbose)  # fmt: skip


check_adam_like_scaled = recording("adam_like_scaled", _check_adam_like_scaled)
check_init_like_scaled = recording("init_like_scaled", _check_init_like_scaled)


def solution_adam_like_scaled(lr: float, eps: float, d_k: int) -> tuple[float, float]:
    # W_Q' = W_Q/√d_k: its gradient is √d_k times larger, and so is Adam's √v̂
    return lr / math.sqrt(d_k), eps * math.sqrt(d_k)


def solution_init_like_scaled(w_q: torch.Tensor) -> torch.Tensor:
    d_k = w_q.shape[0]  # nn.Linear stores (out_features, in_features) = (d_k, d_model)
    return w_q / math.sqrt(d_k)
