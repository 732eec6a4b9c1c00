"""Notebook 05: the attention checker names each classic mistake; the checker of the reader's
test of an attention function accepts a good test and names the bug a weak one lets through."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import attn_lib
from attn_lib.lessons import _checking
from attn_lib.lessons._checking import CheckResult, show_solution
from attn_lib.lessons.nb05_module import (
    check_attention,
    check_attention_test,
    solution_my_attention,
    solution_my_test,
)

# --- attention: one function per mistake, written the way a learner would ------------------


def right(query, key, value, mask=None):
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(query.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    weights = F.softmax(scores, dim=-1)
    return torch.matmul(weights, value), weights


def right_output_only(query, key, value, mask=None):
    return right(query, key, value, mask)[0]


def right_with_inf_and_mT(query, key, value, mask=None):
    scores = (query / math.sqrt(query.size(-1))) @ key.mT
    if mask is not None:
        scores = scores.masked_fill(~mask.bool(), float("-inf"))
    return scores.softmax(dim=-1) @ value


def right_but_changes_its_inputs(query, key, value, mask=None):
    query /= math.sqrt(query.size(-1))  # in place: the checker must hand over copies
    scores = query @ key.transpose(-2, -1)
    if mask is not None:
        scores.masked_fill_(mask == 0, -1e9)
    return scores.softmax(-1) @ value


def attention_with(*, scale=None, dim=-1, fill=-1e9, invert=False, use_mask=True, kq=False):
    def learner(query, key, value, mask=None):
        if kq:
            scores = key @ query.transpose(-2, -1)
        else:
            scores = query @ key.transpose(-2, -1)
        d_k = query.size(-1)
        scores = scores * (1 / math.sqrt(d_k) if scale is None else scale(query))
        if mask is not None and use_mask:
            scores = scores.masked_fill(mask == 1 if invert else mask == 0, fill)
        return F.softmax(scores, dim=dim) @ value

    return learner


def uses_dot_T(query, key, value, mask=None):
    return F.softmax(query @ key.T / math.sqrt(query.size(-1)), dim=-1) @ value


def transposes_batch_and_length(query, key, value, mask=None):
    return F.softmax(query @ key.transpose(0, 1) / math.sqrt(query.size(-1)), dim=-1) @ value


def forgets_to_transpose(query, key, value, mask=None):
    return F.softmax(torch.matmul(query, key) / math.sqrt(query.size(-1)), dim=-1) @ value


def returns_scores_as_weights(query, key, value, mask=None):
    output, _ = right(query, key, value, mask)
    return output, query @ key.transpose(-2, -1)


def returns_three_things(query, key, value, mask=None):
    output, weights = right(query, key, value, mask)
    return output, weights, None


def two_mistakes(query, key, value, mask=None):
    scores = query @ key.transpose(-2, -1) / query.size(-1)  # ÷ d_k
    return F.softmax(scores, dim=-2) @ value  # and the wrong dim


def typo(query, key, value, mask=None):
    return F.softmax(qeury @ key, dim=-1) @ value  # noqa: F821 - the learner's typo


@pytest.mark.parametrize(
    "fn", [right, right_output_only, right_with_inf_and_mT, right_but_changes_its_inputs]
)
def test_a_right_answer_passes(fn, capsys):
    result = check_attention(fn)
    assert result.passed and bool(result) and result.mistake is None
    assert isinstance(result, CheckResult)
    assert "Passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("fn", "code", "words"),
    [
        (attention_with(scale=lambda q: 1 / q.size(-1)), "scale_d_k", "instead of √d_k"),
        (attention_with(scale=lambda q: 1.0), "no_scale", "not scaled"),
        (attention_with(scale=lambda q: math.sqrt(q.size(-1))), "scale_multiplied", "multiplied"),
        (attention_with(scale=lambda q: 1 / math.sqrt(q.size(1))), "scale_length", "length"),
        (attention_with(dim=-2), "softmax_dim", "over the queries"),
        (attention_with(dim=1), "softmax_dim", "over the queries"),
        (attention_with(dim=0), "softmax_dim", "over the batch"),
        (attention_with(invert=True), "mask_inverted", "inverted"),
        (attention_with(invert=True, fill=float("-inf")), "mask_inverted", "NaN"),
        (attention_with(fill=0.0), "mask_fill_zero", "exp(0) = 1"),
        (attention_with(use_mask=False), "mask_not_applied", "without the mask"),
        (attention_with(kq=True), "scores_transposed", "K Qᵀ"),
        (uses_dot_T, "dot_T", ".transpose(-2, -1)"),
        (transposes_batch_and_length, "transpose_dims", "transpose(0, 1)"),
        (forgets_to_transpose, "transpose_dims", "key.transpose(-2, -1)"),
        (returns_scores_as_weights, "weights_wrong", "not the softmax"),
        (returns_three_things, "bad_return", "length 3"),
        (two_mistakes, "unknown", "two of them"),
        (typo, "error", "NameError"),
    ],
)
def test_each_mistake_is_named(fn, code, words):
    result = check_attention(fn, verbose=False)
    assert not result.passed and not bool(result)
    assert result.mistake == code, result.message
    assert words in result.message.replace("\n", " ")
    assert repr(result) == f"CheckResult(not passed: {code})"


def test_dot_T_warning_stays_out_of_the_output(recwarn):
    check_attention(uses_dot_T, verbose=False)
    assert not [w for w in recwarn if "x.T" in str(w.message)]


# --- adversarial cases: each classic slip is named, each unusual right answer passes -------


def _attention_written(*, kt="transpose", scale=None, mask_how="", fill=-1e9, drop=None):
    """Attention as a learner writes it, with one choice changed."""

    def learner(query, key, value, mask=None):
        if kt == "reshape":
            k_t = key.reshape(*key.shape[:-2], key.size(-1), key.size(-2))
        elif kt == "view":
            k_t = key.view(*key.shape[:-2], key.size(-1), key.size(-2))
        else:
            k_t = key.transpose(-2, -1)
        d = math.sqrt(query.size(-1)) if scale is None else scale(query, key, value)
        scores = query @ k_t / d
        if mask is not None:
            m = {"": mask, "transpose": mask.transpose(-2, -1), "T": mask.T}.get(mask_how, mask)
            if mask_how != "after":
                scores = scores.masked_fill(m == 0, fill)
        weights = F.softmax(scores, dim=-1)
        if mask is not None and mask_how == "after":
            weights = weights.masked_fill(mask == 0, 0.0)
        if drop == "functional":
            weights = F.dropout(weights, p=0.1)  # training=True by default
        elif drop == "module":
            weights = torch.nn.Dropout(0.1)(weights)  # a new module is in training mode
        return weights @ value, weights

    return learner


def scale_after_softmax(query, key, value, mask=None):
    scores = query @ key.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    weights = F.softmax(scores, dim=-1) / math.sqrt(query.size(-1))
    return weights @ value


def no_softmax(query, key, value, mask=None):
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    return scores @ value


@pytest.mark.parametrize(
    ("fn", "code", "words"),
    [
        (_attention_written(drop="functional"), "dropout_on", "training=True"),
        (_attention_written(drop="module"), "dropout_on", "two different outputs"),
        (_attention_written(kt="reshape"), "reshape_not_transpose", "key.transpose(-2, -1)"),
        (_attention_written(kt="view"), "reshape_not_transpose", "not Kᵀ"),
        (_attention_written(scale=lambda q, k, v: math.sqrt(v.size(-1))), "scale_d_v", "√d_v"),
        (_attention_written(scale=lambda q, k, v: math.sqrt(k.size(-2))), "scale_length",
         "number of keys"),
        (_attention_written(scale=lambda q, k, v: math.sqrt(q.size(0))), "scale_batch",
         "batch size"),
        (_attention_written(mask_how="transpose"), "mask_transposed", "future"),
        (_attention_written(mask_how="transpose", fill=float("-inf")), "mask_transposed", "NaN"),
        (_attention_written(mask_how="T"), "mask_transposed", "mask.T"),
        (_attention_written(mask_how="after"), "mask_after_softmax", "before the softmax"),
        (scale_after_softmax, "scale_after_softmax", "before the"),
        (no_softmax, "no_softmax", "softmax is missing"),
    ],
)  # fmt: skip
def test_more_attention_mistakes_are_named(fn, code, words, recwarn):
    result = check_attention(fn, verbose=False)
    assert not result and result.mistake == code, result.message
    assert words in result.message.replace("\n", " ")
    assert "look at the softmax first" not in result.message


def test_dropout_in_the_learner_leaves_the_global_rng_alone():
    state = torch.random.get_rng_state()
    check_attention(_attention_written(drop="functional"), verbose=False)
    assert torch.equal(state, torch.random.get_rng_state())


def test_attention_in_float64_passes():
    def in_float64(query, key, value, mask=None):
        return right(query.double(), key.double(), value.double(), mask)

    assert check_attention(in_float64, verbose=False)


def test_the_solution_passes_and_is_shown_only_after_an_attempt(capsys):
    _checking._ATTEMPTED.discard("my_attention")
    assert check_attention(solution_my_attention, verbose=False)
    show_solution("my_attention", solution_my_attention)
    assert "def solution_my_attention" in capsys.readouterr().out


# --- exercise 2: a test of an attention function ------------------------------------------------


def _inputs(L_q=3, L_k=5, d_k=4, same_qk=False):
    g = torch.Generator().manual_seed(1)
    query = torch.randn(2, L_q, d_k, generator=g)
    key = query if same_qk else torch.randn(2, L_k, d_k, generator=g)
    return query, key, torch.randn(2, key.shape[1], 6, generator=g)


def compared_on(mask=True, **sizes):
    """A reader's test: compare with attn_lib on the given sizes, with or without a mask."""

    def my_test(attention):
        query, key, value = _inputs(**sizes)
        keep = attn_lib.padding_mask([key.shape[1], 2]) if mask else None
        output, _ = attention(query, key, value, keep)
        expected, _ = attn_lib.scaled_dot_product_attention(query, key, value, keep)
        return torch.allclose(output, expected, atol=1e-6)

    return my_test


def rows_only(attention):
    query, key, value = _inputs()
    _, weights = attention(query, key, value, attn_lib.padding_mask([5, 2]))
    return torch.allclose(weights.sum(dim=-1), torch.ones(2, 3))


def unscaled_reference(attention):  # a reference that forgot the scale: rejects the right one
    query, key, value = _inputs()
    expected = F.softmax(query @ key.mT, dim=-1) @ value
    return torch.allclose(attention(query, key, value)[0], expected)


@pytest.mark.parametrize(
    ("fn", "mistake", "words"),
    [
        (solution_my_test, None, "rejects all 4 bugs"),
        (compared_on(), None, "rejects all 4 bugs"),
        (rows_only, "misses_scale_d_k", "trusted reference"),
        (compared_on(d_k=1), "misses_scale_d_k", "d_k = 1"),
        (compared_on(mask=False), "misses_inverted_mask", "Give the attention a mask"),
        (compared_on(L_q=5, same_qk=True), "misses_k_q", "query = key"),
        (unscaled_reference, "rejects_right", "rejects attn_lib"),
        (lambda attention: torch.ones(2), "bad_return", "return True"),
        (lambda attention: attention(1, 2, 3), "error", "TypeError"),
    ],
)
def test_check_attention_test_names_what_a_test_misses(fn, mistake, words):
    result = check_attention_test(fn, verbose=False)
    assert result.mistake == mistake and bool(result) == (mistake is None), result.message
    assert words in result.message.replace("\n", " ")


def test_a_test_that_asserts_instead_of_returning_counts():
    def asserts(attention):
        assert compared_on()(attention)
        return True

    assert check_attention_test(asserts, verbose=False)
    assert check_attention_test(lambda a: 1, verbose=False).mistake == "misses_scale_d_k"
