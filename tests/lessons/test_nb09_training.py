"""Notebook 09's torch apparatus: the training learns, is reproducible and batched faithfully,
the settings are what they claim, the records and summaries count right, and each checker
names each typical wrong answer."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from attn_lib import scaled_dot_product_attention
from attn_lib.lessons import nb09_training as training
from attn_lib.lessons.nb09_training import (
    CHAOS_GAP,
    DTYPE,
    SETTINGS_ALL,
    TWIN_GAP,
    RetrievalTask,
    initial_weights,
    lr_sweep,
    make_retrieval_data,
    retrieval_eval_example,
    run_scaling_experiment,
    steps_to_threshold,
    trailing_mean,
)

TENSORS = ("loss", "entropy", "grad_norm_q", "saturated", "row_grad", "eval_weights")


def train(setting: str, d_k: int, **kwargs) -> training.TrainingRun:
    return run_scaling_experiment((d_k,), (setting,), **kwargs)[setting, d_k]


def assert_runs_close(a, b, names=TENSORS, **tol) -> None:
    for name in names:
        torch.testing.assert_close(getattr(a, name), getattr(b, name), msg=name, **tol)


# --- it learns; batching is faithful ------------------------------------------------------------


def test_scaled_training_learns_the_task():
    run = train("scaled", 32, n_seeds=2, steps=60)
    assert bool((run.loss[: run.task.window].mean(dim=0) > 0.5 * run.task.baseline).all())
    assert run.n_never == run.n_relapsed == 0 and run.n_chaotic == 0
    picked = run.eval_weights.argmax(dim=-1)  # (S, L): a learned head looks at key i
    assert float((picked == torch.arange(run.task.n_keys)).double().mean()) >= 0.9
    assert bool((run.entropy[-10:].mean(dim=0) < run.entropy[0]).all())


def test_runs_are_reproducible_and_seeds_independent():
    state = torch.get_rng_state()
    a = train("unscaled", 16, n_seeds=2, seed=3, steps=20)
    assert torch.equal(torch.get_rng_state(), state)  # the global generator is not used
    b = train("unscaled", 16, n_seeds=2, seed=3, steps=20)
    alone = train("unscaled", 16, n_seeds=1, seed=4, steps=20)
    for name in TENSORS:
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    # Seed 4 stacked with seed 3 is seed 4 alone (the batched matmul may block differently).
    torch.testing.assert_close(a.loss[:, 1:], alone.loss, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(a.eval_weights[1:], alone.eval_weights, rtol=1e-5, atol=1e-6)


def test_fused_settings_and_learning_rates_equal_separate_runs():
    ex = run_scaling_experiment((32,), SETTINGS_ALL, n_seeds=2, steps=20)
    for setting in SETTINGS_ALL:
        assert_runs_close(ex[setting, 32], train(setting, 32, n_seeds=2, steps=20),
                          rtol=1e-5, atol=1e-6)  # fmt: skip
    sweep = lr_sweep(16, (0.01, 0.1), ("scaled",), n_seeds=2, steps=20)
    assert set(sweep) == {("scaled", 0.01), ("scaled", 0.1)}
    alone = run_scaling_experiment((16,), ("scaled",), n_seeds=2, steps=20, lr=0.1)
    assert_runs_close(sweep["scaled", 0.1], alone["scaled", 16], rtol=1e-5, atol=1e-6)


def test_the_batched_loop_is_adam_on_one_visible_model():
    """One seed's model written out, with Kingma & Ba's Algorithm 1, gives the batched loop's
    losses (notebook 09's §3 checks torch.optim.Adam against the same run)."""
    task, (beta1, beta2) = RetrievalTask(), training.BETAS
    data = make_retrieval_data((0,), 6, task)
    run = train("scaled", 32, n_seeds=1, steps=6, task=task)
    params = [w.clone().requires_grad_() for w in initial_weights(0, 32, task)]
    moments = [(torch.zeros_like(p), torch.zeros_like(p)) for p in params]
    for t in range(6):
        w_q, w_k = params
        q = data.queries[t, 0] @ w_q.T / math.sqrt(32)  # (B, d_k)
        k = data.keys[t, 0] @ w_k.T  # (B, L, d_k)
        w = torch.softmax((k @ q.unsqueeze(-1)).squeeze(-1), dim=-1)  # (B, L)
        out = (w.unsqueeze(-1) * data.values[t, 0]).sum(dim=1)  # (B, d_v)
        wanted = data.values[t, 0][torch.arange(task.batch_size), data.target[t, 0]]
        loss = ((out - wanted) ** 2).mean()
        torch.testing.assert_close(loss.detach(), run.loss[t, 0], rtol=1e-9, atol=0.0)
        loss.backward()
        with torch.no_grad():
            for p, (m, v) in zip(params, moments, strict=True):
                m.mul_(beta1).add_((1 - beta1) * p.grad)
                v.mul_(beta2).add_((1 - beta2) * p.grad**2)
                m_hat, v_hat = m / (1 - beta1 ** (t + 1)), v / (1 - beta2 ** (t + 1))
                p -= training.LR * m_hat / (v_hat.sqrt() + training.EPS)
                p.grad = None


def test_shapes_and_ranges():
    task = RetrievalTask(n_keys=5, d_model=4, d_v=3, batch_size=2)
    run = train("unscaled", 6, n_seeds=3, steps=12, task=task)
    assert run.steps == 12 and run.n_seeds == 3 and run.seeds == (0, 1, 2)
    for name in ("loss", "entropy", "grad_norm_q", "saturated", "saturated_wrong", "row_grad"):
        t = getattr(run, name)
        assert t.shape == (12, 3) and t.dtype == DTYPE and bool(torch.isfinite(t).all()), name
    torch.testing.assert_close(run.eval_weights.sum(dim=-1), torch.ones(3, 5, dtype=DTYPE))
    assert bool((run.entropy >= 0).all()) and bool((run.entropy <= math.log(5) + 1e-12).all())
    band = run.band("loss")
    assert band.shape == (3, 12) and bool((band[0] <= band[1]).all() and (band[1] <= band[2]).all())
    assert task.baseline == pytest.approx(0.8) and task.threshold == pytest.approx(0.08)
    data = make_retrieval_data((0, 1, 2), 12, task)
    assert data.keys.shape == (12, 3, 2, 5, 4) and data.values.shape == (12, 3, 2, 5, 3)
    torch.testing.assert_close(data.keys.norm(dim=-1), torch.full((12, 3, 2, 5), 2.0, dtype=DTYPE))
    assert retrieval_eval_example(task)[1].shape == (5, 4)


# --- the settings -------------------------------------------------------------------------------


def test_initial_weights_and_unscaled_init_start_as_the_scaled_model():
    ex = run_scaling_experiment((128,), SETTINGS_ALL, n_seeds=2, steps=2)
    scaled, init, plain = ex["scaled", 128], ex["unscaled_init", 128], ex["unscaled", 128]
    torch.testing.assert_close(init.eval_weights_init, scaled.eval_weights_init)
    torch.testing.assert_close(init.loss[0], scaled.loss[0])
    assert (scaled.scale, init.scale, plain.scale) == (1 / math.sqrt(128), 1.0, 1.0)
    assert bool((plain.entropy[0] < 0.5 * scaled.entropy[0]).all())  # √d_k larger scores
    w_q, w_k = initial_weights(0, 128, RetrievalTask())
    keys, queries = retrieval_eval_example(RetrievalTask())
    weights = torch.softmax((queries @ w_q.T) @ (keys @ w_k.T).T, dim=-1)  # unscaled
    torch.testing.assert_close(weights, plain.eval_weights_init[0], rtol=1e-12, atol=1e-12)


def test_unscaled_reparam_is_the_scaled_model():
    """Init and Adam step of W_Q ÷√d_k: the scaled run up to rounding (bitwise at d_k = 64)."""
    ex = run_scaling_experiment((32,), ("scaled", "unscaled_reparam"), n_seeds=2, steps=40)
    a, b = ex["scaled", 32], ex["unscaled_reparam", 32]
    assert_runs_close(a, b, ("loss", "entropy", "eval_weights"), rtol=1e-4, atol=1e-4)
    # The raw W_Q gradient is √d_k times larger in the reparametrised model.
    torch.testing.assert_close(b.grad_norm_q, a.grad_norm_q * math.sqrt(32), rtol=1e-4, atol=1e-6)


def test_twins_tell_chaotic_runs_and_robust_summaries_leave_them_out():
    ex = run_scaling_experiment((512,), ("scaled", "unscaled"), n_seeds=2, steps=80)
    scaled, unscaled = ex["scaled", 512], ex["unscaled", 512]
    rel = ((scaled.twin_loss[0] - scaled.loss[0]) / scaled.loss[0]).abs()
    assert bool((rel > 0).all()) and bool((rel < 100 * TWIN_GAP).all())
    assert scaled.n_chaotic == 0 and float(scaled.twin_gap().max()) < CHAOS_GAP / 1000
    assert unscaled.n_chaotic == 2 and float(unscaled.twin_gap().min()) > 10 * CHAOS_GAP
    assert scaled.robust_summary() == scaled.summary()  # nothing left out
    none_left = unscaled.robust_summary()
    assert (none_left["n_robust"], none_left["n_chaotic"], none_left["n_seeds"]) == (0, 2, 2)
    assert none_left["median_steps"] is None and none_left["final_loss"] is None
    assert [r["setting"] for r in ex.robust_summary()] == ["scaled", "unscaled"]


# --- records and summaries on hand-made curves ------------------------------------------------


def test_trailing_mean_and_steps_to_threshold():
    loss = torch.tensor([[1.0, 1.0, 1.0], [0.5, 1.0, 0.0], [0.0, 1.0, 2.0], [0.0, 1.0, 0.0]])
    torch.testing.assert_close(
        trailing_mean(loss, 2),
        torch.tensor([[1.0, 1.0, 1.0], [0.75, 1.0, 0.5], [0.25, 1.0, 1.0], [0.0, 1.0, 1.0]]),
    )
    # Full windows only: column 2's lone 0.0 at step 1 averages to 0.5 with step 0.
    assert steps_to_threshold(loss, 0.3, 2).tolist() == [2, -1, -1]
    assert steps_to_threshold(loss, 0.5, 2).tolist() == [2, -1, 1]
    assert steps_to_threshold(loss[:1], 0.5, 2).tolist() == [-1, -1, -1]


@pytest.fixture(scope="module")
def small_run() -> training.TrainingRun:
    return train("scaled", 8, n_seeds=1, steps=2)


def hand_made(run, columns: list[list[float]]) -> training.TrainingRun:
    """``run`` with these loss curves (one list per seed), each its own twin."""
    loss = torch.tensor(columns, dtype=DTYPE).T.repeat_interleave(run.task.window, dim=0)
    return dataclasses.replace(run, loss=loss, twin_loss=loss, seeds=tuple(range(loss.shape[1])))


def test_summary_counts_never_relapsed_and_median(small_run):
    low, high = 0.01, 0.8  # below and above the threshold 0.0875
    run = hand_made(small_run, [[high, low, low], [high, high, high], [low, high, high],
                                [high, high, low]])  # fmt: skip
    row = run.summary()
    assert (row["n_never"], row["n_relapsed"], row["n_stalled"]) == (1, 1, 2)
    assert row["stall_fraction"] == 0.5 and row["n_robust"] == 4 and row["n_chaotic"] == 0
    assert row["median_steps"] == 19  # reached at 19, 9, 29 and never: lower median 19
    assert row["final_loss"] == pytest.approx(low)
    assert run.n_never == 1 and run.n_relapsed == 1
    assert float(run.max_rebound()[2]) == pytest.approx(high - low)
    never = hand_made(small_run, [[high, high], [high, high], [high, low]])
    assert never.summary()["median_steps"] is None


def test_typical_seed_has_the_majority_outcome(small_run):
    low, high = 0.01, 0.8
    mostly_stalled = hand_made(small_run, [[high, high * 0.9], [high, high], [high, low]])
    assert mostly_stalled.typical_seed() == 0  # the median of the two stalled runs
    mostly_learned = hand_made(small_run, [[high, low * 2], [high, low], [high, high]])
    assert mostly_learned.typical_seed() == 1  # the median of the two learned runs


# --- the exercises ------------------------------------------------------------------------------


def _in_d_k(summary, d_k, keep):
    return [r["setting"] for r in summary if r["d_k"] == d_k and keep(r)]


STALL_SLIPS = {
    "never_only": lambda s, d: _in_d_k(s, d, lambda r: r["n_never"] >= r["n_seeds"] / 2),
    "median_none": lambda s, d: _in_d_k(s, d, lambda r: r["median_steps"] is None),
    "strict": lambda s, d: _in_d_k(s, d, lambda r: r["stall_fraction"] > 0.5),
    "any_stall": lambda s, d: _in_d_k(s, d, lambda r: r["stall_fraction"] > 0),
    "sixteen_seeds": lambda s, d: _in_d_k(s, d, lambda r: r["n_never"] + r["n_relapsed"] >= 8),
    "inverted": lambda s, d: _in_d_k(s, d, lambda r: r["stall_fraction"] < 0.5),
    "all_d_k": lambda s, d: [r["setting"] for r in s if r["stall_fraction"] >= 0.5],
    "bad_return": lambda s, d: "unscaled",
    "error": lambda s, d: s[99],
    "unknown": lambda s, d: ["scaled"],
}


def test_check_stalling_settings(capsys):
    def stub(summary, d_k):
        raise NotImplementedError

    result = training.check_stalling_settings(stub)
    assert not result and result.mistake == "not_written"
    assert "Not written yet" in capsys.readouterr().out
    assert training.check_stalling_settings(training.solution_stalling_settings, verbose=False)
    as_set = lambda s, d: set(training.solution_stalling_settings(s, d))
    assert training.check_stalling_settings(as_set, verbose=False)
    for code, fn in STALL_SLIPS.items():
        result = training.check_stalling_settings(fn, verbose=False)
        assert not result and result.mistake == code, (code, result.message)
        assert result.message.startswith(("Not yet", "Almost"))


def _in_place(w_q):
    w_q /= math.sqrt(w_q.shape[0])
    return w_q


INIT_SLIPS = {
    "in_place": _in_place,
    "d_model": lambda w: w / math.sqrt(w.shape[1]),
    "d_k_not_sqrt": lambda w: w / w.shape[0],
    "inverted": lambda w: w * math.sqrt(w.shape[0]),
    "unchanged": lambda w: w.clone(),
    "transposed": lambda w: w.T / math.sqrt(w.shape[0]),
    "bad_return": lambda w: 1 / math.sqrt(w.shape[0]),
    "error": lambda w: w.shape[2],
    "unknown": lambda w: w / 3.0,
}


def test_check_init_like_scaled(capsys):
    def stub(w_q):
        raise NotImplementedError

    result = training.check_init_like_scaled(stub)
    assert not result and result.mistake == "not_written"
    assert "Not written yet" in capsys.readouterr().out
    passed = training.check_init_like_scaled(training.solution_init_like_scaled, verbose=False)
    assert passed and "Passed" in passed.message
    for code, fn in INIT_SLIPS.items():
        result = training.check_init_like_scaled(fn, verbose=False)
        assert not result and result.mistake == code, (code, result.message)


def test_init_like_scaled_gives_the_scaled_attention():
    g = torch.Generator().manual_seed(3)
    d_model, d_k = 8, 128
    w_q, w_k = (torch.randn(d_k, d_model, generator=g) / math.sqrt(d_model) for _ in range(2))
    x, v = torch.randn(5, d_model, generator=g), torch.randn(5, 3, generator=g)
    k = x @ w_k.T
    scaled = scaled_dot_product_attention(x @ w_q.T, k, v)  # default scale 1/√d_k
    w_new = training.solution_init_like_scaled(w_q)
    torch.testing.assert_close(scaled_dot_product_attention(x @ w_new.T, k, v, scale=1.0), scaled)


def test_init_like_scaled_accepts_float64():
    as_float64 = lambda w: w.double() / math.sqrt(w.shape[0])
    assert training.check_init_like_scaled(as_float64, verbose=False)


@pytest.mark.parametrize("container", [tuple, lambda xs: dict.fromkeys(xs).keys(), np.array, iter])
def test_stalling_settings_accept_any_collection_of_names(container):
    def solution(summary, d_k):
        return container(training.solution_stalling_settings(summary, d_k))

    assert training.check_stalling_settings(solution, verbose=False)
