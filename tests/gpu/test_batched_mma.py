"""A 3-D (batched) `tl.dot` on sm_80+ runs on mma.sync, as Triton's does: an `#ttg.nvidia_mma` layout
with every warp along the batch (warpsPerCTA [num_warps, 1, 1], instrShape [1, 16, 8]) and, per
batch, the m16n8 tiles of the 2-D lowering. Cross-compiled here (results are checked on a GPU by the
language suite's batched dots and Triton's test_dot3d); the host runs no mma."""
import re

import pytest

import tilejit
import tilejit.language as tl


@tilejit.jit
def _batched(a_ptr, b_ptr, c_ptr, B: tl.constexpr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
             OUT: tl.constexpr):
    bb = tl.arange(0, B)[:, None, None]
    m = tl.arange(0, M)[None, :, None]
    n = tl.arange(0, N)[None, None, :]
    a = tl.load(a_ptr + bb * M * K + m * K + tl.arange(0, K)[None, None, :])
    b = tl.load(b_ptr + bb * K * N + tl.arange(0, K)[None, :, None] * N + n)
    tl.store(c_ptr + bb * M * N + m * N + n, tl.dot(a, b, out_dtype=OUT))


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))


def _compile(elem, out, B=4, M=32, N=32, K=32, num_warps=4, target="cuda:90"):
    out_ptr = {tl.float32: "*fp32", tl.float16: "*fp16", tl.int32: "*i32"}[out]
    return _batched.warmup(f"*{elem}", f"*{elem}", out_ptr, B=B, M=M, N=N, K=K, OUT=out, num_warps=num_warps,
                           grid=(1,), target=target)


@pytest.mark.parametrize("elem, out, instruction", [
    ("fp16", tl.float32, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"),
    ("fp16", tl.float16, "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16"),
    ("bf16", tl.float32, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"),
    ("fp32", tl.float32, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"),
    ("i8", tl.int32, "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.s8.s32"),
])
def test_batched_dots_use_mma_sync(elem, out, instruction):
    kernel = _compile(elem, out)
    assert re.search(r"#ttg\.nvidia_mma<\{versionMajor = 2, versionMinor = 0, warpsPerCTA = \[4, 1, 1\], "
                     r"instrShape = \[1, 16, 8\]", kernel.asm["ttgir"])
    ptx = kernel.asm["ptx"]
    assert "fma.rn" not in ptx or elem != "fp16"
    # B=4 batches of a 32x32 result, one batch a warp: 2x4 tiles of m16n8, K/16 (or /8, /32) steps each
    per_tile = {"fp32": 4, "i8": 1}.get(elem, 2)
    assert ptx.count(instruction) == 2 * 4 * per_tile


def test_fewer_batches_than_warps_and_more():
    # 2 batches on 4 warps (two warps a batch, replicated) and 8 batches on 4 warps (two a warp)
    for batch, calls in ((2, 2 * 4 * 2), (8, 2 * 2 * 4 * 2)):
        ptx = _compile("fp16", tl.float32, B=batch).asm["ptx"]
        assert ptx.count("mma.sync.aligned.m16n8k16") == calls, batch


def test_sm80_too_and_no_wgmma():
    for target in ("cuda:80", "cuda:90"):
        ptx = _compile("fp16", tl.float32, target=target).asm["ptx"]
        assert "mma.sync.aligned.m16n8k16" in ptx and "wgmma" not in ptx


def test_shapes_mma_cannot_take_stay_on_fma():
    # M = 8 is below mma.sync's 16 rows: the FMA dot, as before
    kernel = _batched.warmup("*fp16", "*fp16", "*fp32", B=2, M=8, N=16, K=16, OUT=tl.float32, num_warps=4,
                             grid=(1,), target="cuda:90")
    assert "mma.sync" not in kernel.asm["ptx"] and "nvidia_mma" not in kernel.asm["ttgir"]
