"""The CUDA driver and launcher parts that do not need a GPU (the rest is in test_launcher_gpu.py)."""
from __future__ import annotations

import numpy as np
import pytest

from tilejit.errors import LaunchError
from tilejit_nvidia.driver import CudaDriver
from tilejit_nvidia.launcher import CudaLauncher, runtime_signature, stream_handle


class FakeCudaArray:
    __cuda_array_interface__ = {"data": (0x1000, False), "shape": (1,), "typestr": "<f4", "version": 3}


class FakeDLPack:
    def __init__(self, device_type):
        self.device_type = device_type

    def __dlpack_device__(self):
        return (self.device_type, 0)


class Exploding:
    def __getattr__(self, name):
        raise RuntimeError("odd object")


def test_owns_cuda_arrays_and_not_host_arrays():
    assert CudaDriver.owns(FakeCudaArray())
    assert CudaDriver.owns(FakeDLPack(2))       # kDLCUDA
    assert CudaDriver.owns(FakeDLPack(13))      # kDLCUDAManaged
    assert not CudaDriver.owns(FakeDLPack(1))   # kDLCPU
    assert not CudaDriver.owns(FakeDLPack(3))   # kDLCUDAHost: pinned host memory
    assert not CudaDriver.owns(np.zeros(3))
    assert not CudaDriver.owns(3)
    assert not CudaDriver.owns(Exploding())


def test_inactive_driver_explains_itself_and_never_raises():
    driver = CudaDriver()
    if driver.is_active():
        pytest.skip("a CUDA device is present here")
    assert driver.inactive_reason()
    with pytest.raises(LaunchError, match="no usable CUDA device"):
        driver.device_properties()


def test_launch_without_gpu_is_a_launch_error():
    driver = CudaDriver()
    if driver.is_active():
        pytest.skip("a CUDA device is present here")
    launcher = CudaLauncher(b"\x7fELF-not-loaded", "k", ["i32"], num_warps=4, driver=driver)
    with pytest.raises(LaunchError):
        launcher.launch((1, 1, 1), [3])
    launcher.launch((0, 1, 1), [3])  # an empty grid launches nothing, GPU or not


def test_runtime_signature_drops_constexprs():
    assert runtime_signature({"x": "*fp32", "BLOCK": "constexpr", "n": "i32", "one": "i32"}, {"one": 1}) == (
        ["*fp32", "i32"], ["x", "n"])
    assert runtime_signature(["*fp32", "i32"]) == (["*fp32", "i32"], None)
    with pytest.raises(ValueError, match="constexpr"):
        runtime_signature(["*fp32", "constexpr"])


def test_stream_handles():
    class TorchLikeStream:
        cuda_stream = 0x55

    assert stream_handle(7) == 7
    assert stream_handle(TorchLikeStream()) == 0x55
    with pytest.raises(TypeError, match="stream must be"):
        stream_handle("default")


@pytest.mark.parametrize("kwargs, message", [
    (dict(cubin=b""), "non-empty"),
    (dict(num_warps=0), "num_warps"),
    (dict(shared_bytes=-1), "shared memory"),
])
def test_launcher_rejects_bad_construction(kwargs, message):
    arguments = dict(cubin=b"\x7fELF", kernel_name="k", signature=["i32"], num_warps=4)
    arguments.update(kwargs)
    with pytest.raises(ValueError, match=message):
        CudaLauncher(**arguments)


def test_negative_grid_is_rejected():
    launcher = CudaLauncher(b"\x7fELF", "k", ["i32"], num_warps=4)
    with pytest.raises(ValueError, match="negative"):
        launcher.launch((-1, 1, 1), [1])
