"""LLVM IR -> AMDGCN assembly / ELF object (llvmlite, in process) -> hsaco (ld.lld).

The shared GPU lowering hands over an LLVM module for `amdgcn-amd-amdhsa` whose kernels use the
`amdgpu_kernel` calling convention. llvmlite's LLVM (22) does optimisation and code generation; it
cannot link, so the last step, relocatable object -> shared code object (hsaco), runs `ld.lld`.

Code object version: LLVM 22 emits v6 by default. tilejit asks for v5 instead, because v5 is what
ROCm 6 produces and loads everywhere (v6 only adds "generic" targets, which tilejit does not use), and
because lld 15+ links v5 while v6 needs lld 18+ (Debian 12's default `lld` is 14, which links neither;
its `lld-19` links both). A module that already carries an `amdhsa_code_object_version` module flag
keeps it.

Math: AMD's device libraries (ocml/ockl bitcode) are not available without ROCm, so nothing here links
them. The lowering must use LLVM intrinsics (llvm.exp2, llvm.sqrt, llvm.fma, llvm.fabs, ...), which
the AMDGPU backend selects to native instructions, or its own implementations: the f64 functions
AMDGPU cannot expand (exp, log, sin, pow, ...) come from `device_math.py`, linked into the module
before O3. A call to an undefined `__ocml_*` function is caught by `ld.lld --no-undefined` as a
CompilationError.
"""
from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass

from tilejit.errors import CompilationError
from tilejit_amd.device_math import link_device_math

from tilejit_amd.targets import SUPPORTED_ARCHS, get_arch, wavefront_size  # noqa: F401 (re-exported)

AMDGPU_TRIPLE = "amdgcn-amd-amdhsa"
CODE_OBJECT_VERSION = 5
# The oldest ld.lld whose AMDGPU port understands the ELF ABI version of code object v5.
MIN_LLD_MAJOR = 15
ROCM_LLD = "/opt/rocm/llvm/bin/ld.lld"
LLD_INSTALL_HINT = ("install a linker for AMD GPU code objects: `apt-get install lld-19` (Debian 12 / "
                    "Ubuntu 24.04; any lld >= 15 works), or ROCm (which ships /opt/rocm/llvm/bin/ld.lld), "
                    "or point TILEJIT_LLD at an ld.lld")

_llvm_lock = threading.Lock()
_llvm_ready = False


def _llvm():
    """llvmlite.binding, with the AMDGPU target initialised once per process."""
    global _llvm_ready
    import llvmlite.binding as llvm
    with _llvm_lock:
        if not _llvm_ready:
            llvm.initialize_all_targets()
            llvm.initialize_all_asmprinters()
            # The default for modules without an `amdhsa_code_object_version` flag (see module doc).
            llvm.set_option("tilejit", f"--amdhsa-code-object-version={CODE_OBJECT_VERSION}")
            _llvm_ready = True
    return llvm


@functools.lru_cache(maxsize=None)
def _target_machine(arch: str, opt_level: int = 3):
    """An LLVM TargetMachine for `arch` (position independent: an hsaco is a shared object)."""
    llvm = _llvm()
    target = llvm.Target.from_triple(AMDGPU_TRIPLE)
    return target.create_target_machine(cpu=arch, features="", opt=opt_level, reloc="pic",
                                        codemodel="default")


def _checked_arch(arch) -> str:
    # Only names from our table ever reach LLVM: an unknown processor makes LLVM print warnings and
    # may abort code generation, which no Python exception handler can catch.
    return get_arch(arch).name


@functools.lru_cache(maxsize=None)
def llvm_knows_arch(arch: str) -> bool:
    """Does llvmlite's LLVM have `arch` as an AMDGPU processor? (An empty kernel names it in its ELF.)"""
    if arch not in SUPPORTED_ARCHS:
        return False
    from tilejit_amd.elf import arch_from_e_flags, read_e_flags
    from llvmlite import ir
    module = ir.Module(name="probe")
    module.triple = AMDGPU_TRIPLE
    kernel = ir.Function(module, ir.FunctionType(ir.VoidType(), []), name="probe")
    kernel.calling_convention = "amdgpu_kernel"
    ir.IRBuilder(kernel.append_basic_block("entry")).ret_void()
    llvm = _llvm()
    obj = _target_machine(arch).emit_object(llvm.parse_assembly(str(module)))
    return arch_from_e_flags(read_e_flags(obj)) == arch


def _parse_and_verify(llvm_ir: str, what: str):
    llvm = _llvm()
    if not isinstance(llvm_ir, str):
        raise CompilationError(f"expected LLVM IR text for {what}, got {type(llvm_ir).__name__}")
    try:
        module = llvm.parse_assembly(llvm_ir)
    except RuntimeError as exc:
        raise CompilationError(f"invalid LLVM IR ({what}): {exc}") from None
    try:
        module.verify()
    except RuntimeError as exc:
        raise CompilationError(f"LLVM IR failed verification ({what}): {exc}") from None
    return module


def _check_kernel_module(module) -> None:
    """The module must target AMDGPU and define at least one kernel."""
    if module.triple and not module.triple.startswith("amdgcn"):
        raise CompilationError(f"LLVM module has triple '{module.triple}', expected '{AMDGPU_TRIPLE}'")
    # llvmlite exposes no calling convention on a parsed function: read it from the `define` line.
    kernels = [fn.name for fn in module.functions
               if not fn.is_declaration and "amdgpu_kernel" in str(fn).split("(", 1)[0]]
    if not kernels:
        raise CompilationError("LLVM module defines no function with calling convention amdgpu_kernel")


# Intrinsics the AMDGPU instruction selector of LLVM 22 cannot lower without device libraries. LLVM
# reports them through a fatal diagnostic that ends the whole process ("no libcall available for
# ftanh"), so they are refused here, with a message, before code generation.
_UNLOWERABLE_ANY_FLOAT = ("tan", "tanh", "sinh", "cosh", "asin", "acos", "atan", "atan2")
_UNLOWERABLE_F64 = ("sin", "cos", "pow", "exp", "exp2", "exp10", "log", "log2", "log10")
_INTRINSIC_NAME = re.compile(r"llvm\.([a-z0-9]+)\.(?:v\d+)?(f16|bf16|f32|f64)\Z")


def check_lowerable(module) -> None:
    """Refuse calls AMDGPU code generation cannot handle without AMD's device libraries (ocml).

    `module` is an llvmlite.binding module. Undefined non-intrinsic functions (an `__ocml_*` routine,
    `expf`...) would only fail at link time; naming them here also helps when no linker is installed.
    """
    for fn in module.functions:
        if not fn.is_declaration:
            continue
        name = fn.name
        match = _INTRINSIC_NAME.match(name)
        if match:
            op, element = match.groups()
            if op in _UNLOWERABLE_ANY_FLOAT or (element == "f64" and op in _UNLOWERABLE_F64):
                raise CompilationError(
                    f"the AMD backend cannot compile {name}: LLVM's AMDGPU target has no instruction for "
                    f"it and AMD's device libraries (ocml) are not linked; the lowering must expand it "
                    f"(e.g. from exp2/log2/sin/cos on f32)")
            continue
        if name.startswith("llvm."):
            continue
        raise CompilationError(f"kernel calls the external function '{name}', which nothing defines: AMD's "
                               f"device libraries (ocml/ockl) are not linked; use an LLVM intrinsic instead")


def optimize_llir(llvm_ir: str, arch: str, opt_level: int = 3) -> str:
    """Parse, verify and optimise (new pass manager, O`opt_level`) for `arch`; returns the LLVM IR text.

    Code generation rewrites the module in place (it inserts `llvm.amdgcn.if` and friends), so every
    emission below starts again from this text rather than reusing a module object.
    """
    arch = _checked_arch(arch)
    module = _parse_and_verify(llvm_ir, "input")
    _check_kernel_module(module)
    llvm = _llvm()
    tm = _target_machine(arch, opt_level)
    module.triple = AMDGPU_TRIPLE
    module.data_layout = str(tm.target_data)
    # Before O3, so that the f64 math functions the kernel calls are inlined and optimised with it.
    link_device_math(module)
    with _llvm_lock:
        pto = llvm.create_pipeline_tuning_options(speed_level=opt_level)
        builder = llvm.create_pass_builder(tm, pto)
        builder.getModulePassManager().run(module, builder)
    try:
        module.verify()
    except RuntimeError as exc:
        raise CompilationError(f"LLVM IR failed verification after optimisation: {exc}") from None
    check_lowerable(module)
    return str(module)


def _emit(optimized_ir: str, arch: str, kind: str):
    llvm = _llvm()
    module = llvm.parse_assembly(optimized_ir)
    tm = _target_machine(arch)
    with _llvm_lock:  # TargetMachine is not documented as thread safe
        try:
            return tm.emit_assembly(module) if kind == "asm" else tm.emit_object(module)
        except RuntimeError as exc:
            raise CompilationError(f"AMDGPU code generation for {arch} failed: {exc}") from None


def llir_to_amdgcn(llvm_ir: str, arch: str) -> str:
    """LLVM IR text -> AMDGCN assembly text for `arch` (after O3)."""
    arch = _checked_arch(arch)
    return _emit(optimize_llir(llvm_ir, arch), arch, "asm")


def llir_to_object(llvm_ir: str, arch: str) -> bytes:
    """LLVM IR text -> relocatable ELF object (not yet an hsaco) for `arch` (after O3)."""
    arch = _checked_arch(arch)
    return bytes(_emit(optimize_llir(llvm_ir, arch), arch, "obj"))


@dataclass(frozen=True)
class AMDGPUArtifacts:
    """Every product of one compilation, so a caller needing several pays for one O3 run."""
    optimized_llir: str
    amdgcn: str
    hsaco: bytes


def compile_llir(llvm_ir: str, arch: str) -> AMDGPUArtifacts:
    """LLVM IR -> optimised IR, AMDGCN assembly and a linked hsaco, optimising once."""
    arch = _checked_arch(arch)
    optimized = optimize_llir(llvm_ir, arch)
    amdgcn = _emit(optimized, arch, "asm")
    obj = bytes(_emit(optimized, arch, "obj"))
    return AMDGPUArtifacts(optimized, amdgcn, link_hsaco(obj))


# ---------------------------------------------------------------------------------------------- lld

_LLD_VERSION = re.compile(r"LLD (\d+)\.(\d+)(?:\.(\d+))?")


@functools.lru_cache(maxsize=32)
def _lld_version_cached(path: str, mtime: float) -> tuple[int, ...] | None:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    match = _LLD_VERSION.search(out.stdout + out.stderr)
    return tuple(int(part) for part in match.groups() if part is not None) if match else None


def lld_version(path: str) -> tuple[int, ...] | None:
    """(major, minor, patch) of the ld.lld at `path`, or None when it does not run."""
    try:
        mtime = os.stat(path).st_mtime
    except OSError:
        return None
    return _lld_version_cached(path, mtime)


def _configured_lld() -> str | None:
    """`TILEJIT_LLD`, through `tilejit.config.knobs`."""
    from tilejit.config import knobs
    return knobs.lld or None


# Where distributions keep versioned LLVM installs (Debian/Ubuntu: /usr/lib/llvm-19/bin/ld.lld).
LLVM_INSTALL_ROOTS = ("/usr/lib",)


def _path_candidates() -> list[str]:
    """`ld.lld` and every versioned `ld.lld-NN` on PATH, plus each <root>/llvm-NN/bin/ld.lld."""
    found = []
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        if not directory or not os.path.isdir(directory):
            continue
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        found += [os.path.join(directory, name) for name in names
                  if name == "ld.lld" or re.fullmatch(r"ld\.lld-\d+", name)]
    for root in LLVM_INSTALL_ROOTS:
        try:
            names = os.listdir(root)
        except OSError:
            continue
        found += [os.path.join(root, name, "bin", "ld.lld") for name in names if re.fullmatch(r"llvm-\d+", name)]
    return [path for path in found if os.path.isfile(path) and os.access(path, os.X_OK)]


def find_lld() -> str | None:
    """The ld.lld tilejit links with, or None.

    Order: TILEJIT_LLD (taken as is), ROCm's /opt/rocm/llvm/bin/ld.lld, then the newest ld.lld or
    ld.lld-NN on PATH. Newest, not first: Debian's plain `ld.lld` may be lld 14, which cannot link
    code object v5, while `ld.lld-19` beside it can.
    """
    configured = _configured_lld()
    if configured:
        resolved = shutil.which(configured) or configured
        return os.path.abspath(resolved)
    if os.path.isfile(ROCM_LLD) and os.access(ROCM_LLD, os.X_OK):
        return ROCM_LLD
    best, best_version = None, None
    for path in _path_candidates():
        version = lld_version(path)
        if version is not None and (best_version is None or version > best_version):
            best, best_version = path, version
    return best


def _require_lld() -> str:
    lld = find_lld()
    if lld is None:
        raise CompilationError(f"cannot link an AMD GPU code object: no ld.lld found; {LLD_INSTALL_HINT}")
    if not os.path.isfile(lld):
        raise CompilationError(f"TILEJIT_LLD names '{lld}', which does not exist; {LLD_INSTALL_HINT}")
    version = lld_version(lld)
    if version is None:
        raise CompilationError(f"'{lld} --version' failed or is not LLD; {LLD_INSTALL_HINT}")
    if version[0] < MIN_LLD_MAJOR:
        raise CompilationError(
            f"{lld} is LLD {'.'.join(map(str, version))}, too old to link code object "
            f"v{CODE_OBJECT_VERSION} (needs LLD >= {MIN_LLD_MAJOR}); {LLD_INSTALL_HINT}")
    return lld


def link_hsaco(obj: bytes) -> bytes:
    """Link a relocatable AMDGPU object into a loadable code object (hsaco) with ld.lld.

    Same command line as ROCm's clang driver: a shared object, and `--no-undefined` so that a call to a
    function nobody defines (an ocml routine, say) fails here rather than at module load on the GPU.
    """
    if not isinstance(obj, (bytes, bytearray)) or bytes(obj[:4]) != b"\x7fELF":
        raise CompilationError("link_hsaco expects an ELF relocatable object (bytes starting with \\x7fELF)")
    lld = _require_lld()
    with tempfile.TemporaryDirectory(prefix="tilejit-hsaco-") as tmp:
        obj_path = os.path.join(tmp, "kernel.o")
        out_path = os.path.join(tmp, "kernel.hsaco")
        with open(obj_path, "wb") as handle:
            handle.write(obj)
        command = [lld, "-flavor", "gnu", "-shared", "--no-undefined", "-o", out_path, obj_path]
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.SubprocessError) as exc:
            raise CompilationError(f"could not run {lld}: {exc}") from None
        if result.returncode != 0:
            message = (result.stderr or result.stdout).strip().replace(obj_path, "kernel.o")
            raise CompilationError(f"ld.lld failed to link the hsaco (exit {result.returncode}):\n{message}")
        with open(out_path, "rb") as handle:
            return handle.read()


def toolchain_status() -> dict:
    """What the AMD toolchain has and lacks, for `tilejit backends` and for the backend's cache key."""
    import llvmlite
    llvm = _llvm()
    lld = find_lld()
    version = lld_version(lld) if lld else None
    lld_ok = version is not None and version[0] >= MIN_LLD_MAJOR
    problems = []
    if lld is None:
        problems.append(f"no ld.lld found: {LLD_INSTALL_HINT}")
    elif version is None:
        problems.append(f"{lld} does not run: {LLD_INSTALL_HINT}")
    elif not lld_ok:
        problems.append(f"{lld} is LLD {version[0]}, need >= {MIN_LLD_MAJOR}: {LLD_INSTALL_HINT}")
    archs = {name: llvm_knows_arch(name) for name in SUPPORTED_ARCHS}
    problems += [f"llvmlite's LLVM does not know {name}" for name, ok in archs.items() if not ok]
    return {
        "llvmlite": llvmlite.__version__,
        "llvm": ".".join(map(str, llvm.llvm_version_info)),
        "lld": lld,
        "lld_version": ".".join(map(str, version)) if version else None,
        "code_object_version": CODE_OBJECT_VERSION,
        "archs": archs,
        "can_compile": all(archs.values()),
        "can_link": lld_ok,
        "device_libs": ("none (ocml/ockl not linked; math: LLVM intrinsics + tilejit_amd.device_math "
                        "for f64 and accurate f32)"),
        "problems": problems,
    }
