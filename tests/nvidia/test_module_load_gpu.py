"""Every kernel that compiles loads and runs: the kernels of `loadable_kernels` on a GPU, against torch.

Issue 9 item 7 (a fused-MoE kernel refused by cuModuleLoadData on sm_90). Each kernel here puts
something extra into its cubin (ptxas subroutines for int64 div/rem and libdevice slow paths, a
call inside a wgmma kernel, stack spills, an early return); a refused module fails the test with the
CUDA error. `test_cubin_loadability.py` checks the same cubins' properties without a GPU.
"""
import loadable_kernels as lk
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)


def test_int64_remainder_by_a_runtime_value_loads_and_runs():
    x = torch.randn(100, device="cuda")
    out = torch.empty(256, device="cuda")
    lk.rem_i64_kernel[(2,)](x, out, 100, BLOCK=128)
    torch.testing.assert_close(out, x[torch.arange(256, device="cuda") % 100], rtol=0, atol=0)


def test_int64_division_by_a_runtime_value_loads_and_runs():
    x = torch.randint(-(1 << 40), 1 << 40, (256,), device="cuda")
    out = torch.empty_like(x)
    lk.div_i64_kernel[(2,)](x, out, 7, BLOCK=128)
    torch.testing.assert_close(out, torch.div(x, 7, rounding_mode="trunc"), rtol=0, atol=0)


def test_libdevice_slow_path_subroutine_loads_and_runs():
    x = torch.rand(128, device="cuda") + 0.1
    out = torch.empty_like(x)
    lk.libdevice_sqrt_kernel[(1,)](x, out, BLOCK=128)
    torch.testing.assert_close(out, torch.sqrt(x) + torch.exp(x), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("config", lk.EXPERT_GEMM_CONFIGS, ids=lambda c: "m{}n{}k{}w{}s{}".format(*c))
def test_moe_shaped_expert_gemm_loads_and_matches_torch(config, weighted, dtype):
    BM, BN, BK, warps, stages = config
    torch.manual_seed(0)
    tokens, K, N, experts, top_k = 24, 160, 192, 4, 2
    a = torch.randn(tokens, K, device="cuda", dtype=dtype) / 4
    w = torch.randn(experts, N, K, device="cuda", dtype=dtype) / 4
    expert_of_slot = torch.stack([torch.randperm(experts)[:top_k] for _ in range(tokens)]).flatten()
    route_w = torch.rand(tokens * top_k, device="cuda")
    slots, block_expert = lk.route_slots(expert_of_slot.tolist(), BM, experts)
    slot_t = torch.tensor(slots, device="cuda", dtype=torch.int32)
    expert_t = torch.tensor(block_expert, device="cuda", dtype=torch.int32)
    n_used = torch.tensor([len(slots)], device="cuda", dtype=torch.int32)
    c = torch.zeros(tokens * top_k, N, device="cuda", dtype=dtype)
    grid = (triton_cdiv(len(slots), BM) * triton_cdiv(N, BN),)
    lk.expert_gemm_kernel[grid](a, w, c, route_w, slot_t, expert_t, n_used, N, K, len(slots), tokens * top_k,
                                a.stride(0), w.stride(0), w.stride(1), w.stride(2), c.stride(0),
                                TOP_K=top_k, BM=BM, BN=BN, BK=BK, WEIGHTED=weighted,
                                num_warps=warps, num_stages=stages)
    want = torch.einsum("sk,snk->sn", a.float()[torch.arange(tokens * top_k, device="cuda") // top_k],
                        w.float()[expert_of_slot.cuda()])
    if weighted:
        want = want * route_w[:, None]
    torch.testing.assert_close(c.float(), want, rtol=2e-2, atol=2e-2)


def triton_cdiv(a: int, b: int) -> int:
    return -(-a // b)
