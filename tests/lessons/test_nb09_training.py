"""Notebook 09's torch apparatus: the training learns, is reproducible and batched faithfully,
the settings are what they claim, the records and summaries count right, and each checker
names each typical wrong answer."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from attn_lib import scaled_dot_product_attention
from attn_lib.lessons import nb09_training as training
from attn_lib.lessons.nb09_training import (
    CHAOS_GAP,
    DTYPE,
    TWIN_GAP,
    RetrievalTask,
    initial_weights,
    make_retrieval_data,
    run_scaling_experiment,
    trailing_mean,
)

RECORDS = ("loss", "twin_loss", "grad_norm_q", "saturated", "saturated_wrong", "row_grad")
ARMS = (("unscaled_reparam", 0.03), ("unscaled", 0.1))


def train(setting: str, d_k: int, **kwargs) -> training.TrainingRun:
    return run_scaling_experiment((d_k,), (setting,), **kwargs)[setting, d_k]


def assert_runs_close(a, b, names=("loss", "twin_loss", "eval_weights"), **tol) -> None:
    for name in names:
        torch.testing.assert_close(getattr(a, name), getattr(b, name), msg=name, **tol)


# --- it learns; batching is faithful ------------------------------------------------------------


def test_scaled_training_learns_the_task():
    run = train("scaled", 32, n_seeds=2, steps=60)
    assert bool((run.loss[: run.task.window].mean(dim=0) > 0.5 * run.task.baseline).all())
    assert not run.stalled().any() and not run.chaotic().any()
    picked = run.eval_weights.argmax(dim=-1)  # (S, L): a learned head looks at key i
    assert float((picked == torch.arange(run.task.n_keys)).double().mean()) >= 0.9


def test_runs_are_reproducible_and_seeds_independent():
    state = torch.get_rng_state()
    a = train("unscaled", 16, n_seeds=2, seed=3, steps=20)
    assert torch.equal(torch.get_rng_state(), state)  # the global generator is not used
    b = train("unscaled", 16, n_seeds=2, seed=3, steps=20)
    alone = train("unscaled", 16, n_seeds=1, seed=4, steps=20)
    for name in RECORDS:
        torch.testing.assert_close(getattr(a, name), getattr(b, name), rtol=0, atol=0,
                                   equal_nan=True, msg=name)  # fmt: skip
    # Seed 4 stacked with seed 3 is seed 4 alone (the batched matmul may block differently).
    torch.testing.assert_close(a.loss[:, 1:], alone.loss, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(a.eval_weights[1:], alone.eval_weights, rtol=1e-5, atol=1e-6)


def test_arms_trained_together_equal_separate_runs():
    ex = run_scaling_experiment((8, 32), n_seeds=2, steps=20, extra=ARMS)
    assert set(ex.runs) == {(s, d, 0.03) for s in training.SETTINGS for d in (8, 32)} | {
        ("unscaled_reparam", 32, 0.03),
        ("unscaled", 32, 0.1),
    }  # extra arms: largest d_k only
    for setting in training.SETTINGS:
        assert_runs_close(ex[setting, 32], train(setting, 32, n_seeds=2, steps=20),
                          rtol=1e-5, atol=1e-6)  # fmt: skip
    fast = train("unscaled", 32, n_seeds=2, steps=20, lr=0.1)
    assert fast.lr == 0.1 and ex["unscaled", 32, 0.1].lr == 0.1
    assert_runs_close(ex["unscaled", 32, 0.1], fast, rtol=1e-5, atol=1e-6)


def test_the_batched_loop_is_adam_on_one_visible_model():
    """One seed's model written out, with Kingma & Ba's Algorithm 1, gives the batched loop's
    losses (notebook 09's §3 checks torch.optim.Adam against the same run)."""
    task, (beta1, beta2) = RetrievalTask(), (0.9, 0.999)
    data = make_retrieval_data((0,), 6, task)
    run = train("scaled", 32, n_seeds=1, steps=6, task=task)
    params = [w[0].clone().requires_grad_() for w in initial_weights((0,), 32, task)]
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


def test_shapes_ranges_and_measured_steps():
    task = RetrievalTask(n_keys=5, d_model=4, d_v=3, batch_size=2, window=3)
    run = train("unscaled", 6, n_seeds=3, steps=12, task=task)
    assert run.n_seeds == 3 and run.seeds == (0, 1, 2)
    measured = torch.tensor([t <= 3 or t >= 9 for t in range(12)])  # first window + 1, last
    for name in RECORDS:
        t = getattr(run, name)
        assert t.shape == (12, 3) and t.dtype == DTYPE, name
        done = measured if name not in ("loss", "twin_loss") else torch.ones(12, dtype=torch.bool)
        assert bool(t[done].isfinite().all()) and bool(t[~done].isnan().all()), name
    assert bool(((run.saturated >= run.saturated_wrong) | run.saturated.isnan()).all())
    torch.testing.assert_close(run.eval_weights.sum(dim=-1), torch.ones(3, 5, dtype=DTYPE))
    assert task.baseline == pytest.approx(0.8) and task.threshold == pytest.approx(0.08)
    data = make_retrieval_data((0, 1, 2), 12, task)
    assert data.keys.shape == (12, 3, 2, 5, 4) and data.values.shape == (12, 3, 2, 5, 3)
    torch.testing.assert_close(data.keys.norm(dim=-1), torch.full((12, 3, 2, 5), 2.0, dtype=DTYPE))


# --- the settings -------------------------------------------------------------------------------


def test_the_control_starts_as_the_scaled_model_and_unscaled_does_not():
    ex = run_scaling_experiment((128,), n_seeds=2, steps=2)
    scaled, init, plain = ex["scaled", 128], ex["unscaled_init", 128], ex["unscaled", 128]
    assert (scaled.scale, init.scale, plain.scale) == (1 / math.sqrt(128), 1.0, 1.0)
    torch.testing.assert_close(init.loss[0], scaled.loss[0])
    assert bool((plain.saturated[0] > scaled.saturated[0]).all())  # √d_k larger scores


def test_unscaled_reparam_is_the_scaled_model_bit_for_bit():
    """W_Q's start and Adam step ÷√d_k: the scaled run exactly where √d_k is a power of two."""
    ex = run_scaling_experiment((64,), ("scaled",), n_seeds=2, steps=40, extra=ARMS[:1])
    a, b = ex["scaled", 64], ex["unscaled_reparam", 64]
    for name in ("loss", "twin_loss", "saturated", "row_grad", "eval_weights"):
        torch.testing.assert_close(getattr(a, name), getattr(b, name), rtol=0, atol=0,
                                   equal_nan=True, msg=name)  # bit for bit  # fmt: skip
    # The raw W_Q gradient is √d_k times larger in the reparametrised model.
    torch.testing.assert_close(b.grad_norm_q, a.grad_norm_q * 8, equal_nan=True)


def test_twins_tell_chaotic_runs():
    ex = run_scaling_experiment((256,), ("scaled", "unscaled"), n_seeds=2, steps=80)
    scaled, unscaled = ex["scaled", 256], ex["unscaled", 256]
    rel = ((scaled.twin_loss[0] - scaled.loss[0]) / scaled.loss[0]).abs()
    assert bool((rel > 0).all()) and bool((rel < 100 * TWIN_GAP).all())
    assert not scaled.chaotic().any() and float(scaled.twin_gaps().max()) < CHAOS_GAP / 1000
    assert unscaled.chaotic().all() and float(unscaled.twin_gaps().amax(0).min()) > 10 * CHAOS_GAP
    row = unscaled.summary()
    assert (row["n_robust"], row["n_chaotic"], row["n_seeds"]) == (0, 2, 2)
    assert row["median_steps"] is None and row["final_loss"] is None


# --- records and summaries on hand-made curves ------------------------------------------------


def test_trailing_mean():
    loss = torch.tensor([[1.0, 1.0, 1.0], [0.5, 1.0, 0.0], [0.0, 1.0, 2.0], [0.0, 1.0, 0.0]])
    torch.testing.assert_close(
        trailing_mean(loss, 2),
        torch.tensor([[1.0, 1.0, 1.0], [0.75, 1.0, 0.5], [0.25, 1.0, 1.0], [0.0, 1.0, 1.0]]),
    )


@pytest.fixture(scope="module")
def small_run() -> training.TrainingRun:
    return train("scaled", 8, n_seeds=1, steps=2)


def hand_made(run, columns: list[list[float]], twin_shift=0.0) -> training.TrainingRun:
    """``run`` with these loss curves (one list per seed, each value held for a window), and
    twins shifted by ``twin_shift`` in the last seed."""
    loss = torch.tensor(columns, dtype=DTYPE).T.repeat_interleave(run.task.window, dim=0)
    twin = loss.clone()
    twin[:, -1] += twin_shift
    return dataclasses.replace(run, loss=loss, twin_loss=twin, seeds=tuple(range(len(columns))))


def test_summary_counts_settled_runs(small_run):
    low, high, edge = 0.01, 0.8, small_run.task.threshold + CHAOS_GAP / 2
    run = hand_made(small_run, [[high, low, low], [high, high, high], [low, high, high],
                                [high, high, low], [high, high, edge]])  # fmt: skip
    assert run.stalled().tolist() == [False, True, True, False, True]
    assert run.steps_to_threshold().tolist() == [19, -1, 9, 29, -1]
    row = run.summary()  # the last run ends within CHAOS_GAP of the threshold: left out
    assert (row["n_robust"], row["n_chaotic"], row["n_stalled"]) == (4, 0, 2)
    assert row["median_steps"] == 19  # reached at 19, 9, 29 and never: lower median 19
    assert row["final_loss"] == pytest.approx(low)
    assert float(run.max_rebound()[2]) == pytest.approx(high - low)
    chaotic = hand_made(small_run, [[high, low], [high, high], [high, low]], twin_shift=0.5)
    assert chaotic.chaotic().tolist() == [False, False, True]
    row = chaotic.summary()
    assert (row["n_robust"], row["n_chaotic"], row["n_stalled"]) == (2, 1, 1)
    assert row["median_steps"] == 19  # of 19 and never, the lower median


def test_summary_table():
    rows = [
        {"setting": "scaled", "d_k": 32, "lr": 0.03, "n_seeds": 16, "n_chaotic": 0,
         "n_robust": 15, "n_stalled": 1, "median_steps": 21, "final_loss": 0.0046},
        {"setting": "unscaled", "d_k": 256, "lr": 0.003, "n_seeds": 16, "n_chaotic": 2,
         "n_robust": 14, "n_stalled": 0, "median_steps": None, "final_loss": 0.5},
        {"setting": "unscaled_init", "d_k": 256, "lr": 0.03, "n_seeds": 16, "n_chaotic": 16,
         "n_robust": 0, "n_stalled": 0, "median_steps": None, "final_loss": None},
    ]  # fmt: skip
    head, *lines = training.summary_table(rows).splitlines()
    assert head.split()[:2] == ["d_k", "setting"] and head.endswith("chaotic")
    assert len({len(line) for line in (head, *lines)}) == 1  # aligned
    assert lines[0].split()[-5:] == ["0.03", "1/15", "21", "0.005", "0/16"]
    assert lines[1].split()[-5:] == ["0.003", "0/14", "never", "0.500", "2/16"]
    assert lines[2].count("–") == 3 and lines[2].endswith("16/16")


# --- the exercises ------------------------------------------------------------------------------


ADAM_SLIPS = {
    "unchanged": lambda lr, eps, d_k: (lr, eps),
    "d_k_not_sqrt": lambda lr, eps, d_k: (lr / d_k, eps * d_k),
    "inverted": lambda lr, eps, d_k: (lr * math.sqrt(d_k), eps / math.sqrt(d_k)),
    "eps_unchanged": lambda lr, eps, d_k: (lr / math.sqrt(d_k), eps),
    "eps_inverted": lambda lr, eps, d_k: (lr / math.sqrt(d_k), eps / math.sqrt(d_k)),
    "bad_return": lambda lr, eps, d_k: lr / math.sqrt(d_k),
    "error": lambda lr, eps, d_k: lr / d_k.sqrt(),
    "unknown": lambda lr, eps, d_k: (lr / 3, eps),
}


def test_check_adam_like_scaled():
    assert training.check_adam_like_scaled(training.solution_adam_like_scaled, verbose=False)
    as_tensors = lambda lr, eps, d_k: [torch.tensor(lr / d_k**0.5), torch.tensor(eps * d_k**0.5)]
    assert training.check_adam_like_scaled(as_tensors, verbose=False)
    for code, fn in ADAM_SLIPS.items():
        result = training.check_adam_like_scaled(fn, verbose=False)
        assert not result and result.mistake == code, (code, result.message)
        assert result.message.startswith(("Not yet", "Almost"))


def test_adam_like_scaled_makes_the_unscaled_run_the_scaled_one():
    """The solution's (lr', ε') given to torch.optim.Adam: the unscaled model started at
    W_Q/√d_k takes the scaled model's steps."""
    g, d_k = torch.Generator().manual_seed(1), 64
    x, k = torch.randn(6, 8, generator=g), torch.randn(5, d_k, generator=g)
    target = torch.randn(6, 5, generator=g).softmax(dim=-1)
    w = torch.randn(d_k, 8, generator=g) / math.sqrt(8)

    def losses(w_q, scale, lr, eps):
        w_q = w_q.clone().requires_grad_()
        optimizer, out = torch.optim.Adam([w_q], lr=lr, eps=eps), []
        for _ in range(5):
            loss = (((x @ w_q.T) @ k.T * scale).softmax(dim=-1) - target).pow(2).sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            out.append(loss.item())
        return torch.tensor(out)

    lr, eps = training.solution_adam_like_scaled(0.03, 1e-8, d_k)
    scaled = losses(w, 1 / math.sqrt(d_k), 0.03, 1e-8)
    torch.testing.assert_close(losses(w / math.sqrt(d_k), 1.0, lr, eps), scaled)
    assert not torch.allclose(losses(w / math.sqrt(d_k), 1.0, 0.03, 1e-8), scaled)  # the control


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


def test_check_init_like_scaled():
    passed = training.check_init_like_scaled(training.solution_init_like_scaled, verbose=False)
    assert passed and "Passed" in passed.message
    as_float64 = lambda w: w.double() / math.sqrt(w.shape[0])
    assert training.check_init_like_scaled(as_float64, verbose=False)
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
