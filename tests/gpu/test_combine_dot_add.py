"""`triton-combine-dot-add` (core `gpu/combine_dot_add.py`): `dot(a, b, 0) + d` -> `dot(a, b, d)`,
as Triton's combine patterns, on the GPU only. Values: tests/language/test_lang_dot_accumulate.py."""
import os
import re
import sys

import pytest

from tilejit.gpu.combine_dot_add import CombineDotAdd

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "language"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "passes"))
from dot_kernels import add_accumulated_matmul  # noqa: E402
from passes_testlib import check_pass, func  # noqa: E402


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))


def _compile(dtype="*fp16", out="*fp32", **flags):
    return add_accumulated_matmul.warmup(dtype, dtype, out, out, 45, K=128, N=64, BM=64, BN=64, BK=32,
                                         **{"DOT_FIRST": False, "ALSO_READ": False, **flags}, num_warps=4,
                                         grid=(1,), target="cuda:90")


def _dot_lines(ttgir):
    return [line for line in ttgir.splitlines() if "tt.dot " in line]


@pytest.mark.parametrize("dot_first", [False, True])
@pytest.mark.parametrize("dtype, out, add", [("*fp16", "*fp32", "arith.addf"), ("*i8", "*i32", "arith.addi")])
def test_the_add_becomes_the_dots_accumulator(dot_first, dtype, out, add):
    kernel = _compile(dtype, out, DOT_FIRST=dot_first)
    tile_add = re.escape(add) + r" .* -> \(tensor<64x64x"   # an add of accumulator tiles
    assert re.search(tile_add, kernel.asm["ttir"])   # the frontend writes the add; the GPU pass folds it
    ttgir = kernel.asm["ttgir"]
    (dot,) = _dot_lines(ttgir)
    assert re.search(r"tt\.dot %\w+, %\w+, %arg\d+ ", dot), dot   # accumulates into the loop's carried value
    assert not re.search(tile_add, ttgir)


def test_the_accumulating_wgmma_stays_in_flight():
    """On sm_90 the loop's wgmma no longer has its result read by an add in the same iteration, so
    it waits down to one group, as Triton's (Liger's neighborhood attention: wait_group 1, then 0)."""
    waits = re.findall(r"wgmma\.wait_group\.sync\.aligned (\d)", _compile().asm["ptx"])
    assert waits[-1] == "0" and set(waits[:-1]) == {"1"}


def test_a_dot_read_twice_keeps_its_add():
    ttgir = _compile(ALSO_READ=True).asm["ttgir"]
    (dot,) = _dot_lines(ttgir)
    product = re.match(r"\s*(%\w+) = tt\.dot %\w+, %\w+, (%\w+) ", dot)
    assert not product.group(2).startswith("%arg")   # its accumulator is still the zero constant
    assert len(re.findall(rf"arith\.addf %arg\d+, {product.group(1)} ", ttgir)) == 2


DOT = "{{inputPrecision = \"ieee\", maxNumImpreciseAcc = {imprecise}}}"


def _dot_then_add(acc_value, imprecise=0, add_first=False):
    add = "%3, %arg2" if not add_first else "%arg2, %3"
    return func(f"""
    %2 = arith.constant {{value = {acc_value}}} : tensor<16x16xf32>
    %3 = tt.dot %arg0, %arg1, %2 {DOT.format(imprecise=imprecise)} : (tensor<16x16xf16>, tensor<16x16xf16>, tensor<16x16xf32>) -> (tensor<16x16xf32>)
    %4 = arith.addf {add} : (tensor<16x16xf32>, tensor<16x16xf32>) -> (tensor<16x16xf32>)
    tt.return %4 : (tensor<16x16xf32>) -> ()""",
                args="%arg0: tensor<16x16xf16>, %arg1: tensor<16x16xf16>, %arg2: tensor<16x16xf32>",
                results="tensor<16x16xf32>")


@pytest.mark.parametrize("zero", ["0.0", "-0.0"])
@pytest.mark.parametrize("add_first", [False, True])
def test_zero_accumulators_fold_in_either_order(zero, add_first):
    check_pass(_dot_then_add(zero, add_first=add_first), [CombineDotAdd()], """
CHECK:     [[D:%[0-9]+]] = tt.dot %arg0, %arg1, %arg2
CHECK-NOT: arith.addf
CHECK:     tt.return [[D]]
""")


@pytest.mark.parametrize("acc_value, imprecise", [("1.0", 0), ("0.0", 32)])
def test_nonzero_accumulators_and_imprecise_limits_stay(acc_value, imprecise):
    check_pass(_dot_then_add(acc_value, imprecise), [CombineDotAdd()], """
CHECK: tt.dot %arg0, %arg1, %{{[0-9]+}}
CHECK: arith.addf
""")
