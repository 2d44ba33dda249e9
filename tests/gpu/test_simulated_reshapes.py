"""`tl.trans` / `tl.permute` / `tl.reshape` lowered for the GPU and run on the host (`simt_runner`):
the operand's layout with its dims permuted (or its elements renamed by their coordinates in the new
shape), then a register permutation where each thread already holds the result's elements, else a
layout conversion through shared memory (vectorized, padded, in rounds for large tiles). Before, a
transpose or reshape that moved data wrote the whole tile to shared memory element by element: a
256x256 fp32 tile asked for 256 KiB, more than any GPU's CTA may have."""
import os
import sys

import numpy as np
import pytest

import tilejit
import tilejit.language as tl

from simt_runner import run

RNG = np.random.default_rng(5)
NUMPY = {"fp32": np.float32, "fp16": np.float16, "i8": np.int8, "i64": np.int64}


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))


@tilejit.jit
def _transpose(x_ptr, y_ptr, M: tl.constexpr, N: tl.constexpr):
    rows, cols = tl.arange(0, M), tl.arange(0, N)
    x = tl.load(x_ptr + rows[:, None] * N + cols[None, :])
    tl.store(y_ptr + cols[:, None] * M + rows[None, :], tl.trans(x) + 1)


@tilejit.jit
def _permute(x_ptr, y_ptr, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr,
             O0: tl.constexpr, O1: tl.constexpr, O2: tl.constexpr,
             D0: tl.constexpr, D1: tl.constexpr, D2: tl.constexpr):
    a = tl.arange(0, A)[:, None, None]
    b = tl.arange(0, B)[None, :, None]
    c = tl.arange(0, C)[None, None, :]
    x = tl.load(x_ptr + a * (B * C) + b * C + c)
    i = tl.arange(0, D0)[:, None, None]
    j = tl.arange(0, D1)[None, :, None]
    k = tl.arange(0, D2)[None, None, :]
    tl.store(y_ptr + i * (D1 * D2) + j * D2 + k, tl.permute(x, (O0, O1, O2)))


def _bf16_bits(x):
    """float32 values that are bf16 values, as the bf16 bit patterns (uint16)."""
    return (x.view(np.uint32) >> 16).astype(np.uint16)


def _values(shape, dtype):
    return RNG.integers(-100, 100, shape).astype(NUMPY[dtype])


@pytest.mark.parametrize("M, N, dtype, warps", [
    (64, 32, "fp32", 4), (32, 128, "fp16", 4), (16, 64, "i8", 1), (64, 64, "i64", 2), (128, 64, "fp32", 8),
])
def test_transpose_runs_right(M, N, dtype, warps):
    x = _values((M, N), dtype)
    kernel = _transpose.warmup(f"*{dtype}", f"*{dtype}", M=M, N=N, num_warps=warps, grid=(1,), target="cuda:90")
    y = np.zeros((N, M), x.dtype)
    run(kernel.asm["llir"], [x, y], warps, shared=kernel.metadata.shared)
    np.testing.assert_array_equal(y, x.T + 1)


@pytest.mark.parametrize("order", [(0, 2, 1), (1, 0, 2), (2, 1, 0), (1, 2, 0), (2, 0, 1)])
def test_permute_runs_right(order):
    shape = (4, 8, 32)
    x = _values(shape, "fp32")
    dims = [shape[o] for o in order]
    kernel = _permute.warmup("*fp32", "*fp32", A=shape[0], B=shape[1], C=shape[2], O0=order[0], O1=order[1],
                             O2=order[2], D0=dims[0], D1=dims[1], D2=dims[2], num_warps=4, grid=(1,), target="cuda:90")
    y = np.zeros(dims, np.float32)
    run(kernel.asm["llir"], [x, y], 4, shared=kernel.metadata.shared)
    np.testing.assert_array_equal(y, np.transpose(x, order))


def test_a_transpose_larger_than_shared_memory_goes_in_rounds():
    """256x256 fp32 (256 KiB) at 4 warps: two rounds of 128 KiB (the CTA is alone on its SM: 512
    values a thread), within the 227 KiB a CTA may have on sm_90."""
    x = _values((256, 256), "fp32")
    kernel = _transpose.warmup("*fp32", "*fp32", M=256, N=256, num_warps=4, grid=(1,), target="cuda:90")
    assert 128 * 1024 <= kernel.metadata.shared <= 227 * 1024
    y = np.zeros((256, 256), np.float32)
    run(kernel.asm["llir"], [x, y], 4, shared=kernel.metadata.shared)
    np.testing.assert_array_equal(y, x.T + 1)


def test_a_transpose_into_the_layout_it_was_loaded_in_moves_no_data():
    """A 1xN tile transposed to Nx1: every thread keeps its elements, so no shared memory at all."""
    x = _values((1, 128), "fp32")
    kernel = _transpose.warmup("*fp32", "*fp32", M=1, N=128, num_warps=4, grid=(1,), target="cuda:90")
    assert kernel.metadata.shared == 0
    y = np.zeros((128, 1), np.float32)
    run(kernel.asm["llir"], [x, y], 4, shared=kernel.metadata.shared)
    np.testing.assert_array_equal(y, x.T + 1)


@tilejit.jit
def _reshape(x_ptr, y_ptr, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr, D: tl.constexpr):
    """x [A, B] -> [C, D], row-major, plus one."""
    a, b = tl.arange(0, A), tl.arange(0, B)
    x = tl.load(x_ptr + a[:, None] * B + b[None, :])
    c, d = tl.arange(0, C), tl.arange(0, D)
    tl.store(y_ptr + c[:, None] * D + d[None, :], tl.reshape(x, (C, D)) + 1)


@tilejit.jit
def _flatten_transposed(x_ptr, y_ptr, N: tl.constexpr):
    """Triton's test_trans_reshape: [N, N] -> [N, 4, 4, N // 16] -> permuted -> flat."""
    rows, cols = tl.arange(0, N), tl.arange(0, N)
    x = tl.load(x_ptr + rows[:, None] * N + cols[None, :])
    x = tl.reshape(x, (N, 4, 4, N // 16))
    x = tl.permute(x, (1, 2, 3, 0))
    tl.store(y_ptr + tl.arange(0, N * N), tl.reshape(x, (N * N,)))


@pytest.mark.parametrize("A, B, C, D, warps", [
    (64, 32, 32, 64, 4), (16, 128, 128, 16, 4), (8, 256, 64, 32, 2), (128, 4, 4, 128, 1), (256, 256, 1024, 64, 4),
])
def test_reshape_runs_right(A, B, C, D, warps):
    x = _values((A, B), "fp32")
    kernel = _reshape.warmup("*fp32", "*fp32", A=A, B=B, C=C, D=D, num_warps=warps, grid=(1,), target="cuda:90")
    assert kernel.metadata.shared <= 227 * 1024   # 256x256 fp32 is 256 KiB: in rounds
    y = np.zeros((C, D), np.float32)
    run(kernel.asm["llir"], [x, y], warps, shared=kernel.metadata.shared)
    np.testing.assert_array_equal(y, x.reshape(C, D) + 1)


def test_reshapes_around_a_permute_run_right():
    x = np.arange(32 * 32, dtype=np.int32).reshape(32, 32)
    kernel = _flatten_transposed.warmup("*i32", "*i32", N=32, num_warps=4, grid=(1,), target="cuda:90")
    y = np.zeros(32 * 32, np.int32)
    run(kernel.asm["llir"], [x, y], 4, shared=kernel.metadata.shared)
    np.testing.assert_array_equal(y, np.transpose(x.reshape(32, 4, 4, 2), (1, 2, 3, 0)).ravel())


@tilejit.jit
def _sort_rows(x_ptr, y_ptr, M: tl.constexpr, N: tl.constexpr, DESCENDING: tl.constexpr):
    rows, cols = tl.arange(0, M), tl.arange(0, N)
    x = tl.load(x_ptr + rows[:, None] * N + cols[None, :])
    tl.store(y_ptr + rows[:, None] * N + cols[None, :], tl.sort(x, dim=1, descending=DESCENDING))


@tilejit.jit
def _flip_and_interleave(x_ptr, f_ptr, i_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    tl.store(f_ptr + offs, tl.flip(x, 0))
    tl.store(i_ptr + tl.arange(0, 2 * N), tl.interleave(x, x * 2))


@pytest.mark.parametrize("M, N, descending, warps", [(1, 1024, False, 4), (4, 256, True, 4), (8, 64, False, 1)])
def test_sorts_built_on_reshapes_run_right(M, N, descending, warps):
    """tl.sort is a bitonic network over reshaped views ([2, 2, ..., 2]) of the row."""
    x = RNG.standard_normal((M, N)).astype(np.float32)
    kernel = _sort_rows.warmup("*fp32", "*fp32", M=M, N=N, DESCENDING=descending, num_warps=warps, grid=(1,),
                               target="cuda:90")
    y = np.zeros_like(x)
    run(kernel.asm["llir"], [x, y], warps, shared=kernel.metadata.shared)
    expected = np.sort(x, axis=1)
    np.testing.assert_array_equal(y, expected[:, ::-1] if descending else expected)


def test_flip_and_interleave_run_right():
    x = _values(256, "fp32")
    kernel = _flip_and_interleave.warmup("*fp32", "*fp32", "*fp32", N=256, num_warps=4, grid=(1,), target="cuda:90")
    flipped, interleaved = np.zeros(256, np.float32), np.zeros(512, np.float32)
    run(kernel.asm["llir"], [x, flipped, interleaved], 4, shared=kernel.metadata.shared)
    np.testing.assert_array_equal(flipped, x[::-1])
    np.testing.assert_array_equal(interleaved, np.stack([x, x * 2], axis=1).ravel())


@tilejit.jit
def _join_split(x_ptr, y_ptr, j_ptr, a_ptr, b_ptr, M: tl.constexpr, N: tl.constexpr):
    """j = join(x, y.T) ([M, N, 2]); a, b = split(pairs) of the [M, N, 2] tile read from x as pairs."""
    rows, cols = tl.arange(0, M), tl.arange(0, N)
    x = tl.load(x_ptr + rows[:, None] * N + cols[None, :])
    y = tl.trans(tl.load(y_ptr + cols[:, None] * M + rows[None, :]))    # another layout
    two = tl.arange(0, 2)
    tl.store(j_ptr + rows[:, None, None] * (2 * N) + cols[None, :, None] * 2 + two[None, None, :], tl.join(x, y))
    pairs = tl.load(x_ptr + rows[:, None, None] * N + (cols[None, :, None] // 2) * 2 + two[None, None, :])
    a, b = tl.split(pairs)
    tl.store(a_ptr + rows[:, None] * N + cols[None, :], a)
    tl.store(b_ptr + rows[:, None] * N + cols[None, :], b)


@pytest.mark.parametrize("M, N, warps", [(16, 32, 4), (64, 64, 4), (8, 16, 1), (128, 128, 8)])
def test_join_and_split_run_right(M, N, warps):
    x, y = _values((M, N), "fp32"), _values((N, M), "fp32")
    kernel = _join_split.warmup("*fp32", "*fp32", "*fp32", "*fp32", "*fp32", M=M, N=N, num_warps=warps, grid=(1,),
                                target="cuda:90")
    joined, a, b = np.zeros((M, N, 2), np.float32), np.zeros((M, N), np.float32), np.zeros((M, N), np.float32)
    run(kernel.asm["llir"], [x, y, joined, a, b], warps, shared=kernel.metadata.shared)
    np.testing.assert_array_equal(joined, np.stack([x, y.T], axis=-1))
    pairs = x.reshape(M, N // 2, 2)
    np.testing.assert_array_equal(a, np.repeat(pairs[..., 0], 2, axis=1))
    np.testing.assert_array_equal(b, np.repeat(pairs[..., 1], 2, axis=1))


def test_a_join_of_large_tiles_fits_shared_memory():
    """Two 128x128 fp32 tiles joined: the old lowering staged 8 bytes an element of both (256 KiB)."""
    kernel = _join_split.warmup("*fp32", "*fp32", "*fp32", "*fp32", "*fp32", M=128, N=128, num_warps=4, grid=(1,),
                                target="cuda:90")
    assert kernel.metadata.shared <= 227 * 1024


@tilejit.jit
def _cat_rows(x_ptr, y_ptr, z_ptr, M: tl.constexpr, N: tl.constexpr):
    rows, cols = tl.arange(0, M), tl.arange(0, N)
    x = tl.load(x_ptr + rows[:, None] * N + cols[None, :])
    y = tl.trans(tl.load(y_ptr + cols[:, None] * M + rows[None, :]))    # another layout
    out_rows = tl.arange(0, 2 * M)
    tl.store(z_ptr + out_rows[:, None] * N + cols[None, :], tl.cat(x, y, can_reorder=True))


@pytest.mark.parametrize("M, N, warps", [(16, 32, 4), (64, 64, 4), (1, 128, 1), (128, 128, 8)])
def test_cat_runs_right(M, N, warps):
    x, y = _values((M, N), "fp32"), _values((N, M), "fp32")
    kernel = _cat_rows.warmup("*fp32", "*fp32", "*fp32", M=M, N=N, num_warps=warps, grid=(1,), target="cuda:90")
    assert kernel.metadata.shared <= 227 * 1024   # the old lowering staged 8 bytes an element
    z = np.zeros((2 * M, N), np.float32)
    run(kernel.asm["llir"], [x, y, z], warps, shared=kernel.metadata.shared)
    np.testing.assert_array_equal(z, np.concatenate([x, y.T]))


@tilejit.jit
def _split_pairs(x_ptr, a_ptr, b_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    pairs = tl.load(x_ptr + offs[:, None] * 2 + tl.arange(0, 2)[None, :])
    a, b = tl.split(pairs)
    tl.store(a_ptr + offs, a)
    tl.store(b_ptr + offs, b)


@pytest.mark.parametrize("N, warps", [(16, 4), (64, 2), (1024, 4)])
def test_split_runs_right_whoever_holds_the_split_dim(N, warps):
    """A small [N, 2] tile spread over many threads puts the split dim on lanes: one conversion into
    the results' layout with both halves in one thread, then the same register pick (16 at 4 warps);
    larger tiles hold it in registers."""
    x = _values((N, 2), "fp32")
    kernel = _split_pairs.warmup("*fp32", "*fp32", "*fp32", N=N, num_warps=warps, grid=(1,), target="cuda:90")
    a, b = np.zeros(N, np.float32), np.zeros(N, np.float32)
    run(kernel.asm["llir"], [x, a, b], warps, shared=kernel.metadata.shared)
    np.testing.assert_array_equal(a, x[:, 0])
    np.testing.assert_array_equal(b, x[:, 1])


def test_a_transposed_dot_result_feeds_dots_in_one_conversion():
    """cuda:75 computes dots with FMAs, so the host runs the whole kernel: p = a b transposed into
    operand A of one dot and B of another (one transpose after CSE, its two users conversions)."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "language"))
    from dot_kernels import transposed_product_kernel
    M, N = 32, 64
    a, b = (RNG.integers(-1, 2, (M, M)).astype(np.float32) for _ in range(2))
    q = RNG.integers(-2, 3, (M, N)).astype(np.float32)
    r = RNG.integers(-2, 3, (N, M)).astype(np.float32)
    kernel = transposed_product_kernel.warmup(*["*bf16"] * 4, "*fp32", "*fp32", M=M, N=N, num_warps=4, grid=(1,),
                                              target="cuda:75")
    o, u = np.zeros((M, N), np.float32), np.zeros((N, M), np.float32)
    run(kernel.asm["llir"], [_bf16_bits(x) for x in (a, b, q, r)] + [o, u], 4, shared=kernel.metadata.shared)
    p = a @ b   # |p| <= 32: exact in bf16
    np.testing.assert_array_equal(o, p.T @ q)
    np.testing.assert_array_equal(u, r @ p.T)
    assert kernel.asm["ttgir"].count("tt.trans") == 1


def test_a_transpose_that_is_only_converted_is_read_where_its_operand_stands():
    """x -> convert -> trans -> convert -> convert -> store, with layouts under which the transpose
    moves data: the transpose leaves its operand's registers to the conversion after it (one trip
    through shared memory, not two), and the values still come out right."""
    from tilejit import ir
    from tilejit.gpu.layouts import BlockedEncoding
    from tilejit.gpu.llvm import lower_module
    from tilejit_nvidia.isa import NvidiaISA
    M, N = 64, 32
    kernel = _transpose.warmup("*fp32", "*fp32", M=M, N=N, num_warps=4, grid=(1,), target="cuda:90")
    module = ir.parse_module(kernel.asm["ttgir"])
    trans = next(op for op in module.functions[0].walk() if op.name == "tt.trans")
    block, x, t = trans.parent, trans.operands[0], trans.results[0].type

    def convert(value, enc, before):
        op = ir.Operation("ttg.convert_layout", [value],
                          [ir.TensorType(value.type.shape, value.type.element, enc)], loc=trans.loc)
        block.insert(block.ops.index(before), op)
        return op.results[0]

    lanes_along_rows = BlockedEncoding((1, 1), (32, 1), (1, 4), (0, 1))   # its transpose isn't t's
    trans.set_operand(0, convert(x, lanes_along_rows, trans))
    after = block.ops[block.ops.index(trans) + 1]
    uses = list(trans.results[0].uses)
    there = convert(trans.results[0], BlockedEncoding((4, 1), (8, 4), (1, 4), (0, 1)), after)
    back = convert(there, t.encoding, after)
    for user, index in uses:
        user.set_operand(index, back)

    def lowered(defer):
        if not defer:   # the transpose's result also feeds a store: it is converted where it stands
            store = next(op for op in block.ops if op.name == "tt.store")
            extra = ir.Operation("tt.store", [store.operands[0], trans.results[0]], [], dict(store.attrs),
                                 loc=trans.loc)
            block.insert(block.ops.index(store), extra)
        return lower_module(module, NvidiaISA(90, 32), 4)

    text, md = lowered(True)
    x_host = _values((M, N), "fp32")
    y = np.zeros((N, M), np.float32)
    run(text, [x_host, y], 4, shared=md["shared"])
    np.testing.assert_array_equal(y, x_host.T + 1)
    converted_twice, _ = lowered(False)
    assert text.count("llvm.nvvm.barrier0") < converted_twice.count("llvm.nvvm.barrier0")
