"""TTIR passes: each a small class with `name` and `apply(module)`, run by a `PassManager`."""
from .base import FunctionPass, PassManager, PassRecord, kernel_name, run_passes
from .canonicalize import Canonicalize, canonicalization_patterns
from .cse import CSE
from .dce import DCE
from .inline import Inline
from .licm import LICM
from .pipeline import default_ttir_passes, run_ttir_passes, ttir_pass_manager
from .rewrite import RewritePattern, Rewriter, apply_patterns_greedily, clone_op
from .unroll import Unroll

__all__ = ["FunctionPass", "PassManager", "PassRecord", "kernel_name", "run_passes", "Canonicalize",
           "canonicalization_patterns", "CSE", "DCE", "Inline", "LICM", "default_ttir_passes",
           "run_ttir_passes", "ttir_pass_manager", "RewritePattern", "Rewriter", "apply_patterns_greedily",
           "clone_op", "Unroll"]
