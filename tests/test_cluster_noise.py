"""Clusters of tokens with the token-count-aware bandwidth and prominence (analysis.clusters.noise)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from meanfield.analysis.clusters import analyse_fields, analyse_run
from meanfield.analysis.clusters.cells import AnalysisMesh
from meanfield.analysis.clusters.fields import CellAverages
from meanfield.analysis.clusters.noise import (
    MAX_PROMINENCE,
    NOISE_Z,
    noise_level,
    token_bandwidth,
    token_prominence,
)
from meanfield.analysis.clusters.particles import TokenField
from meanfield.initial import make_initial_density
from meanfield.mesh import icosphere
from meanfield.particles.sampling import sample_initial, uniform_sphere

EXAMPLE = Path(__file__).resolve().parents[1] / "runs" / "examples" / "s2-clustering.toml"
CONFIG = tomllib.loads(EXAMPLE.read_text())


def token_count(spec: dict, n: int, seed: int) -> int:
    """Clusters of n i.i.d. tokens of the density ``spec`` at t = 0, with the analysis defaults."""
    x = sample_initial(make_initial_density(spec, 3), n, np.random.default_rng(seed))
    run = SimpleNamespace(times=np.array([0.0]), points=x[None], config=CONFIG)
    return int(analyse_run(run, plots=False).counts[0])


def pde_count(spec: dict) -> int:
    """Clusters of the exact density at the cell centroids of the example's mesh (the PDE side)."""
    mesh = AnalysisMesh(icosphere(CONFIG["mesh"]["resolution"]))
    rho = make_initial_density(spec, 3)(mesh.centroids)
    return int(analyse_fields([(0.0, CellAverages(mesh, rho))], "S2").counts[0])


def test_noise_level_matches_monte_carlo():
    """The predicted relative spread of the estimate equals the spread over independent samples
    (the estimate at a point does not depend on the analysis mesh: the icosahedron is enough)."""
    mesh = AnalysisMesh(icosphere(0))
    n, h, x0 = 2000, 0.3, np.array([0.0, 0.0, 1.0])
    values = [TokenField(mesh, uniform_sphere(np.random.default_rng(s), n, 3), bandwidth=h).density(x0)
              for s in range(300)]
    uniform = 1.0 / (4.0 * np.pi)
    assert np.mean(values) == pytest.approx(uniform, rel=0.01)
    # 300 samples: the standard deviation is known to about 4% (1 / sqrt(2 * 300))
    assert np.std(values) / uniform == pytest.approx(noise_level(n, 3, h, uniform), rel=0.15)


def test_defaults_scale_with_n():
    assert token_bandwidth(10_000, 3, 0.01) == pytest.approx(10_000 ** (-1 / 6))
    assert token_bandwidth(10**12, 3, 0.05) == 0.05  # never below one cell
    assert token_bandwidth(10_000, 2, 0.001) == pytest.approx(10_000 ** (-1 / 5))
    uniform = 1.0 / (4.0 * np.pi)
    small = token_prominence(10_000, 3, token_bandwidth(10_000, 3, 0.0), uniform, 0.01)
    large = token_prominence(10**8, 3, token_bandwidth(10**8, 3, 0.0), uniform, 0.01)
    assert 0.01 < small < 0.2 and large == 0.01  # the noise term vanishes as n grows
    few = token_prominence(20, 3, token_bandwidth(20, 3, 0.0), uniform, 0.01)
    assert NOISE_Z * noise_level(20, 3, token_bandwidth(20, 3, 0.0), uniform) > 1.0  # noise above the peaks
    assert few == MAX_PROMINENCE < 1.0  # still a prominence: clusters apart by empty space separate


@pytest.mark.parametrize("n", [10_000, 20_000])
def test_broad_bumps_count_no_noise_basins(n):
    """s2-clustering's three broad bumps: their dips (2.5%) lie below the sampling noise of
    10-20k tokens, so the tokens show one significant cluster (the PDE's density shows three),
    never the dozens of noise basins of a one-cell bandwidth."""
    assert pde_count(CONFIG["initial"]) == 3
    assert [token_count(CONFIG["initial"], n, seed) for seed in (0, 1)] == [1, 1]


@pytest.mark.parametrize("n", [10_000, 20_000])
def test_tight_clusters_each_counted(n):
    spec = {"kind": "vmf", "centers": [[0, 0, 1.0], [1, 0, 0], [0, -1, 0], [-1, 0, 0], [0, 0, -1]],
            "kappas": [400.0] * 5, "weights": [1.0] * 5}
    assert pde_count(spec) == 5
    assert token_count(spec, n, 0) == 5


@pytest.mark.parametrize("n", [10_000, 20_000])
def test_resolved_bumps_agree_with_pde(n):
    """Bumps whose dips exceed the noise (kappa = 10 at the example's centres): tokens and the
    PDE side count the same three clusters."""
    spec = dict(CONFIG["initial"], kappas=[10.0] * 3)
    assert pde_count(spec) == 3
    assert [token_count(spec, n, seed) for seed in (0, 1)] == [3, 3]


def test_particle_diagnostics_count_no_noise_basins(tmp_path):
    """The symptom end to end: diagnostics.csv of 10k tokens of s2-clustering at t = 0."""
    from mpi4py import MPI

    from meanfield.analysis.diagnostics import write_diagnostics
    from meanfield.config import load_config
    from meanfield.drivers.particles import run_particles

    config = load_config(EXAMPLE, ["time.t_final=0.5", "time.outputs=1"])
    run = run_particles(config, n=10_000, seed=0, out=tmp_path / "p", comm=MPI.COMM_SELF, quiet=True)
    result = write_diagnostics(run.path)
    assert list(result["clusters"]) == [1, 1]
    assert (run.path / "diagnostics.csv").read_text().splitlines()[1].split(",")[1] == "1"
