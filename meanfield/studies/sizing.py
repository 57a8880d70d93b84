"""What a study would cost, before it runs (``meanfield check COMMAND CONFIG ...``).

Each function takes the command's own arguments and returns a
:class:`~meanfield.drivers.job_size.JobSize`: the runs the study would make, each sized as a
single run is (:mod:`meanfield.drivers.job_size`), times how often it makes them.  Nothing is
written.

* ``particles``: the particle run (one prompt, or a batch of ``particles.prompts``).
* ``validate``: the PDE run, the PDE at half the mesh size (unless ``--no-refine`` or given
  runs), the response that predicts the fluctuations (the PDE forward and its adjoint; not
  with atoms), and for each n its seeds (one batch of prompts where the batched engine covers
  the model, else one run per seed).
* ``response``: the PDE forward and its adjoint.
* ``sweep``: every point, its first and its last sized (the range of a point's wall time).
* ``phase``: one batch of prompts per (d, beta), the smallest and the largest beta of each d
  sized and those between interpolated.
* ``fit``: its iterations, each one or two evaluations of its objective (a forward run of every
  pair and its gradient), one evaluation timed.

The adjoint's backward sweep is counted as :data:`ADJOINT_COST` forward runs' time stepping.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..config import load_config
from ..drivers.job_size import JobSize, Part, particle_part, pde_part
from ..drivers.planning import check_config
from ..drivers.walltime import cores as cores_here
from ..problem import Problem
from ..wording import counted
from .particle_runs import run_particles

#: Evaluations of the objective per L-BFGS-B iteration, fewest and most (its line search; measured: 16
#: for 10 iterations of ``s1-fit-transport``).
FIT_EVALUATIONS = (1.0, 2.0)
#: The adjoint's backward sweep in forward runs' time stepping.  Chosen when the DG1 and FV gradients
#: measured 3.2-3.7 times a forward run (``benchmarks/bench_adjoint.py``), the recording being the
#: forward run itself; since the recording keeps its Runge-Kutta stages, the backward sweep measures
#: 0.9-1.5 forward runs for DG1 and up to 3.5 for FV (s2-clustering), so this overestimates DG1's.
ADJOINT_COST = 2.5


def particles_size(config: Any, overrides: list[str] | None = None, *, n: int | None = None,
                   seed: int | None = None, out: str | Path | None = None, ranks: int = 1,
                   cores: int | None = None) -> JobSize:
    """``meanfield particles``: one run of ``n`` tokens (a batch where ``particles.prompts`` > 1)."""
    from mpi4py import MPI

    from ..drivers.particles import counted_problem, default_directory

    problem = counted_problem(config, overrides, n, seed, MPI.COMM_SELF)
    p = problem.particles
    near = Path(out) if out is not None else default_directory(problem)
    what = f"particles n = {p.n}" + (f", {p.prompts} prompts" if p.prompts > 1 else "") + f" on S^{p.d - 1}"
    part = particle_part(problem, what, ranks, cores or cores_here(), near, run_particles)
    return JobSize("particles", ranks, [part])


def validate_size(config: Any, overrides: list[str] | None = None, *, ns: Sequence[int], seeds: int = 4,
                  pde: str | Path | None = None, pde_fine: str | Path | None = None, refine: bool = True,
                  out: str | Path | None = None, ranks: int = 1, cores: int | None = None) -> JobSize:
    """``meanfield validate``: the PDE runs, the response and the seeds of every n (module docstring)."""
    from ..drivers.particles import with_counts
    from ..rundir.names import derived_directory
    from .validation.study import batch_covers, check_inputs, refined_overrides

    cores = cores or cores_here()
    problem = Problem(load_config(config, overrides))
    check_inputs(problem, ns, seeds)
    path = Path(out) if out is not None else derived_directory(problem.output.directory, "validation")
    parts, notes = [], []
    coarse = check_config(problem, out=path / "pde", ranks=ranks, cores=cores) if pde is None else None
    if coarse is not None:
        parts.append(pde_part(coarse, "PDE run"))
    refined = refined_overrides(problem)
    if refine and pde is None and pde_fine is None and refined is not None:
        fine = Problem(load_config(problem.config.data, refined))
        parts.append(pde_part(check_config(fine, out=path / "pde-fine", ranks=ranks, cores=cores),
                              "PDE run at half the mesh size"))
    if not problem.atoms.enabled:
        if coarse is None:
            coarse = check_config(problem, out=path / "response", ranks=ranks, cores=cores)
        parts.append(pde_part(coarse, "response (the PDE forward and its adjoint: the predicted fluctuations)",
                              factor=1 + ADJOINT_COST))
    for n in ns:
        single = Problem(with_counts(problem.config, n))
        if seeds > 1 and batch_covers(single, n):
            batch = Problem(load_config(single.config.data, [f"particles.prompts={seeds}"]))
            parts.append(particle_part(batch, f"particles n = {n}, the {seeds} seeds as one batch", ranks, cores,
                                       path / "particles", run_particles))
        else:
            parts.append(particle_part(single, f"particles n = {n}, one seed", ranks, cores, path / "particles",
                                       run_particles, runs=seeds))
    notes.append("the comparison of every output with the PDE and the pictures are not counted")
    return JobSize("validate", ranks, parts, notes)


def response_size(config: Any, overrides: list[str] | None = None, *, out: str | Path | None = None,
                  ranks: int = 1, cores: int | None = None) -> JobSize:
    """``meanfield response``: the PDE forward (recorded) and its adjoint back."""
    problem = Problem(load_config(config, overrides))
    report = check_config(problem, out=out, ranks=ranks, cores=cores or cores_here())
    return JobSize("response", ranks, [pde_part(report, "PDE forward and its adjoint", factor=1 + ADJOINT_COST)],
                   [f"the backward sweep counted as {ADJOINT_COST:g} forward runs' time stepping "
                    "(benchmarks/bench_adjoint.py)"])


def sweep_size(config: Any, overrides: list[str] | None = None, *, grid: Mapping[str, Sequence[Any]],
               seeds: int | None = None, draws: int | None = None, particles: bool = False,
               out: str | Path | None = None, ranks: int = 1, cores: int | None = None) -> JobSize:
    """``meanfield sweep``: its points, the first and the last sized."""
    from .sweep import point_configs

    cores = cores or cores_here()
    configs = point_configs(config, grid, seeds=seeds, draws=draws, particles=particles, out=out,
                            overrides=overrides)
    ends = [configs[0]] if len(configs) == 1 else [configs[0], configs[-1]]
    sized = []
    for point in ends:
        problem = Problem(point)
        if particles:
            sized.append(particle_part(problem, "particle run", ranks, cores, Path(out or "."), run_particles))
        else:
            sized.append(pde_part(check_config(problem, out=Path(out or ".") / "point", ranks=ranks, cores=cores),
                                  "PDE run"))
    low = min(p.seconds[0] for p in sized)
    high = max(p.seconds[1] for p in sized)
    what = "particle runs" if particles else "PDE runs"
    part = Part(f"{what} (points; the first and the last sized)", len(configs), (low, high),
                max(p.memory for p in sized), max(p.disk for p in sized))
    return JobSize("sweep", ranks, [part])


def phase_size(config: Any, overrides: list[str] | None = None, *, betas: Sequence[float], times: Sequence[float],
               ds: Sequence[int] | None = None, n: int | None = None, prompts: int | None = None,
               attention: str | None = None, device: str | None = None, precision: str | None = None,
               out: str | Path | None = None, ranks: int = 1, cores: int | None = None) -> JobSize:
    """``meanfield phase``: a batch of prompts per (d, beta) to the last time, the grid's points
    dealt to the ranks in turn (each batch on one rank); the smallest and the largest beta of
    each d sized."""
    from .phase import PhaseStudy

    cores = cores or cores_here()
    study = PhaseStudy.of(load_config(config, overrides), betas, times, ds, n, prompts, attention, None, device,
                          precision, Path(out or "."))
    grid = study.grid
    settings = [f"particles.prompts={grid.prompts}", f"time.t_final={max(max(grid.times), 1e-9)!r}",
                "time.outputs=1", "output.diagnostics=false", f'particles.device="{study.device}"',
                f'particles.precision="{study.precision}"']
    parts = []
    for d in grid.ds:
        sized = [particle_part(Problem(load_config(study.problem(d, beta).config.data, settings)), f"beta = {beta:g}",
                               1, cores, study.path, run_particles, startup=False)
                 for beta in sorted({grid.betas[0], grid.betas[-1]})]
        # a batch's steps grow with beta (the default step is 0.25 over the Lipschitz bound): the betas between
        # the two sized cost in proportion
        mean = float(np.mean(np.interp(grid.betas, [grid.betas[0], grid.betas[-1]],
                                       [sized[0].seconds[0], sized[-1].seconds[0]])))
        parts.append(Part(f"batches of {grid.prompts} prompts of n = {grid.n} on S^{d - 1} (one per beta, the "
                          "ranks taking them in turn: the busiest rank's; the smallest and the largest beta sized, "
                          f"{sized[0].seconds[0]:.3g} s and {sized[-1].seconds[0]:.3g} s, those between interpolated)",
                          -(-len(grid.betas) // ranks), (mean, mean), max(p.memory for p in sized), 0))
    return JobSize("phase", ranks, parts, ["each batch sized as a particle run to the last time, one output, its "
                                           "start-up left out (the study pays it once, about a second); the ranks "
                                           "take the grid's points in turn"])


def fit_size(config: Any, overrides: list[str] | None = None, *, params: Sequence[str] = (),
             targets: Sequence[Any] = (), inputs: Sequence[Any] = (), given: Mapping[str, Any] | None = None,
             out: str | Path | None = None, ranks: int = 1, cores: int | None = None) -> JobSize:
    """``meanfield fit``: one start-up, then ``max_iter`` iterations of L-BFGS-B of
    :data:`FIT_EVALUATIONS` evaluations each (a forward run of every pair and its gradient),
    one evaluation of the fit's own objective at its starting weights timed here."""
    import time

    from mpi4py import MPI

    from ..training.fit import fit_objective

    problem = Problem(load_config(config, overrides))
    report = check_config(problem, out=out, ranks=ranks, cores=cores or cores_here())
    times = report.wall_times()
    objective, settings = fit_objective(problem.config, params, targets, inputs, dict(given or {}), MPI.COMM_SELF)
    tic = time.perf_counter()
    objective.evaluate(objective.parameters.values())
    seconds = time.perf_counter() - tic
    iterations = int(settings["max_iter"])
    startup = times[0].startup if times else 0.0
    pairs = counted(len(objective.pairs), "pair")
    return JobSize("fit", ranks, [
        Part("start-up", 1, (startup, startup), report.memory.per_rank, 0),
        Part(f"evaluations: forward runs of {pairs} and the gradient ({iterations} iterations of "
             f"{FIT_EVALUATIONS[0]:g} to {FIT_EVALUATIONS[1]:g} evaluations)", iterations,
             (FIT_EVALUATIONS[0] * seconds, FIT_EVALUATIONS[1] * seconds), report.memory.per_rank, 0)],
        [f"one evaluation timed here on one process: {seconds:.3g} s; the fit may stop earlier (fit.gtol); its "
         "pictures at the end are not counted"])
