"""Small but working backends and plugins that the platform tests install through fake entry points."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tilejit.backends import BaseBackend, BaseOptions, GPUTarget, Launcher
from tilejit.hookspecs import hookimpl


class RecordingLauncher(Launcher):
    def __init__(self, compiled_kernel):
        super().__init__(compiled_kernel)
        self.launches = []

    def launch(self, grid, args, stream):
        self.launches.append((grid, tuple(args)))


class FakeDeviceArray:
    """An array that lives on the fake GPU."""

    def __init__(self, n):
        self.n = n

    def data_ptr(self):
        return 0x1000


@dataclass(frozen=True)
class FakeGPUOptions(BaseOptions):
    unroll: int = 1


class FakeGPUBackend(BaseBackend):
    name = "fakegpu"
    options_class = FakeGPUOptions
    ACTIVE = True  # tests flip it to see selection without an active GPU

    @staticmethod
    def supports_target(target):
        return target.backend == "fakegpu"

    def add_stages(self, stages, options):
        stages["fakebin"] = lambda src, md: src.encode() if isinstance(src, str) else bytes(src)

    def make_launcher(self, compiled_kernel):
        return RecordingLauncher(compiled_kernel)

    @classmethod
    def is_active(cls):
        return cls.ACTIVE

    @classmethod
    def inactive_reason(cls):
        return "" if cls.ACTIVE else "no fake GPU plugged in"

    @classmethod
    def get_current_target(cls):
        return GPUTarget("fakegpu", 7, 16)

    @classmethod
    def owns(cls, arg):
        return isinstance(arg, FakeDeviceArray)

    @classmethod
    def toolchain_status(cls):
        return {"fake-assembler": "found at /nowhere/fakeas (1.0)"}


class FakeCPUBackend(BaseBackend):
    name = "fakecpu"
    cpu_fallback = True

    @staticmethod
    def supports_target(target):
        return target.backend == "fakecpu"

    def add_stages(self, stages, options):
        stages["py"] = lambda src, md: str(src)

    def make_launcher(self, compiled_kernel):
        return RecordingLauncher(compiled_kernel)

    @classmethod
    def is_active(cls):
        return True

    @classmethod
    def get_current_target(cls):
        return GPUTarget("fakecpu", "numpy", 1)

    @classmethod
    def owns(cls, arg):
        return isinstance(arg, np.ndarray)


class NotABackend:
    name = "notabackend"


class FutureBackend(FakeCPUBackend):
    name = "future"
    api_version = 99


class ExplodingProbeBackend(FakeCPUBackend):
    name = "exploding"
    cpu_fallback = False

    @classmethod
    def is_active(cls):
        raise OSError("driver library crashed")


class StageRenamingPlugin:
    """A plugin that adds a stage after the backend's own ones."""

    @hookimpl
    def tilejit_add_stages(self, stages, options, target):
        stages["checksum"] = lambda src, md: str(len(src))


class BadSignaturePlugin:
    @hookimpl
    def tilejit_pre_launch(self, kernel, not_a_hook_argument):
        pass
