"""Run a kernel's NVPTX LLVM IR (the `llir` stage for cuda) on the host CPU, one OS thread per GPU
thread, so the GPU lowering's results can be checked on a machine without a GPU.

The IR is retargeted to the host: address spaces are dropped, the shared scratch becomes a host
global, and the NVVM intrinsics the core lowering uses (thread and block ids, the CTA barrier, warp
shuffles) become calls back into Python, where barriers are `threading.Barrier`s and a shuffle is an
exchange through a list. One CTA runs at a time. Inline PTX (atomics, cp.async, mma) and libdevice
calls cannot run here: kernels using them are out of scope, except the masked loads and stores
(`@p ld.global` / `@p st.global`), which become small LLVM functions, and sm_90's vector float adds
(`@p atom.global.add.v4.f32`, `.noftz.v8.f16` / `.v8.bf16`), done under the GIL in Python.

Every global access is checked as the GPU would fault on it: its address must be a multiple of its
size (a predicated `ld/st.global.vN.bW`) or of its declared `align` (a plain LLVM load or store), and
it must lie inside one of the array arguments. A failed check skips the access (x86 would just do a
misaligned one) and `run` raises MemoryFault naming the access, the address and the thread.

It found the layout bug of Triton's test_scan2d cummax cases and the scratch overlap of argmax over
fp64 exactly as the H100 showed them (same mismatch counts).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import itertools
import re
import threading

import numpy as np

_local = threading.local()
_state: dict = {}
_engines = []   # keep the JIT engines (and their code) alive
_callbacks = {}


def _shuffle(kind, value, b):
    tid = _local.tid
    lane, warp = tid & 31, tid >> 5
    exchange = _state["exchange"]
    exchange[tid] = value
    _state["warp_barriers"][warp].wait()
    src = {"idx": b, "bfly": lane ^ b, "down": lane + b if lane + b < 32 else lane,
           "up": lane - b if lane >= b else lane}[kind]
    out = exchange[warp * 32 + src]
    _state["warp_barriers"][warp].wait()
    return out


def _f32_to_bf16(x):
    bits = int(np.array(x, np.float32).view(np.uint32))
    if x != x:
        return 0x7FFF
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


def _bf16_to_f32(code):
    return np.array(code << 16, np.uint32).view(np.float32)


class MemoryFault(RuntimeError):
    """A global access the GPU would fault on (or that leaves the arrays): misaligned for its width or
    outside every array argument. The access itself was skipped on the host."""


# Every access to global or shared memory becomes a call of a small LLVM function that checks it first
# (`sim_check`): the address is a multiple of the access's alignment (a predicated
# `ld/st.global.vN.bW` must be aligned to its whole size, a plain LLVM access to its declared `align`)
# and lies inside one of the ranges in `sim_ranges` (the array arguments; no bounds check when there
# are none) or, for shared memory, inside the kernel's shared allocation. A failed check reports to
# Python (`sim_fault`) and the access is skipped: on x86 a misaligned access would just work, and one
# out of bounds would corrupt the host's memory instead of faulting.
_MAX_RANGES = 64
_GLOBAL, _SHARED = 1, 3     # NVPTX address spaces
_CHECK = f"""
@"sim_ranges" = global [{2 * _MAX_RANGES} x i64] zeroinitializer
@"sim_nranges" = global i64 0
@"sim_shared" = global [2 x i64] zeroinitializer
declare void @"sim_fault"(i32, i64, i64)

define i1 @"sim_check"(ptr %p, i64 %size, i64 %align, i32 %site, i32 %space) {{
entry:
  %a = ptrtoint ptr %p to i64
  %end = add i64 %a, %size
  %m = sub i64 %align, 1
  %low = and i64 %a, %m
  %misaligned = icmp ne i64 %low, 0
  br i1 %misaligned, label %bad_align, label %which
bad_align:
  call void @"sim_fault"(i32 %site, i64 %a, i64 0)
  ret i1 0
which:
  %is_shared = icmp eq i32 %space, {_SHARED}
  br i1 %is_shared, label %shared, label %bounds
shared:
  %slo = load i64, ptr @"sim_shared"
  %shi_at = getelementptr i64, ptr @"sim_shared", i64 1
  %shi = load i64, ptr %shi_at
  %s_above = icmp uge i64 %a, %slo
  %s_below = icmp ule i64 %end, %shi
  %s_inside = and i1 %s_above, %s_below
  br i1 %s_inside, label %ok, label %bad_shared
bad_shared:
  call void @"sim_fault"(i32 %site, i64 %a, i64 2)
  ret i1 0
bounds:
  %n = load i64, ptr @"sim_nranges"
  %none = icmp eq i64 %n, 0
  br i1 %none, label %ok, label %loop
loop:
  %i = phi i64 [0, %bounds], [%next, %cont]
  %lo_at = getelementptr i64, ptr @"sim_ranges", i64 %i
  %lo = load i64, ptr %lo_at
  %hi_i = add i64 %i, {_MAX_RANGES}
  %hi_at = getelementptr i64, ptr @"sim_ranges", i64 %hi_i
  %hi = load i64, ptr %hi_at
  %above = icmp uge i64 %a, %lo
  %below = icmp ule i64 %end, %hi
  %inside = and i1 %above, %below
  br i1 %inside, label %ok, label %cont
cont:
  %next = add i64 %i, 1
  %done = icmp eq i64 %next, %n
  br i1 %done, label %bad_bounds, label %loop
bad_bounds:
  call void @"sim_fault"(i32 %site, i64 %a, i64 1)
  ret i1 0
ok:
  ret i1 1
}}
"""


def _word(bits: int) -> str:
    return "i16" if bits == 8 else f"i{bits}"   # PTX keeps a b8 in a 16-bit register


def _pack(count: int, word: str, prefix: str, into: str, aggregate: str = None) -> tuple[list, str]:
    """IR lines building `<count x word>` (or the struct type `aggregate`) from %prefix0.. (or the one
    word); (lines, value)."""
    if count == 1:
        return [], f"%{prefix}0"
    lines, prev = [], "undef"
    for i in range(count):
        if aggregate is None:
            lines.append(f"  %{into}{i} = insertelement <{count} x {word}> {prev}, {word} %{prefix}{i}, i32 {i}")
        else:
            lines.append(f"  %{into}{i} = insertvalue {aggregate} {prev}, {word} %{prefix}{i}, {i}")
        prev = f"%{into}{i}"
    return lines, prev


def _checked_entry(define: str, size: int, access: str, skip: str) -> list:
    """A shim's first lines: on to block `access` only where the predicate %p holds and `sim_check`
    accepts the `size`-byte access at %a (aligned, inside an argument), else to block `skip`."""
    return [define, "entry:", f"  br i1 %p, label %check, label %{skip}", "check:",
            f'  %ok = call i1 @"sim_check"(ptr %a, i64 {size}, i64 {size}, i32 %site, i32 {_GLOBAL})',
            f"  br i1 %ok, label %{access}, label %{skip}", f"{access}:"]


def _predicated_load_definition(name: str, ret: str, bits: int, count: int) -> str:
    """An LLVM function doing what the masked load's inline PTX does: load `count` words where the
    predicate holds (and the access checks out), else return the `other` words it was given."""
    word = _word(bits)
    size = count * bits // 8
    params = ", ".join(f"{word} %o{i}" for i in range(count))
    lines = _checked_entry(f'define {ret} @"{name}"(i32 %site, i1 %p, ptr %a, {params}) {{', size, "ld", "skip")
    if bits == 8:
        lines += ["  %b = load i8, ptr %a", "  %w0 = zext i8 %b to i16"]
    elif count == 1:
        lines += [f"  %w0 = load {word}, ptr %a"]
    else:
        lines += [f"  %v = load <{count} x {word}>, ptr %a, align 1"]
        lines += [f"  %w{i} = extractelement <{count} x {word}> %v, i32 {i}" for i in range(count)]

    def ret_of(prefix, label):
        lines, value = _pack(count, word, prefix, label, aggregate=ret)
        return lines + [f"  ret {word if count == 1 else ret} {value}"]
    lines += ret_of("w", "r") + ["skip:"] + ret_of("o", "s") + ["}"]
    return "\n".join(lines) + "\n"


def _predicated_store_definition(name: str, bits: int, count: int) -> str:
    """What `@p st.global[.vN].bW [a], {words}` does: store where the predicate holds (and the access
    checks out)."""
    word = _word(bits)
    size = count * bits // 8
    params = ", ".join(f"{word} %w{i}" for i in range(count))
    lines = _checked_entry(f'define void @"{name}"(i32 %site, ptr %a, {params}, i1 %p) {{', size, "st", "done")
    if bits == 8:
        lines += ["  %b = trunc i16 %w0 to i8", "  store i8 %b, ptr %a"]
    else:
        packed, value = _pack(count, word, "w", "v")
        ty = word if count == 1 else f"<{count} x {word}>"
        lines += packed + [f"  store {ty} {value}, ptr %a, align 1"]
    lines += ["  br label %done", "done:", "  ret void", "}"]
    return "\n".join(lines) + "\n"


_ATOM_TYPES = {"f32": 0, "f16": 1, "bf16": 2}   # the kind `sim_vatom` is told
_ATOM_BITS = {"f32": 32, "f16": 16, "bf16": 16}


def _vector_atomic_definition(name: str, ret: str, ty: str, count: int) -> str:
    """What `@p atom.global.<scope>.<sem>.add[.noftz].v<count>.<ty> {old}, [a], {words}` does: where
    the predicate holds (and the access checks out), add each word's value to memory and return the
    values it held (`sim_vatom`, one Python call: atomic under the GIL), else undefined words."""
    bits = _ATOM_BITS[ty]
    word = _word(bits)
    params = ", ".join(f"{word} %w{i}" for i in range(count))
    lines = _checked_entry(f'define {ret} @"{name}"(i32 %site, ptr %a, {params}, i1 %p) {{',
                           count * bits // 8, "go", "skip")
    lines += [f"  %in = alloca [{count} x {word}]", f"  %out = alloca [{count} x {word}]"]
    for i in range(count):
        lines += [f"  %ip{i} = getelementptr [{count} x {word}], ptr %in, i32 0, i32 {i}",
                  f"  store {word} %w{i}, ptr %ip{i}"]
    lines.append(f'  call void @"sim_vatom"(i32 {_ATOM_TYPES[ty]}, i32 {count}, ptr %a, ptr %in, ptr %out)')
    for i in range(count):
        lines += [f"  %op{i} = getelementptr [{count} x {word}], ptr %out, i32 0, i32 {i}",
                  f"  %r{i} = load {word}, ptr %op{i}"]
    packed, value = _pack(count, word, "r", "v", aggregate=ret)
    lines += packed + [f"  ret {ret} {value}", "skip:", f"  ret {ret} zeroinitializer", "}"]
    return "\n".join(lines) + "\n"


def _vatom(kind: int, count: int, address: int, words: int, olds: int) -> None:
    """`count` float adds at `address` of the values whose bits lie at `words`; the old bits go to
    `olds`. f16 and bf16 round once from f32 (exact for the sum of two 16-bit values in range)."""
    np_word = np.uint32 if kind == 0 else np.uint16
    size = count * np.dtype(np_word).itemsize
    memory = np.frombuffer((ctypes.c_char * size).from_address(address), np_word)
    new = np.frombuffer((ctypes.c_char * size).from_address(words), np_word)
    out = np.frombuffer((ctypes.c_char * size).from_address(olds), np_word)
    out[:] = memory
    if kind == 0:
        memory.view(np.float32)[:] = memory.view(np.float32) + new.view(np.float32)
    elif kind == 1:
        memory.view(np.float16)[:] = memory.view(np.float16) + new.view(np.float16)
    else:
        for i in range(count):
            memory[i] = _f32_to_bf16(float(_bf16_to_f32(int(memory[i])) + _bf16_to_f32(int(new[i]))))


_SCALAR_BYTES = {"i1": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "i128": 16, "half": 2, "bfloat": 2,
                 "float": 4, "double": 8, "ptr": 8}


def _type_bytes(ty: str) -> int:
    m = re.fullmatch(r"<(\d+) x (\w+)>", ty)
    return int(m.group(1)) * _SCALAR_BYTES[m.group(2)] if m else _SCALAR_BYTES[ty]


def _mangle(ty: str) -> str:
    return re.sub(r"[^0-9A-Za-z]+", "_", ty).strip("_")


def _plain_load_definition(name: str, ty: str, align: int, space: int) -> str:
    return (f'define {ty} @"{name}"(i32 %site, ptr %a) {{\nentry:\n'
            f'  %ok = call i1 @"sim_check"(ptr %a, i64 {_type_bytes(ty)}, i64 {align}, i32 %site, i32 {space})\n'
            f"  br i1 %ok, label %ld, label %bad\nld:\n  %v = load {ty}, ptr %a, align 1\n  ret {ty} %v\n"
            f"bad:\n  ret {ty} zeroinitializer\n}}\n")


def _plain_store_definition(name: str, ty: str, align: int, space: int) -> str:
    return (f'define void @"{name}"(i32 %site, {ty} %v, ptr %a) {{\nentry:\n'
            f'  %ok = call i1 @"sim_check"(ptr %a, i64 {_type_bytes(ty)}, i64 {align}, i32 %site, i32 {space})\n'
            f"  br i1 %ok, label %st, label %done\nst:\n  store {ty} %v, ptr %a, align 1\n  br label %done\n"
            f"done:\n  ret void\n}}\n")


_PREDICATED_STORE = re.compile(
    r'call void asm sideeffect "@\$\d+ st\.global(?:\.v(\d))?\.b(\d+) \[\$0\], [^"]*", "[^"]*"\(([^\n]*)\)')
# `@p ld.global[.vN].bW {outs}, [addr];` with `other` tied to the outputs: (return type, width, count, args)
_PREDICATED_LOAD = re.compile(
    r'call ([^"]*?) asm sideeffect "@\$\d+ ld\.global(?:\.v(\d))?\.b(\d+) [^"]*", "[^"]*"\(([^\n]*)\)')
# `@p atom.global.<scope>.<sem>.add[.noftz].v<N>.<type> {outs}, [addr], {ins};`: (return type, N, type, args)
_VECTOR_ATOMIC = re.compile(
    r'call (\{[^}"]*\}|%"regs\.\w+") asm sideeffect "@\$\d+ atom\.global\.\w+\.\w+\.add(?:\.noftz)?\.v(\d)\.(f32|f16|bf16) '
    r'[^"]*", "[^"]*"\(([^\n]*)\)')
_TYPE = r"<\d+ x (?:i\d+|half|bfloat|float|double|ptr)>|i\d+|half|bfloat|float|double|ptr"
_VALUE = r'%"[^"]+"|%[-\w.$]+'
# plain (non-atomic, non-volatile) LLVM accesses to global (1) or shared (3) memory
_PLAIN_LOAD = re.compile(rf"= load ({_TYPE}), ptr addrspace\(([13])\) ({_VALUE})(?:, align (\d+))?[^\n]*")
_PLAIN_STORE = re.compile(rf"store ({_TYPE}) ([^\n]+?), ptr addrspace\(([13])\) ({_VALUE})(?:, align (\d+))?[^\n]*")


def _line_at(text: str, pos: int) -> str:
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    line = text[start:end if end >= 0 else len(text)].strip()
    return line if len(line) <= 200 else line[:197] + "..."


def _rewrite_accesses(ir: str, sites: list) -> str:
    """Every global access of `ir` as a call of a checking function (see `_CHECK`); `sites` gets one
    description per access, indexed by the site number each call passes."""
    definitions = {}

    def site(m, what):
        sites.append(f"{what}: {_line_at(m.string, m.start())}")
        return len(sites) - 1

    def predicated_store(m):
        bits, count = int(m.group(2)), int(m.group(1) or 1)
        name = f"sim_pstore_{bits}_{count}"
        definitions[name] = _predicated_store_definition(name, bits, count)
        number = site(m, f"predicated st.global{'.v%d' % count if count > 1 else ''}.b{bits}")
        return f'call void @"{name}"(i32 {number}, {m.group(3)})'

    def predicated_load(m):
        ret, count, bits, args = m.group(1).strip(), int(m.group(2) or 1), int(m.group(3)), m.group(4)
        name = f"sim_pload_{bits}_{count}"
        definitions[name] = _predicated_load_definition(name, ret, bits, count)
        number = site(m, f"predicated ld.global{'.v%d' % count if count > 1 else ''}.b{bits}")
        return f'call {ret} @"{name}"(i32 {number}, {args})'

    def plain_load(m):
        ty, space, ptr = m.group(1), int(m.group(2)), m.group(3)
        align = int(m.group(4) or _type_bytes(ty))
        name = f"sim_load_{_mangle(ty)}_a{align}_s{space}"
        definitions[name] = _plain_load_definition(name, ty, align, space)
        number = site(m, f"{'shared' if space == _SHARED else 'global'} load {ty} (align {align})")
        return f'= call {ty} @"{name}"(i32 {number}, ptr addrspace({space}) {ptr})'

    def plain_store(m):
        ty, value, space, ptr = m.group(1), m.group(2), int(m.group(3)), m.group(4)
        align = int(m.group(5) or _type_bytes(ty))
        name = f"sim_store_{_mangle(ty)}_a{align}_s{space}"
        definitions[name] = _plain_store_definition(name, ty, align, space)
        number = site(m, f"{'shared' if space == _SHARED else 'global'} store {ty} (align {align})")
        return f'call void @"{name}"(i32 {number}, {ty} {value}, ptr addrspace({space}) {ptr})'

    def vector_atomic(m):
        ret, count, ty, args = m.group(1).strip(), int(m.group(2)), m.group(3), m.group(4)
        name = f"sim_vatom_{ty}_{count}"
        definitions[name] = _vector_atomic_definition(name, ret, ty, count)
        number = site(m, f"predicated atom.global.add.v{count}.{ty}")
        return f'call {ret} @"{name}"(i32 {number}, {args})'

    for pattern, rewrite in ((_VECTOR_ATOMIC, vector_atomic), (_PREDICATED_STORE, predicated_store),
                             (_PREDICATED_LOAD, predicated_load),
                             (_PLAIN_LOAD, plain_load), (_PLAIN_STORE, plain_store)):
        ir = pattern.sub(rewrite, ir)
    return ir + _CHECK + "".join("\n" + text for text in definitions.values())


# C library functions LLVM calls (frem is fmodf; floor, ceil, ... are calls on an x86 without SSE4.1)
# or that stand for libdevice's exact ones
_LIBM_EXACT = ("fmodf", "fmod", "floorf", "floor", "ceilf", "ceil", "truncf", "trunc", "rintf", "rint",
               "nearbyintf", "nearbyint", "fabsf", "fabs", "fmaxf", "fmax", "fminf", "fmin")


def _half_bits(x) -> float:
    """A half's 16 bits as what a `float` return register holds: x86-64 returns (and passes) a half in
    the low 16 bits of an XMM register, which ctypes (no half type) sees as a float's bits."""
    return float(np.array(int(np.asarray(x, np.float16).view(np.uint16)), np.uint32).view(np.float32))


def _half_of(f) -> np.float16:
    return np.array(int(np.array(f, np.float32).view(np.uint32)) & 0xFFFF, np.uint16).view(np.float16)


def _install():
    if _callbacks:
        return
    import llvmlite.binding as llvm
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    i32_fn = ctypes.CFUNCTYPE(ctypes.c_int32)
    shuffle_fn = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32)
    _callbacks.update({
        "sim_tid": i32_fn(lambda: _local.tid),
        "sim_ctaid_x": i32_fn(lambda: _state["ctaid"][0]),
        "sim_ctaid_y": i32_fn(lambda: _state["ctaid"][1]),
        "sim_ctaid_z": i32_fn(lambda: _state["ctaid"][2]),
        "sim_nctaid_x": i32_fn(lambda: _state["nctaid"][0]),
        "sim_nctaid_y": i32_fn(lambda: _state["nctaid"][1]),
        "sim_nctaid_z": i32_fn(lambda: _state["nctaid"][2]),
        "sim_barrier": ctypes.CFUNCTYPE(None)(lambda: _state["barrier"].wait()),
        "sim_barrier_i": ctypes.CFUNCTYPE(None, ctypes.c_int32)(lambda _: _state["barrier"].wait()),
        # a failed access check (list.append: safe from every thread)
        "sim_fault": ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.c_uint64, ctypes.c_uint64)(
            lambda site, address, kind: _state["faults"].append((site, address, kind, _local.tid, _state["ctaid"]))),
    })
    # f32 -> bf16 to nearest even (NaN: the canonical 0x7FFF, as cvt.rn.bf16.f32), for the NVIDIA
    # lowering's `fptrunc float to bfloat` (the host has no bf16 conversion of its own to call)
    _callbacks["sim_f32_to_bf16"] = ctypes.CFUNCTYPE(ctypes.c_uint16, ctypes.c_float)(_f32_to_bf16)
    # and back (sm_90's `fpext bfloat to float`, cvt.f32.bf16: exact)
    _callbacks["sim_bf16_to_f32"] = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_uint16)(
        lambda bits: float(_bf16_to_f32(bits)))
    # sm_90's bf16 add/sub/mul (LLVM bfloat ops; not fused here): in f32, then rounded to bf16, which
    # is the bf16 operation's one rounding (f32 has more than 2 * 8 + 2 bits)
    bf16_binary = ctypes.CFUNCTYPE(ctypes.c_uint16, ctypes.c_uint16, ctypes.c_uint16)
    for op, fn in (("fadd", np.add), ("fsub", np.subtract), ("fmul", np.multiply)):
        _callbacks["sim_bf16_" + op] = bf16_binary(
            lambda x, y, fn=fn: _f32_to_bf16(float(fn(_bf16_to_f32(x), _bf16_to_f32(y)))))
    # The compiler-rt conversions LLVM calls for fp16 on an x86 without F16C, and for double -> half
    # on any (one rounding, from the double: NumPy's conversion is correctly rounded). The process
    # has none of them: an unresolved call would jump to address 0.
    half_fn = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_float)
    _callbacks["__extendhfsf2"] = half_fn(lambda h: float(_half_of(h)))
    _callbacks["__truncsfhf2"] = half_fn(lambda f: _half_bits(np.float32(f)))
    _callbacks["__truncdfhf2"] = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_double)(lambda d: _half_bits(np.float64(d)))
    _callbacks["__extendhfdf2"] = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_float)(lambda h: float(_half_of(h)))
    _callbacks["sim_vatom"] = ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p,
                                               ctypes.c_void_p)(_vatom)
    for kind in ("idx", "bfly", "down", "up"):
        _callbacks["sim_shfl_" + kind] = shuffle_fn(lambda mask, v, b, c, kind=kind: _shuffle(kind, v, b))
    for name, cb in _callbacks.items():
        llvm.add_symbol(name, ctypes.cast(cb, ctypes.c_void_p).value)
    libm = ctypes.CDLL(ctypes.util.find_library("m"))
    for name in _LIBM_EXACT + ("roundf", "round"):
        llvm.add_symbol(name, ctypes.cast(getattr(libm, name), ctypes.c_void_p).value)


_RENAME = {
    "llvm.nvvm.read.ptx.sreg.tid.x": "sim_tid", "llvm.nvvm.read.ptx.sreg.ctaid.x": "sim_ctaid_x",
    "llvm.nvvm.read.ptx.sreg.ctaid.y": "sim_ctaid_y", "llvm.nvvm.read.ptx.sreg.ctaid.z": "sim_ctaid_z",
    "llvm.nvvm.read.ptx.sreg.nctaid.x": "sim_nctaid_x", "llvm.nvvm.read.ptx.sreg.nctaid.y": "sim_nctaid_y",
    "llvm.nvvm.read.ptx.sreg.nctaid.z": "sim_nctaid_z", "llvm.nvvm.barrier0": "sim_barrier",
    "llvm.nvvm.barrier.cta.sync.aligned.all": "sim_barrier_i",
    "llvm.nvvm.shfl.sync.idx.i32": "sim_shfl_idx", "llvm.nvvm.shfl.sync.bfly.i32": "sim_shfl_bfly",
    "llvm.nvvm.shfl.sync.down.i32": "sim_shfl_down", "llvm.nvvm.shfl.sync.up.i32": "sim_shfl_up",
}


def to_host_ir(ir: str, shared_bytes: int = 1 << 18, sites: list | None = None) -> str:
    """The NVPTX module `ir` rewritten for the host (see the module docstring). `sites` receives a
    description of each global access, in the order of the site numbers its checks report."""
    ir = _rewrite_accesses(ir, sites if sites is not None else [])
    # libdevice functions that are exact IEEE operations: the C library's do the same
    ir = re.sub(r'@"?__nv_(%s)"?\(' % "|".join(_LIBM_EXACT), r'@"\1"(', ir)
    if re.search(r"\bcall\b[^\n]*\basm\b", ir) or re.search(r'@"?__nv_', ir):
        raise NotImplementedError("inline PTX or libdevice calls cannot run on the host")
    ir = re.sub(r"target (triple|datalayout) = .*\n", "", ir)
    ir = ir.replace("ptx_kernel ", "")
    ir = re.sub(r" addrspace\(\d\)", "", ir)
    ir = re.sub(r'"nvvm\.[a-z]+"="[^"]*"', "", ir)
    ir = re.sub(r'@"?global_smem"? = external (local_unnamed_addr )?global \[0 x i8\]',
                f'@"global_smem" = global [{shared_bytes} x i8] zeroinitializer', ir)
    for nvvm, host in _RENAME.items():
        ir = ir.replace(f'@"{nvvm}"', f'@"{host}"').replace(f"@{nvvm}(", f'@"{host}"(')
    other = re.search(r'\bcall [^\n]*@"?(llvm\.nvvm\.[\w.]+)', ir)
    if other:   # the host's code generator would abort the process ("Cannot select")
        raise NotImplementedError(f"{other.group(1)} cannot run on the host")
    ir = re.sub(r"fptrunc float (\S+) to bfloat", r'call i16 @"sim_f32_to_bf16"(float \1)', ir)
    ir = re.sub(r"fpext bfloat (\S+) to float", r'call float @"sim_bf16_to_f32"(i16 \1)', ir)
    ir = re.sub(r"bitcast bfloat (\S+) to i16", r"bitcast i16 \1 to i16", ir)
    ir = re.sub(r"bitcast i16 (\S+) to bfloat", r"bitcast i16 \1 to i16", ir)
    ir = re.sub(r"(fadd|fsub|fmul)( contract)? bfloat (\S+), (\S+)", r'call i16 @"sim_bf16_\1"(i16 \3, i16 \4)', ir)
    if '@"sim_vatom"(' in ir:
        ir += '\ndeclare void @"sim_vatom"(i32, i32, ptr, ptr, ptr)\n'
    if "sim_f32_to_bf16" in ir:
        ir += '\ndeclare i16 @"sim_f32_to_bf16"(float)\n'
    if "sim_bf16_to_f32" in ir:
        ir += '\ndeclare float @"sim_bf16_to_f32"(i16)\n'
    for op in ("fadd", "fsub", "fmul"):
        if f"sim_bf16_{op}" in ir:
            ir += f'\ndeclare i16 @"sim_bf16_{op}"(i16, i16)\n'
    return re.sub(r'syncscope\("[a-z]+"\) ', "", ir)


def run(ir: str, args, num_warps: int, grid=1, names=None, shared: int | None = None) -> None:
    """Run the kernel in `ir` on `grid` CTAs (an int or up to three dims), one after another. `args`:
    NumPy arrays (passed by address, written in place) and Python ints (i32); `names` name them in a
    fault's message; `shared`: the kernel's shared memory in bytes (its metadata's "shared"; else the
    host's whole buffer). Every access must be aligned, and inside an array argument or the shared
    memory: else the access is skipped and MemoryFault is raised once the CTA has finished."""
    import llvmlite.binding as llvm
    _install()
    sites: list = []
    shared_bytes = 1 << 18
    if shared is not None and shared > shared_bytes:
        raise ValueError(f"{shared} bytes of shared memory: more than the host's {shared_bytes}")
    module = llvm.parse_assembly(to_host_ir(ir, shared_bytes, sites=sites))
    module.verify()
    for f in module.functions:   # an unresolved function would be a call to address 0
        if f.is_declaration and not f.name.startswith("llvm.") and not llvm.address_of_symbol(f.name):
            raise NotImplementedError(f"{f.name} cannot run on the host")
    engine = llvm.create_mcjit_compiler(module, llvm.Target.from_default_triple().create_target_machine())
    engine.finalize_object()
    _engines.append(engine)
    name = re.search(r'define ptx_kernel void @"?([^"( ]+)"?\(', ir).group(1)
    arrays = [a for a in args if isinstance(a, np.ndarray)]
    if len(arrays) > _MAX_RANGES:
        raise ValueError(f"at most {_MAX_RANGES} array arguments")
    ranges = (ctypes.c_uint64 * (2 * _MAX_RANGES)).from_address(engine.get_global_value_address("sim_ranges"))
    for i, a in enumerate(arrays):
        ranges[i], ranges[_MAX_RANGES + i] = a.ctypes.data, a.ctypes.data + a.nbytes
    ctypes.c_uint64.from_address(engine.get_global_value_address("sim_nranges")).value = len(arrays)
    if "global_smem" in ir:
        smem = engine.get_global_value_address("global_smem")
        bounds = (ctypes.c_uint64 * 2).from_address(engine.get_global_value_address("sim_shared"))
        bounds[0], bounds[1] = smem, smem + (shared_bytes if shared is None else shared)
    values = [a.ctypes.data if isinstance(a, np.ndarray) else int(a) for a in args]
    types = [ctypes.c_void_p if isinstance(a, np.ndarray) else ctypes.c_int32 for a in args]
    kernel = ctypes.CFUNCTYPE(None, *types)(engine.get_function_address(name))
    threads = num_warps * 32
    dims = tuple(grid) + (1,) * (3 - len(grid)) if isinstance(grid, (tuple, list)) else (int(grid), 1, 1)
    for pid in itertools.product(*(range(d) for d in reversed(dims))):
        # A timeout, so that a thread that dies breaks the barrier instead of hanging the others.
        _state.update(ctaid=pid[::-1], nctaid=dims, barrier=threading.Barrier(threads, timeout=120),
                      exchange=[0] * threads, faults=[],
                      warp_barriers=[threading.Barrier(32, timeout=120) for _ in range(num_warps)])
        errors = []

        def body(tid, errors=errors):
            _local.tid = tid
            try:
                kernel(*values)
            except Exception as exc:   # pragma: no cover - reported below
                errors.append(exc)
        workers = [threading.Thread(target=body, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        if errors:
            raise errors[0]
        if _state["faults"]:
            raise MemoryFault(_describe_faults(_state["faults"], sites, args, names))


def _describe_faults(faults, sites, args, names) -> str:
    """Per faulting access (its IR line; four at most): how many threads faulted there, and the first
    one's address against the arrays."""
    names = list(names) if names is not None else [f"argument {i}" for i in range(len(args))]
    by_site: dict = {}
    for fault in sorted(faults, key=lambda f: (f[0], f[3])):
        by_site.setdefault(fault[0], []).append(fault)
    lines = [f"{len(faults)} global access(es) the GPU would fault on, at {len(by_site)} access(es) of the IR:"]
    for site, group in list(by_site.items())[:4]:
        _, address, kind, tid, ctaid = group[0]
        problem = ["misaligned", "outside every array argument", "outside the shared memory"][kind]
        lines.append(f"  {sites[site]}\n    {len(group)} thread(s); the first: {problem}: address 0x{address:x} "
                     f"({_locate(address, args, names)}), thread {tid} of CTA {tuple(ctaid)}")
    return "\n".join(lines)


def _locate(address: int, args, names) -> str:
    """`address` as a byte offset from the nearest array argument that starts at or below it."""
    best = None
    for a, name in zip(args, names):
        if isinstance(a, np.ndarray) and a.ctypes.data <= address and (best is None or a.ctypes.data > best[0]):
            best = (a.ctypes.data, name, a.nbytes)
    if best is None:
        return "below every array argument"
    base, name, nbytes = best
    return f"{name} + {address - base} bytes, of {nbytes}"
