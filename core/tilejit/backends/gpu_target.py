"""`GPUTarget`: which backend and which chip a kernel is compiled for."""
from __future__ import annotations

import re
from dataclasses import dataclass

from tilejit.backends.errors import TargetError

ACCEPTED_FORMS = ("'cuda:<sm>' (e.g. cuda:80, cuda:90), 'hip:<gfx arch>' (e.g. hip:gfx942, hip:gfx1100), "
                  "'interpreter', or '<backend>[:<arch>[:<warp size>]]' for a plugin backend")

# Name of the arch used when a plugin target is written without one (`toy` == `toy:default`).
DEFAULT_ARCH = "default"

_NAME = re.compile(r"[a-z][a-z0-9_]*\Z")
_ARCH = re.compile(r"[A-Za-z0-9_]+\Z")
_CUDA_ARCH = re.compile(r"(?:sm_)?(\d{2,3})\Z")
_HIP_ARCH = re.compile(r"gfx[0-9a-f]{3,4}\Z")


def _hip_warp_size(arch: str) -> int:
    # CDNA and GCN chips (gfx9xx, gfx8xx) run 64-wide wavefronts; RDNA (gfx1xxx) runs 32-wide.
    return 32 if arch.startswith("gfx1") and len(arch) >= 7 else 64


@dataclass(frozen=True)
class GPUTarget:
    """A compilation target: `("cuda", 90, 32)`, `("hip", "gfx942", 64)`, `("interpreter", "numpy", 1)`."""

    backend: str
    arch: int | str
    warp_size: int

    def __post_init__(self):
        if not isinstance(self.backend, str) or not _NAME.match(self.backend):
            raise TargetError(f"GPUTarget backend must be a lower-case name, got {self.backend!r}")
        if isinstance(self.arch, bool) or not isinstance(self.arch, (int, str)):
            raise TargetError(f"GPUTarget arch must be an int or a str, got {self.arch!r}")
        if isinstance(self.warp_size, bool) or not isinstance(self.warp_size, int) or self.warp_size < 1:
            raise TargetError(f"GPUTarget warp_size must be a positive int, got {self.warp_size!r}")

    @classmethod
    def parse(cls, spec: "str | GPUTarget") -> "GPUTarget":
        """Parse `cuda:90`, `hip:gfx942`, `interpreter` or a plugin's `name[:arch[:warp]]`."""
        if isinstance(spec, GPUTarget):
            return spec
        if not isinstance(spec, str):
            raise TargetError(f"a target must be a string or a GPUTarget, got {type(spec).__name__}; "
                              f"accepted forms: {ACCEPTED_FORMS}")
        parts = spec.strip().split(":")
        backend = parts[0].lower()
        if not _NAME.match(backend) or len(parts) > 3 or any(not p for p in parts):
            raise TargetError(f"cannot parse target {spec!r}; accepted forms: {ACCEPTED_FORMS}")
        arch_text = parts[1] if len(parts) > 1 else None
        arch = _parse_arch(backend, arch_text, spec)
        warp = _default_warp_size(backend, arch)
        if len(parts) == 3:
            if not parts[2].isdigit() or int(parts[2]) < 1:
                raise TargetError(f"cannot parse warp size {parts[2]!r} in target {spec!r}; "
                                  f"accepted forms: {ACCEPTED_FORMS}")
            warp = int(parts[2])
        return cls(backend, arch, warp)

    def __str__(self) -> str:
        text = self.backend
        arch_is_default = self.arch == _default_arch(self.backend)
        warp_is_default = self.warp_size == _default_warp_size(self.backend, self.arch)
        if not arch_is_default or not warp_is_default:
            text += f":{self.arch}"
        if not warp_is_default:
            text += f":{self.warp_size}"
        return text


def _default_arch(backend: str):
    return "numpy" if backend == "interpreter" else DEFAULT_ARCH


def _default_warp_size(backend: str, arch) -> int:
    if backend == "cuda":
        return 32
    if backend == "hip":
        return _hip_warp_size(str(arch))
    return 1


def _parse_arch(backend: str, text: str | None, spec: str):
    if backend == "cuda":
        match = _CUDA_ARCH.match(text or "")
        if not match:
            raise TargetError(f"cannot parse CUDA target {spec!r}: expected 'cuda:<sm>' with the SM as a "
                              f"number (cuda:80, cuda:90); accepted forms: {ACCEPTED_FORMS}")
        return int(match.group(1))
    if backend == "hip":
        if not _HIP_ARCH.match((text or "").lower()):
            raise TargetError(f"cannot parse HIP target {spec!r}: expected 'hip:gfx<arch>' (hip:gfx90a, "
                              f"hip:gfx942, hip:gfx1100); accepted forms: {ACCEPTED_FORMS}")
        return text.lower()
    if text is None:
        return _default_arch(backend)
    if not _ARCH.match(text):
        raise TargetError(f"cannot parse arch {text!r} in target {spec!r}; accepted forms: {ACCEPTED_FORMS}")
    return int(text) if text.isdigit() else text
