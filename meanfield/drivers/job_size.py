"""What a job of a command would cost, run by run (``meanfield check COMMAND CONFIG ...``).

A job is a list of :class:`Part`: runs of one kind (the PDE run of a config, a particle run of
n tokens, a batch of prompts), each sized on its own -- a PDE run by
:func:`~meanfield.drivers.planning.check_config` (a pilot run counts its steps, a probe
times them), a particle run by :func:`particle_part` (its steps counted from its step size,
its costs timed by a probe run of a few steps, :mod:`meanfield.drivers.walltime`) -- and
repeated as the command repeats it.  The job's wall time is the sum of its parts', on the
same ranks.  The studies' jobs (validate, response, sweep, phase, fit) are put together in
:mod:`meanfield.studies.sizing`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..memory import format_bytes
from ..problem import Problem
from ..wording import counted, format_seconds
from . import walltime
from .batch_size import output_bytes
from .launch import run_estimate
from .planning import CheckReport


@dataclass(frozen=True)
class Part:
    """Runs of one kind within a job.

    Attributes
    ----------
    what
        What they are, as text (``particles n = 1000, 3 seeds as one batch``).
    runs
        How many of them the job makes.
    seconds
        One run's wall seconds on the job's ranks: the fewest and the most estimated (equal
        where the estimate is one number).
    memory
        Bytes per rank of one run.
    disk
        Bytes one run writes.
    """

    what: str
    runs: int
    seconds: tuple[float, float]
    memory: float
    disk: int

    def line(self) -> str:
        """The part as one line of the report."""
        return (f"  {self.runs} x {self.what}: {_seconds_range(*self.seconds)} each, "
                f"~{format_bytes(self.memory)} per rank, ~{format_bytes(self.disk)} on disk")


@dataclass
class JobSize:
    """The size of a command's job: its parts and their sum.

    Attributes
    ----------
    command
        The command (``validate``).
    ranks
        The ranks the wall time and memory are for.
    parts
        What it runs.
    notes
        What the estimate leaves out or assumes, one line each.
    """

    command: str
    ranks: int
    parts: list[Part]
    notes: list[str] = field(default_factory=list)

    @property
    def seconds(self) -> tuple[float, float]:
        """The job's wall seconds: the fewest and the most."""
        return (sum(p.runs * p.seconds[0] for p in self.parts), sum(p.runs * p.seconds[1] for p in self.parts))

    def format(self) -> str:
        """The report as text for the terminal."""
        total = _seconds_range(*self.seconds)
        memory = max((p.memory for p in self.parts), default=0.0)
        disk = sum(p.runs * p.disk for p in self.parts)
        lines = [f"# meanfield {self.command}: the job's size (nothing was written; short runs in temporary "
                 "directories measured the costs)",
                 f"ranks:       {self.ranks} (the estimates are for {counted(self.ranks, 'rank')}; --ranks N for "
                 "another count)",
                 f"wall time:   {total} in all, one run after another",
                 f"memory:      ~{format_bytes(memory)} per rank at most (the largest run)",
                 f"disk:        ~{format_bytes(disk)}",
                 "runs:", *(p.line() for p in self.parts)]
        lines += [f"note:        {note}" for note in self.notes]
        return "\n".join(lines)


def _seconds_range(low: float, high: float) -> str:
    """``~low``, or ``~low to high`` where they differ by more than 5 %."""
    return f"~{format_seconds(low)}" if high <= 1.05 * low else f"~{format_seconds(low)} to {format_seconds(high)}"


def pde_part(report: CheckReport, what: str, runs: int = 1, factor: float = 1.0) -> Part:
    """The PDE run of a :func:`~meanfield.drivers.planning.check_config` report as a part; with
    ``factor``, its time stepping that many times over (a forward run and its adjoint)."""
    times = report.wall_times()
    if not times:
        raise ValueError(f"the {what} could not be sized here: {report.costs if isinstance(report.costs, str) else ''}"
                         "(too large to set up on this machine)")
    seconds = [w.total + (factor - 1) * w.stepping for w in times]
    disk = sum(size for size in report.files.values() if size is not None)
    return Part(what, runs, (seconds[0], seconds[-1]), report.memory.per_rank, disk)


def particle_steps(problem: Problem) -> int:
    """The steps of a particle run (every prompt's: equal steps of each layer's step size
    between the output times and layer boundaries), counted without running it."""
    from mpi4py import MPI

    from ..particles.batch import step_count
    from .particles import ParticleSimulation

    p = problem.particles
    if p.batched:
        from ..particles.prompts import prompt_batch

        batch = prompt_batch(problem, p.prompts)
        return step_count(batch.starts, batch.dts, list(problem.time.output_times))
    sim = ParticleSimulation(problem, MPI.COMM_SELF)
    return step_count(sim.schedule.starts, sim.dts, list(problem.time.output_times))


#: Seconds a token pair costs in one RK4 step at least (four field evaluations), for choosing the probe's steps.
PAIR_STEP_COST = 4e-9


def particle_part(problem: Problem, what: str, ranks: int, cores: int, near: Path, runner: Callable[..., Any],
                  runs: int = 1, startup: bool = True) -> Part:
    """A particle run (a single prompt or a batch) of ``problem`` (``particles.n`` set) on
    ``ranks`` ranks as a part: its steps counted (:func:`particle_steps`), its start-up, step,
    outputs and checkpoints timed by a probe run of a few steps here by ``runner`` (the
    command's run function: :meth:`meanfield.drivers.walltime.Costs.measure`), its memory as
    the run's guard estimates it (:func:`~meanfield.drivers.launch.run_estimate`), and on disk
    the tokens of each output twice (the snapshot and run.nc) with each prompt's moments and
    scalars.  Without ``startup``, one run's seconds leave its start-up out (a study that runs
    many in one process pays it once)."""
    p, outputs = problem.particles, len(problem.time.output_times)
    n, d = int(p.n), p.d  # type: ignore[arg-type]  # set by the caller
    steps = particle_steps(problem)
    dt = problem.time.t_final / max(steps, 1)
    guess = PAIR_STEP_COST * p.prompts * n * n * d
    costs = walltime.Costs.measure(problem.config, dt * 100, guess, near, particles=runner)
    wall = walltime.estimate(costs, steps, outputs, ranks, problem.output.checkpoint_every, cores)
    memory = run_estimate(problem, ranks, n * p.prompts)
    assert memory is not None
    seconds = wall.total if startup else wall.total - wall.startup
    return Part(f"{what} ({steps} steps, a step {format_seconds(costs.step)} on one process)", runs,
                (seconds, seconds), memory.per_rank, outputs * output_bytes(p.prompts, n, d))
