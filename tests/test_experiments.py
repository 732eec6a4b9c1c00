"""The seeded experiments of notebooks 01–04 (attn_lib.lessons) say what the notebooks claim.

Monte Carlo results are compared with tolerances derived from the sample size (the
relative SD each function reports), never with ==.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from attn_lib import ShapeError, SingleHeadAttention, causal_mask
from attn_lib.lessons import _experiments, nb01_retrieval

# ---------------------------------------------------------------------------
# nn.Linear's default initialisation (the shared helper)
# ---------------------------------------------------------------------------


def test_default_linear_weight_is_nn_linear_init():
    for d_out, d_in in ((8, 8), (3, 5)):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(7)
            expected = nn.Linear(d_in, d_out, bias=False).weight.detach()
        got = _experiments.default_linear_weight(d_out, d_in, torch.Generator().manual_seed(7))
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
        assert got.abs().max() <= 1 / math.sqrt(d_in)


# ---------------------------------------------------------------------------
# 01: retrieval, path lengths, permutation equivariance (C12)
# ---------------------------------------------------------------------------


def _books():
    keys = torch.tensor([[1.0, 0.0], [0.8, 0.2], [0.0, 1.0]])
    values = torch.eye(3)
    return keys, values


def test_retrieve_blends_values_with_softmax_weights():
    keys, values = _books()
    r = nb01_retrieval.retrieve([1.0, 0.0], keys, values, temperature=0.5)
    torch.testing.assert_close(r.scores, torch.tensor([1.0, 0.8, 0.0]))
    torch.testing.assert_close(r.weights, torch.softmax(r.scores / 0.5, dim=-1))
    torch.testing.assert_close(r.blended, r.weights @ values)
    torch.testing.assert_close(r.weights.sum(), torch.tensor(1.0))


def test_retrieve_temperature_takes_the_best_or_reads_everything():
    keys, values = _books()
    cold = nb01_retrieval.retrieve(torch.tensor([1.0, 0.0]), keys, values, temperature=1e-3)
    torch.testing.assert_close(cold.weights, torch.tensor([1.0, 0.0, 0.0]))
    hot = nb01_retrieval.retrieve(torch.tensor([1.0, 0.0]), keys, values, temperature=1e4)
    torch.testing.assert_close(hot.weights, torch.full((3,), 1 / 3), atol=1e-4, rtol=0)
    tied = nb01_retrieval.retrieve([1.0, 1.0], torch.tensor([[1.0, 0.0], [0.0, 1.0]]), torch.eye(2), 1e-3)
    torch.testing.assert_close(tied.weights, torch.tensor([0.5, 0.5]))


@pytest.mark.parametrize("temperature", [0, -1.0, float("nan"), float("inf")])
def test_retrieve_refuses_a_bad_temperature(temperature):
    keys, values = _books()
    with pytest.raises(ValueError, match="temperature"):
        nb01_retrieval.retrieve([1.0, 0.0], keys, values, temperature)


def test_retrieve_refuses_bad_shapes():
    keys, values = _books()
    with pytest.raises(ShapeError, match="features"):
        nb01_retrieval.retrieve([1.0, 0.0, 0.0], keys, values)
    with pytest.raises(ShapeError, match="books"):
        nb01_retrieval.retrieve([1.0, 0.0], keys, values[:2])
    with pytest.raises(ShapeError, match="at least one book"):
        nb01_retrieval.retrieve([1.0, 0.0], keys[:0], values[:0])
    with pytest.raises(ShapeError):
        nb01_retrieval.retrieve([], keys, values)
    with pytest.raises(TypeError, match="floating"):
        nb01_retrieval.retrieve([1, 0], keys.long(), values)


def test_path_lengths():
    p = nb01_retrieval.path_lengths(10, kernel_size=3)
    assert p.distance.tolist() == list(range(1, 10))
    assert p.recurrent.tolist() == list(range(1, 10))
    assert p.convolution.tolist() == [1, 1, 2, 2, 3, 3, 4, 4, 5]
    assert p.self_attention.tolist() == [1] * 9
    assert nb01_retrieval.path_lengths(6, kernel_size=2).convolution.tolist() == [1, 2, 3, 4, 5]
    wide = nb01_retrieval.path_lengths(100, kernel_size=5)
    expected = [math.ceil(d / 4) for d in range(1, 100)]
    assert wide.convolution.tolist() == expected
    with pytest.raises(ValueError, match="kernel_size"):
        nb01_retrieval.path_lengths(10, kernel_size=1)
    with pytest.raises(ShapeError, match="L"):
        nb01_retrieval.path_lengths(1)


def test_pair_counts():
    c = nb01_retrieval.pair_counts(5)
    assert c.L.tolist() == [1, 2, 3, 4, 5]
    assert c.self_attention.tolist() == [1, 4, 9, 16, 25]
    assert c.recurrent.tolist() == [1, 2, 3, 4, 5]


def test_seeded_attention_is_reproducible_and_leaves_global_rng_alone():
    state = torch.get_rng_state()
    a, b = _experiments.seeded_attention(8, seed=3), _experiments.seeded_attention(8, seed=3)
    assert torch.equal(torch.get_rng_state(), state)
    torch.testing.assert_close(a.W_Q.weight, b.W_Q.weight, rtol=0, atol=0)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        c = SingleHeadAttention(8, 8)
    torch.testing.assert_close(a.W_V.weight, c.W_V.weight, rtol=0, atol=0)
    assert not a.training


def test_self_attention_is_permutation_equivariant_without_mask_only():
    model = _experiments.seeded_attention(8, seed=0)
    g = torch.Generator().manual_seed(0)
    perm = [2, 0, 4, 1, 3]
    for x in (torch.randn(5, 8, generator=g), torch.randn(2, 5, 8, generator=g)):
        assert nb01_retrieval.permutation_deviation(model, x, perm) < 1e-5
        assert nb01_retrieval.permutation_deviation(model, x, perm, causal_mask(5)) > 1e-2
    identity = nb01_retrieval.permutation_deviation(model, torch.randn(5, 8, generator=g), range(5), causal_mask(5))
    torch.testing.assert_close(identity, 0.0, rtol=0, atol=0)


def test_permutation_deviation_refuses_a_non_permutation():
    model = _experiments.seeded_attention(8)
    x = torch.zeros(3, 8)
    with pytest.raises(ValueError, match="permutation"):
        nb01_retrieval.permutation_deviation(model, x, [0, 0, 1])
    with pytest.raises(ShapeError):
        nb01_retrieval.permutation_deviation(model, x, torch.tensor([0.0, 1.0, 2.0]))
    with pytest.raises(ShapeError):
        nb01_retrieval.permutation_deviation(model, torch.zeros(8), [0])


def test_word_order_outputs_match_tokens_and_refuse_other_sentences():
    table = {t: torch.randn(8, generator=torch.Generator().manual_seed(i)) for i, t in
             enumerate("abc")}  # fmt: skip
    model = _experiments.seeded_attention(8)
    r = nb01_retrieval.word_order_outputs("abc", "cab", table, model)
    assert r.match == (1, 2, 0)
    assert float(r.deviation.max()) < 1e-5
    with pytest.raises(ValueError, match="same tokens"):
        nb01_retrieval.word_order_outputs("abc", "abd", table, model)
    with pytest.raises(ValueError, match="empty"):
        nb01_retrieval.word_order_outputs([], [], table, model)
    with pytest.raises(KeyError):
        nb01_retrieval.word_order_outputs("abz", "zab", table, model)


# ---------------------------------------------------------------------------
# 04: cost (C20)
# ---------------------------------------------------------------------------


def test_attention_cost_counts():
    c = _experiments.attention_cost(1024, 512, batch=2)
    assert c.d_k == c.d_v == 512
    assert c.projection_macs == 2 * 1024 * 512 * 3 * 512
    assert c.score_macs == 2 * 1024 * 1024 * 512
    assert c.weighted_sum_macs == c.score_macs
    assert c.total_macs == c.projection_macs + c.attention_macs
    assert c.score_matrix_bytes == 2 * 1024 * 1024 * 4  # 8 MiB in float32
    assert _experiments.attention_cost(1024, 512, dtype=torch.float16).score_matrix_bytes == 2 * 2**20
    assert _experiments.attention_cost(10, 8, 4, 2).projection_macs == 10 * 8 * (2 * 4 + 2)


def test_attention_dominates_beyond_the_crossover():
    for d_model, d_k, d_v in ((64, None, None), (512, None, None), (256, 64, 32)):
        L_star = _experiments.crossover_length(d_model, d_k, d_v)
        below = _experiments.attention_cost(math.floor(L_star) - 1, d_model, d_k, d_v)
        above = _experiments.attention_cost(math.ceil(L_star) + 1, d_model, d_k, d_v)
        assert below.attention_macs < below.projection_macs
        assert above.attention_macs > above.projection_macs
    assert _experiments.crossover_length(512) == pytest.approx(768.0)  # 1.5 d_model when d_k = d_v
    at = _experiments.attention_cost(768, 512)
    assert at.attention_macs == at.projection_macs


# ---------------------------------------------------------------------------
# Bad arguments get a sentence
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: _experiments.attention_cost(0, 8), ShapeError, "L"),
        (lambda: _experiments.attention_cost(8, 8, dtype="float32"), TypeError, "dtype"),
        (lambda: _experiments.crossover_length(8, d_k=0), ShapeError, "d_k"),
    ],
)  # fmt: skip
def test_bad_arguments(call, error, match):
    with pytest.raises(error, match=match):
        call()
