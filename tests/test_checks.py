"""The shared checks of attn_lib.checks: sizes, dtypes and devices (one home for each rule)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attn_lib import MaskError, ShapeError, shape_trace
from attn_lib import scaled_dot_product_attention as sdpa
from attn_lib.checks import as_int, check_device, check_float_dtype, check_mask, check_size

# --- check_size / as_int -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        3,
        np.int64(3),
        np.int32(3),
        np.uint8(3),
        np.array(3),
        torch.tensor(3),
        torch.tensor([1, 3]).max(),
    ],
    ids=["int", "np.int64", "np.int32", "np.uint8", "np.array0d", "tensor0d", "lengths.max()"],
)
def test_check_size_accepts_integer_values_and_returns_a_plain_int(value):
    n = check_size("L", value)
    assert n == 3 and type(n) is int


@pytest.mark.parametrize(
    "value, words",
    [
        (3.0, ("L must be an int", "float 3.0", "write 3", "//")),
        (2.5, ("L must be an int", "float 2.5")),
        (np.float64(3.0), ("L must be an int", "float64")),
        (True, ("L must be an int", "the bool True")),
        (np.True_, ("L must be an int", "bool")),
        (torch.tensor(True), ("L must be an int", "the bool")),
        (torch.tensor(3.0), ("L must be an int", "torch.float32 tensor", "shape ()")),
        (torch.tensor([3]), ("L must be an int", "shape (1,)", "0-d integer tensor")),
        ("3", ("L must be an int", "str '3'")),
        (None, ("L must be an int", "NoneType")),
    ],
)
def test_check_size_refuses_floats_bools_and_others_naming_the_argument(value, words):
    with pytest.raises(TypeError) as info:
        check_size("L", value)
    for w in words:
        assert w in str(info.value)


def test_check_size_minimum_and_error_class():
    assert check_size("seed", 0, 0) == 0
    with pytest.raises(ValueError, match="L must be ≥ 1, got 0"):
        check_size("L", np.int64(0))
    with pytest.raises(ShapeError, match="d_model must be ≥ 1, got -2"):
        check_size("d_model", torch.tensor(-2), error=ShapeError)


def test_as_int_allows_negative_indices_and_refuses_meta():
    assert as_int("row", np.int64(-1)) == -1
    with pytest.raises(ValueError, match="meta device"):
        as_int("L", torch.tensor(3, device="meta"))


# --- dtypes and devices ------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_check_float_dtype_accepts_the_compute_dtypes(dtype):
    assert check_float_dtype("dtype", dtype) is dtype


@pytest.mark.parametrize(
    "dtype", [torch.float8_e4m3fn, torch.float8_e5m2, torch.int64, torch.bool, "float32"]
)
def test_check_float_dtype_refuses_the_others_listing_the_supported(dtype):
    with pytest.raises(TypeError, match="float32, float64, float16 or bfloat16"):
        check_float_dtype("dtype", dtype)


def test_check_device_meta_and_mismatch_messages():
    with pytest.raises(ValueError, match="meta device, which holds shapes but no values"):
        check_device("query", torch.empty(2, 3, device="meta"))
    # A second real device is not needed to check the message: only the devices are compared.
    cuda = torch.device("cuda", 0)
    with pytest.raises(
        ValueError, match=r"key is on cpu but query is on cuda:0.*key\.to\(query\.device\)"
    ):
        check_device("key", torch.zeros(2), cuda)
    check_device("key", torch.zeros(2), torch.device("cpu"))  # same device: fine


def test_check_mask_on_another_device_than_the_scores():
    mask = torch.ones(4, 4, dtype=torch.bool)
    with pytest.raises(
        MaskError, match=r"mask is on cpu but scores is on cuda:0.*mask\.to\(scores\.device\)"
    ):
        check_mask(mask, (4, 4), device=torch.device("cuda", 0))
    assert check_mask(mask, (4, 4), device=torch.device("cpu")) is mask


# --- shape_trace takes sizes too ---------------------------------------------------------------


def test_shape_trace_accepts_integer_sizes_and_refuses_floats():
    steps = shape_trace((np.int64(2), 4, 8), (2, torch.tensor(5), 8), (2, 5, 3))
    assert steps[-1].shape == (2, 4, 3) and all(type(d) is int for d in steps[-1].shape)
    with pytest.raises(TypeError, match=r"query\[1\] must be an int, got float 4.5"):
        shape_trace((2, 4.5, 8), (2, 5, 8), (2, 5, 8))
    with pytest.raises(ShapeError, match=r"key\[1\] must be ≥ 0, got -5"):
        shape_trace((2, 4, 8), (2, -5, 8), (2, 5, 8))
    with pytest.raises(TypeError, match="value must be a tensor or a shape tuple"):
        shape_trace((2, 4, 8), (2, 5, 8), 7)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.uint16, torch.uint32, torch.uint64])
def test_unsigned_integer_masks_are_read_as_keep_masks(dtype):
    from attn_lib.checks import as_keep_mask

    mask = torch.tensor([[1, 0], [1, 1]]).to(dtype)
    assert torch.equal(as_keep_mask(mask), torch.tensor([[True, False], [True, True]]))
    with pytest.raises(MaskError, match="only 0"):
        as_keep_mask(torch.tensor([2, 0]).to(dtype))


def test_a_0d_mask_gets_its_own_advice():
    with pytest.raises(MaskError, match="0-D mask") as info:
        check_mask(torch.tensor(True), (2, 4, 4))
    assert "squeeze" not in str(info.value)


# --- the errors that are a named mistake quote attn_lib.mistakes -----------------------------


@pytest.mark.parametrize(
    ("code", "sizes", "bad"),
    [
        ("mask_inverted", {}, lambda q: sdpa(q, q, q, ~torch.ones(4, 4, dtype=torch.bool))),
        ("additive_mask_as_keep", {}, lambda q: sdpa(q, q, q, torch.zeros(4, 4, dtype=torch.bool))),
        ("mask_not_unsqueezed", {"B": 2, "L_k": 4}, lambda q: sdpa(q, q, q, torch.ones(2, 4).bool())),
        ("bitwise_not_int", {}, lambda q: sdpa(q, q, q, ~torch.ones(4, 4, dtype=torch.long))),
        ("fill_overflow", {}, lambda q: sdpa(*(q.half(),) * 3, torch.ones(4, 4).tril().bool(), fill_value=-1e9)),
        ("key_transposed", {}, lambda q: sdpa(q, q[:, :, :3].mT, q[:, :3])),
    ],
)  # fmt: skip
def test_an_error_that_is_a_named_mistake_quotes_its_explanation(code, sizes, bad):
    from attn_lib.mistakes import why

    with pytest.raises((ValueError, TypeError, RuntimeError)) as info:
        bad(torch.randn(2, 4, 3))
    assert why(code, **sizes) in str(info.value)
