"""wgmma on sm_90: the version-3 accumulator layout, the 128B-swizzled operand tiles against the
canonical layouts the matrix descriptors name, and the PTX of a pipelined matmul."""
import itertools
import re
import os
import subprocess
import sys

import pytest

import tilejit
import tilejit.language as tl
from tilejit.backends import GPUTarget
from tilejit.frontend.source import ASTSource
from tilejit import ir
from tilejit_nvidia.layouts import NvidiaMmaEncoding

parse_encoding = ir.default_context().parse_encoding
from tilejit_nvidia.shared_operands import IntArith, WgmmaTile, descriptor_bits

sys.path.insert(0, os.path.dirname(__file__))
from test_gpu_pipeline import D16, MATMUL_SIGNATURE, _compile, _matmul  # noqa: E402
from toolchain_paths import needs_ptxas, ptxas


def test_accumulator_layout_is_the_ptx_fragment():
    enc = NvidiaMmaEncoding(3, 0, (8, 1), (16, 128, 16))
    assert parse_encoding(str(enc)) == enc
    ll = enc.to_linear((128, 128))
    offsets = ll.register_offsets()
    assert len(offsets) == 64
    for warp, lane in itertools.product(range(8), range(32)):
        for j, i in itertools.product(range(16), range(4)):
            # PTX ISA, wgmma D fragment: d[4j + i]
            row = 16 * warp + lane // 4 + 8 * (i // 2)
            col = 8 * j + 2 * (lane % 4) + i % 2
            got = ll.coords(4 * j + i, lane, warp)
            assert tuple(got) == (row, col), (warp, lane, j, i)


def _swizzle128(addr):
    return addr ^ (((addr >> 7) & 7) << 4)


def _decode(desc):
    start = (desc & 0x3FFF) << 4
    lbo = ((desc >> 16) & 0x3FFF) << 4
    sbo = ((desc >> 32) & 0x3FFF) << 4
    assert desc >> 62 == 1   # 128B swizzle
    return start, lbo, sbo


def _canonical(desc, k_major, mn, k):
    """Byte address of element (mn, k) of one k16 block in the canonical 128B-swizzled layouts
    (CUTLASS's GmmaDescriptor: K-major ((8,m),(T,2k)):((8T,SBO),(1,LBO)); MN-major
    ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO)), T = 8 halves)."""
    start, lbo, sbo = _decode(desc)
    if k_major:
        addr = start + (mn // 8) * sbo + (mn % 8) * 128 + 2 * k
    else:
        addr = start + (mn // 64) * lbo + (k // 8) * sbo + (k % 8) * 128 + 2 * (mn % 64)
    return _swizzle128(addr)


@pytest.mark.parametrize("op_idx,shape,inner", [(0, (128, 64), 1), (0, (64, 128), 0), (1, (64, 128), 1),
                                                (1, (128, 64), 0), (0, (64, 128), 1)])
def test_tile_matches_what_the_descriptors_read(op_idx, shape, inner):
    tile = WgmmaTile(shape, inner)
    assert tile.fits()
    base = 4096   # 1024-aligned, as the pipeline places its buffers
    a = IntArith()
    k_dim = 1 if op_idx == 0 else 0
    K, MN = shape[k_dim], shape[1 - k_dim]
    mn_block = 64 if op_idx == 0 else MN      # A: one warpgroup's 64 rows; B: all of N
    lbo, sbo = tile.descriptor_fields()
    for mn0 in range(0, MN, mn_block):
        for k0 in range(0, K, 16):
            start, k_major = tile.block_start(op_idx, mn0, k0)
            desc = descriptor_bits(base + start, lbo, sbo)
            for mn, k in itertools.product(range(mn_block), range(16)):
                coords = [0, 0]
                coords[k_dim], coords[1 - k_dim] = k0 + k, mn0 + mn
                stored = base + 2 * tile.offset(a, coords)
                assert stored == _canonical(desc, k_major, mn, k), (mn0, k0, mn, k)


def test_tile_offsets_are_a_bijection():
    tile = WgmmaTile((64, 256), 1)
    a = IntArith()
    seen = {tile.offset(a, (r, c)) for r in range(64) for c in range(256)}
    assert seen == set(range(64 * 256))


@pytest.fixture(scope="module")
def wgmma_matmul():
    return _compile(arch=90)


def test_matmul_ptx_uses_wgmma(wgmma_matmul):
    assert "versionMajor = 3" in wgmma_matmul.asm["ttgir"]
    ptx = wgmma_matmul.asm["ptx"]
    assert ptx.count("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16") == 4   # BK = 64: 4 k-steps
    assert "ldmatrix" not in ptx and "mma.sync" not in ptx
    # A: K-major (trans-a 0); B: N-major (trans-b 1)
    assert ", p, 1, 1, 0, 1;" in ptx
    assert ".shared .align 1024" in ptx
    # cp.async-filled tiles need no proxy fence (it would also wait for the copies in flight)
    assert "fence.proxy.async" not in ptx


def _loop_text(ptx: str) -> str:
    """The pipelined loop's body when its copies are issued last: from its cp.async wait to the last
    cp.async commit."""
    start = ptx.index("cp.async.wait_group")
    return ptx[start:ptx.rindex("cp.async.commit_group")]


def test_accumulating_dot_stays_in_flight_across_iterations(wgmma_matmul):
    """acc = tl.dot(a, b, acc): the loop waits down to one wgmma group, refills the buffer the
    previous iteration read only after that wait and a barrier, and the exit waits for the last."""
    ptx = wgmma_matmul.asm["ptx"]
    loop = _loop_text(ptx)
    waited = loop.index("wgmma.wait_group.sync.aligned 1;")
    assert "wgmma.wait_group.sync.aligned 0;" not in loop
    after = loop[waited:]
    assert after.index("bar.sync") < after.index("cp.async.cg.shared.global")
    exit_wait = ptx.index("wgmma.wait_group.sync.aligned 0;", ptx.rindex("cp.async.commit_group"))
    assert exit_wait < ptx.index("st.global", exit_wait)


def test_dot_read_inside_the_iteration_waits_for_its_group():
    ptx = _compile(arch=90, scale_inside=True).asm["ptx"]
    start = ptx.index("cp.async.wait_group")
    loop = ptx[start:ptx.index("cp.async.wait_group \t0;", start)]   # the loop and its exit
    assert "wgmma.mma_async" in loop
    assert "wgmma.wait_group.sync.aligned 0;" in loop and "wgmma.wait_group.sync.aligned 1;" not in loop


@needs_ptxas
def test_ptxas_accepts_the_wgmma_code(wgmma_matmul, tmp_path):
    src = tmp_path / "k.ptx"
    src.write_text(wgmma_matmul.asm["ptx"])
    out = subprocess.run([ptxas(), "-arch=sm_90a", "-v", str(src), "-o", str(tmp_path / "k.cubin")],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "serialized" not in out.stderr and "spill stores" in out.stderr


def test_bf16_and_smaller_tiles():
    sig = dict(MATMUL_SIGNATURE, a_ptr="*bf16", b_ptr="*bf16")
    src = ASTSource(_matmul, sig, {"BM": 64, "BN": 64, "BK": 64, "OTHER": 0.0, "SCALE_INSIDE": False},
                    {(i,): D16 for i in range(6)})
    ck = tilejit.compile(src, target=GPUTarget.parse("cuda:90"), options={"num_warps": 4, "num_stages": 3})
    assert ck.asm["ptx"].count("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16") == 4


def test_split_accumulator_layout_puts_each_warpgroup_on_its_columns():
    """warpsPerCTA [4, 2] (8 warps on 64 rows): warps 0-3 own rows 16w.. of columns 0..N/2-1, warps
    4-7 the same rows of columns N/2..N-1, each warp's registers the PTX fragment of m64n(N/2)."""
    enc = NvidiaMmaEncoding(3, 0, (4, 2), (16, 32, 16))
    ll = enc.to_linear((64, 64))
    assert len(ll.register_offsets()) == 16
    for warp, lane in itertools.product(range(8), range(32)):
        for j, i in itertools.product(range(4), range(4)):
            row = 16 * (warp % 4) + lane // 4 + 8 * (i // 2)
            col = 32 * (warp // 4) + 8 * j + 2 * (lane % 4) + i % 2
            assert tuple(ll.coords(4 * j + i, lane, warp)) == (row, col), (warp, lane, j, i)
    # A is shared by the two warpgroups: every warp holds the rows of its position in its group
    a = enc.operand_linear(0, (64, 32))
    for lane in range(32):
        for r in range(len(a.register_offsets())):
            assert a.coords(r, lane, 1) == a.coords(r, lane, 5)


@pytest.mark.parametrize("bn, b_k_major, form", [(128, False, "m64n64k16"), (64, True, "m64n32k16"), (64, False, None)])
def test_eight_warps_on_64_rows_split_n_between_the_warpgroups(bn, b_k_major, form):
    """Triton's [4, 2]: each warpgroup an m64n(N/2) with its own B columns, rows further in a K-major
    tile or a whole 128-byte slab further in an N-major one; 32-column blocks of an N-major tile
    would start inside a slab, so that dot keeps mma.sync."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "language"))
    from test_lang_dot import _strided_b_matmul
    K = 256
    strides = (1, K) if b_k_major else (bn, 1)
    ck = _strided_b_matmul.warmup("*fp16", "*fp16", "*fp32", K, *strides, BM=64, BN=bn, BK=64, grid=(1,),
                                  target="cuda:90", num_warps=8, num_stages=3)
    ptx = ck.asm["ptx"]
    if form is None:
        assert "wgmma" not in ptx and "mma.sync" in ptx
        return
    assert "warpsPerCTA = [4, 2]" in ck.asm["ttgir"]
    assert ptx.count(f"wgmma.mma_async.sync.aligned.{form}.f32.f16.f16") == 4 and "mma.sync" not in ptx


def test_shapes_wgmma_does_not_take_keep_mma_sync_and_a_register_a_takes_wgmma():
    # BM = 32 with 4 warps: not one m64 block per warpgroup
    src = ASTSource(_matmul, MATMUL_SIGNATURE, {"BM": 32, "BN": 64, "BK": 32, "OTHER": 0.0, "SCALE_INSIDE": False},
                    {(i,): D16 for i in range(6)})
    ck = tilejit.compile(src, target=GPUTarget.parse("cuda:90"), options={"num_warps": 4, "num_stages": 3})
    assert "wgmma" not in ck.asm["ptx"] and "mma.sync" in ck.asm["ptx"]
    # A with `other` = 1 cannot be zero-filled by cp.async: it stays a register load, and wgmma
    # reads it from registers (four .b32 of the A fragment) while B comes through its descriptor
    ck = _compile(arch=90, other=1.0)
    assert "versionMajor = 3" in ck.asm["ttgir"]
    ptx = ck.asm["ptx"]
    assert ptx.count("wgmma.mma_async") == 4 and "mma.sync" not in ptx
    assert re.search(r"wgmma\.mma_async[^\n]*\}, \{\$?%r\d+, %r\d+, %r\d+, %r\d+\}, %rd\d+, p, 1, 1, 1;", ptx)


def test_copies_predicate_through_ignore_src(wgmma_matmul):
    """The load mask (and the loop bound of a copy ahead) is cp.async's ignore-src predicate: no
    src-size operand to select and compare per copy."""
    ptx = wgmma_matmul.asm["ptx"]
    copies = re.findall(r"cp\.async\.cg\.shared\.global \[%r\d+\], \[%rd\d+\], 16, (\S+);", ptx)
    assert len(copies) == 8 * 3 and all(re.fullmatch(r"%p\d+", p) for p in copies)   # 8 a stage, 3 stages


def test_copy_addresses_are_one_register_plus_constants():
    from tilejit.gpu.layouts import BlockedEncoding
    from tilejit_nvidia.shared_dot import _constant_tile_deltas
    # matmul's A tile (128 x 64 fp16, 8 warps): a thread copies rows r, r+32, r+64, r+96, whose
    # 128B swizzle is the same (r % 8), so the copies are 32 rows of 64 elements apart everywhere.
    layout = BlockedEncoding((1, 8), (4, 8), (8, 1), (1, 0)).to_linear((128, 64))
    assert _constant_tile_deltas(layout, WgmmaTile((128, 64), 1), [0, 8, 16, 24]) == {0: 0, 8: 2048, 16: 4096,
                                                                                        24: 6144}
    # Two rows a thread (r, r+1): their swizzle differs, so the distance depends on the thread.
    layout = BlockedEncoding((2, 8), (4, 8), (4, 1), (1, 0)).to_linear((32, 64))
    assert _constant_tile_deltas(layout, WgmmaTile((32, 64), 1), [0, 8]) is None


@pytest.mark.parametrize("elem_bytes", [1, 4])
@pytest.mark.parametrize("op_idx", [0, 1])
def test_k_major_fp8_and_fp32_tiles_match_what_the_descriptors_read(elem_bytes, op_idx):
    """fp8 (k32) and tf32 (k8) wgmma read K-major tiles only: the same 128-byte rows, with K blocks
    of 32 bytes (CUTLASS's K-major layout with T = 16 / elem_bytes elements per 16 bytes)."""
    k_dim = 1 if op_idx == 0 else 0
    slab = 128 // elem_bytes
    shape = (128, slab) if op_idx == 0 else (slab, 128)
    tile = WgmmaTile(shape, k_dim, elem_bytes)
    assert tile.fits()
    base, a = 8192, IntArith()
    lbo, sbo = tile.descriptor_fields()
    mn_block, k_step = (64 if op_idx == 0 else 128), 32 // elem_bytes
    for mn0 in range(0, 128, mn_block):
        for k0 in range(0, slab, k_step):
            start, k_major = tile.block_start(op_idx, mn0, k0)
            assert k_major
            desc_start, _, desc_sbo = _decode(descriptor_bits(base + start, lbo, sbo))
            for mn, k in itertools.product(range(mn_block), range(k_step)):
                coords = [0, 0]
                coords[k_dim], coords[1 - k_dim] = k0 + k, mn0 + mn
                stored = base + elem_bytes * tile.offset(a, coords)
                canonical = desc_start + (mn // 8) * desc_sbo + (mn % 8) * 128 + elem_bytes * k
                assert stored == _swizzle128(canonical), (mn0, k0, mn, k)


@pytest.mark.parametrize("swizzle", [64, 32])
@pytest.mark.parametrize("op_idx", [0, 1])
def test_narrow_swizzle_fp8_tiles_match_what_the_descriptors_read(swizzle, op_idx):
    """K-major fp8 tiles whose K is 64 or 32 bytes (BLOCK_K 64 or 32) use the 64- and 32-byte swizzles:
    rows of `swizzle` bytes, 8-row groups SBO apart, and the hardware XORs address bits [4, 4 + b)
    with [7, 7 + b) (b = 2 or 1: CUTLASS's Swizzle<2,4,3>, <1,4,3>)."""
    from tilejit_nvidia.shared_operands import operand_tile
    k_dim = 1 if op_idx == 0 else 0
    shape = (128, swizzle) if op_idx == 0 else (swizzle, 128)
    tile = operand_tile(shape, k_dim, 1)
    assert tile.swizzle == swizzle and tile.fits()
    bits = {64: 2, 32: 1}[swizzle]
    base, a = 8192, IntArith()
    lbo, sbo = tile.descriptor_fields()
    mn_block = 64 if op_idx == 0 else 128
    for mn0 in range(0, 128, mn_block):
        for k0 in range(0, swizzle, 32):
            start, k_major = tile.block_start(op_idx, mn0, k0)
            desc = descriptor_bits(base + start, lbo, sbo, swizzle)
            assert desc >> 62 == {64: 2, 32: 3}[swizzle] and k_major
            desc_start, desc_sbo = (desc & 0x3FFF) << 4, ((desc >> 32) & 0x3FFF) << 4
            for mn, k in itertools.product(range(mn_block), range(32)):
                coords = [0, 0]
                coords[k_dim], coords[1 - k_dim] = k0 + k, mn0 + mn
                canonical = desc_start + (mn // 8) * desc_sbo + (mn % 8) * swizzle + k
                swizzled = canonical ^ (((canonical >> 7) & ((1 << bits) - 1)) << 4)
                assert base + tile.offset(a, coords) == swizzled, (mn0, k0, mn, k)


@tilejit.jit
def _k_major_matmul(a_ptr, bt_ptr, c_ptr, K, stride_am, stride_bn, BM: tl.constexpr, BN: tl.constexpr,
                    BK: tl.constexpr):
    """A row-major, B stored transposed (K contiguous), as Triton's fp8 tutorial passes it."""
    offs_m, offs_n, offs_k = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :]
    b_ptrs = bt_ptr + offs_k[:, None] + offs_n[None, :] * stride_bn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        acc = tl.dot(tl.load(a_ptrs), tl.load(b_ptrs), acc)
        a_ptrs += BK
        b_ptrs += BK
    tl.store(c_ptr + offs_m[:, None] * BN + offs_n[None, :], acc)


@pytest.mark.parametrize("dtype,bk,instr", [
    ("fp8e4nv", 128, "m64n128k32.f32.e4m3.e4m3"), ("fp8e5", 128, "m64n128k32.f32.e5m2.e5m2"),
    ("fp32", 32, "m64n128k8.f32.tf32.tf32")])
def test_fp8_and_tf32_k_major_matmuls_take_pipelined_wgmma(dtype, bk, instr):
    sig = {"a_ptr": f"*{dtype}", "bt_ptr": f"*{dtype}", "c_ptr": "*fp32", "K": "i32", "stride_am": "i32",
           "stride_bn": "i32", "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"}
    src = ASTSource(_k_major_matmul, sig, {"BM": 128, "BN": 128, "BK": bk}, {(i,): D16 for i in range(6)})
    ck = tilejit.compile(src, target=GPUTarget.parse("cuda:90"), options={"num_warps": 8, "num_stages": 3})
    ptx = ck.asm["ptx"]
    assert ptx.count(f"wgmma.mma_async.sync.aligned.{instr}") == 4   # 128 bytes of K: 4 instructions
    assert "mma.sync" not in ptx and "ldmatrix" not in ptx
    assert ", p, 1, 1;" in ptx           # no transpose operands: both tiles K-major
    assert ptx.count("cp.async.cg.shared.global") >= 4 and "wgmma.wait_group.sync.aligned 1;" in ptx
    if ck.asm.get("cubin"):
        assert ck.asm["cubin"][:4] == b"\x7fELF"


@pytest.mark.parametrize("num_warps,bm", [(8, 128), (4, 64)])
def test_tf32_with_an_n_major_b_copies_each_element_into_a_k_major_tile(num_warps, bm):
    """wgmma reads 32-bit operands K-major only: a row-major B is copied element by element (4-byte
    cp.async, as Triton on sm_90) into a K-major tile, and the loop takes the pipelined wgmma .tf32."""
    sig = dict(MATMUL_SIGNATURE, a_ptr="*fp32", b_ptr="*fp32")
    src = ASTSource(_matmul, sig, {"BM": bm, "BN": 128, "BK": 32, "OTHER": 0.0, "SCALE_INSIDE": False},
                    {(i,): D16 for i in range(6)})
    ck = tilejit.compile(src, target=GPUTarget.parse("cuda:90"), options={"num_warps": num_warps, "num_stages": 3})
    ptx = ck.asm["ptx"]
    assert "mma.sync" not in ptx and "ldmatrix" not in ptx
    assert ptx.count("wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32") == 4   # BK = 32: 4 k-steps
    assert ", p, 1, 1;" in ptx   # both tiles K-major: no transpose operands
    # B (32 x 128 floats) is 4096 / threads elements a thread, one 4-byte copy each, in each of the
    # two prologue stages and the loop; A keeps 16-byte copies
    b_copies = 32 * 128 // (32 * num_warps)
    assert ptx.count("cp.async.ca.shared.global") == 3 * b_copies
    assert re.search(r"cp\.async\.ca\.shared\.global \[%r\d+(\+\d+)?\], \[%rd\d+\], 4,", ptx)
    assert ptx.count("cp.async.cg.shared.global") == 3 * bm * 32 // (4 * 32 * num_warps)
    assert "wgmma.wait_group.sync.aligned 1;" in ptx


@tilejit.jit
def _fp8_precise_matmul(a_ptr, bt_ptr, c_ptr, K, stride_am, stride_bn, BM: tl.constexpr, BN: tl.constexpr,
                        BK: tl.constexpr, IMPRECISE: tl.constexpr):
    offs_m, offs_n, offs_k = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :]
    b_ptrs = bt_ptr + offs_k[:, None] + offs_n[None, :] * stride_bn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        acc = tl.dot(tl.load(a_ptrs), tl.load(b_ptrs), acc, max_num_imprecise_acc=IMPRECISE)
        a_ptrs += BK
        b_ptrs += BK
    tl.store(c_ptr + offs_m[:, None] * BN + offs_n[None, :], acc)


@tilejit.jit
def _fp8_row_major_b_matmul(a_ptr, b_ptr, c_ptr, K, stride_am, stride_bk, BM: tl.constexpr, BN: tl.constexpr,
                            BK: tl.constexpr, IMPRECISE: tl.constexpr):
    """Triton's test_dot_max_num_imprecise_acc kernel in short: A K-major, B row-major (N contiguous)."""
    offs_m, offs_n, offs_k = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :]
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        acc = tl.dot(tl.load(a_ptrs), tl.load(b_ptrs), acc, max_num_imprecise_acc=IMPRECISE)
        a_ptrs += BK
        b_ptrs += BK * stride_bk
    tl.store(c_ptr + offs_m[:, None] * BN + offs_n[None, :], acc)


@pytest.mark.parametrize("BM,BN,BK,warps,imprecise,n_per_group", [
    (128, 256, 128, 8, 32, 256), (128, 256, 128, 8, None, 256), (64, 64, 64, 8, 32, 32), (128, 64, 32, 4, None, 64)])
def test_fp8_row_major_b_is_rewritten_k_major_for_wgmma(BM, BN, BK, warps, imprecise, n_per_group):
    """wgmma reads fp8 K-major only and cp.async cannot transpose bytes: a row-major B tile is copied
    as it is and rewritten K-major in shared memory each iteration (4 x 4 bytes a thread, 8 prmt),
    as Triton does on sm_90. K of 64 or 32 bytes takes the 64- or 32-byte swizzle, and 8 warps on
    64 rows split N between the warpgroups. The fp32 adds are Triton's test's count."""
    sig = {"a_ptr": "*fp8e4nv", "b_ptr": "*fp8e4nv", "c_ptr": "*fp32", "K": "i32", "stride_am": "i32",
           "stride_bk": "i32", "BM": "constexpr", "BN": "constexpr", "BK": "constexpr", "IMPRECISE": "constexpr"}
    src = ASTSource(_fp8_row_major_b_matmul, sig, {"BM": BM, "BN": BN, "BK": BK, "IMPRECISE": imprecise},
                    {(i,): D16 for i in range(6)})
    ptx = tilejit.compile(src, target=GPUTarget.parse("cuda:90"),
                          options={"num_warps": warps, "num_stages": 3}).asm["ptx"]
    assert f"wgmma.mma_async.sync.aligned.m64n{n_per_group}k32.f32.e4m3.e4m3" in ptx and "mma.sync" not in ptx
    blocks_per_thread = BK * BN // 16 // (32 * warps)
    assert ptx.count("prmt.b32") == 8 * blocks_per_thread
    assert ptx.count("add.f32") == (BM * BN) // (32 * warps) * (BK // imprecise if imprecise else 0)


def test_fp8_column_major_a_is_rewritten_k_major_too():
    """An fp8 A stored along M (the weight gradient's X^T) is rewritten K-major like a row-major B:
    A^T [K, M] is B's case. With both rewritten, both tiles pass through `ByteTranspose`."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "nvidia"))
    from wgmma_kernels import strided_matmul
    counts = {}
    for a_t, b_t in ((True, True), (True, False)):
        M, N, K = 256, 256, 208
        sam, sak = (1, M) if a_t else (K, 1)
        sbk, sbn = (1, K) if b_t else (N, 1)
        ptx = strided_matmul.warmup("*fp8e4nv", "*fp8e4nv", "*fp32", M, N, K, sam, sak, sbk, sbn, N, BM=128, BN=128,
                                        BK=64, num_warps=8, num_stages=3, grid=(1,), target="cuda:90").asm["ptx"]
        assert "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3" in ptx and "mma.sync" not in ptx
        counts[b_t] = ptx.count("prmt.b32")
    # 128 x 64 bytes a tile: 2 blocks of 4 x 4 bytes a thread, 8 prmt each, per rewritten operand
    assert counts == {True: 16, False: 32}


def test_fp8_dots_outside_loops_stage_both_operands_k_major():
    """Triton's test_dot fp8 chain-dot case: loop-free dots of fp8 tiles (B row-major, and A the
    first dot's result cast to fp8) stage both operands into K-major tiles and run wgmma."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "nvidia"))
    from wgmma_kernels import fp8_tile_dots
    ptx = fp8_tile_dots.warmup("*fp8e5", "*fp8e5", "*fp8e5", "*fp32", M=128, N=128, K=64, CHAIN=True, num_warps=4,
                               grid=(1,), target="cuda:90").asm["ptx"]
    assert ptx.count("wgmma.mma_async.sync.aligned.m64n128k32.f32.e5m2.e5m2") == 2 * 2 + 2 * 4
    assert "mma.sync" not in ptx


@pytest.mark.parametrize("imprecise,adds", [(None, 0), (128, 64), (32, 256)])
def test_fp8_max_num_imprecise_acc_adds_partial_sums_in_fp32(imprecise, adds):
    """fp8 wgmma sums in the tensor core's reduced precision (Triton's default on sm_90). A dot that
    asks for fp32 accumulation every `max_num_imprecise_acc` products gets Triton's sm_90 scheme:
    wgmmas into a zeroed accumulator for that many products of K, a wait, and an fp32 add into the
    running one. The add count is Triton's test_dot_max_num_imprecise_acc formula: accumulator
    registers a thread (128 * 128 / 256 = 64) times K / imprecise."""
    sig = {"a_ptr": "*fp8e4nv", "bt_ptr": "*fp8e4nv", "c_ptr": "*fp32", "K": "i32", "stride_am": "i32",
           "stride_bn": "i32", "BM": "constexpr", "BN": "constexpr", "BK": "constexpr", "IMPRECISE": "constexpr"}
    src = ASTSource(_fp8_precise_matmul, sig, {"BM": 128, "BN": 128, "BK": 128, "IMPRECISE": imprecise},
                    {(i,): D16 for i in range(6)})
    ptx = tilejit.compile(src, target=GPUTarget.parse("cuda:90"), options={"num_warps": 8}).asm["ptx"]
    assert "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3" in ptx and "mma.sync" not in ptx
    assert ptx.count("add.f32") == adds
    # each partial sum starts from a zeroed accumulator (scale-d 0 on its first wgmma: a constant
    # 0 operand), and the adds follow their wgmmas with no wait between them (ptxas orders them), as
    # Triton's PTX: one commit and one wait for the dot
    ptx_loop = ptx[ptx.index("wgmma.fence"):]
    wgmmas = ptx_loop.count("wgmma.mma_async")
    assert ptx_loop.count("wgmma.commit_group") == 1 and wgmmas == 4   # one m64 block a warpgroup, 4 k32 steps
    if imprecise:
        first = ptx_loop.index("wgmma.mma_async")
        assert ptx_loop.index("add.f32") < ptx_loop.index("wgmma.commit_group") and first < ptx_loop.index("add.f32")


def test_fp8_partial_sums_are_closer_to_fp32_than_whole_k_accumulation():
    """On an sm_90 GPU: max_num_imprecise_acc=32 (fp32 adds of 32-product partial sums) against the
    default (the tensor core's reduced-precision sum over all of K), both against an fp32 matmul of
    the same fp8 values. K = 4096 makes the default's error visible (H100, a 4096^3 matmul: 0.35
    against 0.0039, the same errors as Triton's on the same inputs)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("needs an sm_90 GPU")
    torch.manual_seed(0)
    K = 4096
    a = (torch.randn(128, K, device="cuda") * 0.5).to(torch.float8_e4m3fn)
    bt = (torch.randn(128, K, device="cuda") * 0.5).to(torch.float8_e4m3fn)
    ref = a.float() @ bt.float().T
    errors = {}
    for imprecise in (None, 32):
        c = torch.empty(128, 128, device="cuda")
        _fp8_precise_matmul[(1,)](a, bt, c, K, K, K, BM=128, BN=128, BK=128, IMPRECISE=imprecise, num_warps=8)
        errors[imprecise] = (c - ref).abs().max().item()
    assert errors[32] < 0.02 and errors[32] * 10 < errors[None], errors


DELTA_SIGNATURE = {"k_ptr": "*fp16", "v_ptr": "*fp16", "w_ptr": "*fp16", "v_new_ptr": "*fp32", "out_ptr": "*fp32",
                   "T": "i32", "K": "constexpr", "V": "constexpr", "BT": "constexpr"}


def _delta_state(num_warps, size=64):
    from test_gpu_pipeline import _chain_kernel
    src = ASTSource(_chain_kernel("delta_state_kernel"), DELTA_SIGNATURE, {"K": size, "V": size, "BT": size},
                    {(i,): D16 for i in range(5)})
    return tilejit.compile(src, target=GPUTarget.parse("cuda:90"), options={"num_warps": num_warps, "num_stages": 2})


def test_a_b_computed_in_the_loop_is_staged_for_wgmma_every_iteration(tmp_path):
    """The delta rule's state loop (fla's chunk_gated_delta_rule_fwd_kernel_h): both dots take a B
    computed in registers there (`h.to(f16)`, then `v - w h`). Each iteration writes it into shared
    memory for wgmma, as Triton's local_alloc, and both operands are read through descriptors (A, w
    and k, from their pipelined tiles): no mma.sync, no A fragment in registers."""
    ck = _delta_state(num_warps=4)
    ptx = ck.asm["ptx"]
    wgmmas = [line for line in ptx.splitlines() if "wgmma.mma_async" in line]
    assert len(wgmmas) == 8 and "mma.sync" not in ptx     # 2 dots x 4 k-steps, one m64 block
    assert "ldmatrix" not in ptx
    # each staged B is written, then made visible to the async proxy before its dot's wgmmas
    fences = [i for i, line in enumerate(ptx.splitlines()) if "fence.proxy.async.shared::cta;" in line]
    firsts = [i for i, line in enumerate(ptx.splitlines()) if "wgmma.mma_async" in line][::4]
    assert len(fences) == 2 and all(f < w for f, w in zip(fences, firsts))
    # a dot whose B is staged waits for its group inside the iteration (the next one rewrites the tile)
    assert "wgmma.wait_group.sync.aligned 0;" in ptx and "wgmma.wait_group.sync.aligned 1;" not in ptx
    src = tmp_path / "k.ptx"
    src.write_text(ptx)
    out = subprocess.run([ptxas(), "-arch=sm_90a", "-v", str(src), "-o", str(tmp_path / "k.cubin")],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert " 0 bytes spill stores" in out.stderr


def test_a_state_loop_wgmma_does_not_take_keeps_mma_sync():
    # 2 warps: not a warpgroup; the staged path is not taken and the dots stay on mma.sync
    ptx = _delta_state(num_warps=2).asm["ptx"]
    assert "wgmma" not in ptx and "mma.sync" in ptx
