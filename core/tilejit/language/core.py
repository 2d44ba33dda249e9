"""The `tl` language core: dtypes, `constexpr`, `tensor` and the `@builtin` marker (Triton 3.x names).

A `tensor` is a compile-time handle: it holds an `ir.Value` and its language type (a `dtype`, a
`pointer_type` or a `block_type`). Signedness lives here, in the language type, because IR integers
are signless. Builtin functions (in `functions.py`, re-exported at the end of this module) receive the
frontend's `Semantic` object as the `_semantic` keyword, exactly as Triton 3.x passes it.
"""
from __future__ import annotations

import builtins as _py
import functools
from typing import List

from .. import ir

TILEJIT_MAX_TENSOR_NUMEL = 1 << 20
# Triton's name for the same limit (`tl.TRITON_MAX_TENSOR_NUMEL`, 1048576 in Triton 3.x).
TRITON_MAX_TENSOR_NUMEL = TILEJIT_MAX_TENSOR_NUMEL


# ----------------------------------------------------------------------------------------------
# builtins and constexpr helpers
# ----------------------------------------------------------------------------------------------

def builtin(fn):
    """Mark `fn` as a language builtin: the frontend calls it with `_semantic=` (and `_builder=`)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if kwargs.get("_semantic") is None:
            from .semantic import current_semantic
            kwargs["_semantic"] = current_semantic(fn.__name__)
        kwargs.pop("_builder", None)
        return fn(*args, **kwargs)

    wrapper.__tilejit_builtin__ = True
    return wrapper


def is_builtin(fn) -> bool:
    return getattr(fn, "__tilejit_builtin__", False) or getattr(getattr(fn, "__func__", None),
                                                                "__tilejit_builtin__", False)


class const:
    """Annotation for a pointer parameter whose data the kernel only reads (`x_ptr: tl.const`): the
    pointer type becomes `const_pointer<...>` and `tl.store` through it is a compile error (Triton 3.x)."""


class constexpr_type:
    """The type of a compile-time value (Triton 3.x): two constexpr types are equal when their values
    are, so a `@jit` callee specialises on the value."""

    def __init__(self, value, _semantic=None):
        self.value = value.value if isinstance(value, constexpr) else value

    def __eq__(self, other):
        other = other.value if isinstance(other, constexpr) else other
        return isinstance(other, constexpr_type) and type(other.value) is type(self.value) and \
            bool(other.value == self.value)

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        try:
            return hash(("constexpr_type", self.value))
        except TypeError:  # an unhashable value (a list): equal types still hash alike
            return hash(("constexpr_type", type(self.value).__name__))

    def __repr__(self):
        return f"constexpr_type[{self.value!r}]"

    __str__ = __repr__

    def mangle(self) -> str:
        return repr(self.value)

    def is_block(self): return False
    def is_ptr(self): return False
    def is_const(self): return False


constexpr_type.__tilejit_builtin__ = True  # `tl.constexpr_type(4)` inside a kernel


class constexpr:
    """A value known at compile time. Arithmetic on constexprs folds in Python."""

    def __init__(self, value):
        self.value = value.value if isinstance(value, constexpr) else value

    @property
    def type(self):
        return constexpr_type(self.value)

    def __repr__(self):
        return f"constexpr[{self.value!r}]"

    def __hash__(self):
        return hash(self.value)

    def __index__(self):
        return self.value.__index__()

    def __bool__(self):
        return _py.bool(self.value)

    def __int__(self):
        return int(self.value)

    def __float__(self):
        return float(self.value)

    def __call__(self, *args, **kwargs):
        return self.value(*args, **kwargs)

    def __iter__(self):
        return iter(self.value)

    def __len__(self):
        return len(self.value)

    def __getitem__(self, item):
        return constexpr(self.value[_unwrap_if_constexpr(item)])


def _fold(op, reflected=False):
    def method(self, other=None, *rest):
        if isinstance(other, tensor):
            return NotImplemented
        a, b = self.value, _unwrap_if_constexpr(other)
        return constexpr(op(b, a) if reflected else op(a, b))
    return method


def _fold_unary(op):
    return lambda self: constexpr(op(self.value))


import operator as _op  # noqa: E402

for _name, _fn in [("add", _op.add), ("sub", _op.sub), ("mul", _op.mul), ("truediv", _op.truediv),
                   ("floordiv", _op.floordiv), ("mod", _op.mod), ("pow", _op.pow), ("and", _op.and_),
                   ("or", _op.or_), ("xor", _op.xor), ("lshift", _op.lshift), ("rshift", _op.rshift)]:
    setattr(constexpr, f"__{_name}__", _fold(_fn))
    setattr(constexpr, f"__r{_name}__", _fold(_fn, reflected=True))
for _name, _fn in [("eq", _op.eq), ("ne", _op.ne), ("lt", _op.lt), ("le", _op.le), ("gt", _op.gt),
                   ("ge", _op.ge)]:
    setattr(constexpr, f"__{_name}__", _fold(_fn))
for _name, _fn in [("neg", _op.neg), ("pos", _op.pos), ("invert", _op.invert), ("abs", _py.abs)]:
    setattr(constexpr, f"__{_name}__", _fold_unary(_fn))


def _unwrap_if_constexpr(v):
    return v.value if isinstance(v, constexpr) else v


def _constexpr_to_value(v):
    return _unwrap_if_constexpr(v)


def is_power_of_two(n) -> bool:
    return isinstance(n, int) and n > 0 and (n & (n - 1)) == 0


# ----------------------------------------------------------------------------------------------
# dtypes
# ----------------------------------------------------------------------------------------------

# language name -> (ir type, bits, kind) ; kind: "s" signed int, "u" unsigned int, "f" float
_SCALARS = {
    "int1": ("i1", 1, "s"), "int8": ("i8", 8, "s"), "int16": ("i16", 16, "s"), "int32": ("i32", 32, "s"),
    "int64": ("i64", 64, "s"), "uint8": ("i8", 8, "u"), "uint16": ("i16", 16, "u"),
    "uint32": ("i32", 32, "u"), "uint64": ("i64", 64, "u"),
    "fp8e4nv": ("f8E4M3FN", 8, "f"), "fp8e5": ("f8E5M2", 8, "f"), "fp8e4b15": (None, 8, "f"),
    "fp8e4b8": ("f8E4M3FNUZ", 8, "f"), "fp8e5b16": ("f8E5M2FNUZ", 8, "f"),
    "fp16": ("f16", 16, "f"), "bf16": ("bf16", 16, "f"), "fp32": ("f32", 32, "f"), "fp64": ("f64", 64, "f"),
}
_MANTISSA = {"fp8e4nv": 3, "fp8e5": 2, "fp8e4b15": 3, "fp8e4b8": 3, "fp8e5b16": 2, "fp16": 10, "bf16": 7,
             "fp32": 23, "fp64": 52}
_EXPONENT_BIAS = {"fp8e4nv": 7, "fp8e5": 15, "fp8e4b15": 15, "fp8e4b8": 8, "fp8e5b16": 16, "fp16": 15,
                  "bf16": 127, "fp32": 127, "fp64": 1023}


class dtype:
    """A scalar language type (`tl.float32`, `tl.uint8`, ...), or `void`."""
    # Triton 3.x's class lists (its tests read them): int1 is listed with the unsigned types. The
    # predicates below keep tilejit's reading of int1 as a signed 1-bit integer (its promotions).
    SINT_TYPES = ["int8", "int16", "int32", "int64"]
    UINT_TYPES = ["int1", "uint8", "uint16", "uint32", "uint64"]
    FP_TYPES = ["fp8e4b15", "fp8e4nv", "fp8e4b8", "fp8e5", "fp8e5b16", "fp16", "bf16", "fp32", "fp64"]
    STANDARD_FP_TYPES = ["fp16", "bf16", "fp32", "fp64"]  # Triton 3.x's class lists, read by its tests
    OTHER_TYPES = ["void"]

    class KIND:
        BOOLEAN, INTEGRAL, FLOATING = 0, 1, 2

    def __init__(self, name: str):
        name = _unwrap_if_constexpr(name)
        if name != "void" and name not in _SCALARS:
            raise ValueError(f"unknown dtype {name!r}")
        self.name = name
        if name in _SCALARS:
            _, self.primitive_bitwidth, kind = _SCALARS[name]
            self.int_signedness = "unsigned" if kind == "u" else "signed"
            self.int_bitwidth = self.primitive_bitwidth if kind != "f" else 0
            self.fp_mantissa_width = _MANTISSA.get(name, 0)
            self.exponent_bias = _EXPONENT_BIAS.get(name, 0)
        else:
            self.primitive_bitwidth = self.int_bitwidth = self.fp_mantissa_width = 0
            self.int_signedness = "signed"

    # -- predicates -----------------------------------------------------------------------------
    def is_void(self): return self.name == "void"
    def is_bool(self): return self.name == "int1"
    def is_int1(self): return self.name == "int1"
    def is_int(self): return self.name in _SCALARS and _SCALARS[self.name][2] != "f"
    def is_int_signed(self): return self.name in _SCALARS and _SCALARS[self.name][2] == "s"
    def is_int_unsigned(self): return self.name in _SCALARS and _SCALARS[self.name][2] == "u"
    def is_floating(self): return self.name in self.FP_TYPES
    def is_standard_floating(self): return self.name in ("fp16", "bf16", "fp32", "fp64")
    def is_fp8(self): return self.name.startswith("fp8")
    def is_fp8e4nv(self): return self.name == "fp8e4nv"
    def is_fp8e5(self): return self.name == "fp8e5"
    def is_fp8e4b15(self): return self.name == "fp8e4b15"
    def is_fp16(self): return self.name == "fp16"
    def is_bf16(self): return self.name == "bf16"
    def is_fp32(self): return self.name == "fp32"
    def is_fp64(self): return self.name == "fp64"
    def is_int8(self): return self.name == "int8"
    def is_int16(self): return self.name == "int16"
    def is_int32(self): return self.name == "int32"
    def is_int64(self): return self.name == "int64"
    def is_uint8(self): return self.name == "uint8"
    def is_uint16(self): return self.name == "uint16"
    def is_uint32(self): return self.name == "uint32"
    def is_uint64(self): return self.name == "uint64"
    def is_ptr(self): return False
    def is_block(self): return False
    def is_const(self): return False

    def kind(self):
        if self.is_bool():
            return dtype.KIND.BOOLEAN
        return dtype.KIND.FLOATING if self.is_floating() else dtype.KIND.INTEGRAL

    def get_int_max_value(self):
        if self.is_int_signed():
            return (1 << (self.int_bitwidth - 1)) - 1 if self.int_bitwidth > 1 else 0
        return (1 << self.int_bitwidth) - 1

    def get_int_min_value(self):
        if self.is_int_signed():
            return -(1 << (self.int_bitwidth - 1)) if self.int_bitwidth > 1 else -1
        return 0

    @property
    def scalar(self):
        return self

    def to_ir(self, builder=None) -> ir.Type:
        if self.name == "void":
            raise TypeError("void has no IR type")
        ir_name, bits, kind = _SCALARS[self.name]
        if ir_name is None:
            # fp8e4b15 has no MLIR float type: as in Triton its values are i8 bit patterns, and its
            # conversions are integer code (language/fp8e4b15.py).
            return ir.IntType(bits)
        return ir.IntType(bits) if kind != "f" else ir.FloatType(ir_name)

    def __eq__(self, other):
        other = _unwrap_if_constexpr(other)
        return type(other) is type(self) and other.name == self.name

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return hash((type(self).__name__, self.name))

    def __str__(self):
        return self.name

    def __repr__(self):
        return f"tilejit.language.{self.codegen_name()}"

    def codegen_name(self):
        short = {"fp8e4nv": "float8e4nv", "fp8e5": "float8e5", "fp8e4b15": "float8e4b15",
                 "fp8e4b8": "float8e4b8", "fp8e5b16": "float8e5b16", "fp16": "float16",
                 "bf16": "bfloat16", "fp32": "float32", "fp64": "float64"}
        return short.get(self.name, self.name)

    def with_element_ty(self, element_ty):
        return element_ty


class pointer_type(dtype):
    def __init__(self, element_ty: dtype, address_space: int = 1, const: bool = False):
        element_ty = _unwrap_if_constexpr(element_ty)
        if not isinstance(element_ty, dtype):
            raise TypeError(f"pointer_type element must be a dtype, got {element_ty!r}")
        self.element_ty = element_ty
        self.address_space = address_space
        self.const = const
        self.name = f"pointer<{element_ty}>" if not const else f"const_pointer<{element_ty}>"
        self.primitive_bitwidth = 64
        self.int_bitwidth = 0
        self.fp_mantissa_width = 0
        self.int_signedness = "signed"

    def to_ir(self, builder=None) -> ir.Type:
        return ir.PointerType(self.element_ty.to_ir(), self.address_space)

    def is_ptr(self): return True
    def is_const(self): return self.const
    def is_int(self): return False
    def is_floating(self): return False
    def is_int_signed(self): return False
    def is_int_unsigned(self): return False
    def is_bool(self): return False
    def is_int1(self): return False
    def is_fp8(self): return False

    def __eq__(self, other):
        other = _unwrap_if_constexpr(other)
        return (isinstance(other, pointer_type) and self.element_ty == other.element_ty
                and self.address_space == other.address_space and self.const == other.const)

    def __hash__(self):
        return hash(("ptr", self.element_ty, self.address_space, self.const))

    def __str__(self):
        return self.name

    @property
    def scalar(self):
        return self


class block_type(dtype):
    """A tensor type: element type and a shape (a list of ints)."""

    def __init__(self, element_ty: dtype, shape):
        self.element_ty = element_ty
        self.shape = tuple(int(_unwrap_if_constexpr(s)) for s in shape)
        if not self.shape:
            raise TypeError("0-d block_type is not allowed")
        self.numel = 1
        for s in self.shape:
            self.numel *= s
        if self.numel > TILEJIT_MAX_TENSOR_NUMEL:
            raise ValueError(f"numel ({self.numel}) exceeds tilejit's maximum tensor numel "
                             f"({TILEJIT_MAX_TENSOR_NUMEL})")
        self.name = f"<{list(self.shape)}, {element_ty}>"
        self.primitive_bitwidth = element_ty.primitive_bitwidth
        self.int_bitwidth = element_ty.int_bitwidth
        self.fp_mantissa_width = element_ty.fp_mantissa_width
        self.int_signedness = element_ty.int_signedness

    def to_ir(self, builder=None) -> ir.Type:
        return ir.TensorType(self.shape, self.element_ty.to_ir())

    def is_block(self): return True
    def is_ptr(self): return False

    def get_block_shapes(self):
        return list(self.shape)

    @property
    def scalar(self):
        return self.element_ty

    def __eq__(self, other):
        other = _unwrap_if_constexpr(other)
        return isinstance(other, block_type) and self.element_ty == other.element_ty and \
            self.shape == other.shape

    def __hash__(self):
        return hash(("block", self.element_ty, self.shape))

    def __str__(self):
        return self.name


def _delegate_to_element(name):
    return lambda self: getattr(self.element_ty, name)()


# Predicates such as is_floating()/is_int() of a block type answer for its element type.
for _pred in [n for n in vars(dtype) if n.startswith("is_") and n not in ("is_block", "is_ptr")]:
    setattr(block_type, _pred, _delegate_to_element(_pred))
block_type.kind = _delegate_to_element("kind")


class tensor_descriptor_type(dtype):
    def __init__(self, block: block_type):
        self.block_type = block
        self.name = f"tensordesc<{block}>"
        self.primitive_bitwidth = 64
        self.int_bitwidth = self.fp_mantissa_width = 0
        self.int_signedness = "signed"

    def to_ir(self, builder=None):
        return ir.TensorDescType(self.block_type.to_ir())

    def __eq__(self, other):
        return isinstance(other, tensor_descriptor_type) and other.block_type == self.block_type

    def __hash__(self):
        return hash(("desc", self.block_type))


void = dtype("void")
int1 = dtype("int1")
int8 = dtype("int8")
int16 = dtype("int16")
int32 = dtype("int32")
int64 = dtype("int64")
uint8 = dtype("uint8")
uint16 = dtype("uint16")
uint32 = dtype("uint32")
uint64 = dtype("uint64")
float8e5 = dtype("fp8e5")
float8e5b16 = dtype("fp8e5b16")
float8e4nv = dtype("fp8e4nv")
float8e4b8 = dtype("fp8e4b8")
float8e4b15 = dtype("fp8e4b15")
float16 = dtype("fp16")
bfloat16 = dtype("bf16")
float32 = dtype("fp32")
float64 = dtype("fp64")
pi32_t = pointer_type(int32)

# Triton's default for `descending` arguments (`tl.core.CONSTEXPR_0`), which kernel libraries reuse.
CONSTEXPR_0 = constexpr(0)


def get_int_dtype(bitwidth: int, signed: bool) -> dtype:
    """The integer dtype of `bitwidth` bits (1, 8, 16, 32 or 64), e.g. to bitcast a float of that width."""
    bitwidth, signed = _unwrap_if_constexpr(bitwidth), _unwrap_if_constexpr(signed)
    if bitwidth == 1:
        return int1
    if bitwidth not in (8, 16, 32, 64):
        raise ValueError(f"get_int_dtype: no integer type of {bitwidth} bits")
    return dtype(f"{'' if signed else 'u'}int{bitwidth}")

_SIGNATURE_NAMES = {
    "i1": int1, "i8": int8, "i16": int16, "i32": int32, "i64": int64, "u1": int1, "u8": uint8,
    "u16": uint16, "u32": uint32, "u64": uint64, "fp8e4nv": float8e4nv, "fp8e5": float8e5,
    "fp8e4b15": float8e4b15, "fp8e4b8": float8e4b8, "fp8e5b16": float8e5b16, "fp16": float16,
    "bf16": bfloat16, "fp32": float32, "fp64": float64, "f16": float16, "f32": float32, "f64": float64,
    "B": int1,
}


def str_to_ty(name: str) -> dtype:
    """Signature string (`*fp32`, `i32`, `*k*fp16`?, `bf16`, ...) to a language type."""
    if not isinstance(name, str):
        raise TypeError(f"a signature type must be a string such as '*fp32' or 'i32', got {name!r}")
    if name.startswith("*"):
        const = name.startswith("*k")
        return pointer_type(str_to_ty(name[2:] if const else name[1:]), const=const)
    if name not in _SIGNATURE_NAMES:
        raise TypeError(f"unknown signature type {name!r} (expected one of "
                        f"{', '.join(sorted(_SIGNATURE_NAMES))}, or '*' followed by one of them)")
    return _SIGNATURE_NAMES[name]


def ty_to_str(ty: dtype) -> str:
    if isinstance(ty, pointer_type):
        return "*" + ty_to_str(ty.element_ty)
    for k, v in _SIGNATURE_NAMES.items():
        if v == ty and len(k) > 1 and not k.startswith("f"):
            return k
    return ty.name


# ----------------------------------------------------------------------------------------------
# tensor
# ----------------------------------------------------------------------------------------------

def _semantic_for(kwargs):
    from .semantic import current_semantic
    sem = kwargs.get("_semantic")
    return sem if sem is not None else current_semantic("a tensor operator")


def _binary(method, reflected=False):
    def op(self, other, **kwargs):
        sem = _semantic_for(kwargs)
        return getattr(sem, method)(other, self) if reflected else getattr(sem, method)(self, other)
    return op


class tensor:
    """A value being compiled: `handle` is the `ir.Value`, `type` its language type."""

    def __init__(self, handle: ir.Value, type: dtype):
        self.handle = handle
        self.type = type
        self.dtype = type.scalar
        self.shape = [constexpr(s) for s in type.shape] if type.is_block() else []

    @property
    def numel(self):
        return constexpr(self.type.numel if self.type.is_block() else 1)

    @property
    def T(self):
        return _semantic_for({}).permute(self, None)

    def __repr__(self):
        return f"tensor({self.type})"

    def __bool__(self):
        raise TypeError("the truth value of a tensor is not known at compile time; use tl.where or an "
                        "`if` statement on a scalar")

    def __iter__(self):
        raise TypeError("a tensor is not iterable")

    def __neg__(self, **kw): return _semantic_for(kw).minus(self)
    def __pos__(self, **kw): return self
    def __invert__(self, **kw): return _semantic_for(kw).invert(self)
    def __not__(self, **kw): return _semantic_for(kw).not_(self)
    def __abs__(self, **kw): return _semantic_for(kw).abs(self)

    def __getitem__(self, slices, **kwargs):
        return _semantic_for(kwargs).subscript(self, slices)

    # member functions: `x.to(...)`, `x.reshape(...)`, ... are builtins bound to the tensor
    def to(self, dtype, fp_downcast_rounding=None, bitcast=False, _semantic=None, _builder=None):
        sem = _semantic or _semantic_for({})
        dtype = _unwrap_if_constexpr(dtype)
        if _unwrap_if_constexpr(bitcast):
            return sem.bitcast(self, dtype)
        return sem.cast(self, dtype, _unwrap_if_constexpr(fp_downcast_rounding))


tensor.to.__tilejit_builtin__ = True

for _name, _method in [("add", "add"), ("sub", "sub"), ("mul", "mul"), ("truediv", "truediv"),
                       ("floordiv", "floordiv"), ("mod", "mod"), ("and", "and_"), ("or", "or_"),
                       ("xor", "xor_"), ("lshift", "shl"), ("rshift", "shr"), ("pow", "pow")]:
    setattr(tensor, f"__{_name}__", _binary(_method))
    setattr(tensor, f"__r{_name}__", _binary(_method, reflected=True))
for _name, _method in [("eq", "equal"), ("ne", "not_equal"), ("lt", "less_than"), ("le", "less_equal"),
                       ("gt", "greater_than"), ("ge", "greater_equal")]:
    setattr(tensor, f"__{_name}__", _binary(_method))
tensor.__hash__ = object.__hash__

# Names `x.<name>(...)` resolves to `tl.<name>(x, ...)` (Triton's tensor member functions).
TENSOR_MEMBER_FUNCTIONS = frozenset("""
reshape view trans permute expand_dims broadcast_to ravel split sum max min argmax argmin xor_sum
reduce_or cumsum cumprod sort flip item atomic_poll atomic_load atomic_store atomic_cas atomic_xchg
atomic_add atomic_max atomic_min atomic_and atomic_or atomic_xor reduce associative_scan histogram gather exp exp2 log log2 sqrt rsqrt
sin cos abs floor ceil erf cast store advance join softmax logical_and logical_or sqrt_rn squeeze unsqueeze
""".split())


def _descriptor_atomic(op: str):
    def method(self, offsets, value, _semantic=None):
        return _semantic.descriptor_atomic(op, self, value, offsets)
    method.__name__ = method.__qualname__ = f"atomic_{op}"
    return builtin(method)


class tensor_descriptor:
    """`tl.make_tensor_descriptor(...)`'s result: `.load(offsets)`, `.store(offsets, value)` and the
    reductions `.atomic_add/min/max/and/or/xor(offsets, value)`."""

    def __init__(self, handle, block_type_: block_type, shape, strides, base=None, padding="zero"):
        self.handle = handle
        self.padding = padding   # what loads read outside the tensor: "zero" or "nan"
        self.base = base  # the base pointer when made in this function (lets control flow carry it)
        self.type = tensor_descriptor_type(block_type_)
        self.block_type = block_type_
        self.block_shape = [constexpr(s) for s in block_type_.shape]
        self.dtype = block_type_.element_ty
        self.shape = shape
        self.strides = strides

    @builtin
    def load(self, offsets, _semantic=None):
        return _semantic.descriptor_load(self, offsets)

    @builtin
    def store(self, offsets, value, _semantic=None):
        return _semantic.descriptor_store(self, value, offsets)

    # `desc.atomic_<op>(offsets, value)`, Triton's descriptor reductions (one builtin per op).
    atomic_add = _descriptor_atomic("add")
    atomic_min = _descriptor_atomic("min")
    atomic_max = _descriptor_atomic("max")
    atomic_and = _descriptor_atomic("and")
    atomic_or = _descriptor_atomic("or")
    atomic_xor = _descriptor_atomic("xor")


def _flatten_values(values) -> List:
    out = []
    for v in values:
        if isinstance(v, tuple):
            out.extend(_flatten_values(v))
        else:
            out.append(v)
    return out


from .functions import *  # noqa: E402,F401,F403  (the builtins, part of this module's namespace)
