"""Small, safe file operations: atomic replacement, CSV rows, npz archives.

Every file a run writes whole is written to a temporary name in the same folder, flushed
to disk and renamed over the target (:func:`atomic_write`), so a crash or a full disk
leaves either the old file or the new one, never half of one.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import fcntl
import io
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np


def atomic_write(path: Path, write: Callable[[IO[bytes]], None]) -> None:
    """Write ``path`` through ``write(binary file)`` into a temporary file, then rename it over ``path``."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def exclusive_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created if missing, never removed), waiting for it.

    Serialises a read-modify-write of a file shared by several processes (the array tasks of
    a sweep).  On a file system without locks the work runs unlocked rather than not at all.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as exc:
            if exc.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                raise
        yield
    finally:
        os.close(fd)  # releases the lock


def _write_all(fh: IO[bytes], data: bytes | memoryview) -> None:
    fh.write(data)


def write_text(path: Path, text: str) -> None:
    """Atomically write a text file (UTF-8)."""
    atomic_write(path, lambda fh: _write_all(fh, text.encode()))


def write_json(path: Path, data: Any) -> None:
    """Atomically write a JSON file (numpy scalars and arrays, paths converted; non-finite
    numbers, which JSON lacks, written as the strings "inf", "-inf", "nan")."""
    write_text(path, json.dumps(_finite(data), indent=2, default=_json_default, allow_nan=False) + "\n")


def _finite(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _finite(obj.tolist())
    if isinstance(obj, (float, np.floating)) and not np.isfinite(obj):
        return str(float(obj))
    return obj


def save_npz(path: Path, **arrays: np.ndarray) -> None:
    """Atomically write an uncompressed .npz archive."""
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)  # type: ignore[arg-type]
    atomic_write(path, lambda fh: _write_all(fh, buffer.getbuffer()))


class DamagedFileError(ValueError):
    """A file that exists but cannot be read (cut short by a crash, or not what its name says)."""


def load_npz(path: Path) -> dict[str, np.ndarray]:
    """All arrays of an .npz archive, read eagerly (the file is closed on return).

    Raises ``FileNotFoundError`` for a missing file and :class:`DamagedFileError` for one that
    cannot be read.
    """
    try:
        with np.load(path, allow_pickle=False) as data:
            return {key: data[key] for key in data.files}
    except FileNotFoundError:
        raise
    except Exception as exc:  # zipfile, numpy and OS errors of a damaged archive
        raise DamagedFileError(f"{path}: damaged or not an .npz archive ({type(exc).__name__}: {exc})") from None


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (np.integer, np.floating, np.bool_)):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def append_csv_row(path: Path, columns: list[str], row: dict[str, float]) -> None:
    """Append one row (floats written with ``repr``: exact), writing the header into a new file."""
    new = not Path(path).is_file() or Path(path).stat().st_size == 0
    with open(path, "a", newline="") as fh:
        writer = csv.writer(fh)
        if new:
            writer.writerow(columns)
        writer.writerow([repr(float(row[c])) for c in columns])
        fh.flush()
        os.fsync(fh.fileno())


def read_csv_columns(path: Path) -> tuple[dict[str, np.ndarray], int]:
    """Columns of a numeric CSV as float arrays, and how many trailing lines were unreadable.

    A line that is cut short or holds non-numbers (a write interrupted by a crash) ends the
    table: it and any later lines are skipped and counted.
    """
    if not Path(path).is_file():
        return {}, 0
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    if not rows:
        return {}, 0
    header, body = rows[0], rows[1:]
    values: list[list[float]] = []
    for row in body:
        try:
            if len(row) != len(header):
                raise ValueError
            values.append([float(v) for v in row])
        except ValueError:
            break
    data = np.array(values, dtype=float).reshape(-1, len(header))
    return {name: data[:, i] for i, name in enumerate(header)}, len(body) - len(values)


def write_csv_columns(path: Path, columns: dict[str, np.ndarray]) -> None:
    """Atomically write numeric columns as a CSV (floats with ``repr``)."""
    names = list(columns)
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(names)
    for i in range(len(next(iter(columns.values()))) if columns else 0):
        writer.writerow([repr(float(columns[n][i])) for n in names])
    write_text(path, text.getvalue())
