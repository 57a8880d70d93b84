"""Targets of a fit, read from what a user gives (``--target``, ``fit.target``, ``fit.pairs``).

A target is one of

- a density expression in x, y, z (``"exp(3*x)"``), or an ``[initial]``-like table
  (``{kind = "vmf", ...}``): integrated over the cells of the run's mesh (as an initial
  density is) and normalised to mass 1;
- a run directory (``runs/other``): that PDE run's final density (the whole token
  distribution of a causal run) on its own cells, which may be another mesh of the same sphere;
- a ``.npy`` file of token samples, shape (m, d), rows on the sphere: equal weights 1/m;
- a list of numbers: the observables' target values (``--loss observables``).

:func:`check_target` checks a target's form cheaply, before anything runs;
:func:`resolve_target` makes it a :class:`~.losses.Target` on the run's mesh (collective).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..config import ConfigError
from .losses import Cells, Measure, Target

#: Rows of a token file may be off the unit sphere by this much (they are then normalised).
SPHERE_TOL = 1e-6


def _is_numbers(spec: Any) -> bool:
    return isinstance(spec, (list, tuple)) and len(spec) > 0 and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in spec)


def label(spec: Any) -> str:
    """A short name of a target for tables and pictures."""
    if isinstance(spec, dict):
        return str(spec.get("expression", spec.get("kind", "initial table")))
    if _is_numbers(spec):
        return "values " + ", ".join(f"{float(v):g}" for v in spec)
    return str(spec)


def initial_table(spec: Any, field: str) -> dict:
    """An input or target density as an ``[initial]`` table: a table as given, an expression
    as ``{kind = "expression", expression = ...}`` (``ConfigError`` naming ``field``)."""
    if isinstance(spec, dict):
        return dict(spec)
    if isinstance(spec, str) and spec.strip():
        return {"kind": "expression", "expression": spec}
    raise ConfigError(f"{field}: must be a density expression or an [initial] table, got {spec!r}")


def _tokens(path: Path, d: int, field: str) -> np.ndarray:
    try:
        points = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{field}: cannot read {path}: {exc}") from None
    if points.ndim != 2 or points.shape[0] == 0 or not np.issubdtype(points.dtype, np.number):
        raise ConfigError(f"{field}: {path} must hold an array of tokens of shape (m, d), got shape {points.shape}")
    if points.shape[1] != d:
        raise ConfigError(f"{field}: {path} holds tokens on S^{points.shape[1] - 1} (d = {points.shape[1]}); "
                          f"this run is on S^{d - 1} (d = {d})")
    points = points.astype(float)
    norms = np.linalg.norm(points, axis=1)
    if not np.all(np.isfinite(points)) or np.abs(norms - 1.0).max() > SPHERE_TOL:
        raise ConfigError(f"{field}: {path}: the tokens must lie on the unit sphere (|x| = 1), found |x| in "
                          f"[{norms.min():.6g}, {norms.max():.6g}]")
    return points / norms[:, None]


def _run(path: Path, d: int, field: str) -> Measure:
    from ..rundir.results import PDERunResult, load_run

    try:
        result = load_run(path)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{field}: cannot read the run {path}: {exc}") from None
    if not isinstance(result, PDERunResult):
        raise ConfigError(f"{field}: {path} is a particle run; give its tokens as a .npy file, or a PDE run")
    if result.centroids.shape[1] != d:
        raise ConfigError(f"{field}: {path} is a run on {result.sphere}; this run is on S{d - 1}")
    density = result.densities[-1]
    if density.ndim == 2:
        density = density.mean(axis=0)
    weights = result.areas * density
    return Measure(np.asarray(result.centroids, dtype=float), weights / weights.sum())


def check_target(spec: Any, d: int, field: str) -> None:
    """Check a target's form (file readable, tokens on this sphere, a run on this sphere)
    before anything runs; expressions are checked when the problem is built (ConfigError)."""
    if _is_numbers(spec):
        return
    if isinstance(spec, str) and spec.endswith(".npy"):
        _tokens(Path(spec), d, field)
    elif isinstance(spec, (str, Path)) and Path(spec).is_dir():
        _run(Path(spec), d, field)
    else:
        initial_table(spec, field)


def resolve_target(spec: Any, field: str, sim: Any, d: int) -> Target:
    """The target on the run's mesh: ``sim`` a :class:`~meanfield.discrete_pde.DiscretePDE`
    whose cells an expression is integrated over (collective)."""
    name = label(spec)
    if _is_numbers(spec):
        return Target(name, values=np.asarray(spec, dtype=float))
    if isinstance(spec, str) and spec.endswith(".npy"):
        points = _tokens(Path(spec), d, field)
        return Target(name, Measure(points, np.full(len(points), 1.0 / len(points))))
    if isinstance(spec, (str, Path)) and Path(spec).is_dir():
        return Target(name, _run(Path(spec), d, field))
    from ..initial import InitialDensityError, make_initial_density

    try:
        density = make_initial_density(initial_table(spec, field), d)
        state = sim.scheme.initial_state(lambda p: density.at(p, 0.5))
    except (InitialDensityError, ValueError) as exc:
        raise ConfigError(f"{field}: {exc}") from None
    centroids, areas = sim.owned_cells()
    return Target(name, Cells(centroids, areas, sim.scheme.cell_averages(state), sim.comm).gathered())
