"""A sweep's grid from the command line (``--grid key=v1,v2,...``) and its extension by a later sweep.

The points of a grid and their run directories' names are the sweep directory's format
(:mod:`meanfield.rundir.sweeps`); the sweep driver (:mod:`meanfield.studies.sweep`) plans and
runs them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..config import ConfigError, parse_override


def split_values(text: str) -> list[str]:
    """``v1,v2,...`` split at the commas outside brackets, braces and quotes."""
    parts, depth, quote, start = [], 0, "", 0
    for i, char in enumerate(text):
        if quote:
            quote = "" if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    return [p.strip() for p in [*parts, text[start:]]]


def parse_grid(specs: Sequence[str]) -> dict[str, list[Any]]:
    """``["model.beta=1,4,9", ...]`` -> ``{"model.beta": [1, 4, 9], ...}`` (values read as TOML, else text).

    Raises
    ------
    ConfigError
        A spec without ``=``, an empty value, a key given twice.
    """
    grid: dict[str, list[Any]] = {}
    for spec in specs:
        if "=" not in spec:
            raise ConfigError(f"--grid {spec!r}: expected section.key=v1,v2,...")
        key, text = (s.strip() for s in spec.split("=", 1))
        values = split_values(text)
        if not key or any(v == "" for v in values):
            raise ConfigError(f"--grid {spec!r}: expected section.key=v1,v2,... without empty values")
        if key in grid:
            raise ConfigError(f"--grid {key}: given twice")
        grid[key] = [parse_override(f"{key}={v}")[1] for v in values]
    return grid


def extended_definition(stored: Mapping[str, Any], definition: Mapping[str, Any]) -> dict[str, Any] | None:
    """The stored sweep definition extended by the grid values of ``definition`` (the same
    config, runs and grid keys, every stored value among the new ones), or ``None`` when
    ``definition`` is another sweep.  Unchanged when it brings no new value."""
    new = json.loads(json.dumps(definition))
    rest = {k: v for k, v in new.items() if k != "grid"}
    if {k: v for k, v in stored.items() if k not in ("grid", "grids")} != rest or \
            list(stored["grid"]) != list(new["grid"]):
        return None
    if any(v not in new["grid"][k] for k, values in stored["grid"].items() for v in values):
        return None
    grid = {k: values + [v for v in new["grid"][k] if v not in values] for k, values in stored["grid"].items()}
    if grid == stored["grid"]:
        return dict(stored)
    return {**stored, "grid": grid, "grids": [*(stored.get("grids") or [stored["grid"]]), grid]}
