"""The swizzled shared tile and the ldmatrix plan, checked by simulating ldmatrix lane by lane: every
register of the mma.sync operand layout must receive the tile element its layout coordinates name."""
import pytest

from tilejit.gpu.layouts import DotOperandEncoding
from tilejit_nvidia.layouts import NvidiaMmaEncoding
from tilejit_nvidia.shared_operands import IntArith, SwizzledTile, plan_ldmatrix


def _simulate(shape, op_idx, inner, warps, parent=None):
    layout = DotOperandEncoding(op_idx, parent or NvidiaMmaEncoding(2, 0, warps), 2).to_linear(shape)
    tile = SwizzledTile(shape, inner)
    a = IntArith()
    smem = [None] * (shape[0] * shape[1])
    for i in range(shape[0]):
        for j in range(shape[1]):
            off = tile.offset(a, (i, j))
            assert smem[off] is None, "the swizzle must be a bijection"
            smem[off] = (i, j)
    plan = plan_ldmatrix(layout, op_idx, inner)
    assert plan is not None
    assert plan.trans == (inner != (1 if op_idx == 0 else 0))
    filled = {}
    for warp in range(layout.num_warps):
        warp_part = layout.coords(0, 0, warp)
        for group in plan.groups:
            addrs = [tile.offset(a, plan.lane_coords(a, group, lane, warp_part)) for lane in range(32)]
            assert all(x % 8 == 0 for x in addrs), "ldmatrix rows are whole 16-byte chunks"
            for s, job in enumerate(group.jobs):
                rows = [smem[addrs[8 * s + i]: addrs[8 * s + i] + 8] for i in range(8)]
                for lane in range(32):
                    g, t = lane // 4, lane % 4
                    got = ((rows[g][2 * t], rows[g][2 * t + 1]) if not plan.trans
                           else (rows[2 * t][g], rows[2 * t + 1][g]))
                    for h in range(2):
                        filled[(warp, lane, job.registers[h])] = got[h]
    for warp in range(layout.num_warps):
        for lane in range(32):
            for r in range(layout.num_registers):
                assert filled[(warp, lane, r)] == layout.coords(r, lane, warp), (warp, lane, r)
    return plan


@pytest.mark.parametrize("shape,op_idx,inner,warps", [
    ((128, 64), 0, 1, (2, 4)),    # matmul A, K contiguous
    ((64, 128), 1, 1, (2, 4)),    # matmul B, N contiguous: .trans
    ((64, 64), 1, 0, (4, 1)),     # attention K^T: K contiguous
    ((64, 64), 1, 1, (4, 1)),     # attention V
    ((128, 64), 0, 1, (4, 1)),    # attention Q
    ((32, 32), 0, 0, (2, 2)),     # A stored M-contiguous: .trans
    ((64, 32), 1, 1, (1, 4)),     # 64-byte rows: per_phase 2
    ((16, 16), 0, 1, (1, 1)),     # 32-byte rows, a single x4
])
def test_ldmatrix_plan_reads_every_fragment(shape, op_idx, inner, warps):
    plan = _simulate(shape, op_idx, inner, warps)
    assert sum(len(g.jobs) == 4 for g in plan.groups) >= len(plan.groups) - 1   # x4 wherever possible
    # An x4's destinations come out in its jobs' order, and mma.sync reads each operand from
    # consecutive registers: A's four as (m, k), (m + 8, k), (m, k + 8), (m + 8, k + 8); each n8 tile's
    # two B registers as (k, k + 8). Any other order costs register moves before every mma.
    for group in plan.groups:
        if len(group.jobs) != 4:
            continue
        corners = [(job.non_k - group.jobs[0].non_k, job.k - group.jobs[0].k) for job in group.jobs]
        if op_idx == 0 and corners[1][0]:
            assert corners == [(0, 0), (8, 0), (0, 8), (8, 8)]
        elif op_idx == 1:
            assert corners[1] == (0, 8) and corners[3][1] - corners[2][1] == 8 and corners[2][0] == corners[3][0]


@pytest.mark.parametrize("n", [32, 64, 128])
@pytest.mark.parametrize("op_idx", [0, 1])
@pytest.mark.parametrize("inner", [0, 1])
def test_ldmatrix_plan_reads_the_operands_of_a_split_wgmma_layout(n, op_idx, inner):
    """8 warps on 64 rows (warpsPerCTA [4, 2]): a dot that runs mma.sync on that layout after all
    reads its operands by ldmatrix too. A is shared by the two warpgroups, B is each group's
    columns."""
    parent = NvidiaMmaEncoding(3, 0, (4, 2), (16, n // 2, 16))
    _simulate((64, 64) if op_idx == 0 else (64, n), op_idx, inner, None, parent)


def test_swizzle_spreads_ldmatrix_rows_over_all_banks():
    a = IntArith()
    for shape, inner in (((128, 64), 1), ((64, 128), 1), ((64, 32), 1)):
        tile = SwizzledTile(shape, inner)
        for col in range(0, tile.width, 8):
            # the 8 rows one matrix reads: distinct 16-byte bank groups (128-byte bank window)
            groups = {(tile.offset(a, (r, col) if inner == 1 else (col, r)) * 2 % 128) // 16 for r in range(8)}
            assert len(groups) == 8, (shape, col)


def test_non_fragment_layouts_have_no_plan():
    from tilejit.gpu.layouts import BlockedEncoding
    blocked = BlockedEncoding((1, 8), (4, 8), (4, 1), (1, 0)).to_linear((64, 64))
    assert plan_ldmatrix(blocked, 0, 1) is None


@pytest.mark.parametrize("version,shape,warps,inner", [
    (2, (64, 64), (2, 2), 1),     # an mma.sync result, staged along its rows
    (2, (32, 64), (1, 2), 0),     # ... stored transposed (stmatrix .trans)
    (3, (64, 64), (4, 1), 1),     # a wgmma result (fla's h.to(bf16) staged for the next dot)
    (3, (128, 32), (4, 1), 0),
])
def test_stmatrix_plan_writes_every_element_of_an_mma_result_once(version, shape, warps, inner):
    """sm_90 writes an mma result into a shared tile with stmatrix, by the plan ldmatrix would read
    it with as operand A: simulated lane by lane, each element lands at its own tile offset, once."""
    from tilejit_nvidia.shared_operands import WgmmaTile
    instr = (16, shape[1], 16) if version == 3 else (16, 8)
    layout = NvidiaMmaEncoding(version, 0, warps, instr).to_linear(shape)
    tile = WgmmaTile(shape, inner) if version == 3 else SwizzledTile(shape, inner)
    plan = plan_ldmatrix(layout, 0, inner, warps_along_k=True)
    assert plan is not None and plan.trans == (inner == 0)
    a = IntArith()
    written = {}
    for warp in range(layout.num_warps):
        warp_part = layout.coords(0, 0, warp)
        for group in plan.groups:
            addrs = [tile.offset(a, plan.lane_coords(a, group, lane, warp_part)) for lane in range(32)]
            for s, job in enumerate(group.jobs):
                for lane in range(32):
                    g, t = lane // 4, lane % 4
                    for h in range(2):
                        row, col = (g, 2 * t + h) if not plan.trans else (2 * t + h, g)
                        offset = addrs[8 * s + row] + col
                        assert offset not in written, "written twice"
                        written[offset] = layout.coords(job.registers[h], lane, warp)
    assert len(written) == shape[0] * shape[1]
    assert all(tile.offset(a, coords) == offset for offset, coords in written.items())


def _run_byte_transpose(shape, num_warps):
    """Every thread of `ByteTranspose` on Python ints: the K-major tile it writes from an N-major
    tile whose byte (k, n) holds a value of its own, and the banks of each warp-wide read and write."""
    from tilejit_nvidia.shared_operands import ByteTranspose, transpose_words
    plan = ByteTranspose(shape, num_warps)
    assert plan.fits()
    a, (K, N) = IntArith(), shape
    value = {(k, n): (k * 7 + n * 13) & 0xFF for k in range(K) for n in range(N)}
    src = bytearray(K * N)
    for (k, n), v in value.items():
        src[plan.src.offset(a, (k, n))] = v
    dst, written = bytearray(K * N), set()
    conflicts = 0
    for warp in range(num_warps):
        for rnd in range(plan.rounds):
            blocks = [plan.block(a, lane, warp, rnd) for lane in range(32)]
            reads = [plan.reads(a, k0, n0) for k0, n0 in blocks]
            writes = [plan.writes(a, k0, n0) for k0, n0 in blocks]
            for i in range(4):   # one warp-wide 32-bit access each: its lanes' banks
                for offsets in ([r[i] for r in reads], [w[i] for w in writes]):
                    assert all(o % 4 == 0 for o in offsets)
                    conflicts += 32 - len({(o // 4) % 32 for o in offsets})
            for (k0, n0), rd, wr in zip(blocks, reads, writes):
                words = [int.from_bytes(src[o:o + 4], "little") for o in rd]
                for o, word in zip(wr, transpose_words(words)):
                    assert o not in written
                    written.add(o)
                    dst[o:o + 4] = word.to_bytes(4, "little")
    assert len(written) * 4 == K * N
    for (k, n), v in value.items():
        assert dst[plan.dst.offset(a, (k, n))] == v, (k, n)
    return conflicts


@pytest.mark.parametrize("shape,num_warps", [((128, 256), 8), ((128, 128), 4), ((256, 128), 8), ((128, 128), 8)])
def test_fp8_b_transposed_into_a_k_major_tile_without_bank_conflicts(shape, num_warps):
    """A row-major fp8 B tile ([K, N], N contiguous) rewritten K-major for wgmma, 4 x 4 bytes a
    thread: every byte lands where the descriptors read it, and no warp-wide read or write touches a
    bank twice."""
    assert _run_byte_transpose(shape, num_warps) == 0


@pytest.mark.parametrize("shape,num_warps", [((128, 64), 4), ((128, 32), 8), ((128, 16), 4), ((64, 64), 8),
                                             ((64, 128), 4), ((32, 128), 8)])
def test_fp8_b_transposed_for_narrow_tiles(shape, num_warps):
    """N below 128 bytes (the N blocks of a warp repeat across its lanes), or K of 64 or 32 bytes
    (the narrower swizzles, blocks numbered K first): still every byte in place."""
    _run_byte_transpose(shape, num_warps)
