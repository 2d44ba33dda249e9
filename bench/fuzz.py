"""Differential fuzzing of tilejit: thousands of generated kernels against a NumPy model of Triton.

    python bench/fuzz.py --seeds 0:10000                   # interpreter vs model + cross-compile
    python bench/fuzz.py --seeds 0:1000 --targets ""       # interpreter only
    python bench/fuzz.py --seeds 0:2000 --gpu              # + tilejit's CUDA backend and Triton on the GPU
    python bench/fuzz.py --seeds 0:400 --simt --targets "" # + the cuda:90 LLVM IR run on this CPU
    TRITON_INTERPRET=1 python bench/fuzz.py --triton-only  # the model against Triton's own interpreter

Each seed is one kernel (tilejit.fuzz.generate). A seed fails when a result differs from the model
beyond its bound, or when anything raises other than a clean CompilationError of a cross-compilation
(those are counted as "rejected"). Failures are printed one per line and, with --jsonl, recorded.
`--gpu` runs each kernel with torch tensors on tilejit's CUDA backend and under `import triton`, and
compares both with the model and with the interpreter. `--simt` compiles each kernel for cuda:90 as a
launch would specialize it (the same arrays and integers) and runs its LLVM IR on the host with
tests/gpu/simt_runner.py (one OS thread per GPU thread; an access the GPU would fault on, misaligned
or outside the arrays, is an error), for the families whose code it can run.
"""
from __future__ import annotations

import argparse
import atexit
import collections
import functools
import json
import os
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for sub in ("core", "backends/interpreter", "backends/nvidia", "backends/amd"):
    path = os.path.join(ROOT, sub)
    if path not in sys.path:
        sys.path.insert(0, path)

from tilejit.fuzz import case as case_module
from tilejit.fuzz import generate, runner


def parse_seeds(text: str) -> range:
    lo, _, hi = text.partition(":")
    return range(int(lo), int(hi)) if hi else range(int(lo), int(lo) + 1)


def torch_runs(case, gpu: bool, with_tilejit: bool, with_triton: bool, interpreted=None) -> list:
    """The case under tilejit (CUDA backend) and/or Triton, on torch tensors; outcomes."""
    import torch
    device = "cuda" if gpu else "cpu"
    to_device = lambda a: torch.from_numpy(a.copy()).to(device)
    to_numpy = lambda t: t.cpu().numpy()
    outcomes = []
    for module, enabled in (("tilejit", with_tilejit), ("triton", with_triton)):
        if not enabled:
            continue
        where = f"{module}-{device}"
        try:
            results = runner.launch(case, runner.load_kernel(case, module), to_device, to_numpy)
            if gpu:
                torch.cuda.synchronize()
        except Exception as exc:
            outcomes.append(runner.Outcome(case.seed, case.family, where, "error", runner._describe(exc)))
            continue
        outcome = runner.check(case, results, where)
        if outcome.status == "ok" and interpreted is not None:
            for arg in case.outputs():  # the same seed on the interpreter: within twice the bound
                problem = case_module.compare(interpreted[arg.name], results[arg.name], 2 * arg.tolerance)
                if problem is not None:
                    outcome = runner.Outcome(case.seed, case.family, where + "-vs-interpreter", "mismatch",
                                             f"{arg.name}: {problem}")
                    break
        outcomes.append(outcome)
    return outcomes


# Families whose cuda:90 code has no inline PTX but the predicated loads and stores simt_runner runs
# (atomics and tl.dot are inline PTX; a kernel calling libdevice or converting to fp8 is "skipped").
SIMT_FAMILIES = ("elementwise", "promotion", "broadcast", "reduce", "scan", "loop", "indexing")


@functools.lru_cache(maxsize=None)
def _simt_runner():
    """tests/gpu/simt_runner.py (a test helper, not part of the package), imported once."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "gpu"))
    try:
        import simt_runner
    finally:
        sys.path.pop(0)
    return simt_runner


def simt_run(case) -> runner.Outcome:
    """The case compiled for cuda:90 with its real arguments' specialization (divisibility by 16 of
    pointers and integers, integers equal to 1 as constants) and its LLVM IR run on the host."""
    simt_runner = _simt_runner()
    from tilejit.errors import CompilationError
    where = "simt-cuda:90"
    if not case.family.startswith(SIMT_FAMILIES):
        return runner.Outcome(case.seed, case.family, where, "skipped", "inline PTX (atomics, tl.dot)")
    arrays = case.fresh_arrays()
    positional, constexprs = case.launch_args(arrays)
    try:
        compiled = runner.load_kernel(case).warmup(*positional, grid=case.grid, target="cuda:90",
                                                   num_warps=case.num_warps, **constexprs)
    except CompilationError as exc:
        return runner.Outcome(case.seed, case.family, where, "rejected", runner._first_line(exc))
    except Exception as exc:
        return runner.Outcome(case.seed, case.family, where, "error", runner._describe(exc))
    values = {a.name: arrays[a.name] if a.kind == "ptr" else a.value for a in case.args}
    names = compiled.runtime_arg_names
    try:
        simt_runner.run(compiled.asm["llir"], [values[n] for n in names], case.num_warps, grid=case.grid,
                        names=names, shared=compiled.metadata.get("shared"))
    except NotImplementedError as exc:
        return runner.Outcome(case.seed, case.family, where, "skipped", str(exc))
    except simt_runner.MemoryFault as exc:
        return runner.Outcome(case.seed, case.family, where, "error", f"MemoryFault: {exc}")
    except Exception as exc:
        return runner.Outcome(case.seed, case.family, where, "error", runner._describe(exc))
    return runner.check(case, {a.name: arrays[a.name] for a in case.outputs()}, where)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0:500", help="LO:HI (HI excluded) or one seed")
    parser.add_argument("--targets", default=",".join(runner.DEFAULT_TARGETS),
                        help='cross-compilation targets, comma-separated ("" for none)')
    parser.add_argument("--family", default=None, help="only this family (elementwise, dot, ...)")
    parser.add_argument("--exclude", default="", help="skip seeds whose family starts with one of these (comma-separated)")
    parser.add_argument("--gpu", action="store_true", help="also run tilejit's CUDA backend and Triton on a GPU")
    parser.add_argument("--no-triton", action="store_true", help="with --gpu: skip Triton")
    parser.add_argument("--simt", action="store_true",
                        help="also run the cuda:90 LLVM IR on this CPU (tests/gpu/simt_runner.py)")
    parser.add_argument("--triton-only", action="store_true",
                        help="only Triton (TRITON_INTERPRET=1 for its CPU interpreter): checks the model itself")
    parser.add_argument("--no-interpreter", action="store_true", help="skip the interpreter run (cross-compile only)")
    parser.add_argument("--compile-time-limit", type=float, default=60.0,
                        help="seconds before a cross-compilation is abandoned as 'slow' (0: none)")
    parser.add_argument("--jsonl", default=None, help="append every non-ok outcome to this file")
    parser.add_argument("--progress", type=int, default=0, help="print the counts every N seeds")
    parser.add_argument("--show", action="store_true", help="print the kernel of every failing seed")
    args = parser.parse_args(argv)
    if "TILEJIT_CACHE_DIR" not in os.environ:  # thousands of one-off kernels: a cache of their own, removed after
        os.environ["TILEJIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="tilejit-fuzz-cache-")
        atexit.register(shutil.rmtree, os.environ["TILEJIT_CACHE_DIR"], True)
    targets = tuple(t for t in args.targets.split(",") if t)
    excluded = tuple(f for f in args.exclude.split(",") if f)
    counts: collections.Counter = collections.Counter()
    failed_seeds = 0
    start = time.time()
    for seed in parse_seeds(args.seeds):
        case = generate(seed, args.family)
        if excluded and case.family.startswith(excluded):
            counts[("(excluded)", case.family.split("-")[0])] += 1
            continue
        if args.triton_only and os.environ.get("TRITON_INTERPRET") == "1" and "bfloat16" in case.body:
            outcomes = [runner.Outcome(seed, case.family, "triton-cpu", "skipped", "Triton's interpreter: no bf16")]
        elif args.triton_only:
            outcomes = torch_runs(case, gpu=bool(os.environ.get("TRITON_INTERPRET") != "1"), with_tilejit=False,
                                  with_triton=True)
        else:
            from tilejit import compiler
            interpreted = None
            outcomes = [] if args.no_interpreter else [runner.run_interpreter(case)]
            if args.gpu:
                try:
                    interpreted = runner.launch(case, runner.load_kernel(case))
                except Exception:
                    interpreted = None
                outcomes += torch_runs(case, True, True, not args.no_triton, interpreted)
            if args.simt:
                outcomes.append(simt_run(case))
            outcomes += [runner.cross_compile(case, t, args.compile_time_limit or None) for t in targets]
            compiler.clear_memory_cache()
        for o in outcomes:
            counts[(o.where, o.status)] += 1
            if o.status not in ("ok", "skipped"):   # skipped ones are counted only
                print(f"seed {o.seed} [{o.family}] {o.where}: {o.status}: {o.detail}", flush=True)
                if args.jsonl:
                    with open(args.jsonl, "a") as f:
                        f.write(json.dumps(o.__dict__) + "\n")
        if any(o.failed for o in outcomes):
            failed_seeds += 1
            if args.show:
                print(case.source("triton"))
        done = seed - parse_seeds(args.seeds).start + 1
        if args.progress and done % args.progress == 0:
            print(f"[{done} seeds, {time.time() - start:.0f} s, {failed_seeds} failed] "
                  + ", ".join(f"{w} {st} {n}" for (w, st), n in sorted(counts.items())), flush=True)
    seeds = len(parse_seeds(args.seeds))
    print(f"\n{seeds} seeds in {time.time() - start:.0f} s; {failed_seeds} failed")
    for (where, status), count in sorted(counts.items()):
        print(f"  {where:28} {status:10} {count}")
    return 1 if failed_seeds else 0


if __name__ == "__main__":
    sys.exit(main())
