"""Parser for the text form written by `printer.py`.

A hand-written recursive-descent parser over the characters (types such as `tensor<128x64xf32>` do
not split into regular tokens). Errors raise `CompilationError` with the line and column in the
text, so a hand-edited `.ttir` file gets a useful message.
"""
from __future__ import annotations

import json
import re
from typing import Dict, List, Optional

from ..errors import CompilationError
from .dialect import default_context
from .core import Block, Location, Module, Operation, Region, Value
from .printer import DenseAttr, is_printable_arg_name
from .types import (FLOAT_FORMATS, FloatType, FunctionType, IntType, PointerType, TensorDescType,
                    TensorType, Type)

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_.$]*")
_NUMBER = re.compile(r"-?(?:\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\d+)")
_VALUE = re.compile(r"%[A-Za-z0-9_]+")
_WS = re.compile(r"(?:\s|//[^\n]*)*")

class Parser:
    def __init__(self, text: str, filename: str = "<ttir>", context=None):
        self.context = context if context is not None else default_context()
        self.text = text
        self.pos = 0
        self.filename = filename
        self.scopes: List[Dict[str, Value]] = []

    # -- low level ------------------------------------------------------------------------------
    def error(self, message: str) -> CompilationError:
        line = self.text.count("\n", 0, self.pos) + 1
        col = self.pos - (self.text.rfind("\n", 0, self.pos) + 1) + 1
        src = self.text.splitlines()[line - 1] if self.text.splitlines() else ""
        return CompilationError(f"cannot parse IR: {message}", self.filename, line, col, src)

    def skip(self) -> None:
        self.pos = _WS.match(self.text, self.pos).end()

    def peek(self, s: str) -> bool:
        self.skip()
        return self.text.startswith(s, self.pos)

    def accept(self, s: str) -> bool:
        if self.peek(s):
            self.pos += len(s)
            return True
        return False

    def expect(self, s: str) -> None:
        if not self.accept(s):
            found = self.text[self.pos:self.pos + 20].split("\n")[0]
            raise self.error(f"expected '{s}', found '{found}'")

    def match(self, pattern: re.Pattern) -> Optional[str]:
        self.skip()
        m = pattern.match(self.text, self.pos)
        if not m:
            return None
        self.pos = m.end()
        return m.group(0)

    def ident(self) -> str:
        s = self.match(_IDENT)
        if s is None:
            raise self.error("expected an identifier")
        return s

    # -- types ----------------------------------------------------------------------------------
    def type(self) -> Type:
        self.skip()
        if self.accept("!tt.ptr<"):
            pointee = self.type()
            space = 1
            if self.accept(","):
                space = int(self.match(_NUMBER))
            self.expect(">")
            return PointerType(pointee, space)
        if self.accept("!tt.tensordesc<"):
            block = self.type()
            self.expect(">")
            if not isinstance(block, TensorType):
                raise self.error("a tensor descriptor holds a tensor type")
            return TensorDescType(block)
        if self.accept("tensor<"):
            return self.tensor_type()
        if self.peek("("):
            self.expect("(")
            ins = self.type_list(")")
            self.expect("->")
            self.expect("(")
            outs = self.type_list(")")
            return FunctionType(tuple(ins), tuple(outs))
        start = self.pos
        name = self.match(_IDENT)
        if name is None:
            raise self.error("expected a type")
        if name in FLOAT_FORMATS:
            return FloatType(name)
        if re.fullmatch(r"i\d+", name):
            return IntType(int(name[1:]))
        self.pos = start  # point the diagnostic at the type, not past it
        raise self.error(f"unknown type '{name}'")

    def tensor_type(self) -> TensorType:
        shape = []
        while True:
            m = re.compile(r"(\d+)x").match(self.text, self.pos)
            if not m:
                break
            shape.append(int(m.group(1)))
            self.pos = m.end()
        elem = self.type()
        encoding = None
        if self.accept(","):
            self.skip()
            start, depth = self.pos, 0
            while self.pos < len(self.text):
                ch = self.text[self.pos]
                if ch in "<({[":
                    depth += 1
                elif ch in ">)}]":
                    if depth == 0:
                        break
                    depth -= 1
                self.pos += 1
            enc_text = self.text[start:self.pos].strip()
            encoding = self.encoding(enc_text)
        self.expect(">")
        return TensorType(tuple(shape), elem, encoding)

    def encoding(self, text: str):
        return self.context.parse_encoding(text)

    def encoding_attr(self):
        """A layout as an attribute value (`#ttg.blocked<{...}>`): up to its matching `>`."""
        start, depth = self.pos, 0
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            self.pos += 1
            if ch in "<({[":
                depth += 1
            elif ch in ">)}]":
                depth -= 1
                if depth == 0:
                    break
        return self.encoding(self.text[start:self.pos])

    def type_list(self, close: str) -> List[Type]:
        types: List[Type] = []
        if self.accept(close):
            return types
        while True:
            types.append(self.type())
            if self.accept(close):
                return types
            self.expect(",")

    # -- attributes -----------------------------------------------------------------------------
    def attr_value(self):
        self.skip()
        if self.peek("\""):
            m = re.compile(r'"(?:[^"\\]|\\.)*"').match(self.text, self.pos)
            self.pos = m.end()
            return json.loads(m.group(0))
        if self.accept("["):
            items = []
            if self.accept("]"):
                return items
            while True:
                items.append(self.attr_value())
                if self.accept("]"):
                    return items
                self.expect(",")
        if self.peek("{"):
            return self.attr_dict()
        if self.peek("#"):
            return self.encoding_attr()
        if self.accept("dense<["):
            vals = []
            if not self.accept("]"):
                while True:
                    vals.append(self.attr_value())
                    if self.accept("]"):
                        break
                    self.expect(",")
            self.expect(">")
            return DenseAttr(vals)
        for word, val in (("true", True), ("false", False), ("unit", None), ("nan", float("nan")),
                          ("inf", float("inf")), ("-inf", float("-inf"))):
            if re.compile(re.escape(word) + r"\b").match(self.text, self.pos):
                self.pos += len(word)
                return val
        num = self.match(_NUMBER)
        if num is not None:
            value = float(num) if any(c in num for c in ".eE") else int(num)
            if self.peek(":") and not self.peek("::"):
                # Typed integer as Triton prints it (`16 : i32`); the type is implied by the attr.
                save = self.pos
                self.expect(":")
                try:
                    self.type()
                except CompilationError:
                    self.pos = save
            return value
        return self.type()

    def attr_dict(self) -> dict:
        self.expect("{")
        attrs: dict = {}
        if self.accept("}"):
            return attrs
        while True:
            key = self.ident()
            self.expect("=")
            attrs[key] = self.attr_value()
            if self.accept("}"):
                return attrs
            self.expect(",")

    # -- locations ------------------------------------------------------------------------------
    def location(self) -> Location:
        if not self.accept("loc("):
            return Location()
        if self.accept("unknown"):
            self.expect(")")
            return Location()
        m = re.compile(r'"((?:[^"\\]|\\.)*)":(\d+):(\d+)\)').match(self.text, self.pos)
        if not m:
            raise self.error("malformed location")
        self.pos = m.end()
        return Location(json.loads('"' + m.group(1) + '"'), int(m.group(2)), int(m.group(3)))

    # -- values ---------------------------------------------------------------------------------
    def lookup(self, name: str) -> Value:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        raise self.error(f"use of undefined value {name}")

    def define(self, name: str, v: Value) -> None:
        if name in self.scopes[-1]:
            raise self.error(f"value {name} defined twice")
        self.scopes[-1][name] = v

    # -- ops ------------------------------------------------------------------------------------
    def module(self) -> Module:
        self.expect("module")
        self.expect("{")
        m = Module()
        while not self.accept("}"):
            m.body.append(self.func())
        self.skip()
        if self.pos != len(self.text):
            raise self.error("unexpected text after the module")
        return m

    def func(self) -> Operation:
        self.expect("tt.func")
        vis = self.ident()
        self.expect("@")
        name = self.ident()
        self.expect("(")
        self.scopes.append({})
        arg_names, arg_types, arg_attrs = [], [], []
        if not self.accept(")"):
            while True:
                arg_names.append(self.match(_VALUE))
                self.expect(":")
                arg_types.append(self.type())
                arg_attrs.append(self.attr_dict() if self.peek("{") else {})
                if self.accept(")"):
                    break
                self.expect(",")
        self.expect("->")
        self.expect("(")
        results = self.type_list(")")
        extra = {}
        if self.accept("attributes"):
            extra = self.attr_dict()
        entry = Block(arg_types)
        for n, a in zip(arg_names, entry.args):
            self.define(n, a)
            if is_printable_arg_name(n[1:]):
                a.name_hint = n[1:]   # printed back under the same name
        self.expect("{")
        while not self.accept("}"):
            entry.append(self.op())
        loc = self.location()
        self.scopes.pop()
        attrs = {"sym_name": name, "function_type": FunctionType(tuple(arg_types), tuple(results)),
                 "arg_attrs": arg_attrs, "sym_visibility": vis}
        attrs.update(extra)
        return Operation("tt.func", (), (), attrs, [Region([entry])], loc)

    def op(self) -> Operation:
        self.skip()
        start = self.pos
        result_names: List[str] = []
        if self.peek("%"):
            while True:
                result_names.append(self.match(_VALUE))
                if self.accept("="):
                    break
                self.expect(",")
        name = self.ident()
        operands: List[Value] = []
        if self.peek("%"):
            while True:
                self.skip()
                name_pos = self.pos
                name_text = self.match(_VALUE)
                if name_text is None:
                    raise self.error("expected a value name such as %0")
                after_name, self.pos = self.pos, name_pos  # an undefined name is reported where it is
                operands.append(self.lookup(name_text))
                self.pos = after_name
                if not self.accept(","):
                    break
        attrs = self.attr_dict() if self.peek("{") else {}
        regions: List[Region] = []
        if self.accept("("):
            while True:
                regions.append(self.region())
                if self.accept(")"):
                    break
                self.expect(",")
        self.expect(":")
        if self.accept("("):
            in_types = self.type_list(")")
            self.expect("->")
            self.expect("(")
            out_types = self.type_list(")")
        else:
            first = self.type()
            if not operands and not self.peek("to"):   # a constant's short form: `arith.constant {...} : f32`
                in_types, out_types = [], [first]
            else:   # a cast, in MLIR's short form: `arith.extf %x : f16 to f32`
                in_types = [first]
                self.expect("to")
                out_types = [self.type()]
        loc = self.location()
        end = self.pos
        self.pos = start  # type errors below point at the start of the op
        definition = self.context.ops.get(name)
        if definition is None:
            raise self.error(f"unknown operation '{name}'")
        if definition.operand_slices(len(operands)) is None:
            raise self.error(f"{name} takes operands ({', '.join(definition.operands)}), got {len(operands)}")
        if len(in_types) != len(operands):
            raise self.error(f"{name}: {len(operands)} operands but {len(in_types)} operand types")
        for v, t in zip(operands, in_types):
            if v.type != t:
                raise self.error(f"{name}: operand has type {v.type}, annotated {t}")
        if len(out_types) != len(result_names):
            raise self.error(f"{name}: {len(result_names)} results but {len(out_types)} result types")
        self.pos = end
        op = Operation(name, operands, out_types, attrs, regions, loc)
        for n, r in zip(result_names, op.results):
            self.define(n, r)
        return op

    def region(self) -> Region:
        self.expect("{")
        region = Region()
        self.scopes.append({})
        while not self.accept("}"):
            self.expect("^bb(")
            names, types = [], []
            if not self.accept(")"):
                while True:
                    names.append(self.match(_VALUE))
                    self.expect(":")
                    types.append(self.type())
                    if self.accept(")"):
                        break
                    self.expect(",")
            self.expect(":")
            block = region.add_block(Block(types))
            for n, a in zip(names, block.args):
                self.define(n, a)
            while not (self.peek("}") or self.peek("^bb(")):
                block.append(self.op())
        self.scopes.pop()
        return region


def parse_module(text: str, filename: str = "<ttir>", context=None) -> Module:
    """Parse TTIR/TTGIR text; `context` (ir/dialect.py) says which ops and layouts exist (default: all
    of core's)."""
    return Parser(text, filename, context).module()
