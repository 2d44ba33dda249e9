"""Fixtures of the AMD backend tests."""
from __future__ import annotations

import pytest

from tilejit_amd import toolchain


@pytest.fixture
def no_lld_anywhere(monkeypatch, tmp_path):
    """Hide every ld.lld: no TILEJIT_LLD, an empty PATH, no ROCm, no /usr/lib/llvm-NN."""
    monkeypatch.delenv("TILEJIT_LLD", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(toolchain, "ROCM_LLD", str(tmp_path / "rocm" / "ld.lld"))
    monkeypatch.setattr(toolchain, "LLVM_INSTALL_ROOTS", ())
