"""IPython startup file for the kernels the tests start (nbval's, the browser test's):
conftest.py copies it into a temporary IPYTHONDIR that those kernels inherit.

torch 2.13's ``torch.testing.assert_close`` imports ``torch.distributed.tensor`` on its first
call, to unwrap DTensors (pytorch/pytorch#176895): 0.6-0.9 CPU-s in every kernel, a tenth of a
notebook's run, for a tensor type the series never makes. Once torch is imported, this turns
that look-up off. For plain tensors assert_close does the same thing with or without it (the
unwrapping returns them unchanged), so the stored outputs do not depend on it; learners'
kernels, which pay the 0.6 s once, never load this file.
"""


def _install() -> None:
    import sys

    def skip_dtensor_unwrapping(*_) -> None:  # before each cell: a dictionary look-up
        comparison = sys.modules.get("torch.testing._comparison")
        if comparison is not None and getattr(comparison, "_HAS_DTENSOR", False):
            comparison._HAS_DTENSOR = False

    get_ipython().events.register("pre_run_cell", skip_dtensor_unwrapping)  # noqa: F821


_install()
del _install  # the notebook's namespace stays as a learner's kernel has it
