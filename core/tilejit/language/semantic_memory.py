"""Semantic rules for memory (load/store/atomics, block pointers, tensor descriptors), program ids,
ranges, `dot`, reductions/scans and debug ops. A mixin of `Semantic`: `self` has `create`,
`to_tensor`, `cast`, `broadcast_*`, ... from `semantic.py`."""
from __future__ import annotations

import math

from typing import Callable, List, Sequence

from .. import ir
from . import core as tl

_LOAD_CACHE = {"": "none", ".ca": "ca", ".cg": "cg", ".cs": "cs", ".cv": "cv"}
_STORE_CACHE = {"": "none", ".wb": "wb", ".cg": "cg", ".cs": "cs", ".wt": "wt"}
_EVICTION = {"": "normal", "evict_normal": "normal", "evict_first": "evict_first", "evict_last": "evict_last"}
_SEM = ("relaxed", "acquire", "release", "acq_rel")
_SCOPE = ("gpu", "cta", "sys")
# Triton 3.x's input precisions of an fp32 `tl.dot` on NVIDIA GPUs: the list a backend allows unless its
# options name another (`allowed_dot_input_precisions`).
DOT_INPUT_PRECISIONS = ("tf32", "tf32x3", "ieee", "bf16x3", "bf16x6")


def _const_int(value, what: str) -> int:
    value = tl._unwrap_if_constexpr(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be a constexpr integer, got "
                        f"{'a runtime tensor' if isinstance(value, tl.tensor) else repr(value)}")
    return value


def _const_int_list(values, what: str) -> list:
    """`values` (a list or tuple, or one int) as a list of compile-time ints. Anything else is the
    user's mistake, named here rather than left to fail inside Python (`'NoneType' is not iterable`)."""
    values = tl._unwrap_if_constexpr(values)
    if isinstance(values, int) and not isinstance(values, bool):
        return [values]
    if not isinstance(values, (list, tuple)):
        got = "a tensor" if isinstance(values, tl.tensor) else f"{type(values).__name__} {values!r}"
        raise TypeError(f"{what} must be a list or tuple of constexpr integers, got {got}")
    return [_const_int(v, what + " entries") for v in values]


def _lookup(table: dict, key, what: str) -> str:
    key = tl._unwrap_if_constexpr(key) or ""
    if not isinstance(key, str) or key not in table:
        raise ValueError(f"{what} {key!r} is not supported; expected one of {sorted(k for k in table if k)}")
    return table[key]


def _noted(exc: Exception, note: str) -> Exception:
    """`exc` with `note` attached (PEP 678's `__notes__`, set directly: `add_note` is Python 3.11+):
    `str(exc)` stays the message Triton's tests compare exactly, and the compile error built from it
    shows the note too."""
    exc.__notes__ = [*getattr(exc, "__notes__", ()), note]
    return exc


class MemorySemanticMixin:
    # -- program ids and ranges -------------------------------------------------------------------
    def program_id(self, axis) -> tl.tensor:
        axis = _const_int(axis, "program_id axis")
        if axis not in (0, 1, 2):
            raise ValueError(f"program_id axis must be 0, 1, or 2 but got {axis}")  # Triton's wording
        return self.create("tt.get_program_id", [], tl.int32, {"axis": axis})

    def num_programs(self, axis) -> tl.tensor:
        axis = _const_int(axis, "num_programs axis")
        if axis not in (0, 1, 2):
            raise ValueError(f"num_programs axis must be 0, 1, or 2 but got {axis}")
        return self.create("tt.get_num_programs", [], tl.int32, {"axis": axis})

    def arange(self, start, end) -> tl.tensor:
        start = _const_int(start, "arange's start")
        end = _const_int(end, "arange's end")
        if start >= end:
            raise ValueError(f"arange's end argument ({end}) must be greater than the start argument ({start})")
        n = end - start
        if n & (n - 1):   # Triton's message; the numbers in a note (the compile error shows notes)
            raise _noted(ValueError("arange's range must be a power of 2"), f"got {n} (end {end} - start {start})")
        if n > tl.TILEJIT_MAX_TENSOR_NUMEL:
            raise ValueError(f"arange's range ({n}) exceeds the maximum tensor numel ({tl.TILEJIT_MAX_TENSOR_NUMEL})")
        if start < 0 or end > 2**31 - 1:
            raise ValueError("arange's start and end must fit in int32 and be non-negative")
        return self.create("tt.make_range", [], tl.block_type(tl.int32, [n]), {"start": start, "end": end})

    def full(self, shape, value, dtype) -> tl.tensor:
        dtype = tl._unwrap_if_constexpr(dtype)
        if not isinstance(dtype, tl.dtype):
            raise TypeError(f"full: dtype must be a tl.dtype, got {dtype!r}")
        shape = tl._unwrap_if_constexpr(shape)
        if isinstance(shape, int):
            shape = [shape]
        shape = [_const_int(s, "each dimension of a shape") for s in shape]
        for i, s in enumerate(shape):
            if s <= 0 or s & (s - 1):   # (newer) Triton's message, the shape in a note
                raise _noted(ValueError(f"Shape element {i} must be a power of 2"), f"shape {shape}")
        value = tl._unwrap_if_constexpr(value)
        if dtype.is_fp8e4b15() and not isinstance(value, tl.tensor):
            # No float constant of an i8 type: make the float32 constant and convert its bits.
            return self.cast(self.full(shape, value, tl.float32), dtype)
        if isinstance(value, tl.tensor):
            if value.type.is_block():
                raise ValueError("full: value must be a scalar")
            return self.splat(self.cast(value, dtype), shape) if shape else self.cast(value, dtype)
        if not shape:
            return self.scalar_constant(value, dtype)
        ty = tl.block_type(dtype, shape)
        return tl.tensor(self.builder.constant(self.constant_attr(value, dtype), ty.to_ir()), ty)

    # -- loads and stores -------------------------------------------------------------------------
    @staticmethod
    def _is_block_ptr(ptr) -> bool:
        ty = ptr.type
        return ty.is_ptr() and isinstance(ty.element_ty, tl.block_type)

    def _boundary_check(self, boundary_check, block_shape) -> List[int]:
        boundary_check = tl._unwrap_if_constexpr(boundary_check)
        if boundary_check is None:
            return []
        if not isinstance(boundary_check, (list, tuple)):
            boundary_check = [boundary_check]
        dims = []
        for d in boundary_check:
            d = _const_int(d, "each boundary_check dimension")
            if not 0 <= d < len(block_shape):
                raise ValueError(f"boundary_check dimension {d} is out of range for a block of rank "
                                 f"{len(block_shape)}")
            dims.append(d)
        return sorted(set(dims))

    def load(self, ptr, mask=None, other=None, boundary_check=(), padding_option="", cache_modifier="",
             eviction_policy="", volatile=False) -> tl.tensor:
        ptr = tl._unwrap_if_constexpr(ptr)
        if not isinstance(ptr, tl.tensor) or not ptr.type.scalar.is_ptr():
            what = ptr.type.scalar if isinstance(ptr, tl.tensor) else type(ptr).__name__
            raise ValueError(f"unsupported ptr type {what} in `tl.load`: expected a pointer")
        mask, other = tl._unwrap_if_constexpr(mask), tl._unwrap_if_constexpr(other)
        padding = tl._unwrap_if_constexpr(padding_option) or ""
        attrs = {"cache": _lookup(_LOAD_CACHE, cache_modifier, "load cache_modifier"),
                 "evict": _lookup(_EVICTION, eviction_policy, "eviction_policy"),
                 "is_volatile": bool(tl._unwrap_if_constexpr(volatile))}
        if self._is_block_ptr(ptr):
            if mask is not None or other is not None:
                raise ValueError("`mask` and `other` arguments cannot be specified for loading block pointers")
            block = ptr.type.element_ty
            if padding not in ("", "zero", "nan"):
                raise ValueError(f"padding_option must be '', 'zero' or 'nan', got {padding!r}")
            if padding == "nan" and not block.scalar.is_floating():
                raise ValueError("padding option 'nan' is not supported for integer blocks")
            attrs["boundary_check"] = self._boundary_check(boundary_check, block.shape)
            attrs["padding"] = padding
            return self.create("tt.load", [ptr], block, attrs)
        if tl._unwrap_if_constexpr(boundary_check) not in (None, (), []):
            raise ValueError("`boundary_check` is only supported for block pointers (tl.make_block_ptr)")
        if padding:
            raise ValueError("`padding_option` is only supported for block pointers (tl.make_block_ptr)")
        if mask is None and other is not None:
            raise ValueError("`other` cannot be provided without `mask`")
        elt = ptr.type.scalar.element_ty
        if mask is not None:
            mask = self.to_tensor(mask)
            if not mask.type.scalar.is_bool():
                mask = self.cast(mask, tl.int1)
            if not ptr.type.is_block() and mask.type.is_block():
                ptr, mask = self.broadcast_values(ptr, mask)
            else:
                ptr, mask = self.broadcast_values(ptr, mask)
        if other is not None:
            # A Python number becomes a constant of the element type directly (no cast op), except a
            # float for an integer element: Triton converts it with fptosi (truncation toward zero).
            direct = isinstance(other, (int, float)) and not elt.is_bool() and \
                not (isinstance(other, float) and elt.is_int())
            other = self.scalar_constant(other, elt) if direct else self.cast(self.to_tensor(other), elt)
            other = self.broadcast_to(other, ptr.type.shape if ptr.type.is_block() else [])
        result_ty = ptr.type.element_ty if not ptr.type.is_block() else tl.block_type(elt, ptr.type.shape)
        if elt.is_bool():
            # i1 lives in memory as one byte: load i8 and compare with zero, as Triton does.
            ptr8 = self.cast(ptr, tl.pointer_type(tl.int8, ptr.type.scalar.address_space))
            other8 = self.cast(other, tl.int8) if other is not None else None
            loaded = self.load(ptr8, mask, other8, cache_modifier=cache_modifier,
                               eviction_policy=eviction_policy, volatile=volatile)
            return self.cast(loaded, tl.int1)
        operands = [ptr] + ([mask] if mask is not None else []) + ([other] if other is not None else [])
        return self.create("tt.load", operands, result_ty, attrs)

    def store(self, ptr, value, mask=None, boundary_check=(), cache_modifier="", eviction_policy=""):
        ptr = tl._unwrap_if_constexpr(ptr)
        if not isinstance(ptr, tl.tensor) or not ptr.type.scalar.is_ptr():
            what = ptr.type.scalar if isinstance(ptr, tl.tensor) else type(ptr).__name__
            raise ValueError(f"unsupported ptr type {what} in `tl.store`: expected a pointer")
        if ptr.type.scalar.is_const():
            raise ValueError("Cannot store to a constant pointer")
        attrs = {"cache": _lookup(_STORE_CACHE, cache_modifier, "store cache_modifier"),
                 "evict": _lookup(_EVICTION, eviction_policy, "eviction_policy")}
        mask = tl._unwrap_if_constexpr(mask)
        if self._is_block_ptr(ptr):
            if mask is not None:
                raise ValueError("`mask` cannot be specified for storing to block pointers")
            block = ptr.type.element_ty
            value = self.broadcast_to(self.cast(self.to_tensor(value), block.scalar), block.shape)
            attrs["boundary_check"] = self._boundary_check(boundary_check, block.shape)
            self.create_op("tt.store", [ptr, value], [], attrs)
            return None
        if tl._unwrap_if_constexpr(boundary_check) not in (None, (), []):
            raise ValueError("`boundary_check` is only supported for block pointers (tl.make_block_ptr)")
        value = self.to_tensor(value)
        elt = ptr.type.scalar.element_ty
        if value.type.is_block() and not ptr.type.is_block():
            ptr = self.broadcast_to(ptr, value.type.shape)
        if mask is not None:
            mask = self.cast(self.to_tensor(mask), tl.int1)
            ptr, mask = self.broadcast_values(ptr, mask)
        shape = ptr.type.shape if ptr.type.is_block() else []
        if value.type.is_block() and list(value.type.shape) != list(shape):
            value = self.broadcast_to(value, shape)
        if elt.is_bool():
            elt = tl.int8
            ptr = self.cast(ptr, tl.pointer_type(tl.int8, ptr.type.scalar.address_space))
        value = self.broadcast_to(self.cast(value, elt), shape)
        self.create_op("tt.store", [ptr, value] + ([mask] if mask is not None else []), [], attrs)
        return None

    # -- atomics ------------------------------------------------------------------------------------
    def _atomic_operands(self, ptr, val, mask, sem, scope, op: str):
        ptr = tl._unwrap_if_constexpr(ptr)
        if not isinstance(ptr, tl.tensor) or not ptr.type.scalar.is_ptr() or self._is_block_ptr(ptr):
            raise ValueError(f"atomic_{op}: ptr must be a pointer or a tensor of pointers")
        sem = tl._unwrap_if_constexpr(sem) or "acq_rel"
        scope = tl._unwrap_if_constexpr(scope) or "gpu"
        if sem not in _SEM:
            raise ValueError(f"atomic_{op}: sem must be one of {list(_SEM)}, got {sem!r}")
        if scope not in _SCOPE:
            raise ValueError(f"atomic_{op}: scope must be one of {list(_SCOPE)}, got {scope!r}")
        elt = ptr.type.scalar.element_ty
        if op != "cas":
            # Triton's element rules for read-modify-write atomics (every op but cas): no 16-bit
            # integers, nothing under 16 bits, and fp16/bf16 only for add.
            if elt in (tl.int16, tl.uint16) or elt.primitive_bitwidth < 16:
                raise ValueError(f"atomic_{op} does not support {elt}")
            if elt in (tl.float16, tl.bfloat16) and op != "add":
                raise ValueError(f"atomic_{op} does not support {elt}")
        val = self.to_tensor(val)
        ptr, val = self.broadcast_values(ptr, val)
        val = self.cast(val, elt)
        mask = tl._unwrap_if_constexpr(mask)
        if mask is None:
            shape = ptr.type.shape if ptr.type.is_block() else []
            mask = self.broadcast_to(self.scalar_constant(True, tl.int1), shape)
        mask = self.cast(self.to_tensor(mask), tl.int1)
        ptr, mask = self.broadcast_values(ptr, mask)
        val, mask = self.broadcast_values(val, mask)
        return ptr, val, mask, sem, scope

    def _rmw(self, kind, ptr, val, mask, sem, scope):
        return self.create("tt.atomic_rmw", [ptr, val, mask], val.type,
                           {"atomic_rmw_op": kind, "sem": sem, "scope": scope})

    def atomic_rmw(self, op: str, ptr, val, mask=None, sem=None, scope=None):
        ptr, val, mask, sem, scope = self._atomic_operands(ptr, val, mask, sem, scope, op)
        elt = val.type.scalar
        if op == "add":
            return self._rmw("fadd" if elt.is_floating() else "add", ptr, val, mask, sem, scope)
        if op in ("and", "or", "xor"):
            if not elt.is_int():
                raise ValueError(f"atomic_{op} needs integer elements, got {elt}")
            return self._rmw(op, ptr, val, mask, sem, scope)
        if op == "xchg":
            return self._rmw("xchg", ptr, val, mask, sem, scope)
        if op in ("max", "min"):
            if elt.is_int():
                kind = ("u" if elt.is_int_unsigned() else "") + op
                return self._rmw(kind, ptr, val, mask, sem, scope)
            if elt not in (tl.float32, tl.float64):
                raise ValueError(f"atomic_{op} supports int, fp32 and fp64 elements, got {elt}")
            return self._float_atomic_minmax(op, ptr, val, mask, sem, scope)
        raise ValueError(f"unknown atomic operation {op!r}")

    def _float_atomic_minmax(self, op, ptr, val, mask, sem, scope):
        # IEEE floats order like sign-magnitude integers: for values with a clear sign bit a signed
        # integer max is a float max; for values with the sign bit set an unsigned integer min is (and
        # vice versa for min). As Triton, the path is chosen by the sign *bit*, not by `val >= 0`: -0.0
        # takes the negative path (so max(-1.0, -0.0) is -0.0 and -0.0 < +0.0), and a NaN goes by its
        # sign (+NaN is above +inf, -NaN below -inf), the same on every backend.
        ity = tl.int32 if val.type.scalar.primitive_bitwidth == 32 else tl.int64
        uty = tl.uint32 if ity == tl.int32 else tl.uint64
        iptr = self.bitcast(ptr, tl.pointer_type(ity))
        ival = self.bitcast(val, ity)
        non_negative = self.greater_equal(ival, 0)
        pos_mask = self.and_(mask, non_negative)
        neg_mask = self.and_(mask, self.not_(non_negative))
        pos = self._rmw(op, iptr, ival, pos_mask, sem, scope)
        neg_kind = "umin" if op == "max" else "umax"
        uval = self.bitcast(ival, uty)
        neg = self._rmw(neg_kind, self.bitcast(iptr, tl.pointer_type(uty)), uval, neg_mask, sem, scope)
        merged = self.where(non_negative, pos, self.bitcast(neg, ity))
        return self.bitcast(merged, val.type.scalar)

    def atomic_cas(self, ptr, cmp, val, sem=None, scope=None):
        ptr, val, _mask, sem, scope = self._atomic_operands(ptr, val, None, sem, scope, "cas")
        elt = val.type.scalar
        if elt.primitive_bitwidth not in (16, 32, 64):
            raise ValueError(f"atomic_cas supports 16, 32 and 64-bit elements, got {elt}")
        cmp = self.broadcast_to(self.cast(self.to_tensor(cmp), elt), val.type.shape if val.type.is_block() else [])
        return self.create("tt.atomic_cas", [ptr, cmp, val], val.type, {"sem": sem, "scope": scope})

    # -- atomic load / store (Triton 3.9's tl.atomic_load / tl.atomic_store) ---------------------------
    def _atomic_access(self, ptr, val, mask, sem, scope, op: str, default_sem: str, allowed: tuple):
        """Triton's checks for atomic_load/atomic_store: any integer or float element (an int1
        pointer is accessed as int8), `sem` in `allowed`, a boolean mask broadcast to the pointer."""
        ptr = tl._unwrap_if_constexpr(ptr)
        if not isinstance(ptr, tl.tensor) or not ptr.type.scalar.is_ptr() or self._is_block_ptr(ptr):
            raise ValueError(f"Unsupported ptr type {getattr(ptr, 'type', ptr)!r} in `tl.atomic_{op}`")
        if val is not None and (val.type.is_block() and not ptr.type.is_block()):
            raise ValueError("Value argument cannot be block type if pointer argument is not a block")
        mask = tl._unwrap_if_constexpr(mask)
        if mask is not None:
            mask = self.to_tensor(mask)
            if not ptr.type.is_block() and mask.type.is_block():
                raise ValueError("Mask argument cannot be block type if pointer argument is not a block")
            if not mask.type.scalar.is_bool():
                raise ValueError("Mask must have boolean scalar type")
        elt = ptr.type.scalar.element_ty
        if not (elt.is_int() or elt.is_floating()):
            raise ValueError(f"atomic_{op} only supports integer and floating-point elements")
        sem = tl._unwrap_if_constexpr(sem) or default_sem
        scope = tl._unwrap_if_constexpr(scope) or "gpu"
        if sem not in _SEM:
            raise ValueError(f"atomic_{op}: sem must be one of {list(_SEM)}, got {sem!r}")
        if sem not in allowed:
            raise ValueError(f"atomic_{op} only supports {' and '.join(allowed)} semantics")
        if scope not in _SCOPE:
            raise ValueError(f"atomic_{op}: scope must be one of {list(_SCOPE)}, got {scope!r}")
        if elt.is_bool():
            elt = tl.int8
            ptr = self.cast(ptr, tl.pointer_type(tl.int8, ptr.type.scalar.address_space))
        if val is not None:
            ptr, val = self.broadcast_values(ptr, val)
            val = self.cast(val, elt)
        shape = ptr.type.shape if ptr.type.is_block() else []
        if mask is None:
            mask = self.broadcast_to(self.scalar_constant(True, tl.int1), shape)
        ptr, mask = self.broadcast_values(ptr, mask)
        if val is not None:
            val, mask = self.broadcast_values(val, mask)
        return ptr, val, mask, elt, sem, scope

    def atomic_load(self, ptr, mask=None, sem=None, scope=None):
        scalar = getattr(getattr(tl._unwrap_if_constexpr(ptr), "type", None), "scalar", None)
        reads_bool = scalar is not None and scalar.is_ptr() and scalar.element_ty.is_bool()
        ptr, _, mask, elt, sem, scope = self._atomic_access(ptr, None, mask, sem, scope, "load", "acquire",
                                                            ("acquire", "relaxed"))
        ty = tl.block_type(elt, list(ptr.type.shape)) if ptr.type.is_block() else elt
        result = self.create("tt.atomic_load", [ptr, mask], ty, {"sem": sem, "scope": scope})
        # an int1 pointer was read as int8 (`_atomic_access`): the value is a bool again, as Triton's
        return self.cast(result, tl.int1) if reads_bool else result

    def atomic_store(self, ptr, val, mask=None, sem=None, scope=None):
        val = self.to_tensor(val)
        ptr, val, mask, _elt, sem, scope = self._atomic_access(ptr, val, mask, sem, scope, "store", "release",
                                                               ("release", "relaxed"))
        self.create_op("tt.atomic_store", [ptr, val, mask], [], {"sem": sem, "scope": scope})
        return None

    # -- block pointers and tensor descriptors --------------------------------------------------------
    def _int_list(self, values, dtype, what: str) -> List[tl.tensor]:
        values = tl._unwrap_if_constexpr(values)
        if not isinstance(values, (list, tuple)):
            values = [values]
        out = []
        for v in values:
            t = self.to_tensor(v)
            if t.type.is_block() or not t.type.scalar.is_int():
                raise ValueError(f"{what} must be scalar integers, got {t.type}")
            out.append(self.cast(t, dtype))
        return out

    def make_block_ptr(self, base, shape, strides, offsets, block_shape, order) -> tl.tensor:
        base = tl._unwrap_if_constexpr(base)
        if not isinstance(base, tl.tensor) or not base.type.is_ptr() or base.type.is_block():
            raise ValueError("make_block_ptr: base must be a scalar pointer")
        if self._is_block_ptr(base):
            raise ValueError("make_block_ptr: base is already a block pointer")
        block_shape = _const_int_list(block_shape, "make_block_ptr block_shape")
        order = _const_int_list(order, "make_block_ptr order")
        n = len(block_shape)
        shape_v = self._int_list(shape, tl.int64, "make_block_ptr shape")
        strides_v = self._int_list(strides, tl.int64, "make_block_ptr strides")
        offsets_v = self._int_list(offsets, tl.int32, "make_block_ptr offsets")
        if not (len(shape_v) == len(strides_v) == len(offsets_v) == len(order) == n):
            raise ValueError("make_block_ptr: shape, strides, offsets, block_shape and order must have the "
                             f"same length (got {len(shape_v)}, {len(strides_v)}, {len(offsets_v)}, {n}, "
                             f"{len(order)})")
        if sorted(order) != list(range(n)):
            raise ValueError(f"make_block_ptr: order {order} must be a permutation of {list(range(n))}")
        for s in block_shape:
            if s <= 0 or s & (s - 1):
                raise ValueError(f"make_block_ptr: block_shape {block_shape} must be powers of 2")
        elt = base.type.element_ty
        ty = tl.pointer_type(tl.block_type(elt, block_shape), base.type.address_space)
        return self.create("tt.make_block_ptr", [base] + shape_v + strides_v + offsets_v, ty, {"order": order})

    def advance(self, ptr, offsets) -> tl.tensor:
        if not isinstance(ptr, tl.tensor) or not self._is_block_ptr(ptr):
            raise ValueError("advance: the first argument must be a block pointer (tl.make_block_ptr)")
        offs = self._int_list(offsets, tl.int32, "advance offsets")
        if len(offs) != len(ptr.type.element_ty.shape):
            raise ValueError(f"advance: expected {len(ptr.type.element_ty.shape)} offsets, got {len(offs)}")
        return self.create("tt.advance", [ptr] + offs, ptr.type)

    def make_tensor_descriptor(self, base, shape, strides, block_shape, padding: str = "zero"):
        base = tl._unwrap_if_constexpr(base)
        if padding not in ("zero", "nan"):
            raise ValueError(f"make_tensor_descriptor: padding_option must be 'zero' or 'nan', got {padding!r}")
        if padding == "nan" and not base.type.element_ty.is_floating():
            raise ValueError("make_tensor_descriptor: padding_option 'nan' needs a floating-point tensor")
        if not isinstance(base, tl.tensor) or not base.type.is_ptr() or self._is_block_ptr(base):
            raise ValueError("make_tensor_descriptor: base must be a scalar pointer")
        block_shape = [_const_int(s, "block_shape entries") for s in tl._unwrap_if_constexpr(block_shape)]
        element_bytes = base.type.element_ty.primitive_bitwidth // 8
        if block_shape and block_shape[-1] * element_bytes < 16:
            # Triton's rule (a TMA box row is at least 16 bytes), kept on every target for parity.
            raise ValueError(f"Descriptor block shape must have at least 16 bytes in the last dimension, but got "
                             f"{block_shape[-1]} * {element_bytes} = {block_shape[-1] * element_bytes} bytes")
        shape_v = self._int_list(shape, tl.int32, "make_tensor_descriptor shape")
        strides_v = self._int_list(strides, tl.int64, "make_tensor_descriptor strides")
        if not (len(shape_v) == len(strides_v) == len(block_shape)):
            raise ValueError("make_tensor_descriptor: shape, strides and block_shape must have the same length")
        block = tl.block_type(base.type.element_ty, block_shape)
        handle = self.builder.create1("tt.make_tensor_descriptor",
                                      [base.handle] + [v.handle for v in shape_v + strides_v],
                                      ir.TensorDescType(block.to_ir()), {"padding": "nan"} if padding == "nan" else None)
        return tl.tensor_descriptor(handle, block, shape_v, strides_v, base, padding)

    def descriptor_load(self, desc, offsets):
        if not isinstance(desc, tl.tensor_descriptor):
            raise ValueError("load_tensor_descriptor: the first argument must be a tensor descriptor")
        offs = self._int_list(offsets, tl.int32, "descriptor offsets")
        if len(offs) != len(desc.block_type.shape):
            raise ValueError(f"descriptor load: expected {len(desc.block_type.shape)} offsets, got {len(offs)}")
        value = self.builder.create1("tt.descriptor_load", [desc.handle] + [o.handle for o in offs],
                                     desc.block_type.to_ir())
        return tl.tensor(value, desc.block_type)

    def descriptor_store(self, desc, value, offsets):
        if not isinstance(desc, tl.tensor_descriptor):
            raise ValueError("store_tensor_descriptor: the first argument must be a tensor descriptor")
        offs = self._int_list(offsets, tl.int32, "descriptor offsets")
        if len(offs) != len(desc.block_type.shape):
            raise ValueError(f"descriptor store: expected {len(desc.block_type.shape)} offsets, got {len(offs)}")
        value = self.broadcast_to(self.cast(self.to_tensor(value), desc.dtype), desc.block_type.shape)
        self.builder.create("tt.descriptor_store", [desc.handle, value.handle] + [o.handle for o in offs], [])
        return None

    # Triton's dtype sets for descriptor reductions (TMA `cp.reduce.async.bulk.tensor` on sm_90)
    _DESCRIPTOR_ATOMIC_DTYPES = {
        "add": ("uint32", "int32", "uint64", "fp32", "fp16", "bf16"),
        "min": ("uint32", "int32", "uint64", "int64", "fp16", "bf16"),
        "max": ("uint32", "int32", "uint64", "int64", "fp16", "bf16"),
        "and": ("uint32", "int32", "uint64", "int64"), "or": ("uint32", "int32", "uint64", "int64"),
        "xor": ("uint32", "int32", "uint64", "int64"),
    }

    def descriptor_atomic(self, op: str, desc, value, offsets):
        """`desc.atomic_<op>(offsets, value)`: each element of the block at `offsets` combined into
        memory atomically (relaxed, GPU scope, no result: Triton's descriptor reductions); elements
        outside the tensor's shape are skipped, as a descriptor store skips them. Built from the
        descriptor's base, shape and strides as `tl.atomic_<op>` on a block of pointers, so every
        backend runs it (and the interpreter's sanitizer sees each element)."""
        if not isinstance(desc, tl.tensor_descriptor) or desc.base is None:
            raise ValueError(f"descriptor atomic_{op}: the first argument must be a tensor descriptor")
        if desc.dtype.name not in self._DESCRIPTOR_ATOMIC_DTYPES[op]:
            raise ValueError(f"descriptor atomic_{op}: unsupported element type {desc.dtype} (Triton's: "
                             f"{', '.join(self._DESCRIPTOR_ATOMIC_DTYPES[op])})")
        # fp16/bf16 min/max: Triton takes them only where its TMA reduces them (sm_90 and later); a
        # backend says so in its options
        half_minmax = op in ("min", "max") and desc.dtype in (tl.float16, tl.bfloat16)
        if half_minmax and not getattr(self.options, "descriptor_minmax_16bit", False):
            raise ValueError(f"descriptor atomic_{op}: {desc.dtype} needs a target with native descriptor "
                             "reductions (NVIDIA sm_90 or later), as in Triton")
        block = list(desc.block_type.shape)
        offs = self._int_list(offsets, tl.int32, "descriptor offsets")
        if len(offs) != len(block):
            raise ValueError(f"descriptor atomic_{op}: expected {len(block)} offsets, got {len(offs)}")
        ptr, mask = desc.base, None
        for d, size in enumerate(block):
            index = self.add(self.arange(0, size), offs[d])
            for axis in range(len(block)):
                if axis != d:
                    index = self.expand_dims(index, axis)
            ptr = self.add(ptr, self.mul(index, desc.strides[d]))
            inside = self.logical_and(self.greater_equal(index, 0), self.less_than(index, desc.shape[d]))
            mask = inside if mask is None else self.logical_and(mask, inside)
        ptr = self.broadcast_to(ptr, block)
        mask = self.broadcast_to(mask, block)
        value = self.broadcast_to(self.cast(self.to_tensor(value), desc.dtype), block)
        if half_minmax:   # tl.atomic_min/max refuse 16-bit floats: the op is made here
            self._rmw(op, ptr, value, mask, "relaxed", "gpu")
            return None
        self.atomic_rmw(op, ptr, value, mask, "relaxed", "gpu")
        return None

    # -- dot -------------------------------------------------------------------------------------------
    def dot(self, a, b, acc=None, input_precision=None, allow_tf32=None, max_num_imprecise_acc=None,
            out_dtype=tl.float32) -> tl.tensor:
        a, b = self.to_tensor(a), self.to_tensor(b)
        out_dtype = tl._unwrap_if_constexpr(out_dtype) or tl.float32
        if not a.type.is_block() or not b.type.is_block():
            raise ValueError("dot: both operands must be tensors")
        sa, sb = list(a.type.shape), list(b.type.shape)
        if len(sa) != len(sb) or len(sa) < 2:
            raise ValueError(f"dot: both operands must have the same rank >= 2 (the leading axes batch a 2-D "
                             f"product), got shapes {sa} and {sb}")
        if len(sa) >= 4:
            return self._dot_many_batch_axes(a, b, acc, input_precision, allow_tf32, max_num_imprecise_acc,
                                             out_dtype)
        if sa[-1] != sb[-2]:
            raise ValueError(f"dot: first input shape ({sa}) and second input shape ({sb}) are not "
                             f"compatible for matmul (last dimension of the first ({sa[-1]}) must equal the "
                             f"second-to-last of the second ({sb[-2]}))")
        if len(sa) == 3 and sa[0] != sb[0]:
            raise ValueError(f"dot: batch dimensions differ: {sa[0]} and {sb[0]}")
        if a.type.scalar.is_fp8e4b15() or b.type.scalar.is_fp8e4b15():
            # No MMA reads float8e4b15: as Triton does where fp8 is not native, multiply in float16
            # (exact: every float8e4b15 value is a float16 value).
            a, b = self.cast(a, tl.float16), self.cast(b, tl.float16)
        ta, tb = a.type.scalar, b.type.scalar
        if ta.is_fp8() and tb.is_fp8():
            pass
        elif ta != tb:
            raise TypeError(f"dot: both operands must have the same dtype, got {ta} and {tb}")
        if ta.is_int():
            if ta not in (tl.int8, tl.uint8):
                raise TypeError(f"dot: integer operands must be int8, got {ta}")
            ret_scalar = tl.int32
        elif ta.is_floating():
            if out_dtype not in (tl.float16, tl.bfloat16, tl.float32, tl.float64):
                raise TypeError(f"dot: out_dtype must be a float type, got {out_dtype}")
            # As Triton's semantic.dot: fp32/bf16 operands always accumulate in fp32 and fp64 operands
            # in fp64, whatever out_dtype says (out_dtype=float32 on fp64 inputs gives an fp64 dot);
            # only fp16/fp8 operands take out_dtype as their accumulator type.
            # (out_dtype=bfloat16, an error in Triton, is kept as a bf16 accumulator for 16/8-bit inputs.)
            if ta == tl.float64:
                ret_scalar = tl.float64
            elif out_dtype == tl.bfloat16:
                if ta == tl.float32:
                    raise TypeError(f"dot: out_dtype {out_dtype} needs fp16/bf16/fp8 inputs, got {ta}")
                ret_scalar = out_dtype
            elif ta in (tl.float32, tl.bfloat16):
                ret_scalar = tl.float32
            else:
                ret_scalar = out_dtype
        else:
            raise TypeError(f"dot: unsupported operand type {ta}")
        shape = sa[:-1] + [sb[-1]]
        ret_ty = tl.block_type(ret_scalar, shape)
        precision = self.dot_input_precision(input_precision, allow_tf32)
        acc = tl._unwrap_if_constexpr(acc)
        if acc is None:
            acc = self.full(shape, 0, ret_scalar)
        else:
            acc = self.to_tensor(acc)
            if not acc.type.is_block() or list(acc.type.shape) != shape:
                raise ValueError(f"dot: accumulator shape {list(acc.type.shape) if acc.type.is_block() else []}"
                                 f" does not match the result shape {shape}")
            if acc.type.scalar.is_floating() != ret_scalar.is_floating():
                raise TypeError(f"dot: accumulator type {acc.type.scalar} does not match operand type {ta}")
            if ta == tl.float64 and acc.type.scalar != tl.float64:
                raise TypeError(f"dot: fp64 operands accumulate in fp64, got a {acc.type.scalar} accumulator")
            ret_ty = acc.type
        imprecise = tl._unwrap_if_constexpr(max_num_imprecise_acc) or 0
        K = sa[-1]
        if imprecise > K and ta.is_fp8() and tb.is_fp8():   # Triton's check and message
            raise ValueError(f"max_num_imprecise_acc ({imprecise}) must be <= K ({K})")
        # Triton's attribute names: `inputPrecision = tf32, maxNumImpreciseAcc = 0`.
        return self.create("tt.dot", [a, b, acc], ret_ty,
                           {"inputPrecision": precision, "maxNumImpreciseAcc": int(imprecise)})

    def _dot_many_batch_axes(self, a, b, acc, input_precision, allow_tf32, max_num_imprecise_acc,
                             out_dtype) -> tl.tensor:
        """A dot with several batch axes, [*batch, M, K] x [*batch, K, N], as Triton 3.x builds it: the
        batch axes reshaped (in order, no reordering) into one, a 3-D `tt.dot`, and its result reshaped
        back. Only 2-D and 3-D dots reach the IR, so no backend needs another form."""
        sa, sb = list(a.type.shape), list(b.type.shape)
        if sa[:-2] != sb[:-2]:
            raise ValueError(f"dot: batch dimensions differ: {sa[:-2]} and {sb[:-2]}")
        batch = math.prod(sa[:-2])
        shape = sa[:-1] + [sb[-1]]
        acc = tl._unwrap_if_constexpr(acc)
        if acc is not None:
            acc = self.to_tensor(acc)
            if not acc.type.is_block() or list(acc.type.shape) != shape:
                raise ValueError(f"dot: accumulator shape {list(acc.type.shape) if acc.type.is_block() else []}"
                                 f" does not match the result shape {shape}")
            acc = self.reshape(acc, [batch] + shape[-2:])
        out = self.dot(self.reshape(a, [batch] + sa[-2:]), self.reshape(b, [batch] + sb[-2:]), acc,
                       input_precision, allow_tf32, max_num_imprecise_acc, out_dtype)
        return self.reshape(out, shape)

    def dot_input_precision(self, input_precision, allow_tf32) -> str:
        """How an fp32 x fp32 `tl.dot` uses the matrix units, chosen as Triton 3.x does: the argument;
        else TILEJIT_F32_DEFAULT / TRITON_F32_DEFAULT (which overrides `allow_tf32`); else "tf32" where the
        target allows it and `allow_tf32` is not False, else "ieee". A backend states what its targets
        allow through its options (`allowed_dot_input_precisions`); without one, Triton's NVIDIA list.
        The precision is recorded for every dot (Triton does too) and only matters for fp32 inputs:
        "tf32" (inputs cut to 10 mantissa bits), "tf32x3" (3 tf32 products of a big/small split),
        "bf16x3"/"bf16x6" (3 or 6 bf16 products), "ieee" (full fp32)."""
        from ..config import knobs
        allow_tf32 = tl._unwrap_if_constexpr(allow_tf32)
        precision = tl._unwrap_if_constexpr(input_precision)
        if precision is not None and allow_tf32 is not None:
            raise ValueError("dot: only one of input_precision and allow_tf32 can be specified")
        allowed = tuple(getattr(self.options, "allowed_dot_input_precisions", None) or DOT_INPUT_PRECISIONS)
        if precision is None:
            supports_tf32 = "tf32" in allowed
            precision = knobs.fp32_default or ("tf32" if supports_tf32 and allow_tf32 in (None, True) else "ieee")
        if not isinstance(precision, str) or precision.lower() not in allowed:
            raise ValueError(f"dot: input_precision must be one of {list(allowed)}, got {precision!r}")
        return precision.lower()

    # -- reductions and scans --------------------------------------------------------------------------
    def _region_op(self, name, inputs: Sequence[tl.tensor], axis, combine: Callable, terminator: str,
                   attrs: dict, result_types: List[tl.dtype]):
        block = ir.Block([t.type.scalar.to_ir() for t in inputs] * 2)
        saved = (self.builder.block, self.builder.index)
        self.builder.set_insertion_point_to_end(block)
        try:
            args = [tl.tensor(arg, t.type.scalar) for arg, t in zip(block.args, list(inputs) * 2)]
            results = combine(args)
            results = list(results) if isinstance(results, (tuple, list)) else [results]
            if len(results) != len(inputs):
                raise ValueError(f"the combine function returned {len(results)} values, expected {len(inputs)}")
            handles = []
            for r, t in zip(results, inputs):
                r = self.to_tensor(r)
                if r.type.is_block():
                    raise ValueError("the combine function must return scalars")
                if r.type.scalar != t.type.scalar:
                    r = self.cast(r, t.type.scalar)
                handles.append(r.handle)
            self.builder.create(terminator, handles, [])
        finally:
            self.builder.block, self.builder.index = saved
        op = self.create_op(name, list(inputs), [t.to_ir() for t in result_types], attrs, [ir.Region([block])])
        return [tl.tensor(v, t) for v, t in zip(op.results, result_types)]

    def _normalize_axis(self, axis, rank: int) -> int:
        axis = _const_int(axis, "axis")
        if not -rank <= axis < rank:
            raise ValueError(f"axis {axis} is out of range for a tensor of rank {rank}")
        return axis + rank if axis < 0 else axis

    def reduction(self, inputs, axis, combine: Callable, keep_dims=False):
        single = not isinstance(inputs, (tuple, list))
        inputs = [self.to_tensor(t) for t in ([inputs] if single else inputs)]
        axis = tl._unwrap_if_constexpr(axis)
        keep_dims = bool(tl._unwrap_if_constexpr(keep_dims))
        for t in inputs:
            if not t.type.is_block():
                raise ValueError("reduce: inputs must be tensors, got a scalar")
        original_rank = len(inputs[0].type.shape)
        reduce_all = axis is None
        if reduce_all:
            inputs = [self.reshape(t, [t.type.numel], can_reorder=True) for t in inputs]
            axis = 0
        shape = list(inputs[0].type.shape)
        for t in inputs:
            if list(t.type.shape) != shape:
                raise ValueError(f"reduce: all inputs must have the same shape, got {shape} and {list(t.type.shape)}")
        axis = self._normalize_axis(axis, len(shape))
        out_shape = shape[:axis] + shape[axis + 1:]
        result_types = [tl.block_type(t.type.scalar, out_shape) if out_shape else t.type.scalar for t in inputs]
        results = self._region_op("tt.reduce", inputs, axis, combine, "tt.reduce.return", {"axis": axis},
                                  result_types)
        if keep_dims:
            # Triton: reducing every axis with keep_dims keeps the input's rank (all sizes 1).
            for _ in range(original_rank if reduce_all else 1):
                results = [self.expand_dims(r, 0 if reduce_all else axis) for r in results]
        return results[0] if single else tuple(results)

    def scan(self, inputs, axis, combine: Callable, reverse=False):
        single = not isinstance(inputs, (tuple, list))
        inputs = [self.to_tensor(t) for t in ([inputs] if single else inputs)]
        for t in inputs:
            if not t.type.is_block():
                raise ValueError("associative_scan: inputs must be tensors, got a scalar")
        axis = self._normalize_axis(axis, len(inputs[0].type.shape))
        results = self._region_op("tt.scan", inputs, axis, combine, "tt.scan.return",
                                  {"axis": axis, "reverse": bool(tl._unwrap_if_constexpr(reverse))},
                                  [t.type for t in inputs])
        return results[0] if single else tuple(results)

    def histogram(self, x, num_bins, mask=None):
        x = self.to_tensor(x)
        num_bins = _const_int(num_bins, "histogram num_bins")
        if not x.type.is_block() or len(x.type.shape) != 1:
            raise ValueError("histogram: input must be a 1-D tensor")
        if not x.type.scalar.is_int():
            raise TypeError(f"histogram: input must be integers, got {x.type.scalar}")
        operands = [x]
        mask = tl._unwrap_if_constexpr(mask)
        if mask is not None:
            operands.append(self.broadcast_to(self.cast(self.to_tensor(mask), tl.int1), x.type.shape))
        return self.create("tt.histogram", operands, tl.block_type(tl.int32, [num_bins]))

    def gather(self, src, index, axis):
        src, index = self.to_tensor(src), self.to_tensor(index)
        if not src.type.is_block() or not index.type.is_block():
            raise ValueError("gather: source and index must be tensors")
        rank = len(src.type.shape)
        if len(index.type.shape) != rank:
            raise ValueError("gather: source and index must have the same rank")
        axis = self._normalize_axis(axis, rank)
        for d in range(rank):
            if d != axis and index.type.shape[d] != src.type.shape[d]:
                raise ValueError(f"gather: index dimension {d} ({index.type.shape[d]}) must match the source "
                                 f"({src.type.shape[d]})")
        if not index.type.scalar.is_int():
            raise TypeError("gather: index must be integers")
        return self.create("tt.gather", [src, index], tl.block_type(src.type.scalar, index.type.shape),
                           {"axis": axis})

    # -- debug and hints --------------------------------------------------------------------------------
    def device_print(self, prefix: str, args, hex=False):
        values = [self.to_tensor(a) for a in args]
        signed = [1 if v.type.scalar.is_int_signed() else 0 for v in values]
        self.create_op("tt.print", values, [], {"prefix": prefix, "hex": bool(hex), "is_signed": signed})

    def device_assert(self, cond, msg: str = "", mask=None):
        cond = self.cast(self.to_tensor(cond), tl.int1)
        mask = tl._unwrap_if_constexpr(mask)
        if mask is not None:
            cond = self.or_(cond, self.not_(self.cast(self.to_tensor(mask), tl.int1)))
        self.create_op("tt.assert", [cond], [], {"message": str(msg)})

    def debug_barrier(self):
        self.create_op("gpu.barrier", [], [])

    def set_hint(self, x, attr: str, values):
        values = _const_int_list(values, attr + " values")
        x = self.to_tensor(x)
        rank = len(x.type.shape) if x.type.is_block() else 1
        if len(values) != rank:
            raise ValueError(f"{attr}: expected {rank} values (one per dimension), got {len(values)}")
        owner = x.handle.owner
        if isinstance(owner, ir.Operation):
            owner.attrs[attr] = values
        return x

    def assume(self, cond):
        cond = self.cast(self.to_tensor(cond), tl.int1)
        self.create_op("tt.assume", [cond], [])
