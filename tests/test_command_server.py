"""The tests' command server (tests/helpers/command_server.py): a forked command is a process of
its own, as the ``meanfield`` script's: exit status, streams, working directory, a timeout."""

from __future__ import annotations

import subprocess

import pytest
from helpers.cli import S1, cli, cli_environment


def test_a_forked_command_has_its_own_status_streams_and_folder(tmp_path):
    (tmp_path / "case.toml").write_text(S1)
    done = cli(["run", "case.toml", "--out", "out", "--quiet"], tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, "results: out\n", "")
    assert (tmp_path / "out" / "run.nc").is_file()
    again = cli(["run", "case.toml", "--out", "out", "--quiet"], tmp_path)  # the same server, a new child
    assert again.returncode == 2 and again.stdout == "" and again.stderr.startswith("error: --out out:")


def test_a_command_past_its_timeout_is_killed_and_the_server_serves_on(tmp_path):
    (tmp_path / "case.toml").write_text(S1.replace("t_final = 0.2", "t_final = 1000.0"))
    with pytest.raises(subprocess.TimeoutExpired):
        cli(["run", "case.toml", "--out", "out", "--quiet"], tmp_path, timeout=0.5)
    assert cli(["--help"], tmp_path).stdout.startswith("usage: meanfield")


def test_a_command_in_a_changed_environment_starts_a_new_interpreter(tmp_path, monkeypatch):
    """A ``sitecustomize`` on a changed ``PYTHONPATH`` runs as the interpreter starts: a forked child
    would not run it, so such a command gets a new interpreter (and the server's children do not)."""
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text("import sys\nprint('hooked', file=sys.stderr)\n")
    monkeypatch.setenv("PYTHONPATH", str(hooks))
    assert cli(["--help"], tmp_path).stderr == "hooked\n"
    monkeypatch.delenv("PYTHONPATH")
    assert cli(["--help"], tmp_path).stderr == ""


def test_variables_read_after_the_fork_keep_a_command_on_the_server(monkeypatch):
    """meanfield's own variables and PETSc's options (set by meanfield itself once it has imported
    dolfinx in the test process) are read by what each command imports after the fork: such a
    command is still forked; a changed PYTHONPATH or thread variable of the libraries is not."""
    from helpers.cli import read_before_the_fork

    before = read_before_the_fork(cli_environment())
    monkeypatch.setenv("MEANFIELD_NUM_THREADS", "2")
    monkeypatch.setenv("PETSC_OPTIONS", "-no_signal_handler")
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "1")  # as JAX sets it when imported in this process
    assert read_before_the_fork(cli_environment()) == before
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "3")
    assert read_before_the_fork(cli_environment()) != before
