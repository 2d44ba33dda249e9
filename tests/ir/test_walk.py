"""`Operation.walk` (pre-order, lazy, each block's ops listed when the walk reaches the block) against
the plain recursive walk it replaced, including what a caller may change while it walks."""
from tilejit import ir


def reference_walk(op):
    """The recursive generator `walk` was: one generator per op."""
    yield op
    for region in op.regions:
        for block in region.blocks:
            for inner in list(block.ops):
                yield from reference_walk(inner)


def nested_func():
    """func { c0; for { c1; if { c2 } { c3 }; c4 }; c5 }"""
    f = ir.make_func("k", [ir.i32], [])
    n = f.regions[0].blocks[0].args[0]
    b = ir.Builder(f.regions[0].blocks[0])
    b.create1("arith.constant", [], ir.i32, {"value": 0})
    body = ir.Block([ir.i32])
    inner = ir.Builder(body)
    inner.create1("arith.constant", [], ir.i32, {"value": 1})
    cond = inner.create1("arith.cmpi", [body.args[0], n], ir.i1, {"predicate": "slt"})
    then_block, else_block = ir.Block(), ir.Block()
    ir.Builder(then_block).create1("arith.constant", [], ir.i32, {"value": 2})
    ir.Builder(then_block).create("scf.yield", [])
    ir.Builder(else_block).create1("arith.constant", [], ir.i32, {"value": 3})
    ir.Builder(else_block).create("scf.yield", [])
    inner.create("scf.if", [cond], [], regions=[ir.Region([then_block]), ir.Region([else_block])])
    inner.create1("arith.constant", [], ir.i32, {"value": 4})
    inner.create("scf.yield", [])
    b.create("scf.for", [n, n, n], [], regions=[ir.Region([body])])
    b.create1("arith.constant", [], ir.i32, {"value": 5})
    b.create("tt.return", [])
    return f


def names(ops):
    return [(op.name, op.attrs.get("value")) for op in ops]


def test_walk_is_the_recursive_pre_order():
    f = nested_func()
    assert names(f.walk()) == names(reference_walk(f))
    assert [v for n, v in names(f.walk()) if n == "arith.constant"] == [0, 1, 2, 3, 4, 5]
    module = ir.Module()
    module.body.append(f)
    assert names(module.walk()) == names(reference_walk(f))


def walk_changing(walker, change):
    """(name, value) of each op `walker` yields on a fresh `nested_func`, calling `change(f, op)` on
    each before asking for the next."""
    f = nested_func()
    seen = []
    for op in walker(f):
        seen.append((op.name, op.attrs.get("value")))
        change(f, op)
    return seen


def test_an_op_erased_during_the_walk_is_still_visited_as_before():
    # A block's ops are listed when the walk reaches it: erasing a later op of that block meanwhile
    # does not drop it from the walk, in both versions.
    def erase_last_constant(f, op):
        if op.attrs.get("value") == 0:
            [o for o in f.regions[0].blocks[0].ops if o.attrs.get("value") == 5][0].erase()

    assert walk_changing(lambda f: f.walk(), erase_last_constant) == \
        walk_changing(reference_walk, erase_last_constant)


def test_regions_are_read_after_the_caller_saw_the_op():
    # Both walks look at an op's regions only when the caller asks for the next op, so a block added
    # to a region the walk has not entered yet is walked.
    def add_block_to_loop(f, op):
        if op.name == "scf.for":
            extra = ir.Block()
            ir.Builder(extra).create1("arith.constant", [], ir.i32, {"value": 9})
            op.regions[0].add_block(extra)

    walked = walk_changing(lambda f: f.walk(), add_block_to_loop)
    assert walked == walk_changing(reference_walk, add_block_to_loop)
    assert ("arith.constant", 9) in walked
