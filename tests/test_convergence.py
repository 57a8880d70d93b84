"""The convergence machinery: nested transfer, exact solutions, orders, dt ladder, CLI under MPI."""

from __future__ import annotations

import numpy as np
import pytest

from meanfield.config import load_config
from meanfield.mesh import circle, icosphere
from meanfield.problem import Problem
from meanfield.references.exact import exact_solution, growth_rate
from meanfield.sphere import cell_averages
from meanfield.studies.convergence import (
    ConvergenceError,
    coarsen,
    convergence_study,
    final_rows,
    level_of,
    parse_levels,
    read_csv,
)

S1_BUMP = {"kind": "vmf", "centers": [[1.0, 0.3]], "kappas": [4.0]}


def _rotation_s1(kind: str = "dg1", **time) -> dict:
    return {"name": "rot", "mesh": {"sphere": "S1"}, "model": {"velocity": "rotation"}, "initial": S1_BUMP,
            "time": {"t_final": 1.0, "outputs": 2, **time}, "scheme": {"kind": kind}, "output": {"xdmf": False}}


@pytest.mark.parametrize("sphere", ["S2", "S1"])
def test_coarsen_is_the_parent_average(sphere) -> None:
    """Averages over children, transferred, equal the parents' averages (and mass is kept)."""
    f = lambda x: np.exp(np.sin(3 * x[:, 0]) + x[:, 1])
    coarse, fine = (icosphere(2), icosphere(3)) if sphere == "S2" else (circle(16), circle(32))

    def averages(raw):
        v = raw.points[raw.cells]
        area = np.linalg.norm(np.cross(v[:, 1] - v[:, 0], v[:, 2] - v[:, 0]), axis=1) / 2 if sphere == "S2" \
            else np.linalg.norm(v[:, 1] - v[:, 0], axis=1)
        return cell_averages(f, v)[1], area

    (a_c, _), (a_f, area_f) = averages(coarse), averages(fine)
    moved, area = coarsen(a_f[None], area_f, sphere)
    assert moved.shape == (1, len(a_c))
    np.testing.assert_allclose(moved[0] @ area, a_f @ area_f, rtol=1e-14)
    assert np.abs(moved[0] - a_c).max() < 0.05 * np.abs(a_c).max()  # same regions, O(h^2) apart


def test_levels_and_ladder_helpers() -> None:
    assert parse_levels("3:6") == [3, 4, 5, 6]
    assert parse_levels("2,4") == [2, 4]
    with pytest.raises(ConvergenceError):
        parse_levels("5:5")
    assert level_of("S2", 20 * 4**5) == 5 and level_of("S1", 256) == 8
    with pytest.raises(ConvergenceError):
        level_of("S2", 1000)


def test_growth_rates_match_model_md() -> None:
    from scipy.special import iv, spherical_in

    beta = 4.0
    assert np.isclose(growth_rate(2, 3, beta, False), 9 * iv(3, beta) / beta)
    assert np.isclose(growth_rate(2, 3, beta, True), 9 * iv(3, beta) / (beta * iv(0, beta)))
    assert np.isclose(growth_rate(3, 2, beta, False), 6 * spherical_in(2, beta) / beta)
    assert np.isclose(growth_rate(3, 2, beta, True), 6 * spherical_in(2, beta) / (beta * spherical_in(0, beta)))


def test_exact_solutions_of_the_cases() -> None:
    rot = exact_solution(Problem(load_config(_rotation_s1())))
    x = np.array([[1.0, 0.0]])
    y = np.array([[np.cos(0.7), np.sin(0.7)]])
    assert np.isclose(rot(0.7, y)[0], rot(0.0, x)[0])  # transported counter-clockwise
    assert exact_solution(Problem(load_config({"model": {"attention": "softmax"}}))) is None  # vmf under attention
    uniform = exact_solution(Problem(load_config({"initial": {"kind": "uniform"}})))
    assert np.allclose(uniform(3.0, icosphere(0).points), 1 / (4 * np.pi))


def test_linear_regime_exact_reference(tmp_path) -> None:
    """A small harmonic mode under USA grows at gamma_k (time.dt_max: the CFL step of a 1e-4 field is huge)."""
    config = load_config({"name": "lin", "mesh": {"sphere": "S1"}, "model": {"attention": "unnormalized", "beta": 4.0},
                          "initial": {"kind": "harmonic", "degree": 3, "amplitude": 1e-4},
                          "time": {"t_final": 0.3, "outputs": 1, "dt_max": 0.005}, "scheme": {"kind": "dg1"},
                          "output": {"xdmf": False}})
    rows = convergence_study(config, [5, 6], tmp_path, reference="exact")
    growth = 1e-4 * (np.exp(growth_rate(2, 3, 4.0, False) * 0.3) - 1) / np.sqrt(np.pi) * 4  # L1 of the change
    err = [r.error for r in final_rows(rows) if r.norm == "L1"]
    assert err[-1] < 1e-2 * growth


def test_dt_ladder_shows_third_order(tmp_path) -> None:
    """Fixed mesh (64 cells), dt halved: SSP-RK3's third order (the spatial error cancels)."""
    config = load_config({**_rotation_s1(dt=0.04), "mesh": {"sphere": "S1", "resolution": 64}})
    rows = convergence_study(config, [0, 1, 2, 3], tmp_path, reference="finest", axis="dt")
    orders = [r.order for r in final_rows(rows) if r.norm == "L1" and np.isfinite(r.order)]
    assert len(orders) == 2 and min(orders) > 2.8, orders
    assert (tmp_path / "convergence.png").stat().st_size > 0


def test_reference_run_dir_and_errors(tmp_path) -> None:
    config = load_config(_rotation_s1())
    finest = convergence_study(config, [5, 6, 7], tmp_path / "a", reference="finest")
    by_dir = convergence_study(config, [5, 6], tmp_path / "b", reference=tmp_path / "a" / "level7")
    pick = lambda rows, lvl: [r.error for r in rows if r.level == lvl and r.norm == "L1"]
    np.testing.assert_allclose(pick(by_dir, 5), pick(finest, 5), rtol=1e-12)
    with pytest.raises(ConvergenceError, match="no exact solution"):
        convergence_study(load_config({"mesh": {"sphere": "S1"}, "initial": S1_BUMP}), [4, 5], tmp_path / "c")


@pytest.mark.mpi
def test_cli_under_mpi_matches_one_rank(parallel_comm, tmp_path) -> None:
    """`meanfield convergence` on all ranks writes the CSV and PNG with the numbers of a 1-rank study."""
    comm = parallel_comm
    from mpi4py import MPI

    from meanfield.cli import main

    root = tmp_path  # the fixture shares rank 0's folder
    config = root / "case.toml"
    if comm.rank == 0:
        config.write_text('name = "rot"\n[mesh]\nsphere = "S2"\n[model]\nvelocity = "rotation"\n'
                          '[initial]\nkind = "vmf"\ncenters = [[1.0, 0.0, 0.3]]\nkappas = [4.0]\n'
                          '[time]\nt_final = 0.5\noutputs = 1\n[scheme]\nkind = "dg1"\n')
    comm.barrier()
    assert main(["convergence", str(config), "--levels", "1:3", "--out", str(root / "world"), "--quiet"]) == 0
    assert (root / "world" / "convergence.png").is_file()
    assert (root / "world" / "level3" / "density-dg1.xdmf").is_file()  # DG1 ParaView output
    alone = convergence_study(load_config(config), [1, 2, 3], tmp_path / f"self{comm.rank}", comm=MPI.COMM_SELF)
    world = read_csv(root / "world" / "convergence.csv")
    assert len(world) == len(alone)
    for a, b in zip(world, alone):
        assert (a.level, a.norm, a.time) == (b.level, b.norm, b.time)
        assert np.isclose(a.error, b.error, rtol=1e-9, atol=1e-15), (a, b)


def test_plot_title_names_case_scheme_and_reference(tmp_path) -> None:
    from meanfield.studies.convergence.errors import OBSERVABLE_NORMS, Row
    from meanfield.studies.convergence.plots import plot, study_title

    rows = [Row(level, 2**level, 2 * np.pi / 2**level, 0.01, norm, 1.0, 0.5**level, np.nan)
            for level in (4, 5, 6) for norm in ("L1", OBSERVABLE_NORMS[0])]
    title = study_title("rot", "dg1", "finest")
    fig = plot(rows, tmp_path / "c.png", title=title)
    assert fig.get_suptitle() == "rot: scheme dg1, errors against the finest level (mesh ladder)"
    assert study_title("rot", "fv", "exact", axis="dt") == \
        "rot: scheme fv, errors against the exact solution (time step ladder)"
    assert study_title("rot", "fv", tmp_path / "ref").endswith(f"against the run {tmp_path / 'ref'} (mesh ladder)")
    assert [ax.get_xlabel() for ax in fig.axes] == ["h", "h"]


CAUSAL_CASE = ('name = "causal"\n[mesh]\nsphere = "S1"\nresolution = 32\n[model]\nbeta = 4.0\nmask = "causal"\n'
               '[initial]\nkind = "expression"\nexpression = "1 + 0.5*s*cos(arctan2(y, x)) + 0.3*(1 - s)*y"\n'
               '[time]\nt_final = 1.0\noutputs = 2\n')


def test_slices_ladder_through_the_cli(tmp_path) -> None:
    """``meanfield convergence --slices``: the whole token distribution's moments converge in
    1/M at second order up to a logarithm (MODEL.md, causal attention), Richardson orders from
    the finest M (measured 1.66, 1.71 on 32 cells, and the same to three digits on 64: the error
    in 1/M is not the mesh's)."""
    from meanfield.cli import main
    from meanfield.studies.convergence import read_csv

    (tmp_path / "case.toml").write_text(CAUSAL_CASE)
    assert main(["convergence", str(tmp_path / "case.toml"), "--slices", "4,8,16,32", "--out", str(tmp_path / "study"),
                 "--quiet"]) == 0  # the CLI's main in this process: the subject is the study it writes
    assert sorted(p.name for p in (tmp_path / "study").iterdir() if p.is_dir()) == \
        ["slices16", "slices32", "slices4", "slices8"]
    rows = [r for r in read_csv(tmp_path / "study" / "convergence.csv") if r.time == 1.0]
    moments = {r.level: r for r in rows if r.norm == "moments"}
    assert sorted(moments) == [4, 8, 16]
    assert 1.6 < moments[4].order < 2.6 and 1.6 < moments[8].order < 2.6
    assert moments[4].error > moments[8].error > moments[16].error


@pytest.mark.parametrize("case, args, field", [
    (CAUSAL_CASE.replace('mask = "causal"\n', "").replace("s*", "0.5*").replace("(1 - s)", "0.5"), ["--slices", "4,8"],
     "--slices: refines"),
    (CAUSAL_CASE, ["--slices", "8,4"], "--slices: need at least two increasing"),
    (CAUSAL_CASE, ["--slices", "4,8", "--reference", "exact"], "--reference exact: --slices"),
    (CAUSAL_CASE, ["--slices", "4,8", "--dt-ladder"], "--dt-ladder: give either"),
], ids=["not-causal", "decreasing", "exact", "with-dt"])
def test_slices_ladder_refusals(tmp_path, capsys, case, args, field) -> None:
    from helpers.cli import refused

    refused(tmp_path, capsys, case, field, *args, command="convergence")
