"""Helpers the generated NumPy programs call for everything longer than one NumPy expression.

Conventions (see codegen.py): a *varying* value has shape (P, *ir_shape), a *uniform* one
`ir_shape`; `act` is the per-program active mask (P,) bool, or None when every program is active.
"""
from __future__ import annotations

import sys

import numpy as np

from . import memory as mx
from . import numerics as nx

_INT64 = np.int64


# ------------------------------------------------------------------------------------------------
# shapes and masks

def spread(x, P: int, shape):
    """A uniform value as a varying one (a broadcast view, no copy); varying values pass through."""
    x = np.asarray(x)
    if x.ndim > len(shape):
        return x
    if P == 1:
        return x.reshape((1,) + x.shape)
    return np.broadcast_to(x, (P,) + tuple(shape))


def splat_varying(x, shape):
    """tt.splat of a per-program scalar (P,) to (P, *shape)."""
    x = np.asarray(x)
    return np.broadcast_to(x.reshape(x.shape + (1,) * len(shape)), x.shape + tuple(shape))


def cond_for(c, rank: int):
    """A per-program condition (P,) shaped to select between values of IR rank `rank`."""
    c = np.asarray(c)
    return c.reshape(c.shape + (1,) * rank) if c.ndim else c


def and_mask(act, c):
    """Active programs of a branch: the enclosing mask and a per-program condition (P,)."""
    c = np.asarray(c, dtype=np.bool_)
    return c if act is None else act & c


def and_not_mask(act, c):
    c = ~np.asarray(c, dtype=np.bool_)
    return c if act is None else act & c


def merge(c, a, b, rank: int):
    """Per program: `a` where `c` (P,) holds, else `b`. Tuples (block pointers) merge per component.
    `b` None means "no value yet" (the first exit of a divergent while loop)."""
    if isinstance(a, tuple):
        return tuple(merge(c, x, y if b is not None else None, 0 if not isinstance(x, tuple) else rank)
                     for x, y in zip(a, b if b is not None else a))
    if b is None:
        a = np.asarray(a)
        return np.broadcast_to(a, np.shape(c) + a.shape[a.ndim - rank:] if rank else np.shape(c))
    return np.where(cond_for(c, rank), a, b)


def active_programs(act, P: int):
    return np.ones(P, np.bool_) if act is None else act.copy()


def addptr(ptr, offset, size: int):
    """tt.addptr: `ptr + offset * size` in int64, in two passes and one allocation."""
    scaled = np.multiply(offset, size, dtype=np.int64)
    if type(scaled) is np.ndarray and scaled.shape == np.broadcast_shapes(scaled.shape, np.shape(ptr)):
        return np.add(scaled, ptr, out=scaled)
    return scaled + ptr


# ------------------------------------------------------------------------------------------------
# loops

def irange(lb, ub, step, dtype):
    """Induction values of a uniform scf.for; a non-positive step runs no iteration."""
    lb, ub, step = int(lb), int(ub), int(step)
    if step <= 0:
        return
    for i in range(lb, ub, step):
        yield dtype(i)


def trip_count(lb, ub, step):
    """Per-program iteration counts of a divergent scf.for (int64, 0 for empty or step <= 0)."""
    lb, ub, step = (np.asarray(x).astype(np.int64) for x in (lb, ub, step))
    safe = np.where(step > 0, step, 1)
    trips = np.where((step > 0) & (ub > lb), (ub - lb + safe - 1) // safe, 0)
    return trips


def iv_at(lb, step, k: int, dtype):
    return (np.asarray(lb).astype(np.int64) + np.asarray(step).astype(np.int64) * k).astype(dtype)


# ------------------------------------------------------------------------------------------------
# reductions and scans

_KNOWN_REDUCE = {"add": np.add, "mul": np.multiply, "fmax": np.fmax, "fmin": np.fmin, "max": np.maximum,
                 "min": np.minimum, "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}


def reduce_known(kind: str, x, axis: int, width: int = 0):
    """A reduction whose combiner is one NumPy ufunc (umax/umin reduce the unsigned view)."""
    x = np.asarray(x)
    if kind in ("umax", "umin"):
        u = nx.unsigned(x, width)
        r = (np.maximum if kind == "umax" else np.minimum).reduce(u, axis=axis)
        return np.asarray(r).view(x.dtype)
    return _KNOWN_REDUCE[kind].reduce(x, axis=axis, dtype=x.dtype)


def reduce_tree(combine, xs, axis: int):
    """Reduce the tuple of arrays `xs` along `axis` with a region's combine function, as a tree:
    log2(n) vectorised steps, each combining the first half with the second half."""
    xs = [np.moveaxis(np.asarray(x), axis, -1) for x in xs]
    while xs[0].shape[-1] > 1:
        n = xs[0].shape[-1]
        half = n // 2
        left = [x[..., :half] for x in xs]
        right = [x[..., half:2 * half] for x in xs]
        combined = [np.asarray(c) for c in _as_tuple(combine(*left, *right))]
        if n % 2:
            combined = [np.concatenate([c, x[..., 2 * half:]], axis=-1) for c, x in zip(combined, xs)]
        xs = [c.astype(x.dtype, copy=False) for c, x in zip(combined, xs)]
    return tuple(x[..., 0] for x in xs)


def _as_tuple(v):
    return v if isinstance(v, tuple) else (v,)


_KNOWN_SCAN = {"add": np.add, "mul": np.multiply, "fmax": np.fmax, "fmin": np.fmin, "max": np.maximum,
               "min": np.minimum, "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}


def scan_known(kind: str, x, axis: int, reverse: bool, width: int = 0):
    x = np.asarray(x)
    if reverse:
        x = np.flip(x, axis)
    if kind in ("umax", "umin"):
        u = nx.unsigned(x, width)
        r = (np.maximum if kind == "umax" else np.minimum).accumulate(u, axis=axis).view(x.dtype)
    else:
        r = _KNOWN_SCAN[kind].accumulate(x, axis=axis, dtype=x.dtype)
    return np.flip(r, axis) if reverse else r


def scan_tree(combine, xs, axis: int, reverse: bool):
    """Inclusive scan with a region's combine function (Hillis-Steele: log2(n) vectorised steps)."""
    xs = [np.moveaxis(np.asarray(x), axis, -1) for x in xs]
    if reverse:
        xs = [np.flip(x, -1) for x in xs]
    n = xs[0].shape[-1]
    d = 1
    while d < n:
        earlier = [x[..., :-d] for x in xs]
        later = [x[..., d:] for x in xs]
        combined = _as_tuple(combine(*earlier, *later))
        xs = [np.concatenate([x[..., :d], np.asarray(c).astype(x.dtype, copy=False)], axis=-1)
              for x, c in zip(xs, combined)]
        d *= 2
    if reverse:
        xs = [np.flip(x, -1) for x in xs]
    return tuple(np.moveaxis(x, -1, axis) for x in xs)


# ------------------------------------------------------------------------------------------------
# tensor ops

def dot(a, b, c, a_fmt: str, b_fmt: str, c_fmt: str, precision: str, c_dtype):
    """tt.dot: fp16/bf16/fp8 inputs multiply exactly and accumulate in fp32; ints in int32."""
    a, b = np.asarray(a), np.asarray(b)
    if a_fmt.startswith("i"):
        acc = np.matmul(a.astype(np.int64), b.astype(np.int64))
        return (acc + np.asarray(c).astype(np.int64)).astype(c_dtype)
    wide = np.float64 if "f64" in (a_fmt, b_fmt) else np.float32
    fa = np.asarray(nx.decode_float(a, a_fmt)).astype(wide, copy=False)
    fb = np.asarray(nx.decode_float(b, b_fmt)).astype(wide, copy=False)
    addend = np.asarray(nx.decode_float(c, c_fmt)).astype(wide, copy=False)
    if a_fmt == "f32" and b_fmt == "f32" and c_fmt == "f32":  # input precision: the GPU's numerics
        return nx.dot_f32(fa, fb, addend, precision)
    acc = np.matmul(fa, fb)
    if acc.ndim >= addend.ndim and acc.shape[acc.ndim - addend.ndim:] == addend.shape:
        acc += addend  # `acc` is fresh from matmul: accumulate in place, no third tile allocated
    else:
        acc = acc + addend
    if acc.dtype == c_dtype:
        return acc  # an f32 (f64) accumulator needs no rounding
    return nx.encode_float(acc, c_fmt)


def histogram(x, mask, bins: int, dtype, varying: bool):
    """Per program: counts of the values 0..bins-1 (others ignored)."""
    x = np.asarray(x).astype(np.int64)
    valid = (x >= 0) & (x < bins)
    if mask is not None:
        valid &= np.asarray(mask)
    if not varying:
        return np.bincount(x[valid], minlength=bins).astype(dtype)
    P = x.shape[0]
    flat = (x + np.arange(P, dtype=np.int64).reshape((P,) + (1,) * (x.ndim - 1)) * bins)
    counts = np.bincount(np.broadcast_to(flat, valid.shape)[valid], minlength=P * bins)
    return counts.reshape(P, bins).astype(dtype)


def gather(src, index, axis: int):
    """tt.gather: out[..., i, ...] = src[..., index[..., i, ...], ...] along `axis`; indices are
    clipped to the axis (out-of-range is undefined on the GPU; clipping never touches memory)."""
    src, index = np.asarray(src), np.asarray(index)
    if src.ndim < index.ndim:
        src = np.broadcast_to(src, index.shape[:1] + src.shape)
    elif index.ndim < src.ndim:
        index = np.broadcast_to(index, src.shape[:1] + index.shape)
    index = np.clip(index.astype(np.int64), 0, src.shape[axis] - 1)
    shape = list(np.broadcast_shapes(src.shape[:axis] + (1,) + src.shape[axis + 1:],
                                     index.shape[:axis] + (1,) + index.shape[axis + 1:]))
    shape_src, shape_idx = list(shape), list(shape)
    shape_src[axis], shape_idx[axis] = src.shape[axis], index.shape[axis]
    return np.take_along_axis(np.broadcast_to(src, shape_src), np.broadcast_to(index, shape_idx), axis)


# ------------------------------------------------------------------------------------------------
# memory ops with the program axis

def _scalar_index(mem, slot, ptr, view):
    """The element index of one unmasked scalar pointer into `view` (slot `slot`), or None when the
    access is not a plain in-bounds, aligned one (the general path then reports what is wrong)."""
    if slot <= 0:
        return None
    off = int(ptr) - mx.slot_base(slot)
    size = view.itemsize
    if off < 0 or off % size or off // size >= view.shape[0]:
        return None
    return off // size


def load(mem, site, slot, ptr, mask, other, dtype, shape, P, bool_result=False, aligned=False):
    if type(ptr) is _INT64 and mask is None and not bool_result and mem.sanitizer is None:
        # A scalar load (one-program kernels, counters): no arrays, no broadcasting.
        view = mem.view(slot, dtype) if slot > 0 else None
        index = _scalar_index(mem, slot, ptr, view) if view is not None else None
        if index is not None:
            # A copy: a later store to the address must not change the loaded value.
            return view[index:index + 1].copy() if P == 1 else np.full(P, view[index])
    value = mx.load(mem, site, slot, ptr, mask, other if not bool_result or other is None
                    else np.asarray(other).astype(np.uint8), dtype, len(shape), aligned)
    if bool_result:
        value = value != 0
    return spread(value, P, shape)


def store(mem, site, slot, ptr, value, mask, dtype, shape, aligned=False):
    if type(ptr) is _INT64 and mask is None and slot > 0 and mem.sanitizer is None:
        view = mem.view(slot, dtype)
        index = _scalar_index(mem, slot, ptr, view)
        if index is not None:
            # Every program stores to the one address: the last one wins.
            value = np.asarray(value)
            view[index] = value.reshape(-1)[-1] if value.ndim else value
            return
    mx.store(mem, site, slot, ptr, np.asarray(value).astype(dtype, copy=False), mask, dtype, len(shape), aligned)


def sum_offsets(terms, P, shape):
    """The element offsets of a chain of `tt.addptr`s (with broadcasts between them), summed in
    intp as the 64-bit pointer arithmetic would, in the shape of the accessed tensor."""
    total = np.asarray(terms[0]).astype(np.intp)
    for term in terms[1:]:
        total = total + term
    full = tuple(shape) if P is None else (P,) + tuple(shape)
    return total if total.shape == full else np.broadcast_to(total, full)


def load_offsets(mem, site, slot, base, offsets, mask, other, dtype, shape, P, bool_result=False, rows=None,
                 fresh=True):
    """tt.load of `addptr(splat(base), offsets)`, the pointer never materialised (memory.py)."""
    value = mx.load_offsets(mem, site, slot, base, offsets, mask, other if not bool_result or other is None
                            else np.asarray(other).astype(np.uint8), dtype, len(shape), rows, fresh)
    if bool_result:
        value = value != 0
    return spread(value, P, shape)


def store_offsets(mem, site, slot, base, offsets, value, mask, dtype, shape, rows=None):
    mx.store_offsets(mem, site, slot, base, offsets, np.asarray(value).astype(dtype, copy=False), mask, dtype,
                     len(shape), rows)


def _block_addresses(slot, base, dims, strides, offsets, shape, check, dtype):
    address, mask = mx.block_addresses(base, dims, strides, offsets, shape, check, np.dtype(dtype).itemsize)
    if slot == mx.DYNAMIC:
        # The base's slot is the block's argument: no offset or stride moves it into another one.
        address = mx.keep_slot(address, mx.per_program(base, len(shape)))
    return address, mask


def block_pointer_load(mem, site, slot, bp, shape, check, padding, dtype, act, P, bool_result=False, fmt=None):
    """`fmt`: the element's emulated float format (bf16, fp8), whose NaN is a bit pattern."""
    base, dims, strides, offsets = bp[:4]
    address, mask = _block_addresses(slot, base, dims, strides, offsets, shape, check, dtype)
    mask = mx.combine_masks(mask, act, len(shape))
    other = None
    if mask is not None:
        if padding != "nan":
            other = dtype(0)
        elif fmt is not None:
            other = np.asarray(nx.encode_float(np.float32(np.nan), fmt)).astype(dtype)
        else:
            other = np.asarray(np.nan, dtype=np.float32).astype(dtype)
    return load(mem, site, slot, address, mask, other, dtype, shape, P, bool_result)


def block_pointer_store(mem, site, slot, bp, value, shape, check, dtype, act):
    base, dims, strides, offsets = bp[:4]
    address, mask = _block_addresses(slot, base, dims, strides, offsets, shape, check, dtype)
    mask = mx.combine_masks(mask, act, len(shape))
    store(mem, site, slot, address, value, mask, dtype, shape)


def advance(bp, deltas):
    base, dims, strides, offsets = bp[:4]
    return (base, dims, strides, tuple(o + d for o, d in zip(offsets, deltas))) + tuple(bp[4:])


def descriptor_load(mem, site, slot, desc, offsets, shape, dtype, act, P, fmt=None):
    """Out-of-bounds parts of the block read as the descriptor's padding (zero or NaN)."""
    base, dims, strides, padding = desc
    return block_pointer_load(mem, site, slot, (base, dims, strides, offsets), shape,
                              range(len(shape)), padding, dtype, act, P, fmt=fmt)


def descriptor_store(mem, site, slot, desc, value, offsets, shape, dtype, act):
    """Writes outside the tensor are dropped."""
    base, dims, strides, _ = desc
    block_pointer_store(mem, site, slot, (base, dims, strides, offsets), value, shape,
                        range(len(shape)), dtype, act)


# ------------------------------------------------------------------------------------------------
# print and assert

def _format(value, hex_: bool, is_signed: bool, fmt: str):
    if fmt in nx.EMULATED_FLOATS and not hex_:
        value = nx.decode_float(value, fmt)
    v = value.item() if hasattr(value, "item") else value
    if hex_:
        bits = np.asarray(value)
        if bits.dtype.kind == "f":
            bits = bits.view(nx.unsigned_dtype(bits.dtype.itemsize * 8))
        return "0x" + format(int(bits) & ((1 << (bits.dtype.itemsize * 8)) - 1), "x")
    if isinstance(v, bool):
        return str(int(v))
    if not is_signed and isinstance(v, int) and v < 0:
        v += 1 << (np.asarray(value).dtype.itemsize * 8)
    return str(v)


def device_print(mem, prefix: str, hex_: bool, values, shapes, fmts, is_signed, act, P: int):
    """Like Triton's device_print: `pid (x, y, z) idx (i, j) prefix: value`, per element, in program
    order; with several operands each line also names the operand."""
    out = sys.stdout
    arrays = [spread(v, P, s) for v, s in zip(values, shapes)]
    for p in range(P):
        if act is not None and not act[p]:
            continue
        pid = ", ".join(str(int(np.asarray(pid_axis)[p])) for pid_axis in mem.pids)
        for k, (arr, shape) in enumerate(zip(arrays, shapes)):
            operand = f" (operand {k})" if len(arrays) > 1 else ""
            for idx in np.ndindex(*shape):
                text = _format(arr[(p,) + idx], hex_, is_signed[k] if k < len(is_signed) else True, fmts[k])
                out.write(f"pid ({pid}) idx ({', '.join(str(i) for i in idx)}){prefix}{operand}: {text}\n")
    out.flush()


def device_assert(mem, site, cond, varying: bool, act, message: str, P: int):
    """Raise InterpreterError for the first active program whose condition fails anywhere."""
    failing = ~np.asarray(cond).astype(np.bool_)
    if varying:
        per_program = failing.reshape(P, -1).any(axis=1)
    else:
        per_program = np.full(P, bool(failing.any()))
    if act is not None:
        per_program = per_program & act
    if per_program.any():
        p = int(np.argmax(per_program))
        pid = tuple(int(np.asarray(a)[p]) for a in mem.pids)
        raise mem.error(site, f"device-side assertion failed: {message}", pid)
