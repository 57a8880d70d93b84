"""``meanfield check``: what a run of a config would do, measured by a short run; writes nothing."""

from __future__ import annotations

import argparse
import time

from .options import Options, Subparsers, add_set
from .terminal import echo, error

#: Seconds between two looks of a rank waiting for rank 0's measurement (:func:`_idle_wait`).
IDLE_POLL = 0.05


def add_parser(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("check", help="what a run of a config would do: a summary (cells, ranks, steps, wall "
                              "time and memory per rank, outputs and their size on disk), the details, the resolved "
                              "config; writes nothing (a short run into a temporary directory, removed, measures the "
                              "costs)")
    p.add_argument("config", nargs="?", default=None, help="TOML config (default: the embedded S2 clustering case)")
    p.add_argument("--out", help="the run directory a run would use (default: output.dir or runs/<name>)")
    p.add_argument("--ranks", type=int, default=None,
                   help="the MPI ranks of the run to size: memory and wall time per rank (default: the ranks of this "
                        "command, 1 without mpirun)")
    add_set(p)
    p.set_defaults(handler=main)


def main(args: argparse.Namespace, options: Options) -> None:
    from .._fem import dolfinx
    from ..collective import on_root
    from ..config import ConfigError
    from ..drivers import walltime
    from ..drivers.planning import check_config

    comm = options.comm  # MPI starts here, before any work
    ranks = args.ranks if args.ranks is not None else comm.size
    if ranks < 1:
        raise ConfigError(f"--ranks: must be a positive integer, got {ranks}")
    dolfinx()  # collective (PETSc starts): rank 0 alone may set a run up to measure its first steps
    cores = walltime.cores(comm)  # collective: under mpirun, the cores of all the ranks

    def check() -> tuple[str, str | None]:
        try:
            report = check_config(args.config, options.overrides, out=options.out, ranks=ranks, cores=cores)
            return report.format(), report.output_warning()
        finally:
            _idle_wait(comm)

    if comm.rank != 0:
        _idle_wait(comm)
    text, warning = on_root(comm, check)
    if warning:
        error(warning)
    echo(text)


def _idle_wait(comm, poll: float = IDLE_POLL) -> None:
    """Wait, asleep, until every rank of ``comm`` has called this (collective).  Under mpirun the
    other ranks wait so while rank 0 measures the run on one process: a rank waiting in a plain
    MPI call polls through a whole core, which the measurement would lose, and ``mpirun -n N
    meanfield check`` would then say another wall time than ``meanfield check --ranks N``."""
    if comm.size == 1:
        return
    request = comm.Ibarrier()
    while not request.Test():
        time.sleep(poll)
