"""Dots of one loop that share only indices (Liger's MoE backward dx: gate and up accumulators, 64x128
tiles at 4 warps, summed after the loop) run wgmma on sm_90, the warpgroup along M, as Triton's:
Triton looks for chains forward from a dot's result only. tilejit's chain rule (any connection in
the block) asked for warps along N, which one warpgroup cannot give, and the dots fell back to
mma.sync (the kernel ran at 0.76x Triton's on an H200, with Triton's config not even chosen)."""
import os
import re
import sys

import pytest

from toolchain_paths import needs_ptxas

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "language"))
from dot_kernels import paired_projection_kernel  # noqa: E402

pytestmark = needs_ptxas


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))


def test_dots_sharing_only_indices_take_wgmma():
    kernel = paired_projection_kernel.warmup("*fp16", "*fp16", "*fp32", 64, K=128, N=128, BM=64, BN=128, BK=32,
                                             num_warps=4, grid=(1,), target="cuda:90")
    layouts = re.findall(r"tt\.dot .*-> \(tensor<64x128xf32, #ttg\.nvidia_mma<\{versionMajor = (\d), versionMinor = 0, "
                         r"warpsPerCTA = \[(\d), (\d)\]", kernel.asm["ttgir"])
    assert layouts == [("3", "4", "1")] * 2
    ptx = kernel.asm["ptx"]
    assert len(re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n128k16\.f32\.f16\.f16", ptx)) == 4
    assert "mma.sync" not in ptx

