"""A sweep directory's points: their parameters, their run directories' names, and reading them back.

A grid maps config keys to values; its points are the Cartesian product (the first key
slowest).  Point k's run directory is named by its index and ``key=value`` for each grid key
(the last part of the key unless that is ambiguous; a seed with what it seeds), e.g.
``003-beta=4,particles.seed=1``.  A sweep
directory's study.json holds the definition (its grids); :func:`sweep_points` finds the points
again from it.  Parsing ``--grid`` and planning a sweep is the study's
(:mod:`meanfield.studies.grid`, :mod:`meanfield.studies.sweep`).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .study_directory import study_definition

#: The ``kind`` of a sweep directory's study.json.
KIND = "sweep"
#: Longest value label in a point's directory name (the index keeps names unique anyway).
LABEL_LENGTH = 40


@dataclass(frozen=True)
class SweepPoint:
    """One point of a sweep.

    Attributes
    ----------
    index
        Its place in the sweep (0-based; ``--array-index``).
    parameters
        Grid key -> value at this point.
    directory
        Its run directory's name inside the sweep directory.
    """

    index: int
    parameters: dict[str, Any]
    directory: str

    @property
    def overrides(self) -> list[str]:
        """``key=value`` overrides that make the point's config from the base config."""
        return [f"{key}={toml_value(value)}" for key, value in self.parameters.items()]


def toml_value(value: Any) -> str:
    """A value as TOML text (what ``--set key=TEXT`` reads back as the same value)."""
    import tomli_w

    return tomli_w.dumps({"v": value})[len("v = "):].strip()


def cell_value(value: Any) -> Any:
    """A parameter as a table cell: scalars as they are, arrays and tables as JSON."""
    return value if isinstance(value, (bool, int, float, str)) else json.dumps(value)


def _label(value: Any) -> str:
    if isinstance(value, bool):
        text = str(value).lower()
    elif isinstance(value, float):
        text = repr(value).removesuffix(".0")
    elif isinstance(value, (int, str)):
        text = str(value)
    else:
        text = json.dumps(value)
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", text).strip("_")[:LABEL_LENGTH] or "_"


#: Last parts of keys that say too little alone: a seed is named with what it seeds (``particles.seed``,
#: ``random.seed``).
QUALIFIED = ("seed",)


def _short_keys(keys: Sequence[str]) -> dict[str, str]:
    """Each key's last part (with the part before it for :data:`QUALIFIED` ones), or the whole key
    where two keys share their short name."""
    short = [".".join(k.split(".")[-2:]) if k.split(".")[-1] in QUALIFIED else k.split(".")[-1] for k in keys]
    return {k: (s if short.count(s) == 1 else k) for k, s in zip(keys, short)}


def plan_points(grid: Mapping[str, Sequence[Any]]) -> list[SweepPoint]:
    """The points of a grid, in order (first key slowest), with their directory names."""
    keys = list(grid)
    short = _short_keys(keys)
    combos = list(itertools.product(*(grid[k] for k in keys)))
    width = len(str(max(len(combos) - 1, 0)))
    points = []
    for index, values in enumerate(combos):
        labels = ",".join(f"{short[k]}={_label(v)}" for k, v in zip(keys, values))
        points.append(SweepPoint(index, dict(zip(keys, values)), f"{index:0{width}d}-{labels}"))
    return points


def definition_points(definition: Mapping[str, Any]) -> list[SweepPoint]:
    """The points of a sweep definition: those of its first grid, then each extension's new
    combinations numbered on (module docstring)."""
    grids = definition.get("grids") or [definition["grid"]]
    points = plan_points(grids[0])
    for grid in grids[1:]:
        known = {json.dumps(p.parameters, sort_keys=True) for p in points}
        new = [p for p in plan_points(grid) if json.dumps(p.parameters, sort_keys=True) not in known]
        width = len(str(len(points) + len(new) - 1))
        for p in new:
            labels = p.directory.split("-", 1)[1]
            points.append(SweepPoint(len(points), p.parameters, f"{len(points):0{width}d}-{labels}"))
    return points


def sweep_points(path: Path | str) -> list[SweepPoint] | None:
    """The points of the sweep in directory ``path`` (from its study.json); ``None`` if it is no sweep."""
    definition = study_definition(path, KIND)
    return None if definition is None else definition_points(definition)
