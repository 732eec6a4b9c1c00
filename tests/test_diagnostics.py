"""attn_lib.diagnostics.diagnose: every finding fires on a crafted bad tensor, none on good ones."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch

import attn_lib
from attn_lib.diagnostics import CODES, LEVELS, Diagnosis, Finding, diagnose

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


PAD_QK, W_UNIFORM = _uniform_masked_rows()
Q64, K64, V64 = randn(2, 6, 64), randn(2, 6, 64), randn(2, 6, 64)
H4 = randn(2, 4, 4, 4)

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
    "masked_weight": lambda: {"query": Q, "key": K, "value": V, "mask": CAUSAL, "weights": W_RIGHT},
    "scores_transposed": lambda: {
        "query": Q,
        "key": K,
        "value": V,
        "weights": softmax_scores(K, Q, math.sqrt(D)),
    },
    "weights_mismatch": lambda: {"query": Q, "key": K, "value": V, "weights": _other_weights()},
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
    assert "rows are affected" in diagnose(Q, K, V, PAD_QK, nan_w).get("nonfinite").message
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
