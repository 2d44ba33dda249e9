"""The fuzzer's `indexing` family (tilejit.fuzz.indexing): index and mask arithmetic on masked loads and
stores, on the interpreter and, compiled for cuda:90 as a launch specializes it, on the host's SIMT
runner (tests/gpu/simt_runner.py: every access checked for alignment and bounds as the GPU would
fault on it). `bench/fuzz.py --family indexing --simt` runs hundreds."""
import importlib.util
import os
import re
import sys

import numpy as np
import pytest

import tilejit
import tilejit.language as tl
from tilejit.fuzz import generate, run_interpreter

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEEDS = range(40)


def _bench_fuzz():
    spec = importlib.util.spec_from_file_location("bench_fuzz", os.path.join(ROOT, "bench", "fuzz.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def simt_run():
    from tilejit_nvidia.toolchain import find_ptxas
    if find_ptxas() is None:
        pytest.skip("no ptxas")
    pytest.importorskip("llvmlite")
    return _bench_fuzz().simt_run


@pytest.mark.parametrize("seed", SEEDS)
def test_interpreter_and_cuda_code_match_the_model(seed, simt_run):
    case = generate(seed, "indexing")
    for outcome in (run_interpreter(case), simt_run(case)):
        assert outcome.status == "ok", f"seed {seed} {outcome.where}: {outcome.detail}\n{case.source('triton')}"


def test_the_seeds_cover_the_forms():
    cases = [generate(seed, "indexing") for seed in range(80)]
    text = "\n".join(case.body for case in cases)
    for needle in ("[:, None]", "[None, :]", "tl.broadcast_to(", "tl.program_id(1)", " // ", " % ", " * 3",
                   " & ", " | ", "other=", "mask=", ".to(tl.float16)"):
        assert needle in text, needle
    # all six comparisons, with the index on the left and on the right
    pairs = set(re.findall(r"\((\w+) (<|<=|>|>=|==|!=) (\w+)\)", text))
    for op in ("<", "<=", ">", ">=", "==", "!="):
        assert any(o == op and re.fullmatch(r"[a-z]+\d+", a) and re.fullmatch(r"n\d+|\d+", b) for a, o, b in pairs), op
        assert any(o == op and re.fullmatch(r"n\d+|\d+", a) and re.fullmatch(r"[a-z]+\d+", b) for a, o, b in pairs), op
    ints = [a.value for case in cases for a in case.args if a.kind == "int"]
    assert any(v == 1 for v in ints) and any(v % 16 == 0 and v > 0 for v in ints) and any(v % 16 for v in ints)
    assert {case.family for case in cases} == {"indexing-1d", "indexing-2d"}


def test_stores_never_leave_their_arrays_in_the_model():
    """The model's own guarantee: every lane a mask lets through is inside its array (x and out)."""
    for seed in range(40):
        case = generate(seed, "indexing")
        out = case.outputs()[0]
        assert out.expected.shape == out.value.shape
        changed = out.expected != out.value
        assert changed.any() or "mask=" in case.body   # an unmasked store writes something


def test_a_wrong_access_width_is_caught(simt_run, monkeypatch, tmp_path):
    """The fuzzer finds the mask class fixed in 'Axis analysis: three unsound facts': with `offs <= n`
    (n a multiple of 16) taken as alike over aligned groups again, seed 192's store
    `tl.store(out_ptr + offs0, w, mask=(offs0 <= n2))` (n2 = 432, out has 433 elements) writes
    vectors of 4 past the array: the host runner reports the access the GPU would fault on."""
    from tilejit import compiler
    from tilejit.gpu import axis_info
    case = generate(192, "indexing")
    assert "mask=(offs0 <= n2))" in case.body
    assert simt_run(case).status == "ok"
    monkeypatch.setattr(axis_info, "_RUN_PREDICATES_LHS", axis_info._RUN_PREDICATES_LHS | {"sle"})
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path / "unsound"))   # compiled again, not reloaded
    compiler.clear_memory_cache()
    outcome = simt_run(generate(192, "indexing"))
    assert outcome.status == "error" and "MemoryFault" in outcome.detail and "st.global.v4.b32" in outcome.detail


@tilejit.jit
def _shifted_remainder(x_ptr, y_ptr, B: tl.constexpr):
    offs = tl.arange(0, B)
    tl.store(y_ptr + offs, tl.load(x_ptr + (offs - 16) % 4 + 8))


@pytest.mark.xfail(strict=True, reason="axis analysis: x % n keeps x's runs of consecutive values, which C's "
                   "remainder breaks where x < 0 ((offs - 16) % 4 + 8 is 8, 5, 6, 7, not 8, 9, ...); "
                   "Triton's RemOp rule is the same. Not fixed: without the sign of x it would cost "
                   "every `offs % n` its vectors")
def test_remainder_of_a_negative_run(simt_run):
    sys.path.insert(0, os.path.join(ROOT, "tests", "gpu"))
    try:
        from simt_runner import run
    finally:
        sys.path.pop(0)
    x, y = np.arange(64, dtype=np.float32), np.zeros(64, np.float32)
    kernel = _shifted_remainder.warmup(x, y, B=64, grid=(1,), target="cuda:90", num_warps=1)
    run(kernel.asm["llir"], [x, y], 1)
    np.testing.assert_array_equal(y, x[np.fmod(np.arange(64) - 16, 4) + 8])
