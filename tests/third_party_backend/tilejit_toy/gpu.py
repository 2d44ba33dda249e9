"""`toygpu`: a third-party GPU backend with a matrix unit, written against tilejit's GPU core only.

Its GPU is imaginary: 32-lane warps, 64 KiB of shared memory, and one warp-level matrix instruction,
`toy.mma.16x16x16.f16` (f32 D = f16 A x f16 B + f32 C). The backend says so as data (`ToyGPU`,
a `TargetDescription`) and gives the hooks the lowering needs (thread ids, barriers, shuffles as
calls to `toy.*` functions). The core's TTGIR passes then give fitting `tt.dot`s the instruction's
layout and lower them to one `toy.mma` call per (C tile, K step); nothing in tilejit knows this
backend. Its last stage is the LLVM IR text (`llir`); its launcher records launches.
"""
from __future__ import annotations

import llvmlite.ir as llir

from tilejit.backends import BaseOptions, GPUTarget, Launcher
from tilejit.gpu.backend import GPUBackend
from tilejit.gpu.isa import I32, call_intrinsic
from tilejit.gpu.matrix import MatrixInstruction, matrix_layout_kinds
from tilejit.gpu.target import TargetDescription

TOY_GPU_TARGET = GPUTarget("toygpu", "m1", 32)

# Lane l holds A row l % 16, k = 8 * (l // 16) + register; B column l % 16 likewise; the result
# D[m][n] sits in lane n + 16 * (m // 8), register m % 8.
TOY_MMA = MatrixInstruction(
    name="toy_mma_16x16x16_f16", kind="toy_mma", operand="f16", accumulator="f32", m=16, n=16, k=16,
    warp_size=32,
    result=(("register", 0, 3), ("lane", 1, 4), ("lane", 0, 1)),
    a=(("register", 1, 3), ("lane", 0, 4), ("lane", 1, 1)),
    b=(("register", 0, 3), ("lane", 1, 4), ("lane", 0, 1)),
    intrinsic="toy.mma.16x16x16.f16")

LAUNCHES: list = []


class ToyGPU(TargetDescription):
    """The toy GPU as data (warp size, shared memory, its matrix instruction) plus hooks."""

    @property
    def shared_memory(self) -> int:
        return 64 * 1024

    @property
    def matrix_units(self):
        return (TOY_MMA,)

    @property
    def encoding_kinds(self):
        return matrix_layout_kinds([TOY_MMA])

    def mark_kernel(self, func: llir.Function, threads_per_block: int) -> None:
        pass

    def _call(self, builder, name, args=()):
        return call_intrinsic(builder, name, I32, list(args))

    def thread_id_x(self, builder):
        return self._call(builder, "toy.tid.x")

    def program_id(self, builder, axis: int):
        return self._call(builder, f"toy.ctaid.{'xyz'[axis]}")

    def num_programs(self, builder, axis: int):
        return self._call(builder, f"toy.nctaid.{'xyz'[axis]}")

    def barrier(self, builder) -> None:
        call_intrinsic(builder, "toy.barrier", llir.VoidType(), [])

    def shuffle_xor(self, builder, value_i32, lane_mask: int, lane_id):
        return self._call(builder, "toy.shfl.xor", [value_i32, llir.Constant(I32, lane_mask)])

    def math_symbol(self, op_name: str, type_):
        return None   # the core's portable expansions


class ToyGPULauncher(Launcher):
    def launch(self, grid, args, stream):
        LAUNCHES.append((self.kernel_name, grid, len(args)))


class ToyGPUBackend(GPUBackend):
    name = "toygpu"
    api_version = 2
    options_class = BaseOptions

    @staticmethod
    def supports_target(target) -> bool:
        return GPUTarget.parse(target).backend == "toygpu"

    @property
    def isa(self):
        return ToyGPU(self.target.arch, self.target.warp_size)

    @classmethod
    def encoding_kinds(cls) -> dict:
        return matrix_layout_kinds([TOY_MMA])

    def add_stages(self, stages: dict, options) -> None:
        from tilejit.gpu.ttgir import ttgir_passes
        self.add_gpu_stages(stages, options, ttgir_passes(self.layout_config(options)))

    def make_launcher(self, compiled_kernel):
        return ToyGPULauncher(compiled_kernel)

    @classmethod
    def is_active(cls) -> bool:
        return False

    @classmethod
    def inactive_reason(cls) -> str:
        return "the toy GPU exists only on paper; choose it explicitly with target='toygpu'"

    @classmethod
    def get_current_target(cls):
        return TOY_GPU_TARGET

    @classmethod
    def default_target(cls):
        return TOY_GPU_TARGET

    @classmethod
    def owns(cls, arg) -> bool:
        return False

    @classmethod
    def toolchain_status(cls) -> dict:
        return {"llvmlite": "LLVM IR text only"}
