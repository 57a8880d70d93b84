"""One convention for every subcommand, through the CLI's ``main`` (in this process where the subject
is what a command prints, writes or refuses; ``python -m meanfield.cli`` in a fresh process for the
run's log and metadata and the top-level help):

* default output folders named after the config (``runs/<name>``, ``runs/<name>-particles-n<n>-s<seed>``,
  ``runs/<name>-<study>`` even when the name ends with the study's word, so that a study never takes
  its config's run folder, ``runs/<name>-convergence`` and ``runs/<name>-longtime``), and the run
  named after its folder in run.log and metadata.json;
* ``--quiet`` and ``--overwrite`` on every subcommand that writes; ``longtime``, ``plot`` and
  ``clusters`` refuse to replace their earlier results without ``--overwrite``;
* the top-level ``--help`` with examples and where the documentation is.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.cli import cli

from meanfield.cli import build_parser

S1 = ('name = "{name}"\n[mesh]\nsphere = "S1"\nresolution = 32\n[time]\nt_final = 0.2\noutputs = 2\n'
      '[output]\nxdmf = false\n')


def _case(folder: Path, name: str) -> str:
    (folder / f"{name}.toml").write_text(S1.format(name=name))
    return f"{name}.toml"


def _files(path: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(path)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(path.rglob("*"))}


@pytest.mark.slow
def test_default_folders_are_named_after_the_config(cli_in_process, tmp_path):
    done = cli_in_process(["particles", _case(tmp_path, "case"), "--n", "20", "--seed", "3", "--quiet"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "results: runs/case-particles-n20-s3"
    done = cli_in_process(["validate", _case(tmp_path, "s1-validation"), "--n", "10,20", "--seeds", "1", "--no-refine",
                "--quiet"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "results: runs/s1-validation-validation"
    done = cli_in_process(["run", "s1-validation.toml", "--quiet"], tmp_path)  # the study left the run's folder free
    assert done.returncode == 0 and done.stdout.strip() == "results: runs/s1-validation", done.stderr
    done = cli_in_process(["response", _case(tmp_path, "p-response"), "--observable", "x", "--at", "0.1", "--quiet"],
                          tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("results: runs/p-response-response/"), done.stderr
    done = cli_in_process(["run", "p-response.toml", "--quiet"], tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == "results: runs/p-response", done.stderr
    for name in ("one", "two"):  # two convergence studies no longer share runs/convergence
        done = cli_in_process(["convergence", _case(tmp_path, name), "--levels", "4:5", "--reference", "finest",
                               "--quiet"], tmp_path)
        assert done.returncode == 0, done.stderr
        assert (tmp_path / "runs" / f"{name}-convergence" / "convergence.csv").is_file()
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == \
        ["case-particles-n20-s3", "one-convergence", "p-response", "p-response-response", "s1-validation",
         "s1-validation-validation", "two-convergence"]


def test_out_names_the_run_in_the_log_and_the_metadata(tmp_path):
    done = cli(["run", _case(tmp_path, "case"), "--out", "studies/beta4", "--quiet"], tmp_path)
    assert done.returncode == 0, done.stderr
    run = tmp_path / "studies" / "beta4"
    assert json.loads((run / "metadata.json").read_text())["name"] == "beta4"
    log = (run / "run.log").read_text().splitlines()
    assert " beta4: " in log[0] and " beta4 completed " in log[-1], log


def test_longtime_has_a_default_folder_and_refuses_to_overwrite(cli_in_process, tmp_path):
    args = ["longtime", _case(tmp_path, "lt"), "--n", "64", "--t-final", "0.5", "--no-plots", "--quiet"]
    done = cli_in_process(args, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "results: runs/lt-longtime"
    before = _files(tmp_path / "runs" / "lt-longtime")
    again = cli_in_process(args, tmp_path)
    assert again.returncode == 2 and again.stdout == ""
    assert again.stderr.strip() == "error: --out runs/lt-longtime: holds long-time study files already; pass " \
                                   "--overwrite to replace them"
    assert _files(tmp_path / "runs" / "lt-longtime") == before
    assert cli_in_process([*args, "--overwrite"], tmp_path).returncode == 0


@pytest.fixture(scope="module")
def a_run(tmp_path_factory) -> Path:
    """A run that the tests of this module read (each writes its own folder elsewhere)."""
    folder = tmp_path_factory.mktemp("conventions")
    done = cli(["run", _case(folder, "case"), "--quiet"], folder)
    assert done.returncode == 0, done.stderr
    return folder / "runs" / "case"


@pytest.mark.parametrize("command", [["plot", "--no-movie"], ["clusters", "--no-plots"]])
def test_plots_and_clusters_are_replaced_only_with_overwrite(cli_in_process, tmp_path, a_run, command):
    args = [command[0], str(a_run), *command[1:], "--out", "derived", "--quiet"]
    assert cli_in_process(args, tmp_path).returncode == 0
    before = _files(tmp_path / "derived")
    again = cli_in_process(args, tmp_path)
    assert again.returncode == 2 and "pass --overwrite to replace them" in again.stderr, again.stderr
    assert _files(tmp_path / "derived") == before
    assert cli_in_process([*args, "--overwrite"], tmp_path).returncode == 0


#: The subcommands that write files (info and check write nothing).
WRITERS = ["run", "resume", "particles", "validate", "convergence", "clusters", "longtime", "sweep", "collect",
           "compare", "plot", "mesh"]


def test_every_writing_subcommand_takes_quiet_and_overwrite():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for name in WRITERS:
        options = {o for action in sub.choices[name]._actions for o in action.option_strings}
        assert "--quiet" in options, name
        assert "--overwrite" in options or name == "resume", name  # resume continues its own run


def test_top_level_help_is_for_users(tmp_path):
    done = cli(["--help"], tmp_path)
    assert done.returncode == 0
    text = done.stdout
    examples = text.split("examples:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert len(examples) == 3 and all("meanfield " in line for line in examples), examples
    assert "docs/" in text and "README.md" in text


def test_a_sweep_is_extended_with_new_grid_values(cli_in_process, tmp_path):
    base = ["sweep", _case(tmp_path, "sw"), "--quiet"]
    assert cli_in_process([*base, "--grid", "model.beta=1,4"], tmp_path).returncode == 0
    sweep = tmp_path / "runs" / "sw-sweep"
    kept = {name: _files(sweep / name) for name in ("0-beta=1", "1-beta=4")}
    listed = cli_in_process([*base, "--grid", "model.beta=1,4,9", "--dry-run"], tmp_path)
    assert listed.returncode == 0, listed.stderr
    rows = [line.split() for line in listed.stdout.splitlines()[1:]]
    assert rows == [["0", "completed", "0-beta=1"], ["1", "completed", "1-beta=4"], ["2", "pending", "2-beta=9"]]
    done = cli_in_process([*base, "--grid", "model.beta=1,4,9"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert {name: _files(sweep / name) for name in kept} == kept  # the completed points were not rerun
    assert (sweep / "sweep.csv").read_text().splitlines()[1:] == \
        ["0,1,0-beta=1,completed", "1,4,1-beta=4,completed", "2,9,2-beta=9,completed"]
    other = cli_in_process([*base, "--grid", "model.beta=1,9"], tmp_path)  # a value dropped: another sweep
    assert other.returncode == 2 and "holds a sweep of another config or grid" in other.stderr, other.stderr
    again = cli_in_process([*base, "--grid", "model.beta=1,4,9", "--array-index", "0", "--overwrite"], tmp_path)
    assert again.returncode == 0, again.stderr
    assert _files(sweep / "0-beta=1") != kept["0-beta=1"] and _files(sweep / "1-beta=4") == kept["1-beta=4"]


def test_extended_points_keep_their_directories():
    from meanfield.studies.sweep import definition_points

    grids = [{"a.x": [1, 2], "b.y": [5]}, {"a.x": [1, 2, 3], "b.y": [5, 6]}]
    points = definition_points({"grid": grids[-1], "grids": grids})
    assert [p.directory for p in points] == ["0-x=1,y=5", "1-x=2,y=5", "2-x=1,y=6", "3-x=2,y=6", "4-x=3,y=5",
                                             "5-x=3,y=6"]
