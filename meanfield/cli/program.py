"""The ``meanfield`` program: the parser of every subcommand, and :func:`main`, which runs one and
turns its exceptions into exit codes (see :mod:`meanfield.cli`)."""

from __future__ import annotations

import argparse
import os
import select
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from .. import __version__
from . import (
    check,
    clusters,
    collect,
    compare,
    convergence,
    fit,
    info,
    longtime,
    mesh,
    particles,
    phase,
    plot,
    response,
    resume,
    run,
    sweep,
    validate,
)
from .options import Options
from .terminal import error

#: The subcommands, in the order ``meanfield --help`` lists them; each module has ``add_parser`` and ``main``.
COMMANDS = [run, resume, particles, validate, response, fit, convergence, clusters, longtime, phase, sweep,
            collect, compare, check, plot, mesh, info]

#: The top-level ``meanfield --help``: what the tool is for, three commands to start from, the docs.
DESCRIPTION = """\
Solve the mean-field PDE of self-attention dynamics (tokens on the sphere S^1 or S^2 moving under
softmax attention) on a meshed sphere, serially or under mpirun, simulate the n-token particle
system of the same model, and compare the two.  A run is described by a TOML config file; every
key has a default."""
EPILOG = """\
examples:
  meanfield check case.toml            what a run would do: cells, steps, time, memory, files
  mpirun -n 4 meanfield run case.toml  run it into runs/<name>; `meanfield info runs/<name>` watches it
  meanfield plot runs/<name>           maps, time series and a movie into runs/<name>/plots

`meanfield COMMAND --help` lists a command's options.  Documentation: `make docs` builds it into
docs/_build/html/index.html from the docs/ folder of the source tree (README.md to start)."""


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are bad input as everywhere in ``meanfield``: one line on
    standard error naming the command and the argument, with where its options are listed, exit 2.

    Attributes
    ----------
    commands
        The subcommands' parsers by name (``meanfield``'s, from :func:`build_parser`; empty for a
        subcommand's own).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands: dict[str, argparse.ArgumentParser] = {}

    def error(self, message: str) -> NoReturn:
        error(f"error: {self.prog}: {message} (`{self.prog} --help` lists the arguments)")
        self.exit(2)


def build_parser() -> Parser:
    """The parser of ``meanfield`` and its subcommands; a parsed command's ``handler`` is its action."""
    parser = Parser(prog="meanfield", description=DESCRIPTION, epilog=EPILOG,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"meanfield {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", title="commands",
                                       parser_class=Parser)
    for command in COMMANDS:
        command.add_parser(subparsers)
    parser.commands = dict(subparsers.choices)
    return parser


#: The exit code when the reader of standard output has gone: 128 + SIGPIPE, as a tool killed by it gives.
READER_GONE = 141


def _stdout_closed() -> bool:
    """Whether nobody reads standard output any more (a pipe whose reader has closed it)."""
    try:
        poll = select.poll()
        poll.register(1, select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poll.poll(0))
    except OSError:
        return False


def _reader_gone() -> int:
    """Stop quietly: what is still buffered for standard output goes nowhere, and under mpirun the
    other ranks end too."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    if "mpi4py.MPI" in sys.modules:
        from mpi4py import MPI

        if MPI.COMM_WORLD.size > 1:
            MPI.COMM_WORLD.Abort(READER_GONE)
    return READER_GONE


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``meanfield`` console script; returns the exit code (see :mod:`meanfield.cli`)."""
    try:
        code = _command(argv)
        sys.stdout.flush()  # here, not at exit, so that a reader gone is seen as such
        return code
    except BrokenPipeError:
        if not _stdout_closed():
            raise
        return _reader_gone()


def _parse(parser: Parser, argv: Sequence[str] | None) -> argparse.Namespace:
    """The parsed arguments; arguments no parser knows are refused by their command's parser,
    which names the command (``meanfield run: unrecognized arguments: --bogus``)."""
    args, unknown = parser.parse_known_args(argv)
    if args.command == "check":  # `meanfield check COMMAND CONFIG ...`: the command's arguments, its parser's
        unknown = check.read_command(parser, args, unknown)
    if unknown:
        parser.commands[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


def _command(argv: Sequence[str] | None) -> int:
    """Parse ``argv``, run the command and turn its exceptions into exit codes."""
    from ..collective import INPUT_ERRORS, is_collective
    from ..engine.controller import RunInterrupted

    args = _parse(build_parser(), argv)
    options = Options.from_args(args)
    if not options.memory_check:
        from ..memory import disable_guard

        disable_guard()
    try:
        code = args.handler(args, options)
    except RunInterrupted as exc:
        error(f"meanfield: {exc}")
        return exc.exit_code
    except Exception as exc:
        if isinstance(exc, BrokenPipeError) and _stdout_closed():
            raise  # not a failed run: the reader of standard output has gone
        code = 2 if isinstance(exc, INPUT_ERRORS) else 1
        text = f"error: {exc}" if code == 2 else f"error: the run failed: {type(exc).__name__}: {exc}"
        if is_collective(exc) or "mpi4py.MPI" not in sys.modules:
            error(text)
            return code
        # possibly raised on this rank alone: the others may be waiting in a collective; end them all
        from mpi4py import MPI

        print(f"{text} (on rank {MPI.COMM_WORLD.rank})", file=sys.stderr, flush=True)
        if MPI.COMM_WORLD.size > 1:
            MPI.COMM_WORLD.Abort(code)
        return code
    return code or 0
