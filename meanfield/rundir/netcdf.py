"""The run file ``run.nc``: every output of a run in one self-describing netCDF4 file.

``xarray.open_dataset("RUN/run.nc")`` opens it directly (netCDF4 = HDF5; written with
h5netcdf, no netCDF C library needed).  A PDE run on S^2 (``ncdump -h``, abridged)::

    dimensions:
        time = UNLIMITED ; cell = C ; node = V ; corner = 3 ;
    variables:
        double time(time) ;            long_name = "model time t", units = "1"
        int mesh ;                     cf_role = "mesh_topology", topology_dimension = 2,
                                       node_coordinates = "node_lon node_lat",
                                       face_node_connectivity = "face_node_connectivity",
                                       face_coordinates = "lon lat", face_dimension = "cell"
        double node_x(node), node_y(node), node_z(node) ;     vertices (unit sphere)
        double node_lon(node), node_lat(node) ;               degrees_east, degrees_north
        int face_node_connectivity(cell, corner) ;            start_index = 0
        double x(cell), y(cell), z(cell) ;                    cell centroids on the sphere
        double lon(cell), lat(cell) ;                         centroids, degrees
        double area(cell) ;                                   units = "sr"
        double density(time, cell) ;   cell averages, units = "sr-1", mesh = "mesh",
                                       location = "face", cell_measures = "area: area"
        double vertex_density(time, cell, corner) ;           DG1 only (see below)
        double mass(time), order(time), energy(time), mean_0(time), ..., rho_min(time),
               rho_max(time), dt(time), wall(time) ;          the rows of observables.csv
        double zbar(time) ;            an [[output.observables]] entry: long_name,
                                       expression = "integral(rho * z)", comment
    // global attributes: Conventions = "CF-1.11 UGRID-1.0", title, source, kind, name,
    //                    sphere, scheme, mask, and the model: model_beta = 4.0, model_Q = "identity"
    //                    (or the matrix as JSON text), model_attention, ... (one per key of [model])

**Atoms** (hybrid runs: point masses beside the density, :mod:`meanfield.atoms`)
are a CF *contiguous ragged array* (CF-1.11 section 9.3.3) along a second unlimited
dimension ``atom``; their number changes from output to output::

    dimensions:
        atom = UNLIMITED ;             // all atoms of all outputs, output after output
    variables:
        int atom_count(time) ;         sample_dimension = "atom": the atoms of output k are
                                       atom[sum(atom_count[:k]) : sum(atom_count[:k+1])]
        double atom_time(atom) ;       the time of the atom's output
        double atom_x(atom), atom_y(atom), atom_z(atom) ;     position on the unit sphere
        double atom_lon(atom), atom_lat(atom) ;               S^2, degrees (S^1: atom_theta, rad)
        double atom_masses(atom) ;     the atom's mass
        int64 atom_ids(atom) ;         persistent id (a merge keeps the heavier atom's id)
        double atom_mass(time) ;       total mass of the atoms (an observable)

**Causal runs** (``model.mask = "causal"``, :class:`meanfield.masks.Causal`) keep a density per token
position: a coordinate ``position`` along a dimension of that name (the M slices' midpoints
``s_k = (k + 1/2)/M``) and the densities per slice; the observables along ``time`` are those of
the whole token distribution (the mean of the slices' densities, mass 1), and each slice's own
are ``<observable>_by_position`` along ``(time, position)``::

    dimensions:
        position = M ;
    variables:
        double position(position) ;    long_name = "token position s (midpoint of the slice)"
        double density(time, position, cell) ;                the density of each position
        double vertex_density(time, position, cell, corner) ; DG1 only
        double mass_by_position(time, position), order_by_position(time, position),
               energy_by_position(...), mean_0_by_position(...), ..., rho_min_by_position(...),
               rho_max_by_position(...) ;                      each slice's observables

``atom_count`` is also the observable of that name.  The global ``featureType`` of CF's
discrete sampling geometries is not set: the file's main content is mesh data.
:func:`atoms_from_dataset` cuts the ragged arrays back into one
:class:`~meanfield.atoms.Atoms` per output.  Runs without atoms have none of these.

On S^1 the cells are edges of a circle: ``topology_dimension = 1``,
``edge_node_connectivity(cell, corner)`` (corner = 2), ``location = "edge"``, a centroid angle
``theta(cell)`` in radians instead of lon/lat, and lengths in ``rad`` (density in ``rad-1``).
A particle run holds ``points(time, token, coordinate)`` (the tokens in global order;
``coordinate`` labelled x, y, z, or x0, x1, ... above d = 3), its scalar observables along
``time``, and per ``prompt`` (an independent set of tokens; one for a single run) the moments as
arrays and each scalar of the prompt, never a variable per vector or matrix entry::

    dimensions:
        time = UNLIMITED ; token = n ; coordinate = d ; prompt = B ; component = d ; component_2 = d ;
    variables:
        double points(time, token, coordinate) ;              a batch: points(time, prompt, token, coordinate)
        double mass(time), order(time), energy(time), mean_inner_product(time),
               clustered_fraction(time), clusters(time), dt(time), wall(time) ;   observables.csv's
        double mean(time, prompt, component) ;                        each prompt's mean vector
        double second_moment(time, prompt, component, component_2) ; the prompt's int x x^T dmu
                                          (a batch: second_moment(time, component, component_2), the mean
                                          over the prompts; B d x d matrices outgrow the tokens once d > n)
        double energy_by_prompt(time, prompt), order_by_prompt(...), mean_inner_product_by_prompt(...),
               clustered_fraction_by_prompt(...), clusters_by_prompt(...) ;   each prompt's scalars

With B prompts the scalars along ``time`` are the means over the prompts and ``<name>_se`` their
standard errors.  On S^1 and S^2 observables.csv also has the entries ``mean_0, ..., m2_22``
(the PDE's columns, :mod:`meanfield.observables`); run.nc holds them once, in the arrays.
Every array is in global order (the cell order of the serial mesh, the sampler's token order),
whatever the rank count.

**DG1 vertex values can be negative.**  ``vertex_density`` is the discontinuous linear
density at each cell's vertices, seen from that cell (``cells`` order).  The Zhang-Shu
limiter makes it non-negative at the limiter's points, which on S^2 are the two Gauss points
of each edge, not the vertices: a linear function that is non-negative at those six points
can dip to (3 - 2 sqrt 3) ~ -0.46 times its cell mean at a vertex.  So near steep fronts of a
clustered density the vertex values (and ParaView's picture of density-dg1.xdmf) go below
zero while every cell average ``density`` stays positive; this is the scheme, not an error.
On S^1 the limiter's points are the vertices, so there the vertex values are >= 0.

The file is created at the first output (atomically) and each later output is appended
along the unlimited ``time`` dimension (the file is opened without HDF5 file locking, so a
reader holding it open does not stop a run).  The snapshots stay the crash-safe record: on
resume the file is cut back to the outputs the checkpoint keeps, or rebuilt from the
snapshots when it cannot be read.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..point_masses import ATOM_KEYS, Atoms
from ..version import __version__
from . import layout
from .files import DamagedFileError, load_npz, read_csv_columns
from .layout import BY_POSITION, BY_PROMPT

if TYPE_CHECKING:
    import xarray

    from .header import RunHeader

CONVENTIONS = "CF-1.11 UGRID-1.0"
#: Chunk length along time of one-dimensional time series (observables).
SERIES_CHUNK = 512
#: The dimension of the atoms of all outputs (a contiguous ragged array, module docstring).
ATOM_DIM = "atom"
#: Chunk length of the atom variables.
ATOM_CHUNK = 256
#: The dimension (and coordinate) of the token positions of a causal run.
POSITION_DIM = "position"
#: The dimension of a particle run's prompts (independent sets of tokens; one for a single run).
PROMPT_DIM = "prompt"
#: The dimensions of the entries of vector and matrix observables (labelled like ``coordinate``).
COMPONENT_DIMS = ("component", "component_2")
#: Scalars of each prompt of a particle run: ``<name>_by_prompt`` along (time, prompt) in run.nc;
#: ``<name>`` (along time; observables.csv's column) is their mean over the prompts and
#: ``<name>_se`` its standard error (a batch of prompts only).
PROMPT_SCALARS = ("energy", "order", "mean_inner_product", "clustered_fraction", "clusters")
#: observables.csv's columns of single entries of the mean vector and the second moments (S^1, S^2).
MOMENT_ENTRY = re.compile(r"(mean|m2)_\d+")

#: Builds the run's Dataset from output times (T,), per-output arrays (name -> (T, ...)) and
#: observables (name -> (T,)).
DatasetBuilder = Callable[[np.ndarray, Mapping[str, np.ndarray], Mapping[str, np.ndarray]], "xarray.Dataset"]

_OBSERVABLES: dict[str, tuple[str, str]] = {
    "mass": ("total mass (1 for a probability density)", "1"),
    "order": ("order parameter: norm of the mean vector", "1"),
    "energy": ("interaction energy (1/2 beta) int int exp(beta <Q x, K y>) dmu(x) dmu(y), summed over heads", "1"),
    "dt": ("last time step before the output", "1"),
    "atom_mass": ("total mass of the atoms (point masses)", "1"),
    "wall": ("wall-clock time since the run segment started", "s"),
    "mean_inner_product": ("mean of the tokens' inner products <x_i, x_j> over the pairs i != j", "1"),
    "clustered_fraction": ("share of the token pairs i != j with <x_i, x_j> >= 1 - delta (delta = 1e-3)", "1"),
    "clusters": ("clusters: connected groups of the tokens linked where <x_i, x_j> >= 1 - 1e-4", "1"),
}


def observable_attributes(name: str, density_units: str | None) -> dict[str, str]:
    """``long_name`` and ``units`` of an observables.csv column (none for an unknown one)."""
    units: str | None
    if name.endswith("_se") and name.removesuffix("_se") in _OBSERVABLES:
        text, units = _OBSERVABLES[name.removesuffix("_se")]
        text, units = f"standard error over the prompts of their mean of: {text}", units
    elif name in _OBSERVABLES:
        text, units = _OBSERVABLES[name]
    elif name.startswith("mean_"):
        text, units = f"component {name[5:]} of the mean vector int x dmu", "1"
    elif name.startswith("m2_"):
        text, units = f"second moment int x_{name[3]} x_{name[4:]} dmu", "1"
    elif name in ("rho_min", "rho_max"):
        text, units = f"{'smallest' if name == 'rho_min' else 'largest'} cell average of the density", density_units
    else:
        return {}
    return {"long_name": text, "units": units} if units is not None else {"long_name": text}


def _time_coordinate(times: np.ndarray) -> tuple[str, np.ndarray, dict[str, str]]:
    return "time", np.asarray(times, float), {"long_name": "model time t", "units": "1"}


def own_observable_attributes(header: RunHeader) -> dict[str, dict[str, str]]:
    """Attributes of the variables of the run's own observables (``[[output.observables]]``):
    name -> ``long_name``, ``expression`` and a ``comment`` on when it is evaluated."""
    out = {}
    for entry in header.observables:
        every = entry.every
        when = "at every output" if every is None else f"every {every:g} model time (nan at the outputs between)"
        out[entry.name] = {"long_name": f"observable of one's own: {entry.expression}", "expression": entry.expression,
                           "comment": f"[[output.observables]] entry of the run's config, evaluated {when}"}
    return out


def _observables(observables: Mapping[str, np.ndarray], density_units: str,
                 own_observables: Mapping[str, Mapping[str, str]]) -> dict[str, Any]:
    """The observables as variables along time (``t`` is left out: it is the time coordinate);
    ``own_observables``: the attributes of the config's own (:func:`own_observable_attributes`)."""
    return {name: ("time", np.asarray(values, float),
                   dict(own_observables[name]) if name in own_observables else
                   observable_attributes(name, density_units))
            for name, values in observables.items() if name not in ("t", "atom_count")}


def _position_observables(outputs: Mapping[str, np.ndarray], density_units: str) -> dict[str, Any]:
    """A causal run's ``<observable>_by_position`` outputs as variables along (time, position)."""
    variables = {}
    for name, values in outputs.items():
        if name.endswith(BY_POSITION):
            attrs = observable_attributes(name.removesuffix(BY_POSITION), density_units)
            if "long_name" in attrs:
                attrs["long_name"] += ", of each token position"
            variables[name] = (("time", POSITION_DIM), np.asarray(values, float), attrs)
    return variables


def _lon_lat(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    lon = np.degrees(np.arctan2(points[:, 1], points[:, 0]))
    lat = np.degrees(np.arcsin(np.clip(points[:, 2], -1.0, 1.0)))
    return lon, lat


def _lon_lat_coordinates(points: np.ndarray, dim: str, what: str, prefix: str) -> dict[str, Any]:
    lon, lat = _lon_lat(points)
    return {f"{prefix}lon": (dim, lon, {"standard_name": "longitude", "long_name": f"longitude of the {what}",
                                        "units": "degrees_east"}),
            f"{prefix}lat": (dim, lat, {"standard_name": "latitude", "long_name": f"latitude of the {what}",
                                        "units": "degrees_north"})}


def _mesh_coordinates(mesh: Mapping[str, np.ndarray], location: str, measure: str) -> dict[str, Any]:
    """Vertices, connectivity, cell centroids (xyz and lon/lat or theta) and cell measures."""
    vertices, centroids = np.asarray(mesh["vertices"], float), np.asarray(mesh["centroids"], float)
    s2 = vertices.shape[1] == 3
    axes = "xyz"[: vertices.shape[1]]
    coords: dict[str, Any] = {}
    for i, a in enumerate(axes):
        coords[f"node_{a}"] = ("node", vertices[:, i], {"long_name": f"{a} of the mesh vertices", "units": "1"})
    coords[f"{location}_node_connectivity"] = (("cell", "corner"), np.asarray(mesh["cells"], np.int32), {
        "cf_role": f"{location}_node_connectivity", "start_index": np.int32(0),
        "long_name": "the vertices of each cell (indices into node)"})
    for i, a in enumerate(axes):
        coords[a] = ("cell", centroids[:, i], {"long_name": f"{a} of the cell centroid on the sphere", "units": "1"})
    if s2:
        coords.update(_lon_lat_coordinates(vertices, "node", "mesh vertices", "node_"))
        coords.update(_lon_lat_coordinates(centroids, "cell", "cell centroids", ""))
    else:
        coords["theta"] = ("cell", np.arctan2(centroids[:, 1], centroids[:, 0]),
                           {"long_name": "angle of the cell centroid", "units": "rad"})
    coords["area"] = ("cell", np.asarray(mesh["areas"], float), {
        "long_name": "measure of the cell (area on S^2, arc length on S^1) as the scheme integrates",
        "units": measure})
    return coords


def ragged_atoms(per_output: Sequence[Mapping[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The atoms of successive outputs (:data:`~meanfield.point_masses.ATOM_KEYS` arrays of each) as
    one contiguous ragged array: ``atom_count`` (T,) and each of ATOM_KEYS concatenated."""
    counts = np.array([len(a[ATOM_KEYS[0]]) for a in per_output], dtype=np.int32)
    d = next((np.shape(a[ATOM_KEYS[1]])[-1] for a in per_output if np.ndim(a[ATOM_KEYS[1]]) == 2), 0)

    def joined(key: str, shape: tuple[int, ...], dtype: type) -> np.ndarray:
        parts = [np.asarray(a[key], dtype).reshape(count, *shape) for a, count in zip(per_output, counts)]
        return np.concatenate(parts) if parts else np.zeros((0, *shape), dtype)

    return {"atom_count": counts, ATOM_KEYS[0]: joined(ATOM_KEYS[0], (), np.float64),
            ATOM_KEYS[1]: joined(ATOM_KEYS[1], (d,), np.float64), ATOM_KEYS[2]: joined(ATOM_KEYS[2], (), np.int64)}


def stack_outputs(snapshots: Sequence[Mapping[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Per-output arrays of snapshots stacked along time (atoms as :func:`ragged_atoms`; ``t`` left out)."""
    outputs = {k: np.array([s[k] for s in snapshots]) for k in snapshots[0]
               if k not in ("t", layout.STEPPER) and k not in ATOM_KEYS}
    if ATOM_KEYS[0] in snapshots[0]:
        outputs.update(ragged_atoms(snapshots))
    return outputs


def _atom_variables(times: np.ndarray, masses: np.ndarray, positions: np.ndarray,
                    ids: np.ndarray) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ragged atom variables (module docstring) of atoms at ``times`` (one per atom): data, coordinates."""
    positions = np.asarray(positions, float)
    d = positions.shape[1]
    coords: dict[str, Any] = {"atom_time": (ATOM_DIM, np.asarray(times, float),
                                            {"long_name": "model time t of the atom's output", "units": "1"})}
    for i, a in enumerate("xyz"[:d]):
        coords[f"atom_{a}"] = (ATOM_DIM, positions[:, i], {"long_name": f"{a} of the atom", "units": "1"})
    if d == 3:
        coords.update(_lon_lat_coordinates(positions, ATOM_DIM, "atom", "atom_"))
    else:
        coords["atom_theta"] = (ATOM_DIM, np.arctan2(positions[:, 1], positions[:, 0]),
                                {"long_name": "angle of the atom", "units": "rad"})
    data = {ATOM_KEYS[0]: (ATOM_DIM, np.asarray(masses, float), {"long_name": "mass of the atom (a point mass)",
                                                                 "units": "1"}),
            ATOM_KEYS[2]: (ATOM_DIM, np.asarray(ids, np.int64),
                           {"long_name": "persistent atom id (a merge keeps the heavier atom's id)"})}
    return data, coords


def _atoms(times: np.ndarray, outputs: Mapping[str, np.ndarray]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``atom_count`` and the ragged atom variables of :func:`ragged_atoms` output, or nothing."""
    if "atom_count" not in outputs:
        return {}, {}
    counts = np.asarray(outputs["atom_count"], np.int32)
    data, coords = _atom_variables(np.repeat(np.asarray(times, float), counts), *(outputs[k] for k in ATOM_KEYS))
    data["atom_count"] = ("time", counts, {"long_name": "number of atoms at the output", "sample_dimension": ATOM_DIM})
    return data, coords


def atoms_from_dataset(ds: xarray.Dataset) -> list[Atoms]:
    """The atoms of every output of a run.nc (or :meth:`PDERunResult.to_xarray`) Dataset: the
    contiguous ragged arrays cut at ``atom_count`` (empty list for a run without atoms)."""
    if "atom_count" not in ds:
        return []
    ends = np.cumsum(np.asarray(ds["atom_count"].values, np.int64))
    axes = [a for a in "xyz" if f"atom_{a}" in ds.variables]
    positions = np.column_stack([ds[f"atom_{a}"].values for a in axes]).reshape(-1, len(axes))
    masses, ids = ds[ATOM_KEYS[0]].values, ds[ATOM_KEYS[2]].values
    return [Atoms(masses[lo:hi], positions[lo:hi], ids[lo:hi]) for lo, hi in zip(np.r_[0, ends[:-1]], ends)]


def pde_dataset(mesh: Mapping[str, np.ndarray], times: np.ndarray, outputs: Mapping[str, np.ndarray],
                observables: Mapping[str, np.ndarray], attrs: Mapping[str, Any],
                own_observables: Mapping[str, Mapping[str, str]] | None = None) -> xarray.Dataset:
    """The Dataset of a PDE run (module docstring): mesh, cell coordinates, densities, observables.

    Parameters
    ----------
    mesh
        ``vertices`` (V, d), ``cells`` (C, nv), ``centroids`` (C, d), ``areas`` (C,), global
        order; a causal run also ``positions`` (M,).
    times
        (T,) output times.
    outputs
        ``density`` (T, C) and, for DG1, ``vertex_density`` (T, C, nv); hybrid runs also the
        atoms as :func:`ragged_atoms` gives them; causal runs ``density`` (T, M, C),
        ``vertex_density`` (T, M, C, nv) and ``<observable>_by_position`` (T, M).
    observables
        Column name -> (T,) values (``t`` is left out: it is the time coordinate).
    attrs
        Global attributes (see :func:`run_attributes`).
    own_observables
        Attributes of the config's own observables (:func:`own_observable_attributes`).
    """
    import xarray as xr

    s2 = np.shape(mesh["vertices"])[1] == 3
    location, measure = ("face", "sr") if s2 else ("edge", "rad")
    topology = {"cf_role": "mesh_topology", "long_name": f"the mesh of the unit sphere {'S^2' if s2 else 'S^1'}",
                "topology_dimension": 2 if s2 else 1,
                f"{location}_node_connectivity": f"{location}_node_connectivity",
                f"{location}_dimension": "cell", "node_coordinates": "node_lon node_lat" if s2 else "node_x node_y",
                f"{location}_coordinates": "lon lat" if s2 else "x y"}
    on_mesh = {"mesh": "mesh", "location": location, "units": f"{measure}-1"}
    causal = "positions" in mesh
    per_output = ("time", POSITION_DIM) if causal else ("time",)
    data: dict[str, Any] = {
        "mesh": ((), np.int32(0), topology),
        "density": ((*per_output, "cell"), np.asarray(outputs["density"], float),
                    {"long_name": "probability density: cell averages" + (" of each token position" if causal else ""),
                     "cell_measures": "area: area", **on_mesh})}
    if "vertex_density" in outputs:
        data["vertex_density"] = ((*per_output, "cell", "corner"), np.asarray(outputs["vertex_density"], float), {
            "long_name": "DG1 density at each cell's vertices (the corners of face_node_connectivity), from that cell",
            "units": on_mesh["units"],
            "comment": "may be negative where the cell averages are positive: the positivity limiter acts at the "
                       "edge Gauss points, not at the vertices (see meanfield.rundir.netcdf)"})
    data.update(_observables(observables, on_mesh["units"], own_observables or {}))
    data.update(_position_observables(outputs, on_mesh["units"]))
    atom_data, atom_coords = _atoms(times, outputs)
    data.update(atom_data)
    coords = {"time": _time_coordinate(times), **_mesh_coordinates(mesh, location, measure), **atom_coords}
    if causal:
        coords[POSITION_DIM] = (POSITION_DIM, np.asarray(mesh["positions"], float), {
            "long_name": "token position s in [0, 1] (midpoint of the slice)", "units": "1"})
    return xr.Dataset(data, coords=coords, attrs=dict(attrs))


def _prompt_variables(times: np.ndarray, points: np.ndarray, outputs: Mapping[str, np.ndarray],
                      observables: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """A particle run's variables along (time, prompt, ...): each prompt's mean vector (from its
    tokens, output by output) and scalars (``<name>_by_prompt`` from ``outputs``, else, for one
    prompt, the observable itself); the second moments of the prompt, or of a batch the mean over
    its prompts (B matrices of d x d would outgrow the tokens, B n d, as soon as d > n: 17 GB an
    output at B = 2048, d = 1024; each prompt's is ``x^T x / n`` of its tokens)."""
    count, d = len(times), points.shape[-1]
    prompts = points.shape[1] if points.ndim == 4 else 1
    x = np.asarray(points, float).reshape(count, prompts, -1, d)
    means = x.mean(axis=2)
    seconds = np.einsum("tbni,tbnj->tij", x, x) / (prompts * x.shape[2])
    second = (("time", PROMPT_DIM, *COMPONENT_DIMS), seconds[:, None],
              {"long_name": "second-moment matrix int x x^T dmu of each prompt's tokens", "units": "1"}) \
        if prompts == 1 else (("time", *COMPONENT_DIMS), seconds,
                              {"long_name": "second-moment matrix int x x^T dmu of the tokens, mean over the prompts",
                               "units": "1"})
    data: dict[str, Any] = {
        "mean": (("time", PROMPT_DIM, COMPONENT_DIMS[0]), means,
                 {"long_name": "mean vector int x dmu of each prompt's tokens", "units": "1"}),
        "second_moment": second}
    for name in PROMPT_SCALARS:
        values = outputs.get(f"{name}{BY_PROMPT}")
        if values is None and prompts == 1 and name in observables:
            values = np.asarray(observables[name], float).reshape(count, 1)
        if values is not None:
            attrs = observable_attributes(name, "1")
            attrs["long_name"] = attrs.get("long_name", name) + ", of each prompt"
            data[f"{name}{BY_PROMPT}"] = (("time", PROMPT_DIM), np.asarray(values, float), attrs)
    return data


def particle_dataset(times: np.ndarray, outputs: Mapping[str, np.ndarray], observables: Mapping[str, np.ndarray],
                     attrs: Mapping[str, Any], positions: np.ndarray | None = None,
                     own_observables: Mapping[str, Mapping[str, str]] | None = None) -> xarray.Dataset:
    """The Dataset of a particle run (module docstring): ``points`` (T, n, d) (a batch: (T, B, n, d)
    along (time, prompt, token, coordinate)), the scalar observables
    along time (``own_observables``: the attributes of the config's own, :func:`own_observable_attributes`), each
    prompt's mean vector and second moments and scalars along (time, prompt, ...); a causal run's
    token ``positions`` (n,) in [0, 1] as the coordinate ``position`` of the token dimension.

    observables.csv's columns of single moment entries (``mean_0``, ``m2_01``, ... on S^1 and S^2)
    are not repeated: ``mean`` and ``second_moment`` hold them.
    """
    import xarray as xr

    points = np.asarray(outputs["points"], float)
    d = points.shape[-1]
    labels = list("xyz"[:d]) if d <= 3 else [f"x{i}" for i in range(d)]
    scalars = {k: v for k, v in observables.items() if not MOMENT_ENTRY.fullmatch(k)}
    data = {"points": (("time", *((PROMPT_DIM,) if points.ndim == 4 else ()), "token", "coordinate"), points,
                       {"long_name": f"token positions on the unit sphere S^{d - 1} (global token order)",
                        "units": "1"}),
            **_observables(scalars, "1", own_observables or {}),
            **_prompt_variables(times, points, outputs, observables)}
    coords = {"time": _time_coordinate(times),
              "coordinate": ("coordinate", labels, {"long_name": "ambient coordinate"}),
              **{dim: (dim, labels, {"long_name": "ambient coordinate (an entry of a vector or matrix)"})
                 for dim in COMPONENT_DIMS}}
    if positions is not None:
        coords["position"] = ("token", np.asarray(positions, float),
                              {"long_name": "token position s in [0, 1] (causal attention: a token attends to "
                                            "the positions up to its own)", "units": "1"})
    return xr.Dataset(data, coords=coords, attrs=dict(attrs))


#: What a model key the config leaves unset stands for, as run.nc's attributes say it (others unset are left out).
UNSET_MODEL_KEYS = {"Q": "identity", "K": "identity", "V": "identity"}


def model_attributes(model: Mapping[str, Any]) -> dict[str, Any]:
    """``model_<key>`` for each key of the config's ``[model]`` table: numbers as numbers, text as
    text, matrices and tables as JSON text, unset Q, K, V as ``identity`` (:data:`UNSET_MODEL_KEYS`)."""
    import json

    attrs: dict[str, Any] = {}
    for key in {**dict.fromkeys(UNSET_MODEL_KEYS), **model}:  # an unset key may be None or absent
        value = model.get(key)
        if value is None:
            value = UNSET_MODEL_KEYS.get(key)
        if value is None:
            continue
        plain = isinstance(value, (int, float, str)) and not isinstance(value, bool)
        attrs[f"model_{key}"] = value if plain else json.dumps(value)
    return attrs


def run_attributes(header: RunHeader) -> dict[str, Any]:
    """Global attributes of a run's file, from its header: what made it, and the model's
    parameters (:func:`model_attributes`)."""
    attrs: dict[str, Any] = {"Conventions": CONVENTIONS, "source": f"meanfield {__version__}",
                             "kind": header.run_type, "name": header.name}
    if header.run_type == "pde":
        assert header.sphere is not None, "a PDE run is on a meshed sphere"
        attrs.update(title=f"meanfield PDE run {header.name}", sphere=header.sphere.name, scheme=header.scheme,
                     mask=header.mask)
    else:
        attrs.update(title=f"meanfield particle run {header.name}")
    return {**attrs, **model_attributes(header.model)}


def _encoding(ds: xarray.Dataset) -> dict[str, dict[str, Any]]:
    """No fill values; time-dependent variables chunked one output (series: SERIES_CHUNK) at a time,
    atom variables ATOM_CHUNK atoms at a time."""
    encoding: dict[str, dict[str, Any]] = {}
    for name, var in ds.variables.items():
        entry: dict[str, Any] = {"_FillValue": None} if var.dtype.kind == "f" else {}
        if var.dims[:1] == ("time",):
            entry["chunksizes"] = (SERIES_CHUNK,) if var.ndim == 1 else (1, *var.shape[1:])
        elif var.dims[:1] == (ATOM_DIM,):
            entry["chunksizes"] = (ATOM_CHUNK, *var.shape[1:])
        encoding[str(name)] = entry
    return encoding


def _text_as_char(ds: xarray.Dataset) -> xarray.Dataset:
    """A copy whose ASCII text attributes are fixed-length strings, stored as netCDF ``char``
    attributes as the netCDF C library writes them (readers such as VTK's UGRID reader, in
    ParaView, take no other kind); xarray reads them back as ``str``."""
    def text_as_char(attrs: Mapping[Any, Any]) -> dict[Any, Any]:
        return {k: np.bytes_(v.encode()) if isinstance(v, str) and v.isascii() else v for k, v in attrs.items()}

    out = ds.copy()
    out.attrs = text_as_char(out.attrs)
    for var in out.variables.values():
        var.attrs = text_as_char(var.attrs)
    return out


class RunFile:
    """``run.nc`` of one run, written by rank 0 (module docstring).

    Parameters
    ----------
    run_dir
        The run directory.
    build
        Builds the run's Dataset from times, per-output arrays and observables (the same
        function that :meth:`~meanfield.rundir.results.PDERunResult.to_xarray` uses).
    """

    def __init__(self, run_dir: Path, build: DatasetBuilder) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / layout.RUN_FILE
        self.build = build
        self._datasets: tuple[list[str], list[str]] | None = None

    def start(self, keep: int) -> None:
        """A new run (``keep = 0``): remove the file; a resume: cut it to ``keep`` outputs or rebuild it."""
        if keep == 0:
            self.path.unlink(missing_ok=True)
            return
        import h5netcdf

        try:
            with h5netcdf.File(self.path, "a", locking=False) as f:
                if f.dimensions["time"].size < keep:
                    raise ValueError("fewer outputs than the checkpoint")
                f.resize_dimension("time", keep)
                if ATOM_DIM in f.dimensions:
                    f.resize_dimension(ATOM_DIM, int(np.sum(f.variables["atom_count"][:keep], dtype=np.int64)))
        except (OSError, KeyError, ValueError):
            self.rebuild(keep)

    def rebuild(self, keep: int) -> None:
        """Write the file anew from the first ``keep`` snapshots and observables.csv (none: no file)."""
        snapshots: list[dict[str, np.ndarray]] = []
        for index, path in layout.snapshot_files(self.run_dir):
            if index != len(snapshots) or index >= keep:
                break
            try:
                snapshots.append(load_npz(path))
            except DamagedFileError:
                break
        self.path.unlink(missing_ok=True)
        if not snapshots:
            return
        columns, _ = read_csv_columns(self.run_dir / layout.OBSERVABLES)
        count = len(snapshots)
        observables = {k: _padded(v, count) for k, v in columns.items()}
        times = np.array([float(s["t"]) for s in snapshots])
        self._create(self.build(times, stack_outputs(snapshots), observables))

    def _create(self, ds: xarray.Dataset) -> None:
        write_dataset(ds, self.path)

    def write(self, t: float, row: Mapping[str, float], snapshot: Mapping[str, np.ndarray]) -> None:
        """Append one output (creating the file at the first).

        The output's variables are those of the run's Dataset built for this output alone (so the
        file holds what :meth:`rebuild` and ``to_xarray`` build); the appends go through h5py on
        the variables listed once per process (:meth:`_appendable`): reopening the file with
        h5netcdf at every output cost about 0.1 s, which dominated long runs with thousands of
        cheap outputs.
        """
        ds = self.build(np.array([t]), stack_outputs([snapshot]), {k: np.array([v]) for k, v in row.items()})
        if not self.path.exists():
            self._create(ds)
            return
        import h5py

        series, atom_datasets = self._appendable()
        with h5py.File(self.path, "a", locking=False) as f:
            k = f["time"].shape[0]
            if atom_datasets:
                count = ds.sizes.get(ATOM_DIM, 0)
                n = f[ATOM_DIM].shape[0]
                for name in atom_datasets:
                    f[name].resize(n + count, axis=0)
                    if name in ds.variables and count:
                        f[name][n:, ...] = ds[name].values
            for name in series:
                f[name].resize(k + 1, axis=0)
                f[name][k, ...] = ds[name].values[0] if name in ds.variables else np.nan

    def _appendable(self) -> tuple[list[str], list[str]]:
        """The datasets along ``time`` and those along ``atom`` (with the dimension's own)."""
        if self._datasets is None:
            import h5netcdf

            with h5netcdf.File(self.path, "r", locking=False) as f:
                series = [name for name, var in f.variables.items() if var.dimensions[:1] == ("time",)]
                atoms = [name for name, var in f.variables.items() if var.dimensions[:1] == (ATOM_DIM,)]
                if ATOM_DIM in f.dimensions and ATOM_DIM not in f.variables:
                    atoms.append(ATOM_DIM)  # the dimension's scale dataset
            self._datasets = (series, atoms)
        return self._datasets

    def times(self) -> list[float]:
        """The output times in the file (none if there is no file)."""
        if not self.path.exists():
            return []
        import h5netcdf

        with h5netcdf.File(self.path, "r", locking=False) as f:
            return [float(t) for t in f.variables["time"][:]]


def write_dataset(ds: xarray.Dataset, path: Path) -> None:
    """Write a Dataset of this module's conventions to ``path`` at once (through a temporary
    file): ``time`` (and ``atom``) unlimited, no fill values, text as characters."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    unlimited = ["time", *([ATOM_DIM] if ATOM_DIM in ds.dims else [])]
    try:
        _text_as_char(ds).to_netcdf(tmp, engine="h5netcdf", unlimited_dims=unlimited, encoding=_encoding(ds))
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _padded(values: np.ndarray, count: int) -> np.ndarray:
    """``values`` cut or padded with NaN to ``count`` entries (a damaged observables.csv)."""
    out = np.full(count, np.nan)
    out[: min(count, len(values))] = values[:count]
    return out
