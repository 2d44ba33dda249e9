"""NVIDIA code of the conversions and reductions that Liger-Kernel's losses and norms are made of
(compiled on the host down to PTX, compared with what Triton 3.9 emits for the same kernels):
bf16 results rounded by `cvt.rn.bf16x2.f32`, reductions across warps finished by shuffles."""
import re

import pytest

import tilejit
import tilejit.language as tl
from toolchain_paths import ptxas


@tilejit.jit
def _scale_to_bf16(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs, (x * 3.0).to(tl.bfloat16), mask=mask)


@tilejit.jit
def _bf16_product(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, x * x, mask=mask)   # bf16 * bf16: computed in f32, rounded to bf16


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))


def _ptx(kernel, *args, target="cuda:90", **kwargs):
    return kernel.warmup(*args, grid=(1,), target=target, **kwargs).asm["ptx"]


@pytest.mark.parametrize("kernel, target", [(_scale_to_bf16, "cuda:90"), (_scale_to_bf16, "cuda:80"),
                                            (_bf16_product, "cuda:80")])   # sm_90: mul.bf16 itself
def test_bf16_results_round_by_cvt(kernel, target):
    """f32 -> bf16 (a cast, or the rounding of bf16 arithmetic) is `cvt.rn.bf16x2.f32` per pair of
    elements, as in Triton, not the integer rounding (shift, add 0x7FFF + lsb, NaN test, select) of targets
    without the instruction."""
    src = "*fp32" if kernel is _scale_to_bf16 else "*bf16"
    ptx = _ptx(kernel, src, "*bf16", 4096, BLOCK=1024, num_warps=4, target=target)
    per_thread = 1024 // 128
    rounded = sum(2 if pair else 1 for pair in re.findall(r"cvt\.rn\.bf16(x2)?\.f32", ptx))
    assert rounded == per_thread   # pairs packed by cvt.rn.bf16x2.f32, as Triton's
    assert "setp.nan" not in ptx   # the integer rounding tests for NaN
    if ptxas() is not None:   # and ptxas takes it for this target
        assert kernel.warmup(src, "*bf16", 4096, BLOCK=1024, num_warps=4, grid=(1,), target=target).asm["cubin"]


@tilejit.jit
def _online_softmax_stats(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    """Liger's cross-entropy first pass on one row: running max and sum of exp over blocks."""
    row = x_ptr + tl.program_id(0).to(tl.int64) * n_cols
    m = float("-inf")
    d = 0.0
    for i in range(0, n_cols, BLOCK):
        offs = i + tl.arange(0, BLOCK)
        x = tl.load(row + offs, mask=offs < n_cols, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x))
        d = d * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new))
        m = m_new
    tl.store(out_ptr + tl.program_id(0), m + tl.log(d))


@pytest.mark.parametrize("num_warps", [4, 16, 32])
def test_reductions_across_warps_finish_with_shuffles(num_warps):
    """As Triton: after the butterfly within each warp, one shared-memory read per thread (lane i reads
    warp i's partial) and log2(num_warps) more shuffles, not one read (and one dependent combine) per
    warp: 32 warps took 32 ld.shared and 31 chained max/add for each of the two reductions."""
    ptx = _ptx(_online_softmax_stats, "*bf16", "*fp32", 32000, BLOCK=32768, num_warps=num_warps)
    log_warps = num_warps.bit_length() - 1
    assert len(re.findall(r"ld\.shared\.\S+", ptx)) == 2   # one per reduction
    assert len(re.findall(r"shfl\.sync\.bfly", ptx)) == 2 * (5 + log_warps)


@tilejit.jit
def _jsd_like(x_ptr, y_ptr, loss_ptr, dx_ptr, n, BLOCK: tl.constexpr):
    """Liger's JSD loop body: bf16 inputs (8 a thread), an fp32 loss (4 a thread) and a bf16 grad."""
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=float("-inf")).to(tl.float32)
    y = tl.load(y_ptr + offs, mask=mask, other=float("-inf")).to(tl.float32)
    m = tl.maximum(x, y)
    log_m = m + tl.log(0.5 * tl.exp(y - m) + 0.5 * tl.exp(x - m))
    q = 0.5 * tl.exp(x)
    tl.store(loss_ptr + offs, 0.5 * tl.exp(y) * (y - log_m) + q * (x - log_m), mask=mask)
    tl.store(dx_ptr + offs, q * (x - log_m), mask=mask)


def test_stored_value_converts_once_before_its_store():
    """As Triton: the fp32 loss is computed in the loads' layout (8 elements a thread) and converted
    once, right before its 16-byte stores; wishing the store's layout up the chain converted the
    loaded y and the shared log(M) instead (five conversions, 241 registers in Liger's JSD)."""
    kernel = _jsd_like.warmup("*bf16", "*bf16", "*fp32", "*bf16", 32000, BLOCK=4096, num_warps=4, grid=(1,),
                              target="cuda:90")
    ttgir = kernel.asm["ttgir"]
    converts = re.findall(r"(%\w+) = ttg\.convert_layout", ttgir)
    assert len(converts) == 1, ttgir
    assert re.search(rf"tt\.store %\w+, {converts[0]}, ", ttgir)
    assert len(re.findall(r"st\.global\.v4\.b32", kernel.asm["ptx"])) == 4096 // 128 // 4 + 4096 // 128 // 8


@tilejit.jit
def _rope_like(q_ptr, k_ptr, cos_ptr, H_Q: tl.constexpr, H_K: tl.constexpr, D: tl.constexpr,
               OVERWRITE_COS: tl.constexpr):
    """Liger's RoPE: one row of cos (D/2 values) scales a q tile and a k tile of other shapes."""
    half = tl.arange(0, D // 2)
    cos = tl.load(cos_ptr + half)
    if OVERWRITE_COS:   # a write between the load and its uses: reading cos again would see it
        tl.store(cos_ptr + half, cos * 2)
    q_offs = tl.arange(0, H_Q)[:, None] * D + half[None, :]
    k_offs = tl.arange(0, H_K)[:, None] * D + half[None, :]
    tl.store(q_ptr + q_offs, tl.load(q_ptr + q_offs) * cos[None, :])
    tl.store(k_ptr + k_offs, tl.load(k_ptr + k_offs) * cos[None, :])


def test_small_loads_are_read_again_in_each_users_layout():
    """As Triton: a load with fewer elements than the CTA has threads, used in two layouts (the q and
    the k tile), is issued once per layout instead of converted through shared memory (Liger's RoPE:
    four conversions, 12 bar.sync); with a store in between, it is converted."""
    def compile_(overwrite):
        return _rope_like.warmup("*bf16", "*bf16", "*bf16", H_Q=32, H_K=8, D=128, OVERWRITE_COS=overwrite,
                                 num_warps=4, grid=(1,), target="cuda:90").asm
    asm = compile_(False)
    assert "ttg.convert_layout" not in asm["ttgir"]
    assert "bar.sync" not in asm["ptx"]
    assert "ttg.convert_layout" in compile_(True)["ttgir"]


@tilejit.jit
def _bf16_rotate(x_ptr, y_ptr, c_ptr, s_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x, y = tl.load(x_ptr + offs), tl.load(y_ptr + offs)
    c, s = tl.load(c_ptr + offs), tl.load(s_ptr + offs)
    tl.store(out_ptr + offs, x * c - y * s)   # bf16 throughout, as RoPE's tiles


@pytest.mark.parametrize("target", ["cuda:90", "cuda:80"])
def test_bf16_arithmetic_is_native_on_sm90(target):
    """sm_90 has bf16 add/sub/mul: `x * c - y * s` on bf16 tensors is Triton's mul.rn.bf16 and
    fma.rn.bf16 (in pairs on the SASS side), not a decode to f32, an f32 op and a rounding each;
    sm_80 computes in f32 and rounds (test_bf16_results_round_by_cvt)."""
    ptx = _ptx(_bf16_rotate, *["*bf16"] * 5, BLOCK=1024, num_warps=4, target=target)
    if target == "cuda:90":
        # Triton's PTX for RoPE: mul.bf16, fma.rn.bf16 (x * c - y * s: a negated product fused)
        assert re.search(r"\bmul(\.rn)?\.bf16", ptx) and re.search(r"\bfma\.rn\.bf16", ptx)
        assert not re.search(r"cvt\.\w+\.bf16", ptx) and "mul.rn.f32" not in ptx and "mul.f32" not in ptx
    else:
        assert not re.search(r"\bmul(\.rn)?\.bf16", ptx)


def test_masked_stores_are_predicated():
    """As Triton: a masked store is `@%p st.global...` (a predicated instruction), not a branch around
    an unpredicated store (a BSSY/BSYNC region in SASS, with the stored value's computation sunk in)."""
    ptx = _ptx(_scale_to_bf16, "*fp32", "*bf16", 4096, BLOCK=1024, num_warps=4)
    stores = re.findall(r"^\s*(@%p\d+ )?st\.global\.(\S+)", ptx, re.M)
    assert stores and all(pred for pred, _ in stores), stores
