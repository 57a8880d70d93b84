"""The complete transformer: the feed-forward block, layer schedules, and their runs.

Exact answers: closed-form flows (theta' = -sin 2 theta on S^1, rotations in any d), the
analytic surface divergence against finite differences and a closed form, the exact
push-forward against DG1 at second order (S^1 and S^2, one layer and two), bit-for-bit
identities (equal layers = no layers; two layers = one layer resumed with the second's
model), and landing on layer boundaries.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from helpers.cli import S1, refused
from helpers.sphere import random_sphere_points
from helpers.toy import Decay, handlers, problem
from mpi4py import MPI
from scipy.linalg import expm

import meanfield
from meanfield.config import ConfigError, load_config
from meanfield.drivers.launch import start_run
from meanfield.drivers.particles import build_particles
from meanfield.initial import make_initial_density
from meanfield.layers import ACTIVATIONS, FeedForward, LayerSchedule
from meanfield.mesh import icosphere
from meanfield.model import ModelError
from meanfield.problem import Problem
from meanfield.references.exact import backward_characteristics, feed_forward_solution, rotation_matrix
from meanfield.references.trajectories import integrate_each
from meanfield.rundir.results import load_run
from meanfield.studies.convergence import convergence_study
from meanfield.velocity import LayerVelocity

# theta' = -sin(2 theta): F = P_x(M x), M = diag(1, -1), as a block with identity activation
SADDLE = {"W": [[1.0, 0.0], [0.0, 1.0]], "A": [[1.0, 0.0], [0.0, -1.0]], "activation": "identity"}
REVERSED_SADDLE = {**SADDLE, "A": [[-1.0, 0.0], [0.0, 1.0]]}
FFN_S1 = {"W": [[0.3, -0.5], [0.8, 0.2]], "A": [[1.0, 0.4], [-0.6, 0.9]], "b": [0.1, -0.2], "activation": "tanh"}
FFN_S2 = {"W": [[0.3, -0.5, 0.2], [0.8, 0.2, -0.4], [0.1, 0.6, 0.5]],
          "A": [[1.0, 0.4, -0.3], [-0.6, 0.9, 0.2], [0.3, 0.1, 1.1]], "b": [0.1, -0.2, 0.3], "activation": "gelu"}
BUMP = {"S1": {"kind": "vmf", "centers": [[1.0, 0.3]], "kappas": [3.0]},
        "S2": {"kind": "vmf", "centers": [[1.0, 0.3, 0.2]], "kappas": [3.0]}}


def saddle_solution(t: float, theta: np.ndarray, rho0) -> np.ndarray:
    """theta' = -sin 2 theta: tan theta(t) = tan theta0 e^{-2t}, so rho(t, theta) = rho0(theta0) d theta0/d theta."""
    theta0 = np.arctan2(np.exp(2 * t) * np.sin(theta), np.cos(theta))
    x0 = np.stack([np.cos(theta0), np.sin(theta0)], axis=1)
    return rho0(x0) * np.exp(2 * t) / (np.cos(theta) ** 2 + np.sin(theta) ** 2 * np.exp(4 * t))


def case(sphere: str = "S1", resolution: int = 64, model: dict | None = None, t_final: float = 1.0,
         outputs: Any = 2, scheme: str = "dg1", **sections: dict) -> dict:
    return {"name": "t", "mesh": {"sphere": sphere, "resolution": resolution}, "model": model or {},
            "initial": BUMP[sphere], "time": {"t_final": t_final, "outputs": outputs}, "scheme": {"kind": scheme},
            "output": {"xdmf": False}, **sections}


# -- the feed-forward block ------------------------------------------------------------------
def test_block_velocity_exact_values():
    """d = 2, W = e_2, A = e_1^T, relu: F(x) = max(x_1, 0) P_x e_2."""
    ffn = FeedForward.build(2, {"W": [[0.0], [1.0]], "A": [[1.0, 0.0]], "activation": "relu"})
    x = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.6, 0.8]])
    expected = np.array([[0.0, 1.0], [0.0, 0.0], [0.0, 0.0], 0.6 * (np.array([0.0, 1.0]) - 0.8 * x[3])])
    np.testing.assert_allclose(ffn.velocity(x), expected, rtol=0, atol=1e-15)
    assert np.array_equal(ffn.b, [0.0]) and ffn.width == 1


def test_gelu_is_the_exact_one():
    ffn = FeedForward.build(1 + 1, {"W": [[1.0], [0.0]], "A": [[2.0, 0.0]], "activation": "gelu"})
    x = np.array([[math.cos(a), math.sin(a)] for a in (0.3, 2.0, 4.0)])
    z = 2.0 * x[:, 0]
    gelu = np.array([0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0))) for v in z])
    expected = gelu[:, None] * (np.array([1.0, 0.0]) - x[:, :1] * x)
    np.testing.assert_allclose(ffn.velocity(x), expected, rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("d", [2, 3, 5])
def test_divergence_against_finite_differences(rng, d, activation):
    """div_S F = sum over a tangent basis e of <e, d/ds F(exp_x(s e))>, by central differences."""
    m = 4
    ffn = FeedForward.build(d, {"W": rng.standard_normal((d, m)), "A": rng.standard_normal((m, d)),
                                "b": rng.standard_normal(m), "activation": activation})
    x = random_sphere_points(rng, 20, d)
    h = 1e-5
    numeric = np.zeros(len(x))
    for i, p in enumerate(x):
        tangent = np.linalg.svd(np.eye(d) - np.outer(p, p))[0][:, : d - 1]
        for e in tangent.T:
            ahead, behind = np.cos(h) * p + np.sin(h) * e, np.cos(h) * p - np.sin(h) * e
            numeric[i] += e @ (ffn.velocity(ahead[None])[0] - ffn.velocity(behind[None])[0]) / (2 * h)
    # relu: points within h of a kink would differ; random points are far from them
    np.testing.assert_allclose(ffn.divergence(x), numeric, rtol=0, atol=1e-7)


def test_divergence_closed_form(rng):
    """F = P_x(M x), M symmetric: div_S F = tr M - d <x, M x> on S^{d-1}."""
    d = 4
    M = rng.standard_normal((d, d))
    M = M + M.T
    ffn = FeedForward.build(d, {"W": np.eye(d), "A": M, "activation": "identity"})
    x = random_sphere_points(rng, 30, d)
    np.testing.assert_allclose(ffn.divergence(x), np.trace(M) - d * np.einsum("ij,jk,ik->i", x, M, x), atol=1e-13)


# -- schedules ---------------------------------------------------------------------------------
def three_layers() -> LayerSchedule:
    return LayerSchedule.build(2, {"attention": "softmax", "beta": 1.0, "layers": [
        {"t_end": 0.5}, {"t_end": 1.0, "beta": 2.0, "ffn": FFN_S1}, {"t_end": 2.0, "attention": "none"}]})


def test_schedule_times():
    s = three_layers()
    assert s.starts == (0.0, 0.5, 1.0) and s.boundaries == (0.5, 1.0) and s.end == 2.0
    assert [s.index_from(t) for t in (0.0, 0.3, 0.5, 0.7, 1.0, 1.5, 9.0)] == [0, 0, 1, 1, 2, 2, 2]
    assert [s.index_until(t) for t in (0.0, 0.3, 0.5, 0.7, 1.0, 1.5)] == [0, 0, 0, 1, 1, 2]
    assert [s.next_boundary(t) for t in (0.0, 0.5 - 1e-14, 0.5, 0.9, 1.0)] == [0.5, 1.0, 1.0, 1.0, None]
    assert s.origins == ("model.layers[0]", "model.layers[1]", "model.layers[2]")


def test_schedule_inheritance():
    s = three_layers()
    first, second, third = s.layers
    assert first.attention is not None and first.attention.beta == 1.0 and first.ffn is None
    assert second.attention is not None and second.attention.beta == 2.0 and second.ffn is not None
    assert third.attention is None and third.ffn is not None  # inherits the block, drops attention
    assert third.ffn.to_dict() == second.ffn.to_dict()
    V = [[0.0, 1.0], [1.0, 0.0]]
    heads = LayerSchedule.build(2, {"beta": 1.0, "V": V, "layers": [
        {"t_end": 1.0}, {"t_end": 2.0, "heads": [{"weight": 0.5}]}, {"t_end": 3.0, "Q": [[2.0, 0.0], [0.0, 2.0]]}]})
    a, b, c = (layer.attention for layer in heads.layers)
    assert np.array_equal(a.heads[0].V, V) and len(b.heads) == 1 and b.heads[0].weight == 0.5
    assert np.array_equal(b.heads[0].V, np.eye(2))  # heads replace the inherited Q, K, V
    assert np.array_equal(c.heads[0].Q, 2 * np.eye(2)) and c.heads[0].weight == 1.0  # Q drops the heads


def test_equal_layers_merge():
    s = LayerSchedule.build(2, {"beta": 3.0, "ffn": FFN_S1, "layers": [{"t_end": 1.0}, {"t_end": 2.0, "beta": 3.0},
                                                                       {"t_end": 4.0, "ffn": FFN_S1}]})
    plain = LayerSchedule.build(2, {"beta": 3.0, "ffn": FFN_S1})
    assert not s.is_layered and s.next_boundary(0.0) is None and s.end == 4.0
    assert s.to_dict() == plain.to_dict()


@pytest.mark.parametrize("model, field", [
    ({"ffn": {"W": [[1.0, 2.0]], "A": [[1.0, 0.0], [0.0, 1.0]]}}, "model.ffn.W: must be a 2 x m matrix"),
    ({"ffn": {"W": [[1.0], [2.0]], "A": [[1.0, 0.0], [0.0, 1.0]]}}, "model.ffn.A: must be a 1 x 2 matrix"),
    ({"ffn": {"W": [[1.0], [2.0]], "A": [[1.0, 0.0]], "b": [0.0, 1.0]}}, "model.ffn.b: must be a vector of length 1"),
    ({"ffn": {"W": [[1.0], [2.0]], "A": [[1.0, 0.0]], "activation": "tahn"}},
     "model.ffn.activation: must be one of ['relu', 'tanh', 'gelu', 'identity'], got 'tahn' (did you mean 'tanh'?)"),
    ({"ffn": {"W": [[1.0], [2.0]]}}, "model.ffn.A: required"),
    ({"ffn": {"W": [[1.0], [2.0]], "A": [[1.0, 0.0]], "B": [1.0]}}, "model.ffn.B: unknown key (did you mean 'b'?)"),
    ({"layers": [{"t_end": 1.0}, {"t_end": 1.0}]}, "model.layers[1].t_end: must be greater than model.layers[0].t_end"),
    ({"layers": [{"t_end": 0.0}]}, "model.layers[0].t_end: must be a finite number > 0"),
    ({"layers": [{"beta": 2.0}]}, "model.layers[0].t_end: required"),
    ({"layers": [{"t_end": 1.0, "betta": 2.0}]}, "model.layers[0].betta: unknown key (did you mean 'beta'?)"),
    ({"layers": [{"t_end": 1.0, "Q": [[1.0]]}]}, "model.layers[0].Q: must be a 2x2 matrix"),
    ({"layers": [{"t_end": 1.0, "ffn": {"W": [[1.0], [2.0]], "A": [[1.0]]}}]},
     "model.layers[0].ffn.A: must be a 1 x 2"),
    ({"layers": [{"t_end": 1.0, "attention": "nine"}]}, "model.layers[0].attention: must be one of"),
    ({"layers": []}, "model.layers: must be a non-empty list"),
])
def test_bad_models_name_the_field(model, field):
    with pytest.raises(ModelError) as info:
        LayerSchedule.build(2, {"beta": 1.0, **model})
    assert str(info.value).startswith(field), str(info.value)


@pytest.mark.parametrize("text, field", [
    ("[model.ffn]\nW = [[1.0, 0.0]]\nA = [[1.0], [0.0]]\n", "model.ffn.W: must be a 2 x m matrix"),
    ('[model.ffn]\nW = [[1.0], [0.0]]\nA = [[1.0, 0.0]]\nactivation = "sigmoid"\n', "model.ffn.activation"),
    ("[[model.layers]]\nt_end = 0.1\n[[model.layers]]\nt_end = 0.1\n", "model.layers[1].t_end: must be greater"),
    ("[[model.layers]]\nt_end = 0.1\nwidth = 3\n", "model.layers[0].width: unknown key"),
    ("[[model.layers]]\nt_end = 0.1\n", "model.layers[0].t_end: the last layer ends at t = 0.1, before time.t_final"),
    ("[[model.layers]]\nt_end = 0.2\nbeta = 1e308\n", "model.layers[0].beta: beta * ||Q^T K||_2"),
    ('[model]\nvelocity = "rotation"\n[model.ffn]\nW = [[1.0], [0.0]]\nA = [[1.0, 0.0]]\n',
     "model.ffn: needs model.velocity = 'attention'"),
    ("[[model.layers]]\nt_end = 0.2\n[[model.layers.heads]]\nweight = -1e300\n",
     "model.layers[0]: the initial velocity limits the step"),
], ids=["W-shape", "activation", "t_end-order", "layer-key", "t_end-short", "layer-beta", "rotation", "weight"])
def test_cli_refuses_bad_layers(tmp_path, capsys, text, field):
    """One line naming the field, exit 2, nothing written."""
    refused(tmp_path, capsys, S1 + text, field)


def test_set_starts_an_unset_block():
    cfg = load_config(case(), ["model.ffn.W=[[1.0], [0.0]]", "model.ffn.A=[[0.0, 1.0]]", 'model.ffn.activation="tanh"'])
    ffn = Problem(cfg).schedule().layers[0].ffn
    assert ffn is not None and ffn.activation == "tanh" and np.array_equal(ffn.A, [[0.0, 1.0]])
    with pytest.raises(ConfigError, match="model.attention: 'none' at t = 0"):
        Problem(load_config(case(model={"attention": "none"}))).model()


# -- exact push-forward -------------------------------------------------------------------------
def test_pushforward_matches_the_closed_form_flow():
    rho0 = make_initial_density(BUMP["S1"], 2)
    exact = feed_forward_solution(LayerSchedule.build(2, {"attention": "none", "beta": 1.0, "ffn": SADDLE}), rho0)
    theta = np.linspace(-np.pi, np.pi, 500, endpoint=False)
    x = np.stack([np.cos(theta), np.sin(theta)], axis=1)
    for t in (0.3, 1.0):
        expected = saddle_solution(t, theta, rho0)
        assert np.abs(exact(t, x) - expected).max() <= 1e-11 * expected.max()


def test_pushforward_by_a_rotation_on_s2():
    """W A skew and b = 0, identity activation: F(x) = S x, a rotation with rate |omega| about omega."""
    S = np.array([[0.0, -0.7, 0.2], [0.7, 0.0, -0.4], [-0.2, 0.4, 0.0]])
    rho0 = make_initial_density(BUMP["S2"], 3)
    exact = feed_forward_solution(LayerSchedule.build(3, {"attention": "none", "beta": 1.0, "ffn": {
        "W": S, "A": np.eye(3), "activation": "identity"}}), rho0)
    omega = np.array([0.4, 0.2, 0.7])
    x = icosphere(2).points
    t = 1.3
    expected = rho0(x @ rotation_matrix(omega, np.linalg.norm(omega) * t))  # rows: R(-t) x
    np.testing.assert_allclose(exact(t, x), expected, rtol=1e-10, atol=0)


def test_two_layers_forward_and_back():
    """A flow and its reverse for equal times return rho0; halfway it is the one-layer flow."""
    rho0 = make_initial_density(BUMP["S1"], 2)
    exact = feed_forward_solution(LayerSchedule.build(2, {"attention": "none", "beta": 1.0, "layers": [
        {"t_end": 0.4, "ffn": SADDLE}, {"t_end": 0.8, "ffn": REVERSED_SADDLE}]}), rho0)
    theta = np.linspace(-np.pi, np.pi, 300, endpoint=False)
    x = np.stack([np.cos(theta), np.sin(theta)], axis=1)
    np.testing.assert_allclose(exact(0.4, x), saddle_solution(0.4, theta, rho0), rtol=1e-10)
    np.testing.assert_allclose(exact(0.6, x), saddle_solution(0.2, theta, rho0), rtol=1e-10)
    np.testing.assert_allclose(exact(0.8, x), rho0(x), rtol=1e-10)


def test_each_trajectory_its_own_step():
    """u' = 1 for u < 0, 2 after (a jump each row crosses at its own time), and u' = -u u."""
    u0 = np.column_stack([-np.linspace(0.05, 0.95, 40), np.linspace(0.5, 2.0, 40)])
    rhs = lambda u: np.column_stack([np.where(u[:, 0] < 0, 1.0, 2.0), -u[:, 1] ** 2])
    u = integrate_each(rhs, u0, 1.0)
    np.testing.assert_allclose(u[:, 0], 2.0 * (1.0 + u0[:, 0]), rtol=0, atol=1e-11)  # 2 (1 - |u0|) after crossing
    np.testing.assert_allclose(u[:, 1], u0[:, 1] / (1.0 + u0[:, 1]), rtol=1e-12)
    assert np.array_equal(integrate_each(rhs, u0, 0.0), u0)


def test_relu_characteristics_match_one_trajectory_at_a_time(rng):
    """Across ReLU kinks, against scipy's DOP853 on each trajectory alone."""
    from scipy.integrate import solve_ivp

    ffn = FeedForward.build(2, {"W": rng.normal(0, 0.6, (2, 5)), "A": rng.normal(0, 1, (5, 2)),
                                "b": rng.normal(0, 0.3, 5), "activation": "relu"})
    x = random_sphere_points(rng, 6, 2)
    y, integral = backward_characteristics(ffn, x, 1.5)
    assert np.any((x @ ffn.A.T + ffn.b > 0) != (y @ ffn.A.T + ffn.b > 0))  # some trajectory crosses a kink

    def rhs(_, u):
        p = u[None, :2] / np.linalg.norm(u[:2])
        return np.concatenate([-ffn.velocity(p)[0], ffn.divergence(p)])

    for i in range(len(x)):
        u = solve_ivp(rhs, (0.0, 1.5), [*x[i], 0.0], method="DOP853", rtol=1e-13, atol=1e-14).y[:, -1]
        np.testing.assert_allclose([*u[:2] / np.linalg.norm(u[:2]), u[2]], [*y[i], integral[i]], rtol=0, atol=1e-10)


def test_pushforward_keeps_mass_on_s2():
    """The mass of the exact density, by Gauss-Legendre in cos(polar angle) x the trapezoid rule in azimuth."""
    exact = feed_forward_solution(LayerSchedule.build(3, {"attention": "none", "beta": 1.0, "ffn": FFN_S2}),
                                  make_initial_density(BUMP["S2"], 3))
    z, wz = np.polynomial.legendre.leggauss(48)
    phi = np.linspace(0.0, 2 * np.pi, 96, endpoint=False)
    Z, PHI = np.meshgrid(z, phi, indexing="ij")
    r = np.sqrt(1.0 - Z**2)
    x = np.stack([r * np.cos(PHI), r * np.sin(PHI), Z], axis=-1).reshape(-1, 3)
    weights = (wz[:, None] * np.full(len(phi), 2 * np.pi / len(phi))).ravel()
    for t in (0.0, 0.7):
        assert abs(exact(t, x) @ weights - 1.0) <= 1e-9


# -- the PDE: second order against the push-forward ----------------------------------------------
def final_orders(rows) -> list[float]:
    t_final = max(r.time for r in rows)
    return [r.order for r in rows if r.norm == "L1" and r.time == t_final and np.isfinite(r.order)]


def test_feed_forward_flow_dg1_second_order_s1(tmp_path):
    rows = convergence_study(case(model={"attention": "none", "ffn": FFN_S1}, outputs=1), [5, 6, 7], tmp_path / "c",
                             comm=MPI.COMM_SELF)
    assert min(final_orders(rows)) >= 1.8, final_orders(rows)


def test_feed_forward_flow_dg1_second_order_s2(tmp_path):
    rows = convergence_study(case("S2", model={"attention": "none", "ffn": FFN_S2}, outputs=1), [2, 3],
                             tmp_path / "c", comm=MPI.COMM_SELF)
    assert min(final_orders(rows)) >= 1.7, final_orders(rows)


def test_layer_boundaries_keep_second_order(tmp_path):
    """Two layers meeting at t = 0.37 (not an output time): a step across the boundary would cost
    O(dt) once, first order; landing on it keeps second order."""
    model = {"attention": "none", "layers": [{"t_end": 0.37, "ffn": FFN_S1},
                                             {"t_end": 1.0, "ffn": {**FFN_S1, "b": [-0.4, 0.5]}}]}
    rows = convergence_study(case(model=model, outputs=1), [5, 6, 7], tmp_path / "c", comm=MPI.COMM_SELF)
    assert min(final_orders(rows)) >= 1.8, final_orders(rows)


# -- landing on boundaries ----------------------------------------------------------------------
class Landing(Decay):
    """The controller's toy, asking to land on fixed times; records every step's interval."""

    def __init__(self, landings: list[float]) -> None:
        super().__init__(dt=0.03)
        self.landings, self.steps_taken = landings, []

    def next_landing(self, t: float) -> float | None:
        return next((b for b in self.landings if b > t + 1e-12), None)

    def step(self, t_end: float) -> float:
        start = self.t
        dt = super().step(t_end)
        self.steps_taken.append((start, self.t))
        return dt


def test_controller_lands_on_requested_times(tmp_path):
    sim = Landing([0.1, 0.5, 0.8765])  # outputs at 0, 0.25, ..., 1: 0.5 is both
    start_run(sim, problem(), tmp_path / "a", handlers(), quiet=True)
    steps = np.array(sim.steps_taken)
    for b in sim.landings:
        assert b in steps[:, 1] and not np.any((steps[:, 0] < b) & (steps[:, 1] > b)), b
    assert np.all(np.diff(steps, axis=1) > 0) and np.array_equal(steps[1:, 0], steps[:-1, 1])
    assert np.array_equal(load_run(tmp_path / "a").times, [0, 0.25, 0.5, 0.75, 1.0])


# -- runs: bit-for-bit identities ---------------------------------------------------------------
ATTENTION_FFN = {"attention": "softmax", "beta": 2.0, "V": [[0.5, -1.0], [1.0, 0.5]], "ffn": FFN_S1}
SECOND = {"beta": 0.7, "ffn": {**FFN_S1, "activation": "relu", "b": [0.3, 0.0]}}


@pytest.mark.mpi
@pytest.mark.parametrize("scheme", ["fv", "dg1"])
def test_equal_layers_give_the_unlayered_run(comm, tmp_path, scheme):
    layered = {**ATTENTION_FFN, "layers": [{"t_end": 0.3}, {"t_end": 0.6, "beta": 2.0}, {"t_end": 1.0}]}
    a = meanfield.run(case(resolution=48, model=ATTENTION_FFN, scheme=scheme), out=tmp_path / "a", comm=comm,
                      quiet=True)
    b = meanfield.run(case(resolution=48, model=layered, scheme=scheme), out=tmp_path / "b", comm=comm, quiet=True)
    assert np.array_equal(a.densities, b.densities)
    assert a.metadata["steps"]["steps"] == b.metadata["steps"]["steps"]


@pytest.mark.mpi
@pytest.mark.parametrize("kind, method", [("pde", "direct"), ("pde", "fast"), ("particles", "direct")])
def test_two_layers_equal_one_layer_resumed_with_the_second(comm, tmp_path, kind, method):
    """Layer 1 to t = 0.5, then layer 2 (beta and the block change) to t = 1, in one run;
    and the same as a one-layer run to 0.5 resumed with ``--set`` of the second layer's keys."""
    layered = {**ATTENTION_FFN, "layers": [{"t_end": 0.5}, {"t_end": 1.0, **SECOND}]}
    run = meanfield.run if kind == "pde" else lambda c, **kw: meanfield.run_particles(c, n=64, **kw)
    extra = {"nonlocal": {"method": method}, **({"particles": {"dt": 0.03}} if kind == "particles" else {})}
    a = run(case(model=layered, outputs=2, **extra), out=tmp_path / "a", comm=comm, quiet=True)
    run(case(model=ATTENTION_FFN, t_final=0.5, outputs=1, **extra), out=tmp_path / "b", comm=comm, quiet=True)
    ffn = SECOND["ffn"]
    overrides = [f"model.beta={SECOND['beta']}", f"model.ffn.b={ffn['b']}",
                 f"model.ffn.activation=\"{ffn['activation']}\""]
    b = meanfield.resume(tmp_path / "b", t_final=1.0, overrides=overrides, comm=comm, quiet=True)
    assert np.array_equal(a.times, b.times) and np.array_equal(a.times, [0.0, 0.5, 1.0])
    if kind == "pde":
        assert np.array_equal(a.densities, b.densities)
    else:
        assert np.array_equal(a.points, b.points)
    for key in ("mass", "energy", "order", "mean_0", "m2_01"):  # E at t = 0.5: the layer that got there
        assert np.array_equal(a.observables[key], b.observables[key]), key


@pytest.mark.mpi
def test_layered_run_is_rank_count_independent(parallel_comm, tmp_path):
    model = {**ATTENTION_FFN, "layers": [{"t_end": 0.4}, {"t_end": 1.0, **SECOND}]}
    cfg = case(resolution=64, model=model, outputs=2)
    parallel = meanfield.run(cfg, out=tmp_path / "parallel", comm=parallel_comm, quiet=True)
    if parallel_comm.rank == 0:
        serial = meanfield.run(cfg, out=tmp_path / "serial", comm=MPI.COMM_SELF, quiet=True)
        assert np.abs(parallel.densities - serial.densities).max() <= 1e-10
        np.testing.assert_allclose(parallel.observables["energy"], serial.observables["energy"], rtol=1e-12)
    parallel_comm.barrier()


# -- particles -----------------------------------------------------------------------------------
def test_particles_follow_the_closed_form_flow_through_two_layers():
    """Tokens under the saddle flow and then its reverse: at t = 0.4 the closed form, at 0.8 back home."""
    model = {"attention": "none", "layers": [{"t_end": 0.4, "ffn": SADDLE}, {"t_end": 0.8, "ffn": REVERSED_SADDLE}]}
    sim = build_particles(case(model=model, t_final=0.8, particles={"dt": 0.01}), n=50, seed=3, comm=MPI.COMM_SELF)
    theta0 = np.arctan2(sim.x[:, 1], sim.x[:, 0])
    for target, contraction in ((0.4, np.exp(-0.8)), (0.8, 1.0)):  # tan theta(t) = tan theta0 e^{-2t}, then back
        while sim.t < target - 1e-12:
            sim.step(target)
        theta = np.arctan2(contraction * np.sin(theta0), np.cos(theta0))
        np.testing.assert_allclose(sim.x, np.stack([np.cos(theta), np.sin(theta)], axis=1), atol=1e-9)
    row = sim.observables()
    assert np.isnan(row["energy"]) and abs(row["mass"] - 1.0) < 1e-14


def test_particles_in_any_dimension():
    """d = 4: a skew block is the rotation exp(t S), and the particle step follows the layer's dt."""
    S = np.array([[0, -1, 0.5, 0], [1, 0, 0, -0.3], [-0.5, 0, 0, 0.2], [0, 0.3, -0.2, 0]], float)
    model = {"attention": "none", "ffn": {"W": S.tolist(), "A": np.eye(4).tolist(), "activation": "identity"}}
    cfg = {**case("S2", model=model, t_final=0.5), "initial": {"kind": "uniform"}, "particles": {"d": 4, "dt": 0.01}}
    sim = build_particles(cfg, n=20, seed=0, comm=MPI.COMM_SELF)
    x0 = sim.x.copy()
    while sim.t < 0.5 - 1e-12:
        sim.step(0.5)
    np.testing.assert_allclose(sim.x, x0 @ expm(0.5 * S).T, atol=1e-9)


def test_layer_velocity_adds_the_block_to_attention(rng):
    """attention + feed-forward = the evaluator's velocity plus F, and layers without attention
    evaluate no attention at all."""
    schedule = LayerSchedule.build(2, {**ATTENTION_FFN, "layers": [{"t_end": 1.0}, {"t_end": 2.0, "attention": "none"},
                                                                   {"t_end": 3.0, "attention": "softmax"}]})
    field = LayerVelocity(schedule)
    x = random_sphere_points(rng, 30, 2)
    w = np.full(30, 1 / 30)
    first = field.evaluator
    X = field(x, x, w)
    assert first is not None
    np.testing.assert_array_equal(X, first.velocity(x, x, w) + schedule.layers[0].ffn.velocity(x))
    field.enter(1)
    assert field.evaluator is None
    np.testing.assert_array_equal(field(x, x, w), schedule.layers[1].ffn.velocity(x))
    field.enter(2)
    assert field.evaluator is not None and field.evaluator is not first  # set up anew after a layer without
    np.testing.assert_array_equal(field(x, x, w), X)


# -- studies and resume ----------------------------------------------------------------------------
def test_validation_runs_on_a_layered_model_and_checks_the_schedule(tmp_path):
    from meanfield.studies.validation import validate
    from meanfield.studies.validation.study import check_pde_run

    model = {**ATTENTION_FFN, "layers": [{"t_end": 0.3}, {"t_end": 0.6, **SECOND}]}
    cfg = load_config(case(resolution=32, model=model, t_final=0.6, outputs=2))
    result = validate(cfg, ns=[20, 40], seeds=1, out=tmp_path / "v", refine=False, comm=MPI.COMM_SELF, quiet=True)
    assert {r["metric"] for r in result.rows} >= {"mean_error", "energy_error", "w1"}
    assert all(np.isfinite(r["value"]) for r in result.rows if not r["metric"].startswith("cluster_"))
    pde = tmp_path / "v" / "pde"
    check_pde_run(cfg, pde, "--pde")  # the same schedule
    equal_layers = {**model, "layers": [{"t_end": 0.1}, *model["layers"]]}  # a boundary where nothing changes
    check_pde_run(load_config(case(resolution=32, model=equal_layers, t_final=0.6, outputs=2)), pde, "--pde")
    other = {**model, "layers": [{"t_end": 0.3}, {"t_end": 0.6, **SECOND, "beta": 0.8}]}
    with pytest.raises(ConfigError, match="the run differs from the config in the model"):
        check_pde_run(load_config(case(resolution=32, model=other, t_final=0.6, outputs=2)), pde, "--pde")


def test_resume_beyond_the_last_layer_isrefused(tmp_path):
    model = {**ATTENTION_FFN, "layers": [{"t_end": 0.2}, {"t_end": 0.4, **SECOND}]}
    meanfield.run(case(resolution=32, model=model, t_final=0.4, outputs=1), out=tmp_path / "a", comm=MPI.COMM_SELF,
                  quiet=True)
    with pytest.raises(ConfigError, match=r"model.layers\[1\].t_end: the last layer ends at t = 0.4, before"):
        meanfield.resume(tmp_path / "a", t_final=0.8, comm=MPI.COMM_SELF, quiet=True)
    more = '[{t_end = 0.2}, {t_end = 0.8, beta = 0.7}]'
    run = meanfield.resume(tmp_path / "a", t_final=0.8, overrides=[f"model.layers={more}"], comm=MPI.COMM_SELF,
                           quiet=True)
    assert run.times[-1] == 0.8 and run.metadata["status"] == "completed"


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_feed_forward_speed_bound_holds(rng, activation):
    d, m = 3, 5
    ffn = FeedForward.build(d, {"W": rng.standard_normal((d, m)), "A": rng.standard_normal((m, d)),
                                "b": rng.standard_normal(m), "activation": activation})
    x = rng.standard_normal((2000, d))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    assert np.linalg.norm(ffn.velocity(x), axis=1).max() <= ffn.speed_bound()
