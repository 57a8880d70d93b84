"""``meanfield phase`` as users run it: a fresh process writes phase.csv and phase.png; bad input is refused."""

from __future__ import annotations

import csv
import json

import pytest
from helpers.cli import cli, refused

from meanfield.references.equiangular import equiangular
from meanfield.studies.phase import COLUMNS

CASE = 'name = "tiny"\n[initial]\nkind = "uniform"\n[model]\nbeta = 1.0\n[particles]\nn = 8\n'
RANDOM = CASE + '[model.random]\nlayers = 4\neta = 2.5\nseed = 1\n'


def _rows(path) -> list[dict[str, str]]:
    with open(path / "phase.csv", newline="") as fh:
        reader = csv.DictReader(fh)
        assert tuple(reader.fieldnames or ()) == COLUMNS
        return list(reader)


@pytest.mark.slow
def test_phase_command(tmp_path) -> None:
    """Two betas, two dimensions: no pair clustered at t = 0, all at t = 12 in d = 16 (n = 8); the equiangular
    column is the ODE's g; the default folder is runs/<name>-phase; a second call is refused."""
    (tmp_path / "case.toml").write_text(CASE)
    done = cli(["phase", "case.toml", "--betas", "1,2", "--at", "0,1,12", "--d", "4,16", "--prompts", "3",
                "--quiet"], tmp_path)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "runs" / "tiny-phase"
    rows = _rows(out)
    assert len(rows) == 2 * 2 * 3
    for r in rows:
        t, beta = float(r["t"]), float(r["beta"])
        assert r["prompts"] == "3" and r["n"] == "8"
        assert float(r["equiangular"]) == pytest.approx(equiangular([t], beta, 8)[0], abs=1e-9)
        if t == 0:
            assert float(r["clustered_fraction"]) == 0.0 and float(r["clusters_mean"]) == 8.0
        if t == 12 and r["d"] == "16":  # high d follows the ODE: clustered by t = 7 (d = 4 may be metastable)
            assert float(r["clustered_fraction"]) == 1.0 and float(r["clusters_mean"]) == 1.0
    assert (out / "phase.png").stat().st_size > 10_000
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["kind"] == "phase" and meta["ds"] == [4, 16] and meta["backend"] == "numpy float64 on the CPU"
    again = cli(["phase", "case.toml", "--betas", "1", "--at", "1", "--quiet"], tmp_path)
    assert again.returncode == 2 and "--overwrite" in again.stderr and len(again.stderr.strip().splitlines()) == 1


def test_phase_random_weights_causal(tmp_path) -> None:
    """Random weights drawn per prompt under the causal mask with ALiBi, through the Python API."""
    import meanfield

    config = meanfield.load_config({**_toml(RANDOM), "positions": {"decay": 1.0}},
                                   ['model.mask="causal"', "particles.integrator=\"residual\""])
    result = meanfield.phase(config, [1.0, 3.0], [2.5, 10.0], ds=[6], prompts=4, per_prompt=True,
                             out=tmp_path / "p", quiet=True, plots=False)
    assert len(result.rows) == 4 and not (tmp_path / "p" / "phase.png").exists()
    for r in result.rows:
        assert 0.0 <= r["clustered_fraction"] <= 1.0 and -1.0 <= r["mean_inner_product"] <= 1.0
        assert r["clustered_fraction_se"] >= 0.0 and 1.0 <= r["clusters_mean"] <= 8.0


@pytest.mark.mpi
def test_phase_rows_do_not_depend_on_the_ranks(tmp_path, parallel_comm) -> None:
    """The grid's points dealt over the ranks give phase.csv's rows of one rank; the config's
    particles.prompts and particles.precision are the defaults of --prompts and --precision."""
    from mpi4py import MPI

    import meanfield

    config = meanfield.load_config(_toml(CASE), ["particles.prompts=3", 'particles.precision="float64"'])
    shared = meanfield.phase(config, [1.0, 2.0, 3.0], [0.5, 2.0], ds=[3, 5], out=tmp_path / "all", quiet=True,
                             plots=False, comm=parallel_comm)
    alone = meanfield.phase(config, [1.0, 2.0, 3.0], [0.5, 2.0], ds=[3, 5], out=tmp_path / f"one{parallel_comm.rank}",
                            quiet=True, plots=False, comm=MPI.COMM_SELF)
    assert len(shared.rows) == len(alone.rows) == 2 * 3 * 2
    for a, b in zip(shared.rows, alone.rows, strict=True):
        assert a["prompts"] == 3 and (a["d"], a["beta"], a["t"]) == (b["d"], b["beta"], b["t"])
        for key in ("mean_inner_product", "clustered_fraction", "clusters_mean"):
            assert a[key] == pytest.approx(b[key], abs=1e-12)
    if parallel_comm.rank == 0:
        meta = json.loads((tmp_path / "all" / "metadata.json").read_text())
        assert meta["ranks"] == parallel_comm.size and {p["rank"] for p in meta["points"]} == {0, 1}


def _toml(text: str) -> dict:
    import tomllib

    return tomllib.loads(text)


@pytest.mark.parametrize("text, field, extra", [
    (CASE, "--prompts", ["--prompts", "0"]),
    (CASE, "--per-prompt", ["--per-prompt"]),
    (CASE, "--betas", ["--betas", "-1"]),
    (CASE, "--d", ["--d", "1"]),
    (CASE, "--attention", ["--attention", "soft"]),
])
def test_phase_refusals(tmp_path, capsys, text: str, field: str, extra: list[str]) -> None:
    """One line naming the option, exit 2, nothing written."""
    refused(tmp_path, capsys, text, field, "--betas", "1", "--at", "1", *extra, command="phase")


def test_phase_device_missing(tmp_path, capsys, monkeypatch) -> None:
    """--device gpu without a GPU (or without JAX) is refused before anything is written."""
    import jax

    if any(d.platform == "gpu" for d in jax.devices()):
        monkeypatch.setitem(__import__("sys").modules, "jax", None)
    refused(tmp_path, capsys, CASE, "--device", "--betas", "1", "--at", "1", "--device", "gpu", command="phase")


def test_phase_takes_quiet_and_overwrite() -> None:
    from meanfield.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    options = {o for action in sub.choices["phase"]._actions for o in action.option_strings}
    assert {"--quiet", "--overwrite", "--set", "--out", "--device", "--per-prompt"} <= options


def test_betas_and_times_as_ranges() -> None:
    import argparse

    from meanfield.cli.phase import number_range

    assert number_range("0.5:8:16") == pytest.approx(list(0.5 + 0.5 * k for k in range(16)))
    assert number_range("1,4") == [1.0, 4.0] and number_range("3:3:1") == [3.0]
    for bad in ("1:2", "1:2:0", "a:2:3", "1:2:3:4"):
        with pytest.raises(argparse.ArgumentTypeError):
            number_range(bad)
