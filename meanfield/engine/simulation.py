"""What the run controller needs from a simulation (PDE or particles), and nothing more.

A :class:`Simulation` owns its state and its time stepping; the controller owns the loop,
the output schedule, files, checkpoints, signals and wall limits.  All methods marked
collective must be called by every rank of the simulation's communicator.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np


class Simulation(ABC):
    """A time-dependent problem the controller can advance, observe, save and restore.

    Attributes
    ----------
    run_type
        ``"pde"`` or ``"particles"`` (recorded as ``kind`` in metadata.json and checkpoints).
    comm
        The MPI communicator.
    t
        Current model time.
    """

    run_type: str = ""
    comm: Any
    t: float

    @abstractmethod
    def step(self, t_end: float) -> float:
        """Advance one step, landing exactly on ``t_end`` if the step reaches it; return dt (collective)."""

    def next_landing(self, t: float) -> float | None:
        """The first time after ``t`` that steps must land on besides the output times (where
        the dynamics change: a layer boundary), or ``None``; the controller never steps across it."""
        return None

    @abstractmethod
    def observables(self) -> dict[str, float]:
        """One observables.csv row of the current state, without ``t``, ``wall`` and the observables
        of one's own (collective)."""

    def distribution(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """This rank's part of the state as a weighted point set, for the observables of one's own
        (:mod:`meanfield.own_observables`): density values (n,), points (n, d) and weights (n,)."""
        name = self.run_type or type(self).__name__
        raise NotImplementedError(f"a {name} simulation has no observables of one's own")

    @abstractmethod
    def snapshot(self) -> dict[str, np.ndarray] | None:
        """Arrays of one snapshot in global order, on rank 0 (``None`` elsewhere) (collective)."""

    @abstractmethod
    def checkpoint_state(self) -> dict[str, np.ndarray] | None:
        """The whole state in global order, on rank 0 (``None`` elsewhere) (collective)."""

    @abstractmethod
    def restore(self, t: float, state: dict[str, np.ndarray] | None, info: dict[str, Any]) -> None:
        """Set the state from :meth:`checkpoint_state` arrays given on rank 0 (collective)."""

    @abstractmethod
    def step_info(self) -> dict[str, Any]:
        """JSON-able step-controller facts (statistics, and what :meth:`restore` needs back)."""

    def static_arrays(self) -> dict[str, np.ndarray] | None:
        """Arrays written once per run (PDE: the mesh), on rank 0 (collective); none by default."""
        return None

    def describe(self) -> str:
        """One line for the log: what is being run."""
        return self.run_type

    def facts(self) -> dict[str, Any]:
        """Solver facts for metadata.json (collective)."""
        return {}

    def timings(self) -> dict[str, float]:
        """Seconds spent in parts of the step (e.g. the nonlocal field), this process."""
        return {}

    def status(self) -> str:
        """A short note for the periodic log lines (a hybrid run: its atoms); empty by default."""
        return ""

    def event_lines(self) -> list[str]:
        """Log lines of what happened since the last call (a hybrid run: captures, merges), on
        rank 0; none by default."""
        return []
