"""Every subcommand as users run it: ``mpirun -n 2 meanfield ...`` in a fresh process with a
timeout, with faults injected (a rank raising, a write failing, a signal, kill -9).

A fault is injected by running the CLI through ``python -c`` with a small patch applied on one
rank first; nothing in the package knows about it.  These tests start their own MPI jobs, so
they run in the serial suite only.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from helpers.mpi import TIMEOUT, job_command, meanfield_job
from helpers.s1_cases import CAPTURE, COLLAPSING, two_bumps
from mpi4py import MPI

import meanfield
from meanfield.config import load_config
from meanfield.rundir import layout
from meanfield.rundir.checkpoint import Checkpoint

S1_CASE = two_bumps(4.0, 3.0) + """[time]
t_final = 0.4
outputs = 4
[particles]
dt = 0.05
[output]
xdmf = true
"""


def _case(tmp_path: Path, text: str = S1_CASE, name: str = "case.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _status(run: Path) -> dict:
    return json.loads((run / layout.METADATA).read_text())


# -- every subcommand finishes --------------------------------------------------------------
@pytest.mark.slow
def test_every_subcommand_finishes_under_mpirun(tmp_path):
    cfg = _case(tmp_path)
    jobs = {
        "run": ["run", str(cfg), "--out", str(tmp_path / "pde"), "--quiet"],
        "particles": ["particles", str(cfg), "--n", "100", "--out", str(tmp_path / "tokens"), "--quiet"],
        "validate": ["validate", str(cfg), "--n", "50,100", "--seeds", "1", "--out", str(tmp_path / "val"), "--quiet"],
        "validate --pde": ["validate", str(cfg), "--n", "50,100", "--seeds", "1", "--pde", str(tmp_path / "pde"),
                           "--out", str(tmp_path / "val2"), "--quiet"],
        "convergence": ["convergence", str(cfg), "--levels", "5:6", "--reference", "finest",
                        "--out", str(tmp_path / "conv"), "--quiet"],
        "clusters": ["clusters", str(tmp_path / "pde"), "--quiet"],
        "plot": ["plot", str(tmp_path / "tokens"), "--no-movie"],
        "mesh": ["mesh", "S2", "--level", "1", "-o", str(tmp_path / "s.msh")],
        "info": ["info"],
        "info RUN": ["info", str(tmp_path / "pde")],
        "sweep": ["sweep", str(cfg), "--grid", "model.beta=1,4", "--grid", "mesh.resolution=32,64",
                  "--out", str(tmp_path / "sweep"), "--quiet"],
        "sweep --array-index": ["sweep", str(cfg), "--grid", "model.beta=1,4", "--array-index", "1",
                                "--out", str(tmp_path / "task"), "--quiet"],
        "sweep --particles": ["sweep", str(cfg), "--particles", "--n", "50", "--seeds", "2", "--grid",
                              "model.beta=1,4", "--out", str(tmp_path / "psweep"), "--quiet"],
        "collect": ["collect", str(tmp_path / "sweep"), str(tmp_path / "pde"), "-o", str(tmp_path / "t.csv")],
        "collect .nc": ["collect", str(tmp_path / "psweep"), "-o", str(tmp_path / "t.nc"), "--final"],
        "check": ["check", str(cfg), "--out", str(tmp_path / "pde")],
        "response": ["response", str(cfg), "--observable", "x", "--at", "0.2", "--out", str(tmp_path / "resp"),
                     "--quiet"],
        "phase": ["phase", str(cfg), "--betas", "1,4", "--at", "0,1", "--n", "8", "--prompts", "2",
                  "--out", str(tmp_path / "phase"), "--quiet"],
        "fit": ["fit", str(cfg), "--param", "model.beta", "--target", "1 + 0.2*x", "--max-iter", "1",
                "--out", str(tmp_path / "fit"), "--quiet"],
    }
    # rank 0 reads and checks the config and broadcasts it: a run whose config rank 1 cannot read runs
    cfg_unreadable_on_rank_1 = ("from mpi4py import MPI\nimport pathlib\n"
                                "if MPI.COMM_WORLD.rank == 1:\n"
                                "    real = pathlib.Path.read_text\n"
                                "    def read_text(self, *a, **k):\n"
                                f"        if self.name == {cfg.name!r}: raise PermissionError(13, 'denied')\n"
                                "        return real(self, *a, **k)\n"
                                "    pathlib.Path.read_text = read_text\n")
    for name, args in jobs.items():
        proc = meanfield_job(*args, patch=cfg_unreadable_on_rank_1 if name == "run" else "")
        assert proc.returncode == 0, (name, proc.stdout, proc.stderr)
        assert proc.stderr.count("error") == 0, (name, proc.stderr)
    assert _status(tmp_path / "pde")["ranks"] == 2 and _status(tmp_path / "tokens")["status"] == "completed"
    assert (tmp_path / "val2" / "summary.csv").is_file() and (tmp_path / "conv" / "convergence.csv").is_file()
    assert (tmp_path / "pde" / "clusters" / "clusters.csv").is_file()
    assert (tmp_path / "tokens" / "plots" / "observables.png").is_file()
    assert (tmp_path / "resp" / "response.csv").is_file()
    assert len((tmp_path / "phase" / "phase.csv").read_text().splitlines()) == 1 + 2 * 2  # 2 betas, 2 times
    assert (tmp_path / "fit" / "fit.csv").is_file() and (tmp_path / "fit" / "fitted.toml").is_file()
    sweep = (tmp_path / "sweep" / "sweep.csv").read_text().splitlines()
    assert len(sweep) == 5 and all(line.endswith(",completed") for line in sweep[1:])
    assert _status(tmp_path / "sweep" / "3-beta=4,resolution=64")["ranks"] == 2
    assert [line.rsplit(",", 1)[1] for line in (tmp_path / "task" / "sweep.csv").read_text().splitlines()[1:]] == \
        ["pending", "completed"]
    assert len((tmp_path / "t.csv").read_text().splitlines()) == 1 + 5 * 5  # 5 runs, 5 outputs each
    with xr.open_dataset(tmp_path / "t.nc") as table:
        assert table.sizes["run"] == 4 and list(table["particles.seed"].values) == [0, 1, 0, 1]


def test_bad_input_under_mpirun_is_one_line_and_exit_2(tmp_path):
    cfg = _case(tmp_path, S1_CASE.replace("beta = 4.0", "betta = 4.0"))
    proc = meanfield_job("run", str(cfg), "--out", str(tmp_path / "o"), "--quiet")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: model.betta: unknown key (did you mean 'beta'?)"), lines
    assert not (tmp_path / "o").exists()


def test_bad_sweep_input_under_mpirun_is_one_line_and_exit_2(tmp_path):
    cfg = _case(tmp_path)
    proc = meanfield_job("sweep", str(cfg), "--grid", "model.beta=1,-1", "--out", str(tmp_path / "s"), "--quiet")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines == ["error: sweep point 1-beta=-1: model.beta: must be a number > 0, got -1"], lines
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("suffix, content", [(".msh", "this is not a mesh\n"), (".vtu", "junk"),
                                             (".off", "OFF\n1 x\n")])
def test_a_file_that_is_not_a_mesh_under_mpirun(tmp_path, suffix, content):
    mesh = tmp_path / f"bad{suffix}"
    mesh.write_text(content)
    cfg = _case(tmp_path, S1_CASE.replace("resolution = 64", f'file = "{mesh.name}"'))
    proc = meanfield_job("run", str(cfg), "--out", str(tmp_path / "o"), "--quiet")
    assert proc.returncode == 2 and proc.stderr.count("error: mesh.file") == 1, proc.stderr
    assert not (tmp_path / "o").exists()


# -- one rank failing ends every rank ---------------------------------------------------------
@pytest.mark.parametrize("error", ["RuntimeError", "ValueError"])
def test_one_rank_raising_mid_run_ends_the_job(tmp_path, error):
    """A bug on one rank inside a step ends the job: a ValueError there is not bad input that
    every rank shares (it once left the other rank stepping alone: a hang)."""
    cfg = _case(tmp_path, S1_CASE.replace("t_final = 0.4", "t_final = 50.0"))
    patch = ("from mpi4py import MPI\nfrom meanfield.drivers.pde import PDESimulation\n"
             "if MPI.COMM_WORLD.rank == 1:\n"
             "    real = PDESimulation.step\n"
             "    def step(self, t_end):\n"
             f"        if self.stepper.stats.steps == 5: raise {error}('injected failure')\n"
             "        return real(self, t_end)\n"
             "    PDESimulation.step = step\n")
    proc = meanfield_job("run", str(cfg), "--out", str(tmp_path / "o"), "--quiet", patch=patch)  # ends, or fails
    assert proc.returncode != 0 and proc.stderr.count("injected failure") == 1, proc.stderr
    meta = _status(tmp_path / "o")
    assert meta["status"] == "failed" and "rank 1" in meta["error"] and "injected failure" in meta["error"]
    assert len(meanfield.load_run(tmp_path / "o").times) >= 1


@pytest.mark.slow
def test_a_write_error_on_rank_0_fails_the_run_cleanly(tmp_path):
    """ENOSPC while rank 0 writes output 2 (ParaView files on): every rank stops, exit 1, one
    message, status failed with the error, earlier outputs readable."""
    cfg = _case(tmp_path)
    patch = ("from mpi4py import MPI\nimport meanfield.rundir.writers as w\n"
             "if MPI.COMM_WORLD.rank == 0:\n"
             "    real, calls = w.save_npz, [0]\n"
             "    def save_npz(path, **arrays):\n"
             "        calls[0] += 1\n"
             "        if calls[0] == 3: raise OSError(28, 'No space left on device')\n"
             "        return real(path, **arrays)\n"
             "    w.save_npz = save_npz\n")
    proc = meanfield_job("run", str(cfg), "--out", str(tmp_path / "o"), "--quiet", patch=patch)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.count("No space left on device") == 1, proc.stderr
    meta = _status(tmp_path / "o")
    assert meta["status"] == "failed" and "No space left" in meta["error"]
    partial = meanfield.load_run(tmp_path / "o")
    assert len(partial.times) == 2 and np.allclose(partial.times, [0.0, 0.1])


#: A hybrid S^1 run with the fast field: two atoms captured at the first steps, so that rank 0
#: holds atoms as targets and rank 1 an empty target group for most of the run.
HYBRID_FAST_CASE = (COLLAPSING + '[scheme]\nkind = "dg1"\n[nonlocal]\nmethod = "fast"\n[time]\nt_final = 0.75\n'
                    'outputs = 3\n' + CAPTURE)


def test_hybrid_fast_run_on_two_ranks_matches_one(tmp_path):
    """``mpirun -n 2 meanfield run`` of a hybrid run with the fast field completes (an error on
    the rank without atoms once left rank 0 stepping alone: a hang) and agrees with one rank."""
    cfg = _case(tmp_path, HYBRID_FAST_CASE)
    proc = meanfield_job("run", str(cfg), "--out", str(tmp_path / "two"), "--quiet")
    assert proc.returncode == 0, proc.stderr
    two, one = meanfield.load_run(tmp_path / "two"), meanfield.run(cfg, out=tmp_path / "one", comm=MPI.COMM_SELF,
                                                                  quiet=True)
    assert two.status == one.status == "completed" and np.array_equal(two.times, one.times)
    assert np.abs(two.densities - one.densities).max() <= 1e-12
    assert np.abs(two.vertex_densities - one.vertex_densities).max() <= 1e-12
    pairs = list(zip(layout.snapshot_files(tmp_path / "two"), layout.snapshot_files(tmp_path / "one"), strict=True))
    assert len(np.load(pairs[-1][1][1])["atom_ids"]) == 2  # the atoms were captured
    for (_, path), (_, ref) in pairs:
        a, b = np.load(path), np.load(ref)
        assert np.array_equal(a["atom_ids"], b["atom_ids"])
        for key in ("atom_positions", "atom_masses"):
            assert np.abs(a[key] - b[key]).max(initial=0.0) <= 1e-12, key


FAST_S2 = ('name = "fast-s2"\n[mesh]\nsphere = "S2"\nresolution = 4\n[nonlocal]\nmethod = "fast"\n'
           '[time]\nt_final = 0.2\noutputs = 1\n')


@pytest.mark.slow
@pytest.mark.parametrize("direct_sums", [False, True])
def test_fast_field_on_four_ranks(tmp_path, direct_sums):
    """``mpirun -n 4`` (oversubscribed here) against one rank, the fast field on S^2: identical
    to round-off by default (every rank count takes the same kind of transform); with
    ``nonlocal.direct_sums`` a rank's few points are summed exactly where one rank takes a
    NUFFT, and the two agree to the NUFFT's accuracy (below ``nonlocal.tol / 10``: 4e-8 here) instead."""
    cfg = _case(tmp_path, FAST_S2.replace("[time]", f"direct_sums = {str(direct_sums).lower()}\n[time]"))
    proc = meanfield_job("run", str(cfg), "--out", str(tmp_path / "four"), "--quiet", ranks=4)
    assert proc.returncode == 0, proc.stderr
    four = meanfield.load_run(tmp_path / "four")
    one = meanfield.run(cfg, out=tmp_path / "one", comm=MPI.COMM_SELF, quiet=True)
    difference = np.abs(four.densities - one.densities).max() / np.abs(one.densities).max()
    assert difference <= (0.1 * 1e-6 if direct_sums else 1e-12), difference
    assert not direct_sums or difference > 1e-12  # the key took effect: 1280 cells a rank summed, one rank a NUFFT


# -- signals, kill -9 and resume ----------------------------------------------------------------
def _checkpoint_t(run: Path) -> str:
    """The time of the run's checkpoint (read before the resume overwrites it), for messages."""
    try:
        return f"{Checkpoint.load(run).t:.6g}"
    except Exception as exc:  # noqa: BLE001 - only a message
        return f"unreadable ({type(exc).__name__})"


def _uninterrupted(cfg: Path, out: Path, particles: bool):
    if particles:
        return meanfield.run_particles(cfg, n=200, out=out, comm=MPI.COMM_SELF, quiet=True)
    return meanfield.run(cfg, out=out, comm=MPI.COMM_SELF, quiet=True)


def _live_processes_of(marker: str) -> list[int]:
    """Processes (not zombies) whose command line contains ``marker``."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and marker.encode() in (proc / "cmdline").read_bytes() \
                    and "\nState:\tZ" not in (proc / "status").read_text():
                found.append(int(proc.name))
        except OSError:
            pass
    return found


def _gone(pid: int) -> bool:
    """The process has exited: reaped, or a zombie whose every thread has exited.  Only then are
    its files, and so its locks, released (a killed multi-threaded process shows its main thread
    as a zombie while its other threads, sharing the file table, are still exiting)."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return True
    for task in tasks:
        try:
            if "\nState:\tZ" not in (task / "status").read_text():
                return False
        except OSError:
            pass  # this thread is gone
    return True


def _kill_everything_of(marker: str) -> None:
    """SIGKILL every process whose command line contains ``marker`` (mpirun, its proxy, the ranks:
    hydra starts each rank in its own session, so a process group does not reach them), and
    wait until they are gone.  A dying process loses its command line (its memory) before it
    closes its files, so the pids are followed until they are zombies or reaped: only then are
    their run-directory locks free."""
    killed: set[int] = set()
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        alive = _live_processes_of(marker)
        killed.update(alive)
        if not alive and all(_gone(pid) for pid in killed):
            return
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)
    raise AssertionError(f"processes of {marker} survive SIGKILL for {TIMEOUT} s")


def _ended(proc: subprocess.Popen) -> tuple[str, str]:
    """The output of a job told to stop; one still running after TIMEOUT seconds is killed and
    fails the test with its output."""
    try:
        return proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"the job did not stop within {TIMEOUT} s\nstdout:\n{out}\nstderr:\n{err}", pytrace=False)


def _wait_for_snapshots(run: Path, count: int, proc: subprocess.Popen, limit: float = TIMEOUT) -> None:
    """Wait until ``run`` has ``count`` snapshots; fail with the job's output if it ends first or
    is still short of them after ``limit`` seconds (a generous bound: a few seconds here)."""
    tic = time.monotonic()
    while len(layout.snapshot_files(run)) < count:
        if proc.poll() is not None or time.monotonic() - tic > limit:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            pytest.fail(f"the job wrote {len(layout.snapshot_files(run))} of {count} snapshots (exit code "
                        f"{proc.returncode})\nstdout:\n{out}\nstderr:\n{err}", pytrace=False)
        time.sleep(0.05)


#: S1_CASE to t = 1.5 with 15 outputs: the interrupted jobs' run (checkpoints every 0.05 s added).
LONGER = S1_CASE.replace("t_final = 0.4", "t_final = 1.5").replace("outputs = 4", "outputs = 15")

CASES = {
    "fv": (LONGER, False),
    "dg1": (LONGER + '[scheme]\nkind = "dg1"\n', False),
    "atoms": (LONGER + "[atoms]\ncapture = true\ninitial = [[0.2, 0.0, 1.0], [0.1, 0.6, -0.8]]\n", False),
    "particles": (LONGER.replace("dt = 0.05", "dt = 0.005"), True),
}


#: (case, how, snapshots written before the interrupt): each case interrupted both ways, at
#: moments spread over the first half of the run (15 outputs; a checkpoint every output and every 0.05 s).
INTERRUPTS = [("atoms", "SIGTERM", 3), ("atoms", "kill-9", 6), ("dg1", "SIGTERM", 5), ("dg1", "kill-9", 4),
              ("fv", "SIGTERM", 7), ("fv", "kill-9", 3), ("particles", "SIGTERM", 4), ("particles", "kill-9", 7)]


#: SIGTERM to mpirun is forwarded the same way whatever the run: ``make test`` interrupts the FV
#: job so (and every kind of run by kill -9); the other kinds' SIGTERM cases are exhaustive.
INTERRUPT_CASES = [pytest.param(*case, marks=pytest.mark.exhaustive if case[1] == "SIGTERM" and case[0] != "fv"
                                else ()) for case in INTERRUPTS]


@pytest.mark.slow
@pytest.mark.parametrize("case, how, moment", INTERRUPT_CASES)
def test_interrupted_job_resumes_to_the_uninterrupted_result(tmp_path, case, how, moment):
    """Interrupt a 2-rank job (SIGTERM to mpirun, or kill -9 of every process of the job) once it
    has written ``moment`` snapshots, resume it on 2 ranks, and compare with an uninterrupted
    1-rank run.  Where exactly the job is when the signal lands is up to the machine; the
    assertion messages say which moment and where the interrupted run stood."""
    text, particles = CASES[case]
    cfg = _case(tmp_path, text.replace("[output]", "[output]\ncheckpoint_every = 0.05"))
    out = tmp_path / "job"
    command = ["particles", str(cfg), "--n", "200"] if particles else ["run", str(cfg)]
    proc = subprocess.Popen(job_command(*command, "--out", str(out), "--quiet"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _wait_for_snapshots(out, moment, proc)
        if how == "kill-9":
            _kill_everything_of(str(out))
        else:
            os.killpg(proc.pid, signal.SIGTERM)
        _, err = _ended(proc)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    where = f"{how} after {moment} snapshots, checkpoint at t = {_checkpoint_t(out)}"
    if how == "SIGTERM":
        assert proc.returncode == 128 + signal.SIGTERM, (where, err)
        assert _status(out)["status"] == "interrupted" and _status(out)["interrupted_by"] == "SIGTERM", where
    else:
        assert meanfield.load_run(out).status == "killed", where
    resumed = meanfield_job("resume", str(out), "--quiet")
    assert resumed.returncode == 0, (where, resumed.stderr)
    run, reference = meanfield.load_run(out), _uninterrupted(cfg, tmp_path / "ref", particles)
    assert run.status == "completed" and np.array_equal(run.times, reference.times), where
    assert [s["command"] for s in run.metadata["segments"]] == ["run", "resume"], where
    if particles:
        assert np.abs(run.points - reference.points).max() <= 1e-12, where
    else:
        assert np.abs(run.densities - reference.densities).max() <= 1e-12, where
        if case == "dg1":
            assert np.abs(run.vertex_densities - reference.vertex_densities).max() <= 1e-12, where
    for key in ("mass", "energy", "order"):
        assert np.abs(run.observables[key] - reference.observables[key]).max() <= 1e-12, (where, key)
    if case == "atoms":  # the atoms come back from the checkpoint too
        pairs = zip(layout.snapshot_files(out), layout.snapshot_files(tmp_path / "ref"), strict=True)
        for (_, path), (_, ref) in pairs:
            a, b = np.load(path), np.load(ref)
            assert np.array_equal(a["atom_ids"], b["atom_ids"]), where
            assert np.abs(a["atom_positions"] - b["atom_positions"]).max() <= 1e-12, where
    assert not layout.temporary_files(out)
    with xr.open_dataset(out / layout.RUN_FILE) as ds:  # run.nc cut back or rebuilt: the snapshots again
        xr.testing.assert_identical(ds, run.to_xarray())


@pytest.mark.slow
def test_killed_sweep_point_is_resumed_by_the_rerun(tmp_path):
    """kill -9 a 2-rank sweep in the middle of its second point; the same command then skips the
    first, resumes the second from its checkpoint and runs the third."""
    cfg = _case(tmp_path, LONGER.replace("[output]", "[output]\ncheckpoint_every = 0.05"))
    out = tmp_path / "sweep"
    command = ["sweep", str(cfg), "--grid", "model.beta=1,4,9", "--out", str(out), "--quiet"]
    proc = subprocess.Popen(job_command(*command), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _wait_for_snapshots(out / "1-beta=4", 4, proc)
        _kill_everything_of(str(out))
        _ended(proc)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert meanfield.load_run(out / "1-beta=4").status == "killed" and not (out / "2-beta=9").exists()
    rerun = meanfield_job(*command)
    assert rerun.returncode == 0, rerun.stderr
    statuses = [line.rsplit(",", 1)[1] for line in (out / "sweep.csv").read_text().splitlines()[1:]]
    assert statuses == ["completed"] * 3
    assert [s["command"] for s in _status(out / "0-beta=1")["segments"]] == ["run"]
    assert [s["command"] for s in _status(out / "1-beta=4")["segments"]] == ["run", "resume"]
    resumed = meanfield.load_run(out / "1-beta=4")
    reference = meanfield.run(load_config(cfg, ["model.beta=4"]), out=tmp_path / "ref", comm=MPI.COMM_SELF,
                              quiet=True)
    assert np.abs(resumed.densities - reference.densities).max() <= 1e-12
