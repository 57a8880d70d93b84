"""Bad arguments on the command line: one line on stderr naming the argument, exit 2, nothing written.

An ``--out`` that cannot be made (a file among its parents, a place where nothing can be made),
a ``--wrt`` parameter the model lacks (with a suggestion), the parser's own errors (one line,
naming the subcommand), and a fixed ``time.dt`` above the stability bound of the first step.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.cli import S1, refused

from meanfield.cli import main

COMMANDS = {
    "run": [],
    "particles": ["--n", "10"],
    "validate": ["--n", "10"],
    "sweep": ["--grid", "model.beta=1,2"],
    "response": ["--observable", "x", "--at", "0.1"],
    "convergence": ["--levels", "4:5", "--reference", "finest"],
    "longtime": [],
}


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("target", ["afile/sub", "/proc/x"], ids=["file-parent", "proc"])
def test_an_out_that_cannot_be_made_is_refused(tmp_path, capsys, monkeypatch, command, target):
    """``--out afile/sub`` (a file as parent; was exit 1, NotADirectoryError) and ``--out /proc/x``
    (was a bare errno message): one line naming ``--out`` and why, exit 2, nothing written."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "case.toml").write_text(S1)
    (tmp_path / "afile").write_text("mine")
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main([command, "case.toml", "--out", target, "--quiet", *COMMANDS[command]]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: --out {target}: "), captured.err
    why = "afile is a file, not a directory" if target == "afile/sub" else "nothing can be made in /proc"
    assert why in lines[0] and captured.out == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == before and (tmp_path / "afile").read_text() == "mine"
    assert not Path("/proc/x").exists()


@pytest.mark.slow
def test_a_table_that_cannot_be_made_is_refused(tmp_path, capsys):
    """``collect -o /proc/t.csv``: one line naming ``-o`` (was a bare errno message)."""
    assert main(["run", _case(tmp_path), "--out", str(tmp_path / "r"), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["collect", str(tmp_path / "r"), "-o", "/proc/t.csv", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: -o /proc/t.csv: nothing can be made in /proc"), err


def _case(folder: Path) -> str:
    (folder / "case.toml").write_text(S1)
    return str(folder / "case.toml")


@pytest.mark.parametrize("parameter, said", [
    ("model.gamma", "model has no parameter 'gamma'; its parameters are model.beta, model.Q[i][j]"),
    ("model.bta", "model has no parameter 'bta' (did you mean 'beta'?)"),
], ids=["unknown", "typo"])
def test_wrt_a_parameter_the_model_lacks(tmp_path, capsys, parameter, said):
    """``--wrt model.gamma`` said "not a number in the config (got None)"; now it names the
    model's parameters, as a misspelt one gets the closest."""
    refused(tmp_path, capsys, S1, f"--wrt {parameter}: {said}", "--observable", "x", "--at", "0.1", "--wrt",
            parameter, command="response")


@pytest.mark.parametrize("argv, said", [
    (["run", "--bogus"], "error: meanfield run: unrecognized arguments: --bogus (`meanfield run --help` lists"),
    (["validate", "case.toml"], "error: meanfield validate: the following arguments are required: --n"),
    (["validate", "case.toml", "--n", "x"], "error: meanfield validate: argument --n: expected comma-separated"),
    (["frobnicate"], "error: meanfield: argument COMMAND: invalid choice: 'frobnicate'"),
], ids=["unknown-option", "missing", "bad-value", "unknown-command"])
def test_parser_errors_are_one_line_naming_the_command(capsys, argv, said):
    """The parser's errors follow the rule of every bad input: one line on stderr (no usage block),
    naming the subcommand whose argument is wrong (``run --bogus`` showed the top-level usage)."""
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(said) and "usage" not in captured.err, captured.err
    assert captured.out == ""


def test_a_fixed_step_above_the_first_steps_bound_is_refused(tmp_path, capsys):
    """``time.dt = 2`` on the default S^1 model (its bound on the initial density is 1.21) failed at
    t = 0 with exit 1 and left a run directory; the bound is known before the first step."""
    text = S1.replace("t_final = 0.2", "t_final = 3.0\ndt = 2.0")
    refused(tmp_path, capsys, text, "time.dt: 2 is above the stability bound of the first step, dt <= ")
