"""Notebook 01's data, experiments and checkers: the claims they carry, the mistakes they name."""

from __future__ import annotations

import math

import pytest
import torch

from attn_lib import causal_mask
from attn_lib.lessons import _checking, _experiments
from attn_lib.lessons import nb01_retrieval as lesson
from attn_lib.lessons._checking import show_solution
from attn_lib.lessons._examples import embedding_table, tokenize
from attn_lib.lessons.nb01_retrieval import check_permuted_output, check_retrieve

# --- the library ------------------------------------------------------------------------------


def test_library_shapes_and_ranges():
    lib = lesson.library_books()
    assert len(set(lib.titles)) == 7 and lib.keys.shape == (7, 4) and lib.values.shape == (7, 5)
    assert bool(((lib.keys >= 0) & (lib.keys <= 1)).all()) and bool((lib.values >= 0).all())
    torch.testing.assert_close(lib.values.sum(-1), torch.ones(7))  # shares of the pages


def test_library_query():
    torch.testing.assert_close(lesson.library_query(), torch.tensor([1.0, 1.0, 0.0, 0.0]))
    torch.testing.assert_close(lesson.library_query({"cooking": 0.5}), torch.tensor([0, 0, 0, 0.5]))
    with pytest.raises(ValueError, match="unknown feature"):
        lesson.library_query({"poetry": 1.0})


def test_retrieve_takes_the_best_book_skims_the_close_ones_or_reads_everything():
    lib, q = lesson.library_books(), lesson.library_query()
    skim = lesson.retrieve(q, lib.keys, lib.values, 0.5)
    torch.testing.assert_close(skim.weights, torch.softmax(lib.keys @ q / 0.5, dim=-1))
    torch.testing.assert_close(skim.blended, skim.weights @ lib.values)
    order = [lib.titles[i] for i in skim.weights.argsort(descending=True)]
    assert order[0] == "Mathematics for Deep Learning"
    assert set(order[1:3]) == {"Deep Learning in Practice", "Linear Algebra"}
    cold, hot = (lesson.retrieve(q, lib.keys, lib.values, T) for T in (1e-3, 1e4))
    torch.testing.assert_close(cold.blended, lib.values[0])  # the best book's own contents
    torch.testing.assert_close(hot.weights, torch.full((7,), 1 / 7), atol=1e-4, rtol=0)
    tied = lesson.retrieve(torch.ones(2), torch.eye(2), torch.eye(2), 1e-3)
    torch.testing.assert_close(tied.weights, torch.tensor([0.5, 0.5]))  # ties share


def test_conv_layers_is_the_ceiling_of_distance_over_k_minus_1():
    d = torch.arange(1, 100)
    for k in (2, 3, 5):
        assert lesson.conv_layers(d, k).tolist() == [math.ceil(i / (k - 1)) for i in range(1, 100)]


# --- word order -------------------------------------------------------------------------------


def test_self_attention_is_permutation_equivariant_without_a_causal_mask_only():
    model = _experiments.seeded_attention(8, seed=0)
    g = torch.Generator().manual_seed(0)
    perm = torch.tensor([2, 0, 4, 1, 3])
    for x in (torch.randn(5, 8, generator=g), torch.randn(2, 5, 8, generator=g)):
        with torch.no_grad():
            torch.testing.assert_close(model(x[..., perm, :]), model(x)[..., perm, :])
            masked = model(x[..., perm, :], causal_mask(5)) - model(x, causal_mask(5))[..., perm, :]
        assert masked.abs().max() > 1e-2


@pytest.mark.parametrize("pair", lesson.WORD_ORDER_PAIRS)
def test_word_order_needs_positions(pair):
    a, b = (tokenize(s) for s in pair)
    table, model = embedding_table(a + b, 8, seed=0), _experiments.seeded_attention(8, seed=0)
    plain = lesson.word_order_outputs(a, b, table, model)
    assert [b[j] for j in plain.match] == list(a)
    torch.testing.assert_close(plain.deviation, torch.zeros(len(a)))
    torch.testing.assert_close(plain.weights_a, plain.weights_b[plain.match][:, plain.match])
    with_pe = lesson.word_order_outputs(a, b, table, model, positions=True)
    assert float(with_pe.deviation.min()) > 1e-2


def test_word_order_matches_any_reordering_and_refuses_other_sentences():
    table = embedding_table("abcd", 8)
    model = _experiments.seeded_attention(8)
    r = lesson.word_order_outputs("abc", "cab", table, model)
    assert r.match.tolist() == [1, 2, 0] and float(r.deviation.max()) < 1e-5
    for other in (("abc", "abd"), ("aab", "aba")):  # not a reordering; repeated tokens
        with pytest.raises(ValueError, match="same distinct tokens"):
            lesson.word_order_outputs(*other, table, model)


# --- check yourself ---------------------------------------------------------------------------


def not_written(*args):
    raise NotImplementedError


def retrieve_in_place(query, keys, values, temperature):
    keys /= temperature  # changes its input: the checker must hand over copies
    weights = (keys @ query).softmax(-1)
    return weights, torch.einsum("n,nd->d", weights, values)


@pytest.mark.parametrize("fn", [lesson.solution_my_retrieve, retrieve_in_place])
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
        (_weights_then_blend(lambda s, T: torch.eye(s.numel())[s.argmax()]), "hard_max"),
        (_weights_then_blend(lambda s, T: s / T), "scores_as_weights"),
        (_weights_then_blend(lambda s, T: (s / T).softmax(-1), lambda w, k, v: w @ k), "blend_keys"),
        (_weights_then_blend(lambda s, T: (s / T).softmax(-1), lambda w, k, v: v.mean(0)), "blend_unweighted"),
        (_weights_then_blend(lambda s, T: (s / T).softmax(-1), lambda w, k, v: v.sum(0)), "blend_wrong"),
        (_weights_then_blend(lambda s, T: torch.ones_like(s)), "unknown"),
        (lambda q, k, v, T: (k @ q).softmax(-1), "bad_return"),
        (lambda q, k, v, T: (q @ k, None), "error"),
    ],
)  # fmt: skip
def test_retrieve_mistakes_are_named(fn, mistake, capsys):
    result = check_retrieve(fn)
    assert not result and result.mistake == mistake
    out = capsys.readouterr().out
    assert out.startswith("Not yet") and "Traceback" not in out


@pytest.mark.parametrize(
    "fn",
    [
        lesson.solution_predict_permuted_output,
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


def test_solutions_are_shown_only_after_an_attempt(capsys, monkeypatch):
    monkeypatch.setattr(_checking, "_ATTEMPTED", set())  # a fresh session
    check_permuted_output(not_written, verbose=False)  # the stub is no attempt
    show_solution("predict_permuted_output", lesson.solution_predict_permuted_output)
    assert "Try it first" in capsys.readouterr().out
    check_permuted_output(lambda out, perm: out, verbose=False)
    show_solution("predict_permuted_output", lesson.solution_predict_permuted_output)
    assert "return output[perm]" in capsys.readouterr().out
