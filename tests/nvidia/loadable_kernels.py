"""Kernels whose cubins carry more than straight-line code, for the "every kernel that compiles loads" tests.

Each one makes ptxas put something extra into the cubin that a plain elementwise kernel or matmul
does not have, the way real kernels (a fused mixture-of-experts GEMM, issue 9 item 7) do:
- an int64 `%` or `//` by a run-time value: ptxas expands `rem.s64`/`div.s64` into a call of an
  internal subroutine (`$__internal_0_$__cuda_sm20_rem_s64`), so the cubin holds two functions, a
  call graph and more debug-frame relocations;
- the MoE shape: rows gathered through an index tensor, int64 `% N` columns, an early `return` of
  padded blocks, an expert-indexed weight, a dot (mma.sync or wgmma with the call inside), a routed
  weight per row and a masked store;
- a libdevice function with a slow path (sqrt: another internal subroutine) and `tl.device_print`
  (an undefined `vprintf` the driver resolves).
"""
import tilejit
import tilejit.language as tl


@tilejit.jit
def rem_i64_kernel(x_ptr, out_ptr, N, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = (pid * BLOCK + tl.arange(0, BLOCK).to(tl.int64)) % N
    tl.store(out_ptr + pid * BLOCK + tl.arange(0, BLOCK), tl.load(x_ptr + offs))


@tilejit.jit
def div_i64_kernel(x_ptr, out_ptr, D, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) // D)


@tilejit.jit
def libdevice_sqrt_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    # sqrt.rn.f32 (tl.sqrt_rn, libdevice.sqrt) calls ptxas's slow-path subroutine; tl.sqrt is
    # sqrt.approx on NVIDIA (as in Triton) and has none
    tl.store(out_ptr + offs, tl.sqrt_rn(x) + tl.exp(x))


@tilejit.jit
def print_kernel(x_ptr, BLOCK: tl.constexpr):
    tl.device_print("x", tl.load(x_ptr + tl.arange(0, BLOCK)))


@tilejit.jit
def expert_gemm_kernel(a_ptr, w_ptr, c_ptr, route_w_ptr, slot_ptr, block_expert_ptr, n_used_ptr,
                       N, K, EM, n_slots, stride_am, stride_we, stride_wn, stride_wk, stride_cm,
                       TOP_K: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                       WEIGHTED: tl.constexpr):
    """C[slot] = A[slot // TOP_K] @ W[expert].T (* route weight), for the slots of one expert block.

    `slot_ptr` lists EM token slots sorted by expert and padded per block with `n_slots` (no slot);
    `block_expert_ptr[b]` is the expert of block b; blocks past `n_used_ptr[0]` slots return early.
    One grid axis, as the MoE kernels have it: LLVM cannot bound `pid_n * BN` to 32 bits then, so
    the int64 `% N` stays 64-bit (with `program_id(1)` it narrows it to 32 bits).
    """
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(EM, BM)
    pid_m = pid % num_pid_m
    pid_n = pid // num_pid_m
    if pid_m * BM >= tl.load(n_used_ptr):
        return
    slots = tl.load(slot_ptr + pid_m * BM + tl.arange(0, BM).to(tl.int64))
    valid = slots < n_slots
    expert = tl.load(block_expert_ptr + pid_m).to(tl.int64)
    cols = (pid_n * BN + tl.arange(0, BN).to(tl.int64)) % N
    offs_k = tl.arange(0, BK)
    a_ptrs = a_ptr + (slots[:, None] // TOP_K) * stride_am + offs_k[None, :]
    w_ptrs = w_ptr + expert * stride_we + cols[None, :] * stride_wn + offs_k[:, None] * stride_wk
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(tl.cdiv(K, BK)):
        a = tl.load(a_ptrs, mask=valid[:, None] & (offs_k[None, :] < K - k * BK), other=0.0)
        w = tl.load(w_ptrs, mask=offs_k[:, None] < K - k * BK, other=0.0)
        acc += tl.dot(a, w)
        a_ptrs += BK
        w_ptrs += BK * stride_wk
    if WEIGHTED:
        acc = acc * tl.load(route_w_ptr + slots, mask=valid, other=0)[:, None]
    out_cols = pid_n * BN + tl.arange(0, BN)
    tl.store(c_ptr + slots[:, None] * stride_cm + out_cols[None, :], acc.to(c_ptr.dtype.element_ty),
             mask=valid[:, None] & (out_cols[None, :] < N))


# (BM, BN, BK, num_warps, num_stages): mma.sync tiles, and wgmma tiles (the 8-warp one also spills
# to the stack with two CTAs per SM), as the MoE configs of vLLM/SGLang on Hopper use them.
EXPERT_GEMM_CONFIGS = [(64, 64, 32, 4, 3), (16, 64, 64, 4, 3), (64, 128, 64, 4, 4), (128, 128, 64, 8, 3)]


def route_slots(expert_of_slot: list[int], block_m: int, num_experts: int):
    """(slots sorted by expert and padded to block_m with len(expert_of_slot), expert per block)."""
    n_slots = len(expert_of_slot)
    slots, experts = [], []
    for e in range(num_experts):
        mine = [s for s, x in enumerate(expert_of_slot) if x == e]
        if not mine:
            continue
        mine += [n_slots] * ((-len(mine)) % block_m)
        slots += mine
        experts += [e] * (len(mine) // block_m)
    return slots, experts
