"""Callbacks of the Python API: functions called at every output time with the state.

``meanfield.run(config, callbacks=[f])`` (also :func:`meanfield.resume` and
:func:`meanfield.run_particles`) calls each ``f(state)`` once per output, on rank 0, after the
output's files are written, with an :class:`OutputState`: for live plots, progress of one's
own, or early stopping.  As with py-pde's trackers (``FinishedSimulation``) and Dedalus'
``solver.proceed``, a callback ends the run early by returning ``False`` or raising
:class:`StopRun`: the output just written is kept, a checkpoint is written, and the run ends
with status ``completed`` and ``stopped_early`` (time, reason) in metadata.json;
``meanfield resume`` continues it to its end time.  Any other exception a callback raises fails
the run like any other error (status ``failed``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np


class StopRun(Exception):
    """Raised by a callback to end the run after the current output (status ``completed``).

    The message, if any, is recorded as the reason in metadata.json (``stopped_early``).
    """


@dataclass(frozen=True)
class OutputState:
    """What a callback receives at each output (rank 0).

    Attributes
    ----------
    index
        The output's index (0 for t = 0).
    t
        The output time.
    observables
        The output's row of observables.csv (``t``, ``mass``, ..., ``wall``).
    arrays
        The output's snapshot arrays in global order: PDE runs ``density`` (cell averages;
        DG1 also ``vertex_density``; hybrid runs the atoms), particle runs ``points``.
    path
        The run directory.
    """

    index: int
    t: float
    observables: Mapping[str, float]
    arrays: Mapping[str, np.ndarray]
    path: Path

    @property
    def density(self) -> np.ndarray | None:
        """The cell averages of the density (PDE runs), ``None`` for a particle run."""
        return self.arrays.get("density")


#: A callback: ``f(state)``; ``False`` (or :class:`StopRun`) ends the run early.
Callback = Callable[[OutputState], "bool | None"]


def call_all(callbacks: Sequence[Callback], state: OutputState) -> str | None:
    """Call every callback with ``state``; the reason to stop early, or ``None`` to go on.

    Every callback is called even when an earlier one asked to stop.
    """
    reason = None
    for callback in callbacks:
        name = getattr(callback, "__name__", type(callback).__name__)
        try:
            answer = callback(state)
        except StopRun as exc:
            answer, reason = False, str(exc) or f"{name} raised StopRun"
        if answer is False and reason is None:
            reason = f"{name} returned False"
    return reason
