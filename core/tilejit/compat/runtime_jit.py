"""`triton.runtime.jit`: tilejit's JIT module plus `TensorWrapper`, `reinterpret` and
`type_canonicalisation_dict`, which Triton keeps there."""
import tilejit.runtime.jit as _jit
from tilejit.runtime.jit import JITFunction, KernelInterface, jit  # noqa: F401
from tilejit.runtime.tensor_wrapper import TensorWrapper, reinterpret, type_canonicalisation_dict  # noqa: F401


def __getattr__(name):
    return getattr(_jit, name)
