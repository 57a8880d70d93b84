"""Run directories: what a run writes, and :func:`load_run` to read it back.

Layout of a run directory::

    config.toml        the resolved config (every key), enough to rerun
    metadata.json      versions, MPI ranks, host, git revision, timings, status, solver facts
    observables.csv    one row per output time (see meanfield.observables)
    mesh.npz           sphere, cell centroids (on the sphere) and cell measures, global order
    snapshots/NNNN.npz t and the density cell averages at output NNNN, global order
    density.xdmf/.h5   the density for ParaView (DG0 cell data), when output.xdmf is on
    density.bp/        the same for DG1 densities (VTX, ADIOS2 BP4; XDMF cannot hold DG1)
    run.log            the log of rank 0

A particle run (:mod:`meanfield.particles`, read by :func:`load_particle_run`) has the same
layout without mesh.npz and density files: metadata.json has ``kind = "particles"``,
observables.csv the same columns (rho_min, rho_max are nan), snapshots/NNNN.npz hold ``t``
and ``points`` (n, d) in global token order, and diagnostics.csv the cluster counts.

"Global order" is the cell order of the serial input mesh, whatever the rank count.  Only
rank 0 writes plain files; the XDMF file is written collectively.
"""

from __future__ import annotations

import csv
import json
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

import numpy as np

RUN_FILES = ("config.toml", "metadata.json", "observables.csv", "mesh.npz", "run.log",
             "density.xdmf", "density.h5", "diagnostics.csv", "inner_products.png")


def gather_global(comm, values: np.ndarray, index: np.ndarray, size: int) -> np.ndarray | None:
    """Assemble owned values into global order on rank 0 (``None`` on other ranks).

    Parameters
    ----------
    values
        (n_owned, ...) values of this rank's owned entities.
    index
        (n_owned,) their global indices.
    size
        Global number of entities.
    """
    parts = comm.gather((index, values), root=0)
    if comm.rank != 0:
        return None
    out = np.empty((size,) + values.shape[1:], dtype=values.dtype)
    for idx, vals in parts:
        out[idx] = vals
    return out


def versions() -> dict[str, str]:
    """Versions of the packages a run depends on (those importable)."""
    out = {"python": sys.version.split()[0]}
    for dist in ("meanfield", "numpy", "scipy", "mpi4py", "petsc4py", "fenics-dolfinx",
                 "dolfinx-solver-real", "meshio", "ducc0", "pot"):
        try:
            out[dist] = importlib_metadata.version(dist)
        except importlib_metadata.PackageNotFoundError:
            pass
    try:
        from ._fem import dolfinx

        out["dolfinx"] = dolfinx().__version__
        from petsc4py import PETSc

        out["petsc"] = ".".join(map(str, PETSc.Sys.getVersion()))
    except ImportError:
        pass
    try:
        from mpi4py import MPI

        out["mpi"] = MPI.Get_library_version().splitlines()[0].strip()
    except ImportError:
        pass
    return out


def git_revision() -> str | None:
    """The git revision of the working directory's repository, if any."""
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    if rev.returncode != 0:
        return None
    return rev.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


class RunDirectory:
    """Writer of a run directory (every rank holds one; rank 0 writes plain files).

    Parameters
    ----------
    comm
        The run's communicator.
    path
        The directory; files of an earlier run there are replaced.
    """

    def __init__(self, comm, path: Path) -> None:
        self.comm = comm
        self.path = Path(path)
        self.metadata: dict[str, Any] = {}
        self._columns: list[str] | None = None

    @property
    def root(self) -> bool:
        return self.comm.rank == 0

    def create(self, config_toml: str) -> None:
        """Make the directory, clear an earlier run's files, write the config (collective)."""
        if self.root:
            self.path.mkdir(parents=True, exist_ok=True)
            for name in RUN_FILES:
                (self.path / name).unlink(missing_ok=True)
            shutil.rmtree(self.path / "snapshots", ignore_errors=True)
            shutil.rmtree(self.path / "density.bp", ignore_errors=True)
            (self.path / "snapshots").mkdir()
            (self.path / "config.toml").write_text(config_toml)
        self.comm.barrier()

    def update_metadata(self, **entries: Any) -> None:
        """Merge entries into metadata.json and rewrite it (rank 0)."""
        self.metadata.update(entries)
        if self.root:
            tmp = self.path / "metadata.json.tmp"
            tmp.write_text(json.dumps(self.metadata, indent=2, default=_json_default))
            tmp.replace(self.path / "metadata.json")

    def append_observables(self, row: dict[str, float]) -> None:
        """Append one row to observables.csv (rank 0), writing the header first."""
        if not self.root:
            return
        new = self._columns is None
        if new:
            self._columns = list(row)
        with open(self.path / "observables.csv", "a", newline="") as fh:
            writer = csv.writer(fh)
            if new:
                writer.writerow(self._columns)
            writer.writerow([repr(float(row[c])) for c in self._columns])

    def write_arrays(self, relative: str, **arrays: np.ndarray) -> None:
        """Write an .npz file (rank 0)."""
        if self.root:
            np.savez(self.path / relative, **arrays)


class DensityWriter:
    """ParaView output of a density Function: XDMF for DG0, VTX (BP4) for higher degrees.

    Parameters
    ----------
    comm
        The run's communicator (writing is collective).
    directory
        The run directory (``density.xdmf`` or ``density.bp`` is written there).
    function
        The dolfinx Function written by :meth:`write`; the caller updates its values.
    """

    def __init__(self, comm, directory: Path, function) -> None:
        from ._fem import dolfinx

        io = dolfinx().io
        self.function = function
        if function.function_space.ufl_element().embedded_superdegree == 0:
            self._xdmf = io.XDMFFile(comm, str(Path(directory) / "density.xdmf"), "w")
            self._xdmf.write_mesh(function.function_space.mesh)
            self._vtx = None
        else:
            self._xdmf = None
            self._vtx = io.VTXWriter(comm, Path(directory) / "density.bp", [function], engine="BP4")

    def write(self, t: float) -> None:
        """Write the Function's current values at time ``t`` (collective)."""
        if self._xdmf is not None:
            self._xdmf.write_function(self.function, t)
        else:
            self._vtx.write(t)

    def close(self) -> None:
        (self._xdmf or self._vtx).close()


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (np.integer, np.floating)):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def run_environment(comm) -> dict[str, Any]:
    """Facts about where and how a run ran, for metadata.json (gathered on rank 0, collective)."""
    if comm.rank != 0:
        return comm.bcast(None, root=0)
    return comm.bcast({
        "ranks": comm.size,
        "host": platform.node(),
        "platform": platform.platform(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": sys.argv,
        "git_revision": git_revision(),
        "versions": versions(),
    }, root=0)


@dataclass
class RunResult:
    """A run read back from its directory; all arrays in global (rank-independent) order.

    Attributes
    ----------
    path
        The run directory.
    config
        The resolved config (nested dict).
    metadata
        metadata.json.
    times
        (T,) output times that were written.
    centroids, areas
        (cells, d) cell centroids on the sphere and (cells,) cell measures.
    densities
        (T, cells) density cell averages.
    observables
        Column name -> (rows,) array, from observables.csv.
    """

    path: Path
    config: dict
    metadata: dict
    times: np.ndarray
    centroids: np.ndarray
    areas: np.ndarray
    densities: np.ndarray
    observables: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def status(self) -> str:
        return self.metadata.get("status", "unknown")

    def density(self, t: float) -> np.ndarray:
        """Cell averages at the output time nearest ``t``."""
        return self.densities[int(np.argmin(np.abs(self.times - t)))]


def read_observables(path: Path) -> dict[str, np.ndarray]:
    """observables.csv as a dict of float arrays (empty if absent)."""
    if not path.is_file():
        return {}
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    if not rows:
        return {}
    data = np.array(rows[1:], dtype=float).reshape(-1, len(rows[0]))
    return {name: data[:, i] for i, name in enumerate(rows[0])}


def load_run(path: str | Path) -> RunResult:
    """Read a PDE run directory written by :func:`meanfield.run` (any rank count)."""
    import tomllib

    path = Path(path)
    if not (path / "metadata.json").is_file():
        raise FileNotFoundError(f"{path} is not a meanfield run directory (no metadata.json)")
    config = tomllib.loads((path / "config.toml").read_text())
    meta = json.loads((path / "metadata.json").read_text())
    mesh = np.load(path / "mesh.npz")
    snaps = sorted((path / "snapshots").glob("*.npz"))
    loaded = [np.load(s) for s in snaps]
    times = np.array([float(s["t"]) for s in loaded])
    ncells = len(mesh["areas"])
    densities = np.array([s["density"] for s in loaded]).reshape(len(loaded), ncells)
    return RunResult(path, config, meta, times, mesh["centroids"], mesh["areas"], densities,
                     read_observables(path / "observables.csv"))


@dataclass
class ParticleRunResult:
    """A particle run read back from its directory (token order is global, rank-independent).

    Attributes
    ----------
    path, config, metadata, observables
        As in :class:`RunResult`.
    times
        (T,) output times that were written.
    points
        (T, n, d) token positions at those times.
    """

    path: Path
    config: dict
    metadata: dict
    times: np.ndarray
    points: np.ndarray
    observables: dict[str, np.ndarray] = field(default_factory=dict)

    def at(self, t: float) -> np.ndarray:
        """Token positions (n, d) at the output time nearest ``t``."""
        return self.points[int(np.argmin(np.abs(self.times - t)))]


def load_particle_run(path: str | Path) -> ParticleRunResult:
    """Read a particle run directory written by :func:`meanfield.particles.run_particles`."""
    import tomllib

    path = Path(path)
    if not (path / "metadata.json").is_file():
        raise FileNotFoundError(f"{path} is not a meanfield run directory (no metadata.json)")
    meta = json.loads((path / "metadata.json").read_text())
    if meta.get("kind") != "particles":
        raise FileNotFoundError(f"{path} is not a particle run (metadata kind {meta.get('kind')!r})")
    loaded = [np.load(s) for s in sorted((path / "snapshots").glob("*.npz"))]
    times = np.array([float(s["t"]) for s in loaded])
    points = np.array([s["points"] for s in loaded])
    return ParticleRunResult(path, tomllib.loads((path / "config.toml").read_text()), meta, times, points,
                             read_observables(path / "observables.csv"))
