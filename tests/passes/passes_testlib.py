"""Helpers for the pass tests: FileCheck on printed IR, and a small reference evaluator.

The evaluator runs scalar TTIR (integer/float arith, constants, scf.for/if/while, tt.call) on
Python values, so a test can check that a pass leaves what a function returns unchanged. It reuses
nothing from the passes it checks except the per-element arithmetic of `passes.constants`, which
has its own tests against numpy.
"""
from __future__ import annotations

from tilejit import ir
from tilejit.passes import run_passes
from tilejit.passes.constants import fold_scalars
from toolchain_paths import filecheck


def run_text(text: str, passes) -> str:
    """Parse `text`, run `passes` with verification, return the printed result."""
    module = ir.parse_module(text)
    ir.verify(module)
    run_passes(module, passes, dump=False, verify=True)
    return ir.print_module(module)


def check_pass(text: str, passes, checks: str) -> str:
    out = run_text(text, passes)
    filecheck(out, checks)
    return out


def func(body: str, args: str = "%arg0: i32, %arg1: i32", results: str = "i32") -> str:
    """A module with one public function `f` around `body` (a shorthand for the text tests)."""
    return f"module {{\n  tt.func public @f({args}) -> ({results}) {{\n{body}\n  }}\n}}\n"


# -- reference evaluator -------------------------------------------------------------------------
class Evaluator:
    def __init__(self, module: ir.Module):
        self.module = module

    def call(self, name: str, args):
        f = self.module.get(name)
        env = dict(zip(f.regions[0].blocks[0].args, args))
        return self.block(f.regions[0].blocks[0], env)

    def block(self, block, env):
        for op in block.ops:
            if ir.op_info(op.name).terminator:
                return [env[v] for v in op.operands]
            values = self.op(op, env)
            env.update(zip(op.results, values))
        return []

    def op(self, op, env):
        ins = [env[v] for v in op.operands]
        if op.name == "arith.constant":
            from tilejit.passes.constants import constant_of
            return [constant_of(op.result).splat]
        if op.name == "arith.select":
            return [ins[1] if ins[0] else ins[2]]
        if op.name == "scf.if":
            region = op.regions[0] if ins[0] else op.regions[1]
            return self.block(region.blocks[0], env) if region.blocks else []
        if op.name == "scf.for":
            lb, ub, step, carried = ins[0], ins[1], ins[2], ins[3:]
            body = op.regions[0].blocks[0]
            iv = lb
            while iv < ub:
                env.update(zip(body.args, [iv] + carried))
                carried = self.block(body, env)
                iv += step
            return carried
        if op.name == "tt.call":
            return self.call(op.attrs["callee"], ins)
        value = fold_scalars(op.name, ins, [v.type for v in op.operands], op.result.type, op.attrs)
        if value is None:
            raise AssertionError(f"evaluator cannot run {op.name} on {ins}")
        return [value]


def evaluate(text_or_module, args, name: str = "f"):
    module = ir.parse_module(text_or_module) if isinstance(text_or_module, str) else text_or_module
    return Evaluator(module).call(name, list(args))


def assert_preserves(text: str, passes, inputs) -> str:
    """Run `passes` on `text` and check the function returns the same values for every input."""
    out = run_text(text, passes)
    for args in inputs:
        assert evaluate(out, args) == evaluate(text, args), f"{args}: pass changed the result\n{out}"
    return out


CALLS_FOR_PIPELINE = """module {
  tt.func public @f(%arg0: i32, %arg1: i32) -> (i32) {
    %0 = tt.call %arg0, %arg1 {callee = "helper"} : (i32, i32) -> (i32) loc("k.py":3:8)
    %1 = arith.constant {value = 0} : i32
    %2 = arith.addi %0, %1 : (i32, i32) -> (i32)
    tt.return %2 : (i32) -> () loc("k.py":5:4)
  } loc("k.py":1:0)
  tt.func private @helper(%arg0: i32, %arg1: i32) -> (i32) {
    %0 = arith.constant {value = 0} : i32
    %1 = arith.constant {value = 4} : i32
    %2 = arith.constant {value = 1} : i32
    %3 = scf.for %0, %1, %2, %arg0 {tt.loop_unroll_factor = 4} (
      {
      ^bb(%arg2: i32, %arg3: i32):
        %4 = arith.muli %arg3, %arg1 : (i32, i32) -> (i32)
        %5 = arith.addi %4, %arg2 : (i32, i32) -> (i32)
        scf.yield %5 : (i32) -> ()
      }
    ) : (i32, i32, i32, i32) -> (i32)
    tt.return %3 : (i32) -> ()
  } loc("helpers.py":9:0)
}
"""
