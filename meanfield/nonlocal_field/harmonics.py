"""Harmonic expansion of the attention kernel on S^1 and S^2.

For a unit vector ``u`` and ``k >= 0`` the kernel ``exp(k <u, y>)`` on the unit sphere is

    S^1 (d = 2):  exp(k cos(a - b)) = I_0(k) + sum_{n >= 1} 2 I_n(k) [cos na cos nb + sin na sin nb]
    S^2 (d = 3):  exp(k <u, y>)     = sum_{l >= 0} 4 pi i_l(k) sum_{m=-l}^{l} Y_lm(u) Y_lm(y)

(``I_n``: modified Bessel, ``i_l``: modified spherical Bessel function of the first kind,
``Y_lm``: real orthonormal spherical harmonics).  Both read
``sum_l g_l(k) sum_{b in degree l} B_b(u) B_b(y)`` with the real basis ``B`` built here
(``1, cos n theta, sin n theta`` on S^1; ``Y_lm`` on S^2) and the *kernel coefficients*
``g_l``, returned scaled by ``exp(-k)`` so that nothing overflows for large ``k``.

The size of the degree-``l`` part at any pair (u, y) is at most ``omega_l(k) = g_l(k) h_l``
(``h_l = 1`` on S^1; ``h_l = (2l + 1) / (4 pi)`` on S^2 by the addition theorem, since
``|P_l| <= 1``).  :func:`truncation_degree` cuts the series where the tail of these bounds
falls below ``tol`` times the degree-0 one.

Everything is pure numpy/scipy; the basis is built by three-term recurrences in Cartesian
coordinates (no trigonometric calls), vectorised over the order ``m``.
"""

from __future__ import annotations

import numpy as np

SUPPORTED_DIMENSIONS: tuple[int, ...] = (2, 3)


def _check_dimension(d: int) -> None:
    if d not in SUPPORTED_DIMENSIONS:
        raise ValueError(f"harmonic expansion: d must be 2 or 3 (S^1 or S^2), got {d}")


def basis_size(d: int, L: int) -> int:
    """Number of basis functions of degree <= L: ``2L + 1`` on S^1, ``(L + 1)^2`` on S^2."""
    _check_dimension(d)
    return 2 * L + 1 if d == 2 else (L + 1) ** 2


def degree_offsets(d: int, L: int) -> np.ndarray:
    """Row offsets of the degrees: rows ``offsets[l]:offsets[l+1]`` of a basis are degree l."""
    return np.array([0] + [basis_size(d, l) for l in range(L + 1)])


#: Extra backward-recurrence steps above max(L, k): each damps the start error by <= 0.18.
_RATIO_WARMUP = 30


def kernel_coefficients(d: int, L: int, k: np.ndarray) -> np.ndarray:
    """Scaled kernel coefficients ``exp(-k) g_l(k)`` for ``l = 0..L``, shape (L + 1,) + k.shape.

    ``g_l = epsilon_l I_l`` on S^1 (``epsilon_0 = 1``, else 2) and ``g_l = 4 pi i_l`` on S^2.
    Computed from the degree-0 value and the Bessel ratios ``r_l = I_l / I_{l-1}``, obtained by
    the backward recurrence ``r_l = k / (a_l + k r_{l+1})`` (``a_l = 2l`` on S^1, ``2l + 1`` on
    S^2) started from ``r = 0`` well above ``max(L, k)``, where the recurrence contracts
    errors by ``r_l^2 <= 0.18`` per step; below it no error grows.  Stable, cheap (no
    high-order Bessel calls) and exact at ``k = 0``.
    """
    from scipy.special import ive  # scipy.special costs ~0.25 s to import

    _check_dimension(d)
    k = np.asarray(k, dtype=float)
    g = np.empty((L + 1,) + k.shape)
    if d == 2:
        g[0] = ive(0, k)
    else:
        safe = np.where(k > 0, k, 1.0)
        g[0] = 4 * np.pi * np.where(k > 0, -np.expm1(-2 * safe) / (2 * safe), 1.0)
    if L == 0:
        return g
    shift = 0.0 if d == 2 else 1.0
    start = max(L, int(np.ceil(k.max(initial=0.0)))) + _RATIO_WARMUP
    ratio = np.zeros_like(k)
    ratios = np.empty((L,) + k.shape)
    for l in range(start, 0, -1):
        ratio = k / (2 * l + shift + k * ratio)
        if l <= L:
            ratios[l - 1] = ratio
    g[1:] = g[0] * np.cumprod(ratios, axis=0)
    if d == 2:
        g[1:] *= 2.0
    return g


def degree_bounds(d: int, L: int, k: float) -> np.ndarray:
    """``exp(-k) omega_l(k)``, l = 0..L: bounds of the degree-l kernel part, see module doc."""
    g = kernel_coefficients(d, L, np.asarray(float(k)))
    if d == 2:
        return g
    l = np.arange(L + 1)
    return g * (2 * l + 1) / (4 * np.pi)


def tail_ratios(d: int, kmax: float, cap: int) -> np.ndarray:
    """``t[L] = sum_{l > L} omega_l(kmax) / omega_0(kmax)`` for ``L = 0..cap - 1``.

    Terms beyond ``cap`` are dropped; they decay faster than geometrically once
    ``l > kmax``, so a cap a few dozen beyond ``max(L, kmax)`` loses nothing.
    """
    w = degree_bounds(d, cap, kmax)
    return np.cumsum(w[::-1])[::-1][1:] / w[0]


def truncation_degree(d: int, kmax: float, tol: float) -> int:
    """The degree L of the truncation rule: the smallest L with

        sum_{l > L} omega_l(kmax)  <=  tol * omega_0(kmax),

    ``kmax = beta * max ||Q_h^T K_h||_2`` the largest kernel concentration any target sees.
    The ratio ``omega_l / omega_0`` grows with ``k``, so the rule holds for every target.
    It takes about ``sqrt(2 kmax ln(1/tol))`` degrees for large ``kmax``.
    """
    if not 0 < tol < 1:
        raise ValueError(f"nonlocal.tol: must lie in (0, 1), got {tol!r}")
    cap = int(2 * kmax + 20 * np.sqrt(kmax * np.log(1 / tol)) + 40)
    below = np.nonzero(tail_ratios(d, kmax, cap) <= tol)[0]
    return int(below[0]) if below.size else cap


def circle_basis(points: np.ndarray, L: int, radial: np.ndarray | None = None) -> np.ndarray:
    """The S^1 basis ``[1, cos t, sin t, ..., cos Lt, sin Lt]`` at ``points = (cos t, sin t)``.

    Returns shape (2L + 1, n); rows of degree l are multiplied by ``radial[l]`` (shape (L+1, n))
    when given.  Powers of ``x + i y`` give the Fourier modes without trigonometric calls.
    """
    n = points.shape[0]
    out = np.empty((2 * L + 1, n))
    out[0] = 1.0 if radial is None else radial[0]
    z = points[:, 0] + 1j * points[:, 1]
    power = np.ones(n, dtype=complex)
    for l in range(1, L + 1):
        power *= z
        row = power if radial is None else power * radial[l]
        out[2 * l - 1] = row.real
        out[2 * l] = row.imag
    return out


def sphere_basis(points: np.ndarray, L: int, radial: np.ndarray | None = None) -> np.ndarray:
    """Real orthonormal spherical harmonics ``Y_lm`` of degree <= L at unit vectors (n, 3).

    Returns shape ((L + 1)^2, n), row ``l^2 + l + m`` holding ``Y_lm`` (``m > 0``: cosine part,
    ``m < 0``: sine part); rows of degree l are multiplied by ``radial[l]`` when given.
    ``Y_lm = sqrt(2) Pbar_l^m(z) Re/Im (x + i y)^m`` with the normalised associated Legendre
    polynomials ``Pbar`` from the standard recurrence in l, all orders at once.
    """
    n = points.shape[0]
    x, y, z = points[:, 0], points[:, 1], points[:, 2]
    out = np.empty(((L + 1) ** 2, n))
    # sectoral factors c_m (x + i y)^m (times sqrt 2 for m > 0), c_m normalising Pbar_m^m
    sect = np.empty((L + 1, n), dtype=complex)
    sect[0] = 1.0 / np.sqrt(4 * np.pi)
    xy = x + 1j * y
    for m in range(1, L + 1):
        sect[m] = sect[m - 1] * xy * np.sqrt((2 * m + 1) / (2 * m))
    sect[1:] *= np.sqrt(2.0)
    cos_part, sin_part = np.ascontiguousarray(sect.real), np.ascontiguousarray(sect.imag)
    prev2 = np.zeros((0, n))  # Pbar_{l-2}^m / c_m, m = 0..l-2
    prev = np.ones((1, n))  # Pbar_{l-1}^m / c_m, m = 0..l-1
    for l in range(L + 1):
        if l == 0:
            cur = prev
        else:
            ms = np.arange(l - 1)[:, None]  # orders m = 0..l-2, a column
            cur = np.empty((l + 1, n))
            a = np.sqrt((4.0 * l * l - 1) / (l * l - ms * ms))
            b = np.sqrt(((l - 1.0) ** 2 - ms * ms) / (4.0 * (l - 1) ** 2 - 1))
            cur[: l - 1] = a * (z * prev[: l - 1] - b * prev2)
            cur[l - 1] = np.sqrt(2.0 * l + 1) * z * prev[l - 1]
            cur[l] = 1.0
            prev2, prev = prev, cur
        scaled = cur if radial is None else cur * radial[l]
        c = l * l + l  # row of m = 0; m > 0 above it, m < 0 below it in reverse
        np.multiply(scaled, cos_part[: l + 1], out=out[c : c + l + 1])
        np.multiply(scaled[1:], sin_part[1 : l + 1], out=out[c - l : c][::-1])
    return out


def harmonic_basis(points: np.ndarray, L: int, radial: np.ndarray | None = None) -> np.ndarray:
    """The real basis of degree <= L on S^{d-1}, d = points.shape[1]; see the two builders."""
    d = points.shape[1]
    _check_dimension(d)
    return circle_basis(points, L, radial) if d == 2 else sphere_basis(points, L, radial)
