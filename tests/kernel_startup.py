# IPython startup file for the kernels the tests start (nbval's, the browser test's):
# conftest.py copies it into a temporary IPYTHONDIR that those kernels inherit. Both changes below
# save CPU and change no result (nbval compares every output with the one stored by
# tools/execute_notebooks.py, whose kernels, like a learner's, never load this file).
#
# - torch 2.13's ``torch.testing.assert_close`` imports ``torch.distributed.tensor`` on its first
#   call, to unwrap DTensors (pytorch/pytorch#176895): 0.6-0.9 CPU-s in every kernel, for a
#   tensor type the series never makes. Once torch is imported, that look-up is turned off; for
#   plain tensors assert_close does the same with or without it.
# - Python's cyclic garbage collector runs many times while torch and matplotlib import, and
#   then walks their hundreds of thousands of objects on every full pass: it is off until the
#   first cell that imports torch has run, then those objects are frozen (kept out of the
#   collector's passes, as conftest.py does for the test workers) and it is on again. About
#   0.3-0.5 CPU-s a kernel.
# (Comments, not a docstring: a startup file runs in the notebook's namespace, where a
# docstring would replace __doc__.)


def _install() -> None:
    import gc
    import sys

    def skip_dtensor_unwrapping(*_) -> None:  # before each cell: a dictionary look-up
        comparison = sys.modules.get("torch.testing._comparison")
        if comparison is not None and getattr(comparison, "_HAS_DTENSOR", False):
            comparison._HAS_DTENSOR = False

    def collect_again_after_the_imports(*_) -> None:
        if "torch" in sys.modules:
            gc.freeze()
            gc.enable()
            get_ipython().events.unregister("post_run_cell", collect_again_after_the_imports)  # noqa: F821

    gc.disable()
    get_ipython().events.register("pre_run_cell", skip_dtensor_unwrapping)  # noqa: F821
    get_ipython().events.register("post_run_cell", collect_again_after_the_imports)  # noqa: F821


_install()
del _install  # the notebook's namespace stays as a learner's kernel has it
