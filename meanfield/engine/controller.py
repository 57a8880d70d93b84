"""The run controller: one time loop for PDE and particle runs.

It owns the loop over output times, the output writers, checkpoints, metadata (status,
timings), progress and log, signals and the wall-time limit; the :class:`Simulation` owns
the state and the steps.  Steps end exactly on every output time and on every time the
simulation asks to land on (:meth:`Simulation.next_landing`: layer boundaries, where the
model changes), so no step straddles a change of the dynamics.

Every step and every output is collective; everything that touches files happens on rank 0
inside :func:`~meanfield.collective.on_root`, so a failure there (a full disk, say) ends
every rank with the same error instead of leaving some of them waiting.

Between two steps the ranks agree (one small ``Allreduce``) on whether to stop or to write
a checkpoint:

* a signal (SIGTERM, SIGINT, SIGUSR1) received by any rank: checkpoint, status
  ``interrupted``, :class:`RunInterrupted` (the CLI exits with 128 + the signal number);
* ``time.wall_limit``: stop the same way when the next step and a checkpoint might not fit
  before the limit (the CLI exits with :data:`WALL_LIMIT_EXIT`);
* ``output.checkpoint_every`` seconds since the last checkpoint: write one and go on.

After each output rank 0 calls the Python API's callbacks (:mod:`meanfield.engine.callbacks`);
one that asks to stop ends the loop after that output's checkpoint, with status ``completed``
and ``stopped_early`` in metadata.json.

A checkpoint is also written after every output.  Once a tenth of the model time has passed
(and :data:`WRITING_CHECKED_AFTER` outputs), rank 0 warns, once, when the outputs and their
checkpoints have so far taken more than :data:`WRITING_DOMINATES` times as long as the steps:
fewer outputs would shorten the run.  (The margin allows for the steps of a clustering run
shrinking later.)  A step whose size has collapsed (more
than :data:`~meanfield.config.MAX_STEPS` steps would be needed to finish) fails the run.
An error raised on one rank alone inside a step (not one of the errors every rank raises
together) cannot be reported collectively: that rank records the failure in
metadata.json, prints it, and aborts the job.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from ..collective import CollectiveFailure, on_root, raised_everywhere
from ..config import MAX_STEPS
from ..rundir.checkpoint import Checkpoint
from ..rundir.directory import RunDirectory, record_failure
from ..rundir.names import run_name
from ..rundir.writers import OutputWriter
from ..times import same_time, time_tol
from .callbacks import Callback, OutputState, call_all
from .progress import FILE_ONLY, Cadence, Progress, log
from .signals import SignalWatch, signal_name
from .simulation import Simulation

T = TypeVar("T")

#: Exit code of a run stopped by ``time.wall_limit`` (resumable, like a signal's 128 + n).
WALL_LIMIT_EXIT = 3
#: Outputs written before the run judges whether writing dominates its cost.
WRITING_CHECKED_AFTER = 4
#: How many times the steps' wall time the outputs and checkpoints must take for the run to warn.
WRITING_DOMINATES = 2.0


class RunInterrupted(Exception):
    """A run stopped by a signal or its wall limit after writing a checkpoint (resumable).

    Attributes
    ----------
    reason
        ``"SIGTERM"``, ``"SIGINT"``, ``"SIGUSR1"`` or ``"wall_limit"``.
    signum
        The signal number, 0 for the wall limit.
    t
        The model time reached (and checkpointed).
    """

    def __init__(self, reason: str, signum: int, t: float, path: Path) -> None:
        super().__init__(f"interrupted by {reason} at t = {t:.6g}; resume with `meanfield resume {path}`")
        self.reason, self.signum, self.t, self.path = reason, signum, t, path

    @property
    def exit_code(self) -> int:
        """128 + the signal number, or :data:`WALL_LIMIT_EXIT`."""
        return 128 + self.signum if self.signum else WALL_LIMIT_EXIT


class StepCollapseError(CollectiveFailure, RuntimeError):
    """The time step became so small that the run would not finish (raised on every rank)."""


@dataclass
class ControllerOptions:
    """How a run is driven.

    Attributes
    ----------
    wall_limit
        Seconds of wall time after which the run checkpoints and stops (None: no limit).
    checkpoint_every
        Seconds of wall time between checkpoints besides those after every output.
    quiet
        No progress and no log on the terminal (run.log is still written).
    clock
        Seconds of wall time from some fixed moment (``time.perf_counter``); what the wall
        limit, the checkpoint interval and the timings are measured with.
    cadence
        When progress lines are logged (``[output] log_every``).
    callbacks
        Called on rank 0 after every output (:mod:`meanfield.engine.callbacks`).
    """

    wall_limit: float | None = None
    checkpoint_every: float = 600.0
    quiet: bool = False
    clock: Callable[[], float] = field(default=time.perf_counter)
    cadence: Cadence = field(default_factory=Cadence)
    callbacks: Sequence[Callback] = ()


class Controller:
    """Drives a :class:`Simulation` through its output times (see the module docstring).

    Parameters
    ----------
    sim
        The simulation, built and (for a resume) restored.
    path
        The run directory.
    rundir
        Rank 0's open :class:`RunDirectory` (``None`` on other ranks).
    writers
        Rank 0's output writers (empty elsewhere).
    output_times
        All output times of the run.
    options
        Wall limit, checkpoint interval, quietness.
    """

    def __init__(self, sim: Simulation, path: Path, rundir: RunDirectory | None, writers: list[OutputWriter],
                 output_times: np.ndarray, options: ControllerOptions) -> None:
        self.sim, self.comm, self.path = sim, sim.comm, Path(path)
        self.rundir, self.writers = rundir, writers
        self.times = np.asarray(output_times, float)
        self.options, self.clock = options, options.clock
        self.timings = {"time_stepping": 0.0, "output": 0.0, "checkpoint": 0.0}
        self._wall0 = self.clock()
        self._last_checkpoint = self._wall0
        self._slowest_step = 0.0
        self._checkpoint_cost = 0.0
        self._committed = False
        self._progress: Progress | None = None
        self._stopped: dict[str, Any] | None = None
        self._writing_checked = False

    # -- the loop ----------------------------------------------------------------------------
    def run(self, next_output: int = 0) -> None:
        """Run from the simulation's current time, writing outputs ``next_output`` onwards.

        Raises
        ------
        RunInterrupted
            After a signal or the wall limit (a checkpoint was written).
        Exception
            Whatever failed, after recording status ``failed`` and the error.
        """
        sim, k = self.sim, next_output
        progress = self._progress = Progress(self.comm, sim.t, float(self.times[-1]), self.options.quiet,
                                             self.options.cadence)
        status, error, interrupted, finish = "failed", None, None, True
        try:
            with SignalWatch() as signals:
                while k < len(self.times) and self.times[k] <= sim.t + time_tol(self.times[k]) and not self._stopped:
                    self._output(k)
                    k += 1
                    self._checkpoint(k)
                while k < len(self.times) and not self._stopped:
                    target = float(self.times[k])
                    while target - sim.t > time_tol(target):
                        self._step(self._step_target(target), progress)
                        stop, due = self._events(signals)
                        if due or stop:
                            self._checkpoint(k)
                        if stop:
                            raise RunInterrupted(stop, signals.received if stop != "wall_limit" else 0, sim.t,
                                                 self.path)
                    self._output(k)
                    k += 1
                    self._checkpoint(k)
            status = "completed"
        except RunInterrupted as exc:
            status, interrupted = "interrupted", exc
            log.warning("%s", exc, extra=FILE_ONLY)
            raise
        except KeyboardInterrupt:
            finish = False  # a second Ctrl-C: the other ranks may be inside a collective; just go
            raise
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            log.error("run stopped at t = %.6g: %s", sim.t, error, extra=FILE_ONLY)
            raise
        finally:
            progress.close()
            if finish:
                self._finish(status, error, interrupted)

    def _at_output(self, t: float) -> bool:
        """Whether ``t`` is one of the output times (:func:`~meanfield.times.same_time`)."""
        k = int(np.searchsorted(self.times, t))
        return any(same_time(self.times[i], t) for i in (k - 1, k) if 0 <= i < len(self.times))

    # -- steps -------------------------------------------------------------------------------
    def _step_target(self, output: float) -> float:
        """Where the next step must end at the latest: the next output time, or an earlier landing
        time the simulation asks for (:meth:`Simulation.next_landing`)."""
        landing = self.sim.next_landing(self.sim.t)
        return output if landing is None or landing >= output else landing

    def _collective(self, work: Callable[[], T]) -> T:
        """Call collective simulation code; an error that may be this rank's alone (anything but
        one known to be raised everywhere) aborts the job."""
        try:
            return work()
        except Exception as exc:
            if self.comm.size == 1 or raised_everywhere(exc):
                raise
            message = f"rank {self.comm.rank}: {type(exc).__name__}: {exc}"
            print(f"error: the run failed on {message}; aborting all ranks", file=sys.stderr, flush=True)
            record_failure(self.path, message)
            self.comm.Abort(1)
            raise  # not reached

    def _step(self, target: float, progress: Progress) -> None:
        sim = self.sim
        tic = self.clock()
        dt = self._collective(lambda: sim.step(target))
        elapsed = self.clock() - tic
        self.timings["time_stepping"] += elapsed
        self._slowest_step = max(self._slowest_step, elapsed)
        remaining = float(self.times[-1]) - sim.t
        if target - sim.t > time_tol(target) and remaining > MAX_STEPS * dt:
            raise StepCollapseError(f"the time step collapsed to dt = {dt:.3g} at t = {sim.t:.6g}: "
                                    f"{remaining / dt:.3g} more steps would be needed (at most {MAX_STEPS:.0e}); "
                                    "the velocity is too large or the solution is blowing up")
        for line in sim.event_lines():
            log.info("t = %.6g  %s", sim.t, line)
        progress.update(sim.t, dt, report=not self._at_output(sim.t), note=sim.status(),  # else the output's line
                        limit=sim.step_info().get("limit") or "")

    def _events(self, signals: SignalWatch) -> tuple[str | None, bool]:
        """(stop reason or None, checkpoint due) agreed by all ranks."""
        from mpi4py import MPI

        now = self.clock()
        wall_stop = checkpoint_due = 0
        if self.comm.rank == 0:
            limit = self.options.wall_limit
            needed = 1.5 * self._slowest_step + 2.0 * self._checkpoint_cost
            wall_stop = int(limit is not None and now - self._wall0 + needed > limit)
            checkpoint_due = int(now - self._last_checkpoint >= self.options.checkpoint_every)
        flags = np.array([signals.received, wall_stop, checkpoint_due], dtype=np.int64)
        if self.comm.size > 1:
            local, flags = flags, np.empty_like(flags)
            self.comm.Allreduce(local, flags, op=MPI.MAX)
        if flags[0]:
            signals.received = int(flags[0])
            return signal_name(int(flags[0])), True
        if flags[1]:
            return "wall_limit", True
        return None, bool(flags[2])

    # -- outputs and checkpoints -------------------------------------------------------------
    def _output(self, k: int) -> None:
        sim = self.sim
        tic = self.clock()
        t = float(self.times[k])
        row = {"t": t, **self._collective(sim.observables), "wall": self.clock() - self._wall0}
        snapshot = self._collective(sim.snapshot)

        def write() -> None:
            for writer in self.writers:
                writer.write(k, t, row, snapshot)

        on_root(self.comm, write)
        self.timings["output"] += self.clock() - tic
        log.info("t = %-10.6g %s  %s", t, self._progress.line() if self._progress else "", _summary(row))
        self._check_writing(k)
        callbacks = self.options.callbacks
        if callbacks:
            state = OutputState(k, t, row, snapshot or {}, self.path)
            reason = on_root(self.comm, lambda: call_all(callbacks, state))
            if reason is not None:
                self._stopped = {"t": t, "reason": reason}
                log.info("stopped early at t = %.6g: %s", t, reason)

    def _check_writing(self, k: int) -> None:
        """Warn once (rank 0) when writing has dominated the run's cost (module docstring)."""
        progress = self._progress
        if self._writing_checked or progress is None or k + 1 < WRITING_CHECKED_AFTER or \
                self.sim.t - progress.t0 < (progress.t_end - progress.t0) / 10:
            return
        self._writing_checked = True
        writing, stepping = self.timings["output"] + self.timings["checkpoint"], self.timings["time_stepping"]
        if self.comm.rank == 0 and writing > WRITING_DOMINATES * stepping:
            log.warning("warning: the outputs and their checkpoints took %.3g s so far, the steps %.3g s: writing "
                        "dominates this run's cost; fewer outputs (time.outputs_every, time.outputs) would shorten "
                        "such runs", writing, stepping)

    def _checkpoint(self, next_output: int) -> None:
        sim = self.sim
        tic = self.clock()
        state = self._collective(sim.checkpoint_state)
        info = {"step": sim.step_info(), "timings": dict(self.timings)}
        t = sim.t

        def save() -> None:
            assert self.rundir is not None
            Checkpoint(sim.kind, t, next_output, self.times, state or {}, info).save(self.path)
            if not self._committed:
                self.rundir.commit()
            self.rundir.update_metadata(status="running", t_reached=t, outputs_written=next_output,
                                        checkpoint={"t": t, "next_output": next_output},
                                        timings=self._timings(), steps=sim.step_info(), **self._progress_entry())

        on_root(self.comm, save)
        self._committed = True
        self._last_checkpoint = self.clock()
        self._checkpoint_cost = self._last_checkpoint - tic
        self.timings["checkpoint"] += self._checkpoint_cost

    def _progress_entry(self) -> dict[str, Any]:
        """``progress`` for metadata.json (where the segment stands: :meth:`Progress.state`), and
        the segment's end time and wall seconds so far in its entry of ``segments`` (rank 0)."""
        if self._progress is None or self.rundir is None:
            return {}
        segments = [dict(s) for s in self.rundir.metadata.get("segments", [])]
        if segments:
            segments[-1].update(t_end=self.sim.t, wall_s=round(self.clock() - self._wall0, 3))
        return {"progress": self._progress.state(), "segments": segments}

    def _timings(self) -> dict[str, float]:
        return {**self.timings, **self.sim.timings(), "total": self.clock() - self._wall0}

    def _finish(self, status: str, error: str | None, interrupted: RunInterrupted | None) -> None:
        """Record the final status (best effort: the failure may be the disk itself)."""
        facts = self._collective_facts()

        def record() -> None:
            if self.rundir is None:
                return
            if status == "failed" and not self._committed and self.rundir.overwriting:
                self.rundir.rollback()  # the old run's results come back; nothing of this one stays
                return
            entries: dict[str, Any] = {"status": status, "error": error, "timings": self._timings(),
                                       "steps": self.sim.step_info(), **self._progress_entry(), **facts}
            if interrupted is not None:
                entries.update(interrupted_by=interrupted.reason, t_reached=interrupted.t)
            if self._stopped is not None:
                entries.update(stopped_early=self._stopped, t_reached=self._stopped["t"])
            try:
                self.rundir.update_metadata(**entries)
            except OSError as exc:
                log.error("could not record the run's status in metadata.json: %s", exc)

        try:
            on_root(self.comm, record)
        except Exception as exc:  # noqa: BLE001 - the run's own error is the one to report
            log.error("could not finish the run directory: %s", exc)
        log.info("%s %s at t = %.6g in %.1f s; results in %s", run_name(self.path), status, self.sim.t,
                 self.clock() - self._wall0, self.path)

    def _collective_facts(self) -> dict[str, Any]:
        try:
            return self.sim.facts()
        except CollectiveFailure:
            return {}


def _summary(row: dict[str, float]) -> str:
    parts = [f"mass = {row['mass']:.15f}"]
    if "atom_count" in row:
        parts.append(f"atoms {int(row['atom_count'])} holding {row['atom_mass']:.6g}")
    if "atom_count" in row and row.get("rho_max") == 0.0:
        parts.append("no density left (all mass in atoms)")
    elif np.isfinite(row.get("rho_max", np.nan)):
        parts.append(f"{'density ' if 'atom_count' in row else ''}rho in [{row['rho_min']:.3e}, {row['rho_max']:.3e}]")
    parts += [f"E = {row['energy']:.10g}", f"|mean| = {row['order']:.4f}"]
    return "  ".join(parts)
