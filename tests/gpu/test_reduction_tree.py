"""A thread combines its own values of a reduction as a balanced tree of neighbour pairs (as Triton
does), not as one chain: 32 values a thread are 5 dependent adds, not 31. Cross-compiled for cuda:90;
the sum is also run on the host (simt_runner) to check the result."""
import re

import numpy as np

import tilejit
import tilejit.language as tl

from simt_runner import run


@tilejit.jit
def _row_sum(x_ptr, out_ptr, N: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, N))
    tl.store(out_ptr, tl.sum(x, axis=0))


def _longest_fadd_chain(llvm_ir: str) -> int:
    depth = {}
    value = r'(%"?[\w.]+"?|[-\d.e+]+)'   # llvmlite names values %".12"
    for name, a, b in re.findall(value + r" = fadd (?:\w+ )*float " + value + ", " + value, llvm_ir):
        depth[name] = 1 + max(depth.get(a, 0), depth.get(b, 0))
    return max(depth.values())


def test_in_thread_values_are_added_as_a_tree():
    kernel = _row_sum.warmup("*fp32", "*fp32", N=1024, num_warps=1, grid=(1,), target="cuda:90")
    ir = kernel.asm["llir"]
    # 32 values a thread: a tree of depth 5, then 5 butterfly shuffles across the warp's lanes
    assert _longest_fadd_chain(ir) == 10
    x = np.random.default_rng(0).integers(-8, 9, 1024).astype(np.float32)   # exact in any order
    out = np.zeros(1, np.float32)
    run(ir, [x, out], 1)
    assert out[0] == x.sum()
