"""The launcher on a real GPU: llvmlite kernels -> PTX -> cubin -> cuLaunchKernel on torch CUDA tensors.

Skips where there is no CUDA device (or no torch with CUDA, or no PTX assembler). Run with `-s` to
see the launch-overhead figures (printed, not asserted).
"""
from __future__ import annotations

import math
import struct

import pytest

from nv_kernels import SCALAR_PARAMS, build_store_scalars, build_vector_add
from tilejit.errors import OutOfResources
from tilejit_nvidia import toolchain
from tilejit_nvidia.driver import get_driver
from tilejit_nvidia.launcher import CudaLauncher

torch = pytest.importorskip("torch")
if not torch.cuda.is_available() or not get_driver().is_active():
    pytest.skip(f"no CUDA device: {get_driver().inactive_reason() or 'torch sees none'}", allow_module_level=True)
if toolchain.find_ptxas_or_none() is None and toolchain.nvjitlink_version() is None:
    pytest.skip("no PTX assembler: pip install nvidia-cuda-nvcc", allow_module_level=True)

DRIVER = get_driver()
MAJOR, MINOR = torch.cuda.get_device_capability()
ARCH = MAJOR * 10 + MINOR
VECTOR_SIGNATURE = ["*fp32", "*fp32", "*fp32", "i32"]
NUM_WARPS = 4
BLOCK = 32 * NUM_WARPS


def compile_kernel(llvm_ir: str) -> bytes:
    return toolchain.ptx_to_cubin(toolchain.llir_to_ptx(llvm_ir, ARCH), ARCH)


@pytest.fixture(scope="module")
def vector_add_cubin():
    return compile_kernel(build_vector_add())


def vectors(n: int):
    a = torch.randn(n, device="cuda")
    b = torch.randn(n, device="cuda")
    return a, b, torch.zeros(n, device="cuda")


def grid_for(n: int):
    return (math.ceil(n / BLOCK), 1, 1)


def test_environment_report():
    print("\n[env]", torch.cuda.get_device_name(), f"sm_{ARCH}", "torch", torch.__version__)
    print("[env] toolchain", toolchain.toolchain_status())
    print("[env] device", DRIVER.device_properties())
    assert DRIVER.get_current_target().arch == ARCH


def test_vector_add_on_torch_tensors(vector_add_cubin):
    n = 1000  # not a multiple of the block: the bounds check matters
    a, b, out = vectors(n)
    launcher = CudaLauncher(vector_add_cubin, "vector_add", VECTOR_SIGNATURE, NUM_WARPS)
    launcher.launch(grid_for(n), [a, b, out, n])
    torch.cuda.synchronize()
    torch.testing.assert_close(out, a + b)
    assert launcher.n_regs and launcher.n_regs > 0


def test_float_scalar_and_libdevice():
    n = 4096
    a, b, out = vectors(n)
    scaled = CudaLauncher(compile_kernel(build_vector_add(scaled=True)), "vector_add", VECTOR_SIGNATURE + ["fp32"],
                          NUM_WARPS)
    scaled.launch(grid_for(n), [a, b, out, n, 2.5])
    torch.cuda.synchronize()
    torch.testing.assert_close(out, a + 2.5 * b)
    if toolchain.find_libdevice(toolchain.find_ptxas_or_none()) is None:
        pytest.skip("libdevice not found")
    expf = CudaLauncher(compile_kernel(build_vector_add(with_expf=True)), "vector_add", VECTOR_SIGNATURE, NUM_WARPS)
    expf.launch(grid_for(n), [a, b, out, n])
    torch.cuda.synchronize()
    torch.testing.assert_close(out, torch.exp(a) + b)


def test_every_scalar_type_arrives_bit_exact():
    out = torch.zeros(len(SCALAR_PARAMS), dtype=torch.int64, device="cuda")
    launcher = CudaLauncher(compile_kernel(build_store_scalars()), "store_scalars",
                            ["*i64"] + [name for name, _ in SCALAR_PARAMS], 1)
    values = {"i1": True, "i8": -5, "i16": -300, "i32": -70000, "i64": -(2 ** 40), "u8": 250, "u32": 2 ** 32 - 2,
              "u64": 2 ** 63 + 5, "fp16": -1.5, "bf16": 3.0, "fp32": 0.1, "fp64": -2.25}
    launcher.launch((1, 1, 1), [out] + [values[name] for name, _ in SCALAR_PARAMS])
    torch.cuda.synchronize()
    got = [v & 0xFFFFFFFFFFFFFFFF for v in out.cpu().tolist()]
    expected = [1, -5 & 0xFF, -300 & 0xFFFF, -70000 & 0xFFFFFFFF, -(2 ** 40) & 0xFFFFFFFFFFFFFFFF, 250, 2 ** 32 - 2,
                2 ** 63 + 5, struct.unpack("<H", struct.pack("<e", -1.5))[0], 0x4040,
                struct.unpack("<I", struct.pack("<f", 0.1))[0], struct.unpack("<Q", struct.pack("<d", -2.25))[0]]
    assert got == expected


def test_pointer_sources_streams_and_empty_grid(vector_add_cubin):
    n = 777
    a, b, out = vectors(n)
    launcher = CudaLauncher(vector_add_cubin, "vector_add", VECTOR_SIGNATURE, NUM_WARPS)

    class CudaArray:  # a non-torch producer of __cuda_array_interface__
        def __init__(self, tensor):
            self.__cuda_array_interface__ = {"data": (tensor.data_ptr(), False), "shape": (n,),
                                             "typestr": "<f4", "version": 3}

    launcher.launch((0, 1, 1), [a, b, out, n])  # empty grid: nothing runs
    torch.cuda.synchronize()
    assert not out.any()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):  # the current torch stream is picked up
        launcher.launch(grid_for(n), [CudaArray(a), b.data_ptr(), out, n])
    stream.synchronize()
    torch.testing.assert_close(out, a + b)
    out.zero_()
    launcher.launch(grid_for(n), [a, b, out, n], stream=stream)  # an explicit stream object
    stream.synchronize()
    torch.testing.assert_close(out, a + b)


def test_bad_arguments_name_the_parameter(vector_add_cubin):
    a, b, out = vectors(8)
    launcher = CudaLauncher(vector_add_cubin, "vector_add", {"a": "*fp32", "b": "*fp32", "out": "*fp32",
                                                             "BLOCK": "constexpr", "n": "i32"}, NUM_WARPS)
    with pytest.raises(TypeError, match="takes 4 runtime arguments"):
        launcher.launch((1, 1, 1), [a, b, out])
    with pytest.raises(TypeError, match="parameter 'n'"):
        launcher.launch((1, 1, 1), [a, b, out, "eight"])


def test_shared_memory_limits(vector_add_cubin):
    limit = DRIVER.device_properties()["max_shared_mem"]
    n = 256
    a, b, out = vectors(n)
    # Over 48 KiB needs the opt-in attribute; the launch must then succeed.
    big = CudaLauncher(vector_add_cubin, "vector_add", VECTOR_SIGNATURE, NUM_WARPS, shared_bytes=64 * 1024)
    big.launch(grid_for(n), [a, b, out, n])
    torch.cuda.synchronize()
    torch.testing.assert_close(out, a + b)
    too_big = CudaLauncher(vector_add_cubin, "vector_add", VECTOR_SIGNATURE, NUM_WARPS, shared_bytes=limit + 1)
    with pytest.raises(OutOfResources, match="shared memory"):
        too_big.launch(grid_for(n), [a, b, out, n])


def test_benchmarker_times_a_launch(vector_add_cubin):
    n = 1 << 20
    a, b, out = vectors(n)
    launcher = CudaLauncher(vector_add_cubin, "vector_add", VECTOR_SIGNATURE, NUM_WARPS)
    ms = DRIVER.get_benchmarker()(lambda: launcher.launch(grid_for(n), [a, b, out, n]), warmup=5, rep=20)
    print(f"\n[bench] vector_add n={n}: {ms * 1e3:.1f} us ({3 * 4 * n / ms / 1e6:.0f} GB/s)")
    assert 0 < ms < 100


def test_benchmarker_keeps_to_its_time_budget(vector_add_cubin):
    """The run count comes from a run's cost including its L2 flush (as Triton's): a tiny kernel
    gets rep / (flush + kernel) runs, not rep / kernel runs of flushes 20x longer than itself (the
    autotuner's 36 configs of Liger's dyt took 12 s that way, Triton 4 s)."""
    import time
    n = 1024
    a, b, out = vectors(n)
    launcher = CudaLauncher(vector_add_cubin, "vector_add", VECTOR_SIGNATURE, NUM_WARPS)
    bench = DRIVER.get_benchmarker()
    start = time.perf_counter()
    times = bench(lambda: launcher.launch(grid_for(n), [a, b, out, n]), warmup=5, rep=20, return_mode="all")
    seconds = time.perf_counter() - start
    assert all(t > 0 for t in times)
    assert seconds < 0.2, f"{len(times)} timed runs took {seconds:.2f} s for a 25 ms budget"


def test_launches_from_several_threads_keep_their_own_arguments(vector_add_cubin):
    """Each thread packs into its own buffer (no lock on the hot path): concurrent launches with
    different arguments must each compute their own sum."""
    import threading
    launcher = CudaLauncher(vector_add_cubin, "vector_add", VECTOR_SIGNATURE, NUM_WARPS)
    n = 4096
    work = [vectors(n) for _ in range(4)]
    errors = []

    def run(a, b, out):
        try:
            for _ in range(50):
                launcher.launch(grid_for(n), [a, b, out, n])
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
    threads = [threading.Thread(target=run, args=w) for w in work]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for a, b, out in work:
        torch.testing.assert_close(out, a + b)


def test_calling_the_launcher_takes_every_grid_form(vector_add_cubin):
    """`launcher(grid, args)` is `launch`: three ints go straight on, other forms are normalised first;
    both skip empty grids and reject negative ones."""
    n = 300
    a, b, out = vectors(n)
    launcher = CudaLauncher(vector_add_cubin, "vector_add", VECTOR_SIGNATURE, NUM_WARPS)
    for grid in (grid_for(n), grid_for(n)[0], [grid_for(n)[0]], (grid_for(n)[0], 1)):
        out.zero_()
        launcher(grid, [a, b, out, n])
        torch.cuda.synchronize()
        torch.testing.assert_close(out, a + b)
    out.zero_()
    launcher((0, 1, 1), [a, b, out, n])
    launcher(0, [a, b, out, n])
    torch.cuda.synchronize()
    assert not out.any()
    for bad in ((-1, 1, 1), -1):
        with pytest.raises(ValueError, match="negative"):
            launcher(bad, [a, b, out, n])


# --- autograd through the JIT (issue 9): tensors that require grad are passed by data_ptr() ---------

import tilejit  # noqa: E402
import tilejit.language as tl  # noqa: E402


@tilejit.jit
def scaled_tanh_forward(x_ptr, w_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    e = tl.exp(-2.0 * x)
    tl.store(y_ptr + offs, tl.load(w_ptr + offs, mask=mask) * (1.0 - e) / (1.0 + e), mask=mask)


@tilejit.jit
def scaled_tanh_backward(x_ptr, w_ptr, dy_ptr, dx_ptr, dw_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    dy = tl.load(dy_ptr + offs, mask=mask)
    e = tl.exp(-2.0 * x)
    t = (1.0 - e) / (1.0 + e)
    tl.store(dx_ptr + offs, dy * tl.load(w_ptr + offs, mask=mask) * (1.0 - t * t), mask=mask)
    tl.store(dw_ptr + offs, dy * t, mask=mask)


class ScaledTanh(torch.autograd.Function):
    """y = w * tanh(x) with tilejit kernels for forward and backward."""

    @staticmethod
    def forward(ctx, x, w):
        y = torch.empty_like(x)
        scaled_tanh_forward[(triton_cdiv(x.numel(), 128),)](x, w, y, x.numel(), BLOCK=128)
        ctx.save_for_backward(x, w)
        return y

    @staticmethod
    def backward(ctx, dy):
        x, w = ctx.saved_tensors
        dx, dw = torch.empty_like(x), torch.empty_like(w)
        scaled_tanh_backward[(triton_cdiv(x.numel(), 128),)](x, w, dy.contiguous(), dx, dw, x.numel(), BLOCK=128)
        return dx, dw


def triton_cdiv(a, b):
    return (a + b - 1) // b


def test_autograd_function_forward_and_backward_on_cuda():
    """Failed in every backward with "Can't get __cuda_array_interface__ on Variable that requires grad"."""
    x = torch.randn(1000, device="cuda", requires_grad=True)
    w = torch.nn.Parameter(torch.randn(1000, device="cuda"))
    y = ScaledTanh.apply(x * 1.5, w)            # a non-leaf input that requires grad
    (y * y).sum().backward()
    x_ref, w_ref = x.detach().clone().requires_grad_(True), w.detach().clone().requires_grad_(True)
    y_ref = w_ref * torch.tanh(x_ref * 1.5)
    (y_ref * y_ref).sum().backward()
    compiled = scaled_tanh_forward.warmup(x, w, y, 1000, BLOCK=128, grid=(8,))
    assert compiled.target.backend == "cuda"
    torch.testing.assert_close(y, y_ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(x.grad, x_ref.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(w.grad, w_ref.grad, rtol=1e-4, atol=1e-5)


def test_interpreter_writes_back_into_a_cuda_parameter():
    """The interpreter copies CUDA tensors to the host and back; the copy back into a leaf that requires
    grad must not be an autograd in-place error."""
    w = torch.nn.Parameter(torch.zeros(300, device="cuda"))
    x = torch.randn(300, device="cuda", requires_grad=True)
    with tilejit.target("interpreter"):
        scaled_tanh_forward[(3,)](x, torch.ones(300, device="cuda"), w, 300, BLOCK=128)
    torch.testing.assert_close(w.detach(), torch.tanh(x.detach()), rtol=1e-5, atol=1e-5)
