"""`import triton` resolving to tilejit, for tools that run third-party Triton code unchanged.

`install_triton_alias()` calls tilejit's own switch (`tilejit.alias_triton()`) when tilejit has one;
until then it installs an import hook that maps every `triton[.sub]` import to the module object
`tilejit[.sub]`. `remove_triton_alias()` undoes the hook (bench/realworld.py loads a library once with
Triton and once with tilejit in one process).

Lenient mode (diagnostic only, tools/triton_tests.py --lenient): a Triton name or submodule that
tilejit lacks becomes a placeholder that raises TritonAPIMissing when used, so that a test file that
merely imports it still collects and each test shows what it really needs.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import os
import sys
import types

_STATE = {"lenient": False}
_TILEJIT_ROOT = ""  # the folder of the tilejit package, set by install_triton_alias


class TritonAPIMissing(Exception):
    """A Triton name that tilejit does not provide was used (lenient mode only)."""


class _MissingBase:
    _qualname = "triton.?"

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return missing(f"{self._qualname}.{name}")

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and not kwargs and callable(args[0]) and not isinstance(args[0], _MissingBase):
            return args[0]  # a missing decorator (@triton.constexpr_function): pass the function on
        raise TritonAPIMissing(f"{self._qualname} is missing in tilejit")

    def __iter__(self):
        raise TritonAPIMissing(f"{self._qualname} is missing in tilejit")

    def __instancecheck__(self, obj):
        raise TritonAPIMissing(f"{self._qualname} is missing in tilejit")

    __subclasscheck__ = __instancecheck__

    def __repr__(self):
        return f"<missing {self._qualname}>"


def missing(qualname: str):
    """A placeholder whose class name carries the missing name (so that messages such as pytest's
    'expected exception must be a BaseException type, not MISSING:triton.TritonError' name it)."""
    cls = type(f"MISSING:{qualname}", (_MissingBase,), {"_qualname": qualname})
    return cls()


def _asked_by_user_code() -> bool:
    """True when the attribute lookup comes from code outside tilejit and installed packages (the
    Triton tests): tilejit's and pluggy's own `hasattr` probes must still see AttributeError."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.startswith("<frozen importlib"):
        frame = frame.f_back
    if frame is None:
        return False
    file = frame.f_code.co_filename
    return not (file.startswith(_TILEJIT_ROOT) or "/site-packages/" in file or "/lib/python3" in file
                or file == __file__)


def _lenient_module(module, name: str | None = None):
    """Let `module` answer a missing attribute with a placeholder (idempotent); `name` is the
    Triton name it stands for."""
    old = module.__dict__.get("__getattr__")
    if getattr(old, "_tt_lenient", False):
        return module
    name = name or module.__name__.replace("tilejit", "triton", 1)

    def __getattr__(attr):
        if old is not None:
            try:
                return old(attr)
            except AttributeError:
                pass
        if attr.startswith("__") or not _asked_by_user_code():
            raise AttributeError(f"module '{module.__name__}' has no attribute '{attr}'")
        return missing(f"{name}.{attr}")

    __getattr__._tt_lenient = True
    module.__getattr__ = __getattr__
    return module


# Class attributes that Triton's tests read at import time (lenient mode fills them in when tilejit
# lacks them; values as in Triton 3.9's triton/language/core.py).
_LENIENT_CLASS_ATTRS = {("tilejit.language", "dtype", "STANDARD_FP_TYPES"): ["fp16", "bf16", "fp32", "fp64"]}


def _lenient_class_attrs(module):
    for (mod, cls, attr), value in _LENIENT_CLASS_ATTRS.items():
        if module.__name__ == mod and hasattr(module, cls) and not hasattr(getattr(module, cls), attr):
            setattr(getattr(module, cls), attr, value)


class _AliasLoader(importlib.abc.Loader):
    """Loads `triton.x.y` as the already-imported module `tilejit.x.y` (the same object)."""

    def __init__(self, target: str):
        self.target = target

    def create_module(self, spec):
        module = importlib.import_module(self.target)
        if _STATE["lenient"]:
            _lenient_class_attrs(module)
            _lenient_module(module)
        return module

    def exec_module(self, module):
        pass


class _MissingModuleLoader(importlib.abc.Loader):
    """Lenient mode: a `triton.x` submodule that tilejit lacks, every attribute a placeholder."""

    def create_module(self, spec):
        module = types.ModuleType(spec.name)
        module.__path__ = []

        def __getattr__(attr):
            if attr.startswith("__"):
                raise AttributeError(attr)
            return missing(f"{spec.name}.{attr}")

        module.__getattr__ = __getattr__
        return module

    def exec_module(self, module):
        pass


class _TritonAliasFinder(importlib.abc.MetaPathFinder):
    """Maps every `triton[.sub]` import to `tilejit[.sub]`; `triton._internal_testing` falls back to
    Triton's own file from the support folder when tilejit has no such module."""

    def __init__(self, support_dir: str | None):
        self.support_dir = support_dir

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "triton" and not fullname.startswith("triton."):
            return None
        mapped = "tilejit" + fullname[len("triton"):]
        if _find_spec_safe(mapped) is not None:
            return importlib.util.spec_from_loader(fullname, _AliasLoader(mapped))
        if fullname == "triton._internal_testing" and self.support_dir:
            file = os.path.join(self.support_dir, "_internal_testing.py")
            if os.path.exists(file):
                return importlib.util.spec_from_file_location(fullname, file)
        if _STATE["lenient"]:
            return importlib.util.spec_from_loader(fullname, _MissingModuleLoader(), is_package=True)
        return None  # a real ImportError names the missing triton submodule


def _find_spec_safe(name):
    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None


def _drop_triton_modules():
    for name in [m for m in sys.modules if m == "triton" or m.startswith("triton.")]:
        del sys.modules[name]


def remove_triton_alias():
    """Take the runner's hook out again (the modules imported through it stay where they are)."""
    ours = (_TritonAliasFinder, _InternalTestingOnly, _LenientFront)
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, ours)]
    try:
        from tilejit.alias import remove_alias
    except ImportError:
        remove_alias = None
    if remove_alias is not None:
        remove_alias()
    _drop_triton_modules()


def install_triton_alias(support_dir: str | None = None, lenient: bool = False,
                         triton_internal_testing: bool = False) -> str:
    """Make `import triton` resolve to tilejit for this process. Prefers tilejit's own switch.
    With `triton_internal_testing`, `triton._internal_testing` is Triton's own file from
    `support_dir` even where the alias has one (diagnostic). Returns a line that says how."""
    import tilejit

    global _TILEJIT_ROOT
    _TILEJIT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(tilejit.__file__)))
    _STATE["lenient"] = lenient
    official = getattr(tilejit, "alias_triton", None)
    if official is not None:
        _drop_triton_modules()
        before = list(sys.meta_path)
        official()
        how = "tilejit.alias_triton()"
        added = [f for f in sys.meta_path if f not in before]
        if lenient and added:
            # answer what tilejit's finder refuses with placeholders
            sys.meta_path.insert(0, _LenientFront(added[0]))
            for name in [m for m in sys.modules if m == "triton" or m.startswith("triton.")]:
                _lenient_class_attrs(sys.modules[name])
                _lenient_module(sys.modules[name], name)
            how += " [LENIENT: missing names are placeholders]"
        if support_dir and (triton_internal_testing or _find_spec_safe("triton._internal_testing") is None):
            # the alias has no _internal_testing: add Triton's helper module under the alias
            sys.meta_path.insert(0, _InternalTestingOnly(support_dir))
            how += " + Triton's _internal_testing.py"
        return how
    support_needed = _find_spec_safe("tilejit._internal_testing") is None
    _drop_triton_modules()
    sys.meta_path.insert(0, _TritonAliasFinder(support_dir))
    how = "runner shim (sys.meta_path)" + (" + Triton's _internal_testing.py" if support_needed else "")
    return how + (" [LENIENT: missing names are placeholders]" if _STATE["lenient"] else "")


class _InternalTestingOnly(importlib.abc.MetaPathFinder):
    def __init__(self, support_dir: str):
        self.support_dir = support_dir

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "triton._internal_testing":
            return None
        file = os.path.join(self.support_dir, "_internal_testing.py")
        return importlib.util.spec_from_file_location(fullname, file) if os.path.exists(file) else None


class _LenientFront(importlib.abc.MetaPathFinder):
    """Lenient mode over tilejit's own alias: asks tilejit's finder first; a `triton.x` it refuses
    becomes a placeholder module, and each module it hands out answers missing names with
    placeholders."""

    def __init__(self, official):
        self.official = official

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "triton" and not fullname.startswith("triton."):
            return None
        try:
            spec = self.official.find_spec(fullname, path, target)
        except ImportError:
            spec = None
        if spec is None:
            return importlib.util.spec_from_loader(fullname, _MissingModuleLoader(), is_package=True)
        if spec.loader is not None and not isinstance(spec.loader, _LenientLoader):
            spec.loader = _LenientLoader(spec.loader)
        return spec


class _LenientLoader(importlib.abc.Loader):
    def __init__(self, inner):
        self.inner = inner

    def create_module(self, spec):
        module = self.inner.create_module(spec)
        if module is not None:
            _lenient_class_attrs(module)
            _lenient_module(module, spec.name)
        return module

    def exec_module(self, module):
        return self.inner.exec_module(module)
