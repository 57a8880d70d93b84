"""The arguments most subcommands share, declared once and read once into :class:`Options`."""

from __future__ import annotations

import argparse
from typing import Any, NamedTuple, Protocol


class Subparsers(Protocol):
    """What a subcommand module's ``add_parser`` receives: the ``add_subparsers`` of ``meanfield``."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        """The new subcommand's parser (:meth:`argparse.ArgumentParser.add_subparsers`)."""


class Options(NamedTuple):
    """The shared arguments of a command, read once from its parsed arguments and handed to its action.

    A subcommand that does not take one of them gets its default (None, no overrides, False, True).
    (A named tuple rather than a dataclass: ``dataclasses`` would double the import time of this package.)

    Attributes
    ----------
    out
        ``--out``: the run, study or picture folder (None: the default named after the config).
    overrides
        ``--set SECTION.KEY=VALUE``, in the order given.
    quiet
        ``--quiet``: no progress, log or summary on the terminal.
    overwrite
        ``--overwrite``: replace the command's own earlier results.
    memory_check
        False with ``--no-memory-check``: run even when the memory estimate exceeds what is available.
    """

    out: str | None
    overrides: list[str]
    quiet: bool
    overwrite: bool
    memory_check: bool

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Options:
        """The shared arguments of ``args`` (defaults for those its subcommand does not take)."""
        return cls(out=getattr(args, "out", None), overrides=list(getattr(args, "set", [])),
                   quiet=getattr(args, "quiet", False), overwrite=getattr(args, "overwrite", False),
                   memory_check=not getattr(args, "no_memory_check", False))

    @property
    def comm(self):
        """The communicator the command runs on: every rank of ``mpirun`` (starts MPI)."""
        from mpi4py import MPI

        return MPI.COMM_WORLD

    def keywords(self) -> dict[str, Any]:
        """``out``, ``overrides``, ``quiet`` and ``overwrite``: the keywords the API's runs and studies share."""
        return {"out": self.out, "overrides": self.overrides, "quiet": self.quiet, "overwrite": self.overwrite}


def given_settings(args: argparse.Namespace, names: tuple[str, ...]) -> dict[str, Any]:
    """The options among ``names`` the command line gave, as keyword arguments; those left out
    take the API's defaults."""
    return {name: getattr(args, name) for name in names if getattr(args, name) is not None}


def add_common(p: argparse.ArgumentParser, out_help: str = "output directory (default: under runs/)") -> None:
    """``--out``, ``--overwrite``, ``--set``, ``--quiet`` and ``--no-memory-check`` of a command that runs."""
    p.add_argument("--out", help=out_help)
    add_overwrite(p, "replace an earlier run in --out (kept until the new run's first checkpoint)")
    add_set(p)
    add_quiet(p)
    add_memory_check(p)


def add_overwrite(p: argparse.ArgumentParser, text: str) -> None:
    """``--overwrite``, ``text`` saying what it replaces."""
    p.add_argument("--overwrite", action="store_true", help=text)


def add_quiet(p: argparse.ArgumentParser, text: str = "no progress or log on the terminal") -> None:
    """``--quiet``, ``text`` saying what it silences."""
    p.add_argument("--quiet", action="store_true", help=text)


def add_memory_check(p: argparse.ArgumentParser) -> None:
    """``--no-memory-check``."""
    p.add_argument("--no-memory-check", action="store_true",
                   help="run even when the memory estimate exceeds the available memory (also: "
                        "MEANFIELD_MEMORY_CHECK=off)")


def add_set(p: argparse.ArgumentParser) -> None:
    """``--set SECTION.KEY=VALUE``, repeatable."""
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override a config value (TOML syntax), repeatable")
