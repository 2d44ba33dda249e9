"""Shims that give tilejit the module layout of Triton 3.x, used by the `triton` import alias
(`tilejit.alias`). Each re-exports tilejit's objects under Triton's module names; none holds logic of
its own beyond small adapters."""
