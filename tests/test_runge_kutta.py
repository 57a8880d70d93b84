"""The shared Runge-Kutta tableau (meanfield.runge_kutta) against exact algebra of linear systems."""

from __future__ import annotations

import numpy as np

from meanfield.runge_kutta import SSP_RK3


def test_ssp_rk3_is_the_third_order_taylor_polynomial(rng):
    """For u' = A u one step is (I + hA + (hA)^2/2 + (hA)^3/6) u."""
    A, u, h = rng.standard_normal((5, 5)), rng.standard_normal(5), 0.1
    hA = h * A
    exact = (np.eye(5) + hA + hA @ hA / 2 + hA @ hA @ hA / 6) @ u
    assert np.allclose(SSP_RK3.step(lambda v: A @ v, u, h), exact, rtol=0, atol=1e-14)


def test_error_estimate_is_the_gap_to_heun(rng):
    """The embedded estimate is the third-order solution minus the second-order (Heun) one."""
    A, u, h = rng.standard_normal((4, 4)), rng.standard_normal(4), 0.05
    L0 = A @ u
    u1 = u + h * L0
    L1 = A @ u1
    L2 = A @ (0.75 * u + 0.25 * (u1 + h * L1))
    heun = u + h * (L0 + L1) / 2
    third = SSP_RK3.step(lambda v: A @ v, u, h)
    assert np.allclose(SSP_RK3.error_estimate([L0, L1, L2], h), third - heun, rtol=0, atol=1e-15)


def test_transposed_step_is_the_transpose(rng):
    """For u' = A(t-free) u with a different matrix per stage (a linearisation along the stages),
    the transposed step applied to phi is S^T phi, S the step's matrix."""
    n, h = 6, 0.2
    mats = [rng.standard_normal((n, n)) for _ in range(SSP_RK3.stages)]

    def step(u: np.ndarray) -> np.ndarray:  # the linear step with matrix mats[j] at stage j
        states, rates = [u], []
        for i in range(1, SSP_RK3.stages + 1):
            rates.append(mats[i - 1] @ states[-1])
            states.append(SSP_RK3.stage(i, states, rates, h))
        return states[-1]

    S = np.column_stack([step(e) for e in np.eye(n)])
    phi = rng.standard_normal(n)
    back = SSP_RK3.transposed_step(phi, h, lambda j, mu: mats[j].T @ mu)
    assert np.allclose(back, S.T @ phi, rtol=0, atol=1e-13)
