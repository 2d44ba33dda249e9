"""The PTX-version probe (a dozen target machines, part of every process's first compile) is
remembered in the cache's JSON documents per llvmlite build and cpu (compile speed, issue 12)."""
from __future__ import annotations

import pytest

from tilejit.errors import CompilationError
from tilejit_nvidia import ptx_isa


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))
    ptx_isa.llvm_ptx_range.cache_clear()
    yield tmp_path
    ptx_isa.llvm_ptx_range.cache_clear()


def test_the_probe_is_remembered_for_the_next_process(fresh, monkeypatch):
    probed = ptx_isa.llvm_ptx_range("sm_90a")
    assert list((fresh / "json").glob("ptx-range-*.json"))
    ptx_isa.llvm_ptx_range.cache_clear()  # a new process: only the disk remembers

    def no_probe(cpu):
        raise AssertionError("probed again")

    monkeypatch.setattr(ptx_isa, "_probe_ptx_range", no_probe)
    assert ptx_isa.llvm_ptx_range("sm_90a") == probed


def test_a_damaged_document_is_probed_again(fresh):
    probed = ptx_isa.llvm_ptx_range("sm_90a")
    [doc] = (fresh / "json").glob("ptx-range-*.json")
    doc.write_text('[90, "x"]')
    ptx_isa.llvm_ptx_range.cache_clear()
    assert ptx_isa.llvm_ptx_range("sm_90a") == probed


def test_an_unknown_cpu_is_still_an_error_and_not_remembered(fresh):
    with pytest.raises(CompilationError, match="sm_990a"):
        ptx_isa.llvm_ptx_range("sm_990a")
    assert not list((fresh / "json").glob("ptx-range-*.json"))
