"""`inline`: replace `tt.call` by the callee's body.

Calls to functions marked `noinline = true`, to functions that are (mutually) recursive, and to
functions whose `tt.return` is not the single last op of the entry block stay calls (the frontend
emits one return at the end of every function). The inlined ops keep the callee's locations, so a
later error points at the line in the helper function. Private functions left uncalled are removed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Set

from ..errors import CompilationError
from ..ir import Module, Operation
from .dce import callee_name, remove_uncalled_private_functions
from .rewrite import inline_block_before


def _calls_in(func: Operation) -> List[Operation]:
    return [op for op in func.walk() if op.name == "tt.call"]


def recursive_functions(module: Module) -> Set[str]:
    """Functions that can reach themselves through calls (never inlined: it would not terminate)."""
    graph: Dict[str, Set[str]] = {f.attrs["sym_name"]: {callee_name(c) for c in _calls_in(f)}
                                  for f in module.functions}
    recursive = set()
    for start in graph:
        seen, stack = set(), list(graph[start])
        while stack:
            name = stack.pop()
            if name == start:
                recursive.add(start)
                break
            if name in seen or name not in graph:
                continue
            seen.add(name)
            stack.extend(graph[name])
    return recursive


def _single_final_return(func: Operation) -> Optional[Operation]:
    """The callee's `tt.return` when it is the entry block's last op and the only return."""
    entry = func.regions[0].blocks[0]
    returns = [op for op in func.walk() if op.name == "tt.return"]
    if len(returns) != 1 or not entry.ops or entry.ops[-1] is not returns[0]:
        return None
    return returns[0]


def can_inline(callee: Optional[Operation], recursive: Set[str]) -> bool:
    return (callee is not None and not callee.attrs.get("noinline", False)
            and callee.attrs.get("sym_name") not in recursive and _single_final_return(callee) is not None)


def inline_call(call: Operation, callee: Operation) -> None:
    """Replace `call` with a copy of `callee`'s body (the callee must pass `can_inline`)."""
    entry = callee.regions[0].blocks[0]
    if len(call.operands) != len(entry.args):
        raise CompilationError.at(call.loc, f"call to '{callee.attrs['sym_name']}' passes "
                                            f"{len(call.operands)} arguments, the function takes {len(entry.args)}")
    mapping = dict(zip(entry.args, call.operands))
    returned = inline_block_before(entry, call, mapping)
    if len(returned) != len(call.results):
        raise CompilationError.at(call.loc, f"call to '{callee.attrs['sym_name']}' expects "
                                            f"{len(call.results)} results, the function returns {len(returned)}")
    for result, value in zip(call.results, returned):
        result.replace_all_uses_with(value)
    call.erase()


@dataclass(frozen=True)
class Inline:
    """Inline every call that can be inlined, then drop the private functions left uncalled."""
    name: str = "inline"

    def apply(self, module: Module) -> None:
        recursive = recursive_functions(module)
        # Inlining copies the callee as it is, calls included; those copies are inlined in the next
        # round. Recursion is excluded above, so the rounds end after at most call-depth rounds.
        while True:
            inlined = 0
            for func in module.functions:
                for call in _calls_in(func):
                    callee = module.get(callee_name(call))
                    if can_inline(callee, recursive):
                        inline_call(call, callee)
                        inlined += 1
            if not inlined:
                break
        remove_uncalled_private_functions(module)
