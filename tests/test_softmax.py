"""stable_softmax vs naive_softmax, overflow thresholds, the Jacobian, entropy."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from attn_lib import entropy, naive_softmax, softmax_jacobian, stable_softmax

DTYPES = [torch.float32, torch.float64]


def test_stable_vs_naive_on_large_scores():
    x = torch.tensor([1000.0, 999.0, 0.0])
    naive = naive_softmax(x)
    assert naive.isnan().any()  # exp(1000) = inf, inf / inf = NaN
    stable = stable_softmax(x)
    torch.testing.assert_close(stable, torch.softmax(x, dim=-1))
    e = 1 / (1 + math.exp(-1))
    torch.testing.assert_close(stable, torch.tensor([e, 1 - e, 0.0]))
    torch.testing.assert_close(stable.sum(), torch.tensor(1.0))


@pytest.mark.parametrize(
    "dtype, ok, overflow, limit",
    [(torch.float32, 88.0, 89.0, 88.72), (torch.float16, 11.0, 11.1, 11.09)],
    ids=["float32", "float16"],
)
def test_naive_overflow_threshold(dtype, ok, overflow, limit):
    assert math.log(torch.finfo(dtype).max) == pytest.approx(limit, abs=0.01)
    below = torch.tensor([ok, 0.0], dtype=dtype)
    above = torch.tensor([overflow, 0.0], dtype=dtype)
    assert torch.isfinite(naive_softmax(below)).all()
    torch.testing.assert_close(naive_softmax(below), torch.softmax(below.float(), -1).to(dtype))
    assert not torch.isfinite(naive_softmax(above)).all()
    # the stable version does not care
    for x in (below, above):
        torch.testing.assert_close(stable_softmax(x), torch.softmax(x.float(), -1).to(dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shift", [-500.0, -3.0, 2.5, 1e3])
def test_shift_invariance(shift, dtype):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 6, generator=g, dtype=dtype)
    torch.testing.assert_close(stable_softmax(x + shift), stable_softmax(x))
    torch.testing.assert_close(stable_softmax(x), torch.softmax(x, dim=-1))


@pytest.mark.parametrize("dim", [0, 1, -1, -2])
def test_stable_softmax_dim(dim):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4, 5, generator=g) * 20
    torch.testing.assert_close(stable_softmax(x, dim=dim), torch.softmax(x, dim=dim))
    torch.testing.assert_close(naive_softmax(x, dim=dim), torch.softmax(x, dim=dim))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_stable_softmax_keeps_dtype_and_shape(dtype):
    x = torch.linspace(-5, 5, 12, dtype=dtype).reshape(2, 3, 2)
    y = stable_softmax(x)
    assert y.dtype == dtype and y.shape == x.shape
    torch.testing.assert_close(y.sum(-1), torch.ones(2, 3, dtype=dtype))


def test_all_minus_inf_row_gives_nan_like_torch():
    x = torch.full((3,), float("-inf"))
    assert stable_softmax(x).isnan().all() and torch.softmax(x, -1).isnan().all()


@pytest.mark.parametrize("n", [1, 3, 6])
@pytest.mark.parametrize("seed", [0, 1])
def test_softmax_jacobian_matches_autograd(n, seed):
    g = torch.Generator().manual_seed(seed)
    s = torch.randn(n, generator=g, dtype=torch.float64) * 2
    p = torch.softmax(s, dim=-1)
    jac = softmax_jacobian(p)
    ref = torch.autograd.functional.jacobian(lambda t: torch.softmax(t, dim=-1), s)
    assert jac.shape == (n, n)
    torch.testing.assert_close(jac, ref)
    torch.testing.assert_close(jac, jac.T)  # symmetric
    torch.testing.assert_close(jac.sum(-1), torch.zeros(n, dtype=torch.float64))


def test_softmax_jacobian_batched():
    g = torch.Generator().manual_seed(2)
    s = torch.randn(2, 3, 4, generator=g, dtype=torch.float64)
    jac = softmax_jacobian(torch.softmax(s, -1))
    assert jac.shape == (2, 3, 4, 4)
    for i in range(2):
        for j in range(3):
            ref = torch.autograd.functional.jacobian(lambda t: torch.softmax(t, -1), s[i, j])
            torch.testing.assert_close(jac[i, j], ref)


def test_softmax_jacobian_vanishes_as_the_row_saturates():
    norms = []
    for temp in (1.0, 5.0, 20.0, 80.0):
        s = torch.tensor([1.0, 0.5, -0.3, 0.0], dtype=torch.float64) * temp
        norms.append(softmax_jacobian(torch.softmax(s, -1)).abs().max().item())
    assert all(a > b for a, b in itertools.pairwise(norms))
    assert norms[-1] < 1e-15
    one_hot = torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64)
    torch.testing.assert_close(softmax_jacobian(one_hot), torch.zeros(3, 3, dtype=torch.float64))


@pytest.mark.parametrize("n", [1, 2, 7, 64])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_entropy_of_uniform_is_log_n(n, dtype):
    p = torch.full((n,), 1.0 / n, dtype=dtype)
    torch.testing.assert_close(entropy(p), torch.tensor(math.log(n), dtype=dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_entropy_of_one_hot_is_zero_without_nan(dtype):
    p = torch.tensor([[0.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]], dtype=dtype)
    h = entropy(p)
    assert not h.isnan().any()
    torch.testing.assert_close(h, torch.zeros(2, dtype=dtype))


def test_entropy_with_zeros_matches_formula():
    p = torch.tensor([0.5, 0.0, 0.25, 0.25], dtype=torch.float64)
    expected = -(0.5 * math.log(0.5) + 2 * 0.25 * math.log(0.25))
    torch.testing.assert_close(entropy(p), torch.tensor(expected, dtype=torch.float64))
    zeros = torch.zeros(2, 3)
    assert not entropy(zeros).isnan().any()  # an all-zero (fully masked) row: 0, not NaN
    torch.testing.assert_close(entropy(zeros), torch.zeros(2))


def test_entropy_dim_and_range():
    g = torch.Generator().manual_seed(3)
    p = torch.softmax(torch.randn(3, 5, generator=g, dtype=torch.float64), dim=0)
    h = entropy(p, dim=0)
    assert h.shape == (5,)
    assert (h >= 0).all() and (h <= math.log(3) + 1e-12).all()
