"""Complex harmonic coefficients of a weighted point measure on S^1 and S^2, and their algebra.

For ``mu = sum_j w_j delta_{y_j}`` (real weights) the *coefficients* are

    S^1:  c_n  = sum_j w_j exp(-i n psi_j),           n = 0..L   (y = (cos psi, sin psi))
    S^2:  c_lm = sum_j w_j conj(Y_lm(y_j)),      0 <= m <= l <= L

with ``Y_lm`` the complex orthonormal spherical harmonics with the Condon-Shortley phase
(scipy's ``sph_harm_y``, ducc0's convention).  Negative orders follow from the reality of the
weights: ``c_{-n} = conj(c_n)``, ``c_{l,-m} = (-1)^m conj(c_lm)``.  Arrays are dense:
shape (L + 1,) on S^1 and (L + 1, L + 1) indexed ``[l, m]`` (zero for m > l) on S^2; the first
axis is always the degree.

The attention kernel is diagonal in these coefficients (Funk-Hecke):
``sum_j w_j exp(kappa <x, y_j>) = sum_l mult_l(kappa) sum_{m=-l..l} c_lm Y_lm(x)``, with
:func:`kernel_multipliers` ``mult_l`` (``I_l`` on S^1, ``4 pi i_l`` on S^2, both times
``exp(-kappa)``).  This module provides the operations the transform evaluator needs on
coefficients alone: the moments of ``w_j y_j`` from those of ``w_j`` (multiplication by a
coordinate couples neighbouring degrees, so no second transform of the points is needed),
the coefficients of the measure moved by an orthogonal matrix, pointwise bounds of one
degree's part, the pairing behind the interaction energy, and the conversion to the real
basis of :mod:`.harmonics`.
"""

from __future__ import annotations

from functools import cached_property, lru_cache

import numpy as np

from .harmonics import kernel_coefficients


def kernel_multipliers(d: int, L: int, kappa: float) -> np.ndarray:
    """``exp(-kappa) * mult_l(kappa)``, l = 0..L: the kernel's factor per degree in the complex
    basis (``I_l`` on S^1, ``4 pi i_l`` on S^2)."""
    g = kernel_coefficients(d, L, np.asarray(float(kappa)))
    if d == 2:
        g[1:] = g[1:] / 2.0  # kernel_coefficients holds 2 I_n for the real basis cos/sin pairs
    return g


class CircleSpectrum:
    """Fourier coefficients ``c_n``, n = 0..L, on S^1 (see the module docstring)."""

    d = 2

    def __init__(self, L: int) -> None:
        self.L = L

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.L + 1,)

    @staticmethod
    def full(c: np.ndarray) -> np.ndarray:
        """All orders ``n = -L..L`` along the last axis, from the orders n >= 0."""
        return np.concatenate([np.conj(c[..., :0:-1]), c], axis=-1)

    def vector_moments(self, c: np.ndarray) -> np.ndarray:
        """Coefficients of ``w_j x_j`` and ``w_j y_j`` (shape (2, L)) from those of ``w_j``
        up to degree L: ``cos psi e^{-in psi} = (e^{-i(n-1) psi} + e^{-i(n+1) psi}) / 2``; with
        leading axes (several measures) the shape is (2,) + leading axes + (L,)."""
        L = self.L
        full = self.full(c)  # index L + n holds c_n
        below, above = full[..., L - 1 : 2 * L - 1], full[..., L + 1 : 2 * L + 1]  # c_{n-1}, c_{n+1}, n = 0..L-1
        return np.stack([(below + above) / 2.0, (below - above) / 2j])

    @staticmethod
    def rotate(c: np.ndarray, R: np.ndarray) -> np.ndarray:
        """Coefficients of the measure moved by the orthogonal 2x2 matrix ``R`` (y -> R y)."""
        alpha = np.arctan2(R[1, 0], R[0, 0])
        n = np.arange(c.shape[-1])
        moved = c if np.linalg.det(R) > 0 else np.conj(c)  # a reflection maps psi to alpha - psi
        return moved * np.exp(-1j * n * alpha)

    @staticmethod
    def degree_norms(c: np.ndarray) -> np.ndarray:
        """Largest value of each degree's part ``sum_{+-n} c_n e^{i n psi}`` over the circle,
        bounded by ``|c_0|`` and ``2 |c_n|``; shape c.shape[:-1] + (L + 1,)."""
        out = 2.0 * np.abs(c)
        out[..., 0] /= 2.0
        return out

    @staticmethod
    def pairing(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Per degree, ``sum_{+-n} conj(a_n) b_n`` (real): the degree-n part of
        ``sum_i sum_j u_i v_j cos(n (psi_i - psi_j))``-type double sums."""
        out = 2.0 * np.real(np.conj(a) * b)
        out[..., 0] /= 2.0
        return out

    @staticmethod
    def real_moments(c: np.ndarray) -> np.ndarray:
        """Moments in the real basis ``[1, cos psi, sin psi, ..., cos L psi, sin L psi]``."""
        out = np.empty(2 * c.shape[0] - 1)
        out[0] = c[0].real
        out[1::2] = c[1:].real
        out[2::2] = -c[1:].imag
        return out


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """sqrt(num / den) where both are positive, else 0."""
    ok = (num > 0) & (den > 0)
    return np.sqrt(np.where(ok, num, 0.0) / np.where(ok, den, 1.0))


def euler_zyz(P: np.ndarray) -> tuple[float, float, float]:
    """Angles (psi, theta, phi) with ``P = Rz(phi) Ry(theta) Rz(psi)`` for a rotation ``P``."""
    theta = float(np.arccos(np.clip(P[2, 2], -1.0, 1.0)))
    if np.hypot(P[0, 2], P[1, 2]) > 1e-12:
        return float(np.arctan2(P[2, 1], -P[2, 0])), theta, float(np.arctan2(P[1, 2], P[0, 2]))
    if P[2, 2] > 0:  # theta = 0: a rotation about z
        return 0.0, 0.0, float(np.arctan2(P[1, 0], P[0, 0]))
    return 0.0, np.pi, float(np.arctan2(-P[1, 0], -P[0, 0]))  # theta = pi: Rz(phi) diag(-1, 1, -1)


class SphereSpectrum:
    """Spherical-harmonic coefficients ``c_lm``, 0 <= m <= l <= L, on S^2 (module docstring)."""

    d = 3

    def __init__(self, L: int) -> None:
        self.L = L
        l, m = np.meshgrid(np.arange(L + 1), np.arange(L + 1), indexing="ij")
        self.mask = m <= l
        # ducc0's packed order: m = 0, 1, ..., and l = m..L inside each m
        self.packed_l = np.concatenate([np.arange(mm, L + 1) for mm in range(L + 1)])
        self.packed_m = np.concatenate([np.full(L + 1 - mm, mm) for mm in range(L + 1)])

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.L + 1, self.L + 1)

    def pack(self, c: np.ndarray) -> np.ndarray:
        """Dense ``[..., l, m]`` to ducc0's packed layout ``[..., index]``."""
        return np.ascontiguousarray(c[..., self.packed_l, self.packed_m])

    def unpack(self, packed: np.ndarray) -> np.ndarray:
        """ducc0's packed layout to dense ``[..., l, m]``."""
        out = np.zeros(packed.shape[:-1] + self.shape, dtype=complex)
        out[..., self.packed_l, self.packed_m] = packed
        return out

    def vector_moments(self, c: np.ndarray) -> np.ndarray:
        """Coefficients of ``w_j x_j, w_j y_j, w_j z_j`` (shape (3, L, L)) up to degree L - 1
        from those of ``w_j`` up to degree L, by the recurrences (Condon-Shortley phase)

            z Y_lm       = A_{l+1,m} Y_{l+1,m} + A_{l,m} Y_{l-1,m},  A_{l,m} = sqrt((l^2 - m^2) / (4 l^2 - 1))
            (x + iy) Y_lm = -sqrt((l+m+1)(l+m+2) / ((2l+1)(2l+3))) Y_{l+1,m+1}
                            + sqrt((l-m)(l-m-1) / ((2l-1)(2l+1))) Y_{l-1,m+1}
            (x - iy) Y_lm = sqrt((l-m+1)(l-m+2) / ((2l+1)(2l+3))) Y_{l+1,m-1}
                            - sqrt((l+m)(l+m-1) / ((2l-1)(2l+1))) Y_{l-1,m-1}

        applied to ``conj(Y_lm)`` (``c_{l,-1} = -conj(c_{l,1})``).  With leading axes (several
        measures) the shape is (3,) + leading axes + (L, L).
        """
        L = self.L
        lead = c.shape[:-2]
        coefficients = np.zeros(lead + (L + 2, L + 3), dtype=complex)  # rows l = 0..L+1, columns m = -1..L+1
        coefficients[..., : L + 1, 1 : L + 2] = c
        if L >= 1:
            coefficients[..., : L + 1, 0] = -np.conj(c[..., :, 1])
        ext = np.concatenate([coefficients.reshape(lead + (-1,)), np.zeros(lead + (1,))], axis=-1)  # and a zero
        terms = self._recurrence * ext[..., self._shifted]
        z = terms[..., 0, :, :] + terms[..., 1, :, :]
        minus = terms[..., 2, :, :] + terms[..., 3, :, :]  # sum w (x - iy) conj(Y_lm)
        plus = terms[..., 4, :, :] + terms[..., 5, :, :]  # sum w (x + iy) conj(Y_lm)
        return np.stack([(plus + minus) / 2.0, (plus - minus) / 2j, z])

    @cached_property
    def _shifted(self) -> np.ndarray:
        """Indices into :meth:`vector_moments`' flat extended array of ``c_{l+dl, m+dm}``,
        l, m = 0..L-1, for the six shifts ``(dl, dm)`` its recurrence coefficients multiply;
        the last (zero) element where ``l + dl < 0``."""
        L = self.L
        l, m = np.meshgrid(np.arange(L), np.arange(L), indexing="ij")
        out = []
        for dl, dm in ((1, 0), (-1, 0), (1, 1), (-1, 1), (1, -1), (-1, -1)):
            out.append(np.where(l + dl >= 0, (l + dl) * (L + 3) + (m + dm + 1), (L + 2) * (L + 3)))
        return np.stack(out)

    @cached_property
    def _recurrence(self) -> np.ndarray:
        """The six coefficient arrays of :meth:`vector_moments` (degrees 0..L-1), zero for m > l."""
        L = self.L
        l = np.arange(L, dtype=float)[:, None]
        m = np.arange(L, dtype=float)[None, :]
        out = np.stack([
            _ratio((l + 1) ** 2 - m**2, 4 * (l + 1) ** 2 - 1),
            _ratio(l**2 - m**2, 4 * l**2 - 1),
            -_ratio((l + m + 1) * (l + m + 2), (2 * l + 1) * (2 * l + 3)),
            _ratio((l - m) * (l - m - 1), (2 * l - 1) * (2 * l + 1)),
            _ratio((l - m + 1) * (l - m + 2), (2 * l + 1) * (2 * l + 3)),
            -_ratio((l + m) * (l + m - 1), (2 * l - 1) * (2 * l + 1)),
        ])
        return out * self.mask[:L, :L]

    def rotate(self, c: np.ndarray, R: np.ndarray) -> np.ndarray:
        """Coefficients of the measure moved by the orthogonal 3x3 matrix ``R`` (y -> R y).

        ``c`` has shape (..., L + 1, L + 1).  Proper rotations use ducc0's ``rotate_alm``; an
        improper ``R = -P`` adds the parity ``Y_lm(-y) = (-1)^l Y_lm(y)``.
        """
        import ducc0

        from ..threads import num_threads

        proper = np.linalg.det(R) > 0
        psi, theta, phi = euler_zyz(R if proper else -R)
        lead = c.shape[:-2]
        packed = self.pack(c).reshape((-1, self.packed_l.size))
        out = np.empty_like(packed)
        for i, row in enumerate(packed):
            out[i] = ducc0.sht.rotate_alm(row, self.L, psi, theta, phi, nthreads=num_threads())
        moved = self.unpack(out).reshape(lead + self.shape)
        if not proper:
            moved *= ((-1.0) ** np.arange(self.L + 1))[:, None]
        return moved

    def degree_norms(self, c: np.ndarray) -> np.ndarray:
        """Largest value of each degree's part ``sum_m c_lm Y_lm`` over the sphere, bounded by
        ``sqrt(sum_{m=-l..l} |c_lm|^2) sqrt((2l + 1) / (4 pi))`` (Cauchy-Schwarz and the
        addition theorem); shape c.shape[:-2] + (L + 1,)."""
        l = np.arange(c.shape[-2])
        return np.sqrt(self.pairing(c, c) * (2 * l + 1) / (4 * np.pi))

    @staticmethod
    def pairing(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Per degree, ``sum_{m=-l..l} conj(a_lm) b_lm`` (real for coefficients of real
        measures): ``|a_l0 b_l0| + 2 Re sum_{m>0} conj(a_lm) b_lm``."""
        prod = np.real(np.conj(a) * b)
        return 2.0 * prod.sum(axis=-1) - prod[..., 0]

    def real_moments(self, c: np.ndarray) -> np.ndarray:
        """Moments in the real basis of :func:`.harmonics.sphere_basis` (row ``l^2 + l + m``),
        which carries no Condon-Shortley phase: for m > 0 the cosine row is
        ``sqrt 2 (-1)^m Re c_lm`` and the sine row ``-sqrt 2 (-1)^m Im c_lm``."""
        L = c.shape[0] - 1
        out = np.empty((L + 1) ** 2)
        for l in range(L + 1):
            row = l * l + l
            sign = np.sqrt(2.0) * (-1.0) ** np.arange(1, l + 1)
            out[row] = c[l, 0].real
            out[row + 1 : row + l + 1] = sign * c[l, 1 : l + 1].real
            out[row - l : row][::-1] = -sign * c[l, 1 : l + 1].imag
        return out


@lru_cache(maxsize=64)
def spectrum_for(d: int, L: int) -> CircleSpectrum | SphereSpectrum:
    """The coefficient space of degree L on S^{d-1} (shared instances)."""
    return CircleSpectrum(L) if d == 2 else SphereSpectrum(L)
