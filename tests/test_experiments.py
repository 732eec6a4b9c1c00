"""The seeded experiments of notebooks 01–04 (attn_lib.lessons) say what the notebooks claim.

Monte Carlo results are compared with tolerances derived from the sample size (the
relative SD each function reports), never with ==. The saturation thresholds were set
after computing the curves, with a margin (the measured values are in the comments).
"""

from __future__ import annotations

import math
from dataclasses import astuple

import pytest
import torch
from torch import nn

from attn_lib import ShapeError, SingleHeadAttention, causal_mask
from attn_lib.lessons import _experiments, nb01_retrieval, nb02_qkv, nb03_scaling, nb04_shapes

# ---------------------------------------------------------------------------
# Var(q·k) (C1)
# ---------------------------------------------------------------------------


def test_variance_of_q_dot_k_is_d_k():
    for row in nb03_scaling.score_variance_table():
        tol = 4 * row.rel_sd
        assert abs(row.variance / row.expected - 1) < tol, row
        assert abs(row.ratio - 1) < tol, row
        assert abs(row.scaled_variance - 1) < tol, row


def test_variance_scales_with_the_entry_variance():
    for row in nb03_scaling.score_variance_table((8, 64), n_samples=4000, entry_variance=2.0, seed=3):
        assert row.expected == pytest.approx(4.0 * row.d_k)
        assert abs(row.variance / row.expected - 1) < 4 * row.rel_sd


def test_relative_sd_formula_matches_repetition():
    # √((2 + 6/d_k)/n): measured 0.121/0.126 (d_k=1), 0.082/0.084 (4), 0.061/0.065 (64).
    for d_k in (1, 4, 64):
        measured, predicted = nb03_scaling.variance_estimate_spread(d_k, n_samples=500, n_repeats=200)
        assert predicted == pytest.approx(math.sqrt((2 + 6 / d_k) / 500))
        assert 0.8 < measured / predicted < 1.2, (d_k, measured, predicted)


def test_default_linear_weight_is_nn_linear_init():
    for d_out, d_in in ((8, 8), (3, 5)):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(7)
            expected = nn.Linear(d_in, d_out, bias=False).weight.detach()
        got = _experiments.default_linear_weight(d_out, d_in, torch.Generator().manual_seed(7))
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
        assert got.abs().max() <= 1 / math.sqrt(d_in)


def test_default_init_gives_query_variance_one_third_and_score_variance_d_k_over_9():
    for row in nb03_scaling.default_init_score_variance():
        assert abs(row.ratio * 9 - 1) < 4 * row.rel_sd, row
        # entries of q: sampling over n·d_k entries, plus the spread of ‖W_i‖² over
        # d_k·n_inits rows (relative variance (4/5)/d_model for uniform weights).
        q_tol = 4 * math.sqrt(2 / (row.n_samples * row.d_k) + 0.8 / (row.d_k**2 * row.n_inits))
        assert abs(row.query_entry_variance * 3 - 1) < q_tol, row


def test_score_samples_histogram_data():
    s = nb03_scaling.score_samples(256, n_samples=4000, seed=1)
    assert s.raw.shape == s.scaled.shape == (4000,)
    tol = 4 * math.sqrt((2 + 6 / 256) / 4000)
    assert abs(s.raw.double().var().item() / 256 - 1) < tol
    torch.testing.assert_close(s.scaled, s.raw / 16)


# ---------------------------------------------------------------------------
# Saturation (C2, C16, √d_k vs d_k)
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def curves():
    return nb03_scaling.saturation_curves()


def _nondecreasing(t: torch.Tensor, slack: float = 0.0) -> bool:
    return bool((t[1:] >= t[:-1] - slack).all())


def test_unscaled_rows_saturate_as_d_k_grows(curves):
    none = curves["none"]
    at = none.at(1024)
    assert at["median_max_weight"] > 0.99  # measured 1.0000
    assert at["median_entropy"] < 0.01  # measured 0.0001
    assert _nondecreasing(none.median_max_weight)
    assert _nondecreasing(-none.median_entropy)
    assert _nondecreasing(none.saturated_fraction)
    assert at["saturated_fraction"] > 0.5  # measured 0.66
    assert none.at(16)["saturated_fraction"] < 0.05  # measured 0.008


def test_sqrt_scaling_keeps_entropy_bounded_and_flat(curves):
    sqrt = curves["sqrt"]
    ent = sqrt.median_entropy[sqrt.d_k >= 4]
    assert ent.min() > 2.0  # measured 2.39 … 2.45 (log 16 = 2.77)
    assert ent.max() - ent.min() < 0.15  # measured 0.07
    assert float(sqrt.saturated_fraction.max()) < 1 / sqrt.n_rows  # no row saturated
    grad = sqrt.grad_norm_median[sqrt.d_k >= 4]
    assert grad.min() > 0.15 and grad.max() < 0.4  # measured 0.24 … 0.27
    assert float(sqrt.grad_tail_ratio[sqrt.d_k >= 4].max()) < 4  # measured ≤ 2.9


def test_linear_scaling_over_flattens(curves):
    lin = curves["linear"]
    log_L = math.log(lin.L)
    assert _nondecreasing(lin.median_entropy)
    assert log_L - lin.at(1024)["median_entropy"] < 0.005  # measured 0.0005
    assert lin.at(1024)["median_max_weight"] < 1.1 / lin.L  # measured 0.066 vs 1/16
    # the gradient reaching q shrinks too, as ‖k‖/d_k ≈ 1/√d_k: 16× from d_k = 4 to 1024
    assert lin.at(1024)["grad_norm_median"] < lin.at(4)["grad_norm_median"] / 10


def test_unscaled_gradients_become_heavy_tailed(curves):
    none = curves["none"]
    tail = none.grad_tail_ratio
    big = none.d_k >= 32
    assert _nondecreasing(tail[big])  # 7, 16, 46, 234, 2.5e3, 1.3e5
    assert none.at(1024)["grad_norm_p99"] / none.at(1024)["grad_norm_median"] > 1000
    # most rows learn nothing while a few get large updates: the median collapses, the
    # mean does not (it even grows)
    assert none.at(1024)["grad_norm_median"] < 0.01 * none.at(16)["grad_norm_median"]
    assert none.at(1024)["grad_norm_mean"] > none.at(16)["grad_norm_mean"]


def test_scalings_agree_at_d_k_1(curves):
    for name in ("sqrt", "linear"):
        torch.testing.assert_close(curves[name].at(1), curves["none"].at(1))


def test_temperature_flattens_rows():
    cold = nb03_scaling.saturation_curves((64,), ("sqrt",), n_sequences=16, temperature=0.5)["sqrt"]
    hot = nb03_scaling.saturation_curves((64,), ("sqrt",), n_sequences=16, temperature=2.0)["sqrt"]
    assert hot.at(64)["median_entropy"] > cold.at(64)["median_entropy"]


def test_curve_at_unknown_d_k_raises(curves):
    with pytest.raises(ValueError, match="not computed"):
        curves["sqrt"].at(3)


@pytest.mark.parametrize(
    "d_k, scaling, temperature", [(1, "none", 1.0), (16, "sqrt", 0.5), (512, "none", 1.0),
                                  (64, "linear", 2.0)]
)  # fmt: skip
def test_saturation_row_gradient_and_jacobian_match_autograd(d_k, scaling, temperature):
    row = nb03_scaling.saturation_row(d_k, scaling, temperature, seed=5)
    multiplier = 1 / (nb03_scaling.score_divisor(d_k, scaling) * temperature)
    q = row.query.clone().requires_grad_(True)
    weights = torch.softmax(row.keys @ q * multiplier, dim=-1)
    (weights @ row.upstream).backward()
    torch.testing.assert_close(row.grad_q, q.grad)
    torch.testing.assert_close(row.weights, weights.detach())
    jac = torch.autograd.functional.jacobian(lambda s: torch.softmax(s, -1), row.scores)
    torch.testing.assert_close(row.jacobian, jac)
    assert row.jacobian_norm == pytest.approx(torch.linalg.matrix_norm(jac).item(), abs=1e-15)
    assert row.grad_norm == pytest.approx(q.grad.norm().item(), rel=1e-12, abs=1e-300)


def test_saturation_row_is_nested_across_d_k():
    small, big = nb03_scaling.saturation_row(8, seed=2), nb03_scaling.saturation_row(1024, seed=2)
    torch.testing.assert_close(small.query, big.query[:8], rtol=0, atol=0)
    torch.testing.assert_close(small.keys, big.keys[:, :8], rtol=0, atol=0)
    torch.testing.assert_close(small.upstream, big.upstream, rtol=0, atol=0)
    unscaled = nb03_scaling.saturation_row(1024, "none", seed=2)
    assert unscaled.max_weight > 0.99 and big.max_weight < 0.9
    torch.testing.assert_close(unscaled.raw_scores, big.raw_scores)


def test_score_divisor():
    assert nb03_scaling.score_divisor(64, "none") == pytest.approx(1.0)
    assert nb03_scaling.score_divisor(64, "sqrt") == pytest.approx(8.0)
    assert nb03_scaling.score_divisor(64, "linear") == pytest.approx(64.0)


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
        (lambda: nb03_scaling.score_variance_table((0,)), ShapeError, "d_ks"),
        (lambda: nb03_scaling.score_variance_table(()), ShapeError, "non-empty"),
        (lambda: nb03_scaling.score_variance_table((4,), n_samples=1), ValueError, "n_samples"),
        (lambda: nb03_scaling.score_variance_table((4,), entry_variance=0), ValueError, "entry_variance"),
        (lambda: nb03_scaling.score_variance_table((4,), seed=-1), ValueError, "seed"),
        (lambda: nb03_scaling.score_variance_table((4.0,)), TypeError, "int"),
        (lambda: nb03_scaling.score_samples(0), ShapeError, "d_k"),
        (lambda: nb03_scaling.score_samples(True), TypeError, "bool"),
        (lambda: nb03_scaling.default_init_score_variance((8,), n_samples=10, n_inits=8), ValueError,
         "n_samples"),
        (lambda: nb03_scaling.saturation_row(0), ShapeError, "d_k"),
        (lambda: nb03_scaling.saturation_row(8, "cube"), ValueError, "scaling"),
        (lambda: nb03_scaling.saturation_row(8, temperature=0.0), ValueError, "temperature"),
        (lambda: nb03_scaling.saturation_row(8, L=1), ShapeError, "L"),
        (lambda: nb03_scaling.saturation_curves((8,), "sqrt"), ValueError, "scalings"),
        (lambda: nb03_scaling.saturation_curves((8,), threshold=-1), ValueError, "threshold"),
        (lambda: nb03_scaling.variance_estimate_spread(4, n_repeats=1), ValueError, "n_repeats"),
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
    nb03_scaling.score_variance_table((4,), n_samples=10)
    nb03_scaling.default_init_score_variance((4,), n_samples=16)
    nb03_scaling.saturation_curves((4,), n_sequences=2)
    nb03_scaling.saturation_row(4)
    nb03_scaling.score_samples(4, n_samples=10)
    nb02_qkv.qkv_example(torch.zeros(3, 8))
    nb02_qkv.self_score_max_fraction(4, n_sequences=2)
    assert torch.equal(torch.get_rng_state(), state)


def test_same_seed_same_numbers():
    a = nb03_scaling.saturation_curves((4, 64), n_sequences=4, seed=9)
    b = nb03_scaling.saturation_curves((4, 64), n_sequences=4, seed=9)
    for name in nb03_scaling.SCALINGS:
        torch.testing.assert_close(a[name].grad_norm_p99, b[name].grad_norm_p99, rtol=0, atol=0)
    rows_a, rows_b = nb03_scaling.score_variance_table((8,), seed=1), nb03_scaling.score_variance_table((8,), seed=1)
    torch.testing.assert_close([astuple(r) for r in rows_a], [astuple(r) for r in rows_b],
                               rtol=0, atol=0)  # fmt: skip
