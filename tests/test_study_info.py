"""``meanfield info`` on a sweep or study folder: its points by status and what it found (it
exited 2, "not a meanfield run directory")."""

from __future__ import annotations

import json

import pytest
from helpers.cli import S1, cli


@pytest.mark.slow
def test_info_of_a_sweep_counts_its_points_by_status(tmp_path):
    """A sweep of three points, two run (job-array tasks), one of them then marked failed (a
    fault injected in its metadata.json), one pending: info names them all, in text and JSON."""
    (tmp_path / "case.toml").write_text(S1)
    for index in ("0", "1"):
        done = cli(["sweep", "case.toml", "--grid", "model.beta=1,4,9", "--out", "s", "--array-index", index,
                    "--quiet"], tmp_path)
        assert done.returncode == 0, done.stderr
    metadata = tmp_path / "s" / "1-beta=4" / "metadata.json"
    metadata.write_text(json.dumps({**json.loads(metadata.read_text()), "status": "failed"}))
    done = cli(["info", "s"], tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("study:      sweep in s (started 20")
    assert lines[1] == "points:     3: 1 completed, 1 failed, 1 pending"
    assert "failed:     1-beta=4" in lines and "study.json" in lines[-1] and "sweep.csv" in lines[-1]
    facts = json.loads(cli(["info", "s", "--json"], tmp_path).stdout)
    assert facts["runs"] == {"0-beta=1": "completed", "1-beta=4": "failed", "2-beta=9": "pending"}
    assert facts["kind"] == "sweep" and facts["counts"] == {"completed": 1, "failed": 1, "pending": 1}
