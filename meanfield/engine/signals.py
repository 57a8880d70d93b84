"""Signals a batch system sends before it ends a job, caught so that a run can stop cleanly.

SIGTERM (what SLURM and most schedulers send at the time limit), SIGINT (Ctrl-C) and
SIGUSR1 (``sbatch --signal=USR1@120``: a warning before the limit) are recorded instead of
killing the process; the run controller looks at the record between steps, finishes the
step, writes a checkpoint and stops with status ``interrupted``.  A second SIGINT while the
first is pending raises ``KeyboardInterrupt`` at once (an escape hatch for a stuck run).
Handlers can only be installed from the main thread; elsewhere nothing is installed and
signals keep their previous behaviour.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType, TracebackType

WATCHED: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)


class SignalWatch:
    """Context manager recording the first watched signal received while it is active.

    Attributes
    ----------
    received
        The first watched signal's number, or 0.
    """

    def __init__(self, signals: tuple[signal.Signals, ...] = WATCHED) -> None:
        self.signals = signals
        self.received = 0
        self._previous: dict[signal.Signals, object] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received and signum == signal.SIGINT:
            raise KeyboardInterrupt
        if not self.received:
            self.received = signum

    def __enter__(self) -> SignalWatch:
        if threading.current_thread() is threading.main_thread():
            for sig in self.signals:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        self._previous.clear()


def signal_name(signum: int) -> str:
    """``SIGTERM`` for 15, etc."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"
