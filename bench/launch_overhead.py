"""Host-side cost of a cached kernel launch on the NVIDIA backend, layer by layer (issue 12, item 4).

    python bench/launch_overhead.py            # on a GPU: the real launches, beside torch's `x.add_(1)`
    python bench/launch_overhead.py --stub     # anywhere: the driver replaced by a stub (see below)

Timed, in microseconds per launch (the best of `--runs` loops of `--n` launches): `jit path` is
`kernel[(1,)](x)` as a user writes it, `CompiledKernel.run` and `launcher alone` (`launcher.launch`)
the layers below it, `launcher direct_call` the launcher's entry that the JIT calls (the grid already
checked). Two kernels: the one-pointer `tiny_kernel` of bench/gpu.py and a vector add (three
pointers, an int, a constexpr).

With `--stub` (the default where no CUDA device is usable) the kernels are cross-compiled for
cuda:90 and launched on torch CPU tensors (the JIT reads a CPU tensor as it reads a CUDA one: dtype,
data_ptr(), device). cuda-bindings is replaced by a module whose `cuLaunchKernel` is a Python
function returning `(CUDA_SUCCESS,)`, and torch's raw device and stream getters by C builtins
(`int()` and `abs(0)`, both 0). What remains is tilejit's own work plus the stub's call (reported as
`stub cuLaunchKernel alone`): the part of a launch this project controls. Stubbed runs are timed in
the thread's CPU time (nothing in them waits), so that other processes on a shared machine count
less; GPU runs in wall-clock time, which is what a caller waits.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for sub in ("core", "backends/nvidia", "backends/interpreter"):
    path = os.path.join(ROOT, sub)
    if path not in sys.path:
        sys.path.insert(0, path)


def best_us(fn, n: int, runs: int, clock=time.perf_counter) -> float:
    """Microseconds per call of `fn`, the best of `runs` loops of `n` calls (the host is shared)."""
    for _ in range(min(n, 200)):
        fn()
    best = float("inf")
    for _ in range(runs):
        t0 = clock()
        for _ in range(n):
            fn()
        best = min(best, (clock() - t0) / n * 1e6)
    return best


class _StubResult:
    CUDA_SUCCESS = 0   # cuda-bindings hands back an enum member; the launcher tests identity first


def install_stub_driver():
    """Replace cuda-bindings and torch's CUDA getters by stubs; returns the stub launch function."""
    from tilejit_nvidia import cuda_calls, driver as cuda_driver_module, launcher as launcher_module

    success = (_StubResult.CUDA_SUCCESS,)

    def cuLaunchKernel(function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        return success

    ok = _StubResult.CUDA_SUCCESS
    attributes = types.SimpleNamespace(CU_FUNC_ATTRIBUTE_NUM_REGS="regs", CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES="shared",
                                       CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK="threads")
    function_attributes = {"regs": 32, "shared": 0, "threads": 1024}
    cuda_calls._driver_module = types.SimpleNamespace(
        cuLaunchKernel=cuLaunchKernel, CUresult=_StubResult, CUfunction_attribute=attributes,
        cuCtxGetCurrent=lambda: (ok, 1), cuCtxGetDevice=lambda: (ok, 0),
        cuModuleLoadData=lambda cubin: (ok, "module"), cuModuleGetFunction=lambda module, name: (ok, "function"),
        cuFuncGetAttribute=lambda attribute, function: (ok, function_attributes[attribute]))
    driver = cuda_driver_module.get_driver()
    driver._checked, driver._reason = True, ""
    driver._properties[0] = {"device": 0, "max_shared_mem": 227 << 10, "max_num_regs": 65536}  # an H100's
    # torch._C._cuda_getDevice() and _cuda_getCurrentRawStream(device): C calls returning ints.
    launcher_module._torch_fast_calls = lambda _driver: (int, abs)
    return cuLaunchKernel


def report(label, jit_call, grid3, runtime_args, args, clock, stub_launch) -> None:
    """Print the timings of one kernel's layers; `jit_call()` launches it through the JIT on `grid3`."""
    compiled = jit_call()
    launcher = compiled.launcher
    launch = getattr(launcher, "launch", launcher)   # as bench/gpu.py's profile_launch
    rows = [("jit path", jit_call),
            ("CompiledKernel.run", lambda: compiled.run(grid3, runtime_args)),
            ("launcher alone", lambda: launch(grid3, runtime_args))]
    direct = getattr(launcher, "direct_call", None)   # what the JIT calls, the grid checked already
    if direct is not None:
        rows.append(("launcher direct_call", lambda: direct(grid3, runtime_args, None)))
    if stub_launch is not None:
        rows.append(("stub cuLaunchKernel alone", lambda: stub_launch(None, 1, 1, 1, 128, 1, 1, 0, 0, 0, 0)))
    print(f"{label}:")
    for name, fn in rows:
        print(f"  {name:28s} {best_us(fn, args.n, args.runs, clock):6.2f}")
    if args.profile:
        import cProfile
        import pstats
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(args.n):
            jit_call()
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(12)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stub", action="store_true", help="stub the driver even where a GPU is usable")
    parser.add_argument("--n", type=int, default=20000, help="launches per timed loop")
    parser.add_argument("--runs", type=int, default=7, help="timed loops; the best is reported")
    parser.add_argument("--profile", action="store_true", help="also print a cProfile of the jit path")
    args = parser.parse_args()

    import torch
    from tilejit_nvidia.driver import get_driver

    stub = args.stub or not (torch.cuda.is_available() and get_driver().is_active())
    if stub:
        os.environ["TILEJIT_TARGET"] = "cuda:90"   # cross-compile; the launch key sees the variable
        stub_launch = install_stub_driver()
        device = "cpu"
    else:
        device = "cuda"

    import tilejit
    import tilejit.language as tl

    @tilejit.jit
    def tiny_kernel(x_ptr):
        tl.store(x_ptr, tl.load(x_ptr) + 1)

    @tilejit.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask),
                 mask=mask)

    x = torch.zeros(1024, device=device)
    y, out = torch.zeros_like(x), torch.zeros_like(x)
    mode = ("stubbed driver (cuLaunchKernel is a Python stub), thread CPU time" if stub
            else f"{torch.cuda.get_device_name()}, wall clock")
    clock = time.thread_time if stub else time.perf_counter
    print(f"# cached launch, host side, us per launch (best of {args.runs} x {args.n}); {mode}")
    # The calls as a user writes them (no `*args` forwarding in the timed call).
    report("tiny_kernel[(1,)](x)", lambda: tiny_kernel[(1,)](x), (1, 1, 1), (x,), args, clock,
           stub_launch if stub else None)
    report("add_kernel[(4,)](x, y, out, 1000, BLOCK=256)", lambda: add_kernel[(4,)](x, y, out, 1000, BLOCK=256),
           (4, 1, 1), (x, y, out, 1000), args, clock, stub_launch if stub else None)
    if not stub:
        torch.cuda.synchronize()
        one = torch.zeros(1, device=device)   # bench/gpu.py's launch_us times the same op
        print(f"torch x.add_(1): {best_us(lambda: one.add_(1), args.n, args.runs):6.2f}")
        torch.cuda.synchronize()


if __name__ == "__main__":
    main()
