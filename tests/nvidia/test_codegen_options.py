"""The options NVPTX code generation runs with (`llvm_setup.nvptx_codegen_options`), set back after
each emission.

- LLVM 22's straight-line strength reduction without its poison-reuse check: the check was 40-60% of
  code generation on the unrolled address arithmetic of matmul and attention. The compile-speed
  benchmark's matmul and attention (bench/kernels.py, its options) are compiled both ways: the PTX may
  differ (SLSR reuses more address computations) but has no more instructions of any kind in the main
  loop, no more in the kernel, and no more registers or spills.
- No loop strength reduction: the pipelined wgmma matmul's copies read loop-carried pointers, each
  advanced in place, instead of an address formed again every iteration (see llvm_setup)."""
from __future__ import annotations

import collections
import os
import re
import sys

import llvmlite.binding as llvm
import pytest

import tilejit
from tilejit_nvidia import llvm_setup, toolchain

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
sys.path.insert(0, os.path.join(HERE, ".."))
from toolchain_paths import ptxas  # noqa: E402

needs_llvm22 = pytest.mark.skipif(llvm.llvm_version_info[0] != 22, reason="the SLSR option is set on LLVM 22 only")


def _without(monkeypatch, prefix: str) -> None:
    """Emit code with every option but the one starting with `prefix` (which keeps LLVM's default)."""
    chosen = llvm_setup._codegen_options
    monkeypatch.setattr(llvm_setup, "_codegen_options",
                        lambda lsr: [pair for pair in chosen(lsr) if not pair[0].startswith(prefix)])


def _statements(ptx: str):
    """("label", name) and ("op", mnemonic) in order; an instruction may span lines, so split at `;`."""
    out = []
    for chunk in re.sub(r"//[^\n]*", "", ptx).split(";"):
        text = chunk.strip().lstrip("{}").strip()
        while (label := re.match(r"(\$L__BB\d+_\d+):\s*", text)) is not None:
            out.append(("label", label.group(1)))
            text = text[label.end():].lstrip("{}").strip()
        text = re.sub(r"^@!?%p\d+\s+", "", text)
        if text and not text.startswith((".", "(", ")")):
            out.append(("op", ".".join(text.split()[0].split(".")[:2]) + ("" if "bra" not in text else " " + text.split()[-1])))
    return out


def _opcodes(ptx: str):
    """Instruction mnemonics (`ld.global`, `mma.sync`) in the kernel and in its first loop (from a
    label to the branch back to it)."""
    statements = _statements(ptx)
    kernel = collections.Counter(v.split()[0] for k, v in statements if k == "op")
    for i, (kind, label) in enumerate(statements):
        back = [j for j, (k, v) in enumerate(statements) if j > i and k == "op" and v.endswith(" " + label)]
        if kind == "label" and back:
            loop = collections.Counter(v.split()[0] for k, v in statements[i:back[-1] + 1] if k == "op")
            return kernel, loop
    return kernel, collections.Counter()


def _llir(name: str, tmp_path) -> str:
    """bench/compile_speed.py's kernel `name` with no alignment hints (scalar global accesses)."""
    from common import load_kernels
    from compile_speed import KERNELS
    os.environ["TILEJIT_CACHE_DIR"] = str(tmp_path / name)
    kernel, sig, constexprs, options = KERNELS[name]
    fn = getattr(load_kernels("tilejit"), kernel)
    src = tilejit.ASTSource(fn, {**sig, **{n: "constexpr" for n in constexprs}}, constexprs=constexprs)
    return tilejit.compile(src, target="cuda:90", options=options).asm["llir"]


def _resources(ptx: str, tmp_path) -> dict:
    import subprocess
    tool = ptxas()
    if tool is None:
        pytest.skip("ptxas not installed (pip install nvidia-cuda-nvcc)")
    (tmp_path / "k.ptx").write_text(ptx)
    out = subprocess.run([tool, "-v", "-arch=sm_90a", str(tmp_path / "k.ptx"), "-o", str(tmp_path / "k.cubin")],
                         capture_output=True, text=True, check=True)
    return next(iter(toolchain.parse_resource_usage(out.stdout + out.stderr).values()))


@needs_llvm22
@pytest.mark.parametrize("name", ["matmul", "attention"])
def test_no_worse_ptx_without_the_poison_reuse_check(name, tmp_path, monkeypatch):
    llir = _llir(name, tmp_path)
    fast = toolchain.llir_to_ptx(llir, 90)
    _without(monkeypatch, "-enable-poison-reuse-guard")
    checked = toolchain.llir_to_ptx(llir, 90)
    (fast_ops, fast_loop), (checked_ops, checked_loop) = _opcodes(fast), _opcodes(checked)
    assert sum(fast_loop.values()) > 100 and sum(fast_ops.values()) <= sum(checked_ops.values())
    assert all(fast_loop[op] <= n for op, n in checked_loop.items()) and set(fast_loop) <= set(checked_loop)
    fast_res, checked_res = _resources(fast, tmp_path), _resources(checked, tmp_path)
    assert fast_res["registers"] <= checked_res["registers"]
    assert fast_res["spill_stores"] <= checked_res["spill_stores"]


@pytest.mark.parametrize("lsr", [True, False])
def test_the_options_are_back_after_emission(monkeypatch, lsr):
    calls = []
    monkeypatch.setattr(llvm_setup.llvm, "set_option", lambda name, option: calls.append(option))
    during = [d for d, _ in llvm_setup._codegen_options(lsr)]
    after = [a for _, a in llvm_setup._codegen_options(lsr)]
    assert ("-disable-lsr=true" in during) == (not lsr)
    with llvm_setup.nvptx_codegen_options(loop_strength_reduction=lsr):
        assert calls == during
    assert calls == during + after


def _emission_options(monkeypatch, llir: str) -> list:
    calls = []
    real = llvm_setup.llvm.set_option
    monkeypatch.setattr(llvm_setup.llvm, "set_option", lambda name, option: (calls.append(option), real(name, option)))
    toolchain.llir_to_ptx(llir, 90)
    monkeypatch.setattr(llvm_setup.llvm, "set_option", real)
    return calls


def test_loop_strength_reduction_is_off_only_for_kernels_reading_through_copies(tmp_path, monkeypatch):
    assert "-disable-lsr=true" in _emission_options(monkeypatch, _wgmma_matmul_llir(tmp_path))
    assert "-disable-lsr=true" not in _emission_options(monkeypatch, _llir("cumsum", tmp_path))
    assert "-disable-lsr=true" not in _emission_options(monkeypatch, _llir("attention", tmp_path))


def test_register_staged_loads_keep_loop_strength_reduction(tmp_path, monkeypatch):
    # bench/gpu.py's 3000x2000x1500 matmul: A's rows (1500 halves) are not 16-byte aligned, so A is
    # read into registers (36 pointers a thread with B's copies); without LSR ptxas spilled 568 bytes
    llir = _wgmma_matmul_llir(tmp_path, block_n=128, unaligned=("M", "K", "stride_am"))
    assert "cp.async" in llir and "ld.global" in llir
    assert "-disable-lsr=true" not in _emission_options(monkeypatch, llir)
    resources = _resources(toolchain.llir_to_ptx(llir, 90), tmp_path)
    assert resources["spill_stores"] == 0


def _wgmma_matmul_llir(tmp_path, block_n=256, unaligned=()) -> str:
    """bench/gpu.py's fp16 matmul (128 x `block_n` tile): unit strides known, so a cp.async + wgmma
    pipeline; the arguments in `unaligned` are not known to be multiples of 16."""
    from common import load_kernels
    os.environ["TILEJIT_CACHE_DIR"] = str(tmp_path / f"wgmma{block_n}{len(unaligned)}")
    names = ["a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn",
             "stride_cm", "stride_cn"]
    sig = {n: ("*fp16" if n.endswith("ptr") else "i32") for n in names}
    constexprs = dict(stride_ak=1, stride_bn=1, stride_cn=1, BLOCK_M=128, BLOCK_N=block_n, BLOCK_K=64, GROUP_M=8)
    sig.update({n: "constexpr" for n in constexprs})
    attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(names) if n not in constexprs and n not in unaligned}
    src = tilejit.ASTSource(load_kernels("tilejit").matmul_kernel, sig, constexprs=constexprs, attrs=attrs)
    return tilejit.compile(src, target="cuda:90", options=dict(num_warps=8, num_stages=3)).asm["llir"]


def _copy_address_offsets(ptx: str) -> int:
    """How many loop-carried offsets the main loop's cp.async addresses use, when every address is
    one sum, formed in the loop, of a pointer from before the loop and such an offset (a register the
    loop only adds to) and the loop moves no pointer; else an AssertionError."""
    loop = ptx[ptx.index("$L__BB0_2:"):ptx.index("$L__BB0_3:")]
    assert "mov.b64" not in loop
    sums = {dst: (a, b) for dst, a, b in re.findall(r"add\.s64\s+(%rd\d+), (%rd\d+), (%?\w+);", loop)}
    addresses = re.findall(r"cp\.async\.cg\.shared\.global \[%r\d+\], \[(%rd\d+)\]", loop)
    assert len(addresses) == 12
    offsets = set()
    for address in addresses:
        base, offset = sums[address]
        if base in sums:
            base, offset = offset, base
        assert base not in sums and sums[offset][0] == offset   # invariant + self-advancing
        offsets.add(offset)
    return len(offsets)


def test_pipelined_copies_read_a_base_plus_one_offset_a_tile(tmp_path, monkeypatch):
    llir = _wgmma_matmul_llir(tmp_path)
    assert _copy_address_offsets(toolchain.llir_to_ptx(llir, 90)) == 2   # A's and B's
    _without(monkeypatch, "-disable-lsr")   # LLVM's loop strength reduction carries one per row of A
    assert _copy_address_offsets(toolchain.llir_to_ptx(llir, 90)) > 2


def test_pipelined_copies_advance_their_pointers_under_a_two_cta_register_cap(tmp_path):
    # the 128x128 tile's ring fits twice in shared memory, so the kernel asks for two CTAs an SM
    # (128 registers a thread): the pointers advance in place, no base and offset beside them
    ptx = toolchain.llir_to_ptx(_wgmma_matmul_llir(tmp_path, block_n=128), 90)
    assert ".minnctapersm 2" in ptx
    loop = ptx[ptx.index("$L__BB0_2:"):ptx.index("$L__BB0_3:")]
    addresses = re.findall(r"cp\.async\.cg\.shared\.global \[%r\d+\], \[(%rd\d+)\]", loop)
    assert len(addresses) == 8 and "mov.b64" not in loop
    for address in addresses:
        assert re.search(rf"add\.s64\s+{address}, {address}, ", loop), address
