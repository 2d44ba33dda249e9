"""AMD atomics carry Triton's scope as an AMDGPU sync scope (gpu: "agent"), as Triton's AMD backend:
without one LLVM assumes fine-grained memory and adds floats with a compare-and-swap loop. And packed
fp16 atomic adds: two consecutive aligned halves a thread are added with one
`global_atomic_pk_add_f16` where LLVM has it native (gfx942, gfx950, gfx1201), as Triton packs fp16
atomics; elsewhere one atomic an element. Checked in the amdgcn assembly (no AMD GPU here: the
values are checked on every backend by tests/language `test_wide_atomic_adds_from_many_programs`)."""
import os
import re
import sys

import pytest

import tilejit.language as tl
from amd_support import requires_lld

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "language"))
from accumulation_kernels import wide_atomic_add  # noqa: E402


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))


def _atomics(arch, n, dtype="float16"):
    storage = "*fp32" if dtype == "float32" else "*u16"
    kernel = wide_atomic_add.warmup(storage, "*fp32", storage, n, DTYPE=getattr(tl, dtype), BLOCK=1024,
                                    num_warps=4, grid=(1,), target=f"hip:{arch}")
    return re.findall(r"^\s*(global_atomic_\w+)", kernel.asm["amdgcn"], re.M)


@requires_lld
@pytest.mark.parametrize("arch", ["gfx942", "gfx950", "gfx1201"])
def test_aligned_half_pairs_take_one_packed_atomic(arch):
    # 1024 halves over 4 warps: 4 a thread (wave64) or 8 (wave32), in aligned pairs (n = 992)
    per_thread = 1024 // (4 * (32 if arch == "gfx1201" else 64))
    assert _atomics(arch, 992) == ["global_atomic_pk_add_f16"] * (per_thread // 2)


@requires_lld
def test_unpaired_halves_and_other_types_keep_their_atomics():
    assert "global_atomic_pk_add_f16" not in _atomics("gfx942", 1000)     # the mask may split a pair
    assert "global_atomic_pk_add_f16" not in _atomics("gfx90a", 992)      # LLVM would loop on a CAS
    assert set(_atomics("gfx942", 992, "float32")) == {"global_atomic_add_f32"}   # a CAS loop before
