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



def test_two_accumulating_dots_stay_in_flight_together():
    """With both operands pipelined into wgmma tiles (BK 64: 128-byte rows), both dots accumulate
    into carried values only. As Triton, the loop commits their two groups back to back and waits
    once, down to two groups, after the second: the previous iteration's are done (its buffers are
    refilled next) while this iteration's both run. Waiting down to one after each dot kept a single
    group queued while the warps issued the next copies."""
    kernel = paired_projection_kernel.warmup("*fp16", "*fp16", "*fp32", 64, K=256, N=128, BM=64, BN=128, BK=64,
                                             num_warps=4, grid=(1,), target="cuda:90")
    ptx = kernel.asm["ptx"]
    start = ptx.index("cp.async.wait_group")
    loop = ptx[start:ptx.rindex("cp.async.commit_group")]
    assert "ldmatrix" not in loop   # A is read through descriptors too
    commits = [m.start() for m in re.finditer(r"wgmma\.commit_group", loop)]
    waits = re.findall(r"wgmma\.wait_group\.sync\.aligned (\d);", loop)
    assert len(commits) == 2 and waits == ["2"]
    waited = loop.index("wgmma.wait_group.sync.aligned 2;")
    assert commits[1] < waited
    after = loop[waited:]
    assert after.index("bar.sync") < after.index("cp.async.cg.shared.global")
    # the exit waits for both accumulators in one wait, before the sum is stored
    exit_part = ptx[ptx.rindex("cp.async.commit_group"):]
    assert re.findall(r"wgmma\.wait_group\.sync\.aligned (\d);", exit_part) == ["0"]
    assert exit_part.index("wgmma.wait_group") < exit_part.index("st.global")


def _descriptor_swizzles(ptx: str) -> set:
    """The swizzle modes (PTX ISA matrix descriptor bits 62-63: 1 128B, 2 64B, 3 32B) of the
    descriptor constants the PTX ors or adds into shared addresses."""
    found = set()
    for text in re.findall(r"(?:or\.b64|add\.s64)\s+%rd\d+, %rd\d+, (-?\d{12,});", ptx):
        found.add((int(text) % (1 << 64)) >> 62)
    return found


def test_k_major_a_of_64_byte_rows_is_read_through_a_64_byte_swizzle():
    """BK 32 f16: A's rows are 64 bytes along K. As Triton (`swizzlingByteWidth = 64`), its tile takes
    the 64-byte swizzle and wgmma reads it through descriptors; it was read into registers with
    ldmatrix, which kept the dots' groups from staying in flight."""
    kernel = paired_projection_kernel.warmup("*fp16", "*fp16", "*fp32", 64, K=256, N=128, BM=64, BN=128, BK=32,
                                             num_warps=4, grid=(1,), target="cuda:90")
    ptx = kernel.asm["ptx"]
    loop = ptx[ptx.index("cp.async.wait_group"):ptx.rindex("cp.async.commit_group")]
    assert "ldmatrix" not in loop
    assert re.findall(r"wgmma\.wait_group\.sync\.aligned (\d);", loop) == ["2"]
    assert _descriptor_swizzles(ptx) == {1, 2}   # B (128-byte rows along N) keeps the 128-byte one
