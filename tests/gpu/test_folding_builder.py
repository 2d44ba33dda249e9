"""The GPU lowering's IR builder folds integer constants and reuses identical pure instructions
(core/tilejit/gpu/llvm/folding_builder.py). Its folds are checked against LLVM itself (the same
instruction, not folded, run on the host), its reuse against dominance, and whole kernels against
the PTX the plain builder gives."""
import ctypes
import itertools
import random

import llvmlite.binding as llvm
import llvmlite.ir as llir
import pytest

import tilejit
import tilejit.language as tl
from tilejit.gpu.llvm import lowering
from tilejit.gpu.llvm.folding_builder import FoldingBuilder, appending_to

OPS = ("add", "sub", "mul", "and_", "or_", "xor", "shl", "lshr", "ashr")
WIDTHS = (1, 8, 32, 64)


def _operands(width: int, rng: random.Random) -> list[tuple[int, int]]:
    edges = [0, 1, 2, (1 << (width - 1)) - 1, 1 << (width - 1), (1 << width) - 1]
    values = edges + [rng.getrandbits(width) for _ in range(6)]
    return [(a, b) for a, b in itertools.product(values, repeat=2)]


def _host_results(width: int, cases: list[tuple[str, int, int]]) -> list[int]:
    """Each `op a, b` as an instruction LLVM runs on the host: f(i) returns case i's result."""
    ty = llir.IntType(width)
    module = llir.Module(name="fold_check")
    fn = llir.Function(module, llir.FunctionType(llir.IntType(64), [llir.IntType(32)]), "f")
    builder = llir.IRBuilder(fn.append_basic_block("entry"))
    index = fn.args[0]
    # Operands go through memory, so that nothing folds them on the way (no IR passes run; -O0 code).
    slot = builder.alloca(ty)
    blocks = []
    switch_block = builder.block
    for op, a, b in cases:
        block = fn.append_basic_block()
        builder.position_at_end(block)
        builder.store(llir.Constant(ty, a), slot)
        lhs = builder.load(slot)
        builder.store(llir.Constant(ty, b), slot)
        rhs = builder.load(slot)
        builder.ret(builder.zext(getattr(builder, op)(lhs, rhs), llir.IntType(64)))
        blocks.append(block)
    default = fn.append_basic_block()
    builder.position_at_end(default)
    builder.ret(llir.Constant(llir.IntType(64), 0))
    builder.position_at_end(switch_block)
    switch = builder.switch(index, default)
    for i, block in enumerate(blocks):
        switch.add_case(llir.Constant(llir.IntType(32), i), block)

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    parsed = llvm.parse_assembly(str(module))
    machine = llvm.Target.from_default_triple().create_target_machine(opt=0)
    engine = llvm.create_mcjit_compiler(parsed, machine)
    engine.finalize_object()
    f = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_int32)(engine.get_function_address("f"))
    return [f(i) for i in range(len(cases))]


@pytest.mark.parametrize("width", WIDTHS)
def test_folded_constants_equal_what_llvm_computes(width):
    rng = random.Random(width)
    cases = []
    for op in OPS:
        for a, b in _operands(width, rng):
            if op in ("shl", "lshr", "ashr"):
                b %= width     # a shift by the width or more is poison: not folded, not compared
            cases.append((op, a, b))
    expected = _host_results(width, cases)
    ty = llir.IntType(width)
    fn = llir.Function(llir.Module(), llir.FunctionType(llir.VoidType(), []), "g")
    builder = FoldingBuilder(fn.append_basic_block("entry"))
    mask = (1 << width) - 1
    for (op, a, b), want in zip(cases, expected):
        got = getattr(builder, op)(llir.Constant(ty, a), llir.Constant(ty, b))
        assert isinstance(got, llir.Constant), (op, a, b)
        assert got.constant & mask == want & mask, (op, width, a, b)
    assert not fn.blocks[0].instructions     # everything folded, nothing emitted


def test_casts_and_selects_of_constants_fold():
    fn = llir.Function(llir.Module(), llir.FunctionType(llir.VoidType(), []), "g")
    b = FoldingBuilder(fn.append_basic_block("entry"))
    i8, i32 = llir.IntType(8), llir.IntType(32)
    assert b.zext(llir.Constant(i8, -1), i32).constant & 0xFFFFFFFF == 255
    assert b.sext(llir.Constant(i8, -1), i32).constant & 0xFFFFFFFF == 0xFFFFFFFF
    assert b.trunc(llir.Constant(i32, 0x1FF), i8).constant & 0xFF == 0xFF
    x, y = llir.Constant(i32, 5), llir.Constant(i32, 7)
    assert b.select(llir.Constant(llir.IntType(1), 1), x, y) is x
    assert b.select(llir.Constant(llir.IntType(1), 0), x, y) is y
    assert not fn.blocks[0].instructions


def _function_with_args():
    i32 = llir.IntType(32)
    fn = llir.Function(llir.Module(), llir.FunctionType(llir.VoidType(), [i32, i32]), "g")
    return fn, fn.args[0], fn.args[1], i32


def test_identities_return_the_operand():
    fn, x, _, i32 = _function_with_args()
    b = FoldingBuilder(fn.append_basic_block("entry"))
    zero, one, ones = llir.Constant(i32, 0), llir.Constant(i32, 1), llir.Constant(i32, -1)
    for op in ("add", "sub", "or_", "xor", "shl", "lshr", "ashr"):
        assert getattr(b, op)(x, zero) is x, op
    assert b.add(zero, x) is x and b.mul(x, one) is x and b.mul(one, x) is x and b.and_(x, ones) is x
    assert b.mul(x, zero).constant == 0 and b.and_(zero, x).constant == 0
    negated = b.sub(zero, x)                 # 0 - x is not x: the one instruction emitted
    assert fn.blocks[0].instructions == [negated]


def test_reuse_is_limited_to_one_block_and_to_appending():
    fn, x, y, i32 = _function_with_args()
    entry, other = fn.append_basic_block("entry"), fn.append_basic_block("other")
    b = FoldingBuilder(entry)
    first = b.add(x, y)
    assert b.add(x, y) is first                                   # same block: reused
    assert b.xor(x, llir.Constant(i32, 16)) is b.xor(x, llir.Constant(i32, 16))   # constants by value
    assert b.icmp_signed("<", x, y) is b.icmp_signed("<", x, y)
    assert b.icmp_signed("<", x, y) is not b.icmp_unsigned("<", x, y)
    assert b.gep(llir.Constant(i32.as_pointer(), None), [x]) is b.gep(llir.Constant(i32.as_pointer(), None), [x])
    assert b.add(x, y, flags=("nsw",)) is not first               # flags: a different instruction
    b.position_at_end(other)
    assert b.add(x, y) is not first                               # another block: not dominated
    b.position_before(first)
    assert b.add(x, y) is not first                               # not appending: emitted again


def test_appending_to_another_block_returns_to_the_exact_insertion_point():
    fn, x, y, _ = _function_with_args()
    entry, body = fn.append_basic_block("entry"), fn.append_basic_block("body")
    b = llir.IRBuilder(body)
    first = b.add(x, y)
    with appending_to(b, entry):
        hoisted = b.mul(x, y)
        with appending_to(b, entry):          # nested, into the block being appended to
            inner = b.sub(x, y)
        after_inner = b.xor(hoisted, inner)   # still after what the nested use appended
    last = b.or_(first, after_inner)
    assert entry.instructions == [hoisted, inner, after_inner] and body.instructions == [first, last]
    b.position_before(first)                  # not at the end: back to the same index
    with appending_to(b, entry):
        b.and_(x, y)
    before = b.shl(x, y)
    assert body.instructions == [before, first, last]


@tilejit.jit
def _gather_rows(x_ptr, idx_ptr, out_ptr, N: tl.constexpr, M: tl.constexpr):
    rows = tl.load(idx_ptr + tl.arange(0, N))
    cols = tl.arange(0, M)
    x = tl.load(x_ptr + rows[:, None] * M + cols[None, :])
    tl.store(out_ptr + tl.arange(0, N)[:, None] * M + cols[None, :], tl.cumsum(x * 2, axis=1))


@tilejit.jit
def _small_dot(a_ptr, b_ptr, c_ptr, S: tl.constexpr):
    r = tl.arange(0, S)
    a = tl.load(a_ptr + r[:, None] * S + r[None, :])
    b = tl.load(b_ptr + r[:, None] * S + r[None, :])
    tl.store(c_ptr + r[:, None] * S + r[None, :], tl.dot(a, b).to(tl.float16))


def _ptx_body(kernel) -> list[str]:
    return [line for line in kernel.asm["ptx"].splitlines() if line.strip() and not line.lstrip().startswith("//")]


@pytest.mark.parametrize("case", ["gather_cumsum", "dot"])
def test_kernels_get_the_same_ptx_with_fewer_instructions(case, monkeypatch, tmp_path):
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))
    if case == "dot":
        warm = lambda: _small_dot.warmup("*fp16", "*fp16", "*fp16", S=64, num_warps=4, grid=(1,),  # noqa: E731
                                         target="cuda:90")
    else:
        warm = lambda: _gather_rows.warmup("*fp32", "*i32", "*fp32", N=16, M=64, num_warps=4, grid=(1,),  # noqa: E731
                                           target="cuda:90")
    folded = warm()
    tilejit.compiler.clear_memory_cache()
    monkeypatch.setattr(lowering, "FoldingBuilder", llir.IRBuilder)
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path / "plain"))
    for jit_function in (_small_dot, _gather_rows):
        jit_function.clear_cache()
    plain = warm()
    assert _ptx_body(folded) == _ptx_body(plain)
    assert folded.asm["llir"].count(" = ") < plain.asm["llir"].count(" = ")


def test_a_widened_no_wrap_offset_is_the_widened_base_plus_the_offset():
    """`sext(x +nsw C)` is `sext(x) + C` and `zext(x +nuw C)` is `zext(x) + C`: the constant stays
    apart from the base (an immediate offset of the access) through the widening to i64."""
    fn, x, _, i32 = _function_with_args()
    i64 = llir.IntType(64)
    b = FoldingBuilder(fn.append_basic_block("entry"))
    for cast, c, flags in (("sext", 8, ("nuw", "nsw")), ("zext", 8, ("nuw", "nsw")), ("sext", -3, ("nsw",)),
                           ("zext", 5, ("nuw",))):
        wide = getattr(b, cast)(b.add(x, llir.Constant(i32, c), flags=flags), i64)
        assert wide.opname == "add" and wide.operands[1].constant == c, (cast, c)
        assert wide.operands[0].opname == cast and wide.operands[0].operands[0] is x
        assert set(wide.flags) == set(flags)
    # a flag the widening needs is missing (or there is none): the cast of the sum itself
    for cast, flags in (("zext", ("nsw",)), ("sext", ("nuw",)), ("sext", ())):
        total = b.add(x, llir.Constant(i32, 8), flags=flags)
        wide = getattr(b, cast)(total, i64)
        assert wide.opname == cast and wide.operands[0] is total, (cast, flags)
    b.ret_void()
    llvm.parse_assembly(str(fn.module)).verify()
