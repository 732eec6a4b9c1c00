"""Notebook 11, "The article, checked": each claim re-checked in a line, and the interview quiz.

Used by notebook 11: section 1 (``recheck_claims``: a small computation per claim of the
article that the table's verdict rests on; the experiments themselves live in notebooks
01–10) and section 3 (``QUESTIONS``, ``check_quiz``, ``show_answers``). Torch only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..attention import SingleHeadAttention, scaled_dot_product_attention
from ..masks import causal_mask
from ..softmax import naive_softmax, softmax_jacobian, stable_softmax
from ._checking import attempted, mark_attempted
from ._experiments import _generator

__all__ = ["QUESTIONS", "Question", "Recheck", "check_quiz", "recheck_claims", "show_answers"]


@dataclass(frozen=True)
class Recheck:
    """One claim's computation: its row in notebook 11's table, what was measured, and
    whether the measurement is what the verdict says."""

    row: int
    measured: str
    holds: bool


def _cost_rows() -> list[Recheck]:
    """Rows 1 and 2: the FLOPs of the projections against the L × L part; word order."""
    d_model = d_k = 64
    share = {}
    for L in (64, 96, 256):  # below, at and above 1.5 · d_model
        projections = 3 * 2 * L * d_model * d_k  # Q, K, V: three (L, d_model) @ (d_model, d_k)
        square = 2 * 2 * L * L * d_k  # Q Kᵀ and weights @ V (d_v = d_k)
        share[L] = square / (projections + square)
    module = SingleHeadAttention(d_model, d_k)
    gen = _generator(1)
    x = torch.randn(1, 5, d_model, generator=gen, dtype=torch.float64)
    module = module.double()
    perm = torch.tensor([3, 0, 4, 1, 2])
    with torch.no_grad():
        shuffled = module(x[:, perm])
    same = torch.allclose(shuffled, module(x)[:, perm])
    causal = module(x[:, perm], causal_mask(5))
    broken = not torch.allclose(causal, module(x, causal_mask(5))[:, perm])
    return [
        Recheck(1, f"L x L share of FLOPs at L = 64, 96, 256 (d_model = 64): "
                   f"{share[64]:.0%}, {share[96]:.0%}, {share[256]:.0%}",
                abs(share[96] - 0.5) < 1e-9 and share[64] < 0.5 < share[256]),
        Recheck(2, f"shuffled input -> shuffled output: {same}; with a causal mask: {not broken}",
                same and broken),
    ]  # fmt: skip


def _qkv_rows() -> list[Recheck]:
    """Rows 3, 4, 10, 11: dot vs cosine, nn.Linear's storage and bias, d_k ≠ d_model."""
    x = torch.tensor([3.0, 4.0])
    linear = nn.Linear(8, 4)
    out = SingleHeadAttention(8, 4)(torch.zeros(2, 4, 8))
    return [
        Recheck(3, f"x.x = {x @ x:.1f}, cos(x, x) = {F.cosine_similarity(x, x, dim=0):.1f}",
                (x @ x).item() == 25.0),
        Recheck(4, f"nn.Linear(8, 4).weight.shape = {tuple(linear.weight.shape)}",
                tuple(linear.weight.shape) == (4, 8)),
        Recheck(10, f"d_model = 8, d_k = 4 runs: output {tuple(out.shape)}",
                tuple(out.shape) == (2, 4, 4)),
        Recheck(11, f"nn.Linear(8, 4).bias is None: {linear.bias is None}", linear.bias is not None),
    ]  # fmt: skip


def _scaling_rows() -> list[Recheck]:
    """Rows 5–8: variance of q·k, saturation, overflow, shift invariance."""
    gen, d_k, n = _generator(5), 64, 20_000
    q, k = (torch.randn(n, d_k, generator=gen, dtype=torch.float64) for _ in range(2))
    var = (q * k).sum(-1).var().item()
    x = torch.randn(2, n, d_k, generator=gen, dtype=torch.float64)
    w = (torch.rand(2, d_k, d_k, generator=gen, dtype=torch.float64) * 2 - 1) / math.sqrt(d_k)
    var_init = ((x[0] @ w[0].T) * (x[1] @ w[1].T)).sum(-1).var().item()  # default nn.Linear init
    d_k, L = 512, 16
    q, k = torch.randn(64, 1, d_k, generator=gen), torch.randn(64, L, d_k, generator=gen)
    unscaled = scaled_dot_product_attention(q, k, k, scale=1.0)[1]  # (64, 1, L)
    scaled = scaled_dot_product_attention(q, k, k)[1]
    scores = q @ k.transpose(-2, -1)  # (64, 1, L)
    peak, naive = scores.abs().max().item(), naive_softmax(scores)
    one_hot = (unscaled.amax(-1) > 0.99).float().mean().item()
    jac = [softmax_jacobian(w_).flatten(-2).norm(dim=-1).median().item() for w_ in (unscaled, scaled)]  # fmt: skip
    s = torch.tensor([2.0, -1.0, 0.5])
    shift = (stable_softmax(s + 5.0) - stable_softmax(s)).abs().max().item()
    return [
        Recheck(5, f"Var(q.k) at d_k = 64: {var:.0f} (unit entries), {var_init:.1f} "
                   f"(nn.Linear's default init: d_k/9 = {64 / 9:.1f})",
                abs(var / 64 - 1) < 0.05 and abs(var_init / (64 / 9) - 1) < 0.1),
        Recheck(6, f"unscaled, d_k = 512: share of rows with a weight > 0.99: {one_hot:.1f}; "
                   f"median Jacobian norm below 1/100 of the scaled one: {jac[0] < 1e-2 * jac[1]}",
                one_hot > 0.5 and jac[0] < 1e-2 * jac[1]),
        Recheck(7, f"largest unscaled |score| {peak:.0f} < 88.7 (float32 exp overflow): the "
                   f"naive softmax is finite and equals the stable one",
                peak < 88.7 and torch.allclose(naive, unscaled)),
        Recheck(8, f"max |softmax(s + 5) - softmax(s)| = {shift:.4f}", shift < 1e-6),
    ]  # fmt: skip


def _code_rows() -> list[Recheck]:
    """Rows 12–14: transpose(1, 2), a fill of 0, rows that sum to 1."""
    gen = _generator(12)
    try:
        torch.randn(4, 8, generator=gen).transpose(1, 2)
        raised_2d = False
    except IndexError:
        raised_2d = True
    q, k = (torch.randn(2, 3, 3, 3, generator=gen) for _ in range(2))  # L = H = d_k
    wrong = q @ k.transpose(1, 2)  # (B, H, L, d_k) -> swaps H and L: no error
    right = q @ k.transpose(-2, -1)
    scores = torch.tensor([[1.0, 2.0, 3.0]])
    keep = torch.tensor([[True, True, False]])
    zero_fill = F.softmax(scores.masked_fill(~keep, 0.0), dim=-1)[0, 2].item()
    big_fill = F.softmax(scores.masked_fill(~keep, -1e9), dim=-1)[0, 2].item()
    x = torch.randn(1, 4, 8, generator=gen)
    _, by_d_k = scaled_dot_product_attention(x, x, x, scale=1 / 8)  # the ÷d_k bug
    blocked = torch.tensor([[True] * 4, [False] * 4, [True] * 4, [True] * 4])
    _, weights = scaled_dot_product_attention(x, x, x, blocked)
    sums = weights.sum(-1)[0]
    return [
        Recheck(12, f"transpose(1, 2) on a 2-D K raises: {raised_2d}; on (B, H, L, d_k) with "
                    f"L = H = d_k: no error, wrong scores: {not torch.allclose(wrong, right)}",
                raised_2d and wrong.shape == right.shape and not torch.allclose(wrong, right)),
        Recheck(13, f"weight on the blocked key: fill 0 -> {zero_fill:.4f}, fill -1e9 -> "
                    f"{big_fill:.4f}", zero_fill > 0 and big_fill == 0.0),
        Recheck(14, f"the ÷d_k bug's rows sum to 1: "
                    f"{torch.allclose(by_d_k.sum(-1), torch.ones(1, 4))}; an all-blocked row "
                    f"sums to {sums[1]:.4f} in attn_lib",
                torch.allclose(by_d_k.sum(-1), torch.ones(1, 4)) and sums[1].item() == 0.0),
    ]  # fmt: skip


def _pytorch_rows() -> list[Recheck]:
    """Rows 15–17: the article's check against nn.MultiheadAttention, -1e9, the (B, L) mask."""
    torch.manual_seed(42)
    mha = nn.MultiheadAttention(8, 1, bias=False, batch_first=True).eval()
    module = SingleHeadAttention(8, 8)
    with torch.no_grad():
        for linear, rows in zip((module.W_Q, module.W_K, module.W_V), mha.in_proj_weight.split(8)):
            linear.weight.copy_(rows)
        x = torch.randn(2, 4, 8)
        o_out, o_weights = mha(x, x, x)
        my_out, my_weights = module(x, return_attn=True)
        article_gap = (o_out - my_out).abs().max().item()
        fixed_gap = (mha.out_proj(my_out) - o_out).abs().max().item()
        weight_gap = (o_weights - my_weights).abs().max().item()
    try:
        torch.zeros(2, dtype=torch.float16).masked_fill(torch.tensor([True, False]), -1e9)
        half_ok = True
    except RuntimeError:
        half_ok = False
    none = torch.zeros(1, 4, dtype=torch.bool)
    uniform = F.softmax(torch.randn(1, 4).masked_fill(~none, -1e9), dim=-1)
    B = L = 3
    x = torch.randn(B, L, 8, generator=_generator(17))
    lengths_mask = torch.tensor([[True, True, True], [True, True, False], [True, False, False]])
    right = scaled_dot_product_attention(x, x, x, lengths_mask.unsqueeze(1))[0]  # (B, 1, L)
    silent = scaled_dot_product_attention(x, x, x, lengths_mask)[0]  # read as (L_q, L_k)
    return [
        Recheck(15, f"article's check (outputs): {article_gap:.1f}; weights: below 1e-6: "
                    f"{weight_gap < 1e-6}; after out_proj: below 1e-6: {fixed_gap < 1e-6}",
                article_gap > 0.01 and weight_gap < 1e-6 and fixed_gap < 1e-6),
        Recheck(16, f"-1e9 into float16 accepted: {half_ok}; an all-blocked row with -1e9: "
                    f"{uniform[0, 0]:.4f} each (uniform)",
                not half_ok and torch.allclose(uniform, torch.full((1, 4), 0.25))),
        Recheck(17, f"B = L = 3, mask (B, L) without unsqueeze: no error, outputs differ: "
                    f"{not torch.allclose(right, silent)}", not torch.allclose(right, silent)),
    ]  # fmt: skip


def _numerics_rows() -> list[Recheck]:
    """Rows 19 and 20: overflow and the max trick; dropout after softmax."""
    s = torch.tensor([100.0, 0.0])
    naive, stable = naive_softmax(s), stable_softmax(s)
    torch.manual_seed(20)
    weights = torch.full((10_000, 4), 0.25)  # 10,000 uniform rows over 4 keys
    sums = F.dropout(weights, p=0.5, training=True).sum(-1)  # as the article places it
    return [
        Recheck(19, f"softmax([100, 0]) in float32: naive NaN: {bool(naive.isnan().any())}; "
                    f"max trick: [{stable[0]:.4f}, {stable[1]:.4f}]",
                bool(naive.isnan().any()) and stable[0].item() == 1.0),
        Recheck(20, f"dropout (p = 0.5) after softmax, training: rows summing to 1: "
                    f"{(sums == 1).float().mean():.1f}; their mean: {sums.mean():.1f}",
                (sums == 1).float().mean() < 0.5 and abs(sums.mean().item() - 1) < 0.05),
    ]  # fmt: skip


def recheck_claims() -> list[Recheck]:
    """Every row of notebook 11's table that a small computation can check, in row order.

    Rows 9 and 18 (training) rest on notebook 09's sweep, which takes too long to repeat here.

    Returns:
        Recheck per row; ``holds`` is True when the computation agrees with the verdict.
    """
    rows = _cost_rows() + _qkv_rows() + _scaling_rows() + _code_rows() + _pytorch_rows()
    return sorted(rows + _numerics_rows(), key=lambda r: r.row)


@dataclass(frozen=True)
class Question:
    """An interview question: its options, the right one, and why, with the notebook that shows it."""

    text: str
    options: dict[str, str]
    answer: str
    why: str
    where: str


QUESTIONS = [
    Question("Why divide the scores by √d_k and not by d_k?",
             {"a": "÷√d_k restores Var(q·k) to 1; ÷d_k would shrink it to 1/d_k",
              "b": "÷d_k would overflow in float16",
              "c": "√d_k is cheaper to compute"},
             "a", "The standard deviation of q·k grows as √d_k; dividing by it keeps the "
                  "scores' spread fixed as d_k grows.", "03"),
    Question("Without scaling, what goes wrong first at large d_k?",
             {"a": "exp overflows to inf",
              "b": "rows saturate to near one-hot",
              "c": "nothing: softmax is shift-invariant"},
             "b", "Rows saturate long before exp overflows: above, at d_k = 512 the largest "
                  "unscaled score stays below 88.7 while most rows are near one-hot; F.softmax "
                  "subtracts the row maximum anyway.", "03"),
    Question("Why does a bias on K change no attention weight?",
             {"a": "it adds the same q·b_K to a whole row of scores",
              "b": "nn.Linear initialises biases to zero",
              "c": "the scaling removes it"},
             "a", "q·(k_j + b) = q·k_j + q·b, and q·b does not depend on the key j: softmax "
                  "ignores a constant added to a row.", "02"),
    Question("A query row whose keys are all masked: what do SDPA and nn.MultiheadAttention give?",
             {"a": "a uniform row in both",
              "b": "SDPA a zero row; nn.MultiheadAttention NaN when it returns the weights",
              "c": "NaN in both"},
             "b", "SDPA (since PyTorch 2.5) returns zeros for a row with no allowed key; MHA's "
                  "own path (need_weights=True, its default) fills with -inf and its softmax "
                  "gives NaN. attn_lib follows SDPA.", "06"),
    Question("You mask by filling the scores with 0. What happens?",
             {"a": "the blocked keys keep weight, since e⁰ = 1",
              "b": "it masks as well as -1e9",
              "c": "the row becomes NaN"},
             "a", "Masking needs a fill far below the row's other scores; 0 is an ordinary "
                  "score.", "07"),
    Question("Why can -1e9 go wrong as a fill value?",
             {"a": "it is not small enough in float32",
              "b": "it overflows float16, and an all-blocked row turns uniform",
              "c": "it makes softmax slower"},
             "b", "Take the fill from the dtype (torch.finfo(dtype).min) or treat fully "
                  "masked rows explicitly.", "07"),
    Question("Q and K have shape (B, H, L, d_k). What does Q @ K.transpose(1, 2) do?",
             {"a": "always raises an error",
              "b": "swaps H and L; silently wrong when L = H = d_k",
              "c": "the same as K.transpose(-2, -1)"},
             "b", "Transpose the last two dims by name: K.transpose(-2, -1) or K.mT.", "08"),
    Question("In training, do the rows of the weights still sum to 1 after dropout?",
             {"a": "yes",
              "b": "no, only on average",
              "c": "only when p < 0.5"},
             "b", "Dropout zeroes some weights and scales the rest by 1/(1 - p): rows sum to 1 "
                  "only on average in training, exactly in eval mode.", "08"),
    Question("Every row of your weights sums to 1. Is your attention right?",
             {"a": "yes",
              "b": "not necessarily"},
             "b", "Dividing by d_k, a missing scale or a wrong mask also give rows that sum "
                  "to 1: compare with a reference (SDPA) as well.", "05"),
    Question("When does the L × L part of attention cost more than the projections?",
             {"a": "always: attention is O(L²)",
              "b": "once L ≳ 1.5 · d_model",
              "c": "once L is larger than d_k"},
             "b", "Projections cost 6·L·d_model·d_k FLOPs, Q Kᵀ and A V 4·L²·d_k: equal at "
                  "L = 1.5 · d_model.", "10"),
]  # fmt: skip


def check_quiz(answers: dict[int, str]) -> int:
    """Mark the reader's answers to ``QUESTIONS`` (numbered from 1) and explain the wrong ones.

    Args:
        answers: question number → option letter, e.g. {1: "a", 2: "b"}.

    Returns:
        The number of right answers.
    """
    if not isinstance(answers, dict) or not answers:
        print(f"Not answered yet: fill in `my_answers` with a letter for each of the "
              f"{len(QUESTIONS)} questions, e.g. {{1: \"a\", 2: \"b\"}}, and run this cell again.")  # fmt: skip
        return 0
    mark_attempted("quiz")
    right = 0
    for number, question in enumerate(QUESTIONS, start=1):
        choice = str(answers.get(number, "")).strip().lower()
        if choice == question.answer:
            right += 1
            print(f"{number}. right.")
        elif choice in question.options:
            print(f"{number}. not quite: \"{question.options[choice]}\" is not it. Notebook "
                  f"{question.where} shows why.")  # fmt: skip
        else:
            print(f"{number}. no answer (options: {', '.join(question.options)}).")
    print(f"{right} of {len(QUESTIONS)} right. Run show_answers() for every answer and why.")
    return right


def show_answers() -> None:
    """Print each question's right answer and why, once the quiz has been tried."""
    if not attempted("quiz"):
        print("Try the quiz first: fill in `my_answers` and run check_quiz. Then run this cell "
              "again to see the answers.")  # fmt: skip
        return
    for number, question in enumerate(QUESTIONS, start=1):
        print(f"{number}. {question.options[question.answer]}. {question.why} "
              f"(notebook {question.where})")  # fmt: skip
