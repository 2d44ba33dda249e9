"""The AMD GPUs tilejit compiles for, and the per-architecture facts the toolchain and launcher need.

One table, so that adding a GPU is one row: its wavefront size, how much LDS one workgroup may use,
and the `EF_AMDGPU_MACH_*` value that identifies it in an ELF header.
"""
from __future__ import annotations

from dataclasses import dataclass

from tilejit.errors import CompilationError

KiB = 1024


@dataclass(frozen=True)
class AMDArch:
    """What tilejit needs to know about one AMD GPU architecture."""
    name: str            # LLVM processor name, e.g. "gfx942"
    wavefront_size: int  # 64 on CDNA (gfx9), 32 on RDNA (gfx11, gfx12)
    lds_bytes: int       # LDS (shared memory) one workgroup may allocate
    elf_mach: int        # EF_AMDGPU_MACH_AMDGCN_* value in e_flags
    family: str          # marketing family, for messages only


SUPPORTED_ARCHS: dict[str, AMDArch] = {
    arch.name: arch for arch in (
        AMDArch("gfx90a", 64, 64 * KiB, 0x03F, "CDNA2 (MI200)"),
        AMDArch("gfx942", 64, 64 * KiB, 0x04C, "CDNA3 (MI300)"),
        AMDArch("gfx950", 64, 160 * KiB, 0x04F, "CDNA4 (MI350)"),
        AMDArch("gfx1100", 32, 64 * KiB, 0x041, "RDNA3 (RX 7900)"),
        AMDArch("gfx1201", 32, 64 * KiB, 0x04E, "RDNA4 (RX 9070)"),
    )
}

# EF_AMDGPU_MACH_* values of GPUs tilejit does not compile for, so that `inspect_hsaco` can still name
# the architecture of a code object built elsewhere (values from LLVM's BinaryFormat/ELF.h).
_OTHER_ELF_MACHS = {
    0x02C: "gfx900", 0x02F: "gfx906", 0x030: "gfx908", 0x033: "gfx1010", 0x036: "gfx1030",
    0x040: "gfx940", 0x04B: "gfx941", 0x046: "gfx1101", 0x047: "gfx1102", 0x044: "gfx1103",
    0x043: "gfx1150", 0x04A: "gfx1151", 0x048: "gfx1200",
}

ARCH_BY_ELF_MACH: dict[int, str] = {
    **_OTHER_ELF_MACHS, **{arch.elf_mach: arch.name for arch in SUPPORTED_ARCHS.values()}}


def base_arch_name(gcn_arch_name: str) -> str:
    """'gfx942:sramecc+:xnack-' (HIP's gcnArchName) -> 'gfx942'."""
    return gcn_arch_name.split(":", 1)[0].strip()


def get_arch(arch: str) -> AMDArch:
    """The table row for `arch` (feature suffixes such as ':xnack-' are ignored)."""
    name = base_arch_name(str(arch))
    try:
        return SUPPORTED_ARCHS[name]
    except KeyError:
        known = ", ".join(SUPPORTED_ARCHS)
        raise CompilationError(f"unsupported AMD GPU architecture '{arch}'; tilejit supports: {known}") from None


def wavefront_size(arch: str) -> int:
    """Threads per wavefront (warp) of `arch`: 64 on CDNA, 32 on RDNA."""
    return get_arch(arch).wavefront_size


def lds_limit(arch: str) -> int:
    """Bytes of LDS one workgroup may allocate on `arch`."""
    return get_arch(arch).lds_bytes
