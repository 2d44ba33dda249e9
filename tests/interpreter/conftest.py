"""Helpers to run hand-written TTIR on the interpreter without the frontend."""
from __future__ import annotations

import os
import sys
import types

import pytest

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
for _path in (os.path.join(_ROOT, "core"), os.path.join(_ROOT, "backends", "interpreter")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from tilejit import ir  # noqa: E402
from tilejit_interpreter.backend import InterpreterBackend  # noqa: E402


class TTIRKernel:
    """A TTIR text compiled through the backend's own stage and launcher."""

    def __init__(self, text: str, names=None, **options):
        backend = InterpreterBackend("interpreter")
        opts = backend.parse_options(options)
        stages = {}
        backend.add_stages(stages, opts)
        module = ir.parse_module(text, "kernel.ttir")
        func = module.functions[0]
        n = len(func.regions[0].blocks[0].args)
        names = names or [f"arg{i}" for i in range(n)]
        self.metadata = {"name": func.attrs["sym_name"], "signature": {k: "*fp32" for k in names}}
        self.source = stages["py"](module, self.metadata)
        compiled = types.SimpleNamespace(asm={"py": self.source}, metadata=self.metadata,
                                         name=self.metadata["name"])
        self.launcher = backend.make_launcher(compiled)

    def __getitem__(self, grid):
        grid = (grid,) if isinstance(grid, int) else tuple(grid)
        grid = grid + (1,) * (3 - len(grid))
        return lambda *args: self.launcher(grid, args)


@pytest.fixture
def ttir():
    return TTIRKernel


def elementwise(op_name: str, in_elems, out_elem, n: int, attrs=None, programs: int = 1):
    """A kernel applying one op to `n`-element tensors: program p reads inputs k at [p*n, p*n+n)
    and writes the result to the last argument."""
    from tilejit.ir import Builder, PointerType, TensorType, i32, make_func

    arg_types = [PointerType(t) for t in in_elems] + [PointerType(out_elem)]
    func = make_func("op_kernel", arg_types)
    block = func.regions[0].blocks[0]
    b = Builder(block)
    pid = b.create1("tt.get_program_id", [], i32, {"axis": 0})
    width = b.constant(n, i32)
    start = b.create1("arith.muli", [pid, width], i32)
    rng = b.create1("tt.make_range", [], TensorType((n,), i32), {"start": 0, "end": n})
    offs = b.create1("arith.addi", [b.create1("tt.splat", [start], TensorType((n,), i32)), rng],
                     TensorType((n,), i32))

    def pointers(arg):
        elem = arg.type
        splat = b.create1("tt.splat", [arg], TensorType((n,), elem))
        return b.create1("tt.addptr", [splat, offs], TensorType((n,), elem))

    loaded = [b.create1("tt.load", [pointers(a)], TensorType((n,), t))
              for a, t in zip(block.args[:-1], in_elems)]
    result = b.create1(op_name, loaded, TensorType((n,), out_elem), attrs or {})
    b.create("tt.store", [pointers(block.args[-1]), result], [])
    b.create("tt.return", [], [])
    module = ir.Module([func])
    return TTIRKernel(ir.print_module(module))


def run_elementwise(op_name, inputs, out_dtype, in_elems, out_elem, attrs=None):
    import numpy as np

    n = len(inputs[0])
    kernel = elementwise(op_name, in_elems, out_elem, n, attrs)
    out = np.zeros(n, dtype=out_dtype)
    kernel[1](*[np.ascontiguousarray(x) for x in inputs], out)
    return out
