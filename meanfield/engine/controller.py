"""The run controller: one time loop for PDE and particle runs.

It steps the :class:`Simulation` through the output times, watches signals and the wall-time
limit, and calls the run's handlers when they are due (:mod:`.handlers`: files, log and
progress, callbacks, checkpoints, metadata); the simulation owns the state and the steps.
Steps end exactly on every output time and on every time the simulation asks to land on
(:meth:`Simulation.next_landing`: layer boundaries, where the model changes), so no step
straddles a change of the dynamics.

Every step and every output is collective; everything that touches files happens on rank 0
inside :func:`~meanfield.collective.on_root`, so a failure there (a full disk, say) ends
every rank with the same error instead of leaving some of them waiting.

Between two steps the ranks agree (one small ``Allreduce``) on whether to stop and on which
handlers' wall time has come (``output.checkpoint_every``: a checkpoint):

* a signal (SIGTERM, SIGINT, SIGUSR1) received by any rank: the handlers due at a stop (a
  checkpoint), status ``interrupted``, :class:`RunInterrupted` (the CLI exits with 128 + the
  signal number);
* ``time.wall_limit``: stop the same way when the next step and the handlers due at a stop
  might not fit before the limit (the CLI exits with :data:`WALL_LIMIT_EXIT`).

A run with handlers due once at the end (``Cadence.final``: a particle run's analysis, after the
last output or a callback's stop) also looks at signals and the wall limit after the last output
(a signal that came while it was written) and lets those handlers look between pieces of their
work (:attr:`~.handlers.RunState.check_stop`): the run then stops the same way, resumable (a
resume runs those handlers again).

A callback that asks to stop (:class:`~.handlers.Callbacks`) ends the loop after that output's
handlers, with status ``completed`` and ``stopped_early`` in metadata.json.  A step whose size
has collapsed (more than :data:`~meanfield.config.MAX_STEPS` steps would be needed to finish)
fails the run.  An error raised on one rank alone inside a step (not one of the errors every
rank raises together) cannot be reported collectively: that rank records the failure in
metadata.json, prints it, and aborts the job.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..collective import CollectiveFailure
from ..config import MAX_STEPS
from ..rundir.directory import RunDirectory
from ..times import same_time, time_tol
from .handlers import Cadence, Handler, Moment, Output, RunEnd, RunState
from .progress import FILE_ONLY, LogEvery, Progress, log
from .signals import SignalWatch, signal_name
from .simulation import Simulation

#: Exit code of a run stopped by ``time.wall_limit`` (resumable, like a signal's 128 + n).
WALL_LIMIT_EXIT = 3


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
        Seconds of wall time after which the run stops at a checkpoint (None: no limit).
    quiet
        No progress and no log on the terminal (run.log is still written).
    clock
        Seconds of wall time from some fixed moment (``time.perf_counter``); what the wall
        limit, the handlers' wall cadences and the timings are measured with.
    log_every
        When progress lines are logged (``[output] log_every``).
    """

    wall_limit: float | None = None
    quiet: bool = False
    clock: Callable[[], float] = field(default=time.perf_counter)
    log_every: LogEvery = field(default_factory=LogEvery)


class Controller:
    """Drives a :class:`Simulation` through its output times (see the module docstring).

    Parameters
    ----------
    sim
        The simulation, built and (for a resume) restored.
    run_dir
        The run directory.
    rundir
        Rank 0's open :class:`RunDirectory` (``None`` on other ranks).
    handlers
        The run's handlers, started (:func:`~.handlers.run_handlers`), on every rank.
    output_times
        All output times of the run.
    options
        Wall limit, quietness, clock.
    """

    def __init__(self, sim: Simulation, run_dir: Path, rundir: RunDirectory | None, handlers: Sequence[Handler],
                 output_times: np.ndarray, options: ControllerOptions) -> None:
        self.sim, self.comm, self.run_dir = sim, sim.comm, Path(run_dir)
        self.rundir, self.handlers = rundir, list(handlers)
        self.times = np.asarray(output_times, float)
        self.options, self.clock = options, options.clock
        self._cadences = list(dict.fromkeys(h.cadence for h in self.handlers))
        self._wall_cadences = [c for c in self._cadences if c.wall is not None]
        self._last_ran: dict[Cadence, tuple[float, int]] = {}  # wall clock and step count when last run
        self._slowest_step = 0.0
        self._stop_cost = 0.0  # wall seconds of the handlers due at a stop, when they last ran
        self.state: RunState | None = None

    # -- the loop ----------------------------------------------------------------------------
    def run(self, next_output: int = 0) -> None:
        """Run from the simulation's current time, writing outputs ``next_output`` onwards.

        Raises
        ------
        RunInterrupted
            After a signal or the wall limit (the handlers due at a stop have run).
        Exception
            Whatever failed, after recording status ``failed`` and the error.
        """
        sim, k = self.sim, next_output
        progress = Progress(self.comm, sim.t, float(self.times[-1]), self.options.quiet, self.options.log_every)
        state = self.state = RunState(sim, self.run_dir, self.rundir, self.times, self.clock, progress, self.clock(),
                                    next_output=next_output)
        self._last_ran = {c: (state.started, 0) for c in self._cadences}
        end, finish = RunEnd("failed"), True
        try:
            with SignalWatch() as signals:
                state.check_stop = lambda: self._check_stop(signals)
                while k < len(self.times) and state.stopped is None:
                    target = float(self.times[k])
                    while target - sim.t > time_tol(target):
                        self._between_steps(self._step(self._step_target(target)), signals)
                    self._output(k)
                    k += 1
                final = [h for h in self.handlers if h.cadence.final]
                if final:
                    self._check_stop(signals)  # a signal that came while the last output was written
                    self._call(Moment("final"), final)
                    self._check_stop(signals)
            end = RunEnd("completed")
        except RunInterrupted as exc:
            end = RunEnd("interrupted", interrupted_by=exc.reason)
            log.warning("%s", exc, extra=FILE_ONLY)
            raise
        except KeyboardInterrupt:
            finish = False  # a second Ctrl-C: the other ranks may be inside a collective; just go
            raise
        except Exception as exc:
            end = RunEnd("failed", error=f"{type(exc).__name__}: {exc}")
            log.error("run stopped at t = %.6g: %s", sim.t, end.error, extra=FILE_ONLY)
            raise
        finally:
            progress.close()
            if finish:
                for handler in reversed(self.handlers):
                    handler.finish(state, end)

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

    def _step(self, target: float) -> float:
        """One step towards ``target``; its size."""
        sim, state = self.sim, self.state
        assert state is not None
        tic = self.clock()
        dt = state.collective(lambda: sim.step(target))
        elapsed = self.clock() - tic
        state.timings["time_stepping"] += elapsed
        self._slowest_step = max(self._slowest_step, elapsed)
        remaining = float(self.times[-1]) - sim.t
        if target - sim.t > time_tol(target) and remaining > MAX_STEPS * dt:
            raise StepCollapseError(f"the time step collapsed to dt = {dt:.3g} at t = {sim.t:.6g}: "
                                    f"{remaining / dt:.3g} more steps would be needed (at most {MAX_STEPS:.0e}); "
                                    "the velocity is too large or the solution is blowing up")
        return dt

    def _between_steps(self, dt: float, signals: SignalWatch) -> None:
        """After a step: the handlers due by steps, then those whose wall time came and, at a
        signal or the wall limit, those due at a stop (then :class:`RunInterrupted`)."""
        sim = self.sim
        for cadence, (_, steps) in self._last_ran.items():
            self._last_ran[cadence] = (self._last_ran[cadence][0], steps + 1)
        by_steps = [h for h in self.handlers
                    if h.cadence.steps is not None and self._last_ran[h.cadence][1] >= h.cadence.steps]
        self._call(Moment("step", dt=dt, on_output=self._at_output(sim.t)), by_steps)
        stop, by_wall = self._events(signals)
        due = [h for h in self.handlers if h.cadence in by_wall or (stop is not None and h.cadence.stop)]
        self._call(Moment("stop" if stop is not None else "wall"), due)
        if stop is not None:
            raise RunInterrupted(stop, signals.received if stop != "wall_limit" else 0, sim.t, self.run_dir)

    def _check_stop(self, signals: SignalWatch) -> None:
        """At a signal or the wall limit (agreed by all ranks, as between steps): the handlers due at
        a stop, then :class:`RunInterrupted`; nothing otherwise."""
        stop, _ = self._events(signals)
        if stop is not None:
            self._call(Moment("stop"), [h for h in self.handlers if h.cadence.stop])
            raise RunInterrupted(stop, signals.received if stop != "wall_limit" else 0, self.sim.t, self.run_dir)

    def _events(self, signals: SignalWatch) -> tuple[str | None, set[Cadence]]:
        """(stop reason or None, the cadences whose wall time came) agreed by all ranks."""
        from mpi4py import MPI

        state = self.state
        assert state is not None
        now = self.clock()
        flags = np.zeros(2 + len(self._wall_cadences), dtype=np.int64)
        flags[0] = signals.received
        if self.comm.rank == 0:
            limit = self.options.wall_limit
            needed = 1.5 * self._slowest_step + 2.0 * self._stop_cost
            flags[1] = int(limit is not None and now - state.started + needed > limit)
            for i, cadence in enumerate(self._wall_cadences):
                flags[2 + i] = int(now - self._last_ran[cadence][0] >= cadence.wall)  # type: ignore[operator]
        if self.comm.size > 1:
            local, flags = flags, np.empty_like(flags)
            self.comm.Allreduce(local, flags, op=MPI.MAX)
        due = {cadence for i, cadence in enumerate(self._wall_cadences) if flags[2 + i]}
        if flags[0]:
            signals.received = int(flags[0])
            return signal_name(int(flags[0])), due
        return ("wall_limit" if flags[1] else None), due

    # -- handlers ----------------------------------------------------------------------------
    def _output(self, k: int) -> None:
        """Output ``k``: its row and snapshot (collective), then the handlers due at outputs."""
        sim, state = self.sim, self.state
        assert state is not None
        tic = self.clock()
        t = float(self.times[k])
        row = {"t": t, **state.collective(sim.observables), "wall": self.clock() - state.started}
        snapshot = state.collective(sim.snapshot)
        state.timings["output"] += self.clock() - tic
        state.next_output = k + 1
        self._call(Moment("output", Output(k, t, row, snapshot)), [h for h in self.handlers if h.cadence.outputs])

    def _call(self, moment: Moment, handlers: list[Handler]) -> None:
        """Call ``handlers`` in order at ``moment``; their cadences count from now."""
        state = self.state
        assert state is not None
        stop_cost = None
        for handler in handlers:
            tic = self.clock()
            handler.handle(state, moment)
            elapsed = self.clock() - tic
            if handler.timing is not None:
                state.timings[handler.timing] = state.timings.get(handler.timing, 0.0) + elapsed
            if handler.cadence.stop:
                stop_cost = (stop_cost or 0.0) + elapsed
        if stop_cost is not None:
            self._stop_cost = stop_cost
        now = self.clock()
        for cadence in {h.cadence for h in handlers}:
            self._last_ran[cadence] = (now, 0)
