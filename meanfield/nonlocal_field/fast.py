"""Fast evaluation of the attention sums by a truncated harmonic expansion (S^1 and S^2).

Method
------
With ``A = Q^T K`` one has ``beta <Q x, K y> = kappa(x) <u(x), y>`` where
``kappa(x) = beta |A^T x|`` and ``u(x) = A^T x / |A^T x|`` (any unit vector when
``A^T x = 0``, where the kernel is constant).  Expanding the kernel in the real harmonic basis
``B_b`` of :mod:`.harmonics`,

    exp(kappa <u, y>) = sum_l g_l(kappa) sum_{b in degree l} B_b(u) B_b(y),

the sums ``Z(x) = sum_j w_j exp(...)`` and ``N(x) = V sum_j w_j exp(...) y_j`` become

    [sum_j w_j exp(...) y_j, Z](x) = sum_{l <= L} g_l(kappa(x)) sum_{b in degree l} B_b(u(x)) M_b,
    M_b = sum_j w_j B_b(y_j) [y_j, 1]                                   (the source moments).

The moments do not depend on the head (``V`` is applied after the sum), so all heads share
one moment matrix of ``basis_size(L_max + 1) x (d + 1)`` numbers.  The returned sums are
scaled by ``exp(-kappa(x))`` (``log_scale = kappa``): the scaled coefficients
``exp(-k) g_l(k)`` stay bounded for any ``beta``, so nothing overflows.

Truncation rule
---------------
Head h uses the degree ``L_h = truncation_degree(d, kmax_h, tol)`` with
``kmax_h = beta ||Q_h^T K_h||_2`` (largest singular value): the smallest L with

    sum_{l > L} omega_l(kmax_h) <= tol * omega_0(kmax_h),
    omega_l = epsilon_l I_l (S^1),  omega_l = (2l + 1) i_l (S^2),

``omega_l`` bounding the degree-l part of the kernel.  Since ``omega_l / omega_0`` grows
with ``k`` this bounds, at every target, the truncation error of Z and of each component of
``sum_j w_j exp(...) y_j`` by ``tol * W omega_0(kappa(x))``, ``W = sum_j |w_j|`` -- i.e. by
``tol`` times what a *uniform* measure of the same mass would give for Z.  It takes about
``sqrt(2 kmax ln(1/tol))`` degrees for large ``kmax`` (tol = 1e-10: L = 10, 16, 23, 36, 71
on S^1 and 10, 17, 24, 39, 76 on S^2 at kmax = 1, 4, 9, 25, 100).

Error measure.  Accuracy is stated for the velocity as
``max_i |X_fast(x_i) - X_direct(x_i)| / max_i |X_direct(x_i)|``: pointwise relative error is
not attainable where X vanishes.  For softmax attention X = P_x(N / Z), whose error is
about the error of N and Z divided by Z: below ``tol`` for measures spread like a density
(Z within a modest factor of the uniform value), but it degrades like
``W omega_0(kappa) / Z(x)`` at targets where ``Z(x)`` is exponentially small (measures that
have collapsed into clusters far from the target, at large ``kappa``).  The a-posteriori
estimate in :meth:`FastEvaluator.diagnostics` (the first neglected degree, propagated to X)
shows when that happens.

Why not ducc0's SHT / a NUFFT
-----------------------------
``ducc0.sht.synthesis_general`` evaluates one spherical-harmonic series at arbitrary points
in ``O(L^2 log L + n)``.  Here the radial factor ``g_l(kappa(x))`` differs per target and
per degree whenever ``Q^T K`` is not a multiple of an orthogonal matrix, so one synthesis per
degree (and per component) would be needed, ``O(L (L^2 log L + n))``, with NUFFT constants.
Building the basis by recurrences in blocks and contracting with BLAS costs
``O(n L^2)`` on S^2 (``O(n L)`` on S^1) with small constants, handles the per-target factor
for free, and for the degrees this kernel needs (L < ~100 up to kmax ~ 200 at tol 1e-10)
is linear in the number of points in practice.
"""

from __future__ import annotations

import numpy as np

from ..model import AttentionModel
from .base import FieldValues, NonlocalEvaluator, array_key
from .harmonics import (
    basis_size,
    harmonic_basis,
    kernel_coefficients,
    tail_ratios,
    truncation_degree,
)
from .parallel import allreduce_sum

#: Bytes of basis values held at once while building moments or evaluating targets.
BLOCK_BYTES = 1 << 25


def _block_rows(rows: int) -> int:
    return max(64, BLOCK_BYTES // (8 * rows))


def head_concentrations(model: AttentionModel) -> np.ndarray:
    """``kmax_h = beta ||Q_h^T K_h||_2`` for every head: the largest kernel concentration."""
    return np.array([model.beta * np.linalg.norm(h.interaction, 2) for h in model.heads])


class FastEvaluator(NonlocalEvaluator):
    """Truncated harmonic expansion of the attention kernel; see the module docstring.

    Parameters
    ----------
    model
        Attention model with ``d`` = 2 (S^1) or 3 (S^2).
    comm
        MPI communicator; each rank reduces the moments of its own sources (one
        ``Allreduce`` per evaluation) and evaluates only its own targets.
    tol
        Target accuracy of the velocity, in the measure of the module docstring.
    cache_bytes
        With ``fixed_sources=True``, the source basis values are kept between calls when they
        fit in this many bytes, so later calls only redo the cheap weighted sums; with
        ``fixed_targets=True`` the same holds for the targets' coefficient-weighted basis
        values (per head), so a PDE step costs two thin matrix products per evaluation.
    """

    name = "fast"

    def __init__(
        self,
        model: AttentionModel,
        comm=None,
        tol: float = 1e-10,
        cache_bytes: int = 1 << 29,
    ) -> None:
        if model.d not in (2, 3):
            raise ValueError(f"nonlocal.method 'fast': needs d = 2 or 3, got d = {model.d}")
        super().__init__(model, comm)
        self.tol = float(tol)
        self.cache_bytes = cache_bytes
        self.kmax = head_concentrations(model)
        self.degrees = tuple(truncation_degree(model.d, k, self.tol) for k in self.kmax)
        # moments up to one degree more than any head uses: the first neglected degree
        # gives the a-posteriori estimate
        self.moment_degree = max(self.degrees) + 1
        self._cache_key: tuple | None = None
        self._cache: list[np.ndarray] | None = None
        self._target_key: tuple | None = None
        self._target_cache: dict[int, tuple[list[np.ndarray], np.ndarray]] = {}
        self._estimate: float | None = None

    # -- moments ---------------------------------------------------------------------------
    def _source_blocks(self, sources: np.ndarray, fixed: bool) -> list[np.ndarray] | None:
        """Basis values of the sources, block by block, from the cache when allowed."""
        if fixed and self._cache_key == array_key(sources) and self._cache is not None:
            return self._cache
        rows = basis_size(self.model.d, self.moment_degree)
        if not fixed or 8 * rows * sources.shape[0] > self.cache_bytes:
            return None
        step = _block_rows(rows)
        self._cache = [
            harmonic_basis(sources[i : i + step], self.moment_degree)
            for i in range(0, sources.shape[0], step)
        ]
        self._cache_key = array_key(sources)
        return self._cache

    def moments(self, sources: np.ndarray, weights: np.ndarray, fixed: bool = False) -> np.ndarray:
        """Global source moments ``M_b = sum_j w_j B_b(y_j) [y_j, 1]``, shape (basis, d + 1).

        Collective: every rank passes its own sources; one ``Allreduce`` sums the parts.
        """
        d = self.model.d
        rows = basis_size(d, self.moment_degree)
        sources = np.ascontiguousarray(sources, dtype=float)
        rhs = np.empty((sources.shape[0], d + 1))
        rhs[:, :d] = weights[:, None] * sources
        rhs[:, d] = weights
        local = np.zeros((rows, d + 1))
        step = _block_rows(rows)
        blocks = self._source_blocks(sources, fixed)
        for b, i in enumerate(range(0, sources.shape[0], step)):
            if blocks is not None:
                basis = blocks[b]
            else:
                basis = harmonic_basis(sources[i : i + step], self.moment_degree)
            local += basis @ rhs[i : i + step]
        return allreduce_sum(self.comm, local)

    # -- evaluation ------------------------------------------------------------------------
    def _target_basis(self, targets: np.ndarray, A: np.ndarray, L: int) -> tuple[list[np.ndarray], np.ndarray]:
        """Coefficient-weighted basis values at the targets for one head, block by block
        (degrees up to L + 1), and ``kappa``."""
        d = self.model.d
        z = self.model.beta * (targets @ A)  # rows: beta A^T x
        kappa = np.linalg.norm(z, axis=1)
        u = np.zeros_like(z)
        u[:, 0] = 1.0
        np.divide(z, kappa[:, None], out=u, where=kappa[:, None] > 0)
        step = _block_rows(basis_size(d, L + 1))
        blocks = [
            harmonic_basis(u[i : i + step], L + 1, kernel_coefficients(d, L + 1, kappa[i : i + step]))
            for i in range(0, targets.shape[0], step)
        ]
        return blocks, kappa

    def _head_basis(
        self, targets: np.ndarray, h: int, A: np.ndarray, L: int, fixed: bool
    ) -> tuple[list[np.ndarray], np.ndarray]:
        """:meth:`_target_basis`, kept between calls for fixed targets when it fits the cache."""
        if not fixed:
            return self._target_basis(targets, A, L)
        key = array_key(targets)
        if key != self._target_key:
            self._target_key, self._target_cache = key, {}
        if h not in self._target_cache:
            blocks, kappa = self._target_basis(targets, A, L)
            cached = sum(b.nbytes for v in self._target_cache.values() for b in v[0])
            if cached + sum(b.nbytes for b in blocks) > self.cache_bytes:
                return blocks, kappa
            self._target_cache[h] = (blocks, kappa)
        return self._target_cache[h]

    def _head_sums(
        self, targets: np.ndarray, h: int, A: np.ndarray, L: int, M: np.ndarray, fixed: bool
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Scaled ``[sum w e y, Z]`` at the targets for one head, the first neglected degree's
        part of the same, and ``kappa``."""
        d = self.model.d
        kept, total = basis_size(d, L), basis_size(d, L + 1)
        blocks, kappa = self._head_basis(targets, h, A, L, fixed)
        sums = np.empty((targets.shape[0], d + 1))
        extra = np.empty_like(sums)
        i = 0
        for basis in blocks:
            sl = slice(i, i + basis.shape[1])
            sums[sl] = basis[:kept].T @ M[:kept]
            extra[sl] = basis[kept:total].T @ M[kept:total]
            i = sl.stop
        return sums, extra, kappa

    def evaluate(
        self,
        targets: np.ndarray,
        sources: np.ndarray,
        weights: np.ndarray,
        *,
        fixed_sources: bool = False,
        fixed_targets: bool = False,
    ) -> FieldValues:
        """See :meth:`NonlocalEvaluator.evaluate`; ``log_scale`` is ``kappa_h(x)``."""
        model, d = self.model, self.model.d
        M = self.moments(sources, np.asarray(weights, dtype=float), fixed_sources)
        targets = np.ascontiguousarray(targets, dtype=float)
        m, H = targets.shape[0], len(model.heads)
        values = FieldValues(np.empty((H, m, d)), np.empty((H, m)), np.empty((H, m)))
        neglected = FieldValues(np.empty((H, m, d)), np.empty((H, m)), np.empty((H, m)))
        for h, (head, L) in enumerate(zip(model.heads, self.degrees)):
            sums, extra, kappa = self._head_sums(targets, h, head.interaction, L, M, fixed_targets)
            for out, s in ((values, sums), (neglected, extra)):
                out.N[h] = s[:, :d] @ head.V.T
                out.Z[h] = s[:, d]
                out.log_scale[h] = kappa
        self._estimate = self._error_estimate(values, neglected, targets)
        return values

    def _error_estimate(
        self, values: FieldValues, neglected: FieldValues, targets: np.ndarray
    ) -> float | None:
        """``max_i |dX_i| / max_i |X_i|`` on this rank's targets, dX the first-order effect of
        the first neglected degree on the velocity; None without targets or velocity."""
        if targets.shape[0] == 0:
            return None
        X = values.velocity(self.model, targets)
        if self.model.softmax:
            Z = np.where(values.Z > 0, values.Z, np.inf)[..., None]
            dN = (neglected.N - values.N / Z * neglected.Z[..., None]) / Z
            change = FieldValues(dN, np.ones_like(values.Z), values.log_scale)
        else:
            change = FieldValues(neglected.N, neglected.Z, values.log_scale)
        # FieldValues.velocity divides by Z for softmax heads; Z = 1 passes dN through
        dX = change.velocity(self.model, targets)
        scale = np.abs(X).max()
        return float(np.abs(dX).max() / scale) if scale > 0 else None

    def diagnostics(self) -> dict:
        """Method, tolerance, degrees per head, the a-priori tail ratio of the truncation rule
        and ``error_estimate`` (first neglected degree, this rank's targets, last call)."""
        tails = [
            float(tail_ratios(self.model.d, k, L + int(k) + 60)[L])
            for L, k in zip(self.degrees, self.kmax)
        ]
        return {
            "method": self.name,
            "tol": self.tol,
            "degree": max(self.degrees),
            "degrees": list(self.degrees),
            "kappa_max": [float(k) for k in self.kmax],
            "a_priori_tail": max(tails),
            "error_estimate": self._estimate,
        }
