"""What a PDE run of a config would do, without running it (``meanfield check``).

:func:`check_config` resolves the config (every check ``meanfield run`` makes before it
starts: keys, values, the mesh file), builds the serial mesh to count its cells, picks the
nonlocal evaluator as the ``auto`` method would and estimates its cost with the evaluator's
cost model (:func:`meanfield.nonlocal_field.auto.estimated_costs`), estimates the run's memory
per rank (:mod:`meanfield.memory`; a run bigger than the available memory would be refused),
lists the output times, and says which run directory would be used (or why it would be
refused) and which files, of about what size, would be written there.  Nothing is written
(the short run that measures the costs writes into a temporary directory, then removes it).

A generated mesh is counted, not built (a resolution far too large for the machine is
reported at once); a mesh file is read.  For adaptive steps, a run of up to
:data:`ESTIMATE_CELLS` cells that fits in memory is set up on one process (as ``meanfield run``
sets it up, a second or a few) to measure each layer's initial step size, from which the
number of steps is bracketed (:class:`StepEstimate`), and a pilot run of the config on a
coarser mesh counts them (:func:`pilot_steps`).  A short run of the config into a
temporary directory then measures the cost of its start-up, steps, outputs and checkpoints here
(:mod:`meanfield.drivers.walltime`), from which the wall time on the given ranks is estimated,
oversubscription of the cores present included.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import memory
from ..config import Config, load_config
from ..discretisation.registry import scheme_class
from ..memory import Estimate, MemoryEstimateError, format_bytes, problem_estimate
from ..problem import Problem
from ..rundir import layout
from ..rundir.directory import RunDirectoryError, check_target
from ..spheres import sphere_named
from ..wording import counted, format_seconds
from . import walltime
from .batch_size import BatchSize

#: Field evaluations per time step (SSP-RK3: one per stage; a causal run's slices in one batched
#: evaluation a stage).
EVALUATIONS_PER_STEP = 3
#: Adaptive runs of up to this many cells are set up on one process to measure their initial
#: step sizes (a level-7 icosphere, 327680 cells, takes about 5 s); larger ones are not estimated.
ESTIMATE_CELLS = 400_000
#: A pilot run's mesh is about this many times coarser in cell width (S^2: a power of 2), but no
#: coarser than its sphere's ``pilot_resolution`` (:mod:`meanfield.spheres`).
PILOT_COARSENING = 8
#: How many times coarser a hybrid run's pilot is at most (its clusters must collapse below its cells).
PILOT_COARSENING_ATOMS = 2
#: Outputs a pilot run makes at most (the run's further outputs: a step shortened to land on each).
PILOT_OUTPUTS = 50
#: Outputs of a hybrid run's pilot (spaced 1, 2, 1, 2, ...: the atoms' step timed apart from an output's).
PILOT_ATOM_OUTPUTS = 20
#: Seconds after which a pilot run stops at its next output (its steps then extrapolated to t_final).
PILOT_BUDGET = 30.0
#: Layers up to which the time line lists each layer's step size (more: their range).
LISTED_LAYERS = 4
#: Seconds a step costs a cell at least, for choosing the probe's steps (a 20480-cell S^2 rotation: ~25 ms a step).
STEP_COST_PER_CELL = 1e-6


@dataclass(frozen=True)
class Pilot:
    """A pilot run's count of a run's steps (:func:`pilot_steps`).

    Attributes
    ----------
    steps
        The run's steps counted from the pilot's.
    coarsening
        How many times wider the pilot's cells are.
    reached
        The time the pilot reached (``t_final`` unless it ran past :data:`PILOT_BUDGET`).
    absorbed
        A hybrid run's: the output time by which the pilot's density had gone to the atoms
        (``atoms.absorb_mass``), ``None`` where it did not (or the run has no atoms).  From
        then on the run steps with atoms alone: ``steps`` counts the steps before.
    atom_steps
        The run's steps with atoms alone, from ``absorbed`` to ``t_final``
        (:func:`atom_step_count`).
    atom_step, atom_output
        The seconds of one of them and of an output with its checkpoint then (the density gone,
        its observables cost little), measured on the pilot (0 where it made too few outputs
        with atoms alone to tell them apart).
    atom_outputs
        The run's outputs after ``absorbed``.
    """

    steps: int
    coarsening: float
    reached: float
    absorbed: float | None = None
    atom_steps: int = 0
    atom_step: float = 0.0
    atom_output: float = 0.0
    atom_outputs: int = 0


@dataclass(frozen=True)
class StepEstimate:
    """The steps of an adaptive run, estimated from each layer's initial step size and speed.

    A step is ``min(cfl / rate, time.dt_max, the error controller's step)`` with ``rate`` the
    largest outflow rate of the density under the layer's velocity (the positivity or CFL
    bound), which is proportional to the velocity's speed, and the error controller's step
    (``time.tol``) measured by one trial step on the initial density.  The run's first step is
    measured; then the speed changes as the density moves, and the error controller's step
    with how fast the solution changes.  Attention starts slow on a spread density (the
    attention-weighted means nearly cancel) and speeds up as clusters form, up to the model's
    bound (:meth:`meanfield.layers.Layer.speed_bound`).  The run takes about :attr:`steps`
    steps if its steps stay as they start, and between :attr:`fewest_steps` and
    :attr:`most_steps`: the first if the error stops limiting the step and the speed stays as it
    starts, the second if the step is the initial step or the CFL bound at the model's speed
    bound, whichever is smaller, from the start.  A prescribed rotation keeps its speed: the
    three are the same where the error does not limit the step.

    Attributes
    ----------
    steps, fewest_steps, most_steps
        Steps to ``t_final`` at the initial step sizes, at the initial CFL bound (and
        ``time.dt_max``), and at the smallest step sizes: each layer's duration over its step
        size, plus one step per output time and layer boundary (the steps shortened to land
        there).
    dts, smallest_dts
        Each layer's initial step size (``inf`` where the velocity vanishes) and the smaller
        of it and the CFL bound at the speed bound.
    limits
        What sets each layer's initial step: ``"cfl"``, ``"error"`` or ``"dt_max"``.
    pilot
        A pilot run's count of the steps (:func:`pilot_steps`), the better estimate where there
        is one, else ``None``.
    """

    steps: int
    fewest_steps: int
    most_steps: int
    dts: tuple[float, ...]
    smallest_dts: tuple[float, ...]
    limits: tuple[str, ...]
    pilot: Pilot | None = None

    @classmethod
    def measure(cls, problem: Problem) -> StepEstimate:
        """Set the run up on this process alone and measure its initial step sizes and speeds."""
        from mpi4py import MPI

        from ..discrete_pde import DiscretePDE

        t = problem.time
        pde = DiscretePDE(problem, MPI.COMM_SELF)
        calls: list[float] = []

        def record(X: np.ndarray) -> None:
            calls.append(float(np.max(np.linalg.norm(X, axis=-1), initial=0.0)))

        with pde.observing_velocity(record):
            rates = pde.initial_rates()
        # every layer's right-hand side evaluates the velocity equally often (once: a causal run's slices at once)
        speeds = [float(np.max(part, initial=0.0)) for part in np.array_split(np.array(calls), len(rates))]
        schedule = problem.schedule()
        bounds = [layer.speed_bound() for layer in schedule.layers] if problem.velocity.is_attention else speeds
        durations = schedule.durations(t.t_final)[:len(rates)]
        errors = pde.initial_error_steps([d if d > 0 else t.t_final for d in durations])
        bounded = [{"cfl": t.cfl / rate if rate > 0 else math.inf, "error": error,
                    "dt_max": t.dt_max if t.dt_max is not None else math.inf} for rate, error in zip(rates, errors)]
        limits = tuple(min(b, key=lambda k: b[k]) for b in bounded)
        dts = tuple(b[limit] for b, limit in zip(bounded, limits))
        # the rate scales with the speed: at the bound it is rate * bound / speed
        smallest = tuple(dt if rate == 0 or speed == 0 or bound <= speed else min(t.cfl * speed / (rate * bound), dt)
                         for dt, rate, speed, bound in zip(dts, rates, speeds, bounds))
        landings = len(t.output_times) + len(schedule.boundaries)

        def count(step_sizes: tuple[float, ...]) -> int:
            return landings + sum(math.floor(duration / dt) for duration, dt in zip(durations, step_sizes)
                                  if duration > 0)

        positivity = tuple(min(b["cfl"], b["dt_max"]) for b in bounded)
        return cls(count(dts), count(positivity), count(smallest), dts, smallest, limits)


def pilot_steps(problem: Problem) -> Pilot | None:
    """The steps of an adaptive run counted by a pilot run; ``None`` for a mesh file.

    The speed of the density, and the error controller's step, change along the run (attention
    speeds up as clusters form): the initial step says little of the run's steps.  The pilot
    runs the config itself on a mesh about :data:`PILOT_COARSENING` times coarser, on this
    process, into a temporary directory, and counts its steps by what limited them: a step the
    CFL bound limits is shorter in proportion to the cell width on the run's mesh (the outflow
    rate is the speed over the cell width), one the error or ``time.dt_max`` limits is not.
    The pilot makes at most :data:`PILOT_OUTPUTS` outputs (a hybrid run's:
    :data:`PILOT_ATOM_OUTPUTS`); each further output of the run adds a step shortened to land
    on it.  A pilot still running after :data:`PILOT_BUDGET`
    seconds stops at its next output and its counts are extrapolated to ``t_final`` in
    proportion to the time it reached.

    A hybrid run (``atoms.capture``) captures its clusters once they collapse below its cells,
    and once the density left is at most ``atoms.absorb_mass`` goes on with atoms alone, at
    steps set by the atoms' bound whatever the mesh (:func:`atom_step_count`).  Its pilot is
    only :data:`PILOT_COARSENING_ATOMS` times coarser, so that its clusters collapse as the
    run's do; where its density goes to the atoms, its steps before count the run's as above,
    and the steps after are counted from the atoms' bound to ``t_final`` and timed on the
    pilot."""
    from mpi4py import MPI

    from .pde import run

    t, resolution = problem.time, problem.mesh.resolution
    if problem.mesh.file is not None or resolution is None:
        return None
    data = copy.deepcopy(problem.config.data)
    sphere = sphere_named(problem.sphere)
    factor = PILOT_COARSENING_ATOMS if problem.atoms.capture else PILOT_COARSENING
    coarse = min(resolution, max(sphere.coarsened(resolution, factor), sphere.pilot_resolution))
    coarsening = sphere.coarsening(resolution, coarse)
    data["mesh"]["resolution"] = coarse
    data["time"]["wall_limit"] = None
    data["output"].update(dir=None, xdmf=False)
    outputs = len(t.output_times) - 1
    if problem.atoms.enabled:  # spaced 1, 2, 1, 2, ...: the seconds of a step with atoms alone apart from an output's
        spacing = np.cumsum([1 + k % 2 for k in range(PILOT_ATOM_OUTPUTS)])
        data["time"].update(outputs=[float(x) for x in spacing * t.t_final / spacing[-1]], outputs_every=None)
    elif outputs > PILOT_OUTPUTS:
        data["time"].update(outputs=PILOT_OUTPUTS, outputs_every=None)
    alone: list[tuple[float, float]] = []  # (t, seconds) at each output with atoms alone (an empty density)
    start = time.perf_counter()

    def within_budget(state) -> bool:
        if problem.atoms.enabled and state.density is not None and not np.any(state.density):
            alone.append((state.t, time.perf_counter()))
        return time.perf_counter() - start < PILOT_BUDGET

    with tempfile.TemporaryDirectory(prefix=".meanfield-pilot-") as folder:
        pilot = run(data, out=Path(folder) / "pilot", comm=MPI.COMM_SELF, quiet=True, callbacks=[within_budget])
    limits = dict(pilot.metadata["steps"]["limits"])
    reached = float(pilot.metadata["t_reached"])
    times = pilot.times
    if not alone:
        scaled = coarsening * limits.get("cfl", 0) + sum(count for limit, count in limits.items() if limit != "cfl")
        return Pilot(math.ceil(scaled * t.t_final / reached) + max(outputs - len(times) + 1, 0), coarsening,
                     reached)
    # the steps with atoms alone do not depend on the mesh: the pilot's own come out of its counts
    absorbed = alone[0][0]
    own = atom_step_count(problem, absorbed, reached, times)
    before = max(sum(limits.values()) - own, 0)
    cfl = min(max(limits.get("cfl", 0) - own + int(np.sum((times > absorbed) & (times <= reached))), 0), before)
    more = int(np.sum(t.output_times <= absorbed)) - int(np.sum(times <= absorbed))  # the run's other landings
    step, output = _atom_seconds(problem, alone, times)
    return Pilot(max(math.ceil(coarsening * cfl + before - cfl) + more, 0), coarsening, reached, absorbed,
                 atom_step_count(problem, absorbed, t.t_final, t.output_times), step, output,
                 int(np.sum(t.output_times > absorbed)))


def _atom_seconds(problem: Problem, alone: list[tuple[float, float]], times: np.ndarray) -> tuple[float, float]:
    """The seconds of a step with atoms alone and of an output with its checkpoint then: the wall
    seconds between the pilot's outputs with atoms alone, ``steps x step + output``, fitted by
    least squares over its intervals of 1 and 2 spacings (0, 0 with fewer than two of each)."""
    steps = [atom_step_count(problem, a[0], b[0], times) for a, b in zip(alone[:-1], alone[1:])]
    if len(set(steps)) < 2:
        return 0.0, 0.0
    walls = [b[1] - a[1] for a, b in zip(alone[:-1], alone[1:])]
    (step, output), *_ = np.linalg.lstsq(np.column_stack([steps, np.ones(len(steps))]), np.array(walls), rcond=None)
    return max(float(step), 0.0), max(float(output), 0.0)


def atom_step_count(problem: Problem, t0: float, t1: float, times: np.ndarray) -> int:
    """The steps of a hybrid run with atoms alone from ``t0`` to ``t1`` with outputs at ``times``:
    steps of the atoms' bound, ``cfl * atoms.lipschitz_step / L`` (or ``time.dt_max``) with ``L``
    the layer's Lipschitz bound (:mod:`meanfield.atoms.coupling`), between the output times and
    layer boundaries, on which they land."""
    t, schedule = problem.time, problem.schedule()
    cuts = sorted({t0, t1, *(float(c) for c in (*times, *schedule.boundaries) if t0 < c < t1)})
    steps = 0
    for a, b in zip(cuts[:-1], cuts[1:]):
        bound = schedule.layers[schedule.index_from(a)].lipschitz_bound()
        dt = min(t.cfl * problem.atoms.lipschitz_step / bound if bound > 0 else math.inf,
                 t.dt_max if t.dt_max is not None else math.inf)
        steps += max(math.ceil((b - a) / dt - 1e-9), 1) if math.isfinite(dt) else 1
    return steps


@dataclass(frozen=True)
class LayerField:
    """The nonlocal field of one layer: from ``start`` on, ``evaluator`` with modelled ``costs``."""

    start: float
    evaluator: str
    costs: dict[str, float]


@dataclass
class CheckReport:
    """What :func:`check_config` found.

    Attributes
    ----------
    problem
        The problem of the resolved config (:attr:`config`), built once by :func:`check_config`.
    cells, vertices
        The mesh size.
    fields
        One entry per layer of the model's schedule that has attention: its start time, the
        nonlocal evaluator a run would use there (``direct`` or ``fast``) and the modelled
        seconds of one evaluation by each method, on one core.  Empty for a prescribed
        rotation or a model without attention.
    targets, sources
        Points of one field evaluation on the whole mesh.
    steps
        Time steps to the end: exact for a fixed ``time.dt``, estimated for adaptive steps
        (see ``estimate``: its pilot run's count, else the count at the initial step), ``None``
        where not estimated.
    output_times
        The output times.
    directory, directory_state
        The run directory and what a run would do with it (``new``, or why it would be refused).
    memory, memory_state
        The estimated memory per rank of a run on ``ranks`` ranks (:mod:`meanfield.memory`;
        ``None`` for a mesh file, estimated from its cell count) and whether it fits (``fits``,
        or why a run would be refused).
    files
        File name -> estimated size in bytes (``None`` where small) of what a run would write.
    ranks
        The ranks the memory and wall-time estimates are for.
    cores
        The cores the run's ranks may run on here (:func:`meanfield.drivers.walltime.cores`).
    estimate
        The initial step sizes behind an adaptive run's ``steps`` (``None`` for a fixed step,
        or where the run was too large to set up: more than :data:`ESTIMATE_CELLS` cells, or
        more memory than is available).
    costs
        The seconds of the run's start-up, one step, one output and one checkpoint, measured
        on one process here (:class:`meanfield.drivers.walltime.Costs`), or why they were not.
    batch
        What ``meanfield particles`` would cost for a batch of prompts (``[particles] prompts``,
        :class:`~meanfield.drivers.batch_size.BatchSize`), ``None`` for a config without one.
    """

    problem: Problem
    cells: int
    vertices: int
    fields: list[LayerField]
    targets: int
    sources: int
    steps: int | None
    output_times: np.ndarray
    directory: Path
    directory_state: str
    memory: Estimate
    memory_state: str
    files: dict[str, int | None] = field(default_factory=dict)
    ranks: int = 1
    cores: int = field(default_factory=walltime.cores)
    estimate: StepEstimate | None = None
    costs: walltime.Costs | str = "not measured"
    batch: BatchSize | None = None

    @property
    def config(self) -> Config:
        """The resolved config."""
        return self.problem.config

    def format(self) -> str:
        """The report as text for the terminal: the summary, the details, then the resolved config."""
        p = self.problem
        mesh = f"file {p.mesh.file}" if p.mesh.file else f"resolution {p.mesh.resolution}"
        times = self.output_times
        shown = ", ".join(f"{t:g}" for t in times) if len(times) <= 8 else \
            f"{times[0]:g}, {times[1]:g}, ..., {times[-1]:g}"
        step = f"{self.steps} steps of dt = {p.time.dt:g}" if p.time.dt is not None else self._adaptive()
        on_disk = sum(size for size in self.files.values() if size is not None)
        lines = ["# summary (nothing was written; a short run in a temporary directory measured the costs)"
                 if not isinstance(self.costs, str) else "# summary (nothing was run or written)",
                 f"mesh:        {p.sphere} ({mesh}): {self.cells} cells, {self.vertices} vertices; "
                 f"scheme {p.scheme.kind}",
                 *p.mask.summary(),
                 f"ranks:       {self.ranks} (the estimates below are for {counted(self.ranks, 'rank')}; "
                 f"--ranks N for another count){self._oversubscribed()}",
                 f"time:        0 -> {p.time.t_final:g}, {step}",
                 f"wall time:   {self.wall_time()}",
                 f"memory:      {self.memory.format()}: {self.memory_state}",
                 f"outputs:     {counted(len(times), 'output')} at t = {shown}; ~{format_bytes(on_disk)} on disk",
                 f"run dir:     {self.directory} ({self.directory_state})",
                 *([] if self.batch is None else self.batch.lines(len(times))),
                 "", "# details",
                 f"field:       {self._field()}",
                 f"costs:       {self._costs()}",
                 "would write: " + ", ".join(name for name, size in self.files.items() if size is None)]
        lines += [f"             {name:<24} ~{format_bytes(size)}" for name, size in self.files.items()
                  if size is not None]
        lines += ["", f"# config (resolved from {self.config.source}; what the run directory's config.toml would "
                  "hold)", self.config.to_toml().rstrip()]
        return "\n".join(lines)

    def _step_counts(self) -> list[int]:
        """The estimated steps (a pilot run's count, where there is one), or the fewest and the
        most where adaptive steps give only a range."""
        if self.steps is None:
            return []
        e = self.estimate
        return [self.steps] if e is None or e.pilot is not None or e.most_steps == e.fewest_steps \
            else [e.fewest_steps, e.most_steps]

    def wall_times(self) -> list[walltime.WallTime]:
        """The run's wall time on :attr:`ranks` ranks from the measured costs, at each of
        :meth:`_step_counts` (empty where not measured)."""
        if isinstance(self.costs, str):
            return []
        every = self.problem.output.checkpoint_every
        pilot = None if self.estimate is None else self.estimate.pilot
        alone = (0, 0.0, 0, 0.0) if pilot is None else \
            (pilot.atom_steps, pilot.atom_step, pilot.atom_outputs if pilot.atom_output > 0 else 0, pilot.atom_output)
        return [walltime.estimate(self.costs, steps, len(self.output_times), self.ranks, every, self.cores, *alone)
                for steps in self._step_counts()]

    def output_warning(self) -> str | None:
        """One line when the outputs and checkpoints would cost more than the time stepping (at
        the most steps estimated), else ``None``."""
        times = self.wall_times()
        if not times or times[-1].writing <= times[-1].stepping:
            return None
        last = times[-1]
        return (f"warning: writing {counted(len(self.output_times), 'output')} and their checkpoints would take "
                f"~{format_seconds(last.writing)}, more than the time stepping "
                f"(~{format_seconds(last.stepping)} at most): "
                "fewer outputs (a larger time.outputs_every, or a smaller time.outputs) would shorten the run")

    def wall_time(self) -> str:
        """The run's wall time on :attr:`ranks` ranks, as text: from the measured costs, else the
        modelled cost of the nonlocal field alone."""
        times = self.wall_times()
        if times:
            total = " to ".join(f"~{format_seconds(w.total)}" for w in times)
            stepping = " to ".join(format_seconds(w.stepping) for w in times)
            steps = " to ".join(str(n) for n in self._step_counts())
            pilot = None if self.estimate is None else self.estimate.pilot
            if pilot is not None and pilot.atom_steps:
                steps += f" + {pilot.atom_steps} with atoms alone"
            last = times[-1]
            periodic = (f" and {format_seconds(last.checkpoints)} for "
                        f"{counted(last.checkpoints_count, 'more checkpoint')}") if last.checkpoints_count else ""
            return (f"{total}: start-up {format_seconds(last.startup)}, time stepping {stepping} ({steps} steps), "
                    f"{counted(len(self.output_times), 'output')} with a checkpoint each {format_seconds(last.outputs)}"
                    f"{periodic}; from the costs measured here (costs below)")
        return self._field_time()

    def _oversubscribed(self) -> str:
        """What the ranks do on this machine's cores, when they are more."""
        here = self.cores
        if self.ranks <= here:
            return ""
        return (f"; more than the {counted(here, 'core')} here: on this machine the ranks would take turns "
                f"(oversubscribed), each step ~{format_seconds(walltime.step_penalty(self.ranks, here))} slower "
                "as they wait for each other")

    def _costs(self) -> str:
        if isinstance(self.costs, str):
            return self.costs
        c = self.costs
        load = f", load average {os.getloadavg()[0]:.3g} on {counted(self.cores, 'core')}" \
            if hasattr(os, "getloadavg") else ""
        return (f"measured on one process here (a run of {walltime.PROBE_OUTPUTS} outputs into a temporary directory"
                f"{load}): "
                f"start-up {format_seconds(c.startup)}, a step {format_seconds(c.step)}, an output and its checkpoint "
                f"{format_seconds(c.output)}, a checkpoint {format_seconds(c.checkpoint)}")

    def _field_time(self) -> str:
        """The modelled wall time of the run's nonlocal field on :attr:`ranks` ranks, as text."""
        if not self.fields:
            return "not modelled (no nonlocal field: the run is cheap per step)"
        if self.steps is None:
            return "not estimated (adaptive steps, not counted before the run); the modelled cost per step is " \
                   "under field below"
        seconds = [self._field_seconds(steps) for steps in self._step_counts()]
        shown = " to ".join(f"~{format_seconds(s / self.ranks)}" for s in seconds)
        one_core = " to ".join(format_seconds(s) for s in seconds)
        basis = "" if self.estimate is None else " for the estimated steps"
        return (f"{shown} (the nonlocal field's modelled cost{basis}, {one_core} on one core, shared by "
                f"{counted(self.ranks, 'rank')})")

    def _field_seconds(self, steps: int) -> float:
        """The nonlocal field's modelled seconds on one core for ``steps`` steps spread evenly in time."""
        t_final, evaluations = self.problem.time.t_final, EVALUATIONS_PER_STEP
        ends = [f.start for f in self.fields[1:]] + [t_final]
        return sum(evaluations * f.costs[f.evaluator] * steps * (min(end, t_final) - f.start) / t_final
                   for f, end in zip(self.fields, ends))

    def _adaptive(self) -> str:
        """The time line's account of adaptive steps."""
        p = self.problem
        head = f"adaptive steps (cfl {p.time.cfl:g}, tol {p.time.tol:g})"
        if self.estimate is None:
            why = f"more than {ESTIMATE_CELLS} cells" if self.cells > ESTIMATE_CELLS else "the run does not fit here"
            return f"{head}: not estimated ({why}); metadata.json's progress gives the ETA once it runs"
        e = self.estimate
        first, smallest = _step_sizes(e.dts, e.limits), _step_sizes(e.smallest_dts)
        per_layer = " (one per layer)" if 1 < len(e.dts) <= LISTED_LAYERS else ""
        if e.pilot is not None:
            c = e.pilot.coarsening
            stopped = "" if e.pilot.reached >= p.time.t_final else \
                (f", extrapolated from t = {e.pilot.reached:.3g} where it stopped after {PILOT_BUDGET:g} s: fewer than "
                 "the run's if it speeds up later")
            how = f"on a mesh {c:g}x coarser (its CFL-limited steps {c:g}x as many here{stopped})" if c > 1 else \
                f"of the run itself (its mesh is the coarsest a pilot takes{stopped})"
            alone = "" if e.pilot.absorbed is None else \
                (f", then ~{e.pilot.atom_steps} steps with atoms alone from t = {e.pilot.absorbed:.3g}, where the "
                 f"pilot's density had gone to the atoms (atoms.absorb_mass), at the atoms' bound whatever the mesh, "
                 f"{format_seconds(e.pilot.atom_step)} each on the pilot, and an output with its checkpoint then "
                 f"{format_seconds(e.pilot.atom_output)}")
            return (f"{head}: ~{e.pilot.steps} steps{alone}, counted by a pilot run {how}; from the initial step dt = "
                    f"{first}{per_layer}: ~{e.steps} steps, {e.fewest_steps} to {e.most_steps} at the extremes: the "
                    "fewer if the error stops limiting the step and the speed stays as it starts, the more at "
                    f"dt = {smallest} (the smaller of the initial step and the CFL bound at the model's speed bound)")
        if e.fewest_steps == e.steps == e.most_steps:
            return f"{head}: ~{e.steps} steps of dt = {first}{per_layer} (the initial velocity's step)"
        return (f"{head}: ~{e.steps} steps at the initial step dt = {first}{per_layer}; {e.fewest_steps} to "
                f"{e.most_steps} steps in all: the fewer if the error stops limiting the step and the speed stays as "
                f"it starts, the more at dt = {smallest} (the smaller of the initial step and the CFL bound at the "
                "model's speed bound); clustering speeds attention up towards the bound")

    def _field(self) -> str:
        if not self.fields:
            return "no nonlocal field (prescribed rotation, or no attention)"
        p = self.problem
        evaluations, measures = EVALUATIONS_PER_STEP, p.mask.count
        batched = f" of {measures} measures at once (the position slices)" if measures > 1 else ""
        lines = [f"nonlocal.method = {p.field.method}; {self.targets} targets x {self.sources} sources per "
                 f"evaluation{batched}, {evaluations} evaluations per step; modelled on one core:"]
        for layer in self.fields:
            per_step = evaluations * layer.costs[layer.evaluator]
            text = (f"  from t = {layer.start:g}: {layer.evaluator} ({format_seconds(layer.costs['direct'])} direct, "
                    f"{format_seconds(layer.costs['fast'])} fast per evaluation; ~{format_seconds(per_step)} per step")
            if self.steps is not None and len(self.fields) == 1 and self.estimate is None:
                text += f", ~{format_seconds(per_step * self.steps)} for the run"
            lines.append(text + ")")
        return "\n             ".join(lines)


def _step_sizes(dts: tuple[float, ...], limits: tuple[str, ...] | None = None) -> str:
    """Step sizes (one per layer) and what limits them, as text: listed up to
    :data:`LISTED_LAYERS` layers, else their range and how many layers each limit sets."""
    if len(dts) <= LISTED_LAYERS:
        return ", ".join(f"{dt:.3g}" + (f" (by {limit})" if limits else "") for dt, limit in
                         zip(dts, limits or dts))
    text = f"{min(dts):.3g} to {max(dts):.3g} over the {len(dts)} layers"
    if not limits:
        return text
    kinds = sorted(set(limits), key=limits.index)
    return text + (f" (by {limits[0]})" if len(kinds) == 1 else
                   " (by " + ", ".join(f"{kind} in {limits.count(kind)}" for kind in kinds) + ")")


def _fields(problem: Problem, targets: int, sources: int) -> list[LayerField]:
    """Each attention layer's evaluator (``auto``: the cheaper by the cost model) and modelled costs
    of one evaluation (a causal run's: of its slices' measures at once, one a stage)."""
    from ..nonlocal_field import FastEvaluator
    from ..nonlocal_field.auto import estimated_batch_costs, estimated_costs

    if not problem.velocity.is_attention:
        return []
    schedule = problem.schedule()
    fields = []
    for start, layer in zip(schedule.starts, schedule.layers):
        if layer.attention is None:
            continue
        plan = FastEvaluator(layer.attention, None, problem.field.tol)
        single = estimated_costs(plan, targets, sources)  # what auto chooses by, at a run's first evaluation
        chosen = problem.field.method if problem.field.method != "auto" else \
            ("fast" if single["fast"] < single["direct"] else "direct")
        measures = problem.mask.count
        components = scheme_class(problem.scheme.kind).velocity_components(layer.attention.d)
        costs = single if measures == 1 else estimated_batch_costs(plan, targets, sources, measures,
                                                                   components=components)
        fields.append(LayerField(float(start), chosen, costs))
    return fields


def _files(problem: Problem, cells: int, nv: int, outputs: int) -> dict[str, int | None]:
    """What a run writes and the sizes of the large files, from the run files' declarations
    (:data:`meanfield.rundir.layout.RUN_FILE_SPECS`)."""
    law = problem.random
    weights = None if law is None else law.weight_count(problem.particles.d)
    return layout.estimated_sizes(layout.RunSizes(
        cells, nv, scheme_class(problem.scheme.kind).vertex_values, problem.mask.count, outputs,
        problem.output.paraview, problem.atoms.enabled, weights))


def _mesh_size(problem: Problem) -> tuple[int, int, int]:
    """Cells, vertices and vertices per cell of the mesh: counted for a generated mesh, read from a file."""
    cells = problem.mesh.cells
    if cells is not None:
        return cells, sphere_named(problem.sphere).vertices(cells), problem.d
    mesh = problem.mesh.build()
    return mesh.cells.shape[0], len(mesh.points), mesh.cells.shape[1]


def _estimate(problem: Problem, cells: int, ranks: int) -> Estimate:
    """The run's memory estimate per rank on ``ranks`` ranks."""
    from ..memory import pde_estimate

    return problem_estimate(problem, ranks) or pde_estimate(problem.sphere, problem.scheme.kind, cells,
                                                            f"mesh.file {problem.mesh.file}", ranks,
                                                            problem.mask.slices)


def _fits(estimate: Estimate, ranks: int) -> bool:
    """Whether ``ranks`` ranks of ``estimate`` fit in the memory available now."""
    try:
        memory.check_memory(estimate, ranks)
    except MemoryEstimateError:
        return False
    return True


def _memory(problem: Problem, cells: int, ranks: int) -> tuple[Estimate, str]:
    """The run's memory estimate and whether it fits in what is available now."""
    estimate = _estimate(problem, cells, ranks)
    room = memory.available_memory()
    available = f"the {format_bytes(room[0])} available ({room[1]})" if room else "the available memory (unknown)"
    if not _fits(estimate, ranks):
        return estimate, f"more than {available}: a run would be refused (--no-memory-check to run anyway)"
    return estimate, f"fits in {available}"


def check_config(config: Problem | Config | dict | str | Path | None, overrides: list[str] | None = None, *,
                 out: str | Path | None = None, ranks: int = 1, cores: int | None = None) -> CheckReport:
    """Check a PDE config and describe the run it would make (module docstring); writes nothing.

    Parameters
    ----------
    config
        A Config, a mapping, a TOML path, ``None`` for the embedded default, or its Problem
        already built.
    overrides
        ``section.key=value`` strings (``--set``).
    out
        The run directory a run would use (default ``output.dir`` or ``runs/<name>``).
    ranks
        The ranks of the run (for the memory estimate; counted as if all on one node).
    cores
        The cores the run's ranks may run on (default :func:`meanfield.drivers.walltime.cores`,
        this process's).

    Raises
    ------
    ValueError
        Whatever ``meanfield run`` would refuse before starting (config, mesh file).
    """
    problem = config if isinstance(config, Problem) else \
        Problem(config if isinstance(config, Config) else load_config(config, overrides))
    cells, vertices, nv = _mesh_size(problem)
    targets, sources = scheme_class(problem.scheme.kind).field_points(cells, nv)
    fields = _fields(problem, targets, sources)
    t = problem.time
    steps = math.ceil(t.t_final / t.dt - 1e-9) if t.dt is not None else None
    estimate = None
    directory = Path(out) if out is not None else problem.output.directory
    try:
        state = {"missing": "new", "empty": "empty: used"}[check_target(directory)]
    except RunDirectoryError as exc:
        state = f"a run would be refused: {exc}"
    memory_estimate, memory_state = _memory(problem, cells, ranks)
    small = cells <= ESTIMATE_CELLS and _fits(_estimate(problem, cells, 1), 1)
    if t.dt is None and small:
        estimate = StepEstimate.measure(problem)
        try:
            estimate = dataclasses.replace(estimate, pilot=pilot_steps(problem))
        except Exception:  # noqa: BLE001 - the check goes on with the initial step's count (the time line says which)
            pass
        steps = estimate.steps if estimate.pilot is None else estimate.pilot.steps
    costs = _costs(problem, estimate, fields, cells, directory) if small else \
        f"not measured (more than {ESTIMATE_CELLS} cells, or more memory than is available here)"
    return CheckReport(problem, cells, vertices, fields, targets, sources, steps, t.output_times, directory, state,
                       memory_estimate, memory_state, _files(problem, cells, nv, len(t.output_times)), ranks,
                       cores or walltime.cores(), estimate, costs,
                       BatchSize.measure(problem, ranks) if problem.particles.batched else None)


def _costs(problem: Problem, estimate: StepEstimate | None, fields: list[LayerField], cells: int,
           directory: Path) -> walltime.Costs | str:
    """The run's costs measured by a probe run (:meth:`meanfield.drivers.walltime.Costs.measure`) of its
    fixed step or its initial adaptive one, or why not.  The probe's steps are chosen from a
    guess of their cost: the field's modelled cost, at least :data:`STEP_COST_PER_CELL` a cell."""
    t = problem.time
    finite = [dt for dt in (estimate.dts if estimate else ()) if math.isfinite(dt)]
    dt = t.dt if t.dt is not None else min(finite) if finite else t.t_final / 1000
    field_cost = EVALUATIONS_PER_STEP * max((f.costs[f.evaluator] for f in fields), default=0.0)
    guess = max(field_cost, STEP_COST_PER_CELL * cells * problem.mask.count, 1e-3)
    try:
        return walltime.Costs.measure(problem.config, dt, guess, directory)
    except Exception as exc:  # noqa: BLE001 - the check goes on without the measured costs, saying why
        return f"not measured (a run of a few steps failed: {type(exc).__name__}: {exc})"

