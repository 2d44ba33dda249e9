"""The CUDA device side: is there a GPU, which one is current, its properties, streams and timing.

cuda-bindings is imported only when a method needs it, and torch only if the user already imported
it. Contexts are the devices' primary contexts (cuDevicePrimaryCtxRetain + cuCtxSetCurrent), the
same ones PyTorch and the CUDA runtime use, so tilejit's modules and torch's tensors live together.
"""
from __future__ import annotations

import sys
import threading

from tilejit.errors import LaunchError

from .arg_packing import DLPACK_CUDA_DEVICES
from .cuda_calls import check, cuda_driver

# Device attributes read once per device: `device_properties()` key -> CUdevice_attribute name.
_DEVICE_ATTRIBUTES = {
    "max_shared_mem": "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN",
    "max_shared_mem_per_sm": "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR",
    "max_num_regs": "CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK",
    "max_regs_per_sm": "CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR",
    "multiprocessor_count": "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT",
    "max_threads_per_block": "CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK",
    "warp_size": "CU_DEVICE_ATTRIBUTE_WARP_SIZE",
    "l2_cache_size": "CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE",
    "cc_major": "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR",
    "cc_minor": "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR",
    "mem_bus_width": "CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH",
}
# Triton flushes L2 between timed runs by writing a buffer larger than any L2 (H100: 50 MiB).
_L2_FLUSH_BYTES = 256 << 20


def _torch_with_cuda():
    """The torch module when the user imported it and it sees a CUDA device, else None."""
    torch = sys.modules.get("torch")
    if torch is None or getattr(getattr(torch, "version", None), "hip", None):
        return None
    try:
        return torch if torch.cuda.is_available() else None
    except Exception:  # noqa: BLE001 - a broken torch install must not break tilejit
        return None


class CudaDriver:
    """One per process (see `get_driver()`); every method is safe to call without a GPU."""

    def __init__(self):
        self._state_lock = threading.Lock()
        self._checked = False
        self._reason = "not checked yet"
        self._primary_contexts: dict[int, object] = {}
        self._properties: dict[int, dict] = {}
        self._default_device = 0
        # torch with CUDA, once the user has imported it: streams and devices then come from torch.
        # Re-read only when the `torch` entry of sys.modules changes, so the check stays cheap.
        self._torch = None
        self._torch_seen = None

    # ---- is there a GPU ------------------------------------------------------------------------
    def _check_active(self) -> None:
        with self._state_lock:
            if self._checked:
                return
            self._reason = self._probe()
            self._checked = True

    @staticmethod
    def _probe() -> str:
        """'' when a CUDA device is usable, else why not (in words)."""
        try:
            driver = cuda_driver()
        except LaunchError as exc:
            return str(exc)
        try:
            check(driver.cuInit(0), "cuInit")
            count = check(driver.cuDeviceGetCount(), "cuDeviceGetCount")
        except Exception as exc:  # noqa: BLE001 - e.g. libcuda missing: cuda-bindings raises its own type
            return f"the CUDA driver is not usable: {exc}"
        return "" if count > 0 else "no CUDA device found"

    def is_active(self) -> bool:
        """cuda-bindings importable, cuInit succeeds and a device is present. Never raises."""
        self._check_active()
        return not self._reason

    def inactive_reason(self) -> str:
        """Why `is_active()` is false; empty when it is true."""
        self._check_active()
        return self._reason

    def require_active(self) -> None:
        if not self.is_active():
            raise LaunchError(f"no usable CUDA device: {self._reason}")

    # ---- devices and contexts ------------------------------------------------------------------
    def _bound_torch(self):
        torch = sys.modules.get("torch")
        if torch is not self._torch_seen:
            self._torch_seen = torch
            self._torch = _torch_with_cuda() if torch is not None else None
        return self._torch

    def get_current_device(self) -> int:
        """torch's current device when torch is in use, else the device of the current context."""
        torch = self._bound_torch()
        if torch is not None:
            return torch.cuda.current_device()
        self.require_active()
        driver = cuda_driver()
        context = check(driver.cuCtxGetCurrent(), "cuCtxGetCurrent")
        if context is not None and int(context) != 0:
            return int(check(driver.cuCtxGetDevice(), "cuCtxGetDevice"))
        return self._default_device

    def set_current_device(self, device: int) -> None:
        torch = self._bound_torch()
        if torch is not None:
            torch.cuda.set_device(device)
        self._default_device = device
        self.activate(device)

    def activate(self, device: int | None = None):
        """Make `device`'s primary context current on this thread and return it (retained once)."""
        self.require_active()
        device = self.get_current_device() if device is None else device
        driver = cuda_driver()
        context = self._primary_contexts.get(device)
        if context is None:
            handle = check(driver.cuDeviceGet(device), "cuDeviceGet")
            context = check(driver.cuDevicePrimaryCtxRetain(handle), "cuDevicePrimaryCtxRetain")
            self._primary_contexts[device] = context
        check(driver.cuCtxSetCurrent(context), "cuCtxSetCurrent")
        return context

    def device_properties(self, device: int | None = None) -> dict:
        """Attributes of `device` (cached): max_shared_mem (opt-in per block), max_num_regs,
        multiprocessor_count, max_threads_per_block, warp_size, l2_cache_size, cc_major/minor..."""
        self.require_active()
        device = self.get_current_device() if device is None else device
        cached = self._properties.get(device)
        if cached is not None:
            return cached
        driver = cuda_driver()
        handle = check(driver.cuDeviceGet(device), "cuDeviceGet")
        properties = {"device": device}
        for key, attribute in _DEVICE_ATTRIBUTES.items():
            properties[key] = int(check(driver.cuDeviceGetAttribute(
                getattr(driver.CUdevice_attribute, attribute), handle), "cuDeviceGetAttribute"))
        name = check(driver.cuDeviceGetName(256, handle), "cuDeviceGetName")
        properties["name"] = name.split(b"\0", 1)[0].decode(errors="replace") if isinstance(name, bytes) else str(name)
        self._properties[device] = properties
        return properties

    def get_device_capability(self, device: int | None = None) -> tuple[int, int]:
        properties = self.device_properties(device)
        return properties["cc_major"], properties["cc_minor"]

    def get_current_target(self):
        """`GPUTarget("cuda", 10 * major + minor, 32)` of the current device."""
        from tilejit.backends import GPUTarget
        major, minor = self.get_device_capability()
        return GPUTarget("cuda", major * 10 + minor, 32)

    # ---- streams --------------------------------------------------------------------------------
    def get_current_stream(self, device: int | None = None) -> int:
        """Handle of torch's current stream when torch is in use, else 0 (the legacy default stream)."""
        torch = self._bound_torch()
        if torch is None:
            return 0
        if device is None:
            device = torch.cuda.current_device()
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # what Triton uses: no Stream object
        return raw(device) if raw is not None else torch.cuda.current_stream(device).cuda_stream

    # ---- arguments ------------------------------------------------------------------------------
    @staticmethod
    def owns(arg) -> bool:
        """Does `arg` live on a CUDA device? torch CUDA tensors, `__cuda_array_interface__` objects,
        DLPack producers whose device is CUDA. Never raises, never imports torch."""
        try:
            torch = sys.modules.get("torch")
            if torch is not None and isinstance(arg, torch.Tensor):
                # A ROCm build of torch also says is_cuda for its AMD GPUs.
                return bool(arg.is_cuda) and getattr(torch.version, "hip", None) is None
            if hasattr(arg, "__cuda_array_interface__"):
                return True
            dlpack_device = getattr(arg, "__dlpack_device__", None)
            if dlpack_device is not None:
                return int(dlpack_device()[0]) in DLPACK_CUDA_DEVICES
        except Exception:  # noqa: BLE001 - an odd object is simply not ours
            return False
        return False

    # ---- timing ---------------------------------------------------------------------------------
    def get_benchmarker(self):
        """`do_bench(fn, warmup=25, rep=100, quantiles=None, return_mode="mean")` in milliseconds,
        timed with CUDA events on the current stream, L2 flushed before each run (as Triton's)."""
        return self.do_bench

    def do_bench(self, fn, warmup: int = 25, rep: int = 100, quantiles=None, return_mode: str = "mean"):
        if return_mode not in ("min", "max", "mean", "median", "all"):
            raise ValueError(f"return_mode must be one of min, max, mean, median, all; got {return_mode!r}")
        self.activate()
        driver = cuda_driver()
        stream = self.get_current_stream()
        flush = check(driver.cuMemAlloc(_L2_FLUSH_BYTES), "cuMemAlloc")
        events = []
        try:
            def new_event():
                event = check(driver.cuEventCreate(0), "cuEventCreate")
                events.append(event)
                return event

            def flush_l2():
                check(driver.cuMemsetD32Async(flush, 0, _L2_FLUSH_BYTES // 4, stream), "cuMemsetD32Async")

            def elapsed_ms(start, end) -> float:
                return float(check(driver.cuEventElapsedTime(start, end), "cuEventElapsedTime"))

            def timed_runs(count: int) -> list[float]:
                pairs = [(new_event(), new_event()) for _ in range(count)]
                for start, end in pairs:
                    flush_l2()
                    check(driver.cuEventRecord(start, stream), "cuEventRecord")
                    fn()
                    check(driver.cuEventRecord(end, stream), "cuEventRecord")
                check(driver.cuEventSynchronize(pairs[-1][1]), "cuEventSynchronize")
                return [elapsed_ms(s, e) for s, e in pairs]

            def flushed_runs_ms(count: int) -> float:
                """Milliseconds of `count` runs, each after its L2 flush: what one timed run costs."""
                start, end = new_event(), new_event()
                check(driver.cuEventRecord(start, stream), "cuEventRecord")
                for _ in range(count):
                    flush_l2()
                    fn()
                check(driver.cuEventRecord(end, stream), "cuEventRecord")
                check(driver.cuEventSynchronize(end), "cuEventSynchronize")
                return elapsed_ms(start, end)

            fn()
            check(driver.cuStreamSynchronize(stream), "cuStreamSynchronize")
            # The run count comes from a run's cost with its flush (as Triton's do_bench): from the
            # kernel alone, a 0.05 ms kernel got 2,000 runs of 0.1 ms flushes each, 3x the budget.
            estimate = max(flushed_runs_ms(5) / 5, 1e-6)
            for _ in range(max(1, int(warmup / estimate))):
                fn()
            times = timed_runs(max(1, int(rep / estimate)))
        finally:
            for event in events:
                driver.cuEventDestroy(event)
            driver.cuMemFree(flush)
        from tilejit.testing import summarize_times
        return summarize_times(times, quantiles, return_mode)


_DRIVER: CudaDriver | None = None


def get_driver() -> CudaDriver:
    """The process's CudaDriver (its caches and primary contexts are per process)."""
    global _DRIVER
    if _DRIVER is None:
        _DRIVER = CudaDriver()
    return _DRIVER
