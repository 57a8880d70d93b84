"""The wall time of a PDE run, estimated before it starts from costs measured here and now.

A run's wall time is its start-up (the imports and MPI, the mesh, the setup, the run
directory, and the files written at the end), its time steps, its outputs and its
checkpoints.  As the memory estimate is measured (:mod:`meanfield.memory`), so are these, but
on this machine under its present load rather than once in a benchmark: :meth:`Costs.measure`
runs the config itself on one process into a temporary run directory beside the run's own (the
same mesh, scheme, field and files), :data:`PROBE_OUTPUTS` outputs, each with its checkpoint,
some steps apart (steps for about :data:`PROBE_STEPPING` seconds in all, so that a loaded
machine's pauses average out), and reads each part's seconds from the probe's timings and the
moments of its outputs, so the outputs and checkpoints are timed at the run's own sizes, on
the disk the run writes to.
Importing dolfinx is timed where this process first did it (:func:`meanfield._fem.import_seconds`),
and what came before it (the interpreter's start, meanfield's imports) as this process spent it.

On ``ranks`` ranks (:func:`estimate`) the steps are shared by the ranks, up to the cores
present; the start-up, outputs and checkpoints are not.  Ranks beyond the cores present take
turns on them (oversubscription), and a rank waiting for the others in an MPI call keeps
polling through its share of the core: every step, whose stages wait for all ranks several
times, then costs :data:`OVERSUBSCRIBED_STEP` seconds times ``ranks / cores`` times
``ranks - 1`` more.  A run on more ranks than this machine's cores is sized as if on this
machine; on another machine, with as many cores as ranks, it would not be oversubscribed.
"""

from __future__ import annotations

import copy
import math
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..config import Config

#: Outputs of the probe run after its first (each with a checkpoint).
PROBE_OUTPUTS = 8
#: Seconds of steps the probe aims at (the steps between its outputs are chosen from a guess of their cost).
PROBE_STEPPING = 0.5
#: Most steps between two outputs of the probe.
PROBE_STEPS_BETWEEN = 64
#: Seconds after its first output at which the probe stops at its next output (a step guessed too cheap).
PROBE_BUDGET = 5.0
#: A process's seconds before it imports dolfinx are counted in the start-up up to this many
#: times the dolfinx import (:func:`_prelude`).
PRELUDE_IMPORTS = 2
#: Seconds an oversubscribed step loses per rank beyond the first and per rank a core holds.
#: Measured (2-core machine, load average ~9 from other jobs; s1-clustering to t = 10, 1089
#: steps): 5.7 ms a step on 1 rank, 9.5 ms on 2, 38.1 ms on 4 ranks, where sharing the work
#: alone would give 2.9 ms: (38.1 - 2.9) / (2 * 3) = 5.9 ms.
OVERSUBSCRIBED_STEP = 6e-3


def cores(comm=None) -> int:
    """The cores this process may run on (its CPU affinity, else the machine's count); with an
    MPI communicator of several ranks (collective), the cores its ranks may run on together: a
    launcher that binds each rank to its own core (Open MPI does for two ranks) leaves each rank
    one core, and the run all of them."""
    try:
        mine = set(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
    if comm is None or comm.size == 1:
        return len(mine)
    return len(set().union(*comm.allgather(mine)))


@dataclass(frozen=True)
class Costs:
    """Measured seconds of a run's parts on one process.

    Attributes
    ----------
    startup
        Start-up and finish: the imports, building the mesh and the simulation, opening and
        closing the run directory, creating the output files at the first output.
    step
        One time step.
    output
        One output after the first (observables, snapshot, a row of run.nc and
        observables.csv) and the checkpoint after it.
    checkpoint
        One checkpoint (with metadata.json), for those written every ``output.checkpoint_every``.
    """

    startup: float
    step: float
    output: float
    checkpoint: float

    @classmethod
    def measure(cls, config: Config, dt: float, step_guess: float, near: Path,
                particles: Callable[..., Any] | None = None) -> Costs:
        """Run ``config`` with steps of ``dt / 100`` (``dt``: its step; adaptive steps of at most
        that where the run's steps are adaptive) on this process alone,
        :data:`PROBE_OUTPUTS` outputs with steps of about ``step_guess`` seconds between them for
        :data:`PROBE_STEPPING` seconds in all (stopping at the first output :data:`PROBE_BUDGET`
        seconds in), in a temporary directory beside ``near`` (the run directory; the system's
        temporary folder where that cannot be written), and time its parts.  Writes nothing
        that stays.  With ``particles`` (a particle run's function, such as
        :func:`meanfield.run_particles`), the run is a particle run (its step ``particles.dt``;
        ``particles.n`` set), else a PDE run."""
        from mpi4py import MPI

        from .._fem import import_seconds
        from .pde import run

        runner = particles or run

        between = min(max(math.ceil(PROBE_STEPPING / PROBE_OUTPUTS / max(step_guess, 1e-6)), 1), PROBE_STEPS_BETWEEN)
        # a hundredth of the step: the density barely moves (no step nears the CFL bound), the cost is the same;
        # and the probe ends by the run's end (its layers)
        dt = min(dt / 100, config.data["time"]["t_final"] / (PROBE_OUTPUTS * between))
        data = copy.deepcopy(config.data)
        data["time"].update(t_final=PROBE_OUTPUTS * between * dt, outputs=PROBE_OUTPUTS, outputs_every=None,
                            wall_limit=None)
        if data["time"]["dt"] is None and particles is None:
            # adaptive steps no longer than that: a step pays the controller's rates and error estimate, as the run's do
            data["time"]["dt_max"] = dt
        else:
            data["time"]["dt"] = dt
        data["output"]["dir"] = None
        if particles is not None:
            data["particles"]["dt"] = dt
        moments: list[float] = []  # after each output: the next comes a checkpoint, `between` steps and an output later

        def timed(_) -> bool:
            moments.append(time.perf_counter())
            return len(moments) < 3 or moments[-1] - moments[0] < PROBE_BUDGET

        with tempfile.TemporaryDirectory(prefix=".meanfield-check-", dir=_writable_parent(near)) as folder:
            tic = time.perf_counter()
            probe = runner(data, out=Path(folder) / "probe", comm=MPI.COMM_SELF, quiet=True, callbacks=[timed])
            wall = time.perf_counter() - tic
        timings, steps = probe.metadata["timings"], probe.metadata["steps"]["steps"]
        step = timings["time_stepping"] / max(steps, 1)
        cycle = float(np.median(np.diff(moments))) if len(moments) > 1 else step
        output = max(cycle - between * step, 0.0)
        steady = steps * step + (len(moments) - 1) * output
        return cls(startup=_prelude() + import_seconds() + max(wall - steady, 0.0), step=step, output=output,
                   checkpoint=timings["checkpoint"] / max(len(moments), 1))


def _prelude() -> float:
    """The seconds a fresh ``meanfield`` process spends before it imports dolfinx, as this one
    did (:func:`meanfield._fem.prelude_seconds`), counted up to :data:`PRELUDE_IMPORTS` times
    the dolfinx import: a long-lived process (a notebook, the test suite) says nothing of a
    fresh run's."""
    from .._fem import import_seconds, prelude_seconds

    return min(prelude_seconds(), PRELUDE_IMPORTS * import_seconds())


def _writable_parent(path: Path) -> str | None:
    """The nearest existing folder of ``path`` if this process may write there, else ``None``
    (the system's temporary folder)."""
    folder = Path(path).absolute().parent
    while not folder.exists():
        folder = folder.parent
    return str(folder) if os.access(folder, os.W_OK) else None


@dataclass(frozen=True)
class WallTime:
    """A run's estimated wall seconds by part, on some number of ranks.

    Attributes
    ----------
    startup, stepping, outputs, checkpoints
        Seconds of each part: the outputs with the checkpoint after each, and the checkpoints
        written every ``output.checkpoint_every`` seconds besides.
    checkpoints_count
        Those checkpoints besides the outputs' own.
    step_penalty
        The seconds each step loses to oversubscription (0 when the ranks fit the cores).
    """

    startup: float
    stepping: float
    outputs: float
    checkpoints: float
    checkpoints_count: int
    step_penalty: float

    @property
    def total(self) -> float:
        """All the parts."""
        return self.startup + self.stepping + self.outputs + self.checkpoints

    @property
    def writing(self) -> float:
        """The outputs and checkpoints."""
        return self.outputs + self.checkpoints


def step_penalty(ranks: int, available: int | None = None) -> float:
    """Seconds each step of ``ranks`` ranks on ``available`` cores (default: :func:`cores`) loses
    to oversubscription: 0 when they fit (module docstring)."""
    available = available or cores()
    return OVERSUBSCRIBED_STEP * ranks / available * (ranks - 1) if ranks > available else 0.0


def estimate(costs: Costs, steps: int, outputs: int, ranks: int, checkpoint_every: float,
             available: int | None = None, atom_steps: int = 0, atom_step: float = 0.0, atom_outputs: int = 0,
             atom_output: float = 0.0) -> WallTime:
    """The wall time of a run of ``steps`` steps and ``outputs`` outputs on ``ranks`` ranks of a
    machine with ``available`` cores (default: :func:`cores`), from costs measured on one process
    (module docstring); and ``atom_steps`` more steps of ``atom_step`` seconds each, which the
    ranks do not share: a hybrid run's steps with atoms alone (every rank holds every atom), of
    whose ``outputs`` the last ``atom_outputs`` cost ``atom_output`` each."""
    available = available or cores()
    penalty = step_penalty(ranks, available)
    stepping = steps * (costs.step / min(ranks, available) + penalty) + atom_steps * (atom_step + penalty)
    writing = (outputs - atom_outputs) * costs.output + atom_outputs * atom_output
    periodic = math.floor((costs.startup + stepping + writing) / checkpoint_every)
    return WallTime(costs.startup, stepping, writing, periodic * costs.checkpoint, periodic, penalty)
