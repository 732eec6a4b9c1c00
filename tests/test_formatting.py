"""attn_lib.formatting: numbers as text that does not depend on the CPU's last bits."""

import math

import torch

from attn_lib import fmt_values


def test_integral_values_keep_their_decimals():
    # A tensor's repr prints [1., 1.] when every value is exactly 1 and [1.0000, 1.0000] when
    # one is an ulp away; fmt_values prints both the same way.
    assert fmt_values(torch.tensor([1.0, 1.0])) == "[1.0000, 1.0000]"
    assert fmt_values(torch.tensor([1.0, 1.0 - 2**-24])) == "[1.0000, 1.0000]"


def test_negative_zero_and_special_values():
    assert fmt_values(torch.tensor([-1e-9, 0.0])) == "[0.0000, 0.0000]"
    assert fmt_values(torch.tensor([math.nan, math.inf, -math.inf, 0.5])) == (
        "[   nan,    inf,   -inf, 0.5000]"
    )


def test_shapes_and_dtypes():
    assert fmt_values(torch.tensor(0.25)) == "0.2500"
    assert fmt_values(0.25, decimals=2) == "0.25"
    assert fmt_values(torch.tensor([[0.5, -1.0], [2.0, 0.25]]), decimals=2) == (
        "[[ 0.50, -1.00],\n [ 2.00,  0.25]]"
    )
    assert fmt_values(torch.tensor([True, False])) == "[1, 0]"
    assert fmt_values(torch.tensor([3, -1])) == "[ 3, -1]"
    assert fmt_values(torch.zeros(0)) == "[]"
    assert fmt_values(torch.zeros(2, 1, 1)) == "[[[0.0000]],\n\n [[0.0000]]]"
