"""The AMDGPU table for the shared GPU lowering: workitem ids, s_barrier, ds_bpermute, LLVM math,
tilejit's own math library (device_math.py: f64, and accurate f32 via f64) and buffered printf (printf_runtime.py)."""
from __future__ import annotations

from typing import Optional, Tuple

import llvmlite.ir as llir

from tilejit.gpu.isa import I32, add_string_attribute, call_intrinsic, type_suffix
from tilejit.gpu.target import LLVM_ORDERING, TargetDescription

from tilejit_amd import device_math
from tilejit_amd.printf_runtime import emit_printf

# AMDGPU lowers these LLVM intrinsics itself (exp2/log2/sqrt are native, exp/log/sin/cos are
# expanded by the backend with full f32 accuracy). The rest use the core's portable expansions.
_INTRINSICS = {
    "math.exp": "llvm.exp", "math.exp2": "llvm.exp2", "math.log": "llvm.log", "math.log2": "llvm.log2",
    "math.log10": "llvm.log10", "math.sin": "llvm.sin", "math.cos": "llvm.cos",
    "math.sqrt": "llvm.sqrt", "tt.precise_sqrt": "llvm.sqrt", "math.absf": "llvm.fabs",
    "math.floor": "llvm.floor", "math.ceil": "llvm.ceil", "math.trunc": "llvm.trunc",
    "math.round": "llvm.round", "math.fma": "llvm.fma", "math.copysign": "llvm.copysign",
    "arith.maxnumf": "llvm.maxnum", "arith.minnumf": "llvm.minnum",
    "arith.maximumf": "llvm.maximum", "arith.minimumf": "llvm.minimum",
}


# Triton's atomic scopes as AMDGPU sync scopes, as Triton's AMD backend maps them. Without one an
# atomic is system-scoped: LLVM then assumes fine-grained (host-coherent) memory and adds floats with
# a compare-and-swap loop (gfx942: `global_atomic_cmpswap` instead of `global_atomic_add_f32`).
_SYNC_SCOPES = {"cta": 'syncscope("workgroup") ', "gpu": 'syncscope("agent") ', "sys": ""}


class AmdISA(TargetDescription):
    """The AMD GPU target description: LDS size and matrix cores per arch (targets.py,
    matrix_cores.py), and the AMDGPU hooks."""
    triple = "amdgcn-amd-amdhsa"
    data_layout = ""   # the toolchain's target machine supplies it

    @property
    def inline_asm_problem(self):
        # LLVM parses inline assembly again when it writes the object file, and llvmlite's LLVM has
        # no AMDGPU assembly parser (only the host's): it would abort the process.
        return ("inline GCN assembly cannot be assembled here: llvmlite's LLVM has no AMDGPU assembly "
                "parser, which writing the hsaco needs")

    @property
    def shared_memory(self) -> int:
        from .targets import lds_limit
        return lds_limit(self.arch)

    @property
    def matrix_units(self):
        from .matrix_cores import AmdMatrixCores
        return (AmdMatrixCores(self.arch),)

    @property
    def encoding_kinds(self):
        from .matrix_cores import ENCODING_KINDS
        return ENCODING_KINDS

    @property
    def dot_lowerings(self):
        from .matrix_core_dot import lower_amd_dot
        from .matrix_cores import AmdMatrixEncoding
        return {AmdMatrixEncoding: lower_amd_dot}

    def atomic_ordering(self, sem: str, scope: str) -> str:
        return _SYNC_SCOPES.get(scope, "") + LLVM_ORDERING[sem]

    # Where LLVM adds a <2 x half> atomically with one instruction (global_atomic_pk_add_f16, the
    # old values returned); elsewhere it expands the pair into a compare-and-swap loop, no better
    # than one atomic an element. Checked with llvmlite's LLVM 22 (tests/amd/test_amd_atomics.py).
    _PACKED_F16_ATOMICS = ("gfx942", "gfx950", "gfx1201")

    def vector_atomic_width(self, kind: str, elem: str) -> int:
        return 2 if kind == "fadd" and elem == "f16" and self.arch in self._PACKED_F16_ATOMICS else 1

    def vector_atomic_rmw(self, builder, kind, ptr, values, sem, scope, elem, pred=None):
        """Two f16 adds as one `atomicrmw fadd <2 x half>` (Triton packs fp16 atomics on AMD the
        same way). AMDGPU has no predicated atomics: the core branches around the call
        (`predicated_vector_atomics` is False), so `pred` is always None here."""
        if len(values) != 2 or self.vector_atomic_width(kind, elem) < 2:
            return None
        pair_type = llir.VectorType(llir.HalfType(), 2)
        pair = llir.Constant(pair_type, None)
        for i, value in enumerate(values):
            pair = builder.insert_element(pair, value, llir.Constant(I32, i))
        old = builder.atomic_rmw("fadd", ptr, pair, self.atomic_ordering(sem, scope))
        return [builder.extract_element(old, llir.Constant(I32, i)) for i in range(2)]

    def mark_kernel(self, func: llir.Function, threads_per_block: int) -> None:
        func.calling_convention = "amdgpu_kernel"
        add_string_attribute(func, "amdgpu-flat-work-group-size", f"1,{threads_per_block}")

    def thread_id_x(self, builder):
        return call_intrinsic(builder, "llvm.amdgcn.workitem.id.x", I32, [])

    def program_id(self, builder, axis: int):
        return call_intrinsic(builder, f"llvm.amdgcn.workgroup.id.{'xyz'[axis]}", I32, [])

    def num_programs(self, builder, axis: int):
        # The dispatch packet holds grid_size (work-items, u32 at 12 + 4*axis) and the workgroup
        # size (u16 at 4 + 2*axis); the number of workgroups is their quotient.
        i8ptr4 = llir.PointerType(addrspace=4)
        packet = call_intrinsic(builder, "llvm.amdgcn.dispatch.ptr", i8ptr4, [])
        grid_ptr = builder.gep(packet, [llir.Constant(I32, 12 + 4 * axis)], source_etype=llir.IntType(8))
        grid = builder.load(grid_ptr, typ=I32, align=4)
        wg_ptr = builder.gep(packet, [llir.Constant(I32, 4 + 2 * axis)], source_etype=llir.IntType(8))
        wg = builder.zext(builder.load(wg_ptr, typ=llir.IntType(16), align=2), I32)
        return builder.udiv(grid, wg)

    def barrier(self, builder) -> None:
        builder.fence("release", "workgroup")
        call_intrinsic(builder, "llvm.amdgcn.s.barrier", llir.VoidType(), [])
        builder.fence("acquire", "workgroup")

    def shuffle_xor(self, builder, value_i32, lane_mask: int, lane_id):
        # ds_bpermute reads the value of the lane whose byte address (lane * 4) is given.
        partner = builder.xor(lane_id, llir.Constant(I32, lane_mask))
        addr = builder.shl(partner, llir.Constant(I32, 2))
        return call_intrinsic(builder, "llvm.amdgcn.ds.bpermute", I32, [addr, value_i32])

    def math_symbol(self, op_name: str, type_) -> Optional[Tuple[str, str]]:
        suffix = type_suffix(type_)
        if suffix in ("f64", "f32"):
            # AMDGPU has no f64 expansion of exp/log/sin/... : tilejit's device math library
            # (device_math.py) defines them, linked in by the toolchain like ocml would be. For
            # f32 it covers the ops AMDGPU has no accurate lowering of (atan, sinh, erf, ...),
            # computed in f64; f32 exp/log/sin/cos/sqrt stay LLVM intrinsics (accurate, cheap).
            symbol = device_math.symbol_for(op_name, suffix)
            if symbol is not None:
                return "libcall", symbol
        if op_name in _INTRINSICS and suffix in ("f32", "f64", "f16"):
            return "intrinsic", f"{_INTRINSICS[op_name]}.{suffix}"
        return None

    def printf(self, builder: llir.IRBuilder, fmt: str, args) -> None:
        """`printf(format, args...)` (variadic), which LLVM's AMDGPU printf runtime binding rewrites
        into stores to the buffered-printf buffer (see printf_runtime.py)."""
        emit_printf(builder, fmt, args)
