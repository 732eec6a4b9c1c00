"""Notebook 01's checkers: a right answer passes, each classic mistake is caught and named."""

from __future__ import annotations

import math

import pytest
import torch

from attn_lib.lessons.nb01_retrieval import check_conv_layers, check_permuted_output, check_retrieve


def not_written(*args):
    raise NotImplementedError


@pytest.mark.parametrize("checker", [check_retrieve, check_permuted_output, check_conv_layers])
def test_a_stub_is_not_written_yet_not_a_traceback(checker, capsys):
    result = checker(not_written)
    assert not result and result.mistake == "not_written"
    assert "Not written yet" in capsys.readouterr().out


# --- retrieval --------------------------------------------------------------------------------


def retrieve_right(query, keys, values, temperature):
    weights = torch.softmax(keys @ query / temperature, dim=-1)
    return weights, weights @ values


def retrieve_in_place(query, keys, values, temperature):
    keys /= temperature  # changes its input: the checker must hand over copies
    weights = (keys @ query).softmax(-1)
    return weights, torch.einsum("n,nd->d", weights, values)


@pytest.mark.parametrize("fn", [retrieve_right, retrieve_in_place])
def test_retrieve_right_answers_pass(fn):
    result = check_retrieve(fn, verbose=False)
    assert result and result.mistake is None and result.message.startswith("Passed")


def _weights_then_blend(make_weights, blend=lambda w, k, v: w @ v):
    def learner(query, keys, values, temperature):
        w = make_weights(keys @ query, temperature)
        return w, blend(w, keys, values)

    return learner


@pytest.mark.parametrize(
    ("fn", "mistake"),
    [
        (_weights_then_blend(lambda s, T: s.softmax(-1)), "no_temperature"),
        (_weights_then_blend(lambda s, T: (s * T).softmax(-1)), "temperature_multiplied"),
        (_weights_then_blend(lambda s, T: s / s.sum()), "sum_normalised"),
        (
            _weights_then_blend(lambda s, T: torch.eye(s.numel())[s.argmax()]),
            "hard_max",
        ),
        (_weights_then_blend(lambda s, T: s / T), "scores_as_weights"),
        (
            _weights_then_blend(lambda s, T: (s / T).softmax(-1), lambda w, k, v: w @ k),
            "blend_keys",
        ),
        (
            _weights_then_blend(lambda s, T: (s / T).softmax(-1), lambda w, k, v: v.mean(0)),
            "blend_unweighted",
        ),
        (
            _weights_then_blend(lambda s, T: (s / T).softmax(-1), lambda w, k, v: v.sum(0)),
            "blend_wrong",
        ),
        (_weights_then_blend(lambda s, T: torch.ones_like(s)), "unknown"),
        (lambda q, k, v, T: (k @ q).softmax(-1), "bad_return"),
        (lambda q, k, v, T: (q @ k, None), "error"),
    ],
)
def test_retrieve_mistakes_are_named(fn, mistake, capsys):
    result = check_retrieve(fn)
    assert not result and result.mistake == mistake
    out = capsys.readouterr().out
    assert out.startswith("Not yet") and "Traceback" not in out


# --- permutations -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fn",
    [
        lambda out, perm: out[perm],
        lambda out, perm: out.index_select(0, perm),
        lambda out, perm: torch.stack([out[int(p)] for p in perm]),
    ],
)
def test_permuted_output_right_answers_pass(fn):
    assert check_permuted_output(fn, verbose=False)


@pytest.mark.parametrize(
    ("fn", "mistake"),
    [
        (lambda out, perm: out[torch.argsort(perm)], "inverse_permutation"),
        (lambda out, perm: out, "unchanged"),
        (lambda out, perm: out[:, perm], "columns_permuted"),
        (lambda out, perm: out.flip(0), "unknown"),
        (lambda out, perm: out[perm].tolist(), "bad_return"),
        (lambda out, perm: out[perm + 10], "error"),
    ],
)
def test_permuted_output_mistakes_are_named(fn, mistake):
    result = check_permuted_output(fn, verbose=False)
    assert not result and result.mistake == mistake
    assert result.message.startswith("Not yet")


# --- convolution layers -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "fn",
    [
        lambda d, k: math.ceil(d / (k - 1)),
        lambda d, k: (d + k - 2) // (k - 1),
        lambda d, k: -(-d // (k - 1)),
        lambda d, k: torch.tensor(math.ceil(d / (k - 1))),
        lambda d, k: float(math.ceil(d / (k - 1))),
    ],
)
def test_conv_layers_right_answers_pass(fn):
    assert check_conv_layers(fn, verbose=False)


@pytest.mark.parametrize(
    ("fn", "mistake"),
    [
        (lambda d, k: d // (k - 1), "floor"),
        (lambda d, k: d / (k - 1), "not_integer"),
        (lambda d, k: math.ceil(d / k), "divide_by_k"),
        (lambda d, k: d // k, "divide_by_k"),
        (lambda d, k: d // (k - 1) + 1, "plus_one"),
        (lambda d, k: math.ceil(2 * d / (k - 1)), "half_width"),
        (lambda d, k: d, "unknown"),
        (lambda d, k: "three", "bad_return"),
        (lambda d, k: 1 // (k - 2), "error"),
    ],
)
def test_conv_layers_mistakes_are_named(fn, mistake):
    result = check_conv_layers(fn, verbose=False)
    assert not result and result.mistake == mistake
    assert result.message.startswith("Not yet")
