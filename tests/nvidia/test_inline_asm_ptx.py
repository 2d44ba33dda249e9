"""`tl.inline_asm_elementwise` cross-compiled for sm_90 without a GPU: the user's PTX lands in the
kernel with the operands Triton's operand order gives it, and ptxas accepts the registers the lowering
passes (a wrong width or type is an assembler error). The values are checked on a GPU by
tests/language/test_lang_inline_asm.py."""
import os
import re
import sys

import pytest

from tilejit import compiler
from tilejit.backends import GPUTarget
from tilejit.frontend.source import ASTSource
from toolchain_paths import filecheck, needs_ptxas

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "language"))
import inline_asm_kernels as K  # noqa: E402

CASES = {
    "funnel": (K.funnel_shift_kernel, {"X": "*u32", "Y": "*u32", "Z": "*i32"}, {"n": 17, "BLOCK": 128}),
    "bytes": (K.packed_bytes_kernel, {"X": "*i8", "Y": "*i8"}, {"BLOCK": 512}),
    "bytes_padded": (K.packed_bytes_kernel, {"X": "*i8", "Y": "*i8"}, {"BLOCK": 64}),
    "pointers": (K.through_pointers_kernel, {"X": "*i8", "Y": "*i8"}, {"BLOCK": 128}),
    "two_outputs": (K.two_outputs_kernel, {"A": "*u32", "B": "*u32", "C": "*u32", "D": "*u32"}, {"BLOCK": 128}),
    "packed_two_outputs": (K.packed_two_outputs_kernel, {"A": "*u8", "B": "*fp32", "C": "*i32", "D": "*fp32"},
                           {"BLOCK": 512}),
    "half_pairs": (K.half_pairs_kernel, {"X": "*fp16", "Y": "*fp16"}, {"BLOCK": 256}),
    "float_in_r": (K.float_in_int_register_kernel, {"X": "*fp32", "Y": "*fp32"}, {"BLOCK": 256}),
    "special_registers": (K.special_registers_kernel, {"Out": "*fp32", "Elapsed": "*i64", "Sm": "*i32"}, {"N": 10}),
}


def _compile(name):
    fn, sig, constants = CASES[name]
    signature = dict(sig, **{k: "constexpr" for k in constants})
    return compiler.compile(ASTSource(fn, signature, constants), target=GPUTarget.parse("cuda:90"))


@pytest.fixture(autouse=True)
def _fresh(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))
    compiler.clear_memory_cache()


@needs_ptxas
@pytest.mark.parametrize("name", sorted(CASES))
def test_assembles_for_sm90(name):
    kernel = _compile(name)
    assert kernel.asm["cubin"][:4] == b"\x7fELF"


def test_ttgir_results_share_the_arguments_layout():
    kernel = _compile_to_ttgir("packed_two_outputs")
    # both results of the one asm op come in one layout, and its arguments are converted into it
    m = re.search(r"(%\S+), (%\S+) = tt\.elementwise_inline_asm (%\S+), (%\S+) \{(.*)\} : \((.*)\) -> \((.*)\)",
                  kernel)
    assert m, kernel
    arg_types, result_types = m.group(6), m.group(7)
    layouts = set(re.findall(r"#ttg\.blocked<[^>]*>", arg_types + result_types))
    assert len(layouts) == 1, (arg_types, result_types)
    filecheck(kernel, """
CHECK: tt.elementwise_inline_asm
CHECK-SAME: pure = true
CHECK-SAME: packed_element = 4
""")


def _compile_to_ttgir(name):
    kernel = _compile(name) if _has_ptxas() else None
    if kernel is not None:
        return kernel.asm["ttgir"]
    pytest.skip("needs ptxas for the whole compile")


def _has_ptxas():
    from tilejit_nvidia import toolchain
    return toolchain.find_ptxas_or_none() is not None


def test_operand_packing_in_the_llvm_ir():
    """pack=4 of int8: one i32 register per group, four bytes side by side; fp32 args one each."""
    if not _has_ptxas():
        pytest.skip("needs ptxas for the whole compile")
    llir = _compile("packed_two_outputs").asm["llir"]
    calls = re.findall(r"call \{(.*?)\} asm", llir)
    assert calls and all(c.split(", ") == ["i32"] * 8 for c in calls), calls
    inputs = re.findall(r'asm +"[^"]*", "[^"]*"\(([^)]*)\)', llir)
    assert inputs and all(len(i.split(",")) == 5 for i in inputs)


def test_unused_impure_assembly_is_kept():
    if not _has_ptxas():
        pytest.skip("needs ptxas for the whole compile")
    ptx = _compile("pointers").asm["ptx"]
    assert "st.global.b8" in ptx and "ld.global.b8" in ptx


import tilejit  # noqa: E402
import tilejit.language as tl  # noqa: E402


@tilejit.jit
def _quoted_comment_kernel(X, Y, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    y = tl.inline_asm_elementwise('add.s32 $0, $1, 1; // a "quoted" comment with a \\ in it', "=r,r",
                                  [tl.load(X + offs)], dtype=tl.int32, is_pure=True, pack=1)
    tl.store(Y + offs, y)


def test_quotes_and_backslashes_reach_the_assembler_intact():
    if not _has_ptxas():
        pytest.skip("needs ptxas for the whole compile")
    src = ASTSource(_quoted_comment_kernel, {"X": "*i32", "Y": "*i32", "BLOCK": "constexpr"}, {"BLOCK": 128})
    ptx = compiler.compile(src, target=GPUTarget.parse("cuda:90")).asm["ptx"]
    assert 'add.s32' in ptx and '// a "quoted" comment with a \\ in it' in ptx
