"""Sums accumulated over `tl.static_range` blocks under runtime `if`s, then atomic-added (Liger's
attention-residual backward): the sums are computed in the layout of the 16-bit loads they add, and
converted once each, before their atomics. Before, the atomics' wish for their own (fp32) layout
reached up the `if`s' yields into every block, and each block converted its tiles there and back:
26 conversions of 4096 values a token in Liger's kernel, 84 barriers; now 2 conversions, as Triton."""
import os
import sys

import pytest

from tilejit import ir
from toolchain_paths import needs_lld, needs_ptxas

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "language"))
from accumulation_kernels import blockwise_gradient_sums  # noqa: E402


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))


@pytest.mark.parametrize("target", [pytest.param("cuda:90", marks=needs_ptxas),
                                    pytest.param("hip:gfx942", marks=needs_lld)])
def test_sums_under_ifs_convert_once_before_their_atomics(target):
    kernel = blockwise_gradient_sums.warmup("*bf16", "*bf16", "*fp32", "*bf16", 8, 4096, 4096, BLOCK_D=4096,
                                            MAX_BLOCKS=8, num_warps=8, grid=(1,), target=target)
    func = ir.parse_module(kernel.asm["ttgir"]).functions[0]
    converts = [op for op in func.walk() if op.name == "ttg.convert_layout"]
    atomics = [op for op in func.walk() if op.name == "tt.atomic_rmw"]
    assert len(atomics) == 2 and len(converts) == 2
    assert all(c.parent is func.regions[0].blocks[0] for c in converts)   # none inside the ifs
    assert {id(a.operands[1].owner) for a in atomics} == {id(c) for c in converts}


@needs_ptxas
def test_sums_under_ifs_run_on_the_host():
    """The cuda:90 lowering of the same kernel (vector atomics, 16 elements a thread) run with
    simt_runner: three tokens, three of eight blocks live."""
    import numpy as np
    from simt_runner import run
    kernel = blockwise_gradient_sums.warmup("*fp16", "*fp16", "*fp32", "*fp16", 3, 3, 4096, BLOCK_D=4096,
                                            MAX_BLOCKS=8, num_warps=8, grid=(1,), target="cuda:90")
    assert "atom.global.gpu.acq_rel.add.v4.f32" in kernel.asm["llir"]
    n_blocks, tokens, D = 3, 3, 4096
    rng = np.random.default_rng(3)
    v = rng.integers(-4, 5, (n_blocks, tokens, D)).astype(np.float16)
    w = rng.integers(-3, 4, D).astype(np.float16)
    dw, dv = np.zeros(2 * D, np.float32), np.zeros((n_blocks, tokens, D), np.float16)
    run(kernel.asm["llir"], [v, w, dw, dv, n_blocks, tokens, D], 8, grid=tokens, shared=kernel.metadata["shared"])
    v32, w32 = v.astype(np.float32), w.astype(np.float32)
    weights = np.arange(1, n_blocks + 1, dtype=np.float32)[:, None, None]
    np.testing.assert_array_equal(dw[:D], (v32 * weights).sum(axis=(0, 1)))
    np.testing.assert_array_equal(dw[D:], (v32 * w32).sum(axis=(0, 1)))
    np.testing.assert_array_equal(dv, (v32 * w32).astype(np.float16))
