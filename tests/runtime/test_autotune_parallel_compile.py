"""The autotuner compiles every config before timing, several at once (issue 12: first call).

Results must not change: the same config wins, a config that does not compile is skipped with one
warning, other errors surface as before, and `TILEJIT_AUTOTUNE_COMPILE_WORKERS=0` keeps the old
one-by-one order. No test times anything.
"""
import re
import threading
import warnings

import numpy as np
import pytest

import tilejit
import tilejit.language as tl
from tilejit import compiler
from tilejit.config import KnobError, knobs
from tilejit.runtime.autotuner import Autotuner

BLOCKS = (8, 16, 32, 64)


@pytest.fixture(autouse=True)
def _clean(monkeypatch, tmp_path):
    for knob in ("TILEJIT_TARGET", "TILEJIT_INTERPRET", "TRITON_INTERPRET", "TILEJIT_AUTOTUNE_INTERPRETER",
                 "TILEJIT_AUTOTUNE_COMPILE_WORKERS"):
        monkeypatch.delenv(knob, raising=False)
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path / "cache"))
    yield
    compiler.clear_memory_cache()


def _tuned(fastest_block, compiled_at_first_timing):
    """A copy kernel tuned over BLOCKS (BLOCK=8 fails its static_assert) with a benchmarker that
    records how many specializations were compiled when it was first called, and ranks the configs
    so that `fastest_block` wins."""

    def bench(fn, quantiles=None, **kwargs):
        if not compiled_at_first_timing:
            compiled_at_first_timing.append(sum(len(per_target) for per_target in copy.fn.cache.values()))
        fn()
        block = copy.fn.last_block
        return [0.0 if block == fastest_block else float(block)] * len(quantiles)

    @tilejit.autotune(configs=[tilejit.Config({"BLOCK": b}) for b in BLOCKS], key=["n"], do_bench=bench)
    @tilejit.jit
    def copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        tl.static_assert(BLOCK >= 16, "BLOCK must be at least 16")
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

    original_run = copy.fn.run

    def run(*args, **kwargs):
        copy.fn.last_block = kwargs["BLOCK"]
        return original_run(*args, **kwargs)

    copy.fn.run = run
    return copy


@pytest.mark.parametrize("workers", [0, 1, 3])
def test_same_winner_and_one_warning_per_failing_config(workers, monkeypatch):
    monkeypatch.setenv("TILEJIT_AUTOTUNE_COMPILE_WORKERS", str(workers))
    compiled_at_first_timing = []
    copy = _tuned(32, compiled_at_first_timing)
    x = np.arange(100, dtype=np.float32)
    y = np.zeros_like(x)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        copy[lambda meta: (triton_cdiv(100, meta["BLOCK"]),)](x, y, 100)
    skipped = [str(w.message) for w in caught if "skipped" in str(w.message)]
    assert len(skipped) == 1 and "BLOCK: 8" in skipped[0] and "BLOCK must be at least 16" in skipped[0]
    assert copy.best_config.kwargs == {"BLOCK": 32}
    assert [c.kwargs["BLOCK"] for c, _ in copy.config_errors] == [8]
    assert [c.kwargs["BLOCK"] for c in copy.configs_timings] == list(BLOCKS)
    assert copy.configs_timings[copy.configs[0]] == [float("inf")] * 3
    np.testing.assert_array_equal(y, x)
    # together: every valid config was compiled before the first timing; one by one: none yet
    assert compiled_at_first_timing == [3 if workers > 1 else 0]


def triton_cdiv(a, b):
    return (a + b - 1) // b


def test_other_errors_are_raised_as_before(monkeypatch):
    monkeypatch.setenv("TILEJIT_AUTOTUNE_COMPILE_WORKERS", "4")
    copy = _tuned(16, [])
    with pytest.raises(ValueError, match="conflicting meta-parameters BLOCK"):
        copy[(1,)](np.zeros(4, np.float32), np.zeros(4, np.float32), 4, BLOCK=16)
    with pytest.raises(TypeError, match="copy"):  # a missing argument names the kernel
        copy[(1,)](np.zeros(4, np.float32), 4)


def test_the_knob(monkeypatch):
    monkeypatch.setenv("TILEJIT_AUTOTUNE_COMPILE_WORKERS", "2")
    assert knobs.autotune_compile_workers == 2
    monkeypatch.setenv("TILEJIT_AUTOTUNE_COMPILE_WORKERS", "many")
    with pytest.raises(KnobError, match="TILEJIT_AUTOTUNE_COMPILE_WORKERS"):
        knobs.autotune_compile_workers  # noqa: B018
    monkeypatch.delenv("TILEJIT_AUTOTUNE_COMPILE_WORKERS")
    assert knobs.autotune_compile_workers >= 1
    monkeypatch.setattr(Autotuner, "compile_workers", 0)  # the per-class override wins
    assert _tuned(16, [])._workers_for(4) == 1


def test_one_key_compiles_once_when_threads_ask_together(monkeypatch):
    calls = []
    gate = threading.Barrier(4)
    real_compile = compiler.compile

    def counting(src, target=None, options=None):
        calls.append(src.name)
        return real_compile(src, target=target, options=options)

    monkeypatch.setattr(compiler, "compile", counting)

    @tilejit.jit
    def add_one(x_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs) + 1)

    results = []

    def warm():
        gate.wait()
        results.append(add_one.warmup("*fp32", BLOCK=16, target="interpreter"))

    threads = [threading.Thread(target=warm) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and len(results) == 4 and all(r is results[0] for r in results)


# ---- cross-compiled for an H100 (no GPU needed: LLVM and ptxas run here) -------------------------

def _ptxas():
    try:
        from tilejit_nvidia.toolchain import find_ptxas_or_none
    except ImportError:
        return None
    return find_ptxas_or_none()


@pytest.mark.skipif(_ptxas() is None, reason="no ptxas (pip install nvidia-cuda-nvcc)")
def test_cross_compiled_configs_match_one_by_one(monkeypatch):
    configs = [tilejit.Config({"BLOCK": b}, num_warps=w) for b, w in ((128, 4), (256, 4), (512, 8), (1024, 8))]

    def make():
        @tilejit.autotune(configs=configs, key=["n"])
        @tilejit.jit
        def scale(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n)
            tl.store(y_ptr + offs, tl.exp(x) * 2.0, mask=offs < n)

        return scale

    args = ("*fp32", "*fp32", "i32")
    with tilejit.target("cuda:90"):  # a scope the compile threads must see too
        together = make().warmup(*args)
    compiler.clear_memory_cache()
    monkeypatch.setenv("TILEJIT_ALWAYS_COMPILE", "1")
    monkeypatch.setenv("TILEJIT_AUTOTUNE_COMPILE_WORKERS", "0")
    with tilejit.target("cuda:90"):
        one_by_one = make().warmup(*args)
    assert [str(k.target) for k in together] == ["cuda:90"] * 4
    strip = lambda ptx: re.sub(r"// callseq \d+(, \d+)?", "", ptx)  # noqa: E731 - a per-process counter
    for a, b in zip(together, one_by_one):
        assert a.metadata["num_warps"] == b.metadata["num_warps"]
        assert strip(a.asm["ptx"]) == strip(b.asm["ptx"]) and a.asm["cubin"][:4] == b"\x7fELF"
