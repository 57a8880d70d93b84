"""Continuing a run from its last checkpoint (``meanfield resume``), also to a later end time.

A run that was interrupted (signal, wall limit), killed (``kill -9``, a node failure) or
failed continues in place from ``checkpoint.npz`` on any rank count: observables.csv, the
snapshots and the ParaView files are cut back to the checkpoint and appended to, so the
finished run equals an uninterrupted one.  A missing or damaged ``checkpoint.npz`` is
replaced by the newest intact state on disk (:mod:`meanfield.rundir.recovery`: the previous
checkpoint, else a snapshot that is a full state), and the run log and metadata.json say which.
``t_final`` extends a run (a completed one too): new output times continue the last output
spacing up to the new end time.

Overrides on resume may change how the rest of the run is computed (the model, the
nonlocal field, the time-step controls, the checkpoint interval, the particle step, the
atom phase's capture rule, merge distance, absorption threshold and step factor) but not
what is being computed (mesh, scheme, initial data, tokens, outputs); each resume is recorded
as a segment in metadata.json, with its overrides.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..collective import everywhere, on_root
from ..config import Config, ConfigError, load_config, parse_override
from ..engine.callbacks import Callback
from ..engine.handlers import Handler
from ..problem import Problem, output_times
from ..rundir import layout
from ..rundir.checkpoint import CheckpointError
from ..rundir.directory import (
    RunDirectoryError,
    RunLockedError,
    classify,
    effective_status,
    lock_state,
    looks_like_run,
    metadata_problem,
    not_a_run_message,
    read_metadata,
)
from ..rundir.recovery import resume_point, run_type_from_files
from ..rundir.results import ParticleRunResult, PDERunResult, load_run
from ..times import time_tol
from .launch import check_size, configure_process, continue_run

#: Settings a resume may change: section -> keys (``None``: every key of the section).
RESUMABLE: dict[str, frozenset[str] | None] = {
    "model": None,
    "nonlocal": None,
    "time": frozenset({"cfl", "dt", "dt_max", "tol", "wall_limit"}),
    "output": frozenset({"checkpoint_every", "log_every", "diagnostics"}),
    "particles": frozenset({"dt"}),
    # the atom phase's accuracy and cost controls (not ``capture``, not the ``initial`` atoms)
    "atoms": frozenset({"absorb_mass", "lipschitz_step", "merge_distance", "core_level", "core_cells", "min_height",
                        "core_fraction"}),
}


def extended_times(old: np.ndarray, t_final: float) -> np.ndarray:
    """The output times of a run whose end time becomes ``t_final``.

    Earlier times are kept; beyond the old end, new times continue the last spacing, and
    ``t_final`` is always the last output.
    """
    tol = time_tol(t_final)
    if t_final <= old[-1] + tol:
        return np.append(old[old < t_final - tol], t_final)
    spacing = old[-1] - old[-2] if len(old) > 1 else t_final - old[-1]
    count = int(np.floor((t_final - old[-1]) / spacing + 1e-9))
    new = old[-1] + spacing * np.arange(1, count + 1)
    return np.append(np.concatenate([old, new[new < t_final - tol]]), t_final)


def _outputs_setting(times: np.ndarray) -> int | list[float]:
    """``time.outputs`` reproducing ``times`` exactly: a count when linspace does, else the list."""
    count = len(times) - 1
    if count >= 1 and np.array_equal(np.linspace(0.0, times[-1], count + 1), times):
        return count
    return [float(t) for t in times]


def _check_overrides(overrides: list[str]) -> None:
    for text in overrides:
        keys, _ = parse_override(text)
        allowed = RESUMABLE.get(keys[0], frozenset())
        if keys == ["time", "t_final"]:
            raise ConfigError("--set time.t_final: use --t-final T to change the end time of a resumed run")
        if keys[:2] == ["model", "random"]:
            raise ConfigError(f"--set {'.'.join(keys)}: cannot change on resume: the run's drawn weights are read back "
                              "from its weights.npz (start a new run for another draw)")
        if len(keys) < 2 or (allowed is not None and keys[1] not in allowed):
            raise ConfigError(f"--set {'.'.join(keys)}: cannot change on resume (it would not continue the same run); "
                              f"resumable settings: {_resumable_list()}")


def _resumable_list() -> str:
    return ", ".join(f"{s}.*" if keys is None else ", ".join(f"{s}.{k}" for k in sorted(keys))
                     for s, keys in RESUMABLE.items())


def plan_resume(run_dir: Path, t_final: float | None = None, overrides: list[str] | None = None) -> dict[str, Any]:
    """Check that a run can be resumed as asked and resolve its config (serial; rank 0).

    Returns the resolved config data, its run type and the checkpoint's time and next output; the
    run's problem is built from that config once (:func:`resume`), which checks what only
    building it can (the model and its layers, also against the new end time).

    Raises
    ------
    ValueError
        (input errors) not a run, a run in progress, no checkpoint, nothing to do, a
        setting that cannot change, an end time before the checkpoint.
    """
    run_dir = Path(run_dir)
    rebuild = metadata_problem(run_dir) == "missing" and looks_like_run(run_dir)  # metadata.json is written anew
    if classify(run_dir) != "run" and not rebuild:
        raise RunDirectoryError(not_a_run_message(run_dir))
    meta = read_metadata(run_dir) or {}
    status = effective_status(run_dir, meta)
    if status == "running" or (rebuild and lock_state(run_dir) == "held"):
        raise RunLockedError(f"{run_dir}: the run is still in progress (its lock is held)")
    _check_overrides(overrides or [])
    config = load_config(run_dir / layout.CONFIG, overrides)
    run_type = meta.get("kind") or run_type_from_files(run_dir)
    try:
        checkpoint = resume_point(run_dir, run_type, output_times(config.data["time"])).checkpoint
    except CheckpointError as exc:
        raise RunDirectoryError(f"{exc}; to start it again: `meanfield run --overwrite` (replaces its outputs)") \
            from None
    old_final = float(checkpoint.output_times[-1])
    new_final = old_final if t_final is None else float(t_final)
    if not np.isfinite(new_final) or new_final < checkpoint.t - time_tol(checkpoint.t):
        raise ConfigError(f"--t-final: {new_final:g} is before the checkpoint's time {checkpoint.t:g}")
    times = extended_times(checkpoint.output_times, new_final)
    if checkpoint.next_output >= len(times) and status == "completed":
        raise ConfigError(f"--t-final: the run is complete at t = {old_final:g}; pass a later --t-final to extend it")
    if not np.array_equal(times[: checkpoint.next_output], checkpoint.output_times[: checkpoint.next_output]):
        raise ConfigError("--t-final: the new output times would change outputs already written")
    data = copy.deepcopy(config.data)
    data["time"]["t_final"] = new_final
    if data["time"]["outputs_every"] is None or not np.array_equal(output_times(data["time"]), times):
        data["time"]["outputs"], data["time"]["outputs_every"] = _outputs_setting(times), None
    return {"config": data, "source": str(run_dir / layout.CONFIG), "run_type": run_type, "rebuild_metadata": rebuild,
            "checkpoint": {"t": checkpoint.t, "next_output": checkpoint.next_output}}


def resume(
    path: str | Path,
    *,
    t_final: float | None = None,
    overrides: list[str] | None = None,
    comm=None,
    quiet: bool = False,
    callbacks: Sequence[Callback] = (),
    analysis: Sequence[Handler] = (),
) -> PDERunResult | ParticleRunResult:
    """Continue a run in place from its last checkpoint (collective, any rank count).

    Parameters
    ----------
    path
        The run directory.
    t_final
        A new end time (extends or shortens the run; default: the run's own).
    overrides
        ``section.key=value`` changes for the rest of the run (see :data:`RESUMABLE`).
    comm
        MPI communicator (default COMM_WORLD).
    quiet
        No log on the terminal and no progress bar.
    callbacks
        Called on rank 0 at every output (see :func:`meanfield.run`).
    analysis
        Handlers due once the outputs are written (see :func:`meanfield.drivers.particles.run_particles`).

    Returns
    -------
    PDERunResult or ParticleRunResult
        The whole run read back.
    """
    from mpi4py import MPI

    comm = comm or MPI.COMM_WORLD
    run_dir = Path(path)
    plan = on_root(comm, lambda: plan_resume(run_dir, t_final, overrides))
    problem = Problem(Config(plan["config"], plan["source"]))
    check_size(problem, comm, problem.particles.n * problem.particles.prompts  # type: ignore[operator]
               if plan["run_type"] == "particles" else None)
    note = {"t_final": problem.time.t_final, "overrides": list(overrides or []),
            "threads": configure_process(problem.field.threads)}
    if plan["run_type"] == "particles":
        from .particles import particle_handlers, particle_simulation

        continue_run(particle_simulation(problem, comm), problem, run_dir, plan["checkpoint"],
                     [*particle_handlers(problem), *analysis], quiet=quiet, note=note,
                     rebuild_metadata=plan["rebuild_metadata"], callbacks=callbacks)
    else:
        from .pde import PDESimulation, pde_handlers

        continue_run(PDESimulation(problem, comm), problem, run_dir, plan["checkpoint"],
                     [*pde_handlers(problem), *analysis], quiet=quiet, note=note,
                     rebuild_metadata=plan["rebuild_metadata"], callbacks=callbacks)
    return everywhere(comm, lambda: load_run(run_dir))
