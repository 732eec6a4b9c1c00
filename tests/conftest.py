"""Shared pytest settings for the unit tests and for the nbval kernels."""

import atexit
import gc
import os
import shutil
import tempfile
from pathlib import Path

import pytest

# nbval's kernels inherit this process's environment: give them the settings that
# tools/execute_notebooks.py gives the kernels that store the outputs, so that a stored
# notebook and its re-run see the same hash seed, matplotlib backend and thread count.
os.environ["PYTHONHASHSEED"] = "0"
os.environ["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
os.environ["OMP_NUM_THREADS"] = "1"


def _ipython_dir_for_kernels() -> str:
    """A temporary IPYTHONDIR whose one startup file is tests/kernel_startup.py (it spares each
    kernel torch's DTensor import, 0.6-0.9 CPU-s; see that file), and no user profile."""
    folder = Path(tempfile.mkdtemp(prefix="attn-lib-ipython-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    startup = folder / "profile_default" / "startup"
    startup.mkdir(parents=True)
    shutil.copyfile(Path(__file__).with_name("kernel_startup.py"), startup / "00-tests.py")
    return str(folder)


os.environ["IPYTHONDIR"] = _ipython_dir_for_kernels()


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    """Tests use tiny tensors: one intra-op thread each avoids oversubscribing the two cores
    that the xdist workers and the notebook kernels share (a 4×4 softmax took ~12 ms with two
    competing threads, ~0.06 ms with one)."""
    import torch  # here, not at the top: xdist's controller loads this file and runs no test
    import torch.testing._comparison as comparison

    comparison._HAS_DTENSOR = False  # as in the kernels: see tests/kernel_startup.py
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
# the order of the collection, and a worker takes its next one while it still has two tests
# to run, so a long one handed out last runs alone at the end while the other worker idles.
# Measured in CPU seconds: the browser test ~20 (plus JupyterLab's waits), a notebook 3-8
# (09 was ~17), a dashboard or figure test module 1-2, any other test module under ~1.5. So:
# the browser test, notebook 09, the other notebooks, the dashboard and figure modules, the
# rest; the tail is many small modules, which even out the two workers' ends. A stable sort
# keeps the order inside each module and notebook.
_LONGEST_FIRST = ("test_browser.py", "09_does_scaling_matter_in_training.ipynb")


def _rank(path) -> tuple[int, int]:
    if path.name in _LONGEST_FIRST:
        return (0, _LONGEST_FIRST.index(path.name))
    if path.suffix == ".ipynb":
        return (1, 0)
    drawn = path.name.endswith("_views.py") or path.name.startswith(("test_dashboard", "test_fig"))
    return (2, 0) if drawn else (3, 0)


def pytest_configure(config):
    # xdist (≥ 3.6) would reorder the scopes by their number of tests, which puts modules
    # of many quick tests first and the browser test and the notebooks at the end.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False
    gc.disable()  # while the test modules import torch and matplotlib: see below


def pytest_collection_finish(session):
    """Leave what is alive once the tests are collected (torch, matplotlib, the lessons, the
    test modules: ~280,000 objects) out of the garbage collector's full passes: they live
    until the end anyway, and a full pass over them costs ~0.14 s of CPU (a run of the unit
    tests makes 14; frozen, the run took 1.5-2.5 CPU-s less, exit included). The collector is
    off while they are made (its passes during the imports cost ~0.2 CPU-s a worker), and on
    again for the tests: cycles made then are collected as usual. (xdist's controller collects
    nothing and keeps it off: it only gathers the workers' reports.)"""
    gc.freeze()
    gc.enable()


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: _rank(item.path))
