"""A dot operand gathered through indices loaded in the same iteration (`x[idx[:, None], cols]`,
Liger's MoE weight gradients) is pipelined on sm_90 as Triton pipelines it: the index vector is a
prefetched load, loaded ahead in the lookahead before the addresses that read it, and the gather's
rows go to shared memory by cp.async, where wgmma reads them. Before, the gather was a register load
and the dot ran mma.sync (dW1 0.85x, dW2 0.91x Triton on an H200). Values: tests/language
`test_dot_of_rows_gathered_by_loaded_indices`."""
import os
import re
import sys

import pytest

from toolchain_paths import needs_ptxas

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "language"))
from dot_kernels import gathered_rows_matmul  # noqa: E402

pytestmark = needs_ptxas


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))


def _sequence(ptx: str) -> str:
    """The kernel's global loads, copies, waits and wgmmas in order, one word each."""
    words = {"ld.global.b32": "L", "cp.async.cg": "C", "cp.async.commit_group": "G", "cp.async.wait_group": "W",
             "wgmma.mma_async": "M"}
    pattern = "|".join(re.escape(w) for w in words)
    return "".join(words[m.group(0)] for m in re.finditer(pattern, ptx))


@pytest.mark.parametrize("by_block", [False, True])   # row indices, or one block number (a block table)
@pytest.mark.parametrize("stages", [2, 3])
def test_gathered_rows_are_copied_ahead_for_wgmma(stages, by_block):
    kernel = gathered_rows_matmul.warmup("*fp16", "*fp16", "*i32", "*fp32", 128, H=128, BM=64, BN=128, BK=32,
                                         STAGES=stages, BY_BLOCK=by_block, num_warps=4, grid=(1,),
                                         target="cuda:90")
    ptx = kernel.asm["ptx"]
    assert "mma.sync" not in ptx
    assert len(re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n128k16\.f32\.f16\.f16", ptx)) == 2
    # An iteration's fetch: its indices (L), then the copies of A (64x32: 2 a thread) and of the
    # gathered B (32x128: 4 a thread) that read them, one commit group. The prologue fetches
    # stages - 1 iterations; the loop waits, runs its 2 wgmma (both operands read through
    # descriptors, the dot kept in flight), then fetches the iteration stages - 1 ahead; the exit
    # waits for the last copies.
    fetch = "L+C{6}G"
    assert re.fullmatch(f"(?:{fetch}){{{stages - 1}}}WMM{fetch}W", _sequence(ptx)), _sequence(ptx)


@pytest.mark.parametrize("by_block", [False, True])
def test_each_gathered_copy_reads_indices_loaded_for_its_own_iteration(by_block):
    """In the LLVM IR, the address of every copy of the gathered B derives from an index load made in
    the same fetch, not from the indices the loop carries for the iteration it computes (which the
    addresses would read if they were lowered before the lookahead's loads)."""
    kernel = gathered_rows_matmul.warmup("*fp16", "*fp16", "*i32", "*fp32", 112, H=128, BM=64, BN=128, BK=32,
                                         STAGES=2, BY_BLOCK=by_block, num_warps=4, grid=(1,), target="cuda:90")
    lines = kernel.asm["llir"].splitlines()
    name = r'%"[^"]+"|%[-\w.$]+'
    defs = {m.group(1): line for line in lines for m in [re.match(rf"\s*({name}) = ", line)] if m}

    def reaches_index_load(value) -> bool:
        seen, work = set(), [value]
        while work:
            v = work.pop()
            line = defs.get(v)
            if line is None or v in seen:
                continue
            seen.add(v)
            if "ld.global.b32" in line:
                return True
            if " phi " not in line:   # a carried value: another iteration's
                work += re.findall(name, line.split(" = ", 1)[1])
        return False
    copies = [re.search(rf"\(i32 (?:{name}), i64 ({name}), i1", line).group(1)
              for line in lines if "cp.async.cg.shared.global" in line]
    # 2 fetches (prologue, loop) of 2 copies of A (its pointers advance) and 4 of the gathered B
    assert len(copies) == 12
    assert sum(reaches_index_load(src) for src in copies) == 8
