"""LLVM helpers for target descriptions (`target.py`): declaring and calling intrinsics, attributes."""
from __future__ import annotations


import llvmlite.ir as llir

from ..errors import CompilationError

F32 = llir.FloatType()
F64 = llir.DoubleType()
I32 = llir.IntType(32)


def declare(module: llir.Module, name: str, ret, args) -> llir.Function:
    """Get or declare the function `name` in `module`."""
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    return llir.Function(module, llir.FunctionType(ret, list(args)), name)


def add_string_attribute(func: llir.Function, key: str, value: str) -> None:
    """llvmlite only accepts its list of known attributes; target attributes are `"key"="value"`
    strings, which LLVM's parser accepts, so they are added to the underlying set directly."""
    set.add(func.attributes, f'"{key}"="{value}"')


def call_intrinsic(builder: llir.IRBuilder, name: str, ret, args):
    fn = declare(builder.module, name, ret, [a.type for a in args])
    return builder.call(fn, list(args))


def type_suffix(type_) -> str:
    if isinstance(type_, llir.DoubleType):
        return "f64"
    if isinstance(type_, llir.HalfType):
        return "f16"
    if isinstance(type_, llir.FloatType):
        return "f32"
    if str(type_) == "bfloat":
        return "bf16"
    raise CompilationError(f"no math functions for LLVM type {type_}")
