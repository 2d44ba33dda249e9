"""The frontend: Python AST of a `@jit` function -> TTIR (`ASTSource`), or TTIR text (`IRSource`)."""
from .source import ASTSource, IRSource

__all__ = ["ASTSource", "IRSource"]
