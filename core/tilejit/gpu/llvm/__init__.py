"""TTGIR -> LLVM IR with llvmlite, shared by every GPU backend (see `lowering.py`)."""
from .lowering import lower_module, layout_of

__all__ = ["lower_module", "layout_of"]
