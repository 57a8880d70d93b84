"""Sub-cell peak position and height: a local polynomial fitted to cell data, then maximised.

The density near a peak cell is modelled by a polynomial p of total degree ``degree`` in
normal coordinates about the cell's centroid (:mod:`.coords`).  Cell data are linear
functionals of the density, ``ell(rho) = sum_q W_q rho(x_q)`` (the quadrature points and
weights of a cell average); p is the least-squares solution of ``ell_r(p) = data_r`` over the
functionals of a patch of cells
around the peak cell (exact when the patch gives as many functionals as p has coefficients).
When the density is a polynomial of that degree the fit recovers it, so the position and
height errors are those of the neglected Taylor terms over the patch.  The maximum of p is
found by Newton's method from the centroid; it must lie within ``radius`` (in units of the
patch scale) with a negative-definite Hessian, otherwise the centroid and the fitted value
there are returned (a peak too narrow for the mesh).  Minima (the ends of basins on S^1) are
found the same way.
"""

from __future__ import annotations

from itertools import product

import numpy as np

from .coords import exp_map, log_map

NEWTON_STEPS = 30
#: Newton has converged when a step is shorter than this (in units of the cell size): far above
#: the round-off of the step, which depends on the BLAS kernel, far below any use of the position.
NEWTON_TOL = 1e-10


def exponents(dim: int, degree: int) -> np.ndarray:
    """Exponents (M, dim) of the monomials of total degree <= ``degree``."""
    return np.array([e for e in product(range(degree + 1), repeat=dim) if sum(e) <= degree], dtype=np.int64)


def _derivatives(coef: np.ndarray, exps: np.ndarray, s: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """Value, gradient and Hessian of ``sum_m coef_m s^exps_m`` at one point s."""
    dim = len(s)

    def mono(e: np.ndarray) -> np.ndarray:
        return np.prod(np.where(e >= 0, s ** np.maximum(e, 0), 0.0), axis=-1)

    value = coef @ mono(exps)
    grad = np.array([coef @ (exps[:, i] * mono(exps - np.eye(dim, dtype=np.int64)[i])) for i in range(dim)])
    hess = np.empty((dim, dim))
    for i in range(dim):
        for j in range(dim):
            shift = exps - np.eye(dim, dtype=np.int64)[i] - np.eye(dim, dtype=np.int64)[j]
            factor = exps[:, i] * (exps[:, j] - (i == j))
            hess[i, j] = coef @ (factor * mono(shift))
    return float(value), grad, hess


def fit_extremum(origin: np.ndarray, points: np.ndarray, weights: np.ndarray, data: np.ndarray, degree: int,
                 scale: float, radius: float = 1.5, maximum: bool = True) -> tuple[np.ndarray, float, bool]:
    """The maximum (or minimum) of the polynomial fitted to cell data around ``origin`` (module docstring).

    Parameters
    ----------
    origin
        (d,) the centroid of the cell the extremum is sought near.
    points, weights
        (R, q, d) quadrature points and (R, q) weights of the R functionals.
    data
        (R,) their values.
    degree
        Total degree of the polynomial.
    scale
        Length (radians) the coordinates are divided by, about one cell.
    radius
        Largest accepted distance of the extremum from the origin, in units of ``scale``.
    maximum
        Seek a maximum (else a minimum).

    Returns
    -------
    position
        (d,) the extremum on the sphere (``origin`` if none was found).
    value
        The polynomial's value there.
    found
        Whether Newton's method converged to an extremum within ``radius``.
    """
    r, q, d = points.shape
    s = log_map(origin, points.reshape(-1, d)).reshape(r, q, d - 1) / scale
    exps = exponents(d - 1, degree)
    design = np.einsum("rq,rqm->rm", weights, np.prod(s[:, :, None, :] ** exps, axis=-1))
    coef = np.linalg.lstsq(design, data, rcond=None)[0] * (1.0 if maximum else -1.0)  # always maximise
    sign = 1.0 if maximum else -1.0
    x = np.zeros(d - 1)
    for _ in range(NEWTON_STEPS):
        _, grad, hess = _derivatives(coef, exps, x)
        if np.any(np.linalg.eigvalsh(hess) >= 0):
            break
        step = np.linalg.solve(hess, grad)
        x = x - step
        if np.linalg.norm(x) > radius:
            break
        if np.linalg.norm(step) < NEWTON_TOL:
            return exp_map(origin, x * scale)[0], sign * _derivatives(coef, exps, x)[0], True
    return np.asarray(origin, float), sign * _derivatives(coef, exps, np.zeros(d - 1))[0], False
