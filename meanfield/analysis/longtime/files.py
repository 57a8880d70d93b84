"""The files of a long-time study (CSV; one writer per table).

``<name>-clusters.csv``
    One row per cluster and output: ``t, id, theta, mass``, named as in ``meanfield
    clusters``' clusters.csv: the cluster's id, its peak's angle in (-pi, pi] rad and the
    mass of its region (:mod:`.events`; a run's: :func:`~meanfield.studies.longtime.run_history`).
``<name>-events.csv``
    ``kind, time, kept, absorbed, kept_mass, absorbed_mass``
    (:func:`~meanfield.analysis.events.write_events`, as ``meanfield clusters``' events.csv).
``<name>-states.csv``
    ``clusters, start, end, duration, lower_bound``: the metastable states (:class:`~.events.State`).
``merge-table.csv``
    One row per beta: ``beta, merges`` (merge times, space separated), ``states``
    (``k:duration`` per metastable state, ``>=`` marking a lower bound), ``final_masses``,
    ``final_centres``.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Sequence
from pathlib import Path

from ..events import write_events
from .events import PointSetHistory

#: Names of the files a study writes (tables here, pictures in :mod:`.plots`).
OWN_NAME = re.compile(r"(reference-beta[^/]+|hybrid)-(clusters|events|states)\.csv"
                      r"|merge-table\.(csv|png)|clusters\.png")


def owns(name: str) -> bool:
    """True for a file name a long-time study writes (its folder may be rewritten only when it holds such files)."""
    return OWN_NAME.fullmatch(name) is not None


def _write(path: Path, header: Sequence[str], rows: Sequence[Sequence[object]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def write_point_set_history(history: PointSetHistory, out: Path, name: str) -> list[Path]:
    """``<name>-clusters.csv``, ``<name>-events.csv`` and ``<name>-states.csv`` under ``out``."""
    clusters = [(t, int(lab), float(c), float(m))
                for t, labels, centres, masses in zip(history.times, history.labels, history.centres,
                                                      history.masses, strict=True)
                for lab, c, m in zip(labels, centres, masses, strict=True)]
    states = [(s.count, s.start, "" if s.end is None else s.end, s.duration, int(s.lower_bound))
              for s in history.states()]
    return [
        _write(out / f"{name}-clusters.csv", ("t", "id", "theta", "mass"), clusters),
        write_events(out / f"{name}-events.csv", history.events),
        _write(out / f"{name}-states.csv", ("clusters", "start", "end", "duration", "lower_bound"), states),
    ]


def write_table(rows: Sequence, out: Path) -> Path:
    """``merge-table.csv`` from :class:`~.study.BetaRow` rows."""
    def joined(values) -> str:
        return " ".join(f"{v:.6g}" for v in values)

    table = [(r.beta, joined(r.merges),
              " ".join(f"{k}:{'>=' if lower else ''}{d:.6g}" for k, _, d, lower in r.states),
              joined(r.final_masses), joined(r.final_centres)) for r in rows]
    return _write(out / "merge-table.csv", ("beta", "merges", "states", "final_masses", "final_centres"), table)
