"""`CUDABackend`: TTIR -> TTGIR -> LLVM IR -> PTX -> cubin, launched with `CudaLauncher`."""
from __future__ import annotations

import functools
from dataclasses import dataclass

from tilejit.backends import BaseOptions, GPUTarget
from tilejit.backends.errors import OptionsError
from tilejit.compiler import PureStage
from tilejit.gpu.backend import GPUBackend


@dataclass(frozen=True)
class CUDAOptions(BaseOptions):
    maxnreg: int = 0            # registers a thread may use (`.maxnreg`, as Triton's); 0: ptxas chooses
    enable_fp_fusion: bool = True
    ptx_features: str = ""      # extra LLVM target features, e.g. "+ptx85"
    # fp16/bf16 min/max descriptor reductions: Triton takes them where its TMA reduces them natively
    # (sm_90 and later, `CUDABackend.parse_options`) and refuses them elsewhere
    descriptor_minmax_16bit: bool = False

    def __post_init__(self):
        super().__post_init__()
        if self.maxnreg < 0:
            raise OptionsError(f"maxnreg must not be negative, got {self.maxnreg}")


class CUDABackend(GPUBackend):
    name = "cuda"
    api_version = 2
    options_class = CUDAOptions

    @staticmethod
    def supports_target(target) -> bool:
        target = GPUTarget.parse(target)
        return target.backend == "cuda" and isinstance(target.arch, int)

    def _tool_versions(self) -> str:
        from . import toolchain
        ptxas = toolchain.find_ptxas_or_none()
        return "ptxas" + (".".join(map(str, toolchain.ptxas_version(ptxas))) if ptxas else "no-ptxas")

    def parse_options(self, options=None):
        """As GPUBackend's; sm_90 and later take fp16/bf16 descriptor min/max, as Triton does."""
        if not isinstance(options, CUDAOptions):
            options = dict(options or {})
            options.setdefault("descriptor_minmax_16bit", self.target.arch >= 90)
        return super().parse_options(options)

    @functools.cached_property
    def isa(self):
        from .isa import NvidiaISA
        return NvidiaISA(self.target.arch, self.target.warp_size)

    @classmethod
    def encoding_kinds(cls) -> dict:
        from .layouts import ENCODING_KINDS
        return ENCODING_KINDS

    def add_stages(self, stages: dict, options) -> None:
        from . import toolchain
        from tilejit.gpu.ttgir import ttgir_passes
        from .pipeline import Pipeline
        arch = self.target.arch
        # The core's layout passes (dots take the matrix units `NvidiaISA.matrix_units` lists), then,
        # where cp.async exists, the multi-buffering of the loads that feed the dots.
        passes = ttgir_passes(self.layout_config(options))
        if self.isa.supports_async_copy:
            passes.append(Pipeline(options.num_stages, self.isa.shared_memory, options.num_warps))
        self.add_gpu_stages(stages, options, passes)
        # Pure functions of their text: several compilations (the autotuner's) may run them at once.
        stages["ptx"] = PureStage(toolchain.llir_to_ptx, arch, options.ptx_features or None, True, options.maxnreg)
        stages["cubin"] = PureStage(toolchain.ptx_to_cubin, arch)

    def derived_asm(self, name: str, asm) -> str | None:
        """`asm["sass"]`: the cubin disassembled by cuobjdump, as Triton's (its tests read it)."""
        if name != "sass" or "cubin" not in asm:
            return None
        from .disassembly import disassemble_cubin
        return disassemble_cubin(asm["cubin"])

    def make_launcher(self, compiled_kernel):
        from tilejit.runtime.launch_abi import runtime_signature
        from .launcher import CudaLauncher
        md = compiled_kernel.metadata
        return CudaLauncher(compiled_kernel.asm["cubin"], md["name"], runtime_signature(md), md["num_warps"],
                            md.get("shared", 0), compiled_kernel=compiled_kernel)

    # ---- device side: the CUDA driver (the delegation is GPUBackend's) -------------------------
    @classmethod
    def _driver(cls):
        from .driver import get_driver
        return get_driver()

    @classmethod
    def _driver_class(cls):
        from .driver import CudaDriver
        return CudaDriver

    @classmethod
    def _toolchain(cls):
        from . import toolchain
        return toolchain

    @classmethod
    def default_target(cls):
        return GPUTarget("cuda", 90, 32)
