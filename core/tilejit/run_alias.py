"""`tilejit run script.py [args]` / `tilejit run -m module [args]`: run a program the way `python`
would, with `import triton` resolving to tilejit (`tilejit.alias_triton()` is called first).

Python processes that the program starts get the alias too: TILEJIT_ALIAS_TRITON=1 and the folder of
`tilejit/_boot/sitecustomize.py` on PYTHONPATH are set for them (multiprocessing workers, torch's
compile workers, `subprocess` calls of `python`)."""
from __future__ import annotations

import os
import runpy
import sys
import traceback


BOOT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_boot")


def child_environment(env=None) -> dict:
    """`env` (default: os.environ) with what a child Python needs to start with the alias on."""
    env = dict(os.environ if env is None else env)
    env["TILEJIT_ALIAS_TRITON"] = "1"
    # The child must also find tilejit itself (when it is not installed but on this process's path).
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parts = [BOOT_DIR, package_root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(parts))
    return env


def run(script: str | None = None, module: str | None = None, args=()) -> int:
    """Run `script` (a path) or `module` as `__main__` with `sys.argv` set as Python sets it; returns
    the exit status (0, the SystemExit code, or 1 for an uncaught exception, whose traceback is printed)."""
    from tilejit.alias import alias_triton

    if (script is None) == (module is None):
        raise ValueError("tilejit run: give a script path or -m module")
    alias_triton()
    saved_argv, saved_path, saved_env = sys.argv[:], sys.path[:], dict(os.environ)
    os.environ.update(child_environment())
    try:
        if module is not None:
            sys.argv = [module, *args]
            sys.path.insert(0, os.getcwd())
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        else:
            if not os.path.exists(script):
                print(f"tilejit run: can't open file '{script}': no such file", file=sys.stderr)
                return 2
            sys.argv = [script, *args]
            sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
            runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        code = exc.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)
        return 1
    except Exception:  # noqa: BLE001 - report as Python would, with the user's traceback
        traceback.print_exc()
        return 1
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
        os.environ.clear()
        os.environ.update(saved_env)
    return 0


def main(argv) -> int:
    """`tilejit run` with the raw arguments: `-m module [args]` or `script [args]`; every argument after
    the module or script is the program's own."""
    rest = list(argv)
    if rest and rest[0] == "--":
        rest = rest[1:]
    if rest[:1] == ["-m"]:
        if len(rest) < 2:
            print("tilejit run: -m needs a module name", file=sys.stderr)
            return 2
        return run(module=rest[1], args=rest[2:])
    if rest and rest[0].startswith("-m") and len(rest[0]) > 2:  # `-mpytest`, as python accepts
        return run(module=rest[0][2:], args=rest[1:])
    if not rest:
        print("usage: tilejit run [-m module | script.py] [args ...]", file=sys.stderr)
        return 2
    return run(script=rest[0], args=rest[1:])


def cmd_run(args) -> int:
    """The argparse route (only reached for `tilejit run --help`-like uses)."""
    return main((["-m", args.module] if args.module else []) + list(args.args))
