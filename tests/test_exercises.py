"""The exercise checkers: a right answer passes, each classic mistake is caught and named."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attn_lib.lessons.nb09_training_checkers import check_init_like_scaled, check_stalling_settings

# --- numbers and shapes given as numpy scalars, 0-d tensors, Fractions, floats ------------------


def test_init_like_scaled_accepts_float64():
    result = check_init_like_scaled(lambda w: w.double() / math.sqrt(w.shape[0]), verbose=False)
    assert result, result.message


@pytest.mark.parametrize("container", [tuple, lambda xs: dict.fromkeys(xs).keys(), np.array, iter])
def test_stalling_settings_accept_any_collection_of_names(container):
    def solution(summary, d_k):
        return container([r["setting"] for r in summary if r["d_k"] == d_k
                          and 2 * (r["n_never"] + r["n_relapsed"]) >= r["n_seeds"]])  # fmt: skip

    result = check_stalling_settings(solution, verbose=False)
    assert result, result.message
