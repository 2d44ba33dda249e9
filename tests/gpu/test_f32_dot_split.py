"""`tritongpu-split-f32-dots`: fp32 dots at tf32x3 / bf16x3 / bf16x6 as Triton's chains of tf32 /
bf16 dots. The rewritten TTIR, run on the interpreter, gives the bits the interpreter gives for the
dot at that precision (its reference numerics); on CUDA each partial dot takes mma.sync."""
import re
import types

import numpy as np
import pytest

import tilejit
import tilejit.language as tl
from tilejit import ir
from tilejit.backends import GPUTarget
from tilejit.frontend.source import ASTSource
from tilejit.gpu.f32_dot_split import SplitF32Dots
from tilejit_interpreter.backend import InterpreterBackend


@tilejit.jit
def _dot(a_ptr, b_ptr, c_ptr, o_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr, PREC: tl.constexpr):
    m, n, k = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + m[:, None] * K + k[None, :])
    b = tl.load(b_ptr + k[:, None] * N + n[None, :])
    c = tl.load(c_ptr + m[:, None] * N + n[None, :])
    tl.store(o_ptr + m[:, None] * N + n[None, :], tl.dot(a, b, c, input_precision=PREC))


SIG = {"a_ptr": "*fp32", "b_ptr": "*fp32", "c_ptr": "*fp32", "o_ptr": "*fp32", "M": "constexpr", "N": "constexpr",
       "K": "constexpr", "PREC": "constexpr"}


def _source(prec, M=16, N=16, K=32):
    return ASTSource(_dot, SIG, {"M": M, "N": N, "K": K, "PREC": prec})


def _run_ttir(text, args):
    backend = InterpreterBackend("interpreter")
    stages = {}
    backend.add_stages(stages, backend.parse_options({}))
    module = ir.parse_module(text, "kernel.ttir")
    metadata = {"name": module.functions[0].attrs["sym_name"], "signature": {f"arg{i}": "*fp32" for i in range(4)}}
    compiled = types.SimpleNamespace(asm={"py": stages["py"](module, metadata)}, metadata=metadata,
                                     name=metadata["name"])
    backend.make_launcher(compiled)((1, 1, 1), args)


def _operands(seed):
    rng = np.random.default_rng(seed)
    a = (rng.uniform(0.5, 4, (16, 32)) * rng.choice([-1, 1], (16, 32))).astype(np.float32)
    b = (rng.uniform(0.5, 4, (32, 16)) * rng.choice([-1, 1], (32, 16))).astype(np.float32)
    c = rng.standard_normal((16, 16)).astype(np.float32)
    a[0, 0], a[1, 3], b[5, 2] = np.inf, 3.0e38, np.nan   # inf, overflow to inf when rounded, NaN
    return a, b, c


@pytest.mark.parametrize("prec,dots", [("tf32x3", ["tf32"] * 3), ("bf16x3", ["ieee"] * 3),
                                       ("bf16x6", ["ieee"] * 6)])
def test_split_ttir_gives_the_interpreters_bits(prec, dots):
    text = tilejit.compile(_source(prec), target="interpreter").asm["ttir"]
    module = ir.parse_module(text, "kernel.ttir")
    SplitF32Dots().apply(module)
    split = ir.print_module(module)
    assert re.findall(r'inputPrecision = "(\w+)"', split) == dots
    a, b, c = _operands(5)
    want, got = np.zeros((16, 16), np.float32), np.zeros((16, 16), np.float32)
    _run_ttir(text, (a, b, c, want))
    _run_ttir(split, (a, b, c, got))
    assert np.isnan(want).any() and not np.isnan(want).all()
    np.testing.assert_array_equal(got.view(np.uint32)[~np.isnan(want)], want.view(np.uint32)[~np.isnan(want)])
    assert np.array_equal(np.isnan(got), np.isnan(want))


@pytest.mark.parametrize("prec", ["tf32", "ieee"])
def test_other_precisions_are_left_alone(prec):
    text = tilejit.compile(_source(prec), target="interpreter").asm["ttir"]
    module = ir.parse_module(text, "kernel.ttir")
    SplitF32Dots().apply(module)
    assert ir.print_module(module) == ir.print_module(ir.parse_module(text, "kernel.ttir"))


@pytest.mark.parametrize("prec,instr,count", [
    ("tf32x3", "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", 3 * 2),
    ("bf16x3", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", 3),
    ("bf16x6", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", 6)])
def test_cuda_runs_each_partial_dot_on_mma_sync(prec, instr, count):
    src = _source(prec, 64, 64, 32)
    ptx = tilejit.compile(src, target=GPUTarget.parse("cuda:80"), options={"num_warps": 4}).asm["ptx"]
    assert set(re.findall(r"mma\.sync[\w.]*", ptx)) == {instr}
    # per thread: 64x64 / 4 warps = 8 m16n8 tiles, K32 = 2 k16 steps, per partial dot
    assert ptx.count(instr) == 8 * 2 * count
