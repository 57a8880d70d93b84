"""Output writers: what the controller does with each output, on rank 0 (py-pde's trackers).

Each writer receives the output's index, time, observables row and gathered snapshot
arrays; :meth:`OutputWriter.start` prepares its files for a new run or, on resume, cuts them
back to the outputs the checkpoint covers (only files this program wrote are touched).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path

import numpy as np

from . import layout
from .files import append_csv_row, read_csv_columns, save_npz, write_csv_columns
from .paraview import ParaViewWriter


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

    def __init__(self, run: Path) -> None:
        self.path = Path(run) / layout.OBSERVABLES
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
    """snapshots/NNNN.npz: ``t`` and the snapshot arrays, written atomically."""

    def __init__(self, run: Path) -> None:
        self.run = Path(run)

    def start(self, keep: int) -> None:
        (self.run / layout.SNAPSHOTS).mkdir(exist_ok=True)
        for index, path in layout.snapshot_files(self.run):
            if index >= keep:
                path.unlink()
        for path in layout.temporary_files(self.run):  # left by a crash in the middle of a write
            path.unlink()

    def write(self, index: int, t: float, row: dict[str, float], snapshot: dict[str, np.ndarray] | None) -> None:
        save_npz(layout.snapshot_path(self.run, index), t=np.array(t), **(snapshot or {}))


class ParaViewOutput(OutputWriter):
    """density.h5 and the XDMF files (see :mod:`meanfield.runner.paraview`)."""

    def __init__(self, run: Path, vertices: np.ndarray, cells: np.ndarray) -> None:
        self.writer = ParaViewWriter(run, vertices, cells)

    def start(self, keep: int) -> None:
        self.writer.start(keep)

    def write(self, index: int, t: float, row: dict[str, float], snapshot: dict[str, np.ndarray] | None) -> None:
        assert snapshot is not None
        self.writer.write(t, snapshot)
