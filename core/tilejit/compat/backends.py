"""`triton.backends`, `triton.backends.compiler` and `triton.backends.driver`: tilejit's backend API
under Triton's names, plus `backends`, the installed backends by name (Triton's registry).

torch asks `"cpu" in triton.backends.backends` to decide whether Triton can compile for the CPU;
tilejit's interpreter is not a Triton CPU code generator, so it is listed as "interpreter", not "cpu".
"""
from tilejit.backends import *  # noqa: F401,F403
from tilejit.backends import BaseBackend, GPUTarget, available_backends  # noqa: F401

__path__: list = []


class Backend:
    """One entry of `backends`: the backend class as `compiler`, its device side as `driver`."""

    def __init__(self, compiler):
        self.compiler = compiler
        self.driver = compiler


class _BackendTable(dict):
    """Filled on first use, so importing `triton.backends` does not load every backend."""

    _filled = False

    def _fill(self):
        if not self._filled:
            self._filled = True
            for name, cls in available_backends().items():
                dict.__setitem__(self, name, Backend(cls))

    def __contains__(self, key):
        self._fill()
        return dict.__contains__(self, key)

    def __getitem__(self, key):
        self._fill()
        return dict.__getitem__(self, key)

    def __iter__(self):
        self._fill()
        return dict.__iter__(self)

    def __len__(self):
        self._fill()
        return dict.__len__(self)

    def items(self):
        self._fill()
        return dict.items(self)

    def keys(self):
        self._fill()
        return dict.keys(self)

    def values(self):
        self._fill()
        return dict.values(self)

    def get(self, key, default=None):
        self._fill()
        return dict.get(self, key, default)


backends = _BackendTable()


class Language:
    """`triton.backends.compiler.Language`: the source languages a kernel can be written in."""

    TRITON = 0
    GLUON = 1
