"""The long-time study API and ``meanfield longtime`` (small reference runs)."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from meanfield.cli import main
from meanfield.studies.longtime import long_time_study, reference_history
from meanfield.studies.longtime.study import output_times

CONFIG = {"name": "lt", "mesh": {"sphere": "S1", "resolution": 64}, "model": {"attention": "softmax", "beta": 4.0},
          "initial": {"kind": "expression",
                      "expression": "1 + 0.05*cos(3*arctan2(y, x)) + 0.05*sin(4*arctan2(y, x) + 1)"},
          "time": {"t_final": 150.0, "outputs": 10}}


def test_output_times():
    t = output_times(30.0, t_early=1.0, dt_early=0.25, dt_late=10.0)
    assert t.tolist() == [0.0, 0.25, 0.5, 0.75, 1.0, 11.0, 21.0, 30.0]


def test_reference_history_conserves_mass_and_merges():
    """beta = 4: three clusters form, two merge before t = 150; cluster masses add up to 1 (128
    tokens: the merge at t = 96.1; 102.3 with 512)."""
    h = reference_history(CONFIG, n=128)
    assert max(h.counts) == 3 and h.counts[-1] == 2
    (merge,) = h.merges()
    assert 20.0 < merge.time < 150.0
    assert np.all(np.asarray(h.total) == 1.0)
    assert h.masses[-1].sum() + h.stray[-1] == pytest.approx(1.0, abs=1e-14)


@pytest.mark.slow
def test_study_writes_tables_and_plots(tmp_path):
    study = long_time_study(CONFIG, tmp_path, betas=[4.0, 5.0], n=128)
    names = {p.name for p in study.files}
    assert {"merge-table.csv", "clusters.png", "merge-table.png", "reference-beta4-events.csv"} <= names
    rows = list(csv.DictReader((tmp_path / "merge-table.csv").open()))
    assert [float(r["beta"]) for r in rows] == [4.0, 5.0]
    assert float(rows[0]["merges"]) == pytest.approx(study.rows[0].merges[0], rel=1e-5)


def test_cli_rejects_s2_config(tmp_path, capsys):
    path = tmp_path / "s2.toml"
    path.write_text('[mesh]\nsphere = "S2"\nresolution = 2\n')
    assert main(["longtime", str(path), "--out", str(tmp_path / "out")]) == 2
    assert "mesh.sphere" in capsys.readouterr().err


def test_run_history_of_a_hybrid_run_matches_the_lagrangian_merge(tmp_path):
    """Two initial atoms (0.3 rad apart) over a light uniform density: the hybrid run's merge
    time (from its snapshots) against the same measure moved as weighted tokens."""
    import meanfield
    from meanfield.analysis.longtime import point_set_history
    from meanfield.references.lagrangian_circle import iterate_tokens
    from meanfield.studies.longtime import run_history
    from meanfield.studies.longtime.study import output_times

    beta, masses, gap, rest = 9.0, (0.5, 0.4), 0.3, 0.1
    times = output_times(8.0, t_early=8.0, dt_early=0.25).tolist()
    cfg = {"name": "two", "mesh": {"sphere": "S1", "resolution": 256},
           "model": {"attention": "softmax", "beta": beta}, "initial": {"kind": "uniform"},
           "nonlocal": {"method": "direct"}, "time": {"t_final": 8.0, "outputs": times},
           "atoms": {"initial": [[masses[0], 1.0, 0.0], [masses[1], np.cos(gap), np.sin(gap)]]},
           "output": {"xdmf": False}}
    meanfield.run(cfg, out=tmp_path / "run", quiet=True)
    hybrid = run_history(tmp_path / "run")
    n = 512  # the density as equispaced tokens (spacing 0.012 > delta: strays, not one group), then the atoms
    angles = np.concatenate([2 * np.pi * (np.arange(n) + 0.5) / n, [0.0, gap]])
    weights = np.concatenate([np.full(n, rest / n), masses])
    frames = ((t, a, weights, np.arange(n + 2)) for t, a in iterate_tokens(angles, weights, beta, times))
    reference = point_set_history(frames)
    (merge,) = reference.merges()
    assert 1.0 < merge.time < 7.5
    (hybrid_merge,) = hybrid.merges()
    assert hybrid_merge.time == pytest.approx(merge.time, rel=5e-3)  # measured 4e-4 (256 cells, FV)


def test_clusters_figure_has_a_panel_per_history_in_rows():
    """clusters.png of a study of four betas: the count panel with one line per beta, and the
    trajectories of each beta, three panels a row."""
    from meanfield.analysis.longtime.plots import point_set_history_figure

    h = reference_history({**CONFIG, "time": {"t_final": 20.0, "outputs": 4}}, n=64)
    fig = point_set_history_figure({f"reference beta={b:g}": h for b in (4, 5, 6, 7)})
    assert len(fig.axes) == 5
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == [f"reference beta={b}" for b in (4, 5, 6, 7)]
    assert [ax.get_title() for ax in fig.axes[1:]] == [f"reference beta={b}: clusters" for b in (4, 5, 6, 7)]
    rows = sorted({round(ax.get_position().y0, 3) for ax in fig.axes})
    assert len(rows) == 2
