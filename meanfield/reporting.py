"""What a run tells its user while it runs: the log and the progress bar, on rank 0 only.

Shared by the PDE and particle drivers.  Rank 0 logs to stderr (unless quiet) and to the
run's ``run.log``; other ranks log nothing.  The progress bar advances in model time and is
shown only on a terminal.
"""

from __future__ import annotations

import logging
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

log = logging.getLogger("meanfield")


@contextmanager
def run_logging(comm, quiet: bool, logfile: Path) -> Iterator[logging.Logger]:
    """Attach rank 0's handlers (stderr unless ``quiet``, and ``logfile``) for a run's duration."""
    handlers: list[logging.Handler] = []
    log.setLevel(logging.INFO)
    log.propagate = False
    if comm.rank == 0:
        if not quiet:
            handlers.append(logging.StreamHandler(sys.stderr))
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


def progress_bar(comm, total: float, quiet: bool):
    """A tqdm bar over model time ``[0, total]``, disabled off rank 0, when quiet or not a terminal."""
    from tqdm import tqdm

    enabled = comm.rank == 0 and not quiet and sys.stderr.isatty()
    return tqdm(total=total, disable=not enabled, unit="t",
                bar_format="{l_bar}{bar}| t={n:.3g}/{total:.3g} [{elapsed}<{remaining}]")
