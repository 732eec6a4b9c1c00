"""attn_lib: the small library under the single-head attention notebook series.

Importing it loads torch only. Each notebook's experiments, checkers, figures and dashboards
live in ``attn_lib.lessons`` (the views import matplotlib and ipywidgets) and are imported
explicitly by the notebooks that use them.

Shape legend: B batch, H heads, L_q query length, L_k key length,
d_model model width, d_k query/key width, d_v value width.
"""

from .attention import SingleHeadAttention, scaled_dot_product_attention
from .checks import MaskError, ShapeError, shape_trace
from .chunked import chunked_attention
from .diagnose import diagnose
from .formatting import fmt_values
from .masks import (
    causal_mask,
    combine_masks,
    padding_mask,
    to_additive,
    to_key_padding_mask,
    to_multihead_attn_mask,
    to_sdpa_mask,
)
from .positional import sinusoidal_positional_encoding
from .softmax import entropy, naive_softmax, softmax_jacobian, stable_softmax

__version__ = "0.1.0"

__all__ = ["MaskError", "ShapeError", "SingleHeadAttention", "causal_mask", "chunked_attention",
           "combine_masks", "diagnose", "entropy", "fmt_values", "naive_softmax", "padding_mask",
           "scaled_dot_product_attention", "shape_trace", "sinusoidal_positional_encoding",
           "softmax_jacobian", "stable_softmax", "to_additive", "to_key_padding_mask",
           "to_multihead_attn_mask", "to_sdpa_mask"]  # fmt: skip
