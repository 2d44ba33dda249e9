"""LLVM IR -> PTX (llvmlite) -> cubin (ptxas, or nvJitLink from cuda-bindings); no C compiler at run time.

Where the NVIDIA tools come from, in order:
- ptxas: the `TILEJIT_PTXAS` knob, `PATH`, the pip wheel `nvidia-cuda-nvcc` (`nvidia/cu13/bin` for
  CUDA 13, `nvidia/cuda_nvcc/bin` for CUDA 12), `$CUDA_HOME/bin`, `/usr/local/cuda/bin`, and last
  the copy an installed Triton bundles;
- libdevice (`libdevice.10.bc`, the CUDA math library as LLVM bitcode): next to the ptxas found, the
  pip wheels (`nvidia-nvvm` for CUDA 13, `nvidia-cuda-nvcc` for CUDA 12), `$CUDA_HOME`,
  `/usr/local/cuda`, Triton's bundle;
- nvJitLink (`cuda.bindings.nvjitlink`, needs the `nvidia-nvjitlink` wheel): used when there is no
  ptxas, since it embeds the same assembler.
"""
from __future__ import annotations

import functools
import glob
import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import tempfile

from tilejit.errors import CompilationError

from . import ptxas_process
from .llvm_setup import NVPTX_TRIPLE, nvptx_codegen_options, nvptx_target_machine, parse_llvm_ir
from .ptx_isa import choose_ptx_version, cpu_name, ptx_isa_for_cuda

LIBDEVICE_NAME = "libdevice.10.bc"
PIP_HINT = "pip install nvidia-cuda-nvcc (ptxas), or pip install cuda-bindings nvidia-nvjitlink (nvJitLink)"


# --------------------------------------------------------------------------------------------
# Finding the tools
# --------------------------------------------------------------------------------------------

def _ptxas_knob() -> str | None:
    """`TILEJIT_PTXAS`, through `tilejit.config.knobs`."""
    from tilejit.config import knobs
    return str(knobs.ptxas) if knobs.ptxas else None


def _nvidia_wheel_dirs() -> list[str]:
    """Folders of the NVIDIA pip wheels (`site-packages/nvidia/<component>`), newest CUDA first.

    `nvidia` is a namespace package shared by every NVIDIA wheel; finding it imports nothing.
    """
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return []
    if spec is None or not spec.submodule_search_locations:
        return []
    dirs = [d for base in spec.submodule_search_locations
            for d in sorted(glob.glob(os.path.join(base, "*"))) if os.path.isdir(d)]
    # CUDA 13+ wheels install under `nvidia/cuNN`; put the newest first, then the CUDA 12 layout
    # (`nvidia/cuda_nvcc`, ...).
    versioned = sorted((d for d in dirs if re.fullmatch(r"cu\d+", os.path.basename(d))),
                       key=lambda d: int(os.path.basename(d)[2:]), reverse=True)
    return versioned + [d for d in dirs if d not in versioned]


def _cuda_home_dirs() -> list[str]:
    dirs = [os.environ[name] for name in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(name)]
    return dirs + ["/usr/local/cuda"]


def _triton_bundle_dir() -> str | None:
    """`triton/backends/nvidia` of an installed Triton, which ships ptxas (bin/) and libdevice (lib/).

    Found without importing triton; the last resort on machines that have Triton but no CUDA wheels.
    """
    try:
        spec = importlib.util.find_spec("triton")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    bundle = os.path.join(os.path.dirname(spec.origin), "backends", "nvidia")
    return bundle if os.path.isdir(bundle) else None


def _is_executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def find_ptxas() -> str | None:
    """Path of the ptxas to use, or None when there is none. A wrong `TILEJIT_PTXAS` is an error."""
    knob = _ptxas_knob()
    if knob:
        if not _is_executable(knob):
            raise CompilationError(f"TILEJIT_PTXAS={knob} is not an executable file")
        return knob
    return find_cuda_tool("ptxas")


def find_cuda_tool(name: str) -> str | None:
    """A CUDA command-line tool (`ptxas`, `cuobjdump`): on PATH, in the NVIDIA wheels (`bin/`), under
    CUDA_HOME or /usr/local/cuda, and last in an installed Triton's bundle; None when none is."""
    on_path = shutil.which(name)
    if on_path:
        return on_path
    bundle = _triton_bundle_dir()
    for root in _nvidia_wheel_dirs() + _cuda_home_dirs() + ([bundle] if bundle else []):
        candidate = os.path.join(root, "bin", name)
        if _is_executable(candidate):
            return candidate
    return None


def find_libdevice(ptxas: str | None = None) -> str | None:
    """Path of `libdevice.10.bc`, preferring the one shipped with `ptxas` so the two match."""
    roots = []
    if ptxas:
        roots.append(os.path.dirname(os.path.dirname(os.path.realpath(ptxas))))
    roots += _nvidia_wheel_dirs() + _cuda_home_dirs()
    for root in roots:
        candidate = os.path.join(root, "nvvm", "libdevice", LIBDEVICE_NAME)
        if os.path.isfile(candidate):
            return candidate
    bundle = _triton_bundle_dir()
    if bundle and os.path.isfile(os.path.join(bundle, "lib", LIBDEVICE_NAME)):
        return os.path.join(bundle, "lib", LIBDEVICE_NAME)
    return None


@functools.lru_cache(maxsize=16)
def _ptxas_version_cached(path: str, mtime: float) -> tuple[int, int]:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, check=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        raise CompilationError(f"could not run {path} --version: {exc}") from None
    match = re.search(r"release (\d+)\.(\d+)", out.stdout)
    if not match:
        raise CompilationError(f"could not read the CUDA version of {path} from: {out.stdout.strip()!r}")
    return int(match.group(1)), int(match.group(2))


def ptxas_version(path: str) -> tuple[int, int]:
    """CUDA release (major, minor) of a ptxas, from `ptxas --version`; cached per file."""
    try:
        mtime = os.stat(path).st_mtime
    except OSError as exc:
        raise CompilationError(f"ptxas at {path} is not readable: {exc}") from None
    return _ptxas_version_cached(path, mtime)


def _nvjitlink():
    """`cuda.bindings.nvjitlink` if it imports and its library loads, else None."""
    try:
        from cuda.bindings import nvjitlink
        nvjitlink.version()  # loads libnvJitLink: importing alone does not prove it is there
    except Exception:  # noqa: BLE001 - any failure (ImportError, missing .so) means "not available"
        return None
    return nvjitlink


def nvjitlink_version() -> tuple[int, int] | None:
    module = _nvjitlink()
    return tuple(module.version()) if module else None


def _assembler() -> tuple[str, str | None, tuple[int, int]]:
    """(`"ptxas"` or `"nvjitlink"`, ptxas path, CUDA version) of the assembler to use."""
    ptxas = find_ptxas()
    if ptxas:
        return "ptxas", ptxas, ptxas_version(ptxas)
    version = nvjitlink_version()
    if version:
        return "nvjitlink", None, version
    raise CompilationError("no PTX assembler found: neither ptxas (TILEJIT_PTXAS, PATH, the nvidia-cuda-nvcc "
                           f"wheel, CUDA_HOME, /usr/local/cuda) nor nvJitLink; {PIP_HINT}")


def _assembler_cuda_version_or_none() -> tuple[int, int] | None:
    try:
        return _assembler()[2]
    except CompilationError:
        return None


# --------------------------------------------------------------------------------------------
# LLVM IR -> PTX
# --------------------------------------------------------------------------------------------

# Kernels are the functions LLVM 22 emits as `.entry`: the `ptx_kernel` calling convention, or the
# older `nvvm.annotations` `!"kernel"` marker. Read from the text because llvmlite's binding does not
# expose a function's calling convention. The patterns begin with a literal (a `define` after a
# newline; `_kernel_names` puts one before the text), which re scans for quickly: a `^` in MULTILINE
# mode, or an alternation, is tried at every position (2-2.5 ms each on the bench matmul's IR).
_PTX_KERNEL_DEFINE = re.compile(r"\ndefine\b[^@\n]*\bptx_kernel\b[^@\n]*@(\"[^\"]+\"|[\w.$-]+)\(")
_ANNOTATED_KERNEL = re.compile(r"ptr\s+@(\"[^\"]+\"|[\w.$-]+)\s*,\s*!\"kernel\"")


def _kernel_names(llvm_ir_text: str) -> set[str]:
    names = _PTX_KERNEL_DEFINE.findall("\n" + llvm_ir_text) + _ANNOTATED_KERNEL.findall(llvm_ir_text)
    return {name.strip('"') for name in names}


@functools.lru_cache(maxsize=4)
def _read_libdevice(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


_GLOBAL_REF = re.compile(r'@("[^"]+"|[\w.$-]+)')
_DEFINED_NAME = re.compile(r'^(?:define|declare)\b[^@]*@("[^"]+"|[\w.$-]+)\(')
_GLOBAL_NAME = re.compile(r'^@("[^"]+"|[\w.$-]+)\s*=')
# Whether to link only the libdevice functions a kernel calls (see `_LibdeviceSlices`); the tests
# turn it off to compare with linking the whole library.
SLICE_LIBDEVICE = True


class _LibdeviceSlices:
    """libdevice split into its top-level definitions, once per process, so that a kernel links only
    the functions it calls (and what those call), not the whole library.

    Parsing the 450 KB bitcode and linking its ~350 functions into every kernel that calls one math
    function cost 50-120 ms per compilation, and O3 then had to walk the linked library; a slice is a
    few KB of text, parsed in a millisecond. The linked result is the same: everything not reachable
    from the kernel is internal and deleted by O3 either way (tests/nvidia compare the PTX of both).
    A library whose text this reader does not recognise is linked whole, as before.
    """

    def __init__(self, text: str):
        self.header: list[str] = []    # target lines, named types
        self.trailer: list[str] = []   # attribute groups and metadata
        self.globals: dict[str, str] = {}
        self.declarations: dict[str, str] = {}
        self.definitions: dict[str, str] = {}
        self.usable = self._split(text)

    def _split(self, text: str) -> bool:
        lines = text.splitlines()
        i = 0
        while i < len(lines):
            line = lines[i]
            if not line.strip() or line.startswith(";"):
                i += 1
                continue
            if line.startswith("define"):
                name = _DEFINED_NAME.match(line)
                end = i
                while end < len(lines) and lines[end] != "}":
                    end += 1
                if name is None or end == len(lines):
                    return False
                self.definitions[name.group(1)] = "\n".join(lines[i:end + 1])
                i = end + 1
                continue
            if line.startswith("declare"):
                name = _DEFINED_NAME.match(line)
                if name is None:
                    return False
                self.declarations[name.group(1)] = line
            elif line.startswith("@"):
                name = _GLOBAL_NAME.match(line)
                if name is None:
                    return False
                self.globals[name.group(1)] = line
            elif line.startswith(("target ", "source_filename", "%")):
                self.header.append(line)
            elif line.startswith(("attributes ", "!")):
                self.trailer.append(line)
            else:
                return False  # something this reader does not know (comdats, module asm, ...)
            i += 1
        return bool(self.definitions)

    def module_text(self, names) -> str:
        """The LLVM IR text of the functions `names` (those libdevice defines) and all they reach."""
        pending = [n for n in set(names) if n in self.definitions]
        seen = set(pending)
        while pending:
            body = self.definitions.get(pending[-1]) or self.globals.get(pending[-1]) or ""
            pending.pop()
            for ref in _GLOBAL_REF.findall(body):
                if ref not in seen and (ref in self.definitions or ref in self.globals or ref in self.declarations):
                    seen.add(ref)
                    pending.append(ref)
        # In the library's own order: functions that stay out of line (noinline slow paths) are
        # emitted in module order, so the PTX matches the whole library's.
        parts = list(self.header)
        for table in (self.globals, self.declarations, self.definitions):
            parts += [text for name, text in table.items() if name in seen]
        return "\n".join(parts + self.trailer) + "\n"


@functools.lru_cache(maxsize=4)
def _libdevice_slices(path: str, mtime_ns: int, size: int) -> _LibdeviceSlices:
    import llvmlite.binding as llvm
    return _LibdeviceSlices(str(llvm.parse_bitcode(_read_libdevice(path))))


_slice_texts: dict = {}


def _slice_document_name(ident: tuple) -> str:
    return "libdevice-slice-" + hashlib.sha256(repr(ident).encode()).hexdigest()


def _slice_from_disk(ident: tuple) -> str | None:
    """A slice stored by an earlier process (the JSON documents of tilejit's cache), checked by its
    sha256: a new process then skips reading the whole library (~150 ms) for the kernels it saw before."""
    from tilejit.runtime import cache
    try:
        doc = cache.load_json(_slice_document_name(ident))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("text"), str) or doc.get("ident") != repr(ident):
        return None
    text = doc["text"]
    return text if hashlib.sha256(text.encode()).hexdigest() == doc.get("sha256") else None


def _slice_to_disk(ident: tuple, text: str) -> None:
    from tilejit.runtime import cache
    try:
        cache.store_json(_slice_document_name(ident), {"ident": repr(ident), "text": text,
                                                       "sha256": hashlib.sha256(text.encode()).hexdigest()})
    except (OSError, ValueError):
        pass  # a read-only cache: the slice is made again next time


def _libdevice_slice_text(path: str, names) -> str | None:
    """The slice of libdevice for `names`: from this process, the disk cache, or cut now; None when
    the library cannot be sliced."""
    st = os.stat(path)
    ident = (os.path.abspath(path), st.st_mtime_ns, st.st_size, tuple(sorted(set(names))))
    text = _slice_texts.get(ident)
    if text is None:
        text = _slice_from_disk(ident)
        if text is None:
            slices = _libdevice_slices(*ident[:3])
            if not slices.usable:
                return None
            text = slices.module_text(names)
            _slice_to_disk(ident, text)
        if len(_slice_texts) >= 256:
            _slice_texts.clear()
        _slice_texts[ident] = text
    return text


def _libdevice_module(path: str, names):
    """libdevice as an llvmlite module: only what `names` need where the library can be sliced
    (`names` None: the whole library)."""
    import llvmlite.binding as llvm
    if SLICE_LIBDEVICE and names is not None:
        text = _libdevice_slice_text(path, names)
        if text is not None:
            return llvm.parse_assembly(text)
    return llvm.parse_bitcode(_read_libdevice(path))


def _link_libdevice(module, path: str, names=None) -> None:
    """Link libdevice's functions `names` (those the kernel declares; None: all) into `module`."""
    try:
        libdevice = _libdevice_module(path, names)
    except (RuntimeError, OSError) as exc:
        raise CompilationError(f"could not read libdevice at {path}: {exc}") from None
    # libdevice is built for the `nvptx64-nvidia-gpulibs` triple; align it so linking does not warn.
    libdevice.triple = module.triple
    libdevice.data_layout = module.data_layout
    try:
        module.link_in(libdevice)
    except RuntimeError as exc:
        raise CompilationError(f"linking libdevice ({path}) failed: {exc}") from None


_GLOBAL_LOAD = re.compile(r"= load [^\n]*ptr addrspace\(1\)")


def _wants_loop_strength_reduction(llvm_ir_text: str) -> bool:
    """False for a kernel that reads global memory only through asynchronous copies (cp.async).

    Its loop then carries one pointer per copied chunk, advanced by a constant, which LSR would turn
    back into addresses formed every iteration (see `llvm_setup`). A kernel that also reads global
    memory into registers keeps LSR: there it folds many pointers into one base register with
    immediate offsets (a matmul whose A rows are not 16-byte aligned: 36 pointers a thread, 568 bytes
    spilled without LSR, none with it), or turns an index multiply into an add (attention's
    `cols * stride`)."""
    return ("cp.async" not in llvm_ir_text or "ld.global" in llvm_ir_text
            or _GLOBAL_LOAD.search(llvm_ir_text) is not None)


def llir_to_ptx(llvm_ir_text: str, arch: int, features: str | None = None, libdevice: bool = True,
                maxnreg: int = 0) -> str:
    """Compile an LLVM IR module for `sm_<arch>` to PTX text (with `maxnreg`, Triton's option of that
    name: a register cap on every kernel, `limit_registers`).

    Links libdevice when the module declares `__nv_*` functions (and `libdevice` is true), makes
    every non-kernel function internal so O3 can inline and drop what is unused, optimises at O3
    with the NVPTX target machine's pipeline (which runs NVVMReflect for libdevice), and emits PTX.
    `features` adds LLVM target features; unless it names a `+ptxNN` the PTX ISA version is the
    newest that both LLVM and the installed assembler accept (see `ptx_isa.choose_ptx_version`).
    """
    import llvmlite.binding as llvm

    cpu = cpu_name(arch)
    extra = [f for f in (features or "").split(",") if f.strip()]
    if not any(f.strip().startswith("+ptx") for f in extra):
        extra.append(f"+ptx{choose_ptx_version(cpu, _assembler_cuda_version_or_none())}")
    machine = nvptx_target_machine(cpu, ",".join(f.strip() for f in extra))

    module = parse_llvm_ir(llvm_ir_text)
    module.triple = NVPTX_TRIPLE
    module.data_layout = str(machine.target_data)
    # (function, name, is a declaration): each is a call into LLVM, so the functions are read once.
    functions = [(f, f.name, f.is_declaration) for f in module.functions]
    user_defined = {name for _, name, declared in functions if not declared}
    kernels = _kernel_names(llvm_ir_text) & user_defined
    if not kernels:
        raise CompilationError("the LLVM module has no kernel: mark the entry function with the "
                               "ptx_kernel calling convention")

    wanted_libdevice = sorted(name for _, name, declared in functions if declared and name.startswith("__nv_"))
    if wanted_libdevice:
        if not libdevice:
            raise CompilationError(f"the kernel calls {', '.join(wanted_libdevice)} but libdevice linking is off")
        path = find_libdevice(find_ptxas_or_none())
        if path is None:
            raise CompilationError(
                f"the kernel calls libdevice functions ({', '.join(wanted_libdevice[:3])}) but {LIBDEVICE_NAME} "
                "was not found; pip install nvidia-nvvm (CUDA 13) or nvidia-cuda-nvcc (CUDA 12), or set CUDA_HOME")
        _link_libdevice(module, path, wanted_libdevice)
        functions = [(f, f.name, f.is_declaration) for f in module.functions]  # libdevice's joined them

    for function, name, declared in functions:
        if not declared and name not in kernels:
            function.linkage = llvm.Linkage.internal

    tuning = llvm.create_pipeline_tuning_options(speed_level=3)
    tuning.loop_vectorization = False  # NVPTX has no vector units to target; LLVM's own default too
    builder = llvm.create_pass_builder(machine, tuning)
    builder.getModulePassManager().run(module, builder)
    try:
        with nvptx_codegen_options(loop_strength_reduction=_wants_loop_strength_reduction(llvm_ir_text)):
            ptx = machine.emit_assembly(module)
    except RuntimeError as exc:
        raise CompilationError(f"LLVM could not emit PTX for {cpu}: {exc}") from None
    # No `.version` patching: the version was chosen up front to suit both LLVM and the assembler.
    return limit_registers(ptx, maxnreg) if maxnreg else ptx


_MAXNTID = re.compile(r"^\.maxntid [^\n]*\n", re.MULTILINE)


def limit_registers(ptx: str, maxnreg: int) -> str:
    """Triton's `maxnreg` option: `.maxnreg N` on every kernel entry, after its `.maxntid` (Triton
    sets LLVM's `nvvm.maxnreg`, which NVPTX prints the same way). The user's cap replaces tilejit's
    own occupancy request (`.minnctapersm`, `ptx_to_cubin`): ptxas gets one register budget."""
    ptx = _OCCUPANCY_HINT.sub("", ptx)
    limited, entries = _MAXNTID.subn(lambda m: m.group(0) + f".maxnreg {maxnreg}\n", ptx)
    if not entries:
        raise CompilationError("internal: no kernel entry with a .maxntid directive to put .maxnreg on")
    return limited


def find_ptxas_or_none() -> str | None:
    try:
        return find_ptxas()
    except CompilationError:
        return None


# --------------------------------------------------------------------------------------------
# PTX -> cubin
# --------------------------------------------------------------------------------------------

_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_REGISTERS = re.compile(r"Used (\d+) registers")
_SHARED = re.compile(r"(\d+) bytes smem")


def parse_resource_usage(log: str) -> dict[str, dict[str, int]]:
    """Per kernel: registers, spill stores/loads, stack frame and static shared bytes from `ptxas -v`."""
    kernels: dict[str, dict[str, int]] = {}
    current = None
    for line in log.splitlines():
        entry = _ENTRY.search(line)
        if entry:
            current = kernels.setdefault(entry.group(1), {"registers": 0, "spill_stores": 0, "spill_loads": 0,
                                                          "stack_frame": 0, "shared": 0})
            continue
        if current is None:
            continue
        frame = _FRAME.search(line)
        if frame:
            current["stack_frame"], current["spill_stores"], current["spill_loads"] = map(int, frame.groups())
        registers = _REGISTERS.search(line)
        if registers:
            current["registers"] = int(registers.group(1))
        shared = _SHARED.search(line)
        if shared:
            current["shared"] = int(shared.group(1))
    return kernels


class AssembledCubin:
    """A cubin with what the assembler reported: `resources[kernel]` (see `parse_resource_usage`)."""

    def __init__(self, cubin: bytes, resources: dict[str, dict[str, int]], log: str, assembler: str):
        self.cubin = cubin
        self.resources = resources
        self.log = log
        self.assembler = assembler


def _assemble_with_ptxas(ptxas: str, ptx: str, cpu: str) -> AssembledCubin:
    arguments = [ptxas, "-lineinfo", "-v", f"-arch={cpu}"]
    try:
        if ptxas_process.AVAILABLE:
            code, log, cubin = ptxas_process.run(arguments, ptx)
        else:
            code, log, cubin = _run_ptxas_on_a_file(arguments, ptx)
    except (OSError, subprocess.SubprocessError) as exc:
        raise CompilationError(f"could not run ptxas ({ptxas}): {exc}") from None
    if code != 0:
        raise CompilationError(f"ptxas failed for {cpu} (exit code {code}):\n{log.strip()}")
    return AssembledCubin(cubin, parse_resource_usage(log), log, f"ptxas {ptxas}")


def _run_ptxas_on_a_file(arguments: list[str], ptx: str) -> tuple[int, str, bytes | None]:
    with tempfile.TemporaryDirectory(prefix="tilejit-ptxas-") as folder:
        source = os.path.join(folder, "kernel.ptx")
        target = os.path.join(folder, "kernel.cubin")
        with open(source, "w") as f:
            f.write(ptx)
        done = subprocess.run([*arguments, source, "-o", target], capture_output=True, text=True, timeout=600)
        cubin = None
        if done.returncode == 0:
            with open(target, "rb") as f:
                cubin = f.read()
        return done.returncode, (done.stdout + done.stderr).replace(source, "kernel.ptx"), cubin


def _nvjitlink_log(nvjitlink, handle, size_fn, log_fn) -> str:
    try:
        size = size_fn(handle)
        if size <= 1:
            return ""
        buffer = bytearray(size)
        log_fn(handle, buffer)
        return bytes(buffer).rstrip(b"\0").decode(errors="replace")
    except nvjitlink.nvJitLinkError:
        return ""


def _assemble_with_nvjitlink(nvjitlink, ptx: str, cpu: str) -> AssembledCubin:
    options = [f"-arch={cpu}", "-lineinfo", "-Xptxas=-v"]
    data = ptx.encode()
    try:
        handle = nvjitlink.create(len(options), options)
    except nvjitlink.nvJitLinkError as exc:
        raise CompilationError(f"nvJitLink could not start for {cpu}: {exc}") from None
    try:
        try:
            nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), "kernel.ptx")
            nvjitlink.complete(handle)
        except nvjitlink.nvJitLinkError as exc:
            log = _nvjitlink_log(nvjitlink, handle, nvjitlink.get_error_log_size, nvjitlink.get_error_log)
            raise CompilationError(f"nvJitLink failed for {cpu}: {exc}\n{log.strip()}") from None
        cubin = bytearray(nvjitlink.get_linked_cubin_size(handle))
        nvjitlink.get_linked_cubin(handle, cubin)
        log = _nvjitlink_log(nvjitlink, handle, nvjitlink.get_info_log_size, nvjitlink.get_info_log)
    finally:
        nvjitlink.destroy(handle)
    return AssembledCubin(bytes(cubin), parse_resource_usage(log), log, "nvJitLink")


def assemble_ptx(ptx: str, arch: int, assembler: str | None = None) -> AssembledCubin:
    """Assemble PTX for `sm_<arch>` into a cubin with ptxas (or nvJitLink when there is no ptxas).

    `assembler` forces `"ptxas"` or `"nvjitlink"`; an assembler error is a CompilationError that
    carries the assembler's message.
    """
    cpu = cpu_name(arch)
    if assembler not in (None, "ptxas", "nvjitlink"):
        raise CompilationError(f"unknown PTX assembler {assembler!r}: expected 'ptxas' or 'nvjitlink'")
    if assembler == "nvjitlink":
        nvjitlink = _nvjitlink()
        if nvjitlink is None:
            raise CompilationError("nvJitLink is not available; pip install cuda-bindings nvidia-nvjitlink")
        return _assemble_with_nvjitlink(nvjitlink, ptx, cpu)
    kind, ptxas, _ = _assembler()
    if kind == "ptxas":
        return _assemble_with_ptxas(ptxas, ptx, cpu)
    if assembler == "ptxas":
        raise CompilationError(f"ptxas was not found; {PIP_HINT}")
    return _assemble_with_nvjitlink(_nvjitlink(), ptx, cpu)


_OCCUPANCY_HINT = re.compile(r"^\.minnctapersm \d+\n", re.MULTILINE)
# Spilled bytes the two-CTA request may cost and still be kept: a few registers (bench/gpu.py's tf32
# matmul spills 28 bytes at 128 registers and was measured at Triton's speed with the request).
SPILL_ALLOWANCE_BYTES = 32


def _spilled_bytes(built: AssembledCubin) -> int:
    return sum(k["spill_stores"] for k in built.resources.values())


def ptx_to_cubin(ptx: str, arch: int) -> bytes:
    """Assemble PTX into cubin bytes; `assemble_ptx` also gives the register and spill counts.

    The occupancy request `.minnctapersm` (`NvidiaISA.finish_kernel`: two CTAs of a pipelined 8-warp
    loop) is a hint: ptxas meets it by capping the registers (128 at 256 threads). Where that makes
    it spill more than a few registers (`SPILL_ALLOWANCE_BYTES`), the PTX is assembled again without
    the request and the cubin that spills less is kept (fla's gla backward at 8 warps: 56 bytes
    spilled at 128 registers, none at 170). Where the cap cannot be met at all (a wgmma
    m64n256 accumulator alone is 128 registers a thread: ptxas refuses the instruction), the PTX is
    assembled without the request."""
    hinted = _OCCUPANCY_HINT.search(ptx) is not None
    try:
        built = assemble_ptx(ptx, arch)
    except CompilationError:
        if not hinted:
            raise
        return assemble_ptx(_OCCUPANCY_HINT.sub("", ptx), arch).cubin
    if _spilled_bytes(built) > SPILL_ALLOWANCE_BYTES and hinted:
        unhinted = assemble_ptx(_OCCUPANCY_HINT.sub("", ptx), arch)
        if _spilled_bytes(unhinted) < _spilled_bytes(built):
            return unhinted.cubin
    return built.cubin


# --------------------------------------------------------------------------------------------
# What is installed
# --------------------------------------------------------------------------------------------

def toolchain_status() -> dict:
    """What the NVIDIA toolchain found: for `tilejit backends` and the backend's cache key."""
    import llvmlite.binding as llvm

    status: dict = {"llvm": ".".join(map(str, llvm.llvm_version_info)), "ptxas": None,
                    "ptxas_version": None, "ptx_isa": None, "libdevice": None,
                    "nvjitlink": False, "nvjitlink_version": None, "problems": []}
    try:
        status["ptxas"] = find_ptxas()
    except CompilationError as exc:
        status["problems"].append(str(exc))
    if status["ptxas"]:
        try:
            version = ptxas_version(status["ptxas"])
            status["ptxas_version"] = f"{version[0]}.{version[1]}"
            status["ptx_isa"] = ptx_isa_for_cuda(version)
        except CompilationError as exc:
            status["problems"].append(str(exc))
    jit_version = nvjitlink_version()
    if jit_version:
        status["nvjitlink"] = True
        status["nvjitlink_version"] = f"{jit_version[0]}.{jit_version[1]}"
        if status["ptx_isa"] is None:
            status["ptx_isa"] = ptx_isa_for_cuda(jit_version)
    status["libdevice"] = find_libdevice(status["ptxas"])
    if not status["ptxas"] and not status["nvjitlink"]:
        status["problems"].append(f"no PTX assembler: {PIP_HINT}")
    if not status["libdevice"]:
        status["problems"].append(f"{LIBDEVICE_NAME} not found (needed by tl.math): pip install nvidia-nvvm")
    return status
