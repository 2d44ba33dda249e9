"""`HIPBackend`: TTIR -> TTGIR -> LLVM IR -> AMDGCN -> hsaco, launched with `HipLauncher`."""
from __future__ import annotations

import functools
from dataclasses import dataclass

from tilejit.backends import BaseOptions, GPUTarget
from tilejit.gpu.backend import GPUBackend


@dataclass(frozen=True)
class HIPOptions(BaseOptions):
    waves_per_eu: int = 0
    # The fp32 `tl.dot` input precisions (Triton's HIP list; CDNA3 adds "tf32", `HIPBackend.parse_options`):
    # without "tf32" an fp32 dot defaults to "ieee".
    allowed_dot_input_precisions: tuple = ("ieee", "bf16x3", "bf16x6")


class HIPBackend(GPUBackend):
    name = "hip"
    api_version = 2
    options_class = HIPOptions

    @staticmethod
    def supports_target(target) -> bool:
        target = GPUTarget.parse(target)
        return target.backend == "hip" and isinstance(target.arch, str) and target.arch.startswith("gfx")

    def _tool_versions(self) -> str:
        from . import toolchain
        lld = toolchain.find_lld()
        lld_version = toolchain.lld_version(lld) if lld else None
        return f"lld{'.'.join(map(str, lld_version)) if lld_version else 'none'}"

    def parse_options(self, options=None):
        """As GPUBackend's; on gfx942 (CDNA3, xf32 MFMA) "tf32" is allowed too, as Triton does."""
        if not isinstance(options, HIPOptions):
            options = dict(options or {})
            if self.target.arch == "gfx942" and "allowed_dot_input_precisions" not in options:
                options["allowed_dot_input_precisions"] = tuple(sorted(HIPOptions.allowed_dot_input_precisions
                                                                       + ("tf32",)))
        return super().parse_options(options)

    @functools.cached_property
    def isa(self):
        from .isa import AmdISA
        return AmdISA(self.target.arch, self.target.warp_size)

    @classmethod
    def encoding_kinds(cls) -> dict:
        from .matrix_cores import ENCODING_KINDS
        return ENCODING_KINDS

    def add_stages(self, stages: dict, options) -> None:
        from . import toolchain
        from tilejit.gpu.ttgir import ttgir_passes
        arch = self.target.arch
        # The core's layout passes; `tt.dot` takes MFMA/WMMA where `AmdISA.matrix_units` allows.
        self.add_gpu_stages(stages, options, ttgir_passes(self.layout_config(options)))

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

    def make_launcher(self, compiled_kernel):
        from tilejit.runtime.launch_abi import runtime_signature
        from .launcher import HipLauncher
        md = compiled_kernel.metadata
        return HipLauncher(compiled_kernel.asm["hsaco"], md["name"], runtime_signature(md), md["num_warps"],
                           md.get("shared", 0))

    # ---- device side: the HIP driver (the delegation is GPUBackend's) --------------------------
    @classmethod
    def _driver(cls):
        from .driver import HipDriver
        return HipDriver()

    @classmethod
    def _driver_class(cls):
        from .driver import HipDriver
        return HipDriver

    @classmethod
    def _toolchain(cls):
        from . import toolchain
        return toolchain

    @classmethod
    def default_target(cls):
        return GPUTarget("hip", "gfx942", 64)
