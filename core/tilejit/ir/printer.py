"""Text form of the IR.

Every op prints in one generic, MLIR-like shape, so that one parser reads everything back:

    %3, %4 = op.name %0, %1 {attr = 1} ({ regions }) : (operand types) -> (result types) loc(...)

except the `arith` casts, which print their types as MLIR (and Triton's TTIR) does:
`%1 = arith.extf %val : f16 to f32` (the parser reads both forms).

Functions print as `tt.func public @name(%x_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32}) { ... }`
as in Triton: a parameter under its Python name (the argument's `name_hint`), else `%argN`. `parse_module(print_module(m))` prints the same text again (tests check it).
"""
from __future__ import annotations

import json
import math
import re
from typing import Dict, List

from .core import Block, Module, Operation, Region, Value
from .types import Type


# The casts MLIR prints as `: <type> to <type>` (arith's CastOpInterface ops).
CAST_OPS = frozenset({"arith.extf", "arith.truncf", "arith.extsi", "arith.extui", "arith.trunci",
                      "arith.sitofp", "arith.uitofp", "arith.fptosi", "arith.fptoui", "arith.bitcast",
                      "arith.index_cast"})


class DenseAttr:
    """A non-splat constant: a flat tuple of Python numbers, in row-major order."""
    __slots__ = ("values",)

    def __init__(self, values):
        self.values = tuple(values)

    def __eq__(self, other):
        return isinstance(other, DenseAttr) and self.values == other.values

    def __hash__(self):
        return hash(self.values)

    def __repr__(self):
        return f"DenseAttr({list(self.values)})"


_PLAIN_STRING = re.compile(r'[ !#-\[\]-~]*')  # printable ASCII but `"` and `\`


def format_attr(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        text = repr(value)
        return text if ("." in text or "e" in text) else text + ".0"
    if isinstance(value, str):
        # What json.dumps escapes (its ESCAPE_ASCII): most attribute strings have none of it.
        return f'"{value}"' if type(value) is str and _PLAIN_STRING.fullmatch(value) else json.dumps(value)
    if isinstance(value, Type):
        return str(value)
    if isinstance(value, DenseAttr):
        return "dense<[" + ", ".join(format_attr(v) for v in value.values) + "]>"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_attr(v) for v in value) + "]"
    if isinstance(value, dict):
        return format_attr_dict(value)
    if value is None:
        return "unit"
    if getattr(value, "is_encoding", False):   # a layout (gpu/layouts.py), as the passes' hints hold
        return str(value)
    raise TypeError(f"cannot print attribute value {value!r} of type {type(value).__name__}")


def format_attr_dict(attrs: Dict) -> str:
    return "{" + ", ".join(f"{k} = {format_attr(v)}" for k, v in attrs.items()) + "}"


_ARG_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_POSITIONAL = re.compile(r"arg[0-9]+")


def is_printable_arg_name(name) -> bool:
    """Whether a function argument may print as `%name`: an identifier that no positional
    `%argN` (nor a numbered result `%N`) can be."""
    return isinstance(name, str) and bool(_ARG_NAME.fullmatch(name)) and not _POSITIONAL.fullmatch(name)


class _Namer:
    """Assigns `%N` to op results and `%argN` to block arguments, in print order."""

    def __init__(self):
        self.names: Dict[int, str] = {}
        self.next_value = 0
        self.next_arg = 0

    def name_block_args(self, block: Block, use_hints: bool = False) -> None:
        """`%argN` for each argument; with `use_hints` (a function's parameters) the argument's
        name hint where it has one, as Triton prints `%x` (the count goes on either way)."""
        for a in block.args:
            hint = a.name_hint if use_hints else None
            self.names[id(a)] = f"%{hint}" if is_printable_arg_name(hint) else f"%arg{self.next_arg}"
            self.next_arg += 1

    def name_results(self, op: Operation) -> None:
        for r in op.results:
            self.names[id(r)] = f"%{self.next_value}"
            self.next_value += 1

    def __getitem__(self, v: Value) -> str:
        try:
            return self.names[id(v)]
        except KeyError:
            return "%<<undefined>>"


class Printer:
    def __init__(self, with_locations: bool = True):
        self.with_locations = with_locations
        self.lines: List[str] = []
        # Type -> its text: a kernel's values share a few types, whose text (a tensor's layout
        # above all) costs more to build than to look up. Equal types print the same. Looked up by
        # identity first (the IR being printed holds every type, so ids are not reused meanwhile),
        # as hashing a tensor type hashes its layout.
        self._type_texts: Dict[Type, str] = {}
        self._type_texts_by_id: Dict[int, str] = {}

    def type_text(self, t) -> str:
        text = self._type_texts_by_id.get(id(t))
        if text is None:
            try:
                text = self._type_texts.get(t)
                if text is None:
                    text = self._type_texts[t] = str(t)
            except TypeError:  # a type holding something unhashable
                text = str(t)
            self._type_texts_by_id[id(t)] = text
        return text

    def loc(self, op: Operation) -> str:
        return f" {op.loc}" if self.with_locations else ""

    def module(self, m: Module) -> str:
        self.lines = ["module {"]
        for op in m.body.ops:
            self.func(op, "  ")
        self.lines.append("}")
        return "\n".join(self.lines) + "\n"

    def func(self, op: Operation, indent: str) -> None:
        namer = _Namer()
        entry = op.regions[0].blocks[0]
        namer.name_block_args(entry, use_hints=True)
        fty = op.attrs["function_type"]
        arg_attrs = op.attrs.get("arg_attrs") or [{} for _ in entry.args]
        params = []
        for a, attrs in zip(entry.args, arg_attrs):
            text = f"{namer[a]}: {self.type_text(a.type)}"
            if attrs:
                text += " {" + ", ".join(
                    f"{k} = {format_attr(v)}" + (" : i32" if isinstance(v, int) and not isinstance(v, bool) else "")
                    for k, v in attrs.items()) + "}"
            params.append(text)
        results = ", ".join(self.type_text(t) for t in fty.results)
        vis = op.attrs.get("sym_visibility", "public")
        extra = {k: v for k, v in op.attrs.items()
                 if k not in ("sym_name", "function_type", "arg_attrs", "sym_visibility")}
        head = f"{indent}tt.func {vis} @{op.attrs['sym_name']}({', '.join(params)}) -> ({results})"
        if extra:
            head += " attributes " + format_attr_dict(extra)
        self.lines.append(head + " {")
        for inner in entry.ops:
            self.op(inner, namer, indent + "  ")
        self.lines.append(f"{indent}}}{self.loc(op)}")

    def op(self, op: Operation, namer: _Namer, indent: str) -> None:
        operands = ", ".join(namer[v] for v in op.operands)
        namer.name_results(op)
        lhs = ", ".join(namer[r] for r in op.results)
        text = indent + (f"{lhs} = " if lhs else "") + op.name
        if operands:
            text += " " + operands
        if op.attrs:
            text += " " + format_attr_dict(op.attrs)
        if op.regions:
            self.lines.append(text + " (")
            for i, region in enumerate(op.regions):
                self.region(region, namer, indent + "  ", last=(i == len(op.regions) - 1))
            text = indent + ")"
        if op.name == "arith.constant" and not op.operands and len(op.results) == 1 and not op.regions:
            # MLIR's form `... : f32`, which Triton's TTIR has and its tests search for
            self.lines.append(f"{text} : {self.type_text(op.results[0].type)}{self.loc(op)}")
            return
        if op.name in CAST_OPS and len(op.operands) == 1 and len(op.results) == 1 and not op.regions:
            self.lines.append(f"{text} : {self.type_text(op.operands[0].type)} to "
                              f"{self.type_text(op.results[0].type)}{self.loc(op)}")
            return
        type_text = self.type_text
        ins = ", ".join(type_text(v.type) for v in op.operands)
        outs = ", ".join(type_text(r.type) for r in op.results)
        self.lines.append(f"{text} : ({ins}) -> ({outs}){self.loc(op)}")

    def region(self, region: Region, namer: _Namer, indent: str, last: bool) -> None:
        self.lines.append(indent + "{")
        for block in region.blocks:
            namer.name_block_args(block)
            args = ", ".join(f"{namer[a]}: {self.type_text(a.type)}" for a in block.args)
            self.lines.append(f"{indent}^bb({args}):")
            for inner in block.ops:
                self.op(inner, namer, indent + "  ")
        self.lines.append(indent + ("}" if last else "},"))


def print_module(m: Module, with_locations: bool = True) -> str:
    return Printer(with_locations).module(m)


def print_op(op: Operation) -> str:
    """Print one op (and its regions) for error messages; values get local names."""
    p = Printer(with_locations=False)
    namer = _Namer()
    for v in op.operands:
        namer.names.setdefault(id(v), f"%v{len(namer.names)}")
    p.op(op, namer, "")
    return "\n".join(p.lines)
