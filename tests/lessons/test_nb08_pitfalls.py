"""Notebook 08's checkers: right answers pass, each classic mistake is named in words."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from attn_lib.lessons.nb08_pitfalls import (
    check_attention_4d,
    check_evaluation,
    check_stable_softmax,
)

# --- check_stable_softmax -------------------------------------------------------------------


def softmax_right(x):
    e = (x - x.amax(dim=-1, keepdim=True)).exp()
    return e / e.sum(dim=-1, keepdim=True)


def softmax_in_float32(x):
    return torch.softmax(x.float(), dim=-1)


def softmax_naive(x):
    e = x.exp()
    return e / e.sum(dim=-1, keepdim=True)


def softmax_global_max(x):
    e = (x - x.max()).exp()
    return e / e.sum(dim=-1, keepdim=True)


def softmax_min(x):
    e = (x - x.amin(dim=-1, keepdim=True)).exp()
    return e / e.sum(dim=-1, keepdim=True)


def softmax_dim0(x):
    return torch.softmax(x, dim=0)


def softmax_no_keepdim(x):
    e = (x - x.max(dim=-1).values).exp()
    return e / e.sum(dim=-1, keepdim=True)


def softmax_returns_list(x):
    return softmax_right(x).tolist()


def softmax_sums_to_two(x):
    return 2 * softmax_right(x)


def softmax_stub(x):
    raise NotImplementedError


@pytest.mark.parametrize("fn", [softmax_right, softmax_in_float32])
def test_stable_softmax_right_answers_pass(fn, capsys):
    result = check_stable_softmax(fn)
    assert result and result.mistake is None
    assert capsys.readouterr().out.startswith("Passed.")


@pytest.mark.parametrize(
    ("fn", "code", "words"),
    [
        (softmax_naive, "naive", "amax(dim=-1, keepdim=True)"),
        (softmax_global_max, "global_max", "each row"),
        (softmax_min, "min_not_max", "minimum"),
        (softmax_dim0, "softmax_dim", "dim=-1"),
        (softmax_no_keepdim, "error", "keepdim=True"),
        (softmax_returns_list, "bad_return", "list"),
        (softmax_sums_to_two, "unknown", "not 1"),
        (softmax_stub, "not_written", "Not written yet"),
    ],
)
def test_stable_softmax_mistakes_are_named(fn, code, words):
    result = check_stable_softmax(fn, verbose=False)
    assert not result and result.mistake == code
    assert words in result.message


# --- check_attention_4d ---------------------------------------------------------------------


def heads_right(query, key, value):
    weights = F.softmax(query @ key.transpose(-2, -1) / math.sqrt(query.size(-1)), dim=-1)
    return weights @ value, weights


def heads_mT(query, key, value):
    return F.softmax(query @ key.mT / math.sqrt(query.size(-1)), dim=-1) @ value


def heads_transpose_1_2(query, key, value):
    scores = query @ key.transpose(1, 2) / math.sqrt(query.size(-1))
    return F.softmax(scores, dim=-1) @ value


def heads_dot_T(query, key, value):
    return F.softmax(query @ key.T / math.sqrt(query.size(-1)), dim=-1) @ value


def heads_divide_d_k(query, key, value):
    return F.softmax(query @ key.mT / query.size(-1), dim=-1) @ value


def heads_softmax_heads(query, key, value):
    return F.softmax(query @ key.mT / math.sqrt(query.size(-1)), dim=1) @ value


def heads_k_q(query, key, value):
    scores = key @ query.mT / math.sqrt(query.size(-1))
    return F.softmax(scores, dim=-1) @ value


def heads_stub(query, key, value):
    raise NotImplementedError


@pytest.mark.parametrize("fn", [heads_right, heads_mT])
def test_attention_4d_right_answers_pass(fn):
    assert check_attention_4d(fn, verbose=False)


@pytest.mark.parametrize(
    ("fn", "code", "words"),
    [
        (heads_transpose_1_2, "transpose_1_2", "H = L = d_k = 4"),
        (heads_dot_T, "dot_T", "transpose(-2, -1)"),
        (heads_divide_d_k, "scale_d_k", "√d_k"),
        (heads_softmax_heads, "softmax_dim", "heads"),
        (heads_k_q, "scores_transposed", "K Qᵀ"),
        (heads_stub, "not_written", "Not written yet"),
    ],
)
def test_attention_4d_mistakes_are_named(fn, code, words, recwarn):
    result = check_attention_4d(fn, verbose=False)
    assert not result and result.mistake == code, result.message
    assert words in result.message
    assert not [w for w in recwarn if "x.T" in str(w.message)]  # explained, not leaked


def test_the_transpose_trap_cases_really_run_silently():
    # the two trap shapes of the checker: transpose(1, 2) raises nowhere there
    for B, H, L_q, L_k, d in ((2, 4, 4, 4, 4), (1, 3, 1, 3, 3)):
        q, k, v = torch.randn(B, H, L_q, d), torch.randn(B, H, L_k, d), torch.randn(B, H, L_k, d)
        wrong = heads_transpose_1_2(q, k, v)
        right, _ = heads_right(q, k, v)
        assert wrong.shape == right.shape and not torch.allclose(wrong, right)


# --- check_evaluation -----------------------------------------------------------------------


def evaluate_right(model, x):
    was_training = model.training
    model.eval()
    with torch.no_grad():
        out = model(x, return_attn=True)
    model.train(was_training)
    return out


def evaluate_output_only(model, x):
    was_training = model.training
    model.eval()
    with torch.no_grad():
        out = model(x)
    model.train(was_training)
    return out


def evaluate_forgets_eval(model, x):
    with torch.no_grad():
        return model(x, return_attn=True)


def evaluate_forgets_eval_seeded(model, x):
    torch.manual_seed(0)  # deterministic, yet dropout is still on
    with torch.no_grad():
        return model(x)


def evaluate_forgets_no_grad(model, x):
    was_training = model.training
    model.eval()
    out = model(x)
    model.train(was_training)
    return out


def evaluate_stays_in_eval(model, x):
    model.eval()
    with torch.no_grad():
        return model(x)


def evaluate_forces_train(model, x):
    model.eval()
    with torch.no_grad():
        out = model(x)
    model.train()
    return out


def evaluate_zeroes_dropout(model, x):
    model.dropout = 0.0
    with torch.no_grad():
        return model(x)


def evaluate_wrong_output(model, x):
    was_training = model.training
    model.eval()
    with torch.no_grad():
        out = model(2 * x)
    model.train(was_training)
    return out


def evaluate_returns_none(model, x):
    return None


def evaluate_stub(model, x):
    raise NotImplementedError


@pytest.mark.parametrize("fn", [evaluate_right, evaluate_output_only])
def test_evaluation_right_answers_pass(fn):
    with torch.no_grad():  # a notebook that switched autograd off must not hide grad_on
        assert check_evaluation(fn, verbose=False)


@pytest.mark.parametrize(
    ("fn", "code", "words"),
    [
        (evaluate_forgets_eval, "dropout_on", "model.eval()"),
        (evaluate_forgets_eval_seeded, "dropout_on", "training mode"),
        (evaluate_forgets_no_grad, "grad_on", "torch.no_grad()"),
        (evaluate_stays_in_eval, "mode_not_restored", "model.train(was_training)"),
        (evaluate_forces_train, "mode_forced_train", "was_training"),
        (evaluate_zeroes_dropout, "model_changed", "model.eval()"),
        (evaluate_wrong_output, "wrong_output", "model(x)"),
        (evaluate_returns_none, "bad_return", "NoneType"),
        (evaluate_stub, "not_written", "Not written yet"),
    ],
)
def test_evaluation_mistakes_are_named(fn, code, words):
    with torch.no_grad():
        result = check_evaluation(fn, verbose=False)
    assert not result and result.mistake == code, result.message
    assert words in result.message


def test_checkers_leave_the_global_rng_alone():
    state = torch.get_rng_state()
    check_evaluation(evaluate_forgets_eval, verbose=False)
    check_attention_4d(heads_right, verbose=False)
    check_stable_softmax(softmax_right, verbose=False)
    assert torch.equal(torch.get_rng_state(), state)
