"""Notebook 04: the shape tables against real runs, and the two checkers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attn_lib import scaled_dot_product_attention
from attn_lib.lessons import _checking
from attn_lib.lessons._checking import show_solution
from attn_lib.lessons._examples import qkv_sentence, tokenize
from attn_lib.lessons._experiments import seeded_attention
from attn_lib.lessons.nb04_shapes import (
    CROSS_SENTENCE,
    STEP_SHAPES_SETTING,
    check_blend,
    check_step_shapes,
    cross_sentence,
    shape_table,
    solution_my_blend,
    solution_my_shapes,
)

# --- data and shape tables --------------------------------------------------------------------


def test_cross_sentence():
    s = cross_sentence(6)
    assert s.tokens == tokenize(CROSS_SENTENCE) and len(set(s.tokens)) == 8  # L_k = 8 keys
    assert s.x.shape == (8, 6) and s.x.dtype == torch.float32
    english = qkv_sentence(6).x
    assert not any(torch.equal(a, b) for a in s.x for b in english)  # no shared vector


@pytest.mark.parametrize("mode", ["self", "cross"])
@pytest.mark.parametrize("B", [None, 3])
def test_every_row_matches_a_real_run(mode, B):
    for L_q, L_k, d_model, d_k, d_v in [(7, 8, 10, 6, 4), (1, 1, 1, 1, 1), (3, 5, 12, 2, 9)]:
        table = shape_table(B, L_q, L_k, d_model, d_k, d_v, mode)
        L_k = L_k if mode == "cross" else L_q
        batch = () if B is None else (B,)
        model = seeded_attention(d_model, d_k, d_v=d_v)
        x, context = torch.randn(*batch, L_q, d_model), torch.randn(*batch, L_k, d_model)
        source = context if mode == "cross" else x
        Q, K, V = model.W_Q(x), model.W_K(source), model.W_V(source)
        output, weights = scaled_dot_product_attention(Q, K, V)
        real = {"x": x, "context": context, "Q": Q, "K": K, "V": V, "Kᵀ": K.mT,
                "scores": weights, "weights": weights, "output": output}  # fmt: skip
        real |= {f"W_{n}": getattr(model, f"W_{n}").weight.T for n in "QKV"}
        steps = [row.step for row in table.rows]
        assert ("context" in steps) == (mode == "cross") and len(steps) == 11 + (mode == "cross")
        for row in table.rows:
            assert row.shape == tuple(real[row.step].shape), row.step


def test_table_text_title_and_letters():
    table = shape_table(2, 7, 8, 10, 6, 4, "cross")
    lines = str(table).splitlines()
    assert lines[0].split() == ["step", "computed", "as", "shape", "sizes"]
    assert lines[-1].split() == ["output", "weights", "V", "(B,", "L_q,", "d_v)", "(2,", "7,", "4)"]
    assert table.title == "cross-attention: B = 2, L_q = 7, L_k = 8, d_model = 10, d_k = 6, d_v = 4"
    assert shape_table(None, 3, None, 4, 2, 2).title.startswith(
        "self-attention: no batch dim, L = 3"
    )
    assert [r.symbols for r in shape_table(None, 3, 9, 4, 2, 2).rows][-3:] == ["(L, L)"] * 2 + [
        "(L, d_v)"
    ]
    assert shape_table(2, 7, 3, 10, 6, 4) == shape_table(2, 7, None, 10, 6, 4)  # L_k ignored
    with pytest.raises(KeyError):
        shape_table(1, 3, None, 4, 2, 2).shape("context")


# --- exercise 1: four shapes ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "mistake"),
    [
        ({}, None),
        ({"Kᵀ": (3, 7, 16)}, "key_not_transposed"),
        ({"Kᵀ": (3, 16, 5)}, "key_transpose_length"),
        ({"Kᵀ": (16, 7)}, "batch_missing"),
        ({"Kᵀ": (7, 3, 16)}, "wrong_shape"),
        ({"scores": (3, 7, 5)}, "scores_transposed"),
        ({"scores": (3, 5, 5)}, "scores_square"),
        ({"weights": (3, 5, 16)}, "weights_shape"),
        ({"output": (3, 5, 16)}, "output_width"),
        ({"output": (3, 5, 7)}, "output_is_weights"),
        ({"output": torch.Size([3, 5, 4])}, None),
        ({"output": "3, 5, 4"}, "bad_return"),
    ],
)
def test_check_step_shapes_names_each_mistake(change, mistake):
    result = check_step_shapes(lambda: {**solution_my_shapes(), **change}, verbose=False)
    assert result.mistake == mistake and bool(result) == (mistake is None), result.message


def test_check_step_shapes_other_answers():
    def stub():
        raise NotImplementedError

    assert check_step_shapes(stub, verbose=False).mistake == "not_written"
    s = STEP_SHAPES_SETTING
    B, L_q, L_k, d_k, d_v = (np.int64(s[n]) for n in ("B", "L_q", "L_k", "d_k", "d_v"))
    numpy_sizes = {"K_T": (B, d_k, L_k), "scores": (B, L_q, L_k), "weights": [B, L_q, L_k],
                   "output": np.array([B, L_q, d_v])}  # fmt: skip
    assert check_step_shapes(lambda: numpy_sizes, verbose=False)
    assert check_step_shapes(lambda: [1], verbose=False).mistake == "bad_return"
    assert check_step_shapes(lambda: {"scores": (3, 5, 7)}, verbose=False).mistake == "missing"
    assert check_step_shapes(lambda: 1 / 0, verbose=False).mistake == "error"


# --- exercise 2: the blend, written out ---------------------------------------------------------


def summed_over_d_v(weights, V):
    return (weights.unsqueeze(-1) * V.unsqueeze(-3)).sum(dim=-1)


def summed_over_queries(weights, V):
    return (weights.unsqueeze(-1) * V.unsqueeze(-3)).sum(dim=-3)


def transposed(weights, V):
    return (weights.mT.unsqueeze(-1) * V.unsqueeze(-3)).sum(dim=-2)


def with_matmul(weights, V):
    return weights @ V  # the right numbers, not written out


def with_a_loop(weights, V):  # another right answer: # @ in a comment is fine
    return sum(weights[..., :, j, None] * V[..., None, j, :] for j in range(V.shape[-2]))


@pytest.mark.parametrize(
    ("fn", "mistake"),
    [
        (solution_my_blend, None),
        (with_a_loop, None),
        (summed_over_d_v, "summed_over_d_v"),
        (summed_over_queries, "summed_over_queries"),
        (transposed, "error"),  # (B, L_k, L_q) against (B, L_k, d_v): a broadcasting error
        (with_matmul, "used_matmul"),
        (lambda w, V: solution_my_blend(w, V) + 1, "wrong_values"),
        (lambda w, V: solution_my_blend(w, V)[0], "bad_return"),
        (lambda w, V: solution_my_blend(w, V).tolist(), "bad_return"),
        (lambda w, V: w.nope, "error"),
    ],
)
def test_check_blend_names_each_mistake(fn, mistake):
    result = check_blend(fn, verbose=False)
    assert result.mistake == mistake and bool(result) == (mistake is None), result.message


def test_solutions_are_shown_only_after_an_attempt(capsys):
    _checking._ATTEMPTED.discard("my_blend")  # earlier tests attempted it

    def my_blend(weights, V):
        raise NotImplementedError

    check_blend(my_blend)  # not written yet: not an attempt
    out = capsys.readouterr().out
    assert "Not written yet" in out and "Traceback" not in out
    show_solution("my_blend", solution_my_blend)
    assert "Try it first" in capsys.readouterr().out
    check_blend(summed_over_d_v)
    show_solution("my_blend", solution_my_blend)
    assert "def solution_my_blend" in capsys.readouterr().out
