"""`tl.atomic_load` / `tl.atomic_store` (Triton 3.9): masked copies of every element type, the
tensor-member spellings, programs that hand data to each other through a released flag, and
Triton's errors for the memory semantics and masks they do not accept."""
import numpy as np
import pytest

import tilejit
import tilejit.language as tl
from tilejit.errors import TritonError


@tilejit.jit
def _copy_kernel(src_ptr, dst_ptr, n, LOAD_SEM: tl.constexpr, STORE_SEM: tl.constexpr, SCOPE: tl.constexpr,
                 MEMBER: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    if MEMBER:
        value = (src_ptr + offs).atomic_load(mask=mask, sem=LOAD_SEM, scope=SCOPE)
        (dst_ptr + offs).atomic_store(value, mask=mask, sem=STORE_SEM, scope=SCOPE)
    else:
        value = tl.atomic_load(src_ptr + offs, mask=mask, sem=LOAD_SEM, scope=SCOPE)
        tl.atomic_store(dst_ptr + offs, value, mask=mask, sem=STORE_SEM, scope=SCOPE)


_DTYPES = [np.int8, np.uint8, np.int16, np.int32, np.uint32, np.int64, np.float16, np.float32, np.float64,
           np.bool_]


def _source(dtype, n):
    if dtype == np.bool_:
        return np.arange(n) % 3 == 1
    values = np.arange(n) * 7 - n
    if np.issubdtype(dtype, np.unsignedinteger):
        values = np.abs(values)
    return (values / 4 if np.issubdtype(dtype, np.floating) else values).astype(dtype)


@pytest.mark.parametrize("dtype", _DTYPES)
@pytest.mark.parametrize("member", [False, True])
def test_masked_copy_keeps_every_element_type(device, dtype, member):
    src = _source(dtype, 64)
    sentinel = np.ones(1, dtype)[0]
    dst = device.full(64, sentinel, dtype)
    _copy_kernel[(1,)](device.tensor(src), dst, 45, LOAD_SEM=None, STORE_SEM=None, SCOPE=None, MEMBER=member,
                       BLOCK=64)
    expected = np.where(np.arange(64) < 45, src, sentinel)
    np.testing.assert_array_equal(device.numpy(dst), expected)


@pytest.mark.parametrize("load_sem, store_sem", [("acquire", "release"), ("relaxed", "relaxed"),
                                                 ("acquire", "relaxed"), ("relaxed", "release")])
@pytest.mark.parametrize("scope", ["gpu", "cta", "sys"])
def test_every_accepted_semantics_and_scope_copies(device, load_sem, store_sem, scope):
    src = _source(np.int32, 32)
    dst = device.zeros(32, np.int32)
    _copy_kernel[(1,)](device.tensor(src), dst, 32, LOAD_SEM=load_sem, STORE_SEM=store_sem, SCOPE=scope,
                       MEMBER=False, BLOCK=32)
    np.testing.assert_array_equal(device.numpy(dst), src)


@tilejit.jit
def _scalar_kernel(src_ptr, dst_ptr, BLOCK: tl.constexpr):
    value = tl.atomic_load(src_ptr)          # one read, seen by the whole program
    tl.store(dst_ptr + tl.arange(0, BLOCK), tl.full([BLOCK], 0, tl.int32) + value)
    tl.atomic_store(dst_ptr + BLOCK, value + 1)


def test_scalar_pointer_load_is_seen_by_the_whole_block(device):
    dst = device.zeros(129, np.int32)
    _scalar_kernel[(1,)](device.tensor(np.array([-9], np.int32)), dst, BLOCK=128)
    np.testing.assert_array_equal(device.numpy(dst), [-9] * 128 + [-8])


@tilejit.jit
def _chain_kernel(flag_ptr, value_ptr, BLOCK: tl.constexpr):
    # Program i waits for program i + 1 (the last one starts), adds one to what it wrote and
    # releases its own flag: the values only come out right if every acquire sees the release.
    pid = tl.program_id(0)
    last = tl.num_programs(0) - 1
    offs = tl.arange(0, BLOCK)
    if pid == last:
        tl.store(value_ptr + pid * BLOCK + offs, offs)
    else:
        while tl.atomic_load(flag_ptr + pid + 1) == 0:
            pass
        tl.store(value_ptr + pid * BLOCK + offs, tl.load(value_ptr + (pid + 1) * BLOCK + offs) + 1)
    tl.atomic_store(flag_ptr + pid, 1)


def test_release_store_and_acquire_load_hand_data_between_programs(device):
    programs, block = 4, 32
    flags = device.zeros(programs, np.int32)
    values = device.zeros(programs * block, np.int32)
    _chain_kernel[(programs,)](flags, values, BLOCK=block)
    expected = np.arange(block)[None, :] + (programs - 1 - np.arange(programs))[:, None]
    np.testing.assert_array_equal(device.numpy(values).reshape(programs, block), expected)
    np.testing.assert_array_equal(device.numpy(flags), [1] * programs)


@tilejit.jit
def _bool_kernel(src_ptr, dst_ptr, count_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    flags = tl.atomic_load(src_ptr + offs)
    tl.static_assert(flags.dtype == tl.int1)
    tl.store(count_ptr, tl.sum(flags.to(tl.int32)))
    tl.atomic_store(dst_ptr + offs, ~flags)


def test_bool_pointers_load_int1_and_store_bytes(device):
    src = np.arange(16) % 4 == 0
    dst = device.zeros(16, np.bool_)
    count = device.zeros(1, np.int32)
    _bool_kernel[(1,)](device.tensor(src), dst, count, BLOCK=16)
    np.testing.assert_array_equal(device.numpy(dst), ~src)
    assert device.numpy(count)[0] == 4


@tilejit.jit
def _bad_load_kernel(ptr, SEM: tl.constexpr):
    tl.atomic_load(ptr, sem=SEM)


@tilejit.jit
def _bad_store_kernel(ptr, SEM: tl.constexpr):
    tl.atomic_store(ptr, 1, sem=SEM)


@pytest.mark.parametrize("sem", ["release", "acq_rel"])
def test_atomic_load_rejects_release_semantics(sem):
    with pytest.raises(TritonError, match="atomic_load only supports acquire and relaxed semantics"):
        _bad_load_kernel[(1,)](np.zeros(1, np.int32), SEM=sem)


@pytest.mark.parametrize("sem", ["acquire", "acq_rel"])
def test_atomic_store_rejects_acquire_semantics(sem):
    with pytest.raises(TritonError, match="atomic_store only supports release and relaxed semantics"):
        _bad_store_kernel[(1,)](np.zeros(1, np.int32), SEM=sem)


def test_unknown_semantics_is_an_error():
    with pytest.raises(TritonError, match="sem must be one of"):
        _bad_load_kernel[(1,)](np.zeros(1, np.int32), SEM="seq_cst")


def test_mask_must_be_boolean():
    @tilejit.jit
    def kernel(ptr):
        offs = tl.arange(0, 4)
        tl.atomic_store(ptr + offs, offs, mask=offs)

    with pytest.raises(TritonError, match="Mask must have boolean scalar type"):
        kernel[(1,)](np.zeros(4, np.int32))


def test_block_mask_on_a_scalar_pointer_is_an_error():
    @tilejit.jit
    def kernel(ptr):
        tl.atomic_load(ptr, mask=tl.arange(0, 4) < 2)

    with pytest.raises(TritonError, match="Mask argument cannot be block type"):
        kernel[(1,)](np.zeros(4, np.int32))
