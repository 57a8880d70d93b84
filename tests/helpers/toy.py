"""A toy simulation for the run controller (no mesh): x' = -x with forward Euler."""

from __future__ import annotations

from typing import Any

import numpy as np
from mpi4py import MPI

from meanfield.config import load_config
from meanfield.engine.handlers import Handler, file_outputs
from meanfield.engine.simulation import Simulation
from meanfield.problem import Problem


class Decay(Simulation):
    """x' = -x with forward Euler at dt = min(0.01, t_end - t): a deterministic toy."""

    run_type = "particles"  # read back like a particle run: snapshots hold "points"

    def __init__(self, dt: float = 0.01, on_step=None) -> None:
        self.comm, self.t, self.x, self.dt, self.steps = MPI.COMM_SELF, 0.0, np.array([1.0, 2.0]), dt, 0
        self.on_step = on_step

    def step(self, t_end: float) -> float:
        dt = min(self.dt, t_end - self.t)
        self.x = self.x - dt * self.x
        self.t = t_end if t_end - (self.t + dt) < 1e-12 else self.t + dt
        self.steps += 1
        if self.on_step is not None:
            self.on_step(self)
        return dt

    def observables(self) -> dict[str, float]:
        return {"mass": float(self.x.sum()), "energy": 0.0, "order": 0.0, "x0": float(self.x[0])}

    def snapshot(self) -> dict[str, np.ndarray]:
        return {"points": self.x[None, :].copy()}

    def checkpoint_state(self) -> dict[str, np.ndarray]:
        return {"x": self.x.copy()}

    def restore(self, t: float, state: dict[str, np.ndarray] | None, info: dict[str, Any]) -> None:
        assert state is not None
        self.t, self.x, self.steps = t, state["x"].copy(), info["step"]["steps"]

    def step_info(self) -> dict[str, Any]:
        return {"steps": self.steps}


def handlers() -> list[Handler]:
    """The handlers of the toy's output files: observables.csv and the snapshots."""
    return file_outputs()


def problem(checkpoint_every: float = 600.0, **time) -> Problem:
    """The problem a toy run is started with (its output times, checkpoint interval, wall limit)."""
    return Problem(load_config({"name": "toy", "mesh": {"sphere": "S1"},
                                "time": {"t_final": 1.0, "outputs": 4, **time},
                                "output": {"checkpoint_every": checkpoint_every}}))
