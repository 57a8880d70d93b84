"""One merge time per run (meanfield.merging): the run log, ``meanfield clusters`` and
``meanfield longtime --run`` report the same time for the same merge, through the CLI (its ``main``
in this process: the subject is what the commands print and write)."""

from __future__ import annotations

import csv
import re
import shutil
from collections import Counter

import numpy as np
import pytest
from helpers.cli import REPO

NUMBER = r"([-+0-9.e]+)"


@pytest.mark.slow
def test_run_log_clusters_and_longtime_report_one_merge_time(cli_in_process, tmp_path):
    # the s1-long-time example, made cheap: 128 cells, to t = 40 (its merge at t ~ 38 on this mesh)
    shutil.copy(REPO / "runs" / "examples" / "s1-long-time.toml", tmp_path / "case.toml")
    cheap = ["--set", "mesh.resolution=128", "--set", "time.t_final=40", "--set", "time.outputs=80"]
    done = cli_in_process(["run", "case.toml", "--out", "run", "--quiet", *cheap], tmp_path)
    assert done.returncode == 0, done.stderr
    log = (tmp_path / "run" / "run.log").read_text()
    logged = [float(t) for t in re.findall(r"merge: atom \d+ \(mass \S+\) and atom \d+ \(mass \S+\) within 0.01 rad "
                                           r"at t = " + NUMBER, log)]
    assert len(logged) == 1 and 30.0 < logged[0] < 40.0
    combined = re.findall(r"t = " + NUMBER + r"  combine: atom", log)  # the solver's step, later, named apart
    assert all(float(t) > logged[0] for t in combined)

    done = cli_in_process(["clusters", "run", "--no-plots"], tmp_path)
    assert done.returncode == 0, done.stderr
    analysed = [float(t) for t in re.findall(r"merge +at t = " + NUMBER, done.stdout)]
    assert "vanished" not in done.stdout

    done = cli_in_process(["longtime", "case.toml", "--run", "run", "--n", "1024", "--t-final", "40", "--out",
                           "study", "--no-plots"], tmp_path)
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


TWO_BUMPS = {"name": "two", "mesh": {"sphere": "S1", "resolution": 64}, "model": {"beta": 9.0},
             "initial": {"kind": "vmf", "centers": [[1, 0.3], [1, -0.3]], "kappas": [30.0, 30.0],
                         "weights": [0.6, 0.4]},
             "time": {"t_final": 2.0, "outputs": 8}, "output": {"xdmf": False}}


def _rows(path) -> list[dict[str, str]]:
    with open(path) as fh:
        return list(csv.DictReader(fh))


@pytest.mark.slow  # the run, then two commands (their main in this process)
def test_clusters_and_longtime_see_the_same_clusters(cli_in_process, tmp_path):
    """One cluster convention (docs/long-time.rst, "One cluster convention"): two bumps that merge
    on a coarse S^1 mesh.  ``meanfield clusters RUN`` and ``meanfield longtime CONFIG --run RUN``
    give each output the same clusters (count, id, theta in (-pi, pi], mass: the same columns)
    and the same events table; the Lagrangian reference counts the same two clusters at t = 0 (the bumps above the
    uniform density) within a cell of the run's peaks; the terminal leads with the merge."""
    import tomli_w
    from mpi4py import MPI

    import meanfield
    from meanfield.analysis.events import EVENT_COLUMNS

    meanfield.run(TWO_BUMPS, out=tmp_path / "run", comm=MPI.COMM_SELF, quiet=True)
    (tmp_path / "two.toml").write_bytes(tomli_w.dumps(TWO_BUMPS).encode())
    done = cli_in_process(["clusters", "run", "--no-plots"], tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    merge = re.fullmatch(r"  merge    at t = " + NUMBER + r": cluster 1 into 0 \(peaks within 0.01 rad\)", lines[1])
    assert merge is not None and len(lines) <= 6, done.stdout  # the merge first, no per-output table
    done = cli_in_process(["longtime", "two.toml", "--run", "run", "--n", "128", "--out", "study", "--no-plots"],
                          tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"hybrid run: merges at {merge[1]} " in done.stdout

    def by_time(rows, *columns):
        out: dict[float, list] = {}
        for r in rows:
            out.setdefault(float(r["t"]), []).append(tuple(float(r[c]) for c in columns))
        return {t: sorted(v) for t, v in out.items()}

    clusters = by_time(_rows(tmp_path / "run" / "clusters" / "clusters.csv"), "id", "theta", "mass")
    hybrid = by_time(_rows(tmp_path / "study" / "hybrid-clusters.csv"), "id", "theta", "mass")
    assert clusters == hybrid  # the same analysis: ids, angles and masses to the bit
    assert [len(clusters[t]) for t in sorted(clusters)][0] == 2 and len(clusters[2.0]) == 1
    reference = by_time(_rows(tmp_path / "study" / "reference-beta9-clusters.csv"), "id", "theta", "mass")
    assert len(reference[0.0]) == 2
    cell = 2 * np.pi / 64
    for (_, theta, _), (_, ref, _) in zip(sorted(clusters[0.0], key=lambda r: r[1]),
                                         sorted(reference[0.0], key=lambda r: r[1]), strict=True):
        assert abs(theta - ref) < cell
    events = [(tmp_path / "run" / "clusters" / "events.csv").read_text().splitlines(),
              (tmp_path / "study" / "hybrid-events.csv").read_text().splitlines(),
              (tmp_path / "study" / "reference-beta9-events.csv").read_text().splitlines()]
    assert {e[0] for e in events} == {",".join(EVENT_COLUMNS)}
    assert events[0] == events[1] and events[0][1].startswith("merge,")
    assert float(events[0][1].split(",")[1]) == pytest.approx(float(merge[1]), rel=1e-5)
