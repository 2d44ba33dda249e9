"""load/store with masks, block pointers, tensor descriptors and atomics."""
import numpy as np
import pytest

import tilejit
import tilejit.language as tl

RNG = np.random.default_rng(7)


@tilejit.jit
def _masked_copy(src_ptr, dst_ptr, n, OTHER: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(src_ptr + offs, mask=offs < n, other=OTHER)
    tl.store(dst_ptr + offs, x, mask=offs < n + 3)  # also writes the padding lanes just past n


@pytest.mark.parametrize("dtype", ["float32", "int16", "float16", "uint8"])
def test_load_mask_other_and_store_mask(device, dtype):
    n = 37
    src = (RNG.uniform(0, 100, n)).astype(dtype)
    dst = device.full(48, 9, dtype)
    _masked_copy[(3,)](device.tensor(src), dst, n, OTHER=-1 if dtype != "uint8" else 7, BLOCK=16)
    got = device.numpy(dst)
    np.testing.assert_array_equal(got[:n], src)
    np.testing.assert_array_equal(got[n:n + 3], np.full(3, -1 if dtype != "uint8" else 7, dtype))
    np.testing.assert_array_equal(got[n + 3:], np.full(48 - n - 3, 9, dtype))


@tilejit.jit
def _float_other_kernel(src_ptr, dst_ptr):
    offs = tl.arange(0, 8)
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=offs < 4, other=3.0))  # other is cast to int8


def test_other_is_cast_to_the_element_type(device):
    dst = device.zeros(8, np.int8)
    _float_other_kernel[(1,)](device.tensor(np.arange(8, dtype=np.int8)), dst)
    np.testing.assert_array_equal(device.numpy(dst), [0, 1, 2, 3, 3, 3, 3, 3])


@tilejit.jit
def _scalar_mask_kernel(src_ptr, dst_ptr, flag):
    offs = tl.arange(0, 8)
    x = tl.load(src_ptr + offs, mask=flag > 0, other=0.5)
    tl.store(dst_ptr + offs, x)
    tl.store(dst_ptr + 8, tl.load(src_ptr + 3))  # scalar load and store


def test_scalar_mask_and_scalar_pointer(device):
    src = np.arange(8, dtype=np.float32)
    for flag, expected in [(1, src), (0, np.full(8, 0.5, np.float32))]:
        dst = device.zeros(9, np.float32)
        _scalar_mask_kernel[(1,)](device.tensor(src), dst, flag)
        np.testing.assert_array_equal(device.numpy(dst), np.append(expected, 3.0))


@tilejit.jit
def _all_masked_kernel(src_ptr, dst_ptr):
    offs = tl.arange(0, 16)
    x = tl.load(src_ptr + offs, mask=offs < 0, other=4.0)
    tl.store(dst_ptr + offs, x)
    tl.store(dst_ptr + offs, x * 0 - 1.0, mask=offs > 100)  # an empty store mask writes nothing


def test_empty_masks(device):
    dst = device.zeros(16, np.float32)
    _all_masked_kernel[(1,)](device.tensor(np.ones(1, np.float32)), dst)
    np.testing.assert_array_equal(device.numpy(dst), np.full(16, 4.0, np.float32))


@tilejit.jit
def _block_ptr_kernel(src_ptr, dst_ptr, M, N, stride_m, stride_n, PAD: tl.constexpr,
                      BM: tl.constexpr, BN: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    src = tl.make_block_ptr(base=src_ptr, shape=(M, N), strides=(stride_m, stride_n),
                            offsets=(pid_m * BM, pid_n * BN), block_shape=(BM, BN), order=(1, 0))
    dst = tl.make_block_ptr(base=dst_ptr, shape=(M + 8, N + 8), strides=(N + 8, 1),
                            offsets=(pid_m * BM, pid_n * BN), block_shape=(BM, BN), order=(1, 0))
    if PAD == "nan":
        x = tl.load(src, boundary_check=(0, 1), padding_option="nan")
    else:
        x = tl.load(src, boundary_check=(0, 1), padding_option="zero")
    tl.store(dst, x, boundary_check=(0, 1))


@pytest.mark.parametrize("pad", ["zero", "nan"])
def test_block_pointer_boundary_check_and_padding(device, pad):
    M, N = 10, 13
    src = RNG.standard_normal((M, N)).astype(np.float32)
    dst = device.full((M + 8, N + 8), 5.0, np.float32)
    _block_ptr_kernel[(2, 2)](device.tensor(src), dst, M, N, N, 1, PAD=pad, BM=8, BN=8)
    got = device.numpy(dst)
    np.testing.assert_array_equal(got[:M, :N], src)
    fill = 0.0 if pad == "zero" else np.nan
    # the padded lanes of the loaded blocks reach the (larger) destination
    np.testing.assert_array_equal(got[M:16, :16], np.full((16 - M, 16), fill, np.float32))
    np.testing.assert_array_equal(got[:M, N:16], np.full((M, 16 - N), fill, np.float32))
    np.testing.assert_array_equal(got[16:, :], 5.0)


@tilejit.jit
def _block_ptr_advance_kernel(src_ptr, out_ptr, M, K, BM: tl.constexpr, BK: tl.constexpr):
    # row sums of a M x K matrix, walking K with tl.advance
    ptr = tl.make_block_ptr(src_ptr, shape=(M, K), strides=(K, 1), offsets=(0, 0), block_shape=(BM, BK),
                            order=(1, 0))
    acc = tl.zeros((BM,), dtype=tl.float32)
    for _ in range(0, tl.cdiv(K, BK)):
        acc += tl.sum(tl.load(ptr, boundary_check=(0, 1)), axis=1)
        ptr = tl.advance(ptr, (0, BK))
    out = tl.make_block_ptr(out_ptr, shape=(M,), strides=(1,), offsets=(0,), block_shape=(BM,), order=(0,))
    tl.store(out, acc, boundary_check=(0,))


def test_block_pointer_advance(device):
    M, K = 6, 37
    src = RNG.standard_normal((M, K)).astype(np.float32)
    out = device.zeros(M, np.float32)
    _block_ptr_advance_kernel[(1,)](device.tensor(src), out, M, K, BM=8, BK=16)
    np.testing.assert_allclose(device.numpy(out), src.sum(axis=1), rtol=1e-5, atol=1e-5)


@tilejit.jit
def _bool_block_copy(a_ptr, b_ptr, N, BLOCK: tl.constexpr):
    offset = tl.program_id(0) * BLOCK
    a = tl.make_block_ptr(base=a_ptr, shape=(N // 2,), strides=(1,), offsets=(offset,), block_shape=(BLOCK,),
                          order=(0,))
    b = tl.make_block_ptr(base=b_ptr, shape=(N,), strides=(1,), offsets=(offset,), block_shape=(BLOCK,), order=(0,))
    tl.store(b, tl.load(a, boundary_check=(0,), padding_option="zero"), boundary_check=(0,))


def test_bool_block_pointer_copy(device):
    """Bools through block pointers are bytes in memory (Triton's test_block_copy with bool): the
    first half copied, the rest padded with False."""
    N, BLOCK = 1000, 256
    a = RNG.random(N) > 0.5
    b = device.tensor(np.ones(N, np.bool_))
    _bool_block_copy[((N + BLOCK - 1) // BLOCK,)](device.tensor(a), b, N, BLOCK=BLOCK)
    expected = np.concatenate([a[:N // 2], np.zeros(N - N // 2, np.bool_)])
    np.testing.assert_array_equal(device.numpy(b), expected)


@tilejit.jit
def _descriptor_kernel(src_ptr, dst_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    src = tl.make_tensor_descriptor(src_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    dst = tl.make_tensor_descriptor(dst_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    off_m = tl.program_id(0) * BM
    off_n = tl.program_id(1) * BN
    x = src.load([off_m, off_n])  # out-of-bounds elements read as zero
    dst.store([off_m, off_n], x * 2 + 1)  # and out-of-bounds elements are not written


def test_tensor_descriptor_load_store(device):
    M, N = 20, 24
    src = RNG.standard_normal((M, N)).astype(np.float32)
    dst = device.zeros((M, N), np.float32)
    _descriptor_kernel[(2, 2)](device.tensor(src), dst, M, N, BM=16, BN=16)
    np.testing.assert_allclose(device.numpy(dst), src * 2 + 1, rtol=1e-6)


@tilejit.jit
def _descriptor_functions_kernel(src_ptr, out_ptr, BM: tl.constexpr):
    desc = tl.make_tensor_descriptor(src_ptr, shape=[5], strides=[1], block_shape=[BM])
    x = tl.load_tensor_descriptor(desc, [0])
    tl.store(out_ptr + tl.arange(0, BM), x)
    tl.store_tensor_descriptor(desc, [0], x + 100)


def test_tensor_descriptor_free_functions_pad_with_zero(device):
    src = device.tensor(np.arange(1, 6, dtype=np.float32))
    out = device.full(8, -1.0, np.float32)
    _descriptor_functions_kernel[(1,)](src, out, BM=8)
    np.testing.assert_array_equal(device.numpy(out), [1, 2, 3, 4, 5, 0, 0, 0])
    np.testing.assert_array_equal(device.numpy(src), [101, 102, 103, 104, 105])


@tilejit.jit
def _persistent_batch_sum_kernel(src_ptr, out_ptr, B, M, N, BM: tl.constexpr, BN: tl.constexpr):
    # The persistent-kernel pattern of Triton's batched TMA GEMM: one program walks every (batch, tile)
    # and makes the descriptors again when it moves to a new batch, inside an `if` inside the loop.
    tiles_m = tl.cdiv(M, BM)
    batch = 0
    src = tl.make_tensor_descriptor(src_ptr, [M, N], [N, 1], [BM, BN])
    dst = tl.make_tensor_descriptor(out_ptr, [M, 4], [4, 1], [BM, 4])
    for t in range(B * tiles_m):
        tile_m = t % tiles_m
        if tile_m == 0:
            batch = t // tiles_m
            src = tl.make_tensor_descriptor(src_ptr + batch * M * N, [M, N], [N, 1], [BM, BN])
            dst = tl.make_tensor_descriptor(out_ptr + batch * M * 4, [M, 4], [4, 1], [BM, 4])
        acc = tl.zeros([BM], dtype=tl.float32)
        for k in range(0, tl.cdiv(N, BN)):
            acc += tl.sum(src.load([tile_m * BM, k * BN]), axis=1)
        dst.store([tile_m * BM, 0], tl.broadcast_to(acc[:, None], [BM, 4]) + batch)


@tilejit.jit
def _descriptor_moved_each_iteration_kernel(src_ptr, out_ptr, ROWS, N, BN: tl.constexpr):
    desc = tl.make_tensor_descriptor(src_ptr, [1, N], [N, 1], [1, BN])
    total = tl.zeros([1, BN], dtype=tl.float32)
    for row in range(ROWS):
        total += desc.load([0, 0])
        desc = tl.make_tensor_descriptor(src_ptr + (row + 1) * N, [1, N], [N, 1], [1, BN])
    tl.store(out_ptr + tl.arange(0, BN)[None, :], total)


def test_tensor_descriptors_made_again_under_control_flow(device):
    B, M, N = 3, 20, 24
    src = RNG.standard_normal((B, M, N)).astype(np.float32)
    out = device.zeros((B, M, 4), np.float32)
    _persistent_batch_sum_kernel[(1,)](device.tensor(src), out, B, M, N, BM=8, BN=16)
    expected = src.sum(axis=2) + np.arange(B)[:, None]
    np.testing.assert_allclose(device.numpy(out), np.repeat(expected[:, :, None], 4, axis=2), rtol=1e-5, atol=1e-5)

    rows = RNG.standard_normal((5, 16)).astype(np.float32)
    total = device.zeros((1, 16), np.float32)
    _descriptor_moved_each_iteration_kernel[(1,)](device.tensor(rows), total, 5, 16, BN=16)
    np.testing.assert_allclose(device.numpy(total)[0], rows.sum(axis=0), rtol=1e-5, atol=1e-5)


@tilejit.jit
def _atomic_kernel(ptr, val_ptr, old_ptr, n, OP: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    val = tl.load(val_ptr + pid * BLOCK + offs, mask=mask)
    if OP == "add":
        old = tl.atomic_add(ptr + offs, val, mask=mask)
    elif OP == "max":
        old = tl.atomic_max(ptr + offs, val, mask=mask, sem="acq_rel", scope="gpu")
    elif OP == "min":
        old = tl.atomic_min(ptr + offs, val, mask=mask, sem="relaxed")
    elif OP == "and":
        old = tl.atomic_and(ptr + offs, val, mask=mask)
    elif OP == "or":
        old = tl.atomic_or(ptr + offs, val, mask=mask)
    elif OP == "xor":
        old = tl.atomic_xor(ptr + offs, val, mask=mask, scope="cta")
    else:
        old = tl.atomic_xchg(ptr + offs, val, mask=mask)
    tl.store(old_ptr + pid * BLOCK + offs, old, mask=mask)


@pytest.mark.parametrize("op,dtype", [("add", "int32"), ("add", "float32"), ("max", "int32"), ("max", "float32"),
                                      ("min", "int32"), ("min", "uint32"), ("and", "int32"), ("or", "int64"),
                                      ("xor", "int32"), ("xchg", "int32")])
def test_atomic_rmw(device, op, dtype):
    programs, block, n = 4, 16, 13
    if np.dtype(dtype).kind == "f":
        vals = RNG.integers(-50, 50, (programs, block)).astype(dtype)  # exact sums in any order
    else:
        vals = RNG.integers(0 if dtype.startswith("u") else -50, 1 << 12, (programs, block)).astype(dtype)
    init = RNG.integers(0, 40, block).astype(dtype)
    target = device.tensor(init)
    old = device.zeros((programs, block), dtype)
    _atomic_kernel[(programs,)](target, device.tensor(vals), old, n, OP=op, BLOCK=block)
    got, old = device.numpy(target), device.numpy(old)
    reduce = {"add": np.add, "max": np.maximum, "min": np.minimum, "and": np.bitwise_and, "or": np.bitwise_or,
              "xor": np.bitwise_xor}
    if op == "xchg":
        # the final value is one of the exchanged values, and the old values plus it are a permutation
        for j in range(n):
            chain = sorted(list(old[:, j]) + [got[j]])
            assert chain == sorted(list(vals[:, j]) + [init[j]])
    else:
        expected = reduce[op].reduce(np.concatenate([init[None, :n], vals[:, :n]]), axis=0)
        np.testing.assert_array_equal(got[:n], expected)
        # the first update of each lane saw the initial value
        assert all(init[j] in old[:, j] for j in range(n))
    np.testing.assert_array_equal(got[n:], init[n:])  # masked lanes untouched


@tilejit.jit
def _atomic_counter_kernel(counter_ptr, tickets_ptr):
    pid = tl.program_id(0)
    ticket = tl.atomic_add(counter_ptr, 1)
    tl.store(tickets_ptr + pid, ticket)


def test_scalar_atomic_add_hands_out_unique_tickets(device):
    counter, tickets = device.zeros(1, np.int32), device.zeros(32, np.int32)
    _atomic_counter_kernel[(32,)](counter, tickets)
    assert device.numpy(counter)[0] == 32
    assert sorted(device.numpy(tickets).tolist()) == list(range(32))


@tilejit.jit
def _cas_kernel(lock_ptr, out_ptr):
    pid = tl.program_id(0)
    old = tl.atomic_cas(lock_ptr, 0, pid + 1)
    tl.store(out_ptr + pid, old)


def test_atomic_cas_only_first_wins(device):
    lock, out = device.zeros(1, np.int32), device.zeros(8, np.int32)
    _cas_kernel[(8,)](lock, out)
    winner = device.numpy(lock)[0]
    old = device.numpy(out)
    assert 1 <= winner <= 8
    assert old[winner - 1] == 0  # the winner saw the unlocked value
    assert np.count_nonzero(old == 0) == 1 and np.all(old[old != 0] == winner)


@tilejit.jit
def _atomic_old_values_summed(counter_ptr, out_ptr, N: tl.constexpr):
    # N elements over 4 warps: most threads hold copies of an element and skip the atomic itself,
    # yet every thread must see the old values the owners got (the sum crosses lanes and warps).
    old = tl.atomic_add(counter_ptr + tl.arange(0, N), 1)
    tl.store(out_ptr, tl.sum(old, axis=0))
    swapped = tl.atomic_cas(counter_ptr + tl.arange(0, N), old + 1, old + 10)
    tl.store(out_ptr + 1, tl.sum(swapped, axis=0))


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_atomic_old_values_reach_every_copy_of_an_element(device, dtype):
    start = np.arange(4, dtype=dtype) * 3
    counter = device.tensor(start)
    out = device.zeros(2, dtype)
    _atomic_old_values_summed[(1,)](counter, out, N=4, num_warps=4)
    np.testing.assert_array_equal(device.numpy(out), [start.sum(), (start + 1).sum()])
    np.testing.assert_array_equal(device.numpy(counter), start + 10)


@pytest.mark.parametrize("n_blocks", [3, 4])
def test_sums_accumulated_under_ifs_then_atomically_added(device, n_blocks):
    """Liger's attention-residual backward in small: sums built over unrolled blocks under runtime
    `if`s, stored gradients beside them, then atomic_add of the sums from every token."""
    from accumulation_kernels import blockwise_gradient_sums
    tokens, D = 5, 48
    v = np.random.default_rng(3).integers(-4, 5, (n_blocks, tokens, D)).astype(np.float16)
    w = np.random.default_rng(4).integers(-3, 4, D).astype(np.float16)
    dw, dv = device.zeros((2 * D,), np.float32), device.zeros((n_blocks, tokens, D), np.float16)
    blockwise_gradient_sums[(tokens,)](device.tensor(v), device.tensor(w), dw, dv, n_blocks, tokens, D,
                                       BLOCK_D=64, MAX_BLOCKS=4)
    v32, w32 = v.astype(np.float32), w.astype(np.float32)
    weights = np.arange(1, n_blocks + 1, dtype=np.float32)[:, None, None]
    np.testing.assert_array_equal(device.numpy(dw)[:D], (v32 * weights).sum(axis=(0, 1)))
    np.testing.assert_array_equal(device.numpy(dw)[D:], (v32 * w32).sum(axis=(0, 1)))
    np.testing.assert_array_equal(device.numpy(dv), (v32 * w32).astype(np.float16))


def _from_bits(bits, dtype):
    """float32 values of an array holding `dtype` ("float32", "float16" or "bfloat16") or its bits."""
    if dtype == "float32":
        return bits
    if dtype == "float16":
        return bits.view(np.float16).astype(np.float32)
    return (bits.astype(np.uint32) << 16).view(np.float32)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("n", [992, 1000])   # a multiple of 16 (vector atomics on sm_90), and not
def test_wide_atomic_adds_from_many_programs(device, dtype, n):
    """Eight consecutive elements a thread, atomic-added by 6 programs into one row: the totals,
    the masked tail untouched, and every old value one step of its element's chain of updates."""
    from accumulation_kernels import wide_atomic_add
    import tilejit.language as tl
    programs, block = 6, 1024
    vals = np.random.default_rng(5).integers(1, 9, (programs, block)).astype(np.float32)  # exact sums
    storage = np.float32 if dtype == "float32" else np.uint16
    init = np.zeros(block, storage)
    target, old = device.tensor(init), device.zeros((programs, block), storage)
    wide_atomic_add[(programs,)](target, device.tensor(vals), old, n, DTYPE=getattr(tl, dtype), BLOCK=block,
                                 num_warps=4)
    got, old = _from_bits(device.numpy(target), dtype), _from_bits(device.numpy(old), dtype)
    np.testing.assert_array_equal(got[:n], vals[:, :n].sum(axis=0))
    np.testing.assert_array_equal(got[n:], 0)
    for j in (0, 7, 8, 500, n - 1):
        # each update took its element from one value to the next: {old + val} + {0} == {old} + {final}
        assert sorted(list(old[:, j] + vals[:, j]) + [0.0]) == sorted(list(old[:, j]) + [got[j]])
