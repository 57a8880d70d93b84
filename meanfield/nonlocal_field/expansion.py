"""Per-target harmonic expansion: the fast field for heads whose kernel concentration varies.

With ``A = Q^T K`` one has ``beta <Q x, K y> = kappa(x) <u(x), y>``, ``kappa(x) = beta |A^T x|``
and ``u(x) = A^T x / |A^T x|``.  Expanding the kernel in the real basis ``B_b`` of
:mod:`.harmonics`,

    [sum_j w_j e^{...} y_j, Z](x) = sum_{l <= L} g_l(kappa(x)) sum_{b in degree l} B_b(u(x)) M_b,
    M_b = sum_j w_j B_b(y_j) [y_j, 1]                                   (the source moments),

so each target costs one basis of ``basis_size(d, L + 1)`` rows (degree L + 1 gives the
a-posteriori estimate) contracted with the moments.  When ``kappa`` is the same at every
target (``Q^T K`` a multiple of an orthogonal matrix) the transform route of
:mod:`.fast` is far cheaper; this module serves the other heads, and every head when the
requested tolerance is below the transforms' accuracy floor (then the moments are computed
here too, exactly, by :func:`exact_moments`).

Memory: basis values are built in blocks of :data:`BLOCK_BYTES` and contracted as they are
built; a :class:`BasisCache` keeps the blocks of fixed point sets (mesh points) between calls
while they fit its byte budget, which by default is a share of the memory available to this
rank (:func:`default_cache_bytes`).  Nothing of size ``points x basis`` is allocated per call.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import numpy as np

from ..memory import available_memory, ranks_on_node
from .base import array_key
from .harmonics import basis_size, harmonic_basis, kernel_coefficients

#: Bytes of basis values built at once.
BLOCK_BYTES = 1 << 23
#: Share of the memory available to a rank that basis caches may hold.
CACHE_FRACTION = 0.25


def default_cache_bytes(comm=None) -> int:
    """:data:`CACHE_FRACTION` of the memory available to the process (:func:`meanfield.memory.available_memory`:
    the smaller of the cgroup's room and the node's ``MemAvailable``), shared by the ranks on this node
    (collective); where neither is known, of the node's free pages."""
    room = available_memory()
    available = room[0] if room is not None else os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return int(CACHE_FRACTION * available / ranks_on_node(comm))


def block_points(rows: int) -> int:
    """Points per block for a basis of ``rows`` rows."""
    return max(64, BLOCK_BYTES // (8 * rows))


class BasisCache:
    """Basis blocks of fixed point sets, kept within ``budget`` bytes; one entry per role.

    A role names what the blocks are for (the sources, or the targets of one head); a new
    point array for a role replaces that role's entry.
    """

    def __init__(self, budget: int) -> None:
        self.budget = int(budget)
        self._entries: dict[object, tuple[tuple, list[np.ndarray]]] = {}

    @property
    def nbytes(self) -> int:
        """Bytes held."""
        return sum(b.nbytes for _, blocks in self._entries.values() for b in blocks)

    def blocks(
        self, role: object, points: np.ndarray, fixed: bool, rows: int, build: Callable[[slice], np.ndarray]
    ) -> Iterator[tuple[slice, np.ndarray]]:
        """Yield ``(slice, block)`` over the points, ``block = build(slice)``: from the cache
        for a fixed array seen before, kept when it is fixed and fits, else built and dropped."""
        n = points.shape[0]
        step = block_points(rows)
        slices = [slice(i, min(i + step, n)) for i in range(0, n, step)]
        key = array_key(points) if fixed else None
        entry = self._entries.get(role)
        if entry is not None and entry[0] == key:
            yield from zip(slices, entry[1])
            return
        self._entries.pop(role, None)
        keep = fixed and self.nbytes + 8 * rows * n <= self.budget
        kept: list[np.ndarray] = []
        for sl in slices:
            block = build(sl)
            if keep:
                kept.append(block)
            yield sl, block
        if keep:
            assert key is not None  # keep implies fixed, and fixed arrays have a key
            self._entries[role] = (key, kept)


def exact_moments(
    sources: np.ndarray, weights: np.ndarray, L: int, cache: BasisCache, role: object, fixed: bool
) -> np.ndarray:
    """This rank's moments ``M_b = sum_j w_j B_b(y_j) [y_j, 1]`` up to degree L, shape
    (basis_size(d, L), d + 1), by the basis recurrences (exact to round-off)."""
    d = sources.shape[1]
    rows = basis_size(d, L)
    rhs = np.empty((sources.shape[0], d + 1))
    rhs[:, :d] = weights[:, None] * sources
    rhs[:, d] = weights
    out = np.zeros((rows, d + 1))
    build = lambda sl: harmonic_basis(sources[sl], L)  # noqa: E731
    for sl, basis in cache.blocks(role, sources, fixed, rows, build):
        out += basis @ rhs[sl]
    return out


def concentrations(targets: np.ndarray, A: np.ndarray, beta: float) -> tuple[np.ndarray, np.ndarray]:
    """``kappa(x) = beta |A^T x|`` and the unit vectors ``u(x)`` (any unit vector where
    ``kappa = 0``, where the kernel is constant)."""
    z = beta * (targets @ A)
    kappa = np.linalg.norm(z, axis=1)
    u = np.zeros_like(z)
    u[:, 0] = 1.0
    np.divide(z, kappa[:, None], out=u, where=kappa[:, None] > 0)
    return kappa, u


def target_sums(
    targets: np.ndarray,
    A: np.ndarray,
    beta: float,
    L: int,
    moments: np.ndarray,
    cache: BasisCache,
    role: object,
    fixed: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Scaled ``[sum_j w_j e^{...} y_j, Z]`` at the targets for one head (shape (d + 1, m)),
    the first neglected degree's part of the same, and ``kappa`` (the ``log_scale``); for
    moments of other columns (several measures' ``sum_j w_j B_b(y_j)``, say), the same sums of
    each column (shape (columns, m)).

    ``moments`` must hold degrees up to L + 1.
    """
    d = targets.shape[1]
    kept, rows = basis_size(d, L), basis_size(d, L + 1)
    kappa, u = concentrations(targets, A, beta)

    def build(sl: slice) -> np.ndarray:
        return harmonic_basis(u[sl], L + 1, kernel_coefficients(d, L + 1, kappa[sl]))

    sums = np.empty((moments.shape[1], targets.shape[0]))
    extra = np.empty_like(sums)
    for sl, basis in cache.blocks(role, targets, fixed, rows, build):
        sums[:, sl] = moments[:kept].T @ basis[:kept]
        extra[:, sl] = moments[kept:rows].T @ basis[kept:rows]
    return sums, extra, kappa
