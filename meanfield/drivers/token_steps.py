"""What the two token simulations share: their equal steps and their checkpointed tokens.

A single run (:class:`~meanfield.drivers.particles.ParticleSimulation`) and a batch of prompts
(:class:`~meanfield.drivers.prompts.PromptSimulation`) both move between landings (outputs and
layer boundaries) in equal steps no longer than the active layer's
(:class:`~meanfield.particles.integrator.EqualSteps`), count them and the largest drift off the
sphere, refuse non-finite tokens, record the plan in their checkpoints, and scatter the tokens of
a checkpoint over the ranks in contiguous blocks along its first axis.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..collective import on_root
from ..particles.integrator import EqualSteps
from ..particles.system import token_block


class EqualStepping:
    """The step bookkeeping of a token simulation (a mixin: the class provides ``comm`` and ``t``
    and its largest step ``dt``).

    Attributes
    ----------
    plan
        The equal steps of the current interval (``None`` before the first step).
    steps
        Steps taken.
    max_drift
        The largest distance of a token from the sphere after a step, before renormalising.
    """

    comm: Any
    t: float
    plan: EqualSteps | None = None
    steps: int = 0
    max_drift: float = 0.0

    @property
    def dt(self) -> float:
        raise NotImplementedError

    def step_size(self, t_end: float, dt: float) -> float:
        """The size of the next step towards ``t_end`` in equal steps no longer than ``dt``
        (a new plan when the interval changed or the last one is done)."""
        if self.plan is None or self.plan.t1 != t_end or self.plan.done == self.plan.count:
            self.plan = EqualSteps.over(self.t, t_end, dt)
        return self.plan.h

    def step_taken(self, drift: float, finite: bool) -> float:
        """Count the step just taken (this rank's largest ``drift``, and whether its tokens are
        ``finite``), move ``t`` to its end and return its size; raises
        :class:`~meanfield.timestepping.BlowUpError` when any rank's tokens are not finite (collective)."""
        from mpi4py import MPI

        assert self.plan is not None
        self.plan.done += 1
        self.steps += 1
        self.max_drift = max(self.max_drift, self.comm.allreduce(drift, op=MPI.MAX))
        if not self.comm.allreduce(finite, op=MPI.LAND):
            from ..timestepping import BlowUpError

            raise BlowUpError(f"tokens became non-finite at t = {self.plan.time():.6g}; lower particles.dt")
        self.t = self.plan.time()
        return self.plan.h

    def last_step(self) -> float:
        """The size of the current plan's steps (nan before the first step)."""
        return self.plan.h if self.plan is not None else np.nan

    def step_info(self) -> dict[str, Any]:
        return {"steps": self.steps, "dt": self.dt, "max_drift": self.max_drift,
                "plan": None if self.plan is None else self.plan.to_dict()}

    def restore_steps(self, info: dict[str, Any]) -> None:
        """The steps taken, the drift and the plan from a checkpoint's ``info``."""
        step = info.get("step", {})
        self.steps, self.max_drift = int(step.get("steps", 0)), float(step.get("max_drift", 0.0))
        plan = step.get("plan")
        self.plan = None if plan is None else EqualSteps(**plan)


def scatter_tokens(comm: Any, state: dict[str, np.ndarray] | None, shape: tuple[int, ...]) -> np.ndarray:
    """This rank's block (along the first axis, :func:`~meanfield.particles.system.token_block`)
    of a checkpoint's tokens ``state["points"]`` (given on rank 0), after checking there that they
    have ``shape`` (collective; a wrong shape raises ``ValueError`` naming both)."""

    def check() -> None:
        assert state is not None
        if state["points"].shape != shape:
            raise ValueError(f"checkpoint: it holds tokens of shape {state['points'].shape}, this run needs "
                             f"{shape}")

    on_root(comm, check)
    blocks = [token_block(shape[0], r, comm.size) for r in range(comm.size)]
    parts = [np.ascontiguousarray(state["points"][b]) for b in blocks] if state is not None else None
    return comm.scatter(parts, root=0)
