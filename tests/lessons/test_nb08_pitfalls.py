"""Notebook 08's experiments and checkers: right answers pass, each classic mistake is named."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from attn_lib.lessons._checking import show_solution
from attn_lib.lessons.nb08_pitfalls import (
    OVERFLOW_DTYPES,
    check_attention_4d,
    check_stable_softmax,
    dropout_setting,
    softmax_overflow,
    solution_heads_attention,
    solution_my_softmax,
    transpose_1_2_outcome,
)

# --- the experiments ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sizes", "outcome"),
    [
        ((4, 4, 4, 4), "silently wrong"),  # H = L = d_k
        ((3, 1, 3, 3), "silently wrong"),  # decoding: one query, L_k = H = d_k
        ((3, 1, 1, 3), "raises at weights @ V"),
        ((2, 3, 3, 4), "raises at the scores"),
    ],
)
def test_transpose_1_2_outcomes(sizes, outcome):
    assert transpose_1_2_outcome(*sizes) == outcome


@pytest.mark.parametrize("dtype", OVERFLOW_DTYPES)
def test_softmax_overflow_fails_in_two_steps_and_the_max_trick_never(dtype):
    limit = math.log(torch.finfo(getattr(torch, dtype)).max)
    first = softmax_overflow(0.0, dtype)
    assert first.threshold == pytest.approx(limit) and first.failure == "none"
    assert softmax_overflow(first.sum_threshold + 0.1, dtype).failure == "sum overflow"
    assert softmax_overflow(limit + 0.1, dtype).failure == "nan"
    for largest in (0.0, first.sum_threshold + 0.1, limit + 0.1, 100.0):
        torch.testing.assert_close(softmax_overflow(largest, dtype).stable, first.stable,
                                   atol=1e-3, rtol=0)  # fmt: skip


def test_dropout_setting_after_and_before_softmax_and_eval():
    plain = dropout_setting(0.3, training=False)
    after, before = dropout_setting(0.3, "after softmax"), dropout_setting(0.3, "before softmax")
    assert after.dropped.any() and not plain.dropped.any()
    torch.testing.assert_close(after.weights[~after.dropped], plain.weights[~after.dropped] / 0.7)
    assert (after.weights[after.dropped] == 0).all()
    assert not torch.allclose(after.row_sums, torch.ones(4))
    torch.testing.assert_close(before.row_sums, torch.ones(4))
    torch.testing.assert_close(plain.row_sums, torch.ones(4))
    torch.testing.assert_close(dropout_setting(0.3, "before softmax", False).weights, plain.weights)
    assert (dropout_setting(0.5).dropped | after.dropped).equal(dropout_setting(0.5).dropped)


# --- check_stable_softmax -------------------------------------------------------------------


def softmax_in_float32(x):
    return torch.softmax(x.float(), dim=-1)


def softmax_shifted(shift, dim=-1):
    def my_softmax(x):
        e = (x - shift(x)).exp()
        return e / e.sum(dim=dim, keepdim=True)

    return my_softmax


def softmax_no_keepdim(x):
    e = (x - x.max(dim=-1).values).exp()
    return e / e.sum(dim=-1, keepdim=True)


def softmax_stub(x):
    raise NotImplementedError


@pytest.mark.parametrize("fn", [solution_my_softmax, softmax_in_float32])
def test_stable_softmax_right_answers_pass(fn):
    assert check_stable_softmax(fn, verbose=False)


@pytest.mark.parametrize(
    ("fn", "code", "words"),
    [
        (softmax_shifted(lambda x: 0.0), "naive", "amax(dim=-1, keepdim=True)"),
        (softmax_shifted(lambda x: x.max()), "global_max", "each row"),
        (softmax_shifted(lambda x: x.amin(dim=-1, keepdim=True)), "min_not_max", "minimum"),
        (lambda x: torch.softmax(x, dim=0), "softmax_dim", "dim=-1"),
        (softmax_no_keepdim, "error", "keepdim=True"),
        (lambda x: solution_my_softmax(x).tolist(), "bad_return", "list"),
        (lambda x: 2 * solution_my_softmax(x), "unknown", "not 1"),
        (softmax_stub, "not_written", "Not written yet"),
    ],
)
def test_stable_softmax_mistakes_are_named(fn, code, words):
    result = check_stable_softmax(fn, verbose=False)
    assert not result and result.mistake == code, result.message
    assert words in result.message.replace("\n", " ")


# --- check_attention_4d ---------------------------------------------------------------------


def heads(scores, dim=-1):
    def heads_attention(query, key, value):
        return F.softmax(scores(query, key), dim=dim) @ value

    return heads_attention


def heads_transpose_1_2(query, key, value):
    scores = query @ key.transpose(1, 2) / math.sqrt(query.size(-1))
    return F.softmax(scores, dim=-1) @ value


def heads_dot_T(query, key, value):
    return F.softmax(query @ key.T / math.sqrt(query.size(-1)), dim=-1) @ value


def heads_stub(query, key, value):
    raise NotImplementedError


@pytest.mark.parametrize(
    "fn", [solution_heads_attention, heads(lambda q, k: q @ k.mT / math.sqrt(q.size(-1)))]
)
def test_attention_4d_right_answers_pass(fn):
    assert check_attention_4d(fn, verbose=False)


@pytest.mark.parametrize(
    ("fn", "code", "words"),
    [
        (heads_transpose_1_2, "transpose_1_2", "H = L_k = d_k"),
        (heads_dot_T, "dot_T", "transpose(-2, -1)"),
        (heads(lambda q, k: q @ k.mT / q.size(-1)), "scale_d_k", "√d_k"),
        (heads(lambda q, k: q @ k.mT / math.sqrt(q.size(1))), "scale_heads", "√H"),
        (heads(lambda q, k: q @ k.mT / math.sqrt(q.size(-1)), dim=1), "softmax_dim", "heads"),
        (heads(lambda q, k: k @ q.mT / math.sqrt(q.size(-1))), "scores_transposed", "K Qᵀ"),
        (heads_stub, "not_written", "Not written yet"),
    ],
)
def test_attention_4d_mistakes_are_named(fn, code, words, recwarn):
    result = check_attention_4d(fn, verbose=False)
    assert not result and result.mistake == code, result.message
    assert words in result.message.replace("\n", " ")
    assert not [w for w in recwarn if "x.T" in str(w.message)]  # explained, not leaked


def test_solutions_are_shown_only_after_an_attempt(capsys):
    show_solution("never_tried", solution_my_softmax)
    assert "Try it first" in capsys.readouterr().out
    check_stable_softmax(softmax_in_float32, verbose=False)  # an attempt
    show_solution("my_softmax", solution_my_softmax)
    assert "x.amax(dim=-1, keepdim=True)" in capsys.readouterr().out


def test_checkers_leave_the_global_rng_alone():
    state = torch.get_rng_state()
    check_attention_4d(solution_heads_attention, verbose=False)
    check_stable_softmax(solution_my_softmax, verbose=False)
    assert torch.equal(torch.get_rng_state(), state)
