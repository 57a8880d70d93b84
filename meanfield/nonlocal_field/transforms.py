"""Point transforms between weighted points and harmonic coefficients, on ducc0's NUFFT.

A :class:`PointTransform` is built once per point set (a ``ducc0.nufft.plan``: the points'
sorting and kernel set-up are reused while the points stay fixed) and provides

* ``adjoint(w)`` -- the coefficients of ``sum_j w_j delta_{y_j}`` (see :mod:`.spectral`);
* ``synthesis(c)`` -- the real functions with coefficient sets ``c`` at the points.

S^1: a 1-D NUFFT in the angle.  S^2: the function is continued to the torus
``(theta, phi) in [0, 2 pi)^2`` by ``f(2 pi - theta, phi) = f(theta, phi + pi)`` (the doubled
sphere, as in ducc0's own general-point SHT), where a function of degree <= L is a
trigonometric polynomial of degree <= L in both angles; coefficients and torus Fourier
coefficients are converted exactly by small precomputed matrices (:func:`theta_series`, one
per order m), and a 2-D NUFFT connects the torus to the points.  Two real
functions share one complex NUFFT (real and imaginary part).

Accuracy: ``epsilon`` is the NUFFT's requested accuracy (relative to the sum of the absolute
values of the coefficients or weights it is given); ducc0 accepts ``epsilon > 2e-13``
(:data:`EPSILON_FLOOR`).  The oversampling factor is pinned (:data:`SIGMA`), so the
kernel ducc0 picks depends only on ``epsilon`` and the dimension, never on how many points a
rank holds: sums over ranks then equal the serial result to round-off.

A :class:`DirectTransform` offers the same two directions by the exact sums, from the
harmonics at the points kept as one real matrix (``size x 2K``, K the coefficients): its cost
is ``size * K`` and it has none of the NUFFT's fixed cost, the FFT of the oversampled grid,
which does not shrink with the points.  :func:`point_transform` picks the cheaper of the two
for a point set by a measured cost model (:data:`DIRECT_NS`, :data:`NUFFT_NS`): few points
(a rank's share of a large mesh on many ranks, atoms) take the direct sums.  The two agree to
the NUFFT's ``epsilon``; sums over ranks equal the serial result to round-off wherever the
ranks and the serial run pick the same kind of transform (see :func:`point_transform`).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..threads import num_threads
from .harmonics import harmonic_basis
from .spectral import CircleSpectrum, SphereSpectrum, spectrum_for

#: Smallest NUFFT accuracy ducc0 accepts in double precision (strictly above it).
EPSILON_FLOOR = 2e-13
#: Oversampling window passed to ducc0: narrow, so the kernel choice never depends on the
#: number of points (ducc0's cost model would otherwise weigh it).
SIGMA = (1.95, 2.05)
#: Direct sums: ns per point and real basis value (the adjoint and a synthesis of 4 real
#: functions together), by d; measured on one core of a 2-core AMD EPYC, single-threaded BLAS.
DIRECT_NS = {2: 0.9, 3: 0.8}
#: Largest basis matrix of a direct transform (bytes): beyond a few MB it leaves the cache and
#: the direct sums cost 2-3 times more per value (measured), besides the memory.
DIRECT_BYTES = 4 * 2**20
#: NUFFT, by d: (fixed ns, ns per mode of the (2L + 1)^(d - 1) grid, ns per point), the same
#: machine: the fixed part is mostly the FFTs of the oversampled grid.
NUFFT_NS = {2: (30000.0, 0.0, 50.0), 3: (0.0, 170.0, 210.0)}


def spherical_angles(points: np.ndarray) -> np.ndarray:
    """Colatitude and longitude (n, 2) of unit vectors (n, 3), accurate near the poles."""
    x, y, z = points[:, 0], points[:, 1], points[:, 2]
    out = np.empty((points.shape[0], 2))
    np.arctan2(np.sqrt(x * x + y * y), z, out=out[:, 0])  # components of unit vectors: no overflow
    np.arctan2(y, x, out=out[:, 1])
    return out


def _plan(coord: np.ndarray, grid_shape: tuple[int, ...], epsilon: float, adjoint: bool):
    import ducc0

    return ducc0.nufft.plan(
        nu2u=adjoint, coord=coord, grid_shape=grid_shape, epsilon=max(epsilon, 1.01 * EPSILON_FLOOR),
        nthreads=num_threads(), sigma_min=SIGMA[0], sigma_max=SIGMA[1],
    )


@lru_cache(maxsize=16)
def theta_series(L: int) -> np.ndarray:
    """``T[m, k, l]``: the Fourier coefficients in ``theta`` (orders k = -L..L) of
    ``Y_lm(theta, 0)`` continued to ``theta in [0, 2 pi)`` through the pole (``sin theta`` changes
    sign, so the continuation is a trigonometric polynomial of degree l); shape
    (L + 1, 2L + 1, L + 1), zero for l < m.  ``Y_lm(theta, phi) = sum_k T[m, k, l] e^{i (k theta + m phi)}``.
    """
    n = 2 * L + 2
    t = 2 * np.pi * np.arange(n) / n
    circle = np.column_stack([np.sin(t), np.zeros(n), np.cos(t)])  # a great circle through both poles
    real = harmonic_basis(circle, L)  # row l^2 + l + m: m = 0 plain, m > 0 sqrt 2 (-1)^m Re Y_lm
    values = np.zeros((L + 1, L + 1, n))  # [m, l, theta]
    for l in range(L + 1):
        values[0, l] = real[l * l + l]
        m = np.arange(1, l + 1)
        values[m, l] = real[l * l + l + m] * ((-1.0) ** m / np.sqrt(2.0))[:, None]
    coeffs = np.fft.fft(values, axis=-1) / n  # orders 0..n-1; degree <= L leaves order L+1 empty
    series = np.concatenate([coeffs[..., n - L :], coeffs[..., : L + 1]], axis=-1)  # orders -L..L
    return np.ascontiguousarray(series.transpose(0, 2, 1))


def _pairs(fields: np.ndarray) -> np.ndarray:
    """``fields[2k] + i fields[2k+1]`` (the last alone when their number is odd): the Fourier
    coefficients of two real functions share one complex transform."""
    k = fields.shape[0]
    out = np.zeros(((k + 1) // 2,) + fields.shape[1:], dtype=complex)
    out += fields[0::2]
    out[: k // 2] += 1j * fields[1::2]
    return out


def _unpair(values: np.ndarray, k: int) -> np.ndarray:
    out = np.empty((k, values.shape[-1]))
    out[0::2] = values.real
    out[1::2] = values.imag[: k // 2]
    return out


def _unpair_sums(sums: np.ndarray, k: int) -> np.ndarray:
    """The torus sums (k, grid) of k real weight vectors from those of their pairs ``w_2i + i w_2i+1``
    (:func:`_pairs`): a real vector's sums are Hermitian, ``S(-n) = conj(S(n))`` on the grid of
    orders -L..L (the grid reversed along every axis)."""
    mirrored = np.conj(sums[(slice(None),) + (slice(None, None, -1),) * (sums.ndim - 1)])
    out = np.empty((k,) + sums.shape[1:], dtype=complex)
    out[0::2] = 0.5 * (sums + mirrored)
    out[1::2] = (-0.5j * (sums - mirrored))[: k // 2]
    return out


class PointTransform:
    """Transforms between a fixed point set and coefficients of degree <= L.

    Parameters
    ----------
    points
        Shape (n, d), unit vectors, d = 2 or 3.
    L
        Largest degree of the coefficients.
    epsilon
        Requested NUFFT accuracy (see the module docstring).
    adjoint
        Whether the plan is mostly used for :meth:`adjoint` (tunes ducc0's plan; both
        directions always work).
    """

    def __init__(self, points: np.ndarray, L: int, epsilon: float, adjoint: bool = True) -> None:
        self.d = points.shape[1]
        self.L = L
        self.size = points.shape[0]
        self.epsilon = float(epsilon)  # the accuracy of both directions (module docstring)
        if self.d == 2:
            self.spectrum: CircleSpectrum | SphereSpectrum = spectrum_for(2, L)
            coord = np.arctan2(points[:, 1], points[:, 0])[:, None]
            grid_shape: tuple[int, ...] = (2 * L + 1,)
        elif self.d == 3:
            self.spectrum = spectrum_for(3, L)
            coord = spherical_angles(points)
            grid_shape = (2 * L + 1, 2 * L + 1)
        else:
            raise ValueError(f"point transforms: d must be 2 or 3, got {self.d}")
        self._plan = _plan(np.ascontiguousarray(coord), grid_shape, epsilon, adjoint) if self.size else None

    # -- torus <-> coefficients (S^2) ------------------------------------------------------
    def _to_torus(self, c: np.ndarray) -> np.ndarray:
        """Torus Fourier coefficients (k, 2L+1, 2L+1), orders -L..L in (theta, phi), of the
        degree <= L functions with coefficient sets ``c`` (shape (k, L + 1, L + 1))."""
        L = self.L
        half = np.matmul(theta_series(L), np.ascontiguousarray(c.transpose(2, 1, 0)))  # [m, ktheta, set]
        out = np.empty((c.shape[0], 2 * L + 1, 2 * L + 1), dtype=complex)
        out[:, :, L:] = half.transpose(2, 1, 0)
        out[:, :, :L] = np.conj(half[:0:-1, ::-1].transpose(2, 1, 0))  # real functions: C(k, -m) = conj C(-k, m)
        return out

    def _from_torus(self, S: np.ndarray) -> np.ndarray:
        """Coefficients ``sum_j w_j conj(Y_lm(y_j)) = sum_k T_m[k, l] S[-k, m]`` from the torus
        sums ``S[k, m] = sum_j w_j exp(-i (k theta_j + m phi_j))`` (orders -L..L); ``S`` of
        shape (2L+1, 2L+1), or (sets, 2L+1, 2L+1) for several measures."""
        L = self.L
        sets = S.reshape(-1, 2 * L + 1, 2 * L + 1)
        flipped = np.ascontiguousarray(sets[:, ::-1, L:].transpose(2, 1, 0))  # [m, k, set] holding S[-k, m]
        T = theta_series(L)
        assert isinstance(self.spectrum, SphereSpectrum)  # the torus transforms are those of S^2 (d = 3)
        out = np.matmul(T.transpose(0, 2, 1), flipped).transpose(2, 1, 0) * self.spectrum.mask
        return out.reshape(S.shape[:-2] + self.spectrum.shape)

    # -- the two directions ----------------------------------------------------------------
    def adjoint(self, weights: np.ndarray, degree: int | None = None) -> np.ndarray:
        """Coefficients of ``sum_j w_j delta_{y_j}`` (this rank's points only); weights of shape
        (n,), or (k, n) for k measures on the same points (coefficients (k,) + spectrum shape,
        two measures to one complex transform).  ``degree``: the largest one needed (the
        NUFFT gives all up to L at the same cost)."""
        weights = np.asarray(weights, dtype=float)
        if self._plan is None:
            return np.zeros(weights.shape[:-1] + self.spectrum.shape, dtype=complex)
        if weights.ndim == 1:
            sums = self._plan.nu2u(forward=True, points=weights.astype(complex))
        else:
            sums = _unpair_sums(self._plan.nu2u(forward=True, points=_pairs(weights)), weights.shape[0])
        if self.d == 2:
            return sums[..., self.L :]  # orders n = 0..L
        return self._from_torus(sums)

    def synthesis(self, coefficients: np.ndarray) -> np.ndarray:
        """Values at the points, shape (k, n), of the k real functions with coefficient sets
        ``coefficients`` (shape (k,) + spectrum shape, degrees <= L)."""
        k = coefficients.shape[0]
        if self._plan is None or k == 0:
            return np.zeros((k, self.size))
        torus = CircleSpectrum.full(coefficients) if self.d == 2 else self._to_torus(coefficients)
        values = self._plan.u2nu(forward=False, grid=_pairs(torus))
        return _unpair(values, k)


class DirectTransform:
    """The two directions of :class:`PointTransform` by the exact sums over the points.

    The harmonics at the points (K coefficients of degree <= L: ``e^{i n psi}``, n = 0..L, on
    S^1; ``Y_lm``, 0 <= m <= l <= L, on S^2) are kept as one real matrix ``A`` whose rows are
    ``Re Y`` and ``-Im Y`` of the orders m > 0 (``Y`` is real at m = 0), shape (2K - L - 1, n),
    so that the adjoint is ``A w`` and the synthesis of real functions ``[f Re c, f Im c] A``
    with ``f`` = 1 for order 0 and 2 otherwise (the negative orders, see :mod:`.spectral`).
    Parameters as :class:`PointTransform` (``epsilon`` and ``adjoint`` are accepted for the
    same signature and not used: the sums are exact, and the ``epsilon`` attribute is 0).
    """

    def __init__(self, points: np.ndarray, L: int, epsilon: float = 0.0, adjoint: bool = True) -> None:
        self.d, self.L, self.size = points.shape[1], L, points.shape[0]
        self.epsilon = 0.0
        self.spectrum = spectrum_for(self.d, L)
        # rows of the real basis (harmonic_basis) and their factors: Y_n = cos + i sin on S^1;
        # on S^2 row l^2 + l + m holds Y_l0 (m = 0) and sqrt 2 (-1)^m Re / Im Y_l|m| (m > 0 / < 0)
        if self.d == 2:
            order = np.arange(L + 1)
            flat = order  # positions of the coefficients in the flattened spectrum
            rows = np.concatenate([np.where(order == 0, 0, 2 * order - 1), 2 * order[1:]])
            scale = np.concatenate([np.ones(L + 1), -np.ones(L)])
        elif self.d == 3:
            l, order = np.tril_indices(L + 1)  # the nonzero [l, m] of the spectrum: m <= l
            flat = np.ravel_multi_index((l, order), self.spectrum.shape)
            rows = np.concatenate([l * l + l + order, (l * l + l - order)[order > 0]])
            sign = np.where(order % 2 == 0, 1.0, -1.0) / np.sqrt(2.0)
            scale = np.concatenate([np.where(order == 0, 1.0, sign), -sign[order > 0]])
        else:
            raise ValueError(f"point transforms: d must be 2 or 3, got {self.d}")
        degree = np.concatenate([order, order[order > 0]] if self.d == 2 else [l, l[order > 0]])
        by_degree = np.argsort(degree, kind="stable")  # rows in degree order: a degree's are a prefix
        self._matrix = np.ascontiguousarray(harmonic_basis(points, L)[rows[by_degree]] * scale[by_degree, None])
        # the matrix's rows as positions in a coefficient array seen as reals (re, im pairs)
        self._reals = np.concatenate([2 * flat, 2 * flat[order > 0] + 1])[by_degree]
        self._factor = np.where(np.concatenate([order, order[order > 0]]) > 0, 2.0, 1.0)[by_degree]
        self._rows_up_to = np.searchsorted(degree[by_degree], np.arange(L + 1), side="right")

    def adjoint(self, weights: np.ndarray, degree: int | None = None) -> np.ndarray:
        """Coefficients of ``sum_j w_j delta_{y_j}`` (this rank's points only); weights (n,) or
        (k, n) as :meth:`PointTransform.adjoint`; with ``degree``, those up to that degree only
        (the others 0)."""
        weights = np.asarray(weights, dtype=float)
        lead = weights.shape[:-1]
        rows = len(self._reals) if degree is None or degree >= self.L else int(self._rows_up_to[degree])
        out = np.zeros(lead + self.spectrum.shape, dtype=complex)
        flat = out.reshape(int(np.prod(lead)), -1).view(float)
        flat[:, self._reals[:rows]] = (self._matrix[:rows] @ weights.reshape(int(np.prod(lead)), self.size).T).T
        return out

    def synthesis(self, coefficients: np.ndarray) -> np.ndarray:
        """Values at the points, shape (k, n), of the k real functions with coefficient sets
        ``coefficients`` (shape (k,) + spectrum shape, degrees <= L)."""
        k = coefficients.shape[0]
        reals = np.ascontiguousarray(coefficients, dtype=complex).reshape(k, -1).view(float)
        return (reals[:, self._reals] * self._factor) @ self._matrix


#: Either kind of transform of a point set (the same attributes and methods).
Transform = PointTransform | DirectTransform


def point_transform(points: np.ndarray, L: int, epsilon: float, adjoint: bool = True,
                    fixed: bool = True) -> Transform:
    """The cheaper transform of ``points`` at degree L: the direct sums, at :data:`DIRECT_NS`
    per point and real basis value while their matrix fits in :data:`DIRECT_BYTES`, or a NUFFT,
    at a fixed cost (per grid mode) and a cost per point (:data:`NUFFT_NS`).  The direct sums
    are only for ``fixed`` point sets (the mesh's, transformed at every evaluation of a run):
    building their matrix costs 10-20 ns per value, many evaluations' worth, where a NUFFT
    plan costs about 0.1 us per point.

    The choice depends on this rank's number of points only (no communication), so a run on
    many ranks may take the direct sums where one rank takes a NUFFT: the two then differ by
    the NUFFT's accuracy ``epsilon`` (far below the field's tolerance), not by round-off.  The
    evaluators therefore pass ``fixed`` only when asked to (``nonlocal.direct_sums``).
    """
    d, n = points.shape[1], points.shape[0]
    basis = 2 * L + 1 if d == 2 else (L + 1) ** 2  # real values per point (DirectTransform)
    fixed_ns, per_mode, per_point = NUFFT_NS[d]
    nufft = fixed_ns + per_mode * (2 * L + 1) ** (d - 1) + per_point * n
    if fixed and 8 * n * basis <= DIRECT_BYTES and DIRECT_NS[d] * basis * n < nufft:
        return DirectTransform(points, L, epsilon, adjoint)
    return PointTransform(points, L, epsilon, adjoint)
