"""Benchmarking and checking helpers, as `triton.testing`: `do_bench`, `assert_close`, `Benchmark`,
`perf_report`.

`do_bench` times with CUDA events when torch with CUDA is available, and with `time.perf_counter`
otherwise (the interpreter, CI). torch and matplotlib are imported only when needed.
"""
from __future__ import annotations

import math
import os
import statistics
import sys
import time

__all__ = ["do_bench", "assert_close", "Benchmark", "perf_report", "Mark"]

_RETURN_MODES = ("min", "max", "mean", "median", "all")


def _cuda_torch():
    """torch when it is installed and sees a CUDA (or ROCm) device, else None."""
    torch = sys.modules.get("torch")
    if torch is None:
        try:
            import torch
        except ImportError:
            return None
    try:
        return torch if torch.cuda.is_available() else None
    except (AttributeError, RuntimeError):
        return None


def summarize_times(times: list, quantiles=None, return_mode: str = "mean"):
    """Reduce timings the way `do_bench` reports them: the requested `quantiles` (one number for one
    quantile), or `return_mode` (min, max, mean, median, or all). Every benchmarker shares this."""
    if quantiles is not None:
        ordered = sorted(times)
        result = [_quantile(ordered, q) for q in quantiles]
        return result[0] if len(result) == 1 else result
    if return_mode == "all":
        return list(times)
    if return_mode == "median":
        return statistics.median(times)
    return {"min": min, "max": max, "mean": statistics.fmean}[return_mode](times)


def _quantile(ordered: list, q: float) -> float:
    """Linear interpolation between closest ranks (what torch.quantile does by default)."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantiles must be in [0, 1], got {q}")
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _clear_grads(grad_to_none):
    for tensor in grad_to_none or ():
        tensor.grad = None


def do_bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean"):
    """Run `fn` about `warmup` ms to warm up, then about `rep` ms timed; return milliseconds (one
    number by `return_mode`, or the requested `quantiles`)."""
    if return_mode not in _RETURN_MODES:
        raise ValueError(f"return_mode must be one of {_RETURN_MODES}, got {return_mode!r}")
    torch = _cuda_torch()
    if torch is not None:
        return _do_bench_cuda(torch, fn, warmup, rep, grad_to_none, quantiles, return_mode)

    # Estimate one call's cost, then size the warm-up and timed loops to the requested budgets.
    fn()
    start = time.perf_counter()
    for _ in range(5):
        fn()
    estimate_ms = max((time.perf_counter() - start) * 1000.0 / 5, 1e-6)
    n_warmup = max(1, int(warmup / estimate_ms))
    n_repeat = max(1, int(rep / estimate_ms))
    for _ in range(n_warmup):
        fn()
    times = []
    for _ in range(n_repeat):
        _clear_grads(grad_to_none)
        begin = time.perf_counter()
        fn()
        times.append((time.perf_counter() - begin) * 1000.0)
    return summarize_times(times, quantiles, return_mode)


def _do_bench_cuda(torch, fn, warmup, rep, grad_to_none, quantiles, return_mode):
    # A buffer larger than L2, written between runs, so every run starts with a cold cache.
    cache = torch.empty(int(256e6 // 4), dtype=torch.int, device="cuda")
    fn()
    torch.cuda.synchronize()
    start_event = torch.cuda.Event(enable_timing=True)
    end_event = torch.cuda.Event(enable_timing=True)
    start_event.record()
    for _ in range(5):
        cache.zero_()
        fn()
    end_event.record()
    torch.cuda.synchronize()
    estimate_ms = max(start_event.elapsed_time(end_event) / 5, 1e-6)
    n_warmup = max(1, int(warmup / estimate_ms))
    n_repeat = max(1, int(rep / estimate_ms))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_repeat)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_repeat)]
    for _ in range(n_warmup):
        fn()
    for i in range(n_repeat):
        _clear_grads(grad_to_none)
        cache.zero_()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    times = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    return summarize_times(times, quantiles, return_mode)


def _to_numpy(value):
    import numpy

    if type(value).__module__.startswith("torch"):
        value = value.detach()
        if str(value.dtype) == "torch.bfloat16":
            value = value.float()
        return value.cpu().numpy()
    return numpy.asarray(value)


def assert_close(x, y, atol=None, rtol=None, err_msg=""):
    """Assert that `x` and `y` (torch tensors, NumPy arrays or scalars) are elementwise close.

    Defaults as `triton.testing.assert_close`: atol 1e-2, rtol 0 (NumPy's rule
    |x - y| <= atol + rtol * |y|); bool arrays must be equal."""
    import numpy

    atol = 1e-2 if atol is None else atol
    rtol = 0.0 if rtol is None else rtol
    x_array, y_array = _to_numpy(x), _to_numpy(y)
    if x_array.shape != y_array.shape and x_array.size != 1 and y_array.size != 1:
        raise AssertionError(f"{err_msg + ': ' if err_msg else ''}shapes differ: {x_array.shape} vs {y_array.shape}")
    if x_array.dtype.kind == "b" and y_array.dtype.kind == "b":
        numpy.testing.assert_array_equal(x_array, y_array, err_msg=err_msg)
        return
    x64 = x_array.astype(numpy.float64)
    y64 = y_array.astype(numpy.float64)
    numpy.testing.assert_allclose(x64, y64, atol=atol, rtol=rtol, equal_nan=True, err_msg=err_msg)


class Benchmark:
    """One benchmark description, as `triton.testing.Benchmark`."""

    def __init__(self, x_names, x_vals, line_arg, line_vals, line_names, plot_name, args=None, xlabel="",
                 ylabel="", x_log=False, y_log=False, styles=None, color=None):
        if len(line_vals) != len(line_names):
            raise ValueError("Benchmark: line_vals and line_names must have the same length")
        self.x_names = list(x_names)
        self.x_vals = list(x_vals)
        self.line_arg = line_arg
        self.line_vals = list(line_vals)
        self.line_names = list(line_names)
        self.plot_name = plot_name
        self.args = dict(args or {})
        self.xlabel = xlabel
        self.ylabel = ylabel
        self.x_log = x_log
        self.y_log = y_log
        self.styles = styles
        self.color = color


class Mark:
    """A benchmark function bound to one or more `Benchmark`s; `.run(...)` measures and reports."""

    def __init__(self, fn, benchmarks):
        self.fn = fn
        self.benchmarks = benchmarks

    def _run_one(self, bench: Benchmark, save_path, show_plots, print_data, diff_col=False, **kwargs):
        rows = []
        for x in bench.x_vals:
            x_args = dict(zip(bench.x_names, x if isinstance(x, (list, tuple)) else [x] * len(bench.x_names)))
            row = [x_args[name] for name in bench.x_names]
            for line_value in bench.line_vals:
                result = self.fn(**x_args, **{bench.line_arg: line_value}, **bench.args, **kwargs)
                row.append(result[0] if isinstance(result, (list, tuple)) else result)
            rows.append(row)
        header = bench.x_names + bench.line_names
        table = _format_table(bench.plot_name, header, rows)
        if print_data:
            print(table)
        if save_path:
            os.makedirs(save_path, exist_ok=True)
            with open(os.path.join(save_path, f"{bench.plot_name}.csv"), "w") as f:
                f.write(",".join(header) + "\n")
                for row in rows:
                    f.write(",".join(str(v) for v in row) + "\n")
        if show_plots or save_path:
            _plot(bench, rows, save_path, show_plots)
        return {"header": header, "rows": rows}

    def run(self, show_plots=False, print_data=False, save_path="", return_df=False, **kwargs):
        results = [self._run_one(b, save_path, show_plots, print_data, **kwargs) for b in self.benchmarks]
        if return_df:
            return results[0] if len(results) == 1 else results
        return None


def _format_table(title: str, header: list, rows: list) -> str:
    cells = [[str(h) for h in header]] + [[f"{v:.6g}" if isinstance(v, float) else str(v) for v in row]
                                          for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = [f"{title}:"] + ["  ".join(cell.rjust(w) for cell, w in zip(row, widths)) for row in cells]
    return "\n".join(lines)


def _plot(bench: Benchmark, rows: list, save_path, show_plots) -> None:
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError("plotting a benchmark needs matplotlib (pip install matplotlib)") from exc
    figure, axes = plt.subplots()
    xs = [row[0] for row in rows]
    first_line = len(bench.x_names)
    for i, name in enumerate(bench.line_names):
        style = bench.styles[i] if bench.styles else None
        kwargs = {"color": style[0], "linestyle": style[1]} if style else {}
        axes.plot(xs, [row[first_line + i] for row in rows], label=name, **kwargs)
    axes.legend()
    axes.set_xlabel(bench.xlabel or bench.x_names[0])
    axes.set_ylabel(bench.ylabel)
    if bench.x_log:
        axes.set_xscale("log")
    if bench.y_log:
        axes.set_yscale("log")
    if save_path:
        figure.savefig(os.path.join(save_path, f"{bench.plot_name}.png"))
    if show_plots:
        plt.show()
    plt.close(figure)


def perf_report(benchmarks):
    """Decorator: `@perf_report(Benchmark(...))` turns a function into a `Mark` with `.run()`."""
    return lambda fn: Mark(fn, benchmarks if isinstance(benchmarks, (list, tuple)) else [benchmarks])
