"""`tilejit demo`: a vector add and a row softmax on the best backend present, checked against NumPy.

On a machine with a CUDA GPU (and `tilejit-nvidia` installed) the kernels run there; otherwise they
run on the NumPy interpreter. The demo prints the TTIR of the vector add and the stages each backend
produced, then the largest error against NumPy for both kernels.
"""
from __future__ import annotations

import sys

import numpy as np

import tilejit
import tilejit.language as tl


@tilejit.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


@tilejit.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    y = num / tl.sum(num, axis=0)
    tl.store(out_ptr + row * out_row_stride + cols, y, mask=mask)


def _pick_device():
    """Torch CUDA tensors when a CUDA backend is active, else NumPy arrays for the interpreter."""
    from tilejit.backends import available_backends

    cuda = available_backends().get("cuda")
    if cuda is not None:
        try:
            if cuda.is_active():
                import torch
                return "cuda", (lambda a: torch.from_numpy(a).cuda()), (lambda t: t.cpu().numpy())
        except Exception as exc:  # a broken GPU set-up must not stop the demo on the CPU
            print(f"(CUDA backend present but unusable: {exc}; using the interpreter)")
    return "interpreter", (lambda a: a), (lambda a: a)


def _show_cross_compilation(x, y, out, n) -> None:
    """Compile the same kernel for each GPU target; no GPU is needed for that."""
    print("\n--- cross-compilation of add_kernel (no GPU needed) ---")
    for target in ("cuda:90", "cuda:80", "hip:gfx942", "hip:gfx1100"):
        try:
            ck = add_kernel.warmup(x, y, out, n, BLOCK_SIZE=1024, grid=(1,), target=target)
        except tilejit.TilejitError as exc:  # e.g. no ptxas / ld.lld: say so and go on
            print(f"{target:12s} not compiled: {str(exc).splitlines()[0]}")
            continue
        stages = ", ".join(f"{k} ({len(v)} {'bytes' if isinstance(v, bytes) else 'chars'})"
                           for k, v in ck.asm.items())
        print(f"{target:12s} {stages}")


def main(argv=None) -> int:
    backend, to_dev, to_host = _pick_device()
    print(f"tilejit {tilejit.__version__}: running on the '{backend}' backend")
    rng = np.random.default_rng(0)

    n = 98_432
    x, y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    dx, dy, dout = to_dev(x), to_dev(y), to_dev(np.empty_like(x))
    grid = (tilejit.cdiv(n, 1024),)
    compiled = add_kernel[grid](dx, dy, dout, n, BLOCK_SIZE=1024)
    add_err = float(np.max(np.abs(to_host(dout) - (x + y))))

    print("\n--- TTIR of add_kernel ---")
    print(compiled.asm["ttir"])
    print("stages produced:", ", ".join(f"{k} ({len(v)} {'bytes' if isinstance(v, bytes) else 'chars'})"
                                        for k, v in compiled.asm.items()))

    _show_cross_compilation(dx, dy, dout, n)

    rows, cols = 256, 781
    a = rng.standard_normal((rows, cols), dtype=np.float32)
    da, dres = to_dev(a), to_dev(np.empty_like(a))
    softmax_kernel[(rows,)](dres, da, cols, cols, cols, BLOCK_SIZE=tilejit.next_power_of_2(cols))
    e = np.exp(a - a.max(axis=1, keepdims=True))
    ref = e / e.sum(axis=1, keepdims=True)
    sm_err = float(np.max(np.abs(to_host(dres) - ref)))

    print(f"\nvector add ({n} fp32):     max |error| vs NumPy = {add_err:.3g}")
    print(f"softmax ({rows}x{cols} fp32): max |error| vs NumPy = {sm_err:.3g}")
    ok = add_err == 0.0 and sm_err < 1e-6
    print("demo " + ("passed" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
