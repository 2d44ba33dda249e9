"""tilejit's AMD backend: LLVM IR -> AMDGCN -> hsaco, and launching through hip-python.

Modules: `targets` (supported GPUs), `toolchain` (llvmlite code generation, ld.lld linking), `elf`
(reading an hsaco and its metadata), `kernargs` (kernarg layout and packing), `driver` and `launcher`
(hip-python, imported only when a kernel runs). The backend class lives in `backend.py` and is found
through the `tilejit.backends` entry point `hip`; importing this package loads neither it nor HIP.
"""
