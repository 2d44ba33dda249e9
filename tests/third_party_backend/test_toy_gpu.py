"""The toy GPU backend (tilejit_toy/gpu.py) declares one matrix instruction and nothing else about
dots: its `tt.dot`s get that instruction's layout from the core's accelerate-matmul and lower to one
call per (C tile, K step); the generic plan computes A @ B + C exactly (checked by running the
instruction's declared lane semantics in Python)."""
import importlib.metadata
import os
import sys

import llvmlite.binding as llvm
import numpy as np
import pytest

import tilejit
import tilejit.language as tl
from tilejit import ir
from tilejit.backends import BACKEND_GROUP, reset_backends
from tilejit.frontend.source import ASTSource
from tilejit.gpu.llvm import layout_of
from tilejit.gpu.matrix import MatrixLayout, matrix_dot_plan

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tilejit_toy.gpu import TOY_GPU_TARGET, TOY_MMA, ToyGPUBackend  # noqa: E402


@tilejit.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b))


SIG = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "M": "constexpr", "N": "constexpr", "K": "constexpr"}


@pytest.fixture
def toygpu_installed(monkeypatch):
    """The toy GPU backend as an installed package would declare it (an entry point)."""
    eps = [importlib.metadata.EntryPoint(name="toygpu", value="tilejit_toy.gpu:ToyGPUBackend", group=BACKEND_GROUP)]
    real = importlib.metadata.entry_points()
    eps += [ep for ep in real.select(group=BACKEND_GROUP)] if hasattr(real, "select") else []
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda group=None, **kw: [ep for ep in eps if group is None or ep.group == group])
    reset_backends()
    from tilejit.ir.dialect import default_context
    default_context.cache_clear()
    yield
    reset_backends()
    default_context.cache_clear()


def _compile(M, N, K, num_warps=4, sig=SIG):
    src = ASTSource(dot_kernel, sig, {"M": M, "N": N, "K": K})
    return tilejit.compile(src, target=TOY_GPU_TARGET, options={"num_warps": num_warps})


def _dots(module):
    return [op for op in module.functions[0].walk() if op.name == "tt.dot"]


@pytest.mark.parametrize("M,N,K,num_warps", [(32, 32, 32, 4), (64, 32, 16, 2), (16, 16, 64, 1)])
def test_dots_take_the_declared_instruction(toygpu_installed, M, N, K, num_warps):
    compiled = _compile(M, N, K, num_warps)
    assert list(compiled.asm) == ["ttir", "ttgir", "llir"]
    assert "#ttg.toy_mma<{instr = toy_mma_16x16x16_f16" in compiled.asm["ttgir"]
    module = ir.parse_module(compiled.asm["ttgir"])   # the layout parses back (declared by the backend)
    enc = _dots(module)[0].result.type.encoding
    assert isinstance(enc, MatrixLayout) and enc.instr == TOY_MMA
    llir_text = compiled.asm["llir"]
    llvm.parse_assembly(llir_text).verify()
    # Every warp computes its share of the (M/16 x N/16) tiles, K/16 steps each.
    warps = enc.warps_per_cta[0] * enc.warps_per_cta[1]
    calls = llir_text.count("call <8 x float> @\"toy.mma.16x16x16.f16\"")
    assert calls == (M // 16) * (N // 16) * (K // 16) // min(warps, (M // 16) * (N // 16))


def test_a_dot_that_does_not_fit_uses_fma(toygpu_installed):
    fp32 = dict(SIG, a_ptr="*fp32", b_ptr="*fp32")   # the instruction takes f16 operands only
    compiled = _compile(32, 32, 32, sig=fp32)
    assert "#ttg.blocked" in compiled.asm["ttgir"]
    assert "toy_mma" not in compiled.asm["ttgir"] and "toy.mma" not in compiled.asm["llir"]


def test_the_generic_plan_computes_the_product():
    """Run every instruction of the plan the way the toy GPU would (its lanes hold what the declared
    layouts say) and compare C with A @ B + C0."""
    M, N, K, warps = 32, 64, 64, (2, 1)
    enc = MatrixLayout(TOY_MMA, warps)
    from tilejit.gpu.layouts import DotOperandEncoding
    la = layout_of(ir.TensorType((M, K), ir.f16, DotOperandEncoding(0, enc)))
    lb = layout_of(ir.TensorType((K, N), ir.f16, DotOperandEncoding(1, enc)))
    lc = layout_of(ir.TensorType((M, N), ir.f32, enc))
    rng = np.random.default_rng(0)
    A, B, C0 = rng.integers(-3, 4, (M, K)), rng.integers(-3, 4, (K, N)), rng.integers(-3, 4, (M, N))
    plan = matrix_dot_plan(TOY_MMA, la, lb, lc)
    tile_a, tile_b, tile_r = (TOY_MMA.tile_offsets(w) for w in ("a", "b", "result"))
    from tilejit.gpu.layouts import _build
    one_a = _build((16, 16), list(TOY_MMA.a))
    one_b = _build((16, 16), list(TOY_MMA.b))
    one_r = _build((16, 16), list(TOY_MMA.result))
    out = np.full((M, N), -999)
    for warp in range(warps[0] * warps[1]):
        regs = {lane: {"a": [A[la.coords(r, lane, warp)] for r in range(la.num_registers)],
                       "b": [B[lb.coords(r, lane, warp)] for r in range(lb.num_registers)],
                       "c": [C0[lc.coords(r, lane, warp)] for r in range(lc.num_registers)]} for lane in range(32)}
        for result_regs, steps in plan:
            acc = {lane: [regs[lane]["c"][r] for r in result_regs] for lane in range(32)}
            for a_regs, b_regs in steps:
                # The instruction: gather its tiles from the lanes as the declared layouts place them.
                ta, tb, tc = np.zeros((16, 16)), np.zeros((16, 16)), np.zeros((16, 16))
                for lane in range(32):
                    for j, r in enumerate(a_regs):
                        ta[one_a.coords(j, lane, 0)] = regs[lane]["a"][r]
                    for j, r in enumerate(b_regs):
                        tb[one_b.coords(j, lane, 0)] = regs[lane]["b"][r]
                    for j in range(len(result_regs)):
                        tc[one_r.coords(j, lane, 0)] = acc[lane][j]
                td = ta @ tb + tc
                acc = {lane: [td[one_r.coords(j, lane, 0)] for j in range(len(result_regs))] for lane in range(32)}
            for lane in range(32):
                for j, r in enumerate(result_regs):
                    out[lc.coords(r, lane, warp)] = acc[lane][j]
    assert len(tile_a) == len(tile_b) == 8 and len(tile_r) == 8
    np.testing.assert_array_equal(out, A @ B + C0)


def test_backend_is_a_plain_gpu_backend():
    backend = ToyGPUBackend(TOY_GPU_TARGET)
    assert backend.isa.matrix_units == (TOY_MMA,) and backend.isa.shared_memory == 64 * 1024
    with pytest.raises(Exception, match="num_warps must be a power of two no larger than 32"):
        backend.parse_options({"num_warps": 64})
