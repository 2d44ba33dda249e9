"""How tl.atomic_load / tl.atomic_store come out (compiled on the host, no GPU). The NVIDIA spellings
are Triton 3.9's for the same kernels on cuda:90 / cuda:80: relaxed `ld` / `st` with the scope, an
acquire fence after the reads and a release fence before the writes, once per thread; AMD gets LLVM
atomic loads and stores with the fences."""
import re

import pytest

import tilejit
import tilejit.language as tl
from toolchain_paths import needs_lld


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))


@tilejit.jit
def _copy(src, dst, n, LOAD_SEM: tl.constexpr, STORE_SEM: tl.constexpr, SCOPE: tl.constexpr, B: tl.constexpr):
    offs = tl.arange(0, B)
    mask = offs < n
    value = tl.atomic_load(src + offs, mask=mask, sem=LOAD_SEM, scope=SCOPE)
    tl.atomic_store(dst + offs, value, mask=mask, sem=STORE_SEM, scope=SCOPE)


def _ptx(dtype, target="cuda:90", B=128, num_warps=4, **kwargs):
    return _copy.warmup(f"*{dtype}", f"*{dtype}", "i32", B=B, grid=(1,), target=target, num_warps=num_warps,
                        **kwargs).asm["ptx"]


@pytest.mark.parametrize("dtype, bits", [("i1", 8), ("i8", 8), ("i16", 16), ("fp16", 16), ("bf16", 16),
                                         ("i32", 32), ("fp32", 32), ("i64", 64), ("fp64", 64)])
def test_default_semantics_are_a_relaxed_access_and_a_fence(dtype, bits):
    ptx = _ptx(dtype, LOAD_SEM=None, STORE_SEM=None, SCOPE=None)
    assert re.findall(r"\b(?:ld|st)\.relaxed\.[\w.]+", ptx) == [f"ld.relaxed.gpu.global.b{bits}",
                                                               f"st.relaxed.gpu.global.b{bits}"]
    # (LLVM may duplicate a fence into both arms of the mask's branch; each path runs one)
    assert "fence.acquire.gpu;" in ptx and "fence.release.gpu;" in ptx
    assert ptx.index("ld.relaxed") < ptx.index("fence.acquire") < ptx.index("fence.release") < \
        ptx.index("st.relaxed")
    assert "atom." not in ptx and "ld.acquire" not in ptx and "st.release" not in ptx


@pytest.mark.parametrize("scope", ["cta", "gpu", "sys"])
def test_relaxed_semantics_have_no_fence_and_keep_the_scope(scope):
    ptx = _ptx("i32", LOAD_SEM="relaxed", STORE_SEM="relaxed", SCOPE=scope)
    assert f"ld.relaxed.{scope}.global.b32" in ptx and f"st.relaxed.{scope}.global.b32" in ptx
    assert "fence." not in ptx


def test_fences_carry_the_scope():
    ptx = _ptx("i32", LOAD_SEM="acquire", STORE_SEM="release", SCOPE="sys")
    assert "fence.acquire.sys;" in ptx and "fence.release.sys;" in ptx


def test_before_hopper_both_fences_are_acq_rel():
    ptx = _ptx("i32", target="cuda:80", LOAD_SEM="acquire", STORE_SEM="release", SCOPE="gpu")
    assert "fence.acq_rel.gpu;" in ptx and "fence.acquire" not in ptx and "fence.release" not in ptx


@tilejit.jit
def _block(src, dst, B: tl.constexpr):
    offs = tl.arange(0, B)
    tl.atomic_store(dst + offs, tl.atomic_load(src + offs))


def test_a_thread_fences_once_for_all_its_elements():
    """512 elements over 128 threads: four reads, one acquire fence, one release fence, four writes
    (Triton 3.9's counts for the same kernel)."""
    ptx = _block.warmup("*i32", "*i32", B=512, grid=(1,), target="cuda:90", num_warps=4).asm["ptx"]
    assert ptx.count("ld.relaxed.gpu.global.b32") == 4 and ptx.count("st.relaxed.gpu.global.b32") == 4
    assert ptx.count("fence.acquire.gpu;") == 1 and ptx.count("fence.release.gpu;") == 1


@tilejit.jit
def _scalar(src, dst):
    tl.atomic_store(dst, tl.atomic_load(src) + 1)


def test_a_scalar_is_read_by_one_thread_and_acquired_before_it_is_shared():
    ptx = _scalar.warmup("*i32", "*i32", grid=(1,), target="cuda:90").asm["ptx"]
    assert ptx.count("ld.relaxed.gpu.global.b32") == 1 and ptx.count("st.relaxed.gpu.global.b32") == 1
    # the acquire fence comes before the value goes through shared memory to the other threads
    assert ptx.index("fence.acquire.gpu;") < ptx.index("st.shared")


@needs_lld
def test_amd_gets_llvm_atomics_and_fences():
    kernel = _copy.warmup("*fp32", "*fp32", "i32", B=128, grid=(1,), target="hip:gfx942",
                          LOAD_SEM="acquire", STORE_SEM="release", SCOPE="gpu")
    llir = kernel.asm["llir"]
    assert re.search(r"load atomic i32, ptr addrspace\(1\) %\S+ monotonic", llir)
    assert re.search(r"store atomic i32 %\S+, ptr addrspace\(1\) %\S+ monotonic", llir)
    assert "fence acquire" in llir and "fence release" in llir


# -- the core lowering run on the host (simt_runner) -----------------------------------------------
# Inline PTX cannot run on the host: with NVIDIA's PTX hooks turned off the lowering falls back to the
# core's LLVM atomic loads, stores and fences, so the owners, masks and the scalar's broadcast run.

@pytest.fixture
def _llvm_atomics(monkeypatch):
    from tilejit_nvidia import memory_ptx
    monkeypatch.setattr(memory_ptx, "atomic_read", lambda *args: None)
    monkeypatch.setattr(memory_ptx, "atomic_write", lambda *args: False)
    monkeypatch.setattr(memory_ptx, "atomic_fence", lambda *args: False)


@tilejit.jit
def _double(src, dst, n, B: tl.constexpr):
    offs = tl.arange(0, B)
    mask = offs < n
    tl.atomic_store(dst + offs, tl.atomic_load(src + offs, mask=mask) * 2, mask=mask)


@tilejit.jit
def _broadcast(src, dst, B: tl.constexpr):
    value = tl.atomic_load(src)
    tl.store(dst + tl.arange(0, B), tl.full([B], 0, tl.int32) + value)
    tl.atomic_store(dst + B, value + 1)


@pytest.mark.parametrize("B", [32, 128, 512])   # replicated lanes, one element and four per thread
def test_masked_blocks_run_on_the_host(_llvm_atomics, B):
    import numpy as np
    from simt_runner import run
    kernel = _double.warmup("*i32", "*i32", "i32", B=B, grid=(1,), target="cuda:90", num_warps=4)
    assert "ld.relaxed" not in kernel.asm["llir"]
    src, dst = np.arange(B, dtype=np.int32) + 5, np.full(B, -1, np.int32)
    run(kernel.asm["llir"], [src, dst, B - 3], 4)
    np.testing.assert_array_equal(dst, np.where(np.arange(B) < B - 3, src * 2, -1))


def test_a_scalar_load_reaches_every_thread_on_the_host(_llvm_atomics):
    import numpy as np
    from simt_runner import run
    kernel = _broadcast.warmup("*i32", "*i32", B=128, grid=(1,), target="cuda:90", num_warps=4)
    dst = np.zeros(129, np.int32)
    run(kernel.asm["llir"], [np.array([7], np.int32), dst], 4)
    np.testing.assert_array_equal(dst, [7] * 128 + [8])
