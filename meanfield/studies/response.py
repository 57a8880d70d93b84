"""The response of observables to the initial density and the model: ``meanfield response``.

For observables ``phi`` (expressions in x, y, z) and times T, :func:`response` runs the PDE
forward to the times and the adjoint back (:mod:`meanfield.adjoint`), and writes::

    response.csv      observable, t, value, n_var [, d_value_d_<parameter> ...]
    influence.nc      the influence functions Phi_0 per observable and time (CF/UGRID, the
                      mesh of run.nc), with the density at each time
    influence-<NAME>.png         their pictures, NAME the observable's label (NAME=EXPR, or EXPR
                                 as given when it is a file name, e.g. ``z``; else its number
                                 k = 0, 1, ...); S^2: influence-<NAME>-t<T>.png at time T
    config.toml, metadata.json, study.json

``value = <phi, rho(T)>``; ``n_var = Var_rho0(Phi_0)``, the limit of n times the variance of
``<phi, mu_n(T)>`` over iid draws of n initial tokens (a causal run: the mean over positions
of each position's variance, tokens at fixed positions); ``d_value_d_<parameter>`` the
derivative of the value with respect to a model parameter (:func:`parse_parameter`).

Observables: ``EXPR`` or ``NAME=EXPR``; the column ``observable`` holds NAME where given, else
EXPR as given.  A causal run's observable is that of the whole token distribution (the mean
of the positions' densities, as in observables.csv).
"""

from __future__ import annotations

import copy
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..config import Config, ConfigError, load_config
from ..model import did_you_mean
from ..own_observables import Observable, parse_observable
from ..spheres import sphere_named
from ..times import MATCH_TOL, same_time

#: A parameter path: ``model.beta``, ``model.Q[0][1]``, ``model.heads[1].weight``, ``model.layers[0].V[2][0]``.
_PART = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)((?:\[\d+\])*)")
#: The matrices of a model table (``model.Q[0][1]``; unset: the identity).
MATRICES = ("Q", "K", "V")
#: Relative step of the central differences of the field in a parameter.
PARAMETER_STEP = 1e-5


@dataclass
class ResponseResult:
    """What :func:`response` produced: its directory, the rows of response.csv and the
    covariances of the influence functions.

    Attributes
    ----------
    covariance
        ``covariance[i, j, p, q] = Cov_rho0(Phi_0[p at time i], Phi_0[q at time j])`` (a causal
        run: the mean over positions of each position's covariance); its diagonal is ``n_var``,
        and ``n`` times the covariance of two observables of n iid tokens tends to it.
    """

    path: Path
    rows: list[dict[str, Any]]
    covariance: np.ndarray


def parse_parameter(text: str) -> list[str | int]:
    """A parameter path (``model.beta``, ``model.Q[0][1]``, ``model.heads[1].weight``,
    ``model.layers[0].beta``, ``model.ffn.W[0][1]``) -> its keys and indices into the config."""
    keys: list[str | int] = []
    for part in text.split("."):
        match = _PART.fullmatch(part)
        if match is None:
            raise ConfigError(f"--wrt {text!r}: expected a config path such as model.beta or model.Q[0][1]")
        keys.append(match.group(1))
        keys.extend(int(i) for i in re.findall(r"\[(\d+)\]", match.group(2)))
    if keys[0] != "model":
        raise ConfigError(f"--wrt {text!r}: a parameter of the model (model.beta, model.Q[0][1], ...)")
    return keys


def moved_config(config: Config, keys: Sequence[str | int], text: str, step: float) -> tuple[Config, float]:
    """The config with the parameter at ``keys`` moved by ``step`` times its scale, and the step taken."""
    data = copy.deepcopy(config.data)
    d = sphere_named(data["mesh"]["sphere"]).d
    parent: Any = data
    for i, key in enumerate(keys[:-1]):
        child = parent[key] if _has(parent, key) else None
        if child is None and key in MATRICES:
            child = parent[key] = np.eye(d).tolist()  # unset: the identity
        if child is None:
            raise ConfigError(f"--wrt {text}: {'.'.join(map(str, keys[: i + 1]))} is not set in the config")
        parent = child
    last = keys[-1]
    if isinstance(last, str) and isinstance(parent, Mapping) and last not in parent and last != "weight":
        raise ConfigError(f"--wrt {text}: {_unknown_key(keys[:-1], last, parent)}")
    value = parent[last] if _has(parent, last) else None
    if value is None and last == "weight":
        value = 1.0
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"--wrt {text}: not a number in the config (got {value!r})")
    h = step * max(1.0, abs(float(value)))
    parent[last] = float(value) + h
    return load_config(data), h


def _unknown_key(keys: Sequence[str | int], key: str, table: Mapping[str, Any]) -> str:
    """What to say of a ``key`` that ``table`` (at ``keys``) lacks: the closest of its keys, or its parameters."""
    where = ".".join(map(str, keys))
    parameters = [k for k, v in table.items()
                  if k in MATRICES or isinstance(v, (int, float)) and not isinstance(v, bool)]
    hint = did_you_mean(key, parameters) or "; its parameters are " + ", ".join(
        f"{where}.{k}[i][j]" if k in MATRICES else f"{where}.{k}" for k in parameters)
    return f"{where} has no parameter {key!r}{hint}"


def _has(container: Any, key: str | int) -> bool:
    if isinstance(key, int):
        return isinstance(container, list) and 0 <= key < len(container)
    return isinstance(container, Mapping) and key in container


def check_times(times: Sequence[float], t_final: float) -> list[float]:
    """The requested times, each in [0, t_final] and distinct (``ConfigError`` naming ``--at``)."""
    out: list[float] = []
    for t in times:
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not np.isfinite(t) or not 0 <= t <= t_final:
            raise ConfigError(f"--at: times must lie in [0, time.t_final = {t_final:g}], got {t!r}")
        if any(same_time(u, t, MATCH_TOL) for u in out):
            raise ConfigError(f"--at: time {t:g} is given twice")
        out.append(float(t))
    if not out:
        raise ConfigError("--at: give at least one time")
    return out


@dataclass
class AdjointStudy:
    """A study that linearises one PDE run (:func:`response`, :func:`.retrieval.retrieval`),
    set up by :func:`open_adjoint_study`: what its checks returned, the study directory, and
    the adjoint solver over the run's simulation."""

    config: Config
    problem: Any
    inputs: Any
    times: list[float]
    path: Path
    environment: dict[str, Any]
    threads: int
    solver: Any
    started: float


def open_adjoint_study(config: Config | Mapping | str | Path | None, overrides: list[str] | None, comm: Any,
                       times: Sequence[float], study_name: str, out: str | Path | None, overwrite: bool,
                       check: Callable[[Config, Any], Any] | None = None) -> AdjointStudy:
    """Check a study's input and set it up: the config and its problem (built once), ``check``
    (called with the config and the problem; it raises :class:`ConfigError` on bad input and
    returns the study's own inputs), the times, the adjoint's support of the run; then, with
    nothing refused, the directory (``out``, default ``runs/<name>-<study_name>``), the process and
    the discrete PDE."""
    from ..adjoint import AdjointSolver, check_supported
    from ..collective import on_root
    from ..discrete_pde import DiscretePDE
    from ..drivers.launch import check_size, configure_process, resolve_problem
    from ..rundir.environment import run_environment
    from ..rundir.names import derived_directory
    from ..rundir.study_directory import prepare_study

    problem = resolve_problem(config, overrides, comm)
    config = problem.config
    inputs = check(config, problem) if check is not None else None
    times = check_times(times, problem.time.t_final)
    try:
        check_supported(problem)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    check_size(problem, comm)
    path = Path(out) if out is not None else derived_directory(problem.output.directory, study_name)
    on_root(comm, lambda: prepare_study(path, study_name, overwrite=overwrite))
    environment = run_environment(comm)
    threads = configure_process(problem.field.threads)
    started = time.perf_counter()
    solver = AdjointSolver(DiscretePDE(problem, comm))
    return AdjointStudy(config, problem, inputs, times, path, environment, threads, solver, started)


def recorded_forward(solver: Any, times: Sequence[float], comm: Any, quiet: bool) -> dict[float, np.ndarray]:
    """:meth:`~meanfield.adjoint.AdjointSolver.forward` to ``times``, its progress in model time
    shown on rank 0 unless ``quiet`` (:func:`~meanfield.engine.progress.sweep_progress`)."""
    from ..engine.progress import sweep_progress

    with sweep_progress(comm, "forward run", max(times), "t", quiet) as progress:
        return solver.forward(times, progress.update)


def swept_backward(solver: Any, finals: Mapping[float, np.ndarray], sensitivities: Sequence[Any], comm: Any,
                   quiet: bool) -> tuple[np.ndarray, np.ndarray]:
    """:meth:`~meanfield.adjoint.AdjointSolver.backward`, its progress in the forward run's steps
    shown on rank 0 unless ``quiet``, after a line saying which steps' stages the recording kept
    (:meth:`~meanfield.adjoint.solver.Trajectory.describe`)."""
    from ..engine.progress import sweep_progress

    if not quiet and comm.rank == 0:
        print(f"adjoint memory: {solver.trajectory.describe()}", file=sys.stderr, flush=True)

    with sweep_progress(comm, "backward sweep", len(solver.trajectory.steps), "step", quiet) as progress:
        return solver.backward(finals, sensitivities, progress=progress.update)


def response(
    config: Config | Mapping | str | Path | None,
    observables: Sequence[str],
    times: Sequence[float],
    *,
    wrt: Sequence[str] = (),
    out: str | Path | None = None,
    overrides: list[str] | None = None,
    comm=None,
    quiet: bool = False,
    overwrite: bool = False,
    progress: bool | None = None,
) -> ResponseResult:
    """Values, influence functions, predicted fluctuations and sensitivities of observables.

    Parameters
    ----------
    config
        Config (or mapping / TOML path) of the PDE run to linearise (no atoms).
    observables
        ``EXPR`` or ``NAME=EXPR``, expressions in x, y, z (:mod:`meanfield.expression`).
    times
        Times T in [0, t_final].
    wrt
        Model parameters (:func:`parse_parameter`) whose derivatives to add as columns
        ``d_value_d_<parameter>``.
    out
        Output directory (default ``runs/<name>-response``).
    comm
        MPI communicator (default COMM_WORLD).
    quiet
        No report on the terminal.
    overwrite
        Redo a response study already in ``out``.
    progress
        Show the progress of the forward run and of the backward sweep (rank 0; default: unless
        ``quiet``), e.g. for a study that runs a response quietly inside its own report.

    Returns
    -------
    The directory and the rows of response.csv (on every rank).
    """
    from mpi4py import MPI

    from ..adjoint import Sensitivity
    from ..collective import everywhere, on_root
    from ..problem import Problem
    from ..rundir.study_directory import write_record, write_table
    from ..velocity import LayerVelocity

    comm = comm or MPI.COMM_WORLD

    def inputs(config: Config, problem: Any) -> tuple[list[Observable], list[tuple[str, float, Problem, Problem]]]:
        compiled = [parse_observable(text) for text in observables]
        if not compiled:
            raise ConfigError("--observable: give at least one observable")
        labels = [o.label for o in compiled]
        if len(set(labels)) < len(labels):
            raise ConfigError(f"--observable: two observables share the name {labels!r}")
        moved = []
        for text in wrt:
            keys = parse_parameter(text)
            plus, h = moved_config(config, keys, text, PARAMETER_STEP)
            minus, _ = moved_config(config, keys, text, -PARAMETER_STEP)
            moved.append((text, h, Problem(plus), Problem(minus)))  # each moved problem built once
        return compiled, moved

    study = open_adjoint_study(config, overrides, comm, times, "response", out, overwrite, inputs)
    config, problem, times, path, solver = study.config, study.problem, study.times, study.path, study.solver
    compiled, moved = study.inputs
    environment, threads, started = study.environment, study.threads, study.started
    pde = solver.pde
    f = problem.field
    sensitivities = [Sensitivity(text, h, *(LayerVelocity(p.schedule(), comm, f.method, f.tol,
                                                          fixed_points=True, direct_sums=f.direct_sums)
                                           for p in (plus, minus)))
                     for text, h, plus, minus in moved]
    silent = quiet if progress is None else not progress
    states = recorded_forward(solver, times, comm, silent)
    forward_seconds = time.perf_counter() - started
    M, op = pde.slice_count, solver.operator
    points = op.points  # the adjoint's rows (cells, or DG1's vertices)
    phis = np.stack([o(points) for o in compiled], axis=1)  # (rows, observables)
    P = len(compiled)
    finals = {}
    for i, t in enumerate(times):
        final = np.zeros((M, len(points), P * len(times)))
        final[:, :, i * P:(i + 1) * P] = phis[None]
        finals[t] = final
    tic = time.perf_counter()
    phi0, derivatives = swept_backward(solver, finals, sensitivities, comm, silent)
    backward_seconds = time.perf_counter() - tic

    rho0 = pde.split(solver.initial)
    every = np.broadcast_to(phis[None], (M,) + phis.shape)
    # <phi, rho(t)>, and int rho0 Phi_0^2, int rho0 Phi_0 per slice, in the adjoint's pairing
    values = np.array([op.inner(every, pde.split(states[t])).mean(axis=0) for t in times])
    second, first = op.inner(phi0 ** 2, rho0), op.inner(phi0, rho0)
    n_var = (second - first ** 2).mean(axis=0)
    columns = phi0.shape[-1]
    products = (phi0[:, :, :, None] * phi0[:, :, None, :]).reshape(M, phi0.shape[1], columns * columns)
    cross = op.inner(products, rho0).reshape(M, columns, columns)
    covariance = (cross - first[:, :, None] * first[:, None, :]).mean(axis=0)
    covariance = covariance.reshape(len(times), P, len(times), P).transpose(0, 2, 1, 3)
    rows = []
    for i, t in enumerate(times):
        for p, o in enumerate(compiled):
            row = {"observable": o.label, "t": t, "value": float(values[i, p]), "n_var": float(n_var[i * P + p])}
            for s, sens in enumerate(sensitivities):
                row[f"d_value_d_{sens.name}"] = float(derivatives[s, i * P + p])
            rows.append(row)
    influence = pde.gather_slices(op.cells(phi0))
    densities = {t: pde.gather_slices(pde.slice_averages(states[t])[..., None]) for t in times}
    mesh = pde.mesh_arrays()
    seconds = {"forward": forward_seconds, "backward": backward_seconds, "total": time.perf_counter() - started}

    def write() -> None:
        write_table(path / "response.csv", rows)
        write_record(path, "response", config.to_toml(), {
            "observables": [{"name": o.label, "expression": o.expression} for o in compiled],
            "times": times, "wrt": [s.name for s in sensitivities], "threads": threads,
            "steps": len(solver.trajectory.steps), "kept_states": len(solver.trajectory.kept),
            "adjoint_memory": solver.trajectory.memory(),
            "adjoint": f"discrete adjoint of {problem.scheme.kind.upper()} + SSP-RK3",
            "timings": seconds, **environment})
        _write_influence(path, config, mesh, times, compiled, influence, densities)
        _plot_influence(path, mesh, times, compiled, influence)
        if not quiet:
            print(format_rows(rows), flush=True)

    on_root(comm, write)
    return ResponseResult(path, everywhere(comm, lambda: rows), covariance)


def format_rows(rows: list[dict[str, Any]]) -> str:
    """response.csv as a fixed-width table for the terminal."""
    keys = list(rows[0])
    width = max(12, *(len(str(r["observable"])) for r in rows))
    lines = [f"{keys[0]:>{width}s}  " + "  ".join(f"{k:>14s}" for k in keys[1:])]
    for r in rows:
        lines.append(f"{r['observable']:>{width}s}  " + "  ".join(f"{r[k]:>14.6g}" for k in keys[1:]))
    return "\n".join(lines)


def _write_influence(path: Path, config: Config, mesh: Mapping[str, np.ndarray] | None, times: list[float],
                     observables: Sequence[Observable], influence: np.ndarray | None,
                     densities: Mapping[float, np.ndarray | None]) -> None:
    """influence.nc: the run's mesh and the density at each time (:func:`~meanfield.rundir.netcdf.pde_dataset`)
    and ``influence_<k>`` (time, [position,] cell) per observable k, named in its attributes."""
    from ..rundir.header import RunHeader
    from ..rundir.netcdf import pde_dataset, run_attributes, write_dataset

    assert mesh is not None and influence is not None
    causal = "positions" in mesh
    stacked = np.array([densities[t] for t in times])[..., 0]  # (T, M, C)
    header = RunHeader.of("pde", config.data)
    attrs = {**run_attributes(header), "title": f"meanfield influence functions {header.name}"}
    ds = pde_dataset(mesh, np.array(times), {"density": stacked if causal else stacked[:, 0]}, {}, attrs)
    P = len(observables)
    dims = ("time", "position", "cell") if causal else ("time", "cell")
    for p, o in enumerate(observables):
        values = np.array([influence[:, :, i * P + p] for i in range(len(times))])  # (T, M, C)
        ds[f"influence_{p}"] = (dims, values if causal else values[:, 0], {
            "long_name": f"influence function Phi_0 of <phi, rho(t)>, phi = {o.expression}", "observable": o.label,
            "mesh": "mesh", "location": ds["density"].attrs["location"], "cell_measures": "area: area", "units": "1",
            **({"comment": "per token position s: d<phi, rho(t)>/d rho0(s) = int ds <Phi_0(s), d rho0(s)>"}
               if causal else {})})
    write_dataset(ds, path / "influence.nc")


#: The colour map of signed influence functions, centred on 0 (blue negative, red positive).
DIVERGING = "RdBu_r"


def influence_name(observable: Observable, k: int) -> str:
    """The NAME of an observable's influence pictures: its label when that is a file name, else its number k."""
    return observable.label if re.fullmatch(r"[A-Za-z0-9_.+-]+", observable.label) else str(k)


def _plot_influence(path: Path, mesh: Mapping[str, np.ndarray] | None, times: list[float],
                    observables: Sequence[Observable], influence: np.ndarray | None) -> None:
    """influence-<NAME>.png per observable (:func:`influence_name`): Phi_0 at every time (S^1: lines,
    a causal run's over (theta, s); S^2: one map per time, influence-<NAME>-t<T>.png, a causal run's
    the mean over positions); maps on a diverging colour scale centred on 0, lines about 0."""
    from ..plotting.circle import circle_density
    from ..plotting.position_figures import position_images
    from ..plotting.sphere_maps import sphere_map

    assert mesh is not None and influence is not None
    vertices, cells = mesh["vertices"], mesh["cells"]
    P = len(observables)
    for p, o in enumerate(observables):
        per_time = [influence[:, :, i * P + p] for i in range(len(times))]  # (M, C) each
        reach = float(max(np.abs(v).max() for v in per_time)) or 1.0
        # one scale for every time, 0 in its middle: vmin = -reach, vmax = reach
        title = f"influence function Phi_0 of {o.label}"
        name = influence_name(o, p)
        if vertices.shape[1] == 2:
            if "positions" in mesh:
                fig = position_images(vertices, cells, mesh["positions"], times, np.array(per_time), title=title,
                                      cmap=DIVERGING, vmin=-reach, vmax=reach)
            else:
                fig = circle_density(vertices, cells, [v[0] for v in per_time], times=times, title=title,
                                     vmin=-reach, vmax=reach)
                fig.axes[0].axhline(0.0, color="k", lw=0.6)
            _relabel(fig)
            fig.savefig(path / f"influence-{name}.png", dpi=120)
            continue
        for i, t in enumerate(times):
            fig = sphere_map(vertices, cells, per_time[i].mean(axis=0), title=f"{title} at t = {t:g}", cmap=DIVERGING,
                             vmin=-reach, vmax=reach)
            _relabel(fig)
            fig.savefig(path / f"influence-{name}-t{t:g}.png", dpi=120)


def _relabel(fig) -> None:
    """Name the values ``Phi_0`` where the density pictures name a density (axis or colour bar)."""
    for ax in fig.axes:
        for get, put in ((ax.get_ylabel, ax.set_ylabel), (ax.get_xlabel, ax.set_xlabel)):
            if "density" in get():
                put("influence function Phi_0")
