"""The particle run driver: config -> tokens, field, RK4 loop -> run directory.

:func:`run_particles` is the entry point behind ``meanfield particles``.  The run directory
mirrors the PDE's (see :mod:`meanfield.io`): the same observables.csv columns, computed by
the same :func:`~meanfield.observables.measure_observables` with the tokens as equal-weight
sources, and snapshots of the token positions in global order.

Reproducibility: every rank draws all n initial tokens with ``numpy.random.default_rng(seed)``
and keeps its block, and the direct evaluator sums over the gathered tokens in global
order, so a seed gives the same trajectories on any rank count (to round-off for evaluators
that reduce partial sums across ranks).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

from ..collective import on_root
from ..config import Config, ConfigError, load_config
from ..io import ParticleRunResult, RunDirectory, load_particle_run, run_environment
from ..mesh import raw_mesh
from ..model import rotation_velocity
from ..nonlocal_field import NonlocalEvaluator, make_evaluator
from ..observables import measure_observables
from ..reporting import log, progress_bar, run_logging
from .integrator import advance
from .sampling import resolve_sampler, sample_initial
from .system import ParticleSystem, attention_field, default_dt, token_block



@dataclass
class ParticleSetup:
    """Everything a particle run is made of, built from a config (no files written)."""

    config: Config
    comm: object
    n: int
    seed: int
    evaluator: NonlocalEvaluator
    system: ParticleSystem
    tokens: np.ndarray
    dt: float
    sampler: str


def resolve_counts(config: Config, n: int | None, seed: int | None) -> tuple[int, int]:
    """The token count and seed: arguments first, then ``particles.n`` / ``particles.seed``."""
    p = config.section("particles")
    n = p["n"] if n is None else n
    seed = p["seed"] if seed is None else seed
    if n is None:
        raise ConfigError("particles.n: required (give --n N or particles.n in the config)")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n <= 0:
        raise ConfigError(f"particles.n: must be a positive integer, got {n!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ConfigError(f"particles.seed: must be an integer >= 0, got {seed!r}")
    return int(n), int(seed)


def build_particles(config: Config, n: int, seed: int, comm) -> ParticleSetup:
    """Sample the initial tokens and build the field; raises on bad input before any I/O."""
    d = config.particle_d
    p, m, nl = config.section("particles"), config.section("model"), config.section("nonlocal")
    density = config.initial_density(d)
    sampler = resolve_sampler(density.kind, p["sampler"])
    model = config.model(d)
    evaluator = make_evaluator(model, comm, nl["method"], nl["tol"])
    if m["velocity"] == "rotation":
        if d not in (2, 3):
            raise ConfigError(f"model.velocity: 'rotation' needs d = 2 or 3, got d = {d}")
        field = rotation_velocity(m["rotation_rate"], m["rotation_axis"], d)
    else:
        field = attention_field(evaluator)
    mesh = None
    if sampler == "mesh":
        if d != config.d:
            raise ConfigError(f"particles.sampler: 'mesh' samples the mesh's sphere (d = {config.d}), not d = {d}")
        mesh = raw_mesh(config.section("mesh")["sphere"], config.section("mesh")["resolution"],
                        config.section("mesh")["file"])
    block = token_block(n, comm.rank, comm.size)
    tokens = sample_initial(density, n, np.random.default_rng(seed), sampler, mesh)[block]
    system = ParticleSystem(field, np.full(block.stop - block.start, 1.0 / n))
    dt = p["dt"] if p["dt"] is not None else default_dt(model)
    return ParticleSetup(config, comm, n, seed, evaluator, system, np.ascontiguousarray(tokens), dt, sampler)


def gather_tokens(comm, tokens: np.ndarray) -> np.ndarray | None:
    """All tokens in global order on rank 0 (``None`` elsewhere)."""
    parts = comm.gather(tokens, root=0)
    return np.concatenate(parts) if comm.rank == 0 else None


def run_particles(
    config: Config | Mapping | str | Path | None = None,
    *,
    n: int | None = None,
    seed: int | None = None,
    out: str | Path | None = None,
    overrides: list[str] | None = None,
    comm=None,
    quiet: bool = False,
) -> ParticleRunResult:
    """Run the particle system of a config and return the run read back from its directory.

    Parameters
    ----------
    config
        A :class:`Config`, a mapping, a TOML path, or ``None`` for the embedded default.
    n, seed
        Token count and seed (default: ``particles.n`` and ``particles.seed``).
    out
        Run directory (default: ``output.dir`` or ``runs/<name>``, suffixed ``-particles``).
    overrides
        ``section.key=value`` strings (only when ``config`` is not already a Config).
    comm
        MPI communicator (default COMM_WORLD); tokens are split in contiguous blocks.
    quiet
        No log to the terminal and no progress bar (the run log is still written).
    """
    from mpi4py import MPI

    from .diagnostics import write_diagnostics

    comm = comm or MPI.COMM_WORLD
    if not isinstance(config, Config):
        config = load_config(config, overrides)
    n, seed = resolve_counts(config, n, seed)
    wall0 = time.perf_counter()
    setup = build_particles(config, n, seed, comm)
    path = Path(out) if out is not None else config.output_dir().with_name(config.output_dir().name + "-particles")
    rundir = RunDirectory(comm, path)
    rundir.create(config.to_toml())
    with run_logging(comm, quiet, path / "run.log"):
        _time_loop(setup, rundir, progress_bar(comm, float(config.output_times()[-1]), quiet), wall0)
    on_root(comm, lambda: write_diagnostics(path))
    return load_particle_run(path)


def _time_loop(setup: ParticleSetup, rundir: RunDirectory, bar, wall0: float) -> None:
    from mpi4py import MPI

    comm, config, ev = setup.comm, setup.config, setup.evaluator
    rundir.update_metadata(
        kind="particles", name=config.name, status="running", config_source=config.source,
        **run_environment(comm), n=setup.n, seed=setup.seed, d=config.particle_d, dt=setup.dt,
        integrator="rk4", sampler=setup.sampler, evaluator=ev.collective_diagnostics(),
    )
    log.info("%s: %d tokens on S^%d, %d rank(s), RK4 dt <= %.4g, %s field, %s sampler",
             config.name, setup.n, config.particle_d - 1, comm.size, setup.dt, ev.name, setup.sampler)
    x, t, drift, steps = setup.tokens, 0.0, [], 0
    timings = {"time_stepping": 0.0, "output": 0.0}
    status, error = "failed", None
    try:
        for k, t_out in enumerate(config.output_times()):
            tic = time.perf_counter()
            x, report = advance(setup.system.velocity, x, t, float(t_out), setup.dt)
            t, steps = float(t_out), steps + report.steps
            if not comm.allreduce(bool(np.all(np.isfinite(x))), op=MPI.LAND):
                raise RuntimeError(f"tokens became non-finite before t = {t:.6g}; lower particles.dt")
            drift.append([t, comm.allreduce(report.max_drift, op=MPI.MAX)])
            timings["time_stepping"] += time.perf_counter() - tic
            bar.update(t - bar.n)
            tic = time.perf_counter()
            row = {"t": t, **measure_observables(ev, x, setup.system.weights)}
            row.update(rho_min=np.nan, rho_max=np.nan, dt=report.dt if report.steps else np.nan,
                       wall=time.perf_counter() - wall0)
            rundir.append_observables(row)
            rundir.write_arrays(f"snapshots/{k:04d}.npz", t=np.array(t), points=gather_tokens(comm, x))
            timings["output"] += time.perf_counter() - tic
            rundir.update_metadata(timings=timings, steps=steps, max_drift=drift, last_output_time=t)
            log.info("t = %-8.4g E = %.10g  |mean| = %.4f  drift = %.2e", t, row["energy"], row["order"], drift[-1][1])
        status = "completed"
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        log.error("particle run stopped at t = %.6g: %s", t, error)
        raise
    finally:
        bar.close()
        timings["total"] = time.perf_counter() - wall0
        rundir.update_metadata(status=status, error=error, timings=timings, steps=steps)
        log.info("%s %s in %.1f s (%d steps); results in %s", config.name, status, timings["total"], steps, rundir.path)
