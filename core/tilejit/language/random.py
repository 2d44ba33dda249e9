"""Counter-based random numbers for `tl` (Triton 3.x's `triton.language.random`), written in `tl`.

Philox-4x32 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11) with Triton's
constants, key schedule and argument order, so a seed and offsets give bit-identical numbers to
Triton's `tl.rand`/`tl.randint`/`tl.randn`. The generator is stateless: each element's numbers are
a pure function of (seed, offset), which is what makes dropout masks reproducible in the backward pass.
"""
from __future__ import annotations

from ..runtime.jit import jit
from . import core

__all__ = [
    "philox", "philox_impl", "randint", "randint4x", "rand", "rand4x", "randn", "randn4x",
    "uint_to_uniform_float", "pair_uniform_to_normal",
]

N_ROUNDS_DEFAULT = core.constexpr(10)  # the round count Random123 recommends for Philox-4x32
# Philox-4x32: the Weyl increments of the two key words (golden ratio, sqrt(3) - 1) and the
# multipliers of counter words 0 and 2.
PHILOX_KEY_A = core.constexpr(0x9E3779B9)
PHILOX_KEY_B = core.constexpr(0xBB67AE85)
PHILOX_ROUND_A = core.constexpr(0xD2511F53)
PHILOX_ROUND_B = core.constexpr(0xCD9E8D57)
# Philox-4x64 (used when the counters are 64-bit words, as in Triton): the same roles, 64-bit constants.
PHILOX_KEY_A_64 = core.constexpr(0x9E3779B97F4A7C15)
PHILOX_KEY_B_64 = core.constexpr(0xBB67AE8584CAA73B)
PHILOX_ROUND_A_64 = core.constexpr(0xD2E7470EE14C6C93)
PHILOX_ROUND_B_64 = core.constexpr(0xCA5A826395121157)


# -- compile-time helpers --------------------------------------------------------------------------

@core.builtin
def _philox_words(seed, c0, c1, c2, c3, _semantic=None):
    """Counters as unsigned words of their width, and the seed split into the two key words.

    32-bit counters: key = (low 32 bits of seed, high 32 bits). 64-bit counters: key = (seed, 0),
    as Triton does."""
    seed = _semantic.to_tensor(seed)
    if not seed.type.scalar.is_int():
        raise TypeError(f"philox: the seed must be an integer, got {seed.type.scalar}")
    counters = [_semantic.to_tensor(c) for c in (c0, c1, c2, c3)]
    widths = {c.type.scalar.primitive_bitwidth for c in counters}
    if any(not c.type.scalar.is_int() for c in counters) or len(widths) != 1 or widths & {8, 16, 1}:
        raise TypeError("philox: the counters (offsets) must be integers, all 32-bit or all 64-bit, got "
                        + ", ".join(str(c.type.scalar) for c in counters))
    seed = seed.to(core.uint64, _semantic=_semantic)
    if widths == {32}:
        word = core.uint32
        lo = (seed & 0xFFFFFFFF).to(core.uint32, _semantic=_semantic)
        hi = ((seed >> 32) & 0xFFFFFFFF).to(core.uint32, _semantic=_semantic)
    else:
        word = core.uint64
        lo = seed
        hi = core.full([1], 0, core.uint64, _semantic=_semantic)
    counters = [c.to(word, bitcast=True, _semantic=_semantic) for c in counters]
    return tuple(counters) + (lo, hi)


@core.builtin
def _philox_constants(c0, _semantic=None):
    """(key A, key B, round A, round B) for the word size of the counters: 4x32 or 4x64."""
    ty = _semantic.to_tensor(c0).type.scalar
    if ty == core.uint32:
        return PHILOX_KEY_A, PHILOX_KEY_B, PHILOX_ROUND_A, PHILOX_ROUND_B
    if ty == core.uint64:
        return PHILOX_KEY_A_64, PHILOX_KEY_B_64, PHILOX_ROUND_A_64, PHILOX_ROUND_B_64
    raise TypeError(f"philox_impl: the counters must be uint32 or uint64 words, got {ty}")


@core.builtin
def _offset_words(offset, _semantic=None):
    """The two uint32 counter words of an offset (as Triton's randint4x): the offset converted to
    uint32 (a truncation for 64-bit offsets, a sign extension for narrow signed ones), and for 64-bit
    offsets its upper half, `offset >> 32` (arithmetic for signed offsets), else zeros."""
    offset = _semantic.to_tensor(offset)
    ty = offset.type.scalar
    if not ty.is_int():
        raise TypeError(f"randint: the offsets must be integers, got {ty}")
    low = _semantic.cast(offset, core.uint32)
    if ty.primitive_bitwidth > 32:
        high = _semantic.cast(_semantic.shr(offset, 32), core.uint32)
    else:
        high = _semantic.mul(low, 0)
    return low, high


@core.builtin
def _uniform_scale(x, _semantic=None):
    """The factor that maps a non-negative int32/int64 into [0, 1): the largest float such that
    INT_MAX * scale < 1.0 after rounding (a plain 2**-31 would round the top values up to 1.0)."""
    ty = x.type.scalar
    if not ty.is_int() or ty.primitive_bitwidth not in (32, 64):
        raise TypeError(f"uint_to_uniform_float expects 32 or 64-bit integers, got {ty}")
    if ty.primitive_bitwidth == 32:
        return core.constexpr(4.6566127342e-10)
    return core.constexpr(1.0842020432385337e-19)


@core.builtin
def _signed_view(x, _semantic=None):
    x = _semantic.to_tensor(x)
    target = core.int32 if x.type.scalar.primitive_bitwidth == 32 else core.int64
    return x.to(target, bitcast=True, _semantic=_semantic)


# -- the generator -----------------------------------------------------------------------------------

@jit
def philox_impl(c0, c1, c2, c3, k0, k1, n_rounds: core.constexpr = N_ROUNDS_DEFAULT):
    """`n_rounds` Philox rounds on the counter (c0, c1, c2, c3) with key (k0, k1): uint32 words
    (Philox-4x32) or uint64 words (Philox-4x64)."""
    KEY_A, KEY_B, ROUND_A, ROUND_B = _philox_constants(c0)
    for _ in core.static_range(n_rounds):
        _c0, _c2 = c0, c2
        c0 = core.umulhi(ROUND_B, _c2) ^ c1 ^ k0
        c2 = core.umulhi(ROUND_A, _c0) ^ c3 ^ k1
        c1 = ROUND_B * _c2
        c3 = ROUND_A * _c0
        # the key schedule: a Weyl sequence
        k0 = k0 + KEY_A
        k1 = k1 + KEY_B
    return c0, c1, c2, c3


@jit
def philox(seed, c0, c1, c2, c3, n_rounds: core.constexpr = N_ROUNDS_DEFAULT):
    """Four random words per element from `seed` and the counters (c0..c3)."""
    c0, c1, c2, c3, k0, k1 = _philox_words(seed, c0, c1, c2, c3)
    return philox_impl(c0, c1, c2, c3, k0, k1, n_rounds)


@jit
def randint(seed, offset, n_rounds: core.constexpr = N_ROUNDS_DEFAULT):
    """One block of random uint32 from `seed` and `offset` (integers of any width; 64-bit offsets
    use their upper half as the second counter word)."""
    ret, _, _, _ = randint4x(seed, offset, n_rounds)
    return ret


@jit
def randint4x(seed, offset, n_rounds: core.constexpr = N_ROUNDS_DEFAULT):
    """Four blocks of random uint32: the counter is (low 32 bits of offset, high 32 bits, 0, 0)."""
    low, high = _offset_words(offset)
    _0 = low * 0
    return philox(seed, low, high, _0, _0, n_rounds)


@jit
def uint_to_uniform_float(x):
    """Random 32/64-bit integers to floats uniform in [0, 1)."""
    x = _signed_view(x)
    # fold negatives onto non-negatives (-x - 1 cannot overflow), then scale below 1.0
    x = core.where(x < 0, -x - 1, x)
    return x * _uniform_scale(x)


@jit
def rand(seed, offset, n_rounds: core.constexpr = N_ROUNDS_DEFAULT):
    """Floats uniform in [0, 1) from `seed` and `offset`."""
    source = randint(seed, offset, n_rounds)
    return uint_to_uniform_float(source)


@jit
def rand4x(seed, offsets, n_rounds: core.constexpr = N_ROUNDS_DEFAULT):
    """Four blocks of floats uniform in [0, 1)."""
    i1, i2, i3, i4 = randint4x(seed, offsets, n_rounds)
    u1 = uint_to_uniform_float(i1)
    u2 = uint_to_uniform_float(i2)
    u3 = uint_to_uniform_float(i3)
    u4 = uint_to_uniform_float(i4)
    return u1, u2, u3, u4


@jit
def pair_uniform_to_normal(u1, u2):
    """Box-Muller: two uniform blocks to two independent standard normal blocks."""
    u1 = core.maximum(1.0e-7, u1)  # log(0) would be -inf
    th = 6.283185307179586 * u2
    r = core.sqrt(-2.0 * core.log(u1))
    return r * core.cos(th), r * core.sin(th)


@jit
def randn(seed, offset, n_rounds: core.constexpr = N_ROUNDS_DEFAULT):
    """Standard normal floats from `seed` and `offset`."""
    i1, i2, _, _ = randint4x(seed, offset, n_rounds)
    u1 = uint_to_uniform_float(i1)
    u2 = uint_to_uniform_float(i2)
    n1, _ = pair_uniform_to_normal(u1, u2)
    return n1


@jit
def randn4x(seed, offset, n_rounds: core.constexpr = N_ROUNDS_DEFAULT):
    """Four blocks of standard normal floats."""
    u1, u2, u3, u4 = rand4x(seed, offset, n_rounds)
    n1, n2 = pair_uniform_to_normal(u1, u2)
    n3, n4 = pair_uniform_to_normal(u3, u4)
    return n1, n2, n3, n4
