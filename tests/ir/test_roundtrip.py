"""print -> parse -> print gives the same text, for a module that uses every op of the catalog."""
from tilejit import ir
from tilejit.ir import ops as catalog

T = ir.TensorType
F32x4, I32x4, I1x4 = T((4,), ir.f32), T((4,), ir.i32), T((4,), ir.i1)
PTRx4 = T((4,), ir.PointerType(ir.f32))


def _unary_region_block(b_types, terminator, results_from):
    """A region with one block of `b_types` arguments ending in `terminator(args...)`."""
    block = ir.Block(b_types)
    inner = ir.Builder(block)
    inner.create(terminator, results_from(inner, block.args))
    return ir.Region([block])


def build_every_op():
    """One kernel that uses each op in `ir.OPS` at least once (with locations on some)."""
    ptr = ir.PointerType(ir.f32)
    f = ir.make_func("every_op", [ptr, ir.i32, ir.f32, ir.PointerType(ir.i32)], [],
                     arg_attrs=[{"tt.divisibility": 16}, {}, {}, {}],
                     loc=ir.Location("k.py", 1, 0))
    p, n, x, ip = f.regions[0].blocks[0].args
    b = ir.Builder(f.regions[0].blocks[0], loc=ir.Location("k.py", 2, 4))
    c = b.create1
    rng = c("tt.make_range", [], I32x4, {"start": 0, "end": 4})
    xs = c("tt.splat", [x], F32x4)
    ns = c("arith.constant", [], I32x4, {"value": ir.DenseAttr([1, 2, 3, 4])})
    for name in catalog.INT_BINARY.split() + catalog.INT_COMMUTATIVE.split():
        c(name, [rng, ns], I32x4)
    for name in catalog.FLOAT_BINARY.split() + catalog.FLOAT_COMMUTATIVE.split():
        c(name, [xs, xs], F32x4)
    for name in catalog.FLOAT_UNARY.split():
        c(name, [xs], F32x4)
    c("math.absi", [rng], I32x4)
    c("math.fma", [xs, xs, xs], F32x4)
    c("tt.mulhiui", [rng, ns], I32x4)
    c("tt.clampf", [xs, xs, xs], F32x4, {"propagate_nan": "none"})
    mask = c("arith.cmpi", [rng, ns], I1x4, {"predicate": "slt"})
    c("arith.cmpf", [xs, xs], I1x4, {"predicate": "olt"})
    c("arith.select", [mask, xs, xs], F32x4)
    i8s, i64s = T((4,), ir.i8), T((4,), ir.i64)
    f16s = T((4,), ir.f16)
    c("arith.extsi", [rng], i64s)
    c("arith.extui", [rng], i64s)
    c("arith.trunci", [rng], i8s)
    half = c("arith.truncf", [xs], f16s, {"rounding": "rtne"})
    c("arith.extf", [half], F32x4)
    c("arith.sitofp", [rng], F32x4)
    c("arith.uitofp", [rng], F32x4)
    c("arith.fptosi", [xs], I32x4)
    c("arith.fptoui", [xs], I32x4)
    c("arith.bitcast", [xs], I32x4)
    c("tt.fp_to_fp", [xs], f16s, {"rounding": "rtne"})
    ptrs = c("tt.splat", [p], PTRx4)
    ptrs = c("tt.addptr", [ptrs, rng], PTRx4)
    c("tt.bitcast", [ptrs], T((4,), ir.PointerType(ir.i32)))
    as_int = c("tt.ptr_to_int", [ptrs], i64s)
    c("tt.int_to_ptr", [as_int], PTRx4)
    c("tt.get_program_id", [], ir.i32, {"axis": 0})
    c("tt.get_num_programs", [], ir.i32, {"axis": 1})
    col = c("tt.expand_dims", [xs], T((4, 1), ir.f32), {"axis": 1})
    wide = c("tt.broadcast", [col], T((4, 4), ir.f32))
    c("tt.reshape", [wide], T((16,), ir.f32), {"allow_reorder": False})
    c("tt.trans", [wide], T((4, 4), ir.f32), {"order": [1, 0]})
    pair = c("tt.join", [xs, xs], T((4, 2), ir.f32))
    b.create("tt.split", [pair], [F32x4, F32x4])
    c("tt.cat", [xs, xs], T((8,), ir.f32))
    c("tt.dot", [wide, wide, wide], T((4, 4), ir.f32), {"input_precision": "ieee", "max_num_imprecise_acc": 0})
    c("tt.histogram", [rng], T((8,), ir.i32))
    c("tt.gather", [xs, rng], F32x4, {"axis": 0})
    loaded = c("tt.load", [ptrs, mask, xs], F32x4, {"cache": "", "evict": "", "is_volatile": False})
    b.create("tt.store", [ptrs, loaded, mask])
    b.create("tt.atomic_rmw", [ptrs, loaded, mask], [F32x4], {"atomic_rmw_op": "fadd", "sem": "acq_rel", "scope": "gpu"})
    b.create("tt.atomic_cas", [ip, n, n], [ir.i32], {"sem": "relaxed", "scope": "gpu"})
    seen = c("tt.atomic_load", [ptrs, mask], F32x4, {"sem": "acquire", "scope": "gpu"})
    b.create("tt.atomic_store", [ptrs, seen, mask], [], {"sem": "release", "scope": "sys"})
    i64 = c("arith.constant", [], ir.i64, {"value": 64})
    zero = c("arith.constant", [], ir.i32, {"value": 0})
    bp_type = ir.PointerType(T((4, 4), ir.f32))
    bp = c("tt.make_block_ptr", [p, i64, i64, i64, i64, zero, zero], bp_type, {"order": [1, 0]})
    c("tt.advance", [bp, n, n], bp_type)
    desc = c("tt.make_tensor_descriptor", [p, n, n, i64, i64], ir.TensorDescType(T((4, 4), ir.f32)))
    tile = c("tt.descriptor_load", [desc, zero, zero], T((4, 4), ir.f32))
    b.create("tt.descriptor_store", [desc, tile, zero, zero])
    b.create("tt.print", [xs], [], {"prefix": "x: ", "hex": False, "is_signed": [1]})
    b.create("tt.assert", [mask], [], {"message": "bad \"x\""})
    b.create("tt.assume", [b.create1("arith.cmpi", [n, zero], ir.i1, {"predicate": "sge"})])
    b.create("gpu.barrier")
    b.create("tt.elementwise_inline_asm", [xs, xs], [T((4,), ir.i32), F32x4],
             {"asm_string": "sub.u32 $0, $2, $3;\n\tmov.b32 $1, \"$2\";", "constraints": "=r,=r,r,r",
              "pure": True, "packed_element": 1})
    reduce_region = _unary_region_block([ir.f32, ir.f32], "tt.reduce.return",
                                        lambda ib, a: [ib.create1("arith.addf", a, ir.f32)])
    b.create("tt.reduce", [xs], [ir.f32], {"axis": 0}, [reduce_region])
    scan_region = _unary_region_block([ir.f32, ir.f32], "tt.scan.return",
                                      lambda ib, a: [ib.create1("arith.maxnumf", a, ir.f32)])
    b.create("tt.scan", [xs], [F32x4], {"axis": 0, "reverse": False}, [scan_region])
    for_region = _unary_region_block([ir.i32, ir.f32], "scf.yield", lambda ib, a: [a[1]])
    one = c("arith.constant", [], ir.i32, {"value": 1})
    b.create("scf.for", [zero, n, one, x], [ir.f32], {"tt.loop_unroll_factor": 2}, [for_region])
    then = _unary_region_block([], "scf.yield", lambda ib, a: [x])
    other = _unary_region_block([], "scf.yield", lambda ib, a: [ib.create1("arith.negf", [x], ir.f32)])
    cond = c("arith.cmpi", [n, zero], ir.i1, {"predicate": "eq"})
    b.create("scf.if", [cond], [ir.f32], None, [then, other])
    b.create("scf.if", [cond], [], None, [_unary_region_block([], "scf.yield", lambda ib, a: []), ir.Region()])
    before = _unary_region_block([ir.i32], "scf.condition",
                                 lambda ib, a: [ib.create1("arith.cmpi", [a[0], n], ir.i1, {"predicate": "slt"}), a[0]])
    after = _unary_region_block([ir.i32], "scf.yield", lambda ib, a: [ib.create1("arith.addi", [a[0], one], ir.i32)])
    b.create("scf.while", [zero], [ir.i32], None, [before, after])
    b.create("tt.call", [n], [ir.i32], {"callee": "helper"})
    b.create("tt.return", [])
    helper = ir.make_func("helper", [ir.i32], [ir.i32], public=False, noinline=True)
    hb = ir.Builder(helper.regions[0].blocks[0])
    hb.create("tt.return", [helper.regions[0].blocks[0].args[0]])
    return ir.Module([f, helper])


def test_module_covers_the_whole_catalog():
    # TTGIR ops (`ttg.*`) are registered by the GPU lowering when it is imported and tested there.
    used = {op.name for op in build_every_op().walk()}
    ttir_ops = {name for name in ir.OPS if not name.startswith("ttg.")}
    assert ttir_ops <= used, sorted(ttir_ops - used)


def test_every_op_round_trips_and_verifies():
    module = build_every_op()
    ir.verify(module)
    text = ir.print_module(module)
    again = ir.parse_module(text)
    ir.verify(again)
    assert ir.print_module(again) == text
    assert 'loc("k.py":2:4)' in text and "tt.divisibility = 16 : i32" in text


def test_special_attribute_values_round_trip():
    f = ir.make_func("consts", [], [])
    b = ir.Builder(f.regions[0].blocks[0])
    for value, ty in [(float("nan"), ir.f32), (float("-inf"), ir.f32), (-0.0, ir.f32), (1e-30, ir.f64),
                      (True, ir.i1), (-(2**63), ir.i64), (ir.DenseAttr([1.5, -2.0]), T((2,), ir.f16))]:
        b.constant(value, ty)
    b.create("tt.return", [], attrs={"note": "quote \" and \\ backslash", "empty": [], "nested": [[1], ["a"]]})
    text = ir.print_module(ir.Module([f]))
    assert ir.print_module(ir.parse_module(text)) == text
