"""Small AMDGPU kernels built with llvmlite.ir, shaped like the shared GPU lowering's output.

Kernels use the `amdgpu_kernel` calling convention and carry "amdgpu-flat-work-group-size"="1,256", so
the toolchain, the ELF reader and the kernarg packer can be tested without the core's lowering.
"""
from __future__ import annotations

from llvmlite import ir

TRIPLE = "amdgcn-amd-amdhsa"
I1 = ir.IntType(1)
I8 = ir.IntType(8)
I16 = ir.IntType(16)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
F16 = ir.HalfType()
F32 = ir.FloatType()
F64 = ir.DoubleType()
GLOBAL_PTR = ir.PointerType(addrspace=1)
CONSTANT_PTR = ir.PointerType(addrspace=4)
LDS = 3
BLOCK = 256


class _FunctionAttributes(ir.values.FunctionAttributes):
    """llvmlite only knows enum attributes; AMDGPU needs string ones such as "amdgpu-flat-work-group-size"."""

    def add(self, name):
        if name.startswith('"'):
            set.add(self, name)
        else:
            super().add(name)


def new_module(name: str) -> ir.Module:
    module = ir.Module(name=name)
    module.triple = TRIPLE
    return module


def new_kernel(module: ir.Module, name: str, params: list) -> tuple[ir.Function, ir.IRBuilder]:
    kernel = ir.Function(module, ir.FunctionType(ir.VoidType(), params), name=name)
    kernel.calling_convention = "amdgpu_kernel"
    kernel.attributes = _FunctionAttributes()
    kernel.attributes.add(f'"amdgpu-flat-work-group-size"="1,{BLOCK}"')
    return kernel, ir.IRBuilder(kernel.append_basic_block("entry"))


def intrinsic(module: ir.Module, name: str, ret, args) -> ir.Function:
    existing = module.globals.get(name)
    return existing if existing is not None else ir.Function(module, ir.FunctionType(ret, args), name=name)


def _ids(module, builder):
    tid = builder.call(intrinsic(module, "llvm.amdgcn.workitem.id.x", I32, []), [], name="tid")
    bid = builder.call(intrinsic(module, "llvm.amdgcn.workgroup.id.x", I32, []), [], name="bid")
    return tid, bid


def build_vector_add() -> str:
    """out[i] = x[i] + y[i] for i = workgroup * 256 + workitem < n."""
    module = new_module("vector_add")
    kernel, builder = new_kernel(module, "add_kernel", [GLOBAL_PTR, GLOBAL_PTR, GLOBAL_PTR, I32])
    x_ptr, y_ptr, out_ptr, n = kernel.args
    for arg, name in zip(kernel.args, ("x_ptr", "y_ptr", "out_ptr", "n")):
        arg.name = name
    tid, bid = _ids(module, builder)
    index = builder.add(builder.mul(bid, ir.Constant(I32, BLOCK)), tid, name="index")
    with builder.if_then(builder.icmp_signed("<", index, n)):
        wide = builder.sext(index, I64)
        x = builder.load(builder.gep(x_ptr, [wide], source_etype=F32), typ=F32)
        y = builder.load(builder.gep(y_ptr, [wide], source_etype=F32), typ=F32)
        builder.store(builder.fadd(x, y), builder.gep(out_ptr, [wide], source_etype=F32))
    builder.ret_void()
    return str(module)


def build_lds_reduction() -> str:
    """Each workgroup sums its 256 inputs through LDS: out[workgroup] = sum(x[workgroup*256 + 0..255])."""
    module = new_module("lds_reduction")
    kernel, builder = new_kernel(module, "block_sum", [GLOBAL_PTR, GLOBAL_PTR])
    x_ptr, out_ptr = kernel.args
    lds_type = ir.ArrayType(F32, BLOCK)
    scratch = ir.GlobalVariable(module, lds_type, name="block_sum_lds", addrspace=LDS)
    scratch.linkage = "internal"
    scratch.initializer = ir.Constant(lds_type, ir.Undefined)
    scratch.align = 16
    tid, bid = _ids(module, builder)
    index = builder.sext(builder.add(builder.mul(bid, ir.Constant(I32, BLOCK)), tid), I64)
    value = builder.load(builder.gep(x_ptr, [index], source_etype=F32), typ=F32)
    builder.store(value, builder.gep(scratch, [ir.Constant(I32, 0), tid]))
    builder.fence("release", "workgroup")
    builder.call(intrinsic(module, "llvm.amdgcn.s.barrier", ir.VoidType(), []), [])
    builder.fence("acquire", "workgroup")
    # Thread 0 adds the 256 partial values in a loop.
    entry = builder.block
    loop = kernel.append_basic_block("loop")
    done = kernel.append_basic_block("done")
    exit_block = kernel.append_basic_block("exit")
    builder.cbranch(builder.icmp_unsigned("==", tid, ir.Constant(I32, 0)), loop, exit_block)
    builder.position_at_end(loop)
    i = builder.phi(I32, name="i")
    acc = builder.phi(F32, name="acc")
    i.add_incoming(ir.Constant(I32, 0), entry)
    acc.add_incoming(ir.Constant(F32, 0.0), entry)
    element = builder.load(builder.gep(scratch, [ir.Constant(I32, 0), i]), typ=F32)
    next_acc = builder.fadd(acc, element)
    next_i = builder.add(i, ir.Constant(I32, 1))
    i.add_incoming(next_i, loop)
    acc.add_incoming(next_acc, loop)
    builder.cbranch(builder.icmp_unsigned("<", next_i, ir.Constant(I32, BLOCK)), loop, done)
    builder.position_at_end(done)
    builder.store(next_acc, builder.gep(out_ptr, [builder.zext(bid, I64)], source_etype=F32))
    builder.branch(exit_block)
    builder.position_at_end(exit_block)
    builder.ret_void()
    return str(module)


def build_bpermute_rotate() -> str:
    """out[i] = x[i with the lane rotated by one] using llvm.amdgcn.ds.bpermute (a wave shuffle)."""
    module = new_module("bpermute")
    kernel, builder = new_kernel(module, "rotate_lanes", [GLOBAL_PTR, GLOBAL_PTR])
    x_ptr, out_ptr = kernel.args
    tid, bid = _ids(module, builder)
    index = builder.sext(builder.add(builder.mul(bid, ir.Constant(I32, BLOCK)), tid), I64)
    value = builder.load(builder.gep(x_ptr, [index], source_etype=I32), typ=I32)
    # ds_bpermute addresses lanes in bytes: source lane (tid + 1) * 4; the hardware wraps within the wave.
    address = builder.shl(builder.add(tid, ir.Constant(I32, 1)), ir.Constant(I32, 2))
    bpermute = intrinsic(module, "llvm.amdgcn.ds.bpermute", I32, [I32, I32])
    shuffled = builder.call(bpermute, [address, value])
    builder.store(shuffled, builder.gep(out_ptr, [index], source_etype=I32))
    builder.ret_void()
    return str(module)


def build_math(intrinsics=("exp2", "log2", "sqrt", "sin", "cos", "fabs", "floor")) -> str:
    """out[i] = sum of llvm.<name>.f32(x[i]) over `intrinsics`: math the lowering relies on."""
    module = new_module("math")
    kernel, builder = new_kernel(module, "math_kernel", [GLOBAL_PTR, GLOBAL_PTR])
    x_ptr, out_ptr = kernel.args
    tid, bid = _ids(module, builder)
    index = builder.sext(builder.add(builder.mul(bid, ir.Constant(I32, BLOCK)), tid), I64)
    x = builder.load(builder.gep(x_ptr, [index], source_etype=F32), typ=F32)
    total = ir.Constant(F32, 0.0)
    for name in intrinsics:
        total = builder.fadd(total, builder.call(intrinsic(module, f"llvm.{name}.f32", F32, [F32]), [x]))
    fma = intrinsic(module, "llvm.fma.f32", F32, [F32, F32, F32])
    total = builder.call(fma, [total, x, x])
    builder.store(total, builder.gep(out_ptr, [index], source_etype=F32))
    builder.ret_void()
    return str(module)


def build_call(function_name: str, ret=F32, element=F32) -> str:
    """out[0] = function_name(x[0]); used for intrinsics and external functions AMDGPU cannot lower."""
    module = new_module("call")
    kernel, builder = new_kernel(module, "call_kernel", [GLOBAL_PTR])
    value = builder.load(kernel.args[0], typ=element)
    callee = intrinsic(module, function_name, ret, [element])
    builder.store(builder.call(callee, [value]), kernel.args[0])
    builder.ret_void()
    return str(module)


MIXED_PARAMS = [GLOBAL_PTR, I32, I64, F32, F16, GLOBAL_PTR, I8, F64, I16]
MIXED_SIGNATURE = {"a_ptr": "*fp32", "n": "i32", "big": "i64", "scale": "fp32", "half_scale": "fp16",
                   "b_ptr": "*i32", "flag": "i8", "dscale": "fp64", "short": "i16"}


def build_mixed_args(use_implicit_args: bool) -> str:
    """A kernel whose parameters have every scalar size, so their kernarg offsets need padding.

    It stores each parameter so none is optimised away. With `use_implicit_args` it also reads the
    hidden arguments (block count x at byte 0 and group size x at byte 12 of the implicit area), which
    makes LLVM list the hidden arguments in the metadata.
    """
    module = new_module("mixed")
    kernel, builder = new_kernel(module, "mixed_kernel", MIXED_PARAMS)
    a_ptr, n, big, scale, half_scale, b_ptr, flag, dscale, short = kernel.args
    for arg, name in zip(kernel.args, MIXED_SIGNATURE):
        arg.name = name
    out = builder.gep(a_ptr, [ir.Constant(I64, 0)], source_etype=F32)
    builder.store(builder.fadd(builder.fmul(scale, builder.fpext(half_scale, F32)),
                               builder.fptrunc(dscale, F32)), out)
    ints = builder.add(builder.add(n, builder.trunc(big, I32)),
                       builder.add(builder.sext(flag, I32), builder.sext(short, I32)))
    builder.store(ints, b_ptr)
    if use_implicit_args:
        implicit = builder.call(intrinsic(module, "llvm.amdgcn.implicitarg.ptr", CONSTANT_PTR, []), [])
        block_count = builder.load(implicit, typ=I32)
        group_size_ptr = builder.gep(implicit, [ir.Constant(I64, 12)], source_etype=I8)
        group_size = builder.zext(builder.load(group_size_ptr, typ=I16), I32)
        builder.store(builder.add(block_count, group_size),
                      builder.gep(b_ptr, [ir.Constant(I64, 1)], source_etype=I32))
    builder.ret_void()
    return str(module)
