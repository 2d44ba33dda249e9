"""Calling the CUDA driver: cuda-bindings imported lazily, one error check, raw hot-path entry points.

cuda-bindings returns `(CUresult, *outputs)` from every call; `check` turns a failure into a
`CudaCallError` (a `tilejit.errors.LaunchError`) that names the call, the kernel and the CUDA error.

The launch hot path calls `cuLaunchKernel` through the bindings too. Measured on an H200 host
(cuda-bindings 13.3.1, Python 3.12, one-pointer kernel, best of 7 x 20000 calls in one process):
bindings 3.9 us, ctypes with argtypes 5.1 us, ctypes without argtypes on prebuilt c_void_p 4.0 us,
cffi ABI mode 4.2-4.5 us. The driver's own CPU work dominates every entry, and the bindings' Cython
converts eleven arguments faster than the alternatives, so no second entry is kept.
"""
from __future__ import annotations

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
