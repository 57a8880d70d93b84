"""Observables of a discrete measure ``mu = sum_i w_i delta_{x_i}`` (mesh or particles).

Computed from weighted points only, so the PDE (cell centroids and masses) and the particle
solver (tokens with weights 1/n) report the same quantities:

* ``mass`` = sum w_i;
* ``energy`` E = sum_h weight_h / (2 beta) sum_i w_i Z_h(x_i), i.e. MODEL.md's interaction
  energy ``(1/(2 beta)) int int exp(beta <Q x, K y>) dmu dmu`` summed over heads, computed by
  the evaluator (the fast one takes it from the measure's harmonic coefficients, without
  evaluating the field at the points);
* ``mean_k`` = sum_i w_i x_i (the mean vector) and ``order`` = its norm;
* ``m2_kl`` = sum_i w_i x_ik x_il (the second-moment matrix, upper triangle).

The entries ``mean_k`` and ``m2_kl`` are columns on S^1 and S^2 (d <= :data:`ENTRY_COLUMNS_UP_TO`),
where the PDE lives and the validation compares them; in higher d (tokens) a column per entry
would be d (d + 3) / 2 columns (and ``m2_kl`` ambiguous from d = 11 on): there the row has
``mass`` and ``order`` only, and a particle run's run.nc holds the mean vector and the second
moments as arrays (:mod:`meanfield.rundir.netcdf`).

The PDE adds ``rho_min`` and ``rho_max`` (cell averages); the driver adds ``t``, ``dt`` and
``wall``.
"""

from __future__ import annotations

import numpy as np

from .nonlocal_field.base import NonlocalEvaluator, PointGroup


def _allreduce(comm, a: np.ndarray) -> np.ndarray:
    return a if comm is None else comm.allreduce(a)


def interaction_energy(
    evaluator: NonlocalEvaluator, points: np.ndarray, weights: np.ndarray, fixed_sources: bool = False
) -> float:
    """E(mu) of MODEL.md, summed over heads with their weights (collective).

    ``fixed_sources`` promises that ``points`` is the same unchanged array as in the previous
    call with the promise (mesh points), so the evaluator may reuse what it derived from them.
    """
    return evaluator.energy([PointGroup(points, weights, fixed_sources)])


#: The largest d whose moment entries are columns of the observables (module docstring).
ENTRY_COLUMNS_UP_TO = 3


def moment_observables(comm, points: np.ndarray, weights: np.ndarray) -> dict[str, float]:
    """mass, mean vector, its norm and the second-moment matrix (collective; the entries for
    d <= :data:`ENTRY_COLUMNS_UP_TO` only)."""
    d = points.shape[1]
    if d > ENTRY_COLUMNS_UP_TO:
        total = _allreduce(comm, np.concatenate([[weights.sum()], weights @ points]))
        return {"mass": float(total[0]), "order": float(np.linalg.norm(total[1:]))}
    iu = np.triu_indices(d)
    second = (points.T * weights) @ points
    local = np.concatenate([[weights.sum()], weights @ points, second[iu]])
    total = _allreduce(comm, local)
    out = {"mass": float(total[0])}
    mean = total[1 : 1 + d]
    out.update({f"mean_{k}": float(mean[k]) for k in range(d)})
    out["order"] = float(np.linalg.norm(mean))
    out.update({f"m2_{k}{l}": float(v) for (k, l), v in zip(zip(*iu), total[1 + d :])})
    return out


def measure_observables(
    evaluator: NonlocalEvaluator, points: np.ndarray, weights: np.ndarray, fixed_sources: bool = False,
    extra: PointGroup | None = None,
) -> dict[str, float]:
    """All measure observables (see module docstring), collective over the evaluator's comm.

    ``extra``: a second group of weighted sources of the measure (a hybrid run's atoms, on one
    rank), included in every observable.
    """
    if extra is None:
        out = moment_observables(evaluator.comm, points, weights)
        out["energy"] = interaction_energy(evaluator, points, weights, fixed_sources)
        return out
    assert extra.weights is not None
    out = moment_observables(evaluator.comm, np.concatenate([points, extra.points]),
                             np.concatenate([weights, extra.weights]))
    out["energy"] = evaluator.energy([PointGroup(points, weights, fixed_sources), extra])
    return out
