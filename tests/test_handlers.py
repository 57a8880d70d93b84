"""Output handlers and their cadences on the toy simulation: a handler of one's own is called when
its cadence says (steps, outputs, at a stop), and finishes after the run's own handlers."""

from __future__ import annotations

import json
import os
import signal

import pytest
from helpers.toy import Decay, handlers, problem

from meanfield.drivers.launch import start_run
from meanfield.engine.controller import RunInterrupted
from meanfield.engine.handlers import Cadence, Handler, Moment, RunEnd, RunState
from meanfield.rundir import layout


class Recorder(Handler):
    """Records the step count and the reason of every call, and the status its finish sees."""

    def __init__(self, cadence: Cadence) -> None:
        self.cadence = cadence
        self.calls: list[tuple[int, str]] = []
        self.finished: tuple[str, str | None] | None = None

    def handle(self, state: RunState, moment: Moment) -> None:
        self.calls.append((state.sim.steps, moment.reason))  # the toy counts its steps

    def finish(self, state: RunState, end: RunEnd) -> None:
        metadata = json.loads((state.run_dir / layout.METADATA).read_text())
        self.finished = (end.status, metadata["status"])  # the status is recorded before this finish


def test_a_handler_every_ten_steps(tmp_path):
    """100 steps, outputs every 25: due at steps 10, 20, ..., 100, never at the outputs."""
    every_ten = Recorder(Cadence(steps=10))
    start_run(Decay(), problem(), tmp_path / "a", [*handlers(), every_ten], quiet=True)
    assert every_ten.calls == [(s, "step") for s in range(10, 101, 10)]
    assert every_ten.finished == ("completed", "completed")


def test_steps_count_from_the_last_call_at_an_output(tmp_path):
    """Due at outputs and every 10 steps: the count starts again at each output (25, 50, ...)."""
    both = Recorder(Cadence(outputs=True, steps=10))
    start_run(Decay(), problem(), tmp_path / "a", [*handlers(), both], quiet=True)
    expected = [(0, "output")]
    for start in (0, 25, 50, 75):
        expected += [(start + 10, "step"), (start + 20, "step"), (start + 25, "output")]
    assert both.calls == expected


def test_a_stop_calls_the_handlers_due_at_a_stop(tmp_path):
    """SIGTERM at step 30: a handler due at a stop is called once then, after the step; the
    run's record is ``interrupted`` when it finishes."""
    at_stop = Recorder(Cadence(stop=True))

    def on_step(sim: Decay) -> None:
        if sim.steps == 30:
            os.kill(os.getpid(), signal.SIGTERM)

    with pytest.raises(RunInterrupted):
        start_run(Decay(on_step=on_step), problem(), tmp_path / "a", [*handlers(), at_stop], quiet=True)
    assert at_stop.calls == [(30, "stop")]
    assert at_stop.finished == ("interrupted", "interrupted")
