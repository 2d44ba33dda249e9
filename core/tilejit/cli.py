"""The `tilejit` command: `backends`, `cache list|stats|clear`, `compile`, `demo`.

The compiler, frontend and demo modules are imported inside the commands that use them, so
`tilejit backends` and `tilejit cache` work even when those parts are broken or absent.
"""
from __future__ import annotations

import argparse
import importlib.util
import inspect
import json
import os
import sys
import time
from typing import Sequence

from tilejit.errors import TilejitError


class CLIError(TilejitError):
    """A command-line mistake (bad file, unknown kernel, malformed signature)."""


# ---- tilejit backends --------------------------------------------------------------------------
def cmd_backends(args) -> int:
    from tilejit import plugins
    from tilejit.backends import KNOWN_BACKENDS, active_state, available_backends, broken_backends

    import warnings
    with warnings.catch_warnings():  # broken plugins are listed below; no need to warn as well
        warnings.simplefilter("ignore", RuntimeWarning)
        installed, broken = available_backends(), broken_backends()
        broken_plugins = plugins.broken_plugins()
    if not installed:
        print("no working backend is installed")
    for name, cls in sorted(installed.items()):
        active, reason = active_state(cls)
        print(f"{name}: {'active' if active else 'inactive (' + reason + ')'}")
        print(f"  targets: {_safe_call(cls.describe_targets)}")
        if active:
            print(f"  current target: {_safe_call(cls.get_current_target)}")
        status = _safe_call(cls.toolchain_status)
        if isinstance(status, dict) and status:
            print("  toolchain:")
            for tool, state in status.items():
                print(f"    {tool}: {state}")
        elif not isinstance(status, dict):
            print(f"  toolchain: {status}")
    for name, error in sorted(broken.items()):
        print(f"{name}: BROKEN: {error}")
    for name, hint in KNOWN_BACKENDS.items():
        if name not in installed and name not in broken:
            print(f"{name}: not installed (`{hint}`)")
    for name, error in sorted(broken_plugins.items()):
        print(f"plugin {name}: BROKEN: {error}")
    return 0


def _safe_call(fn):
    # A backend's self-description must never crash the listing of the others.
    try:
        return fn()
    except Exception as exc:
        return f"error: {type(exc).__name__}: {exc}"


# ---- tilejit cache -----------------------------------------------------------------------------
def _human_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def cmd_cache(args) -> int:
    from tilejit.runtime import cache

    if args.cache_command == "list":
        entries = cache.cache_entries(args.cache_dir)
        if not entries:
            print("cache is empty")
        for e in entries:
            used = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(e.last_used)) if e.last_used else "?"
            print(f"{e.key[:16]}  {e.name or '?':24} {e.target or '?':14} {_human_bytes(e.size_bytes):>10}  "
                  f"{used}  {','.join(e.artifacts)}")
    elif args.cache_command == "stats":
        stats = cache.cache_stats(args.cache_dir)
        print(f"directory:      {stats['cache_dir']}")
        print(f"entries:        {stats['entries']}")
        print(f"size:           {_human_bytes(stats['total_bytes'])} ({stats['total_bytes']} bytes)")
        print(f"size bound:     {_human_bytes(stats['max_bytes'])} (TILEJIT_CACHE_MAX_BYTES)")
        print(f"JSON documents: {stats['json_documents']}")
        if stats.get("untrusted"):
            print(f"trust:          NOT USED: {stats['untrusted']} (see docs/user-guide.md, "
                  "'Who can write the cache')")
    else:
        removed = cache.clear_cache(args.cache_dir)
        print(f"removed {removed} cache entr{'y' if removed == 1 else 'ies'} from "
              f"{args.cache_dir or cache.knobs.cache_dir}")
    return 0


# ---- tilejit compile ---------------------------------------------------------------------------
def _literal(text: str):
    """The constexpr value a signature item spells (as Triton's AOT tool), or None for a type."""
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return {"True": True, "False": False}.get(text)


def parse_signature(text: str, arg_names: Sequence[str]):
    """`"*fp32:16,*fp32,i32,1024"` or `"x=*fp32:16,n=i32,BLOCK=1024"` → (signature, constexprs, attrs).

    As in Triton's AOT tool: a number is a constexpr value, `:16` marks a pointer or integer divisible
    by 16, `:1` an integer equal to 1 (which becomes a constexpr).
    """
    items = [item.strip() for item in text.split(",") if item.strip()]
    by_name: dict[str, str] = {}
    for position, item in enumerate(items):
        if "=" in item:
            name, _, spec = item.partition("=")
            name = name.strip()
            if name not in arg_names:
                raise CLIError(f"signature names '{name}', which is not a parameter of the kernel "
                               f"(parameters: {', '.join(arg_names)})")
        elif position < len(arg_names):
            name, spec = arg_names[position], item
        else:
            raise CLIError(f"signature has {len(items)} items but the kernel has {len(arg_names)} "
                           f"parameters ({', '.join(arg_names)})")
        if name in by_name:
            raise CLIError(f"signature gives parameter '{name}' twice")
        by_name[name] = spec.strip()
    missing = [n for n in arg_names if n not in by_name]
    if missing:
        raise CLIError(f"signature gives no type for parameter(s) {', '.join(missing)}")
    signature, constexprs, attrs = {}, {}, {}
    for index, name in enumerate(arg_names):
        spec = by_name[name]
        value = _literal(spec)
        if value is not None:
            signature[name], constexprs[name] = "constexpr", value
            continue
        type_text, _, hint = spec.partition(":")
        if not type_text:
            raise CLIError(f"empty type for parameter '{name}'")
        signature[name] = type_text
        if hint == "16":
            attrs[(index,)] = [["tt.divisibility", 16]]
        elif hint == "1":
            signature[name], constexprs[name] = "constexpr", 1
        elif hint:
            raise CLIError(f"unknown hint ':{hint}' for parameter '{name}' (use :16 or :1)")
    return signature, constexprs, attrs


def _load_kernel(spec: str):
    path, sep, kernel_name = spec.rpartition(":")
    if not sep or not path or not kernel_name:
        raise CLIError(f"expected FILE.py:KERNEL, got {spec!r}")
    if not os.path.isfile(path):
        raise CLIError(f"no such file: {path}")
    module_name = "tilejit_cli_" + "".join(c if c.isalnum() else "_" for c in os.path.abspath(path))
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_name] = module  # dataclasses and @jit look their module up while executing it
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        module_spec.loader.exec_module(module)
    except TilejitError:
        raise
    except Exception as exc:
        raise CLIError(f"importing {path} failed: {type(exc).__name__}: {exc}") from None
    finally:
        sys.path.pop(0)
    kernels = [n for n, v in vars(module).items() if _is_jit_function(v)]
    kernel = getattr(module, kernel_name, None)
    if not _is_jit_function(kernel):
        raise CLIError(f"{path} has no @jit kernel named '{kernel_name}' "
                       f"(kernels found: {', '.join(kernels) or 'none'})")
    return kernel


def _is_jit_function(obj) -> bool:
    try:
        from tilejit.runtime.jit import JITFunction
    except ImportError:  # runtime not available: recognise Triton-shaped objects instead
        return obj is not None and hasattr(obj, "arg_names") and callable(getattr(obj, "fn", None))
    return isinstance(obj, JITFunction)


def _arg_names(kernel) -> list[str]:
    names = getattr(kernel, "arg_names", None)
    if names is not None:
        return list(names)
    return list(inspect.signature(getattr(kernel, "fn", kernel)).parameters)


def cmd_compile(args) -> int:
    from tilejit.backends import GPUTarget, select_target

    # Check what the user typed before importing the compiler, so mistakes are reported first.
    target = GPUTarget.parse(args.target) if args.target else select_target(())
    kernel = _load_kernel(args.kernel)
    signature, constexprs, attrs = parse_signature(args.signature, _arg_names(kernel))
    from tilejit.compiler import compile as compile_kernel
    from tilejit.frontend.source import ASTSource
    options = {}
    if args.num_warps is not None:
        options["num_warps"] = args.num_warps
    if args.num_stages is not None:
        options["num_stages"] = args.num_stages
    compiled = compile_kernel(ASTSource(kernel, signature, constexprs, attrs), target=target, options=options)
    try:
        written = _write_outputs(args.output, args.kernel.rpartition(":")[2], compiled)
    except OSError as exc:  # an unwritable or impossible -o is the user's to fix: a message, not a traceback
        raise CLIError(f"cannot write the output to {args.output}: {exc.strerror or exc}"
                       + (f" ({exc.filename})" if exc.filename and exc.filename != args.output else "")) from None
    base = args.kernel.rpartition(":")[2]
    print(f"compiled {base} for {target}:")
    for path in written:
        print(f"  {path}")
    return 0


def _write_outputs(output: str, base: str, compiled) -> list:
    os.makedirs(output, exist_ok=True)
    written = []
    for stage, content in compiled.asm.items():
        path = os.path.join(output, f"{base}.{stage}")
        if isinstance(content, (bytes, bytearray)):
            with open(path, "wb") as f:
                f.write(content)
        else:
            with open(path, "w", encoding="utf-8") as f:
                f.write(str(content))
        written.append(path)
    meta_path = os.path.join(output, f"{base}.json")
    with open(meta_path, "w", encoding="utf-8") as f:
        json.dump(compiled.metadata, f, indent=2, default=str)
    written.append(meta_path)
    return written


# ---- tilejit demo ------------------------------------------------------------------------------
def cmd_demo(args) -> int:
    from tilejit import demo
    result = demo.main()
    return result if isinstance(result, int) else 0


# ---- entry point -------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tilejit", description="tilejit: a Triton-compatible kernel compiler")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("backends", help="list installed backends, their targets and toolchains")
    p.set_defaults(func=cmd_backends)

    p = sub.add_parser("cache", help="inspect or clear the on-disk compilation cache")
    p.add_argument("cache_command", choices=("list", "stats", "clear"))
    p.add_argument("--cache-dir", default=None, help="cache directory (default: TILEJIT_CACHE_DIR)")
    p.set_defaults(func=cmd_cache)

    p = sub.add_parser("compile", help="compile a kernel ahead of time, writing every stage to files")
    p.add_argument("kernel", metavar="FILE.py:KERNEL")
    p.add_argument("--signature", "-s", required=True,
                   help='e.g. "*fp32:16,*fp32,i32,1024" or "x=*fp32,n=i32,BLOCK=1024"')
    p.add_argument("--target", "-t", default=None, help="cuda:90, hip:gfx942, interpreter, ...")
    p.add_argument("--output", "-o", required=True, metavar="DIR")
    p.add_argument("--num-warps", "-w", type=int, default=None)
    p.add_argument("--num-stages", "-ns", type=int, default=None)
    p.set_defaults(func=cmd_compile)

    p = sub.add_parser("demo", help="compile and run a few kernels on the available backends")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("run", help="run a Python script or module with `import triton` resolving to tilejit",
                       usage="tilejit run [-m module | script.py] [args ...]")
    p.add_argument("-m", dest="module", help="run a library module as a script (like python -m)")
    p.add_argument("args", nargs=argparse.REMAINDER, help="the script, then its arguments")
    p.set_defaults(func=lambda args: importlib.import_module("tilejit.run_alias").cmd_run(args))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["run"] and argv[1:2] not in (["-h"], ["--help"]):
        # Everything after `run` belongs to the program (its own -q, -k, ...), as with `python`.
        return importlib.import_module("tilejit.run_alias").main(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except TilejitError as exc:
        print(f"tilejit: error: {exc}", file=sys.stderr)
        return 1
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("tilejit"):
            print(f"tilejit: error: this command needs {exc.name}, which is missing from this "
                  "installation", file=sys.stderr)
            return 1
        raise


if __name__ == "__main__":
    sys.exit(main())
