"""The op registry: what every TTIR op is, in one table.

The names and operand conventions follow Triton's TTIR. Passes use the traits (a `pure` op may be
removed when unused and merged with an identical one; a `commutative` op's operands may be
reordered), the verifier uses the shape rules, and every backend must implement every op listed.

Operand conventions where they are not obvious:
- `tt.load`  ptr [, mask [, other]]   attrs: cache, evict, is_volatile, boundary_check, padding
- `tt.store` ptr, value [, mask]      attrs: cache, evict, boundary_check
- `tt.atomic_rmw` ptr, value [, mask] attrs: atomic_rmw_op (add fadd max umax min umin and or xor
  xchg), sem (relaxed acquire release acq_rel), scope (gpu cta sys)
- `tt.atomic_cas` ptr, cmp, value     attrs: sem, scope
- `tt.make_block_ptr` base, shape×N (i64), strides×N (i64), offsets×N (i32)  attrs: order
- `tt.advance` block_ptr, offsets×N (i32)
- `tt.make_tensor_descriptor` base, shape×N (i32), strides×N (i64); result !tt.tensordesc<block>
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
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OpInfo:
    pure: bool = True            # no side effect: removable when unused, mergeable by CSE
    commutative: bool = False
    terminator: bool = False
    elementwise: bool = False    # operands and results share one shape
    has_regions: bool = False


OPS: dict = {}


def _register(names, **traits) -> None:
    for n in names.split():
        OPS[n] = OpInfo(**traits)


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

_register(INT_BINARY + " " + FLOAT_BINARY, elementwise=True)
_register(INT_COMMUTATIVE + " " + FLOAT_COMMUTATIVE, elementwise=True, commutative=True)
_register(FLOAT_UNARY + " math.absi math.fma tt.mulhiui tt.clampf arith.select " + CASTS, elementwise=True)
_register("arith.cmpi arith.cmpf", elementwise=True)
_register("arith.constant tt.get_program_id tt.get_num_programs tt.make_range tt.splat tt.broadcast "
          "tt.expand_dims tt.reshape tt.trans tt.join tt.split tt.cat tt.addptr tt.dot tt.make_block_ptr "
          "tt.advance tt.make_tensor_descriptor tt.histogram tt.gather")
_register("tt.reduce tt.scan", has_regions=True)
_register("tt.load", pure=False)  # volatile or faulting loads must stay; DCE treats non-volatile loads as removable
_register("tt.store tt.atomic_rmw tt.atomic_cas tt.descriptor_store tt.print tt.assert tt.assume gpu.barrier "
          "tt.call", pure=False)
_register("tt.descriptor_load", pure=False)
_register("scf.for scf.if scf.while", pure=False, has_regions=True)
_register("tt.return scf.yield scf.condition tt.reduce.return tt.scan.return", pure=False, terminator=True)
_register("tt.func", pure=False, has_regions=True)


def info(name: str) -> OpInfo:
    """Traits of an op; an unknown op is treated conservatively (impure, no traits)."""
    return OPS.get(name, OpInfo(pure=False))


def is_removable_if_unused(op) -> bool:
    """May DCE delete this op when its results are unused?"""
    if op.name in ("tt.load", "tt.descriptor_load"):
        # A non-volatile load has no effect besides its value (an out-of-bounds access is UB on a GPU).
        return not op.attrs.get("is_volatile", False)
    return info(op.name).pure
