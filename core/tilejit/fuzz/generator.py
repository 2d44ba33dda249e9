"""The deterministic kernel generator: `generate(seed)` is the same Case on every machine.

Families (one per seed, chosen by the seed): elementwise expressions over 1-D blocks with odd sizes
and masks, the same over 2-D broadcast tiles, reductions and scans along either axis, loops with
carried values (`for` and `while`), atomics with colliding addresses, `tl.dot` in every input
precision, and (tilejit.fuzz.indexing) index and mask arithmetic on masked loads and stores. Each
kernel is plain Triton code; the expected outputs come from `semantics`.
"""
from __future__ import annotations

import numpy as np

from tilejit.fuzz import semantics as S
from tilejit.fuzz.building import (
    grow,
    load_expr,
    make_case,
    other_value,
    pick_dtype,
    random_values,
    storage,
    store_value,
    tolerance,
)
from tilejit.fuzz.case import Arg, Case
from tilejit.fuzz.expressions import Expressions, Value
from tilejit.fuzz.families import atomic_case, dot_case, loop_case
from tilejit.fuzz.indexing import indexing_case

FAMILIES = ("elementwise", "broadcast", "reduce", "scan", "loop", "atomic", "dot")
# Chosen by a stream of their own, so that adding one leaves the kernels of the other seeds unchanged.
LATER_FAMILIES = (("promotion", 0.12), ("indexing", 0.15))
ALL_FAMILIES = FAMILIES + tuple(name for name, _ in LATER_FAMILIES)


def generate(seed: int, family: str | None = None) -> Case:
    rng = np.random.default_rng([seed, 0x7117])
    if family is None:
        family = FAMILIES[int(rng.integers(len(FAMILIES)))]
        draw = np.random.default_rng([seed, 0x9E37]).random()
        for name, share in LATER_FAMILIES:
            if draw < share:
                family = name
                break
            draw -= share
    else:
        rng.integers(len(FAMILIES))  # the same stream as an unforced seed
    for attempt in range(20):  # a random choice may not fit (e.g. no exact operand): draw again
        case = _FAMILY_BUILDERS[family](rng, seed)
        if case is not None:
            case.num_warps = min(int(rng.choice([1, 2, 4, 8])), _MAX_WARPS.get(family, 8))
            return case
    raise RuntimeError(f"seed {seed}: no {family} kernel after 20 attempts")


# ---- families -----------------------------------------------------------------------------------
def _elementwise(rng, seed, mixed_share: float = 0.0) -> Case | None:
    block = int(rng.choice([16, 32, 64, 128]))
    n = int(rng.integers(1, 3 * block))
    grid = -(-n // block)
    padded = grid * block
    types = [pick_dtype(rng) for _ in range(int(rng.integers(1 if not mixed_share else 2, 4)))]
    lines = ["    pid = tl.program_id(0)", "    offs = pid * BLOCK + tl.arange(0, BLOCK)", "    mask = offs < n"]
    ex = Expressions(rng, lines)
    args = []
    for i, dt in enumerate(types):
        data = random_values(rng, dt, n)
        other = other_value(rng, dt)
        model = np.concatenate([data, np.full(padded - n, other, dtype=data.dtype)])
        args.append(Arg(f"in{i}_ptr", "ptr", data.astype(storage(dt))))
        lines.append(f"    v{i} = {load_expr(f'in{i}_ptr', 'offs', 'mask', other, dt)}")
        ex.leaf(f"v{i}", dt, S.to_model(model, dt) if not dt.is_int else model)
    result = grow(ex, rng, int(rng.integers(1, 9)), types, mixed_share)
    if result is None:
        return None
    stored, expected_vals = store_value(result)
    lines.append(f"    tl.store(out_ptr + offs, {stored}, mask=mask)")
    out = np.zeros(n, dtype=expected_vals.dtype)
    expected = expected_vals[:n].astype(out.dtype)
    args += [Arg("out_ptr", "ptr", out, expected, tolerance(result.tol[:n], expected)),
             Arg("n", "int", n), Arg("BLOCK", "constexpr", block)]
    return make_case(seed, "promotion" if mixed_share else "elementwise", args, lines, (grid,))


def _promotion(rng, seed) -> Case | None:
    """Elementwise statements between values of different types: Triton's promotion rules."""
    return _elementwise(rng, seed, mixed_share=0.6)


def _broadcast(rng, seed) -> Case | None:
    bm, bn = int(rng.choice([1, 2, 4, 8, 16])), int(rng.choice([2, 4, 8, 16, 32]))
    m, n = int(rng.integers(1, 2 * bm + 1)), int(rng.integers(1, 2 * bn + 1))
    gm, gn = -(-m // bm), -(-n // bn)
    pm, pn = gm * bm, gn * bn
    dt_r, dt_c = pick_dtype(rng), pick_dtype(rng)
    lines = ["    rm = tl.program_id(0) * BM + tl.arange(0, BM)", "    rn = tl.program_id(1) * BN + tl.arange(0, BN)"]
    ex = Expressions(rng, lines)
    args = []
    for name, dt, size, pad, idx, length, shape in (("x", dt_r, m, pm, "rm", "M", (pm, 1)),
                                                   ("y", dt_c, n, pn, "rn", "N", (1, pn))):
        data = random_values(rng, dt, size)
        other = other_value(rng, dt)
        model = np.concatenate([data, np.full(pad - size, other, dtype=data.dtype)]).reshape(shape)
        args.append(Arg(f"{name}_ptr", "ptr", data.astype(storage(dt))))
        load = load_expr(f"{name}_ptr", idx, f"{idx} < {length}", other, dt)
        lines.append(f"    {name} = {load}{'[:, None]' if name == 'x' else '[None, :]'}")
        ex.leaf(name, dt, S.to_model(model, dt) if not dt.is_int else model)
    result = grow(ex, rng, int(rng.integers(1, 8)), [dt_r, dt_c])
    if result is None:
        return None
    val = np.broadcast_to(result.val, (pm, pn))
    tol = np.broadcast_to(result.tol, (pm, pn))
    name = result.name
    if np.shape(result.val) != (pm, pn):
        lines.append(f"    full = tl.broadcast_to({name}, (BM, BN))")
        name = "full"
    stored, expected_vals = store_value(Value(name, result.dt, val, tol, result.exact))
    lines.append(f"    tl.store(out_ptr + rm[:, None] * N + rn[None, :], {stored}, mask=(rm[:, None] < M) & (rn[None, :] < N))")
    expected = np.ascontiguousarray(expected_vals[:m, :n])
    out = np.zeros((m, n), dtype=expected.dtype)
    args += [Arg("out_ptr", "ptr", out, expected, tolerance(tol[:m, :n], expected)),
             Arg("M", "int", m), Arg("N", "int", n), Arg("BM", "constexpr", bm), Arg("BN", "constexpr", bn)]
    return make_case(seed, "broadcast", args, lines, (gm, gn))


def _load_tile(rng, lines, args, dt, bm, bn, m, n, other):
    data = random_values(rng, dt, (m, n))
    model = np.full((bm, bn), other).astype(data.dtype)
    model[:m, :n] = data
    args.append(Arg("x_ptr", "ptr", data.astype(storage(dt))))
    lines += ["    rm = tl.arange(0, BM)", "    rn = tl.arange(0, BN)",
              "    tile_mask = (rm[:, None] < M) & (rn[None, :] < N)",
              f"    x = {load_expr('x_ptr', 'rm[:, None] * N + rn[None, :]', 'tile_mask', other, dt)}"]
    return S.to_model(model, dt) if not dt.is_int else model


def _reduce(rng, seed) -> Case | None:
    bm, bn = int(rng.choice([1, 2, 4, 16, 32])), int(rng.choice([2, 8, 16, 64]))
    m, n = int(rng.integers(1, bm + 1)), int(rng.integers(1, bn + 1))
    dt = pick_dtype(rng)
    ops = ["sum", "max", "min", "argmax", "argmin"] + (["xor_sum"] if dt.is_int else [])
    op = ops[int(rng.integers(len(ops)))]
    axis = int(rng.integers(2))
    lines, args = [], []
    tile = _load_tile(rng, lines, args, dt, bm, bn, m, n, other_value(rng, dt))
    value, vdt = tile, dt
    if op in ("sum", "xor_sum", "max", "min") and rng.random() < 0.5:
        ex = Expressions(rng, lines)
        ex.leaf("x", dt, tile)
        made = grow(ex, rng, int(rng.integers(1, 3)), [dt])
        if made is None or not made.exact:
            return None  # the reduction of an inexact float tile: bounds would need more care
        lines.append(f"    x = {made.name}")
        value, vdt = made.val, made.dt
    result, rdt = S.reduce(op, value, axis, vdt)
    lines.append(f"    r = tl.{op}(x, axis={axis})")
    lines.append(f"    tl.static_assert(r.dtype == {rdt.tl})")
    keep = n if axis == 0 else m
    offs = "rn" if axis == 0 else "rm"
    stored, expected_vals = store_value(Value("r", rdt, result, 0, True))
    lines.append(f"    tl.store(out_ptr + {offs}, {stored}, mask={offs} < {'N' if axis == 0 else 'M'})")
    expected = np.ascontiguousarray(expected_vals[:keep])
    tol = 0.0
    if rdt.kind == "float" and op == "sum":
        count = value.shape[axis]
        tol = 2 * count * rdt.eps * np.sum(np.abs(value.astype(np.float64)), axis=axis)[:keep]
    out = np.zeros(keep, dtype=expected.dtype)
    args += [Arg("out_ptr", "ptr", out, expected, tolerance(tol, expected)), Arg("M", "int", m), Arg("N", "int", n),
             Arg("BM", "constexpr", bm), Arg("BN", "constexpr", bn)]
    return make_case(seed, "reduce", args, lines, (1,))


def _scan(rng, seed) -> Case | None:
    bm, bn = int(rng.choice([1, 2, 4, 16])), int(rng.choice([2, 8, 16, 32]))
    m, n = int(rng.integers(1, bm + 1)), int(rng.integers(1, bn + 1))
    op = "cumsum" if rng.random() < 0.6 else "cumprod"
    types = S.ALL_TYPES if op == "cumsum" else S.INT_TYPES + [S.FLOAT32, S.FLOAT64]
    dt = pick_dtype(rng, types)
    axis = int(rng.integers(2))
    reverse = bool(rng.random() < 0.3)
    lines, args = [], []
    tile = _load_tile(rng, lines, args, dt, bm, bn, m, n, other_value(rng, dt))
    flipped = np.flip(tile, axis=axis) if reverse else tile
    result, rdt = S.scan(op, flipped, axis, dt)
    if reverse:
        result = np.flip(result, axis=axis)
    lines.append(f"    r = tl.{op}(x, axis={axis}{', reverse=True' if reverse else ''})")
    lines.append(f"    tl.static_assert(r.dtype == {rdt.tl})")
    stored, expected_vals = store_value(Value("r", rdt, result, 0, True))
    lines.append(f"    tl.store(out_ptr + rm[:, None] * N + rn[None, :], {stored}, mask=tile_mask)")
    expected = np.ascontiguousarray(expected_vals[:m, :n])
    tol = 0.0
    if rdt.kind == "float":
        count = tile.shape[axis]
        mags = np.abs(flipped.astype(np.float64))
        bound = np.cumsum(mags, axis=axis) if op == "cumsum" else np.abs(np.cumprod(flipped.astype(np.float64), axis=axis))
        bound = np.flip(bound, axis=axis) if reverse else bound
        tol = (2 * count * rdt.eps * bound)[:m, :n] + 1e-30
    out = np.zeros((m, n), dtype=expected.dtype)
    args += [Arg("out_ptr", "ptr", out, expected, tolerance(tol, expected)), Arg("M", "int", m), Arg("N", "int", n),
             Arg("BM", "constexpr", bm), Arg("BN", "constexpr", bn)]
    return make_case(seed, "scan", args, lines, (1,))


# Small kernels whose blocks are meant to be spread thinly (replicated lanes) and to run cheaply on the
# host's SIMT runner, one OS thread per GPU thread.
_MAX_WARPS = {"indexing": 2}
_FAMILY_BUILDERS = {"elementwise": _elementwise, "promotion": _promotion, "broadcast": _broadcast, "reduce": _reduce, "scan": _scan,
                    "loop": loop_case, "atomic": atomic_case, "dot": dot_case, "indexing": indexing_case}


