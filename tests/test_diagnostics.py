"""attn_lib.diagnostics.diagnose: every finding fires on a crafted bad tensor, none on good ones."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch

import attn_lib
from attn_lib.diagnostics import CODES, LEVELS, MISTAKES, Diagnosis, Finding, diagnose

G = torch.Generator().manual_seed(0)


def randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=G)


B, L, D = 2, 4, 8
Q, K, V = randn(B, L, D), randn(B, L, D), randn(B, L, D)
CAUSAL = attn_lib.causal_mask(L)
PAD = attn_lib.padding_mask([4, 3])  # (B, 1, L): no row loses every key
W_RIGHT = attn_lib.scaled_dot_product_attention(Q, K, V)[1]
W_CAUSAL = attn_lib.scaled_dot_product_attention(Q, K, V, CAUSAL)[1]
W_PAD = attn_lib.scaled_dot_product_attention(Q, K, V, PAD)[1]


def softmax_scores(q: torch.Tensor, k: torch.Tensor, divisor: float, dim: int = -1) -> torch.Tensor:
    return torch.softmax(q @ k.transpose(-2, -1) / divisor, dim=dim)


def good_cases() -> dict[str, dict]:
    q2, k2, v2 = randn(3, 6), randn(5, 6), randn(5, 7)
    qx, kx, vx = randn(2, 3, 8), randn(2, 5, 8), randn(2, 5, 6)
    q4, k4, v4 = randn(2, 3, 5, 4), randn(2, 3, 5, 4), randn(2, 3, 5, 6)
    q64, k64, v64 = randn(2, 6, 64), randn(2, 6, 64), randn(2, 6, 64)
    return {
        "3-D self-attention with weights": {"query": Q, "key": K, "value": V, "weights": W_RIGHT},
        "causal mask and weights": {
            "query": Q,
            "key": K,
            "value": V,
            "mask": CAUSAL,
            "weights": W_CAUSAL,
        },
        "padding mask and weights": {
            "query": Q,
            "key": K,
            "value": V,
            "mask": PAD,
            "weights": W_PAD,
        },
        "cross-attention with weights": {
            "query": qx,
            "key": kx,
            "value": vx,
            "weights": attn_lib.scaled_dot_product_attention(qx, kx, vx)[1],
        },
        "2-D, no batch dim": {"query": q2, "key": k2, "value": v2},
        "4-D heads with weights": {
            "query": q4,
            "key": k4,
            "value": v4,
            "weights": attn_lib.scaled_dot_product_attention(q4, k4, v4)[1],
        },
        "the default scale given explicitly": {
            "query": Q,
            "key": K,
            "value": V,
            "scale": 1 / math.sqrt(D),
        },
        "d_k = 64 with weights": {
            "query": q64,
            "key": k64,
            "value": v64,
            "weights": attn_lib.scaled_dot_product_attention(q64, k64, v64)[1],
        },
        "float16 inputs": {
            "query": Q.half(),
            "key": K.half(),
            "value": V.half(),
            "weights": attn_lib.scaled_dot_product_attention(Q.half(), K.half(), V.half())[1],
        },
        "an integer 0/1 keep-mask": {"query": Q, "key": K, "value": V, "mask": CAUSAL.int()},
    }


GOOD = good_cases()


@pytest.mark.parametrize("name", list(GOOD))
def test_good_tensors_have_no_problem(name):
    diagnosis = diagnose(**GOOD[name])
    assert diagnosis.ok, str(diagnosis)
    assert bool(diagnosis)
    assert diagnosis.has("shapes") and diagnosis.has("finite")
    for code in ("transpose_trap", "overflow_risk", "weights_mismatch"):
        assert not diagnosis.has(code), str(diagnosis)
    if "weights" in GOOD[name]:
        assert diagnosis.has("row_sums_ok") and diagnosis.has("weights_match")
        assert diagnosis.has("scale_ok")


def _dropout_weights() -> torch.Tensor:
    torch.manual_seed(0)
    return attn_lib.scaled_dot_product_attention(Q, K, V, dropout_p=0.3, training=True)[1]


def _uniform_masked_rows() -> tuple[torch.Tensor, torch.Tensor]:
    pad = attn_lib.padding_mask([4, 2])
    pad_qk = pad & pad.mT  # (B, L, L): padded queries have no allowed key
    return pad_qk, attn_lib.scaled_dot_product_attention(Q, K, V, pad_qk, fill_value=-1e9)[1]


def _other_weights() -> torch.Tensor:
    q_other = randn(B, L, D)
    return softmax_scores(q_other, K, math.sqrt(D))


def _weights(scores: torch.Tensor) -> torch.Tensor:
    return torch.softmax(scores, dim=-1)


def _fill(keep: torch.Tensor, fill: float, divisor: float = math.sqrt(D)) -> torch.Tensor:
    """The article's masked softmax of Q Kᵀ / divisor: masked_fill(keep == 0, fill)."""
    return _weights((Q @ K.mT / divisor).masked_fill(keep == 0, fill))


PAD_QK, W_UNIFORM = _uniform_masked_rows()
Q64, K64, V64 = randn(2, 6, 64), randn(2, 6, 64), randn(2, 6, 64)
H4, H4K = randn(2, 4, 4, 4), randn(2, 4, 4, 4)  # H = L = d_k = 4
Q3, K3 = randn(3, 3, 3), randn(3, 3, 3)  # B = L = d_k = 3: key.T fits

# code → a bad input that must trigger it
BAD: dict[str, Callable[[], dict]] = {
    "not_tensor": lambda: {"query": Q.tolist(), "key": K, "value": V},
    "dtype": lambda: {"query": torch.ones(B, L, D, dtype=torch.long), "key": K, "value": V},
    "dtype_mismatch": lambda: {"query": Q, "key": K.double(), "value": V},
    "rank": lambda: {"query": randn(D), "key": K, "value": V},
    "rank_mismatch": lambda: {"query": Q[0], "key": K, "value": V},
    "d_k_mismatch": lambda: {"query": Q, "key": K.transpose(-2, -1), "value": V},
    "L_k_mismatch": lambda: {"query": Q, "key": K, "value": randn(B, 3, D)},
    "batch_mismatch": lambda: {"query": Q, "key": randn(3, L, D), "value": randn(3, L, D)},
    "transpose_trap": lambda: {"query": H4, "key": H4, "value": H4},
    "nonfinite": lambda: {
        "query": Q.clone().index_put_((torch.tensor(0),), torch.tensor(float("nan"))),
        "key": K,
        "value": V,
    },
    "scale_invalid": lambda: {"query": Q, "key": K, "value": V, "scale": -1.0},
    "scale_multiplier": lambda: {"query": Q, "key": K, "value": V, "scale": math.sqrt(D)},
    "overflow_risk": lambda: {"query": Q * 100, "key": K * 100, "value": V},
    "mask_type": lambda: {"query": Q, "key": K, "value": V, "mask": [[1, 0]]},
    "mask_float": lambda: {"query": Q, "key": K, "value": V, "mask": CAUSAL.float()},
    "mask_values": lambda: {"query": Q, "key": K, "value": V, "mask": CAUSAL.long() * 2},
    "mask_shape": lambda: {"query": Q, "key": K, "value": V, "mask": PAD[:, 0, :]},
    "mask_ambiguous": lambda: {
        "query": randn(4, 4, D),
        "key": randn(4, 4, D),
        "value": randn(4, 4, D),
        "mask": attn_lib.padding_mask([4, 3, 3, 1])[:, 0, :],
    },
    "mask_all_blocked": lambda: {
        "query": Q,
        "key": K,
        "value": V,
        "mask": torch.zeros(L, L, dtype=torch.bool),
    },
    "mask_inverted": lambda: {"query": Q, "key": K, "value": V, "mask": ~CAUSAL},
    "mask_future": lambda: {"query": Q, "key": K, "value": V, "mask": CAUSAL.mT},
    "fully_masked_rows": lambda: {"query": Q, "key": K, "value": V, "mask": PAD_QK},
    "weights_type": lambda: {"query": Q, "key": K, "value": V, "weights": W_RIGHT.tolist()},
    "weights_shape": lambda: {"query": Q, "key": K, "value": V, "weights": W_RIGHT[..., :3]},
    "weights_negative": lambda: {"query": Q, "key": K, "value": V, "weights": Q @ K.mT},
    "row_sums": lambda: {"query": Q, "key": K, "value": V, "weights": W_RIGHT * 0.5},
    "softmax_dim": lambda: {
        "query": Q,
        "key": K,
        "value": V,
        "weights": softmax_scores(Q, K, math.sqrt(D), dim=-2),
    },
    "dropout_active": lambda: {"query": Q, "key": K, "value": V, "weights": _dropout_weights()},
    "masked_row_uniform": lambda: {
        "query": Q,
        "key": K,
        "value": V,
        "mask": PAD_QK,
        "weights": W_UNIFORM,
    },
    # weights masked with another mask than the one given: no single mistake explains them
    "masked_weight": lambda: {"query": Q, "key": K, "value": V, "mask": CAUSAL, "weights": W_PAD},
    "scores_transposed": lambda: {
        "query": Q,
        "key": K,
        "value": V,
        "weights": softmax_scores(K, Q, math.sqrt(D)),
    },
    "weights_mismatch": lambda: {"query": Q, "key": K, "value": V, "weights": _other_weights()},
    "device_mismatch": lambda: {"query": Q, "key": K.to("meta"), "value": V},
    "not_checked": lambda: {"query": Q.to("meta"), "key": K.to("meta"), "value": V.to("meta")},
    "empty": lambda: {"query": randn(0, L, D), "key": randn(0, L, D), "value": randn(0, L, D)},
    "mask_nan": lambda: {"query": Q, "key": K, "value": V, "mask": torch.full((L, L), math.nan)},
    "key_transpose_1_2": lambda: {"query": H4, "key": H4K, "value": H4, "weights": _weights(
        H4 @ H4K.transpose(1, 2) / 2)},
    "key_reshape": lambda: {"query": Q, "key": K, "value": V, "weights": _weights(
        Q @ K.reshape(B, D, L) / math.sqrt(D))},
    "key_dot_T": lambda: {"query": Q3, "key": K3, "value": Q3, "weights": _weights(
        Q3 @ K3.permute(2, 1, 0) / math.sqrt(3))},
    "mask_not_applied": lambda: {"query": Q, "key": K, "value": V, "mask": CAUSAL,
                                 "weights": W_RIGHT},
    "weights_mask_inverted": lambda: {"query": Q, "key": K, "value": V, "mask": PAD,
                                      "weights": _fill(~PAD, -1e9)},
    "additive_mask_as_keep": lambda: {"query": Q, "key": K, "value": V,
                                      "mask": attn_lib.to_additive(PAD),
                                      "weights": _fill(~PAD, -1e9)},
    "fill_zero": lambda: {"query": Q, "key": K, "value": V, "mask": CAUSAL,
                          "weights": _fill(CAUSAL, 0.0)},
    "masked_row_nan": lambda: {"query": Q, "key": K, "value": V, "mask": PAD_QK,
                               "weights": _fill(PAD_QK, -math.inf)},
    "scale_flat": lambda: {
        "query": Q64,
        "key": K64,
        "value": V64,
        "weights": softmax_scores(Q64, K64, 64),
    },
    "scale_sharp": lambda: {
        "query": Q64,
        "key": K64,
        "value": V64,
        "weights": softmax_scores(Q64, K64, 1),
    },
}

PROBLEM_CODES = [code for code, level in CODES.items() if level in ("error", "warning")]


def test_every_code_has_a_level_and_every_problem_a_trigger():
    assert set(CODES.values()) <= set(LEVELS)
    untested = set(CODES) - set(BAD) - {"shapes", "finite", "mask_coverage", "row_sums_ok",
                                         "weights_match", "scale_ok"}  # fmt: skip
    assert not untested, f"no bad input triggers {sorted(untested)}"


@pytest.mark.parametrize("code", list(BAD))
def test_each_finding_fires_on_its_bad_input(code):
    diagnosis = diagnose(**BAD[code]())
    assert diagnosis.has(code), f"{code} not found in:\n{diagnosis}"
    finding = diagnosis.get(code)
    assert finding.level == CODES[code]
    assert len(finding.message) > 40  # a sentence, not a bare code
    if CODES[code] in ("error", "warning"):
        assert not diagnosis.ok and not bool(diagnosis)


@pytest.mark.parametrize("code", PROBLEM_CODES)
def test_each_problem_is_silent_on_every_good_input(code):
    for name, kwargs in GOOD.items():
        assert not diagnose(**kwargs).has(code), f"{code} fired on the good case {name!r}"


@pytest.mark.parametrize(
    ("code", "words"),
    [
        ("d_k_mismatch", "transposed already"),
        ("mask_shape", "unsqueeze(1)"),
        ("mask_inverted", "diagonal"),
        ("dropout_active", "model.eval()"),
        ("softmax_dim", "dim=-1"),
        ("scale_flat", "÷d_k"),
        ("scale_sharp", "no scaling"),
        ("masked_row_uniform", "-1e9"),
        ("mask_float", "bool()"),
        ("scale_multiplier", "MULTIPLIES"),
    ],
)
def test_messages_name_the_cause_and_the_fix(code, words):
    assert words in diagnose(**BAD[code]()).get(code).message


def test_other_triggers_of_the_same_codes():
    # .T on a batched key reverses every dim
    assert "`.T`" in diagnose(Q, K.permute(2, 1, 0), V).get("d_k_mismatch").message
    # heads and positions swapped in one tensor
    q4 = randn(2, 3, 5, 4)
    found = diagnose(q4, q4.transpose(1, 2), q4)
    assert "heads and positions swapped" in found.get("batch_mismatch").message
    # a batch_first mix-up in 3-D
    assert "batch_first" in diagnose(Q, K.transpose(0, 1), V).get("batch_mismatch").message
    # an additive 0/-inf mask, and NaN weights
    additive = diagnose(Q, K, V, mask=attn_lib.to_additive(CAUSAL))
    assert "additive" in additive.get("mask_float").message
    nan_w = attn_lib.scaled_dot_product_attention(Q, K, V, PAD_QK, fill_value=float("-inf"))[1]
    assert "rows are affected" in diagnose(Q, K, V, PAD_QK, nan_w.mT).get("nonfinite").message
    # a mask that blocks most pairs without touching the diagonal
    mostly = torch.eye(L, dtype=torch.bool)
    assert "most" in diagnose(Q, K, V, mask=mostly).get("mask_inverted").message
    # a (B, L, 1) mask blanks whole query rows
    rows = diagnose(Q, K, V, mask=PAD.mT)
    assert "unsqueeze(-1)" in rows.get("fully_masked_rows").message
    # the flatness of a scale given without weights
    assert diagnose(Q64, K64, V64, scale=1 / 64).has("scale_flat")
    assert diagnose(Q64, K64, V64, scale=1.0).has("scale_sharp")
    # a 4-D decoding step with one cached key
    one = diagnose(randn(1, 3, 1, 3), randn(1, 3, 1, 3), randn(1, 3, 1, 5))
    assert "weights @ value" in one.get("transpose_trap").message


def test_dropout_without_a_reference_is_recognised_by_its_zeros():
    # key of the wrong width: no reference softmax can be computed, only the weights' pattern
    found = diagnose(Q, randn(B, L, 5), V, weights=_dropout_weights())
    assert found.has("dropout_active") and found.has("d_k_mismatch")


@pytest.mark.parametrize(
    "args",
    [
        (None, None, None),
        (1, 2, 3),
        ("q", "k", "v"),
        (torch.tensor(1.0), torch.tensor(2.0), torch.tensor(3.0)),
        (torch.empty(0, 4), torch.empty(0, 4), torch.empty(0, 4)),
        (randn(2, 3, 4, 5, 6), randn(2, 3, 4, 5, 6), randn(2, 3, 4, 5, 6)),
    ],
)
def test_never_raises_on_garbage(args):
    diagnosis = diagnose(*args, mask=object(), weights="w", scale="s")
    assert isinstance(diagnosis, Diagnosis)
    assert not diagnosis.ok
    assert str(diagnosis)


def test_report_text_and_display(capsys):
    diagnosis = diagnose(**BAD["softmax_dim"]())
    text = str(diagnosis)
    assert text.splitlines()[0].startswith("Attention diagnosis: 1 error")
    assert "ERROR   [softmax_dim]" in text
    levels = [f.level for f in diagnosis.findings]
    assert levels == sorted(levels, key=LEVELS.index)  # errors first
    diagnosis.report()
    assert capsys.readouterr().out.strip() == text

    class Printer:
        def __init__(self) -> None:
            self.out = ""

        def text(self, s: str) -> None:
            self.out += s

    printer = Printer()
    diagnosis._repr_pretty_(printer, cycle=False)
    assert printer.out == text
    assert repr(diagnosis) == "Diagnosis(softmax_dim)"
    assert all(len(line) <= 92 for line in text.splitlines())


def test_finding_refuses_an_unknown_level():
    with pytest.raises(ValueError, match="level"):
        Finding("fatal", "x", "message")


def test_sizes_are_read_off_the_shapes():
    assert diagnose(randn(2, 3, 5, 4), randn(2, 3, 6, 4), randn(2, 3, 6, 7)).sizes == {
        "B": 2, "H": 3, "L_q": 5, "L_k": 6, "d_k": 4, "d_v": 7}  # fmt: skip
    assert diagnose(randn(5, 4), randn(6, 4), randn(6, 7)).sizes == {
        "L_q": 5, "L_k": 6, "d_k": 4, "d_v": 7}  # fmt: skip
    assert diagnose(Q, randn(B, L, 5), V).sizes is None


def test_diagnose_does_not_touch_its_inputs_or_the_rng():
    q, k, v, w = Q.clone(), K.clone(), V.clone(), W_RIGHT.clone()
    state = torch.get_rng_state()
    diagnose(q, k, v, CAUSAL, w)
    assert torch.equal(torch.get_rng_state(), state)
    for a, b in ((q, Q), (k, K), (v, V), (w, W_RIGHT)):
        assert torch.equal(a, b)


def test_tensors_that_require_grad_are_fine():
    q = Q.clone().requires_grad_()
    diagnosis = diagnose(q, K, V, weights=softmax_scores(q, K, math.sqrt(D)))
    assert diagnosis.ok and diagnosis.has("weights_match")
    assert q.grad is None


# --- defects found by adversarial testing, each as a regression test ----------------------


def _problems(diagnosis: Diagnosis) -> set[str]:
    return {f.code for f in diagnosis.problems}


def test_a_0d_mask_is_reported_not_raised():
    found = diagnose(Q, K, V, mask=torch.tensor(True))
    assert found.has("mask_shape") and "0-d" in found.get("mask_shape").message


def test_float8_inputs_are_reported_and_their_values_still_checked():
    f8 = torch.float8_e4m3fn
    found = diagnose(Q.to(f8), K.to(f8), V.to(f8), CAUSAL, W_CAUSAL)
    assert _problems(found) == {"dtype"} and "float8" in found.get("dtype").message
    assert found.sizes == {"B": B, "L_q": L, "L_k": L, "d_k": D, "d_v": D}


def test_meta_tensors_get_their_shapes_checked_and_say_the_rest_is_not():
    meta = [t.to("meta") for t in (Q, K, V, CAUSAL, W_CAUSAL)]
    found = diagnose(*meta)
    assert _problems(found) == {"not_checked"} and found.sizes["d_k"] == D
    assert "query, key, value, mask and weights are on the meta device" in str(found)


def test_weights_from_a_reshaped_key_are_named():
    w = _weights(Q @ K.reshape(B, D, L) / math.sqrt(D))  # a view, not a transpose
    assert _problems(diagnose(Q, K, V, weights=w)) == {"key_reshape"}


def test_weights_from_transpose_1_2_on_4d_are_named_where_the_shapes_fit():
    w = _weights(H4 @ H4K.transpose(1, 2) / 2)  # H = L = d_k = 4: runs without an error
    found = diagnose(H4, H4K, H4, weights=w)
    assert _problems(found) == {"key_transpose_1_2"} and found.has("transpose_trap")


def test_a_fill_of_0_is_named_and_not_blamed_on_the_scale():
    found = diagnose(Q, K, V, CAUSAL, _fill(CAUSAL, 0.0))
    assert _problems(found) == {"fill_zero"}
    assert "masked_fill(mask == 0, 0)" in found.get("fill_zero").message


def test_a_masked_softmax_over_the_queries_is_named_as_such():
    for mask in (CAUSAL, PAD):  # PAD leaves whole key columns blocked: named from the sums
        w = _weights((Q @ K.mT / math.sqrt(D)).masked_fill(mask == 0, -1e9).mT).mT
        assert _problems(diagnose(Q, K, V, mask, w)) == {"softmax_dim"}, mask.shape


def test_an_empty_batch_is_reported_as_empty_not_as_masked():
    q = randn(0, L, D)
    found = diagnose(q, q, q, CAUSAL, torch.empty(0, L, L))
    assert _problems(found) == {"empty"} and "B = 0" in found.get("empty").message
    assert "L_k = 0" in diagnose(randn(3, D), randn(0, D), randn(0, D)).get("empty").message


def test_a_float_mask_is_reported_as_float_and_nan_in_it_by_name():
    found = diagnose(Q, K, V, mask=torch.full((L, L), math.nan))
    assert _problems(found) == {"mask_nan"} and not found.has("mask_coverage")
    assert "NaN" in found.get("mask_nan").message
    for mask in (CAUSAL.float(), attn_lib.to_additive(CAUSAL), torch.rand(L, L)):
        assert "refuses float masks" in diagnose(Q, K, V, mask=mask).get("mask_float").message


def test_a_tensor_scale_is_refused_as_attn_lib_refuses_it():
    found = diagnose(Q, K, V, weights=W_RIGHT, scale=torch.tensor(1 / math.sqrt(D)))
    assert _problems(found) == {"scale_invalid"} and found.has("weights_match")
    assert "Python number" in found.get("scale_invalid").message


def _sdpa_weights(q, k, mask=None, **kwargs) -> torch.Tensor:
    return attn_lib.scaled_dot_product_attention(q, k, k, mask, **kwargs)[1]


Q43, K43, V43 = randn(2, 3, 5, 4), randn(2, 3, 5, 4), randn(2, 3, 5, 6)  # H = 3, L = 5, d_k = 4

# Each mistake, built as a learner builds it → the one problem diagnose must report.
MISTAKE_CASES = {
    "÷d_k": ((Q, K, V, None, _weights(Q @ K.mT / D)), "scale_flat", "÷d_k"),
    "no scaling": ((Q, K, V, None, _weights(Q @ K.mT)), "scale_sharp", "no scaling"),
    "×√d_k": ((Q, K, V, None, _weights(Q @ K.mT * math.sqrt(D))), "scale_sharp", "√d_k"),
    "÷√d_model": ((Q, K, V, None, _weights(Q @ K.mT / math.sqrt(32))), "scale_flat", "d_model"),
    "÷√d_v": ((Q43, K43, V43, None, _weights(Q43 @ K43.mT / math.sqrt(6))), "scale_flat", "d_v"),
    "÷√L_k": ((Q43, K43, V43, None, _weights(Q43 @ K43.mT / math.sqrt(5))), "scale_flat", "L_k"),
    "÷√H": ((Q43, K43, V43, None, _weights(Q43 @ K43.mT / math.sqrt(3))), "scale_sharp", "√H"),
    "softmax dim=1 on 3-D": (
        (Q, K, V, None, softmax_scores(Q, K, math.sqrt(D), dim=1)), "softmax_dim", "dim=-2"),
    "softmax over the heads": (
        (Q43, K43, V43, None, softmax_scores(Q43, K43, 2, dim=1)), "softmax_dim", "heads"),
    "softmax over the batch": (
        (Q, K, V, None, softmax_scores(Q, K, math.sqrt(D), dim=0)), "softmax_dim", "batch"),
    "K Qᵀ": ((Q, K, V, CAUSAL, _sdpa_weights(K, Q, CAUSAL)), "scores_transposed", "K Qᵀ"),
    "key.reshape": (
        (Q, K, V, CAUSAL, _weights((Q @ K.reshape(B, D, L) / 8**0.5).masked_fill(~CAUSAL, -1e9))),
        "key_reshape", "reshape"),
    "key.transpose(1, 2) on 4-D": (
        (H4, H4K, H4, None, _weights(H4 @ H4K.transpose(1, 2) / 2)), "key_transpose_1_2",
        "transpose(1, 2)"),
    "key.T on a batch": (
        (Q3, K3, Q3, None, _weights(Q3 @ K3.permute(2, 1, 0) / math.sqrt(3))), "key_dot_T", ".T"),
    "mask not applied": ((Q, K, V, PAD, W_RIGHT), "mask_not_applied", "not in place"),
    "inverted mask, attn_lib's zero rows": (
        (Q, K, V, CAUSAL, _sdpa_weights(Q, K, ~CAUSAL)), "weights_mask_inverted", "~mask"),
    "inverted mask, a -1e9 fill": (
        (Q, K, V, CAUSAL, _fill(~CAUSAL, -1e9)), "weights_mask_inverted", "~mask"),
    "additive mask as keep-mask": (
        (Q, K, V, attn_lib.to_additive(CAUSAL), _fill(~CAUSAL, -1e9)), "additive_mask_as_keep",
        "scores + mask"),
    "fill 0 on padding": ((Q, K, V, PAD, _fill(PAD, 0.0)), "fill_zero", "fill of 0"),
    "-1e9 fill on empty rows": ((Q, K, V, PAD_QK, W_UNIFORM), "masked_row_uniform", "uniform"),
    "-inf fill on empty rows": (
        (Q, K, V, PAD_QK, _fill(PAD_QK, -math.inf)), "masked_row_nan", "NaN"),
    "dropout left on": ((Q, K, V, CAUSAL, None), "dropout_active", "model.eval()"),
    "÷d_k in float16": (
        (Q.half(), K.half(), V.half(), CAUSAL, _fill(CAUSAL, -1e4, D).half()), "scale_flat", "÷d_k"),
}


@pytest.mark.parametrize("name", list(MISTAKE_CASES))
def test_each_mistake_is_named_and_nothing_else_is_blamed(name):
    (q, k, v, mask, w), code, words = MISTAKE_CASES[name]
    if name == "dropout left on":
        torch.manual_seed(1)
        w = attn_lib.scaled_dot_product_attention(q, k, v, mask, dropout_p=0.25, training=True)[1]
    found = diagnose(q, k, v, mask, w)
    mask_codes = {"mask_float", "mask_inverted", "fully_masked_rows"}  # about the mask itself
    assert _problems(found) - mask_codes == {code}, str(found)
    assert words in found.get(code).message, found.get(code).message


def test_every_mistake_in_the_table_is_exercised():
    names = {m.code for m in MISTAKES} - {"scale"}
    assert names <= {code for _, code, _ in MISTAKE_CASES.values()}
    assert {"scale_flat", "scale_sharp"} <= {code for _, code, _ in MISTAKE_CASES.values()}


def test_a_scale_given_alone_is_named_by_the_table():
    assert "÷d_k" in diagnose(Q64, K64, V64, scale=1 / 64).get("scale_flat").message
    assert diagnose(Q, K, V, scale=1 / math.sqrt(D)).has("scale_ok")
    assert diagnose(Q64, K64, V64, scale=0.01).has("scale_flat")


# --- property test: never raises, whatever the learner passes -----------------------------

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.float8_e4m3fn,
          torch.float8_e5m2, torch.int64, torch.int32, torch.uint8, torch.bool,
          torch.complex64]  # fmt: skip


def _random_tensor(rng: torch.Generator, shape: tuple[int, ...], pick, dtype=None) -> torch.Tensor:
    dtype = dtype or pick(DTYPES)
    x = torch.randn(shape, generator=rng) * pick([1.0, 1.0, 100.0])
    if x.numel() and pick([False, False, True]):
        x.view(-1)[int(torch.randint(x.numel(), (1,), generator=rng))] = pick(
            [math.nan, math.inf, -math.inf])
    if dtype == torch.bool:
        x = x > 0
    elif dtype.is_complex:
        x = torch.complex(x, x)
    elif not dtype.is_floating_point:
        x = torch.nan_to_num(x).clamp(-3, 3).round().abs()
    x = x.to(dtype)
    return x.to("meta") if pick([False] * 9 + [True]) else x


def _random_case(seed: int) -> dict:
    rng = torch.Generator().manual_seed(seed)

    def pick(options):
        return options[int(torch.randint(len(options), (1,), generator=rng))]

    rank = pick([0, 1, 2, 2, 3, 3, 3, 4, 4, 5])
    base = [pick([0, 1, 2, 3, 4]) if pick([True] * 5 + [False]) else 0 for _ in range(rank)]
    base = [d or pick([0, 1, 2]) for d in base]

    def shape():  # the base shape, sometimes with one dim changed or a dim dropped
        s = list(base)
        if s and pick([False, False, True]):
            s[pick(range(len(s)))] = pick([0, 1, 2, 3, 5])
        if s and pick([False] * 5 + [True]):
            s.pop()
        return tuple(s)

    def maybe(make):
        return pick([None, make, make])

    dtype = pick([None, torch.float32, torch.float64, torch.float16])  # None: one each
    q = _random_tensor(rng, shape(), pick, dtype)
    kv = pick([None, q])  # self-attention with the very same tensor, sometimes
    k = kv if kv is not None else _random_tensor(rng, shape(), pick, dtype)
    v = _random_tensor(rng, shape(), pick, dtype)
    scores = (*base[:-1], base[-2]) if rank >= 2 else tuple(base)
    mask_shape = pick([scores, scores[-2:], tuple(1 if pick([True, False]) else d for d in scores),
                       shape(), ()])  # fmt: skip
    mask = maybe(_random_tensor(rng, mask_shape, pick))
    if mask is not None and pick([False] * 4 + [True]):
        additive = mask if mask.is_complex() else torch.where(mask.float() != 0, 0.0, -math.inf)
        mask = pick([[1, 0], "mask", torch.full(mask_shape, math.nan), additive])
    w = maybe(_random_tensor(rng, pick([scores, shape()]), pick, dtype))
    if w is not None and pick([True, False]) and w.is_floating_point() and w.dim():
        w = torch.softmax(w.float(), dim=-1).to(w.dtype) if w.device.type != "meta" else w
    scale = pick([None, None, 0.5, 1, -1.0, math.nan, math.inf, True, "s", torch.tensor(0.3),
                  torch.tensor([0.3, 0.4]), 1e308])  # fmt: skip
    return {"query": q, "key": k, "value": v, "mask": mask, "weights": w, "scale": scale}


def _fitting_case(seed: int) -> dict:
    """Shapes that fit, so that the weights reach the recomputed mistakes: odd values."""
    rng = torch.Generator().manual_seed(seed)

    def pick(options):
        return options[int(torch.randint(len(options), (1,), generator=rng))]

    lead = [pick([1, 2, 3]) for _ in range(pick([0, 1, 2]))]
    L_q, L_k, d_k = pick([1, 2, 4]), pick([1, 2, 4]), pick([1, 2, 4])
    dtype = pick([torch.float32, torch.float64, torch.float16, torch.bfloat16])
    q, k, v = (torch.randn(*lead, n, d, generator=rng).to(dtype) * pick([0.01, 1.0, 30.0])
               for n, d in ((L_q, d_k), (L_k, d_k), (L_k, pick([1, 3]))))  # fmt: skip
    scores = (*lead, L_q, L_k)
    mask = pick([None, torch.rand(scores, generator=rng) > pick([0.2, 0.5, 0.9, 1.0])])
    if mask is not None and pick([True, False]):
        mask = mask[..., :1, :] if pick([True, False]) else mask.to(pick(DTYPES))
    raw = torch.randn(scores, generator=rng)
    if isinstance(mask, torch.Tensor) and mask.dtype == torch.bool:
        raw = raw.masked_fill(~mask, pick([0.0, -1e9, -math.inf]))
    w = torch.softmax(raw, dim=pick([-1, -1, -2, 0])).to(dtype)
    w = pick([w, w * pick([0.0, 2.0, math.nan]), w.mT, w[..., :1]])
    return {"query": q, "key": k, "value": v, "mask": mask, "weights": w,
            "scale": pick([None, 1.0, 0.1, d_k**-0.5])}  # fmt: skip


@pytest.mark.parametrize("chunk", range(4))
def test_never_raises_on_random_tensors(chunk):
    for seed in range(chunk * 150, (chunk + 1) * 150):
        kwargs = _random_case(seed) if seed % 2 else _fitting_case(seed)
        try:
            diagnosis = diagnose(**kwargs)
            text = str(diagnosis)
        except Exception as err:  # pragma: no cover - the failure message is the point
            shown = {n: (t.shape, t.dtype, t.device) if isinstance(t, torch.Tensor) else t
                     for n, t in kwargs.items()}  # fmt: skip
            raise AssertionError(f"seed {seed}: {shown}") from err
        assert isinstance(diagnosis, Diagnosis) and text.startswith("Attention diagnosis")
        assert set(diagnosis.codes) <= set(CODES)


def test_diagnose_is_part_of_the_top_level_contract():
    import attn_lib

    assert attn_lib.diagnose is diagnose and "diagnose" in attn_lib.__all__
