"""Scans, reductions and masked accesses compiled for cuda:90 and run on the host by `simt_runner`
(the kernel's LLVM IR, one OS thread per GPU thread): the GPU lowering's results, checked without a GPU.

Both bugs here gave wrong results only on the H100: a (value, int64 index) scan whose index result got
another layout than the one the lowering wrote it in (Triton's test_scan2d cummax), and argmax over
fp64 whose int32 indices overwrote half the values in the cross-warp scratch (test_reduce). The masks
of every comparison against a multiple of 16: `offs <= n` and `offs != n` were taken as alike over
groups of 4 and accessed 128 bits at a time, reading and writing past n.
"""
import os
import sys

import numpy as np
import pytest

import tilejit
import tilejit.language as tl
from tilejit.frontend.source import ASTSource

from simt_runner import run

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "language"))
from masked_kernels import COMPARE_MASKS, copy_masked_by_compare  # noqa: E402
from scan_kernels import cummax_index_kernel, np_cummax_index  # noqa: E402

RNG = np.random.default_rng(7)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))


@pytest.mark.parametrize("shape, axis, reverse, num_warps", [
    ((32, 16), 1, True, 4), ((32, 16), 0, False, 4), ((2, 1024), 1, False, 16), ((2, 1024), 0, True, 16)])
def test_running_max_with_index(shape, axis, reverse, num_warps):
    x = RNG.integers(-6, 7, shape).astype(np.int32)   # ties: the later index in scan order wins
    kernel = cummax_index_kernel.warmup("*i32", "*i64", M=shape[0], N=shape[1], AXIS=axis, REVERSE=reverse,
                                  num_warps=num_warps, grid=(1,), target="cuda:90")
    z = np.full(shape, -1, np.int64)
    run(kernel.asm["llir"], [x, z], num_warps)
    np.testing.assert_array_equal(z, np_cummax_index(x, axis, reverse))


@tilejit.jit
def _argmax(x_ptr, out_ptr, N: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, N))
    tl.store(out_ptr, tl.argmax(x, axis=0))
    tl.store(out_ptr + 1, tl.argmin(x, axis=0))


@pytest.mark.parametrize("dtype, sig", [(np.float64, "*fp64"), (np.int64, "*i64"), (np.int8, "*i8")])
def test_argmax_across_warps(dtype, sig):
    x = (RNG.integers(-50, 50, 1024) if dtype != np.float64 else RNG.standard_normal(1024)).astype(dtype)
    kernel = _argmax.warmup(sig, "*i32", N=1024, num_warps=4, grid=(1,), target="cuda:90")
    out = np.full(2, -1, np.int32)
    run(kernel.asm["llir"], [x, out], 4)
    np.testing.assert_array_equal(out, [np.argmax(x), np.argmin(x)])


@tilejit.jit
def _bf16_scans(x_ptr, s_ptr, p_ptr, M: tl.constexpr, N: tl.constexpr, REVERSE: tl.constexpr):
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + offs).to(tl.bfloat16)
    s = tl.cumsum(x, 1, reverse=REVERSE)
    p = tl.cumprod(x, 1, reverse=REVERSE)
    tl.static_assert(s.dtype == tl.bfloat16)
    tl.store(s_ptr + offs, s.to(tl.float32))
    tl.store(p_ptr + offs, p.to(tl.float32))


@pytest.mark.parametrize("reverse", [False, True])
def test_bf16_scans_stay_bf16(reverse):
    shape = (4, 64)
    x = RNG.choice([1.0, -1.0, 2.0, 0.5], shape).astype(np.float32)   # sums and products stay exact
    kernel = _bf16_scans.warmup("*fp32", "*fp32", "*fp32", M=4, N=64, REVERSE=reverse, num_warps=4, grid=(1,),
                                target="cuda:90")
    s, p = np.zeros(shape, np.float32), np.zeros(shape, np.float32)
    run(kernel.asm["llir"], [x, s, p], 4)
    xs = x[:, ::-1] if reverse else x
    ref_s, ref_p = np.cumsum(xs, 1), np.cumprod(xs, 1)
    if reverse:
        ref_s, ref_p = ref_s[:, ::-1], ref_p[:, ::-1]
    np.testing.assert_array_equal(s, ref_s)
    np.testing.assert_array_equal(p, ref_p)


@tilejit.jit
def _chained_sums(x_ptr, out_ptr, D0: tl.constexpr, D1: tl.constexpr, D2: tl.constexpr, D3: tl.constexpr,
                  D4: tl.constexpr, P0: tl.constexpr, P1: tl.constexpr, P2: tl.constexpr, P3: tl.constexpr,
                  P4: tl.constexpr, R0: tl.constexpr, R1: tl.constexpr, R2: tl.constexpr):
    """Triton's test_chained_reductions: a 5-D permute, then three sums each over the last's result."""
    vals = tl.load(x_ptr + tl.arange(0, D0 * D1 * D2 * D3 * D4).reshape(D0, D1, D2, D3, D4))
    vals = tl.permute(vals, [P0, P1, P2, P3, P4])
    r = tl.sum(tl.sum(tl.sum(vals, R0), R1), R2)
    tl.store(out_ptr + tl.arange(0, r.shape[0] * r.shape[1]).reshape(r.shape), r)


@pytest.mark.parametrize("shape, perm, dims", [((4, 32, 32, 4, 2), (2, 1, 0, 3, 4), (3, 1, 0)),
                                               ((8, 2, 32, 4, 16), (4, 0, 1, 3, 2), (0, 2, 0))])
def test_chained_reductions_convert_to_the_slice_the_next_one_wants(shape, perm, dims):
    """The backward layout walk fixes the last reduction's operand first; the middle reduction's
    result was then sliced from another layout than its operand's: wrong sums on the H100 (6 of 8)
    for the first case, an internal error for the second. Its operand is now converted."""
    x = RNG.integers(0, 1000, shape).astype(np.int32)
    expected = np.transpose(x, perm).sum(dims[0]).sum(dims[1]).sum(dims[2])
    out = np.zeros(expected.shape, np.int32)
    kernel = _chained_sums.warmup(x, out, *shape, *perm, *dims, grid=(1,), target="cuda:90", num_warps=4)
    run(kernel.asm["llir"], [x, out], 4)
    np.testing.assert_array_equal(out, expected)


@tilejit.jit
def _sums_and_maxes(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, AXIS: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :])
    s = tl.sum(x, axis=AXIS)
    mx = tl.max(x, axis=AXIS)
    K: tl.constexpr = N if AXIS == 0 else M
    tl.store(out_ptr + tl.arange(0, K), s)
    tl.store(out_ptr + K + tl.arange(0, K), mx)


@pytest.mark.parametrize("shape, axis, num_warps", [
    ((1, 4096), 1, 16),   # a whole row over 16 warps: partials read one per lane, shuffled
    ((4, 256), 1, 8),     # rows over 8 warps, lanes along the row
    ((64, 8), 0, 8),      # down the columns: lanes along the axis too
    ((256, 4), 0, 16),
    ((4, 64), 0, 4)])     # warps along the axis, fewer lanes than warps there: partials read per warp
def test_reductions_across_warps(shape, axis, num_warps):
    x = RNG.integers(-1000, 1000, shape).astype(np.int32)   # integer sums: exact in any order
    kernel = _sums_and_maxes.warmup("*i32", "*i32", M=shape[0], N=shape[1], AXIS=axis, num_warps=num_warps,
                                    grid=(1,), target="cuda:90")
    k = shape[1 - axis]
    out = np.zeros(2 * k, np.int32)
    run(kernel.asm["llir"], [x, out], num_warps)
    np.testing.assert_array_equal(out[:k], x.sum(axis))
    np.testing.assert_array_equal(out[k:], x.max(axis))


def _bf16(x):
    """float32 values rounded to bf16 (to nearest even), as float32."""
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16).astype(np.uint32).view(np.float32)


@tilejit.jit
def _bf16_mul_sub(x_ptr, y_ptr, c_ptr, s_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs).to(tl.bfloat16)
    y = tl.load(y_ptr + offs).to(tl.bfloat16)
    c = tl.load(c_ptr + offs).to(tl.bfloat16)
    s = tl.load(s_ptr + offs).to(tl.bfloat16)
    tl.store(out_ptr + offs, (x * c - y * s + x).to(tl.float32))


def test_bf16_arithmetic_operands_in_order():
    """bf16 mul/sub/add (sm_90's native ops in the IR) take their operands in order and round once each
    (the host does not fuse them)."""
    x, y, c, s = (_bf16(RNG.standard_normal(256).astype(np.float32)) for _ in range(4))
    kernel = _bf16_mul_sub.warmup(*["*fp32"] * 5, BLOCK=256, num_warps=4, grid=(1,), target="cuda:90")
    assert "fsub" in kernel.asm["llir"] and "bfloat" in kernel.asm["llir"]
    out = np.zeros(256, np.float32)
    run(kernel.asm["llir"], [x, y, c, s, out], 4)
    np.testing.assert_array_equal(out, _bf16(_bf16(_bf16(x * c) - _bf16(y * s)) + x))


@tilejit.jit
def _scale_by_group(x_ptr, w_ptr, out_ptr, N: tl.constexpr, GROUP: tl.constexpr, TAG: tl.constexpr):
    """Liger's group norm pattern: a contiguous block times a per-group weight (loaded by offs //
    GROUP, so in another layout): the weight is converted to the block's layout. (TAG: a new
    specialization per test case, so each compiles with its own CHUNK_BYTES.)"""
    offs = tl.arange(0, N)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) * tl.load(w_ptr + offs // GROUP))


@tilejit.jit
def _add_transposed(x_ptr, y_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, TAG: tl.constexpr):
    r, c = tl.arange(0, M)[:, None], tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + r * N + c)      # rows contiguous
    y = tl.load(y_ptr + c * M + r)      # columns contiguous: another layout
    tl.store(out_ptr + r * N + c, x + y)


def test_a_gather_takes_the_layout_of_its_users():
    """Liger's group norm pattern: a weight read at offs // GROUP (no two neighbours adjacent in
    memory) loads in the block's layout, as in Triton, instead of its own and a 16 KiB conversion."""
    x = RNG.standard_normal(4096).astype(np.float32)
    w = RNG.standard_normal(64).astype(np.float32)
    out = np.zeros(4096, np.float32)
    kernel = _scale_by_group.warmup("*fp32", "*fp32", "*fp32", N=4096, GROUP=64, TAG=0, num_warps=4, grid=(1,),
                                    target="cuda:90")
    assert "ttg.convert_layout" not in kernel.asm["ttgir"] and kernel.metadata["shared"] == 0
    run(kernel.asm["llir"], [x, w, out], 4)
    np.testing.assert_array_equal(out, x * np.repeat(w, 64))


@pytest.mark.parametrize("chunk_bytes", [1 << 20, 8192, 1024])
def test_large_conversions_go_through_shared_memory_in_rounds(monkeypatch, chunk_bytes):
    """A conversion bigger than CHUNK_BYTES moves one value of its top register bits per round
    (Liger's fp32 group norm once needed 256 KiB of shared memory in one go, past the H100's 227)."""
    from tilejit.gpu.llvm import convert
    monkeypatch.setattr(convert, "CHUNK_BYTES", chunk_bytes)
    # This tile holds 128 registers a thread at 4 warps, so one CTA an SM, which may then take a
    # whole round's 64 KiB: keep the rounds to CHUNK_BYTES to test them.
    monkeypatch.setattr(convert, "_shared_within_occupancy", lambda *args: 0)
    M, N = 64, 256
    a = RNG.standard_normal((M, N)).astype(np.float32)
    b = RNG.standard_normal((M, N)).astype(np.float32)
    out = np.zeros((M, N), np.float32)
    kernel = _add_transposed.warmup("*fp32", "*fp32", "*fp32", M=M, N=N, TAG=chunk_bytes, num_warps=4, grid=(1,),
                                    target="cuda:90")
    whole = M * N * 4
    if chunk_bytes >= whole:
        assert kernel.metadata["shared"] >= whole
    else:   # rounds: the buffer is half the tile or less (as small as the shared register bits allow)
        assert kernel.metadata["shared"] <= whole // 2 + 1024
    run(kernel.asm["llir"], [a, np.ascontiguousarray(b.T), out], 4)
    np.testing.assert_array_equal(out, a + b)


@pytest.mark.parametrize("pred", sorted(COMPARE_MASKS))
def test_mask_from_each_comparison_on_cuda_code(pred):
    # n is specialized as a multiple of 16, so the mask's constancy decides the accesses' width.
    n, block = 48, 64
    src = ASTSource(copy_masked_by_compare, {"x_ptr": "*fp32", "y_ptr": "*fp32", "z_ptr": "*fp32", "n": "i32",
                                             "PRED": "constexpr", "BLOCK": "constexpr"},
                    {"PRED": pred, "BLOCK": block}, {(i,): [["tt.divisibility", 16]] for i in range(4)})
    kernel = tilejit.compile(src, target="cuda:90", options={"num_warps": 1})
    x = RNG.standard_normal(2 * block).astype(np.float32)
    y = np.full(2 * block, -2.0, np.float32)
    z = np.full(2 * block, np.nan, np.float32)
    run(kernel.asm["llir"], [x, y, z, n], 1, grid=2)
    mask = COMPARE_MASKS[pred](np.arange(2 * block), n)
    np.testing.assert_array_equal(y, np.where(mask, x, -2.0))
    np.testing.assert_array_equal(z, np.where(mask, x, -1.0))
