"""What a run tells its user while it runs: the log and the progress, on rank 0 only.

Rank 0 logs to stderr (unless quiet) and to the run's ``run.log``; other ranks log nothing.
On a terminal a progress bar advances in model time, and log lines are printed above it
(through ``tqdm.write``) so the two never overwrite each other.  Off a terminal (a batch
job's output file) there is no bar; instead a progress line with the step count, t, dt and
an ETA is logged every :data:`REPORT_EVERY` seconds.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

log = logging.getLogger("meanfield")

#: Seconds between progress lines when stderr is not a terminal.
REPORT_EVERY = 60.0
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


class Progress:
    """Progress in model time from ``t0`` to ``t_end``: a bar on a terminal, periodic lines elsewhere.

    Parameters
    ----------
    comm
        Only rank 0 shows anything.
    t0, t_end
        The span of model time this run segment covers.
    quiet
        Show nothing (the log file still gets the periodic lines).
    """

    def __init__(self, comm, t0: float, t_end: float, quiet: bool) -> None:
        self.t0, self.t_end = t0, t_end
        self.active = comm.rank == 0
        self.steps = 0
        self._start = time.perf_counter()
        self._last_report = self._start
        self._bar = None
        if self.active and not quiet and sys.stderr.isatty():
            from tqdm import tqdm

            self._bar = tqdm(total=t_end - t0, unit="t", file=sys.stderr, leave=False,
                             bar_format="{l_bar}{bar}| t={postfix[0]:.4g}/{postfix[1]:.4g} "
                                        "[{elapsed}<{remaining}]", postfix=[t0, t_end])

    def update(self, t: float, dt: float) -> None:
        """One step was taken; the model time is now ``t``."""
        self.steps += 1
        if not self.active:
            return
        if self._bar is not None:
            self._bar.postfix[0] = t
            self._bar.update(t - self.t0 - self._bar.n)
            return
        now = time.perf_counter()
        if now - self._last_report >= REPORT_EVERY:
            self._last_report = now
            done = (t - self.t0) / max(self.t_end - self.t0, 1e-300)
            eta = (now - self._start) * (1.0 - done) / done if done > 0 else float("inf")
            log.info("step %d  t = %.6g (%.1f%%)  dt = %.3g  ETA %s", self.steps, t, 100.0 * done, dt,
                     _duration(eta))

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def _duration(seconds: float) -> str:
    if seconds == float("inf"):
        return "unknown"
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds // 60 % 60:02d}m{seconds % 60:02d}s" if seconds >= 3600 else \
        f"{seconds // 60}m{seconds % 60:02d}s"
