"""The CLI in-process and as a fresh process: small cases and the check that bad input is refused."""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
from collections.abc import Mapping
from functools import cache
from pathlib import Path

from meanfield.cli import main

from .command_server import CommandServer
from .mpi import mpirun

REPO = Path(__file__).resolve().parents[2]
#: Seconds a command of :func:`cli` may take.
TIMEOUT = 120

S2 = 'name = "x"\n[mesh]\nsphere = "S2"\nresolution = 1\n[time]\nt_final = 0.2\noutputs = 1\n'
S1 = 'name = "x"\n[mesh]\nsphere = "S1"\nresolution = 32\n[time]\nt_final = 0.2\noutputs = 1\n'


def refused(tmp_path: Path, capsys, text: str, field: str, *extra: str, command: str = "run") -> None:
    """``meanfield COMMAND case.toml --out out --quiet EXTRA`` with ``text`` as case.toml: exit 2,
    one line on stderr naming ``field``, nothing on stdout, no ``out``."""
    cfg = tmp_path / "case.toml"
    cfg.write_text(text)
    out = tmp_path / "out"
    args = [command, str(cfg), "--out", str(out), "--quiet", *extra]
    assert main(args) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and field in lines[0], captured.err
    assert captured.out == "" and not out.exists()


def cli_environment(environment: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a fresh ``meanfield`` (from this process's, or from ``environment``): this
    checkout first on the path, the memory check on."""
    out = dict(os.environ if environment is None else environment)
    out["PYTHONPATH"] = os.pathsep.join([str(REPO), out.get("PYTHONPATH", "")])
    out.pop("MEANFIELD_MEMORY_CHECK", None)
    return out


#: The command server's environment: this process's before any test changed it (this module is
#: imported when the tests are collected).
SERVER_ENVIRONMENT = cli_environment()


#: Variables read only after the fork, by what each command imports itself, that the test process
#: sets when it imports the same in-process: PETSc's options (meanfield, at its first dolfinx import)
#: and JAX's (at its import).
SET_ON_IMPORT = ("PETSC_OPTIONS", "KMP_DUPLICATE_LIB_OK", "TF_CPP_MIN_LOG_LEVEL", "TPU_SKIP_MDS_QUERY")


def read_before_the_fork(environment: Mapping[str, str]) -> dict[str, str]:
    """The variables of ``environment`` that a forked child could not honour: all but pytest's
    per-test variable, meanfield's own (``MEANFIELD_*``) and :data:`SET_ON_IMPORT`."""
    return {k: v for k, v in environment.items()
            if k != "PYTEST_CURRENT_TEST" and k not in SET_ON_IMPORT and not k.startswith("MEANFIELD_")}


@cache
def command_server() -> CommandServer:
    """This test process's :class:`~.command_server.CommandServer` (started at the first command)."""
    server = CommandServer(SERVER_ENVIRONMENT)
    atexit.register(server.close)
    return server


def cli(args: list[str], cwd: Path, ranks: int = 1, timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    """``meanfield ARGS`` in a new process in ``cwd``, importing this checkout, with the memory check
    on: forked by the :func:`command_server` on one rank, a new interpreter per rank under
    ``mpirun -n ranks``, and a new interpreter on one rank too where a test has changed the
    environment (a variable read as the interpreter or a library starts, such as ``PYTHONPATH``
    with a ``sitecustomize`` hook, would not reach a forked child).  A command still running after
    ``timeout`` seconds is killed (:class:`subprocess.TimeoutExpired`)."""
    environment = cli_environment()
    if ranks == 1 and read_before_the_fork(environment) == read_before_the_fork(SERVER_ENVIRONMENT):
        return command_server().run(args, cwd, environment, timeout)
    launcher = [str(mpirun()), "-n", str(ranks)] if ranks > 1 else []
    return subprocess.run([*launcher, sys.executable, "-m", "meanfield.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env=environment)


def cli_to_closed_pipe(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """``meanfield ARGS`` as :func:`cli`, its standard output a pipe whose reader has already gone
    (closed before the command starts, so that every write it makes finds no reader)."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run([sys.executable, "-m", "meanfield.cli", *args], cwd=cwd, stdout=write,
                              stderr=subprocess.PIPE, text=True, timeout=TIMEOUT, env=cli_environment())
    finally:
        os.close(write)
