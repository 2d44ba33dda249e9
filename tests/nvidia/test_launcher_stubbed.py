"""The CUDA launcher's hot path without a GPU: cuda-bindings replaced by a recording stand-in.

What cuLaunchKernel receives is checked as the driver reads it: the grid, the block, the shared
memory, the stream, and every parameter's bytes through the `void **kernelParams` array. The real
driver is exercised by test_launcher_gpu.py on a GPU.
"""
from __future__ import annotations

import ctypes
import struct
import threading

import numpy as np
import pytest

from tilejit.errors import ArgumentTypeError, ArgumentValueError
from tilejit_nvidia import cuda_calls, driver as driver_module, launcher as launcher_module
from tilejit_nvidia.cuda_calls import CudaCallError
from tilejit_nvidia.launcher import CudaLauncher

SIZES = {"*fp32": 8, "*i8": 8, "i32": 4, "i64": 8, "u64": 8, "fp32": 4, "fp16": 2, "bf16": 2, "fp64": 8, "i1": 1}


class FakeTensor:
    def __init__(self, address):
        self.address = address

    def data_ptr(self):
        return self.address


class FakeResult(int):
    """A CUresult: cuda-bindings' enum members are ints with a name."""

    @property
    def name(self):
        return "CUDA_SUCCESS" if self == 0 else "CUDA_ERROR_INVALID_VALUE"


class FakeCUresult:
    CUDA_SUCCESS = FakeResult(0)

    def __new__(cls, code):
        return FakeResult(code)


class FakeDriverModule:
    """`cuda.bindings.driver` as far as the launcher uses it; records every cuLaunchKernel."""

    CUresult = FakeCUresult

    def __init__(self):
        self.launches: list = []
        self.signature: list = []
        self.fail_with = None
        self.loads = 0

    def cuLaunchKernel(self, function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        pointers = (ctypes.c_void_p * max(len(self.signature), 1)).from_address(params)
        values = tuple(ctypes.string_at(pointers[i], SIZES[t]) for i, t in enumerate(self.signature))
        self.launches.append(((gx, gy, gz), (bx, by, bz), shared, stream, values, (threading.get_ident(), params)))
        return (self.fail_with if self.fail_with is not None else self.CUresult.CUDA_SUCCESS,)

    def cuCtxGetCurrent(self):
        return (0, 1)

    def cuCtxGetDevice(self):
        return (0, 0)

    def cuModuleLoadData(self, cubin):
        self.loads += 1
        return (0, "module")

    def cuModuleGetFunction(self, module, name):
        return (0, "function")

    class CUfunction_attribute:
        CU_FUNC_ATTRIBUTE_NUM_REGS = "regs"
        CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = "shared"
        CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = "threads"

    def cuFuncGetAttribute(self, attribute, function):
        return (0, {"regs": 32, "shared": 0, "threads": 1024}[attribute])

    def cuGetErrorString(self, result):
        return (self.CUresult.CUDA_SUCCESS, b"invalid argument")


@pytest.fixture
def fake_driver(monkeypatch):
    """The stand-in module, an active CudaDriver, and torch's device/stream getters as fakes that
    report device 0 and stream 0x5000 (as `torch._C._cuda_getDevice` / `_cuda_getCurrentRawStream`)."""
    fake = FakeDriverModule()
    monkeypatch.setattr(cuda_calls, "_driver_module", fake)
    driver = driver_module.CudaDriver()
    driver._checked, driver._reason = True, ""
    driver._properties[0] = {"device": 0, "max_shared_mem": 227 << 10, "max_num_regs": 65536}
    monkeypatch.setattr(launcher_module, "_torch_fast_calls", lambda _driver: (lambda: 0, lambda device: 0x5000))
    monkeypatch.setattr(driver, "get_current_stream", lambda: 0x5000)  # torch's, as the driver asks it
    fake.driver = driver
    return fake


def make(fake, signature, **kwargs):
    fake.signature = list(signature)
    return CudaLauncher(b"\x7fELF", "k", list(signature), 4, driver=fake.driver, **kwargs)


def test_every_argument_reaches_the_driver(fake_driver):
    signature = ["*fp32", "i32", "fp32", "fp16", "bf16", "i64", "u64", "fp64", "i1", "*i8"]
    launcher = make(fake_driver, signature, shared_bytes=256)
    launcher.launch((2, 3, 4), (FakeTensor(0x7000_0000_1000), -5, 2.5, 1.5, 1.0, -(2 ** 40), 2 ** 64 - 1,
                                 -3.25, True, None))
    grid, block, shared, stream, values, _ = fake_driver.launches[-1]
    assert (grid, block, shared, stream) == ((2, 3, 4), (128, 1, 1), 256, 0x5000)
    assert values == (struct.pack("<Q", 0x7000_0000_1000), struct.pack("<i", -5), struct.pack("<f", 2.5),
                      np.float16(1.5).tobytes(), struct.pack("<H", 0x3F80), struct.pack("<q", -(2 ** 40)),
                      struct.pack("<Q", 2 ** 64 - 1), struct.pack("<d", -3.25), b"\x01", bytes(8))
    assert fake_driver.loads == 1
    launcher((1, 1, 1), (FakeTensor(16), 1, 0.0, 0.0, 0.0, 0, 0, 0.0, False, 0x100))  # __call__ too
    assert fake_driver.launches[-1][4][0] == struct.pack("<Q", 16) and fake_driver.loads == 1


def test_streams(fake_driver):
    class TorchLikeStream:
        cuda_stream = 0x77

    launcher = make(fake_driver, ["i32"])
    launcher.launch((1, 1, 1), [1], stream=0x66)
    launcher.launch((1, 1, 1), [1], stream=TorchLikeStream())
    launcher.launch((1, 1, 1), [1])
    assert [launch[3] for launch in fake_driver.launches] == [0x66, 0x77, 0x5000]


def test_without_torch_the_context_and_driver_stream_are_used(fake_driver, monkeypatch):
    monkeypatch.setattr(launcher_module, "_torch_fast_calls", lambda _driver: None)
    monkeypatch.setattr(fake_driver.driver, "get_current_stream", lambda: 0x42)
    launcher = make(fake_driver, ["i32"])
    launcher.launch((1, 1, 1), [7])
    launcher.launch((1, 1, 1), [7])
    assert [launch[3] for launch in fake_driver.launches] == [0x42, 0x42]
    assert ("context", 1) in launcher._local.state.entries


@pytest.mark.parametrize("grid, launched", [((5,), (5, 1, 1)), ([2, 3], (2, 3, 1)), ((np.int64(4), 2, 1), (4, 2, 1)),
                                            ((0, 1, 1), None), ((3, 0), None), (7, (7, 1, 1))])
def test_grids(fake_driver, grid, launched):
    launcher = make(fake_driver, ["i32"])
    launcher.launch(grid, [1])
    assert (fake_driver.launches[-1][0] if fake_driver.launches else None) == launched


def test_direct_call_launches_checked_grids_and_skips_empty_ones(fake_driver):
    launcher = make(fake_driver, ["i32"])
    launcher.direct_call((2, 3, 4), (5,))
    launcher.direct_call((0, 1, 1), (5,))
    launcher.direct_call((3, 1, 0), (5,))
    assert [launch[0] for launch in fake_driver.launches] == [(2, 3, 4)]


@pytest.mark.parametrize("grid", [(-1, 1, 1), (1, -2), "abc"])
def test_bad_grids_name_the_kernel(fake_driver, grid):
    with pytest.raises(ValueError, match="kernel 'k'"):
        make(fake_driver, ["i32"]).launch(grid, [1])
    assert not fake_driver.launches


def test_fp16_overflow_is_infinity_and_bad_arguments_name_the_parameter(fake_driver):
    launcher = make(fake_driver, ["fp16", "fp32", "i32"])
    launcher.launch((1, 1, 1), (1e6, -1e39, 3))
    assert fake_driver.launches[-1][4] == (np.float16(np.inf).tobytes(), struct.pack("<f", -np.inf),
                                           struct.pack("<i", 3))
    with pytest.raises(ArgumentValueError, match="parameter 'arg2' \\(i32\\)"):
        launcher.launch((1, 1, 1), (1.0, 1.0, 2 ** 40))
    with pytest.raises(ArgumentTypeError, match="parameter 'arg1' \\(fp32\\)"):
        launcher.launch((1, 1, 1), (1.0, "x", 3))
    with pytest.raises(ArgumentTypeError, match="takes 3 runtime arguments"):
        launcher.launch((1, 1, 1), (1.0, 2.0))
    assert len(fake_driver.launches) == 1


def test_a_failed_launch_is_a_cuda_call_error(fake_driver):
    fake_driver.fail_with = FakeResult(1)
    with pytest.raises(CudaCallError, match="kernel 'k': cuLaunchKernel failed"):
        make(fake_driver, ["i32"]).launch((1, 1, 1), [1])


def test_each_thread_packs_into_its_own_buffer(fake_driver):
    launcher = make(fake_driver, ["*fp32", "i32"])
    errors = []
    together = threading.Barrier(4)  # all four alive at once: no thread id is reused

    def worker(base):
        try:
            together.wait()
            for i in range(300):
                launcher.launch((1, 1, 1), (FakeTensor(base + 16 * i), base + i))
            together.wait()
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k << 20,)) for k in range(1, 5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and len(fake_driver.launches) == 1200
    for _, _, _, _, (pointer, value), _ in fake_driver.launches:
        address, number = struct.unpack("<Q", pointer)[0], struct.unpack("<i", value)[0]
        base = number & ~0xFFFFF
        assert address == base + 16 * (number - base)  # both from the same thread's same launch
    # Each thread's launches read one parameter array of its own.
    params_by_thread: dict = {}
    for *_, (thread, params) in fake_driver.launches:
        params_by_thread.setdefault(thread, set()).add(params)
    assert len(params_by_thread) == 4 and all(len(p) == 1 for p in params_by_thread.values())
    assert len(set().union(*params_by_thread.values())) == 4
