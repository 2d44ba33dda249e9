"""The NVIDIA target description and what it decides: num_warps limits, the matrix units per arch,
the shared memory the pipeline sizes its buffers by, and `tl.range(num_stages=)` per loop."""
import pytest

import tilejit
import tilejit.language as tl
from tilejit.backends import GPUTarget, OptionsError, backend_for_target
from tilejit.frontend.source import ASTSource
from tilejit_nvidia.isa import NvidiaISA
from tilejit_nvidia.matrix_units import MmaSync, Wgmma
from tilejit_nvidia.pipeline import NUM_STAGES


@pytest.mark.parametrize("num_warps", [64, 3])
def test_invalid_num_warps_is_an_option_error(num_warps):
    backend = backend_for_target(GPUTarget.parse("cuda:90"))
    with pytest.raises(OptionsError, match=f"num_warps must be a power of two.*got {num_warps}"):
        backend.parse_options({"num_warps": num_warps})
    assert backend.parse_options({"num_warps": 32}).num_warps == 32


def test_amd_wave64_allows_16_warps_only():
    backend = backend_for_target(GPUTarget.parse("hip:gfx942"))
    with pytest.raises(OptionsError, match="no larger than 16 on hip:gfx942"):
        backend.parse_options({"num_warps": 32})


def test_description_per_arch():
    assert [type(u) for u in NvidiaISA(90, 32).matrix_units] == [Wgmma, MmaSync]
    assert [type(u) for u in NvidiaISA(80, 32).matrix_units] == [MmaSync]
    assert NvidiaISA(75, 32).matrix_units == ()
    assert NvidiaISA(90, 32).shared_memory == 227 * 1024 and NvidiaISA(80, 32).shared_memory == 163 * 1024
    assert NvidiaISA(80, 32).supports_async_copy and not NvidiaISA(75, 32).supports_async_copy


@tilejit.jit
def _loop_dot(a_ptr, b_ptr, c_ptr, K, STAGES: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    offs_m, offs_n, offs_k = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    a_ptrs = a_ptr + offs_m[:, None] * BK + offs_k[None, :]
    b_ptrs = b_ptr + offs_k[:, None] * BN + offs_n[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in tl.range(0, K, BK, num_stages=STAGES):
        acc = tl.dot(tl.load(a_ptrs), tl.load(b_ptrs), acc)
        a_ptrs += BK
        b_ptrs += BK * BN
    tl.store(c_ptr + offs_m[:, None] * BN + offs_n[None, :], acc)


def _stages_of(stages, tile=64, num_stages=3):
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "K": "i32", "STAGES": "constexpr",
           "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"}
    src = ASTSource(_loop_dot, sig, {"STAGES": stages, "BM": tile, "BN": tile, "BK": tile},
                    {(i,): [["tt.divisibility", 16]] for i in range(4)})
    ck = tilejit.compile(src, target=GPUTarget.parse("cuda:80"), options={"num_warps": 4, "num_stages": num_stages})
    found = [line for line in ck.asm["ttgir"].splitlines() if f"{NUM_STAGES} =" in line]
    return (int(found[0].split(f"{NUM_STAGES} = ")[1].split(",")[0].split("}")[0]) if found else None), ck.asm["ptx"]


def test_tl_range_num_stages_wins_over_the_option():
    assert _stages_of(4, num_stages=2)[0] == 4
    assert _stages_of(2, num_stages=4)[0] == 2
    stages, ptx = _stages_of(1)   # num_stages=1: this loop is not pipelined
    assert stages is None and "cp.async" not in ptx


def test_buffers_fit_the_arch_shared_memory():
    # 128x128 fp16 tiles of A and B: 64 KiB a stage. sm_80 offers 163 KiB a CTA (less a 32 KiB
    # scratch reserve): 2 stages of the 4 asked for.
    assert _stages_of(4, tile=128)[0] == 2


def test_two_ctas_are_asked_for_only_where_registers_and_shared_memory_allow():
    isa = NvidiaISA(90, 32)
    assert isa.asks_two_ctas(256, 96 * 1024, True, carried_registers=64)        # matmul 128x128 fp32 acc
    assert not isa.asks_two_ctas(256, 96 * 1024, True, carried_registers=128)   # 128x256: the cap itself
    assert not isa.asks_two_ctas(256, 144 * 1024, True, carried_registers=64)   # two rings do not fit
    assert not isa.asks_two_ctas(128, 96 * 1024, True, carried_registers=64)    # 4 warps: not needed
    assert not isa.asks_two_ctas(256, 96 * 1024, False)                         # no pipelined dot


@pytest.mark.parametrize("arch, per_sm", [(90, 228 * 1024), (80, 164 * 1024)])
def test_shared_memory_per_cta_leaves_the_sm_its_reserve_per_cta(arch, per_sm):
    """n CTAs of shared_memory_per_cta(n) bytes, each with its 1 KiB reserve, fill the SM exactly."""
    isa = NvidiaISA(arch, 32)
    assert isa.shared_memory_per_cta(1) == isa.shared_memory
    for n in (2, 3, 4):
        assert n * (isa.shared_memory_per_cta(n) + 1024) <= per_sm < (n + 1) * (isa.shared_memory_per_cta(n) + 1024)
