"""What the plots read from a run: the one place that knows the run objects' attribute names.

A run result's :class:`~meanfield.rundir.header.RunHeader` (``header``) gives its name, layers,
own observables and model; a result without one (duck-typed) is read for them from its
``config`` and ``metadata``.  A PDE run result has ``sphere`` (its name), ``vertices``, ``cells``,
``times``, ``densities`` (T, C), ``vertex_densities`` (T, C, nv) or None, ``observables``,
``path`` and, for a hybrid run, ``atoms`` (one :class:`~meanfield.atoms.Atoms` per output, or
None), and for a causal run ``positions`` (M,) with ``densities`` (T, M, C),
``vertex_densities`` (T, M, C, nv) and ``observables_by_position``; a particle run result has
``times``, ``points`` (T, n, d), ``observables`` and ``path``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..atoms import Atoms
from ..masks import NO_MASK, Mask
from ..rundir.header import RunHeader
from ..spheres import Sphere, sphere_named, sphere_of_dimension

NEEDED = {"pde": ("sphere", "vertices", "cells", "times", "densities"), "particles": ("times", "points")}


@dataclass(frozen=True)
class RunData:
    """A run as the plots see it.

    Attributes
    ----------
    run_type
        "pde" or "particles".
    sphere
        The descriptor of the run's sphere (:mod:`meanfield.spheres`); None for tokens in
        dimension d > 3 (time series only).
    name
        The run's name, for titles.
    times
        (T,) output times.
    observables
        Column name -> (rows,) array, "t" included; "clusters" when the run has them.
    vertices, cells, densities, vertex_densities
        PDE runs: (V, d) mesh vertices, (C, d) cells, (T, C) cell averages, (T, C, d) or
        None: values at each cell's vertices (DG1).
    points
        Particle runs: (T, n, d) token positions.
    atoms
        Hybrid PDE runs: the point masses of each output (:class:`~meanfield.atoms.Atoms`); else None.
    layer_ends
        Times before the last output where a layer of ``[[model.layers]]`` ends and the next begins.
    own_observables
        The run's own observables (``[[output.observables]]``): column name -> expression.
    model
        The model's parameters in words, for titles (:func:`model_label`).
    positions
        Causal runs: (M,) the slices' token positions; ``densities`` and ``vertex_densities``
        are then the whole token distribution's (the mean over the slices), and
        ``slice_densities`` (T, M, C), ``slice_vertex_densities`` (T, M, C, nv) or None and
        ``by_position`` (observable -> (T, M)) each slice's.
    mask
        The run's mask (:mod:`meanfield.masks`): it says what the density pictures show
        (:attr:`heading`) and which pictures of its slices are drawn
        (:class:`~meanfield.plotting.run_plots.SlicePictures`).
    """

    run_type: str
    sphere: Sphere | None
    name: str
    times: np.ndarray
    observables: dict[str, np.ndarray] = field(default_factory=dict)
    vertices: np.ndarray | None = None
    cells: np.ndarray | None = None
    densities: np.ndarray | None = None
    vertex_densities: np.ndarray | None = None
    points: np.ndarray | None = None
    atoms: list[Atoms] | None = None
    layer_ends: tuple[float, ...] = ()
    own_observables: dict[str, str] = field(default_factory=dict)
    positions: np.ndarray | None = None
    slice_densities: np.ndarray | None = None
    slice_vertex_densities: np.ndarray | None = None
    by_position: dict[str, np.ndarray] = field(default_factory=dict)
    model: str = ""
    mask: Mask = NO_MASK

    @property
    def title(self) -> str:
        """The run's name and its model, for titles."""
        return f"{self.name}: {self.model}" if self.model else self.name

    @property
    def heading(self) -> str:
        """The title of the density pictures: :attr:`title`, and for a causal run what they show
        (the whole token distribution: the mean over the positions)."""
        return self.mask.heading(self.title)

    def point_masses(self) -> list[tuple[np.ndarray, np.ndarray]] | None:
        """Positions (k, d) and masses (k,) of the atoms of every output; None for a run without atoms."""
        return None if self.atoms is None else [(a.positions, a.masses) for a in self.atoms]

    def frame(self, i: int) -> np.ndarray:
        """The density of output ``i``: vertex values when the run has them, else cell averages."""
        return self.frames()[i]

    def frames(self) -> np.ndarray:
        """The densities of all outputs of a PDE run: (T, C, nv) vertex values when the run has
        them, else (T, C) cell averages."""
        if self.vertex_densities is not None:
            return self.vertex_densities
        if self.densities is None:
            raise ValueError(f"a {self.run_type} run has no densities")
        return self.densities


def corner_values(cells: np.ndarray, values: np.ndarray) -> np.ndarray:
    """(C, nv) values at each cell's vertices from cell averages (C,) or vertex data (C, nv) (DG1).

    ``nv`` is the number of vertices of a cell: 3 on S^2, 2 on S^1.
    """
    values = np.asarray(values, float)
    n, nv = cells.shape
    if values.shape == (n,):
        return np.repeat(values[:, None], nv, axis=1)
    if values.shape == (n, nv):
        return values
    raise ValueError(f"density of shape {values.shape}: expected ({n},) or ({n}, {nv})")


def _observables(result: Any) -> dict[str, np.ndarray]:
    """The run's observables, with the cluster counts of a particle run's diagnostics.csv added."""
    from ..rundir.files import read_csv_columns

    out = {k: np.asarray(v) for k, v in (getattr(result, "observables", None) or {}).items()}
    path = getattr(result, "path", None)
    if "clusters" not in out and path is not None:
        diagnostics, _ = read_csv_columns(Path(path) / "diagnostics.csv")
        t = diagnostics.get("t")
        if "clusters" in diagnostics and "t" in out and t is not None and np.array_equal(t, out["t"]):
            out["clusters"] = diagnostics["clusters"]
    return out


def _layer_ends(header: RunHeader, times: np.ndarray) -> tuple[float, ...]:
    """The ends of the run's layers (its config's ``[[model.layers]]``) before its last output."""
    last = float(times[-1]) if len(times) else 0.0
    return tuple(t for t in header.layer_ends if t < last)


def model_label(model: Mapping[str, Any]) -> str:
    """The model of a run (its config's ``[model]`` table) in words: ``softmax attention, β = 9``,
    with the velocity when it is not attention, the mask, layers and heads where it has them."""
    if not model:
        return ""
    velocity = model.get("velocity", "attention")
    if velocity != "attention":
        return f"{velocity} velocity"
    beta = f"\N{GREEK SMALL LETTER BETA} = {model.get('beta', 1.0):g}"
    parts = [f"{model.get('attention', 'softmax')} attention", beta]
    if model.get("mask", "none") != "none":
        parts.append(f"{model['mask']} mask")
    if model.get("heads"):
        parts.append(f"{len(model['heads'])} heads")
    if model.get("layers"):
        parts.append(f"{len(model['layers'])} layers")
    return ", ".join(parts)


def run_data(result: Any) -> RunData:
    """Read a PDE or particle run result (duck-typed, see the module docstring)."""
    header = getattr(result, "header", None)
    if header is None:
        meta = getattr(result, "metadata", None) or {}
        kind = meta.get("kind") or ("particles" if getattr(result, "points", None) is not None else "pde")
        header = RunHeader.of(kind, getattr(result, "config", None) or {}, meta)
    path = getattr(result, "path", None)
    name = header.metadata.get("name") or (Path(path).name if path is not None else "run")
    run_type = header.run_type
    missing = [a for a in NEEDED.get(run_type, ()) if getattr(result, a, None) is None]
    if run_type not in NEEDED or missing:
        raise TypeError(f"cannot plot a {type(result).__name__} of run type {run_type!r}: "
                        f"it has no {', '.join(missing)}")
    times = np.asarray(result.times, float)
    if run_type == "particles":
        points = np.asarray(result.points, float)
        return RunData("particles", sphere_of_dimension(points.shape[-1]), name, times, _observables(result),
                       points=points, layer_ends=_layer_ends(header, times), own_observables=_own_observables(header),
                       model=model_label(header.model))
    from ..masks import whole_measure

    whole = whole_measure(result)  # a causal run: the whole token distribution; any other run as it is
    atoms = getattr(result, "atoms", None)
    data = RunData("pde", sphere_named(result.sphere), name, times, _observables(result),
                   vertices=np.asarray(result.vertices, float), cells=np.asarray(result.cells),
                   densities=_floats(whole.densities),
                   vertex_densities=_floats(getattr(whole, "vertex_densities", None)),
                   atoms=None if atoms is None else list(atoms), layer_ends=_layer_ends(header, times),
                   own_observables=_own_observables(header), model=model_label(header.model))
    if whole is result:
        return data
    by_position = getattr(result, "observables_by_position", None) or {}
    return replace(data, mask=result.mask, positions=_floats(result.positions),
                   slice_densities=_floats(result.densities),
                   slice_vertex_densities=_floats(result.vertex_densities),
                   by_position={k: np.asarray(v, float) for k, v in by_position.items()})


def _own_observables(header: RunHeader) -> dict[str, str]:
    """The run's own observables (its config's ``[[output.observables]]``): name -> expression."""
    return {entry.name: entry.expression for entry in header.observables}


def _floats(values: Any) -> np.ndarray | None:
    return None if values is None else np.asarray(values, float)
