"""The TTGIR passes one at a time: each runs alone on IR that the one before wrote (or plain TTIR),
leaves what the next needs in the IR (types and hint attributes that print and parse), and the
pass manager writes one file per pass under the dump folder."""
import os

import pytest

from tilejit import ir
from tilejit.gpu import layout_passes as lp
from tilejit.gpu.layouts import BlockedEncoding, SliceEncoding
from tilejit_nvidia.layouts import NvidiaMmaEncoding
from tilejit.gpu.ttgir import FIRST_DUMP_INDEX, GPUConfig, make_ttgir, ttgir_passes
from tilejit.passes import PassManager
from tilejit_nvidia.isa import NvidiaISA

DATA = os.path.join(os.path.dirname(__file__), "data")
CFG = GPUConfig(4, NvidiaISA(80, 32))   # mma.sync
NO_MMA = GPUConfig(4, NvidiaISA(75, 32))   # no matrix unit


def _matmul():
    with open(os.path.join(DATA, "matmul.ttir")) as f:
        return ir.parse_module(f.read())


def _ops(module, name):
    return [op for op in module.functions[0].walk() if op.name == name]


def _reparse(module):
    """Print and parse again: the hints survive the text form (and a dump can be fed back)."""
    text = ir.print_module(module)
    again = ir.parse_module(text)
    assert ir.print_module(again) == text
    return again


def test_coalesce_anchors_alone_decides_load_layouts_and_leaves_hints():
    module = _matmul()
    lp.CoalesceAnchors(CFG).apply(module)
    module = _reparse(module)
    loads = _ops(module, "tt.load")
    assert loads and all(isinstance(op.result.type.encoding, BlockedEncoding) for op in loads)
    assert all(op.attrs[lp.ACCESS] == op.result.type.encoding for op in loads)
    store = _ops(module, "tt.store")[0]
    assert isinstance(store.attrs[lp.ACCESS], BlockedEncoding) and store.operands[0].type.encoding is None
    defaults = module.functions[0].attrs[lp.DEFAULTS]
    assert isinstance(defaults[2], BlockedEncoding) and defaults[0] is None
    # Nothing else is decided yet.
    assert _ops(module, "tt.dot")[0].result.type.encoding is None


def test_accelerate_matmul_alone_on_plain_ttir():
    module = _matmul()
    lp.AccelerateMatmul(CFG).apply(module)
    dot = _ops(module, "tt.dot")[0]
    assert dot.result.type.encoding == NvidiaMmaEncoding(2, 0, (2, 2), (16, 8))
    acc = dot.operand("c")
    assert isinstance(acc, ir.BlockArgument) and acc.type.encoding == dot.result.type.encoding
    loop = _ops(module, "scf.for")[0]
    assert loop.results[acc.index - 1].type.encoding == dot.result.type.encoding
    # Without an MMA-capable target the dot stays on the FMA path (a blocked result).
    fma = _matmul()
    lp.AccelerateMatmul(NO_MMA).apply(fma)
    assert isinstance(_ops(fma, "tt.dot")[0].result.type.encoding, BlockedEncoding)


@pytest.fixture(scope="module")
def attention_ttir():
    """bench/kernels.py's attention as TTIR: two chained dots with a softmax between them."""
    import sys

    import tilejit
    from tilejit.frontend.source import ASTSource
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
    from common import load_kernels
    k = load_kernels("tilejit")
    sig = {"q_ptr": "*fp16", "k_ptr": "*fp16", "v_ptr": "*fp16", "o_ptr": "*fp16", "seq_len": "i32",
           "sm_scale": "fp32", "stride_h": "i32", "stride_s": "i32", "HEAD_DIM": "constexpr",
           "BLOCK_M": "constexpr", "BLOCK_N": "constexpr"}
    src = ASTSource(k.attention_fwd_kernel, sig, {"HEAD_DIM": 64, "BLOCK_M": 128, "BLOCK_N": 64})
    return tilejit.compile(src, target="interpreter").asm["ttir"]


def test_propagate_dot_layouts_alone_marks_what_flows_from_the_dot(attention_ttir):
    module = ir.parse_module(attention_ttir)
    lp.AccelerateMatmul(CFG).apply(module)
    lp.PropagateDotLayouts(CFG).apply(module)
    module = _reparse(module)
    qk = _ops(module, "tt.dot")[0]
    mma = qk.result.type.encoding
    assert isinstance(mma, NvidiaMmaEncoding)
    # The softmax's row maximum of QK^T is a slice of the MMA layout, its exp the MMA layout itself.
    row_max = next(op for op in _ops(module, "tt.reduce") if op.operands[0] is qk.result
                   or any(v is qk.result for v in op.operands[0].owner.operands))
    flowing = lp.value_hint(row_max.results[0], lp.FLOW)
    assert isinstance(flowing, SliceEncoding) and flowing.parent == mma and flowing.dim == 1
    exps = [op for op in _ops(module, "math.exp2") + _ops(module, "math.exp")
            if op.result.type.shape == qk.result.type.shape]
    assert exps and all(lp.value_hint(op.result, lp.FLOW) == mma for op in exps)
    # Decided types are not hints: the dot's own result has none.
    assert lp.value_hint(qk.result, lp.FLOW) is None


def test_assign_layouts_alone_types_every_tensor_and_removes_the_hints():
    module = _matmul()
    lp.CoalesceAnchors(CFG).apply(module)
    lp.AssignLayouts(CFG).apply(module)
    func = module.functions[0]
    values = [v for op in func.walk() for v in op.results] + \
        [a for op in func.walk() for r in op.regions for b in r.blocks for a in b.args]
    assert all(v.type.encoding is not None for v in values if isinstance(v.type, ir.TensorType))
    assert not any(k.startswith(lp.HINTS) for op in [func] + list(func.walk()) for k in op.attrs)
    ir.verify(module)


def test_core_pass_list_is_target_neutral():
    names = [p.name for p in ttgir_passes(CFG)]
    assert names == ["triton-combine-dot-add", "tritongpu-split-f32-dots", "tritongpu-rewrite-tensor-pointers", "tritongpu-transpose-loads",
                     "tritongpu-coalesce-anchors",
                     "tritongpu-accelerate-matmul",
                     "tritongpu-propagate-dot-layouts", "tritongpu-assign-layouts",
                     "tritongpu-rematerialize-indices", "tritongpu-hoist-conversions", "cse"]
    assert [p.name for p in ttgir_passes(NO_MMA)] == names


def test_a_value_two_dots_read_as_the_same_operand_is_converted_once():
    """fla's delta rule: `v` (computed) is operand B of the dots with k1 and k2. assign-layouts
    inserts a conversion before each dot; cse leaves one, so the tile goes through shared memory once."""
    import tilejit
    import tilejit.language as tl
    from tilejit.frontend.source import ASTSource

    @tilejit.jit
    def two_dots(a_ptr, b_ptr, c_ptr, d_ptr):
        r = tl.arange(0, 32)
        a1 = tl.load(a_ptr + r[:, None] * 32 + r[None, :])
        a2 = tl.load(a_ptr + 1024 + r[:, None] * 32 + r[None, :])
        b = (tl.load(b_ptr + r[:, None] * 32 + r[None, :]) * 2).to(tl.float16)
        tl.store(c_ptr + r[:, None] * 32 + r[None, :], tl.dot(a1, b))
        tl.store(d_ptr + r[:, None] * 32 + r[None, :], tl.dot(a2, b))

    src = ASTSource(two_dots, {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "d_ptr": "*fp32"})
    ttgir = tilejit.compile(src, target="cuda:80").asm["ttgir"]
    b_operands = [line for line in ttgir.splitlines() if "convert_layout" in line and "-> (tensor<32x32xf16, #ttg.dot_op<{opIdx = 1" in line]
    assert len(b_operands) == 1 and ttgir.count("tt.dot") == 2


def test_every_pass_writes_its_own_dump(tmp_path):
    passes = ttgir_passes(CFG)
    PassManager(passes, dump_dir=str(tmp_path), dump_ext="ttgir", first_index=FIRST_DUMP_INDEX,
                verify=True).run(_matmul())
    files = sorted(os.listdir(tmp_path / "matmul_kernel"))
    assert files == [f"{FIRST_DUMP_INDEX + i:02d}-{p.name}.ttgir" for i, p in enumerate(passes)]
    for name in files:   # each dump parses on its own
        ir.parse_module((tmp_path / "matmul_kernel" / name).read_text())


def test_running_the_passes_one_by_one_equals_the_pipeline():
    whole = make_ttgir(_matmul(), CFG)
    stepwise = _matmul()
    for p in ttgir_passes(CFG):
        stepwise = _reparse(stepwise)   # through the text form between every two passes
        p.apply(stepwise)
    assert ir.print_module(stepwise) == ir.print_module(whole)


@pytest.mark.parametrize("num_warps", [3, 6, 64])
def test_num_warps_must_be_a_power_of_two_that_fits(num_warps):
    from tilejit.errors import CompilationError
    with pytest.raises(CompilationError, match=f"option num_warps={num_warps} is invalid .* power of two no larger than 32"):
        make_ttgir(_matmul(), GPUConfig(num_warps, NvidiaISA(90, 32)))
