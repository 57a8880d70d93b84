"""Callbacks of the Python API: called at every output with the state; False or StopRun ends
the run early as completed, any other error fails it."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers.toy import Decay, handlers, problem
from mpi4py import MPI

import meanfield
from meanfield.drivers.launch import start_run
from meanfield.engine.callbacks import OutputState, StopRun
from meanfield.rundir import layout
from meanfield.rundir.files import read_csv_columns


def _metadata(path) -> dict:
    return json.loads((path / layout.METADATA).read_text())


def test_callback_sees_every_output(tmp_path):
    seen: list[OutputState] = []
    start_run(Decay(), problem(), tmp_path / "a", handlers(), quiet=True, callbacks=[seen.append])
    assert [s.index for s in seen] == [0, 1, 2, 3, 4]
    np.testing.assert_allclose([s.t for s in seen], [0, 0.25, 0.5, 0.75, 1.0])
    assert seen[2].observables["t"] == 0.5 and seen[2].arrays["points"].shape == (1, 2)
    assert seen[2].density is None and seen[2].path == tmp_path / "a"
    meta = _metadata(tmp_path / "a")
    assert meta["status"] == "completed" and "stopped_early" not in meta


@pytest.mark.parametrize("stop", ["false", "raise"])
def test_callback_stops_the_run_early_as_completed(tmp_path, stop):
    def until_half(state: OutputState) -> bool:
        if state.t >= 0.5 and stop == "raise":
            raise StopRun("x0 small enough")
        return state.t < 0.5

    other: list[float] = []
    start_run(Decay(), problem(), tmp_path / "a", handlers(), quiet=True,
              callbacks=[until_half, lambda s: other.append(s.t)])
    assert other == [0.0, 0.25, 0.5]  # every callback is called at the last output
    meta = _metadata(tmp_path / "a")
    assert meta["status"] == "completed" and meta["outputs_written"] == 3 and meta["t_reached"] == 0.5
    reason = "x0 small enough" if stop == "raise" else "until_half returned False"
    assert meta["stopped_early"] == {"t": 0.5, "reason": reason}
    cols, _ = read_csv_columns(tmp_path / "a" / layout.OBSERVABLES)
    np.testing.assert_allclose(cols["t"], [0, 0.25, 0.5])


def test_callback_error_fails_the_run(tmp_path):
    def broken(state: OutputState) -> None:
        if state.index == 1:
            raise ZeroDivisionError("in the callback")

    with pytest.raises(ZeroDivisionError):
        start_run(Decay(), problem(), tmp_path / "a", handlers(), quiet=True, callbacks=[broken])
    meta = _metadata(tmp_path / "a")
    assert meta["status"] == "failed" and "in the callback" in meta["error"]


def test_pde_run_with_callbacks(tmp_path):
    masses: list[float] = []

    def watch(state: meanfield.OutputState) -> bool:
        assert state.density is not None
        masses.append(float(state.observables["mass"]))
        return state.index < 1

    case = {"name": "cb", "mesh": {"sphere": "S1", "resolution": 64}, "time": {"t_final": 1.0, "outputs": 4}}
    result = meanfield.run(case, out=tmp_path / "run", comm=MPI.COMM_SELF, quiet=True, callbacks=[watch])
    np.testing.assert_allclose(result.times, [0.0, 0.25])
    np.testing.assert_allclose(masses, 1.0, atol=1e-12)
    assert result.metadata["stopped_early"]["t"] == 0.25 and result.metadata["status"] == "completed"


@pytest.mark.mpi
def test_callback_stops_every_rank(comm, tmp_path):
    """The callback runs on rank 0; its answer ends the run on every rank at the same output."""
    calls: list[float] = []

    def first_two(state: OutputState) -> bool:
        calls.append(state.t)
        return state.index < 1

    case = {"name": "cbm", "mesh": {"sphere": "S2", "resolution": 2}, "time": {"t_final": 1.0, "outputs": 4}}
    result = meanfield.run(case, out=tmp_path / "run", comm=comm, quiet=True, callbacks=[first_two])
    assert calls == ([0.0, 0.25] if comm.rank == 0 else [])
    np.testing.assert_allclose(result.times, [0.0, 0.25])
    assert result.metadata["stopped_early"] == {"t": 0.25, "reason": "first_two returned False"}


def test_a_run_stopped_early_resumes_to_its_end(tmp_path):
    from meanfield.drivers.launch import continue_run
    from meanfield.rundir.checkpoint import Checkpoint

    start_run(Decay(), problem(), tmp_path / "a", handlers(), quiet=True, callbacks=[lambda s: s.t < 0.5])
    ckpt = Checkpoint.load(tmp_path / "a")
    continue_run(Decay(), problem(), tmp_path / "a", {"t": ckpt.t, "next_output": ckpt.next_output}, handlers(),
                 quiet=True)
    meta = _metadata(tmp_path / "a")
    assert meta["status"] == "completed" and meta["stopped_early"] is None and meta["outputs_written"] == 5
