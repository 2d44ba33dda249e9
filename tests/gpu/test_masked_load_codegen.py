"""Masked loads in real kernels take the same fast paths as unmasked ones on sm_90 (cross-compiled,
no GPU needed): attention over a ragged sequence written the common way (`tl.trans(k)`, scores
masked by `tl.where`) pipelines K and V with zero-filling cp.async and runs both dots on wgmma; a
matmul whose sizes are multiples of 16 but not of the tile pipelines both operands; a ragged softmax
row is read with 128-bit loads when the row length allows. The kernels are the language suite's
(`tests/language/masked_kernels.py`), whose results are checked on every backend."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import tilejit
from tilejit import ir
from tilejit.backends import GPUTarget
from tilejit.frontend.source import ASTSource
from tilejit.gpu.layouts import transposed_blocked
from tilejit.gpu.transpose_loads import transpose_loads
from tilejit_nvidia.pipeline import PIPELINED

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "language"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from masked_kernels import attention_fwd_masked, dot_transposed_masked_other, matmul_masked, softmax_masked  # noqa: E402
from toolchain_paths import ptxas  # noqa: E402

D16 = [["tt.divisibility", 16]]
SM90 = GPUTarget.parse("cuda:90")
ATTENTION_SIG = {"q_ptr": "*fp16", "k_ptr": "*fp16", "v_ptr": "*fp16", "o_ptr": "*fp16", "seq_len": "i32",
                 "sm_scale": "fp32", "stride_h": "i32", "stride_s": "i32", "HEAD_DIM": "constexpr",
                 "BLOCK_M": "constexpr", "BLOCK_N": "constexpr"}
MATMUL_SIG = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32",
              "stride_am": "i32", "stride_bk": "i32", "stride_cm": "i32", "BLOCK_M": "constexpr",
              "BLOCK_N": "constexpr", "BLOCK_K": "constexpr"}
# cp.async's zero-fill: the mask (and the loop bound of a copy ahead) is the ignore-src predicate
ZERO_FILL_COPY = re.compile(r"cp\.async\.cg\.shared\.global \[%r\d+\], \[%rd\d+\], 16, %p\d+;")


def _attention(seq_divisible: bool):
    # a ragged seq_len is not specialized as divisible by 16; the pointers and strides are
    divisible = (0, 1, 2, 3, 4, 6, 7) if seq_divisible else (0, 1, 2, 3, 6, 7)
    src = ASTSource(attention_fwd_masked, ATTENTION_SIG, {"HEAD_DIM": 64, "BLOCK_M": 128, "BLOCK_N": 64},
                    {(i,): D16 for i in divisible})
    return tilejit.compile(src, target=SM90, options={"num_warps": 4, "num_stages": 2})


@pytest.fixture(scope="module")
def attention():
    return _attention(seq_divisible=False)


def _ptxas_ok(ptx: str, tmp_path):
    tool = ptxas()
    if tool is None:
        pytest.skip("ptxas not installed (pip install nvidia-cuda-nvcc)")
    (tmp_path / "k.ptx").write_text(ptx)
    out = subprocess.run([tool, "-arch=sm_90a", "-v", str(tmp_path / "k.ptx"), "-o", str(tmp_path / "k.cubin")],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stderr


def test_masked_attention_pipelines_k_and_v_with_zero_fill_and_runs_wgmma(attention):
    ttgir = attention.asm["ttgir"]
    assert ttgir.count(f"{PIPELINED} = true") == 2          # K (through tl.trans) and V
    ptx = attention.asm["ptx"]
    # 64x64 fp16 tiles, 128 threads: 4 copies of 16 bytes per tile and thread; K and V, prologue + loop
    copies = [line for line in ptx.splitlines() if "cp.async.cg.shared.global" in line]
    assert len(copies) == 16 and all(ZERO_FILL_COPY.search(line) for line in copies)
    # both dots on wgmma (BLOCK_M = 128: two m64 blocks, 4 k-steps each), none on mma.sync
    assert ptx.count("wgmma.mma_async") == 16 and "mma.sync" not in ptx


def test_masked_attention_keeps_masks_and_indices_in_registers(attention):
    """`cols < seq_len` is computed where each user wants it (the K and V tiles' layouts, the
    scores' wgmma layout), not converted through shared memory; `tl.trans(k)` costs nothing."""
    ptx = attention.asm["ptx"]
    assert not re.search(r"(st|ld)\.shared\.(v\d\.)?b8", ptx)       # no i1 masks through shared memory
    assert "ld.shared.b16" not in ptx                                 # no transpose through shared memory
    module = ir.parse_module(attention.asm["ttgir"])
    loop = next(op for op in module.functions[0].walk() if op.name == "scf.for")
    body = loop.regions[0].blocks[0]
    converts = [op for op in body.ops if op.name == "ttg.convert_layout"]
    assert all("dot_op" in str(op.results[0].type) for op in converts), [str(op.results[0].type) for op in converts]
    # loop barriers: the pipeline's one per iteration, and the reductions' (as the unmasked kernel)
    assert ptx.count("bar.sync") <= 8


def test_masked_attention_with_a_divisible_sequence_is_the_same_code():
    ptx = _attention(seq_divisible=True).asm["ptx"]
    assert ptx.count("wgmma.mma_async") == 16 and len(ZERO_FILL_COPY.findall(ptx)) == 16


def test_ptxas_accepts_the_masked_attention(attention, tmp_path):
    _ptxas_ok(attention.asm["ptx"], tmp_path)


@pytest.mark.parametrize("divisible", [True, False])
def test_masked_matmul_off_tile(divisible, tmp_path):
    # M, N, K multiples of 16 (but not of the tile): vector masks, so both operands are pipelined;
    # otherwise the masks change within a vector and the loads stay scalar (Triton does the same).
    idx = (0, 1, 2, 3, 4, 5, 6, 7, 8) if divisible else (0, 1, 2, 6, 7, 8)
    src = ASTSource(matmul_masked, MATMUL_SIG, {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64},
                    {(i,): D16 for i in idx})
    ck = tilejit.compile(src, target=SM90, options={"num_warps": 8, "num_stages": 3})
    ptx = ck.asm["ptx"]
    if divisible:
        # 128x64 and 64x128 tiles, 256 threads: 4 + 4 copies per stage, 3 stages
        assert len(ZERO_FILL_COPY.findall(ptx)) == 24 and ptx.count("cp.async.cg") == 24
        assert ptx.count("wgmma.mma_async") == 4 and "ld.global" not in ptx
    else:
        assert "cp.async" not in ptx and ptx.count("ld.global.b16") == 64
    _ptxas_ok(ptx, tmp_path)


@pytest.mark.parametrize("other,pipelined", [(0.0, True), (2.0, False), (None, False)])
def test_transposed_load_other(other, pipelined):
    """A transposed masked load feeding a dot is pipelined when `other` is zero (the copy zero-fills);
    another constant or a tensor keeps it a register load that selects `other` (its result is
    checked on every backend by the language suite)."""
    src = ASTSource(dot_transposed_masked_other, {"a_ptr": "*fp16", "b_ptr": "*fp16", "out_ptr": "*fp32",
                                                  "N": "i32", "K": "i32", "OTHER": "constexpr",
                                                  "BLOCK_M": "constexpr", "BLOCK_N": "constexpr",
                                                  "BLOCK_K": "constexpr"},
                    {"OTHER": other, "BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64}, {(i,): D16 for i in (0, 1, 2, 4)})
    ck = tilejit.compile(src, target=SM90, options={"num_warps": 4, "num_stages": 2})
    ttgir = ck.asm["ttgir"]
    assert ttgir.count(f"{PIPELINED} = true") == (2 if pipelined else 1)
    ptx = ck.asm["ptx"]
    if pipelined:   # wgmma reads both tiles from shared memory
        assert ptx.count("wgmma.mma_async") == 4 and "mma.sync" not in ptx
    else:           # B stays in registers: mma.sync on the same layout (see matrix_units.py)
        assert "wgmma" not in ptx and "mma.sync" in ptx
    # the transposes left (of the pointers, the mask, a tensor `other`) are register renamings
    module = ir.parse_module(ttgir)
    trans = [op for op in module.functions[0].walk() if op.name == "tt.trans"]
    assert len(trans) == (3 if other is None else 2)
    for op in trans:
        assert op.operands[0].type.encoding == transposed_blocked(op.results[0].type.encoding, [1, 0])
    assert "ld.shared.b16" not in ptx and not re.search(r"(st|ld)\.shared\.(v\d\.)?b64", ptx)


@pytest.mark.parametrize("n_cols_divisible,vector", [(True, "ld.global.v4.b32"), (False, "ld.global.b32")])
def test_masked_softmax_vector_loads(n_cols_divisible, vector):
    idx = (0, 1, 2, 3, 4) if n_cols_divisible else (0, 1, 2, 3)
    src = ASTSource(softmax_masked, {"out_ptr": "*fp32", "in_ptr": "*fp32", "in_stride": "i32", "out_stride": "i32",
                                     "n_cols": "i32", "BLOCK_SIZE": "constexpr"},
                    {"BLOCK_SIZE": 4096}, {(i,): D16 for i in idx})
    ptx = tilejit.compile(src, target=SM90, options={"num_warps": 8}).asm["ptx"]
    loads = re.findall(r"ld\.global\.\S+", ptx)
    assert loads and set(loads) == {vector}
    assert len(loads) == (4 if n_cols_divisible else 16)   # 4096 floats over 256 threads


@pytest.mark.parametrize("other", [0.0, 2.0, None])
def test_transpose_loads_rewrite_keeps_results(other):
    """The rewrite alone, on the kernel's TTIR run by the interpreter: the same numbers as the
    original, `other` where the mask is false included."""
    consts = {"OTHER": other, "BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16}
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "out_ptr": "*fp32", "N": "i32", "K": "i32", "OTHER": "constexpr",
           "BLOCK_M": "constexpr", "BLOCK_N": "constexpr", "BLOCK_K": "constexpr"}
    target = GPUTarget.parse("interpreter")
    ttir = tilejit.compile(ASTSource(dot_transposed_masked_other, sig, consts), target=target).asm["ttir"]
    module = ir.parse_module(ttir)
    assert transpose_loads(module.functions[0]) == 1
    rewritten = ir.print_module(module)
    assert rewritten != ttir
    rng = np.random.default_rng(3)
    N, K = 9, 32
    a = rng.integers(-2, 3, (16, K)).astype(np.float16)
    b = rng.integers(-2, 3, (N, K)).astype(np.float16)
    outs = []
    for text in (ttir, rewritten):
        out = np.full((16, 16), np.nan, np.float32)
        tilejit.compile(text, target=target).run((1, 1, 1), [a, b, out, N, K])
        outs.append(out)
    np.testing.assert_array_equal(outs[0], outs[1])
    assert not np.isnan(outs[0]).any()
