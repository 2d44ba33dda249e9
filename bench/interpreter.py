"""tilejit's interpreter against Triton's own interpreter (TRITON_INTERPRET=1), on the CPU.

Runs the workloads of docs/benchmarks.md ("CPU interpreter") with both, from the same kernel source
(bench/kernels.py), checks every output against NumPy first, and prints a markdown table with
the ratio. Triton's side needs `pip install triton torch` (CPU); without it only tilejit runs.

    python bench/interpreter.py [--reps N] [--only add,softmax,...]
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time

os.environ["TRITON_INTERPRET"] = "1"  # must be set before triton is imported
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from common import load_kernels, markdown_table  # noqa: E402

RNG = np.random.default_rng(0)


def _cdiv(a, b):
    return (a + b - 1) // b


# Each workload: make(np arrays) -> (inputs dict, output names); launch(kernels, arrays, tensorize);
# reference(arrays) -> expected outputs; tolerance.
def vector_add():
    n = 1 << 20
    arrays = {"x": RNG.random(n, dtype=np.float32), "y": RNG.random(n, dtype=np.float32),
              "out": np.zeros(n, np.float32)}

    def launch(k, a):
        k.add_kernel[(_cdiv(n, 1024),)](a["x"], a["y"], a["out"], n, BLOCK_SIZE=1024)
    return arrays, launch, lambda a: {"out": a["x"] + a["y"]}, 0.0


def softmax():
    rows, cols = 1024, 1024
    arrays = {"x": RNG.standard_normal((rows, cols)).astype(np.float32), "out": np.zeros((rows, cols), np.float32)}

    def launch(k, a):
        k.softmax_kernel[(rows,)](a["out"], a["x"], cols, cols, rows, cols, BLOCK_SIZE=1024)

    def reference(a):
        e = np.exp(a["x"] - a["x"].max(1, keepdims=True))
        return {"out": e / e.sum(1, keepdims=True)}
    return arrays, launch, reference, 1e-5


def layer_norm():
    rows, cols = 256, 1024
    arrays = {"x": RNG.standard_normal((rows, cols)).astype(np.float32), "y": np.zeros((rows, cols), np.float32),
              "w": RNG.standard_normal(cols).astype(np.float32), "b": RNG.standard_normal(cols).astype(np.float32)}

    def launch(k, a):
        k.layer_norm_kernel[(rows,)](a["x"], a["y"], a["w"], a["b"], cols, cols, 1e-5, BLOCK_SIZE=1024)

    def reference(a):
        x = a["x"].astype(np.float64)
        norm = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5)
        return {"y": norm * a["w"] + a["b"]}
    return arrays, launch, reference, 1e-4


def matmul():
    m = n = k_ = 256
    arrays = {"a": RNG.standard_normal((m, k_)).astype(np.float16), "b": RNG.standard_normal((k_, n)).astype(np.float16),
              "c": np.zeros((m, n), np.float16)}

    def launch(k, a):
        k.matmul_kernel[(_cdiv(m, 32) * _cdiv(n, 32),)](a["a"], a["b"], a["c"], m, n, k_, k_, 1, n, 1, n, 1,
                                                        BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, GROUP_M=8)
    return arrays, launch, lambda a: {"c": a["a"].astype(np.float32) @ a["b"].astype(np.float32)}, 2e-2


def attention():
    heads, seq, d = 2, 256, 64
    shape = (heads, seq, d)
    arrays = {name: RNG.standard_normal(shape).astype(np.float16) for name in "qkv"}
    arrays["o"] = np.zeros(shape, np.float16)
    scale = 1.0 / np.sqrt(d)

    def launch(k, a):
        k.attention_fwd_kernel[(seq // 32, heads)](a["q"], a["k"], a["v"], a["o"], seq, scale, seq * d, d,
                                                   HEAD_DIM=d, BLOCK_M=32, BLOCK_N=32)

    def reference(a):
        q, kk, v = (a[x].astype(np.float32) for x in "qkv")
        s = q @ kk.transpose(0, 2, 1) * scale
        p = np.exp(s - s.max(-1, keepdims=True))
        return {"o": (p / p.sum(-1, keepdims=True)) @ v}
    return arrays, launch, reference, 2e-2


def tiny_launch():
    arrays = {"x": np.zeros(1, np.float32)}

    def launch(k, a):
        k.tiny_kernel[(1,)](a["x"])
    return arrays, launch, None, 0.0


WORKLOADS = [("vector add 2^20 fp32, BLOCK 1024", "add", vector_add),
             ("row softmax 1024x1024 fp32", "softmax", softmax),
             ("layer norm fwd 256x1024 fp32", "layer_norm", layer_norm),
             ("matmul 256^3 fp16, 32x32x32 tiles", "matmul", matmul),
             ("attention fwd, 2 heads, 256 seq, d=64, 32x32 tiles", "attention", attention),
             ("launch of a cached one-program kernel", "launch", tiny_launch)]


def _time(fn, reps: int, min_seconds: float = 0.0):
    fn()  # warm-up (compilation)
    times = []
    start = time.perf_counter()
    while len(times) < reps or time.perf_counter() - start < min_seconds:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)  # the least-disturbed run: other processes share this machine


def _repeated(fn, count: int):
    if count == 1:
        return fn

    def loop():
        for _ in range(count):
            fn()
    return loop


def _check(label, flavour, arrays, reference, tol, to_numpy):
    if reference is None:
        return
    expected = reference({k: to_numpy(v) for k, v in arrays.items()})
    for name, want in expected.items():
        got = to_numpy(arrays[name]).astype(np.float64)
        if not np.allclose(got, want, rtol=tol, atol=tol):
            raise SystemExit(f"{label}: {flavour} output '{name}' is wrong "
                             f"(max error {np.max(np.abs(got - want)):.3g})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5, help="timed runs of tilejit per workload")
    parser.add_argument("--triton-reps", type=int, default=1, help="timed runs of Triton per workload")
    parser.add_argument("--only", default="", help="comma-separated workload keys")
    parser.add_argument("--launches", type=int, default=5000, help="launches per timed sample of the launch row")
    args = parser.parse_args()
    only = set(filter(None, args.only.split(",")))

    tilejit_kernels = load_kernels("tilejit")
    try:
        import torch
        triton_kernels = load_kernels("triton")
    except ImportError as exc:
        print(f"Triton's interpreter is not available ({exc}); `pip install triton torch` adds it.")
        triton_kernels = torch = None

    rows = []
    for label, key, make in WORKLOADS:
        if only and key not in only:
            continue
        arrays, launch, reference, tol = make()
        is_launch = key == "launch"
        # A launch is timed as a loop of `--launches` launches (per sample), the others one by one.
        loop = args.launches if is_launch else 1
        t_ours = _time(_repeated(lambda: launch(tilejit_kernels, arrays), loop), reps=args.reps) / loop  # noqa: B023
        _check(label, "tilejit", arrays, reference, tol, lambda x: x)
        t_triton = None
        if triton_kernels is not None:
            tensors = {k: torch.from_numpy(v.copy()) for k, v in arrays.items()}
            triton_loop = max(1, loop // 50)  # Triton's interpreter is ~100x slower per launch
            t_triton = _time(_repeated(lambda: launch(triton_kernels, tensors), triton_loop),  # noqa: B023
                             reps=args.triton_reps) / triton_loop
            _check(label, "Triton", tensors, reference, tol, lambda x: x.numpy())
        unit, scale = ("us", 1e6) if is_launch else ("ms", 1e3)
        ours = f"{t_ours * scale:.1f} {unit}"
        theirs = f"{t_triton * scale:.1f} {unit}" if t_triton else "n/a"
        ratio = f"{t_triton / t_ours:.0f}x" if t_triton else "n/a"
        rows.append((label, ours, theirs, ratio))
        print(f"{label}: tilejit {ours}, Triton interpreter {theirs}", file=sys.stderr)
    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"
    print(f"\nCPU interpreter, {machine}, NumPy {np.__version__}\n")
    print(markdown_table(["workload", "tilejit interpreter", "Triton interpreter", "speed-up"], rows))


if __name__ == "__main__":
    main()
