"""Small NVPTX kernels built with llvmlite.ir, as the shared GPU lowering will hand them over.

They stand in for the core's TTGIR -> LLVM lowering so the toolchain and the launcher can be
tested on their own.
"""
from __future__ import annotations

from llvmlite import ir

TRIPLE = "nvptx64-nvidia-cuda"
I32 = ir.IntType(32)
I64 = ir.IntType(64)
F32 = ir.FloatType()
GLOBAL_PTR = ir.PointerType(addrspace=1)


def _new_module(name: str) -> ir.Module:
    module = ir.Module(name=name)
    module.triple = TRIPLE
    return module


def _special_register(module: ir.Module, builder: ir.IRBuilder, register: str) -> ir.Value:
    """Read e.g. `tid.x` through its `llvm.nvvm.read.ptx.sreg.*` intrinsic."""
    name = f"llvm.nvvm.read.ptx.sreg.{register}"
    intrinsic = module.globals.get(name) or ir.Function(module, ir.FunctionType(I32, []), name=name)
    return builder.call(intrinsic, [], name=register.replace(".", "_"))


def _global_index(module: ir.Module, builder: ir.IRBuilder) -> ir.Value:
    """blockIdx.x * blockDim.x + threadIdx.x, as i32."""
    block = _special_register(module, builder, "ctaid.x")
    width = _special_register(module, builder, "ntid.x")
    thread = _special_register(module, builder, "tid.x")
    return builder.add(builder.mul(block, width), thread, name="index")


def build_vector_add(name: str = "vector_add", with_expf: bool = False, scaled: bool = False) -> str:
    """`out[i] = a[i] + b[i]` for i < n (or `expf(a[i]) + b[i]`, or `a[i] + alpha * b[i]`).

    Parameters: (a: *fp32, b: *fp32, out: *fp32, n: i32[, alpha: fp32]).
    """
    module = _new_module(name)
    params = [GLOBAL_PTR, GLOBAL_PTR, GLOBAL_PTR, I32] + ([F32] if scaled else [])
    kernel = ir.Function(module, ir.FunctionType(ir.VoidType(), params), name=name)
    kernel.calling_convention = "ptx_kernel"
    a, b, out, n = kernel.args[:4]
    entry = kernel.append_basic_block("entry")
    body = kernel.append_basic_block("body")
    done = kernel.append_basic_block("done")

    builder = ir.IRBuilder(entry)
    index = _global_index(module, builder)
    builder.cbranch(builder.icmp_signed("<", index, n), body, done)

    builder.position_at_end(body)
    offset = builder.sext(index, I64)
    a_value = builder.load(builder.gep(a, [offset], source_etype=F32), typ=F32)
    b_value = builder.load(builder.gep(b, [offset], source_etype=F32), typ=F32)
    if with_expf:
        expf = ir.Function(module, ir.FunctionType(F32, [F32]), name="__nv_expf")
        a_value = builder.call(expf, [a_value])
    if scaled:
        b_value = builder.fmul(kernel.args[4], b_value)
    builder.store(builder.fadd(a_value, b_value), builder.gep(out, [offset], source_etype=F32))
    builder.branch(done)

    ir.IRBuilder(done).ret_void()
    return str(module)


# Scalar types of `build_store_scalars`, in parameter order, with their LLVM types.
SCALAR_PARAMS = [
    ("i1", ir.IntType(1)), ("i8", ir.IntType(8)), ("i16", ir.IntType(16)), ("i32", I32), ("i64", I64),
    ("u8", ir.IntType(8)), ("u32", I32), ("u64", I64),
    ("fp16", ir.HalfType()), ("bf16", ir.IntType(16)), ("fp32", F32), ("fp64", ir.DoubleType()),
]


def build_store_scalars(name: str = "store_scalars") -> str:
    """Thread 0 writes every scalar parameter into `out` (an array of i64), each zero-extended bits.

    Parameters: (out: *i64, then one parameter per `SCALAR_PARAMS` entry). A bf16 scalar arrives as
    16 bits, so the kernel takes it as i16 (the bits are what the test compares).
    """
    module = _new_module(name)
    params = [GLOBAL_PTR] + [llvm_type for _, llvm_type in SCALAR_PARAMS]
    kernel = ir.Function(module, ir.FunctionType(ir.VoidType(), params), name=name)
    kernel.calling_convention = "ptx_kernel"
    builder = ir.IRBuilder(kernel.append_basic_block("entry"))
    out = kernel.args[0]
    for slot, ((_, llvm_type), value) in enumerate(zip(SCALAR_PARAMS, kernel.args[1:])):
        if isinstance(llvm_type, (ir.HalfType, ir.FloatType, ir.DoubleType)):
            value = builder.bitcast(value, ir.IntType({ir.HalfType: 16, ir.FloatType: 32,
                                                      ir.DoubleType: 64}[type(llvm_type)]))
        if value.type.width < 64:
            value = builder.zext(value, I64)
        builder.store(value, builder.gep(out, [ir.Constant(I64, slot)], source_etype=I64))
    builder.ret_void()
    return str(module)
