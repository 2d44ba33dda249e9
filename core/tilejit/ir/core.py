"""The IR's data structures: values, operations, blocks, regions, modules, and a builder.

The IR is generic in the MLIR sense: one `Operation` class for every op, identified by its name
(`arith.addi`, `tt.load`, `scf.for`, ...). What is specific to an op (traits, result types, checks)
lives in the registry of `ops.py`, so passes and backends dispatch on `op.name`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Sequence

from .types import FunctionType, Type
from .ops import OPS


@dataclass(frozen=True)
class Location:
    """Where an op came from in the kernel's source; every op has one."""
    file: Optional[str] = None
    line: int = 0
    col: int = 0
    func: Optional[str] = None

    def __str__(self) -> str:
        if not self.file:
            return "loc(unknown)"
        return f'loc("{self.file}":{self.line}:{self.col})'


UNKNOWN_LOC = Location()


class Value:
    """An SSA value: an op result or a block argument."""
    __slots__ = ("type", "uses", "name_hint")

    def __init__(self, type: Type, name_hint: Optional[str] = None):
        self.type = type
        # (operation, operand index) for each use; kept up to date by Operation.
        self.uses: List[tuple] = []
        self.name_hint = name_hint

    @property
    def owner(self):
        raise NotImplementedError

    def replace_all_uses_with(self, other: "Value") -> None:
        for op, idx in list(self.uses):
            op.set_operand(idx, other)

    def has_uses(self) -> bool:
        return bool(self.uses)

    def __repr__(self) -> str:
        return f"<Value {self.type}>"


class OpResult(Value):
    __slots__ = ("op", "index")

    def __init__(self, type: Type, op: "Operation", index: int):
        super().__init__(type)
        self.op = op
        self.index = index

    @property
    def owner(self) -> "Operation":
        return self.op


class BlockArgument(Value):
    __slots__ = ("block", "index")

    def __init__(self, type: Type, block: "Block", index: int):
        super().__init__(type)
        self.block = block
        self.index = index

    @property
    def owner(self) -> "Block":
        return self.block


class Operation:
    """One operation. `attrs` holds plain Python values (int, float, bool, str, list, Type)."""
    __slots__ = ("name", "operands", "results", "attrs", "regions", "loc", "parent")

    def __init__(self, name: str, operands: Sequence[Value] = (), result_types: Sequence[Type] = (),
                 attrs: Optional[Dict[str, Any]] = None, regions: Sequence["Region"] = (),
                 loc: Optional[Location] = None):
        self.name = name
        self.operands: List[Value] = []
        self.results = [OpResult(t, self, i) for i, t in enumerate(result_types)]
        self.attrs: Dict[str, Any] = dict(attrs or {})
        self.regions: List[Region] = []
        self.loc = loc or UNKNOWN_LOC
        self.parent: Optional[Block] = None
        for v in operands:
            self.add_operand(v)
        for r in regions:
            self.add_region(r)

    # -- operands -------------------------------------------------------------------------------
    def add_operand(self, v: Value) -> None:
        if not isinstance(v, Value):
            raise TypeError(f"operand of {self.name} must be an ir.Value, got {type(v).__name__}")
        v.uses.append((self, len(self.operands)))
        self.operands.append(v)

    def set_operand(self, idx: int, v: Value) -> None:
        old = self.operands[idx]
        old.uses.remove((self, idx))
        v.uses.append((self, idx))
        self.operands[idx] = v

    def set_operands(self, values: Sequence[Value]) -> None:
        self.drop_operands()
        for v in values:
            self.add_operand(v)

    def drop_operands(self) -> None:
        for i, v in enumerate(self.operands):
            v.uses.remove((self, i))
        self.operands = []

    def _operand_slice(self, name: str) -> slice:
        slices = OPS[self.name].operand_slices(len(self.operands)) if self.name in OPS else None
        if not slices or name not in slices:
            raise ValueError(f"{self.name} with {len(self.operands)} operands has no operand '{name}'")
        return slices[name]

    def operand(self, name: str) -> Optional[Value]:
        """The operand `name` of the op's definition (ops.py); None for an absent optional one."""
        group = self.operands[self._operand_slice(name)]
        return group[0] if group else None

    def operand_group(self, name: str) -> List[Value]:
        """The operands of the variadic group `name` (`scf.for`'s `inits`, `tt.print`'s `values`)."""
        return self.operands[self._operand_slice(name)]

    def operand_index(self, name: str) -> int:
        """Where the operand (or group) `name` starts in `operands`."""
        return self._operand_slice(name).start

    def add_region(self, region: "Region") -> None:
        region.parent = self
        self.regions.append(region)

    # -- results --------------------------------------------------------------------------------
    @property
    def result(self) -> Value:
        if len(self.results) != 1:
            raise ValueError(f"{self.name} has {len(self.results)} results, not one")
        return self.results[0]

    # -- structure ------------------------------------------------------------------------------
    def erase(self) -> None:
        """Remove from the parent block and drop all operand uses (also inside regions)."""
        for inner in list(self.walk()):
            inner.drop_operands()
        if self.parent is not None:
            self.parent.ops.remove(self)
            self.parent = None

    def walk(self) -> Iterator["Operation"]:
        """This op and every op nested in its regions, pre-order."""
        yield self
        if self.regions:
            yield from self._walk_nested()

    def _walk_nested(self) -> Iterator["Operation"]:
        # `walk` below this op. An op is yielded here, not through a generator of its own, and its
        # regions are looked at once the caller is done with it (as `walk` does): most ops have none,
        # and a generator per op was most of a walk's time.
        for region in self.regions:
            for block in region.blocks:
                for op in list(block.ops):
                    yield op
                    if op.regions:
                        yield from op._walk_nested()

    def parent_op(self) -> Optional["Operation"]:
        if self.parent is None or self.parent.parent is None:
            return None
        return self.parent.parent.parent

    def is_ancestor_of(self, other: "Operation") -> bool:
        while other is not None:
            if other is self:
                return True
            other = other.parent_op()
        return False

    def __repr__(self) -> str:
        return f"<Operation {self.name} at {self.loc}>"


class Block:
    __slots__ = ("args", "ops", "parent")

    def __init__(self, arg_types: Sequence[Type] = ()):
        self.args: List[BlockArgument] = [BlockArgument(t, self, i) for i, t in enumerate(arg_types)]
        self.ops: List[Operation] = []
        self.parent: Optional[Region] = None

    def add_arg(self, t: Type) -> BlockArgument:
        a = BlockArgument(t, self, len(self.args))
        self.args.append(a)
        return a

    def erase_arg(self, idx: int) -> None:
        if self.args[idx].uses:
            raise ValueError("cannot erase a block argument that is still used")
        del self.args[idx]
        for i, a in enumerate(self.args):
            a.index = i

    def append(self, op: Operation) -> Operation:
        op.parent = self
        self.ops.append(op)
        return op

    def insert(self, index: int, op: Operation) -> Operation:
        op.parent = self
        self.ops.insert(index, op)
        return op

    @property
    def terminator(self) -> Optional[Operation]:
        return self.ops[-1] if self.ops else None

    @property
    def parent_op(self) -> Optional[Operation]:
        return self.parent.parent if self.parent is not None else None


class Region:
    __slots__ = ("blocks", "parent")

    def __init__(self, blocks: Sequence[Block] = ()):
        self.blocks: List[Block] = []
        self.parent: Optional[Operation] = None
        for b in blocks:
            self.add_block(b)

    def add_block(self, block: Block) -> Block:
        block.parent = self
        self.blocks.append(block)
        return block

    @property
    def block(self) -> Block:
        return self.blocks[0]


class Module:
    """A list of `tt.func` operations (the kernel first, then called functions)."""

    def __init__(self, functions: Sequence[Operation] = ()):
        self.body = Block()
        for f in functions:
            self.body.append(f)

    @property
    def functions(self) -> List[Operation]:
        return [op for op in self.body.ops if op.name == "tt.func"]

    def get(self, name: str) -> Optional[Operation]:
        for f in self.functions:
            if f.attrs.get("sym_name") == name:
                return f
        return None

    def walk(self) -> Iterator[Operation]:
        for f in list(self.body.ops):
            yield from f.walk()

    def __str__(self) -> str:
        from .printer import print_module
        return print_module(self)


def make_func(name: str, arg_types: Sequence[Type], result_types: Sequence[Type] = (),
              arg_attrs: Optional[List[Dict[str, Any]]] = None, public: bool = True,
              loc: Optional[Location] = None, noinline: bool = False) -> Operation:
    """Create a `tt.func` op with an entry block whose arguments are the function's parameters."""
    entry = Block(arg_types)
    attrs = {
        "sym_name": name,
        "function_type": FunctionType(tuple(arg_types), tuple(result_types)),
        "arg_attrs": arg_attrs or [{} for _ in arg_types],
        "sym_visibility": "public" if public else "private",
    }
    if noinline:
        attrs["noinline"] = True
    return Operation("tt.func", (), (), attrs, [Region([entry])], loc)


class Builder:
    """Creates ops at an insertion point (the end of a block, or before an op)."""

    def __init__(self, block: Optional[Block] = None, loc: Optional[Location] = None):
        self.block = block
        self.index: Optional[int] = None  # None: append at the end
        self.loc = loc or UNKNOWN_LOC

    def set_insertion_point_to_end(self, block: Block) -> None:
        self.block, self.index = block, None

    def set_insertion_point_before(self, op: Operation) -> None:
        self.block = op.parent
        self.index = op.parent.ops.index(op)

    def set_insertion_point_after(self, op: Operation) -> None:
        self.block = op.parent
        self.index = op.parent.ops.index(op) + 1

    def insert(self, op: Operation) -> Operation:
        if self.block is None:
            raise ValueError("builder has no insertion point")
        if self.index is None:
            self.block.append(op)
        else:
            self.block.insert(self.index, op)
            self.index += 1
        return op

    def create(self, name: str, operands: Sequence[Value] = (), result_types: Sequence[Type] = (),
               attrs: Optional[Dict[str, Any]] = None, regions: Sequence[Region] = (),
               loc: Optional[Location] = None) -> Operation:
        return self.insert(Operation(name, operands, result_types, attrs, regions, loc or self.loc))

    def create1(self, name: str, operands: Sequence[Value], result_type: Type,
                attrs: Optional[Dict[str, Any]] = None, loc: Optional[Location] = None) -> Value:
        """Create a single-result op and return its result value."""
        return self.create(name, operands, (result_type,), attrs, (), loc).results[0]

    def constant(self, value, type: Type, loc: Optional[Location] = None) -> Value:
        """`arith.constant`; for a tensor type the scalar `value` is splatted."""
        return self.create1("arith.constant", (), type, {"value": value}, loc)
