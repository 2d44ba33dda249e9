"""Triton 3.x runtime behaviour, checked with real kernels on the interpreter: launch metadata and
launch hooks, warmup, `Config.all_kwargs`, autotune's `restore_value`/`reset_to_zero` on arrays,
`heuristics` stacked with `autotune`, and `do_bench` quantiles."""
import numpy as np
import pytest

import tilejit
import tilejit.language as tl
from tilejit.compiler import CompiledKernel
from tilejit.testing import do_bench


@pytest.fixture(autouse=True)
def _interpreter(monkeypatch, tmp_path):
    for knob in ("TILEJIT_TARGET", "TILEJIT_INTERPRET", "TRITON_INTERPRET", "TILEJIT_AUTOTUNE_CACHE"):
        monkeypatch.delenv(knob, raising=False)
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(CompiledKernel, "launch_enter_hook", None)
    monkeypatch.setattr(CompiledKernel, "launch_exit_hook", None)


def _flops(grid, metadata, args):
    return {"name": f"scale_n{args['n']}", "flops": 2 * args["n"], "block": args["BLOCK"]}


@tilejit.jit(launch_metadata=_flops)
def scale(x_ptr, out_ptr, n, factor, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * factor, mask=mask)


@tilejit.jit
def accumulate(acc_ptr, x_ptr, n, BLOCK: tl.constexpr):
    """acc += x: running it twice gives a different answer, so autotuning must restore or reset."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(acc_ptr + offsets, tl.load(acc_ptr + offsets, mask=mask) + tl.load(x_ptr + offsets, mask=mask),
             mask=mask)


def test_launch_hooks_receive_launch_metadata():
    seen = []
    CompiledKernel.launch_enter_hook = lambda info: seen.append(("enter", dict(info)))
    CompiledKernel.launch_exit_hook = lambda info: seen.append(("exit", info["name"]))
    x = np.arange(40, dtype=np.float32)
    out = np.zeros_like(x)
    scale[(2,)](x, out, 40, 2.0, BLOCK=32)
    np.testing.assert_allclose(out, x * 2)
    (enter_kind, info), exit_event = seen
    assert enter_kind == "enter" and exit_event == ("exit", "scale_n40")
    assert info["flops"] == 80 and info["block"] == 32 and info["grid"] == (2, 1, 1) and info["stream"] is None
    CompiledKernel.launch_enter_hook = CompiledKernel.launch_exit_hook = None
    scale[(2,)](x, out, 40, 2.0, BLOCK=32)
    assert len(seen) == 2  # no hooks, no calls


def test_run_with_warmup_compiles_without_launching():
    x = np.ones(16, np.float32)
    out = np.zeros(16, np.float32)
    kernel = scale.run(x, out, 16, 3.0, BLOCK=16, grid=(1,), warmup=True)
    assert isinstance(kernel, CompiledKernel) and not out.any()
    assert "tt.func" in kernel.asm["ttir"] and "def " in kernel.asm["py"]
    assert scale.warmup(x, out, 16, 3.0, BLOCK=16, grid=(1,)) is kernel
    kernel[(1,)](x, out, 16, 3.0)
    np.testing.assert_allclose(out, 3)


def test_config_all_kwargs_holds_meta_parameters_and_set_options():
    config = tilejit.Config({"BLOCK": 64}, num_warps=8, num_stages=2)
    assert config.all_kwargs() == {"BLOCK": 64, "num_warps": 8, "num_stages": 2, "num_ctas": 1}
    assert "maxnreg" not in config.all_kwargs()
    assert tilejit.Config({}, maxnreg=128).all_kwargs()["maxnreg"] == 128


_CONFIGS = [tilejit.Config({"BLOCK": 16}), tilejit.Config({"BLOCK": 32}), tilejit.Config({"BLOCK": 64})]


@pytest.mark.parametrize("mode", ["restore_value", "reset_to_zero"])
def test_autotune_restores_or_resets_array_arguments(mode):
    tuned = tilejit.autotune(_CONFIGS, key=["n"], warmup=1, rep=1, **{mode: ["acc_ptr"]})(accumulate)
    x = np.arange(100, dtype=np.float32)
    acc = np.full(100, 5.0, np.float32)
    tuned[lambda meta: (triton_cdiv(100, meta["BLOCK"]),)](acc, x, 100)
    # Every timed run added x once; restored, acc ends at 5 + x; reset to zero, at x.
    expected = 5 + x if mode == "restore_value" else x
    np.testing.assert_allclose(acc, expected)
    assert tuned.best_config in _CONFIGS


def triton_cdiv(a, b):
    return (a + b - 1) // b


@pytest.mark.parametrize("order", ["heuristics_above_autotune", "autotune_above_heuristics"])
def test_heuristics_stack_with_autotune(order):
    if order == "heuristics_above_autotune":
        kernel = tilejit.heuristics({"factor": lambda args: float(args["n"]) / 10})(
            tilejit.autotune(_CONFIGS, key=["n"], warmup=1, rep=1, restore_value=["out_ptr"])(scale))
    else:
        kernel = tilejit.autotune(_CONFIGS, key=["n"], warmup=1, rep=1, restore_value=["out_ptr"])(
            tilejit.heuristics({"factor": lambda args: float(args["n"]) / 10})(scale))
    x = np.arange(50, dtype=np.float32)
    out = np.zeros(50, np.float32)
    kernel[lambda meta: (triton_cdiv(50, meta["BLOCK"]),)](x, out, 50)
    np.testing.assert_allclose(out, x * 5)


def test_do_bench_quantiles_are_ordered_milliseconds():
    x = np.arange(256, dtype=np.float32)
    out = np.zeros_like(x)
    scale[(1,)](x, out, 256, 2.0, BLOCK=256)
    low, median, high = do_bench(lambda: scale[(1,)](x, out, 256, 2.0, BLOCK=256), warmup=2, rep=10,
                                 quantiles=[0.2, 0.5, 0.8])
    assert 0 < low <= median <= high < 1000
    assert isinstance(do_bench(lambda: None, warmup=1, rep=2, return_mode="median"), float)
