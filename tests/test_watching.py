"""Sizing and watching a job through the CLI (its ``main`` in the test's process, where the subject
is what a command prints or writes; in a fresh process where it is the process's exit):

* ``meanfield check`` prints its summary first (cells, ranks, steps, wall time and memory per
  rank for ``--ranks N``, outputs and their size on disk), then the resolved config, whose
  arrays and inner tables are written on one line, as in a run's config.toml, and read back
  to the same config;
* metadata.json holds the run's progress (t, step, dt, wall time, ETA) from its first output on;
* ``meanfield info RUN`` prints a summary for people, ``--json`` the facts;
* a command whose reader of standard output has gone (``meanfield info RUN | head -4``) stops
  quietly with 141 (128 + SIGPIPE), not as a failed run;
* progress lines come at the cadence of ``[output] log_every``, by default at least at every
  tenth of the model time, and output lines carry step, dt and wall time.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.cli import TIMEOUT, cli_environment, cli_to_closed_pipe

from meanfield.config import load_config

CASE = ('name = "w"\n[mesh]\nsphere = "S1"\nresolution = 32\n[time]\nt_final = 0.2\ndt = 0.002\noutputs = 2\n'
        '[output]\nxdmf = false\n')
EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "runs" / "examples").glob("*.toml"))


def test_check_prints_the_summary_first_then_the_config(tmp_path, cli_in_process):
    (tmp_path / "w.toml").write_text(CASE)
    done = cli_in_process(["check", "w.toml", "--ranks", "4"], tmp_path)
    assert done.returncode == 0, done.stderr
    summary, details, config = done.stdout.split("\n\n", 2)
    heads = [line.split(":")[0] for line in summary.splitlines()[1:]]
    assert heads == ["mesh", "ranks", "time", "wall time", "memory", "outputs", "run dir"]
    assert "32 cells" in summary and "ranks:       4 " in summary and "100 steps of dt = 0.002" in summary
    assert re.search(r"per rank \(32 cells, 4 ranks\)", summary) and re.search(r"~[\d.]+ [kM]?B on disk", summary)
    assert details.startswith("# details") and config.startswith("# config")
    assert "centers = [[1.0, 0.0], [-0.5, 0.8], [-0.6, -0.8]]" in config
    assert not (tmp_path / "runs").exists()
    assert cli_in_process(["check", "w.toml", "--ranks", "0"], tmp_path).stderr.startswith("error: --ranks")


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_config_toml_has_one_line_arrays_and_reads_back(tmp_path, example):
    config = load_config(example)
    text = config.to_toml()
    assert all(line.count("[") == line.count("]") for line in text.splitlines()), text  # no array spans lines
    (tmp_path / "config.toml").write_text(text)
    assert load_config(tmp_path / "config.toml").data == config.data


def test_progress_in_metadata_info_and_log_lines(tmp_path, cli_in_process):
    (tmp_path / "w.toml").write_text(CASE)
    assert cli_in_process(["run", "w.toml", "--quiet"], tmp_path).returncode == 0
    run = tmp_path / "runs" / "w"
    progress = json.loads((run / "metadata.json").read_text())["progress"]
    assert progress["t"] == pytest.approx(0.2) and progress["step"] == 100 and progress["dt"] == pytest.approx(0.002)
    assert progress["wall_s"] > 0 and progress["eta_s"] == 0 and progress["done"] == 1
    log = (run / "run.log").read_text().splitlines()
    outputs = [line for line in log if " t = 0.1 " in line]
    assert len(outputs) == 1 and re.search(r"step 50  dt = 0\.002 by fixed  wall \dm\d\ds", outputs[0]), log
    lines = [line for line in log if re.search(r"\d step \d+  t = ", line)]
    assert [int(line.split("step ")[1].split()[0]) for line in lines] == [10, 20, 30, 40, 60, 70, 80, 90], log

    info = cli_in_process(["info", "runs/w"], tmp_path)
    assert info.returncode == 0, info.stderr
    assert re.search(r"status: +completed", info.stdout)
    assert re.search(r"t reached: +0\.2 of t_final = 0\.2", info.stdout)
    assert re.search(r"wall time: +[\d.]+ s in 1 segment\n", info.stdout) and "run.nc" in info.stdout
    facts = json.loads(cli_in_process(["info", "runs/w", "--json"], tmp_path).stdout)
    assert facts["segments"][0]["t_end"] == pytest.approx(0.2)


@pytest.mark.slow
def test_a_closed_pipe_is_not_a_failed_run(tmp_path, cli_in_process):
    """Every command that prints, its output piped to a reader that has gone: exit 141 and no error
    on stderr (no "the run failed"; check's warnings may stand); piped to ``head -1``, the first
    line and nothing on stderr."""
    (tmp_path / "w.toml").write_text(CASE)
    assert cli_in_process(["run", "w.toml", "--quiet"], tmp_path).returncode == 0
    for args in (["info", "runs/w"], ["info", "runs/w", "--json"], ["check", "w.toml"],
                 ["compare", "runs/w", "runs/w"]):
        done = cli_to_closed_pipe(args, tmp_path)
        # check may warn (one line) that writing would outweigh the steps: a finding, not a failure
        assert done.returncode == 141 and all(line.startswith("warning: ") for line in done.stderr.splitlines()), \
            (args, done.stderr)
    head = subprocess.run(f"{shlex.quote(sys.executable)} -m meanfield.cli info runs/w | head -1", shell=True,
                          cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT, env=cli_environment())
    assert head.stdout.startswith("run: ") and head.stderr == "", head.stdout + head.stderr


def test_log_every_steps(tmp_path, cli_in_process):
    (tmp_path / "w.toml").write_text(CASE)
    done = cli_in_process(["run", "w.toml", "--quiet", "--set", 'output.log_every="30 steps"'], tmp_path)
    assert done.returncode == 0, done.stderr
    log = (tmp_path / "runs" / "w" / "run.log").read_text()
    assert [int(s) for s in re.findall(r"\d step (\d+)  t = ", log)] == [30, 80]  # the output at step 50 counts
    bad = cli_in_process(["run", "w.toml", "--quiet", "--set", 'output.log_every="often"'], tmp_path)
    assert bad.returncode == 2 and bad.stderr.startswith("error: output.log_every: must be")
