"""Notebook 10's measurements and checkers: what they count, and each mistake named in words."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import torch

import attn_lib
from attn_lib.chunked import DEFAULT_BLOCK_SIZE, online_softmax_step
from attn_lib.lessons import _checking, nb10_cost
from attn_lib.lessons._checking import show_solution
from attn_lib.lessons.nb10_cost import (
    check_crossover_length,
    check_online_step,
    format_bytes,
    largest_new_tensor,
    matmul_flops,
    online_softmax_walk,
    peak_intermediate_bytes,
    time_attention,
)

# --- measuring ---------------------------------------------------------------------------------


def test_format_bytes():
    assert [format_bytes(n) for n in (292, 1024, 512 * 2**20, 4 * 2**30)] == [
        "292 B", "1.0 KiB", "512.0 MiB", "4.0 GiB"]  # fmt: skip


def test_time_attention_warms_up_interleaves_and_restores_threads():
    calls = []
    methods = {"a": lambda q, k, v: calls.append(("a", q.shape[1], torch.get_num_threads())),
               "b": lambda q, k, v: sum(range(20_000))}  # fmt: skip
    threads = torch.get_num_threads()
    ms = time_attention(methods, [8, 16], d_k=4, repeats=3)
    assert torch.get_num_threads() == threads
    assert calls[0] == ("a", 8, 1) and calls.count(("a", 16, 1)) == 4  # warm-up + 3, 1 thread
    assert sorted(ms) == ["a", "b"] and sorted(ms["a"]) == [8, 16]
    assert ms["b"][16] > 0  # CPU time spent in the call


def test_largest_new_tensor_sees_results_not_views():
    a, b = torch.randn(3, 5), torch.randn(5, 7)
    assert largest_new_tensor(lambda: (a @ b, a.T, a[:2])) == ((3, 7), 3 * 7 * 4)
    assert largest_new_tensor(lambda: a.view(15)) == ((), 0)
    q = k = v = torch.randn(1, 64, 8)
    assert largest_new_tensor(lambda: attn_lib.chunked_attention(q, k, v, block_size=8))[0] == (
        1, 64, 8)  # fmt: skip


def test_matmul_flops_counts_the_formulas_products_only():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(3, 5, generator=g), torch.randn(5, 7, generator=g)
    assert matmul_flops(lambda: a @ b) == 2 * 3 * 5 * 7
    assert matmul_flops(lambda: torch.bmm(a[None].expand(2, 3, 5), b[None].expand(2, 5, 7))) == (
        2 * 2 * 3 * 5 * 7)  # fmt: skip
    assert matmul_flops(lambda: (a @ b[:, 0], torch.dot(a[0], a[0]))) == 0  # vectors: not counted
    q, k, v = (torch.randn(3, 20, 8, generator=g) for _ in range(3))  # the checks' dot: not counted
    want = 2 * 3 * 20 * 20 * (8 + 8)  # as FlopCounterMode counts it (checked when written)
    assert matmul_flops(lambda: attn_lib.scaled_dot_product_attention(q, k, v)) == want
    for block in (20, 3):
        assert (
            matmul_flops(lambda b=block: attn_lib.chunked_attention(q, k, v, block_size=b)) == want
        )


def test_peak_intermediate_bytes():
    L, d = 8192, 64
    naive = peak_intermediate_bytes(L, L, d, d, method="naive")
    assert naive == 2 * L * L * 4  # scores and weights, float32
    # The benchmark's P4 target at the default block size, against a single L × L matrix:
    # (8192·128 scores + 8192·64 query + 2·8192·64 acc, p·V + 8·8192 row state + 128·64 key) · 4 B
    assert DEFAULT_BLOCK_SIZE == 128
    chunked = peak_intermediate_bytes(L, L, d, d)
    assert chunked == 10_780_672 and chunked / (L * L * 4) < 0.05  # 10.3 MiB
    # chunked: constant in L_k once L_k ≥ block; naive: linear in L_k
    sizes = [peak_intermediate_bytes(64, L_k, 16, 16, block_size=32) for L_k in (32, 64, 4096)]
    assert len(set(sizes)) == 1
    naive_sizes = [peak_intermediate_bytes(64, L_k, 16, 16, block_size=32, method="naive")
                   for L_k in (32, 64, 4096)]  # fmt: skip
    assert naive_sizes == [naive_sizes[0] * n for n in (1, 2, 128)]
    # batch dims multiply; float16 is accumulated in float32; query blocks shrink it further
    assert peak_intermediate_bytes(64, 64, 16, 16, block_size=32, batch=(2, 3)) == 6 * sizes[0]
    half = {m: peak_intermediate_bytes(64, 64, 16, 16, block_size=32, dtype=torch.float16,
                                       method=m) for m in ("chunked", "naive")}  # fmt: skip
    assert half["chunked"] > half["naive"]
    assert peak_intermediate_bytes(L, L, d, d, query_block_size=1024) < chunked / 4


# --- the walk ----------------------------------------------------------------------------------


@pytest.mark.parametrize("block_size", [1, 2, 3, 4, 16])
def test_online_softmax_walk(block_size):
    walk = online_softmax_walk(block_size)
    assert walk is online_softmax_walk(block_size)  # cached
    assert len(walk.states) == math.ceil(16 / block_size)
    assert torch.isinf(walk.scores[:2]).all() and torch.isfinite(walk.scores[2:]).all()
    torch.testing.assert_close(walk.output, torch.softmax(walk.scores, -1) @ walk.values)
    torch.testing.assert_close(walk.states[-1].output, walk.output)
    for s in walk.states:
        assert not torch.isnan(s.output).any() and not math.isnan(s.l)
        if s.m_old > -math.inf:
            assert s.rescale == pytest.approx(math.exp(s.m_old - s.m), rel=1e-6)
        if s.m > -math.inf:  # the running max and sum of every key seen so far
            seen = walk.scores[: s.stop]
            assert s.m == seen.max().item()
            assert s.l == pytest.approx(torch.exp(seen - s.m).sum().item(), rel=1e-6)


def test_a_first_block_of_padding_is_guarded():
    first = online_softmax_walk(2).states[0]
    assert first.m == -math.inf and first.rescale == 0.0 and first.l == 0.0


# --- exercise 1: one step of the online softmax ------------------------------------------------


def test_the_checkers_recurrence_is_the_librarys():
    for case in nb10_cost._step_cases():
        _, s, keep, v, size = case
        mine = nb10_cost._run_steps(None, case)
        m, l, acc = torch.full((s.shape[0], 1), -math.inf), torch.zeros(s.shape[0], 1), torch.zeros(
            s.shape[0], v.shape[-1])  # fmt: skip
        scores = s.masked_fill(~keep, -math.inf)
        for i, k0 in enumerate(range(0, s.shape[-1], size)):
            m, l, acc = online_softmax_step(m, l, acc.clone(), scores[:, k0:k0 + size].clone(),
                                            v[k0:k0 + size])  # fmt: skip
            for x, y in zip(mine[3 * i : 3 * i + 3], (m, l, acc), strict=True):
                torch.testing.assert_close(x, y)
        weights = torch.softmax(scores, -1).nan_to_num(0.0)  # all-blocked rows: zeros
        has_key = keep.any(-1, keepdim=True)
        torch.testing.assert_close(torch.where(has_key, acc / l.masked_fill(~has_key, 1), 0),
                                   weights @ v)  # fmt: skip


def test_online_step_passes_the_solution_and_one_that_works_in_place():
    assert check_online_step(nb10_cost.solution_online_step, verbose=False)

    def in_place(m, l, acc, scores, v_block):
        m_new, l_new, acc_new = nb10_cost.solution_online_step(m, l, acc, scores, v_block)
        acc.copy_(acc_new)
        return m_new, l_new, acc

    assert check_online_step(in_place, verbose=False)


@pytest.mark.parametrize("slip", list(nb10_cost._STEP_SLIPS))
def test_online_step_names_each_slip(slip):
    def step(m, l, acc, scores, v_block):
        return nb10_cost._slipped_step(m, l, acc, scores, v_block, slip)

    result = check_online_step(step, verbose=False)
    assert not result and result.mistake == slip and result.message.startswith("Not yet.")


def not_written(*args):
    raise NotImplementedError


@pytest.mark.parametrize(
    ("fn", "mistake"),
    [
        (lambda m, l, acc, s, v: 1 / 0, "error"),
        (lambda m, l, acc, s, v: (m, l), "bad_return"),
        (lambda m, l, acc, s, v: (m.squeeze(-1), l, acc), "bad_return"),
        (lambda *a: [1.5 * t for t in nb10_cost.solution_online_step(*a)], "unknown"),
    ],
)
def test_online_step_other_outcomes(fn, mistake, capsys):
    result = check_online_step(fn)
    assert not result and result.mistake == mistake
    assert capsys.readouterr().out.strip() == result.message  # the feedback is printed


# --- exercise 2: the crossover -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("fn", "mistake"),
    [
        (nb10_cost.solution_crossover_length, None),
        (lambda d, k, v: Fraction(d * (2 * k + v), k + v), None),
        (lambda d, k, v: np.float64(d * (2 * k + v) / (k + v)), None),
        (lambda d, k, v: torch.tensor(d * (2 * k + v) / (k + v)), None),
        (lambda d, k, v: d, "just_d_model"),
        (lambda d, k, v: 2 * d, "qk_only"),
        (lambda d, k, v: d * (2 * k + v) / k, "scores_only"),
        (lambda d, k, v: 2 * d * (2 * k + v) / (k + v), "flops_mixed"),
        (lambda d, k, v: 1.5 * d, "wrong_value"),  # right only when d_k = d_v
        (lambda d, k, v: "768", "bad_return"),
        (lambda d, k, v: {}[0], "error"),
    ],
)
def test_crossover_names_each_mistake(fn, mistake):
    result = check_crossover_length(fn, verbose=False)
    assert bool(result) == (mistake is None) and result.mistake == mistake


def test_a_solution_is_shown_only_after_an_attempt(capsys, monkeypatch):
    monkeypatch.setattr(_checking, "_ATTEMPTED", set())
    nb10_cost.check_crossover_length(not_written, verbose=False)  # not an attempt
    show_solution("crossover_length", nb10_cost.solution_crossover_length)
    assert "Try it first" in capsys.readouterr().out
    nb10_cost.check_crossover_length(lambda d, k, v: d, verbose=False)
    show_solution("crossover_length", nb10_cost.solution_crossover_length)
    assert "def solution_crossover_length" in capsys.readouterr().out
