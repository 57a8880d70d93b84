"""Cluster analysis of runs: the Python API and what ``meanfield clusters RUN_DIR`` calls.

A PDE run is read at every output time as its DG1 state when the run has one
(``vertex_densities``; masses and widths then integrate the linear DG1 density), else as
density cell averages; peaks come from the cell averages either way (:mod:`.fields` says
why).  A particle run is read through a kernel
density estimate on an analysis mesh (the run config's mesh unless ``resolution`` is given).
Either way the same definition of clusters applies (:mod:`.basins`): significant peaks of the
density (``prominence``) whose top cell reaches ``threshold`` (default: the uniform density
1/|S|, :data:`meanfield.peaks.LEVEL` times it), with their watershed regions.  In a hybrid run
(density + atoms) every atom is a cluster too, with the density around it (:mod:`.atoms`).  A
causal run is analysed as its whole token distribution (the mean of its positions' densities) and, by
:func:`analyse_positions`, position by position.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...masks import NO_MASK, Mask, whole_measure
from ...merging import MERGE_DISTANCE
from ...mesh import RawMesh, raw_mesh
from ...peaks import LEVEL, PROMINENCE
from ...references.spectral_circle import CircleSolution
from ...rundir.directory import check_output_folder
from ...rundir.header import RunHeader
from ...rundir.results import load_run
from ...spheres import S1, sphere_area, sphere_named
from ..events import Event
from .atoms import WithAtoms
from .cells import AnalysisMesh
from .crossing import ALREADY, CROSSED, NEVER
from .fields import CellAverages, DG1Data, Field
from .files import FILES, PLOT_FILE, POSITIONS_FILE, write_basin_history, write_position_histories
from .frame import analyse_field
from .history import FACTORS, BasinHistory, Crossing, build_history
from .noise import token_bandwidth, token_prominence
from .particles import TokenField
from .plots import plot_history
from .spectral import FourierField, grid_mesh


def _config_mesh(result: Any, resolution: int | None = None) -> RawMesh:
    """The mesh a run's config describes (its header's ``[mesh]`` table), or its sphere's generated mesh of
    ``resolution``; a result without a header (duck-typed) is read for it from its ``config``."""
    header = getattr(result, "header", None) or RunHeader.of("pde", result.config)
    if resolution is not None:
        return raw_mesh(header.mesh.sphere.name, resolution)
    return raw_mesh(header.mesh.sphere.name, header.mesh.resolution, header.mesh.file)


def pde_fields(result: Any) -> tuple[AnalysisMesh, list[tuple[float, Field]]]:
    """The analysis mesh and the field at every output time of a PDE run result.

    The mesh is ``result.vertices``/``result.cells`` when the result has them, else the one its
    config describes (checked against the run's centroids).  A hybrid run's fields include its
    atoms (``result.atoms``; :mod:`.atoms`).
    """
    vertices = getattr(result, "vertices", None)
    raw = RawMesh(vertices, result.cells) if vertices is not None else _config_mesh(result)
    mesh = AnalysisMesh(raw)
    mesh.check_centroids(np.asarray(result.centroids), str(getattr(result, "path", "run")))
    vertex = getattr(result, "vertex_densities", None)
    fields: list[CellAverages]
    if vertex is not None:
        fields = [DG1Data(mesh, v) for v in vertex]
    else:
        fields = [CellAverages(mesh, rho, result.areas) for rho in result.densities]
    atoms = getattr(result, "atoms", None)
    if atoms is not None:
        return mesh, [(float(t), WithAtoms(f, a)) for t, f, a in zip(result.times, fields, atoms)]
    return mesh, [(float(t), f) for t, f in zip(result.times, fields)]


def particle_fields(result: Any, bandwidth: float | None = None,
                    resolution: int | None = None) -> tuple[AnalysisMesh, list[tuple[float, Field]]]:
    """The analysis mesh and the token density estimate at every output time of a particle run.

    ``bandwidth`` defaults to :func:`.noise.token_bandwidth` of the run's token count.
    """
    if result.points.ndim != 3:
        raise ValueError(f"{getattr(result, 'path', 'the run')}: a batch of {result.points.shape[1]} prompts; cluster "
                         "analysis takes one set of tokens (prompt b: load_run(...).points[:, b])")
    mesh = AnalysisMesh(_config_mesh(result, resolution))
    if result.points.shape[2] != mesh.d:
        raise ValueError(f"particles live on S^{result.points.shape[2] - 1}; cluster analysis needs S^1 or S^2 "
                         f"matching the config's mesh ({mesh.sphere})")
    if bandwidth is None:
        bandwidth = token_bandwidth(result.points.shape[1], mesh.d, mesh.cell_size)
    return mesh, [(float(t), TokenField(mesh, x, bandwidth=bandwidth)) for t, x in zip(result.times, result.points)]


def default_prominence(mesh: AnalysisMesh, field: TokenField, threshold: float | None = None) -> float:
    """The default prominence of a token field: :data:`PROMINENCE`, and no less than the
    sampling noise of its tokens at the threshold (:func:`.noise.token_prominence`)."""
    least = LEVEL / sphere_area(mesh.d) if threshold is None else threshold
    return token_prominence(len(field.points), mesh.d, field.bandwidth, least, PROMINENCE)


def check_options(*, threshold: float | None = None, prominence: float | None = PROMINENCE,
                  factors: Sequence[float] = FACTORS, bandwidth: float | None = None,
                  resolution: int | None = None) -> None:
    """Refuse analysis options out of range (ValueError naming the option), before any run is read."""
    if prominence is not None and not 0 <= prominence < 1:
        raise ValueError(f"prominence: must be in [0, 1), got {prominence!r}")
    if threshold is not None and not threshold > 0:
        raise ValueError(f"threshold: must be > 0 (density units), got {threshold!r}")
    if any(not f > 0 for f in factors):
        raise ValueError(f"factors: must be > 0, got {list(factors)!r}")
    if bandwidth is not None and not (np.isfinite(bandwidth) and bandwidth > 0):
        raise ValueError(f"bandwidth: must be > 0 (radians), got {bandwidth!r}")
    if resolution is not None and not (isinstance(resolution, (int, np.integer)) and 0 <= resolution):
        raise ValueError(f"resolution: must be an integer >= 0 (S2: icosphere level, S1: cells), got {resolution!r}")


def analyse_fields(fields: Iterable[tuple[float, Field]], sphere: str, *, threshold: float | None = None,
                   prominence: float = PROMINENCE, factors: Sequence[float] = FACTORS,
                   source: str = "", merge_distance: float = MERGE_DISTANCE) -> BasinHistory:
    """Clusters of densities at successive times (any :class:`~.fields.Field`), tracked; merges
    timed at ``merge_distance`` (rad, :mod:`meanfield.merging`)."""
    check_options(threshold=threshold, prominence=prominence, factors=factors)
    threshold = LEVEL * sphere_named(sphere).uniform_density if threshold is None else float(threshold)
    frames = [analyse_field(field, t, threshold, prominence) for t, field in fields]
    return build_history(frames, sphere, threshold, prominence, factors, source, merge_distance)


def analyse_run(run: Any, *, threshold: float | None = None, prominence: float | None = None,
                factors: Sequence[float] = FACTORS, bandwidth: float | None = None, resolution: int | None = None,
                out: str | Path | None = None, plots: bool = True,
                merge_distance: float = MERGE_DISTANCE) -> BasinHistory:
    """Peaks, basins, tracking and crossing times of a PDE or particle run.

    Parameters
    ----------
    run
        A run directory, or a loaded PDE result (``times, densities, areas, centroids, config``
        and optionally ``vertices, cells, vertex_densities``) or particle result (``times,
        points, config``).
    threshold
        Least density (density units) at a cluster's top cell; default the uniform ``1/|S|``.
    prominence
        Least relative depth of the dip separating a cluster from a taller one (:mod:`.basins`);
        default :data:`PROMINENCE`, and for particle runs no less than the sampling noise of
        the estimate (:func:`.noise.token_prominence`).
    factors
        Crossing times are computed for ``factor`` x uniform.
    bandwidth, resolution
        Particle runs: kernel bandwidth in radians (default :func:`.noise.token_bandwidth`:
        ``n^(-1/(d+3))``, at least one cell) and analysis mesh
        (S^1: cells, S^2: icosphere level; default the run config's mesh).
    out
        Write clusters.csv, events.csv, crossings.csv (and clusters.png) there.
    plots
        Also write clusters.png.
    merge_distance
        The distance (rad) at which two clusters have merged (:mod:`meanfield.merging`).
    """
    result = load_run(run) if isinstance(run, (str, Path)) else run
    result = whole_measure(result)  # a causal PDE run: its whole token distribution
    particles = hasattr(result, "points")
    mesh, fields = particle_fields(result, bandwidth, resolution) if particles else pde_fields(result)
    token_field = fields[0][1] if particles and fields else None
    if prominence is None:
        prominence = PROMINENCE
        if token_field is not None:
            assert isinstance(token_field, TokenField)  # particle_fields builds TokenFields
            prominence = default_prominence(mesh, token_field, threshold)
    history = analyse_fields(fields, mesh.sphere, threshold=threshold, prominence=prominence, factors=factors,
                             source=str(getattr(result, "path", "")), merge_distance=merge_distance)
    history.info.update(data=fields[0][1].source if fields else "none", cells=mesh.num_cells,
                        scheme=getattr(result, "metadata", {}).get("scheme"))
    if isinstance(token_field, TokenField):
        history.info["bandwidth"] = token_field.bandwidth
    if out is not None:
        write_basin_history(out, history)
        if plots:
            plot_history(Path(out) / PLOT_FILE, history)
    return history


def analyse_positions(run: Any, *, threshold: float | None = None, prominence: float | None = None,
                      factors: Sequence[float] = FACTORS) -> list[BasinHistory]:
    """A causal PDE run's clusters position by position: one history per slice (parameters as
    in :func:`analyse_run`)."""
    result = load_run(run) if isinstance(run, (str, Path)) else run
    mask: Mask = getattr(result, "mask", NO_MASK)
    return [analyse_run(part, threshold=threshold, prominence=prominence, factors=factors, plots=False)
            for part in mask.slice_runs(result)]


def _when(crossing: Crossing) -> str:
    """A crossing as a time, ``already`` (above at the first output) or ``never``."""
    return f"{crossing.time:.4g}" if crossing.status == CROSSED else crossing.status


def format_positions(positions: np.ndarray, histories: list[BasinHistory], shown: int = 8) -> str:
    """A short text report of a causal run's clusters by position: for up to ``shown`` positions
    spread over [0, 1], the clusters at the last output and when the global maximum first
    reaches each factor x uniform (``already``: at the first output; ``never``: not by the last)."""
    lines = ["  by position: clusters at the last output; global max reaching " +
             ", ".join(f"{c.factor:g}x" for c in histories[0].crossings if c.id is None) +
             " at t (already: at t = 0; never: not by the last output)"]
    for k in sorted({round(i) for i in np.linspace(0, len(positions) - 1, min(shown, len(positions)))}):
        history = histories[k]
        times = [_when(c) for c in history.crossings if c.id is None]
        lines.append(f"  s = {positions[k]:<7.4g} {history.frames[-1].count:>3d} clusters; t = {', '.join(times)}")
    return "\n".join(lines)


def analyse_spectral(solution: CircleSolution, *, threshold: float | None = None, prominence: float = PROMINENCE,
                      factors: Sequence[float] = FACTORS) -> BasinHistory:
    """The cluster analysis of a spectral S^1 reference solution (:mod:`.spectral`)."""
    mesh = grid_mesh(solution.modes)
    fields = [(float(t), FourierField(mesh, solution, i)) for i, t in enumerate(solution.times)]
    history = analyse_fields(fields, S1.name, threshold=threshold, prominence=prominence, factors=factors,
                             source="spectral reference")
    history.info.update(data=FourierField.source, cells=mesh.num_cells)
    return history


def format_summary(history: BasinHistory) -> str:
    """A short text report: the merges first (their times), then the other events, the cluster
    count where it changes and the global maximum's crossing times.  The per-output table is
    clusters.csv (one row per cluster and output), never printed."""
    scheme = history.info.get("scheme")
    head = (f"{history.source or 'run'}: {history.sphere}{f', {scheme}' if scheme else ''}, "
            f"{history.info.get('data', '?')} data, {history.info.get('cells', '?')} cells, "
            f"threshold {history.threshold:.4g} ({history.threshold / history.uniform:.3g} x uniform), "
            f"prominence {history.prominence:g}")
    merges = [e for e in history.events if e.kind == "merge"]
    lines = [head, *(f"  {_event_text(e)}" for e in merges)]
    if not merges:
        lines.append("  no merge")
    lines += [f"  {_event_text(e)}" for e in history.events if e.kind != "merge"]
    lines.append(f"  clusters: {_count_changes(history)} (each output's clusters: {FILES[0]})")
    if history.has_atoms and history.frames and history.frames[-1].atom_masses is not None:
        last = history.frames[-1]
        assert last.atom_masses is not None
        count = last.atoms.count if last.atoms is not None else int(np.count_nonzero(last.atom_masses > 0))
        lines.append(f"  atoms at t = {last.t:.4g}: {count}, holding mass {last.atom_masses.sum():.4g}")
    lines.append("  global max: " + _crossings_text([c for c in history.crossings if c.id is None],
                                                      history.frames[0].t if history.frames else float("nan"),
                                                      history.frames[-1].t if history.frames else float("nan")))
    return "\n".join(lines)


def _count_changes(history: BasinHistory) -> str:
    """The number of clusters at the first output and at each output where it changes."""
    parts: list[str] = []
    previous = None
    for f in history.frames:
        if f.count != previous:
            parts.append(f"{f.count} {'at' if previous is None else 'from'} t = {f.t:.4g}")
            previous = f.count
    return ", ".join(parts) or "no outputs"


def _event_text(event: Event) -> str:
    """One event in words: merges (the merge time of :mod:`meanfield.merging`), births, vanishings."""
    if event.kind == "merge":
        return (f"merge    at t = {event.time:.6g}: cluster {event.absorbed} into {event.kept} "
                f"(peaks within {MERGE_DISTANCE:g} rad)")
    if event.kind == "death":
        return f"vanished at t = {event.time:.4g}: cluster {event.kept} (its peak sank below the threshold)"
    parent = f" (from cluster {event.absorbed})" if event.absorbed >= 0 else ""
    return f"born     at t = {event.time:.4g}: cluster {event.kept}{parent}"


def _crossings_text(crossings: list[Crossing], first: float, last: float) -> str:
    """The global maximum's crossings in words: reached (when), already above at the first
    output, not reached by the last."""
    by = {status: [c for c in crossings if c.status == status] for status in (CROSSED, ALREADY, NEVER)}
    parts = []
    if by[CROSSED]:
        parts.append("reaches " + ", ".join(f"{c.factor:g}x at t = {c.time:.6g}" for c in by[CROSSED]))
    if by[ALREADY]:
        parts.append(f"already above {', '.join(f'{c.factor:g}x' for c in by[ALREADY])} at t = {first:.4g} "
                     "(the first output)")
    if by[NEVER]:
        parts.append(f"never reaches {', '.join(f'{c.factor:g}x' for c in by[NEVER])} by t = {last:.4g}")
    return "; ".join(parts) or "no factors asked"


def cluster_study(run_dir: str | Path, *, out: str | Path | None = None, threshold: float | None = None,
                  prominence: float | None = None, factors: Sequence[float] = FACTORS,
                  bandwidth: float | None = None, resolution: int | None = None, plots: bool = True,
                  quiet: bool = False, overwrite: bool = False) -> BasinHistory:
    """What ``meanfield clusters RUN_DIR`` does: analyse, write into ``out`` (default RUN_DIR/clusters), report.

    Serial (call it on one rank).  Parameters as in :func:`analyse_run`; an ``out`` holding an
    earlier analysis is refused unless ``overwrite``.
    """
    check_options(threshold=threshold, prominence=prominence, factors=factors, bandwidth=bandwidth,
                  resolution=resolution)
    out = check_output_folder(Path(run_dir) / "clusters" if out is None else Path(out),
                              lambda name: name in (*FILES, PLOT_FILE, POSITIONS_FILE), "cluster tables",
                              overwrite=overwrite)
    result = load_run(run_dir)
    history = analyse_run(result, threshold=threshold, prominence=prominence, factors=factors,
                          bandwidth=bandwidth, resolution=resolution, out=out, plots=plots)
    summary = format_summary(history)
    positions = getattr(result, "positions", None)
    if positions is not None:
        histories = analyse_positions(result, threshold=threshold, prominence=prominence, factors=factors)
        write_position_histories(out, positions, histories)
        summary += "\n" + format_positions(positions, histories)
    if not quiet:
        print(summary + f"\nresults: {out}", flush=True)
    return history
