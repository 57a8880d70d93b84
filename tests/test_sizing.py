"""Sizing a job honestly, through the CLI (its ``main`` in the test's process: the subject is
what the commands print, warn and write):

* ``meanfield check`` counts a run's start-up, steps, outputs and checkpoints from costs it
  measures, says when the ranks are more than the cores here, and warns (one line on stderr)
  when the outputs would cost more than the steps;
* ``time.outputs_every`` sets the outputs by an interval of model time instead of a count (one
  of the two, not both), and a resume that extends the run keeps it;
* a run warns once when its outputs dominate its cost;
* the ETA follows the recent pace and its trend, checked on a recorded progress history whose
  step shrank as clusters formed.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from helpers.cli import refused

from meanfield import load_run
from meanfield.config import load_config
from meanfield.drivers.walltime import OVERSUBSCRIBED_STEP, Costs, cores, estimate
from meanfield.engine.progress import time_left

HISTORY = Path(__file__).parent / "data" / "s2-clusters-progress.csv"
CASE = ('name = "w"\n[mesh]\nsphere = "S1"\nresolution = 32\n[time]\nt_final = 0.2\ndt = {dt}\n{outputs}\n'
        '[output]\nxdmf = false\n')


def _case(tmp_path: Path, dt: float = 0.002, outputs: str = "outputs = 2") -> str:
    (tmp_path / "w.toml").write_text(CASE.format(dt=dt, outputs=outputs))
    return "w.toml"


def test_time_left_anticipates_the_step_shrinking_on_a_recorded_history():
    """s2-clusters' progress (t, wall seconds) at each output: the step shrinks from 0.16 to
    0.004 as six clusters form, so the pace grows all along.  Stopped at t = 5 of 8 (as `info
    --json` after a kill sees it), the average pace so far gives less than a quarter of the time
    the run took to finish; the recent pace with its trend comes within 15%."""
    t, wall = np.loadtxt(HISTORY, delimiter=",", skiprows=2, unpack=True)
    actual = wall[-1] - wall
    at = int(np.searchsorted(t, 5.0))
    assert wall[at] * (t[-1] - t[at]) / t[at] < 0.25 * actual[at]  # what the average pace said
    assert time_left(t[:at + 1], wall[:at + 1], t[-1]) == pytest.approx(actual[at], rel=0.15)
    for k in range(int(np.searchsorted(t, 4.0)), len(t) - 2):  # from half-way on: within a factor 1.6
        assert 1 / 1.6 < time_left(t[:k + 1], wall[:k + 1], t[-1]) / actual[k] < 1.6, t[k]


def test_time_left_at_a_steady_or_falling_pace():
    t = np.linspace(0.0, 4.0, 41)
    assert time_left(t, 3.0 * t, 10.0) == pytest.approx(3.0 * 6.0)  # steady: 3 s per unit of model time
    falling = 10.0 * np.sqrt(t)  # the pace falls as 5 / sqrt(t): taken as it is now, not extrapolated down
    assert time_left(t, falling, 10.0) == pytest.approx(5.0 / 2.0 * 6.0, rel=0.05)
    assert time_left([0.0], [0.0], 10.0) == float("inf") and time_left(t, 3.0 * t, 4.0) == 0.0


def test_wall_time_counts_every_part_and_oversubscription():
    """The arithmetic of the estimate against a hand count: steps shared by the ranks up to the
    cores, outputs and start-up not shared, a checkpoint every checkpoint_every seconds, and the
    oversubscribed step's loss."""
    costs = Costs(startup=2.0, step=0.01, output=0.05, checkpoint=0.02)
    one = estimate(costs, steps=1000, outputs=101, ranks=1, checkpoint_every=600.0, available=2)
    assert (one.startup, one.stepping, one.outputs) == pytest.approx((2.0, 10.0, 5.05))
    assert one.checkpoints_count == 0 and one.total == pytest.approx(17.05) and one.writing == pytest.approx(5.05)
    two = estimate(costs, steps=1000, outputs=101, ranks=2, checkpoint_every=5.0, available=2)
    assert two.stepping == pytest.approx(5.0) and two.step_penalty == 0
    assert two.checkpoints_count == 2 and two.checkpoints == pytest.approx(0.04)  # floor((2 + 5 + 5.05) / 5)
    four = estimate(costs, steps=1000, outputs=101, ranks=4, checkpoint_every=600.0, available=2)
    assert four.step_penalty == pytest.approx(OVERSUBSCRIBED_STEP * 2 * 3)
    assert four.stepping == pytest.approx(1000 * (0.005 + OVERSUBSCRIBED_STEP * 6))


@pytest.mark.slow
def test_check_counts_outputs_warns_when_they_dominate_and_names_the_cores(tmp_path, cli_in_process):
    """One step per output: writing them costs more than the steps (a warning on stderr, one
    line); 10000 steps for 3 outputs: no warning.  More ranks than cores: said on the ranks line.
    (The warning is asked of one rank: an oversubscribed rank's measured loss per step is of the
    order of an output's cost, so on more ranks than cores either may win under load.)"""
    done = cli_in_process(["check", _case(tmp_path, outputs="outputs = 100")], tmp_path)
    assert done.returncode == 0, done.stderr
    warning = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(warning) == 1 and warning[0].startswith("warning: writing 101 outputs"), done.stderr
    crowded = cli_in_process(["check", _case(tmp_path, outputs="outputs = 100"), "--ranks", str(cores() + 1)], tmp_path)
    assert crowded.returncode == 0, crowded.stderr
    ranks = crowded.stdout.split("\n\n")[0]
    assert f"more than the {cores()} core" in ranks and "oversubscribed" in ranks
    summary = done.stdout.split("\n\n")[0]
    wall = next(line for line in summary.splitlines() if line.startswith("wall time:"))
    assert re.search(r"start-up [\d.]+ m?s, time stepping [\d.]+ m?s \(100 steps\), 101 outputs with a checkpoint",
                     wall)
    assert re.search(r"costs: +measured on one process here .*a step [\d.]+ [mu]?s, an output and its checkpoint",
                     done.stdout)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.toml"]  # the probe's directory is gone

    quiet = cli_in_process(["check", _case(tmp_path, dt=2e-5)], tmp_path)
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    assert "10000 steps of dt = 2e-05" in quiet.stdout and "more than the" not in quiet.stdout


def test_outputs_every_or_a_count_not_both(tmp_path, capsys):
    refused(tmp_path, capsys, CASE.format(dt=0.002, outputs="outputs = 2\noutputs_every = 0.05"),
            "time.outputs_every")
    refused(tmp_path, capsys, CASE.format(dt=0.002, outputs=""), "time.outputs_every", "--set", "time.outputs=2",
            "--set", "time.outputs_every=0.05")
    refused(tmp_path, capsys, CASE.format(dt=0.002, outputs="outputs_every = 0.0"), "time.outputs_every")
    refused(tmp_path, capsys, CASE.format(dt=0.002, outputs="outputs_every = 1e-7"), "time.outputs_every: 1e-07 "
            "would make 2e+06 outputs")
    config = load_config(tmp_path / "case.toml", ["time.outputs=4"])  # no outputs key: the default count
    assert config.data["time"]["outputs_every"] is None


@pytest.mark.slow
def test_outputs_every_keeps_its_spacing_through_check_run_and_resume(tmp_path, cli_in_process):
    """A --set of the interval replaces the file's count; a resume that extends the run keeps
    the interval (config.toml holds it, not a count)."""
    _case(tmp_path)
    args = ["w.toml", "--set", "time.outputs_every=0.05", "--set", "time.t_final=0.1"]
    done = cli_in_process(["check", *args], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "3 outputs at t = 0, 0.05, 0.1;" in done.stdout and "outputs_every = 0.05" in done.stdout
    assert cli_in_process(["run", *args, "--quiet"], tmp_path).returncode == 0
    run = tmp_path / "runs" / "w"
    assert np.allclose(load_run(run).times, [0.0, 0.05, 0.1], rtol=0, atol=1e-12)
    resumed = cli_in_process(["resume", "runs/w", "--t-final", "0.2", "--quiet"], tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert np.allclose(load_run(run).times, [0.0, 0.05, 0.1, 0.15, 0.2], rtol=0, atol=1e-12)
    config = load_config(run / "config.toml")
    assert config.data["time"]["outputs_every"] == 0.05 and config.data["time"]["outputs"] is None


@pytest.mark.slow
def test_a_run_whose_outputs_dominate_warns_once(tmp_path, cli_in_process):
    done = cli_in_process(["run", _case(tmp_path, outputs="outputs = 100")], tmp_path)
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if "writing dominates" in line]
    assert len(warnings) == 1, done.stderr
    assert "writing dominates" in (tmp_path / "runs" / "w" / "run.log").read_text()


@pytest.mark.slow
def test_a_costly_first_output_alone_does_not_warn(tmp_path, monkeypatch):
    """What the first output pays once (the files made, the libraries that write them loaded: 2.5
    seconds here) is no cost of more outputs: a run whose steps outweigh its later outputs does not
    warn that writing dominates (the default case, `make demo`, did), while one whose every output
    is costly still does (above).  Each step takes 20 ms more, so that the later outputs' real cost
    (a tenth of a second on a fresh venv, whose first writes compile the libraries' bytecode) stays
    below twice the steps' on any machine."""
    import time

    from meanfield.cli import main
    from meanfield.engine.controller import Controller

    output = Controller._output

    def first_output_pays_once(self, k: int) -> None:
        """At the first output (before any step): its snapshot costly this once, every step from now on."""
        if k > 0:
            return output(self, k)
        snapshot, step = self.sim.snapshot, self.sim.step

        def costly_snapshot(*args, **kwargs):
            time.sleep(2.5)
            return snapshot(*args, **kwargs)

        def slower_step(*args, **kwargs):
            time.sleep(0.02)
            return step(*args, **kwargs)

        self.sim.snapshot, self.sim.step = costly_snapshot, slower_step
        try:
            output(self, k)
        finally:
            self.sim.snapshot = snapshot

    monkeypatch.setattr(Controller, "_output", first_output_pays_once)
    (tmp_path / "s.toml").write_text('name = "s"\n[mesh]\nsphere = "S2"\nresolution = 3\n[time]\nt_final = 1.0\n'
                                     'outputs = 4\n[output]\nxdmf = false\n')
    assert main(["run", str(tmp_path / "s.toml"), "--out", str(tmp_path / "s"), "--quiet"]) == 0
    timings = load_run(tmp_path / "s").metadata["timings"]
    assert timings["output"] + timings["checkpoint"] > 2 * timings["time_stepping"]  # the old test warned
    assert "writing dominates" not in (tmp_path / "s" / "run.log").read_text()
