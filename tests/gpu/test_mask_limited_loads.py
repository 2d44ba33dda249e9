"""A load whose mask, not its pointer, limits its width (Liger's multi-token attention masks the future
with `col > row`, one element at a time) takes the layout of the wider store its value goes to, as
Triton lays accesses out by their pointers: scalar loads in the store's layout, no conversion between
them. Before, the load got a one-element layout of its own, and a 512x512 tile went through 130 KiB of
shared memory to reach the store. A load whose stores are as narrow keeps its own layout."""
import numpy as np
import pytest

import tilejit
import tilejit.language as tl
from tilejit import ir

from simt_runner import run

RNG = np.random.default_rng(17)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))


@tilejit.jit
def _mask_future(x_ptr, y_ptr, L, fill: tl.constexpr, BLOCK: tl.constexpr):
    """Liger's `_mask_fwd_kernel`: the future (col > row) loaded as `fill`, stored within bounds."""
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    in_bounds = (rows[:, None] < L) & (cols[None, :] < L)
    offs = rows[:, None] * L + cols[None, :]
    future = cols[None, :] > rows[:, None]
    x = tl.load(x_ptr + offs, mask=in_bounds & ~future, other=fill)
    tl.store(y_ptr + offs, x, mask=in_bounds)


@tilejit.jit
def _scale_row(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """Load and store under the same bound `cols < n` (n of no known alignment): both one element."""
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + tl.program_id(0) * n + cols, mask=cols < n, other=0.0)
    tl.store(y_ptr + tl.program_id(0) * n + cols, x * 2, mask=cols < n)


def _accesses(kernel):
    module = ir.parse_module(kernel.asm["ttgir"])
    ops = list(module.functions[0].walk())
    load = next(op for op in ops if op.name == "tt.load")
    store = next(op for op in ops if op.name == "tt.store")
    return load.results[0].type.encoding, store.operands[1].type.encoding, ops


def test_a_load_narrowed_by_its_mask_takes_its_stores_layout():
    kernel = _mask_future.warmup("*fp16", "*fp16", 64, fill=-1.0, BLOCK=64, num_warps=4, grid=(1, 1),
                                 target="cuda:90")
    load, store, ops = _accesses(kernel)
    assert load == store and load.size_per_thread == (1, 8)
    assert not any(op.name == "ttg.convert_layout" for op in ops)
    assert kernel.metadata.shared == 0
    ptx = kernel.asm["ptx"]
    assert "ld.global.v4" not in ptx and "st.global.v4.b32" in ptx   # one-element loads, 16-byte stores


def test_a_load_as_narrow_as_its_stores_keeps_its_layout():
    kernel = _scale_row.warmup("*fp32", "*fp32", 1000, BLOCK=1024, num_warps=4, grid=(1,), target="cuda:90")
    load, store, ops = _accesses(kernel)
    assert load == store and load.size_per_thread == (1,)


@pytest.mark.parametrize("L, block, warps", [(64, 64, 4), (50, 32, 2)])
def test_the_masked_future_runs_right(L, block, warps):
    x = RNG.standard_normal((L, L)).astype(np.float32)
    kernel = _mask_future.warmup("*fp32", "*fp32", L, fill=-7.0, BLOCK=block, num_warps=warps,
                                 grid=(1, 1), target="cuda:90")
    y = np.zeros_like(x)
    grid = (-(-L // block), -(-L // block))
    run(kernel.asm["llir"], [x, y, L], warps, grid=grid, shared=kernel.metadata.shared)
    want = np.where(np.triu(np.ones((L, L), bool), 1), np.float32(-7.0), x)
    np.testing.assert_array_equal(y, want)
