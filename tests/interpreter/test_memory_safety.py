"""Memory safety of the interpreter (issue 11): only active lanes are checked, so fully masked
accesses to empty tensors run; a pointer's argument is its provenance, never decoded from an
offset that moved it into another argument's memory."""
import numpy as np
import pytest

import tilejit
import tilejit.language as tl
from tilejit.errors import InterpreterError


# -- masked accesses to empty tensors ---------------------------------------------------------------

@tilejit.jit
def masked_copy_kernel(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y + offs, tl.load(x + offs, mask=m, other=1.0) * 2, mask=m)


@tilejit.jit
def masked_materialised_kernel(x, y, n, BLOCK: tl.constexpr):
    # The pointer tensors are loop-carried, so they are built as int64 pointers (no fused path).
    offs = tl.arange(0, BLOCK)
    px = x + offs
    py = y + offs
    for _ in range(2):
        m = offs < n
        tl.store(py, tl.load(px, mask=m) + 1, mask=m)
        px += BLOCK
        py += BLOCK


@tilejit.jit
def masked_scalar_kernel(x, y, n):
    pid = tl.program_id(0)
    v = tl.load(x + pid, mask=pid < n, other=3.0)
    tl.store(y + pid, v, mask=pid < n)


@tilejit.jit
def masked_atomic_kernel(x, out, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    tl.atomic_add(x + offs, 1.0, mask=m)
    old = tl.atomic_cas(x + offs * 0, 0.0, 1.0)  # one real address: not masked, out of bounds when n = 0
    tl.store(out + offs, old, mask=m)


@tilejit.jit
def masked_atomic_only_kernel(x, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.atomic_add(x + offs, 1.0, mask=offs < n)
    tl.atomic_xchg(x + offs, 2.0, mask=offs < n)
    tl.atomic_max(x + offs, 2.0, mask=offs < n)


@tilejit.jit
def block_pointer_kernel(x, y, n, BLOCK: tl.constexpr):
    src = tl.make_block_ptr(x, shape=(n,), strides=(1,), offsets=(0,), block_shape=(BLOCK,), order=(0,))
    dst = tl.make_block_ptr(y, shape=(n,), strides=(1,), offsets=(0,), block_shape=(BLOCK,), order=(0,))
    tl.store(dst, tl.load(src, boundary_check=(0,)) + 1, boundary_check=(0,))


@tilejit.jit
def descriptor_kernel(x, y, n, BLOCK: tl.constexpr):
    dx = tl.make_tensor_descriptor(x, shape=[n], strides=[1], block_shape=[BLOCK])
    dy = tl.make_tensor_descriptor(y, shape=[n], strides=[1], block_shape=[BLOCK])
    dy.store([0], dx.load([0]) + 1)


@tilejit.jit
def masked_dynamic_kernel(a, b, out, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    p = tl.where(offs % 2 == 0, a + offs, b + offs)  # a pointer whose argument is chosen per lane
    tl.store(out + offs, tl.load(p, mask=m), mask=m)


def _empty():
    return np.zeros(0, np.float32)


def test_fully_masked_accesses_to_empty_tensors_run():
    masked_copy_kernel[(2,)](_empty(), _empty(), 0, BLOCK=16)
    masked_materialised_kernel[(1,)](_empty(), _empty(), 0, BLOCK=8)
    masked_scalar_kernel[(3,)](_empty(), _empty(), 0)
    masked_atomic_only_kernel[(2,)](_empty(), 0, BLOCK=8)
    block_pointer_kernel[(1,)](_empty(), _empty(), 0, BLOCK=16)
    descriptor_kernel[(1,)](_empty(), _empty(), 0, BLOCK=16)
    masked_dynamic_kernel[(1,)](_empty(), _empty(), _empty(), 0, BLOCK=8)


def test_masked_accesses_to_short_tensors_give_correct_values():
    x = np.arange(5, dtype=np.float32)
    y = np.zeros(5, np.float32)
    masked_copy_kernel[(2,)](x, y, 5, BLOCK=16)
    assert np.array_equal(y, x * 2)
    y = np.zeros(5, np.float32)
    block_pointer_kernel[(1,)](x, y, 5, BLOCK=16)
    assert np.array_equal(y, x + 1)
    a, b, out = np.arange(3, dtype=np.float32), np.arange(10, 13, dtype=np.float32), np.zeros(3, np.float32)
    masked_dynamic_kernel[(1,)](a, b, out, 3, BLOCK=8)
    assert out.tolist() == [0.0, 11.0, 2.0]


def test_an_active_lane_into_an_empty_tensor_is_still_an_error():
    with pytest.raises(InterpreterError, match="out-of-bounds access to argument 'x'"):
        masked_copy_kernel[(1,)](_empty(), np.zeros(16, np.float32), 1, BLOCK=16)
    with pytest.raises(InterpreterError, match="argument 'x'"):
        masked_atomic_kernel[(1,)](_empty(), np.zeros(8, np.float32), 0, BLOCK=8)
    with pytest.raises(InterpreterError, match="argument 'y'"):
        masked_scalar_kernel[(1,)](np.ones(1, np.float32), _empty(), 1)


# -- pointer provenance -------------------------------------------------------------------------------
# A pointer chosen per lane between two arguments has no single argument the generator knows of; the
# interpreter keeps each lane's argument with the pointer (in its high bits, which pointer arithmetic
# never changes): moving it by 2**40 bytes, the distance between two arguments' encodings, must not
# make it point into the neighbouring argument.

FAR = 2 ** 38  # elements of 4 bytes: 2**40 bytes


@tilejit.jit
def where_load_kernel(a, b, out, shift, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    p = tl.where(offs % 2 == 0, a + offs, b + offs)
    tl.store(out + offs, tl.load(p + shift))


@tilejit.jit
def where_store_kernel(a, b, shift, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    p = tl.where(offs % 2 == 0, a + offs, b + offs)
    tl.store(p + shift, offs.to(tl.float32))


@tilejit.jit
def moved_then_chosen_kernel(a, b, out, shift, BLOCK: tl.constexpr):
    # The argument is known when the pointer moves; the choice comes after.
    offs = tl.arange(0, BLOCK)
    p = tl.where(offs < 2, (a + shift) + offs, b + offs)
    tl.store(out + offs, tl.load(p))


@tilejit.jit
def branch_chosen_kernel(a, b, out, shift):
    pid = tl.program_id(0)
    p = a
    if pid % 2 == 1:
        p = b
    tl.store(out + pid, tl.load(p + pid + shift))


@tilejit.jit(noinline=True)
def _read_far(p, shift, BLOCK: tl.constexpr):
    return tl.load(p + shift + tl.arange(0, BLOCK))


@tilejit.jit
def callee_kernel(a, b, out, shift, BLOCK: tl.constexpr):
    tl.store(out + tl.arange(0, BLOCK), _read_far(a, shift, BLOCK))


@tilejit.jit(noinline=True)
def _block_read(p, n, stride, BLOCK: tl.constexpr):
    # Block offsets are i32; the stride (i64) moves the pointer far.
    bp = tl.make_block_ptr(p, shape=(n,), strides=(stride,), offsets=(0,), block_shape=(BLOCK,), order=(0,))
    return tl.load(bp)


@tilejit.jit
def callee_block_kernel(a, b, out, n, stride, BLOCK: tl.constexpr):
    tl.store(out + tl.arange(0, BLOCK), _block_read(a, n, stride, BLOCK))


def _three():
    return np.arange(16, dtype=np.float32), np.arange(100, 116, dtype=np.float32), np.zeros(16, np.float32)


def test_per_lane_pointer_moved_into_the_next_argument_is_out_of_bounds():
    a, b, out = _three()
    where_load_kernel[(1,)](a, b, out, 0, BLOCK=16)
    assert np.array_equal(out, np.where(np.arange(16) % 2 == 0, a, b))
    with pytest.raises(InterpreterError, match="out-of-bounds access to argument 'a'"):
        where_load_kernel[(1,)](a, b, out, FAR, BLOCK=16)
    with pytest.raises(InterpreterError, match="argument 'a' at a pointer 2\\*\\*39 bytes or more outside"):
        where_load_kernel[(1,)](a, b, out, -FAR, BLOCK=16)  # the lanes of b would land in a


def test_store_through_a_moved_per_lane_pointer_blames_its_own_argument():
    a, b, _ = _three()
    with pytest.raises(InterpreterError, match="argument 'a'"):
        where_store_kernel[(1,)](a, b, FAR, BLOCK=16)
    assert np.array_equal(b, np.arange(100, 116)), "nothing may be written into another argument"


def test_pointer_moved_before_it_is_chosen_keeps_its_argument():
    a, b, out = _three()
    with pytest.raises(InterpreterError, match="argument 'a'"):
        moved_then_chosen_kernel[(1,)](a, b, out, FAR, BLOCK=16)


def test_pointer_chosen_by_a_branch_keeps_its_argument():
    a, b, out = _three()
    branch_chosen_kernel[(4,)](a, b, out, 0)
    assert out[:4].tolist() == [0, 101, 2, 103]
    with pytest.raises(InterpreterError, match="argument 'a'"):
        branch_chosen_kernel[(4,)](a, b, out, FAR)


def test_pointer_passed_to_a_function_keeps_its_argument():
    a, b, out = _three()
    callee_kernel[(1,)](a, b, out, 0, BLOCK=16)
    assert np.array_equal(out, a)
    with pytest.raises(InterpreterError, match="argument 'a'"):
        callee_kernel[(1,)](a, b, out, FAR, BLOCK=16)
    callee_block_kernel[(1,)](a, b, out, 16, 1, BLOCK=16)
    assert np.array_equal(out, a)
    with pytest.raises(InterpreterError, match="argument 'a'"):
        callee_block_kernel[(1,)](a, b, out, 16, FAR, BLOCK=16)
