"""``python -m meanfield.cli ARGS`` in a new process, without paying the libraries' imports each time.

A test session starts hundreds of ``meanfield`` commands.  Each used to be a new interpreter that
imported numpy, scipy, xarray, pandas, matplotlib and h5py again before doing a few milliseconds'
work: about a second of every command on an idle core.  :class:`CommandServer` is a process that
has imported those libraries once and forks one child per command.  The child is a process of its
own, like the one the ``meanfield`` script starts: its own working directory, environment, standard
streams (stdin from /dev/null, stdout and stderr to files), exit status and signals; it runs
``meanfield/cli/__main__.py`` as ``python -m meanfield.cli`` does (:func:`runpy.run_module`) and
ends as an interpreter does (``atexit`` handlers, buffers flushed, an uncaught exception printed
with its traceback and exit status 1).

What the child does not do afresh is import the libraries of :data:`PRELOAD`, which hold no state a
command changes (no MPI, no thread pools of their own, no meanfield module).  mpi4py, dolfinx,
PETSc, JAX and meanfield itself are imported by each command, as before: MPI is initialised in the
child, never in the server.  Commands whose subject is the interpreter itself (thread counts set
before numpy loads, the entry point, imports) and every ``mpirun`` job start a new interpreter
(``subprocess``), as users do.

Protocol: the server reads one JSON request a line on stdin (``args``, ``cwd``, ``env``,
``stdout``, ``stderr``: the files for the child's streams), forks, answers ``{"pid": ...}``, waits
for the child and answers ``{"status": ...}`` (``subprocess``'s return code: negative for a signal).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

#: Libraries the server imports once (what a small run imports besides mpi4py, dolfinx and meanfield).
PRELOAD = ("numpy", "scipy.sparse", "scipy.sparse.csgraph", "scipy.spatial", "scipy.linalg", "scipy.special",
           "scipy.optimize", "pandas", "xarray", "h5py", "h5netcdf", "matplotlib", "matplotlib.pyplot",
           "meshio", "tqdm", "ufl", "threadpoolctl")


def _serve() -> None:
    """The server's loop (run as ``python command_server.py``)."""
    import importlib

    del sys.path[0]  # this file's folder, which ``python -m`` would not put on the path
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:  # not installed here: the child imports what it needs itself
            pass
    print(json.dumps({"ready": os.getpid()}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _run_command(request)  # the child: does not return
        print(json.dumps({"pid": pid}), flush=True)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"status": os.waitstatus_to_exitcode(status)}), flush=True)


def _run_command(request: dict) -> None:
    """In the forked child: the request's directory, environment and streams, then the CLI as
    ``python -m meanfield.cli`` runs it; the interpreter's own exit ends the child."""
    import runpy

    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, request["stdout"], os.O_WRONLY),
                            (2, request["stderr"], os.O_WRONLY)):
        opened = os.open(path, flags)
        os.dup2(opened, fd)
        os.close(opened)
    sys.argv = [sys.argv[0], *request["args"]]
    sys.path.insert(0, os.getcwd())  # as ``python -m`` does
    runpy.run_module("meanfield.cli", run_name="__main__", alter_sys=True)
    sys.exit(0)


class CommandServer:
    """A server process (module docstring) for commands in the environment ``env``."""

    def __init__(self, env: dict[str, str]) -> None:
        self.process = subprocess.Popen([sys.executable, __file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        env=env, cwd=tempfile.gettempdir())
        self._received = b""
        self._reply(timeout=None)

    def run(self, args: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
        """``meanfield ARGS`` in a forked child (see :func:`subprocess.run` for what it returns and raises)."""
        command = ["meanfield", *args]
        with tempfile.TemporaryDirectory() as streams:
            out, err = Path(streams, "stdout"), Path(streams, "stderr")
            out.touch()
            err.touch()
            request = {"args": list(args), "cwd": str(cwd), "env": env, "stdout": str(out), "stderr": str(err)}
            assert self.process.stdin is not None
            self.process.stdin.write((json.dumps(request) + "\n").encode())
            self.process.stdin.flush()
            pid = self._reply(timeout=None)["pid"]
            try:
                status = self._reply(timeout=timeout)["status"]
            except subprocess.TimeoutExpired:
                os.kill(pid, signal.SIGKILL)
                self._reply(timeout=None)
                raise subprocess.TimeoutExpired(command, timeout, out.read_text(), err.read_text()) from None
            return subprocess.CompletedProcess(command, status, out.read_text(), err.read_text())

    def _reply(self, timeout: float | None) -> dict:
        """The server's next answer (:class:`subprocess.TimeoutExpired` after ``timeout`` seconds)."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        while b"\n" not in self._received:
            if timeout is not None and not select.select([fd], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired("meanfield", timeout)
            chunk = os.read(fd, 4096)
            if not chunk:
                raise RuntimeError(f"the command server ended (status {self.process.wait()})")
            self._received += chunk
        line, self._received = self._received.split(b"\n", 1)
        return json.loads(line)

    def close(self) -> None:
        """End the server."""
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            self.process.wait(timeout=30)


if __name__ == "__main__":
    _serve()
