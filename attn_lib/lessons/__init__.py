"""The apparatus behind each notebook: its data, experiments, checkers, figures and dashboards.

``import attn_lib`` never imports this package (its views need matplotlib and ipywidgets).
Imports go one way: attn_lib's top level ← ``_*`` (shared: ``_figures`` heatmaps and dashboard
figures, ``_dashboard`` the Dashboard base, ``_checking`` the checkers' runner, ``_examples``
the article's example and the sentences, ``_experiments`` the cost of attention and seeded
helpers) ← ``nbNN_<topic>`` (torch only) ← ``nbNN_<topic>_views``. Notebook NN → its pair:
00 ``nb00_start``, 01 ``nb01_retrieval``, 02 ``nb02_qkv``, 03 ``nb03_scaling``, 04
``nb04_shapes``, 05 ``nb05_module`` (no views: it uses ``_figures``), 06 ``nb06_pytorch``, 07
``nb07_masks``, 08 ``nb08_pitfalls``, 09 ``nb09_training``, 10 ``nb10_cost``, 11
``nb11_article`` (no views).
"""
