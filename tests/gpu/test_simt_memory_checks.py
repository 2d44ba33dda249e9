"""simt_runner checks every global access as the GPU would: a vector access must be aligned to its size
(x86 would just do it) and inside an array argument. The kernels are hand-written NVPTX IR in the forms
the lowering emits (a plain `load <4 x i32> ... align 16`, and the predicated `@p ld/st.global.v4.b32`
inline PTX), each thread moving the 4 words at `4 * tid + off`. And what LLVM calls on the host for fp16
and float remainders runs (an unresolved call jumped to address 0)."""
import numpy as np
import pytest

import tilejit
import tilejit.language as tl
from simt_runner import MemoryFault, run

_HEAD = """target triple = "nvptx64-nvidia-cuda"
define ptx_kernel void @"copy4"(ptr addrspace(1) %"x", ptr addrspace(1) %"y", i32 %"off") "nvvm.maxntid"="32"
{
entry:
  %"tid" = call i32 @"llvm.nvvm.read.ptx.sreg.tid.x"()
  %"base" = mul i32 %"tid", 4
  %"i" = add i32 %"base", %"off"
  %"src" = getelementptr i32, ptr addrspace(1) %"x", i32 %"i"
  %"dst" = getelementptr i32, ptr addrspace(1) %"y", i32 %"base"
"""
_TAIL = """  ret void
}
declare i32 @"llvm.nvvm.read.ptx.sreg.tid.x"()
"""

PLAIN = _HEAD + """  %"v" = load <4 x i32>, ptr addrspace(1) %"src", align 16
  store <4 x i32> %"v", ptr addrspace(1) %"dst", align 16
""" + _TAIL

# `@p ld.global.v4.b32` with `other` (0) tied to the outputs, then `@p st.global.v4.b32`; p: tid < 31
PREDICATED = _HEAD + """  %"p" = icmp slt i32 %"tid", 31
  %"w" = call {i32, i32, i32, i32} asm sideeffect "@$4 ld.global.v4.b32 {$0, $1, $2, $3}, [$5];", "=r,=r,=r,=r,b,l,0,1,2,3,~{memory}"(i1 %"p", ptr addrspace(1) %"src", i32 0, i32 0, i32 0, i32 0)
  %"w0" = extractvalue {i32, i32, i32, i32} %"w", 0
  %"w1" = extractvalue {i32, i32, i32, i32} %"w", 1
  %"w2" = extractvalue {i32, i32, i32, i32} %"w", 2
  %"w3" = extractvalue {i32, i32, i32, i32} %"w", 3
  call void asm sideeffect "@$5 st.global.v4.b32 [$0], {$1, $2, $3, $4};", "l,r,r,r,r,b,~{memory}"(ptr addrspace(1) %"dst", i32 %"w0", i32 %"w1", i32 %"w2", i32 %"w3", i1 %"p")
""" + _TAIL


def _arrays(extra=8):
    x = np.arange(128 + extra, dtype=np.int32)
    return x, np.full(128, -1, np.int32)


@pytest.mark.parametrize("ir", [PLAIN, PREDICATED], ids=["plain", "predicated"])
def test_aligned_vector_accesses_run(ir):
    x, y = _arrays()
    run(ir, [x, y, 4], 1, names=["x", "y", "off"])
    lanes = 128 if ir is PLAIN else 124   # the predicated copy skips thread 31
    np.testing.assert_array_equal(y[:lanes], x[4:4 + lanes])
    assert (y[lanes:] == -1).all()


@pytest.mark.parametrize("ir", [PLAIN, PREDICATED], ids=["plain", "predicated"])
@pytest.mark.parametrize("off", [1, 2, 3])
def test_a_misaligned_vector_access_is_reported(ir, off):
    x, y = _arrays()
    with pytest.raises(MemoryFault) as info:
        run(ir, [x, y, off], 1, names=["x", "y", "off"])
    message = str(info.value)
    # the load is the one misaligned (its address is 4 * off bytes past a 16-byte boundary); the
    # stores are aligned and store what the skipped loads gave
    assert "misaligned" in message and f"x + {4 * off} bytes" in message
    assert "ld.global.v4.b32" in message if ir is PREDICATED else "load <4 x i32> (align 16)" in message
    assert "outside" not in message


def test_an_access_past_the_array_is_reported():
    x, y = _arrays(extra=0)   # thread 31 reads x[128:132] with off 4: past the end
    with pytest.raises(MemoryFault, match=r"outside every array argument: .*x \+ 512 bytes, of 512.*thread 31"):
        run(PLAIN, [x, y, 4], 1, names=["x", "y", "off"])


def test_a_predicated_off_access_is_not_checked():
    x, y = _arrays(extra=0)   # the predicate (tid < 31) keeps thread 31 from reading past the end
    run(PREDICATED, [x, y, 4], 1)
    np.testing.assert_array_equal(y[:124], x[4:128])


# -- what LLVM calls on the host: fp16 conversions (compiler-rt's, which the process lacks) and libm ----


@tilejit.jit
def _half_and_fmod(x_ptr, d_ptr, y_ptr, r_ptr, B: tl.constexpr):
    offs = tl.arange(0, B)
    x = tl.load(x_ptr + offs)
    h = x + tl.load(d_ptr + offs).to(tl.float16)   # fp64 -> fp16, then fp16 arithmetic
    tl.store(y_ptr + offs, h * x)
    tl.store(r_ptr + offs, h.to(tl.float32) % 0.75)   # frem: fmodf


def test_fp16_arithmetic_and_fmod_run_on_the_host():
    rng = np.random.default_rng(5)
    x = rng.uniform(-4, 4, 64).astype(np.float16)
    d = rng.uniform(-4, 4, 64)   # not exact in fp16: the conversion rounds once, from the double
    y, r = np.zeros(64, np.float16), np.zeros(64, np.float32)
    kernel = _half_and_fmod.warmup(x, d, y, r, B=64, grid=(1,), target="cuda:90", num_warps=1)
    run(kernel.asm["llir"], [x, d, y, r], 1)
    h = (x + d.astype(np.float16)).astype(np.float16)
    np.testing.assert_array_equal(y, (h * x).astype(np.float16))
    np.testing.assert_array_equal(r, np.fmod(h.astype(np.float32), np.float32(0.75)))


def test_an_nvvm_intrinsic_the_host_cannot_run_is_refused():
    # LLVM's x86 code generator would abort the whole process ("Cannot select"): refused before
    ir = _HEAD.replace('"off") "nvvm', '"off", float %"f") "nvvm') + (
        '  %"s" = call float @"llvm.nvvm.sqrt.approx.ftz.f"(float %"f")\n' + _TAIL +
        'declare float @"llvm.nvvm.sqrt.approx.ftz.f"(float)\n')
    with pytest.raises(NotImplementedError, match="llvm.nvvm.sqrt.approx.ftz.f"):
        run(ir, [*_arrays(), 0, 1.0], 1)
