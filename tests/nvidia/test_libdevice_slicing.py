"""Linking only the libdevice functions a kernel calls gives the PTX that linking the whole library gives.

`toolchain._LibdeviceSlices` cuts libdevice into its definitions once per process (compile speed: the
whole library cost 50-120 ms per kernel); these tests compile the same LLVM modules both ways.
"""
from __future__ import annotations

import os
import re

import pytest

from tilejit_nvidia import toolchain
from tilejit_nvidia.toolchain import find_ptxas_or_none, llir_to_ptx

LIBDEVICE = toolchain.find_libdevice(find_ptxas_or_none())
pytestmark = pytest.mark.skipif(LIBDEVICE is None, reason="libdevice.10.bc not found: pip install nvidia-nvvm")

# (libdevice function, LLVM type): fast paths, functions with slow-path subroutines (sinf/cosf reduce
# through a table global, pow/sin on doubles through noinline helpers), and ones calling each other.
FUNCTIONS = {
    "erf": [("__nv_erff", "float")],
    "exp_log": [("__nv_expf", "float"), ("__nv_logf", "float"), ("__nv_exp2f", "float")],
    "trig_f32": [("__nv_sinf", "float"), ("__nv_cosf", "float"), ("__nv_tanf", "float")],
    "double": [("__nv_sin", "double"), ("__nv_pow", "double2"), ("__nv_exp", "double")],
    "mixed": [("__nv_powf", "float2"), ("__nv_tanhf", "float"), ("__nv_sqrtf", "float"), ("__nv_erfinvf", "float")],
}


def _kernel(calls) -> str:
    """A kernel that loads x, applies each function in turn, and stores the result."""
    decls, body = [], []
    value = "%x0"
    body.append("  %x0 = load double, ptr addrspace(1) %p, align 8")
    body.append("  %f0 = fptrunc double %x0 to float")
    fvalue = "%f0"
    for i, (name, kind) in enumerate(calls):
        if kind in ("float", "float2"):
            args = f"float {fvalue}" + (f", float {fvalue}" if kind == "float2" else "")
            decls.append(f"declare float @{name}({'float, float' if kind == 'float2' else 'float'})")
            body.append(f"  %f{i + 1} = call float @{name}({args})")
            fvalue = f"%f{i + 1}"
        else:
            args = f"double {value}" + (f", double {value}" if kind == "double2" else "")
            decls.append(f"declare double @{name}({'double, double' if kind == 'double2' else 'double'})")
            body.append(f"  %d{i + 1} = call double @{name}({args})")
            value = f"%d{i + 1}"
    body.append(f"  %e = fpext float {fvalue} to double")
    body.append(f"  %r = fadd double %e, {value}")
    body.append("  store double %r, ptr addrspace(1) %p, align 8")
    return "\n".join([
        'target triple = "nvptx64-nvidia-cuda"',
        *decls,
        "define ptx_kernel void @k(ptr addrspace(1) %p) {",
        *body,
        "  ret void",
        "}",
    ]) + "\n"


def _without_call_numbers(ptx: str) -> str:
    """PTX without the `// callseq N` comments: N counts the calls the cached target machine has
    lowered in this process so far, whatever module they were in."""
    return re.sub(r"// callseq \d+(, \d+)?", "// callseq", ptx)


@pytest.mark.parametrize("case", sorted(FUNCTIONS))
def test_sliced_libdevice_gives_the_same_ptx(case, monkeypatch):
    text = _kernel(FUNCTIONS[case])
    sliced = llir_to_ptx(text, 90)
    monkeypatch.setattr(toolchain, "SLICE_LIBDEVICE", False)
    whole = llir_to_ptx(text, 90)
    assert _without_call_numbers(sliced) == _without_call_numbers(whole)
    for name, _ in FUNCTIONS[case]:
        assert name not in sliced  # inlined: no call to an undefined libdevice function is left


def test_slices_hold_only_what_a_function_reaches():
    st = os.stat(LIBDEVICE)
    slices = toolchain._libdevice_slices(LIBDEVICE, st.st_mtime_ns, st.st_size)
    assert slices.usable
    text = slices.module_text(["__nv_sinf"])
    assert "define" in text and "@__nv_sinf(" in text
    assert "@__nv_erff(" not in text and "@__nv_pow(" not in text
    # sinf's range reduction reads a table global: it must come along
    assert any(name in text for name in slices.globals)
    assert text.count("define ") < len(slices.definitions) // 10


def test_a_slice_is_kept_on_disk_for_the_next_process(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(toolchain, "_slice_texts", {})
    text = toolchain._libdevice_slice_text(LIBDEVICE, ["__nv_erff"])
    assert "@__nv_erff(" in text
    monkeypatch.setattr(toolchain, "_slice_texts", {})  # a new process: only the disk remembers
    monkeypatch.setattr(toolchain, "_libdevice_slices", None)  # must not be needed
    assert toolchain._libdevice_slice_text(LIBDEVICE, ["__nv_erff"]) == text


def test_a_damaged_slice_on_disk_is_not_used(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(toolchain, "_slice_texts", {})
    text = toolchain._libdevice_slice_text(LIBDEVICE, ["__nv_expf"])
    assert "fmul" in text
    [doc] = (tmp_path / "json").glob("*.json")
    doc.write_text(doc.read_text().replace("fmul", "fadd"))
    monkeypatch.setattr(toolchain, "_slice_texts", {})
    assert toolchain._libdevice_slice_text(LIBDEVICE, ["__nv_expf"]) == text
