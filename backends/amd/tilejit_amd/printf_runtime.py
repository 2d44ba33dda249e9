"""`tl.device_print` on AMDGPU: buffered printf, the scheme OpenCL uses (no ockl, no hostcall).

The lowering calls `printf(format, args...)`, a variadic function with the format as a constant
string. LLVM's AMDGPU printf runtime binding (part of the AMDGPU optimisation pipeline) rewrites each
such call: it reserves room with `__printf_alloc(bytes)`, stores a format id and the arguments there,
and records `"id:size,...:format"` in the module's `llvm.printf.fmts`, which code generation turns
into the code object's `amdhsa.printf` metadata and the kernel's `hidden_printf_buffer` argument.
The HIP runtime (ROCm 6.x) allocates that buffer, passes it in the hidden argument and prints its
records after the kernel ends, using the formats from the metadata.

`__printf_alloc` normally comes from AMD's device libraries; it is defined here in LLVM IR (the
same algorithm as ROCm-Device-Libs' `opencl/src/misc/printf.cl`, code object v5): the buffer starts
with two u32, the bytes used so far and the buffer size; a compare-and-swap loop reserves `bytes`
after the 8-byte header, or returns null when the buffer is full (the pass then skips the stores).
"""
from __future__ import annotations

import llvmlite.ir as llir

I8 = llir.IntType(8)
I32 = llir.IntType(32)
I64 = llir.IntType(64)
CONSTANT_PTR = llir.PointerType(addrspace=4)
GLOBAL_PTR = llir.PointerType(addrspace=1)

PRINTF_ALLOC = "__printf_alloc"
# Code object v5 implicit arguments: the printf buffer pointer is the 10th 8-byte slot (offset 72).
IMPLICIT_PRINTF_BUFFER_OFFSET = 72
BUFFER_HEADER_BYTES = 8


def emit_printf(builder: llir.IRBuilder, fmt: str, args) -> None:
    """Call `printf(fmt, *args)`; `args` are already widened as C varargs expect."""
    module = builder.module
    data = bytearray(fmt.encode("utf-8")) + b"\0"
    arr_ty = llir.ArrayType(I8, len(data))
    glob = llir.GlobalVariable(module, arr_ty, module.get_unique_name("printf_format"), addrspace=4)
    glob.global_constant = True
    glob.linkage = "private"
    glob.unnamed_addr = True
    glob.initializer = llir.Constant(arr_ty, data)
    printf = module.globals.get("printf")
    if printf is None:
        printf = llir.Function(module, llir.FunctionType(I32, [CONSTANT_PTR], var_arg=True), "printf")
    define_printf_alloc(module)
    builder.call(printf, [glob] + list(args))


def define_printf_alloc(module: llir.Module) -> llir.Function:
    """Define `ptr addrspace(1) __printf_alloc(i32 bytes)` in `module` (once)."""
    existing = module.globals.get(PRINTF_ALLOC)
    if existing is not None:
        return existing
    fn = llir.Function(module, llir.FunctionType(GLOBAL_PTR, [I32]), PRINTF_ALLOC)
    # Not internal: the binding pass inserts its calls after this IR is built, and an internal
    # function with no caller yet could be deleted first, leaving the pass to declare an undefined one.
    (nbytes,) = fn.args
    entry = fn.append_basic_block("entry")
    retry = fn.append_basic_block("retry")
    full = fn.append_basic_block("full")
    attempt = fn.append_basic_block("attempt")
    done = fn.append_basic_block("done")
    b = llir.IRBuilder(entry)
    implicit = b.call(_intrinsic(module, "llvm.amdgcn.implicitarg.ptr", CONSTANT_PTR, []), [])
    slot = b.gep(implicit, [llir.Constant(I64, IMPLICIT_PRINTF_BUFFER_OFFSET)], source_etype=I8)
    buffer = b.load(slot, typ=GLOBAL_PTR, align=8)
    size = b.load(b.gep(buffer, [llir.Constant(I64, 4)], source_etype=I8), typ=I32, align=4)
    first = b.load_atomic(buffer, "monotonic", 4, typ=I32)
    b.branch(retry)

    b.position_at_end(retry)
    used = b.phi(I32)
    used.add_incoming(first, entry)
    end = b.add(b.add(used, llir.Constant(I32, BUFFER_HEADER_BYTES)), nbytes)
    fits = b.icmp_unsigned("<=", end, size)
    b.cbranch(fits, attempt, full)

    b.position_at_end(full)
    b.ret(llir.Constant(GLOBAL_PTR, None))

    b.position_at_end(attempt)
    pair = b.cmpxchg(buffer, used, b.add(used, nbytes), "monotonic", "monotonic")
    seen, swapped = b.extract_value(pair, 0), b.extract_value(pair, 1)
    used.add_incoming(seen, attempt)
    b.cbranch(swapped, done, retry)

    b.position_at_end(done)
    offset = b.zext(b.add(used, llir.Constant(I32, BUFFER_HEADER_BYTES)), I64)
    b.ret(b.gep(buffer, [offset], source_etype=I8))
    return fn


def _intrinsic(module, name, ret, args):
    fn = module.globals.get(name)
    return fn if fn is not None else llir.Function(module, llir.FunctionType(ret, args), name)
