"""tilejit's interpreter backend: runs TTIR as a generated NumPy program on the CPU."""
from .backend import InterpreterBackend, InterpreterOptions, make_numpy_program
from .codegen import generate_program

__all__ = ["InterpreterBackend", "InterpreterOptions", "generate_program", "make_numpy_program"]
