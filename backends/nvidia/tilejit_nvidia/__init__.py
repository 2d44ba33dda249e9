"""tilejit's NVIDIA backend: PTX with llvmlite, cubin with ptxas or nvJitLink, launches with cuda-bindings.

Modules: `toolchain` (LLVM IR -> PTX -> cubin), `ptx_isa` (PTX version choice), `driver` (the CUDA
device side), `launcher` (running a cubin), `arg_packing` (kernel parameter buffers), `cuda_calls`
(cuda-bindings access and error checks). Nothing is imported here, so importing the package needs
neither a GPU nor cuda-bindings.
"""
