"""``meanfield info STUDY``: what a sweep or study folder holds, how far it got and what it found.

A study folder is marked by study.json (:mod:`meanfield.rundir.study_directory`).
Its facts (:func:`describe_study`): the kind and start, its runs by status (a sweep's points,
pending ones included; another study's run directories: the PDE runs, the particle runs), the
runs that failed or are running, what it found where it has a table of results (a validation's
verdict per metric, a convergence study's observed orders at the finest levels, a response
study's values), and its files.  :func:`format_study` prints them for people.
"""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path
from typing import Any

from ..rundir.directory import classify, effective_status, read_metadata
from ..rundir.study_directory import read_study_marker
from ..rundir.sweeps import sweep_points
from ..wording import counted


def _run_status(path: Path) -> str:
    return effective_status(path, read_metadata(path) or {})


def _runs(path: Path) -> dict[str, str]:
    """The run directories of a study folder (two levels deep: ``pde/``, ``particles/n100-s0/``) by status."""
    found = {}
    for folder in sorted(p for p in path.iterdir() if p.is_dir()):
        if classify(folder) == "run":
            found[folder.name] = _run_status(folder)
        else:
            found.update({f"{folder.name}/{sub.name}": _run_status(sub) for sub in sorted(folder.iterdir())
                          if sub.is_dir() and classify(sub) == "run"})
    return found


def _sweep_runs(path: Path) -> dict[str, str]:
    """A sweep's points by status (``pending``: no run yet)."""
    points = sweep_points(path) or []
    found = {}
    for point in points:
        folder = path / point.directory
        kind = classify(folder)
        found[point.directory] = "pending" if kind in ("missing", "empty") else \
            _run_status(folder) if kind == "run" else "foreign"
    return found


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _findings(path: Path, kind: str) -> list[str]:
    """What the study found, one line each, from its table of results (none yet: nothing)."""
    if kind == "validation" and (path / "summary.csv").is_file():
        return [f"{row['metric']}: {row['verdict']}" for row in _rows(path / "summary.csv") if "verdict" in row]
    if kind == "convergence" and (path / "convergence.csv").is_file():
        rows = _rows(path / "convergence.csv")
        t_end = max(float(r["time"]) for r in rows)
        finest = max(int(r["level"]) for r in rows)
        return [f"{r['norm']} error {float(r['error']):.3g} at level {finest}, observed order {float(r['order']):.2f}"
                for r in rows if float(r["time"]) == t_end and int(r["level"]) == finest]
    if kind == "response" and (path / "response.csv").is_file():
        return [f"{r['observable']} at t = {float(r['t']):g}: value {float(r['value']):.6g}, "
                f"n_var {float(r['n_var']):.4g}" for r in _rows(path / "response.csv")]
    return []


def describe_study(path: str | Path) -> dict[str, Any]:
    """The facts of a study folder (module docstring): ``path``, ``kind``, ``started``, ``runs``
    (name -> status), ``counts`` (status -> how many), ``findings`` (lines) and ``files`` (name -> bytes)."""
    path = Path(path)
    marker = read_study_marker(path) or {}
    kind = str(marker.get("kind"))
    runs = _sweep_runs(path) if kind == "sweep" else _runs(path)
    return {"path": str(path), "kind": kind, "started": marker.get("started"), "runs": runs,
            "counts": dict(Counter(runs.values())), "findings": _findings(path, kind),
            "files": {p.name: p.stat().st_size for p in sorted(path.iterdir()) if p.is_file()}}


def format_study(facts: dict[str, Any]) -> str:
    """The facts of :func:`describe_study` as a few aligned lines."""
    runs, counts = facts["runs"], facts["counts"]
    what = "points" if facts["kind"] == "sweep" else "runs"
    lines = [f"study:      {facts['kind']} in {facts['path']} (started {facts.get('started') or 'unknown'})",
             f"{what + ':':<12}{len(runs)}" + (": " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
                                                if runs else "")]
    for status in ("failed", "killed", "running", "interrupted", "foreign"):
        named = [name for name, s in runs.items() if s == status]
        if named:
            lines.append(f"{status + ':':<12}" + ", ".join(named[:8]) + (f" and {len(named) - 8} more"
                                                                         if len(named) > 8 else ""))
    findings = facts["findings"]
    if findings:
        lines.append("found:      " + findings[0])
        lines += [f"            {line}" for line in findings[1:]]
    else:
        lines.append("found:      nothing yet (no table of results)" if facts["kind"] != "sweep" else
                     "found:      `meanfield collect` gathers the points' results into one table")
    lines.append(f"files:      {counted(len(facts['files']), 'file')}: {', '.join(facts['files'])}")
    return "\n".join(lines)
