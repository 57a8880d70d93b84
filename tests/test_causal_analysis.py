"""What a causal run's positions draw from each other (the attention map), and its pictures."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.sphere import random_sphere_points

import meanfield
from meanfield.analysis.attention_maps import attention_map, attention_shares
from meanfield.cli import main
from meanfield.model import AttentionModel
from meanfield.plotting.position_figures import fair_shares, first_reaching

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


def _two_heads_five_slices(rng, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, AttentionModel]:
    """n random points on S^2 with random cell areas, five slices' random densities, and a
    softmax model of two heads (random Q, K; weights 1 and -0.5) at beta 3."""
    x = random_sphere_points(rng, n, 3)
    areas = rng.uniform(0.5, 1.5, n) * 4 * np.pi / n
    rho = rng.uniform(0.0, 2.0, (5, n))
    heads = [{"Q": rng.standard_normal((3, 3)) / 2, "K": rng.standard_normal((3, 3)) / 2, "V": np.eye(3),
              "weight": w} for w in (1.0, -0.5)]
    return x, areas, rho, AttentionModel.build(d=3, beta=3.0, heads=heads)


def test_attention_shares_match_their_definition(rng):
    x, areas, rho, model = _two_heads_five_slices(rng, 60)
    a = attention_shares(model, x, areas, rho, method="direct")
    np.testing.assert_allclose(a, _brute_force(model, x, areas, rho), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(a.sum(axis=1), 1.0, rtol=1e-13)
    assert np.all(np.triu(a, 1) == 0.0)


def _regions_brute_force(model: AttentionModel, x: np.ndarray, areas: np.ndarray, rho: np.ndarray, k: int,
                         labels: np.ndarray, regions: int) -> np.ndarray:
    """Slice k's attention over regions by its definition, term by term: a token at x gives
    region r the share sum_{y in r} c_kj K(x, y) rho_j(y) / sum_y ..., averaged over heads and tokens."""
    c = np.append(np.ones(k), 0.5)
    source = areas * (c @ rho[: k + 1])
    parts = np.where(labels < 0, regions, labels)
    total = sum(abs(h.weight) for h in model.heads)
    out = np.zeros(regions + 1)
    for head in model.heads:
        kernel = np.exp(model.beta * (x @ head.Q.T) @ (x @ head.K.T).T)  # (targets, sources)
        for r in range(regions + 1):
            share = (kernel @ np.where(parts == r, source, 0.0)) / (kernel @ source)
            out[r] += abs(head.weight) / total * (share @ (areas * rho[k])) / (areas @ rho[k])
    return out


@pytest.mark.parametrize("method", ["direct", "fast"])
def test_attention_over_regions_matches_its_definition(rng, method):
    """Two heads, five slices, three regions and cells in none: the shares by the definition
    (fast: to its tolerance); they sum to 1, and one region holding every cell gets it all."""
    from meanfield.analysis.attention_maps import attention_over_regions

    x, areas, rho, model = _two_heads_five_slices(rng, 80)
    labels = rng.integers(-1, 3, 80)
    for k in (0, 2, 4):
        shares = attention_over_regions(model, x, areas, rho, k, labels, 3, method=method)
        expected = _regions_brute_force(model, x, areas, rho, k, labels, 3)
        np.testing.assert_allclose(shares, expected, rtol=1e-9 if method == "direct" else 1e-6, atol=1e-12)
        assert shares.sum() == pytest.approx(1.0, rel=1e-12) and shares.min() > 0.05
    whole = attention_over_regions(model, x, areas, rho, 4, np.zeros(80, int), 1, method=method)
    np.testing.assert_allclose(whole, [1.0, 0.0], atol=1e-12)


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


def test_a_causal_run_is_plotted_and_mapped(tmp_path, monkeypatch):
    """What ``meanfield plot RUN`` draws (the command itself on a causal run:
    test_whom_a_position_attends_to_through_the_cli): the whole measure's pictures, saying they
    show the mean over the positions, and the positions' (the (theta, s) images, who clusters
    first, the attention map); the map of the run agrees with its definition on the run's own cells."""
    from helpers.pictures import figures_of

    run = meanfield.run(CASE, out=tmp_path / "run", quiet=True)
    figures = figures_of(monkeypatch, tmp_path / "run")
    written = {p.name for p in (tmp_path / "run" / "again").iterdir()}
    assert {"positions.png", "position_clusters.png", "attention.png", "density.png", "spacetime.png",
            "observables.png"} <= written
    mean = "the mean over the 6 token positions"
    assert mean in figures["density"].get_suptitle() and mean in figures["spacetime"].axes[0].get_title()
    assert mean not in figures["positions"].get_suptitle()  # each position's own density
    a = attention_map(run, 2.0)
    model = AttentionModel.build(d=2, beta=9.0)
    np.testing.assert_allclose(a, _brute_force(model, run.centroids, run.areas, run.density(2.0)), rtol=1e-9)
    with pytest.raises(ValueError, match="not a causal run"):
        attention_map(meanfield.run({**CASE, "model": {"beta": 9.0}, "positions": {}, "initial": {},
                                     "time": {"t_final": 0.5, "outputs": 1}}, out=tmp_path / "plain", quiet=True), 0.0)


def test_slices_of_a_causal_run_on_s2_are_mapped(tmp_path):
    """``meanfield plot`` (its ``main`` in this process) of a causal DG1 run on S^2."""
    case = {**CASE, "mesh": {"sphere": "S2", "resolution": 1}, "scheme": {"kind": "dg1"},
            "initial": {"kind": "expression", "expression": "1 + 0.3*s*z"}, "time": {"t_final": 0.5, "outputs": 1}}
    meanfield.run(case, out=tmp_path / "run", quiet=True)
    assert main(["plot", str(tmp_path / "run"), "--no-movie"]) == 0
    written = {p.name for p in (tmp_path / "run" / "plots").iterdir()}
    assert {"slices_initial.png", "slices_final.png", "position_clusters.png", "attention.png",
            "density_final.png"} <= written


def test_clusters_position_by_position(tmp_path, capsys):
    """``meanfield clusters`` (its ``main`` in this process) of a causal run: the whole token
    distribution's tables and positions.csv.  Under softmax attention an s-independent density stays s-independent, so
    every position has the whole distribution's clusters (an exact invariance)."""
    import pandas as pd

    case = {**CASE, "initial": {"kind": "expression", "expression": "1 + 0.4*cos(3*arctan2(y, x))"},
            "time": {"t_final": 3.0, "outputs": 3}}
    meanfield.run(case, out=tmp_path / "run", quiet=True)
    capsys.readouterr()
    assert main(["clusters", str(tmp_path / "run")]) == 0
    assert "by position" in capsys.readouterr().out
    whole = pd.read_csv(tmp_path / "run" / "clusters" / "clusters.csv")
    by_position = pd.read_csv(tmp_path / "run" / "clusters" / "positions.csv")
    assert sorted(by_position["position"].unique()) == pytest.approx((np.arange(6) + 0.5) / 6)
    assert (whole.groupby("t").size() == 3).all()
    def table(frame: pd.DataFrame) -> np.ndarray:  # ids may differ where equal peaks tie
        return frame.sort_values(["t", "theta"])[["t", "theta", "mass"]].to_numpy()

    for _, rows in by_position.groupby("position"):
        np.testing.assert_allclose(table(rows), table(whole), rtol=1e-9, atol=1e-12)


def test_whom_a_position_attends_to_through_the_cli(tmp_path, monkeypatch):
    """``meanfield plot RUN --attending 0.5,1``: attending.csv gives each chosen position's row
    of the attention map (absolute shares over the source positions, summing to 1) and its
    shares over the whole distribution's clusters (numbered as ``meanfield clusters`` numbers
    them, summing to 1 with the cells in no cluster); the figures: attending.png's bars,
    position_clusters.png coloured by each position's cluster count, and positions.png's
    nearly uniform t = 0 panel on a linear scale of its own showing its s-dependence."""
    import pandas as pd
    from helpers.pictures import figures_of

    from meanfield.analysis.attention_maps import attention_over_regions
    from meanfield.analysis.clusters import analyse_positions, analyse_run

    run = meanfield.run(CASE, out=tmp_path / "run", quiet=True)
    assert main(["plot", str(tmp_path / "run"), "--no-movie", "--attending", "0.5,1", "--log"]) == 0  # in this process
    table = pd.read_csv(tmp_path / "run" / "plots" / "attending.csv")
    assert sorted(table["attending"].unique()) == pytest.approx([run.positions[2], run.positions[5]])  # nearest slices
    history = analyse_run(run, plots=False)
    model = AttentionModel.build(d=2, beta=9.0)
    for (s, t), rows in table.groupby(["attending", "t"]):
        k, i = int(np.argmin(np.abs(run.positions - s))), int(np.argmin(np.abs(run.times - t)))
        over = rows[rows["over"] == "position"]
        np.testing.assert_allclose(over["source"], run.positions[: k + 1], rtol=1e-12)
        np.testing.assert_allclose(over["share"], attention_map(run, t)[k, : k + 1], rtol=1e-9)
        clusters = rows[rows["over"] == "cluster"]
        frame = history.frames[i]
        assert clusters["source"].tolist() == [*history.ids[i].tolist(), -1]
        expected = attention_over_regions(model, run.centroids, run.areas, run.density(t), k, frame.labels,
                                          frame.count)
        np.testing.assert_allclose(clusters["share"], expected, rtol=1e-9, atol=1e-15)
        assert clusters["share"].sum() == pytest.approx(1.0)
        np.testing.assert_allclose(clusters["theta"].to_numpy()[:-1],
                                   np.arctan2(frame.positions[:, 1], frame.positions[:, 0]), atol=1e-12)
    figures = figures_of(monkeypatch, tmp_path / "run", attending=[1.0], log=True)
    bars = figures["attending"].axes[1].patches
    last = table[(table["attending"] == run.positions[-1]) & (table["over"] == "cluster")]
    np.testing.assert_allclose(sorted(b.get_width() for b in bars), sorted(last["share"][last["share"] > 0]),
                               rtol=1e-12)
    counts = np.array([h.counts for h in analyse_positions(run)]).T
    image = figures["position_clusters"].axes[0].collections[0]
    np.testing.assert_array_equal(np.asarray(image.get_array()).reshape(counts.T.shape), counts.T)
    assert len(np.unique(counts)) > 1  # states with different cluster counts, told apart by their colours
    first = figures["positions"].axes[0]
    assert first.get_title() == "t = 0 (own linear scale)"
    start = first.collections[0]
    assert type(start.norm).__name__ == "Normalize"
    assert (start.norm.vmin, start.norm.vmax) == pytest.approx((run.densities[0].min(), run.densities[0].max()))
    assert run.densities[0].max() > 1.2 * run.densities[0].min()  # the s-dependence the panel shows


@pytest.mark.parametrize("args, message", [(["--attending", "1.5"], "--attending 1.5"),
                                           (["--attending", "x"], "--attending x")])
def test_attending_refused_through_the_cli(tmp_path, capsys, args, message):
    """``meanfield plot`` (its ``main`` in this process): exit 2, one line naming the option, no plots."""
    meanfield.run({**CASE, "time": {"t_final": 0.5, "outputs": 1}}, out=tmp_path / "run", quiet=True)
    _refused_plot(capsys, tmp_path / "run", [*args], message)


def test_attending_refused_on_a_run_without_positions(tmp_path, capsys):
    meanfield.run({**CASE, "model": {"beta": 9.0}, "positions": {}, "initial": {}, "time": {"t_final": 0.5,
                                                                                              "outputs": 1}},
                  out=tmp_path / "plain", quiet=True)
    _refused_plot(capsys, tmp_path / "plain", ["--attending", "1"], "only a causal run")


def _refused_plot(capsys, run, args: list[str], message: str) -> None:
    """``meanfield plot RUN --no-movie ARGS``: exit 2, one line with ``message``, nothing on
    stdout, no plots folder."""
    capsys.readouterr()
    code = main(["plot", str(run), "--no-movie", *args])
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and message in lines[0], err
    assert out == "" and not (run / "plots").exists()
