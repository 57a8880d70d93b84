"""Single-prompt particle runs stepped in process: what a prompt of a batch must equal."""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from meanfield.config import load_config
from meanfield.drivers.particles import ParticleSimulation
from meanfield.problem import Problem


def shifted(config: dict, b: int, shift_random: bool = False) -> dict:
    """The config of prompt b's single run: ``particles.seed + b`` (and ``model.random.seed + b``)."""
    data = {**config, "particles": {**config["particles"], "seed": config["particles"].get("seed", 0) + b,
                                    "prompts": 1}}
    if shift_random:
        random = data["model"]["random"]
        data["model"] = {**data["model"], "random": {**random, "seed": random.get("seed", 0) + b}}
    return data


def single_runs(config: dict, prompts: int, times: list[float], shift_random: bool = False,
                rows: list | None = None) -> np.ndarray:
    """(prompts, times, n, d): the single-prompt particle runs with seeds shifted by b; their
    observables rows at the times are appended to ``rows`` (one list per prompt) if given."""
    out = []
    for b in range(prompts):
        sim = ParticleSimulation(Problem(load_config(shifted(config, b, shift_random))), MPI.COMM_SELF)
        frames, observed = [], []
        for t in times:
            while sim.t < t - 1e-12:
                landing = sim.next_landing(sim.t)
                sim.step(t if landing is None or landing >= t else landing)
            frames.append(sim.x.copy())
            if rows is not None:
                observed.append(sim.observables())
        out.append(frames)
        if rows is not None:
            rows.append(observed)
    return np.array(out)
