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

import csv
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
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


def point_config(config: Config, grid: PhaseGrid, d: int, beta: float) -> Config:
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


def phase(
    config: Config | Mapping | str | Path | None,
    betas: Sequence[float],
    times: Sequence[float],
    *,
    ds: Sequence[int] | None = None,
    n: int | None = None,
    prompts: int = PROMPTS,
    attention: str | None = None,
    per_prompt: bool | None = None,
    device: str = "cpu",
    precision: str = "float64",
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
        Prompts per grid point.
    attention
        ``"softmax"`` or ``"unnormalized"`` (default: the config's).
    per_prompt
        Draw ``[model.random]`` weights per prompt (default: ``model.random.per_prompt``).
    device, precision
        ``"cpu"`` (numpy) or ``"gpu"`` (JAX); ``"float64"`` or ``"float32"``.
    memory
        Bytes a chunk of prompts may hold (:mod:`meanfield.particles.batch`).
    out
        Study directory (default ``runs/<name>-phase``).
    overrides
        ``SECTION.KEY=VALUE`` overrides of the config.
    comm
        MPI communicator: rank 0 computes and writes, the others wait (default COMM_WORLD).
    quiet
        No progress on the terminal.
    overwrite
        Redo a phase study already in ``out``.
    plots
        Draw phase.png.
    """
    from mpi4py import MPI

    from ..collective import everywhere, on_root

    comm = comm or MPI.COMM_WORLD
    rows = on_root(comm, lambda: _phase(config, betas, times, ds, n, prompts, attention, per_prompt, device,
                                        precision, memory, out, overrides, comm, quiet, overwrite, plots))
    return everywhere(comm, lambda: rows)


def _phase(config: Any, betas: Sequence[float], times: Sequence[float], ds: Sequence[int] | None, n: int | None,
           prompts: int, attention: str | None, per_prompt: bool | None, device: str, precision: str,
           memory: int | None, out: str | Path | None, overrides: list[str] | None, comm: Any, quiet: bool,
           overwrite: bool, plots: bool) -> PhaseResult:
    from mpi4py import MPI

    from ..drivers.launch import configure_process
    from ..particles.arrays import ArrayBackend
    from ..particles.batch import run_batch
    from ..particles.prompts import check_batch, describe, prompt_batch
    from ..particles.statistics import gram, prompt_statistics
    from ..problem import Problem
    from ..references.equiangular import equiangular
    from ..rundir.directory import prepare_study
    from ..rundir.environment import run_environment
    from ..rundir.files import write_json, write_text
    from ..rundir.names import derived_directory

    base = config if isinstance(config, Config) and not overrides else load_config(
        config.data if isinstance(config, Config) else config, overrides)
    grid = check_grid(base, betas, times, ds, n, prompts, attention)
    backend = ArrayBackend.for_device(device, precision, field="--device")
    problems = {(d, b): Problem(point_config(base, grid, d, b)) for d in grid.ds for b in grid.betas}
    for problem in problems.values():
        try:
            check_batch(problem, grid.prompts, per_prompt)
        except ConfigError as exc:
            raise ConfigError(str(exc).replace("model.random.per_prompt", "--per-prompt")
                              if per_prompt else str(exc)) from None
    first = next(iter(problems.values()))
    path = Path(out) if out is not None else derived_directory(first.output.directory, "phase")
    prepare_study(path, "phase", overwrite=overwrite)
    environment = run_environment(MPI.COMM_SELF)  # this process alone computes the diagram
    threads = configure_process(first.field.threads)
    started = time.perf_counter()
    say: Callable[[str], None] = (lambda text: None) if quiet else (lambda text: print(text, flush=True))
    say(f"phase diagram of {base.data['name']}: d in {list(grid.ds)}, {len(grid.betas)} betas, {grid.prompts} "
        f"prompts of {grid.n} tokens, {backend.describe()} -> {path}")
    rows: list[dict[str, Any]] = []
    points: list[dict[str, Any]] = []
    for (d, beta), problem in problems.items():
        batch = prompt_batch(problem, grid.prompts, per_prompt)
        sums = _Accumulator(len(grid.times))

        def observe(chunk: range, k: int, x: Any, sums: _Accumulator = sums) -> None:
            sums.add(k, prompt_statistics(backend.to_numpy(gram(backend.xp, x))))

        report = run_batch(batch, grid.times, observe, backend, memory)
        kind = problem.config.data["model"]["attention"]
        g = equiangular(grid.times, beta, grid.n, kind) if attention_kind(kind).exponential \
            else np.full(len(grid.times), np.nan)
        for k, t in enumerate(grid.times):
            rows.append({"beta": beta, "d": d, "n": grid.n, "t": t, "prompts": grid.prompts, **sums.row(k),
                         "equiangular": float(g[k])})
        points.append({**describe(batch, problem), "beta": beta, "steps": report.steps, "chunk": report.chunk,
                       "chunks": report.chunks, "max_drift": report.max_drift, "seconds": report.timings["total"]})
        say(f"  d = {d}, beta = {beta:g}: {report.steps} steps in {report.chunks} chunk(s) of {report.chunk}, "
            f"{report.timings['total']:.3g} s; clustered fraction at t = {grid.times[-1]:g}: "
            f"{rows[-1]['clustered_fraction']:.3f}")
    with open(path / "phase.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(COLUMNS))
        writer.writeheader()
        writer.writerows({k: ("" if isinstance(v, float) and np.isnan(v) else v) for k, v in r.items()}
                         for r in rows)
    write_text(path / "config.toml", base.to_toml())
    if plots:
        from ..plotting.phase import phase_figure

        fig = phase_figure(rows, attention=first.config.data["model"]["attention"],
                           title=f"{base.data['name']}: share of pairs with <x_i, x_j> >= 0.999, "
                                 f"{grid.prompts} prompts of n = {grid.n}")
        fig.savefig(path / "phase.png", dpi=120)
    write_json(path / "metadata.json", {
        "kind": "phase", "betas": list(grid.betas), "times": list(grid.times), "ds": list(grid.ds), "n": grid.n,
        "prompts": grid.prompts, "backend": backend.describe(), "threads": threads, "points": points,
        "timings": {"total": time.perf_counter() - started}, **environment})
    return PhaseResult(path, rows)
