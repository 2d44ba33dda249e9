"""The thread-index arithmetic of every layout (`FunctionLowering.thread_base`, `is_owner`) is
emitted once per layout, appended to the kernel's entry block, whichever block first
asks for it (here the body of a loop); the entry block's branch to the body comes last."""
from __future__ import annotations

import numpy as np
import pytest

import tilejit
import tilejit.language as tl
from tilejit.gpu.llvm.lowering import FunctionLowering
from toolchain_paths import needs_lld, needs_ptxas


@tilejit.jit
def _row_sums_in_a_loop(x_ptr, out_ptr, n_rows, N: tl.constexpr):
    cols = tl.arange(0, N)
    for row in range(n_rows):
        x = tl.load(x_ptr + row * N + cols)
        total = tl.sum(x, axis=0)                   # a reduction: lane/warp arithmetic per layout
        tl.store(out_ptr + row + cols * 0, total + tl.cumsum(x, axis=0), mask=cols == N - 1)


@pytest.mark.parametrize("target", [pytest.param("cuda:90", marks=needs_ptxas), pytest.param("hip:gfx942", marks=needs_lld)])
def test_thread_index_values_are_computed_once_in_the_entry_block(target, tmp_path, monkeypatch):
    asked, computed = [], []

    def recording(name, real, log):
        def wrapper(self, layout):
            log.append((name, layout, self.b.block.name, self.b._anchor == len(self.b.block.instructions)))
            return real(self, layout)
        return wrapper
    for public in ("thread_base", "is_owner"):
        monkeypatch.setattr(FunctionLowering, public, recording(public, getattr(FunctionLowering, public), asked))
        private = "_" + public
        monkeypatch.setattr(FunctionLowering, private, recording(public, getattr(FunctionLowering, private), computed))
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))
    kernel = _row_sums_in_a_loop.warmup("*fp32", "*fp32", "i32", N=256, num_warps=4, grid=(1,), target=target)
    assert any(block.startswith("for.") for _, _, block, _ in asked)       # asked for inside the loop ...
    assert computed and all(block == "entry" and appending for _, _, block, appending in computed)  # ... made there
    assert len(computed) == len({(name, layout) for name, layout, _, _ in computed})   # once per layout
    entry = kernel.asm["llir"].split("\nbody:", 1)[0]
    assert entry.rstrip().endswith('br label %"body"')   # the entry block is closed last


def test_results_are_unchanged_on_the_interpreter():
    x = np.random.default_rng(0).standard_normal((5, 256)).astype(np.float32)
    out = np.zeros(5, np.float32)
    _row_sums_in_a_loop[(1,)](x, out, 5, N=256)
    np.testing.assert_allclose(out, x.sum(1) + x.cumsum(1)[:, -1], rtol=1e-4, atol=1e-4)
