"""Notebook 09's runs as records: one setting at one d_k over many seeds, and tables of them.

Used by notebook 09 (Does scaling matter in training?): the per-step records and the summaries
behind its tables (§4–§9), the twins that tell chaotic runs apart (§4), and the tables of runs
returned by ``nb09_training.run_scaling_experiment`` and ``lr_sweep``.

Shape legend: S seeds, L keys per task (L_k).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from ..shapes import check_size

if TYPE_CHECKING:
    from .nb09_training import OptimizerConfig, RetrievalTask

# Every run is trained beside a twin whose W_Q starts TWIN_GAP (relative) away: 10 million
# times more than float64 round-off, so whatever the twin changes by the end, another CPU's
# rounding could change too. A run whose smoothed loss ever differs from its twin's by more
# than CHAOS_GAP is *chaotic*: its exact numbers are not a property of the experiment.
TWIN_GAP = 1e-9
CHAOS_GAP = 1e-3


# ------------------------------------------------------------------------ measurements


def trailing_mean(x: torch.Tensor, window: int) -> torch.Tensor:
    """Mean of x over the last ``window`` steps (fewer at the start), along dim 0.

    Args:
        x: (steps, ...) floating point.
        window: ≥ 1.

    Returns:
        (steps, ...), entry t the mean of x[max(0, t - window + 1) : t + 1].
    """
    window = check_size("window", window, 1)
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
    if loss.shape[0] < window:  # no full window yet: nothing has been reached
        return torch.full(loss.shape[1:], -1, dtype=torch.int64)
    smooth = trailing_mean(loss, window)[window - 1 :]  # (steps - window + 1, S)
    below = smooth <= threshold
    first = below.to(torch.int64).argmax(dim=0) + (window - 1)
    return torch.where(below.any(dim=0), first, torch.full_like(first, -1))


def _lower_median(x: torch.Tensor) -> float:
    return float(x.median())


_PER_STEP = ("loss", "entropy", "grad_norm_q", "saturated", "saturated_wrong", "row_grad")


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
        loss: (steps, S), float64, mean squared error per entry of the retrieved value on
            the step's fresh batch (dimensionless; ``task.baseline`` is the uniform-weights
            loss, 2(L-1)/L the loss of a one-hot row on a random key).
        entropy: (steps, S), float64, mean entropy of the B weight rows, in nats
            (log L for uniform rows, 0 for one-hot rows).
        grad_norm_q: (steps, S), float64, Frobenius norm of ∂loss/∂W_Q for each seed,
            before the update (the raw gradient: in the scaled model it carries the
            factor 1/√d_k, so compare shapes over training more than levels across
            settings).
        saturated: (steps, S), float64, fraction of the B weight rows that are saturated
            (softmax Jacobian with Frobenius norm < ``SATURATED``: nearly one-hot).
        saturated_wrong: (steps, S), float64, fraction of the B rows saturated on a wrong
            key (the largest weight not on the target).
        row_grad: (steps, S), float64, median over the B rows of ‖∂loss_row/∂scores_row‖,
            the gradient that reaches a row's scores through its softmax.
        eval_weights_init: (S, L, L), float64, weights on ``retrieval_eval_example`` at
            initialisation (row i: query copying key i).
        eval_weights: (S, L, L), float64, the same after ``steps`` updates.
        twin_loss: (steps, S), float64, the loss of each seed's twin (W_Q moved by a
            relative ``TWIN_GAP`` at the start), for ``chaotic``.
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

    def smoothed_loss(self) -> torch.Tensor:
        """(steps, S): trailing mean of the loss over ``task.window`` steps."""
        return trailing_mean(self.loss, self.task.window)

    def band(
        self,
        what: str = "loss",
        quantiles: Sequence[float] = (0.25, 0.5, 0.75),
        *,
        smooth: bool = True,
    ) -> torch.Tensor:
        """Quantiles over seeds of a per-step quantity, at every step.

        Args:
            what: a per-step record: "loss", "entropy" (nats), "grad_norm_q", "saturated",
                "saturated_wrong" or "row_grad".
            quantiles: in [0, 1]; the default gives the lower quartile, the median curve
                and the upper quartile (an interquartile band: robust to the odd seed,
                unlike mean ± SD).
            smooth: take the trailing mean over ``task.window`` steps first (per seed).

        Returns:
            (len(quantiles), steps), float32.

        Raises:
            ValueError: an unknown ``what``.
        """
        if what not in _PER_STEP:
            raise ValueError(f"what must be one of {_PER_STEP}, got {what!r}.")
        x = getattr(self, what)
        if smooth:
            x = trailing_mean(x, self.task.window)
        q = torch.tensor(list(quantiles), dtype=torch.float64)
        return torch.quantile(x.double(), q, dim=1).to(torch.float32)

    def steps_to_threshold(self) -> torch.Tensor:
        """(S,) int64: updates until the smoothed loss first is ≤ task.threshold; -1 never."""
        return steps_to_threshold(self.loss, self.task.threshold, self.task.window)

    @property
    def n_never(self) -> int:
        """Runs whose smoothed loss never reached the threshold within ``steps``."""
        return int((self.steps_to_threshold() < 0).sum())

    @property
    def n_relapsed(self) -> int:
        """Runs that reached the threshold but are above it again at the end."""
        reached = self.steps_to_threshold() >= 0
        return int((reached & (self.final_loss() > self.task.threshold)).sum())

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

    def twin_gaps(self) -> torch.Tensor:
        """(steps, S): |smoothed loss − the twin's smoothed loss| at every step."""
        return (self.smoothed_loss() - trailing_mean(self.twin_loss, self.task.window)).abs()

    def twin_gap(self) -> torch.Tensor:
        """(S,): the largest difference between the smoothed loss and the twin's, over steps."""
        return self.twin_gaps().amax(dim=0)

    def chaotic(self) -> torch.Tensor:
        """(S,) bool: runs that a change of W_Q in its 9th digit sends elsewhere.

        Their exact numbers depend on round-off, hence on the CPU; only statistics with
        a margin say anything about them.
        """
        return self.twin_gap() > CHAOS_GAP

    @property
    def n_chaotic(self) -> int:
        """Runs whose smoothed loss ends up more than CHAOS_GAP from their twin's."""
        return int(self.chaotic().sum())

    def median_seed(self) -> int:
        """Index (into ``seeds``) of the run with the (lower) median final loss."""
        final = self.final_loss()
        return int((final == final.median()).nonzero()[0])

    def typical_seed(self) -> int:
        """Index of a run with the outcome of most runs: the median one among those runs.

        Where most runs end above the threshold, a stalled run; else a learned one (the
        median run over all seeds can be a learned run of a setting that mostly stalls).
        """
        final = self.final_loss()
        stalled = final > self.task.threshold
        group = stalled if 2 * int(stalled.sum()) > self.n_seeds else ~stalled
        median = final[group].median()
        return int(((final == median) & group).nonzero()[0])

    def summary(self) -> dict[str, object]:
        """Plain numbers for a table: medians over seeds, counts.

        Keys: setting, d_k, lr, median_steps (int, lower median with "never" counted as
        later than any step; None when that median is a "never"), n_never, n_relapsed,
        n_seeds, n_chaotic, stall_fraction (n_never + n_relapsed = stall_fraction × n_seeds),
        final_loss, final_entropy (nats), max_rebound, grad_early, grad_late (median
        W_Q gradient norm over the first and the last ``window`` steps). Every float is a
        median over seeds (the lower one, torch.median). Chaotic runs included: use
        ``robust_summary`` for numbers that are the same on every CPU.
        """
        reach = self.steps_to_threshold()
        big = self.steps + 1
        med = int(torch.where(reach < 0, big, reach).median())
        w = self.task.window
        return {
            "setting": self.setting,
            "d_k": self.d_k,
            "lr": self.optimizer.lr,
            "median_steps": None if med == big else med,
            "n_never": self.n_never,
            "n_relapsed": self.n_relapsed,
            "n_seeds": self.n_seeds,
            "n_chaotic": self.n_chaotic,
            "stall_fraction": self.stall_fraction,
            "final_loss": _lower_median(self.final_loss()),
            "final_entropy": _lower_median(self.final_entropy()),
            "max_rebound": _lower_median(self.max_rebound()),
            "grad_early": _lower_median(self.grad_norm_q[:w].mean(dim=0)),
            "grad_late": _lower_median(self.grad_norm_q[-w:].mean(dim=0)),
        }

    def robust_summary(self) -> dict[str, object]:
        """Plain numbers for a table, over the runs that are not chaotic.

        A chaotic run's exact numbers depend on round-off (``chaotic``), so they are left
        out here: every number below is the same on any CPU. The TrainingRun's own
        methods cover every seed.

        Keys: as ``summary`` without stall_fraction, and n_robust (= n_seeds - n_chaotic, the
        runs counted below), median_steps (int, lower median with "never" counted as
        later than any step; None when that median is a "never" or n_robust is 0),
        n_never, n_relapsed, n_stalled (= n_never + n_relapsed), final_loss,
        final_entropy (nats), max_rebound, grad_early, grad_late (median W_Q gradient
        norm over the first and the last ``window`` steps). Every float is the lower
        median over the robust runs, None when there are none.
        """
        keep = ~self.chaotic()
        n = int(keep.sum())
        reach = self.steps_to_threshold()[keep]
        big = self.steps + 1
        med = int(torch.where(reach < 0, big, reach).median()) if n else big
        final = self.final_loss()[keep]
        relapsed = (reach >= 0) & (final > self.task.threshold)
        w = self.task.window

        def median(x: torch.Tensor) -> float | None:
            return _lower_median(x[keep]) if n else None

        return {
            "setting": self.setting,
            "d_k": self.d_k,
            "lr": self.optimizer.lr,
            "n_seeds": self.n_seeds,
            "n_chaotic": self.n_seeds - n,
            "n_robust": n,
            "median_steps": None if med == big else med,
            "n_never": int((reach < 0).sum()),
            "n_relapsed": int(relapsed.sum()),
            "n_stalled": int((reach < 0).sum() + relapsed.sum()),
            "final_loss": median(self.final_loss()),
            "final_entropy": median(self.final_entropy()),
            "max_rebound": median(self.max_rebound()),
            "grad_early": median(self.grad_norm_q[:w].mean(dim=0)),
            "grad_late": median(self.grad_norm_q[-w:].mean(dim=0)),
        }


# -------------------------------------------------------------------- tables of runs


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

    def ordered(self) -> list[TrainingRun]:
        """The runs d_k-major: every setting at the first d_k, then at the next."""
        return [self.runs[(s, d)] for d in self.d_ks for s in self.settings]

    def summary(self) -> list[dict[str, object]]:
        """One ``TrainingRun.summary()`` row per run, in ``ordered`` order."""
        return [run.summary() for run in self.ordered()]

    def robust_summary(self) -> list[dict[str, object]]:
        """One ``TrainingRun.robust_summary()`` row per run, in ``ordered`` order."""
        return [run.robust_summary() for run in self.ordered()]


@dataclass(frozen=True)
class LrSweep:
    """The same settings at one d_k over several learning rates (same seeds, same data).

    Attributes:
        d_k: query/key width.
        settings: the settings run, in order.
        lrs: the learning rates run, in order.
        runs: {(setting, lr): TrainingRun}.
    """

    d_k: int
    settings: tuple[str, ...]
    lrs: tuple[float, ...]
    runs: dict[tuple[str, float], TrainingRun] = field(repr=False)

    def __getitem__(self, key: tuple[str, float]) -> TrainingRun:
        return self.runs[key]

    def ordered(self) -> list[TrainingRun]:
        """The runs lr-major: every setting at the first learning rate, then the next."""
        return [self.runs[(s, lr)] for lr in self.lrs for s in self.settings]

    summary = ScalingExperiment.summary
    robust_summary = ScalingExperiment.robust_summary
