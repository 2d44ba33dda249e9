"""The dialect context and the op definitions: IR parses on its own, operands have names, and the
parser and verifier reject ops that do not fit their definition."""
import os
import subprocess
import sys

import pytest

from tilejit import ir
from tilejit.errors import CompilationError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
# TTGIR written by the compiler (bench/kernels.py; locations stripped): NVIDIA MMA and AMD MFMA layouts.
FILES = ["cuda_90_attention.ttgir", "hip_gfx942_matmul.ttgir"]


def _read(name):
    with open(os.path.join(DATA, name)) as f:
        return f.read()


TTGIR = _read(FILES[0])


@pytest.mark.parametrize("name", FILES)
def test_ttgir_parses_after_import_tilejit_alone(name):
    """No module has to be imported first for its layouts or ops to be known (a fresh process)."""
    code = ("import sys, tilejit\n"
            "m = tilejit.ir.parse_module(sys.stdin.read())\n"
            "tilejit.ir.verify(m)\n"
            "print(sorted({op.name for op in m.functions[0].walk()}))\n"
            "assert tilejit.ir.print_module(m, with_locations=False) == tilejit.ir.print_module(\n"
            "    tilejit.ir.parse_module(tilejit.ir.print_module(m)), with_locations=False)\n"
            "print([name for name in sys.modules if name.startswith(('tilejit.gpu.llvm', 'tilejit_amd.matrix_core_dot'))])\n")
    # The installed backends (their layouts come through the backend registry, not imports).
    path = [os.path.join(ROOT, "core")] + [os.path.join(ROOT, "backends", b) for b in ("nvidia", "amd", "interpreter")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path + [os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", code], input=_read(name),
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    names, lowering_modules = out.stdout.splitlines()
    assert "'ttg.convert_layout'" in names and "'tt.dot'" in names
    assert lowering_modules == "[]"


def test_named_operands_of_load_store_and_for():
    m = ir.parse_module(TTGIR)
    load = next(op for op in m.functions[0].walk() if op.name == "tt.load")
    assert load.operand("ptr") is load.operands[0]
    assert load.operand("mask") is None and load.operand("other") is None
    with pytest.raises(ValueError, match="no operand 'value'"):
        load.operand("value")
    spec = ir.OPS["scf.for"]
    assert spec.operand_slices(5) == {"lower": slice(0, 1), "upper": slice(1, 2), "step": slice(2, 3),
                                      "inits": slice(3, 5)}
    assert ir.OPS["tt.store"].operand_slices(3)["mask"] == slice(2, 3)
    assert ir.OPS["tt.store"].operand_slices(2)["mask"] == slice(2, 2)
    assert ir.OPS["tt.store"].operand_slices(4) is None
    assert ir.OPS["tt.dot"].operand_slices(2) is None


def test_parser_rejects_unknown_op_and_wrong_operand_count():
    with pytest.raises(CompilationError, match="unknown operation 'tt.frobnicate'"):
        ir.parse_module(TTGIR.replace('ttg.convert_layout %', 'tt.frobnicate %'))
    bad = TTGIR.replace("tt.dot %28, ", "tt.dot %28, %28, ", 1)
    assert bad != TTGIR
    with pytest.raises(CompilationError, match=r"tt.dot takes operands \(a, b, c\), got 4"):
        ir.parse_module(bad)


def test_verifier_checks_operands_against_the_definition():
    m = ir.parse_module(TTGIR)
    load = next(op for op in m.functions[0].walk() if op.name == "tt.load")
    load.add_operand(load.operands[0])
    load.add_operand(load.operands[0])
    load.add_operand(load.operands[0])
    with pytest.raises(CompilationError, match="invalid IR: tt.load: takes operands"):
        ir.verify(m)


def test_context_without_gpu_layouts_rejects_them():
    plain = ir.DialectContext(ir.OPS, {})
    with pytest.raises(CompilationError, match="unknown layout #ttg."):
        ir.parse_module(TTGIR, context=plain)
