"""attn_lib against nn.MultiheadAttention (num_heads=1) and F.scaled_dot_product_attention.

Weights first, then outputs after out_proj; the three mask conventions computed explicitly
with PyTorch's own functions; and the article's mistake: without out_proj the outputs
differ by order 1.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attn_lib import (
    SingleHeadAttention,
    causal_mask,
    combine_masks,
    padding_mask,
    scaled_dot_product_attention,
)
from attn_lib.masks import to_additive, to_key_padding_mask, to_multihead_attn_mask, to_sdpa_mask
from attn_lib.reference import (
    AlignmentReport,
    apply_out_proj,
    compare_with_multihead_attention,
    compare_with_sdpa,
    from_multihead_attention,
)

E = 8
B, L = 3, 5
LENGTHS = [5, 3, 1]


def make_mha(bias: bool, seed: int = 0, dtype=torch.float32, **kw) -> nn.MultiheadAttention:
    torch.manual_seed(seed)
    mha = nn.MultiheadAttention(
        embed_dim=E, num_heads=kw.pop("num_heads", 1), bias=bias, batch_first=True, **kw
    ).to(dtype)
    if bias:  # PyTorch initialises the biases to 0; make them count
        with torch.no_grad():
            mha.in_proj_bias.normal_()
            mha.out_proj.bias.normal_()
    return mha.eval()


def make_x(seed: int = 1, dtype=torch.float32, shape=(B, L, E)) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)


def keep_mask(kind: str) -> torch.Tensor:
    """Keep-masks in which every query row keeps at least one key (key 0)."""
    if kind == "padding":
        return padding_mask(LENGTHS, max_len=L)  # (B, 1, L)
    if kind == "causal":
        return causal_mask(L)  # (L, L)
    if kind == "combined":
        return combine_masks(padding_mask(LENGTHS, max_len=L), causal_mask(L))  # (B, L, L)
    if kind == "per_example":
        g = torch.Generator().manual_seed(2)
        m = torch.rand(B, L, L, generator=g) < 0.5
        m[..., 0] = True
        return m  # (B, L, L)
    raise AssertionError(kind)


MASK_KINDS = ["padding", "causal", "combined", "per_example"]


# --- loading the projections ------------------------------------------------------------------


@pytest.mark.parametrize("bias", [False, True])
def test_from_multihead_attention_copies_the_projections(bias):
    mha = make_mha(bias)
    module = from_multihead_attention(mha)
    assert isinstance(module, SingleHeadAttention)
    assert (module.d_model, module.d_k, module.d_v) == (E, E, E)
    for i, lin in enumerate((module.W_Q, module.W_K, module.W_V)):
        torch.testing.assert_close(lin.weight, mha.in_proj_weight[i * E : (i + 1) * E])
        if bias:
            torch.testing.assert_close(lin.bias, mha.in_proj_bias[i * E : (i + 1) * E])
        else:
            assert lin.bias is None
    assert not module.training  # follows mha's mode
    # a copy, not a view: training one does not move the other
    with torch.no_grad():
        module.W_Q.weight.add_(1.0)
    assert not torch.allclose(module.W_Q.weight, mha.in_proj_weight[:E])


def test_from_multihead_attention_keeps_dtype_and_mode():
    mha = make_mha(False, dtype=torch.float64).train()
    module = from_multihead_attention(mha)
    assert module.W_Q.weight.dtype == torch.float64
    assert module.training


# --- weights, then outputs after out_proj -----------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("bias", [False, True])
def test_weights_then_outputs_after_out_proj(bias, dtype):
    for seed in (0, 1, 2):
        mha = make_mha(bias, seed=seed, dtype=dtype)
        module = from_multihead_attention(mha)
        x = make_x(seed + 10, dtype)
        with torch.no_grad():
            out, weights = module(x, return_attn=True)
            ref_out, ref_weights = mha(x, x, x, need_weights=True)
        assert weights.shape == ref_weights.shape == (B, L, L)
        torch.testing.assert_close(weights, ref_weights)  # weights first
        torch.testing.assert_close(apply_out_proj(mha, out), ref_out)  # then outputs after out_proj
        # apply_out_proj is the Linear itself
        torch.testing.assert_close(apply_out_proj(mha, out), mha.out_proj(out))

        report = compare_with_multihead_attention(module, mha, x)
        assert isinstance(report, AlignmentReport)
        tol = 10 * torch.finfo(dtype).eps
        assert report.weights_max_abs_diff < tol
        assert report.output_max_abs_diff < tol * (1 + ref_out.abs().max().item())
        assert (report.rows_compared, report.fully_masked_rows) == (B * L, 0)
        assert "max |Δ|" in str(report)


@pytest.mark.parametrize("bias", [False, True])
def test_without_out_proj_outputs_differ_by_order_one(bias):
    # The article's mistake: comparing the single-head output with MHA's output directly.
    mha = make_mha(bias, seed=3)
    module = from_multihead_attention(mha)
    x = make_x(4)
    with torch.no_grad():
        out = module(x)
        ref_out, _ = mha(x, x, x)
    assert (out - ref_out).abs().max().item() > 0.1
    torch.testing.assert_close(apply_out_proj(mha, out), ref_out)


def test_compare_restores_training_modes():
    mha = make_mha(False).train()
    module = from_multihead_attention(mha)
    report = compare_with_multihead_attention(module, mha, make_x())
    assert module.training and mha.training
    assert report.weights_max_abs_diff < 1e-5  # dropout=0 anyway; eval inside


# --- the mask conventions, explicitly -----------------------------------------------------------


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("kind", MASK_KINDS)
def test_mask_conventions_agree(kind, bias):
    mha = make_mha(bias, seed=5)
    module = from_multihead_attention(mha)
    x = make_x(6)
    keep = keep_mask(kind)
    full = keep.expand(B, L, L) if keep.dim() == 3 else keep.unsqueeze(0).expand(B, L, L)
    assert full.any(-1).all()  # every row keeps a key

    with torch.no_grad():
        # attn_lib: keep-mask, True = may attend
        out, weights = module(x, keep, return_attn=True)
        out_proj = apply_out_proj(mha, out)

        # nn.MultiheadAttention attn_mask, True = blocked
        mha_mask = to_multihead_attn_mask(full)
        assert mha_mask.dtype == torch.bool and mha_mask.shape == (B, L, L)
        assert torch.equal(mha_mask, ~full)
        ref_out, ref_w = mha(x, x, x, attn_mask=mha_mask, need_weights=True)
        torch.testing.assert_close(weights, ref_w)
        torch.testing.assert_close(out_proj, ref_out)

        # nn.MultiheadAttention with a float (additive) attn_mask
        ref_out, ref_w = mha(x, x, x, attn_mask=to_additive(full, x.dtype), need_weights=True)
        torch.testing.assert_close(weights, ref_w)
        torch.testing.assert_close(out_proj, ref_out)

        # F.scaled_dot_product_attention, bool (True = takes part) and additive (-inf)
        q, k, v = module.W_Q(x), module.W_K(x), module.W_V(x)
        sdpa_bool = to_sdpa_mask(keep)
        assert sdpa_bool.dtype == torch.bool and torch.equal(sdpa_bool, keep)
        torch.testing.assert_close(
            out, F.scaled_dot_product_attention(q, k, v, attn_mask=sdpa_bool)
        )
        additive = to_additive(keep, q.dtype)
        torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=additive))

        # the functional attn_lib call on the same projections
        out_fn, w_fn = scaled_dot_product_attention(q, k, v, keep)
        torch.testing.assert_close(out, out_fn)
        torch.testing.assert_close(weights, w_fn)

    report = compare_with_multihead_attention(module, mha, x, keep)
    assert report.weights_max_abs_diff < 1e-5 and report.output_max_abs_diff < 1e-5
    assert report.fully_masked_rows == 0


@pytest.mark.parametrize("bias", [False, True])
def test_key_padding_mask_convention(bias):
    mha = make_mha(bias, seed=7)
    module = from_multihead_attention(mha)
    x = make_x(8)
    pad = padding_mask(LENGTHS, max_len=L)  # (B, 1, L) keep
    kpm = to_key_padding_mask(pad)
    assert kpm.shape == (B, L) and kpm.dtype == torch.bool
    assert torch.equal(kpm, torch.arange(L)[None, :] >= torch.tensor(LENGTHS)[:, None])
    with torch.no_grad():
        out, weights = module(x, pad, return_attn=True)
        ref_out, ref_w = mha(x, x, x, key_padding_mask=kpm, need_weights=True)
        torch.testing.assert_close(weights, ref_w)
        torch.testing.assert_close(apply_out_proj(mha, out), ref_out)

        # padding as key_padding_mask, causal as attn_mask == the combined keep-mask
        combined = combine_masks(pad, causal_mask(L))
        out, weights = module(x, combined, return_attn=True)
        ref_out, ref_w = mha(
            x,
            x,
            x,
            key_padding_mask=kpm,
            attn_mask=to_multihead_attn_mask(causal_mask(L)),
            need_weights=True,
        )
        torch.testing.assert_close(weights, ref_w)
        torch.testing.assert_close(apply_out_proj(mha, out), ref_out)

    report = compare_with_multihead_attention(module, mha, x, pad, use_key_padding_mask=True)
    assert report.weights_max_abs_diff < 1e-5 and report.output_max_abs_diff < 1e-5


def test_padding_mask_expanded_for_multihead_with_L_q():
    mha = make_mha(False, seed=9)
    module = from_multihead_attention(mha)
    x = make_x(10)
    pad = padding_mask(LENGTHS, max_len=L)
    mha_mask = to_multihead_attn_mask(pad, L_q=L)
    assert mha_mask.shape == (B, L, L)
    with torch.no_grad():
        out, weights = module(x, pad, return_attn=True)
        ref_out, ref_w = mha(x, x, x, attn_mask=mha_mask, need_weights=True)
    torch.testing.assert_close(weights, ref_w)
    torch.testing.assert_close(apply_out_proj(mha, out), ref_out)


def test_multihead_mask_head_order_for_two_heads():
    # MHA reads a 3-D attn_mask as (B * num_heads, L_q, L_k), batch-major.
    mha = make_mha(False, seed=11, num_heads=2)
    x = make_x(12)
    keep = keep_mask("per_example")
    mha_mask = to_multihead_attn_mask(keep, num_heads=2)
    assert mha_mask.shape == (2 * B, L, L)
    with torch.no_grad():
        batched, _ = mha(x, x, x, attn_mask=mha_mask)
        for b in range(B):
            one, _ = mha(x[b : b + 1], x[b : b + 1], x[b : b + 1], attn_mask=~keep[b])
            torch.testing.assert_close(batched[b : b + 1], one)


# --- fully masked rows in the reports ----------------------------------------------------------


def test_reports_with_a_fully_masked_row():
    mha = make_mha(False, seed=13)
    module = from_multihead_attention(mha)
    x = make_x(14)
    keep = keep_mask("per_example").clone()
    keep[1, 2, :] = False  # one query row with no allowed key
    report = compare_with_multihead_attention(module, mha, x, keep)
    assert (report.rows_compared, report.fully_masked_rows) == (B * L - 1, 1)
    assert report.weights_max_abs_diff < 1e-5 and report.output_max_abs_diff < 1e-5

    q, k, v = (lin(x).detach() for lin in (module.W_Q, module.W_K, module.W_V))
    sdpa_report = compare_with_sdpa(q, k, v, keep)
    assert sdpa_report.weights_max_abs_diff is None
    assert (sdpa_report.rows_compared, sdpa_report.fully_masked_rows) == (B * L, 1)
    assert sdpa_report.output_max_abs_diff < 1e-5
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    torch.testing.assert_close(ref[1, 2], torch.zeros(E), rtol=0, atol=0)


@pytest.mark.parametrize("scale", [None, 1.0, 0.2])
@pytest.mark.parametrize("rank", [2, 3, 4])
def test_compare_with_sdpa(rank, scale):
    g = torch.Generator().manual_seed(rank)
    batch = [(), (2,), (2, 3)][rank - 2]
    q = torch.randn(*batch, 4, 6, generator=g)
    k = torch.randn(*batch, 7, 6, generator=g)
    v = torch.randn(*batch, 7, 5, generator=g)
    mask = causal_mask(4, 7)
    for m in (None, mask):
        report = compare_with_sdpa(q, k, v, m, scale=scale)
        assert report.output_max_abs_diff < 1e-5
        assert report.rows_compared == q.shape[:-1].numel()
        out, _ = scaled_dot_product_attention(q, k, v, m, scale=scale)
        torch.testing.assert_close(
            out, F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=scale)
        )


# --- every mask attention accepts, at every length (L = 1 included) ------------------------------


def _masks_for(B_: int, L_: int) -> dict[str, torch.Tensor]:
    """Keep-masks that check_mask accepts for (B, L, L) scores, none blocking everything."""
    lengths = [max(1, L_ - b) for b in range(B_)]
    pad = padding_mask(lengths, max_len=L_)  # (B, 1, L)
    return {
        "causal (L, L)": causal_mask(L_),
        "padding (B, 1, L)": pad,
        "padding shared (1, 1, L)": pad[:1],
        "one key row (1, L)": pad[0],
        "per query (L, 1)": torch.ones(L_, 1, dtype=torch.bool),
        "combined (B, L, L)": combine_masks(pad, causal_mask(L_)),
        "shared (1, L, L)": causal_mask(L_).unsqueeze(0),
    }


PADDING_KINDS = ("padding (B, 1, L)", "padding shared (1, 1, L)", "one key row (1, L)")


@pytest.mark.parametrize("L_", [1, 2, 4])
@pytest.mark.parametrize("B_", [1, 2])
def test_compare_with_multihead_attention_takes_every_valid_mask(B_, L_):
    mha = nn.MultiheadAttention(4, 1, batch_first=True)
    module = from_multihead_attention(mha)
    x = torch.randn(B_, L_, 4, generator=torch.Generator().manual_seed(L_))
    for name, keep in _masks_for(B_, L_).items():
        for as_kpm in (False, True) if name in PADDING_KINDS else (False,):
            report = compare_with_multihead_attention(
                module, mha, x, keep, use_key_padding_mask=as_kpm
            )
            assert report.output_max_abs_diff < 1e-5, (name, as_kpm)
            assert report.weights_max_abs_diff < 1e-5, (name, as_kpm)


def test_compare_with_multihead_attention_at_length_one():
    # The adversarial example: a (2, 1, 1) padding mask was refused, asking for L_q=.
    mha = nn.MultiheadAttention(4, 1, batch_first=True)
    x = torch.randn(2, 1, 4)
    for keep in (padding_mask([1, 1]), causal_mask(1)):
        report = compare_with_multihead_attention(from_multihead_attention(mha), mha, x, keep)
        assert report.rows_compared == 2 and report.output_max_abs_diff < 1e-6


def test_compare_with_multihead_attention_errors_name_only_its_own_arguments():
    mha = nn.MultiheadAttention(4, 1, batch_first=True)
    module = from_multihead_attention(mha)
    x = torch.randn(2, 3, 4)
    bad = {
        "per-query mask as key padding": (
            combine_masks(padding_mask([3, 2]), causal_mask(3)),
            True,
        ),
        "causal as key padding": (causal_mask(3), True),
        "wrong length": (padding_mask([4, 2]), False),
        "float mask": (torch.ones(2, 1, 3), False),
        "blocks everything": (torch.zeros(2, 1, 3, dtype=torch.bool), False),
    }
    for name, (keep, as_kpm) in bad.items():
        with pytest.raises(ValueError) as info:
            compare_with_multihead_attention(module, mha, x, keep, use_key_padding_mask=as_kpm)
        message = str(info.value)
        for foreign in ("L_q=", "L_k=", "B=", "num_heads="):
            assert foreign not in message, (name, message)
        if as_kpm:
            assert "use_key_padding_mask=False" in message, name


def test_compare_with_multihead_attention_meta_tensors():
    mha = nn.MultiheadAttention(4, 1, batch_first=True)
    module = from_multihead_attention(mha)
    with pytest.raises(ValueError, match="x is on the meta device"):
        compare_with_multihead_attention(module, mha, torch.randn(2, 3, 4, device="meta"))
    with pytest.raises(ValueError, match="mha.in_proj_weight is on the meta device"):
        compare_with_multihead_attention(module, mha.to("meta"), torch.randn(2, 3, 4))


def test_compare_with_sdpa_meta_mask():
    q = torch.randn(2, 3, 4)
    with pytest.raises(ValueError, match="mask is on the meta device"):
        compare_with_sdpa(q, q, q, torch.ones(3, 3, dtype=torch.bool, device="meta"))
