"""Errors of a finished ladder against its reference, and observed orders.

Density errors (cell averages, norms weighted by the cell measures; ``max`` over cells) at
every output time, against

``exact``
    the exact solution where the case has one (:mod:`meanfield.references.exact`); exact cell averages
    use the degree-4 rule of :mod:`meanfield.sphere` on the raw mesh;
``finest``
    the finest run of the ladder (self-convergence);
``RUN_DIR``
    a run directory at a finer nested level (or, for a dt ladder, the same mesh).

A causal run's density is that of its whole token distribution (the mean of its positions'
densities): a slices ladder (``positions.slices`` = M doubled) measures it against its finest
M on one mesh, with widths 1/M.

Observed orders: against ``exact`` or a ``RUN_DIR``, ``log(e_{L-1} / e_L) / log(h_{L-1} / h_L)``
on row L; against ``finest``, the Richardson estimate from three consecutive levels,
``log(d_L / d_{L+1}) / log(h_L / h_{L+1})`` with ``d_L = ||u_L - u_{L+1}||``, on row L.  The
observables ``energy`` and ``moments`` (largest error of the mean vector and second-moment
entries) are always treated by self-convergence (finest or RUN_DIR), since their exact values
are not known in closed form.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...masks import whole_measure
from ...mesh import raw_mesh
from ...problem import Problem
from ...references.exact import ExactDensity, exact_solution
from ...rundir.layout import METADATA
from ...rundir.results import PDERunResult, load_pde_run
from ...sphere import cell_averages
from .ladder import ConvergenceError, Ladder, level_of, mesh_width, resolution

DENSITY_NORMS = ("L1", "L2", "max")
OBSERVABLE_NORMS = ("energy", "moments")


@dataclass(frozen=True)
class Row:
    """One line of convergence.csv."""

    level: int
    cells: int
    h: float
    dt: float
    norm: str
    time: float
    error: float
    order: float


def exact_cell_averages(exact: ExactDensity, sphere: str, cells: int, times: np.ndarray) -> np.ndarray:
    """(T, cells) cell averages of the exact solution on a ladder mesh, global order."""
    raw = raw_mesh(sphere, resolution(sphere, level_of(sphere, cells)))
    vertices = raw.points[raw.cells]
    return np.array([cell_averages(lambda x, t=t: exact(t, x), vertices)[1] for t in times])


def density_norms(error: np.ndarray, areas: np.ndarray) -> dict[str, np.ndarray]:
    """L1, L2 (measure-weighted) and max norms of (T, cells) errors, per time."""
    return {"L1": np.abs(error) @ areas, "L2": np.sqrt(error**2 @ areas), "max": np.abs(error).max(axis=1)}


def observable_errors(result: PDERunResult, ref: PDERunResult) -> dict[str, np.ndarray]:
    """Errors of the energy and of the moments (largest entry) per output time."""
    keys = [k for k in result.observables if k.startswith(("mean_", "m2_"))]
    moments = np.max([np.abs(result.observables[k] - ref.observables[k]) for k in keys], axis=0)
    return {"energy": np.abs(result.observables["energy"] - ref.observables["energy"]), "moments": moments}


def observed_orders(errors: list[np.ndarray], widths: list[float]) -> list[np.ndarray]:
    """log(e_{i-1} / e_i) / log(h_{i-1} / h_i) per entry i (NaN for the first)."""
    out = [np.full_like(errors[0], np.nan)]
    with np.errstate(divide="ignore", invalid="ignore"):
        for i in range(1, len(errors)):
            out.append(np.log(errors[i - 1] / errors[i]) / np.log(widths[i - 1] / widths[i]))
    return out


def richardson_orders(differences: list[np.ndarray], widths: list[float]) -> list[np.ndarray]:
    """Richardson orders log(d_i / d_{i+1}) / log(h_i / h_{i+1}) (NaN where i + 1 is missing)."""
    return observed_orders(differences, widths)[1:] + [np.full_like(differences[0], np.nan)]


def check_reference(problem: Problem, reference: str | Path, axis: str = "mesh") -> None:
    """Raise :class:`ConvergenceError` unless ``reference`` can be used for this study."""
    if reference not in ("exact", "finest") and not (Path(reference) / METADATA).is_file():
        raise ConvergenceError(f"--reference: {reference} is not 'exact', 'finest' or a run directory")
    if reference == "exact" and axis != "mesh":
        option = "--dt-ladder: a dt ladder" if axis == "dt" else "--slices: a slices ladder"
        raise ConvergenceError(f"--reference exact: {option} is measured against its finest run (--reference finest)")
    if reference == "exact" and problem.initial().depends_on_position:
        raise ConvergenceError("--reference exact: a causal run whose initial density depends on s has no exact "
                               "solution; use --reference finest")
    if reference == "exact" and exact_solution(problem) is None:
        raise ConvergenceError("--reference exact: this case has no exact solution "
                               "(rotation, uniform, or harmonic with Q = K = V = I, or the feed-forward flow "
                               "alone); use --reference finest")


def error_rows(ladder: Ladder, reference: str | Path = "finest") -> list[Row]:
    """The rows of convergence.csv for a finished ladder (serial; any rank)."""
    check_reference(ladder.problem, reference, ladder.axis)
    times = ladder.results[0].times
    for result in ladder.results:
        if result.times.shape != times.shape or not np.allclose(result.times, times):
            raise ConvergenceError(f"{result.path}: output times differ from the other levels'")
    n = len(ladder.results)
    widths = [ladder.width(i) for i in range(n)]
    rows: list[Row] = []

    def emit(i: int, errors: dict[str, np.ndarray], orders: dict[str, list[np.ndarray]]) -> None:
        for norm, err in errors.items():
            for k, t in enumerate(times):
                rows.append(Row(ladder.levels[i], ladder.cells(i), mesh_width(ladder.sphere, ladder.cells(i)),
                                ladder.step(i), norm, float(t), float(err[k]), float(orders[norm][i][k])))

    def against_reference(errors: list[dict[str, np.ndarray]]) -> None:
        """Errors against a fixed reference; orders from consecutive levels."""
        orders = {k: observed_orders([e[k] for e in errors], widths) for k in errors[0]}
        for i in range(n):
            emit(i, errors[i], orders)

    def self_convergence(diff: Callable[[int, int], dict[str, np.ndarray]]) -> None:
        """Errors against the finest run; Richardson orders from consecutive differences."""
        consecutive = [diff(i, i + 1) for i in range(n - 1)]
        orders = {k: richardson_orders([c[k] for c in consecutive], widths[: n - 1]) for k in consecutive[0]}
        for i in range(n - 1):
            emit(i, diff(i, n - 1), orders)

    def density_diff(i: int, ref: PDERunResult) -> dict[str, np.ndarray]:
        result = ladder.results[i]
        return density_norms(result.densities - ladder.transfer(ref, i), result.areas)

    if reference == "exact":
        exact = exact_solution(ladder.problem)
        assert exact is not None  # check_reference
        errors = []
        for i, result in enumerate(ladder.results):
            ref = exact_cell_averages(exact, ladder.sphere, ladder.cells(i), times)
            ref /= ref[0] @ result.areas  # the runs normalise the discrete mass to 1
            errors.append(density_norms(result.densities - ref, result.areas))
        against_reference(errors)
    elif reference == "finest":
        self_convergence(lambda i, j: density_diff(i, ladder.results[j]))
    else:
        reference_result = whole_measure(load_pde_run(reference))
        against_reference([density_diff(i, reference_result) for i in range(n)])

    if reference in ("exact", "finest"):  # observables: no exact values, self-convergence
        self_convergence(lambda i, j: observable_errors(ladder.results[i], ladder.results[j]))
    else:
        against_reference([observable_errors(result, reference_result) for result in ladder.results])
    return rows
