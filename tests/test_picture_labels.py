"""What the S^2 pictures say: ``meanfield plot``'s maps carry longitude/latitude labels and the
model's parameters in their titles; ``meanfield response``'s influence functions are named as
the docs say and drawn on a diverging colour scale centred on 0 (``response`` through the CLI's
``main`` in this process, the runs that ``plot`` reads through the Python API: the subject is
what they write and draw, not the process; then the figures' data and labels checked)."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from helpers.pictures import figures_of
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from mpi4py import MPI

import meanfield
from meanfield.cli import main
from meanfield.plotting.projections import mollweide

S2_CASE = """name = "s2"
[mesh]
sphere = "S2"
resolution = 1
[model]
beta = 4.0
[initial]
kind = "vmf"
centers = [[0, 0, 1]]
kappas = [4.0]
[time]
t_final = 0.2
outputs = 1
[output]
xdmf = false
"""
DEGREE = "\N{DEGREE SIGN}"


@pytest.fixture(scope="module")
def s2_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("s2")
    (folder / "case.toml").write_text(S2_CASE)
    meanfield.run(folder / "case.toml", out=folder / "run", comm=MPI.COMM_SELF, quiet=True)
    return folder


def test_sphere_maps_have_a_labelled_graticule_and_the_model_in_the_title(s2_run, monkeypatch):
    figures = figures_of(monkeypatch, s2_run / "run")
    figure = figures["density_final"]
    assert figure.get_suptitle() == "run: softmax attention, \N{GREEK SMALL LETTER BETA} = 4   t = 0.2"
    assert figures["observables"].get_suptitle().startswith("run: softmax attention, \N{GREEK SMALL LETTER BETA} = 4")
    mollweide_panel = next(ax for ax in figure.axes if ax.get_title().startswith("Mollweide"))
    labels = {text.get_text(): text.xy for text in mollweide_panel.texts}
    expected = {**{f"{abs(lon)}{DEGREE}{'E' if lon > 0 else 'W' if lon < 0 else ''}": (lon, 0) for lon in
                   (-120, -60, 0, 60, 120)},
                **{f"{abs(lat)}{DEGREE}{'N' if lat > 0 else 'S'}": (-180, lat) for lat in (-60, -30, 30, 60)}}
    assert set(expected) <= set(labels)
    for text, (lon, lat) in expected.items():  # each label where its meridian or parallel is drawn
        np.testing.assert_allclose(labels[text], mollweide(np.radians(lon), np.radians(lat)), atol=1e-12)


@pytest.mark.slow
def test_influence_functions_are_named_and_centred_on_zero(tmp_path, monkeypatch):
    (tmp_path / "case.toml").write_text(S2_CASE)
    observables = ["z", "q=x**2 - y**2", "x*y"]
    args = [a for o in observables for a in ("--observable", o)]
    assert main(["response", str(tmp_path / "case.toml"), *args, "--at", "0.2", "--out", str(tmp_path / "resp"),
                 "--quiet"]) == 0
    names = {p.name for p in (tmp_path / "resp").glob("influence-*.png")}
    assert names == {"influence-z-t0.2.png", "influence-q-t0.2.png", "influence-2-t0.2.png"}  # x*y: its number
    drawn: dict[str, Figure] = {}
    monkeypatch.setattr(Figure, "savefig", lambda self, path, **kw: drawn.setdefault(path.name, self))
    meanfield.response(tmp_path / "case.toml", observables, [0.2], out=tmp_path / "again", quiet=True)
    with xr.open_dataset(tmp_path / "resp" / "influence.nc") as ds:
        for k, name in enumerate(("z", "q", "2")):
            figure = drawn[f"influence-{name}-t0.2.png"]
            reach = float(np.abs(ds[f"influence_{k}"].values).max())
            maps = [c for ax in figure.axes for c in ax.collections if isinstance(c, PolyCollection)]
            assert maps and all(c.get_cmap().name == "RdBu_r" for c in maps)  # a diverging map
            for c in maps:
                assert (c.norm.vmin, c.norm.vmax) == pytest.approx((-reach, reach), rel=1e-12)  # centred on 0
            assert figure.axes[-1].get_ylabel() == "influence function Phi_0"
    z = ds["influence_0"].values
    assert z.min() < 0 < z.max()  # signed: both ends of the scale are used


def test_ensemble_band_on_a_log_axis_stays_whole(tmp_path, monkeypatch):
    """Energies of three draws spanning three decades (mean - std < 0): on the log axis the band is
    the geometric mean times/divided by the geometric std, positive at every t."""
    import pandas

    from meanfield.analysis.ensemble import plot_ensemble

    t = np.array([0.0, 1.0, 2.0])
    energies = {3: [1.0, 2.0, 4.0], 4: [10.0, 20.0, 40.0], 5: [1000.0, 2000.0, 4000.0]}
    table = pandas.DataFrame([{"run": f"r{seed}", "kind": "pde", "status": "done", "model.random.seed": seed,
                               "t": time, "order": 0.1 * seed, "energy": e}
                              for seed, values in energies.items() for time, e in zip(t, values)])
    values = np.array(list(energies.values()))
    assert np.all(values.mean(axis=0) - values.std(axis=0, ddof=1) < 0)  # the old band left the log axis
    drawn: dict[str, Figure] = {}
    monkeypatch.setattr(Figure, "savefig", lambda self, path, **kw: drawn.setdefault("ensemble", self))
    plot_ensemble(table, "model.random.seed", tmp_path / "ens.png")
    energy = next(ax for ax in drawn["ensemble"].axes if ax.get_title().startswith("energy"))
    assert energy.get_yscale() == "log" and "geometric mean" in energy.get_title()
    (band,) = [c for c in energy.collections if isinstance(c, PolyCollection)]
    edge = band.get_paths()[0].vertices[:, 1]
    logs = np.log(values)
    low = np.exp(logs.mean(axis=0) - logs.std(axis=0, ddof=1))
    high = np.exp(logs.mean(axis=0) + logs.std(axis=0, ddof=1))
    assert np.all(edge > 0)
    np.testing.assert_allclose(sorted(set(np.round(edge, 9))), sorted(set(np.round(np.r_[low, high], 9))))
    (mean,) = [line for line in energy.get_lines() if line.get_linewidth() == 2]
    np.testing.assert_allclose(mean.get_ydata(), np.exp(logs.mean(axis=0)), rtol=1e-12)
    order = next(ax for ax in drawn["ensemble"].axes if ax.get_title().startswith("order"))
    assert order.get_yscale() == "linear" and "mean \N{PLUS-MINUS SIGN} std" in order.get_title()


@pytest.mark.slow
def test_retrieval_profiles_are_named_covariances_beside_the_closed_form(tmp_path, monkeypatch, capsys):
    """``meanfield response --retrieval`` in DGR's setting (32 cells, 8 slices): the terminal and
    retrieval.csv name the score "score (8 codewords)" (never "mode 0"), the y axis says R is a
    covariance, the closed form is dashed beside each profile, the minimum is written in the
    title (no annotation beside the markers); outside DGR's setting no closed form is drawn."""
    from helpers.cli import REPO
    from test_retrieval import DGR, rows_of

    from meanfield.config import load_config
    from meanfield.problem import Problem
    from meanfield.references.retrieval import codeword_weights, retrieval_mode, score_modes
    from meanfield.studies.retrieval import SCORE_WEIGHT_CUTOFF, dgr_setting, retrieval

    (tmp_path / "dgr.toml").write_text(DGR.format(sphere="S1", resolution=32, slices=8))
    capsys.readouterr()
    assert main(["response", str(tmp_path / "dgr.toml"), "--retrieval", "--at", "1", "--modes", "1", "--codewords",
                 "8", "--out", str(tmp_path / "out")]) == 0
    stdout = capsys.readouterr().out
    table = stdout.splitlines()
    assert table[0].split()[:2] == ["t", "profile"]
    assert table[1].split()[1:3] == ["mode", "1"] and table[2].split()[1:4] == ["score", "(8", "codewords)"]
    assert "mode 0" not in stdout
    assert {(r["mode"], r["profile"]) for r in rows_of(tmp_path / "out")} == {(1.0, "mode 1"),
                                                                             (0.0, "score (8 codewords)")}
    drawn: dict[str, Figure] = {}
    monkeypatch.setattr(Figure, "savefig", lambda self, path, **kw: drawn.setdefault(path.name, self))
    retrieval(tmp_path / "dgr.toml", [1.0], modes=[1], codewords=8, out=tmp_path / "again", quiet=True)
    (ax,) = drawn["retrieval.png"].axes
    assert "Cov(" in ax.get_ylabel() and not ax.texts  # a covariance; no annotation beside the markers
    assert ax.get_title().startswith("t = 1: score (8 codewords) min ")
    legend = [text.get_text() for text in ax.get_legend().get_texts()]
    assert legend[:2] == ["score (8 codewords)", "mode 1"] and "closed form (DGR)" in legend
    assert not any("mode 0" in text for text in legend)
    last = 1.0 - 1.0 / 16
    weights = codeword_weights(8, score_modes(8, SCORE_WEIGHT_CUTOFF))
    dashed = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert len(dashed) == 2
    for line, mode in zip(dashed, (0, 1)):
        s0 = line.get_xdata()
        expected = retrieval_mode(1.0, s0, 1, 1.0, 1.0, s=last) if mode else \
            sum(w * retrieval_mode(1.0, s0, n, 1.0, 1.0, s=last) for n, w in enumerate(weights, 1))
        np.testing.assert_allclose(line.get_ydata(), expected, rtol=1e-12)
    clustered = Problem(load_config(REPO / "runs" / "examples" / "s1-clustered-prompt-retrieval.toml"))
    lost = Problem(load_config(REPO / "runs" / "examples" / "s1-lost-in-the-middle.toml"))
    assert not dgr_setting(clustered) and dgr_setting(lost)


TOKENS_CASE = """name = "tokens"
[mesh]
sphere = "S2"
resolution = 2
[model]
beta = 4.0
[initial]
kind = "vmf"
centers = [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
kappas = [2.0, 2.0]
[time]
t_final = 3.0
outputs = 1
"""


@pytest.mark.slow
def test_tokens_are_coloured_by_their_density_and_observables_have_no_empty_panel(tmp_path, monkeypatch):
    """A particle run (3000 tokens on S^2) and the pictures ``meanfield plot`` draws: each drawn token is
    coloured by the tokens' density around it (against a count by dot products), on a log scale
    with its colour bar; observables.png has no mass-drift panel (a particle run's mass is exact)
    and no empty panel."""
    from matplotlib.collections import PathCollection

    from meanfield.plotting.sphere_maps import token_radius

    (tmp_path / "case.toml").write_text(TOKENS_CASE)
    meanfield.run_particles(tmp_path / "case.toml", n=3000, out=tmp_path / "run", comm=MPI.COMM_SELF, quiet=True)
    run = meanfield.load_run(tmp_path / "run")
    figures = figures_of(monkeypatch, tmp_path / "run")
    final = figures["tokens_final"]
    assert final.axes[-1].get_ylabel().startswith("token density [1/sr]")
    mollweide_panel = next(ax for ax in final.axes if ax.get_title().startswith("Mollweide"))
    (dots,) = [c for c in mollweide_panel.collections if isinstance(c, PathCollection)]
    assert dots.norm.__class__.__name__ == "LogNorm" and dots.get_cmap().name == "viridis"
    tokens = run.points[-1]
    r = token_radius(len(tokens))
    np.testing.assert_allclose(dots.get_offsets(), mollweide(*_lonlat(tokens)), atol=1e-12)  # all, in order
    counts = (tokens @ tokens.T > np.cos(r)).sum(axis=0)  # each token's neighbours, by dot products
    values = counts / (len(tokens) * 2 * np.pi * (1 - np.cos(r)))
    np.testing.assert_allclose(dots.get_array(), np.clip(values, dots.norm.vmin, dots.norm.vmax), rtol=1e-12)
    assert np.ptp(np.log10(values)) > 1  # clustered: densities over more than a decade, not one black blot
    panels = figures["observables"].axes
    titles = [ax.get_title() for ax in panels]
    assert "mass drift m(t) - m(0)" not in titles and all(ax.get_visible() and ax.get_lines() for ax in panels)


def _lonlat(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.arctan2(points[:, 1], points[:, 0]), np.arcsin(np.clip(points[:, 2], -1, 1))


def test_observable_panels_fill_their_rows():
    """Five panels: three in the first row, the last two widened to fill the second; no hidden panel."""
    from meanfield.plotting.series import time_series

    t = np.linspace(0.0, 2.0, 9)
    obs = {"t": t, "order": t / 2, "energy": 1 + t, "rho_max": np.exp(t), "clusters": np.ones(9),
           "mass": 1 + 1e-13 * t}
    fig = time_series(obs)
    axes = fig.axes
    assert len(axes) == 5 and all(ax.get_visible() for ax in axes)
    spans = [ax.get_subplotspec().colspan for ax in axes]
    assert [len(s) for s in spans] == [2, 2, 2, 3, 3] and spans[3].start == 0 and spans[4].stop == 6
    low, high = axes[3].get_ylim()  # a constant count: whole-number ticks only
    assert [tick for tick in axes[3].get_yticks() if low <= tick <= high] == [1.0]
    assert time_series({"t": t, "order": t / 2, "mass": np.ones(9)}).axes[0].get_title() == "order parameter |mean|"
    assert len(time_series({"t": t, "order": t / 2, "mass": np.ones(9)}).axes) == 1  # an exact mass: no panel


def test_merge_table_of_one_beta_shows_its_states_not_a_lone_dot():
    """merge-table.png of ``meanfield longtime`` with one beta: each metastable state a bar from
    its start to its end (hatched when it lasts past the last output), each merge a labelled line;
    with several betas the times against beta."""
    from meanfield.analysis.longtime.plots import table_figure

    states = [(4, 7.2, 29.44, False), (3, 36.64, 23.36, True)]
    (ax,) = table_figure([9.0], [[36.64]], [states]).axes
    bars = sorted(ax.patches, key=lambda p: -p.get_y())
    assert [round(b.get_y() + b.get_height() / 2) for b in bars] == [4, 3]
    for bar, (_, start, duration, lower) in zip(bars, states):
        assert bar.get_x() == pytest.approx(start) and bar.get_x() + bar.get_width() == pytest.approx(start + duration)
        assert bool(bar.get_hatch()) == lower
    (merge,) = [line for line in ax.get_lines() if line.get_linestyle() == ":"]
    assert merge.get_xdata()[0] == 36.64 and "merge at t = 36.64" in [t.get_text() for t in ax.texts]
    assert ax.get_xscale() == "log" and ax.get_title().startswith("beta = 9")
    several = table_figure([4.0, 9.0], [[80.0], [36.64]], [[(3, 9.0, 71.0, False)], states]).axes
    assert [a.get_xlabel() for a in several] == ["beta", "beta"]
