"""convergence.csv and the printed table of a convergence study."""

from __future__ import annotations

import csv
from dataclasses import astuple, fields
from pathlib import Path

import numpy as np

from .errors import Row


def write_csv(rows: list[Row], path: Path) -> None:
    """convergence.csv, one row per level, norm and output time."""
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow([f.name for f in fields(Row)])
        for row in rows:
            writer.writerow([repr(v) if isinstance(v, float) else v for v in astuple(row)])


def read_csv(path: Path) -> list[Row]:
    """Rows of a convergence.csv."""
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        return [Row(int(r["level"]), int(r["cells"]), float(r["h"]), float(r["dt"]), r["norm"], float(r["time"]),
                    float(r["error"]), float(r["order"])) for r in reader]


def final_rows(rows: list[Row]) -> list[Row]:
    """The rows at the last output time."""
    t_end = max(r.time for r in rows)
    return [r for r in rows if r.time == t_end]


def format_table(rows: list[Row]) -> str:
    """The final-time rows as a text table."""
    lines = [f"{'level':>5} {'cells':>8} {'h':>10} {'dt':>10} {'norm':>8} {'time':>8} {'error':>11} {'order':>6}"]
    for r in final_rows(rows):
        order = "" if np.isnan(r.order) else f"{r.order:6.2f}"
        lines.append(f"{r.level:5d} {r.cells:8d} {r.h:10.4g} {r.dt:10.4g} {r.norm:>8} {r.time:8.4g} "
                     f"{r.error:11.4e} {order:>6}")
    return "\n".join(lines)
