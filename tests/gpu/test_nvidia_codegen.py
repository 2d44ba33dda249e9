"""What the NVIDIA code of the benchmark-shaped kernels must look like (compiled on the host down to
PTX): vector widths, 32-bit shared addresses, per-k-step fragment reads, the occupancy hint."""
import re

import pytest

import tilejit
import tilejit.language as tl


@tilejit.jit
def _row_sum_loop(x_ptr, out_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, n_cols, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


@tilejit.jit
def _matmul(a_ptr, b_ptr, c_ptr, K, stride_am, stride_bk, stride_cm,
            BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    offs_m = tl.program_id(0) * BM + tl.arange(0, BM)
    offs_n = tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :]
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        acc = tl.dot(tl.load(a_ptrs), tl.load(b_ptrs), acc)
        a_ptrs += BK
        b_ptrs += BK * stride_bk
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :], acc.to(tl.float16))


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))


def _ptx(kernel, *args, target="cuda:90", **kwargs):
    return kernel.warmup(*args, grid=(1,), target=target, **kwargs).asm["ptx"]


def test_loop_over_columns_loads_vectors():
    """`off + tl.arange(0, BLOCK)` with `off` the induction variable of `range(0, n, BLOCK)` is a
    multiple of BLOCK: the loads are 8-byte vectors (4 fp16 a thread), not 2-byte scalars."""
    ptx = _ptx(_row_sum_loop, "*fp16", "*fp32", 8192, 8192, BLOCK=1024, num_warps=8)
    loads = re.findall(r"ld\.global\.(\S+)", ptx)
    assert loads and all(kind in ("v2.b32", "v4.b16") for kind in loads), loads


def test_pipelined_matmul_code():
    # sm_80: mma.sync (sm_90 takes wgmma for this tile: test_wgmma.py)
    ptx = _ptx(_matmul, "*fp16", "*fp16", "*fp16", 4096, 4096, 4096, 4096, BM=128, BN=128, BK=64,
               num_warps=8, num_stages=3, target="cuda:80")
    copies = re.findall(r"cp\.async\.cg\.shared\.global \[(%\w+)\], \[%\w+\], (\d+)", ptx)
    assert copies and all(size == "16" for _, size in copies)
    # shared addresses are 32-bit registers (nvptx-short-ptr), not 64-bit pairs
    assert all(reg.startswith("%r") for reg, _ in copies), copies[:4]
    # the fragments of each k-step are read right before its mma.sync: ldmatrix and mma interleave
    ops = re.findall(r"\b(ldmatrix|mma\.sync)\b", ptx)
    first_mma = ops.index("mma.sync")
    assert "ldmatrix" in ops[first_mma:], "every fragment was read before the first mma.sync"
    assert ops.count("mma.sync") == 64
    # two CTAs' 96 KiB of ring buffers exceed sm_80's 163 KiB: no occupancy hint there
    assert ".minnctapersm" not in ptx
    # 8 warps with ~160 registers would fit one CTA per SM: on sm_90 (wgmma) ask ptxas for two
    ptx90 = _ptx(_matmul, "*fp16", "*fp16", "*fp16", 4096, 4096, 4096, 4096, BM=128, BN=128, BK=64,
                 num_warps=8, num_stages=3)
    assert "wgmma.mma_async" in ptx90 and ".minnctapersm 2" in ptx90


def test_small_kernels_get_no_occupancy_hint():
    ptx = _ptx(_row_sum_loop, "*fp16", "*fp32", 8192, 8192, BLOCK=1024, num_warps=8)
    assert ".minnctapersm" not in ptx
