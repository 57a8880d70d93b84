"""The clustering phase diagram: the share of clustered token pairs over (t, beta), one panel per d.

``meanfield phase CONFIG --betas ... --at ...`` (:func:`phase`) runs, for every dimension d and
inverse temperature beta of the grid, one batch of prompts of n tokens each
(:mod:`meanfield.particles.batch`: prompt b is the config's particle run with ``particles.seed + b``)
and reduces every prompt at every asked time to the statistics of
:mod:`meanfield.particles.statistics`, averaged over the prompts.  The config gives the model (Q, K,
V, heads, layers, feed-forward block, ``[model.random]``, the causal mask and its decay), the
initial density (2312.10794: ``kind = "uniform"``), the sampler, the seed and the step; the options
set ``model.beta`` (every layer that does not set its own), ``particles.d``, ``particles.n`` and
``model.attention``.

Writes into ``out`` (default ``runs/<name>-phase``), a study directory (study.json):

``phase.csv``
    one row per (beta, d, n, t) with the columns :data:`COLUMNS`: ``mean_inner_product``,
    ``clustered_fraction`` (pairs with ``<x_i, x_j> >= 0.999``) and ``clusters_mean`` averaged over
    the prompts, ``clustered_fraction_se`` its standard error (sample standard deviation over
    sqrt(prompts); empty for one prompt), and ``equiangular``, g_beta(t) of the equiangular ODE
    (:mod:`meanfield.references.equiangular`; the reduction of Q = K = V = I without a mask);
``phase.png``
    the clustered fraction over (t, beta), one panel per d, with the curve ``g_beta(t) = 1 - delta``
    (2312.10794, section 6);
``config.toml``, ``metadata.json``
    the config and what ran: the grid, the backend, chunks, steps, timings and versions.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..attention import attention_kind, attention_names
from ..config import Config, ConfigError, load_config
from ..spheres import sphere_named

#: phase.csv's columns, in order.
COLUMNS = ("beta", "d", "n", "t", "prompts", "mean_inner_product", "clustered_fraction", "clustered_fraction_se",
           "clusters_mean", "equiangular")
#: Prompts per grid point by default.
PROMPTS = 64
#: Tokens per prompt when neither the config nor the options give them (2312.10794: 32).
TOKENS = 32


@dataclass
class PhaseResult:
    """What :func:`phase` produced: its directory and the rows of phase.csv."""

    path: Path
    rows: list[dict[str, Any]]


@dataclass(frozen=True)
class PhaseGrid:
    """The checked grid of a phase study."""

    betas: tuple[float, ...]
    times: tuple[float, ...]
    ds: tuple[int, ...]
    n: int
    prompts: int
    attention: str | None


def _is_int(value: object, least: int) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, np.integer)) and bool(value >= least)


def check_grid(config: Config, betas: Sequence[float], times: Sequence[float], ds: Sequence[int] | None,
               n: int | None, prompts: int, attention: str | None) -> PhaseGrid:
    """The grid, or a :class:`~meanfield.config.ConfigError` naming the option."""
    if not betas or not all(np.isfinite(b) and b > 0 for b in betas):
        raise ConfigError(f"--betas: must be numbers > 0, got {list(betas)}")
    if not times or not all(np.isfinite(t) and t >= 0 for t in times):
        raise ConfigError(f"--at: must be times >= 0, got {list(times)}")
    if not _is_int(prompts, 1):
        raise ConfigError(f"--prompts: must be an integer >= 1, got {prompts!r}")
    n = n if n is not None else config.data["particles"]["n"] or TOKENS
    if not _is_int(n, 2):
        raise ConfigError(f"--n: must be an integer >= 2 (tokens per prompt), got {n!r}")
    # the tokens' dimension of the config's runs: particles.d, else the mesh's sphere's
    own = config.data["particles"]["d"] or sphere_named(config.data["mesh"]["sphere"]).d
    ds = list(ds) if ds is not None else [own]
    if not ds or not all(_is_int(d, 2) for d in ds):
        raise ConfigError(f"--d: must be integers >= 2, got {ds}")
    if attention is not None and attention not in attention_names():
        raise ConfigError(f"--attention: must be one of {list(attention_names())}, got {attention!r}")
    return PhaseGrid(tuple(sorted({float(b) for b in betas})), tuple(sorted({float(t) for t in times})),
                     tuple(sorted({int(d) for d in ds})), int(n), int(prompts), attention)


def _point_config(config: Config, grid: PhaseGrid, d: int, beta: float) -> Config:
    """The config of one grid point: beta, d, n (and the attention) set."""
    overrides = [f"model.beta={beta!r}", f"particles.d={d}", f"particles.n={grid.n}"]
    if grid.attention is not None:
        overrides.append(f'model.attention="{grid.attention}"')
    return load_config(config.data, overrides)


class _Accumulator:
    """Sums over the prompts of each statistic at each time."""

    def __init__(self, times: int) -> None:
        self.sums: dict[str, np.ndarray] = {}
        self.squares = np.zeros(times)
        self.count = np.zeros(times)

    def add(self, k: int, stats: Mapping[str, np.ndarray]) -> None:
        for key, values in stats.items():
            self.sums.setdefault(key, np.zeros(len(self.count)))[k] += values.sum()
        self.squares[k] += (stats["clustered_fraction"] ** 2).sum()
        self.count[k] += len(stats["clustered_fraction"])

    def row(self, k: int) -> dict[str, float]:
        count = self.count[k]
        mean = {key: float(s[k] / count) for key, s in self.sums.items()}
        fraction = mean["clustered_fraction"]
        se = float("nan")
        if count > 1:
            variance = max(self.squares[k] - count * fraction**2, 0.0) / (count - 1)
            se = float(np.sqrt(variance / count))
        return {"mean_inner_product": mean["mean_inner_product"], "clustered_fraction": fraction,
                "clustered_fraction_se": se, "clusters_mean": mean["clusters"]}


@dataclass(frozen=True)
class PhaseStudy:
    """A checked phase study, the same on every rank: its directory, grid, config and backend."""

    path: Path
    grid: PhaseGrid
    base: Config
    per_prompt: bool | None
    device: str
    precision: str

    @classmethod
    def of(cls, base: Config, betas: Sequence[float], times: Sequence[float], ds: Sequence[int] | None,
           n: int | None, prompts: int | None, attention: str | None, per_prompt: bool | None, device: str | None,
           precision: str | None, path: Path) -> PhaseStudy:
        """The study of a config with its grid checked (:func:`check_grid`); ``prompts``, ``device``
        and ``precision`` default to the config's ``particles.prompts`` (where it asks for more
        than one, else :data:`PROMPTS`), ``particles.device`` and ``particles.precision``."""
        particles = base.data["particles"]
        if prompts is None:
            prompts = particles["prompts"] if particles["prompts"] > 1 else PROMPTS
        return cls(path, check_grid(base, betas, times, ds, n, prompts, attention), base, per_prompt,
                   device if device is not None else particles["device"],
                   precision if precision is not None else particles["precision"])

    @property
    def points(self) -> list[tuple[int, float]]:
        """The grid's (d, beta) points, in phase.csv's order."""
        return [(d, b) for d in self.grid.ds for b in self.grid.betas]

    def problem(self, d: int, beta: float) -> Any:
        """The :class:`~meanfield.problem.Problem` of one grid point."""
        from ..problem import Problem

        return Problem(_point_config(self.base, self.grid, d, beta))


def phase(
    config: Config | Mapping | str | Path | None,
    betas: Sequence[float],
    times: Sequence[float],
    *,
    ds: Sequence[int] | None = None,
    n: int | None = None,
    prompts: int | None = None,
    attention: str | None = None,
    per_prompt: bool | None = None,
    device: str | None = None,
    precision: str | None = None,
    memory: int | None = None,
    out: str | Path | None = None,
    overrides: list[str] | None = None,
    comm=None,
    quiet: bool = False,
    overwrite: bool = False,
    plots: bool = True,
) -> PhaseResult:
    """The clustering phase diagram of a config (module docstring).

    Parameters
    ----------
    config
        Config (or mapping / TOML path; ``None``: the default config).
    betas
        Inverse temperatures (``model.beta`` of each grid point).
    times
        Times >= 0 at which the prompts are reduced to their statistics.
    ds
        Dimensions d (tokens on S^{d-1}; default ``particles.d``, else the mesh's).
    n
        Tokens per prompt (default ``particles.n``, else 32).
    prompts
        Prompts per grid point (default ``particles.prompts`` where the config asks for more than
        one, else :data:`PROMPTS`).
    attention
        ``"softmax"`` or ``"unnormalized"`` (default: the config's).
    per_prompt
        Draw ``[model.random]`` weights per prompt (default: ``model.random.per_prompt``).
    device, precision
        ``"cpu"`` (numpy) or ``"gpu"`` (JAX); ``"float64"`` or ``"float32"`` (default: the config's
        ``particles.device`` and ``particles.precision``).
    memory
        Bytes a chunk of prompts may hold (:mod:`meanfield.particles.batch`).
    out
        Study directory (default ``runs/<name>-phase``).
    overrides
        ``SECTION.KEY=VALUE`` overrides of the config.
    comm
        MPI communicator (default COMM_WORLD): the grid's (d, beta) points are dealt to the ranks in
        turn, each rank runs its points' batches, and rank 0 writes; the rows do not depend on the
        rank count (every point's prompts are drawn from its own seeds).
    quiet
        No progress on the terminal.
    overwrite
        Redo a phase study already in ``out``.
    plots
        Draw phase.png.
    """
    from mpi4py import MPI

    from ..collective import everywhere, on_root
    from ..rundir.environment import run_environment

    comm = comm or MPI.COMM_WORLD
    study = on_root(comm, lambda: _prepare(config, betas, times, ds, n, prompts, attention, per_prompt, device,
                                           precision, out, overrides, overwrite))
    environment = run_environment(comm)
    started = time.perf_counter()
    say: Callable[[str], None] = (lambda text: None) if quiet or comm.rank != 0 else \
        (lambda text: print(text, flush=True))
    grid, backend = study.grid, _backend(study)
    say(f"phase diagram of {study.base.data['name']}: d in {list(grid.ds)}, {len(grid.betas)} betas, "
        f"{grid.prompts} prompts of {grid.n} tokens, {backend.describe()}"
        + (f", {len(study.points)} points over {comm.size} ranks" if comm.size > 1 else "") + f" -> {study.path}")
    mine = everywhere(comm, lambda: _compute(study, backend, range(comm.rank, len(study.points), comm.size), memory,
                                             say))
    computed = comm.gather(mine, root=0)
    return on_root(comm, lambda: _write(study, backend.describe(), computed, environment, comm.size, started, plots))


def _backend(study: PhaseStudy) -> Any:
    from ..particles.arrays import ArrayBackend

    return ArrayBackend.for_device(study.device, study.precision, field="--device")


def _prepare(config: Any, betas: Sequence[float], times: Sequence[float], ds: Sequence[int] | None, n: int | None,
             prompts: int | None, attention: str | None, per_prompt: bool | None, device: str | None,
             precision: str | None, out: str | Path | None, overrides: list[str] | None,
             overwrite: bool) -> PhaseStudy:
    """Check the study and claim its directory (rank 0), or raise a
    :class:`~meanfield.config.ConfigError` naming the option."""
    from ..particles.prompts import check_batch
    from ..rundir.names import derived_directory
    from ..rundir.study_directory import prepare_study

    base = config if isinstance(config, Config) and not overrides else load_config(
        config.data if isinstance(config, Config) else config, overrides)
    study = PhaseStudy.of(base, betas, times, ds, n, prompts, attention, per_prompt, device, precision,
                          Path(out) if out is not None else Path())
    _backend(study)  # refuses a missing array library or device (--device) before anything is written
    problems = [study.problem(d, b) for d, b in study.points]
    for problem in problems:
        try:
            check_batch(problem, study.grid.prompts, per_prompt)
        except ConfigError as exc:
            raise ConfigError(str(exc).replace("model.random.per_prompt", "--per-prompt")
                              if per_prompt else str(exc)) from None
    if out is None:
        study = replace(study, path=derived_directory(problems[0].output.directory, "phase"))
    prepare_study(study.path, "phase", overwrite=overwrite)
    return study


def _compute(study: PhaseStudy, backend: Any, indices: range, memory: int | None,
             say: Callable[[str], None]) -> dict[int, tuple[list[dict[str, Any]], dict[str, Any]]]:
    """The rows and the metadata of the grid points ``indices`` (this rank's)."""
    from ..drivers.launch import configure_process
    from ..particles.batch import run_batch
    from ..particles.prompts import describe, prompt_batch
    from ..particles.statistics import gram, prompt_statistics
    from ..references.equiangular import equiangular

    grid = study.grid
    done: dict[int, tuple[list[dict[str, Any]], dict[str, Any]]] = {}
    threads = configure_process(study.problem(*study.points[0]).field.threads) if indices else 0
    for index in indices:
        d, beta = study.points[index]
        problem = study.problem(d, beta)
        batch = prompt_batch(problem, grid.prompts, study.per_prompt)
        sums = _Accumulator(len(grid.times))

        def observe(chunk: range, k: int, x: Any, sums: _Accumulator = sums) -> None:
            sums.add(k, prompt_statistics(backend.to_numpy(gram(backend.xp, x))))

        report = run_batch(batch, grid.times, observe, backend, memory)
        kind = problem.config.data["model"]["attention"]
        g = equiangular(grid.times, beta, grid.n, kind) if attention_kind(kind).exponential \
            else np.full(len(grid.times), np.nan)
        rows = [{"beta": beta, "d": d, "n": grid.n, "t": t, "prompts": grid.prompts, **sums.row(k),
                 "equiangular": float(g[k])} for k, t in enumerate(grid.times)]
        done[index] = (rows, {**describe(batch, problem), "beta": beta, "steps": report.steps,
                              "chunk": report.chunk, "chunks": report.chunks, "max_drift": report.max_drift,
                              "seconds": report.timings["total"], "threads": threads})
        say(f"  d = {d}, beta = {beta:g}: {report.steps} steps in {report.chunks} chunk(s) of {report.chunk}, "
            f"{report.timings['total']:.3g} s; clustered fraction at t = {grid.times[-1]:g}: "
            f"{rows[-1]['clustered_fraction']:.3f}")
    return done


def _write(study: PhaseStudy, described: str,
           computed: list[dict[int, tuple[list[dict[str, Any]], dict[str, Any]]]] | None, environment: dict[str, Any],
           ranks: int, started: float, plots: bool) -> PhaseResult:
    """phase.csv, phase.png, config.toml and metadata.json from every rank's points (rank 0);
    ``described``: the array library, device and precision."""
    from ..rundir.study_directory import write_record, write_table

    points = {index: done for part in computed or [] for index, done in part.items()}
    rows = [row for index in sorted(points) for row in points[index][0]]
    grid, path = study.grid, study.path
    write_table(path / "phase.csv", [{k: ("" if isinstance(v, float) and np.isnan(v) else v) for k, v in r.items()}
                                     for r in rows], COLUMNS)
    if plots:
        from ..plotting.phase import phase_figure

        fig = phase_figure(rows, attention=study.problem(*study.points[0]).config.data["model"]["attention"],
                           title=f"{study.base.data['name']}: share of pairs with <x_i, x_j> >= 0.999, "
                                 f"{grid.prompts} prompts of n = {grid.n}")
        fig.savefig(path / "phase.png", dpi=120)
    write_record(path, "phase", study.base.to_toml(), {
        "betas": list(grid.betas), "times": list(grid.times), "ds": list(grid.ds), "n": grid.n,
        "prompts": grid.prompts, "backend": described,
        "points": [{**points[index][1], "rank": index % ranks} for index in sorted(points)],
        "timings": {"total": time.perf_counter() - started}, **environment})
    return PhaseResult(path, rows)
