"""sm_90's vector atomics (`atom.global.add.v4.f32`, `.noftz.v8.f16` / `.v8.bf16`, PTX ISA 8.1): a
thread adds the consecutive elements its pointers' alignment and the mask allow with one predicated
instruction, as Triton does. Before, each element was its own branch-guarded `atom`: Liger's
modulated RMS norm backward, two fp32 atomic_adds of 16 elements a thread, ran at 0.31x Triton on an
H200. The values are checked on every backend by tests/language `test_wide_atomic_adds_from_many_programs`."""
import os
import re
import sys

import pytest

import tilejit.language as tl
from toolchain_paths import needs_ptxas

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "language"))
from accumulation_kernels import wide_atomic_add  # noqa: E402

pytestmark = needs_ptxas


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))


def _atomics(dtype, n, arch=90):
    storage = "*fp32" if dtype == "float32" else "*u16"   # 16-bit rows are passed as bits, cast in the kernel
    kernel = wide_atomic_add.warmup(storage, "*fp32", storage, n, DTYPE=getattr(tl, dtype), BLOCK=1024,
                                    num_warps=4, grid=(1,), target=f"cuda:{arch}")
    return re.findall(r"(@%p\d+ )?atom\.global\.gpu\.relaxed\.([\w.]+)", kernel.asm["ptx"])


@pytest.mark.parametrize("dtype,spelled,count", [("float32", "add.v4.f32", 2), ("float16", "add.noftz.v8.f16", 1),
                                                 ("bfloat16", "add.noftz.v8.bf16", 1)])
def test_aligned_runs_take_one_predicated_vector_atomic(dtype, spelled, count):
    # 1024 elements over 128 threads: 8 consecutive a thread; n = 992 is a multiple of 16, so the
    # mask `offs < n` is constant over each run of 8
    found = _atomics(dtype, 992)
    assert [ty for _, ty in found] == [spelled] * count
    assert all(guard for guard, _ in found)   # masked by a predicate, not a branch


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_a_mask_that_splits_runs_keeps_one_atomic_an_element(dtype):
    # n = 1000 is not known to be a multiple of anything: the mask may change inside a run
    found = _atomics(dtype, 1000)
    assert len(found) == 8 and all(".v" not in ty for _, ty in found)


def test_before_sm_90_there_are_no_vector_atomics():
    found = _atomics("float32", 992, arch=80)
    assert len(found) == 8 and all(ty == "add.f32" for _, ty in found)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_vector_atomics_run_on_the_host(dtype):
    """The lowering's groups (which elements, which mask bit, which old value where) run with
    simt_runner: 6 CTAs add their rows into one, the tail past n masked."""
    import numpy as np
    from simt_runner import run
    storage = "*fp32" if dtype == "float32" else "*u16"
    kernel = wide_atomic_add.warmup(storage, "*fp32", storage, 992, DTYPE=getattr(tl, dtype), BLOCK=1024,
                                    num_warps=4, grid=(1,), target="cuda:90")
    assert ".v4.f32" in kernel.asm["llir"] or ".v8." in kernel.asm["llir"]
    programs, n = 6, 992
    vals = np.random.default_rng(5).integers(1, 9, (programs, 1024)).astype(np.float32)
    np_storage = np.float32 if dtype == "float32" else np.uint16
    target, old = np.zeros(1024, np_storage), np.zeros((programs, 1024), np_storage)
    run(kernel.asm["llir"], [target, vals, old, n], 4, grid=programs)

    def values(bits):
        if dtype == "float32":
            return bits
        if dtype == "float16":
            return bits.view(np.float16).astype(np.float32)
        return (bits.astype(np.uint32) << 16).view(np.float32)
    got, old = values(target), values(old)
    np.testing.assert_array_equal(got[:n], vals[:, :n].sum(axis=0))
    np.testing.assert_array_equal(got[n:], 0)
    # CTAs run one after another: program p saw the sum of the programs before it
    np.testing.assert_array_equal(old[:, :n], np.cumsum(vals[:, :n], axis=0) - vals[:, :n])
