"""The explicit Runge-Kutta tableau shared by the PDE's time stepper, its adjoint and the tokens.

Pure numpy.  A tableau in Shu-Osher form: from ``u_0 = u``, stage i = 1..s is

    u_i = sum_{j<i} alpha_ij (u_j + dt (beta_ij / alpha_ij) L(u_j))

(a term with ``alpha_ij = 0`` is ``dt beta_ij L(u_j)``), and ``u_s`` is the step's result.  With
every ``beta_ij / alpha_ij <= 1`` each stage is a convex combination of forward-Euler steps, so a
bound that keeps one Euler step non-negative keeps the step so (strong stability).
:data:`SSP_RK3` is the three-stage, third-order scheme of SSP coefficient 1::

    u1 = u + dt L(u)
    u2 = 3/4 u + 1/4 (u1 + dt L(u1))
    u  = 1/3 u + 2/3 (u2 + dt L(u2))

:mod:`meanfield.timestepping` steps the PDE with it (:meth:`ShuOsher.stage`, with its embedded
error estimate :attr:`ShuOsher.error`), :mod:`meanfield.adjoint` differentiates the same
operations (:meth:`ShuOsher.transposed_step`), and the tokens' ``particles.integrator =
"ssprk3"`` takes it too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ShuOsher:
    """An explicit Runge-Kutta tableau in Shu-Osher form (see the module docstring).

    Attributes
    ----------
    alpha, beta
        Row ``i - 1`` holds the coefficients ``alpha_ij``, ``beta_ij`` (j < i) of stage i.
    error
        The local error estimate ``dt sum_j error_j L(u_j)`` (j < s) of an embedded lower-order
        solution, or ``None``.
    """

    alpha: tuple[tuple[float, ...], ...]
    beta: tuple[tuple[float, ...], ...]
    error: tuple[float, ...] | None = None

    @property
    def stages(self) -> int:
        """The number s of stages (right-hand sides per step)."""
        return len(self.alpha)

    def stage(self, i: int, states: Sequence[np.ndarray], rates: Sequence[np.ndarray], dt: float) -> np.ndarray:
        """``u_i`` (before any postprocessing) from ``states`` ``u_0 .. u_{i-1}`` and their ``rates``
        ``L(u_0) .. L(u_{i-1})``."""
        out = None
        for j, (a, b) in enumerate(zip(self.alpha[i - 1], self.beta[i - 1])):
            if a == 0.0 and b == 0.0:
                continue
            if b == 0.0:
                term = a * states[j]
            elif a == 0.0:
                term = (b * dt) * rates[j]
            else:  # a (u_j + (b / a) dt L_j), in place on one new array
                term = rates[j] * (dt if b == a else (b / a) * dt)
                term += states[j]
                term *= a
            if out is None:
                out = term
            else:
                out += term
        assert out is not None, "a stage has at least one term"
        return out

    def step(self, rate: Callable[[np.ndarray], np.ndarray], u: np.ndarray, dt: float) -> np.ndarray:
        """One step of ``u' = rate(u)`` without postprocessing (the tokens' integrator)."""
        states, rates = [u], []
        for i in range(1, self.stages + 1):
            rates.append(rate(states[-1]))
            states.append(self.stage(i, states, rates, dt))
        return states[-1]

    def error_estimate(self, rates: Sequence[np.ndarray], dt: float) -> np.ndarray:
        """The embedded local error estimate ``dt sum_j error_j L(u_j)`` from the stages' rates."""
        assert self.error is not None, "this tableau has no embedded error estimate"
        out = None
        for e, rate in zip(self.error, rates):
            if e != 0.0:
                out = e * rate if out is None else out + e * rate
        assert out is not None
        return dt * out

    def transposed_step(self, phi: np.ndarray, dt: float, apply: Callable[[int, np.ndarray], np.ndarray],
                        post: Callable[[int, np.ndarray], np.ndarray] | None = None) -> np.ndarray:
        """The transpose of one step's linearisation applied to ``phi`` (the adjoint's step back).

        The step's derivative maps a perturbation of ``u_0`` through the stages, with
        ``dL(u_j)`` the Jacobian at stage j; its transpose runs the stages backwards: with
        ``lambda_s = phi``, ``lambda_j = sum_{i>j} alpha_ij lambda_i + dt J_j^T mu_j`` and
        ``mu_j = sum_{i>j} beta_ij lambda_i``.  ``apply(j, mu_j)`` returns ``J_j^T mu_j``
        (a caller may also record ``mu_j``: the parameters' derivatives pair it with the
        velocity's change at stage j).  With a postprocessing ``u_i = S(w_i)`` of each stage
        (DG1's limiter), ``post(i, lambda_i)`` returns ``S'(w_i)^T lambda_i``, which then takes
        ``lambda_i``'s place in the sums.  Returns ``lambda_0``.
        """
        s = self.stages
        lam: list[np.ndarray | None] = [None] * s + [phi if post is None else post(s, phi)]
        for j in reversed(range(s)):
            carried, mu = None, None
            for i in range(j + 1, s + 1):
                a, b, li = self.alpha[i - 1][j], self.beta[i - 1][j], lam[i]
                assert li is not None
                if a != 0.0:
                    carried = a * li if carried is None else carried + a * li
                if b != 0.0:
                    mu = b * li if mu is None else mu + b * li
            assert carried is not None, "every stage carries the states before it"
            back = carried if mu is None else carried + dt * apply(j, mu)
            lam[j] = post(j, back) if post is not None and j > 0 else back
        out = lam[0]
        assert out is not None
        return out


#: Three-stage, third-order SSP Runge-Kutta (SSP coefficient 1), with the second-order (Heun)
#: solution ``u + dt (L0 + L1) / 2`` that shares its first two stages as the error estimate:
#: ``e = 2/3 dt (L2 - (L0 + L1) / 2)``.
SSP_RK3 = ShuOsher(
    alpha=((1.0,), (0.75, 0.25), (1.0 / 3.0, 0.0, 2.0 / 3.0)),
    beta=((1.0,), (0.0, 0.25), (0.0, 0.0, 2.0 / 3.0)),
    error=(-1.0 / 3.0, -1.0 / 3.0, 2.0 / 3.0),
)
