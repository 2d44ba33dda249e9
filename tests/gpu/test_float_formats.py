"""The bf16/fp8 conversions the GPU lowering emits, JIT-compiled for the host CPU with llvmlite and
compared bit for bit with the interpreter's definition (tilejit_interpreter.numerics)."""
import ctypes

import llvmlite.binding as llvm
import llvmlite.ir as llir
import numpy as np
import pytest

import tilejit
import tilejit.language as tl

from tilejit.gpu.llvm.float_formats import decode_to_f32, encode_from_f32

numerics = pytest.importorskip("tilejit_interpreter.numerics")

FORMATS = ["f8E4M3FN", "f8E5M2", "f8E4M3FNUZ", "f8E5M2FNUZ"]
F32, I8, I16, I32 = llir.FloatType(), llir.IntType(8), llir.IntType(16), llir.IntType(32)


def _jit_map(build, in_ty, out_ty, in_np, out_np):
    """A host function out[i] = build(in[i]) for arrays, compiled with LLVM's JIT."""
    module = llir.Module()
    module.triple = llvm.get_process_triple()
    fn = llir.Function(module, llir.FunctionType(llir.VoidType(), [llir.PointerType(), llir.PointerType(), I32]),
                       "convert")
    src, dst, n = fn.args
    entry, loop, done = fn.append_basic_block(), fn.append_basic_block(), fn.append_basic_block()
    b = llir.IRBuilder(entry)
    b.branch(loop)
    b.position_at_end(loop)
    i = b.phi(I32)
    i.add_incoming(llir.Constant(I32, 0), entry)
    x = b.load(b.gep(src, [i], source_etype=in_ty), typ=in_ty)
    b.store(build(b, x), b.gep(dst, [i], source_etype=out_ty))
    nxt = b.add(i, llir.Constant(I32, 1))
    i.add_incoming(nxt, loop)
    b.cbranch(b.icmp_signed("<", nxt, n), loop, done)
    b.position_at_end(done)
    b.ret_void()
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    parsed = llvm.parse_assembly(str(module))
    parsed.verify()
    engine = llvm.create_mcjit_compiler(parsed, llvm.Target.from_default_triple().create_target_machine())
    engine.finalize_object()
    cfunc = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32)(
        engine.get_function_address("convert"))

    def run(values):
        values = np.ascontiguousarray(values, dtype=in_np)
        out = np.empty(values.shape, dtype=out_np)
        cfunc(values.ctypes.data, out.ctypes.data, len(values))
        return out
    run.engine = engine   # keep the JIT alive as long as the function
    return run


def _samples():
    rng = np.random.default_rng(3)
    special = [0.0, -0.0, 1.0, -1.0, 0.5, 448.0, 464.0, 480.0, 57344.0, 61440.0, 1e6, -1e6, np.inf, -np.inf, np.nan,
               2.0 ** -9, 2.0 ** -10, 3 * 2.0 ** -11, 2.0 ** -16, 2.0 ** -17, 1.5 * 2.0 ** -17, 240.0, 0.375]
    spread = rng.uniform(-1, 1, 4000) * 10.0 ** rng.uniform(-8, 6, 4000)
    return np.array(special + list(spread), dtype=np.float32)


@pytest.mark.parametrize("name", FORMATS)
def test_fp8_decode_matches_interpreter(name):
    decode = _jit_map(lambda b, x: decode_to_f32(b, x, name), I8, F32, np.uint8, np.float32)
    codes = np.arange(256, dtype=np.uint8)
    got = decode(codes)
    want = numerics.FP8_FORMATS[name].decode(codes)
    np.testing.assert_array_equal(got.view(np.uint32)[~np.isnan(want)], want.view(np.uint32)[~np.isnan(want)])
    assert np.array_equal(np.isnan(got), np.isnan(want))


@pytest.mark.parametrize("rounding", ["rtne", "rtz"])
@pytest.mark.parametrize("name", FORMATS)
def test_fp8_encode_matches_interpreter(name, rounding):
    encode = _jit_map(lambda b, x: encode_from_f32(b, x, name, rounding), F32, I8, np.float32, np.uint8)
    x = _samples()
    np.testing.assert_array_equal(encode(x), numerics.FP8_FORMATS[name].encode(x, rounding))


@pytest.mark.parametrize("rounding", ["rtne", "rtz"])
def test_bf16_encode_matches_interpreter(rounding):
    encode = _jit_map(lambda b, x: encode_from_f32(b, x, "bf16", rounding), F32, I16, np.float32, np.uint16)
    x = _samples()
    got, want = encode(x), np.asarray(numerics.f32_to_bf16(x, rounding)).view(np.uint16)
    finite = ~np.isnan(x)
    np.testing.assert_array_equal(got[finite], want[finite])
    assert np.all((got[~finite] & 0x7FC0) == 0x7FC0)   # NaN stays a (quiet) NaN



# ------------------------------------------------------------------ constants of the storage formats
@pytest.mark.parametrize("name", ["bf16"] + FORMATS)
def test_constant_bits_match_interpreter(name):
    from tilejit.gpu.llvm.float_formats import constant_bits
    # float64 values: a bf16 constant is a Python number rounded to float32 first, then to bf16 (the
    # launch ABI's `bf16_bits`, as a bf16 argument, torch and Triton); fp8 rounds the exact value.
    x = np.concatenate([_samples().astype(np.float64), [1.0 + 2.0 ** -8 + 2.0 ** -40, 1.0 + 2.0 ** -8, 3.0, -2.5]])
    got = np.array([constant_bits(v, name) for v in x])
    source = x.astype(np.float32) if name == "bf16" else x
    want = np.asarray(numerics.encode_float(source, name)).view(np.uint16 if name == "bf16" else np.uint8)
    finite = ~np.isnan(x)
    np.testing.assert_array_equal(got[finite], want[finite].astype(np.int64))
    decode = _jit_map(lambda b, c: decode_to_f32(b, c, name), I16 if name == "bf16" else I8, F32,
                      np.uint16 if name == "bf16" else np.uint8, np.float32)
    assert np.all(np.isnan(decode(got[~finite])))


@tilejit.jit
def _mixed_half_constants(out_ptr, A: tl.constexpr, B: tl.constexpr):
    a = tl.full([4], 1, A)
    b = tl.full([4], 1, B)
    tl.store(out_ptr + tl.arange(0, 4), (a + b).to(tl.int32) * 7)


@pytest.mark.parametrize("a,b", [(tl.float16, tl.bfloat16), (tl.bfloat16, tl.bfloat16), (tl.float8e4nv, tl.float16)],
                         ids=str)
def test_storage_float_constants_are_lowered_as_their_bits(a, b, tmp_path, monkeypatch):
    """`tl.full(..., 1, tl.bfloat16)` is lowered as the bits of 1.0 (0x3F80), not as the code 1 (a
    denormal; the GPU computed 1 + 0 = 1 and stored 7, not 14). The kernel's LLVM IR is run on the host:
    every storage constant it holds, decoded by the lowering's own decoder, is 1.0."""
    import re
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))
    llir_text = _mixed_half_constants.warmup("*i32", grid=(1,), target="cuda:90", A=a, B=b).asm["llir"]
    # decoded (zext to i32) or, for sm_90's native bf16 add, reinterpreted (bitcast to bfloat)
    constants = [(int(w), int(v)) for w, v in re.findall(r"(?:zext|bitcast) i(8|16) (-?\d+) to (?:i32|bfloat)",
                                                          llir_text)]
    # or decoded already: the lowering's builder folds the decoder's integer arithmetic on a constant
    decoded = [int(v) for v in re.findall(r"bitcast i32 (-?\d+) to float", llir_text)]
    assert constants or decoded, llir_text
    assert all(np.array([v], np.int64).astype(np.uint32).view(np.float32)[0] == 1.0 for v in decoded), decoded
    for width, value in constants:
        name = "bf16" if width == 16 else "f8E4M3FN"
        decode = _jit_map(lambda bld, c: decode_to_f32(bld, c, name), llir.IntType(width), F32,  # noqa: B023
                          np.uint16 if width == 16 else np.uint8, np.float32)
        assert decode(np.array([value & ((1 << width) - 1)]))[0] == 1.0
