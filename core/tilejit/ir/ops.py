"""The op definitions: what every TTIR and TTGIR op is, in one table (no other module adds to it).

The names and operand conventions follow Triton's TTIR. Passes use the traits (a `pure` op may be
removed when unused and merged with an identical one; a `commutative` op's operands may be
reordered), the verifier uses the shape rules, and every backend must implement every op listed.

Operand conventions where they are not obvious:
- `tt.load`  ptr [, mask [, other]]   attrs: cache, evict, is_volatile, boundary_check, padding
- `tt.store` ptr, value [, mask]      attrs: cache, evict, boundary_check
- `tt.atomic_rmw` ptr, value [, mask] attrs: atomic_rmw_op (add fadd max umax min umin and or xor
  xchg), sem (relaxed acquire release acq_rel), scope (gpu cta sys)
- `tt.atomic_cas` ptr, cmp, value     attrs: sem, scope
- `tt.atomic_load` ptr, mask  attrs: sem (acquire relaxed), scope; `tt.atomic_store` ptr, value, mask
  attrs: sem (release relaxed), scope
- `tt.make_block_ptr` base, shape×N (i64), strides×N (i64), offsets×N (i32)  attrs: order
- `tt.advance` block_ptr, offsets×N (i32)
- `tt.make_tensor_descriptor` base, shape×N (i32), strides×N (i64); result !tt.tensordesc<block>;
  attrs padding ("nan": loads read NaN outside the tensor; absent: zero)
- `tt.descriptor_load` desc, offsets×N (i32);  `tt.descriptor_store` desc, value, offsets×N
- `tt.reduce` / `tt.scan` operands×K, attrs axis (and reverse for scan); one region whose block has
  2K scalar arguments (accumulators then new values) ending in `tt.reduce.return` / `tt.scan.return`
- `tt.dot` a, b, c  attrs: inputPrecision (tf32 tf32x3 ieee bf16x3 bf16x6), maxNumImpreciseAcc
- `scf.for` lb, ub, step, inits×K; region block args (iv, iter args×K); results×K
- `scf.if` cond; regions then, else (else has no block when there are no results and no else)
- `scf.while` inits×K; regions before (ends in scf.condition(cond, args...)) and after (scf.yield)
- `arith.constant` attrs value (a scalar, splatted over a tensor result, or a DenseAttr)
- `arith.cmpi` predicate: eq ne slt sle sgt sge ult ule ugt uge; `arith.cmpf` predicate: oeq one olt
  ole ogt oge ord ueq une ult ule ugt uge uno
- float conversions `arith.extf` / `arith.truncf` take an optional attr rounding (rtne, rtz)
- `tt.histogram` x [, mask]: the result's length is the number of bins
- `tt.print` values×K attrs prefix, hex, is_signed; `tt.assert` cond attrs message
- `tt.elementwise_inline_asm` args×K (broadcast to the results' shape) attrs asm_string, constraints,
  pure, packed_element; one result per output dtype (a scalar op when there are no args). Not pure as
  an op (never merged or hoisted); DCE drops an unused one only when its `pure` attr says so
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Dict, Optional, Tuple


@dataclass(frozen=True)
class OpInfo:
    """An op's definition: its traits and, where fixed, its named operands.

    `operands` names the operands in order: `name` exactly one, `name?` an optional trailing one,
    `name*` any number (the rest). None: the op takes any operands (calls, returns, yields)."""
    pure: bool = True            # no side effect: removable when unused, mergeable by CSE
    commutative: bool = False
    terminator: bool = False
    elementwise: bool = False    # operands and results share one shape
    has_regions: bool = False
    operands: Optional[Tuple[str, ...]] = None

    def operand_slices(self, count: int) -> Optional[Dict[str, slice]]:
        """name -> slice of the operand list for an op with `count` operands; None if it does not fit."""
        return _slices(self.operands, count) if self.operands is not None else {}


@lru_cache(maxsize=None)
def _slices(spec: Tuple[str, ...], count: int) -> Optional[Dict[str, slice]]:
    required = sum(1 for n in spec if not n.endswith(("?", "*")))
    if count < required or (count > len(spec) and not any(n.endswith("*") for n in spec)):
        return None
    out, pos, left_optional = {}, 0, count - required
    for n in spec:
        if n.endswith("*"):
            rest = count - pos - sum(1 for m in spec[spec.index(n) + 1:] if not m.endswith(("?", "*")))
            out[n[:-1]] = slice(pos, pos + rest)
            pos += rest
        elif n.endswith("?"):
            take = 1 if left_optional > 0 and pos < count else 0
            left_optional -= take
            out[n[:-1]] = slice(pos, pos + take)
            pos += take
        else:
            out[n] = slice(pos, pos + 1)
            pos += 1
    return out if pos == count else None


OPS: dict = {}


def _register(names, operands=None, **traits) -> None:
    spec = tuple(operands.split()) if isinstance(operands, str) else operands
    for n in names.split():
        OPS[n] = OpInfo(operands=spec, **traits)


INT_BINARY = "arith.subi arith.divsi arith.divui arith.remsi arith.remui arith.shli arith.shrsi arith.shrui"
INT_COMMUTATIVE = "arith.addi arith.muli arith.andi arith.ori arith.xori arith.maxsi arith.minsi arith.maxui arith.minui"
FLOAT_BINARY = "arith.subf arith.divf arith.remf tt.precise_divf math.powf math.atan2 math.copysign"
FLOAT_COMMUTATIVE = "arith.addf arith.mulf arith.maxnumf arith.minnumf arith.maximumf arith.minimumf"
FLOAT_UNARY = ("arith.negf math.exp math.exp2 math.log math.log2 math.log10 math.log1p math.expm1 math.sqrt "
               "math.rsqrt math.sin math.cos math.tan math.tanh math.sinh math.cosh math.asin math.acos "
               "math.atan math.absf math.floor math.ceil math.trunc math.round math.erf math.cbrt "
               "tt.precise_sqrt")
CASTS = ("arith.extsi arith.extui arith.trunci arith.extf arith.truncf arith.sitofp arith.uitofp "
         "arith.fptosi arith.fptoui arith.bitcast tt.bitcast tt.int_to_ptr tt.ptr_to_int tt.fp_to_fp")

_register(INT_BINARY + " " + FLOAT_BINARY, "lhs rhs", elementwise=True)
_register(INT_COMMUTATIVE + " " + FLOAT_COMMUTATIVE, "lhs rhs", elementwise=True, commutative=True)
_register(FLOAT_UNARY + " math.absi " + CASTS, "src", elementwise=True)
_register("math.fma", "a b c", elementwise=True)
_register("tt.mulhiui", "lhs rhs", elementwise=True)
_register("tt.clampf", "x min max", elementwise=True)
_register("arith.select", "condition true_value false_value", elementwise=True)
_register("arith.cmpi arith.cmpf", "lhs rhs", elementwise=True)
_register("arith.constant tt.get_program_id tt.get_num_programs tt.make_range", ())
_register("tt.splat tt.broadcast tt.expand_dims tt.reshape tt.trans", "src")
_register("tt.split", "src")
_register("tt.join tt.cat", "lhs rhs")
_register("tt.addptr", "ptr offset")
_register("tt.dot", "a b c")
_register("tt.make_block_ptr", "base rest*")      # shape×N, strides×N, offsets×N
_register("tt.advance", "ptr offsets*")
_register("tt.make_tensor_descriptor", "base rest*")   # shape×N, strides×N
_register("tt.histogram", "src mask?")
_register("tt.gather", "src indices")
_register("tt.reduce tt.scan", "srcs*", has_regions=True)
_register("tt.load", "ptr mask? other?", pure=False)  # DCE treats non-volatile loads as removable
_register("tt.store", "ptr value mask?", pure=False)
_register("tt.atomic_rmw", "ptr value mask?", pure=False)
_register("tt.atomic_cas", "ptr cmp value", pure=False)
_register("tt.atomic_load", "ptr mask", pure=False)
_register("tt.atomic_store", "ptr value mask", pure=False)
_register("tt.descriptor_store", "desc value offsets*", pure=False)
_register("tt.descriptor_load", "desc offsets*", pure=False)
_register("tt.print", "values*", pure=False)
_register("tt.elementwise_inline_asm", "args*", pure=False)
_register("tt.assert", "condition", pure=False)
_register("tt.assume", "condition", pure=False)
_register("gpu.barrier", (), pure=False)
_register("tt.call", None, pure=False)
_register("scf.for", "lower upper step inits*", pure=False, has_regions=True)
_register("scf.if", "condition", pure=False, has_regions=True)
_register("scf.while", "inits*", pure=False, has_regions=True)
_register("scf.condition", "condition args*", pure=False, terminator=True)
_register("tt.return scf.yield tt.reduce.return tt.scan.return", None, pure=False, terminator=True)
_register("tt.func", (), pure=False, has_regions=True)
# TTGIR (the GPU layouts, gpu/layouts.py): the same value in another layout.
_register("ttg.convert_layout", "src")


# Ops whose pointer result points into the memory their first operand points into (the same kernel
# argument's buffer): what the interpreter's memory checks and NVIDIA's pipeliner trace a pointer
# back through to the argument it was computed from.
POINTER_PASSTHROUGH = frozenset({
    "tt.addptr", "tt.splat", "tt.broadcast", "tt.expand_dims", "tt.reshape", "tt.trans", "tt.advance",
    "tt.make_block_ptr", "tt.make_tensor_descriptor", "tt.bitcast", "tt.gather", "ttg.convert_layout"})

_UNKNOWN_OP = OpInfo(pure=False)


def info(name: str) -> OpInfo:
    """Traits of an op; an unknown op is treated conservatively (impure, no traits)."""
    found = OPS.get(name)
    return _UNKNOWN_OP if found is None else found


def is_removable_if_unused(op) -> bool:
    """May DCE delete this op when its results are unused?"""
    if op.name in ("tt.load", "tt.descriptor_load"):
        # A non-volatile load has no effect besides its value (an out-of-bounds access is UB on a GPU).
        return not op.attrs.get("is_volatile", False)
    if op.name == "tt.elementwise_inline_asm":
        return bool(op.attrs.get("pure", False))
    return info(op.name).pure
