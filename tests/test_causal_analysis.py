"""What a causal run's positions draw from each other (the attention map), and its pictures."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.cli import cli
from helpers.sphere import random_sphere_points

import meanfield
from meanfield.analysis.causal import attention_map, attention_shares
from meanfield.model import AttentionModel
from meanfield.plotting.causal import fair_shares, first_reaching

CASE = {"name": "causal-pictures", "mesh": {"sphere": "S1", "resolution": 48},
        "model": {"beta": 9.0, "mask": "causal"}, "positions": {"slices": 6},
        "initial": {"kind": "expression", "expression": "1 + 0.4*(1 - s)*cos(3*arctan2(y, x)) + 0.4*s*x"},
        "time": {"t_final": 2.0, "outputs": 4}}


def _brute_force(model: AttentionModel, x: np.ndarray, areas: np.ndarray, rho: np.ndarray) -> np.ndarray:
    """The attention map by its definition, summed term by term (no evaluator, no log-scaling)."""
    M = len(rho)
    c = np.tril(np.ones((M, M)), -1) + 0.5 * np.eye(M)
    total = sum(abs(h.weight) for h in model.heads)
    a = np.zeros((M, M))
    for head in model.heads:
        kernel = np.exp(model.beta * (x @ head.Q.T) @ (x @ head.K.T).T)  # (targets, sources)
        Z = np.array([kernel @ (areas * r) for r in rho])  # (M, targets)
        for k in range(M):
            share = c[k][:, None] * Z / (c[k] @ Z)  # (M, targets)
            a[k] += abs(head.weight) / total * (share @ (areas * rho[k])) / (areas @ rho[k])
    return a


def test_attention_shares_match_their_definition(rng):
    x = random_sphere_points(rng, 60, 3)
    areas = rng.uniform(0.5, 1.5, 60) * 4 * np.pi / 60
    rho = rng.uniform(0.0, 2.0, (5, 60))
    heads = [{"Q": rng.standard_normal((3, 3)) / 2, "K": rng.standard_normal((3, 3)) / 2, "V": np.eye(3),
              "weight": w} for w in (1.0, -0.5)]
    model = AttentionModel.build(d=3, beta=3.0, heads=heads)
    a = attention_shares(model, x, areas, rho, method="direct")
    np.testing.assert_allclose(a, _brute_force(model, x, areas, rho), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(a.sum(axis=1), 1.0, rtol=1e-13)
    assert np.all(np.triu(a, 1) == 0.0)


@pytest.mark.parametrize("method", ["direct", "fast"])
def test_an_s_independent_density_gives_every_earlier_position_its_fair_share(rng, method):
    """Z_j is the same for every slice: a[k, j] = c_kj / (k + 1/2) (1 for j < k, 1/2 for j = k)."""
    x = random_sphere_points(rng, 200, 2)
    areas = np.full(200, 2 * np.pi / 200)
    rho = np.tile(1.0 + 0.5 * x[:, 0] ** 3, (7, 1))
    a = attention_shares(AttentionModel.build(d=2, beta=9.0), x, areas, rho, method=method)
    np.testing.assert_allclose(a, fair_shares(7), rtol=1e-12, atol=1e-15)
    assert fair_shares(3)[2].tolist() == pytest.approx([0.4, 0.4, 0.2])


def test_first_reaching_interpolates_between_outputs():
    times = np.array([0.0, 1.0, 2.0])
    values = np.array([[0.0, 5.0, 0.0], [2.0, 5.0, 0.0], [4.0, 5.0, 1.0]])
    assert first_reaching(times, values, 3.0).tolist()[:2] == [1.5, 0.0]
    assert np.isnan(first_reaching(times, values, 3.0)[2])


def test_a_causal_run_is_plotted_and_mapped(tmp_path):
    """As users run it: ``meanfield plot RUN`` writes the whole measure's pictures and the
    positions' (the (theta, s) images, who clusters first, the attention map); the map of the
    run agrees with its definition on the run's own cells."""
    run = meanfield.run(CASE, out=tmp_path / "run", quiet=True)
    done = cli(["plot", "run", "--no-movie"], tmp_path)
    assert done.returncode == 0, done.stderr
    written = {p.name for p in (tmp_path / "run" / "plots").iterdir()}
    assert {"positions.png", "position_clusters.png", "attention.png", "density.png", "spacetime.png",
            "observables.png"} <= written
    a = attention_map(run, 2.0)
    model = AttentionModel.build(d=2, beta=9.0)
    np.testing.assert_allclose(a, _brute_force(model, run.centroids, run.areas, run.density(2.0)), rtol=1e-9)
    with pytest.raises(ValueError, match="not a causal run"):
        attention_map(meanfield.run({**CASE, "model": {"beta": 9.0}, "positions": {}, "initial": {}},
                                    out=tmp_path / "plain", quiet=True), 0.0)


def test_slices_of_a_causal_run_on_s2_are_mapped(tmp_path):
    case = {**CASE, "mesh": {"sphere": "S2", "resolution": 1}, "scheme": {"kind": "dg1"},
            "initial": {"kind": "expression", "expression": "1 + 0.3*s*z"}, "time": {"t_final": 0.5, "outputs": 1}}
    meanfield.run(case, out=tmp_path / "run", quiet=True)
    done = cli(["plot", "run", "--no-movie"], tmp_path)
    assert done.returncode == 0, done.stderr
    written = {p.name for p in (tmp_path / "run" / "plots").iterdir()}
    assert {"slices_initial.png", "slices_final.png", "position_clusters.png", "attention.png",
            "density_final.png"} <= written


def test_clusters_position_by_position(tmp_path):
    """``meanfield clusters`` of a causal run: the whole token distribution's tables and
    positions.csv.  Under softmax attention an s-independent density stays s-independent, so
    every position has the whole distribution's clusters (an exact invariance)."""
    import pandas as pd

    case = {**CASE, "initial": {"kind": "expression", "expression": "1 + 0.4*cos(3*arctan2(y, x))"},
            "time": {"t_final": 3.0, "outputs": 3}}
    meanfield.run(case, out=tmp_path / "run", quiet=True)
    done = cli(["clusters", "run"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "by position" in done.stdout
    whole = pd.read_csv(tmp_path / "run" / "clusters" / "clusters.csv")
    by_position = pd.read_csv(tmp_path / "run" / "clusters" / "positions.csv")
    assert sorted(by_position["position"].unique()) == pytest.approx((np.arange(6) + 0.5) / 6)
    assert (whole.groupby("t").size() == 3).all()
    def table(frame: pd.DataFrame) -> np.ndarray:  # ids may differ where equal peaks tie
        return frame.sort_values(["t", "theta"])[["t", "theta", "mass"]].to_numpy()

    for _, rows in by_position.groupby("position"):
        np.testing.assert_allclose(table(rows), table(whole), rtol=1e-9, atol=1e-12)
