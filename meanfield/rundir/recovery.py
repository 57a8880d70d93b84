"""The state a run resumes from: its checkpoint, else the newest intact state on disk.

``checkpoint.npz`` is the state after the last output (or the last ``checkpoint_every``);
:meth:`~meanfield.rundir.checkpoint.Checkpoint.save` keeps the one before it as
``checkpoint.previous.npz``.  When ``checkpoint.npz`` is missing or damaged (a disk fault, a
file copied or edited by hand), :func:`resume_point` takes, in this order:

1. ``checkpoint.previous.npz``, when it is intact: the exact state of an earlier moment;
2. the newest intact snapshot whose arrays are a full state of the run (a finite-volume
   density, a DG1 density with the mesh's vertex area elements, or a particle run's tokens;
   not a hybrid run's, whose snapshots lack the atoms' id counter): the run continues from
   that output as from a checkpoint written there.  A snapshot holds the step controller's
   state at its output (:data:`.layout.STEPPER`), so an adaptive PDE run takes the steps the
   run that went on took and agrees with it to round-off.  A snapshot written before that
   entry was added has none: the error controller starts afresh there (its first step is
   limited by the CFL bound alone), and the run continues to within the steps' error
   (``time.tol``) of the run that went on.

The outputs after the state used are written again when the run continues (they are cut back
like after any resume).  :class:`ResumePoint` says which state was used and why, for the
user and for metadata.json.  All functions are serial (rank 0).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import layout
from .checkpoint import Checkpoint, CheckpointError
from .files import load_npz


@dataclass(frozen=True)
class ResumePoint:
    """Where a resume starts.

    Attributes
    ----------
    checkpoint
        The state (from a checkpoint file or rebuilt from a snapshot).
    source
        The file it was read from, relative to the run directory.
    problem
        What was wrong with ``checkpoint.npz`` (``None`` when it was used).
    """

    checkpoint: Checkpoint
    source: str
    problem: str | None = None

    def note(self, run_dir: Path) -> str | None:
        """One line for the user: what was wrong and which state the run continues from; ``None`` if nothing was."""
        if self.problem is None:
            return None
        c = self.checkpoint
        return (f"{Path(run_dir) / layout.CHECKPOINT}: {self.problem}; resuming from {self.source} at t = {c.t:.6g} "
                f"(outputs from {c.next_output} on are written again)")


def snapshot_state(run_type: str, snapshot: dict[str, np.ndarray], mesh: dict[str, np.ndarray] | None) \
        -> dict[str, np.ndarray] | None:
    """The checkpoint state held by one snapshot's arrays, or ``None`` when they are not a full state."""
    arrays = {k: v for k, v in snapshot.items() if k not in ("t", layout.STEPPER)}
    if run_type == "particles" and set(arrays) == {"points"}:
        return {"points": arrays["points"]}
    if run_type != "pde" or mesh is None:
        return None
    if set(arrays) == {"density"}:  # finite volumes: the state is the cell averages
        return {"state": arrays["density"].reshape(-1, 1)}
    if set(arrays) == {"density", "vertex_density"} and "vertex_jacobian" in mesh:  # DG1: m = density * J
        return {"state": arrays["vertex_density"] * mesh["vertex_jacobian"]}
    return None  # a hybrid run: its atoms' id counter is only in the checkpoint


def _from_snapshots(run_dir: Path, run_type: str, output_times: np.ndarray) -> tuple[Checkpoint, str] | None:
    """The newest intact snapshot that is a full state, as a checkpoint written after its output."""
    try:
        mesh = load_npz(run_dir / layout.MESH) if (run_dir / layout.MESH).is_file() else None
    except ValueError:
        mesh = None
    files = layout.snapshot_files(run_dir)
    leading = [file for expected, (index, file) in enumerate(files) if index == expected]
    for index in range(len(leading) - 1, -1, -1):
        try:
            snapshot = load_npz(leading[index])
        except (OSError, ValueError):
            continue
        state = snapshot_state(run_type, snapshot, mesh)
        if state is None or index >= len(output_times):
            return None  # the newest intact snapshot is not a full state: older ones are not either
        info = {"step": json.loads(str(snapshot[layout.STEPPER]))} if layout.STEPPER in snapshot else {}
        checkpoint = Checkpoint(run_type, float(snapshot["t"]), index + 1, np.asarray(output_times, float), state, info)
        return checkpoint, str(leading[index].relative_to(run_dir))
    return None


def resume_point(run_dir: Path | str, run_type: str, output_times: np.ndarray) -> ResumePoint:
    """The state to resume the run in ``run_dir`` from (module docstring).

    Parameters
    ----------
    run_type
        ``"pde"`` or ``"particles"`` (metadata.json's, else the config's run type).
    output_times
        The run's output times (its config's), used for a state rebuilt from a snapshot.

    Raises
    ------
    CheckpointError
        Nothing intact to resume from; the message says what is on disk.
    """
    run_dir = Path(run_dir)
    try:
        return ResumePoint(Checkpoint.load(run_dir), layout.CHECKPOINT)
    except CheckpointError:
        problem = "damaged (not a readable checkpoint)" if (run_dir / layout.CHECKPOINT).exists() else "missing"
    try:
        return ResumePoint(Checkpoint.load(run_dir, layout.CHECKPOINT_PREVIOUS), layout.CHECKPOINT_PREVIOUS, problem)
    except CheckpointError:
        pass
    found = _from_snapshots(run_dir, run_type, output_times)
    if found is not None:
        return ResumePoint(found[0], found[1], problem)
    outputs = len(layout.snapshot_files(run_dir))
    if problem == "missing" and outputs == 0:
        raise CheckpointError(f"{run_dir / layout.CHECKPOINT}: no checkpoint (the run stopped before its first output)")
    raise CheckpointError(f"{run_dir / layout.CHECKPOINT}: {problem}, and neither {layout.CHECKPOINT_PREVIOUS} nor a "
                          f"snapshot holds a full state of this run to resume from ({outputs} output(s) on disk, "
                          "left as they are)")


def set_aside_damaged(run_dir: Path | str) -> str:
    """Rename a damaged ``checkpoint.npz`` to ``checkpoint.npz.damaged`` (``.damaged.1``, ... if taken), so
    that the next checkpoint does not replace it; returns a clause for the note ("" when none)."""
    run_dir = Path(run_dir)
    damaged = run_dir / layout.CHECKPOINT
    if not damaged.exists():
        return ""
    target, k = run_dir / f"{layout.CHECKPOINT}.damaged", 0
    while target.exists():
        k += 1
        target = run_dir / f"{layout.CHECKPOINT}.damaged.{k}"
    damaged.rename(target)
    return f"; the damaged file is kept as {target.name}"


def run_type_from_files(run_dir: Path | str) -> str:
    """The type of a run whose metadata.json is gone: its checkpoint's, else ``pde`` when it has a mesh.npz."""
    for name in (layout.CHECKPOINT, layout.CHECKPOINT_PREVIOUS):
        try:
            return Checkpoint.load(Path(run_dir), name).run_type
        except CheckpointError:
            pass
    return "pde" if (Path(run_dir) / layout.MESH).is_file() else "particles"
