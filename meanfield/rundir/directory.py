"""Run directories that never lose anything: safe targets, a lock, overwrites that can be undone.

Rules (rank 0 applies them; every function here is serial):

* A target directory must be missing, empty, or a meanfield run.  A non-empty directory that
  is not a run is refused: nothing in it is touched.  An existing run is refused unless the
  caller overwrites it (``--overwrite``) or resumes it.
* A run holds an exclusive lock on ``.lock`` while it runs (``flock``: released by the
  operating system however the process ends, ``kill -9`` included), so two runs cannot share
  a directory; a run whose metadata says ``running`` but whose lock is free was killed.
* Overwriting moves the old run's own files (:func:`~meanfield.rundir.layout.own_entries`)
  into ``.meanfield-previous/`` and deletes them only once the new run has written its first
  checkpoint (:meth:`RunDirectory.commit`); if the new run fails before that, they are put
  back (:meth:`RunDirectory.rollback`), and if it is killed before that, the next open of the
  directory puts them back.  Files the program did not write are never moved or deleted.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import platform
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import layout
from .files import write_json


class RunDirectoryError(ValueError):
    """A run directory that cannot be used as asked; nothing was written."""


class RunLockedError(RunDirectoryError):
    """Another process holds the run directory's lock."""


#: Paths locked by this process (flock is per open file; this also catches a second run in
#: the same process on file systems where flock is emulated per process).
_HELD: set[str] = set()


def read_metadata(run_dir: Path) -> dict[str, Any] | None:
    """metadata.json of a run directory, or ``None`` if absent or unreadable."""
    try:
        data = json.loads((Path(run_dir) / layout.METADATA).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def metadata_problem(run_dir: Path) -> str | None:
    """Why metadata.json of ``run_dir`` is not a run's: ``"missing"``, ``"damaged (...)"``; ``None`` if it is fine."""
    file = Path(run_dir) / layout.METADATA
    if not file.is_file():
        return "missing"
    try:
        data = json.loads(file.read_text())
    except (OSError, ValueError) as exc:
        return f"damaged ({type(exc).__name__}: {str(exc)[:80]})"
    if not isinstance(data, dict) or data.get("format") != layout.FORMAT:
        return "damaged (not the JSON of a meanfield run)"
    return None


def looks_like_run(run_dir: Path) -> bool:
    """True if ``run_dir`` holds a run's config.toml and a state (a checkpoint or snapshots), whatever its metadata."""
    run_dir = Path(run_dir)
    states = [run_dir / layout.CHECKPOINT, run_dir / layout.CHECKPOINT_PREVIOUS]
    return (run_dir / layout.CONFIG).is_file() and (any(p.is_file() for p in states)
                                                    or bool(layout.snapshot_files(run_dir)))


def not_a_run_message(run_dir: Path) -> str:
    """One line saying why ``run_dir`` is not a readable run directory, and how to recover when that is possible."""
    run_dir = Path(run_dir)
    if not run_dir.exists():
        return f"{run_dir}: no such directory"
    if not run_dir.is_dir():
        return f"{run_dir}: is a file, not a run directory"
    problem = metadata_problem(run_dir)
    if problem is not None and looks_like_run(run_dir):
        aside = f"move it aside (mv {run_dir / layout.METADATA} {run_dir / layout.METADATA}.damaged), then " \
            if problem != "missing" else ""
        return (f"{run_dir / layout.METADATA}: {problem}, but config.toml and the run's state are there: {aside}"
                f"`meanfield resume {run_dir}` writes a new metadata.json from config.toml and the checkpoint (the "
                "record of earlier segments is lost)")
    return f"{run_dir} is not a meanfield run directory (no metadata.json of a run)"


def is_run(run_dir: Path) -> bool:
    """True if ``run_dir`` holds a meanfield run (its metadata.json says so)."""
    meta = read_metadata(run_dir)
    return meta is not None and meta.get("format") == layout.FORMAT


def classify(run_dir: Path) -> str:
    """``"missing"``, ``"file"`` (not a directory), ``"empty"``, ``"run"`` or ``"foreign"``."""
    run_dir = Path(run_dir)
    if not run_dir.exists():
        return "missing"
    if not run_dir.is_dir():
        return "file"
    if is_run(run_dir):
        return "run"
    entries = [p.name for p in run_dir.iterdir()]
    return "empty" if set(entries) <= {layout.LOCK} else "foreign"


def lock_state(run_dir: Path) -> str:
    """``"held"`` if a live process holds the run's lock, ``"free"``, or ``"unknown"`` (cannot tell)."""
    lock = Path(run_dir) / layout.LOCK
    if str(lock.resolve()) in _HELD:
        return "held"
    if not lock.exists():
        return "free"
    try:
        fd = os.open(lock, os.O_RDWR)
    except OSError:
        return "unknown"
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return "free"
    except BlockingIOError:
        return "held"
    except OSError:
        return "unknown"
    finally:
        os.close(fd)


def effective_status(run_dir: Path, metadata: dict[str, Any]) -> str:
    """The run's status; ``"killed"`` when metadata says running but no process holds the lock."""
    status = str(metadata.get("status", "unknown"))
    if status == "running" and lock_state(run_dir) == "free":
        return "killed"
    return status


def check_creatable(path: Path | str, option: str = "--out") -> None:
    """Refuse a missing output ``path`` (a folder, or a file) that cannot be made: a file among
    its parents, or a parent where nothing can be made (read-only, ``/proc``).  The nearest
    existing parent is tried with a directory made and removed at once, the only test that
    holds for root and for special file systems alike.

    Raises
    ------
    RunDirectoryError
        Naming ``option`` (``--out``, ``-o``), the parent and why.
    """
    path = Path(path)
    parent = path.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise RunDirectoryError(f"{option} {path}: {parent} is a file, not a directory")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".meanfield-probe-", dir=parent))
    except OSError as exc:
        raise RunDirectoryError(f"{option} {path}: nothing can be made in {parent} ({exc.strerror})") from None


def check_target(run_dir: Path | str, *, overwrite: bool = False, locked_here: bool = False) -> str:
    """Refuse a target directory that a new run may not use (module rules); returns what it found there.

    ``locked_here``: this process already holds the directory's lock (skip the lock test).

    Raises
    ------
    RunDirectoryError
        With a message naming the directory and what to do instead.
    """
    if str(run_dir).strip() == "":
        raise RunDirectoryError("--out: an empty path is not a run directory")
    run_dir = Path(run_dir)
    found = classify(run_dir)
    if not run_dir.exists():
        check_creatable(run_dir)
    if found == "file":
        raise RunDirectoryError(f"--out {run_dir}: is a file, not a directory")
    if found == "foreign":
        raise RunDirectoryError(f"--out {run_dir}: the directory is not empty and is not a meanfield run; "
                                "choose another directory (nothing was written)")
    if found == "run":
        if not locked_here and lock_state(run_dir) == "held":
            raise RunLockedError(f"--out {run_dir}: a run is in progress there (locked by {_lock_owner(run_dir)})")
        meta = read_metadata(run_dir) or {}
        status = "killed" if meta.get("status") == "running" else str(meta.get("status", "unknown"))
        if not overwrite:
            raise RunDirectoryError(f"--out {run_dir}: holds a meanfield run (status {status}); "
                                    f"pass --overwrite to replace it, or `meanfield resume {run_dir}` to continue it")
    return found


def _lock_owner(run_dir: Path) -> str:
    try:
        return (Path(run_dir) / layout.LOCK).read_text().strip() or "another process"
    except OSError:
        return "another process"


class RunDirectory:
    """A run directory opened by rank 0 for writing, holding its lock (module docstring).

    Use :meth:`create` for a new run and :meth:`open_existing` to resume one; call
    :meth:`close` (or use it as a context manager) to release the lock.

    Attributes
    ----------
    path
        The directory.
    metadata
        The contents of metadata.json as last written.
    """

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir)
        self.metadata: dict[str, Any] = {}
        self._fd: int | None = None
        self._key = ""
        self._previous: Path | None = None

    # -- opening ---------------------------------------------------------------------------
    @classmethod
    def create(cls, run_dir: Path | str, *, overwrite: bool = False) -> RunDirectory:
        """Prepare a directory for a new run: refuse or lock, set an old run aside, make snapshots/."""
        run_dir = Path(run_dir)
        check_target(run_dir, overwrite=overwrite)  # before anything is written
        run_dir.mkdir(parents=True, exist_ok=True)
        rundir = cls(run_dir)
        rundir._lock()
        try:
            rundir._restore_interrupted_overwrite()
            found = check_target(run_dir, overwrite=overwrite, locked_here=True)
            if found == "run":
                rundir._set_aside_previous()
            (run_dir / layout.SNAPSHOTS).mkdir(exist_ok=True)
        except BaseException:
            rundir.close()
            raise
        return rundir

    @classmethod
    def open_existing(cls, run_dir: Path | str, *, run_type: str | None = None) -> RunDirectory:
        """Open an existing run for resuming it (locked); refuses anything that is not a run.

        ``run_type``: a run whose metadata.json is missing (:func:`looks_like_run`) is accepted,
        and a new metadata.json of a run of this type is written (status ``killed``).
        """
        run_dir = Path(run_dir)
        rebuild = run_type is not None and metadata_problem(run_dir) == "missing" and looks_like_run(run_dir)
        if classify(run_dir) != "run" and not rebuild:
            raise RunDirectoryError(not_a_run_message(run_dir))
        rundir = cls(run_dir)
        rundir._lock()
        try:
            rundir._restore_interrupted_overwrite()
            rundir.metadata = read_metadata(run_dir) or {}
            if rebuild:
                rundir.update_metadata(kind=run_type, status="killed", segments=[],
                                       metadata_rebuilt=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
        except BaseException:
            rundir.close()
            raise
        return rundir

    def _lock(self) -> None:
        lock = self.path / layout.LOCK
        self._key = str(lock.resolve())
        if self._key in _HELD:
            raise RunLockedError(f"{self.path}: another run in this process is using the directory")
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise RunLockedError(f"{self.path}: a run is in progress there (locked by {_lock_owner(self.path)})") \
                from None
        except OSError as exc:  # a file system without locks: run unlocked rather than not at all
            if exc.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                os.close(fd)
                raise
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()} on {platform.node()} since {time.strftime('%Y-%m-%dT%H:%M:%S')}\n".encode())
        self._fd = fd
        _HELD.add(self._key)

    def close(self) -> None:
        """Release the lock (the lock file is removed)."""
        if self._fd is None:
            return
        (self.path / layout.LOCK).unlink(missing_ok=True)
        os.close(self._fd)
        self._fd = None
        _HELD.discard(self._key)

    def __enter__(self) -> RunDirectory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- overwriting -----------------------------------------------------------------------
    def _set_aside_previous(self) -> None:
        previous = self.path / layout.PREVIOUS
        previous.mkdir()
        for entry in layout.own_entries(self.path):
            target = previous / entry.relative_to(self.path)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(entry, target)
        self._previous = previous

    def _restore_interrupted_overwrite(self) -> None:
        """An overwrite killed before its first checkpoint left the old run aside: put it back
        (or, if the new run did reach its checkpoint, finish deleting the old one)."""
        previous = self.path / layout.PREVIOUS
        if not previous.is_dir():
            return
        if (self.path / layout.CHECKPOINT).is_file():
            shutil.rmtree(previous)
        else:
            self._previous = previous
            self.rollback()

    def commit(self) -> None:
        """The new run has its first checkpoint: delete the overwritten run's files."""
        if self._previous is not None:
            shutil.rmtree(self._previous, ignore_errors=True)
            self._previous = None

    def rollback(self) -> None:
        """The new run failed before its first checkpoint: remove its files, restore the old run's."""
        previous, self._previous = self._previous, None
        if previous is None:
            return
        for entry in layout.own_entries(self.path):
            entry.unlink()
        for entry in sorted(p for p in previous.rglob("*") if p.is_file()):
            target = self.path / entry.relative_to(previous)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(entry, target)
        shutil.rmtree(previous)

    @property
    def overwriting(self) -> bool:
        """True while an overwritten run's files are set aside."""
        return self._previous is not None

    # -- metadata --------------------------------------------------------------------------
    def update_metadata(self, **entries: Any) -> None:
        """Merge entries into metadata.json and rewrite it atomically."""
        self.metadata.update(entries)
        self.metadata.setdefault("format", layout.FORMAT)
        self.metadata.setdefault("format_version", layout.FORMAT_VERSION)
        write_json(self.path / layout.METADATA, self.metadata)


def record_failure(run_dir: Path, error: str) -> None:
    """Mark a run failed from any rank (read-modify-write of metadata.json), best effort.

    Used by a rank that fails alone inside a collective step, just before it aborts the job:
    rank 0 is then waiting in a collective and writes nothing itself.
    """
    meta = read_metadata(run_dir)
    if meta is None:
        return
    meta.update(status="failed", error=error)
    try:
        write_json(Path(run_dir) / layout.METADATA, meta)
    except OSError:
        pass


def check_output_folder(folder: Path | str, owns: Callable[[str], bool], what: str, *,
                        overwrite: bool = False) -> Path:
    """Refuse a folder for derived outputs (pictures, tables) that holds anything else, or
    holds such outputs already when not ``overwrite``.

    ``owns(name)`` says whether a file name is one the caller writes; the folder must be missing,
    empty, or hold only such files, so rewriting it never overwrites a file the program did not
    write; files it owns are replaced only with ``overwrite``.  Returns the folder as a Path
    (not created).
    """
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise RunDirectoryError(f"--out {folder}: is a file, not a folder")
    if not folder.exists():
        check_creatable(folder)
    if folder.is_dir():
        foreign = sorted(p.name for p in folder.iterdir() if not owns(p.name))
        if foreign:
            raise RunDirectoryError(f"--out {folder}: holds files that are not {what} ({', '.join(foreign[:3])}); "
                                    "choose another folder")
        if not overwrite and any(folder.iterdir()):
            raise RunDirectoryError(f"--out {folder}: holds {what} already; pass --overwrite to replace them")
    return folder
