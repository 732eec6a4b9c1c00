"""Seeded experiments behind notebooks 01–04: pure functions that return numbers.

Every random draw comes from a local ``torch.Generator`` seeded by the ``seed``
argument, so the caller's global random state is never touched and the same
arguments always give the same numbers. Torch only: the dashboards in
``attn_lib.widgets`` draw what these functions return.

- 01 attention as retrieval: :func:`retrieve`, :func:`path_lengths`,
  :func:`pair_counts`, :func:`permutation_deviation`, :func:`word_order_outputs`.
- 02 queries, keys and values: :func:`qkv_example`, :func:`token_qkv`,
  :func:`self_score_max_fraction`, :func:`dot_and_cosine`.
- 03 scaling and saturation: :func:`score_variance_table`,
  :func:`variance_estimate_spread`, :func:`default_init_score_variance`,
  :func:`score_samples`, :func:`saturation_curves`, :func:`saturation_row`.
- 04 cost: :func:`attention_cost`, :func:`cost_curves`, :func:`crossover_length`.

Shape legend: B batch, L_q query length, L_k key length, d_model, d_k, d_v;
L a sequence length when L_q = L_k.
"""

from __future__ import annotations

from .lessons._experiments import (
    PADDING_SIDES,
    AttentionCost,
    attention_cost,
    crossover_length,
    default_linear_weight,
    keep_from_lengths,
    seeded_attention,
)

__all__ = [
    "AttentionCost",
    "attention_cost",
    "crossover_length",
    "default_linear_weight",
    "seeded_attention",
]


# ---------------------------------------------------------------------------
# Notebook 07: masks (article sections 3.2 and 4.1)
# ---------------------------------------------------------------------------


__all__ += [  # this section's public names, added to the list at the top
    "PADDING_SIDES",
    "keep_from_lengths",
]
