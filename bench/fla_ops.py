"""fla (flash-linear-attention, `fla-core` on PyPI) chunked ops through tilejit and through Triton.

    python bench/fla_ops.py --fla DIR [--ops gla,retention] [--cap 4] [--reps 20] [--small] [--profile]

DIR holds the unpacked `fla` package and `einops` (pip install --no-deps --target DIR fla-core einops);
no third-party code is kept in this repository. Each compiler runs in a process of its own (`--worker`),
its `import triton` bound to it (tilejit through `tilejit.alias_triton()`), on the same seeded inputs.
Per op: the first call (compiles and autotuning included), then the median of --reps forward calls and
of --reps forward+backward calls, wall time around a synchronised call (fla's ops launch several
kernels and torch ops each, so launch costs count); outputs and input gradients of the two compilers
are compared; --profile adds each kernel's device time (torch.profiler). --cap N keeps the first N
configs of every autotuner for both compilers (fla's full lists take Triton minutes per op).

simple_gla and gated_delta_rule are left out: fla refuses their backward for Triton 3.4-3.7.0 on
Hopper, and tilejit reports Triton's version through the alias.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

OPS = ("gla", "delta_rule", "retention", "linear_attn")


def _bind_triton(impl: str, cap: int) -> None:
    if impl == "tilejit":
        import tilejit
        tilejit.alias_triton()
    import triton
    if impl == "tilejit" and triton.runtime.driver.active.get_current_target().backend == "interpreter":
        # On a machine without a GPU Triton has no active driver, and fla then runs on the CPU. tilejit's
        # interpreter driver names its target "interpreter", which fla would take for a torch device.
        def no_gpu():
            raise RuntimeError("0 active drivers")
        triton.runtime.driver.active.get_current_target = no_gpu
    if cap:
        from triton.runtime import autotuner
        init = autotuner.Autotuner.__init__

        def capped(self, fn, arg_names, configs, *args, **kwargs):
            init(self, fn, arg_names, list(configs)[:cap], *args, **kwargs)
        autotuner.Autotuner.__init__ = capped


def _cases(torch, dev, small):
    import torch.nn.functional as F
    from fla.ops.delta_rule import chunk_delta_rule
    from fla.ops.gla import chunk_gla
    from fla.ops.linear_attn import chunk_linear_attn
    from fla.ops.retention import chunk_retention
    B, T, H, D = (1, 128, 2, 64) if small else (2, 2048, 8, 128)

    def t(*shape, fn=None):
        x = torch.randn(*shape, generator=torch.Generator().manual_seed(len(shape) * 1000 + shape[-1]))
        x = fn(x) if fn is not None else x
        return x.to(dev, torch.bfloat16).requires_grad_(True)

    def l2(x):
        return F.normalize(x, p=2, dim=-1)
    return {
        "gla": (lambda: [t(B, T, H, D), t(B, T, H, D), t(B, T, H, D), t(B, T, H, D, fn=lambda x: F.logsigmoid(x) / 16)],
                lambda q, k, v, g: chunk_gla(q, k, v, g)[0]),
        "delta_rule": (lambda: [t(B, T, H, D, fn=l2), t(B, T, H, D, fn=l2), t(B, T, H, D), t(B, T, H, fn=torch.sigmoid)],
                       lambda q, k, v, beta: chunk_delta_rule(q, k, v, beta)[0]),
        "retention": (lambda: [t(B, T, H, D), t(B, T, H, D), t(B, T, H, D)],
                      lambda q, k, v: chunk_retention(q, k, v)[0]),
        "linear_attn": (lambda: [t(B, T, H, D), t(B, T, H, D), t(B, T, H, D)],
                        lambda q, k, v: chunk_linear_attn(q, k, v)[0]),
    }


def _sync(torch) -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _median_ms(torch, fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        _sync(torch)
        start = time.perf_counter()
        fn()
        _sync(torch)
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2] * 1e3


def _run_op(torch, make, call, args) -> dict:
    """First call, forward and forward+backward times, results and (on CUDA) kernel times of one op."""
    xs = make()
    start = time.perf_counter()
    out = call(*xs)
    grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(1)).to(out.device, out.dtype)
    out.backward(grad)
    _sync(torch)
    row = {"first_s": time.perf_counter() - start, "out": out.detach().float().cpu(),
           "grads": [x.grad.float().cpu() for x in xs]}

    def forward_backward():
        for x in xs:
            x.grad = None
        call(*xs).backward(grad)
    with torch.no_grad():
        row["fwd_ms"] = _median_ms(torch, lambda: call(*xs), args.reps)
    row["fb_ms"] = _median_ms(torch, forward_backward, args.reps)
    if args.profile and torch.cuda.is_available():
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(5):
                forward_backward()
            _sync(torch)
        row["kernels"] = {e.key: e.device_time_total / 5 for e in prof.key_averages()
                          if e.device_time_total > 0 and "at::" not in e.key}
    return row


def worker(args) -> None:
    sys.path.insert(0, args.fla)
    _bind_triton(args.worker, args.cap)
    import torch
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    results = {}
    for name, (make, call) in _cases(torch, dev, args.small).items():
        if name not in args.ops:
            continue
        try:
            row = _run_op(torch, make, call, args)
        except Exception as exc:  # noqa: BLE001 - reported per op
            row = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        results[name] = row
        print(f"{args.worker} {name}: " + (row["error"] if "error" in row else
              f"first {row['first_s']:.1f} s, fwd {row['fwd_ms']:.3f} ms, f+b {row['fb_ms']:.3f} ms"), flush=True)
    torch.save(results, args.out)


def _relative(a, b) -> float:
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-6))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fla", required=True, help="folder holding the fla and einops packages")
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--cap", type=int, default=0, help="first N configs of each autotuner (0: all)")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--small", action="store_true", help="small shapes (the CPU interpreter)")
    ap.add_argument("--profile", action="store_true", help="per-kernel device time (CUDA)")
    ap.add_argument("--impls", default="triton,tilejit")
    ap.add_argument("--save", help="folder to keep each compiler's results in (<impl>.pt)")
    ap.add_argument("--triton-from", help="Triton's results saved by an earlier --save run on this machine, "
                                          "instead of running Triton again (compare tilejit variants)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.ops = args.ops.split(",")
    if args.worker:
        return worker(args)
    import torch
    rows = {}
    if args.triton_from:
        rows["triton"] = torch.load(args.triton_from)
    for impl in args.impls.split(","):
        if impl in rows:
            continue
        folder = args.save or tempfile.mkdtemp(prefix="fla-ops-")
        os.makedirs(folder, exist_ok=True)
        out = os.path.join(folder, f"{impl}.pt")
        cmd = [sys.executable, __file__, "--fla", args.fla, "--ops", ",".join(args.ops), "--cap", str(args.cap),
               "--reps", str(args.reps), "--worker", impl, "--out", out] + ["--small"] * args.small \
            + ["--profile"] * args.profile
        subprocess.run(cmd, check=False)
        rows[impl] = torch.load(out) if os.path.exists(out) else {}
    if set(rows) == {"triton", "tilejit"}:
        print_table(rows, args.ops)


def print_table(rows: dict, ops) -> None:
    print("\n| op | out / grads: max rel. diff | fwd x | f+b x | first call s, tilejit (Triton) |\n|---|---|---|---|---|")
    for name in ops:
        tr, tj = rows["triton"].get(name, {"error": "missing"}), rows["tilejit"].get(name, {"error": "missing"})
        if "error" in tr or "error" in tj:
            print(f"| {name} | Triton: {tr.get('error', 'ok')}; tilejit: {tj.get('error', 'ok')} | | | |")
            continue
        diffs = [_relative(tj["out"], tr["out"])] + [_relative(a, b) for a, b in zip(tj["grads"], tr["grads"])]
        print(f"| {name} | {diffs[0]:.1e} / {max(diffs[1:]):.1e} | {tr['fwd_ms'] / tj['fwd_ms']:.2f} | "
              f"{tr['fb_ms'] / tj['fb_ms']:.2f} | {tj['first_s']:.1f} ({tr['first_s']:.1f}) |")
        for kernel in sorted(tr.get("kernels", {}), key=lambda k: -tr["kernels"][k]):
            if kernel in tj.get("kernels", {}):
                print(f"|   {kernel[:48]} | us: {tj['kernels'][kernel]:.1f} ({tr['kernels'][kernel]:.1f}) | "
                      f"{tr['kernels'][kernel] / tj['kernels'][kernel]:.2f} | | |")


if __name__ == "__main__":
    main()
