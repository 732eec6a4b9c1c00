"""Notebook 10's dashboard, figures and the pure functions under them, driven headlessly."""

from __future__ import annotations

import itertools
import math

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from helpers import (
    SharedDashboard,
    assert_no_nan,
    decode,
    each_value,
    no_new_figures,
    png_of,
)

import attn_lib
from attn_lib.chunked import peak_intermediate_bytes
from attn_lib.lessons import nb10_cost_views
from attn_lib.lessons._dashboard import control_values
from attn_lib.lessons.nb10_cost import (
    COST_BLOCK_SIZES,
    COST_D_KS,
    COST_LENGTHS,
    MEMORY_METHODS,
    WALK_L,
    WALK_PADDING,
    AttentionTimings,
    format_bytes,
    largest_new_tensor,
    matmul_flops,
    memory_setting,
    memory_table,
    online_softmax_walk,
    time_attention,
    walk_block_size,
    walk_example,
)
from attn_lib.lessons.nb10_cost_views import ChunkedAttentionDashboard

pytestmark = pytest.mark.usefixtures("headless_backend")


@pytest.fixture(scope="module")
def shared_dash(headless_backend):
    yield from SharedDashboard.fixture(ChunkedAttentionDashboard)


@pytest.fixture
def dash(shared_dash):
    """The module's ChunkedAttentionDashboard, back in the setting it was built with."""
    yield from shared_dash.use()


# --- memory ------------------------------------------------------------------------------------


def test_memory_table_is_peak_intermediate_bytes():
    lengths = [64, 300, 512, 4096]
    t = memory_table(lengths, d_k=32, block_size=128, d_v=16)
    for i, L in enumerate(lengths):
        assert t.naive[i] == peak_intermediate_bytes(L, L, 32, 16, method="naive")
        assert t.chunked[i] == peak_intermediate_bytes(L, L, 32, 16, block_size=128)
        assert t.tiled[i] == peak_intermediate_bytes(L, L, 32, 16, block_size=128,
                                                     query_block_size=128)  # fmt: skip
    assert t.naive[0] == 2 * 64 * 64 * 4


def test_memory_grows_as_stated():
    t = memory_table(COST_LENGTHS, d_k=64, block_size=512)
    assert all(b == 4 * a for a, b in zip(t.naive.tolist(), t.naive.tolist()[1:], strict=False))
    assert t.slope("naive") == pytest.approx(2.0)
    assert t.slope("chunked", 1024) == pytest.approx(1.0, abs=0.05)
    tiled = t.tiled[t.lengths >= 512]
    assert (tiled == tiled[0]).all()  # flat once L ≥ block
    assert t.slope("tiled", 1024) == 0.0
    with pytest.raises(ValueError):
        t.bytes("flash")


def test_chunked_memory_does_not_grow_with_L_k():
    sizes = {peak_intermediate_bytes(256, L_k, 64, 64, block_size=128) for L_k in (128, 1024, 8192)}
    assert len(sizes) == 1


@pytest.mark.parametrize("L", COST_LENGTHS)
@pytest.mark.parametrize("block_size", [1, 512, 2048])
def test_memory_setting(L, block_size):
    s = memory_setting(L, 64, block_size)
    assert s is memory_setting(L, 64, block_size)  # cached
    assert s.block == min(block_size, L)
    assert s.n_blocks == math.ceil(L / s.block)
    i = COST_LENGTHS.index(L)
    assert s.at == {m: int(s.table.bytes(m)[i]) for m in MEMORY_METHODS}
    assert s.at["naive"] == 2 * L * L * 4
    assert ("clipped" in s.title) == (block_size > L)
    assert s.walk_block == walk_block_size(L, block_size)


def test_memory_setting_d_k_changes_only_the_chunked_paths():
    small, large = memory_setting(4096, 16, 64), memory_setting(4096, 256, 64)
    assert small.at["naive"] == large.at["naive"]
    assert small.at["chunked"] < large.at["chunked"] and small.at["tiled"] < large.at["tiled"]


@pytest.mark.parametrize(
    ("args", "error"),
    [((300, 64, 512), ValueError), ((4096, 48, 512), ValueError), ((4096, 64, 3), ValueError),
     ((4096.0, 64, 512), TypeError), ((True, 64, 512), TypeError)],
)  # fmt: skip
def test_memory_setting_refuses_values_off_the_grid(args, error):
    with pytest.raises(error):
        memory_setting(*args)


@pytest.mark.parametrize(
    ("L", "block", "walk"),
    [(4096, 512, 2), (8192, 1, 1), (256, 2048, 16), (256, 256, 16), (256, 128, 8),
     (1024, 64, 1), (1024, 128, 2), (2048, 1024, 8)],
)  # fmt: skip
def test_walk_block_size_mirrors_the_number_of_blocks(L, block, walk):
    assert walk_block_size(L, block) == walk


def test_format_bytes():
    assert format_bytes(292) == "292 B"
    assert format_bytes(1024) == "1.0 KiB"
    assert format_bytes(512 * 2**20) == "512.0 MiB"
    assert format_bytes(4 * 2**30) == "4.0 GiB"


# --- the walk ----------------------------------------------------------------------------------


def test_walk_example():
    ex = walk_example()
    assert not ex.keep[:WALK_PADDING].any() and ex.keep[WALK_PADDING:].all()
    assert torch.isinf(ex.scores[:WALK_PADDING]).all()
    torch.testing.assert_close(ex.weights.sum(), torch.tensor(1.0))
    torch.testing.assert_close(ex.weights, torch.softmax(ex.scores, dim=-1))
    torch.testing.assert_close(ex.output, ex.weights @ ex.values)
    chunked = attn_lib.chunked_attention(ex.query[None], ex.keys, ex.values, ex.keep[None],
                                         block_size=3)  # fmt: skip
    torch.testing.assert_close(chunked[0], ex.output)
    ex.output.zero_()  # a copy: the cache is untouched
    assert walk_example().output.abs().sum() > 0


@pytest.mark.parametrize("block_size", range(1, WALK_L + 1))
def test_online_softmax_walk(block_size):
    walk = online_softmax_walk(block_size)
    assert walk is online_softmax_walk(block_size)
    assert walk.n_steps == math.ceil(WALK_L / block_size)
    ex = walk.example
    torch.testing.assert_close(walk.states[-1].output, ex.output)
    assert walk.gaps[-1] < 1e-5
    for i, s in enumerate(walk.states):
        assert s.block == i and s.start == i * block_size
        assert walk.l_before(i) == (0.0 if i == 0 else walk.states[i - 1].l)
        assert_no_nan(s.acc)
        assert not math.isnan(s.l)
        if s.m_old > -math.inf:
            assert s.rescale == pytest.approx(math.exp(s.m_old - s.m), rel=1e-6)
        assert s.m == pytest.approx(float(ex.scores[: s.stop].max()))
    torch.testing.assert_close(walk.acc_before(0), torch.zeros(4))


def test_walk_with_small_blocks_starts_empty():
    first = online_softmax_walk(2).states[0]
    assert first.m == -math.inf and first.rescale == 0.0 and first.l == 0.0
    text = nb10_cost_views.walk_step_text(online_softmax_walk(2), 0)
    assert "NaN" in text and "guard" in text
    assert "The max rose" in nb10_cost_views.walk_step_text(online_softmax_walk(2), 5)
    assert "r = 1" in nb10_cost_views.walk_step_text(online_softmax_walk(2), 7)


@pytest.mark.parametrize("bad", [0, 17, -1])
def test_online_softmax_walk_refuses_bad_block_sizes(bad):
    with pytest.raises(ValueError):
        online_softmax_walk(bad)
    with pytest.raises(TypeError):
        online_softmax_walk(2.0)


# --- measuring ---------------------------------------------------------------------------------


def test_time_attention_protocol():
    calls = []

    def fast(q, k, v):
        calls.append(("fast", q.shape[1]))

    def slow(q, k, v):
        calls.append(("slow", q.shape[1]))

    threads = torch.get_num_threads()
    t = time_attention({"fast": fast, "slow": slow}, [8, 16, 32], d_k=4, repeats=3,
                       max_length={"slow": 16})  # fmt: skip
    assert torch.get_num_threads() == threads  # restored
    assert t.methods == ("fast", "slow") and t.lengths == (8, 16, 32) and t.skipped == ()
    assert sorted(t.ms["fast"]) == [8, 16, 32] and sorted(t.ms["slow"]) == [8, 16]
    assert calls.count(("fast", 8)) == 4 and calls.count(("slow", 32)) == 0  # warm-up + 3
    assert calls[:2] == [("fast", 8), ("slow", 8)]  # interleaved
    assert "—" in t.table() and t.threads == 1
    assert math.isfinite(t.slope("fast", 8))


def test_time_attention_budget_skips_only_long_lengths():
    t = time_attention({"m": lambda q, k, v: q @ k.mT}, [8, 16, 32, 64], d_k=4, repeats=1,
                       budget_s=0.0, budget_from=32)  # fmt: skip
    assert sorted(t.ms["m"]) == [8, 16] and t.skipped == (32, 64)
    with pytest.raises(ValueError):
        time_attention({}, [8])


def test_largest_new_tensor_and_matmul_flops():
    a, b = torch.randn(3, 5), torch.randn(5, 7)
    t = largest_new_tensor(lambda: (a @ b, a.T, a[:2]))
    assert t.nbytes == 3 * 7 * 4 and t.shape == (3, 7)
    assert largest_new_tensor(lambda: a.view(15)).nbytes == 0  # a view makes nothing new
    assert matmul_flops(lambda: a @ b) == 2 * 3 * 5 * 7
    q = k = v = torch.randn(1, 64, 8)
    naive = matmul_flops(lambda: attn_lib.scaled_dot_product_attention(q, k, v))
    assert naive == matmul_flops(lambda: attn_lib.chunked_attention(q, k, v, block_size=8))
    assert largest_new_tensor(lambda: attn_lib.chunked_attention(q, k, v, block_size=8)).shape \
        == (1, 64, 8)  # fmt: skip


def test_matmul_flops_agrees_with_flop_counter_mode():
    from torch.utils.flop_counter import FlopCounterMode

    g = torch.Generator().manual_seed(0)
    a, b, c = torch.randn(3, 5, generator=g), torch.randn(5, 7, generator=g), torch.randn(3, 7)
    x, y = torch.randn(2, 3, 4, generator=g), torch.randn(2, 4, 6, generator=g)
    q, k, v = (torch.randn(2, 10, 6, generator=g) for _ in range(3))
    cases = [
        lambda: torch.addmm(c, a, b),
        lambda: torch.baddbmm(torch.zeros(2, 3, 6), x, y),
        lambda: x @ y,
        lambda: attn_lib.scaled_dot_product_attention(q, k, v),
        lambda: attn_lib.chunked_attention(q, k, v, block_size=3, query_block_size=4),
    ]
    for fn in cases:
        with FlopCounterMode(display=False) as counter:
            fn()
        assert matmul_flops(fn) == counter.get_total_flops() > 0
    # FlopCounterMode does not count matrix-vector and vector-vector products; we do.
    assert matmul_flops(lambda: a @ b[:, 0]) == 2 * 3 * 5
    assert matmul_flops(lambda: a[0] @ b[:, 0]) == 2 * 5
    # The reader's own dot products count; attn_lib's input checks (a dot product of each
    # input with itself) do not, whatever the sizes.
    assert matmul_flops(lambda: torch.dot(a[0], b[:, 0])) == 2 * 5
    q, k, v = (torch.randn(3, 40, 16, generator=g) for _ in range(3))
    flops = matmul_flops(lambda: attn_lib.scaled_dot_product_attention(q, k, v))
    assert flops == 2 * 3 * 40 * 40 * (16 + 16)


# --- figures -----------------------------------------------------------------------------------


def test_static_figures():
    setting = memory_setting()
    walk = online_softmax_walk(setting.walk_block)
    with no_new_figures():
        figs = [
            nb10_cost_views.plot_chunked_setting(setting, walk, 5),
            nb10_cost_views.plot_walk_gallery(online_softmax_walk(4)),
            nb10_cost_views.plot_memory_vs_length(memory_table([64, 128, 256, 512, 1024, 2048])),
            nb10_cost_views.plot_attention_timings(AttentionTimings(
                methods=("attn_lib", "SDPA"), lengths=(512, 1024, 2048),
                ms={"attn_lib": {512: 1.0, 1024: 4.0, 2048: 16.0}, "SDPA": {512: 2.0, 1024: 8.0}},
                skipped=(2048,), seconds=0.1, threads=1, d_k=64, repeats=3)),
        ]  # fmt: skip
        assert [len(f.axes) for f in figs] == [5, 8, 1, 1]
        for f in figs:
            plt.close(f)
    with pytest.raises(ValueError):
        nb10_cost_views.plot_chunked_setting(setting, walk, walk.n_steps)


# --- the dashboard -----------------------------------------------------------------------------


def shown(d: ChunkedAttentionDashboard) -> dict:
    view = d.view
    return {
        "lines": {m: view.mem_lines[m].get_ydata() for m in MEMORY_METHODS},
        "bars": [p.get_width() for p in view.bars.patches],
        "out": [p.get_height() for p in view.out_bars.patches],
        "text": view.step_text.get_text(),
    }


def check_state(d: ChunkedAttentionDashboard) -> None:
    values = d.values
    setting = memory_setting(values["L"], values["d_k"], values["block_size"])
    walk = online_softmax_walk(setting.walk_block)
    assert d.setting is setting and d.walk is walk
    assert d.controls["step"].max == walk.n_steps and 1 <= values["step"] <= walk.n_steps
    state = walk.states[values["step"] - 1]
    data = shown(d)
    for m in MEMORY_METHODS:
        np.testing.assert_array_equal(data["lines"][m], setting.table.bytes(m).numpy())
    np.testing.assert_allclose(data["out"], state.output.numpy())
    assert data["text"] == nb10_cost_views.walk_step_text(walk, values["step"] - 1)
    assert all(np.isfinite(v).all() for v in data["lines"].values())
    assert np.isfinite(data["out"]).all() and np.isfinite(data["bars"]).all()
    assert d.last_error is None and d.status.value == ""
    decode(png_of(d))


def test_default_dashboard(dash):
    assert dash.values == {"L": 4096, "d_k": 64, "block_size": 512, "step": 6}
    check_state(dash)
    assert dash.walk.n_steps == 8 and dash.controls["step"].max == 8
    image = decode(png_of(dash))
    assert image.shape[:2] == (round(7.2 * 72), round(11.0 * 72))
    assert "Dashboard" in dash._repr_mimebundle_()["text/plain"]


@pytest.mark.parametrize("name", ["L", "d_k", "block_size", "step"])
def test_every_control_at_min_middle_max(dash, name):
    control = dash.controls[name]
    for value, previous in each_value(dash, name):  # holds the value; one figure, reused
        check_state(dash)
        if value != control_values(control)[0]:
            assert png_of(dash) != previous


def test_step_range_follows_L_and_block(dash):
    # One dashboard for every (L, block) pair: building one per pair cost ~1 s each.
    for L, block_size in itertools.product(COST_LENGTHS, COST_BLOCK_SIZES[::3] + (2048,)):
        dash.controls["step"].value = dash.controls["step"].max  # the range shrinks under it
        dash.set(L=L, block_size=block_size)
        check_state(dash)
        assert dash.controls["step"].max == math.ceil(WALK_L / walk_block_size(L, block_size))


def test_one_render_per_change(dash, monkeypatch):
    renders = []
    original = dash.render
    monkeypatch.setattr(dash, "render", lambda **v: (renders.append(v), original(**v)))
    dash.controls["step"].value = 8
    dash.controls["block_size"].value = 2048  # 2 blocks: the step is clipped from 8 to 2
    assert dash.values["step"] == 2
    assert len(renders) == 2  # the clipped step did not trigger a second, half-set redraw
    check_state(dash)


def test_every_d_k(dash):
    naive = None
    for d_k in COST_D_KS:
        dash.controls["d_k"].value = d_k
        check_state(dash)
        naive = dash.setting.at["naive"] if naive is None else naive
        assert dash.setting.at["naive"] == naive


def test_bad_initial_values():
    with pytest.raises(ValueError):
        ChunkedAttentionDashboard(L=300)
    with pytest.raises(ValueError):
        ChunkedAttentionDashboard(step=0)
    d = ChunkedAttentionDashboard(L=2048, block_size=2048, step=5)  # one block: step 1
    assert d.values["step"] == 1 and d.controls["step"].max == 1
    d.close()
    with pytest.raises(RuntimeError):
        d.update()




def test_set_does_not_depend_on_the_order_of_its_arguments(dash):
    # Found in review: the step slider's maximum follows L and the block size, so setting the
    # step first clipped it to the old maximum (step=16 became 8).
    fresh = ChunkedAttentionDashboard(block_size=256, step=16)
    try:
        expected = decode(png_of(fresh))
        for order in ({"step": 16, "block_size": 256}, {"block_size": 256, "step": 16}):
            dash.set(block_size=512, step=1)  # back to a setting with fewer steps
            dash.set(**order)
            assert dash.values == fresh.values, order
            np.testing.assert_array_equal(decode(png_of(dash)), expected)
    finally:
        fresh.close()
