"""Upwind finite volumes with SSP-RK3: conservation, positivity, transport convergence,
energy growth and the analytic linear growth rates of MODEL.md."""

import numpy as np
import pytest
from mpi4py import MPI
from scipy import special

from meanfield.config import load_config
from meanfield.drivers.pde import build_simulation
from meanfield.initial import real_harmonic, vmf_density
from meanfield.sphere import cell_averages, sphere_area

BUMPS = {"kind": "vmf", "centers": [[0, 0, 1], [1, 0, 0], [0, -1, -0.2]], "kappas": [2, 2, 2]}


def simulation(comm=MPI.COMM_SELF, **sections):
    """A simulation from config sections; ``field`` stands for the [nonlocal] section."""
    if "field" in sections:
        sections["nonlocal"] = sections.pop("field")
    return build_simulation(load_config({"name": "test", **sections}), comm)


def rotated(f, angle):
    """x -> f(R(-angle) x), R the rotation about the z axis."""
    c, s = np.cos(angle), np.sin(angle)

    def g(p):
        q = p.copy()
        q[:, 0], q[:, 1] = c * p[:, 0] + s * p[:, 1], -s * p[:, 0] + c * p[:, 1]
        return f(q)

    return g


def transport_error(sphere, resolution, t_final=np.pi / 2):
    center = [1.0, 0.0, 0.0] if sphere == "S2" else [1.0, 0.0]
    sim = simulation(
        mesh={"sphere": sphere, "resolution": resolution},
        model={"velocity": "rotation"},
        initial={"kind": "vmf", "centers": [center], "kappas": [4.0]},
        time={"t_final": t_final, "cfl": 0.5},
    )
    state = sim.stepper.advance(sim.state, 0.0, t_final)
    g = sim.scheme.geometry
    exact = rotated(lambda p: vmf_density(p, np.array(center), 4.0), t_final)
    _, averages = cell_averages(exact, g.vertices[: g.num_owned])
    return np.sum(np.abs(state - averages) * g.measure[: g.num_owned])


@pytest.mark.parametrize("sphere, ladder", [("S1", [64, 128, 256, 512]), ("S2", [3, 4, 5])])
def test_transport_converges_at_first_order(sphere, ladder):
    errors = np.array([transport_error(sphere, r) for r in ladder])
    orders = np.log2(errors[:-1] / errors[1:])
    assert np.all(errors[1:] < errors[:-1])
    assert orders.min() >= 0.8, (errors, orders)


@pytest.mark.parametrize("attention, t_final", [("softmax", 3.0), ("unnormalized", 0.6)])
def test_mass_positivity_and_energy_growth(attention, t_final):
    """Clustering from three bumps: mass to 1e-12, rho >= -1e-14, E non-decreasing (Q=K=V=I).

    USA speeds grow like exp(beta) as mass concentrates, so its run is shorter.
    """
    sim = simulation(
        mesh={"sphere": "S2", "resolution": 3},
        model={"attention": attention, "beta": 4.0},
        initial=BUMPS,
        time={"t_final": t_final, "cfl": 0.9},
    )
    from meanfield.observables import interaction_energy

    scheme, state, t = sim.scheme, sim.state, 0.0
    mass0 = scheme.mass(state)
    energies, minima = [], []
    for t_next in np.linspace(t_final / 30, t_final, 30):
        state = sim.stepper.advance(state, t, t_next)
        t = t_next
        points, weights = scheme.measure(state)
        energies.append(interaction_energy(sim.evaluator, points, weights, fixed_sources=True))
        minima.append(state.min())
        assert abs(scheme.mass(state) - mass0) <= 1e-12 * mass0
    assert min(minima) >= -1e-14
    assert np.all(np.diff(energies) >= -1e-12 * abs(energies[0]))
    assert energies[-1] > 1.5 * energies[0]  # the dynamics really clusters


def analytic_rate(d, l, beta, attention):
    if d == 2:
        lam, lam0 = special.iv(l, beta), special.iv(0, beta)
        rate = l * l * lam / beta
    else:
        lam, lam0 = special.spherical_in(l, beta), special.spherical_in(0, beta)
        rate = l * (l + 1) * lam / beta
    return rate / lam0 if attention == "softmax" else rate


@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
@pytest.mark.parametrize("beta", [1.0, 4.0])
@pytest.mark.parametrize(
    "sphere, resolution, degrees, method",
    [("S1", 256, [1, 2, 3, 4], "direct"), ("S2", 4, [1, 2, 3], "fast")],
)
def test_linear_growth_rates(sphere, resolution, degrees, method, beta, attention):
    """uniform + eps * sum_l Y_l: each mode grows at MODEL.md's gamma_l within 3%.

    The modes are decoupled in the linear regime (the linearised operator commutes with
    rotations), so one run measures all degrees; eps = 1e-6 keeps it linear.
    """
    d = 2 if sphere == "S1" else 3
    eps = 1e-6
    if d == 2:
        modes = " + ".join(f"cos({l}*arctan2(y, x))" for l in degrees)
    else:
        modes = "z + (3*z**2 - 1) + (5*z**3 - 3*z)"  # Legendre P_1..P_3 in z: m = 0 harmonics
    T = 0.4
    sim = simulation(
        mesh={"sphere": sphere, "resolution": resolution},
        model={"attention": attention, "beta": beta},
        field={"method": method},
        initial={"kind": "expression", "expression": f"{1 / sphere_area(d)} + {eps}*({modes})"},
        time={"t_final": T, "dt_max": 0.02},
    )
    g = sim.scheme.geometry
    masses0 = sim.state * g.measure[: g.num_owned]
    state = sim.stepper.advance(sim.state, 0.0, T)
    masses = state * g.measure[: g.num_owned]
    for l in degrees:
        Y = real_harmonic(g.centroid[: g.num_owned], l, 0)
        measured = np.log((masses @ Y) / (masses0 @ Y)) / T
        expected = analytic_rate(d, l, beta, attention)
        assert abs(measured / expected - 1) < 0.03, (l, measured, expected)


@pytest.mark.slow
def test_fast_and_direct_runs_agree():
    """A whole PDE run with the fast evaluator matches the direct one to 1e-8 in density."""
    states = []
    for method in ("direct", "fast"):
        sim = simulation(
            mesh={"sphere": "S2", "resolution": 3},
            model={"attention": "softmax", "beta": 4.0},
            field={"method": method, "tol": 1e-12},
            initial=BUMPS,
            time={"t_final": 1.0, "dt": 0.02},
        )
        states.append(sim.stepper.advance(sim.state, 0.0, 1.0))
    assert np.abs(states[0] - states[1]).max() <= 1e-8 * np.abs(states[0]).max()


def test_fixed_dt_beyond_cfl_stops_with_location():
    """A fixed step above the bound of the initial density is refused when the simulation is
    built (bad input, the bound known up front); the stepper itself stops at a step beyond it."""
    from meanfield.config import ConfigError
    from meanfield.discretisation.base import StabilityError

    sections = {"mesh": {"sphere": "S1", "resolution": 64}, "model": {"velocity": "rotation", "rotation_rate": 1.0},
                "initial": {"kind": "uniform"}}
    with pytest.raises(ConfigError, match=r"time.dt: 0.5 is above the stability bound of the first step") as refused:
        simulation(**sections, time={"t_final": 1.0, "dt": 0.5})
    bound = float(str(refused.value).split("dt <= ")[1].split()[0])
    assert bound == pytest.approx(2 * np.sin(np.pi / 64), rel=1e-3)  # a cell's chord crossed at speed 1
    sim = simulation(**sections, time={"t_final": 1.0, "dt": 0.05})
    sim.stepper.fixed_dt = 0.5
    with pytest.raises(StabilityError, match=r"time.dt = 0.5 violates the CFL bound at t = 0"):
        sim.stepper.advance(sim.state, 0.0, 1.0)
