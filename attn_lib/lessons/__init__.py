"""The apparatus behind each notebook: its data, experiments, checkers, figures and dashboards.

``import attn_lib`` never imports this package (it needs matplotlib and ipywidgets for the
views). Imports go one way: attn_lib's top level ← ``lessons._*`` (shared by several
notebooks) ← ``lessons.nbNN_<topic>`` (torch only) ← ``lessons.nbNN_<topic>_views``.

Notebook → modules:

- shared: ``_figures`` (colormap, heatmap, figures for dashboards), ``_dashboard`` (the
  Dashboard base), ``_checking`` (CheckResult, the checkers' runner, solutions after an
  attempt, the checker helpers several notebooks share), ``_examples`` (the article's
  example, the sentences and their embeddings), ``_experiments`` (argument checks, the cost of
  attention, masks from lengths)
- 00 Start here: ``nb00_start``, ``nb00_start_views``
- 01 Attention as retrieval: ``nb01_retrieval``, ``nb01_retrieval_views``
- 02 Queries, keys and values: ``nb02_qkv``, ``nb02_qkv_views``
- 03 Scaling and softmax saturation: ``nb03_scaling``, ``nb03_scaling_views``
- 04 One formula, every shape: ``nb04_shapes``, ``nb04_shapes_views``
- 05 A single-head attention module: ``nb05_module`` (no figures of its own: ``_figures``)
- 06 Checking against PyTorch: ``nb06_pytorch``, ``nb06_pytorch_views``
- 07 Masks: padding, causal, fill values and shapes: ``nb07_masks``, ``nb07_masks_views``
- 08 Pitfalls and numerics: ``nb08_pitfalls``, ``nb08_pitfalls_views``
- 09 Does scaling matter in training?: ``nb09_training``, ``nb09_training_views``
- 10 What attention costs: ``nb10_cost``, ``nb10_cost_views``
- 11 The article, checked: ``nb11_article``
"""
