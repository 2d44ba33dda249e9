"""Triton's `maxnreg` option (a kernel argument, or a field of `triton.Config`): every kernel entry
of the PTX gets `.maxnreg N`, as Triton's (it sets LLVM's `nvvm.maxnreg`), and ptxas keeps each
thread to N registers. tilejit accepted the option and dropped it."""
import os
import re
import sys

import pytest

from tilejit_nvidia import toolchain
from toolchain_paths import needs_ptxas

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "language"))
from dot_kernels import paired_projection_kernel  # noqa: E402


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))


def _compile(**options):
    return paired_projection_kernel.warmup("*fp16", "*fp16", "*fp32", 64, K=256, N=128, BM=64, BN=128, BK=32,
                                           num_warps=4, grid=(1,), target="cuda:90", **options)


def _registers(ptx: str) -> int:
    (usage,) = toolchain.assemble_ptx(ptx, 90).resources.values()
    return usage["registers"]


def test_without_the_option_ptxas_chooses():
    ptx = _compile().asm["ptx"]
    assert ".maxnreg" not in ptx


@needs_ptxas
def test_the_cap_is_on_the_entry_and_kept_by_ptxas():
    # two 64x128 fp32 accumulators are 128 registers a thread; ptxas takes more without a cap
    assert _registers(_compile().asm["ptx"]) > 136
    ptx = _compile(maxnreg=136).asm["ptx"]
    assert re.search(r"^\.maxntid 128\n\.maxnreg 136\n", ptx, re.MULTILINE)
    assert _registers(ptx) <= 136


def test_the_cap_replaces_the_two_cta_request():
    """An 8-warp pipelined wgmma loop asks for two CTAs an SM (`.minnctapersm 2`, a register cap of
    its own); with `maxnreg` the user's cap is the only one."""
    plain = toolchain.limit_registers(".entry k()\n.maxntid 256\n.minnctapersm 2\n{\n}\n", 200)
    assert plain == ".entry k()\n.maxntid 256\n.maxnreg 200\n{\n}\n"


def test_the_cap_is_part_of_the_cache_key():
    assert _compile(maxnreg=168).hash != _compile().hash
