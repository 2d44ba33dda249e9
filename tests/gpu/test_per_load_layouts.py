"""Per-access layouts (each global load/store its own coalesced blocked layout), MMA layouts flowing
forward from dots, rematerialized index conversions, and what they do to attention's code."""
import os
import sys

import llvmlite.binding as llvm
import pytest

import tilejit
from tilejit import ir
from tilejit.backends import GPUTarget
from tilejit.frontend.source import ASTSource
from tilejit.gpu.layouts import BlockedEncoding, DotOperandEncoding, SliceEncoding
from tilejit_nvidia.layouts import NvidiaMmaEncoding
from tilejit.gpu.llvm import lower_module
from tilejit_nvidia.pipeline import PIPELINED, loop_pipeline
from tilejit.gpu.ttgir import GPUConfig, make_ttgir
from tilejit_nvidia.isa import NvidiaISA
from toolchain_paths import needs_ptxas, ptxas

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
DATA = os.path.join(os.path.dirname(__file__), "data")
D16 = [["tt.divisibility", 16]]


@pytest.fixture(scope="module")
def attention():
    from common import load_kernels
    k = load_kernels("tilejit")
    sig = {"q_ptr": "*fp16", "k_ptr": "*fp16", "v_ptr": "*fp16", "o_ptr": "*fp16", "seq_len": "i32",
           "sm_scale": "fp32", "stride_h": "i32", "stride_s": "i32", "HEAD_DIM": "constexpr",
           "BLOCK_M": "constexpr", "BLOCK_N": "constexpr"}
    src = ASTSource(k.attention_fwd_kernel, sig, {"HEAD_DIM": 64, "BLOCK_M": 128, "BLOCK_N": 64},
                    {(i,): D16 for i in (0, 1, 2, 3, 4, 6, 7)})
    return tilejit.compile(src, target=GPUTarget.parse("cuda:90"), options={"num_warps": 4, "num_stages": 2})


def _loop(ck):
    module = ir.parse_module(ck.asm["ttgir"])
    return next(op for op in module.functions[0].walk() if op.name == "scf.for")


def test_each_load_gets_the_layout_of_its_own_contiguous_dim(attention):
    loads = [op for op in _loop(attention).regions[0].blocks[0].ops if op.name == "tt.load"]
    assert len(loads) == 2
    k_enc, v_enc = (op.results[0].type.encoding for op in loads)
    # K is read transposed (`cols[None, :] * stride_s + offs_d[:, None]`): contiguous along dim 0.
    assert k_enc == BlockedEncoding((8, 1), (8, 4), (1, 4), (0, 1))
    assert v_enc.order == (1, 0) and v_enc.size_per_thread == (1, 8)


def test_both_attention_tiles_are_pipelined_with_16_byte_copies(attention):
    loop = _loop(attention)
    plan = loop_pipeline(loop)
    assert plan is not None and len(plan.loads) == 2
    assert all(op.attrs.get(PIPELINED) for op in plan.loads)
    ptx = attention.asm["ptx"]
    assert "ld.global.b16" not in ptx and "ld.global.u16" not in ptx
    assert ptx.count("cp.async.cg.shared.global") >= 16   # 64x64 fp16 tiles, 16 bytes a copy, two tiles


def test_softmax_of_attention_stays_in_the_mma_layout(attention):
    body = _loop(attention).regions[0].blocks[0]
    # Inside the loop only the dot operands are converted: no MMA -> blocked trip through shared
    # memory for the softmax, no index conversion (`cols` is recomputed in each load's layout).
    converts = [op for op in body.ops if op.name == "ttg.convert_layout"]
    assert len(converts) == 3
    assert all("dot_op" in str(op.result.type) for op in converts)
    reduces = [op for op in body.ops if op.name == "tt.reduce"]
    assert len(reduces) == 2
    for op in reduces:
        enc = op.results[0].type.encoding
        assert isinstance(enc, SliceEncoding) and isinstance(enc.parent, NvidiaMmaEncoding)
    carried = [a.type.encoding for a in body.args[1:]]
    assert any(isinstance(e, NvidiaMmaEncoding) for e in carried)        # acc
    assert sum(isinstance(e, SliceEncoding) for e in carried) == 2       # m_i, l_i


@needs_ptxas
def test_attention_spills_at_most_a_few_bytes(attention, tmp_path):
    import subprocess
    ptx = tmp_path / "att.ptx"
    ptx.write_text(attention.asm["ptx"])
    proc = subprocess.run([ptxas(), "-arch=sm_90a", "-v", str(ptx), "-o", str(tmp_path / "att.cubin")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    spill = [line for line in proc.stderr.splitlines() if "spill stores" in line]
    assert spill and int(spill[0].split("bytes spill stores")[0].split(",")[-1].strip()) <= 16, proc.stderr


def test_a_loop_carried_pointer_takes_its_load_layout():
    """Matmul's `a_ptrs += BK`: the carried pointer is in the load's layout (no pointer conversion)."""
    module = make_ttgir(ir.parse_module(open(os.path.join(DATA, "matmul.ttir")).read()), GPUConfig(4, NvidiaISA(80, 32)))
    loop = next(op for op in module.functions[0].walk() if op.name == "scf.for")
    body = loop.regions[0].blocks[0]
    for load in (op for op in body.ops if op.name == "tt.load"):
        assert load.operands[0].type.encoding == load.results[0].type.encoding
    assert not [op for op in module.functions[0].walk() if op.name == "ttg.convert_layout"
                and isinstance(ir.element_type(op.result.type), ir.PointerType)]


def test_pointer_tensors_convert_through_shared_memory():
    module = make_ttgir(ir.parse_module(open(os.path.join(DATA, "vadd.ttir")).read()), GPUConfig(4, NvidiaISA(80, 32)))
    func = module.functions[0]
    load = next(op for op in func.walk() if op.name == "tt.load")
    ptr = load.operands[0]
    other = BlockedEncoding((1,), (32,), (4,), (0,))
    assert ptr.type.encoding != other
    conv = ir.Operation("ttg.convert_layout", [ptr], [ir.TensorType(ptr.type.shape, ptr.type.element, other)])
    load.parent.insert(load.parent.ops.index(load), conv)
    load.set_operand(0, conv.result)
    for v in load.operands[1:] + load.results:
        v.type = ir.TensorType(v.type.shape, v.type.element, other)
    text, _ = lower_module(module, NvidiaISA(90, 32), 4)
    llvm.parse_assembly(text).verify()
    assert "ptrtoint" in text and "inttoptr" in text


def test_a_loop_accumulator_takes_the_layout_of_the_loads_it_sums():
    """Liger's layer-norm backward: 16-bit rows loaded in the loop, an fp32 accumulator stored after
    it. The accumulator follows the loads (8 values a thread) and is converted once, after the loop,
    for its 16-byte fp32 store; taking the store's layout (4 a thread) converted both loaded rows
    and two results every row (0.83x Triton's kernel time on an H100)."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "language"))
    from test_lang_reductions import _row_norm_backward_kernel
    sig = {"x_ptr": "*fp16", "dy_ptr": "*fp16", "rstd_ptr": "*fp32", "dx_ptr": "*fp16", "dw_ptr": "*fp32",
           "n_rows": "i32", "n_cols": "i32", "ROWS_PER_PROGRAM": "constexpr", "BLOCK": "constexpr"}
    src = ASTSource(_row_norm_backward_kernel, sig, {"ROWS_PER_PROGRAM": 32, "BLOCK": 4096},
                    {(i,): D16 for i in range(7)})
    ck = tilejit.compile(src, target=GPUTarget.parse("cuda:90"), options={"num_warps": 8})
    loop = _loop(ck)
    body = loop.regions[0].blocks[0]
    assert not [op for op in body.ops if op.name == "ttg.convert_layout"]
    (acc,) = [r for r in loop.results if str(ir.element_type(r.type)) == "f32"] or [None]
    assert acc is not None and acc.type.encoding.size_per_thread == (8,)
    after = [op for op in loop.parent.ops[loop.parent.ops.index(loop):] if op.name == "ttg.convert_layout"]
    assert len(after) == 1 and after[0].results[0].type.encoding.size_per_thread == (4,)


@pytest.mark.parametrize("target", ["cuda:90", "cuda:80"])
def test_a_sum_carried_by_a_loop_stays_in_its_loads_layout(target):
    """gla's backward `inter`: `dgk += tl.sum(h * dh, axis=0)` in the loop, `dq * dgk[None, :]` after
    it. The carried sum stays in the slice of the loaded tiles' layout and is converted once, after
    the loop; taking the MMA layout its user after the loop has converted both fp32 tiles every
    iteration (fla's kernel took 1.1x Triton's time on an H100)."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "language"))
    from dot_kernels import state_gradient_kernel
    sig = {"do_ptr": "*fp16", "h_ptr": "*fp32", "dh_ptr": "*fp32", "dq_ptr": "*fp32", "dg_ptr": "*fp32",
           "T": "i32", "V": "i32", "K": "constexpr", "BT": "constexpr", "BV": "constexpr"}
    src = ASTSource(state_gradient_kernel, sig, {"K": 64, "BT": 64, "BV": 32}, {(i,): D16 for i in range(7)})
    ck = tilejit.compile(src, target=GPUTarget.parse(target), options={"num_warps": 4})
    loop = _loop(ck)
    body = loop.regions[0].blocks[0]
    in_loop = [op.results[0].type.encoding for op in body.ops if op.name == "ttg.convert_layout"]
    assert in_loop and all(isinstance(enc, DotOperandEncoding) for enc in in_loop), in_loop
    (dgk,) = [r for r in loop.results if r.type.rank == 1]
    assert isinstance(dgk.type.encoding, SliceEncoding) and isinstance(dgk.type.encoding.parent, BlockedEncoding)
    after = [op for op in loop.parent.ops[loop.parent.ops.index(loop):] if op.name == "ttg.convert_layout"]
    assert [op.operands[0] for op in after if op.results[0].type.rank == 1] == [dgk]


def test_tiles_loaded_in_two_layouts_are_computed_in_one_of_them():
    """gla's `intra_sub_intra`: a bf16 [16, 128] tile (8 values a thread along K) and an fp32 one (4)
    multiplied by broadcast rows and summed along K. The product is computed in the bf16 load's
    layout, the one of widest vectors (as Triton), and only the fp32 tile is converted; the rank's
    default layout, fitted to the [16, 16] store, converted both and gave each thread 64 columns."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "language"))
    from test_lang_reductions import _gated_scores_kernel
    ck = _gated_scores_kernel.warmup("*fp16", "*fp32", "*fp16", "*fp32", 16, K=128, BC=16, grid=(1,),
                                     target="cuda:90", num_warps=1)
    module = ir.parse_module(ck.asm["ttgir"])
    func = module.functions[0]
    loads = [op for op in func.walk() if op.name == "tt.load" and op.results[0].type.rank == 2]
    q_enc = next(op.results[0].type.encoding for op in loads if str(ir.element_type(op.results[0].type)) == "f16")
    assert q_enc.size_per_thread == (1, 8)
    reduce = next(op for op in func.walk() if op.name == "tt.reduce")
    assert reduce.operands[0].type.encoding == q_enc
    tiles = [op for op in func.walk() if op.name == "ttg.convert_layout" and op.results[0].type.rank == 2]
    assert [str(ir.element_type(op.results[0].type)) for op in tiles] == ["f32"]
