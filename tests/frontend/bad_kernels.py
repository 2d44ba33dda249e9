"""Kernels that must fail to compile. The offending line of each is marked with `# ERR`."""
import tilejit.language as tl
from tilejit.runtime.jit import jit

GLOBAL_INT = 3
GLOBAL_CONST = tl.constexpr(4)


def plain_python(x):
    return x


@jit
def helper2(a, b):
    return a + b


@jit
def helper_typed(x):
    if x > 0:
        return 1.0
    return 1


@jit
def arange_not_pow2():
    tl.arange(0, 10)  # ERR


@jit
def arange_runtime_bound(n):
    tl.arange(0, n)  # ERR


@jit
def arange_reversed():
    tl.arange(8, 4)  # ERR


@jit
def arange_too_big():
    tl.arange(0, 1 << 22)  # ERR


@jit
def add_shape_mismatch():
    a = tl.arange(0, 16)
    b = tl.arange(0, 32)
    c = a + b  # ERR


@jit
def bitwise_on_float(p):
    x = tl.load(p)
    y = x & 1  # ERR


@jit
def xor_on_float(p):
    x = tl.load(p)
    y = x ^ x  # ERR


@jit
def shift_on_float(p):
    x = tl.load(p)
    y = x << 2  # ERR


@jit
def invert_float(p):
    x = tl.load(p)
    y = ~x  # ERR


@jit
def calls_plain_python(p):
    x = plain_python(p)  # ERR


@jit
def uses_lambda(p):
    f = lambda x: x  # ERR  # noqa: E731


@jit
def uses_with(p):
    with open("x"):  # ERR
        pass


@jit
def uses_try(p):
    try:  # ERR
        pass
    except Exception:
        pass


@jit
def uses_break(n):
    for i in range(n):
        break  # ERR


@jit
def uses_continue(n):
    for i in range(n):
        continue  # ERR


@jit
def uses_global_decl(n):
    global GLOBAL_INT  # ERR


@jit
def uses_del(p):
    x = 1
    del x  # ERR


@jit
def uses_list_comp(p):
    x = [i * j for i in range(3) for j in range(2)]  # ERR


@jit
def uses_nested_def(p):
    def inner():  # ERR
        pass


@jit
def uses_raise(p):
    raise ValueError("no")  # ERR


@jit
def undefined_name(p):
    x = not_defined_anywhere + 1  # ERR


@jit
def non_constexpr_global(p):
    x = GLOBAL_INT + 1  # ERR


@jit
def loop_type_change(p, n):
    acc = tl.zeros([16], dtype=tl.float32)
    for i in range(n):  # ERR
        acc = acc.to(tl.float16)


@jit
def branch_type_mismatch(p, flag):
    if flag > 0:  # ERR
        x = tl.zeros([16], dtype=tl.float32)
    else:
        x = tl.zeros([16], dtype=tl.int32)
    tl.store(p + tl.arange(0, 16), x)


@jit
def too_many_args(p):
    x = helper2(p, p, p)  # ERR


@jit
def missing_args(p):
    x = helper2(p)  # ERR


@jit
def dot_shape_mismatch(p):
    a = tl.zeros([32, 16], dtype=tl.float16)
    b = tl.zeros([32, 16], dtype=tl.float16)
    c = tl.dot(a, b)  # ERR


@jit
def dot_bad_precision(p):
    a = tl.zeros([16, 16], dtype=tl.float32)
    c = tl.dot(a, a, input_precision="fp64")  # ERR


@jit
def dot_dtype_mismatch(p):
    a = tl.zeros([16, 16], dtype=tl.float16)
    b = tl.zeros([16, 16], dtype=tl.float32)
    c = tl.dot(a, b)  # ERR


@jit
def store_to_non_pointer(n):
    tl.store(n, 1)  # ERR


@jit
def load_of_float(x):
    y = tl.load(x)  # ERR


@jit
def bad_boundary_check(p):
    bp = tl.make_block_ptr(p, (16, 16), (16, 1), (0, 0), (16, 16), (1, 0))
    x = tl.load(bp, boundary_check=(2,))  # ERR


@jit
def boundary_check_plain_ptr(p):
    x = tl.load(p + tl.arange(0, 16), boundary_check=(0,))  # ERR


@jit
def mask_with_block_ptr(p):
    bp = tl.make_block_ptr(p, (16, 16), (16, 1), (0, 0), (16, 16), (1, 0))
    x = tl.load(bp, mask=True)  # ERR


@jit
def bad_padding(p):
    bp = tl.make_block_ptr(p, (16, 16), (16, 1), (0, 0), (16, 16), (1, 0))
    x = tl.load(bp, padding_option="ones")  # ERR


@jit
def floordiv_float(p):
    x = tl.load(p)
    y = x // 2  # ERR


@jit
def pow_on_tensor(p):
    x = tl.load(p)
    y = x ** 2  # ERR


@jit
def static_assert_fails(p, N: tl.constexpr):
    tl.static_assert(N > 100, "N too small")  # ERR


@jit
def assert_constexpr_fails(p, N: tl.constexpr):
    assert N > 100, "N must be big"  # ERR


@jit
def tensor_if_condition(p):
    x = tl.load(p + tl.arange(0, 16))
    if x > 0:  # ERR
        pass


@jit
def return_in_loop(p, n):
    for i in range(n):
        return  # ERR


@jit
def unsigned_negative_scalar(p):
    x = tl.load(p)
    y = x + -1  # ERR


@jit
def scalar_out_of_range(p):
    x = tl.load(p)
    y = x + 300  # ERR


@jit
def bad_cast_rounding(p):
    x = tl.load(p)
    y = x.to(tl.float64, fp_downcast_rounding="rtz")  # ERR


@jit
def bitcast_size_mismatch(p):
    x = tl.load(p)
    y = x.to(tl.int64, bitcast=True)  # ERR


@jit
def reshape_bad_numel(p):
    x = tl.arange(0, 16)
    y = tl.reshape(x, (4, 8))  # ERR


@jit
def unknown_tensor_attribute(p):
    x = tl.arange(0, 16)
    y = x.no_such_thing  # ERR


@jit
def helper_mismatched_returns(p, flag):
    y = helper_typed(flag)  # ERR


@jit
def exp_of_int(p):
    y = tl.exp(tl.arange(0, 16))  # ERR


@jit
def program_id_bad_axis():
    tl.program_id(3)  # ERR


@jit
def bad_cache_modifier(p):
    x = tl.load(p, cache_modifier=".zz")  # ERR


@jit
def unpack_mismatch(p):
    a, b, c = helper_pair(p)  # ERR


@jit
def helper_pair(p):
    return p, p


@jit
def kernel_returns_value(p):
    return p  # ERR


@jit
def uses_async_for_walrus(p):
    if (y := 3) > 2:  # ERR
        pass


@jit
def uses_dict(p):
    d = {"a": 1}  # ERR


@jit
def tensor_index(p):
    x = tl.arange(0, 16)
    y = x[3]  # ERR


@jit
def matmul_operator(p):
    a = tl.zeros([16, 16], dtype=tl.float32)
    c = a @ a  # ERR


@jit
def atomic_on_block_ptr(p):
    bp = tl.make_block_ptr(p, (16, 16), (16, 1), (0, 0), (16, 16), (1, 0))
    tl.atomic_add(bp, 1.0)  # ERR


@jit
def where_shape_mismatch(p):
    a = tl.arange(0, 16)
    b = tl.arange(0, 32)
    c = tl.where(a > 0, a, b)  # ERR


@jit
def mod_mixed_signedness(p, q):
    a = tl.load(p)
    b = tl.load(q)
    c = a % b  # ERR


@jit
def reduce_bad_axis(p):
    x = tl.arange(0, 16)
    y = tl.sum(x, axis=2)  # ERR


@jit
def full_non_pow2(p):
    x = tl.full([12], 0, tl.float32)  # ERR


@jit
def constexpr_annot_tensor(p):
    x: tl.constexpr = tl.load(p)  # ERR
