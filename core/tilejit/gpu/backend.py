"""`GPUBackend`: what the NVIDIA and AMD backends share.

Both drive the same pipeline (TTIR -> TTGIR -> LLVM IR, `stages.py`) and both talk to their device
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

    def add_gpu_stages(self, stages: dict, options, mma_version: int = 0, amd_arch: str = "") -> None:
        """The `ttgir` and `llir` stages, shared by both GPU backends."""
        from .stages import llir_stage, ttgir_stage
        warp_size = self.target.warp_size
        stages["ttgir"] = lambda src, md: ttgir_stage(src, md, options, warp_size, mma_version, amd_arch=amd_arch)
        stages["llir"] = lambda src, md: llir_stage(src, md, options, self.isa)

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
