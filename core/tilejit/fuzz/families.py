"""Kernel families with control flow or memory effects: loops, atomics and `tl.dot`."""
from __future__ import annotations

import numpy as np

from tilejit.fuzz import semantics as S
from tilejit.fuzz.building import (
    load_expr,
    make_case,
    other_value,
    pick_dtype,
    random_values,
    storage,
    tolerance,
)
from tilejit.fuzz.case import Arg, Case


# ---- loops with carried values ------------------------------------------------------------------
def _int_updates(dt):
    """(source, model) pairs updating the carried `acc` from the loaded `v` (all exact)."""
    lit = lambda x: np.asarray(x).astype(dt.model)
    b = lambda op, x, y: S.binary(op, x, y, dt)
    return [
        ("acc + v", lambda a, v: b("+", a, v)),
        ("acc * 3 + v", lambda a, v: b("+", b("*", a, lit(3)), v)),
        ("acc ^ v", lambda a, v: b("^", a, v)),
        ("tl.maximum(acc, v)", lambda a, v: b("max", a, v)),
        ("tl.where(v > acc, v, acc - 1)", lambda a, v: np.where(v > a, v, b("-", a, lit(1))).astype(dt.model)),
        ("acc - v * 2", lambda a, v: b("-", a, b("*", v, lit(2)))),
    ]


def _float_updates(dt):
    lit = lambda x: S.to_model(np.asarray(x, dtype=np.float64), dt)
    b = lambda op, x, y: S.binary(op, x, y, dt)
    return [
        ("acc + v", lambda a, v: b("+", a, v)),
        ("acc * 0.5 + v", lambda a, v: b("+", b("*", a, lit(0.5)), v)),
        ("tl.maximum(acc, v)", lambda a, v: b("max", a, v)),
        ("acc - v", lambda a, v: b("-", a, v)),
    ]


def loop_case(rng, seed) -> Case | None:
    block = int(rng.choice([16, 32, 64]))
    n = int(rng.integers(1, 2 * block + 1))
    grid = -(-n // block)
    padded = grid * block
    iterations = int(rng.integers(0, 6))  # zero-trip loops too
    dt = pick_dtype(rng)
    updates = _int_updates(dt) if dt.is_int else _float_updates(dt)
    first = updates[int(rng.integers(len(updates)))]
    second = updates[int(rng.integers(len(updates)))] if rng.random() < 0.5 else None
    init = other_value(rng, dt)
    other = other_value(rng, dt)
    data = random_values(rng, dt, (max(iterations, 1), n))
    model_rows = np.full((max(iterations, 1), padded), other).astype(data.dtype)
    model_rows[:, :n] = data
    if not dt.is_int:
        model_rows = S.to_model(model_rows, dt)
    style = "while" if rng.random() < 0.3 else "for"
    lines = ["    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)", "    mask = offs < n",
             f"    acc = tl.full([BLOCK], {init!r}, {dt.tl})"]
    if style == "for":
        lines.append("    for k in range(0, K):")
    else:
        lines += ["    k = 0", "    while k < K:"]
    lines.append(f"        v = {load_expr('x_ptr', 'k * n + offs', 'mask', other, dt)}")
    lines.append(f"        acc = {first[0]}")
    if second is not None:
        lines += ["        if k % 2 == 0:", f"            acc = {second[0]}"]
    if style == "while":
        lines.append("        k += 1")
    acc = S.to_model(np.full(padded, init), dt) if not dt.is_int else np.full(padded, init).astype(dt.model)
    tol = np.zeros(padded)
    for k in range(iterations):
        v = model_rows[k]
        acc, tol = _apply(first[1], acc, v, tol, dt)
        if second is not None and k % 2 == 0:
            acc, tol = _apply(second[1], acc, v, tol, dt)
        if dt.kind == "float" and not np.all(np.abs(acc.astype(np.float64)) < 1e4):
            return None
    stored = "acc" if dt.storable else "acc.to(tl.float32)"
    lines.append(f"    tl.store(out_ptr + offs, {stored}, mask=mask)")
    expected = acc[:n].astype(storage(dt))
    args = [Arg("x_ptr", "ptr", data.astype(storage(dt))),
            Arg("out_ptr", "ptr", np.zeros(n, storage(dt)), expected, tolerance(tol[:n], expected)),
            Arg("n", "int", n), Arg("K", "int", iterations), Arg("BLOCK", "constexpr", block)]
    return make_case(seed, f"loop-{style}", args, lines, (grid,))


def _apply(update, acc, v, tol, dt):
    new = update(acc, v)
    if dt.is_int:
        return new, tol
    # Each update is two roundings at most: a bound of a few ulp of every magnitude involved.
    mags = np.abs(acc.astype(np.float64)) + np.abs(v.astype(np.float64)) + np.abs(new.astype(np.float64))
    return new, tol + 2 * dt.eps * mags


# ---- atomics ------------------------------------------------------------------------------------
_ATOMIC_TYPES = {"add": ["int32", "uint32", "int64", "uint64", "float32", "float16"],
                 "max": ["int32", "uint32", "int64", "uint64", "float32"],
                 "min": ["int32", "uint32", "int64", "uint64", "float32"],
                 "and": ["int32", "uint32", "int64", "uint64"], "or": ["int32", "uint32", "int64", "uint64"],
                 "xor": ["int32", "uint32", "int64", "uint64"]}
_UFUNCS = {"add": np.add, "max": np.maximum, "min": np.minimum, "and": np.bitwise_and, "or": np.bitwise_or,
           "xor": np.bitwise_xor}


def atomic_case(rng, seed) -> Case | None:
    op = list(_ATOMIC_TYPES)[int(rng.integers(len(_ATOMIC_TYPES)))]
    dt = S.BY_NAME[_ATOMIC_TYPES[op][int(rng.integers(len(_ATOMIC_TYPES[op])))]]
    block = int(rng.choice([16, 32, 64]))
    n = int(rng.integers(1, 3 * block + 1))
    grid = -(-n // block)
    unique = rng.random() < 0.3  # every lane its own address: the returned old values are known too
    slots = n if unique else int(rng.integers(1, 8))
    if dt.kind == "float":  # small integers: every order of additions gives the same exact sum
        data = rng.integers(-8, 9, size=n).astype(dt.model)
        init = rng.integers(-8, 9, size=slots).astype(dt.model)
    else:
        data, init = random_values(rng, dt, n), random_values(rng, dt, slots)
    index = np.arange(n) % slots
    expected = init.copy()
    with np.errstate(all="ignore"):
        _UFUNCS[op].at(expected, index, data)
    lines = ["    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)", "    mask = offs < n",
             "    v = tl.load(x_ptr + offs, mask=mask, other=0)"]
    sem = rng.choice(["", ", sem='relaxed'", ", sem='acq_rel'"])
    call = f"tl.atomic_{op}(out_ptr + offs % SLOTS, v, mask=mask{sem})"
    args = [Arg("x_ptr", "ptr", data), Arg("out_ptr", "ptr", init.copy(), expected, np.zeros(slots))]
    if unique:
        lines += [f"    old = {call}", "    tl.store(old_ptr + offs, old, mask=mask)"]
        args.append(Arg("old_ptr", "ptr", np.zeros(n, dt.model), init.copy(), np.zeros(n)))
    else:
        lines.append(f"    {call}")
    args += [Arg("n", "int", n), Arg("SLOTS", "constexpr", slots), Arg("BLOCK", "constexpr", block)]
    return make_case(seed, "atomic", args, lines, (grid,))


# ---- tl.dot -------------------------------------------------------------------------------------
# (input type, input_precision, relative error bound of the result against sum |a||b|)
_DOT_KINDS = [("float16", None, 2e-6), ("bfloat16", None, 2e-6), ("float32", "'ieee'", 2e-6),
              ("float32", "'tf32'", 2e-3), ("float32", "'tf32x3'", 2e-5), ("float32", None, 2e-3),
              ("int8", None, 0.0), ("float8e5", None, 1e-3), ("float8e4nv", None, 1e-3)]


def dot_case(rng, seed) -> Case | None:
    in_name, precision, rtol = _DOT_KINDS[int(rng.integers(len(_DOT_KINDS)))]
    dt = S.BY_NAME[in_name]
    bm, bn, bk = (int(rng.choice([16, 32, 64])) for _ in range(3))
    m, n, k = int(rng.integers(1, bm + 1)), int(rng.integers(1, bn + 1)), int(rng.integers(1, bk + 1))
    if dt.is_int:
        a, b = rng.integers(-128, 128, (m, k)).astype(np.int8), rng.integers(-128, 128, (k, n)).astype(np.int8)
        a_model, b_model = a.astype(np.int64), b.astype(np.int64)
    elif dt.name.startswith("float8"):  # quarters in [-2, 2]: exact in both fp8 formats
        a = (rng.integers(-8, 9, (m, k)) / 4).astype(np.float32)
        b = (rng.integers(-8, 9, (k, n)) / 4).astype(np.float32)
        a_model, b_model = a.astype(np.float64), b.astype(np.float64)
    else:
        a = S.to_model(rng.uniform(-1, 1, (m, k)), dt).astype(storage_of(dt))
        b = S.to_model(rng.uniform(-1, 1, (k, n)), dt).astype(storage_of(dt))
        a_model, b_model = a.astype(np.float64), b.astype(np.float64)
        if dt.name == "float32" and precision in (None, "'tf32'"):
            a_model, b_model = S.round_tf32(a), S.round_tf32(b)
    use_acc = rng.random() < 0.4
    out_fp16 = dt.name == "float16" and not use_acc and rng.random() < 0.3
    expected = a_model @ b_model
    scale = np.abs(a_model) @ np.abs(b_model)
    lines = ["    rm = tl.arange(0, BM)", "    rn = tl.arange(0, BN)", "    rk = tl.arange(0, BK)"]
    convert = "" if dt.storable else f".to({dt.tl})"
    lines.append(f"    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), "
                 f"other=0){convert}")
    lines.append(f"    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N), "
                 f"other=0){convert}")
    extra = f", input_precision={precision}" if precision else ""
    args = [Arg("a_ptr", "ptr", a), Arg("b_ptr", "ptr", b)]
    out_mask = "(rm[:, None] < M) & (rn[None, :] < N)"
    if use_acc:
        acc_dt = np.int32 if dt.is_int else np.float32
        acc = (rng.integers(-1000, 1000, (m, n)) if dt.is_int else rng.uniform(-1, 1, (m, n))).astype(acc_dt)
        args.append(Arg("c_ptr", "ptr", acc))
        lines.append(f"    acc = tl.load(c_ptr + rm[:, None] * N + rn[None, :], mask={out_mask}, other=0)")
        lines.append(f"    c = tl.dot(a, b, acc{extra})")
        expected = expected + acc
        scale = scale + np.abs(acc.astype(np.float64))
    elif out_fp16:
        lines.append(f"    c = tl.dot(a, b, out_dtype=tl.float16{extra})")
    else:
        lines.append(f"    c = tl.dot(a, b{extra})")
    lines.append(f"    tl.store(out_ptr + rm[:, None] * N + rn[None, :], c, mask={out_mask})")
    out_dtype = np.int32 if dt.is_int else np.float16 if out_fp16 else np.float32
    expected = expected.astype(out_dtype)
    tol = (rtol + (1e-3 if out_fp16 else 0.0)) * scale + (1e-30 if not dt.is_int else 0)
    args += [Arg("out_ptr", "ptr", np.zeros((m, n), out_dtype), expected, tolerance(tol / 4, expected)),
             Arg("M", "int", m), Arg("N", "int", n), Arg("K", "int", k),
             Arg("BM", "constexpr", bm), Arg("BN", "constexpr", bn), Arg("BK", "constexpr", bk)]
    return make_case(seed, f"dot-{in_name}{'-' + precision.strip(chr(39)) if precision else ''}", args, lines, (1,))


def storage_of(dt):
    return dt.model if dt.storable else np.float32
