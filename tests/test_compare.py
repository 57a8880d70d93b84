"""``meanfield compare RUN_A RUN_B``: densities at common times on the coarser mesh, L1 and W1, observables."""

from __future__ import annotations

import numpy as np
import pandas
import pytest
from mpi4py import MPI

import meanfield
from meanfield.analysis.compare import compare, transfer
from meanfield.cli import main
from meanfield.studies.convergence.ladder import coarsen

S1 = {"name": "c", "mesh": {"sphere": "S1", "resolution": 64}, "model": {"beta": 4.0},
      "time": {"t_final": 1.0, "outputs": 4}}


def _run(tmp_path, name: str, **changes) -> meanfield.PDERunResult:
    case = {**S1, **changes}
    return meanfield.run(case, out=tmp_path / name, comm=MPI.COMM_SELF, quiet=True)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, meanfield.PDERunResult]:
    """FV and DG1 of one S^1 case on 64 and 128 cells, and FV on 32 cells with outputs every 0.5."""
    base = tmp_path_factory.mktemp("compare")
    out = {f"{kind}{n}": _run(base, f"{kind}{n}", mesh={"sphere": "S1", "resolution": n}, scheme={"kind": kind})
           for kind in ("fv", "dg1") for n in (64, 128)}
    out["fv32"] = _run(base, "fv32", mesh={"sphere": "S1", "resolution": 32}, time={"t_final": 1.0, "outputs": 2})
    return out


def test_a_run_against_itself(runs):
    comparison = compare(runs["fv64"], runs["fv64"].path)
    table = comparison.table
    assert comparison.mesh == "same" and len(table) == 5
    assert (table["l1"] == 0).all() and (table["w1"] == 0).all()
    np.testing.assert_array_equal(table["a_energy"], table["b_energy"])


def test_fv_against_dg1_is_small_and_decreases_with_refinement(runs):
    coarse, fine = compare(runs["fv64"], runs["dg164"]).table, compare(runs["fv128"], runs["dg1128"]).table
    assert coarse["l1"].iloc[0] < 1e-2 and fine["l1"].iloc[-1] < coarse["l1"].iloc[-1] < 0.2
    assert fine["w1"].iloc[-1] < coarse["w1"].iloc[-1] < 0.05


def test_nested_meshes_use_the_coarser_one_and_the_convergence_transfer(runs):
    """Runs on 32 and 128 cells: the finer one's densities go to 32 cells exactly as the
    convergence study's nested coarsening takes them; only the common times 0, 0.5, 1."""
    comparison = compare(runs["dg1128"], runs["fv32"])
    assert comparison.mesh == "B"
    np.testing.assert_allclose(comparison.table["t"], [0.0, 0.5, 1.0])
    fine = runs["dg1128"]
    nested, parents = coarsen(fine.densities, fine.areas, "S1", times=2)
    moved = transfer(fine, runs["fv32"]) * runs["fv32"].areas  # the mass each coarser cell receives
    np.testing.assert_allclose(moved, nested * parents, rtol=1e-12)
    np.testing.assert_allclose(moved.sum(axis=1), fine.densities @ fine.areas, rtol=1e-13)


def test_cli_table_and_csv(runs, tmp_path, capsys, monkeypatch):
    """``meanfield compare A B -o cmp.csv`` (its ``main`` in this process, in tmp_path)."""
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["compare", str(runs["fv64"].path), str(runs["dg1128"].path), "-o", "cmp.csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "densities compared on A's mesh" in lines[0] and lines[1].split()[:3] == ["t", "L1", "W1"]
    assert len(lines) == 2 + 5 + 1 and lines[-1] == "wrote cmp.csv"
    table = pandas.read_csv(tmp_path / "cmp.csv")
    assert list(table.columns[:5]) == ["t", "l1", "w1", "a_mass", "b_mass"] and len(table) == 5


@pytest.mark.parametrize("args, field", [
    (["RUN", "RUN", "-o", "cmp.txt"], "-o cmp.txt: must end in .csv"),
    (["RUN", "nothere"], "nothere"),
    (["RUN", "OTHER"], "a run on S2"),
])
def test_cli_refusals(runs, tmp_path, capsys, monkeypatch, args, field):
    """Exit 2, one line naming the option or run, nothing written (the CLI's ``main`` in this
    process, in tmp_path)."""
    other = _run(tmp_path, "other", mesh={"sphere": "S2", "resolution": 0}, initial={"kind": "uniform"},
                 time={"t_final": 0.1, "outputs": 1}) if "OTHER" in args else None
    names = {"RUN": str(runs["fv64"].path), "OTHER": str(other.path) if other is not None else ""}
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    code = main(["compare", *[names.get(a, a) for a in args]])
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and field in lines[0], err
    assert out == "" and not (tmp_path / "cmp.txt").exists()


def test_s2_nested_levels(tmp_path):
    """Icosphere levels 1 and 2: the transfer is the nested one, W1 by emd on 80 cells is finite and small."""
    case = {"mesh": {"sphere": "S2", "resolution": 1}, "time": {"t_final": 0.2, "outputs": 1}}
    coarse, fine = _run(tmp_path, "l1", **case), _run(tmp_path, "l2", **{**case, "mesh": {"sphere": "S2",
                                                                                            "resolution": 2}})
    nested, parents = coarsen(fine.densities, fine.areas, "S2")
    np.testing.assert_allclose(transfer(fine, coarse) * coarse.areas, nested * parents, rtol=1e-12)
    table = compare(fine, coarse).table
    assert np.isfinite(table["w1"]).all() and (table["w1"] < 0.2).all() and (table["l1"] < 0.5).all()


def test_a_causal_run_is_compared_as_its_whole_token_distribution(runs, tmp_path):
    """Under softmax attention an s-independent density gives every position the run without the
    mask (MODEL.md): the causal run compared with fv64 is zero to round-off; two slice counts of
    an s-dependent case differ a little, less with more slices."""
    plain = runs["fv64"]
    causal = _run(tmp_path, "causal", model={"beta": 4.0, "mask": "causal"}, positions={"slices": 4})
    table = compare(causal, plain).table
    assert table["l1"].max() < 1e-12 and table["w1"].max() < 1e-12
    expression = {"kind": "expression", "expression": "exp(2*(1 - s)*x + 2*s*y)"}
    coarse, fine, finest = (_run(tmp_path, f"m{m}", model={"beta": 4.0, "mask": "causal"}, positions={"slices": m},
                                 initial=expression) for m in (2, 4, 16))
    l1 = [compare(run, finest).table["l1"].iloc[-1] for run in (coarse, fine)]
    assert 0 < l1[1] < l1[0] < 0.05, l1
