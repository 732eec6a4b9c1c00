"""lessons/_experiments.py: nn.Linear's initialisation, seeded modules, the cost counts."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from attn_lib import ShapeError, SingleHeadAttention
from attn_lib.lessons import _experiments

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
# seeded_attention (the shared helper)
# ---------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------
# The cost counts (notebooks 04 and 10)
# ---------------------------------------------------------------------------


def test_attention_cost_counts():
    c = _experiments.attention_cost(1024, 512, batch=2)
    assert c.d_k == c.d_v == 512
    assert c.projection_macs == 2 * 1024 * 512 * 3 * 512
    assert c.score_macs == 2 * 1024 * 1024 * 512
    assert c.weighted_sum_macs == c.score_macs
    assert c.attention_macs == c.score_macs + c.weighted_sum_macs
    assert c.score_matrix_bytes == 2 * 1024 * 1024 * 4  # 8 MiB in float32
    assert (
        _experiments.attention_cost(1024, 512, dtype=torch.float16).score_matrix_bytes == 2 * 2**20
    )
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
