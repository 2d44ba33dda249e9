"""`tt.histogram`, `tt.gather` and `tt.print` (methods of `FunctionLowering`).

Histogram and gather go through the CTA's shared scratch: the histogram counts with shared-memory
atomics (one per element, by the thread that owns it), the gather writes the source row-major and
reads each result element at the coordinates its index names. `tt.print` calls the target's printf
(`TargetDescription` hook `printf`): one line per element, as Triton prints them.
"""
from __future__ import annotations

import llvmlite.ir as llir

from ... import ir
from ...errors import CompilationError
from ..isa import I32
from .scalar_ops import llvm_bits, llvm_type

I1 = llir.IntType(1)
I8 = llir.IntType(8)


def _row_major(b, coords, shape):
    idx = None
    for c, s in zip(coords, shape):
        idx = c if idx is None else b.add(b.mul(idx, llir.Constant(I32, s)), c)
    return idx if idx is not None else llir.Constant(I32, 0)


def lower_histogram(self, op):
    """Bins [0, num_bins) of the (masked) input values; values outside are not counted."""
    x = op.operands[0]
    num_bins = op.result.type.shape[0]
    values = self.get(x)
    mask = op.operand("mask")
    masks = self.get(mask) if mask is not None else None
    self.smem_base(num_bins * 4)
    zero = llir.Constant(I32, 0)
    # 1. zero the bins (each thread clears a strided share).
    threads = self.num_warps * self.warp_size
    tid = self.isa.thread_id_x(self.b)
    self.isa.barrier(self.b)
    for start in range(0, num_bins, threads):
        slot = self.b.add(tid, llir.Constant(I32, start))
        inside = self.b.icmp_unsigned("<", slot, llir.Constant(I32, num_bins))
        self._guarded(inside, lambda slot=slot: self.b.store(zero, self.smem_ptr(I32, slot)) and None)
    self.isa.barrier(self.b)
    # 2. count: the owner of each element adds one to its bin.
    owner = self.is_owner(self.layout(x.type))
    for i, v in enumerate(values):
        v32 = self.b.trunc(v, I32) if v.type.width > 32 else (self.b.sext(v, I32) if v.type.width < 32 else v)
        in_range = self.b.icmp_unsigned("<", v32, llir.Constant(I32, num_bins))   # negative -> huge: out
        cond = self.b.and_(owner, in_range)
        if masks is not None:
            cond = self.b.and_(cond, masks[i])
        self._guarded(cond, lambda v32=v32: self.b.atomic_rmw("add", self.smem_ptr(I32, v32),
                                                             llir.Constant(I32, 1), "monotonic") and None)
    self.isa.barrier(self.b)
    # 3. every thread reads the bins its result registers hold.
    out = [self.b.load(self.smem_ptr(I32, coords[0]), typ=I32)
           for coords in self.element_coords(self.layout(op.result.type))]
    self.isa.barrier(self.b)
    self.set(op.result, out)


def lower_gather(self, op):
    """out[c] = src[c with c[axis] replaced by index[c]]; index and result share one layout."""
    src, index = op.operands
    axis = op.attrs["axis"]
    if index.type.encoding != op.result.type.encoding:
        raise CompilationError.at(op.loc, "internal: gather index and result layouts differ")
    elem = llvm_type(src.type)
    store_ty = I8 if elem == I1 else elem
    width = llvm_bits(store_ty)
    self.smem_base(src.type.numel * width // 8)
    self.isa.barrier(self.b)
    for value, coords in zip(self.get(src), self.element_coords(self.layout(src.type))):
        ptr = self.smem_ptr(store_ty, _row_major(self.b, coords, src.type.shape))
        self.b.store(self.b.zext(value, I8) if elem == I1 else value, ptr)
    self.isa.barrier(self.b)
    out = []
    for idx, coords in zip(self.get(index), self.element_coords(self.layout(op.result.type))):
        idx32 = self.b.trunc(idx, I32) if idx.type.width > 32 else (
            self.b.sext(idx, I32) if idx.type.width < 32 else idx)
        src_coords = list(coords)
        src_coords[axis] = idx32
        v = self.b.load(self.smem_ptr(store_ty, _row_major(self.b, src_coords, src.type.shape)), typ=store_ty)
        out.append(self.b.trunc(v, I1) if elem == I1 else v)
    self.isa.barrier(self.b)
    self.set(op.result, out)


def _printf_spec(value, ir_type, hex_: bool, signed: bool):
    """(format, value widened as C varargs expect) for one scalar."""
    e = ir.element_type(ir_type)
    b_ty = value.type
    if isinstance(e, ir.PointerType):
        return "%p", value
    if isinstance(e, ir.FloatType):
        return None, None   # handled by the caller (needs the builder)
    width = b_ty.width
    if hex_:
        return ("0x%llx" if width > 32 else "0x%x"), value
    if width == 64:
        return ("%lld" if signed else "%llu"), value
    return ("%d" if signed else "%u"), value


def lower_print(self, op):
    if not hasattr(self.isa, "printf"):
        raise CompilationError.at(op.loc, f"tt.print (tl.device_print) is not supported on {self.isa.describe()}")
    prefix = op.attrs.get("prefix", "")
    hex_ = bool(op.attrs.get("hex", False))
    signed_flags = list(op.attrs.get("is_signed") or [])
    pid = [self.isa.program_id(self.b, a) for a in range(3)]
    from .scalar_ops import to_compute
    for k, v in enumerate(op.operands):
        signed = bool(signed_flags[k]) if k < len(signed_flags) else True
        is_tensor = isinstance(v.type, ir.TensorType)
        layout = self.layout(v.type)
        owner = self.is_owner(layout) if is_tensor else self.b.icmp_unsigned(
            "==", self.isa.thread_id_x(self.b), llir.Constant(I32, 0))
        coords_list = self.element_coords(layout) if is_tensor else [[]]
        label = f" ({k})" if len(op.operands) > 1 else ""
        for value, coords in zip(self.get(v), coords_list):
            e = ir.element_type(v.type)
            if isinstance(e, ir.FloatType):
                x = to_compute(self.b, value, v.type, self.isa)
                if str(x.type) != "double":
                    x = self.b.fpext(x, llir.DoubleType())
                spec = "%a" if hex_ else "%f"
            else:
                if isinstance(value.type, llir.IntType) and value.type.width < 32:
                    value = (self.b.sext if signed and value.type.width > 1 else self.b.zext)(value, I32)
                spec, x = _printf_spec(value, v.type, hex_, signed)
            idx_fmt = "(" + ", ".join(["%d"] * len(coords)) + ")" if coords else "()"
            fmt = f"pid (%u, %u, %u) idx {idx_fmt}{prefix}{label}: {spec}\n"
            args = pid + list(coords) + [x]
            self._guarded(owner, lambda fmt=fmt, args=args: self.isa.printf(self.b, fmt, args) and None)
