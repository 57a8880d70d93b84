"""The training objective in memory: its value and gradient by one forward run and one adjoint
sweep per pair, no files written.

For the free parameters theta (:mod:`.parameters`), pairs (input rho0_i, target nu_i) and a
loss D (:mod:`.losses`), MODEL.md's

    L(theta) = sum_i D(rho_i(T), nu_i) [+ sum_i sum_n w_n D(rho_i(t_n), nu_i)]
               + l2 sum |theta|^2 + l1 sum |theta|,

the bracket the running cost: the trapezoidal rule over the forward run's own step ends t_n
(weights w_n).  Its gradient: for each pair, the run forward to T, then the adjoint
(:class:`~meanfield.adjoint.AdjointSolver`) back from ``Phi(T) = dD/drho(T)`` (the loss's first
variation at the cells; for the running cost ``w_n dD/drho(t_n)`` added at every step end),
accumulating ``dL/dtheta`` as the ``--wrt`` sensitivities do.  For the finite-volume and DG1
schemes (both adjoints are the exact discrete ones; the loss sees DG1's cell averages) this is
the exact derivative of the discrete L (a Taylor test is second order) as long as the step
sizes do not depend on theta: give ``time.dt`` (an adaptive step is frozen along the forward
run; its change with theta is not differentiated).  The l1 term is not differentiable
at 0: :meth:`Objective.__call__` returns ``l1 sign(theta)``; :mod:`.fit` splits theta into
positive and negative parts instead.

Usage::

    from meanfield.training import Objective
    objective = Objective("case.toml", ["model.layers[*].V"], target="exp(3*x)", loss="mmd")
    value, gradient = objective(objective.start)
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..config import Config, ConfigError, load_config
from .losses import LOSSES, MMD, Cells, CircleW2, Loss, ObservableErrors, Sinkhorn, Target
from .parameters import Parameters
from .targets import check_target, initial_table, label, resolve_target

#: Relative step of the central differences of the field in a parameter (as ``--wrt``'s).
PARAMETER_STEP = 1e-5


@dataclass(frozen=True)
class Pair:
    """An input density (an ``[initial]`` table; ``None``: the config's own) and its target spec."""

    input: dict | None
    target: Any

    @property
    def input_label(self) -> str:
        return "the config's [initial]" if self.input is None else label(self.input)


@dataclass
class Evaluation:
    """One evaluation of the objective: value, gradient and what each pair's run gave."""

    theta: np.ndarray
    value: float
    gradient: np.ndarray
    losses: list[float] = field(default_factory=list)
    finals: list[Cells] = field(default_factory=list)
    initials: list[Cells] = field(default_factory=list)


def make_loss(name: str, *, kappa: float | None = None, epsilon: float | None = None,
              observables: Sequence[str] = ()) -> Loss:
    """The loss named ``name`` (``--loss``) with its settings (``ConfigError`` naming the field)."""
    if name not in LOSSES:
        raise ConfigError(f"--loss: one of {sorted(LOSSES)}, got {name!r}")
    if name == "observables":
        from ..own_observables import parse_observable

        return ObservableErrors([parse_observable(text) for text in observables])
    if observables:
        raise ConfigError(f"--observable: only with --loss observables (the loss is {name})")
    if name == "mmd":
        return MMD(1.0 if kappa is None else kappa)
    if name == "w2":
        return CircleW2()
    return Sinkhorn(0.05 if epsilon is None else epsilon)


def make_pairs(inputs: Sequence[Any], targets: Sequence[Any]) -> list[Pair]:
    """Pairs from inputs and targets given side by side (no inputs: the config's [initial] for
    one target)."""
    if not targets:
        raise ConfigError("--target: give a target (an expression, a run directory, a .npy of tokens or numbers)")
    if inputs and len(inputs) != len(targets):
        raise ConfigError(f"--input: {len(inputs)} inputs for {len(targets)} targets (give one input per target)")
    if not inputs and len(targets) > 1:
        raise ConfigError("--target: several targets need one --input each (the pairs)")
    return [Pair(None if not inputs else initial_table(i, "--input"), t)
            for i, t in zip(inputs or [None], targets)]


class Objective:
    """``theta -> (L, dL/dtheta)`` (module docstring); collective under MPI.

    Parameters
    ----------
    config
        Config (or mapping / TOML path) of the PDE run (no atoms).
    params
        Parameter paths (:class:`~.parameters.Parameters`).
    pairs
        The input/target pairs (:func:`make_pairs`); or give ``target`` for one pair from the
        config's own initial density.
    loss
        A :class:`~.losses.Loss` or its name (default settings).
    running
        Add the running cost.
    l2, l1
        Weights of the regularisers.
    overrides, comm
        ``--set`` overrides, MPI communicator (default COMM_WORLD).

    Attributes
    ----------
    progress
        Show each evaluation's forward run and backward sweep on rank 0 (a bar on a terminal,
        else a log line a minute); off by default, on in ``meanfield fit`` unless quiet.
    """

    def __init__(self, config: Config | Mapping | str | Path | None, params: Sequence[str],
                 pairs: Sequence[Pair] = (), *, target: Any = None, loss: Loss | str = "mmd",
                 running: bool = False, l2: float = 0.0, l1: float = 0.0, overrides: list[str] | None = None,
                 comm=None) -> None:
        from mpi4py import MPI

        from ..adjoint import check_supported
        from ..discrete_pde import DiscretePDE
        from ..drivers.launch import check_size, resolve_problem

        self.comm = comm or MPI.COMM_WORLD
        problem = resolve_problem(config, overrides, self.comm)
        self.config: Config = problem.config
        self.loss = make_loss(loss) if isinstance(loss, str) else loss
        self.pairs = list(pairs) if pairs else make_pairs((), [target] if target is not None else [])
        for name, weight in (("l2", l2), ("l1", l1)):
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not weight >= 0:
                raise ConfigError(f"fit.{name}: must be a number >= 0, got {weight!r}")
        self.running, self.l2, self.l1 = bool(running), float(l2), float(l1)
        self.parameters = Parameters(self.config.data, params)
        try:
            check_supported(problem)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        if not problem.velocity.is_attention:
            raise ConfigError("model.velocity: a prescribed rotation has no weights to fit")
        self.d, self.T = problem.d, problem.time.t_final
        for i, pair in enumerate(self.pairs):
            check_target(pair.target, self.d, self._field(i))
        check_size(problem, self.comm)
        self._problems = [self.problem_for(self.parameters.base, pair) for pair in self.pairs]
        sims = [DiscretePDE(p, self.comm) for p in self._problems]  # checks each input's initial velocity
        self.targets: list[Target] = []
        for i, (pair, sim) in enumerate(zip(self.pairs, sims)):
            target = resolve_target(pair.target, self._field(i), sim, self.d)
            self.loss.check(target, self.d)
            self.targets.append(target)
        self.start = self.parameters.values()
        self.evaluations = 0
        self.progress = False

    def _field(self, i: int) -> str:
        return "--target" if len(self.pairs) == 1 else f"--target (pair {i + 1})"

    def problem_for(self, data: dict, pair: Pair):
        """The problem of config data ``data`` with ``pair``'s input as its initial density."""
        from ..problem import Problem

        data = copy.deepcopy(data)
        if pair.input is not None:
            data["initial"] = copy.deepcopy(pair.input)
        return Problem(load_config(data))

    @property
    def names(self) -> list[str]:
        return self.parameters.names

    def config_at(self, theta: np.ndarray) -> Config:
        """The run's config with the parameters set to ``theta`` (``fitted.toml``)."""
        return load_config(self.parameters.apply(theta))

    def regulariser(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        """``l2 |theta|^2 + l1 |theta|_1`` and its (sub)gradient."""
        theta = np.asarray(theta, dtype=float)
        return (self.l2 * float(theta @ theta) + self.l1 * float(np.abs(theta).sum()),
                2.0 * self.l2 * theta + self.l1 * np.sign(theta))

    def __call__(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        """``L(theta)`` and ``dL/dtheta`` (collective)."""
        found = self.evaluate(theta)
        return found.value, found.gradient

    def evaluate(self, theta: np.ndarray) -> Evaluation:
        """The objective at ``theta`` with each pair's loss and its initial and final cells (collective)."""
        from ..adjoint import AdjointSolver, Sensitivity
        from ..discrete_pde import DiscretePDE
        from ..engine.progress import sweep_progress
        from ..velocity import LayerVelocity

        theta = np.asarray(theta, dtype=float)
        data = self.parameters.apply(theta)
        model = {"model": data["model"]}  # what the moved schedules need (every parameter is in it)
        moved = []
        for i in range(len(theta)):
            h = PARAMETER_STEP * max(1.0, abs(theta[i]))
            if self.parameters.items[i].positive:
                h = min(h, 0.5 * theta[i])  # both moved values stay > 0
            step = np.zeros_like(theta)
            step[i] = h
            # the moved schedules alone (the config was checked at theta; a step of 1e-5 changes no check)
            moved.append((self.names[i], h, *(self._schedule(theta + s, model) for s in (step, -step))))
        value, gradient = self.regulariser(theta)
        found = Evaluation(theta, 0.0, np.zeros_like(theta))
        quiet = not self.progress
        for i, (pair, target) in enumerate(zip(self.pairs, self.targets)):
            what = "" if len(self.pairs) == 1 else f"pair {i + 1}: "
            problem = self.problem_for(data, pair)
            sim = DiscretePDE(problem, self.comm)
            f = problem.field
            sensitivities = [Sensitivity(name, h, *(LayerVelocity(schedule, self.comm, f.method, f.tol,
                                                                  fixed_points=True, direct_sums=f.direct_sums)
                                                    for schedule in (plus, minus)))
                             for name, h, plus, minus in moved]
            solver = AdjointSolver(sim)
            found.initials.append(self._cells(sim, solver.initial))
            with sweep_progress(self.comm, f"{what}forward run", self.T, "t", quiet, share=None) as shown:
                final = solver.forward([self.T], shown.update)[self.T]
            cells = self._cells(sim, final)
            loss, variation = self.loss(cells, target)
            M = sim.slice_count
            finals = {self.T: np.tile(variation[None, :, None], (M, 1, 1))}
            running = _RunningCost(self, sim, solver, target) if self.running else None
            with sweep_progress(self.comm, f"{what}backward sweep", len(solver.trajectory.steps), "step", quiet,
                                share=None) as shown:
                _, derivatives = solver.backward(finals, sensitivities, sources=running, progress=shown.update)
            if running is not None:
                loss += running.value + running.weight(-1) * self.loss(found.initials[-1], target)[0]
            found.losses.append(float(loss))
            found.finals.append(cells)
            value += float(loss)
            gradient += derivatives[:, 0]
        found.value, found.gradient = value, gradient
        self.evaluations += 1
        return found

    def _schedule(self, theta: np.ndarray, model: dict):
        """The layer schedule with the parameters at ``theta`` (``model``: ``{"model": ...}``, checked)."""
        from ..layers import LayerSchedule

        return LayerSchedule.build(self.d, self.parameters.apply(theta, model)["model"])

    def _cells(self, sim, state: np.ndarray) -> Cells:
        centroids, areas = sim.owned_cells()
        return Cells(centroids, areas, sim.cell_averages(state), self.comm)


class _RunningCost:
    """The running cost's source in the adjoint sweep: ``w_n dD/drho(t_n)`` at each step end,
    accumulating ``sum_n w_n D(rho(t_n))`` (trapezoidal weights over the forward run's steps)."""

    def __init__(self, objective: Objective, sim, solver, target: Target) -> None:
        self.objective, self.sim, self.target = objective, sim, target
        self.dts = np.array([s.dt for s in solver.trajectory.steps])
        self.value = 0.0

    def weight(self, n: int) -> float:
        """The trapezoidal weight of the end of step n (-1: of t = 0)."""
        after = self.dts[n + 1] if n + 1 < len(self.dts) else 0.0
        before = self.dts[n] if n >= 0 else 0.0
        return 0.5 * (before + after)

    def __call__(self, n: int, state: np.ndarray) -> np.ndarray:
        cells = self.objective._cells(self.sim, state)
        loss, variation = self.objective.loss(cells, self.target)
        w = self.weight(n)
        self.value += w * loss
        return np.tile(w * variation[None, :, None], (self.sim.slice_count, 1, 1))
