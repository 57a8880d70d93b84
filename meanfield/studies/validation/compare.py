"""Comparing an empirical measure with a PDE run at one output time.

The PDE being validated is the run at the config's resolution h (``coarse``).  When a run
at h/2 (``fine``) is available:

* the reference *observables* (moments, energy) are the Richardson extrapolation
  ``f_{h/2} + (f_{h/2} - f_h) / (2^p - 1)`` with the scheme's order p (1 for ``fv``:
  ``2 f_{h/2} - f_h``; 2 for ``dg1``), removing the leading O(h^p) error; without a fine run
  they are the coarse run's;
* the *discretisation floor* of every metric is estimated as the same metric between the
  two PDE runs: ``|f_h - f_{h/2}|`` for observables (the error of f_h for a first-order
  scheme; the extrapolated reference is more accurate than this) and, for distances, the
  distance between the coarse and fine measures (the coarse run's own error, to which the
  distance between particles and the coarse run levels off).

Distribution metrics always compare with the coarse run's measure: cell centroids with the
cell masses ``rho_c |c|``.  See :mod:`meanfield.analysis.metrics` for the definitions.

Causal runs (``model.mask = "causal"``): every metric above compares the whole measure (the
tokens, and the mean of the PDE's M slice densities: the midpoint rule in s), and
``mean_error_by_position`` compares the first moment position by position: the tokens binned
by position into the M slices (``s_i`` in ``[k/M, (k+1)/M)``) against the PDE's slices
(``observables_by_position``, extrapolated like the observables), the root mean square over
the slices of ``|m_1 - m_1^ref|``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...analysis import metrics
from ...discretisation.registry import scheme_class
from ...mesh import CellLocator, raw_mesh
from ...rundir.results import PDERunResult
from ...times import MATCH_TOL, same_time

#: Exact W_1 (``ot.emd2``) is computed only when the dense cost matrix has at most this many entries.
W1_MAX_ENTRIES = 20_000_000


def _row(observables: dict[str, np.ndarray], i: int) -> dict[str, float]:
    return {k: float(v[i]) for k, v in observables.items()}


def _time_index(times: np.ndarray, t: float) -> int:
    i = int(np.argmin(np.abs(times - t)))
    if not same_time(times[i], t, MATCH_TOL):
        raise ValueError(f"time.outputs: the PDE run has no output at t = {t:g}")
    return i


@dataclass
class PDEReference:
    """One or two PDE runs of the same problem, read back from their directories.

    Parameters
    ----------
    coarse
        The run being validated (config resolution).
    fine
        The same problem at half the mesh size, or ``None``.
    mmd_scale
        Kernel width of the MMD.
    """

    coarse: PDERunResult
    fine: PDERunResult | None = None
    mmd_scale: float = 0.5

    def __post_init__(self) -> None:
        mesh = self.coarse.header.mesh
        raw = raw_mesh(mesh.sphere.name, mesh.resolution, mesh.file)
        self.d = raw.points.shape[1]
        self.locator = CellLocator(raw)

    def measure(self, t: float, result: PDERunResult | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Cell centroids and cell masses of a PDE run (default: the coarse one) at time t (a
        causal run's: of the whole measure, the mean of its slices)."""
        result = result or self.coarse
        density = result.densities[_time_index(result.times, t)]
        return result.centroids, result.mask.whole_density(density) * result.areas

    def _extrapolated(self, coarse: dict, fine: dict | None) -> dict:
        if fine is None:
            return coarse
        order = scheme_class(self.coarse.header.scheme or "fv").order
        return {k: fine[k] + (fine[k] - coarse[k]) / (2.0**order - 1.0) for k in coarse}

    def observables(self, t: float) -> dict[str, float]:
        """Reference observables at t: Richardson-extrapolated when a fine run exists."""
        coarse = _row(self.coarse.observables, _time_index(self.coarse.observables["t"], t))
        fine = None if self.fine is None else _row(self.fine.observables, _time_index(self.fine.observables["t"], t))
        return self._extrapolated(coarse, fine)

    def slice_means(self, t: float, result: PDERunResult | None = None) -> np.ndarray:
        """(M, d) the first moment of each position slice of a causal run at t (default: the
        reference, extrapolated like :meth:`observables`)."""

        def means(r: PDERunResult) -> np.ndarray:
            i = _time_index(r.times, t)
            return np.column_stack([r.observables_by_position[f"mean_{k}"][i] for k in range(self.d)])

        if result is not None:
            return means(result)
        rows = {"m": means(self.coarse)}
        fine = None if self.fine is None else {"m": means(self.fine)}
        return self._extrapolated(rows, fine)["m"]

    def slice_mean_error(self, points: np.ndarray, positions: np.ndarray, t: float) -> float:
        """``mean_error_by_position`` (module docstring) of tokens at their positions."""
        ref = self.slice_means(t)
        bins = np.minimum((positions * len(ref)).astype(int), len(ref) - 1)
        counts = np.bincount(bins, minlength=len(ref))
        sums = np.stack([np.bincount(bins, points[:, k], minlength=len(ref)) for k in range(self.d)], axis=1)
        filled = counts > 0
        errors = np.linalg.norm(sums[filled] / counts[filled, None] - ref[filled], axis=1)
        return float(np.sqrt(np.mean(errors**2)))

    def distances(self, x: np.ndarray, a: np.ndarray, t: float) -> dict[str, float]:
        """Distribution metrics between ``sum a_i delta_{x_i}`` and the coarse PDE measure at t."""
        y, b = self.measure(t)
        out = {"mmd": metrics.mmd(x, a, y, b, self.mmd_scale)}
        if self.d == 2:
            out["w1"] = metrics.w1_circle(x, a, y, b)
        else:
            out["sliced_w2"] = metrics.sliced_w2(x, a, y, b)
            if len(x) * len(y) <= W1_MAX_ENTRIES:
                out["w1"] = metrics.w1_exact(x, a, y, b)
        out["hist_l1"] = metrics.hist_l1(self.locator.histogram(x, a), b)
        return out

    def compare(self, points: np.ndarray, row: dict[str, float], t: float,
                positions: np.ndarray | None = None) -> dict[str, float]:
        """All metrics of n equal-weight tokens (and their observables row) at time t; with the
        tokens' ``positions`` and a causal reference, ``mean_error_by_position`` too."""
        n = len(points)
        out = metrics.moment_errors(row, self.observables(t), self.d)
        out.update(self.distances(points, np.full(n, 1.0 / n), t))
        out["hist_l1_noise"] = metrics.hist_l1_noise(self.measure(t)[1], n)
        if positions is not None and self.coarse.observables_by_position:
            out["mean_error_by_position"] = self.slice_mean_error(points, positions, t)
        return out

    def floor(self, t: float) -> dict[str, float]:
        """Estimated discretisation floor of each metric at t (empty without a fine run)."""
        if self.fine is None:
            return {}
        coarse = _row(self.coarse.observables, _time_index(self.coarse.observables["t"], t))
        fine = _row(self.fine.observables, _time_index(self.fine.observables["t"], t))
        out = metrics.moment_errors(coarse, fine, self.d)
        x, a = self.measure(t, self.fine)
        out.update(self.distances(x, a, t))
        if self.coarse.observables_by_position and self.fine.observables_by_position:
            difference = self.slice_means(t, self.coarse) - self.slice_means(t, self.fine)
            out["mean_error_by_position"] = float(np.sqrt(np.mean(np.sum(difference**2, axis=1))))
        return out
