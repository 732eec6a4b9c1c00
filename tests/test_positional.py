"""sinusoidal_positional_encoding: shape, values, formula, odd widths, dtype."""

from __future__ import annotations

import math

import pytest
import torch

from attn_lib import sinusoidal_positional_encoding


@pytest.mark.parametrize("L, d_model", [(1, 1), (4, 8), (10, 16), (7, 5), (3, 2)])
def test_shape(L, d_model):
    pe = sinusoidal_positional_encoding(L, d_model)
    assert pe.shape == (L, d_model)
    assert pe.dtype == torch.float32
    assert (pe.abs() <= 1).all()


@pytest.mark.parametrize("d_model", [1, 6, 7, 8])
def test_position_zero_is_sin0_cos1(d_model):
    pe = sinusoidal_positional_encoding(5, d_model, dtype=torch.float64)
    row = pe[0]
    torch.testing.assert_close(
        row[0::2], torch.zeros(len(range(0, d_model, 2)), dtype=torch.float64)
    )
    torch.testing.assert_close(row[1::2], torch.ones(d_model // 2, dtype=torch.float64))


def formula(pos: int, j: int, d_model: int, base: float = 10000.0) -> float:
    two_i = j - (j % 2)
    angle = pos / base ** (two_i / d_model)
    return math.sin(angle) if j % 2 == 0 else math.cos(angle)


@pytest.mark.parametrize("d_model", [8, 9, 16])
def test_matches_the_formula_in_float64(d_model):
    L = 50
    pe = sinusoidal_positional_encoding(L, d_model, dtype=torch.float64)
    for pos, j in [(0, 0), (1, 0), (1, 1), (3, 2), (17, 5), (49, d_model - 1), (49, d_model - 2)]:
        expected = torch.tensor(formula(pos, j, d_model), dtype=torch.float64)
        torch.testing.assert_close(pe[pos, j], expected)
    full = torch.tensor(
        [[formula(p, j, d_model) for j in range(d_model)] for p in range(L)], dtype=torch.float64
    )
    torch.testing.assert_close(pe, full)


def test_odd_d_model_last_column_is_a_sine():
    d_model = 7
    pe = sinusoidal_positional_encoding(6, d_model, dtype=torch.float64)
    pos = torch.arange(6, dtype=torch.float64)
    torch.testing.assert_close(pe[:, 6], torch.sin(pos / 10000 ** (6 / 7)))
    # columns 0..5 follow the formula for d_model = 7 (not 6)
    for j in range(6):
        expected = torch.tensor([formula(p, j, d_model) for p in range(6)], dtype=torch.float64)
        torch.testing.assert_close(pe[:, j], expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_dtype(dtype):
    pe = sinusoidal_positional_encoding(12, 8, dtype=dtype)
    assert pe.dtype == dtype
    ref = sinusoidal_positional_encoding(12, 8, dtype=torch.float64)
    torch.testing.assert_close(pe, ref.to(dtype))


def test_base_argument():
    pe = sinusoidal_positional_encoding(4, 4, base=100.0, dtype=torch.float64)
    torch.testing.assert_close(pe[3, 2], torch.tensor(math.sin(3 / 100**0.5), dtype=torch.float64))


def test_rows_are_distinct_positions():
    pe = sinusoidal_positional_encoding(32, 16, dtype=torch.float64)
    dists = torch.cdist(pe, pe)
    off_diagonal = dists[~torch.eye(32, dtype=torch.bool)]
    assert (off_diagonal > 1e-3).all()
