"""The SSP-RK3 stepper's error control (meanfield.timestepping) on an exact linear ODE:
u' = gamma (u - c), a uniform part c plus a perturbation growing at gamma."""

from __future__ import annotations

import json

import numpy as np
import pytest
from mpi4py import MPI

from meanfield.timestepping import DEFAULT_TOL, SSPRK3, StepStats


class Growth:
    """u' = gamma (u - c) on a vector (each entry a "cell"), with the outflow rate ``rate``."""

    def __init__(self, gamma: float, c: float, rate: float = 0.0) -> None:
        self.gamma, self.c, self.rate = gamma, c, rate
        self.comm, self.geometry = MPI.COMM_SELF, None

    def rhs_and_bound(self, state: np.ndarray) -> tuple[np.ndarray, float]:
        return self.gamma * (state - self.c), self.rate

    def postprocess(self, state: np.ndarray) -> np.ndarray:
        return state

    def locate_value(self, state: np.ndarray, index: int) -> str:
        return f"entry {index}"

    def error_parts(self, vector: np.ndarray) -> list[np.ndarray]:
        return [vector]


def initial(c: float, eps: float) -> np.ndarray:
    return c + eps * np.cos(np.linspace(0.0, 2.0 * np.pi, 16, endpoint=False))


@pytest.mark.parametrize("eps", [1e-7, 1e-5, 1e-1])
def test_growth_rate_is_resolved_whatever_the_uniform_part(eps):
    """One output at T: the measured rate is exact to (gamma dt)^3 / 24 with the steps the
    tolerance gives ((gamma dt)^2 ~ 6 tol), for a perturbation of any size beside the uniform part
    down to where the error floor (1e-12 of the state) takes over."""
    gamma, c, T = 0.5, 1.0 / (2.0 * np.pi), 4.0
    stepper = SSPRK3(Growth(gamma, c))
    u0 = initial(c, eps)
    u = stepper.advance(u0, 0.0, T)
    rate = np.log(np.max(u - c) / np.max(u0 - c)) / T
    z = np.sqrt(6.0 * DEFAULT_TOL)
    assert abs(rate / gamma - 1) < z**3 / 24
    assert stepper.stats.limits.get("error", 0) >= 0.5 * gamma * T / z
    assert stepper.stats.dt_max <= z / gamma


def test_steps_do_not_depend_on_the_perturbations_size():
    """The error is measured against the step's change: a 1e-5 perturbation takes the steps a
    1e-1 perturbation takes (a measure relative to the uniform part would take one step)."""
    gamma, c = 0.5, 1.0 / (2.0 * np.pi)
    steps = []
    for eps in (1e-5, 1e-1):
        stepper = SSPRK3(Growth(gamma, c))
        stepper.advance(initial(c, eps), 0.0, 4.0)
        steps.append(stepper.stats.steps)
    assert steps[0] == steps[1] > 10


def test_a_state_at_rest_is_stepped_at_the_cfl_bound():
    stepper = SSPRK3(Growth(0.5, 1.0, rate=2.0))
    stepper.advance(np.ones(8), 0.0, 1.0)
    assert stepper.stats.limits == {"cfl": 4} and stepper.stats.error_rejected == 0


def test_the_cfl_bound_limits_the_error_controlled_step():
    """min(cfl bound, error step): a fast outflow rate sets the step, and the log says so."""
    stepper = SSPRK3(Growth(0.5, 0.0, rate=100.0))
    stepper.advance(initial(0.0, 1.0), 0.0, 0.1)
    assert stepper.stats.steps == 20 and stepper.stats.limits["cfl"] >= 19 and "error" not in stepper.stats.limits


def test_fixed_steps_have_no_error_control():
    stepper = SSPRK3(Growth(5.0, 0.0), dt=0.5)
    stepper.advance(initial(0.0, 1.0), 0.0, 2.0)
    assert stepper.stats.limits == {"fixed": 4} and stepper.stats.error_rejected == 0


def test_steps_resumed_from_the_counters_equal_the_uninterrupted_ones():
    """The controller's proposal travels with StepStats (to_dict/from_dict through JSON: what a
    checkpoint holds): stepping on from a copy after 5 steps takes the same steps to the same state."""
    gamma, c, T = 0.7, 0.1, 3.0
    whole = SSPRK3(Growth(gamma, c))
    expected = whole.advance(initial(c, 1e-5), 0.0, T)
    first = SSPRK3(Growth(gamma, c))
    u, t = initial(c, 1e-5), 0.0
    for _ in range(5):
        u, dt = first.step(u, t, T - t)
        t += dt
    second = SSPRK3(Growth(gamma, c))
    second.stats = StepStats.from_dict(json.loads(json.dumps(first.stats.to_dict())))
    u = second.advance(u, t, T)
    assert second.stats == whole.stats and whole.stats.limits.get("error", 0) > 5
    assert np.array_equal(u, expected)
