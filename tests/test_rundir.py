"""Run directories never lose a file the program did not write: targets, locks, overwrites, names."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from mpi4py import MPI

import meanfield
from meanfield.cli import main
from meanfield.config import ConfigError, load_config
from meanfield.problem import Problem
from meanfield.rundir import layout
from meanfield.rundir.directory import (
    RunDirectory,
    RunLockedError,
    check_target,
    classify,
    effective_status,
    read_metadata,
)

TINY = {"name": "tiny", "mesh": {"sphere": "S1", "resolution": 32}, "model": {"beta": 2.0},
        "initial": {"kind": "vmf", "centers": [[1.0, 0.0]], "kappas": [2.0]},
        "time": {"t_final": 0.2, "outputs": 2}, "output": {"xdmf": False}}


def _run(out: Path, **kwargs):
    return meanfield.run(kwargs.pop("config", TINY), out=out, comm=MPI.COMM_SELF, quiet=True, **kwargs)


def _tree(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def test_foreign_directory_is_refused_and_untouched(tmp_path, capsys):
    foreign = tmp_path / "mine"
    (foreign / "snapshots").mkdir(parents=True)
    (foreign / "config.toml").write_text("my own notes\n")
    (foreign / "snapshots" / "0000.npz").write_bytes(b"not ours")
    before = _tree(foreign)
    assert main(["run", "--out", str(foreign), "--quiet"]) == 2
    assert "not empty and is not a meanfield run" in capsys.readouterr().err
    assert main(["run", "--out", str(foreign), "--quiet", "--overwrite"]) == 2
    assert _tree(foreign) == before and sorted(p.name for p in foreign.iterdir()) == ["config.toml", "snapshots"]


@pytest.mark.parametrize("target", ["", "file"])
def test_empty_path_and_file_targets_are_refused(tmp_path, capsys, target):
    if target == "file":
        target = str(tmp_path / "a-file")
        Path(target).write_text("x")
    assert main(["run", "--out", target, "--quiet"]) == 2
    assert capsys.readouterr().err.startswith("error: --out")
    assert target == "" or Path(target).read_text() == "x"


def test_existing_run_needs_overwrite_and_keeps_foreign_files(tmp_path, capsys):
    out = tmp_path / "run"
    first = _run(out)
    assert {p for p in out.rglob("*") if p.is_file()} == set(layout.own_entries(out))  # every file is declared
    (out / "notes.txt").write_text("keep me")
    assert main(["run", "--out", str(out), "--quiet"]) == 2
    assert "holds a meanfield run" in capsys.readouterr().err
    second = _run(out, overwrite=True, config={**TINY, "model": {"beta": 3.0}})
    assert (out / "notes.txt").read_text() == "keep me"
    assert not (out / layout.PREVIOUS).exists() and not (out / layout.LOCK).exists()
    assert second.config["model"]["beta"] == 3.0 and not np.array_equal(first.densities, second.densities)


def test_every_run_file_declares_a_reader_that_exists():
    """The run files' declarations name their readers by import path: each one resolves."""
    import importlib

    for spec in layout.RUN_FILE_SPECS:
        if spec.reader is None:
            continue
        parts = spec.reader.split(".")
        found = None
        for k in range(len(parts) - 1, 0, -1):  # the longest importable prefix, then attributes
            try:
                found = importlib.import_module(".".join(parts[:k]))
            except ImportError:
                continue
            for attribute in parts[k:]:
                found = getattr(found, attribute)
            break
        assert callable(found), spec.reader


def test_failed_overwrite_before_first_checkpoint_restores_the_old_run(tmp_path, monkeypatch):
    out = tmp_path / "run"
    _run(out)
    before = _tree(out)
    from meanfield.engine import handlers

    def broken_checkpoint(self, run, moment):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(handlers.Checkpoints, "handle", broken_checkpoint)
    with pytest.raises(OSError, match="No space left"):
        _run(out, overwrite=True, config={**TINY, "model": {"beta": 3.0}})
    assert _tree(out) == before
    assert classify(out) == "run" and read_metadata(out)["status"] == "completed"


def test_killed_overwrite_is_undone_when_the_directory_is_next_opened(tmp_path):
    """An overwrite killed before its first checkpoint leaves the old run set aside; the next
    open puts it back (and a resume then finds the old run)."""
    out = tmp_path / "run"
    _run(out)
    before = _tree(out)
    overwrite = (  # a process that starts the overwrite and is killed with SIGKILL
        "import json, os, signal; from meanfield.rundir import layout; "
        "from meanfield.rundir.directory import RunDirectory; "
        f"out = RunDirectory.create({str(out)!r}, overwrite=True).path; "  # the old run is set aside
        "(out / layout.METADATA).write_text(json.dumps({'format': layout.FORMAT, 'status': 'running'})); "
        "os.kill(os.getpid(), signal.SIGKILL)")
    killed = subprocess.run([sys.executable, "-c", overwrite], capture_output=True, text=True, timeout=120)
    assert killed.returncode == -9, killed.stderr
    assert (out / layout.PREVIOUS).is_dir()
    RunDirectory.open_existing(out).close()
    assert _tree(out) == before


def test_lock_keeps_a_second_run_out(tmp_path):
    out = tmp_path / "run"
    _run(out)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from meanfield.rundir.directory import RunDirectory; "
         f"r = RunDirectory.open_existing({str(out)!r}); print('locked', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # holds the lock until killed
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(RunLockedError, match="in progress"):
            check_target(out, overwrite=True)
        with pytest.raises(RunLockedError):
            RunDirectory.open_existing(out)
        with pytest.raises(RunLockedError):
            RunDirectory.create(out, overwrite=True)
    finally:
        holder.kill()
        holder.wait()
    with RunDirectory.open_existing(out):  # the dead holder's lock is gone
        with pytest.raises(RunLockedError):
            RunDirectory.open_existing(out)  # and this process's own lock counts too


def test_running_status_without_a_lock_reads_as_killed(tmp_path):
    out = tmp_path / "run"
    _run(out)
    meta = read_metadata(out)
    meta["status"] = "running"
    (out / layout.METADATA).write_text(json.dumps(meta))
    assert effective_status(out, meta) == "killed" and meanfield.load_run(out).status == "killed"


@pytest.mark.parametrize("name", ["../x", "/abs", "a/b", "..", ".hidden", "", "a b"])
def test_run_names_are_plain(name):
    with pytest.raises(ConfigError, match="name: must be a plain name"):
        load_config({**TINY, "name": name})


def test_default_directory_follows_the_config_file_name(tmp_path):
    cfg = tmp_path / "my-case.toml"
    cfg.write_text('[mesh]\nsphere = "S1"\n')
    config = load_config(cfg)
    problem = Problem(config)
    assert problem.name == "my-case" and problem.output.directory == Path("runs") / "my-case"
    assert config.data["initial"]["centers"][0] == [1.0, 0.0]  # a default that fits S^1
    assert Problem(load_config(TINY | {"name": None})).name == "run"


@pytest.mark.parametrize("command", [
    ["validate", "{cfg}", "--n", "10,20", "--seeds", "1", "--no-refine"],
    ["convergence", "{cfg}", "--levels", "4:5", "--reference", "finest"],
    ["particles", "{cfg}", "--n", "10"],
])
def test_studies_and_particle_runs_never_touch_a_foreign_folder(tmp_path, capsys, command):
    cfg = tmp_path / "case.toml"
    cfg.write_text('[mesh]\nsphere = "S1"\nresolution = 16\n[time]\nt_final = 0.1\noutputs = 1\n')
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "validation.csv").write_text("my data\n")
    (foreign / "level4").mkdir()
    before = _tree(foreign)
    args = [a.format(cfg=cfg) for a in command] + ["--out", str(foreign), "--quiet"]
    assert main(args) == 2 and main(args + ["--overwrite"]) == 2
    assert "is not empty and is not a meanfield" in capsys.readouterr().err
    assert _tree(foreign) == before


def test_a_study_rerun_needs_overwrite_and_redoes_its_runs(tmp_path, capsys):
    cfg = tmp_path / "case.toml"
    cfg.write_text('[mesh]\nsphere = "S1"\n[model]\nvelocity = "rotation"\n[time]\nt_final = 0.1\noutputs = 1\n'
                   '[output]\nxdmf = false\n')
    args = ["convergence", str(cfg), "--levels", "4:5", "--reference", "finest", "--out", str(tmp_path / "c"),
            "--quiet"]
    assert main(args) == 0
    assert main(args) == 2 and "holds a convergence study already" in capsys.readouterr().err
    assert main(args + ["--overwrite"]) == 0
