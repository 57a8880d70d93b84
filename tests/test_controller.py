"""The run controller on a toy simulation (no mesh): outputs, checkpoints, signals, wall limit,
step collapse, and resuming from any checkpoint to the uninterrupted result."""

from __future__ import annotations

import json
import os
import signal

import numpy as np
import pytest
from helpers.toy import Decay, handlers, problem

from meanfield.drivers.launch import continue_run, start_run
from meanfield.engine.controller import WALL_LIMIT_EXIT, RunInterrupted, StepCollapseError
from meanfield.rundir import layout
from meanfield.rundir.checkpoint import Checkpoint
from meanfield.rundir.files import read_csv_columns
from meanfield.rundir.results import load_run


def test_outputs_observables_and_checkpoint(tmp_path):
    start_run(Decay(), problem(), tmp_path / "a", handlers(), quiet=True)
    meta = json.loads((tmp_path / "a" / layout.METADATA).read_text())
    assert meta["status"] == "completed" and meta["kind"] == "particles" and meta["outputs_written"] == 5
    cols, _ = read_csv_columns(tmp_path / "a" / layout.OBSERVABLES)
    np.testing.assert_allclose(cols["t"], [0, 0.25, 0.5, 0.75, 1.0])
    np.testing.assert_allclose(cols["x0"], 0.99 ** (100 * cols["t"]), rtol=1e-12)  # exactly 100 steps per unit
    ckpt = Checkpoint.load(tmp_path / "a")
    assert ckpt.t == 1.0 and ckpt.next_output == 5 and ckpt.info["step"]["steps"] == 100


def _interrupt_at(step: int, signum: int = signal.SIGTERM):
    def on_step(sim: Decay) -> None:
        if sim.steps == step:
            os.kill(os.getpid(), signum)

    return on_step


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGUSR1])
@pytest.mark.parametrize("at_step", [1, 37, 50, 99])
def test_signal_checkpoints_and_resume_equals_uninterrupted(tmp_path, signum, at_step):
    start_run(Decay(), problem(), tmp_path / "ref", handlers(), quiet=True)
    with pytest.raises(RunInterrupted) as info:
        start_run(Decay(on_step=_interrupt_at(at_step, signum)), problem(), tmp_path / "a", handlers(), quiet=True)
    assert info.value.exit_code == 128 + signum and info.value.reason == signal.Signals(signum).name
    meta = json.loads((tmp_path / "a" / layout.METADATA).read_text())
    assert meta["status"] == "interrupted" and meta["interrupted_by"] == signal.Signals(signum).name
    ckpt = Checkpoint.load(tmp_path / "a")
    assert ckpt.info["step"]["steps"] == at_step and abs(ckpt.t - at_step * 0.01) < 1e-12
    continue_run(Decay(), problem(), tmp_path / "a", {"t": ckpt.t, "next_output": ckpt.next_output}, handlers(),
                 quiet=True)
    a, ref = load_run(tmp_path / "a"), load_run(tmp_path / "ref")
    assert np.array_equal(a.times, ref.times)
    assert np.array_equal(a.points, ref.points)  # bit for bit: the same steps were taken
    assert np.array_equal(a.observables["x0"], ref.observables["x0"])


def _step_clock(sim: Decay, seconds: float = 0.02):
    """A wall clock that moves by ``seconds`` per step of ``sim`` and stands still otherwise."""
    return lambda: seconds * sim.steps


def test_wall_limit_stops_with_a_checkpoint(tmp_path):
    """Steps of 0.02 s (a clock driven by the steps), wall_limit 0.5 s: the run stops after the
    step where one more step (1.5 x the slowest) would end past the limit, 0.02 k + 0.03 > 0.5,
    i.e. after step 24, and resumes to the uninterrupted run."""
    start_run(Decay(), problem(), tmp_path / "ref", handlers(), quiet=True)
    toy = Decay()
    with pytest.raises(RunInterrupted) as info:
        start_run(toy, problem(wall_limit=0.5), tmp_path / "a", handlers(), quiet=True, clock=_step_clock(toy))
    assert info.value.reason == "wall_limit" and info.value.exit_code == WALL_LIMIT_EXIT
    ckpt = Checkpoint.load(tmp_path / "a")
    assert ckpt.info["step"]["steps"] == 24 and ckpt.t == info.value.t and abs(ckpt.t - 0.24) < 1e-12
    meta = json.loads((tmp_path / "a" / layout.METADATA).read_text())
    assert meta["status"] == "interrupted" and meta["interrupted_by"] == "wall_limit"
    continue_run(Decay(), problem(), tmp_path / "a", {"t": ckpt.t, "next_output": ckpt.next_output}, handlers(),
                 quiet=True)
    a, ref = load_run(tmp_path / "a"), load_run(tmp_path / "ref")
    assert np.array_equal(a.times, ref.times) and np.array_equal(a.points, ref.points)


def test_checkpoint_every_writes_between_outputs(tmp_path):
    """checkpoint_every 0.05 s with steps of 0.02 s (a clock driven by the steps): a checkpoint
    every third step counted from the last one, besides those after the outputs."""
    seen: list[int] = []

    def on_step(sim: Decay) -> None:
        if (tmp_path / "a" / layout.CHECKPOINT).exists():
            seen.append(Checkpoint.load(tmp_path / "a").info["step"]["steps"])

    toy = Decay(on_step=on_step)
    start_run(toy, problem(checkpoint_every=0.05), tmp_path / "a", handlers(), quiet=True, clock=_step_clock(toy))
    expected, last = [], 0
    for step in range(1, 101):
        if step - last >= 3:
            expected.append(step)
            last = step
        if step % 25 == 0:
            last = step  # the output's checkpoint
    inner = sorted(set(seen) - {0, 25, 50, 75, 100})
    assert inner == [s for s in expected if s % 25], inner


def test_collapsed_step_fails_the_run(tmp_path):
    with pytest.raises(StepCollapseError, match="collapsed"):
        start_run(Decay(dt=1e-300), problem(), tmp_path / "a", handlers(), quiet=True)
    meta = json.loads((tmp_path / "a" / layout.METADATA).read_text())
    assert meta["status"] == "failed" and "collapsed" in meta["error"]
