"""A (value, int64 index) running maximum: an associative scan with a non-commutative combine, the
shape of Triton's test_scan2d cummax. Run on every backend by test_lang_scan_order.py and on the host
from cuda:90 LLVM IR by tests/gpu/test_simulated_scans.py."""
import numpy as np

import tilejit
import tilejit.language as tl


@tilejit.jit
def max_with_index(v0, i0, v1, i1):
    gt = v0 > v1
    return tl.where(gt, v0, v1), tl.where(gt, i0, i1)


@tilejit.jit
def cummax_index_kernel(x_ptr, z_ptr, M: tl.constexpr, N: tl.constexpr, AXIS: tl.constexpr,
                         REVERSE: tl.constexpr):
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    offs = rm[:, None] * N + rn[None, :]
    x = tl.load(x_ptr + offs)
    if AXIS == 0:
        idx = tl.broadcast_to(rm[:, None].to(tl.int64), [M, N])
    else:
        idx = tl.broadcast_to(rn[None, :].to(tl.int64), [M, N])
    _, z = tl.associative_scan((x, idx), axis=AXIS, combine_fn=max_with_index, reverse=REVERSE)
    tl.store(z_ptr + offs, z)


def np_cummax_index(x, axis, reverse):
    """Index of the running maximum in scan order, the later one on ties."""
    xt = np.moveaxis(x, axis, -1)
    out = np.empty(xt.shape, np.int64)
    n = xt.shape[-1]
    for row in np.ndindex(xt.shape[:-1]):
        best = None
        for i in (range(n - 1, -1, -1) if reverse else range(n)):
            if best is None or not xt[row][best] > xt[row][i]:
                best = i
            out[row + (i,)] = best
    return np.moveaxis(out, -1, axis)
