"""Output files' writers (rank 0): observables.csv, the snapshots, run.nc and the ParaView files.

Each writer receives the output's index, time, observables row and gathered snapshot
arrays; :meth:`OutputWriter.start` prepares its files for a new run or, on resume, cuts them
back to the outputs the checkpoint covers (only files this program wrote are touched).
Writers know nothing of when they are called (the run loop's output handlers decide).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..masks import mask_of
from . import layout
from .files import append_csv_row, read_csv_columns, save_npz, write_csv_columns
from .header import RunHeader
from .netcdf import DatasetBuilder, RunFile, own_observable_attributes, particle_dataset, pde_dataset, run_attributes
from .paraview import AtomPoints, XdmfFiles


class OutputWriter(ABC):
    """Writes one kind of output file (rank 0 only)."""

    @abstractmethod
    def start(self, keep: int) -> None:
        """Prepare for writing: ``keep`` outputs already written are kept (0: a new run)."""

    @abstractmethod
    def write(self, index: int, t: float, row: dict[str, float], snapshot: dict[str, np.ndarray] | None) -> None:
        """Write output ``index`` at time ``t``."""


class ObservablesWriter(OutputWriter):
    """observables.csv: one row per output, appended and flushed to disk."""

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / layout.OBSERVABLES
        self.columns: list[str] | None = None

    def start(self, keep: int) -> None:
        if keep == 0:
            self.path.unlink(missing_ok=True)
            return
        columns, _ = read_csv_columns(self.path)
        self.columns = list(columns) or None
        write_csv_columns(self.path, {k: v[:keep] for k, v in columns.items()})

    def write(self, index: int, t: float, row: dict[str, float], snapshot: dict[str, np.ndarray] | None) -> None:
        if self.columns is None:
            self.columns = list(row)
        append_csv_row(self.path, self.columns, row)


class SnapshotWriter(OutputWriter):
    """snapshots/NNNN.npz: ``t``, the snapshot arrays and the step controller's state
    (:data:`.layout.STEPPER`, given to :meth:`write`), written atomically."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)

    def start(self, keep: int) -> None:
        (self.run_dir / layout.SNAPSHOTS).mkdir(exist_ok=True)
        for index, path in layout.snapshot_files(self.run_dir):
            if index >= keep:
                path.unlink()
        for path in layout.temporary_files(self.run_dir):  # left by a crash in the middle of a write
            path.unlink()

    def write(self, index: int, t: float, row: dict[str, float], snapshot: dict[str, np.ndarray] | None,
              stepper: Mapping[str, Any] | None = None) -> None:
        """Write output ``index``; ``stepper``: the step controller's state after it (JSON-able, as a
        checkpoint's ``info["step"]``), left out when ``None``."""
        extra = {} if stepper is None else {layout.STEPPER: np.array(json.dumps(dict(stepper)))}
        save_npz(layout.snapshot_path(self.run_dir, index), t=np.array(t), **(snapshot or {}), **extra)


class RunFileOutput(OutputWriter):
    """run.nc (see :mod:`meanfield.rundir.netcdf`) and, if given, the XDMF files over it.

    Parameters
    ----------
    run_dir
        The run directory.
    build
        Builds the run's Dataset (:func:`~meanfield.rundir.netcdf.pde_dataset` or
        :func:`~meanfield.rundir.netcdf.particle_dataset` with the run's static arrays).
    paraview
        density.xdmf (and density-dg1.xdmf) for ParaView, or ``None``.
    atoms
        The atoms' point files for ParaView (hybrid runs), or ``None``.
    """

    def __init__(self, run_dir: Path, build: DatasetBuilder, paraview: XdmfFiles | None = None,
                 atoms: AtomPoints | None = None) -> None:
        self.file = RunFile(run_dir, build)
        self.paraview, self.atoms = paraview, atoms
        self.times: list[float] = []

    def start(self, keep: int) -> None:
        self.file.start(keep)
        self.times = self.file.times()
        if self.paraview is not None and keep:
            self.paraview.update(self.times)
        if self.atoms is not None:
            self.atoms.start(keep, self.times)

    def write(self, index: int, t: float, row: dict[str, float], snapshot: dict[str, np.ndarray] | None) -> None:
        assert snapshot is not None
        self.file.write(t, row, snapshot)
        self.times.append(float(t))
        if self.paraview is not None:
            self.paraview.update(self.times)
        if self.atoms is not None and self.atoms.write(index, snapshot):
            self.atoms.update(self.times)


def pde_run_file(run_dir: Path, static: Mapping[str, np.ndarray], config: Mapping[str, Any],
                 paraview: bool) -> RunFileOutput:
    """run.nc of a PDE run from its static arrays (mesh.npz) and config, with the ParaView files if
    ``paraview`` (XDMF; hybrid runs also the atoms' point files)."""
    header = RunHeader.of("pde", config)
    attrs, own_observables = run_attributes(header), own_observable_attributes(header)

    def build(times: np.ndarray, outputs: Mapping[str, np.ndarray], observables: Mapping[str, np.ndarray]):
        return pde_dataset(static, times, outputs, observables, attrs, own_observables)

    if not paraview:
        return RunFileOutput(run_dir, build)
    return RunFileOutput(run_dir, build, XdmfFiles(run_dir, static["vertices"], static["cells"],
                                                   "vertex_jacobian" in static, mask_of(config)),
                         AtomPoints(run_dir))


def particle_run_file(run_dir: Path, config: Mapping[str, Any], positions: np.ndarray | None = None) -> RunFileOutput:
    """run.nc of a particle run (with the token ``positions`` of a causal run)."""
    header = RunHeader.of("particles", config)
    attrs, own_observables = run_attributes(header), own_observable_attributes(header)

    def build(times: np.ndarray, outputs: Mapping[str, np.ndarray], observables: Mapping[str, np.ndarray]):
        return particle_dataset(times, outputs, observables, attrs, positions, own_observables)

    return RunFileOutput(run_dir, build)
