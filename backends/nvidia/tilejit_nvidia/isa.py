"""The NVPTX table for the shared GPU lowering: special registers, barriers, shuffles, libdevice math,
global memory ops with Triton's qualifiers (memory_ptx.py)."""
from __future__ import annotations

from typing import Optional, Tuple

import llvmlite.ir as llir

from tilejit.gpu.isa import F32, I32, add_string_attribute, call_intrinsic, type_suffix
from tilejit.gpu.target import TargetDescription

from . import memory_ptx
from .barriers import USER_BARRIER
from .inline_ptx import inline_ptx

# math op -> libdevice base name; f32 adds the `f` suffix (`__nv_expf`), f64 uses the bare name.
_LIBDEVICE = {
    "math.exp": "exp", "math.exp2": "exp2", "math.log": "log", "math.log2": "log2",
    "math.log10": "log10", "math.log1p": "log1p", "math.expm1": "expm1", "math.rsqrt": "rsqrt",
    "math.sin": "sin", "math.cos": "cos", "math.tan": "tan", "math.tanh": "tanh", "math.sinh": "sinh",
    "math.cosh": "cosh", "math.asin": "asin", "math.acos": "acos", "math.atan": "atan",
    "math.erf": "erf", "math.cbrt": "cbrt", "math.powf": "pow", "math.atan2": "atan2",
    "arith.remf": "fmod",
}
# math op -> LLVM intrinsic base name (NVPTX selects these to single instructions)
_INTRINSICS = {
    "math.sqrt": "llvm.sqrt", "tt.precise_sqrt": "llvm.sqrt", "math.absf": "llvm.fabs",
    "math.floor": "llvm.floor", "math.ceil": "llvm.ceil", "math.trunc": "llvm.trunc",
    "math.round": "llvm.round", "math.fma": "llvm.fma", "math.copysign": "llvm.copysign",
    "arith.maxnumf": "llvm.maxnum", "arith.minnumf": "llvm.minnum",
    "arith.maximumf": "llvm.maximum", "arith.minimumf": "llvm.minimum",
}


def _fast_exp(builder, args):
    """Triton's fp32 `tl.exp`: x * log2(e) (an fmul LLVM may contract), then `ex2.approx.f32`
    (2 ulp; not flushed to zero). `libdevice.exp` keeps the accurate __nv_expf."""
    scaled = builder.fmul(args[0], llir.Constant(F32, 1.4426950408889634))
    scaled.flags.append("contract")
    return inline_ptx(builder, F32, "ex2.approx.f32 $0, $1;", "=f,f", [scaled], side_effect=False)


def _fast_exp2(builder, args):
    """fp32 `tl.exp2`: `ex2.approx.ftz.f32`, which is what libdevice's `__nv_exp2f` becomes under
    `nvvm-reflect-ftz` = 1 (set on every kernel module, see `finish_kernel`). Emitted directly: linking libdevice for it, and inlining and folding its
    reflect branch at every call, was 30-40 ms of the bench attention's compile (69 calls)."""
    return inline_ptx(builder, F32, "ex2.approx.ftz.f32 $0, $1;", "=f,f", args, side_effect=False)


def _full_div(builder, args):
    """Triton's fp32 `/` and `tl.fdiv`: `div.full.f32` (2 ulp). `tl.div_rn` stays IEEE (div.rn)."""
    return inline_ptx(builder, F32, "div.full.f32 $0, $1, $2;", "=f,f,f", args, side_effect=False)


# fp32 ops that Triton 3.x compiles to the fast approximate instructions (checked against Triton
# 3.9's PTX for the same kernels): tilejit gives the same code, and with it the same results.
_TRITON_FAST_F32 = {
    "math.exp": ("emit", _fast_exp),
    "math.exp2": ("emit", _fast_exp2),
    "arith.divf": ("emit", _full_div),
    "math.sqrt": ("intrinsic", "llvm.nvvm.sqrt.approx.ftz.f"),
}


class _BFloatType(llir.Type):
    """LLVM's `bfloat` (llvmlite has no class for it): only the operand of an fptrunc and a bitcast."""

    def _to_string(self):
        return "bfloat"


_BFLOAT = _BFloatType()


def _max_shared_bytes(arch: int) -> int:
    """Shared memory one SM offers to its CTAs (CUDA's per-SM opt-in maxima)."""
    if arch >= 90:
        return 227 * 1024
    if arch in (80, 87):
        return 163 * 1024
    return 99 * 1024


class NvidiaISA(TargetDescription):
    """The NVIDIA GPU target description: shared memory and matrix units per sm arch, and the NVPTX
    hooks (special registers, barriers, shuffles, cp.async, ldmatrix, libdevice math, printf)."""
    triple = "nvptx64-nvidia-cuda"
    data_layout = "e-p3:32:32-p4:32:32-p5:32:32-p6:32:32-p7:32:32-i64:64-i128:128-v16:16-v32:32-n16:32:64"

    @property
    def shared_memory(self) -> int:
        return _max_shared_bytes(self.arch)

    @property
    def registers_per_sm(self) -> int:
        return 65536   # every sm_70+ SM: 64K 32-bit registers

    def shared_memory_per_cta(self, ctas_per_sm: int) -> int:
        # The SM has the per-CTA opt-in maximum plus 1 KiB, and keeps 1 KiB of it for each CTA.
        ctas = max(1, ctas_per_sm)
        return (self.shared_memory + 1024) // ctas - 1024

    @property
    def encoding_kinds(self):
        from .layouts import ENCODING_KINDS
        return ENCODING_KINDS

    def f16_accumulator_k_step(self, operand_bits):
        # Triton computes dots with out_dtype=float16 by mma.sync / wgmma with f16 accumulators: each
        # instruction (32 bytes of K: k16 for fp16, k32 for fp8) adds its exact products to the
        # accumulator and rounds once.
        return 256 // operand_bits

    @property
    def dot_lowerings(self):
        from .layouts import NvidiaMmaEncoding
        from .mma_sync import lower_nvidia_dot
        return {NvidiaMmaEncoding: lower_nvidia_dot}

    @property
    def lowering_mixin(self):
        from .lowering import NvidiaLowering
        return NvidiaLowering

    @property
    def matrix_units(self):
        from .matrix_units import MmaSync, Wgmma
        if self.arch >= 90:
            return (Wgmma(), MmaSync())
        return (MmaSync(),) if self.arch >= 80 else ()

    def mark_kernel(self, func: llir.Function, threads_per_block: int) -> None:
        func.calling_convention = "ptx_kernel"
        add_string_attribute(func, "nvvm.maxntid", str(threads_per_block))

    def asks_two_ctas(self, threads_per_block: int, shared_bytes: int, pipelined_mma: bool,
                      carried_registers: int = 0) -> bool:
        """Whether the kernel asks ptxas for two CTAs an SM (`.minnctapersm 2`), which caps a
        thread's registers at 32768 / `threads_per_block` (128 at 8 warps).

        A pipelined mma.sync loop of 8+ warps (matmul's 128x128x64 tile) takes ~160 registers a
        thread, so only one CTA fits on an SM and nothing hides the loop's latencies. Asking for two
        (a few spilled bytes) measured 262 -> 314 TFLOP/s on an H200. Only where two CTAs' shared
        memory fits too, and not where the loop's carried values alone reach the cap (a 128x256
        fp32 accumulator at 8 warps is 128 registers a thread: ptxas refused the request, and each
        such kernel was assembled twice)."""
        return (pipelined_mma and threads_per_block >= 256 and 2 * shared_bytes <= _max_shared_bytes(self.arch)
                and carried_registers < 32768 // threads_per_block)

    def finish_kernel(self, func: llir.Function, threads_per_block: int, shared_bytes: int,
                      pipelined_mma: bool, carried_registers: int = 0) -> None:
        if self.asks_two_ctas(threads_per_block, shared_bytes, pipelined_mma, carried_registers):
            add_string_attribute(func, "nvvm.minctasm", "2")
        # As Triton: libdevice flushes float32 denormals (`nvvm-reflect-ftz`), so `exp2` is one
        # `ex2.approx.ftz.f32` instead of ex2 wrapped in denormal scaling (a compare and two
        # multiplies per element: attention's softmax spent 128 extra instructions a tile on it).
        module = func.module
        flag = module.add_metadata([llir.Constant(I32, 4), "nvvm-reflect-ftz", llir.Constant(I32, 1)])
        module.add_named_metadata("llvm.module.flags").add(flag)

    def _sreg(self, builder, name: str):
        return call_intrinsic(builder, f"llvm.nvvm.read.ptx.sreg.{name}", I32, [])

    def thread_id_x(self, builder):
        return self._sreg(builder, "tid.x")

    def program_id(self, builder, axis: int):
        return self._sreg(builder, "ctaid." + "xyz"[axis])

    def num_programs(self, builder, axis: int):
        return self._sreg(builder, "nctaid." + "xyz"[axis])

    def barrier(self, builder) -> None:
        # Back-to-back users of the shared scratch each fence it (one's closing barrier, the next
        # one's opening barrier): a barrier right after another adds nothing.
        last = builder.block.instructions[-1] if builder.block.instructions else None
        if isinstance(last, llir.CallInstr) and getattr(last.callee, "name", None) == "llvm.nvvm.barrier0":
            return
        call_intrinsic(builder, "llvm.nvvm.barrier0", llir.VoidType(), [])

    def user_barrier(self, builder) -> None:
        # Emitted even right after another barrier, and marked: `drop_unneeded_barriers` keeps it.
        call = call_intrinsic(builder, "llvm.nvvm.barrier0", llir.VoidType(), [])
        call.set_metadata(USER_BARRIER, builder.module.add_metadata([]))

    def shuffle_xor(self, builder, value_i32, lane_mask: int, lane_id):
        full = llir.Constant(I32, -1)
        return call_intrinsic(builder, "llvm.nvvm.shfl.sync.bfly.i32", I32,
                              [full, value_i32, llir.Constant(I32, lane_mask), llir.Constant(I32, 0x1F)])

    def warp_uniform(self, builder, value):
        # ptxas cannot tell that tid / 32 is warp-uniform; lane 0's copy through shfl.sync.idx is, so
        # what derives from it (wgmma descriptors, shared addresses) can live in uniform registers
        # instead of being moved there with R2UR before every wgmma.
        return call_intrinsic(builder, "llvm.nvvm.shfl.sync.idx.i32", I32,
                              [llir.Constant(I32, -1), value, llir.Constant(I32, 0), llir.Constant(I32, 0x1F)])

    # -- sm_80+: cp.async and ldmatrix (the pipelined mma.sync operands) --------------------------
    @property
    def supports_async_copy(self) -> bool:
        return self.arch >= 80

    def async_copy(self, builder, dst_shared, src_global, nbytes: int, pred) -> None:
        # .cg (bypass L1) exists for 16 bytes only; smaller copies use .ca. The predicate goes in as
        # `ignore-src` (zeros are written), so the copy needs no src-size select and compare.
        cache = "cg" if nbytes == 16 else "ca"
        ignore = builder.xor(pred, llir.Constant(llir.IntType(1), 1))
        dst = builder.ptrtoint(dst_shared, I32)
        src = builder.ptrtoint(src_global, llir.IntType(64))
        fnty = llir.FunctionType(llir.VoidType(), [I32, llir.IntType(64), llir.IntType(1)])
        builder.asm(fnty, f"cp.async.{cache}.shared.global [$0], [$1], {nbytes}, $2;", "r,l,b,~{memory}",
                    [dst, src, ignore], side_effect=True)

    def async_commit(self, builder) -> None:
        call_intrinsic(builder, "llvm.nvvm.cp.async.commit.group", llir.VoidType(), [])

    def async_wait(self, builder, pending: int) -> None:
        call_intrinsic(builder, "llvm.nvvm.cp.async.wait.group", llir.VoidType(), [llir.Constant(I32, pending)])

    @property
    def supports_store_matrix(self) -> bool:
        return self.arch >= 90

    def store_matrix(self, builder, ptr_shared, words, trans: bool) -> None:
        """sm_90 `stmatrix`: lane 8m + r gives the address of row r of matrix m, thread t's word m
        holds row t / 4, columns 2 (t % 4) and the next of matrix m (ldmatrix's inverse)."""
        regs = ", ".join(f"${i + 1}" for i in range(len(words)))
        text = f"stmatrix.sync.aligned.m8n8.x{len(words)}{'.trans' if trans else ''}.shared.b16 [$0], {{{regs}}};"
        address = builder.ptrtoint(ptr_shared, I32)
        inline_ptx(builder, llir.VoidType(), text, ",".join(["r"] * (len(words) + 1)) + ",~{memory}",
                   [address, *words])

    def load_matrix(self, builder, ptr_shared, count: int, trans: bool):
        name = f"llvm.nvvm.ldmatrix.sync.aligned.m8n8.x{count}.{'trans.' if trans else ''}b16"
        if count == 1:
            return [call_intrinsic(builder, name, I32, [ptr_shared])]
        res = call_intrinsic(builder, name, llir.LiteralStructType([I32] * count), [ptr_shared])
        return [builder.extract_value(res, i) for i in range(count)]

    # -- global memory with Triton's qualifiers, in inline PTX (memory_ptx.py) ---------------------
    def global_load(self, builder, ptr, ty, align, cache="none", evict="normal", volatile=False):
        value = memory_ptx.load(self, builder, ptr, ty, cache, evict, volatile)
        return value if value is not None else super().global_load(builder, ptr, ty, align)

    def predicated_global_load(self, builder, ptr, ty, align, pred, other, cache="none", evict="normal",
                               volatile=False):
        return memory_ptx.load(self, builder, ptr, ty, cache, evict, volatile, pred, other)

    def global_store(self, builder, value, ptr, align, cache="none", evict="normal") -> None:
        if not memory_ptx.store(self, builder, value, ptr, cache, evict):
            super().global_store(builder, value, ptr, align)

    def predicated_global_store(self, builder, value, ptr, align, pred, cache="none", evict="normal") -> bool:
        return memory_ptx.store(self, builder, value, ptr, cache, evict, pred)

    def atomic_rmw(self, builder, kind, ptr, value, sem, scope, elem):
        old = memory_ptx.atomic_rmw(self, builder, kind, ptr, value, sem, scope, elem)
        return old if old is not None else super().atomic_rmw(builder, kind, ptr, value, sem, scope, elem)

    predicated_vector_atomics = True   # `@p atom...v4`

    def vector_atomic_width(self, kind, elem):
        return memory_ptx.vector_atomic_width(self, kind, elem)

    def vector_atomic_rmw(self, builder, kind, ptr, values, sem, scope, elem, pred=None):
        return memory_ptx.vector_atomic_rmw(self, builder, kind, ptr, values, sem, scope, elem, pred)

    def atomic_cas(self, builder, ptr, cmp, value, sem, scope):
        old = memory_ptx.atomic_cas(self, builder, ptr, cmp, value, sem, scope)
        return old if old is not None else super().atomic_cas(builder, ptr, cmp, value, sem, scope)

    def atomic_write(self, builder, value, ptr, scope):
        if not memory_ptx.atomic_write(self, builder, value, ptr, scope):
            super().atomic_write(builder, value, ptr, scope)

    def atomic_fence(self, builder, sem, scope):
        if not memory_ptx.atomic_fence(self, builder, sem, scope):
            super().atomic_fence(builder, sem, scope)

    def atomic_read(self, builder, ptr, ty, sem, scope):
        value = memory_ptx.atomic_read(self, builder, ptr, ty, sem, scope)
        return value if value is not None else super().atomic_read(builder, ptr, ty, sem, scope)

    def assert_fail(self, builder: llir.IRBuilder, message: str, file: str, line: int, function: str) -> None:
        """CUDA's `__assertfail` system call (what `assert()` in CUDA C calls): the driver prints
        `file:line: function: block [..], thread [..] Assertion `message` failed.` and the launch
        fails with "device-side assert triggered"; a trap follows in case it returns."""
        generic = llir.PointerType()
        strings = [self._global_string(builder, text, "assert_text") for text in (message, file, function)]
        assertfail = builder.module.globals.get("__assertfail") or llir.Function(
            builder.module, llir.FunctionType(llir.VoidType(), [generic, generic, I32, generic, llir.IntType(64)]),
            "__assertfail")
        builder.call(assertfail, [strings[0], strings[1], llir.Constant(I32, int(line or 0)), strings[2],
                                  llir.Constant(llir.IntType(64), 1)])
        self.trap(builder)

    @staticmethod
    def _global_string(builder: llir.IRBuilder, text: str, name: str):
        """A NUL-terminated constant in global memory, as a generic pointer."""
        module = builder.module
        data = bytearray(text.encode("utf-8")) + b"\0"
        arr_ty = llir.ArrayType(llir.IntType(8), len(data))
        glob = llir.GlobalVariable(module, arr_ty, module.get_unique_name(name), addrspace=1)
        glob.global_constant = True
        glob.linkage = "internal"
        glob.initializer = llir.Constant(arr_ty, data)
        return builder.addrspacecast(glob, llir.PointerType())

    def printf(self, builder: llir.IRBuilder, fmt: str, args) -> None:
        """CUDA's device printf: `vprintf(format, packed arguments)`, the arguments laid out as a
        struct in a stack buffer (allocated in the entry block, so loops do not grow the stack)."""
        module = builder.module
        generic = llir.PointerType()
        fmt_ptr = self._global_string(builder, fmt, "printf_format")
        struct_ty = llir.LiteralStructType([a.type for a in args])
        entry = builder.function.entry_basic_block
        at_entry = llir.IRBuilder(entry)
        at_entry.position_at_start(entry)
        buffer = at_entry.alloca(struct_ty)
        buffer.type = llir.PointerType()   # opaque, so fields are addressed by gep over struct_ty
        for i, a in enumerate(args):
            builder.store(a, builder.gep(buffer, [llir.Constant(I32, 0), llir.Constant(I32, i)],
                                         source_etype=struct_ty))
        vprintf = module.globals.get("vprintf") or llir.Function(
            module, llir.FunctionType(I32, [generic, generic]), "vprintf")
        builder.call(vprintf, [fmt_ptr, buffer])

    def encode_float(self, builder, value, name: str, rounding: str):
        """bf16 to nearest even on sm_80+: LLVM's `fptrunc` to bfloat, which NVPTX emits as
        `cvt.rn.bf16.f32` (one instruction; the portable integer rounding is seven), as Triton rounds.
        A NaN becomes the canonical bf16 NaN (0x7FFF)."""
        if name == "bf16" and rounding == "rtne" and self.arch >= 80 and str(value.type) == "float":
            return builder.bitcast(builder.fptrunc(value, _BFLOAT), llir.IntType(16))
        return None

    def decode_float(self, builder, value, name: str):
        """bf16 on sm_90: LLVM's `fpext` from bfloat, which NVPTX emits as `cvt.f32.bf16` (one
        instruction, as Triton; the portable decoding is a zero-extension and a shift, two)."""
        if name == "bf16" and self.arch >= 90 and str(value.type) == "i16":
            return builder.fpext(builder.bitcast(value, _BFLOAT), llir.FloatType())
        return None

    def storage_float_arith(self, builder, op_name: str, args, name: str, contract: bool):
        """bf16 add/sub/mul on sm_90: LLVM's bfloat ops, `add.rn.bf16` / `sub.rn.bf16` / `mul.rn.bf16`
        (packed in pairs, fused into `fma.rn.bf16` under fp_fusion), as Triton's bf16 arithmetic."""
        if name != "bf16" or self.arch < 90:
            return None
        lhs, rhs = (builder.bitcast(a, _BFLOAT) for a in args)
        out = {"arith.addf": builder.fadd, "arith.subf": builder.fsub, "arith.mulf": builder.fmul}[op_name](lhs, rhs)
        if contract:
            out.flags.append("contract")
        return builder.bitcast(out, llir.IntType(16))

    def math_symbol(self, op_name: str, type_) -> Optional[Tuple[str, object]]:
        suffix = type_suffix(type_)
        if suffix == "f32" and op_name in _TRITON_FAST_F32:
            return _TRITON_FAST_F32[op_name]
        if op_name in _INTRINSICS and suffix in ("f32", "f64", "f16"):
            return "intrinsic", f"{_INTRINSICS[op_name]}.{suffix}"
        if op_name in _LIBDEVICE and suffix in ("f32", "f64"):
            base = _LIBDEVICE[op_name]
            return "libcall", f"__nv_{base}{'f' if suffix == 'f32' else ''}"
        return None
