"""The hybrid solver (density + atoms, issue 12): exact checks.

* capture off, no ``[atoms]`` table, and capture on before anything is captured take the same
  steps bit for bit (in one process); the plain solver matches the states an older version
  computed (tests/data/plain_golden.npz) to round-off;
* before the first capture the hybrid run equals the plain run step by step;
* a state made only of atoms is the weighted particle system with SSP-RK3;
* the atoms' velocity is the field of the whole measure (mesh + atoms);
* mass is conserved to 1e-12 through captures and merges, the density stays >= 0;
* capture happens on S^1 (beta = 9) and S^2; merges follow the documented rule;
* a checkpoint resumes to the uninterrupted run.
"""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
from helpers.plain_cases import CASES, STEPS
from mpi4py import MPI

from meanfield.atoms import Atoms
from meanfield.atoms import coupling as atom_coupling
from meanfield.atoms.capture import CaptureRule, find_captures
from meanfield.atoms.component import HybridAtoms, NoAtoms
from meanfield.atoms.coupling import DIRECT_ATOMS
from meanfield.atoms.merge import merge_close
from meanfield.config import ConfigError, load_config
from meanfield.drivers.pde import build_simulation
from meanfield.nonlocal_field import make_evaluator
from meanfield.particles.integrator import projected_ssprk3_step
from meanfield.particles.system import ParticleSystem
from meanfield.peaks import cell_graph
from meanfield.problem import Problem
from meanfield.velocity import LayerVelocity

DATA = Path(__file__).parent / "data"
COMM = MPI.COMM_WORLD


def _steps(config: dict, steps: int):
    sim = build_simulation(config)
    for _ in range(steps):
        sim.step(config["time"]["t_final"])
    return sim


def _with(config: dict, **sections) -> dict:
    out = copy.deepcopy(config)
    for key, value in sections.items():
        out[key] = {**out.get(key, {}), **value}
    return out


def _total_mass(sim) -> float:
    return sim.scheme.mass(sim.state) + (0.0 if sim.atoms is None else sim.atoms.mass)


@pytest.mark.mpi
@pytest.mark.parametrize("name", sorted(CASES))
def test_capture_off_is_the_plain_solver_bit_for_bit(name):
    """No ``[atoms]`` table, ``capture = false``, and capture on with a rule no peak can meet
    (the hybrid stepping with no atoms): the same steps from the same inputs, bit for bit."""
    plain = _steps(CASES[name], STEPS)
    off = _steps(_with(CASES[name], atoms={"capture": False}), STEPS)
    idle = _steps(_with(CASES[name], atoms={"capture": True, "min_height": 1e300}), STEPS)
    assert isinstance(plain.atoms_component, NoAtoms) and isinstance(off.atoms_component, NoAtoms)
    assert off.atoms is None
    assert isinstance(idle.atoms_component, HybridAtoms) and idle.atoms is not None and idle.atoms.count == 0
    for sim in (off, idle):
        assert np.array_equal(sim.state, plain.state) and sim.t == plain.t


@pytest.mark.parametrize("name", sorted(CASES))
def test_plain_solver_matches_its_stored_states(name):
    """Regression: the plain solver's state after ``STEPS`` steps as computed before the atoms
    were added (tests/data/make_plain_golden.py).  Another BLAS kernel or CPU rounds
    differently (differences of 3e-17..3e-16 were seen), so the comparison is to 1e-12 of the
    largest value: far above the round-off of these 20 steps, far below what any change of the
    scheme, the limiter or the step size moves (1% off the CFL number alone moves these states
    by 1e-9..1e-6, measured)."""
    sim = build_simulation(CASES[name], MPI.COMM_SELF)
    for _ in range(STEPS):
        sim.step(CASES[name]["time"]["t_final"])
    with np.load(DATA / "plain_golden.npz") as golden:
        stored, t = golden[name], float(golden[name + "-t"])
    state = sim.checkpoint_state()["state"]
    assert state.shape == stored.shape
    difference = np.abs(state - stored).max()
    assert difference <= 1e-12 * np.abs(stored).max(), difference
    assert abs(sim.t - t) <= 1e-12 * t


@pytest.mark.mpi
@pytest.mark.parametrize("scheme", ["fv", "dg1"])
def test_hybrid_equals_plain_until_the_first_capture(scheme):
    config = _with(CASES[f"S1-{scheme}"], time={"t_final": 20.0})
    plain, hybrid = build_simulation(config), build_simulation(_with(config, atoms={"capture": True}))
    steps = 0
    while True:
        plain.step(20.0)
        hybrid.step(20.0)
        steps += 1
        assert hybrid.atoms is not None
        if hybrid.atoms.count:
            break
        assert np.array_equal(hybrid.state, plain.state) and hybrid.t == plain.t
    assert steps > 10 and COMM.allreduce(not np.array_equal(hybrid.state, plain.state), op=MPI.LOR)
    assert abs(_total_mass(hybrid) - 1.0) < 1e-12


def _random_atoms(d: int, k: int, seed: int) -> list[list[float]]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(k, d))
    m = rng.uniform(0.5, 1.5, size=k)
    m /= m.sum()
    m[-1] = 1.0 - m[:-1].sum()  # the masses sum to 1 exactly: the density is zero
    return [[float(mi), *map(float, xi)] for mi, xi in zip(m, x)]


@pytest.mark.mpi
@pytest.mark.parametrize("sphere,resolution,beta", [("S1", 32, 9.0), ("S2", 1, 4.0)])
@pytest.mark.parametrize("method,direct_atoms", [("direct", DIRECT_ATOMS), ("fast", DIRECT_ATOMS), ("fast", 0)])
def test_all_atom_state_is_the_weighted_particle_system(sphere, resolution, beta, method, direct_atoms, monkeypatch):
    """Up to ``DIRECT_ATOMS`` atoms alone are moved by the exact (direct) field whatever
    ``nonlocal.method`` is; above it by the configured field (``direct_atoms = 0``)."""
    monkeypatch.setattr(atom_coupling, "DIRECT_ATOMS", direct_atoms)
    d = 2 if sphere == "S1" else 3
    initial = _random_atoms(d, 6, seed=3)
    dt, steps = 0.005, 200
    config = {"mesh": {"sphere": sphere, "resolution": resolution}, "model": {"beta": beta},
              "nonlocal": {"method": method, "tol": 1e-12}, "time": {"t_final": 100.0, "dt": dt, "outputs": 1},
              "atoms": {"initial": initial, "merge_distance": 0.0}}
    sim = _steps(config, steps)
    assert sim.scheme.mass(sim.state) == 0.0 and abs(sim.t - steps * dt) < 1e-12
    # the particle solver: the same model, tokens weighted by the masses, SSP-RK3 with the same step
    problem = Problem(load_config(config))
    field = LayerVelocity(problem.schedule(), COMM, method if direct_atoms < len(initial) else "direct", 1e-12)
    a = np.array(initial)
    mine = slice(None) if COMM.rank == 0 else slice(0)  # tokens on rank 0 (the field gathers them)
    system = ParticleSystem(field, a[mine, 0])
    x = a[mine, 1:] / np.linalg.norm(a[mine, 1:], axis=1, keepdims=True)
    for _ in range(steps):
        x, _ = projected_ssprk3_step(system.velocity, x, dt)
    x = COMM.bcast(x, root=0)
    assert np.abs(sim.atoms.positions - x).max() <= 1e-12
    assert np.linalg.norm(x - a[:, 1:] / np.linalg.norm(a[:, 1:], axis=1, keepdims=True), axis=1).max() > 1e-2


@pytest.mark.mpi
@pytest.mark.parametrize("scheme", ["fv", "dg1"])
def test_atoms_move_with_the_field_of_the_whole_measure(scheme):
    config = _with(CASES[f"S1-{scheme}"], atoms={"initial": [[0.2, 1.0, 0.3], [0.1, -0.2, -1.0]]})
    sim = build_simulation(config)
    sim.atoms_component.hybrid.rhs_and_bound(sim.atoms_component.hybrid.join(sim.state, sim.atoms.positions))
    points, weights = sim.scheme.measure(sim.state)
    points, weights = np.concatenate(COMM.allgather(points)), np.concatenate(COMM.allgather(weights))
    evaluator = make_evaluator(Problem(load_config(config)).model(), None, "direct")
    x = sim.atoms.positions
    exact = evaluator.velocity(x, np.concatenate([points, x]), np.concatenate([weights, sim.atoms.masses]))
    assert np.abs(sim.atoms_component.coupling.atom_velocity - exact).max() <= 1e-13 * max(1.0, np.abs(exact).max())
    assert abs(weights.sum() - 0.7) < 1e-13  # the density carries what the atoms leave


@pytest.mark.mpi
@pytest.mark.parametrize("scheme", ["fv", "dg1"])
def test_capture_on_s1_conserves_mass_and_keeps_the_density_non_negative(scheme):
    config = _with(CASES[f"S1-{scheme}"], mesh={"resolution": 128}, time={"t_final": 12.0},
                   atoms={"capture": True})
    sim = build_simulation(config)
    worst = 0.0
    while sim.t < 12.0:
        sim.step(12.0)
        worst = max(worst, abs(_total_mass(sim) - 1.0))
        assert COMM.allreduce(float(sim.scheme.cell_averages(sim.state).min()), op=MPI.MIN) >= 0.0
    assert worst <= 1e-12
    # three clusters of mass ~1/3 (the default S^1 initial density) have become three atoms
    assert sim.atoms.count == 3 and np.abs(sim.atoms.masses - 1.0 / 3.0).max() < 2e-2
    assert sim.atoms.mass > 1.0 - 1e-3
    assert sorted(sim.atoms.ids) == [0, 1, 2]


@pytest.mark.mpi
def test_capture_on_s2():
    """Three concentrated bumps at beta = 9 on the level-2 icosphere: on S^2 a collapsed cluster
    spreads over a vertex star (5-6 triangles), hence core_cells = 7."""
    config = {"mesh": {"sphere": "S2", "resolution": 2}, "model": {"beta": 9.0}, "nonlocal": {"method": "direct"},
              "initial": {"kappas": [20.0, 20.0, 20.0]}, "time": {"t_final": 4.0, "outputs": 1},
              "atoms": {"capture": True, "core_cells": 7}}
    sim = build_simulation(config)
    worst = 0.0
    while sim.t < 4.0:
        sim.step(4.0)
        worst = max(worst, abs(_total_mass(sim) - 1.0))
    assert worst <= 1e-12
    assert sim.atoms.count == 2 and np.abs(sim.atoms.masses - 1.0 / 3.0).max() < 1e-2


@pytest.mark.mpi
def test_absorb_mass_ends_in_atoms_alone():
    config = _with(CASES["S1-fv"], mesh={"resolution": 128}, time={"t_final": 12.0},
                   atoms={"capture": True, "absorb_mass": 1e-3})
    sim = build_simulation(config)
    while sim.t < 12.0:
        sim.step(12.0)
    assert sim.scheme.mass(sim.state) == 0.0 and not np.any(sim.state)
    assert abs(sim.atoms.mass - 1.0) <= 1e-12


@pytest.mark.mpi
def test_close_initial_atoms_merge_with_the_documented_rule():
    config = _with(CASES["S1-fv"], atoms={"initial": [[0.2, 1.0, 0.0], [0.3, np.cos(1e-3), np.sin(1e-3)],
                                                      [0.1, -1.0, 0.0]], "merge_distance": 2e-3})
    sim = _steps(config, 1)
    positions = np.array([[1.0, 0.0], [np.cos(1e-3), np.sin(1e-3)]])
    before = Atoms(np.array([0.2, 0.3, 0.1]), np.vstack([positions, [[-1.0, 0.0]]]))
    merged = merge_close(before, 2e-3)
    assert merged.count == 2 and list(merged.ids) == [1, 2]  # the heavier atom's id
    centre = 0.2 * positions[0] + 0.3 * positions[1]
    assert np.allclose(merged.positions[0], centre / np.linalg.norm(centre), atol=1e-15)
    assert merged.masses[0] == 0.5
    assert sim.atoms.count == 2 and list(sim.atoms.ids) == [1, 2] and abs(_total_mass(sim) - 1.0) < 1e-12


def test_find_captures_on_a_known_field():
    n = 40
    cells = np.stack([np.arange(n), (np.arange(n) + 1) % n], axis=1)
    graph = cell_graph(cells)
    area = np.full(n, 1.0 / n)
    mass = np.full(n, 1e-4)
    mass[10], mass[11] = 0.6, 0.1  # a collapsed peak: 2 cells hold nearly all of its basin (rho 24 > 20 mean)
    mass[30:36] = 0.05  # a broad one: 6 cells above 5% of its peak
    rule = CaptureRule(core_level=0.05, core_cells=3, min_height=20.0, core_fraction=0.9)
    captures = find_captures(mass, area, graph, rule, np.zeros(0, int), np.zeros(0))
    assert len(captures) == 1 and list(captures[0].cells) == [10, 11] and captures[0].host == -1
    hosted = find_captures(mass, area, graph, rule, np.array([11, 33]), np.array([0.1, 0.2]))
    assert [c.host for c in hosted] == [0]  # the atom in cell 11 absorbs the core


def test_bad_atoms_config_names_the_field():
    with pytest.raises(ConfigError, match=r"atoms\.initial\[0\]"):
        load_config({"mesh": {"sphere": "S1"}, "atoms": {"initial": [[0.5, 1.0, 0.0, 0.0]]}})
    with pytest.raises(ConfigError, match=r"atoms\.initial: the atoms' masses sum"):
        load_config({"mesh": {"sphere": "S1"}, "atoms": {"initial": [[0.7, 1.0, 0.0], [0.7, 0.0, 1.0]]}})
    with pytest.raises(ConfigError, match=r"atoms\.core_level"):
        load_config({"atoms": {"core_level": 1.5}})
    with pytest.raises(ConfigError, match=r"atoms\.capturee"):
        load_config({"atoms": {"capturee": True}})


@pytest.mark.mpi
def test_resume_from_a_checkpoint_equals_the_uninterrupted_run():
    config = _with(CASES["S1-fv"], mesh={"resolution": 128}, time={"t_final": 12.0},
                   atoms={"capture": True, "initial": [[0.05, 0.0, 1.0]]})
    reference = build_simulation(config)
    first = build_simulation(config)
    while first.t < 6.0:
        reference.step(12.0)
        first.step(12.0)
    state, t, info = first.checkpoint_state(), first.t, {"step": first.step_info()}
    resumed = build_simulation(config)
    resumed.restore(t, state, info)
    assert resumed.atoms.count == first.atoms.count >= 2  # captures before the checkpoint
    while reference.t < 12.0:
        reference.step(12.0)
        resumed.step(12.0)
    assert reference.atoms.mass > first.atoms.mass + 0.1  # absorptions after it
    assert np.array_equal(resumed.state, reference.state) and resumed.t == reference.t
    for key, value in reference.atoms.arrays().items():
        assert np.array_equal(resumed.atoms.arrays()[key], value)
    assert resumed.atoms_component.next_id == reference.atoms_component.next_id


@pytest.mark.mpi
@pytest.mark.parametrize("scheme", ["fv", "dg1"])
def test_two_ranks_capture_like_one(parallel_comm, scheme):
    config = _with(CASES[f"S1-{scheme}"], mesh={"resolution": 128}, time={"t_final": 9.0},
                   atoms={"capture": True, "initial": [[0.05, 0.0, 1.0]]})
    runs = []
    for comm in (parallel_comm, MPI.COMM_SELF):
        sim = build_simulation(config, comm)
        while sim.t < 9.0:
            sim.step(9.0)
        runs.append((sim.checkpoint_state(), sim.atoms, sim.t))
    (many, atoms, t), (one, atoms1, t1) = runs
    assert atoms.count == atoms1.count >= 3 and np.array_equal(atoms.ids, atoms1.ids) and t == t1
    assert np.abs(atoms.masses - atoms1.masses).max() <= 1e-12
    assert np.abs(atoms.positions - atoms1.positions).max() <= 1e-12
    if parallel_comm.rank == 0:
        assert np.abs(many["state"] - one["state"]).max() <= 1e-12


def test_ssprk3_tokens_are_third_order():
    """particles.integrator = "ssprk3": on S^1 with X(x) = P_x e_1 (theta' = -sin theta, exact:
    tan(theta / 2) = tan(theta_0 / 2) e^-t) the error falls 8-fold when dt halves."""
    a = np.array([1.0, 0.0])
    theta0 = np.array([0.5, 2.0, 3.0])
    x0 = np.stack([np.cos(theta0), np.sin(theta0)], axis=1)
    exact = 2.0 * np.arctan(np.tan(theta0 / 2.0) * np.exp(-2.0))
    errors = []
    for n in (20, 40):
        x = x0
        for _ in range(n):
            x, _ = projected_ssprk3_step(lambda y: a - (y @ a)[:, None] * y, x, 2.0 / n)
        errors.append(np.abs(np.arctan2(x[:, 1], x[:, 0]) - exact).max())
    assert 7.0 < errors[0] / errors[1] < 9.0
    assert Problem(load_config({"particles": {"integrator": "ssprk3"}})).particles.integrator == "ssprk3"


def test_core_cells_default_fits_the_sphere():
    """A collapsed cluster covers about one cell on S^1 and a vertex star (5-6 triangles) on S^2
    of the reference meshes (1024 cells, the level-4 icosphere); on finer meshes the default core
    keeps that width (its area), so a cluster is captured at the same width on any mesh."""
    from meanfield.config import default_core_cells, load_config

    def core(sphere: str, resolution: int) -> int:
        return load_config({"mesh": {"sphere": sphere, "resolution": resolution}}).data["atoms"]["core_cells"]

    assert [core("S2", level) for level in (2, 3, 4)] == [7, 7, 7]
    assert [core("S1", cells) for cells in (64, 256, 1024)] == [3, 3, 3]
    for sphere, meshes, area in (("S2", (4, 5, 6), lambda level: 4 * np.pi / (20 * 4**level)),
                                 ("S1", (1024, 2048, 4096), lambda cells: 2 * np.pi / cells)):
        widths = [core(sphere, m) * area(m) for m in meshes]
        assert np.allclose(widths, widths[0], rtol=0.05), (sphere, widths)
    assert default_core_cells("S2", None) == 7 and default_core_cells("S1", None) == 3  # mesh files
    examples = Path(__file__).parents[1] / "runs" / "examples"
    assert load_config(examples / "s2-long-time.toml").data["atoms"]["core_cells"] == 7  # level 4
    assert load_config(examples / "s1-long-time.toml").data["atoms"]["core_cells"] == 3  # 1024 cells
    assert load_config(examples / "s2-clusters.toml").data["atoms"]["core_cells"] == 28  # level 5
    assert load_config(examples / "s2-clusters.toml", ["atoms.core_cells=4"]).data["atoms"]["core_cells"] == 4
