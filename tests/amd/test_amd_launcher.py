"""HipLauncher and HipDriver, with a stand-in for hip-python (there is no AMD GPU here).

The stand-in records what the launcher hands to `hipModuleLaunchKernel` and reads the `extra` array
back through ctypes exactly as the HIP runtime would, so the marker values, the buffer pointer and the
buffer size are checked for real; only the GPU is missing.
"""
from __future__ import annotations

import ctypes
import struct

import pytest

import amd_kernels
from amd_support import LLD_PROBLEM, requires_lld
from tilejit.errors import LaunchError, OutOfResources
from tilejit_amd import toolchain
from tilejit_amd.driver import HipDriver
from tilejit_amd.launcher import HipLauncher


class Status:
    def __init__(self, value: int, name: str):
        self.value, self.name = value, name


SUCCESS = Status(0, "hipSuccess")


class DeviceProps:
    gcnArchName = b""
    warpSize = 0


class FakeHip:
    """Just enough of hip-python's `hip` module: result tuples `(status, *values)`."""

    def __init__(self, launch_status=SUCCESS, device_count=1, arch=b"gfx942:sramecc+:xnack-", warp=64):
        self.launch_status, self.device_count, self.arch, self.warp = launch_status, device_count, arch, warp
        self.loaded, self.unloaded, self.launches = [], [], []

    def hipModuleLoadData(self, image):
        self.loaded.append(bytes(image))
        return SUCCESS, "module"

    def hipModuleGetFunction(self, module, name):
        return SUCCESS, ("function", module, name)

    def hipModuleUnload(self, module):
        self.unloaded.append(module)
        return (SUCCESS,)

    def hipModuleLaunchKernel(self, function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        config = (ctypes.c_void_p * 5).from_address(extra.value)
        size = ctypes.c_size_t.from_address(config[3]).value
        self.launches.append({"function": function, "grid": (gx, gy, gz), "block": (bx, by, bz),
                              "shared": shared, "stream": stream, "params": params,
                              "markers": (config[0], config[2], config[4]),
                              "kernargs": ctypes.string_at(config[1], size)})
        return (self.launch_status,)

    def hipGetErrorString(self, status):
        return (b"invalid argument",)

    def hipInit(self, flags):
        return (SUCCESS,)

    def hipGetDeviceCount(self):
        return SUCCESS, self.device_count

    def hipGetDevice(self):
        return SUCCESS, 0

    hipDeviceProp_t = DeviceProps

    def hipGetDeviceProperties(self, props, device):
        props.gcnArchName, props.warpSize = self.arch, self.warp
        return (SUCCESS,)


@pytest.fixture(scope="module")
def vector_add():
    if LLD_PROBLEM:
        pytest.skip(LLD_PROBLEM)
    return toolchain.compile_llir(amd_kernels.build_vector_add(), "gfx942").hsaco


SIGNATURE = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}


def test_launch_passes_the_packed_buffer_through_extra(vector_add):
    hip = FakeHip()
    launcher = HipLauncher(vector_add, "add_kernel", SIGNATURE, num_warps=4, shared=0, hip=hip)
    launcher((5,), [0x1000, 0x2000, 0x3000, 1280], stream=0x77)
    (launch,) = hip.launches
    assert hip.loaded == [vector_add] and launch["function"] == ("function", "module", b"add_kernel")
    assert launch["grid"] == (5, 1, 1) and launch["block"] == (4 * 64, 1, 1)
    assert launch["shared"] == 0 and launch["stream"] == 0x77 and launch["params"] is None
    assert launch["markers"] == (1, 2, 3)  # HIP_LAUNCH_PARAM_BUFFER_POINTER, _SIZE, _END
    assert launch["kernargs"] == struct.pack("<QQQi", 0x1000, 0x2000, 0x3000, 1280)
    launcher((2, 1, 1), [0x1000, 0x2000, 0x3000, 7])
    assert len(hip.loaded) == 1 and len(hip.launches) == 2  # the module is loaded once


def test_empty_grid_launches_nothing(vector_add):
    hip = FakeHip()
    launcher = HipLauncher(vector_add, "add_kernel", SIGNATURE, num_warps=4, hip=hip)
    launcher((0, 4, 1), [0x1000, 0x2000, 0x3000, 0])
    assert hip.launches == [] and hip.loaded == []


def test_failed_launch_is_a_launch_error_naming_the_kernel(vector_add):
    hip = FakeHip(launch_status=Status(1, "hipErrorInvalidValue"))
    launcher = HipLauncher(vector_add, "add_kernel", SIGNATURE, num_warps=4, hip=hip)
    with pytest.raises(LaunchError, match="hipModuleLaunchKernel failed for kernel 'add_kernel': "
                                          "hipErrorInvalidValue: invalid argument"):
        launcher((1,), [0x1000, 0x2000, 0x3000, 1])


@requires_lld
def test_lds_beyond_the_arch_limit_is_out_of_resources():
    reduction = amd_kernels.build_lds_reduction()
    gfx942 = toolchain.compile_llir(reduction, "gfx942").hsaco
    with pytest.raises(OutOfResources, match="shared memory, required: 70000, hardware limit: 65536"):
        HipLauncher(gfx942, "block_sum", ["*fp32", "*fp32"], num_warps=4, shared=70000, hip=FakeHip())
    gfx950 = toolchain.compile_llir(reduction, "gfx950").hsaco  # MI350: 160 KiB of LDS
    assert HipLauncher(gfx950, "block_sum", ["*fp32", "*fp32"], num_warps=4, shared=70000,
                       hip=FakeHip()).dynamic_lds == 70000 - 1024
    with pytest.raises(OutOfResources, match="hardware limit: 163840"):
        HipLauncher(gfx950, "block_sum", ["*fp32", "*fp32"], num_warps=4, shared=170000, hip=FakeHip())


@requires_lld
def test_shared_memory_beyond_the_static_lds_is_requested_as_dynamic_lds():
    hsaco = toolchain.compile_llir(amd_kernels.build_lds_reduction(), "gfx1100").hsaco
    hip = FakeHip()
    launcher = HipLauncher(hsaco, "block_sum", ["*fp32", "*fp32"], num_warps=8, shared=4096, hip=hip)
    launcher((3,), [0x10, 0x20])
    assert hip.launches[0]["shared"] == 4096 - 1024 and hip.launches[0]["block"] == (8 * 32, 1, 1)


def test_more_threads_than_the_kernel_was_compiled_for(vector_add):
    with pytest.raises(OutOfResources, match="threads per block, required: 512, hardware limit: 256"):
        HipLauncher(vector_add, "add_kernel", SIGNATURE, num_warps=8, hip=FakeHip())


def test_driver_reports_the_target_and_why_it_is_inactive():
    assert HipDriver(FakeHip()).is_active()
    target = HipDriver(FakeHip(arch=b"gfx1100", warp=32)).get_current_target()
    assert (target.backend, target.arch, target.warp_size) == ("hip", "gfx1100", 32)
    target = HipDriver(FakeHip()).get_current_target()
    assert (target.arch, target.warp_size) == ("gfx942", 64)
    no_device = HipDriver(FakeHip(device_count=0))
    assert not no_device.is_active() and "no AMD GPU" in no_device.inactive_reason()


def test_driver_without_hip_python_says_how_to_get_it():
    try:
        import hip  # noqa: F401
        pytest.skip("hip-python is installed here")
    except ImportError:
        pass
    driver = HipDriver()
    assert not driver.is_active() and "pip install hip-python" in driver.inactive_reason()


def test_owns_only_rocm_tensors():
    class NotTorch:
        is_cuda = True
    assert not HipDriver.owns(NotTorch()) and not HipDriver.owns(3) and not HipDriver.owns(None)


def test_make_hip_launcher_reads_the_compiled_kernel(vector_add):
    from types import SimpleNamespace

    from tilejit_amd.launcher import make_hip_launcher
    compiled = SimpleNamespace(asm={"hsaco": vector_add}, metadata={
        "name": "add_kernel", "signature": SIGNATURE, "num_warps": 2, "shared": 0})
    hip = FakeHip()
    make_hip_launcher(compiled, hip=hip)((1,), [1, 2, 3, 4])
    assert hip.launches[0]["block"] == (128, 1, 1)
    del compiled.metadata["num_warps"]
    with pytest.raises(LaunchError, match="lacks 'num_warps'"):
        make_hip_launcher(compiled, hip=hip)
