"""Output handlers: everything a run does besides stepping, each due at its own cadence.

As py-pde's trackers (an interrupt and ``handle``) and Dedalus' file handlers (``sim_dt``,
``wall_dt``, ``iter``), a :class:`Handler` says when it is due (its :class:`Cadence`: at the
run's output times, every so many seconds of wall time, every so many steps, when a signal
or the wall limit stops the run) and what it does then (:meth:`Handler.handle`).
:meth:`Handler.start` prepares its files as the run directory opens (a resume keeps the
outputs its checkpoint covers) and :meth:`Handler.finish` records how the run ended.  The
controller (:mod:`.controller`) only steps to the next output time, watches signals and the
wall limit, and calls the handlers that are due, in their order.

The handlers of a run (:func:`run_handlers`), in order:

* the driver's observables of one's own (:class:`OwnObservableColumns`), at every output, which add
  their columns to the output's row;
* the driver's files (:class:`FileOutput` around a writer of :mod:`meanfield.rundir.writers`:
  observables.csv, the snapshots, run.nc with the ParaView files), at every output;
* :class:`RunLog`: each output's log line, the progress (bar and lines, :mod:`.progress`) and
  the simulation's events at every step, and the last line;
* :class:`Callbacks`: the Python API's callbacks (:mod:`.callbacks`), at every output;
* :class:`Checkpoints`: checkpoint.npz after every output, every ``output.checkpoint_every``
  seconds, and when a signal or the wall limit stops the run;
* :class:`Status`: status and progress in metadata.json with every checkpoint (the same
  cadence), and the final status (``completed``, ``interrupted``, ``failed``) at the end.

Handlers with equal cadences are due together: their wall time and steps are counted from
the last time they ran, together.  Every method but :meth:`Handler.start` is called on every
rank (files are written on rank 0 inside :func:`~meanfield.collective.on_root`, so a failure
there is every rank's); :meth:`Handler.finish` is called in reverse order, the last handler
first.

The handlers due at a stop (a checkpoint and its record) take the time the wall limit must leave
them (:mod:`.controller`); the outputs and checkpoints together are the writing cost
:class:`RunLog` warns about, once, when (after a tenth of the model time and
:data:`WRITING_CHECKED_AFTER` outputs) it has exceeded :data:`WRITING_DOMINATES` times the steps'
cost, both counted from the first output of the run (or of its resumed segment), so that what
is paid once (the files made, the libraries that write them loaded) is not taken for the cost
of outputs: fewer outputs would shorten the run. (The margin allows for the steps of a clustering run
shrinking later.)
"""

from __future__ import annotations

import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from ..collective import CollectiveFailure, on_root, raised_everywhere
from ..rundir.checkpoint import Checkpoint
from ..rundir.directory import RunDirectory, record_failure
from ..rundir.names import run_name
from ..rundir.writers import ObservablesWriter, OutputWriter, SnapshotWriter
from .callbacks import Callback, OutputState, call_all
from .progress import Progress, log
from .simulation import Simulation

if TYPE_CHECKING:
    from ..own_observables import OwnObservables

T = TypeVar("T")

#: Outputs written before the run judges whether writing dominates its cost.
WRITING_CHECKED_AFTER = 4
#: How many times the steps' wall time the outputs and checkpoints must take for the run to warn.
WRITING_DOMINATES = 2.0


@dataclass(frozen=True)
class Cadence:
    """When a handler is due (any of these; none: only at the start and the end).

    Attributes
    ----------
    outputs
        At every output time of the run (model time; the steps land on them).
    wall
        Every ``wall`` seconds of wall time since the handler last ran (rank 0's clock,
        agreed by every rank between two steps).
    steps
        Every ``steps`` steps since the handler last ran.
    stop
        When a signal or the wall limit stops the run (after the last step).
    final
        Once, after the last output (a completed run's analysis): a signal or the wall limit
        stops the run then too (:attr:`RunState.check_stop`).
    """

    outputs: bool = False
    wall: float | None = None
    steps: int | None = None
    stop: bool = False
    final: bool = False


@dataclass(frozen=True)
class Output:
    """One output: its index, its time, its row of observables.csv and its snapshot arrays
    (in global order, on rank 0; ``None`` elsewhere)."""

    index: int
    t: float
    row: dict[str, float]
    snapshot: dict[str, np.ndarray] | None


@dataclass(frozen=True)
class Moment:
    """Why handlers are called now.

    Attributes
    ----------
    reason
        ``"output"``, ``"step"``, ``"wall"`` (their wall time came), ``"stop"`` (a signal or
        the wall limit) or ``"final"`` (after the last output).
    output
        The output (reason ``"output"``).
    dt
        The step's size (reason ``"step"``).
    on_output
        The step ended on an output time (reason ``"step"``; the output follows at once).
    """

    reason: str
    output: Output | None = None
    dt: float = float("nan")
    on_output: bool = False


@dataclass(frozen=True)
class RunEnd:
    """How the loop ended: ``status`` (``completed``, ``interrupted``, ``failed``), the error of a
    failed run, what interrupted one (``SIGTERM``, ..., ``wall_limit``)."""

    status: str
    error: str | None = None
    interrupted_by: str | None = None


@dataclass
class RunState:
    """What handlers see of a run in its loop (every rank).

    Attributes
    ----------
    sim
        The simulation.
    run_dir
        The run directory.
    rundir
        Rank 0's open :class:`RunDirectory` (``None`` on other ranks).
    times
        All output times of the run.
    clock
        Wall seconds from some fixed moment.
    progress
        Where the loop stands in model time (:class:`~.progress.Progress`).
    started
        The clock when the loop started.
    timings
        Wall seconds so far: ``time_stepping``, ``output`` (the outputs' handlers and
        gathering), ``checkpoint`` (the checkpoints' and their records').
    next_output
        Outputs written so far (counting the one being handled).
    committed
        A checkpoint of this run has been written (an overwritten run's files are gone).
    checkpoint
        The last checkpoint's ``t`` and ``next_output``.
    stopped
        A callback's early stop: ``t`` and ``reason``.
    check_stop
        Collective: at a signal or the wall limit, the handlers due at a stop run and
        :class:`~.controller.RunInterrupted` is raised; a long handler calls it between pieces of
        its work (the controller sets it as the loop starts).
    """

    sim: Simulation
    run_dir: Path
    rundir: RunDirectory | None
    times: np.ndarray
    clock: Callable[[], float]
    progress: Progress
    started: float
    timings: dict[str, float] = field(default_factory=lambda: {"time_stepping": 0.0, "output": 0.0,
                                                                "checkpoint": 0.0})
    next_output: int = 0
    committed: bool = False
    checkpoint: dict[str, Any] | None = None
    stopped: dict[str, Any] | None = None
    check_stop: Callable[[], None] = field(default=lambda: None)

    @property
    def comm(self) -> Any:
        return self.sim.comm

    def collective(self, work: Callable[[], T]) -> T:
        """Call collective simulation code; an error that may be this rank's alone (anything but
        one known to be raised everywhere) is recorded in metadata.json and aborts the job."""
        try:
            return work()
        except Exception as exc:
            if self.comm.size == 1 or raised_everywhere(exc):
                raise
            message = f"rank {self.comm.rank}: {type(exc).__name__}: {exc}"
            print(f"error: the run failed on {message}; aborting all ranks", file=sys.stderr, flush=True)
            record_failure(self.run_dir, message)
            self.comm.Abort(1)
            raise  # not reached

    def all_timings(self) -> dict[str, float]:
        """The loop's timings, the simulation's, and the total so far (metadata.json)."""
        return {**self.timings, **self.sim.timings(), "total": self.clock() - self.started}


class Handler(ABC):
    """Something a run does when it is due (module docstring).

    Attributes
    ----------
    cadence
        When it is due.
    timing
        The entry of :attr:`RunState.timings` its wall time counts under (``None``: none).
    """

    cadence: Cadence = Cadence()
    timing: str | None = None

    def start(self, run_dir: Path, static: Mapping[str, np.ndarray] | None, keep: int) -> None:
        """Prepare the files of run directory ``run_dir`` (rank 0, as it opens): ``keep`` outputs
        already written are kept (0: a new run).  ``static``: the arrays written once per run
        (the mesh), if any.  Nothing by default."""
        return None

    @abstractmethod
    def handle(self, state: RunState, moment: Moment) -> None:
        """Do what is due at ``moment`` (every rank)."""

    def finish(self, state: RunState, end: RunEnd) -> None:
        """The loop has ended as ``end`` says (every rank; best effort).  Nothing by default."""
        return None


#: Builds a writer for a run directory and its static arrays (rank 0), or ``None`` for none.
WriterBuilder = Callable[[Path, Mapping[str, np.ndarray] | None], OutputWriter | None]


class FileOutput(Handler):
    """An output file's writer (:mod:`meanfield.rundir.writers`) at every output, on rank 0.

    Parameters
    ----------
    build
        Builds the writer when the run directory opens (:meth:`start`).
    """

    cadence = Cadence(outputs=True)
    timing = "output"

    def __init__(self, build: WriterBuilder) -> None:
        self.build = build
        self.writer: OutputWriter | None = None

    def start(self, run_dir: Path, static: Mapping[str, np.ndarray] | None, keep: int) -> None:
        self.writer = self.build(run_dir, static)
        if self.writer is not None:
            self.writer.start(keep)

    def handle(self, state: RunState, moment: Moment) -> None:
        output, writer = moment.output, self.writer
        assert output is not None

        def write() -> None:
            if writer is not None:
                writer.write(output.index, output.t, output.row, output.snapshot)

        on_root(state.comm, write)


class SnapshotOutput(FileOutput):
    """The snapshots at every output, each with the step controller's state then (the
    simulation's :meth:`~.simulation.Simulation.step_info`, as a checkpoint holds it), so that a
    run resumed from a snapshot takes the steps the run that went on took
    (:mod:`meanfield.rundir.recovery`)."""

    def __init__(self) -> None:
        super().__init__(lambda run_dir, static: SnapshotWriter(run_dir))

    def handle(self, state: RunState, moment: Moment) -> None:
        output, writer, stepper = moment.output, self.writer, state.sim.step_info()
        assert output is not None

        def write() -> None:
            assert isinstance(writer, SnapshotWriter)
            writer.write(output.index, output.t, output.row, output.snapshot, stepper)

        on_root(state.comm, write)


def file_outputs(*more: WriterBuilder) -> list[Handler]:
    """observables.csv and the snapshots, then the files ``more`` builds (run.nc), as handlers."""
    return [FileOutput(lambda run_dir, static: ObservablesWriter(run_dir)), SnapshotOutput(),
            *(FileOutput(build) for build in more)]


class OwnObservableColumns(Handler):
    """The observables of one's own (``[[output.observables]]``, :mod:`meanfield.own_observables`) at every
    output: their columns join the output's row before ``wall`` (as observables.csv has them),
    for the file handlers after this one; each is ``nan`` at the outputs its ``every`` skips.

    Parameters
    ----------
    own_observables
        The compiled observables, evaluated on the simulation's
        :meth:`~.simulation.Simulation.distribution`.
    """

    cadence = Cadence(outputs=True)
    timing = "output"

    def __init__(self, own_observables: OwnObservables) -> None:
        self.own_observables = own_observables

    def handle(self, state: RunState, moment: Moment) -> None:
        output = moment.output
        assert output is not None
        rho, points, weights = state.collective(state.sim.distribution)
        values = state.collective(lambda: self.own_observables.evaluate(output.t, rho, points, weights, state.comm))
        wall = output.row.pop("wall")
        output.row.update(values, wall=wall)


def own_observable_columns(own_observables: OwnObservables) -> list[Handler]:
    """The handler of the observables of one's own, if there are any (none: no handler)."""
    return [OwnObservableColumns(own_observables)] if len(own_observables) else []


class RunLog(Handler):
    """The run's log (rank 0): a line at every output, the progress and the simulation's events
    (a hybrid run's captures and merges) at every step, the writing-cost warning, the last line."""

    cadence = Cadence(outputs=True, steps=1)

    def __init__(self) -> None:
        self._writing_checked = False
        self._costs_at_first_output: tuple[float, float] | None = None

    def handle(self, state: RunState, moment: Moment) -> None:
        sim, progress = state.sim, state.progress
        if moment.output is None:
            for line in sim.event_lines():
                log.info("t = %.6g  %s", sim.t, line)
            progress.update(sim.t, moment.dt, report=not moment.on_output, note=sim.status(),  # else the output's line
                            limit=sim.step_info().get("limit") or "")
            return
        log.info("t = %-10.6g %s  %s", moment.output.t, progress.line(), _summary(moment.output.row))
        self._check_writing(state, moment.output.index)

    def _check_writing(self, state: RunState, k: int) -> None:
        """Warn once (rank 0) when writing has dominated the run's cost since the run's first
        output after its start (module docstring): the costs paid once (the files made, their
        libraries loaded, the first steps' set-up) say nothing of what more outputs cost."""
        progress = state.progress
        writing, stepping = state.timings["output"] + state.timings["checkpoint"], state.timings["time_stepping"]
        if self._costs_at_first_output is None:
            self._costs_at_first_output = (writing, stepping)
            return
        if self._writing_checked or k + 1 < WRITING_CHECKED_AFTER or \
                state.sim.t - progress.t0 < (progress.t_end - progress.t0) / 10:
            return
        self._writing_checked = True
        writing, stepping = writing - self._costs_at_first_output[0], stepping - self._costs_at_first_output[1]
        if state.comm.rank == 0 and writing > WRITING_DOMINATES * stepping:
            log.warning("warning: the outputs and their checkpoints took %.3g s so far, the steps %.3g s: writing "
                        "dominates this run's cost; fewer outputs (time.outputs_every, time.outputs) would shorten "
                        "such runs", writing, stepping)

    def finish(self, state: RunState, end: RunEnd) -> None:
        log.info("%s %s at t = %.6g in %.1f s; results in %s", run_name(state.run_dir), end.status, state.sim.t,
                 state.clock() - state.started, state.run_dir)


class Callbacks(Handler):
    """The Python API's callbacks (:mod:`.callbacks`) on rank 0 at every output; one that asks to
    stop ends the loop after that output's checkpoint (:attr:`RunState.stopped`)."""

    cadence = Cadence(outputs=True)

    def __init__(self, callbacks: Sequence[Callback]) -> None:
        self.callbacks = tuple(callbacks)

    def handle(self, state: RunState, moment: Moment) -> None:
        output = moment.output
        assert output is not None
        seen = OutputState(output.index, output.t, output.row, output.snapshot or {}, state.run_dir)
        reason = on_root(state.comm, lambda: call_all(self.callbacks, seen))
        if reason is not None:
            state.stopped = {"t": output.t, "reason": reason}
            log.info("stopped early at t = %.6g: %s", output.t, reason)


class Checkpoints(Handler):
    """checkpoint.npz (:mod:`meanfield.rundir.checkpoint`): the whole state, the outputs written
    and the step controller's facts; the first one commits an overwrite (the old run's files go).

    Parameters
    ----------
    cadence
        When (:func:`checkpoint_cadence`).
    """

    timing = "checkpoint"

    def __init__(self, cadence: Cadence) -> None:
        self.cadence = cadence

    def handle(self, state: RunState, moment: Moment) -> None:
        sim = state.sim
        arrays = state.collective(sim.checkpoint_state)
        info = {"step": sim.step_info(), "timings": dict(state.timings)}
        t, next_output = sim.t, state.next_output

        def save() -> None:
            assert state.rundir is not None
            Checkpoint(sim.run_type, t, next_output, state.times, arrays or {}, info).save(state.run_dir)
            if not state.committed:
                state.rundir.commit()

        on_root(state.comm, save)
        state.committed = True
        state.checkpoint = {"t": t, "next_output": next_output}


class Status(Handler):
    """metadata.json's record of the run: status ``running``, the time reached, the last checkpoint,
    timings, step facts and progress with every checkpoint (give it the checkpoints' cadence);
    the final status at the end.  A run that fails before its first checkpoint while
    overwriting another puts the other run's files back instead."""

    timing = "checkpoint"

    def __init__(self, cadence: Cadence) -> None:
        self.cadence = cadence

    def handle(self, state: RunState, moment: Moment) -> None:
        sim = state.sim

        def record() -> None:
            assert state.rundir is not None
            state.rundir.update_metadata(status="running", t_reached=sim.t, outputs_written=state.next_output,
                                       checkpoint=state.checkpoint, timings=state.all_timings(), steps=sim.step_info(),
                                       **_progress_entry(state))

        on_root(state.comm, record)

    def finish(self, state: RunState, end: RunEnd) -> None:
        try:
            facts = state.sim.facts()
        except CollectiveFailure:
            facts = {}

        def record() -> None:
            rundir = state.rundir
            if rundir is None:
                return
            if end.status == "failed" and not state.committed and rundir.overwriting:
                rundir.rollback()  # the old run's results come back; nothing of this one stays
                return
            entries: dict[str, Any] = {"status": end.status, "error": end.error, "timings": state.all_timings(),
                                       "steps": state.sim.step_info(), **_progress_entry(state), **facts}
            if end.interrupted_by is not None:
                entries.update(interrupted_by=end.interrupted_by, t_reached=state.sim.t)
            if state.stopped is not None:
                entries.update(stopped_early=state.stopped, t_reached=state.stopped["t"])
            try:
                rundir.update_metadata(**entries)
            except OSError as exc:
                log.error("could not record the run's status in metadata.json: %s", exc)

        try:
            on_root(state.comm, record)
        except Exception as exc:  # noqa: BLE001 - the run's own error is the one to report
            log.error("could not finish the run directory: %s", exc)


def checkpoint_cadence(every: float) -> Cadence:
    """The checkpoints' cadence: after every output, every ``every`` seconds, and at a stop."""
    return Cadence(outputs=True, wall=every, stop=True)


def run_handlers(outputs: Sequence[Handler], *, checkpoint_every: float,
                 callbacks: Sequence[Callback] = ()) -> list[Handler]:
    """A run's handlers in order: the driver's ``outputs`` (:func:`file_outputs`), the log, the
    callbacks (if any), the checkpoints every ``checkpoint_every`` seconds and the status."""
    cadence = checkpoint_cadence(checkpoint_every)
    return [*outputs, RunLog(), *([Callbacks(callbacks)] if callbacks else []), Checkpoints(cadence),
            Status(cadence)]


def _progress_entry(state: RunState) -> dict[str, Any]:
    """``progress`` for metadata.json (where the segment stands: :meth:`Progress.state`), and
    the segment's end time and wall seconds so far in its entry of ``segments`` (rank 0)."""
    if state.rundir is None:
        return {}
    segments = [dict(s) for s in state.rundir.metadata.get("segments", [])]
    if segments:
        segments[-1].update(t_end=state.sim.t, wall_s=round(state.clock() - state.started, 3))
    return {"progress": state.progress.state(), "segments": segments}


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
