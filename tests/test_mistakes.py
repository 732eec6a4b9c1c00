"""attn_lib.mistakes: each row of the table recomputes, with attn_lib's attention, exactly the
weights the mistake gives when a learner writes it out; its text reads as one sentence."""

from __future__ import annotations

import math

import pytest
import torch

import attn_lib
from attn_lib.mistakes import FILLS, MISTAKES, Inputs, find

G = torch.Generator().manual_seed(0)


def randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=G, dtype=torch.float64)


# B = 2, H = 3, L_q = 5, L_k = 6, d_k = 4, d_v = 7: every size differs, so does every scale
Q4, K4, V4 = randn(2, 3, 5, 4), randn(2, 3, 6, 4), randn(2, 3, 6, 7)
PAD = attn_lib.padding_mask([6, 4])[:, None]  # (B, 1, 1, L_k)
# B = L = d_k = 3 (key.T fits), and a mask whose row 2 of batch 1 has no key
Q3, K3, V3 = randn(3, 3, 3), randn(3, 3, 3), randn(3, 3, 5)
EMPTY = attn_lib.causal_mask(3).repeat(3, 1, 1)
EMPTY[1, 2] = False
H4 = randn(2, 4, 4, 4)  # H = L = d_k = 4: key.transpose(1, 2) runs


def softmax(scores, keep=None, fill=-1e9, dim=-1):
    """The article's masked softmax, as a learner writes it."""
    return torch.softmax(scores if keep is None else scores.masked_fill(~keep, fill), dim=dim)


def s(q, k, divisor=None):
    return q @ k.mT / (math.sqrt(q.size(-1)) if divisor is None else divisor)


# (code, the tensors, the weights as a learner computes them), one per row, in table order
AS_WRITTEN = [
    ("scale_d_k", (Q4, K4, V4, PAD), lambda q, k, m: softmax(s(q, k, 4), m)),
    ("no_scale", (Q4, K4, V4, PAD), lambda q, k, m: softmax(s(q, k, 1), m)),
    ("scale_multiplied", (Q4, K4, V4, PAD), lambda q, k, m: softmax(s(q, k, 1) * 2, m)),
    ("scale_length", (Q4, K4, V4, PAD), lambda q, k, m: softmax(s(q, k, math.sqrt(5)), m)),
    ("scale_length", (Q4, K4, V4, PAD), lambda q, k, m: softmax(s(q, k, math.sqrt(6)), m)),
    ("scale_d_v", (Q4, K4, V4, PAD), lambda q, k, m: softmax(s(q, k, math.sqrt(7)), m)),
    ("scale_batch", (Q4, K4, V4, PAD), lambda q, k, m: softmax(s(q, k, math.sqrt(2)), m)),
    ("scale_heads", (Q4, K4, V4, PAD), lambda q, k, m: softmax(s(q, k, math.sqrt(3)), m)),
    ("scale_d_model", None, None),  # needs d_model: see below
    ("scale_after_softmax", (Q4, K4, V4, PAD), lambda q, k, m: softmax(s(q, k, 1), m) / 2),
    ("softmax_dim", (Q3, K3, V3, EMPTY), lambda q, k, m: softmax(s(q, k), m, dim=-2)),
    ("softmax_dim", (Q3, K3, V3, EMPTY), lambda q, k, m: softmax(s(q, k), m, dim=0)),
    ("softmax_dim", (Q4, K4, V4, PAD), lambda q, k, m: softmax(s(q, k), m, dim=1)),
    ("no_softmax", (Q4, K4, V4, PAD), lambda q, k, m: s(q, k).masked_fill(~m, -1e9)),
    ("reshape_not_transpose", (Q4, K4, V4, PAD),
     lambda q, k, m: softmax(q @ k.reshape(2, 3, 4, 6) / 2, m)),
    ("transpose_1_2", (H4, H4.flip(0), H4, None), lambda q, k, m: softmax(q @ k.transpose(1, 2) / 2)),
    ("dot_T", (Q3, K3, V3, None), lambda q, k, m: softmax(q @ k.permute(2, 1, 0) / math.sqrt(3))),
    ("scores_transposed", (Q3, K3, V3, EMPTY), lambda q, k, m: softmax(s(k, q), m)),
    ("mask_not_applied", (Q4, K4, V4, PAD), lambda q, k, m: softmax(s(q, k))),
    ("mask_inverted", (Q3, K3, V3, EMPTY), lambda q, k, m: softmax(s(q, k), ~m)),
    ("additive_mask_as_keep", None, None),  # needs an additive mask: see below
    ("mask_transposed", (Q3, K3, V3, EMPTY), lambda q, k, m: softmax(s(q, k), m.mT)),
    ("mask_transposed", (Q3, K3, V3, EMPTY), lambda q, k, m: softmax(s(q, k), m.permute(2, 1, 0))),
    ("mask_fill_zero", (Q3, K3, V3, EMPTY), lambda q, k, m: softmax(s(q, k), m, fill=0.0)),
    ("mask_after_softmax", (Q4, K4, V4, PAD), lambda q, k, m: softmax(s(q, k)) * m),
    ("uniform_rows", (Q3, K3, V3, EMPTY), lambda q, k, m: softmax(s(q, k), m)),
    ("nan_rows", (Q3, K3, V3, EMPTY), lambda q, k, m: softmax(s(q, k), m, fill=-math.inf)),
    ("dropout_on", None, None),  # random: recognised by its zeros, never recomputed
]  # fmt: skip
# Around the attention: text only, quoted by the errors and the checkers
AROUND = ["fill_overflow", "mask_not_unsqueezed", "padded_query_rows", "masks_or",
          "causal_ignored", "bitwise_not_int", "keep_mask_to_mha", "float_mask_added",
          "key_transposed", "linear_not_transposed", "bias_missing", "bias_none",
          "k_bias_no_shift", "no_out_proj", "out_proj_transposed", "out_proj_no_bias",
          "in_proj_bias_missing", "qk_swapped"]  # fmt: skip


def test_the_table_reads_as_it_is_tested():
    assert [code for code, _, _ in AS_WRITTEN] + AROUND == [m.code for m in MISTAKES]
    assert [m.code for m in MISTAKES if not m.recomputes] == ["dropout_on", *AROUND]
    for m in MISTAKES:
        assert "\n" not in m.name and m.why.endswith(".") and len(m.why) > 40
        assert find(m.code).code == m.code
        assert "{" not in m.explain({"B": 2, "L_k": 5})  # every size it names is filled in
    with pytest.raises(KeyError):
        find("no_such_mistake")


@pytest.mark.parametrize("row", [i for i, (_, args, _) in enumerate(AS_WRITTEN) if args],
                         ids=lambda i: f"{i}-{AS_WRITTEN[i][0]}")  # fmt: skip
def test_each_mistake_recomputes_the_weights_a_learner_gets(row):
    _, (q, k, v, mask), as_written = AS_WRITTEN[row]
    output, weights = MISTAKES[row].attention(q, k, v, mask)  # a -1e9 fill, as the article's
    expected = as_written(q, k, mask)
    torch.testing.assert_close(weights, expected, equal_nan=True)
    torch.testing.assert_close(output, expected @ v, equal_nan=True)


def test_the_rows_that_need_more_than_the_tensors():
    sizes = {"B": 2, "H": 3, "L_q": 5, "L_k": 6, "d_k": 4, "d_v": 7}
    inputs = Inputs(Q4, K4, PAD, 0.5, sizes | {"d_model": 12}, -1e9)
    torch.testing.assert_close(find("scale_d_model").recompute(inputs), softmax(s(Q4, K4, 12**0.5), PAD))  # fmt: skip
    additive = Inputs(Q4, K4, PAD, 0.5, sizes, -1e9, additive=True)  # PAD read from mask == 0
    torch.testing.assert_close(find("additive_mask_as_keep").recompute(additive), softmax(s(Q4, K4), ~PAD))  # fmt: skip
    assert find("mask_inverted").recompute(additive) is None
    assert find("dropout_on").recompute(inputs) is None


@pytest.mark.parametrize("code", ["mask_inverted", "scale_heads", "transpose_1_2", "dropout_on"])
def test_where_a_mistake_does_not_apply_it_is_the_right_attention(code):
    right = attn_lib.scaled_dot_product_attention(Q3, K3, V3)  # no mask, 3-D
    for got, want in zip(find(code).attention(Q3, K3, V3), right, strict=True):
        torch.testing.assert_close(got, want)


def test_where_the_mistaken_code_raises_so_does_the_recomputation():
    with pytest.raises(ValueError):  # H = 3, L_k = 6: query @ key.transpose(1, 2) raises
        find("transpose_1_2").attention(Q4, K4, V4)


@pytest.mark.parametrize("fill", FILLS)
def test_the_fill_decides_only_the_rows_with_no_key(fill):
    _, weights = find("mask_inverted").attention(Q3, K3, V3, EMPTY, fill_value=fill)
    blank = ~(~EMPTY).any(dim=-1)  # rows whose keys the inverted mask blocks: row 0 everywhere
    want = {None: 0.0, -1e9: 1 / 3, -math.inf: math.nan}[fill]
    torch.testing.assert_close(weights[blank], torch.full_like(weights[blank], want), equal_nan=True)  # fmt: skip


def test_explain_names_the_sizes_or_their_symbols_and_the_nan_of_a_minus_inf_fill():
    m = find("scale_d_k")
    assert m.explain().startswith("softmax(Q Kᵀ / d_k): ÷d_k instead of ÷√d_k. Dividing")
    assert m.explain({"d_k": 64}).startswith("softmax(Q Kᵀ / 64)")
    assert find("mask_inverted").explain(fill=-math.inf).endswith("came out NaN.")
