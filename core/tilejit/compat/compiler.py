"""`triton.compiler` and `triton.compiler.compiler`: `compile`, `ASTSource`, `IRSource`,
`CompiledKernel`, `GPUTarget`, `triton_key`, and the compilation errors (also as the submodule
`errors`, which Triton's `import triton` imports)."""
from tilejit import errors  # noqa: F401  (`triton.compiler.errors` after a bare `import triton`)
from tilejit.backends import GPUTarget
from tilejit.compiler import CompiledKernel, compile, tilejit_version
from tilejit.errors import CompilationError, OutOfResources, TritonError
from tilejit.frontend.source import ASTSource, IRSource

__path__: list = []  # `triton.compiler.compiler` is this module again

__all__ = ["ASTSource", "IRSource", "CompiledKernel", "CompilationError", "GPUTarget", "OutOfResources",
           "TritonError", "compile", "make_backend", "triton_key"]


def triton_key() -> str:
    """A string that changes whenever the compiler does (torch keys its caches with it)."""
    return f"tilejit-{tilejit_version()}"


def make_backend(target):
    """The backend object for `target` (a GPUTarget or a string such as "cuda:90")."""
    from tilejit.backends import backend_for_target

    return backend_for_target(target)
