"""Global loads, stores and atomics with Triton's qualifiers, spelled in PTX the way Triton spells them.

LLVM's NVPTX back end cannot say most of what Triton's memory ops carry, so these are inline PTX:

- atomics: `atom.global.<scope>.<sem>.<op>.<type>` (`atom.global.gpu.acq_rel.add.u32`), and for
  compare-and-swap `atom.global.<sem>.<scope>.cas.b32`. LLVM's `atomicrmw` lowers to an `atom`
  without memory semantics whatever its ordering (a relaxed atomic: an acq_rel lock was not one);
  the scope (`cta`, `gpu`, `sys`) has no LLVM spelling that NVPTX reads either;
- the read that `tl.atomic_poll` spins on: `ld.relaxed.<scope>.global.b32`, then for acquire
  semantics `fence.acquire.<scope>` (`fence.acq_rel` before sm_90), as Triton's poll;
- loads and stores with a cache modifier (`ld.global.cg.v4.b32`, `st.global.cs.b16`), an eviction
  policy (`createpolicy.fractional.L2::evict_last` + `ld.global.L1::evict_last.L2::cache_hint`) or
  volatile (`ld.volatile.global`). Plain loads and stores stay LLVM instructions.

Every value goes through integer registers: elements of 64 bits as b64 words, smaller ones packed
into b32 words (one b16 / b8 where a load is narrower), as Triton packs them.
"""
from __future__ import annotations

import llvmlite.ir as llir

from .inline_ptx import inline_ptx as _asm

_REGISTER = {8: "h", 16: "h", 32: "r", 64: "l"}   # NVPTX inline-asm register classes (b8 in a 16-bit one)
# LLVM atomicrmw name -> (PTX op, type kind: u/s/b integer, f float)
_ATOM_OPS = {"add": ("add", "u"), "fadd": ("add", "f"), "max": ("max", "s"), "min": ("min", "s"),
             "umax": ("max", "u"), "umin": ("min", "u"), "and": ("and", "b"), "or": ("or", "b"),
             "xor": ("xor", "b"), "xchg": ("exch", "b")}
_LOAD_CACHE = ("ca", "cg", "cs", "cv")
_STORE_CACHE = ("wb", "cg", "cs", "wt")
_EVICT = ("evict_first", "evict_last")


def _bits(ty) -> int:
    if isinstance(ty, llir.IntType):
        return ty.width
    return {"half": 16, "bfloat": 16, "float": 32, "double": 64}[str(ty)]


def _is_number(ty) -> bool:
    """Integers (of whole bytes) and floats: what travels through the integer registers (a loaded
    pointer, or anything else, stays an LLVM load)."""
    elem = ty.element if isinstance(ty, llir.VectorType) else ty
    return isinstance(elem, llir.IntType) and elem.width in (8, 16, 32, 64) or \
        str(elem) in ("half", "bfloat", "float", "double")


def _words(ty):
    """(bits of a word, number of words) that hold one value of `ty` (a scalar or a vector)."""
    elem, count = (ty.element, ty.count) if isinstance(ty, llir.VectorType) else (ty, 1)
    bits = _bits(elem)
    if bits == 64:
        return 64, count
    total = bits * count
    return (32, total // 32) if total >= 32 else (total, 1)


def _to_words(builder, value, word_bits: int, count: int):
    """`value` as `count` integers of `word_bits` (8-bit words widened to 16: the register size)."""
    wty = llir.IntType(word_bits)
    if count == 1:
        word = value if value.type == wty else builder.bitcast(value, wty)
        return [builder.zext(word, llir.IntType(16)) if word_bits == 8 else word]
    vec = builder.bitcast(value, llir.VectorType(wty, count))
    return [builder.extract_element(vec, llir.Constant(llir.IntType(32), i)) for i in range(count)]


def _from_words(builder, words, ty, word_bits: int):
    wty = llir.IntType(word_bits)
    if len(words) == 1:
        word = builder.trunc(words[0], wty) if word_bits == 8 else words[0]
        return word if ty == wty else builder.bitcast(word, ty)
    vec = llir.Constant(llir.VectorType(wty, len(words)), None)
    for i, w in enumerate(words):
        vec = builder.insert_element(vec, w, llir.Constant(llir.IntType(32), i))
    return builder.bitcast(vec, ty)


def _operands(first: int, count: int) -> str:
    names = ", ".join(f"${first + i}" for i in range(count))
    return names if count == 1 else "{" + names + "}"


def _with_policy(arch: int, evict: str, qualifiers: str) -> tuple:
    """The eviction-policy form of an ld / st (`qualifiers` so far): (PTX before it, its qualifiers,
    its extra operand). sm_80 and later add an L2 policy (`createpolicy`), as Triton does."""
    if arch < 80:
        return "", qualifiers + f".L1::{evict}", ""
    prologue = f"{{\n\t.reg .b64 %l2_policy;\n\tcreatepolicy.fractional.L2::{evict}.b64 %l2_policy, 1.0;\n\t"
    return prologue, qualifiers + f".L1::{evict}.L2::cache_hint", ", %l2_policy"


def _eviction(arch: int, evict: str) -> str:
    """`evict` where PTX can say it: eviction priorities came with PTX ISA 7.4 (a hint: dropped
    before)."""
    return evict if evict in _EVICT and _ptx_version(arch) >= 74 else "normal"


def _qualified(isa, access: str, cache: str, caches, evict: str) -> tuple:
    """(PTX before it, qualified instruction, extra operand) of `access` ("ld.global"/"st.global"):
    a cache operator excludes an eviction priority (ptxas rejects both)."""
    if cache in caches:
        return "", f"{access}.{cache}", ""
    if evict in _EVICT:
        return _with_policy(isa.arch, evict, access)
    return "", access, ""


def load(isa, builder, ptr, ty, cache: str, evict: str, volatile: bool, pred=None, other=None):
    """The load as inline PTX, or None where it has no qualifier and no predicate (a plain LLVM load
    then). `pred` (i1) and `other` (a `ty` value): where `pred` fails the result is `other`, as
    Triton's masked load: `other` is placed in the result registers and `@p ld.global...` overwrites
    them. A branch around a plain load instead cuts the code into one block per masked vector;
    ptxas then keeps the vectors apart (in group_norm's 512-values-a-thread block, 4x the spill
    requests of Triton's code)."""
    evict = _eviction(isa.arch, evict) if evict in _EVICT else evict
    if not volatile and cache not in _LOAD_CACHE and evict not in _EVICT and pred is None or not _is_number(ty):
        return None
    word_bits, count = _words(ty)
    if volatile:   # ld.volatile takes no cache operator or eviction priority
        head, quals, policy = "", "ld.volatile.global", ""
    else:
        head, quals, policy = _qualified(isa, "ld.global", cache, _LOAD_CACHE, evict)
    vec = f".v{count}" if count > 1 else ""
    # operands: the result words, then the predicate (if any), the address, and `other`'s words tied
    # to the result registers
    guard = f"@${count} " if pred is not None else ""
    address = count + (pred is not None)
    text = (f"{head}{guard}{quals}{vec}.b{word_bits} {_operands(0, count)}, [${address}]{policy};"
            + ("\n\t}" if head else ""))
    reg_ty = llir.IntType(16 if word_bits == 8 else word_bits)
    ret = reg_ty if count == 1 else llir.LiteralStructType([reg_ty] * count)
    constraints = [f"={_REGISTER[word_bits]}"] * count + (["b"] if pred is not None else []) + ["l"]
    args = ([pred] if pred is not None else []) + [ptr]
    if pred is not None:
        constraints += [str(i) for i in range(count)]
        args += _to_words(builder, other, word_bits, count)
    res = _asm(builder, ret, text, ",".join(constraints + ["~{memory}"]), args)
    words = [res] if count == 1 else [builder.extract_value(res, i) for i in range(count)]
    return _from_words(builder, words, ty, word_bits)


def store(isa, builder, value, ptr, cache: str, evict: str, pred=None) -> bool:
    """The store as inline PTX; False where it has no qualifier and no predicate (a plain LLVM store
    then). `pred` (i1): the store happens where it holds, `@p st.global...` as Triton's masked store,
    instead of a branch around it (a BSSY/BSYNC region in SASS, the value's computation sunk in it)."""
    evict = _eviction(isa.arch, evict) if evict in _EVICT else evict
    if cache not in _STORE_CACHE and evict not in _EVICT and pred is None or not _is_number(value.type):
        return False
    word_bits, count = _words(value.type)
    head, quals, policy = _qualified(isa, "st.global", cache, _STORE_CACHE, evict)
    vec = f".v{count}" if count > 1 else ""
    guard = f"@${count + 1} " if pred is not None else ""
    text = f"{head}{guard}{quals}{vec}.b{word_bits} [$0], {_operands(1, count)}{policy};" + ("\n\t}" if head else "")
    constraints = ",".join(["l"] + [_REGISTER[word_bits]] * count + (["b"] if pred is not None else [])
                           + ["~{memory}"])
    _asm(builder, llir.VoidType(), text, constraints,
         [ptr] + _to_words(builder, value, word_bits, count) + ([pred] if pred is not None else []))
    return True


def _atom_type(arch: int, kind: str, elem: str, bits: int):
    """The PTX type of `atom.<op>` for LLVM op `kind` on IR element `elem`, or None if PTX has none."""
    op, klass = _ATOM_OPS[kind]
    if klass == "f":
        if elem == "f16" and arch >= 70:
            return f"{op}.noftz.f16"
        if elem == "bf16" and arch >= 90:
            return f"{op}.noftz.bf16"
        return f"{op}.{elem}" if elem in ("f32", "f64") else None
    if bits not in (32, 64):
        return None
    return f"{op}.{klass}{bits}"


def atomic_rmw(isa, builder, kind: str, ptr, value, sem: str, scope: str, elem: str):
    """`atom.global.<scope>.<sem>.<op>.<type>`, or None where PTX has no such atom (sm_70 brought
    memory semantics and scopes to `atom`)."""
    bits = _bits(value.type)
    spelled = _atom_type(isa.arch, kind, elem, bits) if isa.arch >= 70 and kind in _ATOM_OPS else None
    if spelled is None:
        return None
    reg = _REGISTER[bits]
    ity = llir.IntType(bits)
    old = _asm(builder, ity, f"atom.global.{scope}.{sem}.{spelled} $0, [$1], $2;", f"={reg},l,{reg},~{{memory}}",
               [ptr, value if value.type == ity else builder.bitcast(value, ity)])
    return old if value.type == ity else builder.bitcast(old, value.type)


def vector_atomic_width(isa, kind: str, elem: str) -> int:
    """Elements one `atom.global...v<N>` adds (sm_90, PTX ISA 8.1): 4 f32, or 8 f16 / bf16; 1 where
    there is no vector form (integers, other ops, older targets). Triton uses these on sm_90: Liger's
    modulated RMS norm backward issues a quarter of the atomics with them."""
    if kind != "fadd" or isa.arch < 90 or _ptx_version(isa.arch) < 81:
        return 1
    return {"f32": 4, "f16": 8, "bf16": 8}.get(elem, 1)


def vector_atomic_rmw(isa, builder, kind: str, ptr, values, sem: str, scope: str, elem: str, pred=None):
    """`@p atom.global.<scope>.<sem>.add[.noftz].v<N>.<type>` of `values` (N consecutive elements
    at `ptr`, aligned to their size) where the i1 `pred` holds; returns the old values (undefined
    where `pred` fails), or None where `vector_atomic_width` allows no such vector."""
    count = len(values)
    if count < 2 or count > vector_atomic_width(isa, kind, elem):
        return None
    bits = _bits(values[0].type)
    reg, ity = _REGISTER[bits], llir.IntType(bits)
    words = [v if v.type == ity else builder.bitcast(v, ity) for v in values]
    op = "add" if elem == "f32" else "add.noftz"
    guard = f"@${2 * count + 1} " if pred is not None else ""
    text = (f"{guard}atom.global.{scope}.{sem}.{op}.v{count}.{elem} {_operands(0, count)}, [${count}], "
            f"{_operands(count + 1, count)};")
    constraints = [f"={reg}"] * count + ["l"] + [reg] * count + (["b"] if pred is not None else [])
    res = _asm(builder, llir.LiteralStructType([ity] * count), text, ",".join(constraints + ["~{memory}"]),
               [ptr] + words + ([pred] if pred is not None else []))
    olds = [builder.extract_value(res, i) for i in range(count)]
    return [o if o.type == values[0].type else builder.bitcast(o, values[0].type) for o in olds]


def atomic_cas(isa, builder, ptr, cmp, value, sem: str, scope: str):
    """`atom.global.<sem>.<scope>.cas.b<N>` on integers (b16 included), or None before sm_70."""
    bits = _bits(value.type)
    if isa.arch < 70 or bits not in (16, 32, 64):
        return None
    reg = _REGISTER[bits]
    return _asm(builder, value.type, f"atom.global.{sem}.{scope}.cas.b{bits} $0, [$1], $2, $3;",
                f"={reg},l,{reg},{reg},~{{memory}}", [ptr, cmp, value])


def atomic_read(isa, builder, ptr, ty, sem: str, scope: str):
    """`ld.relaxed.<scope>.global`, then a fence for acquire semantics (Triton's atomic_poll and
    atomic_load read). A b8 travels in a 16-bit register, as in Triton."""
    bits = _bits(ty)
    if isa.arch < 70 or bits not in (8, 16, 32, 64):
        return None
    reg_ty = llir.IntType(16) if bits == 8 else ty
    value = _asm(builder, reg_ty, f"ld.relaxed.{scope}.global.b{bits} $0, [$1];",
                 f"={_REGISTER[bits]},l,~{{memory}}", [ptr])
    if bits == 8:
        value = builder.trunc(value, ty)
    if sem == "acquire":
        atomic_fence(isa, builder, sem, scope)
    return value


def atomic_write(isa, builder, value, ptr, scope: str) -> bool:
    """`st.relaxed.<scope>.global.b<N>` of an integer (Triton's atomic_store; its release fence is
    `atomic_fence`'s); False before sm_70."""
    bits = _bits(value.type)
    if isa.arch < 70 or bits not in (8, 16, 32, 64):
        return False
    if bits == 8:
        value = builder.zext(value, llir.IntType(16))
    _asm(builder, llir.VoidType(), f"st.relaxed.{scope}.global.b{bits} [$0], $1;",
         f"l,{_REGISTER[bits]},~{{memory}}", [ptr, value])
    return True


def atomic_fence(isa, builder, sem: str, scope: str) -> bool:
    """`fence.acquire.<scope>` / `fence.release.<scope>` (`fence.acq_rel` where those do not exist),
    as Triton fences its relaxed atomic loads and stores; False before sm_70."""
    if isa.arch < 70:
        return False
    fence = sem if _has_acquire_fence(isa.arch) else "acq_rel"
    _asm(builder, llir.VoidType(), f"fence.{fence}.{scope};", "~{memory}", [])
    return True


def _ptx_version(arch: int) -> int:
    """The PTX ISA version the module will be emitted as (the toolchain's choice, e.g. 86 for 8.6)."""
    from .ptx_isa import choose_ptx_version, cpu_name
    from .toolchain import _assembler_cuda_version_or_none
    return choose_ptx_version(cpu_name(arch), _assembler_cuda_version_or_none())


def _has_acquire_fence(arch: int) -> bool:
    """`fence.acquire` exists from sm_90 and PTX ISA 8.6 (LLVM's NVPTX back end checks the same);
    before, the acquire fence is the stronger `fence.acq_rel` (Triton's choice before sm_90)."""
    return arch >= 90 and _ptx_version(arch) >= 86
