"""libdevice's Bessel functions (j0, j1, y0, y1, jn, yn, cyl_bessel_i0, cyl_bessel_i1), evaluated in
fp64: power series for small arguments, Hankel's asymptotic expansions for large ones (both to about
1e-12 absolute at the switch point, better elsewhere), forward recurrence for integer orders."""
from __future__ import annotations

from ...runtime.jit import jit
from .. import core, standard
from ._common import expect, wide

_PI = core.constexpr(3.141592653589793)
_EULER_GAMMA = core.constexpr(0.5772156649015329)
_SERIES_LIMIT = core.constexpr(12.0)  # |x| above this: asymptotic expansions
_I_SERIES_LIMIT = core.constexpr(30.0)


@jit
def _j_series(x, NU: core.constexpr):
    """J_NU(x) = (x/2)^NU * sum_k (-x^2/4)^k / (k! (k+NU)!), NU in {0, 1}."""
    q = -0.25 * x * x
    t = core.full(x.shape, 1.0, core.float64)
    s = t
    for k in range(1, 60):
        kf = k.to(core.float64)
        t = t * q / (kf * (kf + NU))
        s = s + t
    if NU == 1:
        s = s * (0.5 * x)
    return s


@jit
def _hankel(x, NU: core.constexpr):
    """(J_NU(x), Y_NU(x)) for large x > 0: sqrt(2/(pi x)) (P cos w -/+ Q sin w), w = x - (NU/2 + 1/4) pi."""
    mu: core.constexpr = 4.0 * NU * NU  # a plain local would be an fp32 tensor (Triton's rule)
    a = core.full(x.shape, 1.0, core.float64)
    p = a
    q = core.full(x.shape, 0.0, core.float64)
    for k in core.static_range(1, 24):
        a = a * ((mu - (2 * k - 1) * (2 * k - 1)) / (k * 8.0)) / x
        if k % 2 == 1:
            q = q + a if (k // 2) % 2 == 0 else q - a
        else:
            p = p + a if (k // 2) % 2 == 0 else p - a
    w = x - (0.5 * NU + 0.25) * _PI
    f = core.sqrt(2.0 / (_PI * x))
    c = core.cos(w)
    s = core.sin(w)
    return f * (p * c - q * s), f * (p * s + q * c)


@jit
def _j0_wide(x):
    a = core.abs(x)
    big, _ = _hankel(core.maximum(a, _SERIES_LIMIT), 0)
    return core.where(a <= _SERIES_LIMIT, _j_series(core.minimum(a, _SERIES_LIMIT), 0), big)


@jit
def _j1_wide(x):
    a = core.abs(x)
    big, _ = _hankel(core.maximum(a, _SERIES_LIMIT), 1)
    out = core.where(a <= _SERIES_LIMIT, _j_series(core.minimum(a, _SERIES_LIMIT), 1), big)
    return core.where(x < 0, -out, out)


@jit
def _y0_wide(x):
    small_x = core.minimum(core.maximum(x, 1e-300), _SERIES_LIMIT)
    q = -0.25 * small_x * small_x
    t = core.full(x.shape, 1.0, core.float64)
    s = core.full(x.shape, 0.0, core.float64)
    h = core.full(x.shape, 0.0, core.float64)
    for k in range(1, 60):
        kf = k.to(core.float64)
        t = t * q / (kf * kf)
        h = h + 1.0 / kf
        s = s - h * t
    series = (2.0 / _PI) * ((core.log(0.5 * small_x) + _EULER_GAMMA) * _j_series(small_x, 0) + s)
    _, big = _hankel(core.maximum(x, _SERIES_LIMIT), 0)
    out = core.where(x <= _SERIES_LIMIT, series, big)
    out = core.where(x == 0, -float("inf"), out)
    return core.where((x < 0) | (x != x), float("nan"), out)


@jit
def _y1_wide(x):
    small_x = core.minimum(core.maximum(x, 1e-300), _SERIES_LIMIT)
    q = -0.25 * small_x * small_x
    t = core.full(x.shape, 1.0, core.float64)
    hk = core.full(x.shape, 0.0, core.float64)
    hk1 = core.full(x.shape, 1.0, core.float64)
    s = t * (1.0 - 2.0 * _EULER_GAMMA)
    for k in range(1, 60):
        kf = k.to(core.float64)
        t = t * q / (kf * (kf + 1.0))
        hk = hk + 1.0 / kf
        hk1 = hk1 + 1.0 / (kf + 1.0)
        s = s + t * (hk + hk1 - 2.0 * _EULER_GAMMA)
    series = (2.0 / _PI) * core.log(0.5 * small_x) * _j_series(small_x, 1) - 2.0 / (_PI * small_x) \
        - (0.5 * small_x / _PI) * s
    _, big = _hankel(core.maximum(x, _SERIES_LIMIT), 1)
    out = core.where(x <= _SERIES_LIMIT, series, big)
    out = core.where(x == 0, -float("inf"), out)
    return core.where((x < 0) | (x != x), float("nan"), out)


@jit
def _i_wide(x, NU: core.constexpr):
    """I_NU(|x|) for NU in {0, 1}: the series (all terms positive) or e^x / sqrt(2 pi x) * sum_k
    (-1)^k a_k(NU) / x^k, the exponential split in two halves so it overflows only where I does."""
    a = core.abs(x)
    small_a = core.minimum(a, _I_SERIES_LIMIT)
    q = 0.25 * small_a * small_a
    t = core.full(x.shape, 1.0, core.float64)
    s = t
    for k in range(1, 64):
        kf = k.to(core.float64)
        t = t * q / (kf * (kf + NU))
        s = s + t
    if NU == 1:
        s = s * (0.5 * small_a)
    big_a = core.maximum(a, _I_SERIES_LIMIT)
    mu: core.constexpr = 4.0 * NU * NU  # a plain local would be an fp32 tensor (Triton's rule)
    term = core.full(x.shape, 1.0, core.float64)
    total = term
    for k in core.static_range(1, 16):
        term = -term * ((mu - (2 * k - 1) * (2 * k - 1)) / (k * 8.0)) / big_a
        total = total + term
    half = core.exp(0.5 * big_a)
    big = half * (half * total / core.sqrt(2.0 * _PI * big_a))
    return core.where(a <= _I_SERIES_LIMIT, s, big)


@jit
def j0(arg0):
    expect("j0", "fp32 fp64", arg0)
    return _j0_wide(wide(arg0)).to(arg0.dtype)


@jit
def j1(arg0):
    expect("j1", "fp32 fp64", arg0)
    return _j1_wide(wide(arg0)).to(arg0.dtype)


@jit
def y0(arg0):
    expect("y0", "fp32 fp64", arg0)
    return _y0_wide(wide(arg0)).to(arg0.dtype)


@jit
def y1(arg0):
    expect("y1", "fp32 fp64", arg0)
    return _y1_wide(wide(arg0)).to(arg0.dtype)


@jit
def cyl_bessel_i0(arg0):
    expect("cyl_bessel_i0", "fp32 fp64", arg0)
    return _i_wide(wide(arg0), 0).to(arg0.dtype)


@jit
def cyl_bessel_i1(arg0):
    expect("cyl_bessel_i1", "fp32 fp64", arg0)
    out = _i_wide(wide(arg0), 1)
    return core.where(arg0 < 0, -out, out).to(arg0.dtype)


@jit
def _jn_series(n, x):
    """J_n(x) for n > |x| (no cancellation): (x/2)^n / n! * sum_k (-x^2/4)^k / (k! (n+k)!/n!)."""
    nf = n.to(core.float64)
    a = core.abs(x)
    log_front = nf * core.log(core.maximum(0.5 * a, 1e-300)) - _lgamma_int(nf + 1.0)
    q = -0.25 * a * a
    t = core.full(x.shape, 1.0, core.float64)
    s = t
    for k in range(1, 40):
        kf = k.to(core.float64)
        t = t * q / (kf * (nf + kf))
        s = s + t
    return core.where(a == 0, core.where(n == 0, 1.0, 0.0), core.exp(log_front) * s)


@jit
def _lgamma_int(m):
    """log((m-1)!) for m >= 1 (Stirling's series; exact enough from m = 1 with the small-m shift)."""
    z = m + 8.0
    shift = core.log(m * (m + 1.0) * (m + 2.0) * (m + 3.0) * (m + 4.0) * (m + 5.0) * (m + 6.0) * (m + 7.0))
    zi = 1.0 / z
    zi2 = zi * zi
    series = zi * (1.0 / 12.0 - zi2 * (1.0 / 360.0 - zi2 * (1.0 / 1260.0 - zi2 / 1680.0)))
    return (z - 0.5) * core.log(z) - z + 0.91893853320467274 + series - shift


@jit
def jn(arg0, arg1):
    """J_n(x) for an int32 order n: forward recurrence from J0, J1 where n <= |x| (stable there), the
    power series where n > |x|."""
    expect("jn", "int32", arg0)
    expect("jn", "fp32 fp64", arg1)
    x = wide(arg1)
    n = core.abs(arg0)
    a = core.abs(x)
    prev = _j0_wide(a)
    cur = _j1_wide(a)
    top = standard.max(n, axis=None) if len(n.shape) > 0 else n
    for k in range(1, top):
        nxt = (2.0 * k.to(core.float64)) / a * cur - prev
        advance = k < n
        prev = core.where(advance, cur, prev)
        cur = core.where(advance, nxt, cur)
    recurrence = core.where(n == 0, prev, cur)
    out = core.where(n.to(core.float64) <= a, recurrence, _jn_series(n, a))
    odd = (n % 2) == 1
    flip = odd & ((x < 0) != (arg0 < 0))  # J_-n = (-1)^n J_n and J_n(-x) = (-1)^n J_n(x)
    return core.where(flip, -out, out).to(arg1.dtype)


@jit
def yn(arg0, arg1):
    """Y_n(x) for an int32 order n by forward recurrence from Y0, Y1 (stable for Y)."""
    expect("yn", "int32", arg0)
    expect("yn", "fp32 fp64", arg1)
    x = wide(arg1)
    n = core.abs(arg0)
    prev = _y0_wide(x)
    cur = _y1_wide(x)
    top = standard.max(n, axis=None) if len(n.shape) > 0 else n
    for k in range(1, top):
        nxt = (2.0 * k.to(core.float64)) / x * cur - prev
        advance = k < n
        prev = core.where(advance, cur, prev)
        cur = core.where(advance, nxt, cur)
    out = core.where(n == 0, prev, cur)
    flip = ((n % 2) == 1) & (arg0 < 0)
    return core.where(flip, -out, out).to(arg1.dtype)
