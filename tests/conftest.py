"""Shared pytest settings for the unit tests and for the nbval kernels."""

import os

import pytest

# nbval's kernels inherit this process's environment: give them the settings that
# tools/execute_notebooks.py gives the kernels that store the outputs, so that a stored
# notebook and its re-run see the same hash seed, matplotlib backend and thread count.
os.environ["PYTHONHASHSEED"] = "0"
os.environ["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
os.environ["OMP_NUM_THREADS"] = "1"


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    """Tests use tiny tensors: one intra-op thread each avoids oversubscribing the two cores
    that the xdist workers and the notebook kernels share (a 4×4 softmax took ~12 ms with two
    competing threads, ~0.06 ms with one)."""
    import torch  # here, not at the top: xdist's controller loads this file and runs no test

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def headless_backend():
    """Draw off-screen (Agg), whatever backend the machine would pick; for the figure and
    dashboard test modules (``pytestmark = pytest.mark.usefixtures("headless_backend")``)."""
    import matplotlib.pyplot as plt  # not at the top: after MPLBACKEND is set above

    previous = plt.get_backend()
    plt.switch_backend("Agg")
    yield
    plt.switch_backend(previous)


# Longest first: pytest-xdist's loadscope hands out whole modules (and whole notebooks) in
# the order of the collection, so a long one handed out last runs alone at the end while the
# other worker idles. These run longest (measured in CPU seconds: the browser test ~35, which
# also waits for JupyterLab, notebook 09 ~20, the other notebooks 3-9 each, a test module at
# most ~4). A stable sort keeps the order inside each module and notebook.
_LONGEST_FIRST = ("test_browser.py", "09_does_scaling_matter_in_training.ipynb")


def pytest_configure(config):
    # xdist (≥ 3.6) would reorder the scopes by their number of tests, which puts modules
    # of many quick tests first and the browser test and the notebooks at the end.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config, items):
    def rank(item):
        name = item.path.name
        if name in _LONGEST_FIRST:
            return _LONGEST_FIRST.index(name)
        return len(_LONGEST_FIRST) + (0 if item.path.suffix == ".ipynb" else 1)

    items.sort(key=rank)
