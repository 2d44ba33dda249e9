"""The width of global accesses comes from the axis analysis (contiguity, divisibility, the mask's
constancy); a fact that does not hold gives wrong or misaligned accesses on the GPU. Cross-compiled for
cuda:90: the PTX shows each access's width. Results of the same kernels are checked on every backend
by tests/language/test_lang_masked_loads.py and on the host by test_simulated_scans.py."""
import os
import re
import sys

import numpy as np
import pytest

import tilejit
import tilejit.language as tl
from tilejit.frontend.source import ASTSource

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "language"))
from masked_kernels import COMPARE_MASKS, copy_masked_by_compare  # noqa: E402
from simt_runner import run  # noqa: E402

D16 = [["tt.divisibility", 16]]


def _widths(ptx: str) -> set:
    return set(re.findall(r"(?:ld|st)\.global(?:\.v(\d))?\.b32", ptx))


@tilejit.jit
def _rows_of_pairs(x_ptr, y_ptr, STRIDE: tl.constexpr, ROWS: tl.constexpr):
    offs = tl.arange(0, ROWS)[:, None] * STRIDE + tl.arange(0, 2)[None, :]
    tl.store(y_ptr + offs, tl.load(x_ptr + offs))


@pytest.mark.parametrize("stride, widths", [(3, {""}), (4, {"2"}), (2, {"2"})])
def test_pairs_of_rows_are_vectors_only_when_aligned(stride, widths):
    # Rows of 3 f32 start 12 bytes apart: a 64-bit access would be misaligned at every odd row.
    # (arange * 3 was once taken as divisible by 2^30.)
    src = ASTSource(_rows_of_pairs, {"x_ptr": "*fp32", "y_ptr": "*fp32", "STRIDE": "constexpr",
                                     "ROWS": "constexpr"}, {"STRIDE": stride, "ROWS": 64}, {(0,): D16, (1,): D16})
    ptx = tilejit.compile(src, target="cuda:90", options={"num_warps": 1}).asm["ptx"]
    assert _widths(ptx) == widths


# `i < n` and `i >= n` change value only at n, a multiple of 16: alike over the 4 elements of a vector.
@pytest.mark.parametrize("pred", sorted(COMPARE_MASKS))
def test_masked_access_width_follows_the_comparison(pred):
    src = ASTSource(copy_masked_by_compare, {"x_ptr": "*fp32", "y_ptr": "*fp32", "z_ptr": "*fp32", "n": "i32",
                                             "PRED": "constexpr", "BLOCK": "constexpr"},
                    {"PRED": pred, "BLOCK": 1024}, {(i,): D16 for i in range(4)})
    ptx = tilejit.compile(src, target="cuda:90", options={"num_warps": 4}).asm["ptx"]
    vector = pred in ("lt", "ge", "gt_rev", "le_rev")
    loads = set(re.findall(r"ld\.global(?:\.v(\d))?\.b32", ptx))
    assert loads == ({"4"} if vector else {""})


@tilejit.jit
def _gather_by_channel(x_ptr, w_ptr, y_ptr, n, per_channel, BLOCK: tl.constexpr):
    # Liger's group_norm: a vector load of x, a per-element gather of w, both under one mask.
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    w = tl.load(w_ptr + offs // per_channel, mask=mask)
    tl.store(y_ptr + offs, x * w, mask=mask)


def test_a_mask_alike_over_a_vector_is_computed_once_per_vector():
    # 8 elements a thread in two vectors of 4: two compares, each the predicate of one vector load,
    # four gathers and one vector store (Triton's maybeDeduplicate does the same).
    src = ASTSource(_gather_by_channel, {"x_ptr": "*fp32", "w_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32",
                                         "per_channel": "i32", "BLOCK": "constexpr"}, {"BLOCK": 1024},
                    {(i,): D16 for i in range(4)})
    kernel = tilejit.compile(src, target="cuda:90", options={"num_warps": 4})
    ptx = kernel.asm["ptx"]
    assert len(re.findall(r"setp\.lt\.s32", ptx)) == 2
    assert len(re.findall(r"@%p\d+ ld\.global\.b32", ptx)) == 8
    # and the shared compares give the right elements: the code run on the host
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal(1024).astype(np.float32), rng.standard_normal(64).astype(np.float32)
    y = np.full(1024, np.nan, np.float32)
    n, per_channel = 976, 16
    run(kernel.asm["llir"], [x, w, y, n, per_channel], 4)
    np.testing.assert_array_equal(y[:n], x[:n] * w[np.arange(n) // per_channel])
    assert np.isnan(y[n:]).all()
