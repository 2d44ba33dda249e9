"""`triton.runtime.driver`: `driver.active` is the device side of the backend a program runs on.

Triton code calls `driver.active.get_current_device()`, `get_current_stream()`,
`get_active_torch_device()`, `get_current_target()`, `utils.get_device_properties(device)` and
`get_benchmarker()`. The active backend is the one GPU backend whose device is present, else the
interpreter (also when `TILEJIT_INTERPRET=1` / `TRITON_INTERPRET=1`); `driver.set_active(...)` picks
another.
"""
from __future__ import annotations

import os
import sys


def _torch():
    torch = sys.modules.get("torch")
    if torch is None:
        import torch
    return torch


class _DeviceUtils:
    def __init__(self, owner):
        self._owner = owner

    def get_device_properties(self, device=None) -> dict:
        """Triton's keys: max_shared_mem, max_num_regs, multiprocessor_count, warpSize, sm_clock_rate,
        mem_clock_rate, mem_bus_width (what the backend's driver knows; the interpreter reports a
        CPU "device" with one program at a time)."""
        return self._owner.device_properties(device)


class ActiveDriver:
    """The device side of one backend class, with Triton's driver methods."""

    def __init__(self, backend_cls):
        self.backend = backend_cls
        self.name = getattr(backend_cls, "name", "?")
        self.utils = _DeviceUtils(self)

    def _impl(self):
        get = getattr(self.backend, "_driver", None)
        return get() if callable(get) else None

    def is_active(self) -> bool:
        return bool(self.backend.is_active())

    @property
    def is_interpreter(self) -> bool:
        return self.name == "interpreter"

    def get_current_target(self):
        return self.backend.get_current_target()

    def get_current_device(self) -> int:
        impl = self._impl()
        return impl.get_current_device() if impl is not None and hasattr(impl, "get_current_device") else 0

    def set_current_device(self, device: int) -> None:
        impl = self._impl()
        if impl is not None and hasattr(impl, "set_current_device"):
            impl.set_current_device(device)

    def get_current_stream(self, device=None) -> int:
        impl = self._impl()
        if impl is not None and hasattr(impl, "get_current_stream"):
            return impl.get_current_stream(device)
        return 0

    def get_active_torch_device(self):
        torch = _torch()
        if self.is_interpreter:
            return torch.device("cpu")
        return torch.device("cuda", self.get_current_device())

    def get_device_interface(self):
        torch = _torch()
        return torch.cpu if self.is_interpreter else torch.cuda

    def get_benchmarker(self):
        return self.backend.get_benchmarker()

    def get_empty_cache_for_benchmark(self):
        torch = _torch()
        device = self.get_active_torch_device()
        return torch.empty(int(256e6 // 4), dtype=torch.int, device=device)

    def clear_cache(self, cache) -> None:
        cache.zero_()

    def device_properties(self, device=None) -> dict:
        impl = self._impl()
        if impl is not None and hasattr(impl, "device_properties"):
            props = dict(impl.device_properties(device))
            props.setdefault("warpSize", props.get("warp_size", 32))
            return props
        return {"max_shared_mem": 0, "max_num_regs": 0, "multiprocessor_count": os.cpu_count() or 1,
                "warpSize": 1, "sm_clock_rate": 0, "mem_clock_rate": 0, "mem_bus_width": 0}

    def __repr__(self):
        return f"<tilejit driver for backend '{self.name}'>"


def _interpret_requested() -> bool:
    return any(os.environ.get(v, "0").lower() in ("1", "true", "on") for v in ("TILEJIT_INTERPRET", "TRITON_INTERPRET"))


def _choose():
    from tilejit.backends import active_state, available_backends

    backends = available_backends()
    if not _interpret_requested():
        for name in ("cuda", "hip"):
            cls = backends.get(name)
            if cls is not None and active_state(cls)[0]:
                return ActiveDriver(cls)
    if "interpreter" in backends:
        return ActiveDriver(backends["interpreter"])
    for cls in backends.values():
        if active_state(cls)[0]:
            return ActiveDriver(cls)
    raise RuntimeError("no active tilejit backend: install tilejit[interpreter] or a GPU backend")


class DriverConfig:
    """`triton.runtime.driver`: `.active` (chosen on first use), `.set_active(d)`, `.reset_active()`."""

    def __init__(self):
        self._active = None

    @property
    def default(self):
        return _choose()

    @property
    def active(self):
        if self._active is None:
            self._active = _choose()
        return self._active

    def set_active(self, driver) -> None:
        self._active = driver if isinstance(driver, ActiveDriver) or driver is None else ActiveDriver(driver)

    def reset_active(self) -> None:
        self._active = None


driver = DriverConfig()


def __getattr__(name):
    if name == "active":
        return driver.active
    raise AttributeError(f"module 'tilejit.runtime.driver' has no attribute '{name}'")


# `triton.runtime.driver` is Triton's DriverConfig object; here it is this module, which answers the
# same calls: `.active` (above), `.set_active(...)`, `.reset_active()`.
def set_active(backend_driver) -> None:
    driver.set_active(backend_driver)


def reset_active() -> None:
    driver.reset_active()
