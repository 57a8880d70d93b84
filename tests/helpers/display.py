"""One X server for the pictures of a test session: an Xvfb that the session's processes share.

ParaView's ``pvbatch`` as Debian builds it (5.11) draws through X only: it has no EGL or OSMesa
window, so ``--force-offscreen-rendering`` still opens an X window and aborts without a display.
``xvfb-run -a`` per picture chose a display number by looking for a free one and then started
Xvfb on it, racing the other xvfb-runs of pytest-xdist workers and any other X server being
started; pvbatch then sometimes got a display it could not open and aborted (SIGABRT in
``vtkXOpenGLRenderWindow::CreateAWindow``).

Here Xvfb picks its display itself (``-displayfd``: the first number whose lock file it can
create, so no other server or process holds it), listens on no TCP port (``-nolisten tcp``: a
local socket only), and is ready once it has written that number.  The first process of a
session that needs it starts it; the others (xdist workers) find it in the session's folder,
under a lock; the last to let go stops it.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: Seconds Xvfb may take to start (a loaded machine).
START_TIMEOUT = 120
#: The X servers this process started (kept so that they are waited for, not left as zombies).
_STARTED: dict[int, subprocess.Popen] = {}


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    with open(folder / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return pid not in _STARTED or _STARTED[pid].poll() is None


def _serving(state: dict | None) -> bool:
    """Whether the server ``state`` describes still runs and has its socket."""
    return (state is not None and _alive(state["pid"])
            and Path(f"/tmp/.X11-unix/X{state['display']}").exists())


def _start(xvfb: str, log: Path) -> dict:
    """Start Xvfb on a display it picks; {"pid", "display"} once it is ready."""
    read, write = os.pipe()
    with open(log, "a") as errors:
        try:
            server = subprocess.Popen([xvfb, "-displayfd", str(write), "-nolisten", "tcp", "-screen", "0",
                                       "1280x1024x24"], pass_fds=(write,), stdin=subprocess.DEVNULL,
                                      stdout=errors, stderr=errors)
        finally:
            os.close(write)
    with os.fdopen(read) as pipe:
        ready, _, _ = select.select([pipe], [], [], START_TIMEOUT)
        number = pipe.readline().strip() if ready else ""
    if not number.isdigit():
        server.kill()
        server.wait()
        raise RuntimeError(f"Xvfb did not start in {START_TIMEOUT} s: {log.read_text()[-2000:]}")
    _STARTED[server.pid] = server
    return {"pid": server.pid, "display": int(number)}


def _stop(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    if pid in _STARTED:
        _STARTED.pop(pid).wait(timeout=60)


@contextmanager
def shared_display(xvfb: str, folder: Path) -> Iterator[str]:
    """The ``DISPLAY`` of the X server shared through ``folder`` (one per test session), started
    with ``xvfb`` if none is serving; stopped when the last process using it lets go."""
    folder.mkdir(parents=True, exist_ok=True)
    state_file, me = folder / "server.json", os.getpid()
    with _locked(folder):
        state = json.loads(state_file.read_text()) if state_file.exists() else None
        if not _serving(state):
            state = {**_start(xvfb, folder / "xvfb.log"), "users": []}
        assert state is not None
        state["users"] = [pid for pid in state["users"] if _alive(pid)] + [me]
        state_file.write_text(json.dumps(state))
    try:
        yield f":{state['display']}"
    finally:
        with _locked(folder):
            state = json.loads(state_file.read_text()) if state_file.exists() else None
            if state is not None:
                state["users"] = [pid for pid in state["users"] if pid != me and _alive(pid)]
                if state["users"]:
                    state_file.write_text(json.dumps(state))
                else:
                    _stop(state["pid"])
                    state_file.unlink()
