"""Inline PTX in the LLVM IR: one helper for every NVIDIA lowering that emits an instruction LLVM has
no intrinsic for (qualified loads and stores, atomics, wgmma, Triton's approximate math)."""
from __future__ import annotations

import llvmlite.ir as llir


def inline_ptx(builder, ret, text: str, constraints: str, args, side_effect: bool = True):
    """`text` as an inline-asm call returning `ret` (void for none). `side_effect=False` lets LLVM
    merge or drop it like any pure value (math); memory and synchronisation keep it."""
    fnty = llir.FunctionType(ret, [a.type for a in args])
    return builder.asm(fnty, text, constraints, list(args), side_effect=side_effect)
