"""`HIPBackend`: TTIR -> TTGIR -> LLVM IR -> AMDGCN -> hsaco, launched with `HipLauncher`."""
from __future__ import annotations

import functools
from dataclasses import dataclass

from tilejit.backends import BaseBackend, BaseOptions, GPUTarget


@dataclass(frozen=True)
class HIPOptions(BaseOptions):
    waves_per_eu: int = 0


class HIPBackend(BaseBackend):
    name = "hip"
    options_class = HIPOptions

    @staticmethod
    def supports_target(target) -> bool:
        target = GPUTarget.parse(target)
        return target.backend == "hip" and isinstance(target.arch, str) and target.arch.startswith("gfx")

    def hash(self) -> str:
        import llvmlite.binding as llvm
        from . import toolchain
        lld = toolchain.find_lld()
        lld_version = toolchain.lld_version(lld) if lld else None
        return (f"{super().hash()}:llvm{'.'.join(map(str, llvm.llvm_version_info))}:"
                f"lld{'.'.join(map(str, lld_version)) if lld_version else 'none'}")

    @functools.cached_property
    def isa(self):
        from .isa import AmdISA
        return AmdISA(self.target.arch, self.target.warp_size)

    def add_stages(self, stages: dict, options) -> None:
        from tilejit.gpu.stages import llir_stage
        from . import toolchain
        arch = self.target.arch
        stages["ttgir"] = lambda src, md: self._ttgir(src, md, options)
        stages["llir"] = lambda src, md: llir_stage(src, md, options, self.isa)

        def amdgcn(src, md):
            # One O3 run gives the assembly and the hsaco; the hsaco is kept for the next stage.
            artifacts = toolchain.compile_llir(src, arch)
            md["_hsaco"] = artifacts.hsaco
            return artifacts.amdgcn

        def hsaco(src, md):
            binary = md.pop("_hsaco", None)
            return binary if binary is not None else toolchain.link_hsaco(toolchain.llir_to_object(src, arch))
        stages["amdgcn"] = amdgcn
        stages["hsaco"] = hsaco

    def _ttgir(self, module, metadata: dict, options):
        """The shared TTGIR passes, told the arch so that `tt.dot` can use MFMA/WMMA (amd_layouts.py)."""
        from tilejit import ir
        from tilejit.gpu.ttgir import GPUConfig, make_ttgir
        if isinstance(module, str):
            module = ir.parse_module(module)
        cfg = GPUConfig(options.num_warps, self.target.warp_size, options.num_stages, 0, amd_arch=self.target.arch)
        metadata.setdefault("num_warps", options.num_warps)
        metadata.setdefault("num_stages", options.num_stages)
        return make_ttgir(module, cfg)

    def make_launcher(self, compiled_kernel):
        from tilejit.gpu.stages import runtime_signature
        from .launcher import HipLauncher
        md = compiled_kernel.metadata
        return HipLauncher(compiled_kernel.asm["hsaco"], md["name"], runtime_signature(md), md["num_warps"],
                           md.get("shared", 0))

    @classmethod
    def _driver(cls):
        from .driver import HipDriver
        return HipDriver()

    @classmethod
    def is_active(cls) -> bool:
        try:
            return cls._driver().is_active()
        except Exception:   # no hip-python / no device: simply not active
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
        from .driver import HipDriver
        return HipDriver.owns(arg)

    @classmethod
    def get_benchmarker(cls):
        return cls._driver().get_benchmarker()

    @classmethod
    def default_target(cls):
        return GPUTarget("hip", "gfx942", 64)

    @classmethod
    def toolchain_status(cls) -> dict:
        from . import toolchain
        return toolchain.toolchain_status()
