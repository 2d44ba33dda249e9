"""tritongpu-pipeline / hoist-conversions on TTGIR, and the cp.async + ldmatrix code they lead to
(compiled to PTX for sm_80/sm_90 on any machine)."""
import os
import re
import sys

import pytest

import tilejit
import tilejit.language as tl
from tilejit.backends import GPUTarget
from tilejit.frontend.source import ASTSource
from tilejit_nvidia.pipeline import NUM_STAGES, PIPELINED, loop_pipeline

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))


@tilejit.jit
def _matmul(a_ptr, b_ptr, c_ptr, K, stride_am, stride_bk, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
            OTHER: tl.constexpr, SCALE_INSIDE: tl.constexpr):
    offs_m = tl.arange(0, BM)
    offs_n = tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :]
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BK, other=OTHER)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BK, other=0.0)
        acc = tl.dot(a, b, acc)
        if SCALE_INSIDE:
            acc = acc * 0.5   # the dot's result is read inside the iteration
        a_ptrs += BK
        b_ptrs += BK * stride_bk
    tl.store(c_ptr + offs_m[:, None] * BN + offs_n[None, :], acc)


D16 = [["tt.divisibility", 16]]


MATMUL_SIGNATURE = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "K": "i32", "stride_am": "i32",
                    "stride_bk": "i32", "BM": "constexpr", "BN": "constexpr", "BK": "constexpr", "OTHER": "constexpr",
                    "SCALE_INSIDE": "constexpr"}


def _compile(num_stages=3, other=0.0, arch=90, scale_inside=False):
    src = ASTSource(_matmul, MATMUL_SIGNATURE, {"BM": 128, "BN": 128, "BK": 64, "OTHER": other,
                                                "SCALE_INSIDE": scale_inside}, {(i,): D16 for i in range(6)})
    return tilejit.compile(src, target=GPUTarget.parse(f"cuda:{arch}"),
                           options={"num_warps": 8, "num_stages": num_stages})


@pytest.fixture(scope="module")
def pipelined():
    return _compile(arch=80)   # mma.sync + ldmatrix (sm_90 takes wgmma: test_wgmma.py)


def test_ldmatrix_results_feed_mma_sync_without_register_moves(pipelined):
    """ldmatrix writes its four matrices to consecutive registers and mma.sync reads each operand from
    consecutive ones: with the matrices loaded in the order mma.sync reads them, the SASS moves no
    operand register (in the other order B's pairs took 131 moves for 64 HMMAs)."""
    from tilejit_nvidia import disassembly
    if disassembly.find_cuobjdump() is None:
        pytest.skip("no cuobjdump (CUDA toolkit or nvidia-cuda-cuobjdump)")
    ops = re.findall(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)", pipelined.asm["sass"])
    hmma = sum(op.startswith("HMMA") for op in ops)
    moves = sum(op in ("MOV", "IMAD.MOV.U32") for op in ops)
    assert hmma == 64 and moves < hmma // 4


def test_dot_loads_are_marked_and_the_plan_found(pipelined):
    text = pipelined.asm["ttgir"]
    assert text.count(f"{PIPELINED} = true") == 2
    assert f"{NUM_STAGES} = 3" in text
    module = tilejit.ir.parse_module(text)
    loop = next(op for op in module.functions[0].walk() if op.name == "scf.for")
    plan = loop_pipeline(loop)
    assert plan is not None and len(plan.loads) == 2 and plan.stages == 3
    assert len(plan.dead_carries) == 2   # the two pointers advance only in the lookahead


def test_ptx_has_multi_buffered_cp_async_and_ldmatrix(pipelined):
    ptx = pipelined.asm["ptx"]
    # 16-byte copies where the layout gives 8 halves a thread, 8-byte ones where the f32 store's
    # layout (4 a thread) was chosen for every rank-2 tensor
    assert "cp.async.cg.shared.global" in ptx or "cp.async.ca.shared.global" in ptx
    assert "cp.async.wait_group \t1" in ptx
    assert ptx.count("cp.async.commit_group") == 3                       # 2 prologue stages + the loop
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in ptx                # A: K contiguous
    assert "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in ptx          # B: N contiguous
    assert "ld.global" not in ptx                                           # no register staging
    # 3 stages of a 128x64 and a 64x128 fp16 tile
    assert pipelined.metadata["shared"] >= 3 * 2 * 128 * 64 * 2


def test_no_pipelining_with_one_stage_or_nonzero_other():
    ck = _compile(num_stages=1)
    assert "cp.async" not in ck.asm["ptx"]
    assert "ldmatrix" in ck.asm["ptx"]    # the conversion into mma operands still uses ldmatrix
    ck = _compile(other=1.0)              # cp.async zero-fills: A (other=1) stays a register load
    assert ck.asm["ttgir"].count(f"{PIPELINED} = true") == 1 and "ld.global" in ck.asm["ptx"]


def test_no_async_copies_before_sm80():
    ck = _compile(arch=75)
    assert "cp.async" not in ck.asm["ptx"] and "mma.sync" not in ck.asm["ptx"]


def test_attention_chains_dots_with_warps_along_m_and_hoists_q():
    from common import load_kernels
    k = load_kernels("tilejit")
    sig = {"q_ptr": "*fp16", "k_ptr": "*fp16", "v_ptr": "*fp16", "o_ptr": "*fp16", "seq_len": "i32",
           "sm_scale": "fp32", "stride_h": "i32", "stride_s": "i32", "HEAD_DIM": "constexpr",
           "BLOCK_M": "constexpr", "BLOCK_N": "constexpr"}
    src = ASTSource(k.attention_fwd_kernel, sig, {"HEAD_DIM": 64, "BLOCK_M": 128, "BLOCK_N": 64},
                    {(i,): D16 for i in (0, 1, 2, 3, 4, 6, 7)})
    ck = tilejit.compile(src, target=GPUTarget.parse("cuda:90"), options={"num_warps": 4, "num_stages": 2})
    ttgir = ck.asm["ttgir"]
    assert "warpsPerCTA = [4, 1], instrShape" in ttgir and "warpsPerCTA = [2, 2], instrShape" not in ttgir
    module = tilejit.ir.parse_module(ttgir)
    loop = next(op for op in module.functions[0].walk() if op.name == "scf.for")
    body = loop.regions[0].blocks[0]
    # Q's conversion into the dot operand is loop-invariant: it runs once, before the loop.
    inside = [op for op in body.ops if op.name == "ttg.convert_layout" and "opIdx = 0" in str(op.results[0].type)]
    assert all(op.operands[0].owner.parent is body for op in inside)
    assert loop_pipeline(loop) is not None   # V is pipelined
    # sm_90: both dots on wgmma, two m64 blocks per warpgroup (BLOCK_M = 128, 4 warps) and four k-steps
    # each; A (Q, then P) from registers, K and V through descriptors of their pipelined tiles.
    assert "versionMajor = 3" in ttgir and "versionMajor = 2" not in ttgir
    ptx = ck.asm["ptx"]
    wgmmas = [line for line in ptx.splitlines() if "wgmma.mma_async" in line]
    assert len(wgmmas) == 16 and "mma.sync" not in ptx
    assert all(re.search(r"\}, \{%r\d+, %r\d+, %r\d+, %r\d+\}, %rd\d+, p, 1, 1, [01];", line) for line in wgmmas)


def _chain_kernel(name):
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "language"))
    import dot_kernels
    return getattr(dot_kernels, name)


@pytest.mark.parametrize("arch", [80, 90])
def test_a_tile_computed_on_before_its_dot_is_pipelined_and_read_back(arch):
    """fla's `b_v * exp(g)[:, None]` before `tl.dot(b_k, b_v, h)`: the v tile is copied with cp.async
    like k and read back in its own layout (plain vector shared loads), not loaded into registers
    every iteration; the gate vector takes the tile's layout (no conversion of the tile before the
    multiply, which wrote it to shared memory one half at a time)."""
    sig = {"k_ptr": "*fp16", "v_ptr": "*fp16", "g_ptr": "*fp32", "out_ptr": "*fp32", "T": "i32",
           "K": "constexpr", "V": "constexpr", "BT": "constexpr"}
    src = ASTSource(_chain_kernel("gated_state_kernel"), sig, {"K": 32, "V": 64, "BT": 32},
                    {(i,): D16 for i in range(4)})
    ck = tilejit.compile(src, target=GPUTarget.parse(f"cuda:{arch}"), options={"num_warps": 4, "num_stages": 3})
    assert ck.asm["ttgir"].count(f"{PIPELINED} = true") == 2
    ptx = ck.asm["ptx"]
    tile_loads = [line for line in ptx.splitlines() if "ld.global" in line and ".v" in line]
    assert not tile_loads                       # both tiles arrive by cp.async (g is a scalar load)
    assert "ld.shared.v4.b32" in ptx or "ld.shared.v2.b32" in ptx    # v read back in its layout
    assert "st.shared.b16" not in ptx           # no element-by-element conversion of the tile


def test_tiles_feeding_two_dots_loaded_and_transposed_are_pipelined():
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "s_ptr": "*fp32", "u_ptr": "*fp32", "N": "i32",
           "BM": "constexpr", "BN": "constexpr"}
    src = ASTSource(_chain_kernel("two_dots_kernel"), sig, {"BM": 32, "BN": 32}, {(i,): D16 for i in range(5)})
    ck = tilejit.compile(src, target=GPUTarget.parse("cuda:80"), options={"num_warps": 4, "num_stages": 3})
    assert ck.asm["ttgir"].count(f"{PIPELINED} = true") == 2
    assert not [line for line in ck.asm["ptx"].splitlines() if "ld.global" in line]


@pytest.mark.parametrize("V", [64, 128])
def test_fla_backward_chunk_runs_every_dot_on_wgmma_with_operands_in_shared_memory(V):
    """fla's dq/dk chunk on sm_90 (Triton keeps all five dots on wgmma, every loaded operand in shared
    memory). With two V blocks the loop is pipelined and v and do, each read by two dots (v once
    transposed), are read in place through descriptors; with one block the loop is straight-line code
    (a loop of one iteration is its body) and the tiles are staged by stores and a proxy fence. The
    dots after the loop take the loop's accumulators as they are (warps along M): no ldmatrix, no
    mma.sync, and no accumulator goes through shared memory."""
    sig = {name: "*fp16" for name in ("q_ptr", "k_ptr", "v_ptr", "do_ptr", "h_ptr", "dh_ptr")}
    sig.update({"dq_ptr": "*fp32", "dk_ptr": "*fp32", "T": "i32"})
    sig.update({name: "constexpr" for name in ("V", "BT", "K", "BV")})
    src = ASTSource(_chain_kernel("chunk_dq_dk_kernel"), sig, {"V": V, "BT": 64, "K": 64, "BV": 64},
                    {(i,): D16 for i in range(8)})
    ck = tilejit.compile(src, target=GPUTarget.parse("cuda:90"), options={"num_warps": 4, "num_stages": 2})
    ttgir, ptx = ck.asm["ttgir"], ck.asm["ptx"]
    assert ttgir.count("scf.for") == (1 if V == 128 else 0)
    assert ttgir.count(f"{PIPELINED} = true") == (4 if V == 128 else 0)
    wgmma_blocks = re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n64k16", ptx)
    assert len(wgmma_blocks) == 5 * 4          # five dots of four k-steps each
    assert "mma.sync" not in ptx and "ldmatrix" not in ptx
    # each tile staged once: with one V block v (A of one dot, B of another transposed), do (A of
    # two dots), h and dh, then k, q and ds^T after the loop; with two, the last three only
    assert ptx.count("fence.proxy.async.shared::cta") == (3 if V == 128 else 7)
    assert not [line for line in ttgir.splitlines()
                if "convert_layout" in line and "-> (tensor<64x64xf32, #ttg.nvidia_mma" in line]


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_a_gate_vector_of_a_pipelined_loop_is_loaded_stages_minus_one_iterations_ahead(stages):
    """gla's `b_gk_last`, a [K] vector loaded every iteration of the state loop, is loaded
    num_stages - 1 iterations ahead into registers along with the tiles' copies (as Triton copies
    it with them): loaded where it was used, each iteration waited a full round trip to memory for
    it (fla's chunk_fwd_kernel_h: 53.7 -> 45.6 us on an H100, and num_stages then made no
    difference). The prologue loads it for iterations 0 .. S-2, each predicated on the iteration
    existing; the loop loads the one S-1 ahead."""
    sig = {"k_ptr": "*fp16", "v_ptr": "*fp16", "gk_ptr": "*fp32", "out_ptr": "*fp32", "T": "i32",
           "K": "constexpr", "V": "constexpr", "BT": "constexpr"}
    src = ASTSource(_chain_kernel("key_gated_state_kernel"), sig, {"K": 32, "V": 64, "BT": 32},
                    {(i,): D16 for i in range(4)})
    ck = tilejit.compile(src, target=GPUTarget.parse("cuda:80"), options={"num_warps": 1, "num_stages": stages})
    ttgir, ptx = ck.asm["ttgir"], ck.asm["ptx"]
    prefetched = [line for line in ttgir.splitlines() if "ttg.prefetched = true" in line]
    assert len(prefetched) == 1 and "-> (tensor<32xf32" in prefetched[0]
    loads = [line.strip() for line in ptx.splitlines() if "ld.global" in line]
    assert len(loads) == stages and all(line.startswith("@%p") for line in loads), loads
    assert len([line for line in _loop_body(ptx).splitlines() if "ld.global" in line]) == 1


@pytest.mark.parametrize("atomic", [False, True])
def test_a_load_from_memory_the_loop_writes_is_not_prefetched(atomic):
    """Loaded ahead, a value the loop itself writes (stores, or adds atomically) in an earlier
    iteration would be read stale."""
    sig = {"k_ptr": "*fp16", "v_ptr": "*fp16", "gk_ptr": "*fp32", "out_ptr": "*fp32", "T": "i32",
           "K": "constexpr", "V": "constexpr", "BT": "constexpr", "ATOMIC": "constexpr"}
    src = ASTSource(_chain_kernel("key_gated_state_kernel_in_place"), sig,
                    {"K": 32, "V": 64, "BT": 32, "ATOMIC": atomic}, {(i,): D16 for i in range(4)})
    ck = tilejit.compile(src, target=GPUTarget.parse("cuda:80"), options={"num_warps": 1, "num_stages": 3})
    assert f"{PIPELINED} = true" in ck.asm["ttgir"] and "ttg.prefetched" not in ck.asm["ttgir"]


def test_fp32_gate_tile_and_a_stored_tile_are_pipelined_too():
    """As Triton, every load whose value reaches a dot is pipelined: gla's fp32 gate tile (read back
    straight into the layout of the k tile it scales: no conversion of it through shared memory) and
    the delta rule's v tile, which is stored as well as multiplied into a dot."""
    sig = {"k_ptr": "*fp16", "v_ptr": "*fp16", "gk_ptr": "*fp32", "out_ptr": "*fp32", "T": "i32",
           "K": "constexpr", "V": "constexpr", "BT": "constexpr"}
    src = ASTSource(_chain_kernel("key_gated_state_kernel"), sig, {"K": 32, "V": 64, "BT": 32},
                    {(i,): D16 for i in range(4)})
    ck = tilejit.compile(src, target=GPUTarget.parse("cuda:80"), options={"num_warps": 4, "num_stages": 3})
    ttgir, ptx = ck.asm["ttgir"], ck.asm["ptx"]
    assert ttgir.count(f"{PIPELINED} = true") == 3
    gate_loads = [line for line in ttgir.splitlines() if f"{PIPELINED} = true" in line and "tensor<32x32xf32" in line]
    gate = gate_loads[0].split(" = tt.load")[0].strip()
    assert len(gate_loads) == 1 and f"ttg.convert_layout {gate} " in ttgir
    # that conversion is the read-back itself: the shared stores left are the scaled k tile's (into
    # its dot operand layout) and the gate vector's; converted after a read-back in its own layout,
    # the gate tile took 16 more stores and 6 more barriers
    assert len(re.findall(r"st\.shared", ptx)) <= 10 and ptx.count("bar.sync") <= 8
    sig = {"k_ptr": "*fp16", "v_ptr": "*fp16", "w_ptr": "*fp16", "v_new_ptr": "*fp32", "out_ptr": "*fp32", "T": "i32",
           "K": "constexpr", "V": "constexpr", "BT": "constexpr"}
    src = ASTSource(_chain_kernel("delta_state_kernel"), sig, {"K": 32, "V": 32, "BT": 32}, {(i,): D16 for i in range(5)})
    ck = tilejit.compile(src, target=GPUTarget.parse("cuda:80"), options={"num_warps": 4, "num_stages": 3})
    assert ck.asm["ttgir"].count(f"{PIPELINED} = true") == 3
    assert not [line for line in ck.asm["ptx"].splitlines() if "ld.global" in line]


def _loop_body(ptx: str) -> str:
    """The PTX of the kernel's one loop: from its first label to the branch back to it."""
    label = re.search(r"^(\$L__BB\d+_\d+):", ptx, re.M)
    start = label.end()
    back = re.search(rf"bra(\.uni)?\s+{re.escape(label.group(1))};", ptx[start:])
    return ptx[start:start + back.start()]


@pytest.mark.parametrize("arch", [80, 90])
def test_one_tile_as_both_operands_of_an_mma_sync_dot_is_read_in_place(arch):
    """fla's `tl.dot(b_k, tl.trans(b_k), A)` at 2 warps (mma.sync on sm_90 too: wgmma needs 4): both
    operands are read with ldmatrix from the pipelined buffer, the transposed one through the
    transposed tile, as Triton does. Read back into registers and converted twice instead, every
    iteration stored the tile to shared memory twice more (48 st.shared against 32, 12 barriers)."""
    sig = {"k_ptr": "*fp16", "beta_ptr": "*fp32", "a_ptr": "*fp32", "T": "i32",
           "K": "constexpr", "BT": "constexpr", "BK": "constexpr"}
    src = ASTSource(_chain_kernel("scaled_gram_kernel"), sig, {"K": 128, "BT": 64, "BK": 32},
                    {(i,): D16 for i in range(3)})
    ck = tilejit.compile(src, target=GPUTarget.parse(f"cuda:{arch}"), options={"num_warps": 2, "num_stages": 2})
    assert ck.asm["ttgir"].count(f"{PIPELINED} = true") == 1
    body = _loop_body(ck.asm["ptx"])
    assert "cp.async.cg.shared.global" in body
    assert body.count("ldmatrix.sync.aligned.m8n8.x4") == 12 and body.count("mma.sync") == 32
    assert "st.shared" not in body and "ld.shared" not in body
    # the stage's, and the one before its single buffer (num_stages - 1) is refilled: no conversion
    assert body.count("bar.sync") == 2


def test_tf32_operands_computed_from_pipelined_tiles_are_computed_in_their_layout():
    """gla's `intra_sub_inter`: `q * exp2(g - gn[None, :])` and `k * exp2(gn[:, None] - gk)` into a
    tf32 dot. The four tiles are read from their buffers straight into the operand layouts (q and k
    with ldmatrix, the fp32 gates with shared loads of pairs); only the gate vector is converted
    (one store a thread for each operand's slice). Computed in the loads' layouts, each fp32 product
    was converted element by element every iteration: 22 stores, 60 loads and 12 barriers."""
    sig = {"q_ptr": "*fp16", "k_ptr": "*fp16", "g_ptr": "*fp32", "a_ptr": "*fp32", "K": "i32",
           "BC": "constexpr", "BK": "constexpr"}
    src = ASTSource(_chain_kernel("gated_tf32_dot_kernel"), sig, {"BC": 16, "BK": 32}, {(i,): D16 for i in range(5)})
    ck = tilejit.compile(src, target=GPUTarget.parse("cuda:80"), options={"num_warps": 1, "num_stages": 2})
    assert ck.asm["ttgir"].count(f"{PIPELINED} = true") == 4
    body = _loop_body(ck.asm["ptx"])
    assert body.count("st.shared") == 2 and body.count("ldmatrix") == 4 and body.count("ld.shared") == 24
    assert body.count("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32") == 8
