"""Layout conversions inside warps by lane shuffles (`convert_shuffle.py`): the plan checked against
the layouts, and kernels compiled for cuda:90 run on the host by `simt_runner`."""
import numpy as np
import pytest

import tilejit
import tilejit.language as tl
from tilejit.gpu.layouts import BlockedEncoding, DotOperandEncoding, SliceEncoding
from tilejit.gpu.llvm.convert_shuffle import _xor_linear, shuffle_plan
from tilejit_nvidia.layouts import NvidiaMmaEncoding

from simt_runner import run

RNG = np.random.default_rng(11)
MMA_1 = NvidiaMmaEncoding(2, 0, [1, 1], [16, 8])


def _check_plan(src, dst):
    """Every thread's shuffled source element is the element it wants, and the source lanes are the
    XOR-linear function the lowering computes."""
    plan = shuffle_plan(src, dst)
    assert plan is not None
    for j, (reg, lanes) in enumerate(plan):
        assert _xor_linear(lanes) is not None
        for t, lane in enumerate(lanes):
            w, l_ = divmod(t, dst.num_lanes)
            assert src.coords(reg, lane, w) == dst.coords(j, l_, w)


@pytest.mark.parametrize("dst_enc", [SliceEncoding(1, MMA_1), SliceEncoding(1, DotOperandEncoding(0, MMA_1, 2)),
                                     SliceEncoding(0, DotOperandEncoding(1, MMA_1, 2))])
def test_a_vector_moves_into_matrix_slices_by_shuffles(dst_enc):
    """fla's gate vector, loaded one element a lane, wanted in the rows of an mma accumulator and of
    its operands (one warp)."""
    src = BlockedEncoding([1], [32], [1], [0]).to_linear((32,))
    _check_plan(src, dst_enc.to_linear((32,)))


@pytest.mark.parametrize("src_enc, dst_enc", [
    (BlockedEncoding([1, 2], [8, 4], [1, 1], [1, 0]), MMA_1),          # a tile into the accumulator's layout
    (MMA_1, DotOperandEncoding(0, MMA_1, 2)),                          # an accumulator into the next A
])
def test_a_tile_moves_within_one_warp(src_enc, dst_enc):
    _check_plan(src_enc.to_linear((16, 16)), dst_enc.to_linear((16, 16)))


def test_no_plan_when_the_source_register_depends_on_the_lane():
    """A transposition inside the warp: each lane would read a different register of its source."""
    src = BlockedEncoding([1, 4], [8, 4], [1, 1], [1, 0]).to_linear((16, 16))
    dst = BlockedEncoding([4, 1], [4, 8], [1, 1], [0, 1]).to_linear((16, 16))
    assert shuffle_plan(src, dst) is None


def test_no_plan_when_an_element_lives_in_another_warp():
    src = BlockedEncoding([1], [32], [2], [0]).to_linear((64,))
    dst = BlockedEncoding([2], [32], [1], [0]).to_linear((64,))   # warp 0 wants elements warp 1 holds
    dst = type(dst)(dst.shape, dst.registers, dst.lanes, ((0,),))
    assert shuffle_plan(src, dst) is None


@tilejit.jit
def _row_scale(x_ptr, v_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr):
    rows = tl.arange(0, M)
    cols = tl.arange(0, N)
    x = tl.load(x_ptr + rows[:, None] * N + cols[None, :])
    v = tl.load(v_ptr + rows)
    w = tl.load(v_ptr + M + cols)
    y = x * v[:, None] + w[None, :]
    tl.store(out_ptr + rows[:, None] * N + cols[None, :], y)
    tl.store(v_ptr + 2 * M + rows, tl.sum(y, axis=1))


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))


@pytest.mark.parametrize("M, N, num_warps", [(32, 32, 1), (16, 64, 1), (32, 32, 2), (64, 64, 4)])
def test_vectors_broadcast_into_a_tile_run_correctly(M, N, num_warps):
    """The vectors' conversions into the tile's slices (and the row sums' out of them) are shuffles
    at one warp: 4 barriers left of 10, none of them a conversion's."""
    kernel = _row_scale.warmup("*fp32", "*fp32", "*fp32", M=M, N=N, num_warps=num_warps, grid=(1,), target="cuda:90")
    llir = kernel.asm["llir"]
    x = RNG.standard_normal((M, N)).astype(np.float32)
    v = RNG.standard_normal(3 * M + N).astype(np.float32)
    want = x * v[:M, None] + v[M:M + N][None, :]
    out = np.zeros((M, N), np.float32)
    run(llir, [x, v, out], num_warps)
    np.testing.assert_allclose(out, want, rtol=1e-6)
    np.testing.assert_allclose(v[2 * M:3 * M], want.sum(axis=1), rtol=1e-5, atol=1e-5)
    if num_warps == 1:
        assert llir.count("llvm.nvvm.shfl.sync.idx") > 2 and llir.count("llvm.nvvm.barrier0") <= 4
