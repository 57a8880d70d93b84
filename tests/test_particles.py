"""Particle simulator: samplers, RK4 order, agreement with the PDE's field, the mean-field
limit (first-moment error ~ n^-1/2 against the PDE), rank-count independence, run directory."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.sphere import random_sphere_points
from scipy import integrate, stats

from meanfield.analysis.diagnostics import count_clusters, write_diagnostics
from meanfield.config import ConfigError, load_config
from meanfield.drivers.particles import build_particles, run_particles
from meanfield.initial import make_initial_density
from meanfield.mesh import CellLocator, circle, icosphere
from meanfield.model import AttentionModel
from meanfield.nonlocal_field import make_evaluator
from meanfield.observables import moment_observables
from meanfield.particles import ParticleSystem, advance, attention_field, rk4_step, sample_initial, token_block
from meanfield.particles.sampling import mesh_sampler, vmf
from meanfield.problem import Problem
from meanfield.studies.validation import PDEReference, fit_slope

ALPHA = 1e-3  # significance of the goodness-of-fit tests (fixed seeds)


def _chi2_pvalue(counts: np.ndarray, probs: np.ndarray) -> float:
    return float(stats.chisquare(counts, counts.sum() * probs / probs.sum()).pvalue)


# --- samplers ---------------------------------------------------------------------------

def test_uniform_s2_height_is_uniform():
    x = sample_initial(make_initial_density({"kind": "uniform"}, 3), 20000, np.random.default_rng(1))
    assert stats.kstest(x[:, 2], stats.uniform(-1, 2).cdf).pvalue > ALPHA  # Archimedes


@pytest.mark.parametrize("d,kappa", [(4, 3.0), (3, 10.0), (2, 1.5), (5, 0.0)])
def test_vmf_cosine_marginal(d, kappa):
    """<mu, x> has density proportional to exp(kappa t) (1 - t^2)^((d-3)/2)."""
    mu = np.zeros(d)
    mu[0] = 1.0
    x = vmf(np.random.default_rng(2), 20000, mu, kappa)
    assert np.allclose(np.linalg.norm(x, axis=1), 1.0)
    # in the angle phi = arccos t the density is proportional to exp(kappa cos phi) sin^(d-2) phi
    phi = np.linspace(0, np.pi, 200001)
    cdf = integrate.cumulative_trapezoid(np.exp(kappa * (np.cos(phi) - 1)) * np.sin(phi) ** (d - 2), phi, initial=0.0)
    cdf /= cdf[-1]
    angles = np.arccos(np.clip(x @ mu, -1, 1))
    assert stats.kstest(angles, lambda s: np.interp(s, phi, cdf)).pvalue > ALPHA
    # the tangential direction is uniform: its mean vanishes
    tangent = x[:, 1:] / np.linalg.norm(x[:, 1:], axis=1)[:, None]
    assert np.all(np.abs(tangent.mean(axis=0)) < 4 / np.sqrt(len(x)))


def _angle_bins(points: np.ndarray, density, bins: int = 40) -> tuple[np.ndarray, np.ndarray]:
    edges = np.linspace(-np.pi, np.pi, bins + 1)
    counts, _ = np.histogram(np.arctan2(points[:, 1], points[:, 0]), edges)
    s = np.linspace(-np.pi, np.pi, 40 * bins + 1)
    f = density(np.stack([np.cos(s), np.sin(s)], axis=1))
    probs = np.array([np.trapezoid(f[40 * i: 40 * i + 41], s[40 * i: 40 * i + 41]) for i in range(bins)])
    return counts, probs


@pytest.mark.parametrize("spec", [
    {"kind": "vmf", "centers": [[1, 0], [0, -1]], "kappas": [4.0, 1.0], "weights": [0.3, 0.7]},
    {"kind": "harmonic", "degree": 3, "amplitude": 0.1, "phase": 0.4},
    {"kind": "expression", "expression": "1 + 0.8*x*y + 0.5*y"},
])
def test_s1_samplers_match_density(spec):
    density = make_initial_density(spec, 2)
    x = sample_initial(density, 20000, np.random.default_rng(3))
    counts, probs = _angle_bins(x, density)
    assert _chi2_pvalue(counts, probs) > ALPHA


@pytest.mark.parametrize("sampler", ["rejection", "mesh"])
def test_s2_harmonic_samplers_match_cell_masses(sampler):
    """Histogram on the cells of an icosphere against the cells' masses of the density."""
    from meanfield.sphere import cell_averages, cell_measure

    density = make_initial_density({"kind": "harmonic", "degree": 2, "order": 1, "amplitude": 0.12}, 3)
    mesh = icosphere(2)
    x = sample_initial(density, 40000, np.random.default_rng(4), sampler, mesh)
    vertices = mesh.points[mesh.cells]
    masses = cell_averages(density, vertices)[1] * cell_measure(vertices)
    counts = np.bincount(CellLocator(mesh).locate(x), minlength=len(mesh.cells))
    assert _chi2_pvalue(counts, masses) > ALPHA


@pytest.mark.parametrize("mesh", [icosphere(1), circle(16)], ids=["S2", "S1"])
def test_mesh_sampler_stays_in_cells(mesh):
    """Each token lies in the cell the sampler drew for it: the sampler's first draw is the
    cells (by mass), so the same seed reproduces them, and the locator must find each token
    in exactly that cell."""
    from meanfield.sphere import cell_averages, cell_measure

    d = mesh.points.shape[1]
    density = make_initial_density({"kind": "expression", "expression": "1 + (x > 0.3)"}, d)
    n = 3000
    x = mesh_sampler(np.random.default_rng(5), n, density, mesh)
    assert np.allclose(np.linalg.norm(x, axis=1), 1.0, rtol=0, atol=1e-14)
    vertices = mesh.points[mesh.cells]
    masses = cell_averages(density, vertices)[1] * cell_measure(vertices)
    drawn = np.random.default_rng(5).choice(len(masses), size=n, p=masses / masses.sum())
    assert np.array_equal(CellLocator(mesh).locate(x), drawn)


# --- integrator and field -----------------------------------------------------------------

def test_rk4_is_fourth_order(rng):
    model = AttentionModel(d=3, beta=2.0)
    x0 = random_sphere_points(rng, 24, 3)
    system = ParticleSystem(attention_field(make_evaluator(model)), np.full(24, 1 / 24))
    ref, _ = advance(system.velocity, x0, 0.0, 1.0, 1 / 256)
    errors = [np.abs(advance(system.velocity, x0, 0.0, 1.0, dt)[0] - ref).max() for dt in (0.25, 0.125, 0.0625)]
    orders = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    assert np.all((orders > 3.6) & (orders < 4.4)), orders


def test_rk4_step_drift_is_small(rng):
    model = AttentionModel(d=3, beta=1.0)
    x = random_sphere_points(rng, 30, 3)
    system = ParticleSystem(attention_field(make_evaluator(model)), np.full(30, 1 / 30))
    drift = np.abs(1 - np.linalg.norm(rk4_step(system.velocity, x, 0.05), axis=1)).max()
    assert drift < 1e-7
    assert advance(system.velocity, x, 0.0, 0.5, 0.05)[1].max_drift < 1e-7


def test_particle_velocity_equals_pde_velocity():
    """Tokens at the cell centroids with the cell masses: same X as the PDE's field (both take a
    NUFFT: direct sums at the mesh's points are off by default, nonlocal.direct_sums)."""
    from mpi4py import MPI

    from meanfield.drivers.pde import build_simulation

    config = load_config({"mesh": {"sphere": "S2", "resolution": 2}, "model": {"beta": 3.0},
                          "output": {"xdmf": False}})
    sim = build_simulation(config, MPI.COMM_SELF)
    points, weights = sim.scheme.measure(sim.state)
    X_pde = sim.scheme.velocity(points, points, weights)
    problem = Problem(config)
    evaluator = make_evaluator(problem.model(problem.particles.d), MPI.COMM_SELF, problem.field.method,
                               problem.field.tol)
    X_particles = ParticleSystem(attention_field(evaluator), weights).velocity(points)
    assert np.abs(X_pde).max() > 1e-2
    assert np.abs(X_particles - X_pde).max() < 1e-12


# --- mean-field limit --------------------------------------------------------------------

def _first_moment_slope(sphere: str, resolutions: tuple[int, int], ns: list[int], seeds: int, tmp_path) -> float:
    """Slope of the RMS (over seeds) first-moment error at t = 2 against the PDE's extrapolated moments."""
    from mpi4py import MPI

    from meanfield.drivers.pde import run

    centers = [[1, 0], [-0.5, 0.8]] if sphere == "S1" else [[0, 0, 1], [1, 0, 0]]
    base = {"name": "mf", "mesh": {"sphere": sphere},
            "model": {"attention": "softmax", "beta": 1.0},
            "initial": {"kind": "vmf", "centers": centers, "kappas": [2.0, 2.0], "weights": [0.6, 0.4]},
            "time": {"t_final": 2.0, "outputs": [2.0]}, "nonlocal": {"method": "fast", "tol": 1e-12},
            "particles": {"dt": 0.1}, "output": {"xdmf": False}}
    coarse, fine = (run(load_config(base, [f"mesh.resolution={r}"]), out=tmp_path / f"pde{r}",
                        comm=MPI.COMM_SELF, quiet=True) for r in resolutions)
    ref = PDEReference(coarse, fine).observables(2.0)
    d = 2 if sphere == "S1" else 3
    config = load_config(base)
    rms = []
    for n in ns:
        errors = []
        for seed in range(seeds):
            sim = build_particles(config, n, seed, MPI.COMM_SELF)
            x, report = advance(sim.system.velocity, sim.x, 0.0, 2.0, sim.dt)
            mean = moment_observables(None, x, sim.system.weights)
            errors.append(np.linalg.norm([mean[f"mean_{k}"] - ref[f"mean_{k}"] for k in range(d)]))
        rms.append(np.sqrt(np.mean(np.square(errors))))
    return fit_slope(ns, rms)


@pytest.mark.slow
def test_mean_field_limit_s1(tmp_path):
    slope = _first_moment_slope("S1", (512, 1024), [250 * 2**k for k in range(7)], 4, tmp_path)
    assert -0.65 <= slope <= -0.35, slope


@pytest.mark.slow
def test_mean_field_limit_s2(tmp_path):
    slope = _first_moment_slope("S2", (2, 3), [250 * 2**k for k in range(5)], 4, tmp_path)
    assert -0.65 <= slope <= -0.35, slope


# --- distribution over ranks, runs, input errors ---------------------------------------------

def test_token_blocks_partition():
    for n, size in [(10, 3), (2, 4), (1000, 7)]:
        blocks = [token_block(n, r, size) for r in range(size)]
        assert blocks[0].start == 0 and blocks[-1].stop == n
        assert all(a.stop == b.start for a, b in zip(blocks, blocks[1:]))


@pytest.mark.mpi
def test_trajectories_independent_of_rank_count(parallel_comm):
    comm = parallel_comm
    from mpi4py import MPI

    config = load_config({"mesh": {"sphere": "S2"}, "model": {"beta": 2.0},
                          "particles": {"dt": 0.05, "d": 4},
                          "initial": {"kind": "vmf", "centers": [[0, 0, 0, 1], [1, 0, 0, 0]], "kappas": [3.0, 1.0]}})
    finals = []
    for c in (comm, MPI.COMM_SELF):
        sim = build_particles(config, 37, 11, c)
        sim.x, _ = advance(sim.system.velocity, sim.x, 0.0, 0.5, sim.dt)
        snapshot = sim.snapshot()  # collective: every rank of c gathers
        finals.append(snapshot["points"] if snapshot is not None else None)
    if comm.rank == 0:
        assert finals[0].shape == (37, 4)
        assert np.abs(finals[0] - finals[1]).max() < 1e-12


def test_particle_run_directory(tmp_path):
    from mpi4py import MPI

    config = {"name": "p", "mesh": {"sphere": "S1", "resolution": 64}, "model": {"beta": 1.0},
              "initial": {"kind": "harmonic", "degree": 2, "amplitude": 0.1},
              "time": {"t_final": 0.4, "outputs": 2}, "particles": {"dt": 0.1}}
    run = run_particles(config, n=300, seed=2, out=tmp_path / "p", comm=MPI.COMM_SELF, quiet=True)
    assert run.points.shape == (3, 300, 2) and np.allclose(run.times, [0, 0.2, 0.4])
    assert list(run.observables) == ["t", "mass", "mean_0", "mean_1", "order", "m2_00", "m2_01", "m2_11",
                                     "energy", "mean_inner_product", "clustered_fraction", "clusters", "rho_min",
                                     "rho_max", "dt", "wall"]
    assert np.allclose(run.observables["mass"], 1.0)
    assert run.metadata["status"] == "completed" and run.metadata["n"] == 300
    assert not (tmp_path / "p" / "diagnostics.csv").exists()  # the driver's run has no analysis; the API's has
    write_diagnostics(run.path)
    assert (tmp_path / "p" / "diagnostics.csv").is_file() and (tmp_path / "p" / "inner_products.png").is_file()
    again = run_particles(config, n=300, seed=2, out=tmp_path / "q", comm=MPI.COMM_SELF, quiet=True)
    assert np.array_equal(run.points, again.points)


@pytest.mark.parametrize("argv,field", [
    (["--n", "0"], "particles.n"),
    (["--n", "10", "--set", "particles.bogus=1"], "particles.bogus"),
    (["--n", "10", "--set", "particles.sampler=exact"], "particles.sampler"),
])
def test_bad_input_is_refused_naming_the_field(tmp_path, capsys, argv, field):
    from meanfield.cli import main

    cfg = tmp_path / "c.toml"
    cfg.write_text('[mesh]\nsphere = "S1"\n[initial]\nkind = "harmonic"\n')
    assert main(["particles", str(cfg), "--out", str(tmp_path / "o"), *argv]) == 2
    assert field in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_particles_command_writes_the_diagnostics_after_the_run(tmp_path):
    from meanfield.cli import main

    cfg = tmp_path / "c.toml"
    cfg.write_text('[mesh]\nsphere = "S1"\nresolution = 64\n[time]\nt_final = 0.2\noutputs = 1\n'
                   '[particles]\ndt = 0.1\n')
    assert main(["particles", str(cfg), "--n", "50", "--out", str(tmp_path / "p"), "--quiet"]) == 0
    assert (tmp_path / "p" / "diagnostics.csv").is_file() and (tmp_path / "p" / "inner_products.png").is_file()
    assert main(["resume", str(tmp_path / "p"), "--t-final", "0.4", "--quiet"]) == 0
    last = (tmp_path / "p" / "diagnostics.csv").read_text().splitlines()[-1]
    assert float(last.split(",")[0]) == pytest.approx(0.4)  # written again for the resumed run


def test_cluster_count(rng):
    centers = random_sphere_points(rng, 3, 3)
    x = np.concatenate([c + 1e-3 * rng.standard_normal((200, 3)) for c in centers] + [random_sphere_points(rng, 5, 3)])
    x /= np.linalg.norm(x, axis=1)[:, None]
    assert count_clusters(x, eps=1e-3, min_fraction=0.05) == 3


def test_config_refuses_bad_particle_count():
    with pytest.raises(ConfigError, match="particles.n"):
        load_config(None, ["particles.n=-3"])


def test_tokens_in_another_dimension_start_uniform_by_default():
    """particles.d other than the sphere's without [initial]: uniform on S^{d-1} (the sphere's vMF
    centres are 3-vectors); a given [initial] or the sphere's own d keep theirs."""
    assert load_config({"particles": {"d": 8}}).data["initial"] == {"kind": "uniform"}
    assert load_config(None, ["particles.d=5"]).data["initial"] == {"kind": "uniform"}
    assert load_config({"particles": {"d": 3}}).data["initial"]["kind"] == "vmf"
    given = {"particles": {"d": 4}, "initial": {"kind": "vmf", "centers": [[0, 0, 0, 1]], "kappas": [2.0]}}
    assert load_config(given).data["initial"]["centers"] == [[0, 0, 0, 1]]
    assert load_config({"particles": {"d": 4}}, ['initial.kind="uniform"']).data["initial"]["kind"] == "uniform"
    density = Problem(load_config({"particles": {"d": 8, "n": 400}})).initial(8)
    x = sample_initial(density, 400, np.random.default_rng(0))
    assert x.shape == (400, 8) and np.allclose(np.linalg.norm(x, axis=1), 1.0)
    assert np.abs(x.mean(axis=0)).max() < 4 / np.sqrt(400)  # uniform: mean 0 within 4 sigma per coordinate
