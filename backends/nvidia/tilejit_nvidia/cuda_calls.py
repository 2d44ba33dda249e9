"""Calling the CUDA driver: cuda-bindings imported lazily, one error check, raw hot-path entry points.

cuda-bindings returns `(CUresult, *outputs)` from every call; `check` turns a failure into a
`CudaCallError` (a `tilejit.errors.LaunchError`) that names the call, the kernel and the CUDA error.
`RawEntryPoints` gives the launch hot path `cuLaunchKernel` and `cuCtxGetCurrent` either as the
cuda-bindings wrappers or as ctypes calls on the function pointers `cuGetProcAddress` returns.
Measured on an H200 (cuda-bindings 13.3, Python 3.12, torch's current stream): a whole launch took
6.9 us through the bindings and 8.8 us through ctypes (ctypes' per-argument conversion of eleven
arguments costs more than the bindings' Cython), so the bindings are the default.
"""
from __future__ import annotations

import ctypes

from tilejit.errors import LaunchError

_driver_module = None


def cuda_driver():
    """`cuda.bindings.driver`, imported on first use (it loads libcuda, which CPU machines lack)."""
    global _driver_module
    if _driver_module is None:
        try:
            from cuda.bindings import driver
        except ImportError:
            try:
                from cuda import cuda as driver  # cuda-python before 12.6 named the module so
            except ImportError:
                raise LaunchError("the CUDA backend needs cuda-bindings: pip install cuda-bindings") from None
        _driver_module = driver
    return _driver_module


class CudaCallError(LaunchError):
    """A CUDA driver call failed: `call`, `error_name` (e.g. CUDA_ERROR_OUT_OF_MEMORY), `code`."""

    def __init__(self, call: str, code: int, kernel: str | None = None):
        self.call = call
        self.code = int(code)
        self.kernel = kernel
        self.error_name, description = describe_error(code)
        where = f"kernel '{kernel}': " if kernel else ""
        super().__init__(f"{where}{call} failed with {self.error_name} ({description})")


def describe_error(code) -> tuple[str, str]:
    """(name, description) of a CUresult, e.g. ('CUDA_ERROR_INVALID_VALUE', 'invalid argument')."""
    driver = cuda_driver()
    try:
        result = driver.CUresult(int(code))
    except ValueError:
        return f"CUresult {int(code)}", "unknown error code"
    name, description = result.name, "no description"
    err, text = driver.cuGetErrorString(result)
    if err == driver.CUresult.CUDA_SUCCESS and text:
        description = text.decode() if isinstance(text, bytes) else str(text)
    return name, description


def check(result, call: str, kernel: str | None = None):
    """Raise `CudaCallError` unless `result[0]` is CUDA_SUCCESS; return the outputs.

    No output gives None, one gives it alone, several give a tuple.
    """
    code = result[0]
    if int(code) != 0:
        raise CudaCallError(call, code, kernel)
    if len(result) == 1:
        return None
    return result[1] if len(result) == 2 else result[1:]


# ---------------------------------------------------------------------------------------------
# Raw entry points for the launch hot path
# ---------------------------------------------------------------------------------------------

_CU_LAUNCH_KERNEL = ctypes.CFUNCTYPE(
    ctypes.c_int,                                               # CUresult
    ctypes.c_void_p,                                            # CUfunction
    ctypes.c_uint, ctypes.c_uint, ctypes.c_uint,                # grid
    ctypes.c_uint, ctypes.c_uint, ctypes.c_uint,                # block
    ctypes.c_uint,                                              # dynamic shared bytes
    ctypes.c_void_p,                                            # CUstream
    ctypes.c_void_p,                                            # void **kernelParams
    ctypes.c_void_p)                                            # void **extra
_CU_CTX_GET_CURRENT = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p))


class RawEntryPoints:
    """ctypes callables for `cuLaunchKernel` and `cuCtxGetCurrent`, or the cuda-bindings calls.

    `kind` is "ctypes" when the driver gave function pointers, else "bindings"; both expose the
    same two methods so the launcher does not care which it got.
    """

    def __init__(self, prefer: str = "bindings"):
        driver = cuda_driver()
        self.kind = "bindings"
        self._current = ctypes.c_void_p()
        if prefer == "ctypes":
            launch = self._proc_address(driver, b"cuLaunchKernel")
            current = self._proc_address(driver, b"cuCtxGetCurrent")
            if launch and current:
                self._launch = _CU_LAUNCH_KERNEL(launch)
                self._get_current = _CU_CTX_GET_CURRENT(current)
                self.kind = "ctypes"
        if self.kind == "bindings":
            self._bindings_launch = driver.cuLaunchKernel
            self._bindings_get_current = driver.cuCtxGetCurrent

    @staticmethod
    def _proc_address(driver, symbol: bytes) -> int:
        """Address of a driver function for this driver's version, or 0 when it cannot be had."""
        try:
            version = check(driver.cuDriverGetVersion(), "cuDriverGetVersion")
            flags = driver.CUdriverProcAddress_flags.CU_GET_PROC_ADDRESS_DEFAULT
            result = driver.cuGetProcAddress(symbol, version, flags)
            # (CUresult, pfn) in older bindings, (CUresult, pfn, symbolStatus) in newer ones.
            if int(result[0]) != 0 or result[1] is None:
                return 0
            return int(result[1])
        except Exception:  # noqa: BLE001 - bindings without a usable cuGetProcAddress: use their wrappers
            return 0

    def current_context(self) -> int:
        """Handle of the calling thread's current context (0 when none)."""
        if self.kind == "ctypes":
            code = self._get_current(ctypes.byref(self._current))
            if code:
                raise CudaCallError("cuCtxGetCurrent", code)
            return self._current.value or 0
        return int(check(self._bindings_get_current(), "cuCtxGetCurrent"))

    def launch_entry(self, function) -> tuple:
        """(`launch`, `handle`): `launch(handle, gx, gy, gz, bx, by, bz, shared, stream, params, None)`
        launches `function` and returns the CUresult as an int; `params` is the address of the
        `void *kernelParams[]` array."""
        if self.kind == "ctypes":
            return self._launch, int(function)
        launch = self._bindings_launch

        def launch_bindings(handle, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
            return int(launch(handle, gx, gy, gz, bx, by, bz, shared, stream, params, 0)[0])
        return launch_bindings, function
