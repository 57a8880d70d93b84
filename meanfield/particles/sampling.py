"""Initial tokens from a density on S^{d-1}: i.i.d. draws, or deterministic point sets.

Samplers (``particles.sampler`` in a config):

``exact``
    ``uniform`` (normalised Gaussians) and ``vmf`` mixtures (a component per token, then
    Wood's rejection algorithm for the cosine ``<mu, x>`` and a uniform tangent direction);
    any d.
``rejection``
    Any density f (``harmonic``, ``expression``, ...): uniform proposals accepted with
    probability ``f(x) / M``.  The bound ``M`` is ``SAFETY`` (= 1.5) times the largest value
    of f on a fine point set (:func:`probe_points`); should a proposal ever exceed ``M`` the
    bound was wrong, so the sampler raises it to ``SAFETY`` times that value and starts
    again from scratch (deterministically, so the result still depends on the seed only).
``mesh``
    The general fallback on S^1 and S^2: a cell of the mesh is drawn with probability equal
    to its mass (the degree-4 cell quadrature of f times the flat cell measure, exactly the
    PDE's initial cell masses), a point uniformly in the flat cell, projected radially onto
    the sphere.  It samples the PDE's piecewise-constant initial measure, up to the radial
    projection's area distortion within a cell (O(h^2) relative).
``quantile`` (S^1, deterministic)
    Tokens at the quantiles of rho0: ``theta_i = F^{-1}((i + 1/2) / n)``, F the cumulative
    distribution of the angle measured counter-clockwise from the positive x axis.  As the
    flow on S^1 keeps tokens ordered and each carries mass 1/n, they stay at the quantiles
    of the PDE solution up to the particle system's error, and the particle field is a
    midpoint rule in the mass coordinate, periodic and smooth: far more accurate than random
    draws (whose sampling noise at n = 2000 is as large as a 5% perturbation).
``fibonacci`` (S^2, deterministic)
    The spherical Fibonacci point set mapped by the density: the lattice
    ``(u_i, v_i) = ((i + 1/2) / n, frac(i / golden))`` of the unit square is sent through the
    inverse Rosenblatt map of rho0 in the coordinates (z, phi) (``dA = dz dphi``):
    ``z_i = F_z^{-1}(u_i)`` for the marginal of z, then ``phi_i = F^{-1}(v_i | z_i)`` for the
    conditional of phi.  For the uniform density this is the usual spherical Fibonacci lattice.
``auto``
    ``exact`` for ``uniform`` and ``vmf``, else ``rejection``.

Causal runs (``model.mask = "causal"``, :func:`sample_tokens`): token i sits at position
``s_i = (i + 1/2) / n`` and draws x from the density of its position, ``rho0(s_i, .)``.  A density
that does not depend on s gives exactly the tokens of the non-causal sampler (same seed); one
in s is drawn by rejection token by token (:func:`positional_rejection`).  The deterministic
samplers are refused: they place the tokens in order (quantiles, a lattice), which would tie a
token's point to its position where the model wants them independent.

The deterministic samplers ignore the seed.  They invert cumulative distributions computed
with the density's quadratic interpolant on each interval of a fine grid (3 Gauss points per
interval: :data:`QUANTILE_INTERVALS` on S^1; :data:`FIBONACCI_GRID` in z and phi on S^2),
accurate to about ``h^4`` times the density's third derivative for grid spacing h.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..initial import InitialDensity
from ..mesh import RawMesh
from ..sphere import cell_averages, cell_measure, normalize

SAMPLERS: tuple[str, ...] = ("auto", "exact", "rejection", "mesh", "quantile", "fibonacci")
#: Samplers of one sphere only: name -> d.
SPHERE_SAMPLERS: dict[str, int] = {"quantile": 2, "fibonacci": 3}
SAFETY = 1.5
PROBE_POINTS = 1 << 16
EXACT_KINDS = ("uniform", "vmf")
QUANTILE_INTERVALS = 1 << 16
#: (z intervals, phi points of the marginal's trapezoid rule, phi intervals of the conditionals)
FIBONACCI_GRID = (2048, 1024, 256)
_GAUSS3 = np.array([0.5 - 0.5 * np.sqrt(0.6), 0.5, 0.5 + 0.5 * np.sqrt(0.6)])  # on [0, 1]
_GAUSS3_WEIGHTS = np.array([5.0, 8.0, 5.0]) / 18.0
_GAUSS3_TO_QUADRATIC = np.linalg.inv(np.vander(_GAUSS3, 3, increasing=True))  # node values -> a + b s + c s^2


class SamplingError(ValueError):
    """A sampler that cannot draw from the given density; the message names the field."""


def uniform_sphere(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    """n points uniform on S^{d-1} (normalised standard Gaussians), shape (n, d)."""
    x = rng.standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1)[:, None]


def vmf_cosines(rng: np.random.Generator, n: int, d: int, kappa: float) -> np.ndarray:
    """n draws of t = <mu, x> for x ~ vMF(mu, kappa) on S^{d-1} (Wood 1994).

    The density of t is proportional to ``exp(kappa t) (1 - t^2)^((d - 3) / 2)`` on [-1, 1].
    """
    if kappa == 0:
        return 1.0 - 2.0 * rng.beta((d - 1) / 2, (d - 1) / 2, size=n)
    p1 = d - 1.0
    b = p1 / (2.0 * kappa + np.sqrt(4.0 * kappa**2 + p1**2))
    x0 = (1.0 - b) / (1.0 + b)
    c = kappa * x0 + p1 * np.log(1.0 - x0**2)
    out = np.empty(n)
    filled = 0
    while filled < n:
        m = max(2 * (n - filled), 64)
        z = rng.beta(p1 / 2, p1 / 2, size=m)
        w = (1.0 - (1.0 + b) * z) / (1.0 - (1.0 - b) * z)
        u = rng.uniform(size=m)
        accept = kappa * w + p1 * np.log(1.0 - x0 * w) - c >= np.log(u)
        take = w[accept][: n - filled]
        out[filled : filled + len(take)] = take
        filled += len(take)
    return out


def vmf(rng: np.random.Generator, n: int, center: np.ndarray, kappa: float) -> np.ndarray:
    """n points from the von Mises-Fisher density with unit ``center`` and concentration kappa."""
    center = np.asarray(center, float)
    t = vmf_cosines(rng, n, len(center), kappa)
    g = rng.standard_normal((n, len(center)))
    g -= (g @ center)[:, None] * center
    g /= np.linalg.norm(g, axis=1)[:, None]
    return t[:, None] * center + np.sqrt(np.clip(1.0 - t**2, 0.0, None))[:, None] * g


def vmf_mixture(
    rng: np.random.Generator, n: int, centers: np.ndarray, kappas: np.ndarray, weights: np.ndarray
) -> np.ndarray:
    """n points from ``sum_k w_k vMF(centers_k, kappas_k)`` (weights summing to 1)."""
    labels = rng.choice(len(weights), size=n, p=weights)
    out = np.empty((n, centers.shape[1]))
    for k in range(len(weights)):
        mine = labels == k
        out[mine] = vmf(rng, int(mine.sum()), centers[k], float(kappas[k]))
    return out


def probe_points(d: int, count: int = PROBE_POINTS) -> np.ndarray:
    """A fine, deterministic point set on S^{d-1} for bounding a density.

    S^1: ``count`` equispaced angles; S^2: a Fibonacci lattice of ``count`` points
    (spacing about ``sqrt(4 pi / count)`` ~ 0.014 rad); d >= 4: ``count`` uniform points of a
    fixed generator (seed 0).
    """
    if d == 2:
        theta = 2.0 * np.pi * np.arange(count) / count
        return np.stack([np.cos(theta), np.sin(theta)], axis=1)
    if d == 3:
        k = np.arange(count) + 0.5
        z = 1.0 - 2.0 * k / count
        phi = np.pi * (1.0 + 5.0**0.5) * k
        r = np.sqrt(1.0 - z**2)
        return np.stack([r * np.cos(phi), r * np.sin(phi), z], axis=1)
    return uniform_sphere(np.random.default_rng(0), count, d)


def rejection(
    rng: np.random.Generator,
    n: int,
    density: Callable[[np.ndarray], np.ndarray],
    d: int,
    bound: float | None = None,
) -> np.ndarray:
    """n points from an (unnormalised, non-negative) density by rejection from the uniform law.

    Parameters
    ----------
    bound
        An upper bound M of the density; default ``SAFETY * max f(probe_points(d))``.
    """
    M = SAFETY * float(np.max(density(probe_points(d)))) if bound is None else float(bound)
    if not np.isfinite(M) or M <= 0:
        raise SamplingError(f"initial: the density's maximum is {M!r}; it cannot be sampled")
    out = np.empty((n, d))
    filled = 0
    while filled < n:
        m = max(int(2.0 * (n - filled)), 256)
        x = uniform_sphere(rng, m, d)
        f = density(x)
        if np.any(f < 0) or not np.all(np.isfinite(f)):
            raise SamplingError("initial: the density is negative or not finite somewhere")
        if f.max() > M:  # the bound was wrong: raise it and start again
            M, filled = SAFETY * float(f.max()), 0
            continue
        take = x[rng.uniform(size=m) * M < f][: n - filled]
        out[filled : filled + len(take)] = take
        filled += len(take)
    return out


def mesh_sampler(rng: np.random.Generator, n: int, density: Callable[[np.ndarray], np.ndarray],
                 mesh: RawMesh) -> np.ndarray:
    """n points from the mesh's cell masses of ``density`` (see module docstring)."""
    vertices = mesh.points[mesh.cells]
    _, averages = cell_averages(density, vertices)
    masses = np.clip(averages, 0.0, None) * cell_measure(vertices)
    if not masses.sum() > 0:
        raise SamplingError("initial: the density has no mass on the mesh")
    cells = rng.choice(len(masses), size=n, p=masses / masses.sum())
    v = vertices[cells]
    if mesh.points.shape[1] == 2:
        s = rng.uniform(size=(n, 1))
        flat = (1.0 - s) * v[:, 0] + s * v[:, 1]
    else:
        r1, r2 = np.sqrt(rng.uniform(size=(n, 1))), rng.uniform(size=(n, 1))
        flat = (1.0 - r1) * v[:, 0] + r1 * (1.0 - r2) * v[:, 1] + r1 * r2 * v[:, 2]
    return normalize(flat)


def inverse_cdf(start: np.ndarray, width: float, values: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Invert piecewise-quadratic cumulative distributions, batched.

    Parameters
    ----------
    start
        (..., M) left ends of M intervals of equal ``width``, one grid per target; or (M,),
        one grid for all targets.
    values
        (..., M, 3) (or (M, 3)) the density at the 3 Gauss points (:data:`_GAUSS3`) of each interval; on
        each interval it is taken to be the quadratic through them.
    targets
        (...,) masses in [0, total], measured from ``start[..., 0]``.

    Returns
    -------
    np.ndarray
        (...,) the points where the cumulative mass reaches the targets (bisection to round-off).
    """
    masses = width * values @ _GAUSS3_WEIGHTS
    cumulative = np.cumsum(masses, axis=-1)
    coef = values @ _GAUSS3_TO_QUADRATIC.T  # (..., M, 3): a + b s + c s^2 on each interval
    if start.ndim == 1:  # one grid for all targets
        k = np.minimum(np.searchsorted(cumulative, targets), len(start) - 1)
        before, coef, start = (cumulative - masses)[k], coef[k], start[k]
    else:
        k = np.minimum((cumulative < targets[..., None]).sum(axis=-1), masses.shape[-1] - 1)[..., None]
        before = np.take_along_axis(cumulative - masses, k, axis=-1)[..., 0]
        coef = np.take_along_axis(coef, k[..., None], axis=-2)[..., 0, :]
        start = np.take_along_axis(start, k, axis=-1)[..., 0]
    rest = targets - before
    lo, hi = np.zeros_like(rest), np.ones_like(rest)
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        below = width * mid * (coef[..., 0] + mid * (coef[..., 1] / 2.0 + mid * coef[..., 2] / 3.0)) < rest
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return start + width * 0.5 * (lo + hi)


def _on_circle(theta: np.ndarray) -> np.ndarray:
    return np.stack([np.cos(theta), np.sin(theta)], axis=-1)


def quantile_circle(n: int, density: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """n tokens at the quantiles ``(i + 1/2) / n`` of a density on S^1 (module docstring), shape (n, 2)."""
    m = QUANTILE_INTERVALS
    width = 2.0 * np.pi / m
    start = width * np.arange(m)
    values = density(_on_circle(start[:, None] + width * _GAUSS3).reshape(-1, 2)).reshape(m, 3)
    if np.any(values < 0) or not np.all(np.isfinite(values)):
        raise SamplingError("initial: the density is negative or not finite somewhere")
    total = width * (values @ _GAUSS3_WEIGHTS).sum()
    return _on_circle(inverse_cdf(start, width, values, total * (np.arange(n) + 0.5) / n))


def fibonacci_sphere(n: int, density: Callable[[np.ndarray], np.ndarray], chunk: int = 2048) -> np.ndarray:
    """The spherical Fibonacci lattice mapped by a density on S^2 (module docstring), shape (n, 3)."""
    mz, mphi, mcond = FIBONACCI_GRID

    def at(z: np.ndarray, phi: np.ndarray) -> np.ndarray:
        r = np.sqrt(np.clip(1.0 - z**2, 0.0, None))
        pts = np.stack(np.broadcast_arrays(r * np.cos(phi), r * np.sin(phi), z), axis=-1)
        f = density(pts.reshape(-1, 3)).reshape(pts.shape[:-1])
        if np.any(f < 0) or not np.all(np.isfinite(f)):
            raise SamplingError("initial: the density is negative or not finite somewhere")
        return f

    wz = 2.0 / mz
    z_start = -1.0 + wz * np.arange(mz)
    phi = 2.0 * np.pi * np.arange(mphi) / mphi
    marginal = at((z_start[:, None] + wz * _GAUSS3)[..., None], phi).mean(axis=-1) * 2.0 * np.pi  # (mz, 3)
    total = wz * (marginal @ _GAUSS3_WEIGHTS).sum()
    i = np.arange(n)
    z = inverse_cdf(z_start, wz, marginal, total * (i + 0.5) / n)
    v = np.mod(i * (np.sqrt(5.0) - 1.0) / 2.0, 1.0)
    wphi = 2.0 * np.pi / mcond
    phi_start = wphi * np.arange(mcond)
    out = np.empty(n)
    for lo in range(0, n, chunk):
        zc = z[lo : lo + chunk]
        cond = at(zc[:, None, None], phi_start[:, None] + wphi * _GAUSS3)  # (c, mcond, 3)
        mass = wphi * (cond @ _GAUSS3_WEIGHTS).sum(axis=-1)
        out[lo : lo + chunk] = inverse_cdf(np.broadcast_to(phi_start, cond.shape[:2]), wphi, cond,
                                           v[lo : lo + chunk] * mass)
    r = np.sqrt(np.clip(1.0 - z**2, 0.0, None))
    return np.stack([r * np.cos(out), r * np.sin(out), z], axis=1)


def positional_rejection(
    rng: np.random.Generator,
    positions: np.ndarray,
    density: Callable[[np.ndarray, np.ndarray], np.ndarray],
    d: int,
) -> np.ndarray:
    """One point per position s_i from ``density(., s_i)`` (unnormalised, each position its own
    normalisation), by rejection from the uniform law, shape (len(positions), d).

    ``density(points, s)`` takes one position per point.  One bound serves all positions:
    ``SAFETY`` times the largest value on :func:`probe_points` (``PROBE_POINTS / 4`` of them)
    at the positions 0, 1/16, ..., 1; a proposal above it raises it and starts again from
    scratch, as :func:`rejection` does.  Every round proposes one uniform point to each token
    not yet drawn.
    """
    probe = probe_points(d, PROBE_POINTS // 4)
    bound = SAFETY * max(float(np.max(density(probe, np.full(len(probe), s)))) for s in np.linspace(0.0, 1.0, 17))
    positions = np.asarray(positions, dtype=float)
    while True:
        if not np.isfinite(bound) or bound <= 0:
            raise SamplingError(f"initial: the density's maximum is {bound!r}; it cannot be sampled")
        out = np.empty((len(positions), d))
        pending = np.arange(len(positions))
        while pending.size:
            x = uniform_sphere(rng, pending.size, d)
            f = density(x, positions[pending])
            if np.any(f < 0) or not np.all(np.isfinite(f)):
                raise SamplingError("initial: the density is negative or not finite somewhere")
            if f.max() > bound:
                break
            accepted = rng.uniform(size=pending.size) * bound < f
            out[pending[accepted]] = x[accepted]
            pending = pending[~accepted]
        else:
            return out
        bound = SAFETY * float(f.max())


def sample_tokens(
    density: InitialDensity,
    positions: np.ndarray,
    rng: np.random.Generator,
    sampler: str = "auto",
    mesh: RawMesh | None = None,
) -> np.ndarray:
    """The initial tokens of a causal run: token i at position ``positions[i]`` draws from the
    density of its position (module docstring), shape (len(positions), d).

    Parameters
    ----------
    density
        The initial density; :meth:`~meanfield.initial.InitialDensity.at` gives it at a position.
    positions
        The tokens' positions in [0, 1], in token order.
    rng, sampler, mesh
        As for :func:`sample_initial`; ``quantile`` and ``fibonacci`` are refused, and so is
        ``mesh`` for a density that depends on the position.
    """
    check_causal_sampler(density, sampler)
    if not density.depends_on_position:
        return sample_initial(density, len(positions), rng, sampler, mesh)
    return positional_rejection(rng, positions, density.at, density.d)


def check_causal_sampler(density: InitialDensity, sampler: str) -> None:
    """Refuse a sampler that cannot draw the tokens of a causal run (see :func:`sample_tokens`).

    Raises
    ------
    SamplingError
        Naming ``particles.sampler``.
    """
    if sampler in SPHERE_SAMPLERS:
        raise SamplingError(f"particles.sampler: {sampler!r} places the tokens in order, tying each token's point "
                            "to its position; a causal run (model.mask = 'causal') needs independent draws "
                            "('auto', 'exact', 'rejection' or 'mesh')")
    if density.depends_on_position and resolve_sampler(density.kind, sampler) != "rejection":
        raise SamplingError(f"particles.sampler: {sampler!r} draws from one density; an initial density in the "
                            "position s needs 'rejection' (or 'auto')")


def resolve_sampler(kind: str, sampler: str) -> str:
    """The sampler ``auto`` means for an initial-density kind; checks the combination."""
    if sampler == "auto":
        return "exact" if kind in EXACT_KINDS else "rejection"
    if sampler not in SAMPLERS:
        raise SamplingError(f"particles.sampler: must be one of {SAMPLERS}, got {sampler!r}")
    if sampler == "exact" and kind not in EXACT_KINDS:
        raise SamplingError(f"particles.sampler: 'exact' needs initial.kind in {EXACT_KINDS}, got {kind!r}")
    return sampler


def sample_initial(
    density: InitialDensity,
    n: int,
    rng: np.random.Generator,
    sampler: str = "auto",
    mesh: RawMesh | None = None,
) -> np.ndarray:
    """n tokens from an initial density, shape (n, d): i.i.d., or a deterministic set (module docstring).

    Parameters
    ----------
    density
        The initial density (its kind selects the exact sampler).
    rng
        The generator; the result depends on its state only (unused by ``quantile`` and ``fibonacci``).
    sampler
        One of :data:`SAMPLERS` (see module docstring).
    mesh
        Needed by the ``mesh`` sampler (d = 2 or 3).
    """
    if n <= 0:
        raise SamplingError(f"particles.n: must be a positive integer, got {n!r}")
    method = resolve_sampler(density.kind, sampler)
    d = density.d
    if method in SPHERE_SAMPLERS:
        if d != SPHERE_SAMPLERS[method]:
            raise SamplingError(f"particles.sampler: {method!r} samples S^{SPHERE_SAMPLERS[method] - 1}, "
                                f"not S^{d - 1}")
        return quantile_circle(n, density) if method == "quantile" else fibonacci_sphere(n, density)
    if method == "rejection":
        return rejection(rng, n, density, d)
    if method == "mesh":
        if mesh is None or mesh.points.shape[1] != d:
            raise SamplingError(f"particles.sampler: 'mesh' needs a mesh of S^{d - 1}")
        return mesh_sampler(rng, n, density, mesh)
    if density.kind == "uniform":
        return uniform_sphere(rng, n, d)
    p = density.params
    return vmf_mixture(rng, n, p["centers"], p["kappas"], p["weights"])
