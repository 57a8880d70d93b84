"""The study directory as a format: what every study directory holds, its marker and the one
ownership check every study command makes.

A study (``meanfield sweep``, ``convergence``, ``validate``, ``response``, ``retrieval``,
``phase``, ``fit``) writes into a directory of its own::

    study.json       the marker: format, the study (its ``kind``), when it started; a study with a
                     definition (a sweep's grid, a fit's settings) stores it, so that a rerun with
                     the same definition continues it and any other is refused
    config.toml      the resolved config the study ran (:func:`write_record`)
    metadata.json    the study's ``kind``, its facts and the run environment (:func:`write_record`)
    <study>.csv      its table (:func:`write_table`), with its pictures and its run directories

The ownership check (:func:`check_study`, made by :func:`prepare_study`) refuses any directory
that is neither missing, empty, nor a study of the same kind (and, for a study with a
definition, of the same definition), so a study never writes into a folder it does not own.
"""

from __future__ import annotations

import csv
import io
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from . import layout
from .directory import RunDirectoryError, check_creatable
from .files import write_json, write_text

#: The marker file of a study directory.
STUDY_MARKER = "study.json"
#: The ``format`` entry of study.json.
STUDY_FORMAT = "meanfield-study"


def read_study_marker(path: Path | str) -> dict[str, Any] | None:
    """study.json of a study directory, or ``None`` if there is none (or it is unreadable)."""
    try:
        marker = json.loads((Path(path) / STUDY_MARKER).read_text())
    except (OSError, ValueError):
        return None
    return marker if isinstance(marker, dict) and marker.get("format") == STUDY_FORMAT else None


def is_study(path: Path | str) -> bool:
    """Whether ``path`` is a study directory (it has a readable study.json)."""
    return read_study_marker(path) is not None


def study_definition(path: Path | str, study: str) -> dict[str, Any] | None:
    """The definition stored in ``path``'s study.json if it is a study ``study`` with one, else ``None``."""
    marker = read_study_marker(path)
    if marker is None or marker.get("kind") != study or not isinstance(marker.get("definition"), dict):
        return None
    return marker["definition"]


def check_study(path: Path | str, study: str, *, overwrite: bool = False,
                definition: dict[str, Any] | None = None) -> bool:
    """Refuse a study directory that :func:`prepare_study` may not use (nothing is written).

    Returns True when the directory already holds this study (to be continued or redone).
    """
    if str(path).strip() == "":
        raise RunDirectoryError("--out: an empty path is not a study directory")
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise RunDirectoryError(f"--out {path}: is a file, not a directory")
    if not path.exists():
        check_creatable(path)
    # a process making the same study at this moment may have left only its marker's temporary file
    if not path.is_dir() or all(p.name.startswith(f".{STUDY_MARKER}.tmp-") for p in path.iterdir()):
        return False
    marker = read_study_marker(path)
    if marker is None or marker.get("kind") != study:
        raise RunDirectoryError(f"--out {path}: the directory is not empty and is not a meanfield {study} study; "
                                "choose another directory (nothing was written)")
    if definition is not None:
        if marker.get("definition") != json.loads(json.dumps(definition)):
            raise RunDirectoryError(f"--out {path}: holds a {study} of another config or grid; choose another "
                                    "directory (nothing was written)")
    elif not overwrite:
        raise RunDirectoryError(f"--out {path}: holds a {study} study already; pass --overwrite to redo it")
    return True


def prepare_study(path: Path | str, study: str, *, overwrite: bool = False,
                  definition: dict[str, Any] | None = None) -> Path:
    """Make or reuse a study directory (rank 0): refuse anything that is not this study.

    A study directory holds the runs of a study and its tables and plots; ``study.json``
    marks it.  A missing or empty directory is made; one holding the same study is
    reused only with ``overwrite`` (its runs are then replaced one by one, each kept until its
    replacement has a checkpoint); anything else is refused and left untouched.

    A study with a ``definition`` (a JSON-able mapping, stored in study.json) is instead
    continued, without ``overwrite``, by a call with the same definition: a sweep's reruns and
    its job-array tasks share the directory (several may make it at once); another definition
    is refused.
    """
    path = Path(path)
    if check_study(path, study, overwrite=overwrite, definition=definition) and definition is not None:
        return path
    path.mkdir(parents=True, exist_ok=True)
    marker: dict[str, Any] = {"format": STUDY_FORMAT, "kind": study,
                              "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    if definition is not None:
        marker["definition"] = definition
    write_json(path / STUDY_MARKER, marker)
    return path


def extend_study(path: Path | str, definition: dict[str, Any]) -> None:
    """Replace the definition in a study's study.json by a larger one (a sweep with new grid
    values: see :mod:`meanfield.studies.sweep`), recording when; the caller has checked that
    it extends the stored one."""
    marker = read_study_marker(path)
    assert marker is not None
    write_json(Path(path) / STUDY_MARKER, {**marker, "definition": definition,
                                           "extended": time.strftime("%Y-%m-%dT%H:%M:%S%z")})


def write_record(path: Path | str, study: str, config_toml: str | None, facts: Mapping[str, Any]) -> None:
    """A study's config.toml (``config_toml``, the resolved config's text; ``None``: left as it is) and
    metadata.json (``kind``: ``study``, then ``facts``: what it did, its timings and the run
    environment), rank 0."""
    if config_toml is not None:
        write_text(Path(path) / layout.CONFIG, config_toml)
    write_json(Path(path) / layout.METADATA, {"kind": study, **facts})


def write_table(path: Path | str, rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> None:
    """A study's table as CSV (atomically): a header of ``columns`` (default: the first row's keys),
    then one line per row."""
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=list(columns if columns is not None else rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    write_text(Path(path), text.getvalue())
