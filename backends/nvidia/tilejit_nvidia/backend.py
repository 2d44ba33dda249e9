"""`CUDABackend`: TTIR -> TTGIR -> LLVM IR -> PTX -> cubin, launched with `CudaLauncher`."""
from __future__ import annotations

import functools
from dataclasses import dataclass

from tilejit.backends import BaseBackend, BaseOptions, GPUTarget
from tilejit.backends.errors import OptionsError


@dataclass(frozen=True)
class CUDAOptions(BaseOptions):
    maxnreg: int = 0            # 0: let ptxas choose
    enable_fp_fusion: bool = True
    ptx_features: str = ""      # extra LLVM target features, e.g. "+ptx85"

    def __post_init__(self):
        super().__post_init__()
        if self.maxnreg < 0:
            raise OptionsError(f"maxnreg must not be negative, got {self.maxnreg}")


class CUDABackend(BaseBackend):
    name = "cuda"
    options_class = CUDAOptions

    @staticmethod
    def supports_target(target) -> bool:
        target = GPUTarget.parse(target)
        return target.backend == "cuda" and isinstance(target.arch, int)

    def hash(self) -> str:
        import llvmlite.binding as llvm
        from . import toolchain
        ptxas = toolchain.find_ptxas_or_none()
        version = ".".join(map(str, toolchain.ptxas_version(ptxas))) if ptxas else "no-ptxas"
        return f"{super().hash()}:llvm{'.'.join(map(str, llvm.llvm_version_info))}:ptxas{version}"

    @functools.cached_property
    def isa(self):
        from .isa import NvidiaISA
        return NvidiaISA(self.target.arch, self.target.warp_size)

    def add_stages(self, stages: dict, options) -> None:
        from tilejit.gpu.stages import llir_stage, ttgir_stage
        from . import toolchain
        arch = self.target.arch
        mma = 2 if arch >= 80 else 0
        stages["ttgir"] = lambda src, md: ttgir_stage(src, md, options, self.target.warp_size, mma)
        stages["llir"] = lambda src, md: llir_stage(src, md, options, self.isa)
        stages["ptx"] = lambda src, md: toolchain.llir_to_ptx(src, arch, options.ptx_features or None)
        stages["cubin"] = lambda src, md: toolchain.ptx_to_cubin(src, arch)

    def make_launcher(self, compiled_kernel):
        from tilejit.gpu.stages import runtime_signature
        from .launcher import CudaLauncher
        md = compiled_kernel.metadata
        return CudaLauncher(compiled_kernel.asm["cubin"], md["name"], runtime_signature(md), md["num_warps"],
                            md.get("shared", 0), compiled_kernel=compiled_kernel)

    # ---- device side: the CUDA driver ----------------------------------------------------------
    @classmethod
    def _driver(cls):
        from .driver import get_driver
        return get_driver()

    @classmethod
    def is_active(cls) -> bool:
        try:
            return cls._driver().is_active()
        except Exception:   # no cuda-bindings / no device: simply not active
            return False

    @classmethod
    def inactive_reason(cls) -> str:
        try:
            return cls._driver().inactive_reason() or ""
        except Exception as exc:
            return str(exc)

    @classmethod
    def get_current_target(cls):
        return cls._driver().get_current_target()

    @classmethod
    def owns(cls, arg) -> bool:
        from .driver import CudaDriver
        return CudaDriver.owns(arg)

    @classmethod
    def get_benchmarker(cls):
        return cls._driver().get_benchmarker()

    @classmethod
    def default_target(cls):
        return GPUTarget("cuda", 90, 32)

    @classmethod
    def toolchain_status(cls) -> dict:
        from . import toolchain
        return toolchain.toolchain_status()
