"""The HIP device side of the AMD backend, through hip-python (imported only when first needed).

`HipDriver` answers: is a ROCm GPU usable here (and if not, why), which target is it, does an argument
live on it, and how to time a kernel. Nothing here runs at import, so `import tilejit_amd` works on a
machine without ROCm or hip-python.
"""
from __future__ import annotations

import functools

from tilejit.errors import LaunchError

from tilejit_amd.targets import base_arch_name, get_arch


class HipError(LaunchError):
    """A HIP runtime call failed."""


@functools.lru_cache(maxsize=1)
def _import_hip():
    """hip-python's `hip.hip` module, or the ImportError that explains why it is missing."""
    try:
        from hip import hip
    except ImportError as exc:
        return exc
    except OSError as exc:  # hip-python present, but libamdhip64.so missing or broken
        return ImportError(f"hip-python is installed but cannot load the HIP runtime: {exc}")
    return hip


def hip_runtime():
    """hip-python's `hip` module; raises HipError with an install hint when it cannot be used."""
    hip = _import_hip()
    if isinstance(hip, Exception):
        raise HipError(f"the AMD backend needs hip-python to run kernels ({hip}); install it with "
                       "`pip install hip-python` matching your ROCm version (e.g. hip-python~=6.2)")
    return hip


def _error_text(hip, err) -> str:
    try:
        result = hip.hipGetErrorString(err)
        text = result[-1] if isinstance(result, tuple) else result
        text = text.decode() if isinstance(text, bytes) else str(text)
    except Exception:  # the error message must not hide the error itself
        text = ""
    name = getattr(err, "name", str(err))
    return f"{name}: {text}" if text and text != name else str(name)


def hip_check(hip, result, what: str, kernel: str | None = None):
    """Unwrap a hip-python result tuple `(err, *values)`; raise HipError naming `what` on failure."""
    err, values = (result[0], result[1:]) if isinstance(result, tuple) else (result, ())
    if int(getattr(err, "value", err)) != 0:
        where = f" for kernel '{kernel}'" if kernel else ""
        raise HipError(f"{what} failed{where}: {_error_text(hip, err)}")
    if not values:
        return None
    return values[0] if len(values) == 1 else values


class HipDriver:
    """The HIP device: activity, current target, argument ownership, benchmarking."""

    def __init__(self, hip=None):
        self._hip = hip  # tests may inject a stand-in; None means import hip-python when needed

    def _runtime(self):
        if self._hip is None:
            self._hip = hip_runtime()
        return self._hip

    def inactive_reason(self) -> str | None:
        """None when a HIP GPU is usable; otherwise why not (missing hip-python, runtime, device)."""
        try:
            hip = self._runtime()
            hip_check(hip, hip.hipInit(0), "hipInit")
            count = hip_check(hip, hip.hipGetDeviceCount(), "hipGetDeviceCount")
        except HipError as exc:
            return str(exc)
        if not count:
            return "the HIP runtime found no AMD GPU"
        return None

    def is_active(self) -> bool:
        return self.inactive_reason() is None

    def current_device(self) -> int:
        hip = self._runtime()
        return hip_check(hip, hip.hipGetDevice(), "hipGetDevice")

    def device_properties(self, device: int | None = None):
        hip = self._runtime()
        device = self.current_device() if device is None else device
        props = hip.hipDeviceProp_t()
        hip_check(hip, hip.hipGetDeviceProperties(props, device), "hipGetDeviceProperties")
        return props

    def get_current_target(self):
        """`GPUTarget("hip", "gfx942", 64)` for the current device (gcnArchName without features)."""
        try:
            from tilejit.backends import GPUTarget
        except ImportError:
            from tilejit.backends.target import GPUTarget
        props = self.device_properties()
        raw = props.gcnArchName
        arch = base_arch_name(raw.decode() if isinstance(raw, bytes) else str(raw))
        warp = int(getattr(props, "warpSize", 0)) or get_arch(arch).wavefront_size
        return GPUTarget("hip", arch, warp)

    @staticmethod
    def owns(arg) -> bool:
        """A torch tensor on a ROCm device (torch reports ROCm devices as 'cuda' when torch.version.hip)."""
        if not getattr(arg, "is_cuda", False):
            return False
        torch = _loaded_torch(arg)
        return bool(torch is not None and getattr(getattr(torch, "version", None), "hip", None))

    def get_benchmarker(self):
        """`bench(fn, warmup=25, rep=100) -> ms` timing `fn` with HIP events on the current stream."""
        return functools.partial(hip_event_bench, self._runtime())


def _loaded_torch(arg):
    """The torch module an argument comes from, without importing torch for non-torch arguments."""
    module = type(arg).__module__ or ""
    if not module.startswith("torch"):
        return None
    import torch
    return torch


def hip_event_bench(hip, fn, warmup: int = 25, rep: int = 100) -> float:
    """Median milliseconds of `fn()` measured between HIP events (after `warmup` untimed runs)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(rep):
        start = hip_check(hip, hip.hipEventCreate(), "hipEventCreate")
        stop = hip_check(hip, hip.hipEventCreate(), "hipEventCreate")
        hip_check(hip, hip.hipEventRecord(start, None), "hipEventRecord")
        fn()
        hip_check(hip, hip.hipEventRecord(stop, None), "hipEventRecord")
        hip_check(hip, hip.hipEventSynchronize(stop), "hipEventSynchronize")
        times.append(hip_check(hip, hip.hipEventElapsedTime(start, stop), "hipEventElapsedTime"))
        hip_check(hip, hip.hipEventDestroy(start), "hipEventDestroy")
        hip_check(hip, hip.hipEventDestroy(stop), "hipEventDestroy")
    times.sort()
    return float(times[len(times) // 2])
