"""Two PDE runs side by side: densities at common output times, distances, observables.

The runs may differ in mesh, scheme or anything else.  At every output time the two runs have
in common (to a relative 1e-9), the density of the run on the finer mesh (more cells) is
transferred conservatively to the coarser mesh: the mass of each finer cell goes to the coarser
cell that holds its centroid (:class:`~meanfield.mesh.CellLocator`).  On nested meshes (the
icosphere levels, the S^1 ladder) every finer cell lies in one coarser cell, and this is the
convergence study's nested transfer exactly; on other meshes it is the midpoint rule of the
overlap.  Runs on the same mesh are compared cell by cell.  Then, on the coarser mesh:

* ``l1`` = sum over cells of ``|rho_A - rho_B|`` times the cell's area;
* ``w1``: the Wasserstein-1 distance (geodesic cost, radians) between the cell masses placed at
  the cell centroids, each normalised to mass 1: exact on S^1 (:func:`~meanfield.analysis.metrics.w1_circle`),
  on S^2 by ``ot.emd2`` up to :data:`MAX_W1_CELLS` cells (``nan`` beyond: its cost matrix
  grows as the square of the cells);

and the observables both runs have, side by side (``a_<name>``, ``b_<name>``).  Hybrid runs'
atoms are left out of the distances (they are in the observables).  A causal run is compared as
its whole token distribution (the mean of its positions' densities, as its observables.csv
describes it), so it can be set beside a run without the mask or with another slice count.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..config import ConfigError
from ..masks import whole_measure
from ..rundir.files import write_text
from ..rundir.results import PDERunResult, load_run
from ..times import MATCH_TOL, same_time
from .collect import check_table_output
from .metrics import w1_circle, w1_exact

if TYPE_CHECKING:
    import pandas

#: Most cells of the coarser S^2 mesh for which W_1 is computed (a dense cost matrix of its square).
MAX_W1_CELLS = 1280
#: Observables shown in the printed table (all shared ones go to the CSV).
SHOWN = ("mass", "order", "energy")


@dataclass
class Comparison:
    """The result of :func:`compare`.

    Attributes
    ----------
    a, b
        The two runs.
    table
        One row per common output time: ``t``, ``l1``, ``w1``, then ``a_<name>`` and
        ``b_<name>`` for every observable both runs have.
    mesh
        Where the densities were compared: ``"A"`` or ``"B"`` (the coarser run's mesh) or
        ``"same"``.
    """

    a: PDERunResult
    b: PDERunResult
    table: pandas.DataFrame
    mesh: str

    def format(self) -> str:
        """The table for people: t, L1, W1 and mass, order, energy of both runs."""
        shown = [name for name in SHOWN if f"a_{name}" in self.table]
        head = f"{'t':>10} {'L1':>11} {'W1':>11}" + "".join(f" {f'{n} A':>14} {f'{n} B':>14}" for n in shown)
        lines = [f"A = {self.a.path}, B = {self.b.path}; densities compared on "
                 + ("the same mesh" if self.mesh == "same" else f"{self.mesh}'s mesh (the coarser)"), head]
        for _, row in self.table.iterrows():
            lines.append(f"{row['t']:>10.4g} {row['l1']:>11.4e} {row['w1']:>11.4e}"
                         + "".join(f" {row[f'a_{n}']:>14.8g} {row[f'b_{n}']:>14.8g}" for n in shown))
        return "\n".join(lines)

    def write_csv(self, out: str | Path, *, overwrite: bool = False) -> Path:
        """Write :attr:`table` as CSV (refused: another suffix, an existing file without ``overwrite``)."""
        path = check_csv_output(out, overwrite=overwrite)
        write_text(path, self.table.to_csv(index=False))
        return path


def check_csv_output(out: str | Path, *, overwrite: bool = False) -> Path:
    """Refuse a CSV file :meth:`Comparison.write_csv` may not write (ConfigError naming ``-o``)."""
    if Path(out).suffix != ".csv":
        raise ConfigError(f"-o {out}: must end in .csv")
    return check_table_output(out, overwrite=overwrite)


def same_mesh(a: PDERunResult, b: PDERunResult) -> bool:
    """Whether the runs have the same mesh (vertices to 1e-12, the same cells)."""
    return (a.cells.shape == b.cells.shape and a.vertices.shape == b.vertices.shape
            and np.array_equal(a.cells, b.cells) and np.allclose(a.vertices, b.vertices, rtol=0, atol=1e-12))


def transfer(fine: PDERunResult, coarse: PDERunResult) -> np.ndarray:
    """The densities of ``fine`` (T, C_fine) on the cells of ``coarse`` (T, C_coarse), conserving mass.

    Each finer cell's mass ``rho |c|`` goes to the coarser cell that holds its centroid; the
    coarser cell's density is the mass it receives over its area.
    """
    from scipy.sparse import csr_matrix

    from ..mesh import CellLocator, RawMesh

    if same_mesh(fine, coarse):
        return fine.densities
    parents = CellLocator(RawMesh(coarse.vertices, coarse.cells)).locate(fine.centroids)
    gather = csr_matrix((np.ones(len(parents)), (np.arange(len(parents)), parents)),
                        shape=(len(parents), len(coarse.areas)))
    return np.asarray(gather.T @ (fine.densities * fine.areas).T).T / coarse.areas


def w1_distance(rho_a: np.ndarray, rho_b: np.ndarray, centroids: np.ndarray, areas: np.ndarray) -> float:
    """W_1 between two densities on one mesh (module docstring); ``nan`` above :data:`MAX_W1_CELLS` on S^2."""
    mass_a, mass_b = np.clip(rho_a * areas, 0.0, None), np.clip(rho_b * areas, 0.0, None)
    if centroids.shape[1] == 2:
        return w1_circle(centroids, mass_a, centroids, mass_b)
    if len(areas) > MAX_W1_CELLS:
        return float("nan")
    return w1_exact(centroids, mass_a, centroids, mass_b)


def common_times(a: np.ndarray, b: np.ndarray) -> list[tuple[int, int]]:
    """Index pairs (i, j) with ``a[i]`` and ``b[j]`` the same time (:func:`~meanfield.times.same_time`
    to :data:`~meanfield.times.MATCH_TOL`)."""
    pairs = []
    for i, t in enumerate(a):
        j = int(np.argmin(np.abs(b - t)))
        if same_time(b[j], t, MATCH_TOL):
            pairs.append((i, j))
    return pairs


def compare(run_a: str | Path | PDERunResult, run_b: str | Path | PDERunResult) -> Comparison:
    """Compare two PDE runs at their common output times (module docstring).

    Parameters
    ----------
    run_a, run_b
        Run directories, or runs already read (:func:`meanfield.load_run`).

    Raises
    ------
    ConfigError
        A particle run, runs on different spheres, or no output time in common.
    """
    import pandas

    results = [_pde_result(source) for source in (run_a, run_b)]
    a, b = results
    if a.sphere != b.sphere:
        raise ConfigError(f"{b.path}: a run on {b.sphere}, but {a.path} is on {a.sphere}")
    pairs = common_times(a.times, b.times)
    if not pairs:
        raise ConfigError(f"{a.path} and {b.path}: no output time in common (A: {_span(a.times)}, B: {_span(b.times)})")
    ia, ib = (np.array(index) for index in zip(*pairs))
    mesh = "same" if same_mesh(a, b) else ("A" if len(a.areas) <= len(b.areas) else "B")
    coarse = b if mesh == "B" else a
    rho_a = a.densities[ia] if mesh != "B" else transfer(a, b)[ia]
    rho_b = b.densities[ib] if mesh != "A" else transfer(b, a)[ib]
    columns: dict[str, np.ndarray] = {
        "t": a.times[ia],
        "l1": np.abs(rho_a - rho_b) @ coarse.areas,
        "w1": np.array([w1_distance(x, y, coarse.centroids, coarse.areas) for x, y in zip(rho_a, rho_b)]),
    }
    for name in (n for n in a.observables if n in b.observables and n not in ("t", "wall")):
        columns[f"a_{name}"], columns[f"b_{name}"] = a.observables[name][ia], b.observables[name][ib]
    return Comparison(a, b, pandas.DataFrame(columns), mesh)


def _pde_result(source: str | Path | PDERunResult) -> PDERunResult:
    result = source if isinstance(source, PDERunResult) else load_run(source)
    if not isinstance(result, PDERunResult):
        raise ConfigError(f"{result.path}: a particle run; compare takes PDE runs")
    return whole_measure(result)


def _span(times: np.ndarray) -> str:
    return f"{len(times)} times in [{times[0]:g}, {times[-1]:g}]" if len(times) else "no outputs"
