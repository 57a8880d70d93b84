"""The adjoint of the linearised equation (meanfield.adjoint) against the forward solver.

Taylor tests: the adjoint's prediction ``(1/M) sum_k <Phi_0[k], nu_k>`` of the change of
``<phi, rho(T)>`` against central differences of the forward solver started from
``rho0 +- eps nu``.  For both schemes the adjoint is the discrete one, so the two agree to
``O(eps^2)`` (asserted: the gap falls fourfold when eps halves, down to round-off); the DG1
cases are in ``test_adjoint_dg1.py``.  The exact modes about
the uniform state check the influence function itself (MODEL.md: ``Phi_0 = e^{gamma t} phi``).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import iv, spherical_in

from meanfield.adjoint import AdjointSolver
from meanfield.config import load_config
from meanfield.discrete_pde import DiscretePDE
from meanfield.problem import Problem

GENERAL_S1 = {"Q": [[1, 0.3], [0, 1]], "K": [[1, 0], [0.2, 0.8]], "V": [[1, 0.5], [-0.2, 1]]}


def case(**sections) -> dict:
    """A small S^1 case (64 cells, fixed step) with ``sections`` merged in."""
    data = {"name": "adjoint", "mesh": {"sphere": "S1", "resolution": 64},
            "model": {"attention": "softmax", "beta": 3.0, **GENERAL_S1},
            "initial": {"kind": "expression", "expression": "1 + 0.4*cos(x + 2*y)"},
            "time": {"t_final": 1.0, "dt": 0.02}}
    for key, value in sections.items():
        data[key] = {**data.get(key, {}), **value}
    return data


def simulation(data: dict, comm) -> DiscretePDE:
    return DiscretePDE(Problem(load_config(data)), comm)


def observable(points: np.ndarray) -> np.ndarray:
    return points[:, 0] + 0.5 * points[:, 1] ** 2


class Taylor:
    """The adjoint and the forward solver of one case, for the Taylor test: the observable is
    ``<phi, rho(T)>`` in the adjoint's pairing (FV: sum_c |c| phi(x_c) rho_c; DG1: the integral
    of rho against the DG1 function of phi's values at the cells' vertices)."""

    def __init__(self, data: dict, comm, T: float = 1.0) -> None:
        self.data, self.comm, self.T = data, comm, T
        self.sim = simulation(data, comm)
        solver = AdjointSolver(self.sim)
        solver.forward([T])
        self.operator = solver.operator
        self.M = self.sim.positions.count
        self.final = np.tile(observable(self.operator.points)[None, :, None], (self.M, 1, 1))
        self.phi0, _ = solver.backward({T: self.final})
        self.rho0 = solver.initial
        init = self.sim.problem.initial()

        def bump(p):
            return 1 + 0.5 * np.cos(3 * np.arctan2(p[:, 1], p[:, 0]) + p[:, -1])

        if self.sim.positions.s is None:
            self.nu = self.sim.scheme.initial_state(lambda p: init.at(p, 0.5) * bump(p)) - self.rho0
        else:
            self.nu = self.sim.positions.slice_scheme.initial_state(lambda p, s: init.at(p, s) * bump(p)) - self.rho0

    def value(self, state: np.ndarray) -> float:
        sim = simulation(self.data, self.comm)
        sim.state = state.copy()
        AdjointSolver(sim).forward([self.T])
        return float(self.operator.inner(self.final, sim.positions.split(sim.state)).mean())

    def predicted(self) -> float:
        return float(self.operator.inner(self.phi0, self.sim.positions.split(self.nu)).mean())

    def gaps(self, epsilons) -> np.ndarray:
        predicted = self.predicted()
        fd = [(self.value(self.rho0 + e * self.nu) - self.value(self.rho0 - e * self.nu)) / (2 * e) for e in epsilons]
        return np.abs(np.array(fd) - predicted) / abs(predicted)


def assert_second_order(gaps: np.ndarray, floor: float = 1e-9) -> None:
    """Halving eps divides the gap by 3 or more (4: O(eps^2)), or it is at round-off."""
    for big, small in zip(gaps[:-1], gaps[1:]):
        assert small <= floor or big / small > 3.0, gaps


@pytest.mark.mpi
@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
def test_finite_volumes_taylor_second_order(attention, comm):
    """FV: the discrete adjoint, so the gap to central differences is O(eps^2) (general Q, K, V)."""
    gaps = Taylor(case(model={"attention": attention}, time={"dt": 0.01}), comm).gaps([1e-2, 5e-3, 2.5e-3])
    assert gaps[0] < 1e-3
    assert_second_order(gaps)


@pytest.mark.mpi
@pytest.mark.parametrize("model", [
    {"heads": [{"Q": [[1, 0.3], [0, 1]], "weight": 0.7}, {"K": [[0.5, 0], [0.4, 1]], "weight": -0.4}],
     "Q": None, "K": None, "V": None},
    {"ffn": {"W": [[0.5], [-0.3]], "A": [[1.0, 0.5]], "b": [0.2], "activation": "tanh"},
     "layers": [{"t_end": 0.4}, {"t_end": 1.0, "beta": 1.5, "attention": "unnormalized"}]},
], ids=["heads", "layers-ffn"])
def test_finite_volumes_taylor_heads_layers(model, comm):
    """Two heads with weights (one negative), and a layer schedule with a feed-forward block:
    the gap is below 1e-5 of the value.  (The O(eps^2) law has kinks here: the upwind flux is
    only piecewise smooth, and a facet whose velocity changes sign within +-eps leaves a gap of
    1e-7 to 1e-6 that does not fall with eps.)"""
    gaps = Taylor(case(model=model), comm).gaps([2.5e-3])
    assert gaps[0] < 1e-5, gaps


@pytest.mark.slow
@pytest.mark.mpi
@pytest.mark.parametrize("model", [{"attention": "softmax", "Q": None, "K": None, "V": None},
                                   {"attention": "unnormalized"}], ids=["SA", "USA"])
def test_causal_taylor_second_order(model, comm):
    """A causal run (4 slices, a position-dependent rho0): the adjoint over positions is the
    discrete one too (measured gaps 2.6e-6, 3.9e-7, 9.6e-8 for SA; 4.4e-6, 1.1e-6, 2.8e-7 USA)."""
    data = case(model={**model, "mask": "causal"}, positions={"slices": 4},
                initial={"expression": "1 + 0.4*s*cos(x + 2*y)"}, time={"dt": 0.01})
    gaps = Taylor(data, comm).gaps([1e-2, 5e-3, 2.5e-3])
    assert gaps[0] < 1e-4
    assert_second_order(gaps)


@pytest.mark.mpi
def test_sphere_taylor(comm):
    """S^2 (level 2), general Q, K, V: agreement to 1e-5 for small eps (the upwind flux is only
    piecewise smooth where a facet's velocity changes sign, so the O(eps^2) law has kinks)."""
    data = case(mesh={"sphere": "S2", "resolution": 2},
                model={"Q": [[1, 0.3, 0], [0, 1, 0], [0, 0, 1]], "K": [[1, 0, 0], [0, 1, 0.2], [0, 0, 1]],
                       "V": [[1, 0, 0], [0, 1, 0], [0.3, 0, 1]]}, time={"t_final": 0.5})
    gaps = Taylor(data, comm, T=0.5).gaps([1e-4])
    assert gaps[0] < 1e-5


def influence(data: dict, comm, phi, times) -> tuple[np.ndarray, DiscretePDE]:
    """Phi_0 (len(times), C) of ``phi`` at each time, serial."""
    sim = simulation(data, comm)
    solver = AdjointSolver(sim)
    solver.forward(times)
    g = sim.scheme.geometry
    values = phi(g.centroid[: g.num_owned])
    P = len(times)
    finals = {}
    for i, t in enumerate(times):
        final = np.zeros((1, g.num_owned, P))
        final[0, :, i] = values
        finals[t] = final
    phi0, _ = solver.backward(finals)
    return phi0[0].T, sim


@pytest.mark.parametrize("attention", ["unnormalized", "softmax"])
def test_modes_about_uniform_grow_exactly_s1(attention, comm):
    """Q = K = V = I about the uniform density on S^1: the influence function of a Fourier mode
    is the mode times e^{gamma_k t}, gamma_k = k^2 I_k(beta)/beta (USA; MODEL.md) or
    k^2 I_k(beta)/(beta I_0(beta)) (SA: the same holds, with the SA rate).  Measured: 1e-4 (USA)
    and 4.6e-5 (SA) of e^{gamma t} at 256 cells, a quarter of 128 cells' (second order)."""
    beta, t = 2.0, 1.0
    data = case(mesh={"resolution": 256}, model={"attention": attention, "beta": beta, "Q": None, "K": None,
                                                 "V": None}, initial={"expression": "1"}, time={"dt": 0.01})
    for k in (1, 2, 3):
        phi0, sim = influence(data, comm, lambda p, k=k: np.cos(k * np.arctan2(p[:, 1], p[:, 0])), [t])
        c = sim.scheme.geometry.centroid
        mode = np.cos(k * np.arctan2(c[:, 1], c[:, 0]))
        gamma = k ** 2 * iv(k, beta) / beta / (iv(0, beta) if attention == "softmax" else 1.0)
        assert np.abs(phi0[0] - np.exp(gamma * t) * mode).max() < 5e-4 * np.exp(gamma * t), k


def test_modes_about_uniform_grow_exactly_s2(comm):
    """The same on S^2 (USA, level 4): Y_1 = z and Y_2 = 3 z^2 - 1 grow with
    gamma_l = l (l + 1) i_l(beta) / beta.  Measured: 5.9e-4 and 3.3e-4 of the maximum at level 4,
    a quarter of level 3's.  (Both modes as two columns of one forward run and one backward sweep.)"""
    beta, t = 1.5, 1.0
    data = case(mesh={"sphere": "S2", "resolution": 4},
                model={"attention": "unnormalized", "beta": beta, "Q": None, "K": None, "V": None},
                initial={"expression": "1"}, time={"dt": 0.01, "t_final": t})
    sim = simulation(data, comm)
    solver = AdjointSolver(sim)
    solver.forward([t])
    centroids = sim.scheme.geometry.centroid[: sim.scheme.geometry.num_owned]
    modes = {1: centroids[:, 2], 2: 3 * centroids[:, 2] ** 2 - 1}
    phi0, _ = solver.backward({t: np.stack(list(modes.values()), axis=-1)[None]})  # both modes, one sweep
    for column, (l, Y) in enumerate(modes.items()):
        expected = np.exp(l * (l + 1) * spherical_in(l, beta) / beta * t) * Y
        assert np.abs(phi0[0][:, column] - expected).max() < 1e-3 * np.abs(expected).max(), l


def test_phi_at_time_zero_is_the_observable(comm):
    """At T = 0 nothing is run back: Phi_0 = phi, cell by cell."""
    phi0, sim = influence(case(), comm, observable, [0.0, 0.5])
    c = sim.scheme.geometry.centroid[: len(phi0[0])]
    assert np.array_equal(phi0[0], observable(c))
    assert np.abs(phi0[1] - observable(c)).max() > 1e-2  # and at T = 0.5 it has moved


def test_checkpoints_stay_few(comm):
    """The forward states kept are about 2 sqrt(steps), whatever the number of steps."""
    sim = simulation(case(time={"dt": 0.002}), comm)
    solver = AdjointSolver(sim)
    solver.forward([1.0])
    steps = len(solver.trajectory.steps)
    assert steps == 500 and len(solver.trajectory.kept) <= 2 * np.sqrt(steps) + 2


@pytest.mark.slow
def test_prescribed_rotation_transports_phi_back():
    """A prescribed rotation by omega t: Phi_0(theta) = phi(theta + omega t) exactly (the adjoint
    is transport alone); the first-order upwind cell operator converges at first order."""
    from mpi4py import MPI

    errors = []
    for cells in (128, 256, 512):
        data = {"name": "rot", "mesh": {"sphere": "S1", "resolution": cells},
                "model": {"velocity": "rotation", "rotation_rate": 1.0}, "time": {"t_final": 1.0}}
        phi0, sim = influence(data, MPI.COMM_SELF, lambda p: p[:, 0], [1.0])
        c = sim.scheme.geometry.centroid[: len(phi0[0])]
        errors.append(np.abs(phi0[0] - np.cos(np.arctan2(c[:, 1], c[:, 0]) + 1.0)).max())
    orders = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    assert errors[-1] < 1e-2 and np.all(orders > 0.9), (errors, orders)
