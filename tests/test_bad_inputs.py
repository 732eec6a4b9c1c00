"""Bad inputs get one useful sentence: the right error type and the words that make it useful.

Each case asserts the exception type (ShapeError / MaskError are ValueError subclasses;
TypeError for dtype problems) and the key words of the message (the shapes it names, the
fix it proposes). After every bad call a correct call must still pass: attn_lib keeps no
state that a failed call could corrupt.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import attn_lib
from attn_lib import (
    MaskError,
    ShapeError,
    SingleHeadAttention,
    causal_mask,
    padding_mask,
    scaled_dot_product_attention,
    sinusoidal_positional_encoding,
)
from attn_lib.masks import to_additive, to_key_padding_mask, to_multihead_attn_mask
from attn_lib.reference import from_multihead_attention


def all_of(*words: str) -> str:
    """A regex that matches a message containing every one of ``words`` (literally, any order)."""
    return "(?s)" + "".join(f"(?=.*{re.escape(w)})" for w in words)


def qkv(
    q_shape=(2, 4, 8), k_shape=(2, 4, 8), v_shape=(2, 4, 8), dtype=torch.float32, seed=0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(s, generator=g, dtype=dtype) for s in (q_shape, k_shape, v_shape))


def with_value(t: torch.Tensor, index: tuple[int, ...], value: float) -> torch.Tensor:
    t = t.clone()
    t[index] = value
    return t


def sdpa(q, k, v, mask=None):
    return scaled_dot_product_attention(q, k, v, mask)


Q, K, V = qkv()
Q4, K4, V4 = qkv((2, 2, 4, 8), (2, 2, 4, 8), (2, 2, 4, 8), seed=1)


@dataclass(frozen=True)
class Case:
    id: str
    call: Callable[[], object]
    error: type[BaseException]
    words: tuple[str, ...]


def _sha(x: torch.Tensor, **kw):
    torch.manual_seed(0)
    return SingleHeadAttention(8, 8)(x, **kw)


def _mha(**kw) -> nn.MultiheadAttention:
    torch.manual_seed(0)
    return nn.MultiheadAttention(embed_dim=8, bias=False, **kw)


CASES = [
    # --- query, key, value: shapes --------------------------------------------------------
    Case(
        "d_k_differs",
        lambda: sdpa(*qkv((2, 4, 8), (2, 5, 6), (2, 5, 8))),
        ShapeError,
        ("d_k of query and key differ", "(2, 4, 8)", "(2, 5, 6)", "W_Q and W_K"),
    ),
    Case(
        "key_value_lengths_differ",
        lambda: sdpa(*qkv((2, 4, 8), (2, 5, 8), (2, 6, 8))),
        ShapeError,
        ("same length L_k", "(2, 5, 8)", "(2, 6, 8)", "L_k = 5"),
    ),
    Case(
        "ranks_differ",
        lambda: sdpa(*qkv((4, 8), (2, 4, 8), (2, 4, 8))),
        ShapeError,
        ("same rank", "query (4, 8)", "key (2, 4, 8)", "unsqueeze(0)"),
    ),
    Case(
        "batch_dims_differ",
        lambda: sdpa(*qkv((2, 4, 8), (3, 4, 8), (3, 4, 8))),
        ShapeError,
        ("leading (batch) dims must match", "(2, 4, 8)", "(3, 4, 8)", ".expand"),
    ),
    Case(
        "one_d_query",
        lambda: sdpa(torch.randn(8), K[0], V[0]),
        ShapeError,
        ("query has shape (8,)", "1-D", "query.unsqueeze(0)", "(1, 8)"),
    ),
    Case(
        "five_d_query",
        lambda: sdpa(*qkv((1, 2, 2, 4, 8), (1, 2, 2, 4, 8), (1, 2, 2, 4, 8))),
        ShapeError,
        ("(1, 2, 2, 4, 8)", "5-D", "(B, H, L, d)", "reshape"),
    ),
    Case(
        "empty_key",
        lambda: sdpa(*qkv((2, 4, 8), (2, 0, 8), (2, 0, 8))),
        ShapeError,
        ("L_k is 0", "(2, 0, 8)", "at least one key"),
    ),
    # --- query, key, value: dtypes and types ----------------------------------------------
    Case(
        "integer_query",
        lambda: sdpa(torch.ones(2, 4, 8, dtype=torch.int64), K, V),
        TypeError,
        ("query has dtype torch.int64", "floating-point", "query.float()"),
    ),
    Case(
        "bool_key",
        lambda: sdpa(Q, K > 0, V),
        TypeError,
        ("key has dtype torch.bool", "floating-point", "key.float()"),
    ),
    Case(
        "mixed_dtypes",
        lambda: sdpa(Q, K.double(), V),
        TypeError,
        ("share one dtype", "torch.float32", "torch.float64", ".to(query.dtype)"),
    ),
    Case(
        "non_tensor_value",
        lambda: sdpa(Q, K, V.tolist()),
        TypeError,
        ("value must be a torch.Tensor", "got list", "torch.as_tensor(value"),
    ),
    # --- masks ----------------------------------------------------------------------------
    Case(
        "mask_does_not_fit",
        lambda: sdpa(Q, K, V, torch.ones(2, 3, 4, dtype=torch.bool)),
        MaskError,
        (
            "(2, 3, 4)",
            "does not fit",
            "(2, 4, 4)",
            "dim 1: 3 vs 4",
            "equal the scores' dim or be 1",
        ),
    ),
    Case(
        "two_d_mask_wrong_size",
        lambda: sdpa(*qkv((5, 8), (3, 8), (3, 8)), torch.ones(5, 4, dtype=torch.bool)),
        MaskError,
        ("mask has shape (5, 4)", "(L_q, L_k) = (5, 3)"),
    ),
    Case(
        "padding_mask_not_unsqueezed",
        lambda: sdpa(*qkv((2, 4, 8), (2, 5, 8), (2, 5, 8)), torch.ones(2, 5, dtype=torch.bool)),
        MaskError,
        (
            "(2, 5)",
            "(L_q, L_k) = (4, 5)",
            "mask.unsqueeze(1)",
            "(2, 1, 5)",
            "padding_mask(lengths)",
        ),
    ),
    Case(
        "padding_mask_3d_on_4d_scores",
        lambda: sdpa(Q4, K4, V4, torch.ones(2, 1, 4, dtype=torch.bool)),
        MaskError,
        ("(2, 1, 4)", "(2, 2, 4, 4)", "(2, 1, 1, 4)", "scores' rank"),
    ),
    Case(
        "one_d_mask",
        lambda: sdpa(Q, K, V, torch.ones(4, dtype=torch.bool)),
        MaskError,
        ("(4,)", "1-D", "ambiguous", "(1, 1, 4)"),
    ),
    Case(
        "five_d_mask",
        lambda: sdpa(Q4, K4, V4, torch.ones(1, 2, 2, 4, 4, dtype=torch.bool)),
        MaskError,
        ("(1, 2, 2, 4, 4)", "5-D", "squeeze"),
    ),
    Case(
        "float_mask",
        lambda: sdpa(Q, K, V, torch.ones(2, 1, 4)),
        MaskError,
        ("torch.float32", "float mask is refused", "mask == 0", "mask.bool()", "to_additive"),
    ),
    Case(
        "additive_float_mask",
        lambda: sdpa(Q, K, V, to_additive(padding_mask([2, 4]))),
        MaskError,
        ("float mask is refused", "additive", "mask == 0"),
    ),
    Case(
        "integer_mask_with_a_2",
        lambda: sdpa(Q, K, V, torch.tensor([[[1, 1, 2, 0]], [[1, 1, 1, 1]]])),
        MaskError,
        ("only 0 (blocked) and 1 (may attend)", "[0, 1, 2]", "ids != pad_id"),
    ),
    Case(
        "mask_blocks_everything",
        lambda: sdpa(Q, K, V, torch.zeros(2, 1, 4, dtype=torch.bool)),
        MaskError,
        ("blocks every key for every query", "inverted", "~mask", "True = blocked"),
    ),
    Case(
        "mask_not_a_tensor",
        lambda: sdpa(Q, K, V, [[1, 1, 1, 1]]),
        TypeError,
        ("mask must be a torch.Tensor", "got list"),
    ),
    # --- dtypes and devices torch cannot compute attention in ------------------------------
    *[
        Case(
            f"{str(dtype)[6:]}_query",
            (lambda dtype=dtype: sdpa(*(t.to(dtype) for t in (Q, K, V)))),
            TypeError,
            (f"query has dtype {dtype}", "float32, float64, float16 or bfloat16", "query.float()"),
        )
        for dtype in (torch.float8_e4m3fn, torch.float8_e5m2)
    ],
    Case(
        "meta_query",
        lambda: sdpa(torch.randn(2, 4, 8, device="meta"), K, V),
        ValueError,
        ("query is on the meta device", "no values", "real tensors on one device"),
    ),
    Case(
        "meta_mask",
        lambda: sdpa(Q, K, V, torch.ones(4, 4, dtype=torch.bool, device="meta")),
        MaskError,
        ("mask is on the meta device", "no values"),
    ),
    Case(
        "module_meta_x",
        lambda: _sha(torch.randn(2, 4, 8, device="meta")),
        ValueError,
        ("x is on the meta device", "device='cpu'"),
    ),
    Case(
        "module_on_meta",
        lambda: SingleHeadAttention(8, 8).to("meta")(Q),
        ValueError,
        ("module's weights are on the meta device", "to_empty"),
    ),
    # --- non-finite inputs ----------------------------------------------------------------
    Case(
        "nan_in_query",
        lambda: sdpa(with_value(Q, (1, 2, 3), math.nan), K, V),
        ValueError,
        ("query contains 1 non-finite", "nan", "(1, 2, 3)"),
    ),
    Case(
        "inf_in_value",
        lambda: sdpa(Q, K, with_value(V, (0, 3, 5), math.inf)),
        ValueError,
        ("value contains 1 non-finite", "inf", "at index (0, 3, 5)"),
    ),
    Case(
        "neg_inf_in_key",
        lambda: sdpa(Q, with_value(K, (1, 0, 7), -math.inf), V),
        ValueError,
        ("key contains", "-inf", "(1, 0, 7)"),
    ),
    # --- scale, dropout_p, fill_value -----------------------------------------------------
    *[
        Case(
            f"scale_{name}",
            (lambda s=s: scaled_dot_product_attention(Q, K, V, scale=s)),
            ValueError,
            ("scale must be a finite number > 0", f"got {s}", "1/sqrt(d_k)", "1.0"),
        )
        for name, s in (("zero", 0.0), ("negative", -0.5), ("inf", math.inf), ("nan", math.nan))
    ],
    Case(
        "scale_string",
        lambda: scaled_dot_product_attention(Q, K, V, scale="0.5"),
        TypeError,
        ("scale must be a real number", "got str"),
    ),
    *[
        Case(
            f"dropout_p_{p}",
            (lambda p=p: scaled_dot_product_attention(Q, K, V, dropout_p=p, training=True)),
            ValueError,
            ("dropout_p must be in [0, 1)", f"got {p}", "probability"),
        )
        for p in (-0.1, 1.0, 1.5)
    ],
    Case(
        "fill_value_nan",
        lambda: scaled_dot_product_attention(
            Q, K, V, padding_mask([2, 4], max_len=4), fill_value=math.nan
        ),
        ValueError,
        ("fill_value is NaN",),
    ),
    Case(
        "fill_value_string",
        lambda: scaled_dot_product_attention(
            Q, K, V, padding_mask([2, 4], max_len=4), fill_value="-inf"
        ),
        TypeError,
        ("fill_value must be a number", "got str"),
    ),
    # --- mask builders and converters -----------------------------------------------------
    Case(
        "padding_length_over_max_len",
        lambda: padding_mask([2, 5], max_len=3),
        ValueError,
        ("exceeds max_len", "[2, 5]", "max_len = 3"),
    ),
    Case(
        "padding_negative_length",
        lambda: padding_mask([2, -1]),
        ValueError,
        ("lengths must be ≥ 0", "[2, -1]"),
    ),
    Case(
        "padding_two_d_lengths",
        lambda: padding_mask(torch.tensor([[2, 3], [1, 4]])),
        ShapeError,
        ("lengths must be 1-D (B,)", "(2, 2)"),
    ),
    Case(
        "padding_float_lengths_tensor",
        lambda: padding_mask(torch.tensor([2.0, 3.0])),
        TypeError,
        ("lengths must hold integers", "torch.float32"),
    ),
    Case(
        "padding_float_lengths_list",
        lambda: padding_mask([2.0, 3.0]),
        TypeError,
        ("lengths must hold ints", "[2.0, 3.0]"),
    ),
    Case(
        "padding_empty_lengths",
        lambda: padding_mask([]),
        ShapeError,
        ("lengths is empty", "one length per sequence"),
    ),
    Case("causal_zero", lambda: causal_mask(0), ValueError, ("L_q must be ≥ 1", "got 0")),
    Case("causal_float", lambda: causal_mask(4.0), TypeError, ("L_q must be an int", "float")),
    Case(
        "key_padding_from_causal",
        lambda: to_key_padding_mask(causal_mask(4)),
        MaskError,
        ("(B, 1, L_k)", "got shape (4, 4)", "to_multihead_attn_mask", "causal"),
    ),
    Case(
        "multihead_mask_without_L_q",
        lambda: to_multihead_attn_mask(padding_mask([2, 4])),
        MaskError,
        ("(2, 1, 4)", "L_q=", "to_key_padding_mask"),
    ),
    Case(
        "multihead_mask_4d",
        lambda: to_multihead_attn_mask(torch.ones(2, 1, 4, 4, dtype=torch.bool)),
        MaskError,
        ("(B * num_heads, L_q, L_k)", "(2, 1, 4, 4)"),
    ),
    Case(
        "causal_whole_float",
        lambda: causal_mask(3.0),
        TypeError,
        ("L_q must be an int", "float 3.0", "write 3", "//"),
    ),
    Case("causal_bool", lambda: causal_mask(True), TypeError, ("L_q must be an int", "bool True")),
    Case(
        "causal_float_tensor_length",
        lambda: causal_mask(torch.tensor([2.0, 3.0]).max()),
        TypeError,
        ("L_q must be an int", "torch.float32 tensor", "0-d integer tensor"),
    ),
    Case(
        "causal_unknown_align",
        lambda: causal_mask(3, 5, align="lower_right"),
        ValueError,
        ("align must be 'top_left'", "'bottom_right'", "causal_lower_right", "'lower_right'"),
    ),
    Case(
        "padding_float_max_len",
        lambda: padding_mask([3, 2], max_len=5.0),
        TypeError,
        ("max_len must be an int", "float 5.0"),
    ),
    Case(
        "padding_lengths_on_meta",
        lambda: padding_mask(torch.tensor([3, 2], device="meta")),
        ValueError,
        ("lengths is on the meta device", "no values", "device='cpu'"),
    ),
    Case(
        "multihead_one_row_without_L_q",
        lambda: to_multihead_attn_mask(torch.ones(1, 4, dtype=torch.bool)),
        MaskError,
        ("(1, 4)", "does not broadcast", "L_q=...", "L_q=1"),
    ),
    Case(
        "multihead_size_does_not_fit",
        lambda: to_multihead_attn_mask(causal_mask(3), L_q=4),
        MaskError,
        ("(3, 3)", "L_q dim 3", "L_q=4"),
    ),
    *[
        Case(
            f"multihead_num_heads_{name}",
            (lambda n=n: to_multihead_attn_mask(padding_mask([3, 2]), L_q=3, num_heads=n)),
            error,
            words,
        )
        for name, n, error, words in (
            ("zero", 0, ValueError, ("num_heads must be ≥ 1", "got 0")),
            ("negative", -1, ValueError, ("num_heads must be ≥ 1", "got -1")),
            ("float", 2.5, TypeError, ("num_heads must be an int", "float 2.5")),
            ("bool", True, TypeError, ("num_heads must be an int", "bool True")),
        )
    ],
    Case(
        "key_padding_batch_mismatch",
        lambda: to_key_padding_mask(padding_mask([3, 2]), B=4),
        MaskError,
        ("(2, 1, 3)", "batch dim 2", "B=4"),
    ),
    Case(
        "key_padding_from_2d_padding",
        lambda: to_key_padding_mask(torch.ones(2, 5, dtype=torch.bool)),
        MaskError,
        ("(B, 1, L_k)", "got shape (2, 5)", "mask.unsqueeze(1)", "(2, 1, 5)"),
    ),
    Case(
        "to_additive_float8",
        lambda: to_additive(causal_mask(3), torch.float8_e4m3fn),
        TypeError,
        ("torch.float8_e4m3fn", "float32, float64, float16 or bfloat16"),
    ),
    Case("combine_nothing", lambda: attn_lib.combine_masks(), MaskError, ("at least one mask",)),
    Case(
        "combine_not_broadcasting",
        lambda: attn_lib.combine_masks(padding_mask([2, 3]), causal_mask(4)),
        MaskError,
        ("(2, 1, 3)", "(4, 4)", "do not broadcast", "(1, L, L)"),
    ),
    Case(
        "combine_float_mask",
        lambda: attn_lib.combine_masks(causal_mask(4), torch.ones(4, 4)),
        MaskError,
        ("mask 1", "float mask is refused"),
    ),
    Case(
        "to_additive_integer_dtype",
        lambda: to_additive(causal_mask(3), torch.int64),
        TypeError,
        ("floating point dtype", "torch.int64"),
    ),
    # --- SingleHeadAttention --------------------------------------------------------------
    Case(
        "module_wrong_d_model",
        lambda: _sha(torch.randn(2, 4, 6)),
        ShapeError,
        ("(2, 4, 6)", "last dim 6", "d_model = 8", "SingleHeadAttention(8, 8)", "d_model=6"),
    ),
    Case(
        "module_4d_x",
        lambda: _sha(torch.randn(2, 1, 4, 8)),
        ShapeError,
        ("(2, 1, 4, 8)", "(L, d_model) or (B, L, d_model)", "d_model = 8"),
    ),
    Case(
        "module_context_wrong_d_model",
        lambda: _sha(torch.randn(2, 4, 8), context=torch.randn(2, 5, 7)),
        ShapeError,
        ("context has shape (2, 5, 7)", "d_model = 8"),
    ),
    Case(
        "module_integer_x",
        lambda: _sha(torch.ones(2, 4, 8, dtype=torch.long)),
        TypeError,
        ("x has dtype torch.int64", "x.float()"),
    ),
    Case(
        "module_padding_mask_not_unsqueezed",
        lambda: _sha(torch.randn(2, 5, 8), mask=torch.ones(2, 5, dtype=torch.bool)),
        MaskError,
        ("(2, 5)", "(L_q, L_k) = (5, 5)", "mask.unsqueeze(1)", "(2, 1, 5)"),
    ),
    Case(
        "module_bad_width",
        lambda: SingleHeadAttention(8, 0),
        ValueError,
        ("d_k must be ≥ 1", "got 0"),
    ),
    Case(
        "module_float_width",
        lambda: SingleHeadAttention(8.0, 8),
        TypeError,
        ("d_model must be an int", "float 8.0", "write 8"),
    ),
    Case(
        "module_bad_dropout",
        lambda: SingleHeadAttention(8, 8, dropout=1.0),
        ValueError,
        ("dropout_p must be in [0, 1)",),
    ),
    # --- reference helpers ----------------------------------------------------------------
    Case(
        "from_mha_two_heads",
        lambda: from_multihead_attention(_mha(num_heads=2, batch_first=True)),
        ValueError,
        ("num_heads=2", "num_heads=1"),
    ),
    Case(
        "from_mha_not_batch_first",
        lambda: from_multihead_attention(_mha(num_heads=1, batch_first=False)),
        ValueError,
        ("batch_first=False", "(L, B, E)", "(L, B, B)", "batch_first=True"),
    ),
    Case(
        "from_mha_not_a_module",
        lambda: from_multihead_attention(nn.Linear(8, 8)),
        TypeError,
        ("nn.MultiheadAttention", "Linear"),
    ),
    # --- softmax and positions ------------------------------------------------------------
    Case(
        "stable_softmax_int",
        lambda: attn_lib.stable_softmax(torch.arange(4)),
        TypeError,
        ("x has dtype torch.int64", "floating-point"),
    ),
    Case(
        "stable_softmax_bad_dim",
        lambda: attn_lib.stable_softmax(torch.randn(2, 3), dim=2),
        ShapeError,
        ("dim=2", "(2, 3)", "dim=-1"),
    ),
    Case(
        "positional_zero_length",
        lambda: sinusoidal_positional_encoding(0, 8),
        ValueError,
        ("L must be ≥ 1", "got 0"),
    ),
    Case(
        "positional_float_length",
        lambda: sinusoidal_positional_encoding(4.0, 8),
        TypeError,
        ("L must be an int", "float 4.0"),
    ),
    Case(
        "positional_float8_dtype",
        lambda: sinusoidal_positional_encoding(4, 8, dtype=torch.float8_e5m2),
        TypeError,
        ("torch.float8_e5m2", "float32, float64, float16 or bfloat16"),
    ),
    Case(
        "positional_integer_dtype",
        lambda: sinusoidal_positional_encoding(4, 8, dtype=torch.int32),
        TypeError,
        ("floating point", "torch.int32"),
    ),
    Case(
        "shape_trace_mismatch",
        lambda: attn_lib.shape_trace((2, 4, 8), (2, 5, 6), (2, 5, 8)),
        ShapeError,
        ("d_k of query and key differ", "(2, 4, 8)", "(2, 5, 6)"),
    ),
]


def good_call_still_works() -> None:
    """A correct call after a failed one gives PyTorch's answer (no state left behind)."""
    q, k, v = qkv((2, 3, 8), (2, 5, 8), (2, 5, 6), seed=7)
    keep = padding_mask([3, 5])  # (2, 1, 5)
    out, weights = scaled_dot_product_attention(q, k, v, keep)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=keep))
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3))

    torch.manual_seed(3)
    module = SingleHeadAttention(8, 8)
    x = torch.randn(2, 4, 8)
    y, w = module(x, causal_mask(4), return_attn=True)
    assert y.shape == (2, 4, 8) and w.shape == (2, 4, 4)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 4))


def test_at_least_25_distinct_cases():
    assert len({c.id for c in CASES}) == len(CASES) >= 25


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_raises_a_useful_error(case: Case):
    with pytest.raises(case.error, match=all_of(*case.words)) as info:
        case.call()
    # ShapeError / MaskError must not be loosened to a bare ValueError, and vice versa.
    if case.error in (ShapeError, MaskError):
        assert type(info.value) is case.error
    good_call_still_works()


def test_error_classes_are_value_errors():
    assert issubclass(ShapeError, ValueError)
    assert issubclass(MaskError, ValueError)
    assert not issubclass(ShapeError, MaskError) and not issubclass(MaskError, ShapeError)


def test_shape_error_is_caught_as_value_error():
    with pytest.raises(ValueError, match="d_k of query and key differ"):
        sdpa(*qkv((2, 4, 8), (2, 4, 6), (2, 4, 8)))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_float_mask_refused_in_every_dtype(dtype):
    with pytest.raises(MaskError, match=all_of(str(dtype), "mask.bool()")):
        sdpa(Q, K, V, torch.ones(4, 4, dtype=dtype))


def test_padding_hint_for_4d_scores_names_the_target_shape():
    # A (B, L_k) padding mask given with (B, H, L_q, L_k) scores and B != L_q.
    q, k, v = qkv((2, 2, 3, 8), (2, 2, 5, 8), (2, 2, 5, 8))
    with pytest.raises(MaskError, match=all_of("(2, 5)", "(2, 1, 1, 5)", "padding_mask(lengths)")):
        sdpa(q, k, v, torch.ones(2, 5, dtype=torch.bool))


def test_nan_check_does_not_fire_on_large_finite_inputs():
    # The cheap check sums the tensor; a sum that overflows must not be reported as NaN/inf.
    big = torch.full((2, 4, 8), 1e308, dtype=torch.float64)
    assert not torch.isfinite(big.sum())
    out, _ = scaled_dot_product_attention(big * 0, big * 0, big)
    torch.testing.assert_close(out, big)


@pytest.mark.parametrize("arg", ["x", "context"])
def test_module_nan_input_names_the_argument(arg):
    torch.manual_seed(0)
    module = SingleHeadAttention(8, 8)
    x, context = torch.randn(2, 4, 8), torch.randn(2, 5, 8)
    bad = {"x": x, "context": context}[arg]
    bad[0, 1, 2] = math.nan
    with pytest.raises(ValueError, match=rf"^{arg} contains (?s:.*)at index \(0, 1, 2\)"):
        module(x, context=context)


def test_module_nan_input_is_reported():
    # Whatever the wording, NaN in x must not propagate silently.
    torch.manual_seed(0)
    x = torch.randn(2, 4, 8)
    x[1, 3, 0] = math.nan
    with pytest.raises(ValueError, match="non-finite"):
        SingleHeadAttention(8, 8)(x)
