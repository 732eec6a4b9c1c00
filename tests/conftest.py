"""Shared pytest settings for the unit tests and for the nbval kernels."""

import os

import pytest
import torch

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
# collection order, so a long one collected last runs alone at the end while the other worker
# idles. These run longest (measured: the browser test ~30 s, notebook 09 ~18 s, 10 ~13 s, the
# other notebooks 4-8 s each). A stable sort keeps the order inside each module and notebook.
_LONGEST_FIRST = (
    "test_browser.py",
    "09_does_scaling_matter_in_training.ipynb",
    "10_what_attention_costs.ipynb",
)


def pytest_collection_modifyitems(config, items):
    def rank(item):
        name = item.path.name
        if name in _LONGEST_FIRST:
            return _LONGEST_FIRST.index(name)
        return len(_LONGEST_FIRST) + (0 if item.path.suffix == ".ipynb" else 1)

    items.sort(key=rank)
