"""`tt.elementwise_inline_asm` (`tl.inline_asm_elementwise`): the user's assembly, once per group of
`pack` elements a thread holds, as an LLVM inline-asm call (a method of `FunctionLowering`).

The operand order is Triton's: every output register first (result by result), then every input
register (argument by argument). Elements narrower than 32 bits travel several to a register: a
register holds min(32 / width, pack) of them (four int8, two fp16), so with `pack=4` an int8
argument is one register and an fp32 argument four. Such a register is passed as an integer of its
width (the elements' bits side by side, the first element in the low bits), and a float travels in
an integer register where its constraint asks for one (`r`, `h`, `l`, `c`), so that no LLVM version's
register classes matter. The call has side effects unless the op is pure.

When a thread holds fewer elements than a multiple of `pack`, the last group is filled with zeros and
its extra outputs are dropped. The assembly text is target code: PTX on NVIDIA, GCN on AMD.
"""
from __future__ import annotations

import llvmlite.ir as llir

from ... import ir
from ...errors import CompilationError
from .scalar_ops import llvm_bits, llvm_type

_INTEGER_CONSTRAINTS = set("chlr")   # NVPTX: 8-, 16-, 64-, 32-bit integer registers


def _per_register(elem_ty, pack: int) -> int:
    """Elements of LLVM type `elem_ty` one asm register holds: min(32 / width, pack), at least 1."""
    return max(1, min(32 // llvm_bits(elem_ty), pack))


def _constraint_letters(constraints: str, count: int) -> list:
    """The letter of each of the first `count` operand constraints (`=r` -> `r`), or None per
    operand when the string has fewer entries (LLVM then reports the mismatch)."""
    parts = [p.strip().lstrip("=&+") for p in constraints.split(",")]
    return [(parts[i][:1] if i < len(parts) and parts[i] else None) for i in range(count)]


def _register_type(elem_ty, per_register: int, letter):
    """The LLVM type of one asm register holding `per_register` elements of `elem_ty`."""
    if per_register > 1:
        return llir.IntType(llvm_bits(elem_ty) * per_register)
    if isinstance(elem_ty, (llir.HalfType, llir.FloatType, llir.DoubleType)) and letter in _INTEGER_CONSTRAINTS:
        return llir.IntType(llvm_bits(elem_ty))
    return elem_ty


def lower_inline_asm(self, op):
    """Lower `tt.elementwise_inline_asm` for the registers this thread holds."""
    problem = self.isa.inline_asm_problem
    if problem is not None:
        raise CompilationError.at(op.loc, f"tl.inline_asm_elementwise: {problem}")
    pack = int(op.attrs.get("packed_element", 1))
    if pack < 1:
        raise CompilationError.at(op.loc, f"inline_asm_elementwise: pack must be at least 1, got {pack}")
    asm, constraints = op.attrs["asm_string"], op.attrs["constraints"]
    pure = bool(op.attrs.get("pure", False))
    ins = [self.get(v) for v in op.operands]
    n = max((len(v) for v in ins), default=1)   # the arguments are broadcast to the results' shape
    b = self.b
    in_elems = [llvm_type(v.type) for v in op.operands]
    out_elems = [llvm_type(r.type) for r in op.results]
    in_per = [_per_register(t, pack) for t in in_elems]
    out_per = [_per_register(t, pack) for t in out_elems]
    for per, v in zip(in_per + out_per, list(op.operands) + list(op.results)):
        if pack % per:
            raise CompilationError.at(op.loc, f"inline_asm_elementwise: pack={pack} does not fill whole registers "
                                              f"of {ir.element_type(v.type)}")
    # per asm register, in operand order: the result / argument it belongs to
    out_regs = [k for k, per in enumerate(out_per) for _ in range(pack // per)]
    in_regs = [k for k, per in enumerate(in_per) for _ in range(pack // per)]
    letters = _constraint_letters(constraints, len(out_regs) + len(in_regs))
    out_types = [_register_type(out_elems[k], out_per[k], letters[i]) for i, k in enumerate(out_regs)]
    in_types = [_register_type(in_elems[k], in_per[k], letters[len(out_regs) + i]) for i, k in enumerate(in_regs)]
    if not out_types:
        ret = llir.VoidType()
    elif len(out_types) == 1:
        ret = out_types[0]
    else:
        ret = llir.LiteralStructType(out_types)
    # llvmlite prints the text between quotes as it is: LLVM's escapes for the two characters that
    # would end or escape the string there
    text = asm.replace("\\", "\\5C").replace('"', "\\22")
    call_asm = llir.InlineAsm(llir.FunctionType(ret, in_types), text, constraints, side_effect=not pure)

    outs = [[None] * n for _ in op.results]
    for start in range(0, n, pack):
        args = []
        for k, per in enumerate(in_per):
            values = ins[k]
            for r in range(pack // per):
                group = [_element(values, start + r * per + j, in_elems[k]) for j in range(per)]
                args.append(_to_register(b, group, in_types[len(args)], in_elems[k]))
        result = b.call(call_asm, args)
        reg = 0
        for k, per in enumerate(out_per):
            for r in range(pack // per):
                value = result if len(out_types) == 1 else b.extract_value(result, reg)
                for j, element in enumerate(_from_register(b, value, per, out_elems[k])):
                    i = start + r * per + j
                    if i < n:
                        outs[k][i] = element
                reg += 1
    for r, values in zip(op.results, outs):
        self.set(r, values)


def _element(values, i, elem_ty):
    """Register `i` of an operand (a scalar's one value everywhere); zero past the thread's last."""
    if len(values) == 1:
        return values[0]
    if i < len(values):
        return values[i]
    return llir.Constant(elem_ty, None)


def _to_register(b, group, reg_ty, elem_ty):
    if len(group) == 1:
        value = group[0]
        return b.bitcast(value, reg_ty) if value.type != reg_ty else value
    width = llvm_bits(elem_ty)
    packed = None
    for j, value in enumerate(group):
        bits = b.bitcast(value, llir.IntType(width)) if not isinstance(value.type, llir.IntType) else value
        bits = b.zext(bits, reg_ty) if width < reg_ty.width else bits
        if j:
            bits = b.shl(bits, llir.Constant(reg_ty, j * width))
        packed = bits if packed is None else b.or_(packed, bits)
    return packed


def _from_register(b, value, per, elem_ty):
    if per == 1:
        return [b.bitcast(value, elem_ty) if value.type != elem_ty else value]
    width = llvm_bits(elem_ty)
    out = []
    for j in range(per):
        bits = b.lshr(value, llir.Constant(value.type, j * width)) if j else value
        bits = b.trunc(bits, llir.IntType(width))
        out.append(b.bitcast(bits, elem_ty) if not isinstance(elem_ty, llir.IntType) else bits)
    return out
