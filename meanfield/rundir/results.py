"""Reading run directories back: :func:`load_run` for PDE and particle runs, on any rank count.

A run that was interrupted, failed or killed is read up to its last complete output: the
outputs are those with both an observables row and a readable snapshot, in order; a snapshot
that cannot be read ends the list, and its file is named in ``damaged`` (and logged).
"""

from __future__ import annotations

import json
import logging
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..masks import NO_MASK, Mask, mask_of
from ..point_masses import ATOM_KEYS, Atoms
from . import layout
from .directory import effective_status, is_run, not_a_run_message
from .files import load_npz, read_csv_columns
from .header import RunHeader
from .layout import BY_POSITION, BY_PROMPT

if TYPE_CHECKING:
    import pandas
    import xarray

log = logging.getLogger("meanfield")


def observables_frame(observables: dict[str, np.ndarray]) -> pandas.DataFrame:
    """Observables (column name -> (T,) values) as a pandas DataFrame, one row per output (index ``output``)."""
    import pandas as pd

    frame = pd.DataFrame({k: np.asarray(v, float) for k, v in observables.items()})
    frame.index.name = "output"
    return frame


class RunResult:
    """A run read back from its directory: what a PDE run's (:class:`PDERunResult`) and a
    particle run's (:class:`ParticleRunResult`) results share.

    Attributes
    ----------
    path
        The run directory.
    header
        What the run says about itself, read once from its config.toml and metadata.json
        (:class:`~meanfield.rundir.header.RunHeader`).
    times
        (T,) output times that were written.
    observables
        Column name -> (T,) array, from observables.csv.
    damaged
        Files that could not be read (the outputs stop before the first of them).
    """

    path: Path
    header: RunHeader
    times: np.ndarray
    observables: dict[str, np.ndarray]
    damaged: list[str]

    @property
    def config(self) -> dict[str, Any]:
        """The run's resolved config (nested dict, as config.toml holds it)."""
        return self.header.config

    @property
    def metadata(self) -> dict[str, Any]:
        """The run's metadata.json."""
        return self.header.metadata

    @property
    def status(self) -> str:
        """completed, failed, interrupted, running, or killed (running, but no process holds the run)."""
        return effective_status(self.path, self.metadata)

    def _nearest(self, t: float) -> int:
        """The index of the output time nearest ``t``."""
        return int(np.argmin(np.abs(self.times - t)))

    def to_dataframe(self) -> pandas.DataFrame:
        """The observables as a pandas DataFrame: one row per output written, columns ``t``, ``mass``, ...

        Read from observables.csv up to the last readable snapshot, so it works on interrupted,
        failed and killed runs too.
        """
        return observables_frame(self.observables)


class RunReadError(FileNotFoundError):
    """A directory that is not a readable meanfield run; the message names the file."""


@dataclass
class PDERunResult(RunResult):
    """A PDE run read back from its directory; all arrays in global (rank-independent) order.

    Attributes
    ----------
    path, header, times, observables, damaged
        As in :class:`RunResult`.
    vertices, cells
        (V, d) mesh vertices and (C, nv) cell connectivity (nv = 2 on S^1, 3 on S^2).
    centroids, areas
        (C, d) cell centroids on the sphere and (C,) cell measures (as the scheme uses them).
    densities
        (T, C) density cell averages; a causal run's (``model.mask = "causal"``): (T, M, C), the
        density of each of the M position slices (each a probability density).
    observables
        As in :class:`RunResult` (a causal run's: of the whole token distribution, the mean of
        the slices' densities).
    vertex_densities
        DG1 runs: (T, C, nv) the density at each cell's vertices (in ``cells`` order), causal
        runs (T, M, C, nv); else None.
        These can be negative where the cell averages are positive (the positivity limiter
        acts at the edge Gauss points; see :mod:`meanfield.rundir.netcdf`).
    vertex_jacobians
        DG1 runs: (C, nv) the area element of the curved cells at their vertices (the scheme's
        unknown is ``density * jacobian``, linear on the reference cell); else None.
    atoms
        Hybrid runs (``[atoms]``): the point masses of every output, one
        :class:`~meanfield.atoms.Atoms` per output time (their count varies; ids persist);
        None for runs whose snapshots hold no atoms.
    positions
        Causal runs: (M,) the slices' token positions ``s_k = (k + 1/2)/M``; else None.
    observables_by_position
        Causal runs: observable name (``mass``, ``order``, ``energy``, ``mean_0``, ...,
        ``rho_min``, ``rho_max``) -> (T, M) its value for each position slice; else empty.
    mask
        The run's mask (:mod:`meanfield.masks`, from its config), which reads its slices back
        (:func:`meanfield.masks.whole_measure`).
    """

    path: Path
    header: RunHeader
    times: np.ndarray
    vertices: np.ndarray
    cells: np.ndarray
    centroids: np.ndarray
    areas: np.ndarray
    densities: np.ndarray
    observables: dict[str, np.ndarray] = field(default_factory=dict)
    vertex_densities: np.ndarray | None = None
    vertex_jacobians: np.ndarray | None = None
    damaged: list[str] = field(default_factory=list)
    atoms: list[Atoms] | None = None
    positions: np.ndarray | None = None
    observables_by_position: dict[str, np.ndarray] = field(default_factory=dict)
    mask: Mask = NO_MASK

    @property
    def sphere(self) -> str:
        """``mesh.sphere``: the name of the run's sphere (:attr:`RunHeader.sphere` is its descriptor)."""
        assert self.header.sphere is not None, "a PDE run is on a meshed sphere"
        return self.header.sphere.name

    def position_dataframe(self) -> pandas.DataFrame:
        """A causal run's observables of each position slice, one row per output and slice:
        columns ``output``, ``t``, ``position`` and the observables (empty without positions)."""
        import pandas as pd

        return pd.DataFrame({**self.mask.slice_columns(self.times),
                             **{k: np.asarray(v, float).ravel() for k, v in self.observables_by_position.items()}})

    def density(self, t: float) -> np.ndarray:
        """Cell averages at the output time nearest ``t`` ((M, C) for a causal run)."""
        return self.densities[self._nearest(t)]

    def atoms_at(self, t: float) -> Atoms:
        """The atoms at the output time nearest ``t`` (none for a run without atoms)."""
        if self.atoms is None:
            return Atoms.none(self.vertices.shape[1])
        return self.atoms[self._nearest(t)]

    def to_dataframe(self) -> pandas.DataFrame:
        """The observables as a pandas DataFrame (one row per output; see :class:`RunResult`).

        A hybrid run's table has the columns ``atom_count`` and ``atom_mass`` (taken from the
        atoms themselves when observables.csv lacks them); :meth:`atoms_dataframe` lists the atoms.
        """
        frame = super().to_dataframe()
        if self.atoms is not None:
            if "atom_count" not in frame:
                frame["atom_count"] = [a.count for a in self.atoms]
            if "atom_mass" not in frame:
                frame["atom_mass"] = [a.mass for a in self.atoms]
        return frame

    def atoms_dataframe(self) -> pandas.DataFrame:
        """Every atom of every output, one row each: ``output, t, id, mass, x, y[, z]`` (empty without atoms)."""
        import pandas as pd

        axes = "xyz"[: self.vertices.shape[1]]
        atoms = self.atoms or []
        counts = [a.count for a in atoms]
        positions = np.concatenate([a.positions for a in atoms]) if atoms else np.zeros((0, len(axes)))
        columns = {"output": np.repeat(np.arange(len(atoms)), counts),
                   "t": np.repeat(self.times[: len(atoms)], counts),
                   "id": np.concatenate([a.ids for a in atoms]) if atoms else np.zeros(0, np.int64),
                   "mass": np.concatenate([a.masses for a in atoms]) if atoms else np.zeros(0),
                   **{a: positions[:, i] for i, a in enumerate(axes)}}
        return pd.DataFrame(columns)

    def to_xarray(self) -> xarray.Dataset:
        """The run as an xarray Dataset laid out like its run.nc (see :mod:`meanfield.rundir.netcdf`).

        Built from the snapshots (the crash-safe record), so it works on interrupted runs too.
        The atoms of a hybrid run are the ragged ``atom`` variables (:mod:`meanfield.rundir.netcdf`).
        """
        from .netcdf import own_observable_attributes, pde_dataset, ragged_atoms, run_attributes

        mesh = {"vertices": self.vertices, "cells": self.cells, "centroids": self.centroids, "areas": self.areas}
        if self.positions is not None:
            mesh["positions"] = self.positions
        outputs = {"density": self.densities,
                   **{f"{name}{BY_POSITION}": v for name, v in self.observables_by_position.items()}}
        if self.vertex_densities is not None:
            outputs["vertex_density"] = self.vertex_densities
        if self.atoms is not None:
            outputs.update(ragged_atoms([a.arrays() for a in self.atoms]))
        return pde_dataset(mesh, self.times, outputs, self.observables, run_attributes(self.header),
                           own_observable_attributes(self.header))


@dataclass
class ParticleRunResult(RunResult):
    """A particle run read back from its directory (token order is global, rank-independent).

    Attributes
    ----------
    path, header, times, observables, damaged
        As in :class:`RunResult`.
    points
        (T, n, d) token positions at those times; a batch of B prompts: (T, B, n, d).
    positions
        (n,) the tokens' positions ``s_i = (i + 1/2) / n`` of a causal run (``model.mask =
        "causal"``), in token order; ``None`` for a run without a mask.
    by_prompt
        A batch of prompts: each prompt's scalars, ``<name>_by_prompt`` -> (T, B) (empty otherwise).
    """

    path: Path
    header: RunHeader
    times: np.ndarray
    points: np.ndarray
    observables: dict[str, np.ndarray] = field(default_factory=dict)
    damaged: list[str] = field(default_factory=list)
    positions: np.ndarray | None = None
    by_prompt: dict[str, np.ndarray] = field(default_factory=dict)

    def at(self, t: float) -> np.ndarray:
        """Token positions (n, d) (a batch: (B, n, d)) at the output time nearest ``t``."""
        return self.points[self._nearest(t)]

    def to_xarray(self) -> xarray.Dataset:
        """The run as an xarray Dataset laid out like its run.nc: ``points`` (time, token, coordinate)
        and the observables, from the snapshots."""
        from .netcdf import own_observable_attributes, particle_dataset, run_attributes

        return particle_dataset(self.times, {"points": self.points, **self.by_prompt}, self.observables,
                                run_attributes(self.header), self.positions, own_observable_attributes(self.header))


def read_header(run_dir: Path) -> RunHeader:
    """A run directory's header, from its config.toml and metadata.json, read once; raises
    :class:`RunReadError` naming the problem."""
    if not is_run(run_dir):
        raise RunReadError(not_a_run_message(run_dir))
    try:
        meta = json.loads((run_dir / layout.METADATA).read_text())
        config = tomllib.loads((run_dir / layout.CONFIG).read_text())
    except (OSError, ValueError) as exc:
        raise RunReadError(f"{run_dir}: cannot read the run's metadata.json or config.toml: {exc}") from None
    return RunHeader.read(config, meta)


def _leading_snapshots(run_dir: Path) -> list[Path]:
    """The snapshot files of outputs 0, 1, 2, ... up to the first one missing."""
    files = []
    for expected, (index, file) in enumerate(layout.snapshot_files(run_dir)):
        if index != expected:
            break
        files.append(file)
    return files


def _outputs(run_dir: Path) -> tuple[list[dict[str, np.ndarray]], dict[str, np.ndarray], list[str]]:
    """Readable snapshots in order, the observables cut to match, and the damaged files."""
    observables, bad_rows = read_csv_columns(run_dir / layout.OBSERVABLES)
    damaged = [str(run_dir / layout.OBSERVABLES)] if bad_rows else []
    snapshots: list[dict[str, np.ndarray]] = []
    for file in _leading_snapshots(run_dir):
        try:
            snapshots.append(load_npz(file))
        except (OSError, ValueError, EOFError) as exc:
            damaged.append(str(file))
            log.warning("%s: damaged snapshot, the run is read up to the output before it (%s)", file, exc)
            break
    count = min(len(snapshots), len(next(iter(observables.values()), np.empty(0)))) if observables else 0
    count = len(snapshots) if not observables else count
    return snapshots[:count], {k: v[:count] for k, v in observables.items()}, damaged


def load_run(path: str | Path) -> PDERunResult | ParticleRunResult:
    """Read a run directory written by :func:`meanfield.run` or :func:`meanfield.run_particles`.

    Returns a :class:`PDERunResult` for PDE runs and a :class:`ParticleRunResult` for particle runs.

    Raises
    ------
    RunReadError
        For a directory that is not a run, naming the file that is missing or unreadable.
    """
    path = Path(path)
    header = read_header(path)
    snapshots, observables, damaged = _outputs(path)
    times = np.array([float(s["t"]) for s in snapshots])
    try:
        mask = mask_of(header.config)
    except ValueError as exc:
        raise RunReadError(f"{path}: {exc}") from None
    if header.run_type == "particles":
        points = np.array([s["points"] for s in snapshots]) if snapshots else np.empty((0, 0, header.d))
        positions = mask.token_positions(int(header.tokens or 0))
        by_prompt = {k: np.array([s[k] for s in snapshots]) for k in (snapshots[0] if snapshots else ())
                     if k.endswith(BY_PROMPT)}
        return ParticleRunResult(path, header, times, points, observables, damaged, positions, by_prompt)
    try:
        mesh = load_npz(path / layout.MESH)
    except (OSError, ValueError) as exc:
        raise RunReadError(f"{path / layout.MESH}: cannot read the run's mesh ({exc})") from None
    cells = mesh["cells"]
    positions = mesh.get("positions")
    per_output = (len(snapshots), *mask.slice_shape)
    densities = np.array([s["density"] for s in snapshots]).reshape(*per_output, len(cells))
    dg1 = "vertex_jacobian" in mesh
    vertex = np.array([s["vertex_density"] for s in snapshots]).reshape(*per_output, *cells.shape) if dg1 else None
    d = mesh["vertices"].shape[1]
    hybrid = any(ATOM_KEYS[0] in s for s in snapshots)
    atoms = [Atoms.from_arrays(s, d) for s in snapshots] if hybrid else None
    by_position = {k.removesuffix(BY_POSITION): np.array([s[k] for s in snapshots]).reshape(per_output)
                   for k in (snapshots[0] if snapshots else ()) if k.endswith(BY_POSITION)}
    return PDERunResult(path, header, times, mesh["vertices"], cells, mesh["centroids"], mesh["areas"],
                     densities, observables, vertex, mesh["vertex_jacobian"] if dg1 else None, damaged, atoms,
                     positions, by_position, mask)


def load_particle_run(path: str | Path) -> ParticleRunResult:
    """:func:`load_run` for a directory that must hold a particle run."""
    result = load_run(path)
    if not isinstance(result, ParticleRunResult):
        raise RunReadError(f"{path} is not a particle run (metadata kind {result.metadata.get('kind')!r})")
    return result


def load_pde_run(path: str | Path) -> PDERunResult:
    """:func:`load_run` for a directory that must hold a PDE run."""
    result = load_run(path)
    if not isinstance(result, PDERunResult):
        raise RunReadError(f"{path} is not a PDE run (metadata kind {result.metadata.get('kind')!r})")
    return result


def read_observables(run_dir: str | Path) -> tuple[RunHeader, dict[str, np.ndarray]]:
    """A run's header and observables, without reading its arrays (for tables of many runs).

    The observables are cut to the outputs that have a snapshot file (:func:`load_run` also
    stops before a snapshot that cannot be read).

    Raises
    ------
    RunReadError
        For a directory that is not a run.
    """
    run_dir = Path(run_dir)
    header = read_header(run_dir)
    observables, _ = read_csv_columns(run_dir / layout.OBSERVABLES)
    count = len(_leading_snapshots(run_dir))
    return header, {k: v[:count] for k, v in observables.items()}


def describe(run_dir: str | Path) -> dict[str, Any]:
    """Status facts of a run directory without reading its arrays (for `meanfield info RUN`).

    A hybrid run (its observables.csv has ``atom_count``) also reports ``atoms``: the number
    and total mass of the atoms at its last output.  ``mask`` and ``slices`` are the
    run's mask's facts (:meth:`meanfield.masks.Mask.facts`: its name, a causal run's position
    slices).
    """
    run_dir = Path(run_dir)
    header = read_header(run_dir)
    meta = header.metadata
    facts = {"path": str(run_dir), "kind": meta.get("kind"), "name": meta.get("name"),
             "status": effective_status(run_dir, meta), "t_reached": meta.get("t_reached"),
             "t_final": header.t_final, "error": meta.get("error"), "interrupted_by": meta.get("interrupted_by"),
             **mask_of(header.config).facts()}
    observables, _ = read_csv_columns(run_dir / layout.OBSERVABLES)
    if len(observables.get("atom_count", ())):
        facts["atoms"] = {"count": int(observables["atom_count"][-1]), "mass": float(observables["atom_mass"][-1])}
    segments = [{k: s.get(k) for k in ("command", "started", "ranks", "t_start", "t_end", "wall_s")}
                for s in meta.get("segments", []) if isinstance(s, dict)]
    walls = [s["wall_s"] for s in segments if isinstance(s["wall_s"], (int, float))]
    facts.update(progress=meta.get("progress"), segments=segments, wall_s=sum(walls) if walls else None,
                 files={str(p.relative_to(run_dir)): p.stat().st_size for p in layout.own_entries(run_dir)})
    return facts
