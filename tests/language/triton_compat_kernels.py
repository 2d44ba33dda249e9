"""Kernels for test_triton_error_compat.py: module globals and helpers Triton's own
test_compile_errors.py exercises."""
import tilejit
import tilejit.language as tl

ANNOTATED_BLOCK: tl.constexpr = 64   # newer Triton reads an annotated module global as a constexpr
PLAIN_GLOBAL = 42


@tilejit.jit
def store_annotated_global(p):
    tl.store(p + tl.arange(0, ANNOTATED_BLOCK), tl.arange(0, ANNOTATED_BLOCK).to(tl.float32))


@tilejit.jit
def reads_plain_global(p):
    tl.store(p, PLAIN_GLOBAL)


def make_capturing_kernel():
    captured = 42

    @tilejit.jit
    def capturing(p):
        tl.store(p, captured)
    return capturing


@tilejit.jit
def failing_static_assert():
    tl.static_assert(isinstance(0, tl.tensor))


@tilejit.jit
def arange_not_power_of_two():
    tl.arange(2, 7)


@tilejit.jit
def full_not_power_of_two():
    tl.full((33, ), 0, dtype=tl.int64)


@tilejit.jit
def where_with_integer_condition(p, TAG: tl.constexpr):
    """(TAG: a specialization of each test's own, so that each compiles and warns)"""
    a = tl.full((64, ), 0, tl.uint32)
    tl.store(p + tl.arange(0, 64), tl.where(a, 1.0, 2.0))


@tilejit.jit
def imprecise_acc_above_k():
    a = tl.full((64, 64), 0.0, tl.float8e5)
    b = tl.full((64, 64), 0.0, tl.float8e5)
    tl.dot(a, b, max_num_imprecise_acc=128)
