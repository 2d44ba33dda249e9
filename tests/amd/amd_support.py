"""Whether the AMD tests can link: a usable ld.lld, or a clean skip that says why."""
from __future__ import annotations

import pytest

from tilejit_amd import toolchain


def _lld_problem() -> str | None:
    lld = toolchain.find_lld()
    if lld is None:
        return "no ld.lld found: apt-get install lld-19 (or ROCm, or set TILEJIT_LLD)"
    version = toolchain.lld_version(lld)
    if version is None or version[0] < toolchain.MIN_LLD_MAJOR:
        return f"{lld} is too old or broken for code object v5: apt-get install lld-19"
    return None


LLD_PROBLEM = _lld_problem()
requires_lld = pytest.mark.skipif(LLD_PROBLEM is not None, reason=LLD_PROBLEM or "")
