"""Run a kernel's NVPTX LLVM IR (the `llir` stage for cuda) on the host CPU, one OS thread per GPU
thread, so the GPU lowering's results can be checked on a machine without a GPU.

The IR is retargeted to the host: address spaces are dropped, the shared scratch becomes a host
global, and the NVVM intrinsics the core lowering uses (thread and block ids, the CTA barrier, warp
shuffles) become calls back into Python, where barriers are `threading.Barrier`s and a shuffle is an
exchange through a list. One CTA runs at a time. Inline PTX (atomics, cp.async, mma) and libdevice
calls cannot run here: kernels using them are out of scope, except the masked stores (`@p st.global`),
which become calls back into Python.

It found the layout bug of Triton's test_scan2d cummax cases and the scratch overlap of argmax over
fp64 exactly as the H100 showed them (same mismatch counts).
"""
from __future__ import annotations

import ctypes
import re
import threading

import numpy as np

_local = threading.local()
_state: dict = {}
_engines = []   # keep the JIT engines (and their code) alive
_callbacks = {}


def _shuffle(kind, value, b):
    tid = _local.tid
    lane, warp = tid & 31, tid >> 5
    exchange = _state["exchange"]
    exchange[tid] = value
    _state["warp_barriers"][warp].wait()
    src = {"idx": b, "bfly": lane ^ b, "down": lane + b if lane + b < 32 else lane,
           "up": lane - b if lane >= b else lane}[kind]
    out = exchange[warp * 32 + src]
    _state["warp_barriers"][warp].wait()
    return out


def _f32_to_bf16(x):
    bits = int(np.array(x, np.float32).view(np.uint32))
    if x != x:
        return 0x7FFF
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


def _bf16_to_f32(code):
    return np.array(code << 16, np.uint32).view(np.float32)


def _predicated_store(ptr, words, pred, bits):
    if pred & 1:
        data = np.array(words, {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}[bits])
        ctypes.memmove(ptr, data.ctypes.data, data.nbytes)


_PREDICATED_STORE = re.compile(
    r'call void asm sideeffect "@\$\d+ st\.global(?:\.v(\d))?\.b(\d+) \[\$0\], [^"]*", "[^"]*"\(([^\n]*)\)')


def _install():
    if _callbacks:
        return
    import llvmlite.binding as llvm
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    i32_fn = ctypes.CFUNCTYPE(ctypes.c_int32)
    shuffle_fn = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32)
    _callbacks.update({
        "sim_tid": i32_fn(lambda: _local.tid),
        "sim_ctaid_x": i32_fn(lambda: _state["ctaid"]),
        "sim_ctaid_y": i32_fn(lambda: 0),
        "sim_ctaid_z": i32_fn(lambda: 0),
        "sim_nctaid_x": i32_fn(lambda: _state["nctaid"]),
        "sim_barrier": ctypes.CFUNCTYPE(None)(lambda: _state["barrier"].wait()),
        "sim_barrier_i": ctypes.CFUNCTYPE(None, ctypes.c_int32)(lambda _: _state["barrier"].wait()),
    })
    # f32 -> bf16 to nearest even (NaN: the canonical 0x7FFF, as cvt.rn.bf16.f32), for the NVIDIA
    # lowering's `fptrunc float to bfloat` (the host has no bf16 conversion of its own to call)
    _callbacks["sim_f32_to_bf16"] = ctypes.CFUNCTYPE(ctypes.c_uint16, ctypes.c_float)(_f32_to_bf16)
    # sm_90's bf16 add/sub/mul (LLVM bfloat ops; not fused here): in f32, then rounded to bf16, which
    # is the bf16 operation's one rounding (f32 has more than 2 * 8 + 2 bits)
    bf16_binary = ctypes.CFUNCTYPE(ctypes.c_uint16, ctypes.c_uint16, ctypes.c_uint16)
    for op, fn in (("fadd", np.add), ("fsub", np.subtract), ("fmul", np.multiply)):
        _callbacks["sim_bf16_" + op] = bf16_binary(
            lambda x, y, fn=fn: _f32_to_bf16(float(fn(_bf16_to_f32(x), _bf16_to_f32(y)))))
    # the NVIDIA lowering's masked stores, `@p st.global[.vN].bW` (inline PTX): stored where p holds
    for bits in (8, 16, 32, 64):
        for count in (1, 2, 4):
            word = {8: ctypes.c_uint16, 16: ctypes.c_uint16, 32: ctypes.c_uint32, 64: ctypes.c_uint64}[bits]
            _callbacks[f"sim_pstore_{bits}_{count}"] = ctypes.CFUNCTYPE(
                None, ctypes.c_void_p, *[word] * count, ctypes.c_uint8)(
                lambda ptr, *rest, bits=bits: _predicated_store(ptr, rest[:-1], rest[-1], bits))
    for kind in ("idx", "bfly", "down", "up"):
        _callbacks["sim_shfl_" + kind] = shuffle_fn(lambda mask, v, b, c, kind=kind: _shuffle(kind, v, b))
    for name, cb in _callbacks.items():
        llvm.add_symbol(name, ctypes.cast(cb, ctypes.c_void_p).value)


_RENAME = {
    "llvm.nvvm.read.ptx.sreg.tid.x": "sim_tid", "llvm.nvvm.read.ptx.sreg.ctaid.x": "sim_ctaid_x",
    "llvm.nvvm.read.ptx.sreg.ctaid.y": "sim_ctaid_y", "llvm.nvvm.read.ptx.sreg.ctaid.z": "sim_ctaid_z",
    "llvm.nvvm.read.ptx.sreg.nctaid.x": "sim_nctaid_x", "llvm.nvvm.barrier0": "sim_barrier",
    "llvm.nvvm.barrier.cta.sync.aligned.all": "sim_barrier_i",
    "llvm.nvvm.shfl.sync.idx.i32": "sim_shfl_idx", "llvm.nvvm.shfl.sync.bfly.i32": "sim_shfl_bfly",
    "llvm.nvvm.shfl.sync.down.i32": "sim_shfl_down", "llvm.nvvm.shfl.sync.up.i32": "sim_shfl_up",
}


def to_host_ir(ir: str, shared_bytes: int = 1 << 18) -> str:
    """The NVPTX module `ir` rewritten for the host (see the module docstring)."""
    used = set()

    def predicated_store(m):
        used.add(f"sim_pstore_{m.group(2)}_{m.group(1) or 1}")
        return f'call void @"sim_pstore_{m.group(2)}_{m.group(1) or 1}"({m.group(3)})'
    ir = _PREDICATED_STORE.sub(predicated_store, ir)
    for name in sorted(used):
        bits, count = (int(x) for x in name.split("_")[2:])
        word = "i16" if bits == 8 else f"i{bits}"
        ir += f'\ndeclare void @"{name}"(ptr addrspace(1), {", ".join([word] * count)}, i1 zeroext)\n'
    if re.search(r"\bcall\b[^\n]*\basm\b", ir) or "@__nv_" in ir:
        raise NotImplementedError("inline PTX or libdevice calls cannot run on the host")
    ir = re.sub(r"target (triple|datalayout) = .*\n", "", ir)
    ir = ir.replace("ptx_kernel ", "")
    ir = re.sub(r" addrspace\(\d\)", "", ir)
    ir = re.sub(r'"nvvm\.[a-z]+"="[^"]*"', "", ir)
    ir = re.sub(r'@"?global_smem"? = external (local_unnamed_addr )?global \[0 x i8\]',
                f'@"global_smem" = global [{shared_bytes} x i8] zeroinitializer', ir)
    for nvvm, host in _RENAME.items():
        ir = ir.replace(f'@"{nvvm}"', f'@"{host}"').replace(f"@{nvvm}(", f'@"{host}"(')
    ir = re.sub(r"fptrunc float (\S+) to bfloat", r'call i16 @"sim_f32_to_bf16"(float \1)', ir)
    ir = re.sub(r"bitcast bfloat (\S+) to i16", r"bitcast i16 \1 to i16", ir)
    ir = re.sub(r"bitcast i16 (\S+) to bfloat", r"bitcast i16 \1 to i16", ir)
    ir = re.sub(r"(fadd|fsub|fmul)( contract)? bfloat (\S+), (\S+)", r'call i16 @"sim_bf16_\1"(i16 \3, i16 \4)', ir)
    if "sim_f32_to_bf16" in ir:
        ir += '\ndeclare i16 @"sim_f32_to_bf16"(float)\n'
    for op in ("fadd", "fsub", "fmul"):
        if f"sim_bf16_{op}" in ir:
            ir += f'\ndeclare i16 @"sim_bf16_{op}"(i16, i16)\n'
    return re.sub(r'syncscope\("[a-z]+"\) ', "", ir)


def run(ir: str, args, num_warps: int, grid: int = 1) -> None:
    """Run the kernel in `ir` on `grid` CTAs, one after another. `args`: NumPy arrays (passed by
    address, written in place) and Python ints (i32)."""
    import llvmlite.binding as llvm
    _install()
    module = llvm.parse_assembly(to_host_ir(ir))
    module.verify()
    engine = llvm.create_mcjit_compiler(module, llvm.Target.from_default_triple().create_target_machine())
    engine.finalize_object()
    _engines.append(engine)
    name = next(f.name for f in module.functions if not f.is_declaration)
    values = [a.ctypes.data if isinstance(a, np.ndarray) else int(a) for a in args]
    types = [ctypes.c_void_p if isinstance(a, np.ndarray) else ctypes.c_int32 for a in args]
    kernel = ctypes.CFUNCTYPE(None, *types)(engine.get_function_address(name))
    threads = num_warps * 32
    for pid in range(grid):
        # A timeout, so that a thread that dies breaks the barrier instead of hanging the others.
        _state.update(ctaid=pid, nctaid=grid, barrier=threading.Barrier(threads, timeout=120),
                      exchange=[0] * threads,
                      warp_barriers=[threading.Barrier(32, timeout=120) for _ in range(num_warps)])
        errors = []

        def body(tid, errors=errors):
            _local.tid = tid
            try:
                kernel(*values)
            except Exception as exc:   # pragma: no cover - reported below
                errors.append(exc)
        workers = [threading.Thread(target=body, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        if errors:
            raise errors[0]
