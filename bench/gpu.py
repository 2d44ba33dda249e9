"""GPU benchmark: tilejit beside the installed Triton (and PyTorch) in one process, on one device.

Run on the device machine:  python bench/gpu.py [--quick] [--only add,softmax]
Every workload first checks both compilers' outputs against PyTorch, then times tilejit, Triton and
PyTorch with the same CUDA-event timer, in alternation (6 rounds of 12 runs each, each round
starting with the next one; cold L2; the median of the 72 runs) and prints a markdown table with the ratio.
A workload that tilejit cannot compile or gets wrong is reported as such, never timed.
"""
from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import os
import pstats
import subprocess
import statistics
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import load_kernels, markdown_table  # noqa: E402

import torch  # noqa: E402


def _flush_cache():
    return torch.empty(64 << 20, dtype=torch.int8, device="cuda")  # zeroed between runs: cold L2


def event_times(fn, reps, cache) -> list:
    """Milliseconds of `reps` runs of `fn`, each timed with its own CUDA event pair after the L2 is
    flushed (the flush is outside the pair)."""
    times = []
    for _ in range(reps):
        cache.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return times


def bench_interleaved(fns: dict, rounds=6, reps=12, warmup=5) -> dict:
    """{name: median ms} of several implementations of one workload timed in alternation: `rounds`
    rounds, each timing `reps` runs of every implementation in turn, so that a neighbour's burst on
    this shared host or GPU falls on all of them alike (timing one after the other let whole
    workloads swing by 30% between processes). Each round starts with the next implementation, so
    that none always runs right after the same one: a GPU held at its power limit by cuBLAS runs the
    next kernel at lower clocks for a while. A failing implementation gets None."""
    cache = _flush_cache()
    times = {name: [] for name in fns}
    for name, fn in fns.items():
        try:
            for _ in range(warmup):
                fn()
        except Exception as exc:  # noqa: BLE001 - e.g. no fp8 GEMM for these types in this torch build
            print(f"[{name}] failed: {type(exc).__name__}: {str(exc)[:200]}", file=sys.stderr)
            times[name] = None
    torch.cuda.synchronize()
    names = list(fns)
    for round_ in range(rounds):
        for name in names[round_ % len(names):] + names[:round_ % len(names)]:
            fn = fns[name]
            if times[name] is None:
                continue
            try:
                times[name] += event_times(fn, reps, cache)
            except Exception as exc:  # noqa: BLE001 - reported, the others go on
                print(f"[{name}] timing failed: {type(exc).__name__}: {str(exc)[:200]}", file=sys.stderr)
                times[name] = None
    return {name: statistics.median(t) if t else None for name, t in times.items()}


def cdiv(a, b):
    return (a + b - 1) // b


def w_add(k, quick):
    n = 1 << (22 if quick else 26)
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    run = lambda: k.add_kernel[(cdiv(n, 1024),)](x, y, out, n, BLOCK_SIZE=1024)  # noqa: E731
    check = lambda: torch.testing.assert_close(out, x + y, rtol=0, atol=0)  # noqa: E731
    return run, check, 3 * n * 4, "GB/s", lambda: torch.add(x, y, out=out)


def w_softmax(k, quick):
    m, n = (1024, 4096) if quick else (4096, 4096)
    x = torch.randn(m, n, device="cuda")
    out = torch.empty_like(x)
    run = lambda: k.softmax_kernel[(m,)](out, x, x.stride(0), out.stride(0), m, n, BLOCK_SIZE=4096, num_warps=8)  # noqa
    check = lambda: torch.testing.assert_close(out, torch.softmax(x, 1), rtol=1e-5, atol=1e-6)  # noqa: E731
    return run, check, 2 * m * n * 4, "GB/s", lambda: torch.softmax(x, 1)


def w_layernorm(k, quick):
    m, n = (1024, 8192) if quick else (4096, 8192)
    x = torch.randn(m, n, device="cuda", dtype=torch.float16)
    w, b = torch.rand(n, device="cuda", dtype=torch.float16), torch.rand(n, device="cuda", dtype=torch.float16)
    y = torch.empty_like(x)
    run = lambda: k.layer_norm_kernel[(m,)](x, y, w, b, x.stride(0), n, 1e-5, BLOCK_SIZE=1024, num_warps=8)  # noqa
    ref = lambda: torch.nn.functional.layer_norm(x, (n,), w, b, 1e-5)  # noqa: E731
    check = lambda: torch.testing.assert_close(y, ref(), rtol=1e-2, atol=1e-2)  # noqa: E731
    return run, check, 2 * m * n * 2, "GB/s", ref


def w_matmul(k, quick):
    s = 2048 if quick else 4096
    a = torch.randn(s, s, device="cuda", dtype=torch.float16)
    b = torch.randn(s, s, device="cuda", dtype=torch.float16)
    c = torch.empty(s, s, device="cuda", dtype=torch.float16)
    bm, bn, bk = 128, 128, 64
    run = lambda: k.matmul_kernel[(cdiv(s, bm) * cdiv(s, bn),)](  # noqa: E731
        a, b, c, s, s, s, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, num_warps=8, num_stages=3)
    check = lambda: torch.testing.assert_close(c, a @ b, rtol=2e-2, atol=0.5)  # noqa: E731
    return run, check, 2 * s ** 3, "TFLOP/s", lambda: a @ b


def w_attention(k, quick):
    heads, seq, d = (8 if quick else 32), (2048 if quick else 4096), 64
    q, kk, v = (torch.randn(heads, seq, d, device="cuda", dtype=torch.float16) for _ in range(3))
    o = torch.empty_like(q)
    bm, bn = 128, 64
    scale = d ** -0.5
    run = lambda: k.attention_fwd_kernel[(seq // bm, heads)](  # noqa: E731
        q, kk, v, o, seq, scale, q.stride(0), q.stride(1), HEAD_DIM=d, BLOCK_M=bm, BLOCK_N=bn, num_warps=4,
        num_stages=2)
    ref = lambda: torch.nn.functional.scaled_dot_product_attention(q, kk, v, scale=scale)  # noqa: E731
    check = lambda: torch.testing.assert_close(o, ref(), rtol=1e-2, atol=1e-2)  # noqa: E731
    return run, check, 4 * heads * seq * seq * d, "TFLOP/s", ref


def w_attention_masked(k, quick):
    # a sequence that ends inside a block (and is not a multiple of 16): every load of the last
    # block is masked, and the scores past the end are -inf
    heads, seq, d = (8 if quick else 32), (2000 if quick else 4001), 64
    q, kk, v = (torch.randn(heads, seq, d, device="cuda", dtype=torch.float16) for _ in range(3))
    o = torch.empty_like(q)
    bm, bn = 128, 64
    scale = d ** -0.5
    run = lambda: k.attention_fwd_masked_kernel[(cdiv(seq, bm), heads)](  # noqa: E731
        q, kk, v, o, seq, scale, q.stride(0), q.stride(1), HEAD_DIM=d, BLOCK_M=bm, BLOCK_N=bn, num_warps=4,
        num_stages=2)
    ref = lambda: torch.nn.functional.scaled_dot_product_attention(q, kk, v, scale=scale)  # noqa: E731
    check = lambda: torch.testing.assert_close(o, ref(), rtol=1e-2, atol=1e-2)  # noqa: E731
    return run, check, 4 * heads * seq * seq * d, "TFLOP/s", ref


# -- rows: scans and sorts (issue 12's Liger sparsemax case: a row kernel built on tl.cumsum) --------

def w_cumsum(k, quick):
    m, n = (1024, 4096) if quick else (4096, 4096)
    x = torch.randn(m, n, device="cuda")
    y = torch.empty_like(x)
    run = lambda: k.cumsum_row_kernel[(m,)](x, y, x.stride(0), n, BLOCK_SIZE=4096)  # noqa: E731
    check = lambda: torch.testing.assert_close(y, torch.cumsum(x, 1), rtol=1e-4, atol=1e-3)  # noqa: E731
    return run, check, 2 * m * n * 4, "GB/s", lambda: torch.cumsum(x, 1)


def w_scan_linrec(k, quick):
    m, n = (1024, 2048) if quick else (4096, 2048)
    a = torch.rand(m, n, device="cuda") * 0.5 + 0.5
    b = torch.randn(m, n, device="cuda")
    y = torch.empty_like(a)
    run = lambda: k.linear_recurrence_row_kernel[(m,)](a, b, y, a.stride(0), n, BLOCK_SIZE=2048)  # noqa: E731

    def ref():   # y_i = a_i y_(i-1) + b_i  ==  P_i * cumsum(b_j / P_j), P = cumprod(a), in fp64
        p = torch.cumprod(a.double(), 1)
        return (p * torch.cumsum(b.double() / p, 1)).float()
    check = lambda: torch.testing.assert_close(y, ref(), rtol=1e-3, atol=1e-3)  # noqa: E731
    return run, check, 3 * m * n * 4, "GB/s", ref


def w_sort(k, quick):
    m, n = (1024, 1024) if quick else (8192, 1024)
    x = torch.randn(m, n, device="cuda")
    y = torch.empty_like(x)
    run = lambda: k.sort_row_kernel[(m,)](x, y, x.stride(0), BLOCK_SIZE=n)  # noqa: E731
    check = lambda: torch.testing.assert_close(y, torch.sort(x, 1).values, rtol=0, atol=0)  # noqa: E731
    return run, check, 2 * m * n * 4, "GB/s", lambda: torch.sort(x, 1)


def w_batched_dot(k, quick):
    """16384 (quick: 4096) fp16 products of 64x64 matrices, 4 a program, each program one 3-D dot."""
    count, size, per_program = (4096 if quick else 16384), 64, 4
    a = torch.randn(count, size, size, device="cuda", dtype=torch.float16)
    b = torch.randn(count, size, size, device="cuda", dtype=torch.float16)
    c = torch.empty_like(a)
    run = lambda: k.batched_dot_kernel[(count // per_program,)](  # noqa: E731
        a, b, c, BATCH=per_program, M=size, N=size, K=size, num_warps=4)
    check = lambda: torch.testing.assert_close(c, torch.bmm(a, b), rtol=1e-2, atol=5e-2)  # noqa: E731
    return run, check, 2 * count * size ** 3, "TFLOP/s", lambda: torch.bmm(a, b)


def w_matmul_fp64(k, quick):
    """fp64 2048^3 (1024^3 quick): DMMA on both compilers, 64x64x16 blocks, 4 warps."""
    s, bm, bn, bk = (1024 if quick else 2048), 64, 64, 16
    a = torch.randn(s, s, device="cuda", dtype=torch.float64)
    b = torch.randn(s, s, device="cuda", dtype=torch.float64)
    c = torch.empty_like(a)
    run = lambda: k.matmul_fp64_kernel[(s // bm, s // bn)](a, b, c, s, s, s, BLOCK_M=bm, BLOCK_N=bn,  # noqa: E731
                                                           BLOCK_K=bk, num_warps=4)
    check = lambda: torch.testing.assert_close(c, a @ b, rtol=1e-9, atol=1e-9)  # noqa: E731
    return run, check, 2 * s ** 3, "TFLOP/s", lambda: a @ b


# -- small shapes: a few microseconds of work, where per-launch costs show --------------------------

def w_softmax_small(k, quick):
    m, n = 256, 1000
    x = torch.randn(m, n, device="cuda")
    out = torch.empty_like(x)
    run = lambda: k.softmax_kernel[(m,)](out, x, x.stride(0), out.stride(0), m, n, BLOCK_SIZE=1024)  # noqa: E731
    check = lambda: torch.testing.assert_close(out, torch.softmax(x, 1), rtol=1e-5, atol=1e-6)  # noqa: E731
    return run, check, 2 * m * n * 4, "GB/s", lambda: torch.softmax(x, 1)


def w_softplus_small(k, quick):
    n = 1 << 16
    x = torch.randn(n, device="cuda", dtype=torch.float16)
    y = torch.empty_like(x)
    run = lambda: k.softplus_kernel[(cdiv(n, 1024),)](x, y, n, 1.0, 20.0, BLOCK_SIZE=1024)  # noqa: E731
    ref = lambda: torch.nn.functional.softplus(x)  # noqa: E731
    check = lambda: torch.testing.assert_close(y, ref(), rtol=2e-3, atol=2e-3)  # noqa: E731
    return run, check, 2 * n * 2, "GB/s", ref


def w_batchnorm_small(k, quick):
    batch, channels = 256, 256
    x = torch.randn(batch, channels, device="cuda")
    w, b = torch.rand(channels, device="cuda"), torch.rand(channels, device="cuda")
    y = torch.empty_like(x)
    run = lambda: k.batch_norm_fwd_kernel[(channels,)](x, w, b, y, batch, channels, 1e-5, BLOCK_B=256)  # noqa
    ref = lambda: torch.nn.functional.batch_norm(x, None, None, w, b, training=True, eps=1e-5)  # noqa: E731
    check = lambda: torch.testing.assert_close(y, ref(), rtol=1e-4, atol=1e-4)  # noqa: E731
    return run, check, 2 * batch * channels * 4, "GB/s", ref


# -- matmul across shapes and precisions (issue 12, item 2): the tutorial kernel, same tiles for both --

_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32,
           "fp8e4nv": torch.float8_e4m3fn, "fp8e5": torch.float8_e5m2}


def _matmul_workload(M, N, K, dtype, tile=None):
    def workload(k, quick):
        torch_dtype = _DTYPES[dtype]
        a = torch.randn(M, K, device="cuda").to(torch_dtype)
        b = torch.randn(K, N, device="cuda").to(torch_dtype)
        if dtype.startswith("fp8"):   # K-major B, as Triton's fp8 tutorial and cuBLAS' fp8 GEMM take it
            b = b.T.contiguous().T
        c = torch.empty(M, N, device="cuda", dtype=torch.float16 if dtype.startswith("fp8") else torch_dtype)
        bm, bn, bk = tile or ((128, 128, 32) if dtype == "fp32" else (128, 128, 128 if dtype.startswith("fp8") else 64))
        run = lambda: k.matmul_kernel[(cdiv(M, bm) * cdiv(N, bn),)](  # noqa: E731
            a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
            BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, num_warps=8, num_stages=3)
        ref32 = lambda: (a.float() @ b.float())  # noqa: E731
        # tf32: 10-bit input mantissas; fp8: the tensor cores' fp8 accumulation keeps ~14 bits, and
        # the fp16 output rounds sums near 1000 by 0.5
        tol = {"fp32": 2e-2 * K ** 0.5 / 8, "fp8e4nv": 1.5, "fp8e5": 1.5}.get(dtype, 0.5)
        check = lambda: torch.testing.assert_close(c.float(), ref32(), rtol=2e-2, atol=tol)  # noqa: E731
        if dtype.startswith("fp8"):
            one = torch.tensor(1.0, device="cuda")
            torch_fn = lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.float16)  # noqa
        else:
            torch_fn = lambda: a @ b  # noqa: E731
        return run, check, 2 * M * N * K, "TFLOP/s", torch_fn
    return workload


MATMUL_SHAPES = [(256, 256, 256, "fp16"), (512, 512, 512, "fp16"), (1024, 1024, 1024, "fp16"),
                 (2048, 2048, 2048, "fp16"), (8192, 8192, 8192, "fp16"), (1000, 1000, 1000, "fp16"),
                 (3000, 2000, 1500, "fp16"), (4096, 4096, 4096, "bf16"), (4096, 4096, 4096, "fp32"),
                 (4096, 4096, 4096, "fp8e4nv"), (4096, 4096, 4096, "fp8e5")]

WORKLOADS = {"add": w_add, "softmax": w_softmax, "layernorm": w_layernorm, "matmul": w_matmul,
             "attention": w_attention, "attention_masked": w_attention_masked,
             "cumsum": w_cumsum, "scan_linrec": w_scan_linrec, "sort": w_sort, "batched_dot": w_batched_dot, "matmul_fp64": w_matmul_fp64,
             "softmax_small": w_softmax_small, "softplus_small": w_softplus_small,
             "batchnorm_small": w_batchnorm_small}
WORKLOADS.update({f"matmul_{M}x{N}x{K}_{dt}": _matmul_workload(M, N, K, dt) for M, N, K, dt in MATMUL_SHAPES})
# the tile Triton's tutorial autotuner picks for large fp16 GEMMs on Hopper (both compilers get it)
WORKLOADS["matmul_4096x4096x4096_fp16_tile128x256"] = _matmul_workload(4096, 4096, 4096, "fp16", (128, 256, 64))
WORKLOADS["matmul_4096x4096x4096_bf16_tile128x256"] = _matmul_workload(4096, 4096, 4096, "bf16", (128, 256, 64))


def launch_us(kernels) -> dict:
    """Wall-clock microseconds per launch, host side, of a cached one-program kernel for each
    compiler in `kernels`, and of a plain PyTorch elementwise op on one element (`x.add_(1)`, key
    "torch": the launch cost users compare a kernel call with, issue 12 item 4). Seven rounds of 2000
    launches of each, interleaved (the order rotates each round) so that a neighbour's burst or a
    clock change on the shared host hits all alike; the median round of each."""
    x = torch.zeros(1, device="cuda")
    calls = {flavour: (lambda k=k: k.tiny_kernel[(1,)](x)) for flavour, k in kernels.items()}
    calls["torch"] = lambda: x.add_(1)
    for call in calls.values():
        for _ in range(100):
            call()
    torch.cuda.synchronize()
    n, runs, order = 2000, {name: [] for name in calls}, list(calls)
    for round_ in range(7):
        for name in order[round_ % len(order):] + order[:round_ % len(order)]:
            call = calls[name]
            t0 = time.perf_counter()
            for _ in range(n):
                call()
            runs[name].append((time.perf_counter() - t0) / n * 1e6)
            torch.cuda.synchronize()
    return {name: statistics.median(values) for name, values in runs.items()}


@contextlib.contextmanager
def _empty_caches():
    """Both compilers' disk caches pointed at a new empty folder, so that a compile is a compile even
    when an earlier run on this machine left the kernel in the usual cache."""
    import triton
    knobs = getattr(triton, "knobs", None)
    saved = os.environ.get("TILEJIT_CACHE_DIR"), os.environ.get("TRITON_CACHE_DIR"), knobs and knobs.cache.dir
    with tempfile.TemporaryDirectory(prefix="compile-bench-") as folder:
        os.environ["TILEJIT_CACHE_DIR"] = os.path.join(folder, "tilejit")
        os.environ["TRITON_CACHE_DIR"] = os.path.join(folder, "triton")
        if knobs is not None:   # Triton >= 3.4 reads its knobs, not the environment, once set up
            knobs.cache.dir = os.environ["TRITON_CACHE_DIR"]
        try:
            yield
        finally:
            for name, value in zip(("TILEJIT_CACHE_DIR", "TRITON_CACHE_DIR"), saved):
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
            if knobs is not None:
                knobs.cache.dir = saved[2]


def compile_ms(k) -> float:
    """Median milliseconds to compile a new specialization of vector add in a warm process.

    Both compilers get a new empty disk cache (an earlier run on this machine may have left these
    kernels in the usual one), then compile one specialization untimed: Triton builds and caches its
    C launcher per signature there, which a new specialization of a known kernel does not redo."""
    def first_call(n, block) -> float:
        x = torch.zeros(n, device="cuda")
        t0 = time.perf_counter()
        k.add_kernel[(1,)](x, x, x, n, BLOCK_SIZE=block)  # a new constexpr: a new compile
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) * 1e3

    with _empty_caches():
        first_call(4099, 32)
        return statistics.median(first_call(4096 + tag, 64 << (tag % 4)) for tag in range(1, 6))


def _disassembler():
    """cuobjdump (tilejit's own search: beside ptxas, PATH, the wheels, CUDA_HOME, Triton's copy)."""
    from tilejit_nvidia.disassembly import find_cuobjdump
    return find_cuobjdump()


def dump_assembly(kernels, names, quick, directory):
    """Every stage of each workload's kernel, from both compilers, into `directory` (SASS too when a
    disassembler is found): the material for comparing tilejit's code with Triton's."""
    os.makedirs(directory, exist_ok=True)
    cuobjdump = _disassembler()
    for name in names:
        for flavour, k in kernels.items():
            try:
                compiled = WORKLOADS[name](k, quick)[0]()
                torch.cuda.synchronize()
                for stage, text in compiled.asm.items():
                    path = os.path.join(directory, f"{name}.{flavour}.{stage}")
                    mode = "wb" if isinstance(text, bytes) else "w"
                    with open(path, mode) as f:
                        f.write(text)
                    if stage == "cubin" and cuobjdump:
                        sass = subprocess.run([cuobjdump, "-sass", path], capture_output=True, text=True)
                        with open(path + ".sass", "w") as f:
                            f.write(sass.stdout + sass.stderr)
                        usage = subprocess.run([cuobjdump, "-res-usage", path], capture_output=True, text=True)
                        with open(path + ".resources", "w") as f:   # registers, stack (spills), shared
                            f.write(usage.stdout + usage.stderr)
                        print(f"[{flavour}] {name}: " + " ".join(line.strip() for line in usage.stdout.splitlines()
                                                                  if "REG" in line))
                meta = compiled.metadata
                meta = meta._asdict() if hasattr(meta, "_asdict") else dict(meta)
                with open(os.path.join(directory, f"{name}.{flavour}.metadata"), "w") as f:
                    f.write(repr(meta))
            except Exception as exc:  # keep dumping the others
                print(f"[{flavour}] dump of {name} failed: {type(exc).__name__}: {exc}", file=sys.stderr)


def profile_launch(k, directory):
    """Where a cached tilejit launch spends its time: the JIT path, `CompiledKernel.run` and the
    launcher alone (each timed apart), and a cProfile listing of the full path."""
    x = torch.zeros(1, device="cuda")
    compiled = k.tiny_kernel[(1,)](x)
    launcher = compiled.launcher
    launch = getattr(launcher, "launch", launcher)
    n = 5000
    lines = []
    calls = [("jit path", lambda: k.tiny_kernel[(1,)](x)),
             ("CompiledKernel.run", lambda: compiled.run((1, 1, 1), (x,))),
             ("launcher alone", lambda: launch((1, 1, 1), (x,)))]
    try:   # the floor: the bindings' cuLaunchKernel alone, on arguments packed once
        cu_launch, function, _, params, _ = next(iter(launcher._local.state.entries.values()))
        stream = torch.cuda.current_stream().cuda_stream
        calls.append(("cuLaunchKernel alone", lambda: cu_launch(function, 1, 1, 1, launcher.block_x, 1, 1, 0,
                                                               stream, params, 0)))
    except Exception as exc:  # noqa: BLE001 - the floor is optional (another launcher's internals)
        lines.append(f"cuLaunchKernel alone: unavailable ({exc})")
    for label, call in calls:   # host time only: the GPU catches up outside the timed loops
        lines.append(f"{label}: {loop_us(call, n, warmup=200, sync_inside=False):.2f} us")
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(n):
        k.tiny_kernel[(1,)](x)
    profiler.disable()
    torch.cuda.synchronize()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(25)
    text = "\n".join(lines) + "\n\n" + out.getvalue()
    print("\n".join(lines))
    with open(os.path.join(directory, "launch_profile.txt"), "w") as f:
        f.write(text)


def loop_us(fn, n=500, warmup=20, sync_inside=True) -> float:
    """Microseconds per call of `fn` called back to back n times, the best of 3 loops (wall clock).
    With `sync_inside` the loop's closing sync is timed too: for small shapes, what a caller sees,
    whichever of the host's launch or the GPU's work is slower; without it, the host's side alone."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        if sync_inside:
            torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t0) / n * 1e6)
        torch.cuda.synchronize()
    return best


def checked_run(k, name, quick):
    """The workload's launch function for one compiler after its result was checked against PyTorch."""
    run, check, *_ = WORKLOADS[name](k, quick)
    run()
    torch.cuda.synchronize()
    check()
    return run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller sizes")
    ap.add_argument("--only", default=",".join(WORKLOADS))
    ap.add_argument("--dump", metavar="DIR", help="also write both compilers' assembly of each workload "
                    "(and a launch profile) into DIR")
    args = ap.parse_args()
    os.environ.setdefault("TILEJIT_CACHE_DIR", "/tmp/tilejit-bench-cache")
    device = torch.cuda.get_device_name()
    import triton
    kernels = {"tilejit": load_kernels("tilejit"), "triton": load_kernels("triton")}
    if args.dump:
        dump_assembly(kernels, args.only.split(","), args.quick, args.dump)
        profile_launch(kernels["tilejit"], args.dump)
    rows = []
    for name in args.only.split(","):
        runs = {}
        for flavour, k in kernels.items():
            try:
                runs[flavour] = checked_run(k, name, args.quick)
            except Exception as exc:  # report, keep going with the other workloads
                print(f"[{flavour}] {name} failed: {type(exc).__name__}: {str(exc)[:400]}", file=sys.stderr)
                traceback.print_exc(limit=3)
        _, _, work, unit, torch_fn = WORKLOADS[name](kernels["triton"], args.quick)
        scale = 1e-9 if unit == "GB/s" else 1e-12
        ms = bench_interleaved(dict(runs, torch=torch_fn))
        res = {f: (work / (ms[f] * 1e-3) * scale if ms.get(f) else None) for f in ("tilejit", "triton", "torch")}
        torch_cell = f"{res['torch']:.0f} {unit}" if res["torch"] else "n/a"
        tj, tr = res["tilejit"], res["triton"]
        ratio = f"{tj / tr:.2f}" if tj and tr else "n/a"
        digits = 1 if unit == "TFLOP/s" and max(tj or 0, tr or 0) < 100 else 0
        rows.append([name, f"{tj:.{digits}f} {unit}" if tj else "failed", f"{tr:.{digits}f} {unit}" if tr else "failed",
                     torch_cell, ratio, device])
        if name.endswith("_small"):   # the same call back to back: us per call (lower is better)
            per_call = {f: loop_us(WORKLOADS[name](k, args.quick)[0]) if res[f] else None for f, k in kernels.items()}
            t_us = loop_us(torch_fn)
            tj, tr = per_call["tilejit"], per_call["triton"]
            rows.append([f"{name} (us/call, back to back)", f"{tj:.1f}" if tj else "failed", f"{tr:.1f}" if tr else "failed",
                         f"{t_us:.1f}", f"{tr / tj:.2f}" if tj and tr else "n/a", device])
    launches = launch_us(kernels)
    tj, tr = launches["tilejit"], launches["triton"]
    rows.append(["launch (cached, us)", f"{tj:.1f}", f"{tr:.1f}", f"{launches['torch']:.1f} (x.add_(1))",
                 f"{tj / tr:.2f}", device])
    compiles = {}
    for flavour, k in kernels.items():
        try:
            compiles[flavour] = compile_ms(k)
        except Exception as exc:
            compiles[flavour] = None
            print(f"[{flavour}] compile new specialization failed: {exc}", file=sys.stderr)
    tj, tr = compiles["tilejit"], compiles["triton"]
    rows.append(["compile new specialization (ms)", f"{tj:.1f}" if tj else "failed", f"{tr:.1f}" if tr else "failed",
                 "", f"{tj / tr:.2f}" if tj and tr else "n/a", device])
    print(f"\nTriton {triton.__version__}, torch {torch.__version__}, {device}\n")
    print(markdown_table(["workload", "tilejit", "Triton", "torch", "tilejit/Triton", "device"], rows))


if __name__ == "__main__":
    main()
