"""What ``meanfield plot`` draws, checked on its figures: the data and labels of a hybrid S^1 run's
density.png and observables.png (the commands run through the CLI's ``main`` in the test's
process, then the same pictures are drawn again with the figures kept)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.pictures import figures_of
from helpers.s1_cases import hybrid_case

import meanfield
from meanfield.cli import main
from meanfield.plotting.focus import residual_floor
from meanfield.plotting.series import DENSITY_DECADES

HYBRID = hybrid_case(128, 2.0, 8)


@pytest.fixture(scope="module")
def hybrid(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hybrid")
    (folder / "case.toml").write_text(HYBRID)
    # the CLI's main in this process (the subject is the pictures, not the process)
    assert main(["run", str(folder / "case.toml"), "--out", str(folder / "run"), "--quiet"]) == 0
    assert main(["plot", str(folder / "run"), "--no-movie", "--log", "--quiet"]) == 0
    assert {"density.png", "observables.png"} <= {p.name for p in (folder / "run" / "plots").iterdir()}
    return folder / "run"


def test_hybrid_density_lines_reach_the_residual_floor_and_label_the_atoms(hybrid, monkeypatch):
    run = meanfield.load_run(hybrid)
    ax = figures_of(monkeypatch, hybrid, log=True)["density"].axes[0]
    assert ax.get_yscale() == "log" and ax.get_ylim()[0] == pytest.approx(residual_floor(2))
    legend = [text.get_text() for text in ax.get_legend().get_texts()]
    last = run.atoms[-1]
    assert legend[-1].startswith("atom (circle area") and f"atoms hold {last.mass:.3g}" in legend[-2]
    masses = sorted(float(text.get_text()) for text in ax.texts)
    np.testing.assert_allclose(masses, np.sort(last.masses), rtol=2e-3)  # 3 significant digits


def test_hybrid_observables_grid_on_one_time_axis(hybrid, monkeypatch):
    run = meanfield.load_run(hybrid)
    figure = figures_of(monkeypatch, hybrid)["observables"]
    panels = {ax.get_title(): ax for ax in figure.axes if ax.get_visible()}
    assert {"atoms", "mass held by atoms", "extreme densities", "order parameter |mean|"} <= set(panels)
    assert len({ax.get_xscale() for ax in panels.values()}) == 1
    rows = {round(ax.get_position().y0, 3) for ax in panels.values()}
    assert len(rows) == -(-len(panels) // 3)  # three a row
    peak = np.nanmax(run.observables["rho_max"])
    assert panels["extreme densities"].get_ylim()[0] >= peak * 10.0**-DENSITY_DECADES / 1.5
    steps = panels["atoms"].get_lines()[0]
    np.testing.assert_array_equal(steps.get_ydata(), run.observables["atom_count"])
