"""Kernels shared by the language tests (every backend) and the GPU code-generation tests."""
import tilejit
import tilejit.language as tl


@tilejit.jit
def blockwise_gradient_sums(v_ptr, w_ptr, dw_ptr, dv_ptr, n_blocks, n_tokens, D, BLOCK_D: tl.constexpr,
                            MAX_BLOCKS: tl.constexpr):
    """The shape of Liger's attention-residual backward: per token, over `tl.static_range` blocks each
    under `if i < n_blocks`, a 16-bit tile loaded, a gradient stored, and two fp32 sums accumulated;
    the sums atomic-added into per-column totals shared by every token."""
    tok = tl.program_id(0)
    cols = tl.arange(0, BLOCK_D)
    d_mask = cols < D
    w = tl.load(w_ptr + cols, mask=d_mask, other=0.0).to(tl.float32)
    acc_a = tl.zeros((BLOCK_D,), dtype=tl.float32)
    acc_b = tl.zeros((BLOCK_D,), dtype=tl.float32)
    for i in tl.static_range(0, MAX_BLOCKS):
        if i < n_blocks:
            off = i * n_tokens * D + tok * D
            v = tl.load(v_ptr + off + cols, mask=d_mask, other=0.0).to(tl.float32)
            tl.store(dv_ptr + off + cols, v * w, mask=d_mask)
            acc_a += v * (i + 1)
            acc_b += v * w
    tl.atomic_add(dw_ptr + cols, acc_a, mask=d_mask)
    tl.atomic_add(dw_ptr + D + cols, acc_b, mask=d_mask)


@tilejit.jit
def wide_atomic_add(target_ptr, vals_ptr, old_ptr, n, DTYPE: tl.constexpr, BLOCK: tl.constexpr):
    """Every program atomic-adds its BLOCK values (several consecutive elements a thread: one vector
    atomic on sm_90) into one shared row, masked past `n`, and stores the old values it got back."""
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    vals = tl.load(vals_ptr + pid * BLOCK + offs, mask=mask, other=0.0).to(DTYPE)
    old = tl.atomic_add(target_ptr.to(tl.pointer_type(DTYPE)) + offs, vals, mask=mask, sem="relaxed")
    tl.store(old_ptr.to(tl.pointer_type(DTYPE)) + pid * BLOCK + offs, old, mask=mask)
