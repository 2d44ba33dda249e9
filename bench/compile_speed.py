"""Cold compile time of realistic kernels, tilejit against Triton, cross-compiled for cuda:90 to a cubin.

No GPU is needed: both compilers build every stage down to the cubin (ptxas runs) on the CPU. Each
compiler runs in its own process (`--worker`), so their LLVMs and caches never meet. In a worker, one
small kernel is compiled first (process start-up: imports, LLVM target set-up, libdevice found), then
each kernel is compiled `--reps` times, every time into a fresh, empty cache directory and with the
in-memory cache cleared: a cold compile of a new specialization in a warm process. The table gives
the median wall milliseconds per kernel and the least CPU milliseconds (the process and its ptxas
children: what to compare on a shared machine), their ratios (tilejit / Triton; < 1 is faster), and
the per-stage split (tilejit's `CompiledKernel.stage_times`; Triton's stages timed by a wrapper).

    python bench/compile_speed.py                                   # tilejit only, unless triton imports
    python bench/compile_speed.py --triton-python /path/to/python   # Triton from another environment
    python bench/compile_speed.py --profile /tmp/compile.prof       # cProfile of tilejit's compiles

The kernels are `bench/kernels.py`, the same source for both compilers.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# name: (kernel in bench/kernels.py, signature, constexprs, options)
F32, F16 = "*fp32", "*fp16"
KERNELS = {
    "gelu_masked": ("gelu_masked_kernel", {"x_ptr": F16, "gate_ptr": F16, "out_ptr": F16, "n_elements": "i32",
                                           "limit": "i32"}, {"BLOCK_SIZE": 1024}, {"num_warps": 4}),
    "softmax": ("softmax_kernel", {"out_ptr": F32, "in_ptr": F32, "in_stride": "i32", "out_stride": "i32",
                                   "n_rows": "i32", "n_cols": "i32"}, {"BLOCK_SIZE": 4096}, {"num_warps": 8}),
    "layernorm": ("layer_norm_kernel", {"x_ptr": F16, "y_ptr": F16, "w_ptr": F16, "b_ptr": F16, "stride": "i32",
                                        "n_cols": "i32", "eps": "fp32"}, {"BLOCK_SIZE": 1024}, {"num_warps": 8}),
    "matmul": ("matmul_kernel", {"a_ptr": F16, "b_ptr": F16, "c_ptr": F16, "M": "i32", "N": "i32", "K": "i32",
                                 "stride_am": "i32", "stride_ak": "i32", "stride_bk": "i32", "stride_bn": "i32",
                                 "stride_cm": "i32", "stride_cn": "i32"},
               {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}, {"num_warps": 8, "num_stages": 3}),
    "attention": ("attention_fwd_kernel", {"q_ptr": F16, "k_ptr": F16, "v_ptr": F16, "o_ptr": F16, "seq_len": "i32",
                                           "sm_scale": "fp32", "stride_h": "i32", "stride_s": "i32"},
                  {"HEAD_DIM": 64, "BLOCK_M": 128, "BLOCK_N": 64}, {"num_warps": 4, "num_stages": 2}),
    "cumsum": ("cumsum_row_kernel", {"x_ptr": F32, "y_ptr": F32, "stride": "i32", "n_cols": "i32"},
               {"BLOCK_SIZE": 1024}, {"num_warps": 4}),
}
# The integer arguments of a typical launch of each kernel (bench/gpu.py's shapes). A JIT compiles the
# specialization these values select (`specialize`), so both compilers get that one: the same source
# and the same hints, hence the same code paths (a matmul without alignment hints has no async
# copies and no wgmma, which is not the kernel users compile).
LAUNCH_INTS = {
    "gelu_masked": {"n_elements": 1 << 24, "limit": 1000003},
    "softmax": {"in_stride": 4096, "out_stride": 4096, "n_rows": 4096, "n_cols": 4096},
    "layernorm": {"stride": 8192, "n_cols": 8192},
    "matmul": {"M": 4096, "N": 4096, "K": 4096, "stride_am": 4096, "stride_ak": 1, "stride_bk": 4096,
               "stride_bn": 1, "stride_cm": 4096, "stride_cn": 1},
    "attention": {"seq_len": 4096, "stride_h": 4096 * 64, "stride_s": 64},
    "cumsum": {"stride": 4096, "n_cols": 4096},
}
# The matmul configs of Triton's tutorial: the first call of an autotuned kernel compiles them all.
AUTOTUNE_CONFIGS = [(128, 256, 64, 8, 3), (64, 256, 32, 4, 4), (128, 128, 32, 4, 4), (128, 64, 32, 4, 4),
                    (64, 128, 32, 4, 4), (128, 32, 32, 4, 4), (64, 32, 32, 2, 5), (32, 64, 32, 2, 5)]
WARMUP = ("add_kernel", {"x_ptr": F32, "y_ptr": F32, "out_ptr": F32, "n_elements": "i32"}, {"BLOCK_SIZE": 256}, {})


def _cpu_seconds() -> float:
    """CPU time of this process and its finished children (ptxas): unlike wall time, barely moved
    by other processes on a shared machine."""
    own = time.process_time()
    try:
        import resource
    except ImportError:  # no resource module (Windows): this process only
        return own
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own + children.ru_utime + children.ru_stime


def specialize(sig: dict, constexprs: dict, ints: dict) -> tuple[dict, dict, dict]:
    """(signature, constexprs, attrs) of the specialization a Triton 3.x JIT (and tilejit's) makes for
    a launch: pointers to fresh allocations are 16-byte aligned, an integer equal to 1 becomes the
    constant 1 and one divisible by 16 is marked so (`tt.divisibility`)."""
    signature, constants, attrs = {}, dict(constexprs), {}
    for index, (name, type_string) in enumerate(sig.items()):
        value = ints.get(name)
        if value == 1:
            signature[name], constants[name] = "constexpr", 1
            continue
        signature[name] = type_string
        if type_string.startswith("*") or (value is not None and value % 16 == 0):
            attrs[(index,)] = [["tt.divisibility", 16]]
    signature.update({name: "constexpr" for name in constexprs})
    return signature, constants, attrs


class _Tilejit:
    def __init__(self):
        sys.path.insert(0, HERE)
        from common import load_kernels

        import tilejit
        from tilejit import compiler
        self.kernels = load_kernels("tilejit")
        self.tilejit, self.compiler = tilejit, compiler

    def compile(self, name, sig, constexprs, options, cache_dir, ints=None):
        os.environ["TILEJIT_CACHE_DIR"] = cache_dir
        self.compiler.clear_memory_cache()
        signature, constants, attrs = specialize(sig, constexprs, ints or {})
        src = self.tilejit.ASTSource(getattr(self.kernels, name), signature, constexprs=constants, attrs=attrs)
        start = time.perf_counter()
        kernel = self.tilejit.compile(src, target="cuda:90", options=options)
        total = time.perf_counter() - start
        assert kernel.asm["cubin"], name
        return total, dict(getattr(kernel, "stage_times", {}))


class _Triton:
    def __init__(self):
        sys.path.insert(0, HERE)
        from common import load_kernels

        import triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
        self.kernels = load_kernels("triton")
        self.triton, self.target, self.source = triton, GPUTarget("cuda", 90, 32), ASTSource
        self.stage_times: dict = {}
        self._time_stages()

    def _time_stages(self):
        """Wrap each stage the CUDA backend adds with a timer (Triton has no per-stage timing)."""
        from triton.backends.nvidia.compiler import CUDABackend
        add_stages, times = CUDABackend.add_stages, self.stage_times

        def timed(name, fn):
            def run(*args, **kwargs):
                start = time.perf_counter()
                try:
                    return fn(*args, **kwargs)
                finally:
                    times[name] = time.perf_counter() - start
            return run

        def add_timed_stages(backend, stages, options, *rest, **kwargs):
            add_stages(backend, stages, options, *rest, **kwargs)
            for name in list(stages):
                stages[name] = timed(name, stages[name])

        CUDABackend.add_stages = add_timed_stages

    def compile(self, name, sig, constexprs, options, cache_dir, ints=None):
        os.environ["TRITON_CACHE_DIR"] = cache_dir
        knobs = getattr(self.triton, "knobs", None)
        if knobs is not None:  # Triton >= 3.4 reads its knobs once; point the cache at the new folder too
            knobs.cache.dir = cache_dir
        signature, constants, attrs = specialize(sig, constexprs, ints or {})
        src = self.source(getattr(self.kernels, name), signature, constexprs=constants, attrs=attrs)
        self.stage_times.clear()
        start = time.perf_counter()
        kernel = self.triton.compile(src, target=self.target, options=options)
        total = time.perf_counter() - start
        assert kernel.asm["cubin"], name
        return total, dict(self.stage_times)


def autotune_worker(flavour: str, workers: int) -> dict:
    """Milliseconds to compile every AUTOTUNE_CONFIGS matmul (cold, after a warm-up compile): tilejit
    through `Autotuner.warmup` with `workers` compile threads, Triton one config after another (as its
    autotuner compiles each config when it first times it)."""
    compiler = _Tilejit() if flavour == "tilejit" else _Triton()
    scratch = tempfile.mkdtemp(prefix=f"compile-speed-at-{flavour}-")
    try:
        compiler.compile(*WARMUP, os.path.join(scratch, "warmup"))
        kernel, sig, _, _ = KERNELS["matmul"]
        start = time.perf_counter()
        if flavour == "tilejit":
            tilejit = compiler.tilejit
            os.environ["TILEJIT_CACHE_DIR"] = os.path.join(scratch, "tuned")
            configs = [tilejit.Config({"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "GROUP_M": 8}, num_warps=w,
                                      num_stages=st) for m, n, k, w, st in AUTOTUNE_CONFIGS]
            tuned = tilejit.autotune(configs=configs, key=["M"])(getattr(compiler.kernels, kernel))
            tuned.compile_workers = workers
            with tilejit.target("cuda:90"):
                # type strings for the pointers, the launch's values for the integers (as Triton gets)
                tuned.warmup(*(LAUNCH_INTS["matmul"].get(name, type_string) for name, type_string in sig.items()))
        else:
            for i, (m, n, k, w, st) in enumerate(AUTOTUNE_CONFIGS):
                compiler.compile(kernel, sig, {"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "GROUP_M": 8},
                                 {"num_warps": w, "num_stages": st}, os.path.join(scratch, str(i)), LAUNCH_INTS["matmul"])
        return {"ms": (time.perf_counter() - start) * 1e3, "configs": len(AUTOTUNE_CONFIGS)}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def worker(flavour: str, names: list, reps: int, profile: str | None) -> dict:
    """Compile each kernel `reps` times cold in this process; a JSON-able dict of the times."""
    compiler = _Tilejit() if flavour == "tilejit" else _Triton()
    scratch = tempfile.mkdtemp(prefix=f"compile-speed-{flavour}-")
    results = {}
    try:
        count = [0]

        def fresh():
            count[0] += 1
            return os.path.join(scratch, str(count[0]))

        start = time.perf_counter()
        compiler.compile(*WARMUP, fresh())
        results["_process_first_compile_ms"] = (time.perf_counter() - start) * 1e3
        profiler = None
        if profile:
            import cProfile
            profiler = cProfile.Profile()
            profiler.enable()
        for name in names:
            kernel, sig, constexprs, options = KERNELS[name]
            totals, cpus, stages = [], [], {}
            for _ in range(reps):
                cpu = _cpu_seconds()
                total, stage_times = compiler.compile(kernel, sig, constexprs, options, fresh(), LAUNCH_INTS[name])
                cpus.append((_cpu_seconds() - cpu) * 1e3)
                totals.append(total * 1e3)
                for stage, seconds in stage_times.items():
                    stages.setdefault(stage, []).append(seconds * 1e3)
            results[name] = {"ms": statistics.median(totals), "min_ms": min(totals),
                             "cpu_ms": statistics.median(cpus), "min_cpu_ms": min(cpus),
                             "stages_ms": {s: min(v) for s, v in stages.items()}}
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(profile)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return results


def _run_worker(python: str, flavour: str, names: list, reps: int, profile: str | None) -> dict:
    command = [python, os.path.abspath(__file__), "--worker", flavour, "--only", ",".join(names), "--reps", str(reps)]
    if profile:
        command += ["--profile", profile]
    env = dict(os.environ)
    if flavour == "triton":
        env.pop("PYTHONPATH", None)  # the other environment's own packages, not tilejit's sources
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"the {flavour} worker failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _triton_python(arg: str | None) -> str | None:
    if arg:
        return arg
    try:
        import triton  # noqa: F401
    except ImportError:
        return None
    return sys.executable


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="comma-separated kernels (default: all): " + ", ".join(KERNELS))
    ap.add_argument("--reps", type=int, default=5, help="cold compiles per kernel (the median is reported)")
    ap.add_argument("--triton-python", help="a Python whose environment has Triton (default: this one, if it has)")
    ap.add_argument("--profile", metavar="FILE", help="write a cProfile of tilejit's compiles (not the warm-up)")
    ap.add_argument("--autotune", action="store_true",
                    help="instead: compile the 8 configs of an autotuned matmul (its first call), tilejit with "
                         "1 and --threads compile threads, Triton one by one")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="compile threads for --autotune")
    ap.add_argument("--worker", choices=("tilejit", "triton"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.autotune:
        return autotune_main(args)
    names = args.only.split(",") if args.only else list(KERNELS)
    unknown = [n for n in names if n not in KERNELS]
    if unknown:
        ap.error(f"unknown kernels {unknown}; choose from {list(KERNELS)}")
    if args.worker:
        print(json.dumps(worker(args.worker, names, args.reps, args.profile)))
        return

    ours = _run_worker(sys.executable, "tilejit", names, args.reps, args.profile)
    python = _triton_python(args.triton_python)
    theirs = _run_worker(python, "triton", names, args.reps, None) if python else None
    sys.path.insert(0, HERE)
    from common import markdown_table
    rows = []
    for name in names:
        row = [name]
        for field in ("ms", "min_cpu_ms"):
            mine = ours[name][field]
            other = theirs[name][field] if theirs else None
            row += [f"{mine:.1f}", f"{other:.1f}" if other else "-", f"{mine / other:.2f}" if other else "-"]
        rows.append(row)
    print(markdown_table(["kernel", "tilejit ms", "Triton ms", "ratio", "tilejit CPU ms", "Triton CPU ms",
                          "CPU ratio"], rows))
    first = f"first compile in a new process (add): tilejit {ours['_process_first_compile_ms']:.0f} ms"
    if theirs:
        first += f", Triton {theirs['_process_first_compile_ms']:.0f} ms"
    print(f"\nwall: median of {args.reps} cold compiles per kernel, cuda:90 to cubin; CPU: the least CPU time "
          f"(the process and its ptxas) of those compiles; {first}\n")
    print(stage_table(names, ours, theirs, markdown_table))


def autotune_main(args) -> None:
    if args.worker:
        print(json.dumps(autotune_worker(args.worker, args.threads)))
        return

    def run(python, flavour, threads):
        command = [python, os.path.abspath(__file__), "--autotune", "--worker", flavour, "--threads", str(threads)]
        env = dict(os.environ)
        if flavour == "triton":
            env.pop("PYTHONPATH", None)
        done = subprocess.run(command, capture_output=True, text=True, env=env)
        if done.returncode != 0:
            raise SystemExit(f"the {flavour} worker failed:\n{done.stderr[-4000:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])["ms"]

    rows = [[f"tilejit, {n} compile thread{'s' if n > 1 else ''}", f"{run(sys.executable, 'tilejit', n):.0f}"]
            for n in sorted({1, args.threads})]
    python = _triton_python(args.triton_python)
    if python:
        rows.append(["Triton, one by one", f"{run(python, 'triton', 1):.0f}"])
    sys.path.insert(0, HERE)
    from common import markdown_table
    print(markdown_table([f"compile {len(AUTOTUNE_CONFIGS)} matmul configs, cuda:90 (cold)", "ms"], rows))


def stage_table(names, ours, theirs, markdown_table) -> str:
    """Per-stage wall ms (the least of the reps), 'tilejit / Triton' in each cell."""
    stage_names = list(dict.fromkeys(s for n in names for s in ours[n]["stages_ms"]))
    if theirs:
        stage_names += [s for n in names for s in theirs[n]["stages_ms"] if s not in stage_names]
        stage_names = list(dict.fromkeys(stage_names))
    rows = []
    for name in names:
        row = [name]
        for stage in stage_names:
            mine = ours[name]["stages_ms"].get(stage)
            cell = "-" if mine is None else f"{mine:.1f}"
            if theirs:
                other = theirs[name]["stages_ms"].get(stage)
                cell += " / " + ("-" if other is None else f"{other:.1f}")
            row.append(cell)
        rows.append(row)
    what = "tilejit / Triton" if theirs else "tilejit"
    return markdown_table(["stage ms (" + what + ")"] + stage_names, rows)


if __name__ == "__main__":
    main()
