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
from attn_lib.lessons import _experiments, nb01_retrieval, nb02_qkv, nb04_shapes

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
# 02: biases (C17), x xᵀ, dot vs cosine (C13)
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def x7():
    return torch.randn(7, 8, generator=torch.Generator().manual_seed(11))


def test_same_weights_for_every_bias_setting(x7):
    base = nb02_qkv.qkv_example(x7)
    for bias in nb02_qkv.BIAS_CHOICES:
        ex = nb02_qkv.qkv_example(x7, bias)
        for name in ("W_Q", "W_K", "W_V", "b_Q", "b_K", "b_V"):
            torch.testing.assert_close(getattr(ex, name), getattr(base, name), rtol=0, atol=0)


def test_key_bias_changes_scores_by_a_row_constant_and_weights_not_at_all(x7):
    base, ex = nb02_qkv.qkv_example(x7), nb02_qkv.qkv_example(x7, "k", bias_scale=5.0)
    shift = (base.Q @ ex.b_K / math.sqrt(8))[:, None]  # (L_q, 1): q_i·b_K / √d_k
    torch.testing.assert_close(ex.scores - base.scores, shift.expand_as(base.scores))
    torch.testing.assert_close(ex.weights, base.weights)
    torch.testing.assert_close(ex.output, base.output)


def test_value_bias_shifts_every_output_by_b_v(x7):
    base, ex = nb02_qkv.qkv_example(x7), nb02_qkv.qkv_example(x7, "v")
    torch.testing.assert_close(ex.weights, base.weights)
    torch.testing.assert_close(ex.output - base.output, ex.b_V.expand_as(base.output))


def test_query_bias_changes_the_weights(x7):
    base = nb02_qkv.qkv_example(x7)
    for scale, margin in ((1.0, 0.01), (5.0, 0.1)):  # measured 0.03 and 0.3 here
        ex = nb02_qkv.qkv_example(x7, "q", bias_scale=scale)
        assert float((ex.weights - base.weights).abs().max()) > margin
        torch.testing.assert_close(ex.weights.sum(-1), torch.ones(7))


def test_qkv_shapes_with_d_v_different_from_d_k(x7):
    ex = nb02_qkv.qkv_example(x7, d_k=4, d_v=3)
    assert ex.W_Q.shape == (4, 8) and ex.W_V.shape == (3, 8)  # nn.Linear layout (d_out, d_in)
    assert ex.Q.shape == ex.K.shape == (7, 4)
    assert ex.V.shape == (7, 3) and ex.output.shape == (7, 3)
    assert ex.weights.shape == (7, 7)


def test_token_qkv_is_a_row_of_the_example(x7):
    ex = nb02_qkv.qkv_example(x7, "q")
    for index in (0, 3, -1):
        t = nb02_qkv.token_qkv(x7, index, "q")
        i = index % 7
        assert t.index == i
        for got, want in ((t.query, ex.Q[i]), (t.key, ex.K[i]), (t.value, ex.V[i]),
                          (t.scores, ex.scores[i]), (t.weights, ex.weights[i]),
                          (t.output, ex.output[i])):  # fmt: skip
            torch.testing.assert_close(got, want, rtol=0, atol=0)
    with pytest.raises(IndexError):
        nb02_qkv.token_qkv(x7, 7)
    with pytest.raises(IndexError):
        nb02_qkv.token_qkv(x7, -8)
    with pytest.raises(ValueError, match="bias"):
        nb02_qkv.qkv_example(x7, "b")


def test_own_score_dominates_x_xT_in_high_dimension():
    # measured: 0.435 (d=2), 0.926 (8), 1.0 (64), 1.0 (512)
    f = {d: nb02_qkv.self_score_max_fraction(d) for d in (2, 8, 64, 512)}
    assert f[2] < 0.6
    assert f[8] > 0.85
    assert f[64] > 0.99 and f[512] > 0.999
    assert f[2] < f[8] <= f[64] <= f[512]


def test_dot_product_scales_with_the_norm_cosine_does_not():
    r = nb02_qkv.dot_and_cosine([1.0, 2.0, 0.5], [0.5, 1.0, -1.0], factors=(0.5, 1.0, 3.0))
    torch.testing.assert_close(r.dot, r.factors * r.dot[1])
    torch.testing.assert_close(r.cosine, r.cosine[1].expand(3))
    with pytest.raises(ValueError, match="non-zero"):
        nb02_qkv.dot_and_cosine([0.0, 0.0], [1.0, 0.0])
    with pytest.raises(ShapeError):
        nb02_qkv.dot_and_cosine([1.0, 0.0], [1.0, 0.0, 0.0])


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


def test_cost_curves():
    c = nb04_shapes.cost_curves([16, 256, 4096], 256)
    assert c.L.tolist() == [16, 256, 4096]
    assert c.crossover == pytest.approx(384.0)
    ratio = c.attention_macs / c.projection_macs
    torch.testing.assert_close(ratio, c.L.double() / c.crossover)


# ---------------------------------------------------------------------------
# Bad arguments get a sentence
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: nb02_qkv.self_score_max_fraction(0), ShapeError, "d"),
        (lambda: _experiments.attention_cost(0, 8), ShapeError, "L"),
        (lambda: _experiments.attention_cost(8, 8, dtype="float32"), TypeError, "dtype"),
        (lambda: _experiments.crossover_length(8, d_k=0), ShapeError, "d_k"),
        (lambda: nb02_qkv.qkv_example(torch.zeros(8)), ShapeError, "x"),
        (lambda: nb02_qkv.qkv_example(torch.zeros(3, 8), bias_scale=0), ValueError, "bias_scale"),
    ],
)  # fmt: skip
def test_bad_arguments(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_functions_do_not_touch_the_global_rng():
    state = torch.get_rng_state()
    nb02_qkv.qkv_example(torch.zeros(3, 8))
    nb02_qkv.self_score_max_fraction(4, n_sequences=2)
    assert torch.equal(torch.get_rng_state(), state)
