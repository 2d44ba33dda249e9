"""`@tilejit.constexpr_function` (Triton's `@triton.constexpr_function`): a plain Python function that
`@jit` code may call on compile-time values; the call is evaluated while compiling and its result is
a constexpr (`tl.static_range(triton.cdiv(H, BLOCK_H))`). Called from host code it is the function
itself. This module imports nothing heavy: `tilejit.cdiv` is one of these.
"""
from __future__ import annotations

import functools
import hashlib
import inspect


def _unwrap(value):
    """A `tl.constexpr`'s value (recognised by name: this module does not import the language)."""
    if type(value).__name__ == "constexpr" and hasattr(value, "value"):
        return value.value
    return value


class ConstexprFunction:
    """A function evaluated at compile time when called from `@jit` code (see the module docstring).

    The frontend calls it with the arguments' compile-time values (`tl.constexpr` unwrapped) and keeps
    the result as a constexpr; tensors are refused there, by name."""

    def __init__(self, fn):
        if not callable(fn):
            raise TypeError(f"constexpr_function expects a function, got {type(fn).__name__}")
        self.fn = fn
        functools.update_wrapper(self, fn)
        self._cache_key = None

    def __call__(self, *args, _semantic=None, **kwargs):
        return self.fn(*[_unwrap(a) for a in args], **{k: _unwrap(v) for k, v in kwargs.items()})

    def __get__(self, instance, owner):
        # A constexpr_function defined in a class is a method of its instances, as in Triton.
        return self if instance is None else functools.partial(self, instance)

    @property
    def cache_key(self) -> str:
        """Hash of the function's source (its code when the source is unavailable): the kernels that
        call it are recompiled when it changes."""
        if self._cache_key is None:
            try:
                text = inspect.getsource(self.fn)
            except (OSError, TypeError):
                code = getattr(self.fn, "__code__", None)
                text = repr((code.co_code, code.co_consts)) if code is not None else repr(self.fn)
            name = f"{getattr(self.fn, '__module__', '')}.{getattr(self.fn, '__qualname__', '')}"
            self._cache_key = hashlib.sha256(f"{name}\n{text}".encode()).hexdigest()
        return self._cache_key

    def __repr__(self):
        return f"ConstexprFunction({getattr(self.fn, '__qualname__', self.fn)!r})"


def constexpr_function(fn):
    """Decorate a Python function so that `@jit` code can call it on constexpr values (Triton 3.x)."""
    return ConstexprFunction(fn)


@constexpr_function
def cdiv(x: int, y: int) -> int:
    """Ceiling division of two integers, as `triton.cdiv` (also usable inside `@jit` on constexprs)."""
    return (x + y - 1) // y


@constexpr_function
def next_power_of_2(n: int) -> int:
    """The smallest power of two >= n, as `triton.next_power_of_2` (whose bit trick gives 0 for
    n <= 0; also usable inside `@jit` on constexprs)."""
    n = int(n)
    return 0 if n <= 0 else 1 << (n - 1).bit_length()
