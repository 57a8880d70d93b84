"""The mean-field validation study behind ``meanfield validate``.

One PDE run (or a given run directory), optionally a second one at half the mesh size for
the extrapolated reference and the discretisation floor (:mod:`.compare`), then the particle
system for every n and seed (``particles.seed + k``, k < seeds), each compared with the PDE
at every output time.  Files written (rank 0) under the study directory::

    pde/, pde-fine/          the PDE runs (unless given)
    particles/n<N>-s<S>-b<B>/ the particle runs: one batch of B = seeds prompts per n (prompt k is
                             the run with seed S + k) where the batched engine covers the model
                             (seed_runs), else particles/n<N>-s<S>/, one run per seed
    validation.csv           metric, time, n, seed, value (with the cluster-level metrics of
                             meanfield.analysis.clusters.compare.ClusterValidation)
    summary.csv              per error metric at the final time (not hist_l1_noise, the iid
                             noise level of hist_l1): fitted log-log slopes vs n, RMS over
                             seeds at each n, the PDE floor, and for the moment errors the
                             predicted RMS sqrt(n_var / n), the ratio measured / predicted,
                             its scatter over the seeds and its band at each n, then the
                             verdict and, for a metric without prediction, why (note)
                             (:mod:`.prediction`)
    response/                the influence functions behind the prediction (meanfield response)
    clusters.csv             cluster agreement at the final time (metric, n, mean and worst
                             over seeds; ClusterValidation: mass and position on the PDE's
                             clusters, the count at the tokens' resolution): a separate table,
                             without slopes, since the count error is an integer
    errors.png, density.png  error vs n (with the n^-1/2 line), PDE vs particle histogram
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...analysis.clusters.compare import ClusterValidation
from ...collective import everywhere, on_root
from ...config import Config, ConfigError, load_config
from ...drivers.launch import check_size, resolve_problem
from ...masks import whole_measure
from ...model import ModelError
from ...particles.sampling import check_causal_sampler, resolve_sampler
from ...problem import Problem
from ...rundir.directory import is_run
from ...rundir.layout import BY_PROMPT, CONFIG
from ...rundir.results import ParticleRunResult, PDERunResult, load_pde_run
from ...rundir.study_directory import prepare_study, write_table
from ...times import MATCH_TOL, time_tol
from .compare import PDEReference
from .prediction import BAND_OUTSIDE, add_predictions, predicted_variances
from .report import format_report, format_table

log = logging.getLogger("meanfield")


@dataclass
class ValidationResult:
    """What a study produced: its directory, the rows of validation.csv, the summary and the cluster table."""

    path: Path
    rows: list[dict]
    summary: list[dict]
    clusters: list[dict]


def refined_overrides(problem: Problem) -> list[str] | None:
    """Overrides that halve the mesh size (S1: twice the cells, S2: one more level); None for mesh files."""
    mesh = problem.mesh
    if mesh.cells is None:
        return None
    return [f"mesh.resolution={2 * mesh.cells if mesh.level is None else mesh.level + 1}"]


def fit_slope(ns: Sequence[int], values: Sequence[float]) -> float:
    """Least-squares slope of log(value) against log(n) (nan with fewer than 2 positive values)."""
    x, y = np.asarray(ns, float), np.asarray(values, float)
    ok = y > 0
    if ok.sum() < 2:
        return float("nan")
    return float(np.polyfit(np.log(x[ok]), np.log(y[ok]), 1)[0])


#: Rows of validation.csv that are no measured error: the iid noise level of ``hist_l1``, drawn on its panel.
NOISE_LEVEL = "hist_l1_noise"


def summarise(rows: list[dict], t: float, floor: dict[str, float]) -> list[dict]:
    """Per error metric at time t (not the cluster agreement, not :data:`NOISE_LEVEL`): per-seed
    slopes (mean, std), slope of the RMS over seeds, RMS at each n."""
    out = []
    metrics = sorted({r["metric"] for r in rows if r["time"] == t} - set(ClusterValidation.METRICS) - {NOISE_LEVEL})
    for metric in metrics:
        sel = [r for r in rows if r["metric"] == metric and r["time"] == t]
        ns = sorted({r["n"] for r in sel})
        seeds = sorted({r["seed"] for r in sel})
        table = {(r["n"], r["seed"]): r["value"] for r in sel}
        slopes = [fit_slope(ns, [table[(n, s)] for n in ns]) for s in seeds if all((n, s) in table for n in ns)]
        rms = [float(np.sqrt(np.mean([table[(n, s)] ** 2 for s in seeds if (n, s) in table]))) for n in ns]
        out.append({"metric": metric, "time": t, "slope_mean": float(np.mean(slopes)) if slopes else np.nan,
                    "slope_std": float(np.std(slopes)) if slopes else np.nan, "slope_rms": fit_slope(ns, rms),
                    "pde_floor": floor.get(metric, np.nan), **{f"rms_n{n}": v for n, v in zip(ns, rms)}})
    return out


def summarise_clusters(rows: list[dict], t: float) -> list[dict]:
    """Cluster agreement at time t per metric and n: mean and worst value over seeds (nan: no match)."""
    out = []
    for metric in ClusterValidation.METRICS:
        sel = [r for r in rows if r["metric"] == metric and r["time"] == t]
        for n in sorted({r["n"] for r in sel}):
            values = np.array([r["value"] for r in sel if r["n"] == n], float)
            finite = values[np.isfinite(values)]
            out.append({"metric": metric, "time": t, "n": n,
                        "mean": float(finite.mean()) if len(finite) else np.nan,
                        "worst": float(finite.max()) if len(finite) else np.nan})
    return out


def check_inputs(problem: Problem, ns: Sequence[int], seeds: int) -> None:
    """Refuse what a validation cannot compare, naming the option (before anything runs)."""
    if problem.particles.d != problem.d:
        raise ConfigError(f"particles.d: validation needs the mesh's d = {problem.d}, got {problem.particles.d}")
    if not problem.velocity.is_attention:
        raise ConfigError("model.velocity: validation compares attention dynamics; got 'rotation'")
    if problem.mask.positional:
        check_causal_sampler(problem.initial(), resolve_sampler(problem.initial().kind, problem.particles.sampler))
    if not ns or any(isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n <= 0 for n in ns):
        raise ConfigError(f"--n: must be positive integers, got {list(ns)!r}")
    if isinstance(seeds, bool) or not isinstance(seeds, (int, np.integer)) or seeds <= 0:
        raise ConfigError(f"--seeds: must be a positive integer, got {seeds!r}")


def _schedule(problem: Problem, option: str, path: Path) -> list[dict]:
    """The problem's layer schedule as plain data (all layers: attention, feed-forward, start times)."""
    try:
        return problem.schedule().to_dict()
    except ModelError as exc:
        raise ConfigError(f"{option} {path}: its model cannot be built: {exc}") from None


def check_pde_run(config: Problem | Config, run_dir: str | Path, option: str) -> None:
    """Refuse a PDE run that does not solve the config's problem (sphere, model, initial
    density) or lacks its output times; the message names what differs."""
    path = Path(run_dir)
    if not is_run(path):
        raise ConfigError(f"{option} {path}: not a meanfield run directory")
    try:
        theirs = load_config(path / CONFIG)
    except ConfigError as exc:
        raise ConfigError(f"{option} {path}: its config.toml cannot be read: {exc}") from None
    try:
        theirs_p = Problem(theirs)
    except ConfigError as exc:
        raise ConfigError(f"{option} {path}: its model cannot be built: {exc}") from None
    ours_p = config if isinstance(config, Problem) else Problem(config)
    config = ours_p.config
    differences = []
    if ours_p.sphere != theirs_p.sphere:
        differences.append(f"mesh.sphere {theirs_p.sphere} (config: {ours_p.sphere})")
    elif theirs_p.velocity != ours_p.velocity or _schedule(theirs_p, option, path) != _schedule(ours_p, option, path):
        differences.append("the model (model.*)")
    elif theirs_p.mask.name != ours_p.mask.name:
        differences.append(f"model.mask {theirs_p.mask.name!r} (config: {ours_p.mask.name!r})")
    if theirs.data["initial"] != config.data["initial"]:
        differences.append("the initial density (initial.*)")
    missing = [t for t in ours_p.time.output_times if not np.isclose(theirs_p.time.output_times, t, rtol=0,
                                                                       atol=time_tol(t, MATCH_TOL)).any()]
    if missing:
        differences.append(f"outputs at t = {', '.join(f'{t:g}' for t in missing[:5])}")
    if differences:
        raise ConfigError(f"{option} {path}: the run differs from the config in {'; '.join(differences)}; "
                          "pass --force to validate against it anyway")


def _pde_runs(problem: Problem, fine_problem: Problem | None, out: Path, pde, pde_fine, comm, quiet: bool,
              overwrite: bool) -> PDEReference:
    """The PDE runs of the study: given (``pde``, ``pde_fine``), or run from ``problem`` and, when
    refining, ``fine_problem`` (the problem at half the mesh size).  A run made here logs to its
    run.log, not the terminal, which gets one line when it starts and one when it ends."""
    from ...drivers.pde import run

    def run_quietly(problem: Problem, folder: Path) -> PDERunResult:
        if not quiet and comm.rank == 0:
            print(f"PDE run {folder}: progress in {folder / 'run.log'}", flush=True)
        result = run(problem, out=folder, comm=comm, quiet=True, overwrite=overwrite)
        if not quiet and comm.rank == 0:
            print(f"PDE run {folder}: {result.status} at t = {result.times[-1]:g}", flush=True)
        return result

    coarse = everywhere(comm, lambda: load_pde_run(pde)) if pde is not None else run_quietly(problem, out / "pde")
    fine = None
    if pde_fine is not None:
        fine = everywhere(comm, lambda: load_pde_run(pde_fine))
    elif fine_problem is not None:
        fine = run_quietly(fine_problem, out / "pde-fine")
    return PDEReference(coarse, fine)


def batch_covers(problem: Problem, n: int) -> bool:
    """Whether the seeds of n tokens run as one batch of prompts (:func:`seed_runs`): the batched
    engine covers the model (:func:`~meanfield.particles.prompts.check_batch`), the config does not
    ask for the fast field (the engine sums exactly, as the direct evaluator does) and one prompt's
    O(n^2) attention matrices fit in the numpy engine's chunk
    (:data:`~meanfield.particles.batch.DEFAULT_MEMORY`), beyond which the single runs' fast field
    costs less."""
    from ...drivers.particles import with_counts
    from ...particles.batch import DEFAULT_MEMORY, bytes_per_prompt
    from ...particles.prompts import check_batch

    if problem.field.method == "fast" or len(problem.output.own_observables) or problem.particles.batched:
        return False
    try:
        check_batch(problem if problem.particles.n == n else Problem(with_counts(problem.config, n)), 1)
    except ConfigError:
        return False
    heads = max((len(layer.attention.heads) for layer in problem.schedule(problem.particles.d).layers
                 if layer.attention is not None), default=1)
    return bytes_per_prompt(n, problem.particles.d, heads) <= DEFAULT_MEMORY["numpy"]


def _prompt_run(result: ParticleRunResult, b: int) -> ParticleRunResult:
    """Prompt b of a batch as the run of its seed: its tokens, its scalars and its moment entries
    (:func:`~meanfield.observables.moment_observables` of its tokens) as observables."""
    from ...observables import moment_observables

    points = result.points[:, b]
    n = points.shape[1]
    moments = [moment_observables(None, x, np.full(n, 1.0 / n)) for x in points]
    observables = {"t": result.observables["t"], **{k: np.array([m[k] for m in moments]) for k in moments[0]},
                   **{k.removesuffix(BY_PROMPT): v[:, b] for k, v in result.by_prompt.items()}}
    return dataclasses.replace(result, points=points, observables=observables, by_prompt={})


def seed_runs(config: Config, n: int, seeds: int, folder: Path, comm, overwrite: bool = False,
              batch: bool | None = None) -> list[tuple[int, ParticleRunResult]]:
    """The particle runs of n tokens with seeds ``particles.seed + k``, k < seeds, as (seed, run):
    one batch of ``seeds`` > 1 prompts in ``folder/n<N>-s<S>-b<seeds>`` where ``batch`` (default
    :func:`batch_covers`; prompt k is the run with seed + k), else one run per seed in
    ``folder/n<N>-s<S>`` (collective)."""
    from ...drivers.particles import run_particles

    base = config.data["particles"]["seed"]
    if batch is None:
        batch = batch_covers(Problem(config), n)
    if not batch or seeds == 1:
        return [(base + k, run_particles(config, n=n, seed=base + k, out=folder / f"n{n}-s{base + k}", comm=comm,
                                         quiet=True, overwrite=overwrite)) for k in range(seeds)]
    data = copy.deepcopy(config.data)
    data["particles"]["prompts"] = seeds
    result = run_particles(Config(data, config.source), n=n, seed=base, out=folder / f"n{n}-s{base}-b{seeds}",
                           comm=comm, quiet=True, overwrite=overwrite)
    return [(base + k, _prompt_run(result, k)) for k in range(seeds)]


def validate(
    config: Problem | Config | Mapping | str | Path | None,
    *,
    ns: Sequence[int],
    seeds: int = 4,
    out: str | Path | None = None,
    pde: str | Path | None = None,
    pde_fine: str | Path | None = None,
    refine: bool = True,
    overrides: list[str] | None = None,
    comm=None,
    quiet: bool = False,
    force: bool = False,
    overwrite: bool = False,
) -> ValidationResult:
    """Run (or reuse) the PDE and the particle systems, compare them and write the study.

    Parameters
    ----------
    config
        Config (or mapping / TOML path); its outputs are the comparison times.
    ns
        Token counts.
    seeds
        Seeds per n: ``particles.seed + k`` for k < seeds.
    out
        Study directory (default ``runs/<name>-validation``).
    pde, pde_fine
        Existing PDE run directories to reuse instead of running the PDE (coarse, and at
        half the mesh size).
    refine
        Run the PDE at half the mesh size too (when ``pde`` is not given), for the
        extrapolated reference observables and the discretisation floor.
    comm
        MPI communicator (default COMM_WORLD); PDE and particle runs are collective, metrics
        are computed on rank 0.
    quiet
        No log on the terminal.
    force
        Use ``pde`` / ``pde_fine`` even if they solve another problem (:func:`check_pde_run`).
    overwrite
        Redo a validation study already in ``out``.
    """
    from mpi4py import MPI

    from ...rundir.names import derived_directory

    comm = comm or MPI.COMM_WORLD
    problem = resolve_problem(config, overrides, comm)
    config = problem.config
    check_inputs(problem, ns, seeds)
    check_size(problem, comm, max(ns))
    refined = refined_overrides(problem)
    fine_problem = Problem(load_config(config.data, refined)) if refine and pde is None and pde_fine is None \
        and refined is not None else None
    if fine_problem is not None:
        check_size(fine_problem, comm)
    path = Path(out) if out is not None else derived_directory(problem.output.directory, "validation")

    def check_given_runs() -> None:
        for option, given in (("--pde", pde), ("--pde-fine", pde_fine)):
            if given is not None and not force:
                check_pde_run(problem, given, option)

    on_root(comm, check_given_runs)
    on_root(comm, lambda: prepare_study(path, "validation", overwrite=overwrite))
    reference = _pde_runs(problem, fine_problem, path, pde, pde_fine, comm, quiet, overwrite)
    t_final = float(reference.coarse.times[-1])
    variances = {} if problem.atoms.enabled else predicted_variances(config, reference.d, t_final, path / "response",
                                                                      comm, overwrite, quiet)
    clusters = ClusterValidation(whole_measure(reference.coarse))  # cluster-level agreement
    base = problem.particles.seed
    rows: list[dict] = []
    finals: dict[tuple[int, int], np.ndarray] = {}
    for n in ns:
        for seed, result in seed_runs(config, n, seeds, path / "particles", comm, overwrite):

            def compare(result=result, n=n, seed=seed) -> None:
                for i, t in enumerate(result.times):
                    row = {name: float(v[i]) for name, v in result.observables.items()}
                    for metric, value in reference.compare(result.points[i], row, float(t), result.positions).items():
                        rows.append({"metric": metric, "time": float(t), "n": int(n), "seed": seed, "value": value})
                for metric, t, value in clusters.rows(result):  # cluster-level agreement
                    rows.append({"metric": metric, "time": t, "n": int(n), "seed": seed, "value": value})
                finals[(n, seed)] = result.points[-1]
                if not quiet and seed == base + seeds - 1:
                    print(f"particles n = {n}: {seeds} seeds done", flush=True)

            on_root(comm, compare)

    def report() -> tuple[list[dict], list[dict]]:
        summary = add_predictions(summarise(rows, t_final, reference.floor(t_final)), variances, seeds)
        cluster_table = summarise_clusters(rows, t_final)
        write_table(path / "validation.csv", rows)
        write_table(path / "summary.csv", summary)
        write_table(path / "clusters.csv", cluster_table)
        from .plots import plot_density, plot_errors

        plot_errors(path / "errors.png", rows, summary, t_final)
        plot_density(path / "density.png", reference, finals[(max(ns), base)], t_final)
        if not quiet:
            print(f"{format_report(summary, t_final, seeds, BAND_OUTSIDE)}\n"
                  f"cluster agreement at t = {t_final:g}, mean and worst over seeds (mass and position: the tokens\n"
                  "against the PDE in the regions of the PDE's clusters; count: at the tokens' resolution, the PDE\n"
                  "smoothed by their kernel, pde_clusters_resolved of them)\n"
                  f"{format_table(cluster_table)}", flush=True)
        return summary, cluster_table

    summary, cluster_table = on_root(comm, report)
    return ValidationResult(path, rows, summary, cluster_table)
