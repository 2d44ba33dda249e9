"""`GPUBackend`: what the GPU backends share.

Each drives the same pipeline (TTIR -> TTGIR -> LLVM IR, `stages.py`) with its own TTGIR pass list
(built in its `add_stages`) and its own target description (`self.isa`, a `TargetDescription`); each
talks to its device
through a driver object with the same methods (`is_active`, `inactive_reason`, `get_current_target`,
`owns`, `get_benchmarker`) and to their tools through a `toolchain` module with `toolchain_status()`.
A subclass names its driver and toolchain and adds only its own stages, options and launcher.
"""
from __future__ import annotations

from tilejit.backends import BaseBackend


class GPUBackend(BaseBackend):
    """A backend compiled through TTGIR and LLVM for a GPU driven by `_driver()`."""

    # ---- what each subclass provides -----------------------------------------------------------
    @classmethod
    def _driver(cls):  # pragma: no cover - every subclass overrides
        raise NotImplementedError

    @classmethod
    def _driver_class(cls):  # pragma: no cover - every subclass overrides
        """The driver's class (its static `owns(arg)` answers without a device)."""
        raise NotImplementedError

    @classmethod
    def _toolchain(cls):  # pragma: no cover - every subclass overrides
        """The backend's toolchain module (with `toolchain_status()`)."""
        raise NotImplementedError

    def _tool_versions(self) -> str:
        """The versions of the external tools whose output lands in the cache ("" when none)."""
        return ""

    # ---- shared compilation pieces -------------------------------------------------------------
    def hash(self) -> str:
        import llvmlite.binding as llvm
        tools = self._tool_versions()
        return f"{super().hash()}:llvm{'.'.join(map(str, llvm.llvm_version_info))}" + (f":{tools}" if tools else "")

    def layout_config(self, options):
        """The target-neutral passes' view of this compilation (its description and warps)."""
        from .ttgir import GPUConfig
        return GPUConfig(options.num_warps, self.isa)

    def add_gpu_stages(self, stages: dict, options, ttgir_passes: list) -> None:
        """The `ttgir` stage running this backend's `ttgir_passes`, and the `llir` stage."""
        from .stages import llir_stage, ttgir_stage
        stages["ttgir"] = lambda src, md: ttgir_stage(src, md, options, self.isa, ttgir_passes)
        stages["llir"] = lambda src, md: llir_stage(src, md, options, self.isa)

    def parse_options(self, options=None):
        """As BaseBackend's, and num_warps must fit the target (a power of two, <= 1024 threads)."""
        from tilejit.backends.errors import OptionsError
        parsed = super().parse_options(options)
        limit = self.isa.max_num_warps
        if parsed.num_warps > limit:
            raise OptionsError(f"num_warps must be a power of two no larger than {limit} on {self.target} "
                               f"({limit * self.target.warp_size} threads), got {parsed.num_warps}")
        return parsed

    # ---- device side: delegated to the driver --------------------------------------------------
    @classmethod
    def is_active(cls) -> bool:
        try:
            return cls._driver().is_active()
        except Exception:   # no vendor bindings / no device: simply not active
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
        return cls._driver_class().owns(arg)

    @classmethod
    def get_benchmarker(cls):
        return cls._driver().get_benchmarker()

    @classmethod
    def toolchain_status(cls) -> dict:
        return cls._toolchain().toolchain_status()
