"""The particle system as a simulation the run controller drives, and :func:`run_particles`.

:func:`run_particles` is the entry point behind ``meanfield particles``.  The run directory
mirrors the PDE's (:mod:`meanfield.rundir.layout`): the same observables.csv columns, computed
by the same :func:`~meanfield.observables.measure_observables` with the tokens as
equal-weight sources, and snapshots of all token positions in global order.

Reproducibility: every rank draws all n initial tokens with ``numpy.random.default_rng(seed)``
and keeps its block, and the direct evaluator sums over the gathered tokens in global
order, so a seed gives the same trajectories on any rank count (to round-off for evaluators
that reduce partial sums across ranks).  Token count and seed are written into the run's
config.toml, so the run directory alone describes (and resumes) the run.

A batch of prompts (``[particles] prompts > 1``, ``device = "gpu"`` or ``precision = "float32"``)
is a run of :class:`~meanfield.drivers.prompts.PromptSimulation` instead
(:func:`particle_simulation`), with the same handlers and files, along a prompt dimension.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..collective import on_root
from ..config import MAX_STEPS, Config, ConfigError
from ..engine.callbacks import Callback
from ..engine.handlers import Handler, file_outputs, own_observable_columns
from ..engine.simulation import Simulation
from ..nonlocal_field import NonlocalEvaluator
from ..particles.integrator import INTEGRATORS, residual_steps
from ..particles.pairs import pair_observables
from ..particles.positions import TokenPositions, token_component
from ..particles.sampling import resolve_sampler
from ..particles.system import ParticleSystem, default_dt, token_block
from ..problem import Problem
from ..rundir.results import ParticleRunResult, load_particle_run
from ..rundir.writers import OutputWriter, particle_run_file
from ..velocity import LayerVelocity
from .launch import check_new_target, check_size, configure_process, resolve_config, start_run
from .token_steps import EqualStepping, scatter_tokens


def resolve_counts(config: Config, n: int | None, seed: int | None) -> tuple[int, int]:
    """The token count and seed: arguments first, then the config's ``particles.n`` / ``particles.seed``."""
    n = config.data["particles"]["n"] if n is None else n
    seed = config.data["particles"]["seed"] if seed is None else seed
    if n is None:
        raise ConfigError("particles.n: required (give --n N or particles.n in the config)")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n <= 0:
        raise ConfigError(f"particles.n: must be a positive integer, got {n!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ConfigError(f"particles.seed: must be an integer >= 0, got {seed!r}")
    return int(n), int(seed)


def with_counts(config: Config, n: int | None = None, seed: int | None = None) -> Config:
    """The config with ``particles.n`` and ``particles.seed`` resolved (:func:`resolve_counts`) and set:
    what the run directory records, and what the run's problem is built from."""
    n, seed = resolve_counts(config, n, seed)
    if (config.data["particles"]["n"], config.data["particles"]["seed"]) == (n, seed):
        return config
    data = copy.deepcopy(config.data)
    data["particles"].update(n=n, seed=seed)
    return Config(data, config.source)


def counted_problem(source: Problem | Config | Mapping | str | Path | None, overrides: list[str] | None,
                    n: int | None, seed: int | None, comm) -> Problem:
    """The particle run's problem, built once from its config with the token count and seed of the
    command line resolved into it (:func:`with_counts`); a Problem that has them already is the
    run's."""
    if isinstance(source, Problem):
        if (n is None or n == source.particles.n) and (seed is None or seed == source.particles.seed) \
                and source.particles.n is not None:
            return source
        source = source.config
    return Problem(with_counts(resolve_config(source, overrides, comm), n, seed))


class ParticleSimulation(EqualStepping, Simulation):
    """n tokens on S^{d-1} advanced by RK4 in equal steps per interval (see :class:`Simulation`).

    The intervals are those between consecutive output times and layer boundaries; each layer
    has its own largest step (``particles.dt``, or the default of its Lipschitz bound).

    Parameters
    ----------
    problem
        The resolved problem; ``particles.n`` and ``particles.seed`` must be set.
    comm
        MPI communicator; tokens are split in contiguous blocks (:func:`token_block`).
    """

    run_type = "particles"

    def __init__(self, problem: Problem, comm) -> None:
        self.problem, self.comm, self.t = problem, comm, 0.0
        n, seed = resolve_counts(problem.config, None, None)
        p, d = problem.particles, problem.particles.d
        density = problem.initial(d)
        self.sampler = resolve_sampler(density.kind, p.sampler)
        self.schedule = problem.schedule(d)
        self.field = LayerVelocity(self.schedule, comm, problem.field.method, problem.field.tol)
        #: The token positions as a component (:mod:`meanfield.particles.positions`).
        self.positions: TokenPositions = token_component(problem.mask, n)
        field = self.positions.moving(self.field, comm)
        if not problem.velocity.is_attention:
            if d not in (2, 3):
                raise ConfigError(f"model.velocity: 'rotation' needs d = 2 or 3, got d = {d}")
            field = problem.velocity.rotation(d)
        if self.sampler == "mesh" and d != problem.d:
            raise ConfigError(f"particles.sampler: 'mesh' samples the mesh's sphere (d = {problem.d}), not d = {d}")
        self.dts = residual_steps(problem.random, p.dt, problem.time.output_times) if p.integrator == "residual" else \
            [p.dt if p.dt is not None else default_dt(layer) for layer in self.schedule.layers]
        steps = sum(t / dt for t, dt in zip(self.schedule.durations(problem.time.t_final), self.dts))
        if steps > MAX_STEPS:
            what = "particles.dt" if p.dt is not None else "particles.dt (default 0.25 / Lipschitz bound of the model)"
            raise ConfigError(f"{what}: {self.dt:.3g} would take {steps:.3g} steps (at most {MAX_STEPS:.0e}); "
                              "check the model's weights, V and feed-forward block")
        problem.output.own_observables.check_tokens()
        self.n, self.seed = n, seed
        self.block = token_block(n, comm.rank, comm.size)
        mesh = problem.mesh.build() if self.sampler == "mesh" else None
        rng = np.random.default_rng(seed)
        tokens = self.positions.sample(density, n, rng, self.sampler, mesh)[self.block]
        self.x = np.ascontiguousarray(tokens)
        self.system = ParticleSystem(field, np.full(self.block.stop - self.block.start, 1.0 / n))

    @property
    def evaluator(self) -> NonlocalEvaluator | None:
        """The active layer's attention evaluator (``None`` for a layer without attention)."""
        return self.field.evaluator

    @property
    def dt(self) -> float:
        """The largest RK4 step allowed in every layer (the smallest of the layers' steps)."""
        return min(self.dts)

    # -- stepping ------------------------------------------------------------------------
    def next_landing(self, t: float) -> float | None:
        return self.schedule.next_boundary(t)

    def step(self, t_end: float) -> float:
        layer = self.schedule.index_from(self.t)
        self.field.enter(layer)
        h = self.step_size(t_end, self.dts[layer])
        self.x, drift = INTEGRATORS[self.problem.particles.integrator](self.system.velocity, self.x, h)
        return self.step_taken(drift, bool(np.all(np.isfinite(self.x))))

    # -- observing -----------------------------------------------------------------------
    def observables(self) -> dict[str, float]:
        """The measure observables, then the tokens' pair statistics (:mod:`meanfield.particles.pairs`)."""
        self.field.enter(self.schedule.index_until(self.t))
        row = self.field.observables(self.x, self.system.weights)
        tokens = self._all_tokens()
        row.update(on_root(self.comm, lambda: pair_observables(tokens)))  # type: ignore[arg-type]
        row.update(rho_min=np.nan, rho_max=np.nan, dt=self.last_step())
        return row

    def distribution(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """This rank's tokens: ``rho`` 1 at each (:meth:`~meanfield.own_observables.OwnObservables.check_tokens`),
        their positions and weights."""
        return np.ones(len(self.x)), self.x, self.system.weights

    def _all_tokens(self) -> np.ndarray | None:
        parts = self.comm.gather(self.x, root=0)
        return np.concatenate(parts) if self.comm.rank == 0 else None

    def snapshot(self) -> dict[str, np.ndarray] | None:
        points = self._all_tokens()
        return None if points is None else {"points": points}

    def checkpoint_state(self) -> dict[str, np.ndarray] | None:
        return self.snapshot()

    def restore(self, t: float, state: dict[str, np.ndarray] | None, info: dict[str, Any]) -> None:
        self.x = scatter_tokens(self.comm, state, (self.n, self.problem.particles.d))
        self.t = t
        self.field.enter(self.schedule.index_until(t))
        self.restore_steps(info)

    # -- facts -----------------------------------------------------------------------------
    def describe(self) -> str:
        field = self.positions.describe(self.field.describe()) if self.problem.velocity.is_attention \
            else "rotation field"
        p = self.problem.particles
        return (f"{self.n} tokens on S^{p.d - 1}, {p.integrator} dt <= {self.dt:.4g}, {field}, "
                f"{self.sampler} sampler, seed {self.seed}")

    def facts(self) -> dict[str, Any]:
        evaluator = self.field.evaluator
        return {"n": self.n, "seed": self.seed, "d": self.problem.particles.d, "dt": self.dt,
                "mask": self.problem.mask.name,
                "layer_dt": self.dts, "integrator": self.problem.particles.integrator, "sampler": self.sampler,
                "evaluator": None if evaluator is None else evaluator.collective_diagnostics(),
                **self.positions.facts(evaluator, self.n)}


def particle_simulation(problem: Problem, comm) -> Simulation:
    """The run's simulation: :class:`ParticleSimulation`, or a batch of prompts
    (:class:`~meanfield.drivers.prompts.PromptSimulation`) where ``particles.prompts``,
    ``particles.device`` or ``particles.precision`` ask for the batched engine."""
    if problem.particles.batched:
        from .prompts import PromptSimulation

        return PromptSimulation(problem, comm)
    return ParticleSimulation(problem, comm)


def particle_handlers(problem: Problem) -> list[Handler]:
    """The handlers of a particle run's output files (observables, snapshots, run.nc)."""

    def run_file(run_dir: Path, static: Mapping[str, np.ndarray] | None) -> OutputWriter:
        n = problem.particles.n
        positions = None if n is None else problem.mask.token_positions(n)
        return particle_run_file(run_dir, problem.config.data, positions)

    return [*own_observable_columns(problem.output.own_observables), *file_outputs(run_file)]


def build_particles(config: Problem | Config | Mapping | str | Path | None, n: int | None = None,
                    seed: int | None = None, comm=None) -> ParticleSimulation:
    """The particle simulation of a problem (or config) at t = 0 (collective; nothing is written)."""
    from mpi4py import MPI

    comm = comm or MPI.COMM_WORLD
    return ParticleSimulation(counted_problem(config, None, n, seed, comm), comm)


def default_directory(problem: Problem) -> Path:
    """``runs/<name>-particles-n<n>-s<seed>``, with ``-b<B>`` for a batch of B > 1 prompts
    (:func:`~meanfield.rundir.names.derived_directory`)."""
    from ..rundir.names import derived_directory

    p = problem.particles
    batch = [f"b{p.prompts}"] if p.prompts > 1 else []
    return derived_directory(problem.output.directory, "particles", f"n{p.n}", f"s{p.seed}", *batch)


def run_particles(
    config: Problem | Config | Mapping | str | Path | None = None,
    *,
    n: int | None = None,
    seed: int | None = None,
    out: str | Path | None = None,
    overrides: list[str] | None = None,
    comm=None,
    quiet: bool = False,
    overwrite: bool = False,
    callbacks: Sequence[Callback] = (),
    analysis: Sequence[Handler] = (),
) -> ParticleRunResult:
    """Run the particle system of a config and return the run read back from its directory.

    Parameters
    ----------
    config
        A :class:`Config`, a mapping, a TOML path, ``None`` for the embedded default, or the
        run's :class:`~meanfield.problem.Problem` already built (a study's).
    n, seed
        Token count and seed (default: ``particles.n`` and ``particles.seed``).
    out
        Run directory (default: ``runs/<name>-particles-n<n>-s<seed>``, beside the PDE run's).
    overrides
        ``section.key=value`` strings (only when ``config`` is not already a Config or Problem).
    comm
        MPI communicator (default COMM_WORLD); tokens are split in contiguous blocks.
    quiet
        No log to the terminal and no progress bar (the run log is still written).
    overwrite
        Replace an earlier run in ``out`` (see :func:`meanfield.run`).
    callbacks
        Called on rank 0 at every output (see :func:`meanfield.run`; the state's ``arrays``
        hold the tokens, ``points``).
    analysis
        Handlers due once the outputs are written (``Cadence(final=True)``): the run's
        diagnostics, which :func:`meanfield.run_particles` and ``meanfield particles`` give
        (:mod:`meanfield.studies.particle_runs`).
    """
    from mpi4py import MPI

    from ..collective import everywhere

    comm = comm or MPI.COMM_WORLD
    problem = counted_problem(config, overrides, n, seed, comm)
    run_dir = Path(out) if out is not None else default_directory(problem)
    check_new_target(run_dir, overwrite, comm)
    check_size(problem, comm, problem.particles.n * problem.particles.prompts)  # type: ignore[operator]
    threads = configure_process(problem.field.threads)
    sim = particle_simulation(problem, comm)
    start_run(sim, problem, run_dir, [*particle_handlers(problem), *analysis], overwrite=overwrite, quiet=quiet,
              facts={"threads": threads}, callbacks=callbacks)
    return everywhere(comm, lambda: load_particle_run(run_dir))
