"""A new attention kind registered from outside the package: sigmoid attention.

``X[mu](x) = sum_h w_h P_x( int sigma(beta <Q_h x, K_h y>) V_h y dmu(y) )``, no normalisation (a
variant in current use).  The class below is all it takes (docs: "Adding a variant"); the
package is not edited.  It is run through the config check, the PDE (finite volumes on S^1)
against tokens moved by an independent dense sum, the tokens' non-causal and causal fields
against the same dense sum, and the adjoint's Taylor test.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers.sphere import random_sphere_points
from scipy import special
from test_adjoint import Taylor, assert_second_order, case

from meanfield.attention import Attention, attention_names
from meanfield.config import ConfigError, load_config
from meanfield.drivers.pde import build_simulation
from meanfield.masks.causal_tokens import CausalTokenField
from meanfield.model import AttentionModel
from meanfield.nonlocal_field import make_evaluator
from meanfield.particles import ParticleSystem, attention_field, rk4_step
from meanfield.particles.sampling import quantile_circle
from meanfield.problem import Problem
from meanfield.velocity import LayerVelocity


class Sigmoid(Attention):
    """Sigmoid attention: the kernel ``sigma(s) = 1 / (1 + e^{-s})``, N not divided by Z."""

    name = "sigmoid"

    def weights(self, logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return special.expit(logits), np.zeros(logits.shape[0])


GENERAL_S1 = {"Q": [[1, 0.3], [0, 1]], "K": [[1, 0], [0.2, 0.8]], "V": [[1, 0.5], [-0.2, 1]]}


def naive_velocity(model: AttentionModel, x: np.ndarray, y: np.ndarray, w: np.ndarray,
                   causal: bool = False) -> np.ndarray:
    """The sigmoid field by dense matrices of all pairs (target i sees source j <= i when causal)."""
    out = np.zeros_like(x)
    for head in model.heads:
        kernel = w / (1.0 + np.exp(-model.beta * (x @ head.Q.T) @ (y @ head.K.T).T))
        N = (np.tril(kernel) if causal else kernel) @ (y @ head.V.T)
        out += head.weight * (N - np.sum(x * N, axis=1)[:, None] * x)
    return out


def test_registered_kind_is_a_config_choice():
    assert "sigmoid" in attention_names()
    config = load_config({"mesh": {"sphere": "S1"}, "model": {"attention": "sigmoid"}})
    assert config.data["model"]["attention"] == "sigmoid"
    with pytest.raises(ConfigError, match="nonlocal.method: 'fast' expands the kernel exp; 'sigmoid'"):
        load_config({"model": {"layers": [{"t_end": 1.0}, {"t_end": 2.0, "attention": "sigmoid"}]},
                     "nonlocal": {"method": "fast"}})
    with pytest.raises(ConfigError, match="did you mean 'sigmoid'"):
        Problem(load_config({"model": {"layers": [{"t_end": 1.0, "attention": "sigmoyd"}]}})).schedule()


def test_pde_s1_follows_tokens():
    """FV on S^1 (general Q, K, V): the PDE's field is the dense sum's, and its moments <x> and
    <x y> at t = 0.5 are those of 400 quantile tokens moved by RK4 with the dense sum's field
    (measured gaps 5.6e-4 and 1.1e-4, the FV error at 256 cells; the moments moved by 0.039
    and 0.027)."""
    from mpi4py import MPI

    T = 0.5
    data = {"mesh": {"sphere": "S1", "resolution": 256}, "scheme": {"kind": "fv"},
            "model": {"attention": "sigmoid", "beta": 3.0, **GENERAL_S1},
            "initial": {"kind": "expression", "expression": "1 + 0.6*x + 0.4*x*y"},
            "time": {"t_final": T}, "output": {"xdmf": False}}
    sim = build_simulation(load_config(data), MPI.COMM_SELF)
    model = sim.problem.model(2)
    points, weights = sim.scheme.measure(sim.state)
    probe = points[::7]
    assert np.abs(sim.scheme.velocity(probe, points, weights)
                  - naive_velocity(model, probe, points, weights)).max() < 1e-12

    while sim.t < T:
        sim.step(T)
    rho, centroids, areas = sim.distribution()
    mass = rho * areas
    assert abs(mass.sum() - 1.0) < 1e-12

    tokens = quantile_circle(400, sim.problem.initial())
    w = np.full(len(tokens), 1.0 / len(tokens))
    for _ in range(50):
        tokens = rk4_step(lambda x: naive_velocity(model, x, x, w), tokens, T / 50)
        tokens /= np.linalg.norm(tokens, axis=1, keepdims=True)
    start = quantile_circle(400, sim.problem.initial())
    for moment in (lambda p: p, lambda p: p[:, :1] * p[:, 1:]):
        pde, particles = mass @ moment(centroids), w @ moment(tokens)
        assert np.abs(pde - particles).max() < 2e-3, (pde, particles)
        assert np.abs(particles - w @ moment(start)).max() > 2e-2  # the tokens moved


def test_tokens_field_is_the_dense_sum(rng):
    """The tokens' field, non-causal (the evaluator ``auto`` picks: direct sums) and causal
    (blocks of 8: a prefix and a masked own block), is the dense sum's."""
    problem = Problem(load_config({"mesh": {"sphere": "S2"}, "model": {"attention": "sigmoid", "beta": 2.5,
                                                                      "Q": [[1, 0.2, 0], [0, 1, 0], [0.3, 0, 1]]}}))
    model = problem.model(3)
    x = random_sphere_points(rng, 30, 3)
    w = rng.uniform(0.5, 1.5, 30) / 30
    X = ParticleSystem(attention_field(make_evaluator(model, None, "auto")), w).velocity(x)
    assert np.abs(X - naive_velocity(model, x, x, w)).max() < 1e-13
    causal = CausalTokenField(LayerVelocity(problem.schedule(3), None, "auto"), block=8)
    assert np.abs(causal(x, x, w) - naive_velocity(model, x, x, w, causal=True)).max() < 1e-13


@pytest.mark.mpi
def test_adjoint_taylor_second_order(comm):
    """FV on S^1: the discrete adjoint, so the gap to central differences is O(eps^2)."""
    gaps = Taylor(case(model={"attention": "sigmoid"}, time={"dt": 0.01}), comm).gaps([1e-2, 5e-3, 2.5e-3])
    assert gaps[0] < 1e-3
    assert_second_order(gaps)
