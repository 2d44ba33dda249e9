"""Reading an AMDGPU code object (hsaco): ELF header, kernel symbols and the HSA metadata note.

The metadata note (`NT_AMDGPU_METADATA`, owner "AMDGPU") is a MessagePack map written by LLVM; its
`amdhsa.kernels` list says, per kernel, where each kernel argument sits in the kernarg segment and
which resources (LDS, registers, scratch) the kernel uses. The launcher builds its kernarg buffer from
that, never from guesses about the ABI.
"""
from __future__ import annotations

import io
import struct
from dataclasses import dataclass, field

from tilejit.errors import CompilationError

from tilejit_amd.targets import ARCH_BY_ELF_MACH

EM_AMDGPU = 224
ELFOSABI_AMDGPU_HSA = 64
NT_AMDGPU_METADATA = 32
EF_AMDGPU_MACH = 0x0FF
EF_AMDGPU_FEATURE_XNACK_V4 = 0x300
EF_AMDGPU_FEATURE_SRAMECC_V4 = 0xC00
_FEATURE_SETTING = {0x0: "unsupported", 0x1: "any", 0x2: "off", 0x3: "on"}


class InvalidHsacoError(CompilationError, ValueError):
    """Bytes that are not a well-formed AMDGPU code object."""


@dataclass(frozen=True)
class KernelArg:
    """One entry of a kernel's `.args` in the code object metadata."""
    offset: int
    size: int
    value_kind: str                 # global_buffer, by_value, hidden_block_count_x, ...
    name: str | None = None
    address_space: str | None = None  # "global", "generic", ... for pointers
    type_name: str | None = None

    @property
    def is_hidden(self) -> bool:
        return self.value_kind.startswith("hidden_")


@dataclass(frozen=True)
class KernelInfo:
    name: str
    has_symbol: bool
    has_descriptor: bool  # the `<name>.kd` kernel descriptor symbol the runtime dispatches through
    args: tuple[KernelArg, ...]
    kernarg_segment_size: int
    kernarg_segment_align: int
    group_segment_fixed_size: int   # static LDS bytes
    private_segment_fixed_size: int  # scratch bytes per work-item
    sgpr_count: int
    vgpr_count: int
    agpr_count: int
    wavefront_size: int
    max_flat_workgroup_size: int
    metadata: dict = field(repr=False, compare=False, default_factory=dict)

    @property
    def explicit_args(self) -> tuple[KernelArg, ...]:
        return tuple(arg for arg in self.args if not arg.is_hidden)

    @property
    def hidden_args(self) -> tuple[KernelArg, ...]:
        return tuple(arg for arg in self.args if arg.is_hidden)


@dataclass(frozen=True)
class HsacoInfo:
    e_machine: int
    e_type: str                 # "ET_DYN" for a linked hsaco, "ET_REL" for an unlinked object
    arch: str | None            # from e_flags, e.g. "gfx942"
    xnack: str                  # unsupported / any / off / on
    sramecc: str
    abi_version: int
    code_object_version: int
    target: str | None          # metadata's amdhsa.target, e.g. "amdgcn-amd-amdhsa--gfx942"
    kernels: dict[str, KernelInfo]
    metadata: dict = field(repr=False, compare=False, default_factory=dict)

    def kernel(self, name: str) -> KernelInfo:
        try:
            return self.kernels[name]
        except KeyError:
            raise InvalidHsacoError(f"code object has no kernel '{name}'; it has: "
                                    f"{', '.join(self.kernels) or 'none'}") from None


def read_e_flags(data: bytes) -> int:
    """e_flags of a 64-bit little-endian ELF (the only kind AMDGPU uses)."""
    _check_elf64(data)
    return struct.unpack_from("<I", data, 0x30)[0]


def arch_from_e_flags(e_flags: int) -> str | None:
    return ARCH_BY_ELF_MACH.get(e_flags & EF_AMDGPU_MACH)


def _check_elf64(data) -> None:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise InvalidHsacoError(f"expected the bytes of a code object, got {type(data).__name__}")
    if len(data) < 64 or bytes(data[:4]) != b"\x7fELF":
        raise InvalidHsacoError("not an ELF file (bad magic or too short)")
    if data[4] != 2 or data[5] != 1:
        raise InvalidHsacoError("not a 64-bit little-endian ELF file, as AMDGPU code objects are")


def _iter_notes(blob: bytes):
    """(owner, type, desc) of each ELF note in a SHT_NOTE section's bytes (4-byte aligned fields)."""
    pos = 0
    while pos + 12 <= len(blob):
        namesz, descsz, note_type = struct.unpack_from("<III", blob, pos)
        pos += 12
        name = blob[pos:pos + namesz].rstrip(b"\0").decode("ascii", "replace")
        pos += (namesz + 3) & ~3
        desc = blob[pos:pos + descsz]
        pos += (descsz + 3) & ~3
        if len(desc) != descsz:
            raise InvalidHsacoError("truncated ELF note")
        yield name, note_type, desc


def _decode_metadata(desc: bytes) -> dict:
    import msgpack
    try:
        metadata = msgpack.unpackb(desc, raw=False, strict_map_key=False)
    except (ValueError, msgpack.UnpackException) as exc:
        raise InvalidHsacoError(f"AMDGPU metadata note is not valid MessagePack: {exc}") from None
    if not isinstance(metadata, dict):
        raise InvalidHsacoError("AMDGPU metadata note is not a MessagePack map")
    return metadata


def _int_field(kernel_md: dict, key: str, default: int = 0) -> int:
    value = kernel_md.get(key, default)
    if not isinstance(value, int):
        raise InvalidHsacoError(f"metadata field {key} of kernel {kernel_md.get('.name')!r} is not an integer")
    return value


def _parse_arg(raw, kernel_name: str) -> KernelArg:
    if not isinstance(raw, dict) or not {".offset", ".size", ".value_kind"} <= raw.keys():
        raise InvalidHsacoError(f"kernel '{kernel_name}' has an argument entry without .offset/.size/.value_kind")
    return KernelArg(offset=int(raw[".offset"]), size=int(raw[".size"]), value_kind=str(raw[".value_kind"]),
                     name=raw.get(".name"), address_space=raw.get(".address_space"),
                     type_name=raw.get(".type_name"))


def parse_kernel_metadata(kernel_md: dict, symbols: set[str] = frozenset()) -> KernelInfo:
    """One entry of `amdhsa.kernels`; `symbols` (the ELF's symbol names) tells if it is defined."""
    name = kernel_md.get(".name")
    if not isinstance(name, str):
        raise InvalidHsacoError("a kernel in amdhsa.kernels has no .name")
    symbol = kernel_md.get(".symbol", name + ".kd")
    return KernelInfo(
        name=name,
        has_symbol=name in symbols,
        has_descriptor=symbol in symbols,
        args=tuple(_parse_arg(raw, name) for raw in kernel_md.get(".args", [])),
        kernarg_segment_size=_int_field(kernel_md, ".kernarg_segment_size"),
        kernarg_segment_align=_int_field(kernel_md, ".kernarg_segment_align", 8),
        group_segment_fixed_size=_int_field(kernel_md, ".group_segment_fixed_size"),
        private_segment_fixed_size=_int_field(kernel_md, ".private_segment_fixed_size"),
        sgpr_count=_int_field(kernel_md, ".sgpr_count"),
        vgpr_count=_int_field(kernel_md, ".vgpr_count"),
        agpr_count=_int_field(kernel_md, ".agpr_count"),
        wavefront_size=_int_field(kernel_md, ".wavefront_size"),
        max_flat_workgroup_size=_int_field(kernel_md, ".max_flat_workgroup_size"),
        metadata=kernel_md,
    )


def inspect_hsaco(data: bytes) -> HsacoInfo:
    """Header, arch, kernels and their metadata of an hsaco (or of an unlinked AMDGPU object)."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    _check_elf64(data)
    try:
        elf = ELFFile(io.BytesIO(bytes(data)))
        header = elf.header
        if header.e_machine != "EM_AMDGPU" and header.e_machine != EM_AMDGPU:
            raise InvalidHsacoError(f"ELF machine is {header.e_machine}, not EM_AMDGPU ({EM_AMDGPU})")
        symbols: set[str] = set()
        metadata: dict | None = None
        for section in elf.iter_sections():
            if isinstance(section, SymbolTableSection):
                symbols.update(symbol.name for symbol in section.iter_symbols() if symbol.name)
            elif section["sh_type"] == "SHT_NOTE":
                for owner, note_type, desc in _iter_notes(section.data()):
                    if owner == "AMDGPU" and note_type == NT_AMDGPU_METADATA:
                        metadata = _decode_metadata(desc)
        e_flags = header.e_flags
        abi_version = header.e_ident.EI_ABIVERSION
    except ELFError as exc:
        raise InvalidHsacoError(f"malformed ELF file: {exc}") from None
    if metadata is None:
        raise InvalidHsacoError("code object has no AMDGPU metadata note (NT_AMDGPU_METADATA); "
                                "only code object v3 and later are supported")
    kernels_md = metadata.get("amdhsa.kernels", [])
    kernels = {}
    for kernel_md in kernels_md:
        if not isinstance(kernel_md, dict):
            raise InvalidHsacoError("amdhsa.kernels holds an entry that is not a map")
        info = parse_kernel_metadata(kernel_md, symbols)
        kernels[info.name] = info
    return HsacoInfo(
        e_machine=EM_AMDGPU,
        e_type=str(header.e_type),
        arch=arch_from_e_flags(e_flags),
        xnack=_FEATURE_SETTING[(e_flags & EF_AMDGPU_FEATURE_XNACK_V4) >> 8],
        sramecc=_FEATURE_SETTING[(e_flags & EF_AMDGPU_FEATURE_SRAMECC_V4) >> 10],
        abi_version=abi_version,
        # ELFABIVERSION_AMDGPU_HSA_V3 is 1, V4 is 2, V5 is 3, V6 is 4.
        code_object_version=abi_version + 2,
        target=metadata.get("amdhsa.target"),
        kernels=kernels,
        metadata=metadata,
    )
