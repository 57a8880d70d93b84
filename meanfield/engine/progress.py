"""What a run tells its user while it runs: the log and the progress, on rank 0 only.

Rank 0 logs to stderr (unless quiet) and to the run's ``run.log``; other ranks log nothing.
On a terminal a progress bar advances in model time, and log lines are printed above it
(through ``tqdm.write``) so the two never overwrite each other.  Progress lines (step, t, dt,
wall time, ETA) go to run.log, and to the terminal when there is no bar (a batch job's output
file), at the cadence of ``[output] log_every`` (:class:`LogEvery`): by default at every tenth
of the run's model time and every :data:`REPORT_EVERY` seconds between.

The estimated time left (:func:`time_left`) follows the recent pace and its trend, not the
average pace so far: as clusters form, attention speeds up and the step shrinks, so each unit
of model time costs more wall time than the last.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..wording import format_duration

log = logging.getLogger("meanfield")

#: Seconds between progress lines by default (besides one at every tenth of the model time).
REPORT_EVERY = 60.0
#: The share of the model time between two progress lines by default.
REPORT_SHARE = 0.1
#: Model-time samples of the progress kept per segment (one each 1/SAMPLES of its span) for the ETA.
SAMPLES = 512
#: ``extra=FILE_ONLY`` keeps a record out of the terminal (the caller reports it there itself).
FILE_ONLY = {"file_only": True}


def _not_file_only(record: logging.LogRecord) -> bool:
    return not getattr(record, "file_only", False)


class _TqdmStream:
    """A stream for the stderr log handler that prints above an active tqdm bar."""

    def write(self, text: str) -> None:
        from tqdm import tqdm

        if text.strip():
            tqdm.write(text.rstrip("\n"), file=sys.stderr)

    def flush(self) -> None:
        sys.stderr.flush()


@contextmanager
def run_logging(comm, quiet: bool, logfile: Path | None) -> Iterator[logging.Logger]:
    """Attach rank 0's handlers (stderr unless ``quiet``, and ``logfile``) for a run's duration."""
    handlers: list[logging.Handler] = []
    log.setLevel(logging.INFO)
    log.propagate = False
    if comm.rank == 0:
        if not quiet:
            terminal = logging.StreamHandler(_TqdmStream() if sys.stderr.isatty() else sys.stderr)
            terminal.addFilter(_not_file_only)
            handlers.append(terminal)
        if logfile is not None:
            handlers.append(logging.FileHandler(logfile))
    for h in handlers:
        h.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
        log.addHandler(h)
    try:
        yield log
    finally:
        for h in handlers:
            log.removeHandler(h)
            h.close()


@dataclass(frozen=True)
class LogEvery:
    """When progress lines are logged: every ``seconds`` of wall time, every ``steps`` steps,
    and at every ``share`` of the segment's model time (``None``: not by that measure).

    :meth:`parse` reads ``[output] log_every``: a number of seconds, ``"N steps"``, or unset
    (every tenth of the model time and every :data:`REPORT_EVERY` seconds).
    """

    seconds: float | None = REPORT_EVERY
    steps: int | None = None
    share: float | None = REPORT_SHARE

    @classmethod
    def parse(cls, value: float | str | None) -> LogEvery:
        """The ``LogEvery`` of a ``log_every`` value (already checked by the config)."""
        if value is None:
            return cls()
        if isinstance(value, str):
            return cls(seconds=None, steps=int(value.split()[0]), share=None)
        return cls(seconds=float(value), share=None)

    def due(self, seconds: float, steps: int, share: float) -> bool:
        """Whether a line is due ``seconds``, ``steps`` and ``share`` of the model time after the last one."""
        return (self.seconds is not None and seconds >= self.seconds) or \
            (self.steps is not None and steps >= self.steps) or \
            (self.share is not None and share >= self.share * (1 - 1e-9))  # a tenth reached up to round-off


class Progress:
    """Progress in model time from ``t0`` to ``t_end``: a bar on a terminal, and progress lines
    at ``log_every`` (module docstring).

    Parameters
    ----------
    comm
        Only rank 0 shows anything.
    t0, t_end
        The span of model time this run segment covers.
    quiet
        Show nothing on the terminal (run.log still gets the progress lines).
    log_every
        When progress lines are logged.
    """

    def __init__(self, comm, t0: float, t_end: float, quiet: bool, log_every: LogEvery | None = None) -> None:
        self.t0, self.t_end = t0, t_end
        self.active = comm.rank == 0
        self.steps = 0
        self.t, self.dt = t0, float("nan")
        self._full = (float("nan"), "")  # the last step not shortened to land on a time, and its limit
        self.log_every = log_every or LogEvery()
        self._start = time.perf_counter()
        self._last = (self._start, 0, t0)  # wall time, steps and model time at the last line
        self._times, self._walls = [t0], [0.0]  # the progress history (model time, wall seconds) for the ETA
        self._bar = None
        if self.active and not quiet and sys.stderr.isatty():
            from tqdm import tqdm

            self._bar = tqdm(total=t_end - t0, unit="t", file=sys.stderr, leave=False,
                             bar_format="{l_bar}{bar}| t={postfix[0]:.4g}/{postfix[1]:.4g} "
                                        "[{elapsed}<{postfix[2]}]", postfix=[t0, t_end, "?"])

    def update(self, t: float, dt: float, report: bool = True, note: str = "", limit: str = "") -> None:
        """One step was taken; the model time is now ``t``.  ``report``: a progress line may be
        logged (not when the step lands on an output, whose own line follows); ``note`` ends
        the line (a hybrid run's atoms); ``limit``: what limited the step (``"landing"``: it was
        shortened to end on a time; lines show the last step that was not)."""
        self.steps += 1
        self.t, self.dt = t, dt
        if limit != "landing" or not self._full[1]:
            self._full = (dt, limit)
        if not self.active:
            return
        now = time.perf_counter()
        sampled = t - self._times[-1] >= self._span / SAMPLES
        if sampled:
            self._times.append(t)
            self._walls.append(now - self._start)
        if self._bar is not None:
            self._bar.postfix[0] = t
            if sampled:
                eta = self._done(now)[1]
                self._bar.postfix[2] = self._bar.format_interval(eta) if eta != float("inf") else "?"
            self._bar.update(t - self.t0 - self._bar.n)
        wall, steps, t_last = self._last
        if report and self.log_every.due(now - wall, self.steps - steps, (t - t_last) / self._span):
            self._last = (now, self.steps, t)
            done, eta = self._done(now)
            log.info("step %d  t = %.6g (%.1f%%)  %s  wall %s  ETA %s%s", self.steps, t, 100.0 * done, self._dt(),
                     format_duration(now - self._start), format_duration(eta), f"  {note}" if note else "",
                     extra=FILE_ONLY if self._bar is not None else None)

    @property
    def _span(self) -> float:
        return max(self.t_end - self.t0, 1e-300)

    def _done(self, now: float) -> tuple[float, float]:
        """The share of the segment's model time done, and the seconds still to go (:func:`time_left`)."""
        done = (self.t - self.t0) / self._span
        times, walls = self._times, self._walls
        if self.t > times[-1]:
            times, walls = [*times, self.t], [*walls, now - self._start]
        return done, time_left(times, walls, self.t_end)

    def state(self) -> dict[str, float | int | str | None]:
        """Where the segment stands, for metadata.json: t, steps, last dt, wall seconds, ETA."""
        now = time.perf_counter()
        done, eta = self._done(now)
        finite = eta != float("inf")
        return {"t": self.t, "t_end": self.t_end, "done": round(done, 6), "step": self.steps,
                "dt": self.dt if self.steps else None, "wall_s": round(now - self._start, 3),
                "eta_s": round(eta, 3) if finite else None,
                "eta": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(time.time() + eta)) if finite else None,
                "updated": time.strftime("%Y-%m-%dT%H:%M:%S%z")}

    def line(self) -> str:
        """``step 120  dt = 0.0041 by cfl  wall 1m02s``: for the log line of an output, which counts
        as a progress line (the next one is due ``log_every`` later)."""
        now = time.perf_counter()
        self._last = (now, self.steps, self.t)
        dt = f"  {self._dt()}" if self.steps else ""
        return f"step {self.steps}{dt}  wall {format_duration(now - self._start)}"

    def _dt(self) -> str:
        """``dt = 0.0041 by cfl``: the last step not shortened to land on a time, and what limited it."""
        dt, limit = self._full
        return f"dt = {dt:.3g}" + (f" by {limit}" if limit else "")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


class SweepProgress:
    """Progress through a known amount of work (the adjoint's forward recording in model time,
    its backward sweep in steps), on rank 0: a bar on a terminal, else log lines (``what``,
    the share done, wall time, ETA at the average pace) at every ``share`` of the work (default a
    tenth; ``None``: not by share) and every :data:`REPORT_EVERY` seconds; nothing when
    ``quiet``.  Log lines reach the terminal through the handlers of :func:`run_logging`.

    Parameters
    ----------
    comm
        Only rank 0 shows anything.
    what
        What is done (``"backward sweep"``), first on the bar and the lines.
    total
        The amount at the end (``> 0``).
    unit
        The amount's unit on the bar and the lines (``"step"``, ``"t"``).
    quiet
        Show nothing.
    share
        The share of the work between two log lines (``None``: lines by wall time alone, for
        work repeated many times, e.g. each evaluation of a fit).
    """

    def __init__(self, comm, what: str, total: float, unit: str, quiet: bool,
                 share: float | None = REPORT_SHARE) -> None:
        self.what, self.total, self.unit, self.share = what, max(float(total), 1e-300), unit, share
        self.active = comm.rank == 0 and not quiet
        self._start = time.perf_counter()
        self._last = (self._start, 0.0)  # wall time and amount at the last line
        self._bar = None
        if self.active and sys.stderr.isatty():
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=what, unit=unit, file=sys.stderr, leave=False)

    def update(self, done: float) -> None:
        """``done`` of the total is done."""
        if not self.active:
            return
        if self._bar is not None:
            self._bar.update(done - self._bar.n)
            return
        now = time.perf_counter()
        wall, last = self._last
        share = done / self.total
        by_share = self.share is not None and (share - last / self.total >= self.share * (1 - 1e-9)
                                               or done >= self.total)
        if now - wall >= REPORT_EVERY or by_share:
            self._last = (now, done)
            elapsed = now - self._start
            eta = elapsed * (self.total - done) / done if done > 0 else float("inf")
            log.info("%s: %s %.6g/%.6g (%.0f%%)  wall %s  ETA %s", self.what, self.unit, done, self.total,
                     100.0 * share, format_duration(elapsed), format_duration(eta))

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


@contextmanager
def sweep_progress(comm, what: str, total: float, unit: str, quiet: bool,
                   share: float | None = REPORT_SHARE) -> Iterator[SweepProgress]:
    """A :class:`SweepProgress` for the duration of the block, with :func:`run_logging`'s
    terminal handler (no log file), closed at the end."""
    with run_logging(comm, quiet, None):
        progress = SweepProgress(comm, what, total, unit, quiet, share)
        try:
            yield progress
        finally:
            progress.close()


def time_left(times: Sequence[float], walls: Sequence[float], t_end: float) -> float:
    """Wall seconds still to go to ``t_end``, from the progress so far: model times ``times``
    reached at wall seconds ``walls`` (increasing, from the segment's start).

    The pace (wall seconds per unit of model time) is read from the recent half of the model
    time covered, as the slope of a quadratic fitted to wall time against model time there:
    its value now and its trend.  A pace that grows (the step shrinking as clusters form) is
    taken to go on growing at that rate for as long again as the run has gone so far, and then
    to stay; a steady or falling pace is taken to stay as it is now.  ``inf`` before any
    progress.
    """
    t, w = np.asarray(times, float), np.asarray(walls, float)
    t0, now = t[0], t[-1]
    if now <= t0:
        return float("inf")
    remaining = max(t_end - now, 0.0)
    recent = t >= t0 + (now - t0) / 2
    if np.count_nonzero(recent) < 4:
        return (w[-1] - w[0]) / (now - t0) * remaining
    x, y = t[recent] - now, w[recent]
    curvature, pace, _ = np.polyfit(x, y, 2)  # y ~ c + pace x + curvature x**2
    if pace <= 0:  # noise: the recent average pace, from a straight line
        pace = max(float(np.polyfit(x, y, 1)[0]), 0.0)
    if curvature <= 0 or pace <= 0:  # a steady or falling pace: as it is now
        return float(pace * remaining)
    growing = min(remaining, now - t0)
    return float(pace * growing + curvature * growing**2 + (pace + 2 * curvature * growing) * (remaining - growing))
