"""Checkpoints: the whole state of a run at one time, enough to continue it exactly.

A checkpoint is one ``checkpoint.npz`` written atomically by rank 0 from arrays in global
order (so it can be resumed on any rank count): the simulation's state arrays (``state/*``),
the step controller's arrays (``stepper/*``), and a JSON header (time, the index of the next
output to write, the output times, step statistics, the run type).  Writing one
first renames the last one to ``checkpoint.previous.npz``, so an intact earlier state stays
on disk whatever happens to the newest (:mod:`.recovery` resumes from it).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import layout
from .files import load_npz, save_npz


class CheckpointError(RuntimeError):
    """A checkpoint that is missing, damaged or does not belong to the run."""


@dataclass
class Checkpoint:
    """The state of a run at time ``t``.

    Attributes
    ----------
    run_type
        ``"pde"`` or ``"particles"``.
    t
        Model time of the state.
    next_output
        Index of the next output time to write (outputs ``< next_output`` are written).
    output_times
        The run's output times when the checkpoint was written.
    state
        The simulation's arrays, global order (see the simulation's ``checkpoint``).
    info
        JSON-able facts: step statistics, the step controller's scalars, wall time so far.
    """

    run_type: str
    t: float
    next_output: int
    output_times: np.ndarray
    state: dict[str, np.ndarray] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)

    def save(self, run_dir: Path) -> Path:
        """Write ``run_dir/checkpoint.npz`` atomically, the one before kept as checkpoint.previous.npz;
        returns its path."""
        header = {"kind": self.run_type, "t": self.t, "next_output": self.next_output, "info": self.info}
        arrays = {f"state/{k}": np.asarray(v) for k, v in self.state.items()}
        path = Path(run_dir) / layout.CHECKPOINT
        if path.is_file():
            os.replace(path, Path(run_dir) / layout.CHECKPOINT_PREVIOUS)
        save_npz(path, header=np.array(json.dumps(header)), output_times=np.asarray(self.output_times, float), **arrays)
        return path

    @classmethod
    def load(cls, run_dir: Path, name: str = layout.CHECKPOINT) -> Checkpoint:
        """Read ``run_dir/checkpoint.npz`` (or ``run_dir/name``); raises :class:`CheckpointError` naming the file."""
        path = Path(run_dir) / name
        if not path.is_file():
            raise CheckpointError(f"{path}: missing")
        try:
            data = load_npz(path)
            header = json.loads(str(data.pop("header")))
            times = data.pop("output_times")
            state = {k.split("/", 1)[1]: v for k, v in data.items() if k.startswith("state/")}
            return cls(header["kind"], float(header["t"]), int(header["next_output"]), times, state, header["info"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CheckpointError(f"{path}: damaged checkpoint ({exc})") from None
