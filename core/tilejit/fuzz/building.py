"""Helpers shared by the kernel families: inputs, loads, stores, and the Case itself."""
from __future__ import annotations

import numpy as np

from tilejit.fuzz import semantics as S
from tilejit.fuzz.case import KERNEL_NAME, Case
from tilejit.fuzz.expressions import Expressions, Value, float_literal


# ---- inputs -------------------------------------------------------------------------------------
def random_values(rng, dt: S.DType, shape) -> np.ndarray:
    """Inputs of `dt`'s model type: full-range or small integers (division and shifts by small,
    negative numbers matter), floats in [-2, 2] in steps of 1/8 (exact in every float type but fp8)."""
    if dt.is_int:
        info = np.iinfo(dt.model)
        if rng.random() < 0.5:
            lo, hi = max(int(info.min), -9), min(int(info.max), 9)
        else:
            lo, hi = int(info.min), int(info.max)
        return rng.integers(lo, hi, size=shape, endpoint=True, dtype=np.int64 if dt.signed else np.uint64
                            ).astype(dt.model)
    return (rng.integers(-16, 17, size=shape) / 8.0).astype(dt.model)


def storage(dt: S.DType) -> np.dtype:
    """The dtype of an argument array holding `dt` values (fp32 for bf16 and fp8)."""
    return np.dtype(dt.model) if dt.storable else np.dtype(np.float32)


def load_expr(ptr: str, offsets: str, mask: str, other, dt: S.DType) -> str:
    text = f"tl.load({ptr} + {offsets}, mask={mask}, other={other!r})"
    return text if dt.storable else f"{text}.to({dt.tl})"


def other_value(rng, dt: S.DType):
    return int(rng.integers(-3, 4)) if dt.kind == "int" else int(rng.integers(0, 4)) if dt.is_int else float_literal(rng)


def pick_dtype(rng, types=None) -> S.DType:
    types = types or S.ALL_TYPES
    return types[int(rng.integers(len(types)))]


def store_value(v: Value) -> tuple[str, np.ndarray]:
    """The expression to store and the expected stored values (non-storable types go out as fp32)."""
    if v.dt.storable:
        return v.name, v.val
    return f"{v.name}.to(tl.float32)", v.val.astype(np.float32)


def grow(ex: Expressions, rng, steps: int, types, mixed_share: float = 0.0) -> Value | None:
    """`steps` random statements over `types`; the last value made. With `mixed_share`, that share
    of the statements combine two values of different types (Triton's type promotion)."""
    last = None
    for _ in range(steps * 3):
        if mixed_share and rng.random() < mixed_share:
            made = ex.mixed()
        else:
            made = ex.step(pick_dtype(rng, types) if rng.random() < 0.3 or last is None else last.dt)
        if made is not None:
            last = made
            steps -= 1
            if steps == 0:
                break
    return last


def tolerance(v_tol, expected) -> np.ndarray:
    """The allowed error of each stored element: a few times the model's bound."""
    return 4 * np.asarray(v_tol, dtype=np.float64) + np.zeros(np.shape(expected))


def make_case(seed, family, args, lines, grid) -> Case:
    params = ", ".join(a.name + (": tl.constexpr" if a.kind == "constexpr" else "") for a in args)
    body = f"@triton.jit\ndef {KERNEL_NAME}({params}):\n" + "\n".join(lines) + "\n"
    return Case(seed, family, body, args, tuple(grid))
