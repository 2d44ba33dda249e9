"""Start-up hook for the Python processes that `tilejit run` starts (directly or through a child:
multiprocessing workers, compile workers, `subprocess` calls of `python`).

`tilejit run` puts this folder first on PYTHONPATH and sets TILEJIT_ALIAS_TRITON=1; Python imports
`sitecustomize` at start-up, so every such process resolves `import triton` to tilejit as the parent
does. The same two variables give the alias to any program started by hand (docs/user-guide.md).
A `sitecustomize` that this file hides (later on the path) still runs, after this one.
"""
import importlib.machinery
import importlib.util
import os
import sys


def _alias():
    if os.environ.get("TILEJIT_ALIAS_TRITON", "").strip().lower() not in ("1", "true", "yes", "on"):
        return
    try:
        from tilejit.alias import alias_triton
        alias_triton()
    except Exception as exc:  # noqa: BLE001 - never stop the interpreter from starting
        print(f"tilejit: TILEJIT_ALIAS_TRITON=1 but the triton alias could not be installed: {exc}",
              file=sys.stderr)


def _run_hidden_sitecustomize():
    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


_alias()
_run_hidden_sitecustomize()
