"""Files say what made them and what they hold: run.nc's attributes carry the model's parameters,
sweep points name the key a seed belongs to, ``collect --clusters`` counts are integers."""

from __future__ import annotations

import csv
import json

import pytest
import xarray as xr
from helpers.cli import S1

from meanfield.cli import main


@pytest.mark.slow
def test_run_files_record_the_model_and_collect_counts_clusters_in_integers(tmp_path, capsys):
    """``meanfield run`` and ``meanfield particles`` of a model with beta, Q and a feed-forward
    block: run.nc's attributes give each of them (unset K, V: the identity); ``collect
    --clusters`` of the run writes its cluster counts as integers."""
    text = S1 + "[model]\nbeta = 2.5\nQ = [[1.0, 0.5], [0.0, 1.0]]\n[model.ffn]\nW = [[1.0], [0.0]]\nA = [[0.5, 0.0]]\n"
    (tmp_path / "case.toml").write_text(text)
    assert main(["run", str(tmp_path / "case.toml"), "--out", str(tmp_path / "pde"), "--quiet"]) == 0
    assert main(["particles", str(tmp_path / "case.toml"), "--n", "20", "--out", str(tmp_path / "tokens"),
                 "--quiet"]) == 0
    for run in ("pde", "tokens"):
        with xr.open_dataset(tmp_path / run / "run.nc") as ds:
            attrs = ds.attrs
        assert attrs["model_beta"] == 2.5 and attrs["model_attention"] == "softmax", run
        assert json.loads(attrs["model_Q"]) == [[1.0, 0.5], [0.0, 1.0]] and attrs["model_K"] == "identity"
        assert json.loads(attrs["model_ffn"])["W"] == [[1.0], [0.0]]
    capsys.readouterr()
    assert main(["collect", str(tmp_path / "pde"), "-o", str(tmp_path / "t.csv"), "--clusters", "--quiet"]) == 0
    with open(tmp_path / "t.csv") as fh:
        counts = [row["clusters"] for row in csv.DictReader(fh)]
    assert len(counts) == 2 and all(c.isdigit() for c in counts), counts  # were 3.0, 3.0


def test_sweep_points_name_the_key_of_a_seed(tmp_path, capsys):
    """``sweep --seeds 2 --particles``: the points are ``0-beta=1,particles.seed=0`` ..., not
    ``seed=0``, which does not say whether the tokens' or the weights' seed (``random.seed``)."""
    (tmp_path / "case.toml").write_text(S1)
    assert main(["sweep", str(tmp_path / "case.toml"), "--grid", "model.beta=1,4", "--seeds", "2", "--particles",
                 "--set", "particles.n=10", "--out", str(tmp_path / "s"), "--dry-run"]) == 0
    names = capsys.readouterr().out.split()
    assert [n for n in names if "seed=" in n] == ["0-beta=1,particles.seed=0", "1-beta=1,particles.seed=1",
                                                  "2-beta=4,particles.seed=0", "3-beta=4,particles.seed=1"]
