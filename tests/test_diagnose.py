"""attn_lib.diagnose: every finding fires on a crafted bad input, none on good ones; each
mistake of the table is named from the weights it gives; it never raises."""

from __future__ import annotations

import math

import pytest
import torch

import attn_lib
from attn_lib.diagnose import CODES, LEVELS, Diagnosis, diagnose

G = torch.Generator().manual_seed(0)


def randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=G)


B, L, D = 2, 4, 8
Q, K, V = randn(B, L, D), randn(B, L, D), randn(B, L, D)
CAUSAL = attn_lib.causal_mask(L)
PAD = attn_lib.padding_mask([4, 3])  # (B, 1, L): no row loses every key
PAD_QK = PAD & PAD.mT  # (B, L, L): with lengths [4, 2] below, padded queries have no key
W_RIGHT = attn_lib.scaled_dot_product_attention(Q, K, V)[1]
W_CAUSAL = attn_lib.scaled_dot_product_attention(Q, K, V, CAUSAL)[1]
Q64, K64, V64 = randn(2, 6, 64), randn(2, 6, 64), randn(2, 6, 64)
H4, H4K = randn(2, 4, 4, 4), randn(2, 4, 4, 4)  # H = L = d_k = 4
Q3, K3 = randn(3, 3, 3), randn(3, 3, 3)  # B = L = d_k = 3: key.T fits
Q43, K43, V43 = randn(2, 3, 5, 4), randn(2, 3, 5, 4), randn(2, 3, 5, 6)  # H 3, L 5, d_k 4
EMPTY_ROWS = attn_lib.padding_mask([4, 2]) & attn_lib.padding_mask([4, 2]).mT  # 2 rows, no key


def softmax(scores: torch.Tensor, dim: int = -1) -> torch.Tensor:
    return torch.softmax(scores, dim=dim)


def fill(keep: torch.Tensor, value: float, divisor: float = math.sqrt(D)) -> torch.Tensor:
    """The article's masked softmax of Q Kᵀ / divisor: masked_fill(keep == 0, value)."""
    return softmax((Q @ K.mT / divisor).masked_fill(keep == 0, value))


def sdpa_weights(q, k, mask=None, **kwargs) -> torch.Tensor:
    return attn_lib.scaled_dot_product_attention(q, k, k, mask, **kwargs)[1]


def case(query=Q, key=K, value=V, **more) -> dict:
    """diagnose's arguments: the module's Q, K, V unless given."""
    return {"query": query, "key": key, "value": value, **more}


def problems(diagnosis: Diagnosis) -> set[str]:
    return {f.code for f in diagnosis.problems}


GOOD = {
    "3-D with weights": case(weights=W_RIGHT),
    "causal mask and weights": case(mask=CAUSAL, weights=W_CAUSAL),
    "padding mask and weights": case(mask=PAD,
                                     weights=sdpa_weights(Q, K, PAD)),
    "2-D cross-attention": case(randn(3, 6), key=randn(5, 6), value=randn(5, 7)),
    "4-D heads with weights": case(Q43, key=K43, value=V43, weights=sdpa_weights(Q43, K43)),
    "the default scale given": case(scale=1 / math.sqrt(D)),
    "float16 with weights": case(Q.half(), key=K.half(), value=V.half(),
                                 weights=sdpa_weights(Q.half(), K.half())),
    "an integer 0/1 mask": case(mask=CAUSAL.int()),
}  # fmt: skip


@pytest.mark.parametrize("name", list(GOOD))
def test_good_tensors_have_no_problem(name):
    diagnosis = diagnose(**GOOD[name])
    assert diagnosis.ok and bool(diagnosis), str(diagnosis)
    assert diagnosis.has("weights_match") == ("weights" in GOOD[name])


def dropout_weights(mask=None) -> torch.Tensor:
    torch.manual_seed(1)
    return attn_lib.scaled_dot_product_attention(Q, K, V, mask, dropout_p=0.25, training=True)[1]


# code → a bad input that must trigger it (and, for a mistake, nothing else but the mask's own)
BAD = {
    "not_tensor": case(Q.tolist(), key=K, value=V),
    "dtype": case(torch.ones(B, L, D, dtype=torch.long), key=K, value=V),
    "rank": case(randn(D), key=K, value=V),
    "d_k_mismatch": case(Q, key=K.mT, value=V),
    "L_k_mismatch": case(Q, key=K, value=randn(B, 3, D)),
    "batch_mismatch": case(Q, key=randn(3, L, D), value=randn(3, L, D)),
    "empty": case(randn(0, L, D), key=randn(0, L, D), value=randn(0, L, D)),
    "transpose_trap": case(H4, key=H4, value=H4),
    "nonfinite": case(Q.clone().index_put_((torch.tensor(0),), torch.tensor(math.nan)),
                      key=K, value=V),
    "device_mismatch": case(Q, key=K.to("meta"), value=V),
    "not_checked": case(Q.to("meta"), key=K.to("meta"), value=V.to("meta")),
    "scale_invalid": case(scale=-1.0),
    "mask_type": case(mask=[[1, 0]]),
    "mask_values": case(mask=CAUSAL.long() * 2),
    "mask_float": case(mask=CAUSAL.float()),
    "mask_nan": case(mask=torch.full((L, L), math.nan)),
    "mask_shape": case(mask=PAD[:, 0, :]),
    "mask_ambiguous": case(randn(4, 4, D), key=randn(4, 4, D), value=randn(4, 4, D),
                           mask=attn_lib.padding_mask([4, 3, 3, 1])[:, 0, :]),
    "mask_all_blocked": case(mask=torch.zeros(L, L, dtype=torch.bool)),
    "mask_future": case(mask=CAUSAL.mT),
    "fully_masked_rows": case(mask=EMPTY_ROWS),
    "weights_type": case(weights=W_RIGHT.tolist()),
    "weights_shape": case(weights=W_RIGHT[..., :3]),
    "weights_negative": case(weights=Q @ K.mT),
    "row_sums": case(weights=W_RIGHT * 0.5),
    # weights masked with another mask than the one given: no single mistake explains them
    "masked_weight": case(mask=CAUSAL, weights=sdpa_weights(Q, K, PAD)),
    "weights_mismatch": case(weights=softmax(randn(B, L, D) @ K.mT)),
    "scale_flat": case(Q64, key=K64, value=V64, weights=softmax(Q64 @ K64.mT / 50)),
    "scale_sharp": case(Q64, key=K64, value=V64, weights=softmax(Q64 @ K64.mT / 2)),
    # the mistakes of the table, built as a learner builds them
    "scale_d_k": case(weights=softmax(Q @ K.mT / D)),
    "no_scale": case(weights=softmax(Q @ K.mT)),
    "scale_multiplied": case(weights=softmax(Q @ K.mT * math.sqrt(D))),
    "scale_d_model": case(weights=softmax(Q @ K.mT / math.sqrt(32))),
    "scale_d_v": case(Q43, key=K43, value=V43, weights=softmax(Q43 @ K43.mT / math.sqrt(6))),
    "scale_length": case(Q43, key=K43, value=V43,
                         weights=softmax(Q43 @ K43.mT / math.sqrt(5))),
    "scale_batch": case(Q43, key=K43, value=V43, weights=softmax(Q43 @ K43.mT / math.sqrt(2))),
    "scale_heads": case(Q43, key=K43, value=V43, weights=softmax(Q43 @ K43.mT / math.sqrt(3))),
    "scale_after_softmax": case(weights=softmax(Q @ K.mT) / math.sqrt(D)),
    "softmax_dim": case(weights=softmax(Q @ K.mT / math.sqrt(D), dim=-2)),
    "no_softmax": case(weights=Q @ K.mT / math.sqrt(D)),
    "reshape_not_transpose": case(mask=CAUSAL, weights=softmax(
        (Q @ K.reshape(B, D, L) / math.sqrt(D)).masked_fill(~CAUSAL, -1e9))),
    "transpose_1_2": case(H4, key=H4K, value=H4, weights=softmax(H4 @ H4K.transpose(1, 2) / 2)),
    "dot_T": case(Q3, key=K3, value=Q3, weights=softmax(Q3 @ K3.permute(2, 1, 0) / math.sqrt(3))),
    "scores_transposed": case(mask=CAUSAL,
                              weights=sdpa_weights(K, Q, CAUSAL)),
    "mask_not_applied": case(mask=PAD, weights=W_RIGHT),
    "mask_inverted": case(mask=PAD, weights=fill(~PAD, -1e9)),
    "additive_mask_as_keep": case(mask=attn_lib.to_additive(PAD),
                                  weights=fill(~PAD, -1e9)),
    "mask_transposed": case(mask=CAUSAL, weights=fill(CAUSAL.mT, -1e9)),
    "mask_fill_zero": case(mask=CAUSAL, weights=fill(CAUSAL, 0.0)),
    "mask_after_softmax": case(mask=CAUSAL, weights=W_RIGHT * CAUSAL),
    "uniform_rows": case(mask=EMPTY_ROWS, weights=fill(EMPTY_ROWS, -1e9)),
    "nan_rows": case(mask=EMPTY_ROWS, weights=fill(EMPTY_ROWS, -math.inf)),
    "dropout_on": case(mask=CAUSAL, weights=dropout_weights(CAUSAL)),
}  # fmt: skip
MASK_CODES = {"mask_float", "mask_inverted", "fully_masked_rows"}  # about the mask itself


def test_every_code_has_a_level_and_a_trigger():
    assert set(CODES.values()) <= set(LEVELS)
    assert set(CODES) - set(BAD) == {"weights_match"}  # found on every good input with weights
    assert set(WORDS) <= set(BAD)


# What the message must say besides a sentence: the cause, or the fix (other codes: any sentence).
WORDS = {
    "d_k_mismatch": "transposed already",
    "mask_shape": "unsqueeze(1)",
    "mask_float": "mask.bool()",
    "transpose_trap": "transpose(-2, -1)",
    "scale_d_k": "÷d_k",
    "no_scale": "not scaled",
    "scale_multiplied": "MULTIPLIES",
    "scale_d_model": "d_model",
    "scale_length": "÷√L",
    "scale_heads": "√H",
    "softmax_dim": "dim=-2",
    "reshape_not_transpose": "reshape",
    "transpose_1_2": "transpose(1, 2)",
    "dot_T": ".T",
    "scores_transposed": "K Qᵀ",
    "mask_not_applied": "not in place",
    "mask_inverted": "True = may attend",
    "additive_mask_as_keep": "add it to the scores",
    "mask_fill_zero": "exp(0) = 1",
    "uniform_rows": "-1e9",
    "nan_rows": "NaN",
    "dropout_on": "model.eval()",
}


@pytest.mark.parametrize("code", list(BAD))
def test_each_finding_fires_on_its_bad_input_and_names_cause_or_fix(code):
    diagnosis = diagnose(**BAD[code])
    assert diagnosis.has(code), f"{code} not found in:\n{diagnosis}"
    assert diagnosis.get(code).level == CODES[code]
    message = diagnosis.get(code).message
    assert len(message) > 40 and WORDS.get(code, "") in message, message
    if CODES[code] != "info":
        assert not diagnosis.ok
    if "weights" in BAD[code] and code not in ("weights_type", "masked_weight"):
        assert problems(diagnosis) - (MASK_CODES - {code}) == {code}, str(diagnosis)


def test_other_triggers_of_the_same_codes():
    assert "diagonal" in diagnose(Q, K, V, mask=~CAUSAL).get("mask_inverted").message
    mostly_blocked = diagnose(Q, K, V, mask=torch.eye(L, dtype=torch.bool))
    assert "%" in mostly_blocked.get("mask_inverted").message
    additive = diagnose(Q, K, V, mask=attn_lib.to_additive(CAUSAL))
    assert "additive" in additive.get("mask_float").message
    assert "(…, L_q, 1)" in diagnose(Q, K, V, mask=PAD.mT).get("fully_masked_rows").message
    one = diagnose(randn(1, 3, 1, 3), randn(1, 3, 1, 3), randn(1, 3, 1, 5))  # decoding, H = d_k
    assert "weights @ value" in one.get("transpose_trap").message
    # the same mistakes, seen in other ways
    assert diagnose(Q, K, V, CAUSAL, fill(~CAUSAL, -math.inf)).has("mask_inverted")  # NaN rows
    assert diagnose(Q, K, V, CAUSAL, sdpa_weights(Q, K, ~CAUSAL)).has("mask_inverted")  # zero rows
    assert diagnose(Q43, K43, V43, weights=softmax(Q43 @ K43.mT / 2, dim=1)).has("softmax_dim")
    assert diagnose(Q, K, V, weights=softmax(Q @ K.mT / math.sqrt(D), dim=0)).has("softmax_dim")
    half = fill(CAUSAL, -1e4, D).half()  # ÷d_k in float16
    assert problems(diagnose(Q.half(), K.half(), V.half(), CAUSAL, half)) == {"scale_d_k"}
    dropped = diagnose(Q, K, V, weights=dropout_weights())
    assert problems(dropped) == {"dropout_on"} and "1/(1 − p)" in str(dropped)


def test_a_scale_given_alone_is_named_by_the_table():
    assert "÷d_k" in diagnose(Q64, K64, V64, scale=1 / 64).get("scale_d_k").message
    assert diagnose(Q, K, V, scale=math.sqrt(D)).has("scale_multiplied")
    assert diagnose(Q, K, V, scale=1.0).has("no_scale")
    assert diagnose(Q64, K64, V64, scale=0.01).has("scale_flat")
    assert diagnose(Q64, K64, V64, scale=0.9).has("scale_sharp")


# --- defects found by adversarial testing, each a regression test ------------------------


def test_a_0d_mask_is_reported_not_raised():
    found = diagnose(Q, K, V, mask=torch.tensor(True))
    assert problems(found) == {"mask_shape"} and "0-D" in found.get("mask_shape").message


def test_float8_inputs_are_reported_and_their_values_still_checked():
    f8 = torch.float8_e4m3fn
    found = diagnose(Q.to(f8), K.to(f8), V.to(f8), CAUSAL, W_CAUSAL)
    assert problems(found) == {"dtype"} and "float8" in found.get("dtype").message
    assert found.sizes == {"B": B, "L_q": L, "L_k": L, "d_k": D, "d_v": D}


def test_meta_tensors_get_their_shapes_checked_and_say_the_rest_is_not():
    found = diagnose(*(t.to("meta") for t in (Q, K, V, CAUSAL, W_CAUSAL)))
    assert problems(found) == {"not_checked"} and found.sizes["d_k"] == D
    assert "query, key, value, mask, weights are on the meta device" in str(found)


def test_weights_from_a_reshaped_key_are_named():
    w = softmax(Q @ K.reshape(B, D, L) / math.sqrt(D))  # a view, not a transpose
    assert problems(diagnose(Q, K, V, weights=w)) == {"reshape_not_transpose"}


def test_weights_from_transpose_1_2_on_4d_are_named_where_the_shapes_fit():
    found = diagnose(**BAD["transpose_1_2"])  # H = L = d_k = 4: runs without an error
    assert problems(found) == {"transpose_1_2"} and found.has("transpose_trap")


def test_a_fill_of_0_is_named_and_not_blamed_on_the_scale():
    found = diagnose(Q, K, V, CAUSAL, fill(CAUSAL, 0.0))
    assert problems(found) == {"mask_fill_zero"}
    assert "masked_fill(mask == 0, 0)" in found.get("mask_fill_zero").message


def test_a_masked_softmax_over_the_queries_is_named_as_such():
    for mask in (CAUSAL, PAD):  # PAD leaves a whole key column blocked: uniform with -1e9
        w = softmax((Q @ K.mT / math.sqrt(D)).masked_fill(mask == 0, -1e9), dim=-2)
        assert problems(diagnose(Q, K, V, mask, w)) == {"softmax_dim"}, mask.shape


def test_an_empty_batch_is_reported_as_empty_not_as_masked():
    q = randn(0, L, D)
    found = diagnose(q, q, q, CAUSAL, torch.empty(0, L, L))
    assert problems(found) == {"empty"} and "B = 0" in found.get("empty").message
    assert "L_k is 0" in diagnose(randn(3, D), randn(0, D), randn(0, D)).get("empty").message


def test_a_float_mask_is_reported_as_float_and_nan_in_it_by_name():
    found = diagnose(Q, K, V, mask=torch.full((L, L), math.nan))
    assert problems(found) == {"mask_nan"} and "NaN" in found.get("mask_nan").message
    for mask in (CAUSAL.float(), attn_lib.to_additive(CAUSAL), torch.rand(L, L)):
        assert "float mask is refused" in diagnose(Q, K, V, mask=mask).get("mask_float").message


def test_a_tensor_scale_is_refused_as_attn_lib_refuses_it():
    found = diagnose(Q, K, V, weights=W_RIGHT, scale=torch.tensor(1 / math.sqrt(D)))
    assert problems(found) == {"scale_invalid"} and found.has("weights_match")
    assert "Python number" in found.get("scale_invalid").message


# --- the report, the contract ---------------------------------------------------------------


def test_report_text_and_display(capsys):
    diagnosis = diagnose(**BAD["softmax_dim"])
    text = str(diagnosis)
    assert text.splitlines()[0] == "Attention diagnosis: 1 error"
    assert text.splitlines()[1].startswith("ERROR   [softmax_dim] weights equal softmax(scores")
    assert all(len(line) <= 92 for line in text.splitlines())
    diagnosis.report()
    assert capsys.readouterr().out.strip() == text
    assert repr(diagnosis) == "Diagnosis(softmax_dim)"
    levels = [f.level for f in diagnose(Q, K, V, mask=~CAUSAL).findings]
    assert levels == sorted(levels, key=LEVELS.index)  # errors first


def test_sizes_are_read_off_the_shapes():
    assert diagnose(Q43, K43, randn(2, 3, 5, 7)).sizes == {
        "B": 2, "H": 3, "L_q": 5, "L_k": 5, "d_k": 4, "d_v": 7}  # fmt: skip
    assert diagnose(randn(5, 4), randn(6, 4), randn(6, 7)).sizes == {
        "L_q": 5, "L_k": 6, "d_k": 4, "d_v": 7}  # fmt: skip
    assert diagnose(Q, randn(B, L, 5), V).sizes is None


def test_diagnose_leaves_its_inputs_the_rng_and_autograd_alone():
    q = Q.clone().requires_grad_()
    w = softmax(q @ K.mT / math.sqrt(D))
    state = torch.get_rng_state()
    assert diagnose(q, K, V, CAUSAL, w).has("mask_not_applied")
    assert torch.equal(torch.get_rng_state(), state) and torch.equal(q.detach(), Q)
    assert q.grad is None and attn_lib.diagnose is diagnose and "diagnose" in attn_lib.__all__


# --- never raises, whatever the learner passes ----------------------------------------------

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.float8_e4m3fn,
          torch.int64, torch.uint8, torch.bool, torch.complex64]  # fmt: skip


@pytest.mark.parametrize(
    "args",
    [
        (None, None, None),
        ("q", "k", "v"),
        (torch.tensor(1.0), torch.tensor(2.0), torch.tensor(3.0)),
        (randn(2, 3, 4, 5, 6), randn(2, 3, 4, 5, 6), randn(2, 3, 4, 5, 6)),
    ],
)
def test_never_raises_on_garbage(args):
    diagnosis = diagnose(*args, mask=object(), weights="w", scale="s")
    assert not diagnosis.ok and str(diagnosis)


def _random_case(rng: torch.Generator) -> dict:
    """Shapes that mostly fit, odd dtypes, devices, values, masks, weights and scales."""

    def pick(options):
        return options[int(torch.randint(len(options), (1,), generator=rng))]

    def tensor(shape, dtype):
        x = torch.randn(shape, generator=rng) * pick([0.01, 1.0, 100.0])
        if x.numel() and pick([False, False, True]):
            x.view(-1)[0] = pick([math.nan, math.inf])
        if dtype.is_complex:
            x = torch.complex(x, x)
        elif not dtype.is_floating_point:
            x = x > 0 if dtype == torch.bool else x.nan_to_num().clamp(0, 2).round()
        return x.to("meta" if pick([False] * 9 + [True]) else "cpu", dtype)

    lead = [pick([0, 1, 2, 3]) for _ in range(pick([0, 1, 2, 3]))]
    L_q, L_k, d_k = pick([1, 2, 4]), pick([1, 2, 4]), pick([1, 2, 4])
    dtype = pick(DTYPES[:4] * 3 + DTYPES)
    shapes = [(*lead, L_q, d_k), (*lead, L_k, d_k), (*lead, L_k, pick([1, 3]))]
    if pick([False, False, True]):
        shapes[pick([0, 1, 2])] = pick([(), (3,), (*lead, 5, 2), (2, 2, 2, 2, 2)])
    q, k, v = (tensor(s, dtype) for s in shapes)
    scores = (*lead, L_q, L_k)
    mask = pick([None, tensor(pick([scores, scores[-2:], (*lead[:1], L_k), ()]), pick(DTYPES))])
    w = torch.rand(scores, generator=rng)
    w = pick([None, w.softmax(dim=pick([-1, -2, 0])), w.mT, w[..., :1], w * math.nan, "w"])
    scale = pick([None, None, 0.5, 1, -1.0, math.nan, True, "s", torch.tensor(0.3), 1e308])
    return case(q, k, v, mask=mask, weights=w, scale=scale)


def test_never_raises_on_random_tensors():
    rng = torch.Generator().manual_seed(0)
    for seed in range(60):
        kwargs = _random_case(rng)
        try:
            text = str(diagnosis := diagnose(**kwargs))
        except Exception as err:  # pragma: no cover - the failure message is the point
            shown = {n: (t.shape, t.dtype, t.device) if isinstance(t, torch.Tensor) else t
                     for n, t in kwargs.items()}  # fmt: skip
            raise AssertionError(f"case {seed}: {shown}") from err
        assert text.startswith("Attention diagnosis") and set(diagnosis.codes) <= set(CODES)
