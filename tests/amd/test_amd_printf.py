"""`tl.device_print` on AMD: buffered printf. The hsaco must carry the formats (`amdhsa.printf`) and
the hidden printf buffer argument, no call may remain, and the launcher must pack around that
argument (the HIP runtime fills it). Never run on an AMD GPU."""
from __future__ import annotations

import numpy as np
import pytest

import tilejit
import tilejit.language as tl
from amd_support import requires_lld
from tilejit_amd.elf import inspect_hsaco
from tilejit_amd.kernargs import KernargLayout


@tilejit.jit
def _print_two(x_ptr, n):
    x = tl.load(x_ptr + tl.arange(0, 4))
    tl.device_print("vals", x)
    tl.device_print("n", n)


@requires_lld
@pytest.mark.parametrize("arch, wave", [("gfx942", 64), ("gfx1100", 32)])
def test_device_print_becomes_buffered_printf(arch, wave, monkeypatch):
    monkeypatch.setenv("TILEJIT_ALWAYS_COMPILE", "1")
    k = _print_two.warmup(np.zeros(4, np.int32), 7, grid=(1,), target=f"hip:{arch}")
    info = inspect_hsaco(k.asm["hsaco"])
    formats = info.metadata["amdhsa.printf"]
    # "id:nargs:size,...:format"; the runtime unescapes \72 (':').
    assert any("vals" in f and "%d" in f for f in formats) and any(f.endswith("n\\72 %d\\n") for f in formats)
    kernel = info.kernel("_print_two")
    assert kernel.wavefront_size == wave
    printf_args = [a for a in kernel.hidden_args if a.value_kind == "hidden_printf_buffer"]
    assert len(printf_args) == 1 and printf_args[0].size == 8
    assert "printf" not in k.asm["amdgcn"].split(".amdgpu_metadata")[0].replace("__printf_alloc", "")
    layout = KernargLayout.from_metadata(kernel, {"x_ptr": "*i32", "n": "i32"})
    packed = layout.pack([0x1000, 7], grid=(2, 1, 1), block=(wave, 1, 1))
    slot = printf_args[0]
    assert packed[slot.offset:slot.offset + 8] == bytes(8)        # the runtime's to fill
    assert int.from_bytes(packed[8:12], "little") == 7
    assert int.from_bytes(packed[0:8], "little") == 0x1000


def test_kernel_without_print_has_no_printf_buffer():
    from tilejit_amd import toolchain
    if toolchain.find_lld() is None:
        pytest.skip("no ld.lld")

    @tilejit.jit
    def _copy(x_ptr, y_ptr):
        tl.store(y_ptr + tl.arange(0, 4), tl.load(x_ptr + tl.arange(0, 4)))
    k = _copy.warmup(np.zeros(4, np.int32), np.zeros(4, np.int32), grid=(1,), target="hip:gfx942")
    info = inspect_hsaco(k.asm["hsaco"])
    assert "amdhsa.printf" not in info.metadata
    assert all(a.value_kind != "hidden_printf_buffer" for a in info.kernel("_copy").hidden_args)
