"""What a PDE run of a config would do, without running it (``meanfield check``).

:func:`check_config` resolves the config (every check ``meanfield run`` makes before it
starts: keys, values, the mesh file), builds the serial mesh to count its cells, picks the
nonlocal evaluator as the ``auto`` method would and estimates its cost with the evaluator's
cost model (:func:`meanfield.nonlocal_field.auto.estimated_costs`), lists the output times,
and says which run directory would be used (or why it would be refused) and which files, of
about what size, would be written there.  Nothing is written.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .config import Config, load_config
from .problem import Problem
from .runner import layout
from .runner.directory import RunDirectoryError, check_target

#: Field evaluations per time step (SSP-RK3: one per stage).
EVALUATIONS_PER_STEP = 3


@dataclass
class CheckReport:
    """What :func:`check_config` found.

    Attributes
    ----------
    config
        The resolved config.
    cells, vertices
        The mesh size.
    evaluator
        The nonlocal evaluator a run would use (``direct`` or ``fast``; ``rotation`` for a
        prescribed velocity).
    targets, sources
        Points of one field evaluation on the whole mesh.
    costs
        Modelled seconds of one evaluation by each method, on one core (empty for a rotation).
    steps
        Time steps to the end (fixed ``time.dt``), or ``None`` (adaptive: unknown before the run).
    output_times
        The output times.
    directory, directory_state
        The run directory and what a run would do with it (``new``, or why it would be refused).
    files
        File name -> estimated size in bytes (``None`` where small) of what a run would write.
    """

    config: Config
    cells: int
    vertices: int
    evaluator: str
    targets: int
    sources: int
    costs: dict[str, float]
    steps: int | None
    output_times: np.ndarray
    directory: Path
    directory_state: str
    files: dict[str, int | None] = field(default_factory=dict)

    def format(self) -> str:
        """The report as text for the terminal."""
        p = Problem(self.config)
        lines = [f"# config (resolved from {self.config.source}; what the run directory's config.toml would hold)",
                 self.config.to_toml().rstrip(), ""]
        mesh = f"file {p.mesh.file}" if p.mesh.file else f"resolution {p.mesh.resolution}"
        lines.append(f"mesh:        {p.sphere} ({mesh}): {self.cells} cells, {self.vertices} vertices")
        lines.append(f"scheme:      {p.scheme.kind}")
        lines.append(f"field:       {self._field()}")
        times = self.output_times
        shown = ", ".join(f"{t:g}" for t in times) if len(times) <= 8 else \
            f"{times[0]:g}, {times[1]:g}, ..., {times[-1]:g}"
        step = f"{self.steps} steps of dt = {p.time.dt:g}" if self.steps is not None else \
            f"adaptive steps (cfl {p.time.cfl:g})"
        lines.append(f"time:        0 -> {p.time.t_final:g}, {step}; {len(times)} outputs at t = {shown}")
        lines.append(f"run dir:     {self.directory} ({self.directory_state})")
        lines.append("would write: " + ", ".join(name for name, size in self.files.items() if size is None))
        lines += [f"             {name:<24} ~{_size(size)}" for name, size in self.files.items() if size is not None]
        return "\n".join(lines)

    def _field(self) -> str:
        if not self.costs:
            return "prescribed rotation (no nonlocal field)"
        p = Problem(self.config)
        per_step = EVALUATIONS_PER_STEP * self.costs[self.evaluator]
        text = (f"{self.evaluator} (nonlocal.method = {p.field.method}); {self.targets} targets x {self.sources} "
                f"sources per evaluation; modelled {_seconds(self.costs['direct'])} direct, "
                f"{_seconds(self.costs['fast'])} fast per evaluation on one core; "
                f"~{_seconds(per_step)} per step ({EVALUATIONS_PER_STEP} evaluations)")
        if self.steps is not None:
            text += f", ~{_seconds(per_step * self.steps)} for the run"
        return text


def _seconds(s: float) -> str:
    if s < 1e-3:
        return f"{s * 1e6:.3g} us"
    return f"{s * 1e3:.3g} ms" if s < 1 else f"{s:.3g} s"


def _size(n: int) -> str:
    power = min(int(math.log10(max(n, 1)) // 3), 4)
    return f"{n / 1000 ** power:.3g} {('B', 'kB', 'MB', 'GB', 'TB')[power]}"


def _field_choice(problem: Problem, targets: int, sources: int) -> tuple[str, dict[str, float]]:
    """The evaluator a run would use and the modelled costs (auto: the cheaper by the cost model)."""
    from .nonlocal_field import FastEvaluator
    from .nonlocal_field.auto import estimated_costs

    if not problem.velocity.is_attention:
        return "rotation", {}
    costs = estimated_costs(FastEvaluator(problem.model(), None, problem.field.tol), targets, sources)
    if problem.field.method != "auto":
        return problem.field.method, costs
    return ("fast" if costs["fast"] < costs["direct"] else "direct"), costs


def _files(problem: Problem, cells: int, nv: int, outputs: int) -> dict[str, int | None]:
    """What a run writes (layout.py), with sizes of the large files (8-byte values, no overhead)."""
    dg1 = problem.scheme.kind == "dg1"
    per_output = 8 * cells * (1 + (nv if dg1 else 0))
    files: dict[str, int | None] = {name: None for name in (layout.CONFIG, layout.METADATA, layout.OBSERVABLES,
                                                            layout.LOG)}
    if problem.output.paraview:
        files[layout.PARAVIEW_CELLS] = None
        if dg1:
            files[layout.PARAVIEW_DG1] = None
    files[layout.MESH] = 8 * cells * (2 * nv + 2)
    files[layout.CHECKPOINT] = 8 * cells * (nv if dg1 else 1)
    files[f"{layout.SNAPSHOTS}/NNNN.npz x {outputs}"] = outputs * per_output
    files[layout.RUN_FILE] = outputs * per_output + 8 * cells * (8 + nv)
    return files


def check_config(config: Config | dict | str | Path | None, overrides: list[str] | None = None, *,
                 out: str | Path | None = None) -> CheckReport:
    """Check a PDE config and describe the run it would make (module docstring); writes nothing.

    Parameters
    ----------
    config
        A Config, a mapping, a TOML path, or ``None`` for the embedded default.
    overrides
        ``section.key=value`` strings (``--set``).
    out
        The run directory a run would use (default ``output.dir`` or ``runs/<name>``).

    Raises
    ------
    ValueError
        Whatever ``meanfield run`` would refuse before starting (config, mesh file).
    """
    from .discretisation.dg1 import DG1Scheme
    from .discretisation.fv import FiniteVolumeScheme

    config = config if isinstance(config, Config) else load_config(config, overrides)
    problem = Problem(config)
    mesh = problem.mesh.build()
    cells, nv = mesh.cells.shape
    scheme = DG1Scheme if problem.scheme.kind == "dg1" else FiniteVolumeScheme
    targets, sources = scheme.field_points(cells, nv)
    evaluator, costs = _field_choice(problem, targets, sources)
    t = problem.time
    steps = math.ceil(t.t_final / t.dt - 1e-9) if t.dt is not None else None
    directory = Path(out) if out is not None else problem.output.directory
    try:
        state = {"missing": "new", "empty": "empty: used"}[check_target(directory)]
    except RunDirectoryError as exc:
        state = f"a run would be refused: {exc}"
    return CheckReport(config, cells, len(mesh.points), evaluator, targets, sources, costs, steps, t.output_times,
                       directory, state, _files(problem, cells, nv, len(t.output_times)))

