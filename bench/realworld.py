"""Real Triton libraries, unchanged, through tilejit and through Triton: results and speed.

    python bench/realworld.py [--impl tilejit|triton|both] [--device cpu|cuda] [--ops rms_norm,...]

The library (Liger-Kernel from PyPI) is imported as its users import it: its modules say
`import triton`, and here that name resolves to tilejit (tilejit.alias_triton() when tilejit has it,
else the import hook of tools/triton_alias.py) or to the real Triton. With --impl both (the default
when Triton is installed) the library is imported twice in one process, once bound to each, and
every op runs on both, forward and backward, on the same inputs:

- each result (output and input gradients) is compared with a plain PyTorch reference written here;
- each op is timed: the first call (compiles included, both compilers' caches empty unless
  --warm-caches), then the median of --reps calls, forward
  and forward+backward (output gradients made once on the device), the implementations timed in
  alternating rounds; with both implementations the speed ratio Triton time / tilejit time is
  printed per op (above 1: tilejit faster). On CUDA that is issue 12's item 5; on the CPU it compares
  the two interpreters;
- on CUDA, the same ratio of device time (`fwd k x`, `f+b k x`): the kernels each call launched,
  summed by torch.profiler over --kernel-reps calls. The wall times above include the host's launch
  work and move with it (the same op has read 0.77 and 1.07 in two runs); the device time measures
  the compiled kernels alone.

The library is found installed (`import liger_kernel`) or as a wheel in --wheels (default
$TILEJIT_WHEELS or /work/scratch/wheels): a pure-Python wheel is importable from the zip itself.
No third-party code is kept in this repository.
"""
from __future__ import annotations

import argparse
import glob
import os
import statistics
import sys
import tempfile
import time
import traceback
import zipfile
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from realworld_cases import CASES  # noqa: E402

LIBRARY_MODULES = ("liger_kernel",)


# ----------------------------------------------------------------------------------------------
# one copy of the library per implementation, in one process


class LibraryCopy:
    """The modules of `liger_kernel.ops.*` imported with `triton` bound to one implementation.
    `with copy:` puts that copy's `triton*` and `liger_kernel*` modules back into sys.modules, and
    its import hooks into sys.meta_path, for the imports the library (and Triton) do at call time."""

    def __init__(self, impl: str, op_modules, lenient: bool = False):
        self.impl = impl
        _purge()
        if impl == "tilejit":
            from triton_alias import install_triton_alias
            self.alias = install_triton_alias(lenient=lenient)
        else:
            from triton_alias import remove_triton_alias
            remove_triton_alias()
            self.alias = "real triton"
        import importlib
        self.ops = {}
        self.errors = {}
        for name in op_modules:
            try:
                self.ops[name] = importlib.import_module(f"liger_kernel.ops.{name}")
            except Exception as exc:  # noqa: BLE001 (a module that does not import is reported per op)
                self.errors[name] = f"import: {type(exc).__name__}: {exc}"
        import triton
        self.version = getattr(triton, "__version__", "?")
        self.triton_file = getattr(triton, "__file__", "?")
        self.modules = {k: v for k, v in sys.modules.items() if _ours(k)}
        self.meta_path = list(sys.meta_path)  # with or without the alias hook

    def __enter__(self):
        _purge()
        sys.modules.update(self.modules)
        sys.meta_path[:] = self.meta_path
        return self

    def __exit__(self, *exc):
        return False


def _ours(name: str) -> bool:
    return any(name == m or name.startswith(m + ".") for m in ("triton",) + LIBRARY_MODULES)


def _purge():
    for name in [k for k in sys.modules if _ours(k)]:
        del sys.modules[name]


def find_library(wheels: str) -> str:
    """Make `liger_kernel` importable; returns where it comes from."""
    try:
        import importlib.util
        spec = importlib.util.find_spec("liger_kernel")
        if spec is not None:
            return str(Path(spec.origin).parent)
    except ImportError:
        pass
    found = sorted(glob.glob(os.path.join(wheels, "liger_kernel-*.whl")))
    if not found:
        sys.exit(f"liger_kernel is not installed and no liger_kernel-*.whl in {wheels} "
                 "(pip download --no-deps liger-kernel -d DIR)")
    # unpacked once (zipimport does not handle the namespace packages the wheel has)
    target = Path(tempfile.gettempdir()) / "tilejit-realworld" / Path(found[-1]).stem
    if not (target / "liger_kernel").is_dir():
        with zipfile.ZipFile(found[-1]) as whl:
            whl.extractall(target)
    sys.path.insert(0, str(target))
    return found[-1]


# ----------------------------------------------------------------------------------------------
# running


def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def run_once(fn, inputs, grad_seed=0):
    """Forward and backward of fn on fresh leaf copies of `inputs`: (outputs, input grads)."""
    leaves = [x.detach().clone().requires_grad_(x.requires_grad) for x in inputs]
    outs = _as_tuple(fn(*leaves))
    gen = torch.Generator(device="cpu").manual_seed(grad_seed)
    loss = 0
    for o in outs:
        if isinstance(o, torch.Tensor) and o.is_floating_point() and o.requires_grad:
            weight = torch.randn(o.shape, generator=gen).to(device=o.device, dtype=o.dtype)
            loss = loss + (o * weight).sum()
    if isinstance(loss, torch.Tensor):
        loss.backward()
    grads = tuple(x.grad for x in leaves if x.requires_grad)
    return tuple(o.detach() for o in outs if isinstance(o, torch.Tensor)), grads


def compare(got, want, tol) -> str | None:
    """None when every tensor matches (relative to the reference's scale), else what differs."""
    if len(got) != len(want):
        return f"{len(got)} tensors, reference {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        if g is None or w is None:
            if (g is None) != (w is None):
                return f"tensor {i}: {'no gradient' if g is None else 'unexpected gradient'}"
            continue
        g, w = g.float().cpu(), w.float().cpu()
        if g.shape != w.shape:
            return f"tensor {i}: shape {tuple(g.shape)} vs {tuple(w.shape)}"
        err = (g - w).abs().max().item() / max(w.abs().max().item(), 1e-6)
        if not err <= tol:
            return f"tensor {i}: max rel err {err:.2e} > {tol:g}"
    return None


def _event_ms(fn) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def time_interleaved(timers: dict, device, reps, rounds=5) -> dict:
    """{name: median seconds} of each (library copy, callable), timed in alternation (`rounds` rounds
    of reps/rounds calls each, inside the copy's `with`, after one warm-up call each), so that a
    burst of a neighbour on this shared host or GPU falls on every implementation alike."""
    for lib, fn in timers.values():
        with lib:
            fn()
    if device == "cuda":
        torch.cuda.synchronize()
    per_round = max(1, reps // rounds)
    times = {name: [] for name in timers}
    names = list(timers)
    for round_ in range(rounds if reps >= rounds else 1):
        # each round starts with the next implementation: none always follows the same one (a GPU
        # at its power limit runs the next kernels at lower clocks for a while)
        for name in names[round_ % len(names):] + names[:round_ % len(names)]:
            lib, fn = timers[name]
            with lib:
                for _ in range(per_round):
                    if device == "cuda":
                        times[name].append(_event_ms(fn) / 1e3)
                    else:
                        t0 = time.perf_counter()
                        fn()
                        times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(t) for name, t in times.items()}


def kernel_seconds(timer, reps) -> dict:
    """{kernel: device seconds per call} of the kernels one call of `timer` ((lib, fn)) launches,
    from torch.profiler over `reps` calls (after the timing's warm-up, so nothing compiles)."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile
    lib, fn = timer
    with lib:
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(reps):
                fn()
            torch.cuda.synchronize()
    # kernels, copies and fills only: a host-side op's row would count its kernels twice
    return {e.key: e.device_time_total / reps / 1e6 for e in prof.key_averages()
            if e.device_type == DeviceType.CUDA and e.device_time_total > 0}


def fwd_bwd_timer(call, inputs):
    """Forward and backward on leaves made once, with the output gradients made once on the device:
    the timed call runs the library's kernels and autograd's bookkeeping, not the host-side random
    gradients of `run_once` (~100 ms at the benchmark shapes, which hid the kernels)."""
    leaves = [x.detach().clone().requires_grad_(x.requires_grad) for x in inputs]
    outs = [o for o in _as_tuple(call(*leaves))
            if isinstance(o, torch.Tensor) and o.is_floating_point() and o.requires_grad]
    grads = [torch.randn_like(o) for o in outs]

    def run():
        for x in leaves:
            x.grad = None
        result = [o for o in _as_tuple(call(*leaves))
                  if isinstance(o, torch.Tensor) and o.is_floating_point() and o.requires_grad]
        if result:
            torch.autograd.backward(result, grads)
    return run


def _reference_inputs(inputs, device):
    """The inputs the PyTorch reference runs on: on the CPU, 16-bit floats in fp32, since torch's CPU
    bf16 kernels accumulate in bf16 (layer_norm's weight gradient over 4096 rows is 8% off fp32's,
    where Liger sums in fp32); on CUDA the inputs themselves."""
    if device != "cpu":
        return inputs
    return [x.detach().float().requires_grad_(x.requires_grad) if x.dtype in (torch.bfloat16, torch.float16) else x
            for x in inputs]


def run_case(case, lib, inputs, device, reps):
    """{'status': 'ok'|'wrong'|'error', 'detail', 'first', 'timers'} for one implementation; `timers`
    ({'fwd': (lib, fn), 'fwdbwd': (lib, fn)}: call fn inside `with lib`) when the results are right."""
    if case.module in lib.errors:
        return {"status": "error", "detail": lib.errors[case.module]}
    module = lib.ops[case.module]
    with lib:
        try:
            t0 = time.perf_counter()
            outs, grads = run_once(lambda *xs: case.call(module, *xs), inputs)
            if device == "cuda":
                torch.cuda.synchronize()
            first = time.perf_counter() - t0
        except Exception as exc:  # noqa: BLE001 (any failure of the library is a result)
            tb = traceback.extract_tb(exc.__traceback__)
            where = next((f"{Path(fr.filename).name}:{fr.lineno}" for fr in reversed(tb)
                          if "liger_kernel" in fr.filename), "?")
            msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            return {"status": "error", "detail": f"{type(exc).__name__}: {msg[:300]} (liger {where})"}
        ref_outs, ref_grads = run_once(case.ref, _reference_inputs(inputs, device))
        bad = compare(outs, ref_outs, case.tol) or compare(grads, ref_grads, case.tol)
        res = {"status": "wrong" if bad else "ok", "detail": bad or "", "first": first}
        if reps and not bad:
            call = lambda *xs: case.call(module, *xs)  # noqa: E731
            leaves = [x.detach().clone().requires_grad_(x.requires_grad) for x in inputs]
            fwdbwd = fwd_bwd_timer(call, inputs)

            def fwd():
                with torch.no_grad():
                    call(*leaves)
            res["timers"] = {"fwd": (lib, fwd), "fwdbwd": (lib, fwdbwd)}
        return res


def _kernel_breakdown(triton: dict, tilejit: dict, below: float = 0.95) -> str:
    """Lines under an op's row naming each kernel of its forward+backward, with its device
    microseconds (tilejit, Triton) and ratio, when the op's device-time ratio is under `below`."""
    if sum(triton.values()) >= below * sum(tilejit.values()):
        return ""
    lines = [f"\n    {name[:60]:60} {tilejit.get(name, 0) * 1e6:9.1f} us ({triton.get(name, 0) * 1e6:.1f})"
             f" {_ratio(triton.get(name, 0), tilejit.get(name, 0))}"
             for name in sorted(set(triton) | set(tilejit), key=lambda n: -max(triton.get(n, 0), tilejit.get(n, 0)))]
    return "".join(lines)


def _tuned_configs(lib) -> dict:
    """{kernel name: its autotuner's chosen config} over the library copy's modules: where a kernel's
    ratio is low, whether the two compilers picked the same config says where to look."""
    found = {}
    for module in list(lib.modules.values()):
        for value in list(vars(module).values()):
            config = getattr(value, "best_config", None)
            fn = getattr(value, "fn", None)
            while fn is not None and not hasattr(fn, "__name__"):
                fn = getattr(fn, "fn", None)
            if config is not None and fn is not None:
                found[fn.__name__] = str(config)
    return found


def _config_lines(libs, kernels) -> str:
    """Lines naming the config each compiler's autotuner chose, for the autotuned ones of `kernels`."""
    chosen = [_tuned_configs(lib) for lib in libs]
    return "".join(f"\n    {name[:40]:40} config triton: {chosen[0][name]} | tilejit: {chosen[1].get(name, '-')}"
                   for name in sorted(chosen[0]) if len(chosen) == 2 and name in kernels)


def _ratio(triton_s: float, tilejit_s: float) -> str:
    return f"{triton_s / tilejit_s:.2f}" if tilejit_s > 0 else "-"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--impl", choices=("tilejit", "triton", "both"), default=None,
                    help="default: both when Triton is installed, else tilejit")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--ops", help="comma-separated op names (default: all)")
    ap.add_argument("--dtype", default=None, help="float32 (CPU default) or bfloat16/float16 (CUDA default bf16)")
    ap.add_argument("--big", action="store_true", help="benchmark shapes (default on CUDA)")
    ap.add_argument("--small", action="store_true", help="small shapes even on CUDA")
    ap.add_argument("--reps", type=int, default=None, help="timed repetitions (CUDA 50, CPU 1)")
    ap.add_argument("--breakdown-below", type=float, default=0.95,
                    help="list an op's kernels when its kernel-time ratio is under this (a large value lists all)")
    ap.add_argument("--kernel-reps", type=int, default=10,
                    help="calls profiled for the device-time ratios (CUDA; 0: none)")
    ap.add_argument("--torch-first", action="store_true",
                    help="import torch._dynamo before `triton` is bound (torch's inductor probes "
                         "triton.backends.compiler / triton.compiler.compiler at import)")
    ap.add_argument("--lenient", action="store_true",
                    help="diagnostic: Triton names tilejit lacks become placeholders that raise when "
                         "used (tools/triton_alias.py), so one missing name does not stop every op")
    ap.add_argument("--wheels", default=os.environ.get("TILEJIT_WHEELS", "/work/scratch/wheels"))
    ap.add_argument("--warm-caches", action="store_true",
                    help="keep the compilers' own cache folders (default: an empty one each, so that the "
                         "first call compiles on both)")
    args = ap.parse_args(argv)

    if not args.warm_caches:
        for var in ("TRITON_CACHE_DIR", "TILEJIT_CACHE_DIR"):
            os.environ[var] = tempfile.mkdtemp(prefix=var.split("_")[0].lower() + "-cache-")
    if args.device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"  # Triton's interpreter; tilejit reads the same switch
    where = find_library(args.wheels)
    impls = [args.impl] if args.impl and args.impl != "both" else ["triton", "tilejit"]
    if args.impl is None:
        import importlib.util
        if importlib.util.find_spec("triton") is None:
            impls = ["tilejit"]
    cases = [c for c in CASES if not args.ops or c.name in args.ops.split(",")]
    big = (args.device == "cuda" or args.big) and not args.small
    dtype = getattr(torch, args.dtype) if args.dtype else (torch.bfloat16 if args.device == "cuda" else torch.float32)
    reps = args.reps if args.reps is not None else (50 if args.device == "cuda" else 1)
    if dtype in (torch.bfloat16, torch.float16):
        for c in cases:
            c.tol = max(c.tol, 3e-2)

    if args.torch_first:
        import importlib
        importlib.import_module("torch._dynamo")
    libs = [LibraryCopy(impl, sorted({c.module for c in cases}), args.lenient) for impl in impls]
    print(f"library: {where}")
    for lib in libs:
        print(f"{lib.impl:8} -> triton {lib.version} ({lib.alias}; {lib.triton_file})")
    print(f"device {args.device}, dtype {str(dtype).replace('torch.', '')}, {'benchmark' if big else 'small'} shapes,"
          f" {reps} timed reps\n")

    header = f"{'op':28}" + "".join(f"{lib.impl:>10} {'1st s':>7} {'fwd ms':>9} {'f+b ms':>9}" for lib in libs)
    kernel_ratios = len(libs) == 2 and args.device == "cuda" and args.kernel_reps > 0
    if len(libs) == 2:
        header += f" {'fwd x':>6} {'f+b x':>6}"
    if kernel_ratios:
        header += f" {'fwd k x':>8} {'f+b k x':>8}"
    print(header)
    if len(libs) == 2:
        print("(x = Triton time / tilejit time: above 1 tilejit is faster; 1st = first call, compiles included;"
              + (" k x: the same ratio of the kernels' device time)" if kernel_ratios else ")"))
    failures = []
    for case in cases:
        torch.manual_seed(0)
        inputs = case.make(args.device, case.dtype or dtype, big)
        row = f"{case.name:28}"
        results = [run_case(case, lib, inputs, args.device, reps) for lib in libs]
        timed = [(i, r) for i, r in enumerate(results) if "timers" in r]
        for kind in ("fwd", "fwdbwd") if timed else ():   # nothing to time when every implementation failed
            got = time_interleaved({i: r["timers"][kind] for i, r in timed}, args.device, reps)
            for i, r in timed:
                r[kind] = got[i]
                if kernel_ratios:
                    r[kind + "_kernels"] = kernel_seconds(r["timers"][kind], args.kernel_reps)
        for lib, res in zip(libs, results):
            first = f"{res['first']:7.2f}" if "first" in res else f"{'-':>7}"
            fwd = f"{res['fwd'] * 1e3:9.3f}" if "fwd" in res else f"{'-':>9}"
            fb = f"{res['fwdbwd'] * 1e3:9.3f}" if "fwdbwd" in res else f"{'-':>9}"
            row += f"{res['status']:>10} {first} {fwd} {fb}"
            if res["status"] != "ok":
                failures.append(f"{case.name} [{lib.impl}]: {res['status']}: {res['detail']}")
        if len(results) == 2 and all("fwd" in r for r in results):
            row += f" {results[0]['fwd'] / results[1]['fwd']:6.2f} {results[0]['fwdbwd'] / results[1]['fwdbwd']:6.2f}"
            if kernel_ratios:
                kinds = ("fwd_kernels", "fwdbwd_kernels")
                row += "".join(f" {_ratio(sum(results[0][k].values()), sum(results[1][k].values())):>8}" for k in kinds)
                breakdown = _kernel_breakdown(results[0]["fwdbwd_kernels"], results[1]["fwdbwd_kernels"],
                                              args.breakdown_below)
                row += breakdown + (_config_lines(libs, set(results[0]["fwdbwd_kernels"])) if breakdown else "")
        print(row, flush=True)
    if failures:
        print("\nnot ok:")
        for line in failures:
            print("  " + line)
    return 1 if failures else 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # skips Triton's nanobind leak report at interpreter exit (noise, not ours)
