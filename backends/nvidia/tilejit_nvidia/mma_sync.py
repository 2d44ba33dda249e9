"""`tt.dot` with an `#ttg.nvidia_mma` result: mma.sync (version 2, and version 3 when B did not stay
in shared memory; m16n8k16 f16/bf16/fp8-as-f16, m16n8k8 tf32, m16n8k32 s8, m8n8k4 f64 and on sm_90
m16n8k16 f64: `MMA_FORMS`), or wgmma
(`wgmma.py`) when the pipeline left the operands in shared memory. `NvidiaISA.dot_lowerings` hands `lower_nvidia_dot` to the core's `tt.dot` lowering.

Operands are read by coordinates: a register's offset (its coordinates minus the thread's lane and
warp part) names the element, and the dot-operand layouts guarantee that the A rows and B columns a
thread needs for its C elements are in its own registers.
"""
from __future__ import annotations

import llvmlite.ir as llir

from tilejit import ir
from tilejit.errors import CompilationError
from tilejit.gpu.isa import I32, call_intrinsic

from .inline_ptx import inline_ptx


def lower_nvidia_dot(self, op):
    """A `FunctionLowering` method for dots whose result has an NVIDIA MMA layout."""
    enc = op.result.type.encoding
    # Operands the pipeline left in shared memory, or staged there from registers (lowering.py)
    staged = [self.staged_operands.get(id(v)) for v in op.operands[:2]]
    shared = [self.wgmma_operands.get(id(v)) or s for v, s in zip(op.operands[:2], staged)]
    wide = str(ir.element_type(op.operands[0].type)) in ("f16", "bf16")
    if enc.version_major == 3 and shared[1] is not None and (wide or shared[0] is not None):
        from .wgmma import lower_wgmma_dot, release_staged
        lower_wgmma_dot(self, op, *shared)   # A from registers when shared[0] is None
        for operand in staged:
            if operand is not None:
                release_staged(self, operand)
        return None
    for v, operand in zip(op.operands[:2], staged):
        if operand is not None:   # staged for a wgmma that cannot run: the registers after all
            self.unstage(v, operand)
    # mma.sync; version 3 without B in shared memory too (its layouts are mma.sync's, by coordinates)
    return _lower_mma(self, op)


def _offsets(self, v):
    return {off: i for i, off in enumerate(self.layout(v.type).register_offsets())}


# One mma.sync call of a form: the intrinsic, and per 32-bit A / B register the element offsets it
# packs (relative to the C tile's row / column and the K step's start, lane 0's coordinates). The
# dot-operand layouts are m16n8k16's for every element type (per K16 block a lane holds K columns
# 2t, 2t+1, 2t+8, 2t+9 of rows g and g+8); a K-permutation shared by A and B does not change the
# sum, so the tf32 (m16n8k8) and s8 (m16n8k32) fragments are found in those registers under
# a lane-independent renaming of K:
# - tf32: call s of a K16 block takes logical k t, t+4 from physical 2t+s, 2t+8+s;
# - s8: logical k 4t+j (+16) is physical 2t + (0, 1, 8, 9)[j] (+16).
_P = (0, 1, 8, 9)
_F16_CALL = ("llvm.nvvm.mma.m16n8k16.row.col.f32.f32",   # D and C types; A/B are f16
             [[(0, 0), (0, 1)], [(8, 0), (8, 1)], [(0, 8), (0, 9)], [(8, 8), (8, 9)]],
             [[(0, 0), (1, 0)], [(8, 0), (9, 0)]])
MMA_FORMS = {
    # form: (K step, calls per (C tile, K step))
    "f16": (16, [_F16_CALL]),
    "fp8": (16, [_F16_CALL]),   # operands upcast to f16, exactly
    "bf16": (16, [("llvm.nvvm.mma.m16n8k16.row.col.bf16",) + _F16_CALL[1:]]),
    "tf32": (16, [("llvm.nvvm.mma.m16n8k8.row.col.tf32",
                   [[(0, s)], [(8, s)], [(0, 8 + s)], [(8, 8 + s)]], [[(s, 0)], [(8 + s, 0)]]) for s in (0, 1)]),
    # satfinite, as Triton: a sum past the i32 range clamps
    "s8": (32, [("llvm.nvvm.mma.m16n8k32.row.col.satfinite.s8",
                 [[(0, p) for p in _P], [(8, p) for p in _P], [(0, 16 + p) for p in _P], [(8, 16 + p) for p in _P]],
                 [[(p, 0) for p in _P], [(16 + p, 0) for p in _P]])]),
}
# fp64: DMMA, `mma.m8n8k4.f64` (as Triton). Its fragments (PTX ISA): lane (g, t) gives A[g][t] and
# B[t][g] and holds D[g][2t], D[g][2t + 1], which is the m16n8 C fragment's first half for rows 0-7
# and its second half for rows 8-15. So an entry here is two instructions, one per A word (rows g and
# g + 8) with the same B word and the matching half of C; entry p takes physical k 2t + p, the four
# covering the K16 block once (another lane-independent renaming of K).
_DMMA = "llvm.nvvm.mma.m8n8k4.row.col.f64"
MMA_FORMS["f64"] = (16, [(_DMMA, [[(0, p)], [(8, p)]], [[(p, 0)]]) for p in _P])
# fp64 on sm_90 and later: one `mma.m16n8k16.f64` (DMMA.16x8x16, as Triton there) does the work of
# the eight m8n8k4 above. Lane (g, t) gives a_i = A[g + 8(i % 2)][t + 4(i // 2)] and b_i =
# B[t + 4i][g] and holds D in `_C_FRAGMENT`'s places (PTX ISA; CuTe's SM90_16x8x16_F64 traits).
# Logical k = t + 4j is physical 2t + _P[j], one lane-independent renaming for A and B. Inline PTX:
# LLVM 22's NVPTX has no intrinsic for the sm_90 f64 shapes.
_DMMA_16816 = "mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64"
MMA_FORMS["f64_sm90"] = (16, [(_DMMA_16816, [[(8 * (i % 2), _P[i // 2])] for i in range(8)],
                               [[(p, 0)] for p in _P])])
# Its inline PTX: D ($0-$3), A ($4-$11), B ($12-$15), C ($16-$19), all f64 registers.
_DMMA_16816_TEXT = (f"{_DMMA_16816} {{$0, $1, $2, $3}}, {{{', '.join(f'${i}' for i in range(4, 12))}}}, "
                    f"{{{', '.join(f'${i}' for i in range(12, 16))}}}, {{{', '.join(f'${i}' for i in range(16, 20))}}};")
_DMMA_16816_CONSTRAINTS = ",".join(["=d"] * 4 + ["d"] * 16)
_F64_QUAD = llir.LiteralStructType([llir.DoubleType()] * 4)
_F64_PAIR = llir.LiteralStructType([llir.DoubleType()] * 2)
_C_FRAGMENT = [(0, 0), (0, 1), (8, 0), (8, 1)]
H2 = llir.VectorType(llir.HalfType(), 2)


def f16_accumulator_call(name: str) -> str:
    """The intrinsic of an f16/fp8-as-f16 form with f16 C and D (`out_dtype=tl.float16`): two
    <2 x half> registers hold C's four elements in `_C_FRAGMENT` order."""
    if not name.endswith(".f32.f32"):
        raise CompilationError(f"internal: {name} has no f16-accumulator form")
    return name[:-len(".f32.f32")] + ".f16.f16"


def pack_halves(builder, values) -> list:
    """f16 accumulator elements as <2 x half> registers (pairs, low element first)."""
    return [pack_pair(builder, lo, hi, "f16") for lo, hi in zip(values[0::2], values[1::2])]


def unpack_halves(builder, regs) -> list:
    return [builder.extract_element(r, llir.Constant(I32, i)) for r in regs for i in (0, 1)]
# The m16n8k16 A fragment (a0..a7) element by element, as wgmma's register A takes it.
_A_FRAGMENT = [off for reg in _F16_CALL[1] for off in reg]
_FP8 = ("f8E4M3FN", "f8E5M2")


def f64_form(arch: int) -> str:
    """The `MMA_FORMS` key of an fp64 dot on `sm_<arch>`: m16n8k16 from sm_90, else m8n8k4. The
    pipeline lays out the A tile for it (`shared_dot._Buffer`)."""
    return "f64_sm90" if arch >= 90 else "f64"


def mma_form(op, arch: int) -> str:
    """The `MMA_FORMS` key of a dot that accelerate-matmul gave an mma layout (`mma_sync_kind`)."""
    a, b = (str(ir.element_type(v.type)) for v in op.operands[:2])
    if a in _FP8 and b in _FP8:
        return "fp8"
    if a == "f32":
        return "tf32"
    if a == "i8":
        return "s8"
    if a == "f64":
        return f64_form(arch)
    if a in ("f16", "bf16"):
        return a
    raise CompilationError.at(op.loc, f"mma.sync lowering takes f16/bf16/fp8/tf32/s8/f64 operands, not {a}")


def pack_pair(builder, x, y, elem: str):
    """Two 16-bit operand elements as one 32-bit MMA register: a <2 x half> for f16 (what the
    mma.sync intrinsic takes), an i32 for bf16 (which travels as i16)."""
    if elem == "f16":
        v = llir.Constant(llir.VectorType(llir.HalfType(), 2), None)
        v = builder.insert_element(v, x, llir.Constant(I32, 0))
        return builder.insert_element(v, y, llir.Constant(I32, 1))
    # a <2 x i16> vector, not zext/shl/or: LLVM then sees the pair, and two bf16 roundings of fp32
    # values (`fptrunc` to bfloat, bitcast) become one `cvt.rn.bf16x2.f32`
    v = llir.Constant(llir.VectorType(llir.IntType(16), 2), None)
    v = builder.insert_element(builder.insert_element(v, x, llir.Constant(I32, 0)), y, llir.Constant(I32, 1))
    return builder.bitcast(v, I32)


def _pack(self, values, form, elems):
    """One 32-bit operand register of `form` from its elements (low bits first)."""
    b = self.b
    if form == "tf32":
        return b.bitcast(values[0], I32)   # the hardware ignores the low 13 mantissa bits
    if form in ("f64", "f64_sm90"):
        return values[0]
    if form == "s8":
        word = b.zext(values[0], I32)
        for i, v in enumerate(values[1:], 1):
            word = b.or_(word, b.shl(b.zext(v, I32), llir.Constant(I32, 8 * i)))
        return word
    if form == "fp8":
        values = [_fp8_to_f16(b, v, e) for v, e in zip(values, elems)]
        form = "f16"
    return pack_pair(b, values[0], values[1], form)


def _fp8_to_f16(b, code, name):
    """An fp8 code as f16, exactly. e5m2 is f16's top byte. e4m3's magnitude bits shifted into f16's
    place read as the value times 2^(7 - 15), subnormals included; times 256 (exact) corrects the
    bias; its NaN code (0x7F / 0xFF) becomes a NaN."""
    i16, half = llir.IntType(16), llir.HalfType()
    c = b.zext(code, i16)
    if name == "f8E5M2":
        return b.bitcast(b.shl(c, llir.Constant(i16, 8)), half)
    mag = b.and_(c, llir.Constant(i16, 0x7F))
    bits = b.or_(b.shl(b.and_(c, llir.Constant(i16, 0x80)), llir.Constant(i16, 8)), b.shl(mag, llir.Constant(i16, 7)))
    value = b.fmul(b.bitcast(bits, half), llir.Constant(half, 256.0))
    return b.select(b.icmp_unsigned("==", mag, llir.Constant(i16, 0x7F)), llir.Constant(half, float("nan")), value)


def _lower_mma(self, op):
    a, b, c = op.operands
    form = mma_form(op, self.isa.arch)
    a_elem, b_elem = (str(ir.element_type(v.type)) for v in (a, b))
    k_step, calls = MMA_FORMS[form]
    lazy_a, lazy_b = self.lazy_operands.get(id(a)), self.lazy_operands.get(id(b))
    a_vals = lazy_a.values if lazy_a is not None else self.get(a)
    b_vals = lazy_b.values if lazy_b is not None else self.get(b)
    c_vals = self.get(c)
    a_at, b_at, c_at = _offsets(self, a), _offsets(self, b), _offsets(self, c)
    # Register offsets are (batch?, row, col); a batched dot's batch offset is the same for the A, B
    # and C registers of one batch (their warps and registers cover the batch alike), so each
    # (batch, C tile) is a 2-D dot of its own.
    k_tiles = sorted({key[-1] for key in a_at if (key[-2] % 16, key[-1] % k_step) == (0, 0)})
    c_tiles = sorted({key for key in c_at if (key[-2] % 16, key[-1] % 8) == (0, 0)})
    acc_ty = c_vals[0].type
    f16_acc = isinstance(acc_ty, llir.HalfType)
    ret_ty = llir.LiteralStructType([H2] * 2 if f16_acc else [acc_ty] * 4)

    # k-step outermost (as Triton): the A and B fragments of one k-step are read (lazily, with
    # ldmatrix, when the operand is in shared memory), used by every C tile, and then dead, so only
    # one k-step's fragments are live at a time, not the whole K tile's.
    accs = {t: [c_vals[c_at[t[:-2] + (t[-2] + dm, t[-1] + dn)]] for dm, dn in _C_FRAGMENT] for t in c_tiles}
    packed_a, packed_b = {}, {}
    for k0 in k_tiles:
        if lazy_a is not None:
            lazy_a.fetch([r for key, r in a_at.items() if k0 <= key[-1] < k0 + k_step])
        if lazy_b is not None:
            lazy_b.fetch([r for key, r in b_at.items() if k0 <= key[-2] < k0 + k_step])
        for tile in c_tiles:
            batch, m0, n0 = tile[:-2], tile[-2], tile[-1]
            for i, (name, a_regs, b_regs) in enumerate(calls):
                a_key, b_key = (batch, m0, k0, i), (batch, n0, k0, i)
                if a_key not in packed_a:
                    packed_a[a_key] = [
                        _pack(self, [a_vals[a_at[batch + (m0 + dm, k0 + dk)]] for dm, dk in reg], form,
                              [a_elem] * len(reg))
                        for reg in a_regs]
                if b_key not in packed_b:
                    packed_b[b_key] = [
                        _pack(self, [b_vals[b_at[batch + (k0 + dk, n0 + dn)]] for dk, dn in reg], form,
                              [b_elem] * len(reg))
                        for reg in b_regs]
                if form == "f64_sm90":
                    accs[tile] = _dmma_16816(self.b, packed_a[a_key], packed_b[b_key], accs[tile])
                    continue
                if form == "f64":   # rows 0-7, then 8-15 (see `MMA_FORMS["f64"]`)
                    acc = accs[tile]
                    for half in (0, 1):
                        res = call_intrinsic(self.b, name, _F64_PAIR, [packed_a[a_key][half], packed_b[b_key][0],
                                                                       acc[2 * half], acc[2 * half + 1]])
                        acc[2 * half:2 * half + 2] = [self.b.extract_value(res, j) for j in range(2)]
                    continue
                if f16_acc:
                    res = call_intrinsic(self.b, f16_accumulator_call(name), ret_ty, packed_a[a_key]
                                         + packed_b[b_key] + pack_halves(self.b, accs[tile]))
                    accs[tile] = unpack_halves(self.b, [self.b.extract_value(res, j) for j in range(2)])
                    continue
                res = call_intrinsic(self.b, name, ret_ty, packed_a[a_key] + packed_b[b_key] + accs[tile])
                accs[tile] = [self.b.extract_value(res, j) for j in range(4)]
    out = list(c_vals)
    for tile, acc in accs.items():
        for (dm, dn), v in zip(_C_FRAGMENT, acc):
            out[c_at[tile[:-2] + (tile[-2] + dm, tile[-1] + dn)]] = v
    self.set(op.result, out)


def _dmma_16816(builder, a_words, b_words, acc) -> list:
    """D = A B + C with `mma.m16n8k16.f64` (see `MMA_FORMS["f64_sm90"]`): 8 A, 4 B and 4 C doubles."""
    operands = list(a_words) + list(b_words) + list(acc)
    result = inline_ptx(builder, _F64_QUAD, _DMMA_16816_TEXT, _DMMA_16816_CONSTRAINTS, operands, side_effect=False)
    return [builder.extract_value(result, j) for j in range(4)]
