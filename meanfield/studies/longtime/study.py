"""Long-time studies on S^1: reference and hybrid cluster histories, merge tables against beta.

* :func:`reference_history`: the Lagrangian reference (:mod:`meanfield.references.lagrangian_circle`)
  of a config, reduced to clusters on the fly (:mod:`meanfield.analysis.longtime.events`), so
  n = 16384 tokens to t = 2000 never hold more than one output in memory;
* :func:`run_history`: the clusters of a PDE run on S^1 (hybrid or not) as ``meanfield clusters``
  finds them (:func:`~meanfield.analysis.clusters.analyse_run`);
* :func:`beta_table`: merge and metastable times of the reference for several beta;
* :func:`long_time_study` (``meanfield longtime``): all of it written as CSV + PNG.

Output times (:func:`output_times`): every ``DT_EARLY`` up to ``T_EARLY`` (formation), then every
``DT_LATE``; merge times are interpolated between outputs (:mod:`meanfield.analysis.longtime.events`), which is exact
for the exponential final approach, so a coarse late spacing costs no accuracy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...analysis.longtime.compare import HistoryComparison, compare_histories
from ...analysis.longtime.events import DELTA, MIN_MASS, PointSetHistory, point_set_history
from ...atoms import Atoms
from ...config import Config, load_config
from ...problem import Problem
from ...references.lagrangian_circle import ATOL, RTOL, SERIES_TOL, iterate_tokens, quantile_tokens
from ...rundir.directory import check_output_folder
from ...rundir.results import load_pde_run, read_header
from ...spheres import S1

T_EARLY, DT_EARLY, DT_LATE = 20.0, 0.1, 0.5
#: Reference tokens of a study by default.
TOKENS = 8192


def output_times(t_final: float, t_early: float = T_EARLY, dt_early: float = DT_EARLY,
                 dt_late: float = DT_LATE) -> np.ndarray:
    """Every ``dt_early`` up to ``t_early``, then every ``dt_late`` up to ``t_final`` (included)."""
    early = np.arange(0.0, min(t_early, t_final), dt_early)
    late = np.arange(min(t_early, t_final), t_final, dt_late)
    return np.unique(np.round(np.concatenate([early, late, [t_final]]), 12))


def _problem(config: Problem | Config | str | Path | dict) -> Problem:
    """The study's problem, built once (a Problem is used as it is)."""
    if isinstance(config, Problem):
        return config
    return Problem(config if isinstance(config, Config) else load_config(config))


def check_reference_config(problem: Problem) -> None:
    """The reference needs S^1 and one attention head with Q = K = V = I; raises ValueError naming the field."""
    if problem.d != 2:
        raise ValueError(f"mesh.sphere: the long-time reference is on S1, got {problem.sphere!r}")
    if len(problem.schedule().layers) != 1:
        raise ValueError("model.layers: the long-time reference needs a single layer")
    if not problem.model().is_identity:
        raise ValueError("model: the long-time reference needs Q = K = V = I (one head)")


def reference_history(
    config: Problem | Config | str | Path | dict,
    *,
    n: int = TOKENS,
    beta: float | None = None,
    t_final: float | None = None,
    times: Sequence[float] | None = None,
    rtol: float = RTOL,
    atol: float = ATOL,
    tol: float = SERIES_TOL,
    delta: float = DELTA,
    min_mass: float = MIN_MASS,
) -> PointSetHistory:
    """Clusters of n quantile tokens of the config's initial density, moved by the exact field.

    Parameters
    ----------
    config
        A config (S^1, Q = K = V = I); its initial density, attention, beta and ``time.t_final``.
    n
        Tokens.
    beta, t_final
        Override the config's.
    times
        Output times (default :func:`output_times` of t_final).
    rtol, atol, tol
        Integrator and series tolerances (:mod:`meanfield.references.lagrangian_circle`).
    delta, min_mass
        The cluster rule (:mod:`meanfield.analysis.longtime.events`).
    """
    problem = _problem(config)
    check_reference_config(problem)
    model = problem.model()
    theta, w = quantile_tokens(problem.initial(), n)
    end = problem.time.t_final if t_final is None else float(t_final)
    frames = iterate_tokens(theta, w, model.beta if beta is None else beta,
                            output_times(end) if times is None else times,
                            attention=model.attention, rtol=rtol, atol=atol, tol=tol)
    ids = np.arange(n)
    return point_set_history(((t, a, w, ids) for t, a in frames), delta=delta, min_mass=min_mass)


def run_history(run: str | Path, *, delta: float = DELTA) -> PointSetHistory:
    """The clusters of a PDE run on S^1 as ``meanfield clusters`` finds them, as a history.

    The run is analysed by :func:`~meanfield.analysis.clusters.analyse_run` (the one cluster
    definition: basins of significant density peaks, atoms as clusters), so the clusters, their
    ids, centres (the peak's theta in (-pi, pi]), masses and events are those of ``meanfield
    clusters RUN``; merges are timed at ``delta``.  Clusters are listed in increasing theta;
    ``stray`` is the mass in no cluster (all of it when the density has no cluster).
    """
    from ...analysis.clusters import analyse_run
    from ...analysis.clusters.coords import angle_columns

    result = load_pde_run(run)
    if result.header.sphere is not S1:
        raise ValueError(f"{result.path}: run_history needs a PDE run on S1")
    basins = analyse_run(result, plots=False, merge_distance=delta)
    atoms: list[Atoms | None] = list(result.atoms) if result.atoms is not None else [None] * len(result.times)
    history = PointSetHistory(float(delta), {"threshold": basins.threshold, "prominence": basins.prominence},
                              events=list(basins.events))
    for frame, ids, density, atom in zip(basins.frames, basins.ids, result.densities, atoms, strict=True):
        theta = angle_columns(frame.positions)["theta"]
        order = np.argsort(theta, kind="stable")
        total = float(density @ result.areas) + (float(atom.masses.sum()) if atom is not None else 0.0)
        history.times.append(frame.t)
        history.labels.append(np.asarray(ids)[order])
        history.centres.append(theta[order])
        history.masses.append(frame.masses[order])
        history.total.append(total)
        history.stray.append(total - float(frame.masses.sum()))
    return history


@dataclass(frozen=True)
class BetaRow:
    """Merge and metastable times of one beta (reference)."""

    beta: float
    merges: list[float]
    states: list[tuple[int, float, float, bool]]  # (clusters, start, duration, lower bound)
    final_masses: list[float]
    final_centres: list[float]


@dataclass
class LongTimeStudy:
    """What :func:`long_time_study` computed and wrote; with a hybrid run, its history and its
    comparison with the reference of the config's beta (merges, clusters at the run's last output)."""

    rows: list[BetaRow]
    histories: dict[float, PointSetHistory]
    files: list[Path] = field(default_factory=list)
    hybrid: PointSetHistory | None = None
    comparison: HistoryComparison | None = None


def format_comparison(comparison: HistoryComparison) -> str:
    """The hybrid run against the reference in words: merge times, clusters at the common last time."""
    merges = ", ".join(f"{b:.6g} (reference {a:.6g}, {(b - a) / a:+.2%})" if np.isfinite(a) and np.isfinite(b)
                       else f"{b:.6g} (not in the reference)" if np.isfinite(b) else f"none (reference {a:.6g})"
                       for a, b in comparison.merges)
    ref, hybrid = comparison.counts
    state = f"{hybrid} clusters at t = {comparison.time:g} (reference {ref})"
    if ref == hybrid and ref:
        state += (f", centres within {comparison.position_error:.2g} rad and masses within "
                  f"{comparison.mass_error:.2g} of the reference")
    return f"hybrid run: merges at {merges or 'none (reference: none)'}; {state}"


def beta_row(beta: float, history: PointSetHistory) -> BetaRow:
    """The table row of one reference history."""
    return BetaRow(float(beta), [e.time for e in history.merges()],
                   [(s.count, s.start, s.duration, s.lower_bound) for s in history.states()],
                   history.masses[-1].tolist(), history.centres[-1].tolist())


def beta_table(config: Problem | Config | str | Path | dict, betas: Sequence[float], **kwargs: Any) -> LongTimeStudy:
    """:func:`reference_history` for each beta (other arguments passed on) and its table rows."""
    problem = _problem(config)
    histories = {float(b): reference_history(problem, beta=float(b), **kwargs) for b in betas}
    return LongTimeStudy([beta_row(b, h) for b, h in histories.items()], histories)


def check_study_inputs(problem: Problem, out: str | Path, betas: Sequence[float] | None, n: int, t_final: float | None,
                       run_dir: str | Path | None, delta: float, overwrite: bool = False) -> Path:
    """Everything :func:`long_time_study` would refuse, before it computes or writes anything.

    Returns the output folder (not created); raises ValueError naming the option.  A folder
    holding an earlier study is refused unless ``overwrite``.
    """
    from ...analysis.longtime.files import owns

    check_reference_config(problem)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 2:
        raise ValueError(f"--n: the reference needs at least 2 tokens, got {n!r}")
    for option, value in (("--t-final", t_final), ("--delta", delta)):
        if value is not None and not (np.isfinite(value) and value > 0):
            raise ValueError(f"{option}: must be a number > 0, got {value!r}")
    if betas is not None and not all(np.isfinite(b) and b > 0 for b in betas):
        raise ValueError(f"--betas: must be numbers > 0, got {list(betas)}")
    if run_dir is not None:
        header = read_header(Path(run_dir))
        if header.run_type != "pde" or header.sphere is not S1:
            raise ValueError(f"--run {run_dir}: needs a PDE run on S1, got a {header.run_type} run on "
                             f"{header.sphere.name if header.sphere else f'S{header.d - 1}'}")
    return check_output_folder(out, owns, "long-time study files", overwrite=overwrite)


def long_time_study(
    config: Problem | Config | str | Path | dict,
    out: str | Path,
    *,
    betas: Sequence[float] | None = None,
    n: int = TOKENS,
    t_final: float | None = None,
    run: str | Path | None = None,
    delta: float = DELTA,
    min_mass: float = MIN_MASS,
    plots: bool = True,
    overwrite: bool = False,
) -> LongTimeStudy:
    """The reference for each beta (default: the config's), optionally a hybrid run, written under ``out``.

    Writes (:mod:`.files`) ``reference-beta<B>-{clusters,events,states}.csv`` per beta,
    ``hybrid-*.csv`` for ``run``, ``merge-table.csv``; with ``plots``, ``clusters.png``
    (count against log t and trajectories: every beta, and the hybrid)
    and ``merge-table.png`` (merge and metastable times against beta).  A folder holding an
    earlier study is refused unless ``overwrite`` (its files are then replaced).
    """
    from ...analysis.longtime.files import write_point_set_history, write_table
    from ...analysis.longtime.plots import point_set_history_figure, save, table_figure

    problem = _problem(config)
    out = check_study_inputs(problem, out, betas, n, t_final, run, delta, overwrite)
    chosen = [problem.model().beta] if betas is None else [float(b) for b in betas]
    study = beta_table(problem, chosen, n=n, t_final=t_final, delta=delta, min_mass=min_mass)
    for b, h in study.histories.items():
        study.files += write_point_set_history(h, out, f"reference-beta{b:g}")
    shown = {f"reference beta={b:g}": study.histories[b] for b in chosen}
    if run is not None:
        hybrid = run_history(run, delta=delta)
        study.files += write_point_set_history(hybrid, out, "hybrid")
        shown["hybrid"] = hybrid
        reference = study.histories[chosen[0]]
        study.hybrid = hybrid
        study.comparison = compare_histories(reference, hybrid, min(reference.times[-1], hybrid.times[-1]))
    study.files.append(write_table(study.rows, out))
    if plots:
        study.files.append(save(point_set_history_figure(shown), out / "clusters.png"))
        study.files.append(save(table_figure([r.beta for r in study.rows], [r.merges for r in study.rows],
                                             [r.states for r in study.rows]),
                                out / "merge-table.png"))
    return study
