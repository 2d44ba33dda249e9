"""Named tuples as kernel arguments and inside kernels (Triton 3.x, `test_tuple.py::test_namedtuple`):
`t.x` reads a field, a NamedTuple class called in a kernel builds one, and the names survive calls
to and returns from `@jit` functions. Run on the interpreter and compared with NumPy."""
from typing import NamedTuple

import numpy as np
import pytest

import tilejit
import tilejit.language as tl
from tilejit.errors import CompilationError
from tilejit.frontend import ASTSource
from tilejit_interpreter.backend import INTERPRETER_TARGET


class Operands(NamedTuple):
    x: object
    y: object
    n: int


class Matrix(NamedTuple):
    ptr: object
    shape: tuple
    stride: tuple


class Closure(NamedTuple):
    fn: tl.constexpr
    captured: tuple


@tilejit.jit
def axpy_annotated(t: Operands, out, scale, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < t.n
    a = tl.load(t.x + offs, mask=mask)
    b = tl.load(t.y + offs, mask=mask)
    tl.store(out + offs, a * scale + b, mask=mask)


@tilejit.jit
def axpy(t, out, scale, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < t.n
    a = tl.load(t.x + offs, mask=mask)
    b = tl.load(t.y + offs, mask=mask)
    tl.store(out + offs, a * scale + b, mask=mask)


def test_field_access_through_annotation_on_interpreter():
    x = np.arange(16, dtype=np.float32)
    y = np.full(16, 0.5, np.float32)
    out = np.zeros(16, np.float32)
    axpy_annotated[(1,)](Operands(x, y, 11), out, 3.0, BLOCK=16)
    expected = np.where(np.arange(16) < 11, x * 3.0 + y, 0.0)
    np.testing.assert_allclose(out, expected)


def test_field_access_through_named_signature_on_interpreter():
    """Triton's runtime passes a tuple argument's signature as an instance of its NamedTuple class."""
    signature = {"t": Operands("*fp32", "*fp32", "i32"), "out": "*fp32", "scale": "fp32"}
    kernel = tilejit.compile(ASTSource(axpy, signature, {"BLOCK": 16}), target=INTERPRETER_TARGET)
    x = np.linspace(-2, 2, 16, dtype=np.float32)
    y = np.arange(16, dtype=np.float32)
    out = np.full(16, -1.0, np.float32)
    kernel.run((1, 1, 1), [x, y, 9, out, 2.0])
    expected = np.where(np.arange(16) < 9, x * 2.0 + y, -1.0)
    np.testing.assert_allclose(out, expected, rtol=1e-6)


def test_plain_tuple_has_no_fields():
    with pytest.raises(CompilationError) as info:
        ASTSource(axpy, {"t": ("*fp32", "*fp32", "i32"), "out": "*fp32", "scale": "fp32"},
                  {"BLOCK": 16}).make_ir()
    assert "no attribute 'n'" in str(info.value) and "test_named_tuples.py" in str(info.value)


def test_field_names_are_part_of_the_hash():
    named = ASTSource(axpy, {"t": Operands("*fp32", "*fp32", "i32"), "out": "*fp32", "scale": "fp32"},
                      {"BLOCK": 16})
    plain = ASTSource(axpy, {"t": ("*fp32", "*fp32", "i32"), "out": "*fp32", "scale": "fp32"}, {"BLOCK": 16})
    assert named.hash() != plain.hash()


@tilejit.jit
def make_matrix(shape, ptr, stride):
    return Matrix(shape=shape, ptr=ptr, stride=stride)


@tilejit.jit
def matrix_mask(m, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    return (rows[:, None] < m.shape[0]) & (cols[None, :] < m.shape[1])


@tilejit.jit
def scale_by(x, a_ptr):
    return x * tl.load(a_ptr)


@tilejit.jit
def apply_closure(closure: Closure, src: Matrix, dst: Matrix, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    X = make_matrix(src.shape, src.ptr, src.stride)  # built in a callee, returned with its names
    Y = Matrix(dst.ptr, dst.shape, stride=dst.stride)  # built in the kernel
    x = tl.load(X.ptr + rows[:, None] * X.stride[0] + cols[None, :] * X.stride[1],
                mask=matrix_mask(X, BLOCK_M, BLOCK_N), other=0.0)
    y = closure.fn(x, *closure.captured)
    tl.store(Y.ptr + rows[:, None] * Y.stride[0] + cols[None, :] * Y.stride[1], y,
             mask=matrix_mask(Y, BLOCK_M, BLOCK_N))


def test_nested_named_tuples_built_passed_and_returned():
    """Triton's test_namedtuple: a closure tuple holding a @jit function, matrices built in the kernel
    and in a callee, a field that is itself a tuple (`X.stride[0]`). Compiled from the signature
    Triton's runtime builds (the runtime does not yet accept a @jit function inside a tuple argument)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 32)).astype(np.float32)
    y = np.zeros((16, 16), np.float32)
    a = np.array([5.25], np.float32)
    signature = {"closure": Closure("constexpr", ("*fp32",)),
                 "src": Matrix("*fp32", ("i32", "i32"), ("i32", "constexpr")),
                 "dst": Matrix("*fp32", ("i32", "i32"), ("i32", "constexpr"))}
    constexprs = {(0, 0): scale_by, (1, 2, 1): 1, (2, 2, 1): 1, "BLOCK_M": 64, "BLOCK_N": 64}
    kernel = tilejit.compile(ASTSource(apply_closure, signature, constexprs), target=INTERPRETER_TARGET)
    kernel.run((1, 1, 1), [a, x, 32, 32, 32, y, 16, 16, 16])
    np.testing.assert_allclose(y, x[:16, :16] * a[0], rtol=1e-6)


@tilejit.jit
def loop_over_named(t: Operands, out, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = Operands(tl.zeros([BLOCK], tl.float32), tl.zeros([BLOCK], tl.float32), 0)
    for i in range(3):
        acc = Operands(acc.x + tl.load(t.x + offs), acc.y + tl.load(t.y + offs), 0)
    tl.store(out + offs, acc.x - acc.y)


def test_named_tuple_carried_through_a_loop():
    x = np.arange(8, dtype=np.float32)
    y = np.ones(8, np.float32)
    out = np.zeros(8, np.float32)
    loop_over_named[(1,)](Operands(x, y, 8), out, BLOCK=8)
    np.testing.assert_allclose(out, 3 * (x - y))


@tilejit.jit
def unknown_field(t: Operands, out):
    tl.store(out, tl.load(t.z))


@tilejit.jit
def bad_constructor(t: Operands, out):
    p = Operands(t.x, t.y, t.n, 4)
    tl.store(out, tl.load(p.x))


@pytest.mark.parametrize("kernel, fragment", [
    (unknown_field, "fields (x, y, n)' object has no attribute 'z'"),
    (bad_constructor, "Operands(): too many positional arguments"),
])
def test_named_tuple_mistakes_point_at_the_line(kernel, fragment):
    signature = {"t": Operands("*fp32", "*fp32", "i32"), "out": "*fp32"}
    with pytest.raises(CompilationError) as info:
        ASTSource(kernel, signature).make_ir()
    assert fragment in str(info.value)
    assert info.value.file.endswith("test_named_tuples.py") and info.value.line is not None
