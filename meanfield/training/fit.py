"""``meanfield fit``: fit a mean-field transformer's weights to measures with L-BFGS-B.

:func:`fit` minimises the :class:`~.objective.Objective` (scipy's L-BFGS-B, bounds beta > 0;
with an l1 weight every free number without a bound is split into its positive and negative
parts, both >= 0, so the l1 term is linear and exact zeros are reachable) and writes::

    fit.csv         iteration, loss, grad_norm, then one column per parameter (one row per
                    iteration, written as it ends; iteration 0 is the start)
    fitted.toml     the config with the fitted weights (named <name>-fitted; the first pair's
                    input), which ``meanfield run`` reproduces as is
    loss.png        the loss and gradient norm against the iteration
    controls.png    with per-layer parameters: the fitted weights against depth
    pair-<i>.png    input, fitted output and target of pair i
    particles.csv   with ``check_particles``: the token-level loss beside the density-level one
    config.toml, metadata.json, study.json

The folder is ``runs/<name>-fit`` by default.  A fit interrupted (Ctrl-C, a wall limit, a
failure) keeps its rows; the same call again continues from the last iterate (L-BFGS-B's
curvature pairs are rebuilt), up to ``max_iter`` iterations in all.
"""

from __future__ import annotations

import csv
import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..config import Config, ConfigError
from ..engine.controller import RunInterrupted
from ..engine.signals import SignalWatch, signal_name
from .objective import Evaluation, Objective, make_loss, make_pairs

#: Defaults of the [fit] table's settings (``None`` in the schema: these apply).
DEFAULTS: dict[str, Any] = {"loss": "mmd", "kappa": 1.0, "epsilon": 0.05, "running": False, "l2": 0.0, "l1": 0.0,
                            "max_iter": 100, "gtol": 1e-10}


@dataclass
class FitResult:
    """What :func:`fit` produced: its folder, the fitted parameters and the history."""

    path: Path
    names: list[str]
    theta: np.ndarray
    loss: float
    history: list[dict[str, float]] = field(default_factory=list)
    particles: list[dict[str, Any]] = field(default_factory=list)


class _Split:
    """theta from the optimiser's variables: free numbers as ``p - q`` (p, q >= 0) when the l1
    weight is positive, so that ``l1 |theta| = l1 (p + q)`` at the optimum."""

    def __init__(self, bounds: list[tuple[float | None, float | None]], split: bool) -> None:
        self.bounds = bounds
        self.split = [split and lo is None for lo, _ in bounds]
        self.extra = [i for i, s in enumerate(self.split) if s]

    def variables(self, theta: np.ndarray) -> np.ndarray:
        z = np.concatenate([theta, np.zeros(len(self.extra))])
        for k, i in enumerate(self.extra):
            z[i], z[len(theta) + k] = max(theta[i], 0.0), max(-theta[i], 0.0)
        return z

    def theta(self, z: np.ndarray) -> np.ndarray:
        n = len(self.bounds)
        theta = z[:n].copy()
        for k, i in enumerate(self.extra):
            theta[i] -= z[n + k]
        return theta

    def gradient(self, g: np.ndarray) -> np.ndarray:
        return np.concatenate([g, -g[self.extra]])

    def variable_bounds(self) -> list[tuple[float | None, float | None]]:
        return [(0.0, None) if s else b for s, b in zip(self.split, self.bounds)] + [(0.0, None)] * len(self.extra)


def settings(config: Config, given: Mapping[str, Any]) -> dict[str, Any]:
    """The fit's settings: the arguments given, else the config's [fit] table, else :data:`DEFAULTS`."""
    table = config.data.get("fit") or {}
    out = {key: table.get(key) for key in ("params", "target", "pairs", "loss", "observables", "kappa", "epsilon",
                                            "running", "l2", "l1", "max_iter", "gtol")}
    out.update({k: v for k, v in given.items() if v is not None and v != [] and v != ()})
    for key, value in DEFAULTS.items():
        if out.get(key) is None:
            out[key] = value
    return out


def _pairs(s: dict[str, Any], inputs: Sequence[Any]):
    if s.get("pairs") and (inputs or s.get("target") is not None):
        raise ConfigError("fit.pairs: give the pairs or --input/--target, not both")
    if s.get("pairs"):
        pairs = s["pairs"]
        if not all(isinstance(p, Mapping) and "target" in p for p in pairs):
            raise ConfigError("fit.pairs: must be a list of tables with input and target")
        return make_pairs([p.get("input") for p in pairs] if any("input" in p for p in pairs) else (),
                          [p["target"] for p in pairs])
    target = s.get("target")
    targets = target if isinstance(target, list) and target and not all(
        isinstance(v, (int, float)) for v in target) else ([] if target is None else [target])
    return make_pairs(list(inputs), targets)


def fit_objective(config: Config, params: Sequence[str], targets: Sequence[Any], inputs: Sequence[Any],
                  given: Mapping[str, Any], comm) -> tuple[Objective, dict[str, Any]]:
    """The objective of a fit and its settings (:func:`settings` of ``given``, the arguments
    other than the parameters, targets and inputs), as :func:`fit` sets them up."""
    s = settings(config, {"params": list(params), **given})
    if not isinstance(s["max_iter"], int) or isinstance(s["max_iter"], bool) or s["max_iter"] < 0:
        raise ConfigError(f"--max-iter: must be an integer >= 0, got {s['max_iter']!r}")
    pairs = _pairs({**s, "target": list(targets) if targets else s["target"]}, inputs)
    objective = Objective(config, s["params"] or [], pairs,
                          loss=make_loss(s["loss"], kappa=s["kappa"], epsilon=s["epsilon"],
                                         observables=s["observables"] or ()),
                          running=s["running"], l2=s["l2"], comm=comm)
    return objective, s


def fit(config: Config | Mapping | str | Path | None, params: Sequence[str] = (), targets: Sequence[Any] = (), *,
        inputs: Sequence[Any] = (), loss: str | None = None, observables: Sequence[str] = (),
        kappa: float | None = None, epsilon: float | None = None, running: bool | None = None,
        l2: float | None = None, l1: float | None = None, max_iter: int | None = None, gtol: float | None = None,
        check_particles: int | None = None, out: str | Path | None = None, overrides: list[str] | None = None,
        comm=None, quiet: bool = False, overwrite: bool = False) -> FitResult:
    """Fit the weights named in ``params`` so that each input goes to its target at t_final.

    Parameters
    ----------
    config
        Config (or mapping / TOML path) of the PDE run; its ``[fit]`` table gives the settings
        that the arguments leave out.
    params
        Parameter paths (``model.layers[*].V``, ``model.beta``, ...: :mod:`.parameters`).
    targets, inputs
        Targets (:mod:`.targets`), and with several, one input density each (expressions or
        ``[initial]`` tables; none: the config's initial density for one target).
    loss, observables, kappa, epsilon
        ``"mmd"`` (kernel e^{kappa <x,y>}), ``"observables"`` (their squared errors), ``"w2"``
        (on S^1, the exact squared 2-Wasserstein distance) or ``"ot"``
        (Sinkhorn divergence with blur epsilon).
    running, l2, l1
        The running cost; the weights of the l2 and l1 regularisers.
    max_iter, gtol
        L-BFGS-B's iterations in all (a resumed fit counts the earlier ones) and its
        projected-gradient tolerance.
    check_particles
        Also move this many tokens sampled from each input with the fitted weights and report
        their loss against the target (particles.csv).
    out, overrides, comm, quiet, overwrite
        Folder (default ``runs/<name>-fit``), ``--set`` overrides, communicator, no progress on
        the terminal, start over in an existing fit folder.
    """
    from mpi4py import MPI

    from ..collective import everywhere, on_root
    from ..drivers.launch import configure_process, resolve_problem
    from ..rundir.environment import run_environment
    from ..rundir.files import write_text
    from ..rundir.names import derived_directory
    from ..rundir.study_directory import prepare_study, write_record, write_table

    comm = comm or MPI.COMM_WORLD
    problem = resolve_problem(config, overrides, comm)
    config = problem.config
    if check_particles is not None and (isinstance(check_particles, bool) or not isinstance(check_particles, int)
                                        or check_particles < 1):
        raise ConfigError(f"--check-particles: must be a positive integer, got {check_particles!r}")
    if check_particles is not None and problem.mask.positional:
        raise ConfigError("--check-particles: not for a causal run (its tokens carry positions)")
    objective, s = fit_objective(config, params, targets, inputs,
                                 {"loss": loss, "observables": list(observables), "kappa": kappa, "epsilon": epsilon,
                                  "running": running, "l2": l2, "l1": l1, "max_iter": max_iter, "gtol": gtol}, comm)
    pairs = objective.pairs
    l1_weight = float(s["l1"])
    if not l1_weight >= 0:
        raise ConfigError(f"fit.l1: must be a number >= 0, got {l1_weight!r}")
    path = Path(out) if out is not None else derived_directory(problem.output.directory, "fit")
    definition = {"config": hashlib.sha1(json.dumps(config.data, sort_keys=True, default=str).encode()).hexdigest(),
                  "params": objective.names, "pairs": [[p.input_label, str(p.target)] for p in pairs],
                  "loss": s["loss"], "running": bool(s["running"]), "l2": float(s["l2"]), "l1": l1_weight}

    def prepare() -> None:
        prepare_study(path, "fit", overwrite=overwrite, definition=definition)
        if overwrite and (path / "fit.csv").is_file():
            (path / "fit.csv").unlink()  # this study's own table: the fit starts over

    on_root(comm, prepare)
    environment = run_environment(comm)
    threads = configure_process(problem.field.threads)
    history = everywhere(comm, lambda: _read_history(path / "fit.csv", objective.names))
    theta = np.array([history[-1][n] for n in objective.names]) if history else objective.start.copy()
    started = time.perf_counter()
    objective.progress = not quiet
    fitter = _Fitter(objective, l1_weight, path, history, quiet, comm, started)
    try:
        with SignalWatch() as watch:
            fitter.watch = watch
            fitter.run(theta, max(0, s["max_iter"] - (len(history) - 1 if history else 0)), float(s["gtol"]))
    except Exception as exc:  # a failure at weights the optimiser tried: recorded, the rows kept
        failure = f"{type(exc).__name__}: {exc}"
        on_root(comm, lambda: write_record(path, "fit", None, {
            "status": "failed", "error": failure, "params": objective.names,
            "iterations": len(fitter.history) - 1, **environment}))
        raise RuntimeError(f"fit: after iteration {len(fitter.history) - 1} ({path}/fit.csv kept): {failure}") \
            from exc
    status = "interrupted" if fitter.stopped else "completed"
    best = fitter.best
    particles = _check_particles(objective, best, check_particles, comm) if check_particles else []
    seconds = time.perf_counter() - started
    measures = [(i.gathered(), f.gathered()) for i, f in zip(best.initials, best.finals)]  # collective

    def write() -> None:
        fitted = objective.config_at(best.theta)
        fitted.data["name"] = f"{config.data['name']}-fitted"
        write_text(path / "fitted.toml", f"# fitted by meanfield fit ({path}), loss {best.value:.12g}\n"
                   + fitted.to_toml())
        write_record(path, "fit", config.to_toml(), {
            "status": status, "params": objective.names, "loss": s["loss"],
            "pairs": [{"input": p.input_label, "target": str(p.target), "loss": v}
                      for p, v in zip(pairs, best.losses)],
            "settings": {k: s[k] for k in ("kappa", "epsilon", "running", "l2", "l1", "max_iter", "gtol")},
            "iterations": len(fitter.history) - 1, "evaluations": objective.evaluations,
            "fitted_loss": best.value, "threads": threads, "timings": {"total": seconds}, **environment})
        if particles:
            write_table(path / "particles.csv", particles)
        _pictures(path, fitter.history, best, objective, measures)

    on_root(comm, write)
    if fitter.stopped:
        raise FitInterrupted(signal_name(fitter.stopped), fitter.stopped, len(fitter.history) - 1, path)
    return FitResult(path, objective.names, best.theta, best.value, fitter.history, particles)


class FitInterrupted(RunInterrupted):
    """A fit stopped by a signal between iterations, its rows and pictures written (resumable)."""

    def __init__(self, reason: str, signum: int, iteration: int, path: Path) -> None:
        super().__init__(reason, signum, float(iteration), path)
        self.args = (f"fit interrupted by {reason} after iteration {iteration}; the same command again "
                     f"continues from it ({path}/fit.csv)",)


def _read_history(path: Path, names: list[str]) -> list[dict[str, float]]:
    if not path.is_file():
        return []
    with open(path, newline="") as fh:
        rows = [{k: float(v) for k, v in row.items()} for row in csv.DictReader(fh)]
    return [r for r in rows if all(n in r for n in names)]


class _Fitter:
    """The optimiser's loop: evaluations cached by point, a row of fit.csv per iteration."""

    def __init__(self, objective: Objective, l1: float, path: Path, history: list[dict[str, float]], quiet: bool,
                 comm, started: float) -> None:
        self.objective, self.l1, self.path, self.history = objective, l1, path, history
        self.quiet, self.comm, self.started = quiet, comm, started
        self.split = _Split(objective.parameters.bounds(), l1 > 0)
        self.cache: dict[bytes, tuple[float, np.ndarray, Evaluation]] = {}
        self.best: Evaluation
        self.watch: SignalWatch | None = None
        #: The signal that stopped the fit (0: none).
        self.stopped = 0

    def value(self, z: np.ndarray) -> tuple[float, np.ndarray, Evaluation]:
        key = z.tobytes()
        if key not in self.cache:
            found = self.objective.evaluate(self.split.theta(z))
            split = np.array(self.split.split + [True] * len(self.split.extra))
            kept = ~np.array(self.split.split)
            value = found.value + self.l1 * float(z[split].sum() + np.abs(found.theta[kept]).sum())
            g = self.split.gradient(found.gradient) + self.l1 * np.where(split, 1.0, 0.0) + self.l1 * np.concatenate(
                [np.where(kept, np.sign(found.theta), 0.0), np.zeros(len(self.split.extra))])
            found.value = value
            self.cache = {key: (value, g, found)}
        return self.cache[key]

    def _row(self, z: np.ndarray) -> None:
        from ..collective import on_root

        value, g, found = self.value(z)
        bounds = self.split.variable_bounds()
        projected = np.array([0.0 if (lo is not None and zi <= lo and gi > 0) else gi
                              for zi, gi, (lo, _) in zip(z, g, bounds)])
        row = {"iteration": float(len(self.history)), "loss": float(value),
               "grad_norm": float(np.linalg.norm(projected)), **dict(zip(self.objective.names, found.theta.tolist()))}
        self.history.append(row)
        if self.best is None or value <= self.best.value:
            self.best = found

        def write() -> None:
            new = not (self.path / "fit.csv").exists()
            with open(self.path / "fit.csv", "a", newline="") as fh:
                writer = csv.DictWriter(fh, fieldnames=list(row))
                if new:
                    writer.writeheader()
                writer.writerow({k: (int(v) if k == "iteration" else repr(v)) for k, v in row.items()})
            if not self.quiet:
                print(f"fit: iteration {int(row['iteration']):4d}  loss {value:.6e}  |grad| {row['grad_norm']:.3e}"
                      f"  {time.perf_counter() - self.started:7.1f} s", flush=True)

        on_root(self.comm, write)
        received = self.watch.received if self.watch is not None else 0
        self.stopped = int(self.comm.allreduce(received, op=_max()))
        if self.stopped:
            raise StopIteration

    def run(self, theta: np.ndarray, iterations: int, gtol: float) -> None:
        from scipy.optimize import minimize

        z0 = self.split.variables(theta)
        self.best = None  # type: ignore[assignment]
        try:
            if not self.history:
                self._row(z0)
            else:
                self.best = self.value(z0)[2]
        except StopIteration:
            return
        if iterations == 0:
            return
        minimize(lambda z: self.value(z)[:2], z0, jac=True, method="L-BFGS-B", bounds=self.split.variable_bounds(),
                 callback=lambda z: self._row(np.asarray(z, dtype=float)),
                 options={"maxiter": iterations, "gtol": gtol, "ftol": 1e-15, "maxcor": 20})


def _max():
    from mpi4py import MPI

    return MPI.MAX


def _check_particles(objective: Objective, found: Evaluation, n: int, comm) -> list[dict[str, Any]]:
    """N tokens sampled from each input moved with the fitted weights: their loss against the target."""
    from ..particles.sampling import sample_initial
    from .losses import Measure

    rows = []
    data = objective.parameters.apply(found.theta)
    for i, (pair, target) in enumerate(zip(objective.pairs, objective.targets)):
        problem = objective.problem_for(data, pair)
        rng = np.random.default_rng(problem.particles.seed + i)
        tokens = _move_tokens(problem, sample_initial(problem.initial(), n, rng, problem.particles.sampler),
                              objective.T)
        token_loss = objective.loss.of_measure(Measure(tokens, np.full(n, 1.0 / n)), target)
        rows.append({"pair": i + 1, "tokens": n, "density_loss": found.losses[i], "token_loss": token_loss})
    return rows


def _move_tokens(problem, x: np.ndarray, T: float) -> np.ndarray:
    """Tokens moved to T by the problem's layers (RK4, each layer's default step; every rank alike)."""
    from ..particles.integrator import advance
    from ..particles.system import default_dt
    from ..velocity import LayerVelocity

    schedule = problem.schedule()
    field = LayerVelocity(schedule, None, "direct", problem.field.tol)
    weights = np.full(len(x), 1.0 / len(x))

    def velocity(y: np.ndarray) -> np.ndarray:
        return field(y, y, weights)

    for k, (start, end) in enumerate(zip(schedule.starts, [*schedule.starts[1:], np.inf])):
        t0, t1 = max(start, 0.0), min(end, T)
        if t1 > t0:
            field.enter(k)
            x, _ = advance(velocity, x, t0, t1, problem.particles.dt or default_dt(schedule.layers[k]))
    return x


def _pictures(path: Path, history: list[dict[str, float]], best: Evaluation, objective: Objective,
              measures: list[tuple[Any, Any]]) -> None:
    """loss.png, controls.png and pair-<i>.png (rank 0; ``measures``: each pair's input and fitted
    output, gathered)."""
    from ..plotting.training import controls_picture, loss_history, pair_picture

    fig = loss_history([r["iteration"] for r in history], [r["loss"] for r in history],
                       [r["grad_norm"] for r in history])
    fig.savefig(path / "loss.png", dpi=120)
    controls: dict[str, dict[int, float]] = {}
    for parameter, value in zip(objective.parameters.items, best.theta):
        keys = parameter.keys
        if len(keys) > 3 and keys[1] == "layers" and isinstance(keys[2], int):
            controls.setdefault(parameter.name.split("]", 1)[1].lstrip("."), {})[keys[2]] = float(value)
    if controls:
        t_ends = [min(float(layer["t_end"]), objective.T) for layer in objective.config.data["model"]["layers"]]
        controls_picture(t_ends, controls).savefig(path / "controls.png", dpi=120)
    for i, (pair, target, (initial, final)) in enumerate(zip(objective.pairs, objective.targets, measures)):
        fig = pair_picture(initial.points, initial.weights, final.points, final.weights,
                           None if target.measure is None else target.measure.points,
                           None if target.measure is None else target.measure.weights,
                           title=f"pair {i + 1}: {pair.input_label} -> {target.label} (loss {best.losses[i]:.3g})")
        fig.savefig(path / f"pair-{i + 1}.png", dpi=120)
