"""Notebook 10's checkers: one online-softmax step, and the bytes of a score matrix."""

from __future__ import annotations

import math

import pytest
import torch

from attn_lib.lessons import nb10_cost
from attn_lib.lessons.nb10_cost import check_online_softmax_step, check_score_matrix_bytes


def good_step(m, l, acc, scores, v_block):
    m_new = torch.maximum(m, scores.amax(dim=-1, keepdim=True))
    ref = m_new.masked_fill(m_new == -math.inf, 0.0)
    r, p = torch.exp(m - ref), torch.exp(scores - ref)
    return m_new, r * l + p.sum(dim=-1, keepdim=True), r * acc + p @ v_block


def not_written(*args):
    raise NotImplementedError


def test_online_step_passes_a_correct_step():
    result = check_online_softmax_step(good_step, verbose=False)
    assert result and result.mistake is None and "Passed" in result.message


def test_online_step_accepts_a_step_that_works_in_place():
    def in_place(m, l, acc, scores, v_block):
        m_new, l_new, acc_new = good_step(m, l, acc, scores, v_block)
        acc.copy_(acc_new)
        return m_new, l_new, acc

    assert check_online_softmax_step(in_place, verbose=False)


@pytest.mark.parametrize("slip", list(nb10_cost._STEP_SLIPS))
def test_online_step_names_each_slip(slip):
    def step(m, l, acc, scores, v_block):
        return nb10_cost._variant_step(m, l, acc, scores, v_block, slip)

    result = check_online_softmax_step(step, verbose=False)
    assert not result and result.mistake == slip
    assert "Not yet" in result.message


def test_online_step_without_guard_is_explained():
    def no_guard(m, l, acc, scores, v_block):
        m_new = torch.maximum(m, scores.amax(dim=-1, keepdim=True))
        r, p = torch.exp(m - m_new), torch.exp(scores - m_new)
        return m_new, r * l + p.sum(dim=-1, keepdim=True), r * acc + p @ v_block

    result = check_online_softmax_step(no_guard, verbose=False)
    assert result.mistake == "no_guard" and "NaN" in result.message


@pytest.mark.parametrize(
    ("fn", "mistake"),
    [
        (not_written, "not_written"),
        (lambda m, l, acc, s, v: 1 / 0, "error"),
        (lambda m, l, acc, s, v: (m, l), "bad_return"),
        (lambda m, l, acc, s, v: (m.squeeze(-1), l, acc), "bad_return"),
        (lambda m, l, acc, s, v: [t * 1.5 for t in good_step(m, l, acc, s, v)], "unknown"),
    ],
)
def test_online_step_other_outcomes(fn, mistake, capsys):
    result = check_online_softmax_step(fn)
    assert not result and result.mistake == mistake
    assert capsys.readouterr().out.strip() == result.message  # the feedback is printed


def test_online_step_reference_matches_the_library():
    for case in nb10_cost._step_cases():
        states = nb10_cost._reference_states(case)
        assert len(states) == len(case.blocks())
        assert torch.isfinite(states[-1][1]).all()


def right_bytes(B, L, dtype):
    return B * L * L * dtype.itemsize


def test_score_bytes_passes():
    result = check_score_matrix_bytes(right_bytes, verbose=False)
    assert result and "512 MiB" in result.message
    assert nb10_cost.score_matrix_bytes(8, 4096, torch.float32) == 512 * 2**20


@pytest.mark.parametrize(
    ("fn", "mistake"),
    [
        (not_written, "not_written"),
        (lambda B, L, dtype: B * L * L, "numbers_not_bytes"),
        (lambda B, L, dtype: 8 * right_bytes(B, L, dtype), "bits"),
        (lambda B, L, dtype: L * L * dtype.itemsize, "batch_missing"),
        (lambda B, L, dtype: B * L * dtype.itemsize, "linear_in_L"),
        (lambda B, L, dtype: B * L * L * 4, "always_4_bytes"),
        (lambda B, L, dtype: 2 * right_bytes(B, L, dtype), "scores_and_weights"),
        (lambda B, L, dtype: right_bytes(B, L, dtype) / 2**20, "mib"),
        (lambda B, L, dtype: right_bytes(B, L, dtype) / 1e6, "megabytes"),
        (lambda B, L, dtype: 12345, "wrong_value"),
        (lambda B, L, dtype: "lots", "bad_return"),
        (lambda B, L, dtype: {}[0], "error"),
    ],
)
def test_score_bytes_names_each_mistake(fn, mistake):
    result = check_score_matrix_bytes(fn, verbose=False)
    assert not result and result.mistake == mistake


def test_score_bytes_accepts_a_tensor():
    assert check_score_matrix_bytes(lambda B, L, d: torch.tensor(right_bytes(B, L, d)),
                                    verbose=False)  # fmt: skip
