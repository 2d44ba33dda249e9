"""Shared-memory bank conflicts of layout conversions: the wavefront model and the row padding chosen
from it (`tilejit.gpu.llvm.convert`), checked on hand-made access patterns and on a wgmma
accumulator written out for a store."""
import re

import numpy as np
import pytest

import tilejit
import tilejit.language as tl

from tilejit.gpu.layouts import BlockedEncoding
from tilejit.gpu.llvm.convert import _padding, _run_length, _wavefronts
from tilejit_nvidia.layouts import NvidiaMmaEncoding

LANES = np.arange(32)


@pytest.mark.parametrize("addresses, access_bytes, wavefronts", [
    (LANES * 4, 4, 1),                 # one 128-byte row
    (LANES * 0, 4, 1),                 # one word: a broadcast
    (LANES * 128, 4, 32),              # one bank, 32 words
    (LANES * 16, 16, 4),               # 512 bytes: four quarter-warps, one wavefront each
    (LANES * 8, 8, 2),                 # 256 bytes: two half-warps
    ((LANES // 4) * 1040 + (LANES % 4) * 8, 8, 4),   # pairs, 4 lanes a row, rows 16 bytes apart
    ((LANES // 4) * 1056 + (LANES % 4) * 8, 8, 2),   # the same, rows 32 bytes apart
])
def test_wavefronts_of_one_warp_access(addresses, access_bytes, wavefronts):
    assert _wavefronts(addresses[None, :], access_bytes) == wavefronts


def _accumulator_to_store(shape=(128, 256), warps=8):
    mma = NvidiaMmaEncoding(3, 0, (warps, 1), (16, shape[1], 16)).to_linear(shape)
    blocked = BlockedEncoding((1, 4), (1, 32), (warps, 1), (1, 0)).to_linear(shape)
    return mma, blocked


def test_an_accumulator_written_for_a_store_gets_rows_32_bytes_apart():
    """A wgmma accumulator holds pairs of fp32 columns, four lanes to a row: 16 bytes of padding (right
    for 16-byte accesses) puts two rows of a half-warp on the same banks; 32 bytes do not, and the
    row-wise 16-byte reads stay conflict-free."""
    src, dst = _accumulator_to_store()
    src_vec, dst_vec = _run_length(src, 1, 4), _run_length(dst, 1, 4)
    assert (src_vec, dst_vec) == (2, 4)
    assert _padding(src, dst, src_vec, dst_vec, [128, 256], 1, [0], 4, default=4) == 8


def test_padding_that_is_already_conflict_free_is_kept():
    # the same layout on both sides: 16-byte rows read and written alike, no reason to change
    _, blocked = _accumulator_to_store()
    assert _padding(blocked, blocked, 4, 4, [128, 256], 1, [0], 4, default=4) == 4


@tilejit.jit
def _matmul_f32_out(a_ptr, b_ptr, c_ptr, K, BLOCK_K: tl.constexpr):
    rows, cols, ks = tl.arange(0, 128), tl.arange(0, 256), tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rows[:, None] * K + ks[None, :]
    b_ptrs = b_ptr + ks[:, None] * 256 + cols[None, :]
    acc = tl.zeros((128, 256), dtype=tl.float32)
    for _ in range(0, K, BLOCK_K):
        acc += tl.dot(tl.load(a_ptrs), tl.load(b_ptrs))
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * 256
    tl.store(c_ptr + rows[:, None] * 256 + cols[None, :], acc)


def test_an_epilogue_conversion_reuses_the_pipeline_buffers_in_one_round(tmp_path, monkeypatch):
    """The 128x256 fp32 accumulator (128 KiB) passes CHUNK_BYTES, but the pipeline's buffers already
    hold 144 KiB: the conversion for the store takes one round (Triton's), not two with a barrier
    pair between them."""
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))
    kernel = _matmul_f32_out.warmup("*fp16", "*fp16", "*fp32", 4096, BLOCK_K=64, num_warps=8, num_stages=3,
                                    grid=(1,), target="cuda:90")
    assert kernel.metadata.shared >= 144 * 1024
    ptx = kernel.asm["ptx"]
    epilogue = ptx[ptx.index("wgmma.wait_group.sync.aligned 0"):]
    assert len(re.findall(r"st\.shared\.v2\.\w+", epilogue)) == 64   # 128 values a thread, in pairs
    assert epilogue.count("bar.sync") <= 3   # before the writes, between writes and reads, at the end


def test_an_epilogue_conversion_takes_more_shared_memory_where_occupancy_does_not_drop(tmp_path, monkeypatch):
    """With BLOCK_K=32 the pipeline holds 72 KiB, less than the 128 KiB accumulator. The accumulator
    alone is 128 registers a thread at 8 warps, so the SM runs one such CTA whatever its shared
    memory: the conversion takes 132 KiB and one round (two before, with a barrier pair between)."""
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))
    kernel = _matmul_f32_out.warmup("*fp16", "*fp16", "*fp32", 4096, BLOCK_K=32, num_warps=8, num_stages=3,
                                    grid=(1,), target="cuda:90")
    assert 128 * 1024 < kernel.metadata.shared <= 227 * 1024
    ptx = kernel.asm["ptx"]
    epilogue = ptx[ptx.index("wgmma.wait_group.sync.aligned 0"):]
    assert len(re.findall(r"st\.shared\.v2\.\w+", epilogue)) == 64
    assert epilogue.count("bar.sync") <= 3
    assert ".minnctapersm" not in ptx
