"""``meanfield check``: what a run of a config would do, measured by a short run; writes nothing."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING, Any

from .options import Options, Subparsers, add_set

if TYPE_CHECKING:
    from ..drivers.job_size import JobSize
from .terminal import echo, error

#: Seconds between two looks of a rank waiting for rank 0's measurement (:func:`_idle_wait`).
IDLE_POLL = 0.05


#: The commands whose jobs ``meanfield check COMMAND CONFIG ...`` sizes, read by their own parsers.
SIZED = ("run", "particles", "validate", "response", "sweep", "phase", "fit")


def add_parser(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("check", allow_abbrev=False,
                              help="what a run of a config would do: a summary (cells, ranks, steps, wall "
                              "time and memory per rank, outputs and their size on disk), the details, the resolved "
                              "config; writes nothing (a short run into a temporary directory, removed, measures the "
                              "costs); `check COMMAND CONFIG ...` sizes the job of that command line "
                              f"({', '.join(SIZED)})")
    p.add_argument("config", nargs="?", default=None,
                   help="TOML config (default: the embedded S2 clustering case), or a command and its own arguments: "
                        "`meanfield check validate case.toml --n 1000,4000 --seeds 3`")
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

    job = getattr(args, "job", None)

    def check() -> tuple[str, str | None]:
        try:
            if job is not None and hasattr(job, "sizer"):
                return size_job(job, options, ranks, cores).format(), None
            config = job.config if job is not None else args.config
            report = check_config(config, _overrides(job, options), out=options.out, ranks=ranks, cores=cores)
            return report.format(), report.output_warning()
        finally:
            _idle_wait(comm)

    if comm.rank != 0:
        _idle_wait(comm)
    text, warning = on_root(comm, check)
    if warning:
        error(warning)
    echo(text)


def read_command(parser: argparse.ArgumentParser, args: argparse.Namespace, rest: list[str]) -> list[str]:
    """``meanfield check COMMAND CONFIG ...``: the command's arguments read by its own parser
    into ``args.job`` (its refusals name it); the arguments left unread."""
    if args.config not in SIZED:
        return rest
    args.job = parser.parse_args([args.config, *rest])
    return []


def _overrides(job: argparse.Namespace | None, options: Options) -> list[str]:
    """``--set`` given to check, then the command's own (its ``--set``, and options such as ``--prompts``)."""
    return [*options.overrides, *(getattr(job, "set", None) or [])]


def size_job(job: argparse.Namespace, options: Options, ranks: int, cores: int) -> JobSize:
    """The size of the job of a command line: its command's ``sizer`` (each command module's
    ``size``, :mod:`meanfield.studies.sizing`)."""
    where: dict[str, Any] = {"out": options.out or getattr(job, "out", None), "ranks": ranks, "cores": cores}
    return job.sizer(job, _overrides(job, options), where)


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
