"""Inline PTX in the LLVM IR: one helper for every NVIDIA lowering that emits an instruction LLVM has
no intrinsic for (qualified loads and stores, atomics, wgmma, Triton's approximate math)."""
from __future__ import annotations

import re

import llvmlite.ir as llir

# Register tuples at least this long are returned as a named struct type (see `_named_tuple`).
_NAMED_FROM = 8


def _named_tuple(builder, ret):
    """`ret`, or for a long struct of one register type (wgmma's accumulator: 64 floats, wide loads)
    the module's identified type of the same body. The literal type is spelled out in full in the
    call and in every `extractvalue` of the result: on the bench matmul that was 199 of the IR's 286
    KB, which llvmlite printed and LLVM parsed again (parsing 9.1 -> 5.1 ms). A named type is
    printed once; the PTX is the same."""
    if not isinstance(ret, llir.LiteralStructType) or len(ret.elements) < _NAMED_FROM or ret.packed \
            or len(set(ret.elements)) != 1:
        return ret
    element = re.sub(r"\W", "", str(ret.elements[0]))
    named = builder.module.context.get_identified_type(f"regs.{element}x{len(ret.elements)}")
    if named.elements is None:
        named.set_body(*ret.elements)
    return named


def inline_ptx(builder, ret, text: str, constraints: str, args, side_effect: bool = True):
    """`text` as an inline-asm call returning `ret` (void for none). `side_effect=False` lets LLVM
    merge or drop it like any pure value (math); memory and synchronisation keep it."""
    fnty = llir.FunctionType(_named_tuple(builder, ret), [a.type for a in args])
    return builder.asm(fnty, text, constraints, list(args), side_effect=side_effect)
