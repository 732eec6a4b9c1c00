"""Notebook 06's data, experiments and checkers (torch only).

Used by notebook 06 (Checking against PyTorch), sections "1 · The article's setup (3.1 and
3.4)", "6 · One mask, three conventions", "9 · A dashboard: one mask, three conventions", "10 ·
Check yourself".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache

import torch
from torch import nn

from ..core import SingleHeadAttention, scaled_dot_product_attention
from ..masks import (
    causal_mask,
    padding_mask,
    to_additive,
    to_key_padding_mask,
    to_multihead_attn_mask,
    to_sdpa_mask,
)
from ..shapes import MaskError
from ._checking import (
    _SEED,
    CheckResult,
    _call,
    _call_failed,
    _close,
    _mask_difference,
    _name_of,
    _not_yet,
    _passed,
    _raised,
)
from ._examples import (
    ARTICLE_BATCH,
    ARTICLE_D_K,
    ARTICLE_D_MODEL,
    ARTICLE_SEED,
    ARTICLE_SEQ_LEN,
    EXAMPLE_LENGTHS,
    example_mask,
)

# How a mask is handed over, as the notebook 06 dashboard offers it (key → label).
MASK_CONVENTIONS = {
    "keep": "article keep-mask",
    "mha_attn_mask": "MHA attn_mask",
    "mha_key_padding": "MHA key_padding_mask",
    "sdpa_bool": "SDPA bool",
    "sdpa_additive": "SDPA additive",
    "inverted": "inverted by mistake",
}
CONVENTION_MASK_CHOICES = ("none", "padding", "causal", "fully masked row")
IMPLEMENTATIONS = ("attn_lib", "MHA", "SDPA")


@dataclass(frozen=True)
class ArticleMHAExample:
    """The article's section 3.4 setup: x, PyTorch's module, and the module aligned with it.

    Attributes:
        x: (B, L, d_model) = (2, 4, 8), float32, the input of section 3.1.
        mha: nn.MultiheadAttention(embed_dim=8, num_heads=1, bias=False,
            batch_first=True), built right after the article's module (same seed,
            same order), in eval mode.
        model: SingleHeadAttention(8, 8) whose W_Q, W_K, W_V are rows [0:8], [8:16],
            [16:24] of ``mha.in_proj_weight``, in eval mode.
        Q, K: (B, L, d_k) = (2, 4, 8), float32, x projected by the copied W_Q, W_K.
        V: (B, L, d_v) = (2, 4, 8), float32, x projected by the copied W_V.

    Source: article section 3.4; torch.nn.MultiheadAttention.
    """

    x: torch.Tensor
    mha: torch.nn.MultiheadAttention
    model: SingleHeadAttention
    Q: torch.Tensor
    K: torch.Tensor
    V: torch.Tensor


def article_mha_example() -> ArticleMHAExample:
    """Rebuild section 3.4: seed 42, x, the article's module, then nn.MultiheadAttention.

    The random state is saved and restored (the caller's next draw is unchanged).
    The article's module is built only to draw the same random numbers as the
    article before ``nn.MultiheadAttention`` is built; its weights are then
    replaced by slices of ``in_proj_weight``, as the article does.

    Returns:
        ArticleMHAExample; tensors float32, computed without gradients.

    Source: article section 3.4.
    """
    E = ARTICLE_D_MODEL
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(ARTICLE_SEED)
        x = torch.randn(ARTICLE_BATCH, ARTICLE_SEQ_LEN, E)  # (B, L, d_model)
        model = SingleHeadAttention(E, ARTICLE_D_K).eval()
        mha = torch.nn.MultiheadAttention(E, num_heads=1, bias=False, batch_first=True).eval()
    with torch.no_grad():
        for i, lin in enumerate((model.W_Q, model.W_K, model.W_V)):
            lin.weight.copy_(mha.in_proj_weight[i * E : (i + 1) * E])  # (d_k, d_model)
        Q, K, V = model.W_Q(x), model.W_K(x), model.W_V(x)  # (B, L, d_k) each
    return ArticleMHAExample(x=x, mha=mha, model=model, Q=Q, K=K, V=V)


def convention_keep_mask(mask: str, L: int = ARTICLE_SEQ_LEN) -> torch.Tensor | None:
    """The intended keep-mask of a notebook 06 mask setting (True = may attend).

    Args:
        mask: "none"; "padding" (lengths :data:`EXAMPLE_LENGTHS`, padded keys
            blocked); "causal"; or "fully masked row": padding applied to the queries
            too (a query×key mask), so the padded *query* rows of sequence 1 have no
            allowed key at all.
        L: sequence length, at least max(EXAMPLE_LENGTHS).

    Returns:
        None, bool (B, 1, L) padding, bool (L, L) causal, or bool (B, L, L) for
        "fully masked row".

    Raises:
        ValueError: an unknown mask name.

    Source: article section 4.1; SERIES.md notebook 06 (a fully masked row).
    """
    if mask == "fully masked row":
        pad = padding_mask(list(EXAMPLE_LENGTHS), max_len=L)  # (B, 1, L)
        return pad.transpose(1, 2) & pad  # (B, L, L): real query and real key
    if mask in ("none", "padding", "causal"):
        return example_mask(mask, L)
    raise ValueError(f"mask must be one of {CONVENTION_MASK_CHOICES}, got {mask!r}.")


@dataclass(frozen=True)
class ConventionResult:
    """One setting of the mask-convention dashboard: the same intended mask, three functions.

    Attributes:
        convention: a key of :data:`MASK_CONVENTIONS`.
        mask: one of :data:`CONVENTION_MASK_CHOICES`.
        batch_index: the sequence shown (0 or 1).
        keep: (L, L) bool, the intended keep-mask of that sequence (all True for "none").
        passed_name: what tensor is handed over, in words, with its convention.
        passed_text: (L, L) cell labels: the values of that tensor as passed
            ("True", "False", "0", "-inf"), broadcast to (L_q, L_k); empty when
            nothing is passed.
        passed_blocked: (L, L) bool, the cells the receiving function reads as blocked.
        error: None, or why this convention cannot express this mask (then MHA's
            weights are None).
        weights: implementation ("attn_lib", "MHA", "SDPA") → (L, L) float32 weights of
            the shown sequence, or None; MHA's may hold NaN. SDPA's are derived by
            running SDPA with value = the (L_k, L_k) identity matrix.
        max_abs_diff: implementation → max |Δ| against attn_lib over the entries where
            both are finite (nan when there is none, or no weights).
        nan_rows: implementation → number of query rows holding a NaN.
        key_labels: one tick label per key; "2 (pad)" for a padded key of sequence 1.

    Source: torch.nn.MultiheadAttention and torch.nn.functional.scaled_dot_product_attention
        docs (attn_mask, key_padding_mask); article sections 3.2 and 3.4.
    """

    convention: str
    mask: str
    batch_index: int
    keep: torch.Tensor
    passed_name: str
    passed_text: tuple[tuple[str, ...], ...]
    passed_blocked: torch.Tensor
    error: str | None
    weights: Mapping[str, torch.Tensor | None]
    max_abs_diff: Mapping[str, float]
    nan_rows: Mapping[str, int]
    key_labels: tuple[str, ...]

    @property
    def title(self) -> str:
        """A one-line description of the setting, for figure titles."""
        return (
            f"mask: {self.mask} · passed as: {MASK_CONVENTIONS[self.convention]} · "
            f"sequence {self.batch_index}"
        )


def convention_setting(
    convention: str = "keep", mask: str = "padding", batch_index: int = 1
) -> ConventionResult:
    """Weights of attn_lib, nn.MultiheadAttention and SDPA when a mask is passed one way.

    attn_lib always receives the intended keep-mask (it is the reference). The
    convention decides what PyTorch's two functions receive:

    - "keep", "mha_attn_mask", "sdpa_bool": each gets the mask converted to its own
      convention (``to_multihead_attn_mask``, ``to_sdpa_mask``); the three names
      differ only in which tensor the figure shows.
    - "mha_key_padding": MHA gets ``key_padding_mask`` (B, L_k), True = padding;
      it cannot express a causal or a per-query mask (``error`` says so).
    - "sdpa_additive": both get ``to_additive`` (0 kept, -inf blocked), added to the
      scores.
    - "inverted": the classic mistake: MHA gets the keep-mask itself as
      ``attn_mask`` (which it reads as True = blocked), and SDPA gets MHA's
      convention (which it reads as True = takes part).

    Pure and cached: each (convention, mask) pair is computed once for the whole
    batch; the tensors returned are fresh copies.

    Args:
        convention: a key of :data:`MASK_CONVENTIONS`.
        mask: one of :data:`CONVENTION_MASK_CHOICES`.
        batch_index: 0 or 1, the sequence to return.

    Returns:
        ConventionResult with (L, L) = (4, 4) tensors.

    Raises:
        ValueError: an unknown convention or mask, or batch_index not 0 or 1.

    Source: torch.nn.MultiheadAttention.forward and
        torch.nn.functional.scaled_dot_product_attention docs; article section 3.4.
    """
    if convention not in MASK_CONVENTIONS:
        raise ValueError(
            f"convention must be one of {tuple(MASK_CONVENTIONS)}, got {convention!r}."
        )
    if mask not in CONVENTION_MASK_CHOICES:
        raise ValueError(f"mask must be one of {CONVENTION_MASK_CHOICES}, got {mask!r}.")
    if isinstance(batch_index, bool) or batch_index not in range(ARTICLE_BATCH):
        raise ValueError(f"batch_index must be 0 or 1, got {batch_index!r}.")
    full = _convention_batch(convention, mask)
    b = batch_index

    def pick(t: torch.Tensor | None) -> torch.Tensor | None:
        return None if t is None else t[b].clone()

    weights = {name: pick(w) for name, w in full["weights"].items()}
    ref = weights["attn_lib"]
    diffs, nan_rows = {}, {}
    for name, w in weights.items():
        if w is None:
            diffs[name], nan_rows[name] = float("nan"), 0
            continue
        d = (w - ref).abs()  # (L, L); NaN where w is NaN
        finite = torch.isfinite(d)
        diffs[name] = float(d[finite].max()) if bool(finite.any()) else float("nan")
        nan_rows[name] = int(torch.isnan(w).any(dim=-1).sum())
    L = ARTICLE_SEQ_LEN
    padded = mask in ("padding", "fully masked row")
    labels = tuple(
        f"{j} (pad)" if padded and j >= EXAMPLE_LENGTHS[b] else str(j) for j in range(L)
    )
    return ConventionResult(
        convention=convention,
        mask=mask,
        batch_index=b,
        keep=full["keep"][b].clone(),
        passed_name=full["passed_name"],
        passed_text=full["passed_text"][b],
        passed_blocked=full["passed_blocked"][b].clone(),
        error=full["error"],
        weights=weights,
        max_abs_diff=diffs,
        nan_rows=nan_rows,
        key_labels=labels,
    )


def _cell_text(values: torch.Tensor) -> tuple[tuple[tuple[str, ...], ...], ...]:
    """(B, L_q, L_k) bool or float mask values → per-cell labels as they read in code."""
    if values.dtype == torch.bool:
        text = [[["True" if v else "False" for v in row] for row in m] for m in values.tolist()]
    else:
        text = [
            [["-inf" if v == float("-inf") else f"{v:g}" for v in row] for row in m]
            for m in values.tolist()
        ]
    return tuple(tuple(tuple(row) for row in m) for m in text)


@cache
def _convention_batch(convention: str, mask: str) -> dict:
    """Everything :func:`convention_setting` needs, for the whole batch (cached)."""

    ex = article_mha_example()
    B, L = ARTICLE_BATCH, ARTICLE_SEQ_LEN
    keep = convention_keep_mask(mask)  # None, (B, 1, L), (L, L) or (B, L, L)
    full_keep = torch.ones(B, L, L, dtype=torch.bool)
    if keep is not None:
        full_keep = full_keep & keep  # (B, L, L)

    mha_kwargs: dict[str, torch.Tensor] = {}
    sdpa_mask: torch.Tensor | None = None
    error: str | None = None
    shown: torch.Tensor | None = None  # (B, L, L) values of the tensor the figure shows
    blocked = torch.zeros(B, L, L, dtype=torch.bool)  # as the receiving function reads it
    names = {
        "keep": "keep-mask to attn_lib (True = may attend)",
        "mha_attn_mask": "attn_mask to MHA (True = blocked)",
        "mha_key_padding": "key_padding_mask to MHA (True = padding)",
        "sdpa_bool": "attn_mask to SDPA (True = takes part)",
        "sdpa_additive": "float attn_mask to SDPA and MHA (added)",
        "inverted": "keep-mask to MHA as attn_mask (read as True = blocked)",
    }
    if keep is not None:
        # A 3-D attn_mask for nn.MultiheadAttention must spell out (B * heads, L_q, L_k).
        keep_mha = keep if keep.dim() == 2 else full_keep  # (L, L) or (B, L, L)
        mha_kwargs = {"attn_mask": to_multihead_attn_mask(keep_mha)}
        sdpa_mask = to_sdpa_mask(keep)
        blocked = ~full_keep
        if convention in ("keep", "sdpa_bool"):
            shown = full_keep
        elif convention == "mha_attn_mask":
            shown = ~full_keep
        elif convention == "mha_key_padding":
            try:
                kpm = to_key_padding_mask(keep)  # (B, L_k), True = padding
            except MaskError:
                error = (
                    "a key_padding_mask blocks the same keys for every query, so it cannot "
                    f"express a {mask} mask: use attn_mask"
                )
                mha_kwargs = {}
            else:
                mha_kwargs = {"key_padding_mask": kpm}
                shown = kpm[:, None, :].expand(B, L, L)
        elif convention == "sdpa_additive":
            mha_kwargs = {"attn_mask": to_additive(keep_mha)}  # 0 kept, -inf blocked
            sdpa_mask = to_additive(keep)
            shown = to_additive(full_keep)
        else:  # "inverted": each PyTorch function is handed the other one's convention
            mha_kwargs = {"attn_mask": keep_mha}
            sdpa_mask = to_multihead_attn_mask(keep_mha)
            shown = full_keep
            blocked = full_keep
    if shown is None:
        empty = tuple(tuple("" for _ in range(L)) for _ in range(L))
        passed_text = (empty,) * B
    else:
        passed_text = _cell_text(shown)
    if keep is None:
        passed_name = "no mask passed"
    elif error is not None:
        passed_name = "key_padding_mask to MHA (not possible)"
    else:
        passed_name = names[convention]

    with torch.no_grad():
        _, w_lib = scaled_dot_product_attention(ex.Q, ex.K, ex.V, keep)  # (B, L, L)
        w_mha = None
        if error is None:
            _, w_mha = ex.mha(
                ex.x, ex.x, ex.x, need_weights=True, average_attn_weights=True, **mha_kwargs
            )  # (B, L, L)
        eye = torch.eye(L).expand(B, L, L)  # value = I makes SDPA's output its weights
        w_sdpa = torch.nn.functional.scaled_dot_product_attention(
            ex.Q, ex.K, eye, attn_mask=sdpa_mask
        )  # (B, L, L)
    return {
        "keep": full_keep,
        "passed_name": passed_name,
        "passed_text": passed_text,
        "passed_blocked": blocked if error is None else torch.zeros(B, L, L, dtype=torch.bool),
        "error": error,
        "weights": {"attn_lib": w_lib, "MHA": w_mha, "SDPA": w_sdpa},
    }


@dataclass(frozen=True)
class _MHACase:
    name: str
    mha: nn.MultiheadAttention  # num_heads=1, batch_first=True, eval mode
    x: torch.Tensor  # (B, L, E)


def _mha_cases() -> list[_MHACase]:
    """Seeded one-head modules whose sizes all differ; two with biases everywhere."""
    cases = []
    for i, (name, E, B, L, bias) in enumerate(
        [
            ("E=6, no bias, x (2, 5, 6)", 6, 2, 5, False),
            ("E=4, with biases, x (3, 2, 4)", 4, 3, 2, True),
            ("E=8, with biases, x (1, 7, 8)", 8, 1, 7, True),
        ]
    ):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(_SEED + 60 + i)
            mha = nn.MultiheadAttention(E, num_heads=1, bias=bias, batch_first=True).eval()
            with torch.no_grad():
                if bias:  # PyTorch initialises the biases to 0; make them matter
                    mha.in_proj_bias.normal_(0.0, 0.5)
                    mha.out_proj.bias.normal_(0.0, 0.5)
            x = torch.randn(B, L, E)
        cases.append(_MHACase(name, mha, x))
    return cases


def _mha_parts(
    mha: nn.MultiheadAttention,
    x: torch.Tensor,
    *,
    swap_qk: bool = False,
    in_bias: bool = True,
    scale: float | None = None,
) -> torch.Tensor:
    """The attention output (before out_proj) of a one-head module, with optional mistakes."""
    E = mha.embed_dim
    w = mha.in_proj_weight
    b = mha.in_proj_bias if in_bias else None
    rows = [slice(0, E), slice(E, 2 * E), slice(2 * E, 3 * E)]
    q_rows, k_rows = (rows[1], rows[0]) if swap_qk else (rows[0], rows[1])
    Q = torch.nn.functional.linear(x, w[q_rows], None if b is None else b[q_rows])
    K = torch.nn.functional.linear(x, w[k_rows], None if b is None else b[k_rows])
    V = torch.nn.functional.linear(x, w[rows[2]], None if b is None else b[rows[2]])
    out, _ = scaled_dot_product_attention(Q, K, V, scale=scale)  # (B, L, E)
    return out


_MHAMistakeFn = Callable[[nn.MultiheadAttention, torch.Tensor], torch.Tensor]
_MHA_MISTAKES: list[tuple[str, str, _MHAMistakeFn]] = [
    (
        "no_out_proj",
        (
            "Your output is the attention output *before* nn.MultiheadAttention's output "
            "projection. The module applies one more Linear(E, E), `mha.out_proj`, after "
            "attention (the W^O of multi-head attention, present even with one head); that "
            "is why the article's comparison is off by about 1 while the weights agree. "
            "Finish with `mha.out_proj(output)` (or "
            "attn_lib.reference.apply_out_proj(mha, output))."
        ),
        lambda m, x: _mha_parts(m, x),
    ),
    (
        "out_proj_transposed",
        (
            "Your out_proj is applied transposed: `output @ mha.out_proj.weight` computes "
            "output · W, but a Linear stores its weight as (out_features, in_features) and "
            "computes output · Wᵀ + b. Call the layer itself, `mha.out_proj(output)`, or "
            "`F.linear(output, mha.out_proj.weight, mha.out_proj.bias)`."
        ),
        lambda m, x: torch.nn.functional.linear(
            _mha_parts(m, x), m.out_proj.weight.T, m.out_proj.bias
        ),
    ),
    (
        "out_proj_no_bias",
        (
            "You apply out_proj's weight but not its bias. When the module has biases "
            "(bias=True, PyTorch's default), out_proj adds `mha.out_proj.bias` too: call "
            "`mha.out_proj(output)`, which does both."
        ),
        lambda m, x: _mha_parts(m, x) @ m.out_proj.weight.T,
    ),
    (
        "in_proj_bias_missing",
        (
            "Your Q, K, V leave out `mha.in_proj_bias`. With bias=True the projections are "
            "x · W_Qᵀ + b_Q and so on, where b_Q, b_K, b_V are the three slices [0:E], "
            "[E:2E], [2E:3E] of in_proj_bias, in the same order as the weight's rows."
        ),
        lambda m, x: m.out_proj(_mha_parts(m, x, in_bias=False)),
    ),
    (
        "qk_swapped",
        (
            "Your W_Q and W_K are swapped. `in_proj_weight` (3E, E) stacks W_Q, W_K, W_V in "
            "that order: rows [0:E] are W_Q, rows [E:2E] W_K, rows [2E:3E] W_V. "
            "`mha.in_proj_weight.chunk(3)` gives them in that order."
        ),
        lambda m, x: m.out_proj(_mha_parts(m, x, swap_qk=True)),
    ),
    (
        "no_scale",
        (
            "Your scores are not divided by √d_k. nn.MultiheadAttention scales by "
            "1/√(E / num_heads), which is 1/√E with one head."
        ),
        lambda m, x: m.out_proj(_mha_parts(m, x, scale=1.0)),
    ),
]


def check_mha_forward(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check a hand-written forward pass of a one-head nn.MultiheadAttention.

    ``fn(mha, x)`` receives an ``nn.MultiheadAttention(E, num_heads=1,
    batch_first=True)`` in eval mode and x (B, L, E), float32, and must return
    ``mha(x, x, x)[0]``, the module's output (B, L, E), computed from the module's
    own parameters (``in_proj_weight``, ``in_proj_bias``, ``out_proj``); it may
    also return a pair (output, weights). Cases: E = 6 without biases, E = 4 and
    E = 8 with non-zero biases; all sizes differ.

    Args:
        fn: the function to check.
        verbose: print the feedback paragraph.

    Returns:
        CheckResult; ``mistake`` is None or one of: "not_written", "error",
        "bad_return", "called_module", "wrong_shape", "no_out_proj",
        "out_proj_transposed", "out_proj_no_bias", "in_proj_bias_missing",
        "qk_swapped", "no_scale", "unknown".

    Source: article section 3.4; torch.nn.MultiheadAttention (in_proj_weight, out_proj).
    """
    name = _name_of(fn)
    cases = _mha_cases()
    outputs: list[torch.Tensor] = []
    for case in cases:
        calls: list[int] = []
        hook = case.mha.register_forward_hook(lambda *_, calls=calls: calls.append(1))
        try:
            with torch.no_grad():
                result, err = _call(fn, case.mha, case.x.clone(), quiet=True)
        finally:
            hook.remove()
        if err is not None:
            return _call_failed(
                name,
                err,
                f"On the case '{case.name}' {name} raised "
                f"{_raised(err, first_line=True)}. The module has E = {case.mha.embed_dim}: "
                f"in_proj_weight is ({3 * case.mha.embed_dim}, {case.mha.embed_dim}) and x is "
                f"{tuple(case.x.shape)}.",
                verbose,
            )
        if calls:
            return _not_yet(
                "called_module",
                f"{name} calls the module itself (mha(...)), so it cannot disagree "
                f"with it. Compute the output from mha's parameters instead: slice "
                f"in_proj_weight into W_Q, W_K, W_V, attend, then apply mha.out_proj.",
                verbose,
            )
        if isinstance(result, tuple | list) and len(result) == 2:
            result = result[0]
        if not isinstance(result, torch.Tensor):
            return _not_yet(
                "bad_return",
                f"{name} returned {type(result).__name__}; return the output tensor (B, L, E).",
                verbose,
            )
        outputs.append(result.detach())

    with torch.no_grad():
        refs = [c.mha(c.x, c.x, c.x, need_weights=False)[0] for c in cases]
    ok = [_close(o, r) for o, r in zip(outputs, refs, strict=True)]
    if all(ok):
        return _passed(
            f"{name} reproduces nn.MultiheadAttention's output on all {len(cases)} "
            f"cases (with and without biases): in-projection slices, scaled attention and "
            f"out_proj, to float32 precision.",
            verbose,
        )
    for code, explanation, make in _MHA_MISTAKES:
        with torch.no_grad():
            wrong = [make(c.mha, c.x) for c in cases]
        if all(_close(o, w) for o, w in zip(outputs, wrong, strict=True)):
            return _not_yet(code, explanation, verbose)
    first = ok.index(False)
    o, r, case = outputs[first], refs[first], cases[first]
    if o.shape != r.shape:
        return _not_yet(
            "wrong_shape",
            f"On the case '{case.name}' your output has shape {tuple(o.shape)}; "
            f"nn.MultiheadAttention with batch_first=True returns (B, L, E) = "
            f"{tuple(r.shape)}.",
            verbose,
        )
    diff = (o - r).abs().nan_to_num(nan=float("inf")).max().item()
    return _not_yet(
        "unknown",
        f"On the case '{case.name}' your output differs from the module's by up to "
        f"{diff:.3g}, and it matches none of the usual single mistakes (missing or "
        f"transposed out_proj, missing biases, W_Q and W_K swapped, no scaling). Check each "
        f"step against the module: the three slices of in_proj_weight, softmax(Q Kᵀ / √E) V, "
        f"then mha.out_proj.",
        verbose,
    )


def _mha_mask_cases() -> list[tuple[str, torch.Tensor]]:
    """(description, keep-mask) for check_mha_mask."""
    g = torch.Generator().manual_seed(_SEED + 66)
    per_example = torch.rand(2, 4, 6, generator=g) < 0.6
    per_example[..., 0] = True  # every query keeps at least one key
    return [
        ("a causal keep-mask (5, 5), bool", causal_mask(5)),
        ("a per-example keep-mask (2, 4, 6), bool", per_example),
        ("an integer 0/1 keep-mask (3, 6), int64", causal_mask(3, 6).long()),
    ]


_VERY_NEGATIVE = -1e4  # an additive fill at or below this blocks a key: exp(-1e4) is 0


def check_mha_mask(fn: Callable, *, verbose: bool = True) -> CheckResult:
    """Check a converter from the article's keep-mask to nn.MultiheadAttention's attn_mask.

    ``fn(keep)`` receives a keep-mask (True or 1 = may attend), bool or integer
    0/1, of shape (L_q, L_k) or (B, L_q, L_k), and must return MHA's ``attn_mask``:
    bool, same shape, True where attention is *blocked*. (An additive float mask, 0
    where kept and -inf, or a fill of -1e4 or below such as -1e9 or
    torch.finfo(dtype).min, where blocked, is accepted too: MHA adds it to the scores, which blocks the same cells, since every
    query of the cases keeps at least one key.)
    When the polarity is not inverted, the checker runs a one-head MHA with the mask
    to count the rows of NaN weights it causes. Cases: a (5, 5) causal mask, a
    (2, 4, 6) per-example mask and a (3, 6) integer mask.

    Args:
        fn: the function to check.
        verbose: print the feedback paragraph.

    Returns:
        CheckResult; ``mistake`` is None or one of: "not_written", "error",
        "bad_return", "wrong_shape", "not_inverted", "float_01", "int_mask",
        "bitwise_not_int", "fill_too_small", "unknown".

    Source: torch.nn.MultiheadAttention.forward docs (attn_mask); article section 3.2.
    """
    name = _name_of(fn)
    results = []
    cases = _mha_mask_cases()
    for desc, keep in cases:
        m, err = _call(fn, keep.clone())
        if err is not None:
            return _call_failed(
                name,
                err,
                f"For {desc}, {name} raised {_raised(err)}. Fix that line and run the check again.",
                verbose,
            )
        if not isinstance(m, torch.Tensor):
            return _not_yet(
                "bad_return",
                f"For {desc}, {name} returned {type(m).__name__}; return a bool "
                f"tensor of the same shape.", verbose,
            )  # fmt: skip
        results.append(m)

    for (desc, keep), m in zip(cases, results, strict=True):
        if m.shape != keep.shape:
            return _not_yet(
                "wrong_shape",
                f"For {desc}, your mask has shape {tuple(m.shape)}; it must keep the "
                f"keep-mask's shape {tuple(keep.shape)}: the conversion only changes what "
                f"True means, not where it is.",
                verbose,
            )
    blocked = [~k.bool() for _, k in cases]

    def every(test: Callable[[torch.Tensor, torch.Tensor], bool]) -> bool:
        return all(test(m, b) for m, b in zip(results, blocked, strict=True))

    def values_are(m: torch.Tensor, allowed: set[float]) -> bool:
        return set(m.unique().tolist()) <= allowed

    if every(lambda m, b: m.dtype == torch.bool and torch.equal(m, b)):
        return _passed(
            f"{name} turns every keep-mask into nn.MultiheadAttention's attn_mask: "
            f"bool, True where attention is blocked (the opposite of the article's mask).",
            verbose,
        )  # fmt: skip

    def additive(m: torch.Tensor, b: torch.Tensor) -> bool:
        """0 where kept; -inf, or a fill of -1e4 or below (-1e9, finfo.min), where blocked."""
        if not m.is_floating_point():
            return False
        blocked_here = m <= _VERY_NEGATIVE
        return bool((m[~blocked_here] == 0).all()) and torch.equal(blocked_here, b)

    if every(additive):
        finite = any(bool((m.isfinite() & (m != 0)).any()) for m in results)
        fill = "a very negative number such as torch.finfo(dtype).min" if finite else "-inf"
        note = (
            " (With a finite fill, a query whose keys were all blocked would get a uniform row "
            "instead of NaN; here every query keeps at least one key.)"
            if finite
            else ""
        )
        return _passed(
            f"{name} returns an additive float mask (0 where kept, {fill} where "
            f"blocked); nn.MultiheadAttention adds it to the scores, which blocks the same "
            f"cells as the bool mask True = blocked.{note}",
            verbose,
        )  # fmt: skip
    for (desc, _), m in zip(cases, results, strict=True):
        is_int = not m.is_floating_point() and m.dtype != torch.bool
        if is_int and values_are(m, {-1.0, -2.0}):
            return _not_yet(
                "bitwise_not_int",
                f"For {desc}, your mask holds -1 and -2: `~` on an integer tensor is "
                f"a bitwise not, which turns 1 into -2 and 0 into -1, not into 0 and 1. Make "
                f"the mask bool first, `~keep.bool()`, or compare: `keep == 0`.",
                verbose,
            )  # fmt: skip
    if every(lambda m, b: not m.is_floating_point() and torch.equal(m != 0, ~b)):
        nan_rows = _mha_nan_rows(results[0] != 0, cases[0][1])
        rows = f"{nan_rows} row{'' if nan_rows == 1 else 's'}"
        return _not_yet(
            "not_inverted",
            f"Your mask still uses the article's convention (True = may attend), but "
            f"nn.MultiheadAttention reads True as *blocked*: with it, every query attends "
            f"only to the keys it should not see, and a query whose keys are all allowed "
            f"gets no key at all (on the causal case: {rows} of NaN weights). "
            f"Invert it: `~keep.bool()` or `keep == 0`.",
            verbose,
        )  # fmt: skip
    weak = [
        m[b] for m, b in zip(results, blocked, strict=True)
        if m.is_floating_point() and bool((m[~b] == 0).all()) and bool((m[b] < 0).all())
    ]  # fmt: skip
    if len(weak) == len(results) and all(w.numel() > 0 for w in weak):
        fill = max(float(w.max()) for w in weak)
        return _not_yet(
            "fill_too_small",
            f"Your additive mask has 0 where a query may attend and a negative number where "
            f"it may not, which is the right idea, but a fill of {fill:g} is too small to "
            f"block anything: nn.MultiheadAttention adds it to the scores, and a blocked key "
            f"still gets about e^({fill:g}) times the weight it would have had. Use -inf or "
            f"torch.finfo(dtype).min where blocked, or simply a bool mask: `keep == 0`.",
            verbose,
        )
    if every(lambda m, b: m.is_floating_point() and values_are(m, {0.0, 1.0})):
        right_way = every(lambda m, b: torch.equal(m == 1, b))
        polarity = (
            "Its 1s are in the right places"
            if right_way
            else "Its 1s are also on the kept cells, so the polarity is wrong as well"
        )
        return _not_yet(
            "float_01",
            f"Your mask is a float tensor of 0s and 1s. nn.MultiheadAttention (like "
            f"SDPA) *adds* a float mask to the scores, so a 1 only nudges a score up by 1 and "
            f"masks nothing. {polarity}. Return a bool mask (`keep == 0`), or an additive one "
            f"with -inf where blocked.",
            verbose,
        )  # fmt: skip
    if every(lambda m, b: not m.is_floating_point() and m.dtype != torch.bool):
        return _not_yet(
            "int_mask",
            f"Your mask is an integer tensor ({results[0].dtype}). "
            f"nn.MultiheadAttention takes only bool or float attn_masks (it stops with "
            f"'only bool and floating types of attn_mask are supported'). Return bool: "
            f"`keep == 0`.",
            verbose,
        )  # fmt: skip
    first = next(
        (c, m, b) for c, m, b in zip(cases, results, blocked, strict=True)
        if not (m.dtype == torch.bool and torch.equal(m, b))
    )  # fmt: skip
    (desc, _), m, b = first
    if m.is_floating_point():
        values = sorted(set(m.flatten().tolist()))
        shown = ", ".join(f"{v:g}" for v in values[:4]) + (", …" if len(values) > 4 else "")
        return _not_yet(
            "unknown",
            f"For {desc}, your mask is a float tensor ({m.dtype}) holding {shown}. "
            f"nn.MultiheadAttention *adds* a float mask to the scores, so it must be 0 where a "
            f"query may attend and -inf (or a very negative number) where it may not. Simplest: "
            f"return a bool mask, True where blocked: `keep == 0`.",
            verbose,
        )  # fmt: skip
    if torch.equal(m != 0, b):
        return _not_yet(
            "int_mask",
            f"For {desc}, your mask has the right cells but dtype {m.dtype}; "
            f"nn.MultiheadAttention takes only bool or float attn_masks. Return bool: "
            f"`keep == 0`.",
            verbose,
        )
    return _not_yet(
        "unknown",
        f"For {desc}, your attn_mask differs from the expected one (True = blocked) in "
        f"{_mask_difference(m != 0, b, 'blocked', 'may attend')}. nn.MultiheadAttention's "
        f"attn_mask is True exactly "
        f"where the keep-mask is False: `keep == 0`.",
        verbose,
    )  # fmt: skip


def _mha_nan_rows(attn_mask: torch.Tensor, keep: torch.Tensor) -> int:
    """Rows of NaN weights a one-head MHA gives with this (L, L) attn_mask."""
    L = keep.shape[-1]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(_SEED)
        mha = nn.MultiheadAttention(4, num_heads=1, batch_first=True).eval()
        x = torch.randn(1, L, 4)
    with torch.no_grad():
        _, w = mha(x, x, x, attn_mask=attn_mask)  # (1, L, L)
    return int(torch.isnan(w).any(dim=-1).sum())
