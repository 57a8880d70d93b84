"""One merge time per run (meanfield.merging): the run log, ``meanfield clusters`` and
``meanfield longtime --run`` report the same time for the same merge, through the CLI."""

from __future__ import annotations

import csv
import re
import shutil
from collections import Counter

import pytest
from helpers.cli import REPO, cli

NUMBER = r"([-+0-9.e]+)"


@pytest.mark.slow
def test_run_log_clusters_and_longtime_report_one_merge_time(tmp_path):
    # the s1-long-time example, made cheap: 128 cells, to t = 40 (its merge at t ~ 38 on this mesh)
    shutil.copy(REPO / "runs" / "examples" / "s1-long-time.toml", tmp_path / "case.toml")
    cheap = ["--set", "mesh.resolution=128", "--set", "time.t_final=40", "--set", "time.outputs=80"]
    done = cli(["run", "case.toml", "--out", "run", "--quiet", *cheap], tmp_path)
    assert done.returncode == 0, done.stderr
    log = (tmp_path / "run" / "run.log").read_text()
    logged = [float(t) for t in re.findall(r"merge: atom \d+ \(mass \S+\) and atom \d+ \(mass \S+\) within 0.01 rad "
                                           r"at t = " + NUMBER, log)]
    assert len(logged) == 1 and 30.0 < logged[0] < 40.0
    combined = re.findall(r"t = " + NUMBER + r"  combine: atom", log)  # the solver's step, later, named apart
    assert all(float(t) > logged[0] for t in combined)

    done = cli(["clusters", "run", "--no-plots"], tmp_path)
    assert done.returncode == 0, done.stderr
    analysed = [float(t) for t in re.findall(r"merge +at t = " + NUMBER, done.stdout)]
    assert "vanished" not in done.stdout

    done = cli(["longtime", "case.toml", "--run", "run", "--n", "1024", "--t-final", "40", "--out", "study",
                "--no-plots"], tmp_path)
    assert done.returncode == 0, done.stderr
    hybrid = re.search(r"hybrid run: merges at " + NUMBER + r" \(reference " + NUMBER + r", ([-+0-9.]+)%\); "
                       r"(\d+) clusters at t = 40 \(reference (\d+)\)", done.stdout)
    assert hybrid is not None, done.stdout
    events = (tmp_path / "study" / "hybrid-events.csv").read_text().splitlines()
    assert [line.split(",")[0] for line in events[1:]].count("merge") == 1  # formation: births only
    with open(tmp_path / "study" / "hybrid-clusters.csv") as fh:
        counts = Counter(row["t"] for row in csv.DictReader(fh))
    assert max(counts.values()) == 4  # as the reference: cells 0.05 rad apart link (they made 20 clusters)
    # one merge, one time (the log interpolates within a step, the analyses between outputs:
    # exact for the exponential approach; measured to 1e-6 relative)
    for time in (*analysed, float(hybrid[1])):
        assert time == pytest.approx(logged[0], rel=1e-4)
    assert len(analysed) == 1
    # the hybrid against the Lagrangian reference (128 cells: within a few per cent)
    assert abs(float(hybrid[3])) < 5.0 and hybrid[4] == hybrid[5] == "3"
