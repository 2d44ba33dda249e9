"""The builtin functions of `tl` (Triton 3.x names and signatures).

Each is marked `@builtin` and receives the frontend's `Semantic` as `_semantic`; the work happens in
`semantic.py`. Reductions and scans here are the fallbacks; `standard.py` may redefine them as `@jit`
functions over `tl.reduce` / `tl.associative_scan`, and `tilejit.language` then exports those.
"""
from __future__ import annotations

import builtins as _py

from .core import (builtin, constexpr, tensor, _unwrap_if_constexpr,
                   float32, int32, int64, uint32)
from .semantic_memory import _const_int_list

__all__ = [
    "program_id", "num_programs", "arange", "full", "cast", "load", "store", "make_block_ptr", "advance",
    "make_tensor_descriptor", "load_tensor_descriptor", "store_tensor_descriptor", "where", "maximum",
    "minimum", "clamp", "fma", "fdiv", "div_rn", "sqrt_rn", "umulhi", "dot", "atomic_add", "atomic_max",
    "atomic_min", "atomic_and", "atomic_or", "atomic_xor", "atomic_xchg", "atomic_cas", "atomic_load",
    "atomic_store", "reduce",
    "associative_scan", "reshape", "view", "expand_dims", "squeeze", "unsqueeze", "to_tensor", "expect_zero", "broadcast", "broadcast_to", "trans", "permute",
    "join", "split", "cat", "item", "gather", "histogram", "static_assert", "static_print", "device_print",
    "device_assert", "debug_barrier", "multiple_of", "max_contiguous", "max_constancy", "assume", "range",
    "static_range", "abs", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "floor", "ceil",
    "erf", "PropagateNan", "inline_asm_elementwise", "add", "sub", "mul", "map_elementwise", "async_task",
    "condition",
]


class PropagateNan:
    NONE = "none"
    ALL = "all"


def _shape_args(shape, what="shape"):
    """`f(x, 4, 4)` or `f(x, [4, 4])` -> [4, 4], every entry a compile-time int (named TypeError if not)."""
    shape = tuple(_unwrap_if_constexpr(s) for s in shape)
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(_unwrap_if_constexpr(s) for s in shape[0])
    return _const_int_list(list(shape), what)


def _axis_arg(axis, what: str):
    """An axis argument: a compile-time int (or None where the builtin allows it)."""
    axis = _unwrap_if_constexpr(axis)
    if axis is not None and (isinstance(axis, bool) or not isinstance(axis, int)):
        got = "a tensor" if isinstance(axis, tensor) else f"{type(axis).__name__} {axis!r}"
        raise TypeError(f"{what}: axis must be a constexpr integer, got {got}")
    return axis


# -- programs, ranges, creation -----------------------------------------------------------------------

@builtin
def program_id(axis, _semantic=None):
    return _semantic.program_id(axis)


@builtin
def num_programs(axis, _semantic=None):
    return _semantic.num_programs(axis)


@builtin
def arange(start, end, _semantic=None):
    return _semantic.arange(start, end)


@builtin
def full(shape, value, dtype, _semantic=None):
    return _semantic.full(_const_int_list(shape, "tl.full shape"), value, dtype)


@builtin
def cast(input, dtype, fp_downcast_rounding=None, bitcast=False, _semantic=None):
    dtype = _unwrap_if_constexpr(dtype)
    if _unwrap_if_constexpr(bitcast):
        return _semantic.bitcast(input, dtype)
    return _semantic.cast(input, dtype, _unwrap_if_constexpr(fp_downcast_rounding))


# -- memory ---------------------------------------------------------------------------------------------

@builtin
def load(pointer, mask=None, other=None, boundary_check=(), padding_option="", cache_modifier="",
         eviction_policy="", volatile=False, _semantic=None):
    return _semantic.load(pointer, mask, other, boundary_check, padding_option, cache_modifier,
                          eviction_policy, volatile)


@builtin
def store(pointer, value, mask=None, boundary_check=(), cache_modifier="", eviction_policy="", _semantic=None):
    return _semantic.store(pointer, value, mask, boundary_check, cache_modifier, eviction_policy)


@builtin
def make_block_ptr(base, shape, strides, offsets, block_shape, order, _semantic=None):
    return _semantic.make_block_ptr(base, shape, strides, offsets, block_shape, order)


@builtin
def advance(base, offsets, _semantic=None):
    return _semantic.advance(base, offsets)


@builtin
def make_tensor_descriptor(base, shape, strides, block_shape, padding_option="zero", _semantic=None):
    """A descriptor of the `shape` tensor at `base`; its loads read `block_shape` blocks, elements
    outside the tensor as zero, or as NaN with `padding_option="nan"` (floating-point blocks)."""
    return _semantic.make_tensor_descriptor(base, shape, strides, block_shape,
                                            _unwrap_if_constexpr(padding_option) or "zero")


@builtin
def load_tensor_descriptor(desc, offsets, _semantic=None):
    return _semantic.descriptor_load(desc, offsets)


@builtin
def store_tensor_descriptor(desc, offsets, value, _semantic=None):
    return _semantic.descriptor_store(desc, value, offsets)


def _atomic(op):
    def fn(pointer, val, mask=None, sem=None, scope=None, _semantic=None):
        return _semantic.atomic_rmw(op, pointer, val, mask, sem, scope)
    fn.__name__ = fn.__qualname__ = f"atomic_{op}"
    fn.__doc__ = f"Atomic {op} of `val` into `*pointer`; returns the old value."
    return builtin(fn)


atomic_add = _atomic("add")
atomic_max = _atomic("max")
atomic_min = _atomic("min")
atomic_and = _atomic("and")
atomic_or = _atomic("or")
atomic_xor = _atomic("xor")
atomic_xchg = _atomic("xchg")


@builtin
def atomic_cas(pointer, cmp, val, sem=None, scope=None, _semantic=None):
    return _semantic.atomic_cas(pointer, cmp, val, sem, scope)


@builtin
def atomic_load(pointer, mask=None, sem=None, scope=None, _semantic=None):
    """Atomically load `*pointer` (sem "acquire" (default) or "relaxed"; scope "gpu", "cta", "sys")."""
    return _semantic.atomic_load(pointer, mask, sem, scope)


@builtin
def atomic_store(pointer, val, mask=None, sem=None, scope=None, _semantic=None):
    """Atomically store `val` to `*pointer` (sem "release" (default) or "relaxed")."""
    return _semantic.atomic_store(pointer, val, mask, sem, scope)


# -- elementwise -----------------------------------------------------------------------------------------

@builtin
def where(condition, x, y, _semantic=None):
    return _semantic.where(condition, x, y)


@builtin
def maximum(x, y, propagate_nan=PropagateNan.NONE, _semantic=None):
    return _semantic.minmax(x, y, True, _unwrap_if_constexpr(propagate_nan))


@builtin
def minimum(x, y, propagate_nan=PropagateNan.NONE, _semantic=None):
    return _semantic.minmax(x, y, False, _unwrap_if_constexpr(propagate_nan))


@builtin
def clamp(x, min, max, propagate_nan=PropagateNan.NONE, _semantic=None):
    return _semantic.clamp(x, min, max, _unwrap_if_constexpr(propagate_nan))


@builtin
def fma(x, y, z, _semantic=None):
    return _semantic.fma(x, y, z)


@builtin
def fdiv(x, y, ieee_rounding=False, _semantic=None):
    return _semantic.fdiv(x, y, bool(_unwrap_if_constexpr(ieee_rounding)))


@builtin
def div_rn(x, y, _semantic=None):
    return _semantic.fdiv(x, y, True)


@builtin
def sqrt_rn(x, _semantic=None):
    return _semantic.float_unary("tt.precise_sqrt", x, name="sqrt_rn")


@builtin
def umulhi(x, y, _semantic=None):
    return _semantic.umulhi(x, y)


def _float_math(op, name, allowed=("fp32", "fp64")):
    def fn(x, _semantic=None):
        return _semantic.float_unary(op, x, allowed, name)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise {name} (`{op}`)."
    return builtin(fn)


exp = _float_math("math.exp", "exp")
exp2 = _float_math("math.exp2", "exp2")
log = _float_math("math.log", "log")
log2 = _float_math("math.log2", "log2")
sqrt = _float_math("math.sqrt", "sqrt", ("fp32", "fp64"))
rsqrt = _float_math("math.rsqrt", "rsqrt")
sin = _float_math("math.sin", "sin")
cos = _float_math("math.cos", "cos")
floor = _float_math("math.floor", "floor")
ceil = _float_math("math.ceil", "ceil")
erf = _float_math("math.erf", "erf")


@builtin
def abs(x, _semantic=None):
    return _semantic.abs(x)


@builtin
def dot(input, other, acc=None, input_precision=None, allow_tf32=None, max_num_imprecise_acc=None,
        out_dtype=float32, _semantic=None):
    return _semantic.dot(input, other, acc, input_precision, allow_tf32, max_num_imprecise_acc, out_dtype)


def _sanitized_binary(sem, method: str, x, y, sanitize_overflow):
    """`x <op> y` as the operator computes it; with `sanitize_overflow` (the argument and the compile
    option, both on by default) and a `debug` compilation, integer operands narrower than 64 bits are
    also computed in int64 and a device assert checks that the result fits the operand type (Triton
    3.x's overflow sanitizer)."""
    result = getattr(sem, method)(x, y)
    ty = result.type.scalar
    debug = bool(getattr(sem.options, "debug", False))
    enabled = _unwrap_if_constexpr(sanitize_overflow) and bool(getattr(sem.options, "sanitize_overflow", True))
    if not (enabled and debug and ty.is_int() and not ty.is_bool()
            and ty.int_bitwidth < 64):
        return result
    a, b = sem.binary_operands(x, y)
    wide = getattr(sem, method)(sem.cast(a, int64), sem.cast(b, int64))
    fits = sem.and_(sem.less_equal(wide, ty.get_int_max_value()), sem.greater_equal(wide, ty.get_int_min_value()))
    sem.device_assert(fits, f"int{ty.int_bitwidth} overflow detected for operation {method}")
    return result


@builtin
def add(x, y, sanitize_overflow=True, _semantic=None):
    """`x + y` (Triton 3.x's function form; also adds an integer offset to a pointer)."""
    x, y = _unwrap_if_constexpr(x), _unwrap_if_constexpr(y)
    if not isinstance(x, tensor) and not isinstance(y, tensor):
        return constexpr(x + y)
    if (isinstance(x, tensor) and x.type.scalar.is_ptr()) or (isinstance(y, tensor) and y.type.scalar.is_ptr()):
        return _semantic.add(x, y)
    return _sanitized_binary(_semantic, "add", x, y, sanitize_overflow)


@builtin
def sub(x, y, sanitize_overflow=True, _semantic=None):
    """`x - y` (Triton 3.x's function form)."""
    x, y = _unwrap_if_constexpr(x), _unwrap_if_constexpr(y)
    if not isinstance(x, tensor) and not isinstance(y, tensor):
        return constexpr(x - y)
    if isinstance(x, tensor) and x.type.scalar.is_ptr():
        return _semantic.sub(x, y)
    return _sanitized_binary(_semantic, "sub", x, y, sanitize_overflow)


@builtin
def mul(x, y, sanitize_overflow=True, _semantic=None):
    """`x * y` (Triton 3.x's function form)."""
    x, y = _unwrap_if_constexpr(x), _unwrap_if_constexpr(y)
    if not isinstance(x, tensor) and not isinstance(y, tensor):
        return constexpr(x * y)
    return _sanitized_binary(_semantic, "mul", x, y, sanitize_overflow)


@builtin
def map_elementwise(scalar_fn, *args, pack=1, _semantic=None):
    """Apply the `@jit` function `scalar_fn` to each element of the (broadcast) `args` (Triton 3.5).

    `scalar_fn` is written for scalars and may branch and loop on them; it returns one value or a
    tuple. With `pack=n` it receives `n` consecutive elements of each argument (argument-major) and
    returns `n` values per result (result-major). See `frontend/predication.py` for how it compiles."""
    if _semantic.codegen is None:
        raise RuntimeError("map_elementwise needs the frontend")
    return _semantic.codegen.map_elementwise(_unwrap_if_constexpr(scalar_fn), list(args),
                                             _unwrap_if_constexpr(pack))


@builtin
def inline_asm_elementwise(asm, constraints, args, dtype, is_pure, pack, _semantic=None):
    """Run the assembly `asm` (PTX on NVIDIA, GCN on AMD) once per `pack` elements of the broadcast
    `args`; one result per dtype (a tuple when `dtype` is a sequence). GPU backends only: the
    interpreter has no machine to run it on."""
    dtype = _unwrap_if_constexpr(dtype)
    several = isinstance(dtype, (tuple, list))
    results = _semantic.inline_asm_elementwise(
        _unwrap_if_constexpr(asm), _unwrap_if_constexpr(constraints),
        [_unwrap_if_constexpr(a) for a in (_unwrap_if_constexpr(args) or [])],
        [_unwrap_if_constexpr(d) for d in dtype] if several else [dtype],
        bool(_unwrap_if_constexpr(is_pure)), _unwrap_if_constexpr(pack))
    return tuple(results) if several else results[0]


# -- shapes -----------------------------------------------------------------------------------------------

@builtin
def reshape(input, *shape, can_reorder=False, _semantic=None):
    return _semantic.reshape(input, _shape_args(shape, "reshape shape"), bool(_unwrap_if_constexpr(can_reorder)))


@builtin
def view(input, *shape, _semantic=None):
    return _semantic.reshape(input, _shape_args(shape, "view shape"), True)


@builtin
def expand_dims(input, axis, _semantic=None):
    axis = _unwrap_if_constexpr(axis)
    axes = [_axis_arg(a, "expand_dims") for a in (axis if isinstance(axis, (tuple, list)) else [axis])]
    if None in axes:
        raise TypeError("expand_dims: axis must be a constexpr integer, got None")
    input = _semantic.to_tensor(input)
    rank = (len(input.type.shape) if input.type.is_block() else 0) + len(axes)
    axes = [_unwrap_if_constexpr(a) for a in axes]
    for a in axes:   # each axis indexes the result (rank dims), as Triton's _wrap_axis checks
        if not -rank <= a < rank:
            raise ValueError(f"invalid axis {a}. Expected {-rank} <= axis < {rank}")
    axes = [a + rank if a < 0 else a for a in axes]
    if len(set(axes)) != len(axes):
        raise ValueError(f"expand_dims received duplicate axes, normalized axes = {axes}")
    axes = sorted(axes)
    for a in axes:
        input = _semantic.expand_dims(input, a)
    return input


@builtin
def to_tensor(x, _semantic=None):
    """A Python scalar as a 0-d tensor (bool -> int1; int -> the smallest of int32, uint32, int64,
    uint64 holding it; float -> fp32, or fp64 outside fp32's range); a tensor unchanged (Triton 3.x)."""
    return _semantic.to_tensor(x)


@builtin
def expect_zero(x, mask, _semantic=None):
    """Marks values of `x` expected to have underflowed to zero where `mask` is true (Triton 3.x).
    Without Triton's floating-point sanitizer this is `x` itself, as in Triton's regular builds."""
    _semantic.to_tensor(mask)
    return _semantic.to_tensor(x)


def _dim_in_range(dim, rank: int, what: str) -> int:
    """A constexpr dimension index in [-rank, rank), made non-negative (Triton's squeeze/unsqueeze)."""
    dim = _axis_arg(dim, what)
    if dim is None or not -rank <= dim < rank:
        raise ValueError(f"{what}: dim must be in [{-rank}, {rank}), got {dim}")
    return dim + rank if dim < 0 else dim


@builtin
def unsqueeze(x, dim, _semantic=None):
    """A length-1 dimension inserted at `dim` (Triton 3.x; `expand_dims` with one axis)."""
    x = _semantic.to_tensor(x)
    shape = list(x.type.shape) if x.type.is_block() else []
    return _semantic.expand_dims(x, _dim_in_range(dim, len(shape) + 1, "unsqueeze"))


@builtin
def squeeze(x, dim, _semantic=None):
    """The length-1 dimension `dim` removed (Triton 3.x; checked at compile time)."""
    x = _semantic.to_tensor(x)
    shape = list(x.type.shape) if x.type.is_block() else []
    dim = _dim_in_range(dim, len(shape), "squeeze")
    if shape[dim] != 1:
        raise ValueError(f"squeeze: dimension {dim} of a tensor of shape {shape} has length {shape[dim]}, not 1")
    return _semantic.reshape(x, shape[:dim] + shape[dim + 1:], False)


@builtin
def broadcast(input, other, _semantic=None):
    return _semantic.broadcast_values(_semantic.to_tensor(input), _semantic.to_tensor(other))


@builtin
def broadcast_to(input, *shape, _semantic=None):
    return _semantic.broadcast_to(input, _shape_args(shape, "broadcast_to shape"))


@builtin
def trans(input, *dims, _semantic=None):
    """Permutes the axes as `dims` says; without dims, swaps the last two (a batched 2-D transpose,
    as Triton 3.x and NumPy's `x.mT`)."""
    dims = _shape_args(dims, "trans dims")
    if not dims:
        input = _semantic.to_tensor(input)
        rank = len(input.type.shape) if input.type.is_block() else 0
        if rank < 2:
            raise ValueError(f"tl.trans without dims needs a tensor of rank >= 2, got rank {rank}")
        dims = list(_py.range(rank - 2)) + [rank - 1, rank - 2]
    return _semantic.permute(input, dims)


@builtin
def permute(input, *dims, _semantic=None):
    return _semantic.permute(input, _shape_args(dims, "permute dims"))


@builtin
def join(a, b, _semantic=None):
    return _semantic.join(a, b)


@builtin
def split(a, _semantic=None):
    return _semantic.split(a)


@builtin
def cat(input, other, can_reorder=False, dim=0, _semantic=None):
    """Concatenate two blocks of the same shape along `dim` (Triton 3.x). `can_reorder=True` is
    Triton's deprecated hint: 1-D blocks joined in an order the compiler may choose."""
    if _unwrap_if_constexpr(can_reorder):
        return _semantic.cat(input, other, True)
    return _semantic.cat_along(input, other, _unwrap_if_constexpr(dim))


@builtin
def item(input, _semantic=None):
    """A single-element tensor as a scalar (Triton 3.x's `x.item()`)."""
    return _semantic.unsplat(input)


@builtin
def gather(src, index, axis, _semantic=None):
    return _semantic.gather(src, index, axis)


@builtin
def histogram(input, num_bins, mask=None, _semantic=None):
    return _semantic.histogram(input, num_bins, mask)


# -- reductions and scans -----------------------------------------------------------------------------------

def _combine_callable(combine_fn, _semantic):
    """A Python function `(list of scalar tensors) -> results` for a `@jit` or plain combine function."""
    combine_fn = _unwrap_if_constexpr(combine_fn)
    if hasattr(combine_fn, "arg_names") and hasattr(combine_fn, "src"):
        if _semantic.codegen is None:
            raise RuntimeError("a @jit combine function needs the frontend")
        # A combine function works on scalars, even inside a tl.map_elementwise function.
        return lambda args: _semantic.codegen.call_jit_function(combine_fn, args, {}, elementwise=False)
    if callable(combine_fn):
        return lambda args: combine_fn(*args)
    raise TypeError(f"combine_fn must be a @jit function, got {type(combine_fn).__name__}")


@builtin
def reduce(input, axis, combine_fn, keep_dims=False, _semantic=None):
    return _semantic.reduction(_unwrap_if_constexpr(input), axis, _combine_callable(combine_fn, _semantic),
                               keep_dims)


@builtin
def associative_scan(input, axis, combine_fn, reverse=False, _semantic=None):
    return _semantic.scan(_unwrap_if_constexpr(input), axis, _combine_callable(combine_fn, _semantic), reverse)


def _pick_sum_dtype(in_dtype, dtype_):
    dtype_ = _unwrap_if_constexpr(dtype_)
    if dtype_ is not None:
        return dtype_
    if in_dtype.is_int_signed() and in_dtype.int_bitwidth < 32:
        return int32
    if in_dtype.is_int_unsigned() and in_dtype.int_bitwidth < 32:
        return uint32
    return None


builtins_range = _py.range


# -- compile-time and debug -------------------------------------------------------------------------------

@builtin
def static_assert(cond, msg="", _semantic=None):
    cond = _unwrap_if_constexpr(cond)
    if isinstance(cond, tensor):
        raise TypeError("static_assert needs a compile-time (constexpr) condition; use tl.device_assert "
                        "for runtime values")
    if not cond:
        from ..errors import StaticAssertionError
        raise StaticAssertionError(f"static_assert failed: {_unwrap_if_constexpr(msg)}")


@builtin
def static_print(*values, sep=" ", end="\n", file=None, flush=False, _semantic=None):
    _py.print(*[_unwrap_if_constexpr(v) for v in values], sep=sep, end=end, file=file, flush=flush)


@builtin
def device_print(prefix, *args, hex=False, _semantic=None):
    prefix = _unwrap_if_constexpr(prefix)
    if not isinstance(prefix, str):
        raise TypeError(f"device_print: the prefix must be a string, got {type(prefix).__name__}")
    _semantic.device_print(prefix, args, bool(_unwrap_if_constexpr(hex)))


@builtin
def device_assert(cond, msg="", mask=None, _semantic=None):
    _semantic.device_assert(cond, _unwrap_if_constexpr(msg), mask)


@builtin
def debug_barrier(_semantic=None):
    _semantic.debug_barrier()


@builtin
def multiple_of(input, values, _semantic=None):
    return _semantic.set_hint(input, "tt.divisibility", values)


@builtin
def max_contiguous(input, values, _semantic=None):
    return _semantic.set_hint(input, "tt.contiguity", values)


@builtin
def max_constancy(input, values, _semantic=None):
    return _semantic.set_hint(input, "tt.constancy", values)


@builtin
def assume(cond, _semantic=None):
    _semantic.assume(cond)


# -- loop iterators (recognised by the frontend) -----------------------------------------------------------

class range:
    """`tl.range(start, end, step, num_stages=..., ...)`: a runtime `scf.for` with pipelining hints
    (Triton 3.6's; `disable_licm` marks the loop `tt.disable_licm`: nothing is hoisted out of it)."""

    def __init__(self, arg1, arg2=None, step=None, num_stages=None, loop_unroll_factor=None,
                 disallow_acc_multi_buffer=False, flatten=False, warp_specialize=False, disable_licm=False,
                 _semantic=None):
        if arg2 is None:
            self.start, self.end = constexpr(0), arg1
        else:
            self.start, self.end = arg1, arg2
        self.step = step if step is not None else constexpr(1)
        self.num_stages = _unwrap_if_constexpr(num_stages)
        self.loop_unroll_factor = _unwrap_if_constexpr(loop_unroll_factor)
        self.disallow_acc_multi_buffer = _unwrap_if_constexpr(disallow_acc_multi_buffer)
        self.flatten = _unwrap_if_constexpr(flatten)
        self.warp_specialize = _unwrap_if_constexpr(warp_specialize)
        self.disable_licm = _unwrap_if_constexpr(disable_licm)

    def __iter__(self):
        raise RuntimeError("tl.range can only be iterated inside a @jit function")


class static_range:
    """`tl.static_range(start, end, step)`: unrolled at compile time; the loop variable is a constexpr."""

    def __init__(self, arg1, arg2=None, step=None, _semantic=None):
        values = [_unwrap_if_constexpr(v) for v in (arg1, arg2, step)]
        for v in values:
            if v is not None and (isinstance(v, tensor) or not isinstance(v, int)):
                raise TypeError("static_range bounds must be constexpr integers")
        if arg2 is None:
            self.start, self.end = 0, values[0]
        else:
            self.start, self.end = values[0], values[1]
        self.step = values[2] if step is not None else 1

    def __iter__(self):
        raise RuntimeError("tl.static_range can only be iterated inside a @jit function")


class async_task:
    """`with tl.async_task([0]):` / `with tl.async_task(num_warps=4, registers=...)`: a warp-specialization
    partition hint (Triton 3.x). No tilejit target warp-specializes, so the body is compiled in place,
    exactly as Triton does on targets without warp specialization; the arguments are still checked."""

    def __init__(self, task_ids=None, num_warps=None, registers=None, replicate=None, _semantic=None):
        task_ids = _unwrap_if_constexpr(task_ids)
        if isinstance(task_ids, str):
            if task_ids != "default":
                raise ValueError(f"async_task: expected a list of task ids or 'default', got {task_ids!r}")
            self.task_ids = None
        elif task_ids is not None:
            ids = [_unwrap_if_constexpr(t) for t in task_ids]
            if not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in ids):
                raise TypeError(f"async_task: task ids must be non-negative compile-time ints, got {ids}")
            self.task_ids = sorted(set(ids))
        else:
            self.task_ids = None
        for name, value in (("num_warps", num_warps), ("registers", registers), ("replicate", replicate)):
            value = _unwrap_if_constexpr(value)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
                raise ValueError(f"async_task: {name} must be a positive compile-time int, got {value!r}")
        self.num_warps = _unwrap_if_constexpr(num_warps)
        self.registers = _unwrap_if_constexpr(registers)
        self.replicate = _unwrap_if_constexpr(replicate)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class condition:
    """`while tl.condition(c, disable_licm=True):`: a while-loop condition with compiler hints (Triton
    3.x). The frontend unwraps it; `disable_licm` marks the `scf.while` with `tt.disable_licm`."""

    def __init__(self, arg1, disable_licm=False, _semantic=None):
        self.condition = arg1
        self.disable_licm = bool(_unwrap_if_constexpr(disable_licm))

    def __bool__(self):
        raise TypeError("tl.condition can only be used as the condition of a 'while' loop")


# The frontend constructs these with `_semantic=` like any builtin.
range.__tilejit_builtin__ = True
static_range.__tilejit_builtin__ = True
async_task.__tilejit_builtin__ = True
condition.__tilejit_builtin__ = True
